"""aiokafka against a real kbroker-server process (one broker for the module, a topic per test).

Shown: keyed/unkeyed/null-value records with headers and explicit timestamps round-trip byte-exact (aiokafka
producer, aiokafka consumer with partition assignment), acks 0/1/all deliver exactly the produced records, and
records produced with aiokafka read back exactly by confluent-kafka (and the reverse).
"""
import pytest

from tests.integration.test_clients_common import (Rec, aiokafka_consume, aiokafka_produce, confluent_consume,
                                                   confluent_produce, create_topic, expected, now_ms,
                                                   sample_records)

pytestmark = pytest.mark.timeout(120)


def test_roundtrip_keys_values_headers_timestamps(shared_broker):
    topic = "aio-roundtrip"
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    recs = sample_records("aio", partitions=3, per_partition=6)
    metas = aiokafka_produce(shared_broker.bootstrap, topic, recs)
    nxt = {}
    for r, m in zip(recs, metas):
        assert (m.partition, m.offset) == (r.partition, nxt.get(r.partition, 0))
        nxt[r.partition] = m.offset + 1
    got = aiokafka_consume(shared_broker.bootstrap, topic, len(recs), partitions=(0, 1, 2))
    assert got == expected(recs)
    # ... and another client reads the same bytes.
    assert confluent_consume(shared_broker.bootstrap, topic, len(recs), partitions=(0, 1, 2)) == expected(recs)


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(shared_broker, acks):
    topic = f"aio-acks-{acks}"
    create_topic(shared_broker.bootstrap, topic, partitions=1)
    t0 = now_ms()
    recs = [Rec(0, b"k%d" % i if i % 2 else None, b"aio-%04d" % i, (), t0 + i) for i in range(100)]
    metas = aiokafka_produce(shared_broker.bootstrap, topic, recs, acks=acks)
    assert len(metas) == 100
    assert aiokafka_consume(shared_broker.bootstrap, topic, 100) == expected(recs)


def test_consumes_what_confluent_produced(shared_broker):
    topic = "aio-from-confluent"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    recs = sample_records("cf2aio", partitions=2, per_partition=5)
    confluent_produce(shared_broker.bootstrap, topic, recs, **{"compression.type": "lz4"})
    assert aiokafka_consume(shared_broker.bootstrap, topic, len(recs), partitions=(0, 1)) == expected(recs)
