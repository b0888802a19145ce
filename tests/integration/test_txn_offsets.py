"""Transactional offset commits through a real broker (TxnOffsetCommit 28 + WriteTxnMarkers 27, raw protocol):
the group's committed offsets change only when the producer's COMMIT marker lands in the group's
``__consumer_offsets`` partition, an ABORT leaves them as they were, OffsetFetch ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT (88) while a transactional commit is open, and all of it survives a restart (clean and
``kill -9``): the coordinator replays the transactional batch and the markers, and a transaction still open at
the restart stays pending until its marker arrives afterwards.

The markers are sent by hand as a transaction coordinator would (coordinator epoch 0), so this checks the group
side alone, whatever the transaction coordinator does.
"""
import pytest

from kbroker.client.connection import BrokerConnection
from kbroker.coordinator.group import partition_for
from kbroker.internal_topics import GROUP_METADATA_TOPIC
from tests.integration.harness import wait_until

TOPIC, GROUP, TXN_ID = "txo-t", "txo-g", "txo-tx"
OFFSETS_PARTITIONS = 3
UNSTABLE = 88


def _retry(conn, api, body, version, ok, what, timeout=30):
    """The response once ``ok(resp)`` (a loading/moving coordinator answers 14/15/16 until it serves)."""
    last = []

    def attempt():
        r = conn.request(api, body, version=version)
        last[:] = [r]
        return r if ok(r) else None
    try:
        return wait_until(attempt, timeout, 0.1, what)
    except AssertionError:
        raise AssertionError("%s; last answer %r" % (what, last[0] if last else None)) from None


def _fetch(conn, require_stable, timeout=30):
    r = _retry(conn, "OffsetFetch", {"group_id": GROUP, "require_stable": require_stable,
                                     "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]}, 7,
               lambda r: r["error_code"] not in (14, 15, 16), "OffsetFetch served", timeout)
    assert r["error_code"] == 0
    return {p["partition_index"]: (p["error_code"], p["committed_offset"])
            for t in r["topics"] for p in t["partitions"]}


def _txn_commit(conn, pid, epoch, offsets):
    body = {"transactional_id": TXN_ID, "group_id": GROUP, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": "m%d" % o} for p, o in sorted(offsets.items())]}]}
    r = _retry(conn, "TxnOffsetCommit", body, 3,
               lambda r: all(p["error_code"] not in (14, 15, 16) for t in r["topics"] for p in t["partitions"]),
               "TxnOffsetCommit served")
    return {p["partition_index"]: p["error_code"] for t in r["topics"] for p in t["partitions"]}


def _marker(conn, pid, epoch, commit):
    body = {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
                         "topics": [{"name": GROUP_METADATA_TOPIC,
                                     "partition_indexes": [partition_for(GROUP, OFFSETS_PARTITIONS)]}],
                         "coordinator_epoch": 0}]}
    r = _retry(conn, "WriteTxnMarkers", body, 1,
               lambda r: all(p["error_code"] not in (6, 14, 15, 16)
                             for m in r["markers"] for t in m["topics"] for p in t["partitions"]),
               "WriteTxnMarkers served")
    return [(m["producer_id"], t["name"], p["partition_index"], p["error_code"])
            for m in r["markers"] for t in m["topics"] for p in t["partitions"]]


@pytest.mark.parametrize("kill", [False, True])
def test_txn_offsets_visible_on_commit_gone_on_abort_and_replayed(broker_factory, kill):
    b = broker_factory(overrides={"offsets.topic.num.partitions": OFFSETS_PARTITIONS,
                                  "offsets.topic.replication.factor": 1})
    index = partition_for(GROUP, OFFSETS_PARTITIONS)
    with BrokerConnection(b.host, b.port) as conn:
        conn.request("CreateTopics", {"topics": [{"name": TOPIC, "num_partitions": 2, "replication_factor": 1,
                                                  "assignments": [], "configs": []}], "timeout_ms": 5000},
                     version=1)
        _retry(conn, "FindCoordinator", {"key": GROUP, "key_type": 0}, 1, lambda r: r["error_code"] == 0,
               "the group coordinator")
        ip = conn.request("InitProducerId", {"transactional_id": None, "transaction_timeout_ms": 60000}, version=1)
        assert ip["error_code"] == 0
        pid, epoch = ip["producer_id"], ip["producer_epoch"]

        # 1. A transactional commit is invisible (and unstable) until the COMMIT marker.
        assert _txn_commit(conn, pid, epoch, {0: 5, 1: 7}) == {0: 0, 1: 0}
        assert _fetch(conn, False) == {0: (0, -1), 1: (0, -1)}
        assert _fetch(conn, True) == {0: (UNSTABLE, -1), 1: (UNSTABLE, -1)}
        assert _marker(conn, pid, epoch, True) == [(pid, GROUP_METADATA_TOPIC, index, 0)]
        assert _fetch(conn, True) == {0: (0, 5), 1: (0, 7)}

        # 2. An aborted one leaves the committed offsets as they were.
        assert _txn_commit(conn, pid, epoch, {0: 9}) == {0: 0}
        assert _fetch(conn, True) == {0: (UNSTABLE, -1), 1: (0, 7)}
        assert _fetch(conn, False) == {0: (0, 5), 1: (0, 7)}
        assert _marker(conn, pid, epoch, False) == [(pid, GROUP_METADATA_TOPIC, index, 0)]
        assert _fetch(conn, True) == {0: (0, 5), 1: (0, 7)}

        # 3. One left open across the restart.
        assert _txn_commit(conn, pid, epoch, {1: 11}) == {1: 0}
    b.restart(kill=kill)
    with BrokerConnection(b.host, b.port) as conn:
        assert _fetch(conn, False) == {0: (0, 5), 1: (0, 7)}      # replayed: commit applied, abort dropped
        assert _fetch(conn, True) == {0: (0, 5), 1: (UNSTABLE, -1)}  # and the open one still pending
        assert _marker(conn, pid, epoch, True) == [(pid, GROUP_METADATA_TOPIC, index, 0)]
        assert _fetch(conn, True) == {0: (0, 5), 1: (0, 11)}
        d = conn.request("DescribeGroups", {"groups": [GROUP]}, version=0)
        assert d["groups"][0]["group_state"] == "Empty"
    b.restart(kill=kill)
    with BrokerConnection(b.host, b.port) as conn:
        assert _fetch(conn, True) == {0: (0, 5), 1: (0, 11)}


def test_confluent_send_offsets_to_transaction_commit_abort_and_stale_generation(broker_factory):
    """librdkafka's ``send_offsets_to_transaction`` (AddOffsetsToTxn + TxnOffsetCommit v3 with the consumer's
    generation and member id): the group's committed offset moves on commit only; a commit naming a generation
    the group has left behind (the consumer rejoined) is refused (KIP-447) and the transaction must abort."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    b = broker_factory(overrides={"offsets.topic.num.partitions": OFFSETS_PARTITIONS,
                                  "offsets.topic.replication.factor": 1, "transaction.state.log.num.partitions": 3,
                                  "transaction.state.log.replication.factor": 1,
                                  "transaction.state.log.min.isr": 1, "group.initial.rebalance.delay.ms": 0})
    src, dst, group = "txo-in", "txo-out", "txo-ctp"
    with BrokerConnection(b.host, b.port) as conn:
        for name in (src, dst):
            r = conn.request("CreateTopics", {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                                          "assignments": [], "configs": []}], "timeout_ms": 5000},
                             version=1)
            assert r["topics"][0]["error_code"] == 0
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce(src, value=b"%d" % i)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "session.timeout.ms": 6000})
    c.subscribe([src])
    got = []
    wait_until(lambda: got.extend(m for m in [c.poll(0.2)] if m is not None and not m.error()) or len(got) >= 10,
               30, 0.01, "the consumer to read the 10 input records")
    assert [m.offset() for m in got] == list(range(10))
    tp = TopicPartition(src, 0)
    tx = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "txo-ctp-tx"})
    tx.init_transactions(30)

    def committed():
        return c.committed([tp], 10)[0].offset

    tx.begin_transaction()
    tx.produce(dst, value=b"a")
    tx.send_offsets_to_transaction([TopicPartition(src, 0, 6)], c.consumer_group_metadata(), 30)
    with BrokerConnection(b.host, b.port) as conn:    # open: unstable for require_stable fetches, else absent
        for stable, expected in ((True, (UNSTABLE, -1)), (False, (0, -1))):
            r = conn.request("OffsetFetch", {"group_id": group, "require_stable": stable,
                                             "topics": [{"name": src, "partition_indexes": [0]}]}, version=7)
            assert [(q["error_code"], q["committed_offset"]) for q in r["topics"][0]["partitions"]] == [expected]
    # A read_committed consumer asks with require_stable (KIP-447) and keeps retrying UNSTABLE_OFFSET_COMMIT.
    with pytest.raises(KafkaException) as e:
        c.committed([tp], 2)
    assert e.value.args[0].code() == KafkaError._TIMED_OUT
    tx.commit_transaction(30)
    assert committed() == 6

    tx.begin_transaction()
    tx.send_offsets_to_transaction([TopicPartition(src, 0, 10)], c.consumer_group_metadata(), 30)
    tx.abort_transaction(30)
    assert committed() == 6

    # A stale generation: the metadata taken before the consumer rejoins no longer matches the group.
    stale = c.consumer_group_metadata()
    c.unsubscribe()
    c.subscribe([src])
    wait_until(lambda: c.poll(0.2) is None and c.assignment() == [TopicPartition(src, 0)], 30, 0.05,
               "the consumer to rejoin")
    tx.begin_transaction()
    with pytest.raises(KafkaException) as e:
        tx.send_offsets_to_transaction([TopicPartition(src, 0, 8)], stale, 30)
    assert e.value.args[0].txn_requires_abort()
    tx.abort_transaction(30)
    assert committed() == 6
    c.close()


def _kafka_python_txn(bootstrap, group, rounds):
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="txo-kp-tx")
    try:
        p.init_transactions()
        for offset, commit in rounds:
            p.begin_transaction()
            p.send_offsets_to_transaction({TopicPartition(TOPIC, 0): OffsetAndMetadata(offset, "kp", -1)}, group)
            (p.commit_transaction if commit else p.abort_transaction)()
    finally:
        p.close()


def _aiokafka_txn(bootstrap, group, rounds):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="txo-aio-tx")
        await p.start()
        try:
            for offset, commit in rounds:
                await p.begin_transaction()
                await p.send_offsets_to_transaction({TopicPartition(TOPIC, 0): OffsetAndMetadata(offset, "aio")},
                                                    group)
                await (p.commit_transaction() if commit else p.abort_transaction())
        finally:
            await p.stop()
    asyncio.run(run())


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_clients_send_offsets_to_transaction(broker_factory, client):
    """kafka-python (TxnOffsetCommit v3, generation -1 for a bare group id) and aiokafka (v0): commit then abort --
    the group's offset is the committed transaction's, with its metadata."""
    b = broker_factory(overrides={"offsets.topic.num.partitions": OFFSETS_PARTITIONS,
                                  "offsets.topic.replication.factor": 1, "transaction.state.log.num.partitions": 3,
                                  "transaction.state.log.replication.factor": 1,
                                  "transaction.state.log.min.isr": 1})
    group = "txo-" + client
    with BrokerConnection(b.host, b.port) as conn:
        r = conn.request("CreateTopics", {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                                                      "assignments": [], "configs": []}], "timeout_ms": 5000},
                         version=1)
        assert r["topics"][0]["error_code"] == 0
    run = _kafka_python_txn if client == "kafka-python" else _aiokafka_txn
    run(b.bootstrap, group, [(6, True), (9, False)])
    with BrokerConnection(b.host, b.port) as conn:
        r = conn.request("OffsetFetch", {"group_id": group, "require_stable": True,
                                         "topics": [{"name": TOPIC, "partition_indexes": [0]}]}, version=7)
        got = [(q["error_code"], q["committed_offset"], q["metadata"]) for q in r["topics"][0]["partitions"]]
        assert got == [(0, 6, "kp" if client == "kafka-python" else "aio")]
