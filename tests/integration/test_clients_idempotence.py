"""Idempotent produce over a raw socket against a real kbroker-server process.

A producer id comes from InitProducerId v1; batches are built with ``kbroker.record.build_batch`` and sent as
Produce v7 (non-flexible: request header v1, response header v0), all encoded/decoded with our own schemas
(``kbroker.protocol.apis.APIS``). Shown, with the log end offset read back through ListOffsets v1 (latest):
- a retried batch (same producer id/epoch/base sequence/count) gets the SAME base offset and appends nothing;
- a retry of an older batch among the last 5 is still recognised as a duplicate;
- a sequence gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER (45), a first batch not at sequence 0 too;
- the records in the log are exactly the non-duplicate batches (read back with confluent-kafka).
"""
import pytest

from kbroker.protocol.apis import APIS
from kbroker.record import Record, build_batch
from tests.integration.harness import raw_request
from tests.integration.test_clients_common import confluent_consume, create_topic, now_ms

pytestmark = pytest.mark.timeout(120)

PRODUCE, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 2, 22
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


class Raw:
    def __init__(self, broker):
        self.broker = broker
        self.correlation = 100

    def call(self, api_key, version, msg):
        api = APIS[api_key]
        assert api.request_header_version(version) == 1 and api.response_header_version(version) == 0
        self.correlation += 1
        body = api.encode_request(version, msg).getvalue()
        rest = raw_request(self.broker.host, self.broker.port, api_key, version, body,
                           correlation_id=self.correlation, client_id="kbroker-idempotence-test")
        return api.decode_response(version, rest)

    def init_producer_id(self):
        resp = self.call(INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60_000})
        assert resp["error_code"] == 0
        return resp["producer_id"], resp["producer_epoch"]

    def produce(self, topic, batch, partition=0):
        resp = self.call(PRODUCE, 7, {"transactional_id": None, "acks": -1, "timeout_ms": 10_000,
                                      "topic_data": [{"name": topic,
                                                      "partition_data": [{"index": partition, "records": batch}]}]})
        (t,) = resp["responses"]
        (p,) = t["partition_responses"]
        return p["error_code"], p["base_offset"]

    def log_end_offset(self, topic, partition=0):
        resp = self.call(LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
        (p,) = resp["topics"][0]["partitions"]
        assert p["error_code"] == 0
        return p["offset"]


def batch(pid, epoch, base_seq, n, tag, ts):
    recs = [Record(i, ts + i, b"key-%d" % (base_seq + i), b"%s-%d" % (tag, base_seq + i), ()) for i in range(n)]
    return build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=base_seq)


def test_retried_batch_is_not_duplicated_and_gaps_are_refused(shared_broker):
    topic = "idem-raw"
    create_topic(shared_broker.bootstrap, topic, partitions=1)
    raw = Raw(shared_broker)
    pid, epoch = raw.init_producer_id()
    assert pid >= 0 and epoch == 0
    ts = now_ms()

    first = batch(pid, epoch, 0, 3, b"a", ts)
    assert raw.produce(topic, first) == (0, 0)
    assert raw.log_end_offset(topic) == 3
    # The retry: byte-identical batch, same producer id/epoch/sequence -> same base offset, nothing appended.
    assert raw.produce(topic, first) == (0, 0)
    assert raw.log_end_offset(topic) == 3

    second = batch(pid, epoch, 3, 2, b"b", ts)
    assert raw.produce(topic, second) == (0, 3)
    assert raw.log_end_offset(topic) == 5
    # A late retry of the older batch (still among the last 5 retained) is a duplicate too.
    assert raw.produce(topic, first) == (0, 0)
    assert raw.produce(topic, second) == (0, 3)
    assert raw.log_end_offset(topic) == 5

    # Sequence gap: next expected is 5, 7 is refused and nothing is appended.
    error, _ = raw.produce(topic, batch(pid, epoch, 7, 1, b"gap", ts))
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert raw.log_end_offset(topic) == 5
    # A fresh producer must start at sequence 0.
    pid2, epoch2 = raw.init_producer_id()
    assert pid2 != pid
    error, _ = raw.produce(topic, batch(pid2, epoch2, 1, 1, b"late", ts))
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert raw.log_end_offset(topic) == 5
    # The in-order continuation is still accepted after the refusals.
    assert raw.produce(topic, batch(pid, epoch, 5, 1, b"c", ts)) == (0, 5)
    assert raw.log_end_offset(topic) == 6

    got = confluent_consume(shared_broker.bootstrap, topic, 6)
    assert [(g.offset, g.key, g.value, g.timestamp) for g in got] == [
        (0, b"key-0", b"a-0", ts), (1, b"key-1", b"a-1", ts + 1), (2, b"key-2", b"a-2", ts + 2),
        (3, b"key-3", b"b-3", ts), (4, b"key-4", b"b-4", ts + 1), (5, b"key-5", b"c-5", ts)]


def test_confluent_idempotent_producer_no_duplicates(shared_broker):
    """librdkafka's idempotent producer (InitProducerId, sequenced batches) with retries enabled: exact count."""
    from tests.integration.test_clients_common import Rec, confluent_produce, expected

    topic = "idem-confluent"
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    ts = now_ms()
    recs = [Rec(i % 3, b"k%d" % i, b"idempotent-%05d" % i, (("i", b"%d" % i),), ts + i) for i in range(600)]
    reports = confluent_produce(shared_broker.bootstrap, topic, recs,
                                **{"enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 50})
    assert sorted(off for p, off, _, _ in reports if p == 2) == list(range(200))
    got = confluent_consume(shared_broker.bootstrap, topic, 600, partitions=(0, 1, 2))
    assert got == expected(recs)
