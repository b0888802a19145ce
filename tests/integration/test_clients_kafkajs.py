"""kafkajs 2.2.4 (node, tests/js/kafkajs_roundtrip.js) against a real kbroker-server process.

The driver has no admin mode, so topics come from confluent's AdminClient; it consumes in its group-less ``fetch``
mode (ListOffsets + Fetch straight to the leader). Shown: keyed, unkeyed and null-value records with headers
(duplicate names kept in order) and explicit timestamps round-trip byte-exact per partition with the right
offsets; kafkajs's gzip batches are stored as gzip and read exactly by confluent-kafka; kafkajs reads what
confluent-kafka produced; kafkajs's idempotent producer appends each record exactly once.
"""
import pytest

from tests.integration.test_clients_common import (Rec, assert_stored_codec, confluent_consume, confluent_produce,
                                                   create_topic, expected, kafkajs_records, kafkajs_spec_messages,
                                                   now_ms, sample_records, segment_batches, segment_path)

pytestmark = pytest.mark.timeout(180)


def produce(kafkajs, broker, topic, recs, **spec):
    result = kafkajs({"brokers": [broker.bootstrap], "topic": topic, "mode": "produce",
                      "messages": kafkajs_spec_messages(recs), **spec})
    assert all(r["errorCode"] == 0 for r in result["results"]), result
    return result


def fetch(kafkajs, broker, topic, count, partitions):
    result = kafkajs({"brokers": [broker.bootstrap], "topic": topic, "mode": "fetch", "count": count,
                      "partitions": list(partitions), "timeoutMs": 30_000})
    assert "error" not in result, result
    return kafkajs_records(result)


def test_kafkajs_roundtrip(shared_broker, kafkajs):
    topic = "kjs-roundtrip"
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    recs = sample_records("kjs", partitions=3, per_partition=6)
    result = produce(kafkajs, shared_broker, topic, recs)
    # One send = one batch per partition, each starting at offset 0 of a fresh partition.
    assert result["offsets"] == {"0": 0, "1": 0, "2": 0}
    got = fetch(kafkajs, shared_broker, topic, len(recs), (0, 1, 2))
    assert got == expected(recs)
    assert any(g.key is None for g in got) and any(g.value is None for g in got)


def test_kafkajs_gzip_read_by_confluent(shared_broker, kafkajs):
    topic = "kjs-gzip"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    recs = sample_records("kjsgz", partitions=2, per_partition=8)
    produce(kafkajs, shared_broker, topic, recs, compression="gzip", acks=1)
    assert confluent_consume(shared_broker.bootstrap, topic, len(recs), partitions=(0, 1)) == expected(recs)
    for p in (0, 1):
        assert_stored_codec(shared_broker, topic, p, "gzip")


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_reads_confluent(shared_broker, kafkajs, codec):
    topic = f"kjs-from-confluent-{codec}"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    recs = sample_records("cf2kjs", partitions=2, per_partition=7)
    confluent_produce(shared_broker.bootstrap, topic, recs, **{"compression.type": codec})
    assert_stored_codec(shared_broker, topic, 0, codec, librdkafka=True)
    assert fetch(kafkajs, shared_broker, topic, len(recs), (0, 1)) == expected(recs)


def test_kafkajs_idempotent_producer(shared_broker, kafkajs):
    topic = "kjs-idempotent"
    create_topic(shared_broker.bootstrap, topic, partitions=1)
    ts = now_ms()
    recs = [Rec(0, b"k%d" % i, b"kjs-idem-%03d" % i, (("n", b"%d" % i),), ts + i) for i in range(50)]
    produce(kafkajs, shared_broker, topic, recs, idempotent=True)
    (h,) = segment_batches(segment_path(shared_broker, topic, 0))
    assert (h.base_offset, h.records_count, h.base_sequence, h.producer_epoch) == (0, 50, 0, 0)
    assert h.producer_id >= 0
    assert fetch(kafkajs, shared_broker, topic, 50, (0,)) == expected(recs)
