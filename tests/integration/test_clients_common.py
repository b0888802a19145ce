"""Shared helpers for the real-client integration tests (tests/integration/test_clients_*.py). No tests here.

Data model:
    ``Rec(partition, key, value, headers, timestamp)`` is one record to produce; ``headers`` is a tuple of
    ``(str, bytes)`` pairs in wire order (duplicate names allowed), ``timestamp`` is CreateTime ms or None (the
    client stamps it). ``Got(partition, offset, key, value, headers, timestamp)`` is one consumed record.
    ``expected(recs, base=0)`` turns what was produced into the exact ``Got`` list a consumer must see on a fresh
    topic: per partition, in produce order, offsets base, base+1, ...; the list is sorted by (partition, offset),
    which is also how every ``*_consume`` helper returns its records.

Every client helper takes the broker's ``bootstrap`` ("host:port"), produces/consumes with partition assignment
only (consumer groups are not served yet), waits with a deadline, and raises AssertionError with what it saw on
timeout. Codec names are Kafka's: none, gzip, snappy, lz4, zstd.
"""
from __future__ import annotations

import asyncio
import struct
import time
from collections import namedtuple
from pathlib import Path

from tests.integration.harness import b64, probe_api_versions, run_kcat, unb64

Rec = namedtuple("Rec", "partition key value headers timestamp")
Got = namedtuple("Got", "partition offset key value headers timestamp")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# The topic creation and client deadlines: generous for a 2-core box shared with other test runs.
TIMEOUT = 30.0


def now_ms() -> int:
    return int(time.time() * 1000)


def sample_records(tag: str, partitions: int = 3, per_partition: int = 6, t0: int | None = None,
                   headers: bool = True, binary: bool = True, nulls: bool = True,
                   timestamps: bool = True) -> list[Rec]:
    """Deterministic records spread over `partitions`, produced round-robin (so per-partition order matters).

    Per partition p, record j: key ``<tag>-k<p>.<j>`` except every 3rd (j % 3 == 1) which is unkeyed (None);
    value = tag + ``bytes`` cycling through all 256 byte values (``binary``) or printable ASCII, length 40 + 7j;
    with ``nulls`` the record j == 2 has value None (a tombstone-like record) and key kept; headers (``headers``)
    on even j: ("trace", b"\\x00\\x01\\xfe\\xff" or ascii), ("dup", b"a"), ("dup", b"b"); odd j: none.
    Timestamps (``timestamps``): t0 + 1000*j + p, t0 defaulting to a minute ago (inside retention).
    """
    t0 = (now_ms() - 60_000) if t0 is None else t0
    out = []
    for j in range(per_partition):
        for p in range(partitions):
            key = None if j % 3 == 1 else f"{tag}-k{p}.{j}".encode()
            if nulls and j == 2:
                value = None
            elif binary:
                value = tag.encode() + bytes((p * 31 + j * 7 + i) % 256 for i in range(40 + 7 * j))
            else:
                value = tag.encode() + bytes(0x21 + (p * 31 + j * 7 + i) % 90 for i in range(40 + 7 * j))
            hdrs = ()
            if headers and j % 2 == 0:
                trace = b"\x00\x01\xfe\xff" if binary else b"t-%d-%d" % (p, j)
                hdrs = (("trace", trace), ("dup", b"a"), ("dup", b"b"))
            ts = t0 + 1000 * j + p if timestamps else None
            out.append(Rec(p, key, value, hdrs, ts))
    return out


def expected(recs, base: int = 0, headers: bool = True, timestamps: bool = True) -> list[Got]:
    """The exact records a consumer of a fresh topic sees (see module docstring); ``headers=False`` /
    ``timestamps=False`` blank those fields (old message formats / client-stamped times)."""
    nxt: dict[int, int] = {}
    out = []
    for r in recs:
        off = nxt.get(r.partition, base)
        nxt[r.partition] = off + 1
        out.append(Got(r.partition, off, r.key, r.value, tuple(r.headers) if headers else (),
                       r.timestamp if timestamps else None))
    return sorted(out, key=lambda g: (g.partition, g.offset))


def segment_path(broker, topic: str, partition: int) -> Path:
    """The first segment file of a partition (offset 0 -> 20-digit zero-padded name, Kafka's layout)."""
    return broker.log_dir / f"{topic}-{partition}" / ("0" * 20 + ".log")


# ------------------------------------------------------------------------------------------ confluent-kafka

def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    """CreateTopics through confluent's AdminClient; waits for the result (raises on any error)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=dict(config or {}))],
                                  operation_timeout=TIMEOUT, request_timeout=TIMEOUT)
    assert futures[topic].result(TIMEOUT) is None


def confluent_produce(bootstrap: str, topic: str, recs, timeout: float = TIMEOUT, **conf) -> list:
    """Produce `recs` with confluent_kafka.Producer (extra librdkafka `conf` with '.' spelled as given).

    Returns the delivery reports in delivery order: (partition, offset, key, value). Fails on any delivery error.
    """
    from confluent_kafka import Producer

    # linger.ms 1000: a loop of produce() calls lands in one batch per partition, so stored codecs are deterministic
    # (librdkafka leaves a batch uncompressed when compression would not shrink it, e.g. a lone tiny record). 50 ms
    # was too short on a loaded 2-core machine: the loop outlasted it and a lone last record went out uncompressed.
    # It costs nothing: flush() sends at once, whatever linger.ms says (librdkafka >= 1.5).
    cfg = {"bootstrap.servers": bootstrap, "linger.ms": 1000, "message.timeout.ms": int(timeout * 1000)}
    cfg.update(conf)
    producer = Producer(cfg)
    reports, failures = [], []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)
        else:
            reports.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    for r in recs:
        producer.produce(topic, value=r.value, key=r.key, partition=r.partition,
                         headers=list(r.headers) if r.headers else None,
                         timestamp=r.timestamp or 0, on_delivery=on_delivery)
        producer.poll(0)
    left = producer.flush(timeout)
    assert left == 0, f"{left} messages still undelivered after {timeout}s; errors {failures}"
    assert failures == [], failures
    return reports


def confluent_consume(bootstrap: str, topic: str, count: int, partitions=(0,), start: int = 0,
                      timeout: float = TIMEOUT, **conf) -> list[Got]:
    """Assign `partitions` at offset `start` and read exactly `count` records (sorted by partition, offset).

    After reading, the high watermarks must add up to start*len(partitions) + count, so no extra records exist.
    """
    from confluent_kafka import Consumer, TopicPartition

    cfg = {"bootstrap.servers": bootstrap, "group.id": f"unused-{topic}", "enable.auto.commit": False,
           "enable.auto.offset.store": False, "fetch.wait.max.ms": 100, "auto.offset.reset": "error"}
    cfg.update(conf)
    consumer = Consumer(cfg)
    got, errors = [], []
    try:
        consumer.assign([TopicPartition(topic, p, start) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error())
                continue
            ts_type, ts = msg.timestamp()
            got.append(Got(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()), ts))
        assert len(got) == count, f"got {len(got)} of {count} records in {timeout}s; errors {errors}: {got[-3:]}"
        highs = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions]
        assert sum(highs) == start * len(partitions) + count, f"high watermarks {highs} for {count} records"
    finally:
        consumer.close()
    return sorted(got, key=lambda g: (g.partition, g.offset))


# --------------------------------------------------------------------------------------------- kafka-python

def kp_codec(codec: str):
    return None if codec == "none" else codec


def kafka_python_produce(bootstrap: str, topic: str, recs, api_version=None, timeout: float = TIMEOUT,
                         **conf) -> list:
    """Produce with kafka.KafkaProducer; returns RecordMetadata per record, in produce order."""
    from kafka import KafkaProducer

    kw = {"bootstrap_servers": bootstrap, "linger_ms": 5, "request_timeout_ms": int(timeout * 1000)}
    if api_version is not None:
        kw["api_version"] = api_version
    kw.update(conf)
    producer = KafkaProducer(**kw)
    try:
        futures = [producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                 timestamp_ms=r.timestamp, headers=list(r.headers) if r.headers else None)
                   for r in recs]
        producer.flush(timeout)
        return [f.get(timeout) for f in futures]
    finally:
        producer.close(timeout=5)


def kafka_python_consume(bootstrap: str, topic: str, count: int, partitions=(0,), api_version=None,
                         timeout: float = TIMEOUT, **conf) -> list[Got]:
    """Assign `partitions`, seek to the beginning, read exactly `count` records; end offsets must match."""
    from kafka import KafkaConsumer, TopicPartition

    kw = {"bootstrap_servers": bootstrap, "group_id": None, "enable_auto_commit": False, "fetch_max_wait_ms": 100,
          "request_timeout_ms": int(timeout * 1000) + 5000}
    if api_version is not None:
        kw["api_version"] = api_version
    kw.update(conf)
    consumer = KafkaConsumer(**kw)
    got = []
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=200).items():
                for m in msgs:
                    got.append(Got(m.partition, m.offset, m.key, m.value,
                                   tuple((k, v) for k, v in (m.headers or ())), m.timestamp))
        assert len(got) == count, f"got {len(got)} of {count} records in {timeout}s: {got[-3:]}"
        ends = consumer.end_offsets(tps)
        assert sum(ends.values()) == count, f"end offsets {ends} for {count} records"
    finally:
        consumer.close()
    return sorted(got, key=lambda g: (g.partition, g.offset))


# ------------------------------------------------------------------------------------------------- aiokafka

def aiokafka_produce(bootstrap: str, topic: str, recs, timeout: float = TIMEOUT, **conf) -> list:
    """Produce with AIOKafkaProducer (send, then await every future); returns RecordMetadata in order."""
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5,
                                    request_timeout_ms=int(timeout * 1000), **conf)
        await producer.start()
        try:
            futs = [await producer.send(topic, value=r.value, key=r.key, partition=r.partition,
                                        timestamp_ms=r.timestamp, headers=list(r.headers) if r.headers else None)
                    for r in recs]
            return [await asyncio.wait_for(f, timeout) for f in futs]
        finally:
            await producer.stop()

    return asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, count: int, partitions=(0,), timeout: float = TIMEOUT,
                     **conf) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    fetch_max_wait_ms=100, **conf)
        await consumer.start()
        got = []
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=200)
                for tp, msgs in batch.items():
                    for m in msgs:
                        got.append(Got(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()),
                                       m.timestamp))
            assert len(got) == count, f"got {len(got)} of {count} records in {timeout}s: {got[-3:]}"
            ends = await consumer.end_offsets(tps)
            assert sum(ends.values()) == count, f"end offsets {ends} for {count} records"
        finally:
            await consumer.stop()
        return got

    return sorted(asyncio.run(run()), key=lambda g: (g.partition, g.offset))


# ------------------------------------------------------------------------------------------------------ kcat
# kcat reads producer input as `key<KEY_DELIM>value<MSG_DELIM>`; these two control bytes never occur in the
# values kcat tests produce (they are checked), so binary payloads (including NUL bytes) survive.
KCAT_KEY_DELIM = b"\x1f"
KCAT_MSG_DELIM = b"\x1e"
# Output: one text line `partition offset timestamp keylen valuelen headers` then the raw key and value bytes.
KCAT_FORMAT = "%p %o %T %K %S %h\\n%k%s"


def kcat_produce(bootstrap: str, topic: str, partition: int, pairs, headers=(), codec: str = "none",
                 nulls: bool = False, extra=()):
    """Produce (key, value) pairs with kcat -P to one partition. Empty key/value mean NULL with ``nulls``
    (kcat -Z); otherwise a None key is sent as kcat's "no key". Headers (-H) apply to every message.
    linger.ms=200 keeps all of stdin in one batch per call (stdin is a pipe written at once), so the stored codec
    is deterministic: librdkafka leaves a batch uncompressed when compressing would not shrink it, which a
    lone small record split off into its own batch would hit."""
    chunks = []
    for key, value in pairs:
        for part in (key or b"", value or b""):
            assert KCAT_KEY_DELIM not in part and KCAT_MSG_DELIM not in part
        chunks.append((key or b"") + KCAT_KEY_DELIM + (value or b"") + KCAT_MSG_DELIM)
    args = ["-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K", "\\x1f", "-D", "\\x1e",
            "-X", f"compression.codec={codec}", "-X", "linger.ms=200"]
    for name, value in headers:
        args += ["-H", f"{name}={value.decode()}"]
    if nulls:
        args.append("-Z")
    args += list(extra)
    return run_kcat(args, input=b"".join(chunks), timeout=TIMEOUT)


def kcat_consume(bootstrap: str, topic: str, partition: int, count: int, extra=()) -> list[Got]:
    """kcat -C from the beginning of one partition until its end (-e); parses KCAT_FORMAT exactly.
    Headers come back as kcat prints them (`name=value` CSV), so they must be ASCII without ',' or '='."""
    done = run_kcat(["-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", "beginning", "-e",
                     "-f", KCAT_FORMAT, *extra], timeout=TIMEOUT)
    out = done.stdout
    got, pos = [], 0
    while pos < len(out):
        nl = out.index(b"\n", pos)
        fields = out[pos:nl].decode().split(" ", 5)
        p, off, ts, klen, vlen = (int(x) for x in fields[:5])
        pos = nl + 1
        key = None if klen < 0 else out[pos:pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos:pos + vlen]
        pos += max(vlen, 0)
        hdrs = ()
        if fields[5]:
            hdrs = tuple((h.split("=", 1)[0], h.split("=", 1)[1].encode()) for h in fields[5].split(","))
        got.append(Got(p, off, key, value, hdrs, ts))
    assert len(got) == count, f"kcat read {len(got)} of {count} records: {got[-3:]}\n{done.stderr[-2000:]!r}"
    return got


# --------------------------------------------------------------------------------------------------- kafkajs

def kafkajs_spec_messages(recs) -> list[dict]:
    """kafkajs message specs; headers become {name: b64 | [b64, ...]} (duplicates grouped, first-seen order)."""
    out = []
    for r in recs:
        hdrs: dict = {}
        for name, value in r.headers:
            if name in hdrs:
                prev = hdrs[name]
                hdrs[name] = (prev if isinstance(prev, list) else [prev]) + [b64(value)]
            else:
                hdrs[name] = b64(value)
        m = {"key": b64(r.key), "value": b64(r.value), "partition": r.partition, "headers": hdrs}
        if r.timestamp is not None:
            m["timestamp"] = r.timestamp
        out.append(m)
    return out


def kafkajs_records(result: dict) -> list[Got]:
    out = []
    for rec in result["records"]:
        hdrs = []
        for name, value in rec["headers"].items():
            for v in (value if isinstance(value, list) else [value]):
                hdrs.append((name, unb64(v)))
        out.append(Got(rec["partition"], rec["offset"], unb64(rec["key"]), unb64(rec["value"]), tuple(hdrs),
                       rec["timestamp"]))
    return out


# ------------------------------------------------------------------------------------------ raw wire access

def segment_batches(path: Path):
    """Every v2 batch header of a segment file (kbroker.record.iter_batches over the raw bytes)."""
    from kbroker.record import iter_batches

    data = Path(path).read_bytes()
    return [h for _, h in iter_batches(data)]



def advertised_apis(broker) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) from a raw ApiVersions v0 answer (int16 error, int32 n, n x int16 key/min/max)."""
    body = probe_api_versions(broker.host, broker.port, timeout=5.0)
    (err, n) = struct.unpack_from(">hi", body, 0)
    assert err == 0
    return {k: (lo, hi) for k, lo, hi in struct.iter_unpack(">hhh", body[6:6 + 6 * n])}


# librdkafka (confluent-kafka, kcat) turns lz4 on only for brokers that advertise FindCoordinator (api key 10)
# v0 -- its stand-in for "broker >= 0.8.2" (rdkafka_feature.c, RD_KAFKA_FEATURE_LZ4). Until the consumer-group
# APIs are served, it silently sends its lz4 batches uncompressed; the records still round-trip.
LIBRDKAFKA_LZ4_REASON = ("librdkafka enables lz4 only if the broker advertises FindCoordinator (api key 10) v0; "
                         "consumer groups are not served yet, so librdkafka sent the batch uncompressed")


def assert_stored_codec(broker, topic: str, partition: int, codec: str, librdkafka: bool = False) -> None:
    """Every batch of the partition's first segment carries `codec` (read from the file, not from a client).

    For a librdkafka producer asked for lz4 while FindCoordinator is not advertised this is an xfail (see
    LIBRDKAFKA_LZ4_REASON); call it after the round-trip assertions so those still count."""
    import pytest

    stored = {h.codec for h in segment_batches(segment_path(broker, topic, partition))}
    want = CODECS.index(codec)
    if stored != {want} and librdkafka and codec == "lz4" and 10 not in advertised_apis(broker):
        pytest.xfail(LIBRDKAFKA_LZ4_REASON)
    assert stored == {want}, f"{topic}-{partition}: stored codecs {stored}, produced with {codec} ({want})"
