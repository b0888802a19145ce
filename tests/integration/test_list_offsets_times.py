"""ListOffsets by timestamp inside one multi-record batch, with real clients (issue 8, section 2).

A lingering confluent-kafka producer puts ten records with timestamps t0, t0+10, ..., t0+90 into ONE batch (checked
in the segment file). Kafka answers a timestamp query with the first *record* whose timestamp is >= the target --
its own offset and timestamp (FileRecords.searchForTimestamp looks inside the batch) -- not the batch's base offset
with the batch's max timestamp. Checked with confluent-kafka and kafka-python offsets_for_times (and aiokafka), on
an uncompressed and a gzip batch, plus LogAppendTime (every record carries the batch's time: the first record).
"""
from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_clients_common import (
    Rec, confluent_consume, confluent_produce, create_topic, now_ms, segment_batches, segment_path)
from tests.integration.test_durability import RawClient
from tests.integration.test_fetch_limits import wait_for_controller

pytestmark = pytest.mark.timeout(180)

N = 10
STEP = 10


def produce_one_batch(broker, topic: str, t0: int, codec: str) -> None:
    recs = [Rec(0, b"k%d" % i, b"value-%d" % i, (), t0 + STEP * i) for i in range(N)]
    reports = confluent_produce(broker.bootstrap, topic, recs, **{"linger.ms": 1000, "compression.type": codec})
    assert sorted(r[1] for r in reports) == list(range(N))
    batches = segment_batches(segment_path(broker, topic, 0))
    assert [(h.base_offset, h.records_count) for h in batches] == [(0, N)], "the producer did not batch"
    assert batches[0].max_timestamp == t0 + STEP * (N - 1)


# target offset -> the record kafka must name: first timestamp >= target
def expected(t0: int) -> dict[int, tuple[int, int]]:
    out = {t0 - 5000: (0, t0), t0: (0, t0), t0 + 1: (1, t0 + 10), t0 + 25: (3, t0 + 30), t0 + 30: (3, t0 + 30),
           t0 + 89: (9, t0 + 90), t0 + 90: (9, t0 + 90)}
    return out


@pytest.fixture(scope="module", params=["none", "gzip"])
def batch_topic(request, shared_broker):
    topic = f"times-{request.param}"
    wait_for_controller(shared_broker)
    create_topic(shared_broker.bootstrap, topic, 1)
    t0 = now_ms() - 60_000
    produce_one_batch(shared_broker, topic, t0, request.param)
    return topic, t0


def test_confluent_offsets_for_times_inside_a_batch(shared_broker, batch_topic):
    from confluent_kafka import Consumer, TopicPartition

    topic, t0 = batch_topic
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "unused-" + topic})
    try:
        for ts, (offset, _ts) in expected(t0).items():
            (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert tp.error is None
            assert tp.offset == offset, (ts - t0, tp.offset, offset)
        (tp,) = consumer.offsets_for_times([TopicPartition(topic, 0, t0 + 91)], timeout=10)
        assert tp.offset == -1  # nothing at or after it (librdkafka: OFFSET_END)
    finally:
        consumer.close()
    # Reading from the answer starts at exactly that record.
    got = confluent_consume(shared_broker.bootstrap, topic, N - 3, start=3)
    assert [(g.offset, g.timestamp) for g in got] == [(i, t0 + STEP * i) for i in range(3, N)]


def test_kafka_python_offsets_for_times_inside_a_batch(shared_broker, batch_topic):
    from kafka import KafkaConsumer, TopicPartition

    topic, t0 = batch_topic
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None)
    try:
        tp = TopicPartition(topic, 0)
        for ts, want in expected(t0).items():
            got = consumer.offsets_for_times({tp: ts})[tp]
            assert (got.offset, got.timestamp) == want, (ts - t0, got, want)
            assert got.leader_epoch == 0  # the batch's partition leader epoch (ListOffsets v4+)
        assert consumer.offsets_for_times({tp: t0 + 91})[tp] is None
    finally:
        consumer.close()


def test_aiokafka_offsets_for_times_inside_a_batch(shared_broker, batch_topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, t0 = batch_topic

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            out = {}
            for ts in expected(t0):
                got = (await consumer.offsets_for_times({tp: ts}))[tp]
                out[ts] = (got.offset, got.timestamp)
            return out, (await consumer.offsets_for_times({tp: t0 + 91}))[tp]
        finally:
            await consumer.stop()

    answers, beyond = asyncio.run(run())
    assert answers == expected(t0)
    assert beyond is None


def test_v0_and_v1_answer_the_record_too(shared_broker, batch_topic):
    topic, t0 = batch_topic
    with RawClient(shared_broker) as c:
        for version in (0, 1):
            req = {"replica_id": -1, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "timestamp": t0 + 25, "max_num_offsets": 1, "current_leader_epoch": -1}]}]}
            (p,) = c.call(2, version, req)["topics"][0]["partitions"]
            if version == 0:
                assert p["old_style_offsets"] == [3]
            else:
                assert (p["offset"], p["timestamp"]) == (3, t0 + 30)


def test_log_append_time_names_the_first_record_of_the_batch(shared_broker):
    from kafka import KafkaConsumer, TopicPartition

    wait_for_controller(shared_broker)
    # The case needs librdkafka to put the N records in one batch (linger.ms 1000 does, nearly always); on a
    # loaded machine it was once seen to send two, which tests nothing here: try again on a fresh topic (<= 3).
    for attempt in range(3):
        topic = f"times-lat-{attempt}"
        create_topic(shared_broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
        before = now_ms()
        confluent_produce(shared_broker.bootstrap, topic, [Rec(0, None, b"x%d" % i, (), None) for i in range(N)],
                          **{"linger.ms": 1000})
        batches = segment_batches(segment_path(shared_broker, topic, 0))
        if len(batches) == 1:
            break
    (batch,) = batches
    append_time = batch.max_timestamp
    assert batch.records_count == N and append_time >= before
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None)
    try:
        tp = TopicPartition(topic, 0)
        got = consumer.offsets_for_times({tp: before - 1000})[tp]
        assert (got.offset, got.timestamp) == (0, append_time)
        got = consumer.offsets_for_times({tp: append_time})[tp]
        assert (got.offset, got.timestamp) == (0, append_time)
        assert consumer.offsets_for_times({tp: append_time + 1})[tp] is None
    finally:
        consumer.close()
