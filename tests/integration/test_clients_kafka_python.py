"""kafka-python against a real kbroker-server process, in two modes.

- ``default``: version negotiated through ApiVersions (v2 record batches: headers, Produce v3+, Fetch v4+).
- ``0.10.1``: ``api_version=(0, 10, 1)`` pins the 0.10.1 protocol: Produce v2 with magic-1 message sets (the
  broker up-converts them to v2 batches) and Fetch v3 (the broker down-converts to magic 1). Magic 1 has
  timestamps but no headers, so that mode produces none.

One broker for the module; each test uses its own topic. Topics are created with kafka-python's KafkaAdminClient.
"""
import pytest

from tests.integration.test_clients_common import (Rec, expected, kafka_python_consume, kafka_python_produce, now_ms,
                                                   sample_records)

pytestmark = pytest.mark.timeout(120)

MODES = {"default": None, "0.10.1": (0, 10, 1)}


@pytest.fixture(params=list(MODES))
def mode(request):
    return request.param


def create_topic_kp(bootstrap, topic, partitions, api_version):
    from kafka.admin import KafkaAdminClient, NewTopic

    kw = {"bootstrap_servers": bootstrap}
    if api_version is not None:
        kw["api_version"] = api_version
    admin = KafkaAdminClient(**kw)
    try:
        resp = admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=30_000)
        errs = [t[1] for t in resp.topic_errors] if hasattr(resp, "topic_errors") else []
        assert set(errs) <= {0}, resp
        assert topic in admin.list_topics()
    finally:
        admin.close()


def test_roundtrip_keys_values_headers_timestamps(shared_broker, mode):
    api_version = MODES[mode]
    headers = api_version is None
    topic = f"kp-roundtrip-{mode}"
    create_topic_kp(shared_broker.bootstrap, topic, 3, api_version)
    recs = sample_records("kp", partitions=3, per_partition=6, headers=headers)
    metas = kafka_python_produce(shared_broker.bootstrap, topic, recs, api_version=api_version)
    want = expected(recs)
    # RecordMetadata follows produce order: partition and offset of each record as the consumer will see it.
    nxt = {}
    for r, m in zip(recs, metas):
        assert (m.topic, m.partition, m.offset) == (topic, r.partition, nxt.get(r.partition, 0))
        nxt[r.partition] = m.offset + 1
    got = kafka_python_consume(shared_broker.bootstrap, topic, len(recs), partitions=(0, 1, 2),
                               api_version=api_version)
    assert got == want
    assert any(g.key is None for g in got) and any(g.value is None for g in got)


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(shared_broker, mode, acks):
    api_version = MODES[mode]
    topic = f"kp-acks-{acks}-{mode}"
    create_topic_kp(shared_broker.bootstrap, topic, 2, api_version)
    t0 = now_ms()
    recs = [Rec(i % 2, None if i % 4 else b"k%d" % i, b"kp-acks-%04d" % i, (), t0 + i) for i in range(200)]
    metas = kafka_python_produce(shared_broker.bootstrap, topic, recs, api_version=api_version, acks=acks)
    assert len(metas) == 200
    if acks != 0:  # acks=0 gets no response, kafka-python's offsets then are -1 + index in batch: meaningless
        assert [m.offset for m in metas if m.partition == 1] == list(range(100))
    got = kafka_python_consume(shared_broker.bootstrap, topic, 200, partitions=(0, 1), api_version=api_version)
    assert got == expected(recs)


def test_one_megabyte_value(shared_broker, mode):
    api_version = MODES[mode]
    topic = f"kp-big-{mode}"
    create_topic_kp(shared_broker.bootstrap, topic, 1, api_version)
    big = bytes((i * 131) % 253 for i in range(1_000_000))
    ts = now_ms()
    recs = [Rec(0, b"big", big, (), ts), Rec(0, None, b"after", (), ts + 1)]
    metas = kafka_python_produce(shared_broker.bootstrap, topic, recs, api_version=api_version,
                                 max_request_size=1_048_576, linger_ms=0)
    assert [m.offset for m in metas] == [0, 1]
    got = kafka_python_consume(shared_broker.bootstrap, topic, 2, api_version=api_version)
    assert got == expected(recs)
    assert len(got[0].value) == 1_000_000


def test_null_keys_and_values(shared_broker, mode):
    api_version = MODES[mode]
    topic = f"kp-nulls-{mode}"
    create_topic_kp(shared_broker.bootstrap, topic, 1, api_version)
    ts = now_ms()
    # (kafka-python refuses key=None with value=None client-side; confluent/kcat tests cover that pair.)
    recs = [Rec(0, b"k", None, (), ts + 1), Rec(0, None, b"v", (), ts + 2), Rec(0, b"", b"", (), ts + 3),
            Rec(0, b"", None, (), ts + 4)]
    kafka_python_produce(shared_broker.bootstrap, topic, recs, api_version=api_version)
    got = kafka_python_consume(shared_broker.bootstrap, topic, 4, api_version=api_version)
    # Null and empty stay distinct in both message formats.
    assert [(g.key, g.value) for g in got] == [(b"k", None), (None, b"v"), (b"", b""), (b"", None)]
    assert got == expected(recs)
