"""Cross-client codec matrix against one real kbroker-server process.

Every codec (none, gzip, snappy, lz4, zstd) is produced by one client and consumed by another, and the codec of
the stored batches is read back from the segment file. Client roles:

- ``confluent`` / ``kcat``: librdkafka 2.x (v2 batches); kcat cannot set timestamps, so its records are checked to
  carry a CreateTime inside the produce call's wall-clock window and all its records in one partition share headers.
- ``kafka-python``: negotiated versions (v2 batches, headers).
- ``kafka-python-0.10.1``: ``api_version=(0, 10, 1)``: Produce v2 magic-1 message sets (the broker up-converts them
  to v2 batches keeping the codec) and Fetch v3 (the broker down-converts to magic 1: no headers). zstd needs
  magic 2, so those pairs are skipped in both directions.
- ``aiokafka``: v2 batches, headers.

Each case uses its own 2-partition topic and 5 records per partition (keyed, unkeyed, one null value).
"""
import pytest

from tests.integration.test_clients_common import (CODECS, aiokafka_consume, aiokafka_produce,
                                                   assert_stored_codec, confluent_consume, confluent_produce,
                                                   create_topic, expected, kafka_python_consume,
                                                   kafka_python_produce, kcat_consume, kcat_produce, kp_codec,
                                                   now_ms, sample_records)

pytestmark = pytest.mark.timeout(120)

KP_0101 = (0, 10, 1)
PARTITIONS = (0, 1)
PER_PARTITION = 5

# (producer, consumer): librdkafka <-> both kafka-python modes, kafka-python -> kcat, aiokafka and kcat across.
PAIRS = [
    ("confluent", "kafka-python"),
    ("kafka-python", "confluent"),
    ("kafka-python", "kcat"),
    ("kafka-python-0.10.1", "confluent"),
    ("kafka-python-0.10.1", "kcat"),
    ("confluent", "kafka-python-0.10.1"),
    ("aiokafka", "kafka-python-0.10.1"),
    ("kcat", "aiokafka"),
    ("aiokafka", "confluent"),
]
HEADERS = {"confluent": True, "kcat": True, "kafka-python": True, "kafka-python-0.10.1": False, "aiokafka": True}
LIBRDKAFKA = {"confluent", "kcat"}


def produce(client, broker, topic, recs, codec):
    if client == "confluent":
        confluent_produce(broker.bootstrap, topic, recs, **{"compression.type": codec})
    elif client == "kafka-python":
        kafka_python_produce(broker.bootstrap, topic, recs, compression_type=kp_codec(codec))
    elif client == "kafka-python-0.10.1":
        kafka_python_produce(broker.bootstrap, topic, recs, api_version=KP_0101, compression_type=kp_codec(codec))
    elif client == "aiokafka":
        aiokafka_produce(broker.bootstrap, topic, recs, compression_type=kp_codec(codec))
    elif client == "kcat":
        for p in PARTITIONS:
            mine = [r for r in recs if r.partition == p]
            kcat_produce(broker.bootstrap, topic, p, [(r.key, r.value) for r in mine], headers=mine[0].headers,
                         codec=codec, nulls=True)
    else:
        raise AssertionError(client)


def consume(client, broker, topic, count):
    if client == "confluent":
        return confluent_consume(broker.bootstrap, topic, count, partitions=PARTITIONS)
    if client == "kafka-python":
        return kafka_python_consume(broker.bootstrap, topic, count, partitions=PARTITIONS)
    if client == "kafka-python-0.10.1":
        return kafka_python_consume(broker.bootstrap, topic, count, partitions=PARTITIONS, api_version=KP_0101)
    if client == "aiokafka":
        return aiokafka_consume(broker.bootstrap, topic, count, partitions=PARTITIONS)
    if client == "kcat":
        per = count // len(PARTITIONS)
        return [g for p in PARTITIONS for g in kcat_consume(broker.bootstrap, topic, p, per)]
    raise AssertionError(client)


def records_for(producer, consumer, tag):
    """What `producer` can send and `consumer` can print: kcat needs delimiter-free payloads, one header set per
    partition and no explicit timestamps; kcat's output needs ASCII header values; magic 1 has no headers."""
    kcat_in = producer == "kcat"
    recs = sample_records(tag, partitions=len(PARTITIONS), per_partition=PER_PARTITION,
                          headers=HEADERS[producer], binary=not kcat_in and consumer != "kcat",
                          timestamps=not kcat_in)
    if kcat_in:
        recs = [r._replace(headers=(("src", b"kcat-%d" % r.partition), ("dup", b"x"), ("dup", b"y")))
                for r in recs]
    return recs


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer,consumer", PAIRS, ids=[f"{p}->{c}" for p, c in PAIRS])
def test_codec_matrix(shared_broker, producer, consumer, codec):
    if codec == "zstd" and "kafka-python-0.10.1" in (producer, consumer):
        pytest.skip("zstd needs magic 2 (KIP-110): no 0.10.1 message format carries it")
    if "kcat" in (producer, consumer):
        from tests.integration.harness import require_binary
        require_binary("kcat")
    topic = f"mx-{producer}-{consumer}-{codec}".replace(".", "_")
    create_topic(shared_broker.bootstrap, topic, partitions=len(PARTITIONS))
    recs = records_for(producer, consumer, f"{codec}:")
    before = now_ms()
    produce(producer, shared_broker, topic, recs, codec)
    after = now_ms()

    got = consume(consumer, shared_broker, topic, len(recs))
    want = expected(recs, headers=HEADERS[producer] and HEADERS[consumer], timestamps=producer != "kcat")
    if producer == "kcat":
        assert all(before <= g.timestamp <= after for g in got), (before, [g.timestamp for g in got], after)
        got = [g._replace(timestamp=None) for g in got]
    assert got == want
    for p in PARTITIONS:
        assert_stored_codec(shared_broker, topic, p, codec, librdkafka=producer in LIBRDKAFKA)


def test_matrix_covers_every_codec_both_ways():
    """Each codec is produced by librdkafka and read by a Python client, and the other way round."""
    producers = {p for p, _ in PAIRS}
    consumers = {c for _, c in PAIRS}
    assert {"confluent", "kcat"} <= producers and {"confluent", "kcat"} <= consumers
    assert {"kafka-python", "kafka-python-0.10.1", "aiokafka"} <= producers & consumers
