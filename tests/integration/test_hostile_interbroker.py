"""Inter-broker APIs sent by a plain client (issue 8, section 3): forged UpdateMetadata, LeaderAndIsr,
StopReplica (delete) and ControlledShutdown against real brokers, embedded mode and cluster mode.

Before the fix a client's UpdateMetadata listed the broker as 6.6.6.6:6666 and, by raising the broker's highest
controller epoch, locked the real controller out (STALE_CONTROLLER_EPOCH to all its later requests); a client's
StopReplica(delete) removed a partition's log. Now each forgery is refused with the code Kafka would give and
changes nothing (kbroker/handlers/cluster.py):

* a broker epoch that is not the target's current one (KIP-380: the czxid of ``/brokers/ids/<id>``), or a request
  version that carries none -> STALE_BROKER_EPOCH (77);
* a controller id / epoch that is not what ``/controller`` / ``/controller_epoch`` say -> STALE_CONTROLLER_EPOCH (11);
* with ``control.plane.listener.name`` set, any controller request (even one with every epoch right, as a party
  with ZooKeeper read access could forge) on another listener -> CLUSTER_AUTHORIZATION_FAILED (31);
* ControlledShutdown naming a broker without its epoch -> STALE_BROKER_EPOCH (77), leadership unmoved;
* Produce to an internal topic, whatever the client_id ("__admin_client" included) -> INVALID_TOPIC_EXCEPTION (17).

Afterwards: Metadata still lists the real addresses and leaders, the partition directories are there and their
records readable, and the real controller still works (a topic created after the forgeries gets a leader and takes
records). Every case runs under ``hostile.StallWatch`` and ends with ``hostile.assert_healthy``.
"""
from __future__ import annotations

import time

import pytest

from kbroker.client.connection import BrokerConnection
from tests.integration.harness import free_ports, wait_until
from tests.integration.hostile import StallWatch, assert_healthy
from tests.integration.test_cluster_common import Cluster, consume, create_topics, leaders, metadata, produce

UNKNOWN = 1 << 40          # a broker epoch no registration has
EVIL_HOST, EVIL_PORT = "6.6.6.6", 6666


def send(host, port, api_key, version, body, client_id="evil-client"):
    conn = BrokerConnection(host, port, client_id=client_id, timeout=20)
    try:
        return conn.request(api_key, body, version=version)
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------ forged bodies

def update_metadata(version, cid, epoch, broker_epoch, broker_id, topic, partition):
    """Lists ``broker_id`` at 6.6.6.6:6666 and marks ``topic``-``partition`` deleted (leader -2)."""
    state = {"partition_index": partition, "controller_epoch": epoch, "leader": -2, "leader_epoch": 99, "isr": [],
             "zk_version": 99, "replicas": [], "offline_replicas": []}
    if version == 0:
        return {"controller_id": cid, "controller_epoch": epoch, "live_brokers": [
            {"id": broker_id, "v0_host": EVIL_HOST, "v0_port": EVIL_PORT}],
            "ungrouped_partition_states": [dict(state, topic_name=topic)]}
    return {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": broker_epoch, "live_brokers": [
        {"id": broker_id, "endpoints": [{"port": EVIL_PORT, "host": EVIL_HOST, "listener": "PLAINTEXT",
                                         "security_protocol": 0}], "rack": None}],
        "topic_states": [{"topic_name": topic, "partition_states": [state]}]}


def leader_and_isr(version, cid, epoch, broker_epoch, topic, partition, leader, replicas):
    """Makes ``leader`` (with a leader epoch far ahead) the only ISR member of the partition."""
    state = {"partition_index": partition, "controller_epoch": epoch, "leader": leader, "leader_epoch": 1000,
             "isr": [leader], "partition_epoch": 1000, "replicas": replicas, "is_new": False}
    if version <= 1:
        return {"controller_id": cid, "controller_epoch": epoch, "live_leaders": [],
                "ungrouped_partition_states": [dict(state, topic_name=topic)]}
    return {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": broker_epoch, "live_leaders": [],
            "topic_states": [{"topic_name": topic, "partition_states": [state]}]}


def stop_replica(version, cid, epoch, broker_epoch, topic, partition):
    if version == 0:
        return {"controller_id": cid, "controller_epoch": epoch, "delete_partitions": True,
                "ungrouped_partitions": [{"topic_name": topic, "partition_index": partition}]}
    return {"controller_id": cid, "controller_epoch": epoch, "broker_epoch": broker_epoch, "topic_states": [
        {"topic_name": topic, "partition_states": [{"partition_index": partition, "delete_partition": True}]}]}


def assert_refused(resp, code, what):
    assert resp["error_code"] == code, f"{what}: answered {resp}"
    for e in resp.get("partition_errors") or ():
        assert e["error_code"] == code, f"{what}: partition answer {e}"


def produce_internal(host, port, client_id):
    """Produce v7 (acks=-1) of one record to __consumer_offsets-0 -> that partition's error code."""
    from kbroker.record.batch import build_batch
    batch = build_batch([(0, int(time.time() * 1000), b"k", b"forged")])
    resp = send(host, port, 0, 7, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": batch}]}]}, client_id=client_id)
    return resp["responses"][0]["partition_responses"][0]["error_code"]


def end_offset(host, port, topic, partition):
    resp = send(host, port, 2, 1, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    part = resp["topics"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["offset"]


# ------------------------------------------------------------------------------------------------ embedded mode

def _records(n, tag):
    return {0: [f"{tag}-{i}".encode() for i in range(n)]}


def test_forged_controller_requests_embedded(broker):
    """Single broker, embedded coordination: broker 0 is its own controller (controller epoch 1)."""
    host, port, bid = broker.host, broker.port, broker.broker_id
    create_topics(broker.bootstrap, [("victim", 1, 1)])
    records = _records(5, "victim")
    produce(broker.bootstrap, "victim", records)
    before = metadata(broker, ["victim"])
    assert before["brokers"] == {bid: (host, port, None)} and leaders(before, "victim") == {0: bid}

    with StallWatch(broker) as watch:
        for epoch in (1, 999):   # the real controller epoch, and the lock-out attempt of issue 8
            for v, be in ((6, -1), (6, UNKNOWN), (5, 0), (0, None)):
                resp = send(host, port, 6, v, update_metadata(v, bid, epoch, be, bid, "victim", 0))
                assert_refused(resp, 77, f"UpdateMetadata v{v} epoch {epoch} broker epoch {be}")
            for v, be in ((4, -1), (4, UNKNOWN), (1, None), (0, None)):
                resp = send(host, port, 4, v, leader_and_isr(v, bid, epoch, be, "victim", 0, 7, [bid, 7]))
                assert_refused(resp, 77, f"LeaderAndIsr v{v} epoch {epoch}")
            for v, be in ((3, -1), (3, UNKNOWN), (1, 12), (0, None)):
                resp = send(host, port, 5, v, stop_replica(v, bid, epoch, be, "victim", 0))
                assert_refused(resp, 77, f"StopReplica(delete) v{v} epoch {epoch}")
        for v, be in ((3, UNKNOWN), (2, -1), (1, None), (0, None)):
            body = {"broker_id": bid} if be is None else {"broker_id": bid, "broker_epoch": be}
            assert_refused(send(host, port, 7, v, body), 77, f"ControlledShutdown v{v}")
    assert_healthy(broker, watch, what="forged controller requests")

    after = metadata(broker, ["victim"])
    assert after["brokers"] == before["brokers"] and after["controller"] == bid
    assert leaders(after, "victim") == {0: bid}
    assert (broker.log_dir / "victim-0").is_dir()
    assert consume(broker.bootstrap, "victim", [0], expected=5) == records
    # The real controller was not locked out: a new topic gets its leader and takes records.
    create_topics(broker.bootstrap, [("after-forgery", 2, 1)])
    more = {0: [b"a"], 1: [b"b"]}
    produce(broker.bootstrap, "after-forgery", more)
    assert consume(broker.bootstrap, "after-forgery", [0, 1], expected=2) == more
    assert "STALE_CONTROLLER_EPOCH" not in broker.log_text()


def test_internal_topic_produce_refused_whatever_the_client_id(broker):
    """Kafka lets a Produce to an internal topic through when its client_id is "__admin_client"; here nobody may
    write there through Produce (the group coordinator appends in-process)."""
    host, port = broker.host, broker.port
    # FindCoordinator creates __consumer_offsets (offsets.topic.num.partitions = 50 by default).
    wait_until(lambda: send(host, port, 10, 1, {"key": "g", "key_type": 0})["error_code"] == 0, 30, 0.2,
               "the group coordinator")
    before = end_offset(host, port, "__consumer_offsets", 0)
    with StallWatch(broker) as watch:
        for client_id in ("__admin_client", "evil-client", None):
            assert produce_internal(host, port, client_id) == 17, client_id
    assert_healthy(broker, watch, what="produce to __consumer_offsets")
    assert end_offset(host, port, "__consumer_offsets", 0) == before


# ------------------------------------------------------------------------------------------------ cluster mode

@pytest.fixture(scope="module")
def cp_cluster(tmp_path_factory, zk_ensemble):
    """3 brokers with a PLAINTEXT listener for clients and replication and a CONTROL listener for the controller
    (control.plane.listener.name=CONTROL, KIP-291)."""
    c = Cluster(tmp_path_factory.mktemp("cp-cluster"), zk_ensemble,
                overrides={"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:PLAINTEXT",
                           "inter.broker.listener.name": "PLAINTEXT", "control.plane.listener.name": "CONTROL",
                           "replica.lag.time.max.ms": 600000})
    for b, cport in zip(c.brokers, free_ports(len(c.brokers))):
        b.control_port = cport
        listeners = f"PLAINTEXT://{b.host}:{b.port},CONTROL://{b.host}:{cport}"
        b.overrides.update({"listeners": listeners, "advertised.listeners": listeners})
    try:
        c.start()   # converges only if the controller's UpdateMetadata, sent to CONTROL, is accepted
        yield c
    finally:
        c.close()


def test_forged_controller_requests_cluster(cp_cluster):
    c = cp_cluster
    create_topics(c.bootstrap, [("victim", 3, 3)])
    lead = c.wait_topic_everywhere("victim", 3)
    records = {p: [f"victim-{p}-{i}".encode() for i in range(5)] for p in range(3)}
    produce(c.bootstrap, "victim", records)
    ctl, epoch = c.controller_id(), c.controller_epoch()
    controller = c.broker(ctl)
    target = next(b for b in c.brokers if b.broker_id != ctl)
    tid = target.broker_id
    bepochs = {b.broker_id: c.zk.exists(f"/brokers/ids/{b.broker_id}").czxid for b in c.brokers}
    other_led = next(p for p, leader in lead.items() if leader != tid)
    states_before = {p: c.state("victim", p)[0] for p in range(3)}
    md_before = {b.broker_id: metadata(b, ["victim"]) for b in c.brokers}
    assert all(md["brokers"] == {b.broker_id: (b.host, b.port, f"r{b.broker_id}") for b in c.brokers}
               for md in md_before.values())

    cp = (target.host, target.control_port)
    with StallWatch(target) as watch:
        # On the control-plane listener, by someone who cannot read ZooKeeper: the broker epoch gives it away.
        for be in (UNKNOWN, bepochs[tid] - 1, -1):
            assert_refused(send(*cp, 6, 6, update_metadata(6, ctl, epoch, be, tid, "victim", 0)), 77,
                           f"UpdateMetadata broker epoch {be}")
        assert_refused(send(*cp, 4, 4, leader_and_isr(4, ctl, epoch, UNKNOWN, "victim", other_led, tid,
                                                      [0, 1, 2])), 77, "LeaderAndIsr")
        assert_refused(send(*cp, 5, 3, stop_replica(3, ctl, epoch, UNKNOWN, "victim", 0)), 77, "StopReplica")
        assert_refused(send(*cp, 5, 0, stop_replica(0, ctl, epoch, None, "victim", 0)), 77, "StopReplica v0")
        # With the right broker epoch, but not as the controller ZooKeeper names (and never raising the epoch).
        for cid, ep in ((ctl, epoch - 1), ((ctl + 1) % 3, epoch), (ctl, epoch + 50)):
            assert_refused(send(*cp, 6, 6, update_metadata(6, cid, ep, bepochs[tid], tid, "victim", 0)), 11,
                           f"UpdateMetadata from controller {cid} epoch {ep}")
        # On the client listener nothing is accepted, not even a perfect forgery (every epoch read from ZooKeeper).
        plain = (target.host, target.port)
        assert_refused(send(*plain, 6, 6, update_metadata(6, ctl, epoch, bepochs[tid], tid, "victim", 0)), 31,
                       "UpdateMetadata on PLAINTEXT")
        assert_refused(send(*plain, 4, 4, leader_and_isr(4, ctl, epoch, bepochs[tid], "victim", other_led, tid,
                                                         [0, 1, 2])), 31, "LeaderAndIsr on PLAINTEXT")
        assert_refused(send(*plain, 5, 3, stop_replica(3, ctl, epoch, bepochs[tid], "victim", 0)), 31,
                       "StopReplica on PLAINTEXT")
        # ControlledShutdown naming the leader of partition 0, to the controller.
        victim_id = lead[0]
        assert_refused(send(controller.host, controller.port, 7, 3,
                            {"broker_id": victim_id, "broker_epoch": bepochs[victim_id]}), 31,
                       "ControlledShutdown on PLAINTEXT")
        for v, body in ((3, {"broker_id": victim_id, "broker_epoch": UNKNOWN}), (1, {"broker_id": victim_id})):
            assert_refused(send(controller.host, controller.control_port, 7, v, body), 77, f"ControlledShutdown v{v}")
    assert_healthy(target, watch, what="forged controller requests")

    # Nothing changed: partition states, every broker's view, the logs.
    assert {p: c.state("victim", p)[0] for p in range(3)} == states_before
    for b in c.brokers:
        md = metadata(b, ["victim"])
        assert md["brokers"] == md_before[b.broker_id]["brokers"] and md["controller"] == ctl
        assert leaders(md, "victim") == lead
    assert all((target.log_dir / f"victim-{p}").is_dir() for p in range(3))
    assert consume(c.bootstrap, "victim", [0, 1, 2], expected=15) == records
    # The controller still reaches every broker over CONTROL: a new topic gets leaders everywhere, takes records.
    create_topics(c.bootstrap, [("after-forgery", 3, 3)])
    c.wait_topic_everywhere("after-forgery", 3)
    more = {p: [f"after-{p}".encode()] for p in range(3)}
    produce(c.bootstrap, "after-forgery", more)
    assert consume(c.bootstrap, "after-forgery", [0, 1, 2], expected=3) == more
    assert "answered controller request" not in controller.log_text()

    # A real controlled shutdown (SIGTERM) still works: the broker sends its epoch to the controller's CONTROL
    # endpoint, and leadership moves before it exits.
    led = sorted(p for p, leader in lead.items() if leader == tid)
    target.stop()
    assert "controlled shutdown complete" in target.log_text()
    if led:
        survivors = [b for b in c.brokers if b is not target]
        assert all(leaders(metadata(b, ["victim"]), "victim")[p] != tid for b in survivors for p in led)
