"""A broker bounced faster than the controller reads ``/brokers/ids`` (issue 8, KIP-380), on a real ensemble.

The failure: broker B, leader of a partition, is killed and restarted; its old session expires and its new
incarnation registers *before* the controller re-reads the children of ``/brokers/ids``, so the controller sees
[0,1,2] -> [0,1,2], decides nothing, and B's partitions stay led (in ZooKeeper) by a broker that knows nothing of
them: UNKNOWN_TOPIC_OR_PARTITION to every producer until an operator restarts the cluster.

Deterministic reproduction: the controller process is SIGSTOPped across the whole bounce (kill -9 of B, B's old
session expiring, B's restart and new registration), then SIGCONTed, so the controller can only ever read the
children after the new registration landed. The controller's own ZooKeeper session (20 s) outlives the pause;
the other brokers use 3 s sessions so B's old one expires quickly. This needs an ensemble whose tickTime allows
both (sessions are clamped to 2..20 ticks): this module starts its own, with a 1 s tick.

What must happen: the controller notices the new broker epoch (the czxid of ``/brokers/ids/B``) and handles B as
failed then started -- leadership of B's partitions moves to another ISR member, B gets LeaderAndIsr for all its
replicas and rejoins the ISR -- and a real client (confluent-kafka, acks=all) has every partition served within
B's session timeout + 2 s of the controller resuming.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import struct
import time

import pytest

from tests.integration.harness import ZkEnsemble, encode_request, read_response, wait_until
from tests.integration.test_cluster_common import Cluster, create_topics, metadata, require_zookeeper

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

TICK_MS = 1000
CONTROLLER_SESSION_MS = 20000      # the ensemble's maximum (20 ticks): survives the pause
SESSION_MS = 3000                  # everyone else: the bounced broker's old session expires within 3 s + 1 tick
TOPIC, PARTITIONS = "bounce", 6


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    require_zookeeper()
    zk = ZkEnsemble(tmp_path_factory.mktemp("zk"), n=3, tick_ms=TICK_MS)
    try:
        zk.start()
        yield zk
    finally:
        zk.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, ensemble):
    c = Cluster(tmp_path_factory.mktemp("cluster"), ensemble,
                overrides={"zookeeper.session.timeout.ms": SESSION_MS, "min.insync.replicas": 2,
                           "default.replication.factor": 3, "auto.leader.rebalance.enable": "false"})
    c.brokers[0].overrides["zookeeper.session.timeout.ms"] = CONTROLLER_SESSION_MS
    try:
        # Broker 0 starts alone, so it wins the election: the controller has the long session.
        c.brokers[0].start(timeout=60)
        c.zk.start(timeout=30)
        wait_until(lambda: c.controller_id() == 0, 30, 0.1, "broker 0 to be the controller")
        for b in c.brokers[1:]:
            b.start(wait=False)
        for b in c.brokers[1:]:
            b.wait_ready(60)
        c.wait_converged()
        yield c
    finally:
        c.close()


def produce_everywhere(bootstrap: str, rounds_timeout: float) -> tuple[float, dict[int, int]]:
    """One acks=all record to every partition, retried by the client until delivered or ``rounds_timeout``;
    returns (seconds until the last partition was served, {partition: delivered offset})."""
    from confluent_kafka import Producer

    delivered, failed = {}, []
    t0 = time.monotonic()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retry.backoff.ms": 50,
                  "topic.metadata.refresh.interval.ms": 1000, "message.timeout.ms": int(rounds_timeout * 1000)})

    def done(err, msg):
        if err is not None:
            failed.append((msg.partition(), err))
        else:
            delivered[msg.partition()] = (msg.offset(), time.monotonic() - t0)
    for part in range(PARTITIONS):
        p.produce(TOPIC, value=b"after-bounce-%d" % part, partition=part, on_delivery=done)
    left = p.flush(rounds_timeout + 5)
    assert left == 0 and failed == [], f"{left} undelivered, failures {failed}, delivered {delivered}"
    return max(t for _, t in delivered.values()), {part: off for part, (off, _) in delivered.items()}


def isr_of(cluster, part):
    return sorted(cluster.state(TOPIC, part)[0]["isr"])


def test_broker_bounced_while_the_controller_looks_away(cluster):
    create_topics(cluster.bootstrap, [(TOPIC, PARTITIONS, 3)])
    lead = cluster.wait_topic_everywhere(TOPIC, PARTITIONS)
    wait_until(lambda: all(isr_of(cluster, p) == [0, 1, 2] for p in range(PARTITIONS)), 30, 0.2, "full ISRs")
    produce_everywhere(cluster.bootstrap, 20)

    controller = cluster.broker(0)
    victim = cluster.broker(1)
    led = sorted(p for p, leader in lead.items() if leader == victim.broker_id)
    assert led, f"broker 1 leads nothing: {lead}"
    before = {p: cluster.state(TOPIC, p)[0]["leader_epoch"] for p in led}
    path = f"/brokers/ids/{victim.broker_id}"
    old_epoch = cluster.zk.exists(path).czxid

    os.kill(controller.pid, signal.SIGSTOP)
    try:
        paused = time.monotonic()
        victim.kill9()
        victim.start(wait=False)
        # The old session expires (<= 3 s + a tick), then the new incarnation registers: a new czxid.
        st = wait_until(lambda: (s := cluster.zk.exists(path)) is not None and s.czxid != old_epoch and s, 15, 0.05,
                        "broker 1's new registration")
        new_epoch = st.czxid
        assert cluster.registered() == [0, 1, 2]
        # Nothing has acted for the controller meanwhile: ZooKeeper still names the dead incarnation as leader.
        assert all(cluster.state(TOPIC, p)[0]["leader"] == victim.broker_id for p in led)
        assert time.monotonic() - paused < 14, "the pause must stay well inside the controller's session"
    finally:
        os.kill(controller.pid, signal.SIGCONT)

    served_s, offsets = produce_everywhere(cluster.bootstrap, SESSION_MS / 1000 + 10)
    assert served_s <= SESSION_MS / 1000 + 2, f"every partition served only after {served_s:.1f} s"
    assert sorted(offsets) == list(range(PARTITIONS)) and all(off >= 1 for off in offsets.values()), offsets

    # The controller noticed through the epoch, and handled broker 1 as failed, then started.
    log = controller.log_text()
    m = re.search(r"broker 1 registered again \(broker epoch (\d+) -> (\d+)\)", log)
    assert m, "the controller did not log the bounce:\n" + controller.log_tail(40)
    assert (int(m.group(1)), int(m.group(2))) == (old_epoch, new_epoch)
    for p in led:
        state = cluster.state(TOPIC, p)[0]
        assert state["leader"] in (0, 2) and state["leader_epoch"] > before[p], state
    # The new incarnation got LeaderAndIsr for its replicas: it follows, catches up and rejoins every ISR.
    victim.wait_ready(30)
    wait_until(lambda: all(isr_of(cluster, p) == [0, 1, 2] for p in range(PARTITIONS)), 30, 0.2,
               "broker 1 back in every ISR")
    md = metadata(victim, [TOPIC])
    assert sorted(md["brokers"]) == [0, 1, 2] and md["controller"] == 0
    assert md["topics"][TOPIC]["error"] == 0 and len(md["topics"][TOPIC]["partitions"]) == PARTITIONS


def test_metadata_waits_for_the_controller_while_a_broker_starts(cluster):
    """A broker listens before the controller has told it anything (the controller's requests come in through
    that listener), but a client's Metadata answered then said controller -1 and no leaders: librdkafka's
    AdminClient then waited ~35 s ("Failed while waiting for controller"). Metadata now waits for the
    controller's first UpdateMetadata. Made deterministic by pausing the controller across the restart."""
    cluster.ensure_all_running()
    cluster.wait_converged()
    controller = cluster.broker(0)
    victim = cluster.broker(2)
    path = f"/brokers/ids/{victim.broker_id}"
    old_epoch = cluster.zk.exists(path).czxid
    os.kill(controller.pid, signal.SIGSTOP)
    try:
        paused = time.monotonic()
        victim.kill9()
        victim.start(wait=False)
        victim.wait_ready(15)  # listening: ApiVersions is answered at once
        wait_until(lambda: (s := cluster.zk.exists(path)) is not None and s.czxid != old_epoch, 15, 0.05,
                   "broker 2's new registration")
        sock = socket.create_connection((victim.host, victim.port), timeout=5)
        sock.sendall(encode_request(3, 1, 41, struct.pack(">i", -1)))
        sock.settimeout(1.5)
        with pytest.raises(socket.timeout):  # no controller has spoken to it yet: Metadata waits
            read_response(sock)
        assert time.monotonic() - paused < 14, "the pause must stay well inside the controller's session"
    finally:
        os.kill(controller.pid, signal.SIGCONT)
    sock.settimeout(20)
    cid, body = read_response(sock)
    sock.close()
    assert cid == 41
    n_brokers = struct.unpack(">i", body[:4])[0]
    pos = 4
    for _ in range(n_brokers):
        pos += 4
        (hl,) = struct.unpack(">h", body[pos:pos + 2])
        pos += 2 + hl + 4
        (rl,) = struct.unpack(">h", body[pos:pos + 2])
        pos += 2 + max(rl, 0)
    (controller_id,) = struct.unpack(">i", body[pos:pos + 4])
    assert controller_id == 0, f"Metadata named controller {controller_id}"
    assert n_brokers == 3
