"""Transaction coordinator failover: 3 broker processes on a real 3-node ZooKeeper ensemble (chroot /kb),
``__transaction_state`` replicated 3 ways (min ISR 2).

kill -9 of the broker coordinating a transactional id moves its ``__transaction_state`` partition to another broker,
which loads the id (COORDINATOR_LOAD_IN_PROGRESS meanwhile) at the new leader epoch: a confluent-kafka producer
whose transaction was open commits it through the new coordinator, and a transaction whose producer is gone is
aborted there on its timeout. Every check is an exact state, epoch, count or offset.
"""
from __future__ import annotations

import time

import pytest

from kbroker.client.connection import BrokerConnection
from tests.integration.harness import wait_until
from tests.integration.test_cluster_common import FAILOVER_WAIT_S, Cluster, create_topics

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

OVERRIDES = {"replica.lag.time.max.ms": 600000, "transaction.state.log.num.partitions": 3,
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("txn_cluster"), zk_ensemble, overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture
def healthy(cluster):
    cluster.ensure_all_running()
    return cluster


def _ask(cluster, api_key, body, version):
    """One request to any running broker."""
    last = None
    for b in cluster.running():
        try:
            conn = BrokerConnection(b.host, b.port, client_id="raw", timeout=10)
        except Exception as e:  # noqa: BLE001 - that broker is not serving yet: try another
            last = e
            continue
        try:
            return conn.request(api_key, body, version=version)
        finally:
            conn.close()
    raise AssertionError("no broker answered: %s" % last)


def coordinator_of(cluster, tid):
    r = _ask(cluster, 10, {"key": tid, "key_type": 1}, 3)
    return r["node_id"] if r["error_code"] == 0 else None


def describe_at(cluster, broker_id, tid):
    b = cluster.broker(broker_id)
    conn = BrokerConnection(b.host, b.port, client_id="raw", timeout=10)
    try:
        return conn.request(65, {"transactional_ids": [tid]}, version=0)["transaction_states"][0]
    finally:
        conn.close()


def settled_coordinator(cluster, tid):
    """The coordinator of ``tid`` once it answers DescribeTransactions for it (loaded)."""
    def loaded():
        node = coordinator_of(cluster, tid)
        if node is None or not cluster.broker(node).running:
            return None
        return (node,) if describe_at(cluster, node, tid)["error_code"] in (0, 105) else None
    return wait_until(loaded, FAILOVER_WAIT_S + 20, 0.2, "a loaded coordinator for %r" % tid,
                      ignore=(OSError, ConnectionError, Exception))[0]     # a tuple: broker 0 is falsy


def tid_not_on_the_controller(cluster, prefix):
    """A transactional id whose coordinator is not the controller: these tests kill the coordinator, and a
    controller failover is test_cluster_failover.py's subject (it would add its own delays here)."""
    ctl = cluster.controller_id()
    for i in range(50):
        tid = "%s-%d" % (prefix, i)
        node = wait_until(lambda: (lambda n: n is not None and (n,))(coordinator_of(cluster, tid)), 30, 0.2,
                          "FindCoordinator for %r" % tid, ignore=(OSError, ConnectionError, Exception))[0]
        if node != ctl:
            return tid
    raise AssertionError("every id's coordinator was the controller")


def committed(bootstrap, topic, partitions, expect, timeout=30.0):
    """{partition: [(offset, value)]} a read_committed consumer sees (waits for ``expect`` records, then 1 s more)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-%s" % topic, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    out = {p: [] for p in partitions}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + timeout
        n = 0
        while time.monotonic() < deadline and n < expect:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out[m.partition()].append((m.offset(), m.value().decode()))
                n += 1
        tail_end = time.monotonic() + 1.0
        while time.monotonic() < tail_end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out[m.partition()].append((m.offset(), m.value().decode()))
    finally:
        c.close()
    return out


def test_open_transaction_commits_through_the_new_coordinator(healthy):
    from confluent_kafka import Producer
    cluster = healthy
    bs = cluster.bootstrap
    create_topics(bs, [("fo-out", 2, 3)])
    tid = tid_not_on_the_controller(cluster, "failover-app")
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 120000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(3):
        p.produce("fo-out", value="one-%d" % i, partition=0)
    p.commit_transaction(60)                     # offsets 0-2, COMMIT marker at 3
    p.begin_transaction()
    for i in range(4):
        p.produce("fo-out", value="two-%d" % i, partition=i % 2)
    assert p.flush(30) == 0                      # p0: 4, 5; p1: 0, 1 -- still open
    old = settled_coordinator(cluster, tid)
    before = describe_at(cluster, old, tid)
    assert before["transaction_state"] == "Ongoing"
    assert before["topics"] == [{"topic": "fo-out", "partitions": [0, 1]}]
    cluster.broker(old).kill9()
    new = settled_coordinator(cluster, tid)
    assert new != old
    after = describe_at(cluster, new, tid)
    # the new coordinator loaded the open transaction exactly as the old one logged it
    assert (after["transaction_state"], after["producer_id"], after["producer_epoch"], after["topics"]) == (
        "Ongoing", before["producer_id"], before["producer_epoch"], before["topics"])
    p.commit_transaction(90)
    wait_until(lambda: describe_at(cluster, new, tid)["transaction_state"] == "CompleteCommit", 30, 0.2,
               "CompleteCommit at the new coordinator")
    got = committed(bs, "fo-out", [0, 1], 7)
    assert got == {0: [(0, "one-0"), (1, "one-1"), (2, "one-2"), (4, "two-0"), (5, "two-2")],
                   1: [(0, "two-1"), (1, "two-3")]}



def test_abandoned_transaction_is_aborted_by_the_new_coordinator_on_timeout(healthy):
    from confluent_kafka import Producer
    cluster = healthy
    bs = cluster.bootstrap
    create_topics(bs, [("fo-abandoned", 1, 3)])
    tid = tid_not_on_the_controller(cluster, "abandoned-app")
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 8000})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(5):
        p.produce("fo-abandoned", value="lost-%d" % i, partition=0)
    assert p.flush(30) == 0
    old = settled_coordinator(cluster, tid)
    epoch = describe_at(cluster, old, tid)["producer_epoch"]
    cluster.broker(old).kill9()
    del p                                         # the producer goes away with the coordinator
    new = settled_coordinator(cluster, tid)
    assert new != old
    wait_until(lambda: describe_at(cluster, new, tid)["transaction_state"] == "CompleteAbort", 60, 0.2,
               "the new coordinator to abort the timed-out transaction")
    assert describe_at(cluster, new, tid)["producer_epoch"] == epoch + 1
    # nothing is visible read_committed, and the partition ends after the ABORT marker (offset 5)
    got = committed(bs, "fo-abandoned", [0], 0, timeout=2)
    assert got == {0: []}
    conn = BrokerConnection(cluster.broker(new).host, cluster.broker(new).port, client_id="raw")
    try:
        md = conn.request(3, {"topics": [{"name": "fo-abandoned"}]}, version=4)["topics"][0]["partitions"][0]
        leader = cluster.broker(md["leader_id"])
    finally:
        conn.close()
    conn = BrokerConnection(leader.host, leader.port, client_id="raw")
    try:
        offs = conn.request(2, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": "fo-abandoned", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, version=2)
    finally:
        conn.close()
    assert offs["topics"][0]["partitions"][0]["offset"] == 6       # LSO = end: no transaction left open

