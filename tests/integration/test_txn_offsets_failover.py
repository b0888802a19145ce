"""Transactional offsets survive the loss of their group coordinator (3 brokers on a 3-node ZooKeeper ensemble).

A TxnOffsetCommit is committed by its marker (offset 5), a second one is left open (offset 8), then the coordinator
-- the leader of the group's ``__consumer_offsets`` partition, RF 3 -- is killed -9. The new leader loads the
partition from its replica: the committed offset is 5, the open commit is pending (UNSTABLE_OFFSET_COMMIT for
require_stable fetches), and the COMMIT marker written to the new leader makes it 8. Raw protocol, markers sent by
hand with coordinator epoch 0 as a transaction coordinator would.
"""
from __future__ import annotations

import pytest

from kbroker.client.connection import BrokerConnection
from kbroker.coordinator.group import partition_for
from kbroker.internal_topics import GROUP_METADATA_TOPIC
from tests.integration.harness import wait_until
from tests.integration.test_cluster_common import FAILOVER_WAIT_S, Cluster, create_topics, metadata

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

TOPIC, GROUP, TXN_ID = "txf-t", "txf-g", "txf-tx"
OFFSETS_PARTITIONS = 3
UNSTABLE = 88
# The killed broker leaves the ISR after 3 s, so acks=all writes (markers, commits) on the new leader complete.
OVERRIDES = {"offsets.topic.num.partitions": OFFSETS_PARTITIONS, "offsets.topic.replication.factor": 3,
             "replica.lag.time.max.ms": 3000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("txf"), zk_ensemble, overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.close()


def _codes(r):
    return [p["error_code"] for t in r["topics"] for p in t["partitions"]]


def _ask(broker, api, body, version, done, what, timeout=FAILOVER_WAIT_S + 20):
    last = []

    def attempt():
        with BrokerConnection(broker.host, broker.port) as conn:
            r = conn.request(api, body, version=version)
        last[:] = [r]
        return r if done(r) else None
    try:
        return wait_until(attempt, timeout, 0.2, what, ignore=(OSError,))
    except AssertionError:
        raise AssertionError("%s; last answer %r" % (what, last[0] if last else None)) from None


def _fetch(broker, require_stable):
    r = _ask(broker, "OffsetFetch", {"group_id": GROUP, "require_stable": require_stable,
                                     "topics": [{"name": TOPIC, "partition_indexes": [0]}]}, 7,
             lambda r: r["error_code"] not in (14, 15, 16), "OffsetFetch served by %d" % broker.broker_id)
    assert r["error_code"] == 0
    return [(p["error_code"], p["committed_offset"]) for t in r["topics"] for p in t["partitions"]]


def _commit(broker, pid, epoch, offset):
    body = {"transactional_id": TXN_ID, "group_id": GROUP, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    r = _ask(broker, "TxnOffsetCommit", body, 3, lambda r: not set(_codes(r)) & {14, 15, 16},
             "TxnOffsetCommit served")
    return _codes(r)


def _marker(broker, pid, epoch, commit):
    body = {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
                         "topics": [{"name": GROUP_METADATA_TOPIC,
                                     "partition_indexes": [partition_for(GROUP, OFFSETS_PARTITIONS)]}],
                         "coordinator_epoch": 0}]}
    r = _ask(broker, "WriteTxnMarkers", body, 1,
             lambda r: all(p["error_code"] not in (6, 7, 19, 20) for m in r["markers"] for t in m["topics"]
                           for p in t["partitions"]), "WriteTxnMarkers written")
    return [p["error_code"] for m in r["markers"] for t in m["topics"] for p in t["partitions"]]


def test_open_transactional_commit_survives_kill9_of_the_group_coordinator(cluster):
    cluster.ensure_all_running()
    create_topics(cluster.bootstrap, [(TOPIC, 1, 3)])
    cluster.wait_topic_everywhere(TOPIC, 1)
    index = partition_for(GROUP, OFFSETS_PARTITIONS)
    first = cluster.brokers[0]
    _ask(first, "FindCoordinator", {"key": GROUP, "key_type": 0}, 1, lambda r: r["error_code"] == 0,
         "the offsets topic")

    def full_isr():
        st = metadata(first, [GROUP_METADATA_TOPIC])["topics"].get(GROUP_METADATA_TOPIC, {"partitions": {}})
        p = st["partitions"].get(index)
        return p if p and p["leader"] >= 0 and len(p["isr"]) == 3 else None
    leader = wait_until(full_isr, FAILOVER_WAIT_S, 0.2, "__consumer_offsets-%d with a full ISR" % index)["leader"]
    coordinator = cluster.broker(leader)
    ip = _ask(first, "InitProducerId", {"transactional_id": None, "transaction_timeout_ms": 60000}, 1,
              lambda r: r["error_code"] == 0, "a producer id")
    pid, epoch = ip["producer_id"], ip["producer_epoch"]

    assert _commit(coordinator, pid, epoch, 5) == [0]
    assert _marker(coordinator, pid, epoch, True) == [0]
    assert _fetch(coordinator, True) == [(0, 5)]
    assert _commit(coordinator, pid, epoch, 8) == [0]           # left open
    assert _fetch(coordinator, True) == [(UNSTABLE, -1)]

    coordinator.kill9()
    live = next(b for b in cluster.brokers if b.broker_id != leader)

    def new_leader():
        p = metadata(live, [GROUP_METADATA_TOPIC])["topics"][GROUP_METADATA_TOPIC]["partitions"].get(index)
        return p if p and p["leader"] not in (-1, leader) else None
    successor = cluster.broker(wait_until(new_leader, FAILOVER_WAIT_S + 10, 0.2,
                                          "a new leader for __consumer_offsets-%d" % index)["leader"])
    assert _fetch(successor, False) == [(0, 5)]
    assert _fetch(successor, True) == [(UNSTABLE, -1)]
    assert _marker(successor, pid, epoch, True) == [0]
    assert _fetch(successor, True) == [(0, 8)]
    cluster.ensure_all_running()
