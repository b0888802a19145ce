"""kcat 1.7.1 (Debian's, librdkafka 2.0.2) against a real kbroker-server process.

kcat cannot create topics or set record timestamps, so topics come from confluent's AdminClient and kcat's records
carry librdkafka's CreateTime (asserted to lie inside the produce call's wall-clock window). Shown: keyed, unkeyed
(NULL key) and NULL-value records (-Z) with binary payloads (NUL and 0xff bytes) and headers (-H, duplicates kept
in order) round-trip byte-exact per partition in order with the right offsets, for every codec kcat can write;
kcat reads records other clients produced with explicit timestamps exactly; kcat -Q (ListOffsets by timestamp)
answers the exact offsets.
"""
import re

import pytest

from tests.integration.harness import run_kcat
from tests.integration.test_clients_common import (CODECS, Rec, assert_stored_codec, confluent_consume,
                                                   confluent_produce, create_topic, expected, kcat_consume,
                                                   kcat_produce, now_ms, sample_records, segment_batches,
                                                   segment_path)

pytestmark = pytest.mark.timeout(120)


def kcat_pairs(p, n):
    """(key, value) pairs for partition p: NULL keys on every 3rd, a NULL value at j == 2, binary payloads with a
    repetitive middle (librdkafka sends a batch uncompressed when compressing would not shrink it)."""
    out = []
    for j in range(n):
        key = None if j % 3 == 1 else b"kc-%d.%d" % (p, j)
        value = None
        if j != 2:
            tail = bytes((i * 37 + p) % 256 for i in range(60 + j)).replace(b"\x1e", b"\x1d").replace(b"\x1f", b"\x1d")
            value = bytes([0, 0xff, p, j]) + b"kcat payload " * 10 + tail
        out.append((key, value))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_roundtrip(shared_broker, kcat, codec):
    topic = f"kcat-roundtrip-{codec}"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    headers = {0: (("src", b"kcat"), ("dup", b"1"), ("dup", b"2")), 1: ()}
    sent = {}
    for p in (0, 1):
        pairs = kcat_pairs(p, 7)
        before = now_ms()
        kcat_produce(shared_broker.bootstrap, topic, p, pairs, headers=headers[p], codec=codec, nulls=True)
        after = now_ms()
        sent[p] = (pairs, before, after)
    for p in (0, 1):
        pairs, before, after = sent[p]
        got = kcat_consume(shared_broker.bootstrap, topic, p, len(pairs))
        assert [(g.partition, g.offset, g.key, g.value, g.headers) for g in got] == \
            [(p, i, k, v, headers[p]) for i, (k, v) in enumerate(pairs)]
        assert all(before <= g.timestamp <= after for g in got), (before, [g.timestamp for g in got], after)
    # The codec kcat asked for is the codec stored (one batch per partition, read from the segment file).
    (h,) = segment_batches(segment_path(shared_broker, topic, 0))
    assert h.records_count == 7
    assert_stored_codec(shared_broker, topic, 0, codec, librdkafka=True)


def test_kcat_reads_confluent_records_with_timestamps(shared_broker, kcat):
    topic = "kcat-from-confluent"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    recs = sample_records("cf2kc", partitions=2, per_partition=6, binary=True)
    # kcat prints headers as `name=value` CSV: keep header values ASCII for this direction.
    recs = [r._replace(headers=tuple((n, b"t" if n == "trace" else v) for n, v in r.headers)) for r in recs]
    confluent_produce(shared_broker.bootstrap, topic, recs, **{"compression.type": "snappy"})
    want = expected(recs)
    for p in (0, 1):
        assert kcat_consume(shared_broker.bootstrap, topic, p, 6) == [g for g in want if g.partition == p]


def test_confluent_reads_kcat_records(shared_broker, kcat):
    topic = "kcat-to-confluent"
    create_topic(shared_broker.bootstrap, topic, partitions=1)
    pairs = kcat_pairs(0, 9)
    kcat_produce(shared_broker.bootstrap, topic, 0, pairs, headers=(("a", b"b"),), codec="gzip", nulls=True)
    got = confluent_consume(shared_broker.bootstrap, topic, 9)
    assert [(g.offset, g.key, g.value, g.headers) for g in got] == \
        [(i, k, v, (("a", b"b"),)) for i, (k, v) in enumerate(pairs)]


def test_kcat_query_offsets_by_timestamp(shared_broker, kcat):
    topic = "kcat-times"
    create_topic(shared_broker.bootstrap, topic, partitions=1)
    t0 = now_ms() - 20_000
    for i in range(3):  # one batch per record
        confluent_produce(shared_broker.bootstrap, topic, [Rec(0, None, b"t%d" % i, (), t0 + 1000 * i)])
    for ts, want in ((t0, 0), (t0 + 500, 1), (t0 + 1000, 1), (t0 + 2000, 2)):
        out = run_kcat(["-Q", "-b", shared_broker.bootstrap, "-t", f"{topic}:0:{ts}"]).stdout.decode()
        m = re.search(r"\[0\]\s+offset\s+(-?\d+)", out)
        assert m and int(m.group(1)) == want, (ts - t0, out)
    # kcat -o s@<ts> starts at the offset ListOffsets found for that time.
    done = run_kcat(["-C", "-b", shared_broker.bootstrap, "-t", topic, "-p", "0", "-o", f"s@{t0 + 1}", "-e",
                     "-f", "%o:%s:%T\\n"])
    assert done.stdout.decode().splitlines() == [f"1:t1:{t0 + 1000}", f"2:t2:{t0 + 2000}"]
