"""Fetch size limits against real consumers (issue 8, section 2): KIP-74 for Fetch v3+, Kafka's hard limits for
v0-v2, the response budget (the request's max_bytes and the broker's fetch.max.bytes).

The data: two partitions holding three 1 MiB records each, one record per batch (1 048 650 bytes stored, more than
the consumers' default max.partition.fetch.bytes of 1 048 576), on a topic whose max.message.bytes admits them.
Every v3+ consumer must read all six records at their default settings: the first partition with data gets its
whole batch, a later one whose batch does not fit what is left gets no records (never a cut batch, which
kafka-python reports as "no complete records were found" and aiokafka as RecordTooLargeError). A v2 consumer
(kafka-python pinned to 0.10.0) gets Kafka 0.10's answer: RecordTooLargeError unless its fetch size holds a record.
Raw requests check the byte counts: fetch.max.bytes bounds every response, converted bytes included.
"""
from __future__ import annotations

import random

import pytest

from kbroker.record import iter_batches, legacy
from tests.integration.test_clients_common import (
    Got, Rec, aiokafka_consume, confluent_consume, create_topic, kafka_python_consume,
    kafka_python_produce)
from tests.integration.harness import wait_until
from tests.integration.test_durability import RawClient

pytestmark = pytest.mark.timeout(300)

FETCH = 1
MIB = 1 << 20
TOPIC = "big-records"
PARTITIONS = (0, 1)
PER_PARTITION = 3
STORED_BATCH = 1048650          # one 1 MiB record: 61-byte header + 13-byte record overhead
TOPIC_CONFIG = {"max.message.bytes": str(4 * MIB)}


def value(p: int, i: int) -> bytes:
    return random.Random(p * 1000 + i).randbytes(MIB)


def expected() -> list[Got]:
    return [(p, i, value(p, i)) for p in PARTITIONS for i in range(PER_PARTITION)]


def essentials(got: list[Got]) -> list[tuple[int, int, bytes]]:
    return [(g.partition, g.offset, g.value) for g in got]


def wait_for_controller(broker) -> None:
    """Until Metadata names the broker as controller. A broker answers requests before its controller election;
    a librdkafka AdminClient whose first Metadata said controller -1 waits ~35 s before asking again."""
    from tests.integration.test_cluster_common import metadata

    wait_until(lambda: metadata(broker, [])["controller"] == broker.broker_id, 30, message="controller elected",
               ignore=(OSError, ConnectionError))


@pytest.fixture(scope="module")
def big(shared_broker):
    """The topic, produced by kafka-python (each 1 MiB record alone in its batch: batch_size 16 KiB)."""
    wait_for_controller(shared_broker)
    create_topic(shared_broker.bootstrap, TOPIC, len(PARTITIONS), TOPIC_CONFIG)
    recs = [Rec(p, None, value(p, i), (), None) for i in range(PER_PARTITION) for p in PARTITIONS]
    metas = kafka_python_produce(shared_broker.bootstrap, TOPIC, recs, max_request_size=4 * MIB)
    assert sorted((m.partition, m.offset) for m in metas) == [(p, i) for p in PARTITIONS for i in range(3)]
    with RawClient(shared_broker) as c:
        data = fetch_v4(c, [(TOPIC, 0, 0, 64 * MIB)], max_bytes=64 * MIB)[(TOPIC, 0)][2]
    assert [h.size for _pos, h in iter_batches(data)] == [STORED_BATCH] * PER_PARTITION
    return shared_broker


def fetch_request(parts, max_bytes, version):
    topics = []
    for topic, p, offset, pmb in parts:
        if not topics or topics[-1]["topic"] != topic:
            topics.append({"topic": topic, "partitions": []})
        topics[-1]["partitions"].append({"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                         "log_start_offset": -1, "partition_max_bytes": pmb})
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "topics": topics}


def raw_fetch(c: RawClient, parts, max_bytes=0x7FFFFFFF, version=4) -> dict:
    """{(topic, p): (error, high watermark, record bytes)} of one Fetch."""
    resp = c.call(FETCH, version, fetch_request(parts, max_bytes, version))
    return {(t["topic"], p["partition_index"]): (p["error_code"], p["high_watermark"], bytes(p["records"] or b""))
            for t in resp["responses"] for p in t["partitions"]}


def fetch_v4(c, parts, max_bytes):
    return raw_fetch(c, parts, max_bytes, 4)


# ------------------------------------------------------------------------------------------- real clients

def test_kafka_python_reads_1mib_records_from_two_partitions(big):
    got = kafka_python_consume(big.bootstrap, TOPIC, 6, partitions=PARTITIONS)
    assert essentials(got) == expected()


def test_aiokafka_reads_1mib_records_from_two_partitions(big):
    got = aiokafka_consume(big.bootstrap, TOPIC, 6, partitions=PARTITIONS)
    assert essentials(got) == expected()


def test_aiokafka_with_a_small_response_budget(big):
    # fetch_max_bytes 1.5 MB: after the first partition's 1 MiB batch, 0.5 MB are left for the second.
    got = aiokafka_consume(big.bootstrap, TOPIC, 6, partitions=PARTITIONS, fetch_max_bytes=1_500_000,
                           max_partition_fetch_bytes=4 * MIB)
    assert essentials(got) == expected()


def test_confluent_reads_1mib_records_from_two_partitions(big):
    got = confluent_consume(big.bootstrap, TOPIC, 6, partitions=PARTITIONS)
    assert essentials(got) == expected()


def test_kafka_python_fetch_v3_down_converted(big):
    # api_version 0.10.1: Fetch v3, magic 1 -- the down-converted path under the same KIP-74 rule.
    got = kafka_python_consume(big.bootstrap, TOPIC, 6, partitions=PARTITIONS, api_version=(0, 10, 1))
    assert essentials(got) == expected()


def test_kafka_python_fetch_v2_keeps_kafka_0_10_limits(big):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.consumer.fetcher import RecordTooLargeError

    # Fetch v2 has no progress guarantee: a record larger than max_partition_fetch_bytes arrives cut, and a 0.10.0
    # client raises RecordTooLargeError -- Kafka 0.10's behaviour, which old clients are written for.
    consumer = KafkaConsumer(bootstrap_servers=big.bootstrap, group_id=None, enable_auto_commit=False,
                             api_version=(0, 10, 0), fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        with pytest.raises(RecordTooLargeError) as exc:
            for _ in range(100):
                consumer.poll(timeout_ms=200)
        assert "Partition=Offset" in str(exc.value)
    finally:
        consumer.close()
    # ... and reads everything once its fetch size holds a record (down-converted to magic 0).
    got = kafka_python_consume(big.bootstrap, TOPIC, 6, partitions=PARTITIONS, api_version=(0, 10, 0),
                               max_partition_fetch_bytes=2 * MIB)
    assert essentials(got) == expected()


# --------------------------------------------------------------------------------------------- raw bytes

@pytest.mark.parametrize("version", [4, 11])
def test_second_partition_gets_no_records_not_a_cut_batch(big, version):
    with RawClient(big) as c:
        got = raw_fetch(c, [(TOPIC, 0, 0, MIB), (TOPIC, 1, 0, MIB)], 50 * MIB, version)
    err0, hw0, data0 = got[(TOPIC, 0)]
    assert (err0, hw0, len(data0)) == (0, 3, STORED_BATCH)   # larger than its 1 MiB limit: the progress guarantee
    assert got[(TOPIC, 1)] == (0, 3, b"")                     # error NONE, high watermark 3, no bytes


def test_v3_down_converted_second_partition_gets_no_records(big):
    with RawClient(big) as c:
        got = raw_fetch(c, [(TOPIC, 0, 0, MIB), (TOPIC, 1, 0, MIB)], 50 * MIB, 3)
    first = list(legacy.iter_messages(got[(TOPIC, 0)][2]))
    assert [(m.offset, m.magic, m.value) for m in first] == [(0, 1, value(0, 0))]
    assert got[(TOPIC, 1)] == (0, 3, b"")


def test_v2_cut_first_message_then_nothing(big):
    with RawClient(big) as c:
        got = raw_fetch(c, [(TOPIC, 0, 0, MIB), (TOPIC, 1, 0, MIB)], version=2)
    cut = got[(TOPIC, 0)][2]
    assert len(cut) == MIB                                   # cut at partition_max_bytes, like Kafka 0.10
    assert list(legacy.iter_messages(cut, allow_partial_tail=True)) == []
    assert len(got[(TOPIC, 1)][2]) == MIB                    # v0-v2: no progress guarantee, so no KIP-74 emptying


def test_broker_fetch_max_bytes_bounds_every_version(broker_factory):
    b = broker_factory(overrides={"fetch.max.bytes": 3 * MIB // 2})
    wait_for_controller(b)
    create_topic(b.bootstrap, TOPIC, len(PARTITIONS), TOPIC_CONFIG)
    recs = [Rec(p, None, value(p, i), (), None) for i in range(PER_PARTITION) for p in PARTITIONS]
    kafka_python_produce(b.bootstrap, TOPIC, recs, max_request_size=4 * MIB)
    parts = [(TOPIC, 0, 0, 8 * MIB), (TOPIC, 1, 0, 8 * MIB)]
    with RawClient(b) as c:
        # v4 asks for 50 MiB; the broker allows 1.5 MiB: a whole batch and a cut one (as Kafka sends), then
        # nothing is left for the second partition.
        got = raw_fetch(c, parts, 50 * MIB, 4)
        assert [len(got[(TOPIC, p)][2]) for p in PARTITIONS] == [3 * MIB // 2, 0]
        assert [h.size for _pos, h in iter_batches(got[(TOPIC, 0)][2])] == [STORED_BATCH]
        # v2 names no response limit: the broker key is its bound, converted bytes counted. 1.5 MiB of stored
        # bytes hold one whole batch: one 1 048 610-byte magic 0 message. What is left (524 254 bytes) cannot hold
        # the second partition's first message, and the budget -- not the client's 8 MiB -- is what cuts it: no
        # records (a cut would make the 0.10 client raise RecordTooLargeError for a fetch size that is fine).
        got = raw_fetch(c, parts, version=2)
        assert [len(got[(TOPIC, p)][2]) for p in PARTITIONS] == [MIB + 34, 0]
        assert [(m.offset, m.value) for m in legacy.iter_messages(got[(TOPIC, 0)][2])] == [(0, value(0, 0))]
        assert got[(TOPIC, 1)] == (0, 3, b"")
    # The consumers still read everything, at their defaults (and a 0.10.0 one with a 2 MiB fetch size).
    assert essentials(kafka_python_consume(b.bootstrap, TOPIC, 6, partitions=PARTITIONS)) == expected()
    assert essentials(kafka_python_consume(b.bootstrap, TOPIC, 6, partitions=PARTITIONS, api_version=(0, 10, 0),
                                           max_partition_fetch_bytes=2 * MIB)) == expected()
    assert essentials(aiokafka_consume(b.bootstrap, TOPIC, 6, partitions=PARTITIONS)) == expected()
