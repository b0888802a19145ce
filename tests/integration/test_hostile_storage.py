"""Storage- and record-level hostile input (issue 8, section 3) against a real embedded-mode broker.

Before the fixes, each of these held the broker's event loop for seconds to forever:

* CreateTopics of 1,000,000 partitions (a 70-byte request): the embedded store rewrote and fsync'd its whole tree
  for every partition state, on the event loop; the broker never answered again. Now the partition ceilings
  (``max.topic.partitions`` / ``max.request.partitions``: INVALID_PARTITIONS 37, ``max.broker.partitions``:
  POLICY_VIOLATION 44, each with a message naming the key) refuse it before anything is assigned or written,
  and the store is an fsync'd journal written off the loop (tests/unit/test_coord.py);
* CreatePartitions to 1,000,000 and a CreateTopics with 20,000 explicit assignments: the same ceilings;
* an 11 KiB gzip batch of 1.2 M records all at offset delta 0 (5.1 s and 523 MB rebuilt in Python): refused as
  MESSAGE_TOO_LARGE (10) after a native look (rebuilding is bounded to 8 MiB of records);
* 1 MB of empty LZ4 frames (4.8 s: every frame step copied the rest of the buffer): CORRUPT_MESSAGE (2) at the
  65th frame;
* 64 partition entries of 64 MiB-inflating gzip in one Produce, the topic's max.message.bytes raised to 2^31-1
  first (25 s): all entries share max.request.decompressed.bytes (32 MiB): the first inflates to it and is
  CORRUPT_MESSAGE, the other 63 are MESSAGE_TOO_LARGE at once;
* a magic-1 gzip wrapper of 100,000 tiny messages (up-converted in Python at ~6 us each): RECORD_LIST_TOO_LARGE (18).

Every case runs under ``hostile.StallWatch`` (a bystander's ApiVersions never waits > 1 s) and ends with
``hostile.assert_healthy`` (fresh-connection Metadata < 1 s, peak RSS < 600 MB); record cases also check that
nothing reached the log (the log end offset is unchanged) and that a good batch is still accepted.
"""
from __future__ import annotations

import time
import zlib

import lz4.frame
import pytest

from kbroker.record import Record, build_batch
from kbroker.record.batch import HEADER, HEADER_SIZE, write_crc
from kbroker.record.legacy import build_message_set, encode_message
from tests.integration.harness import wait_until
from tests.integration.hostile import StallWatch, assert_healthy
from tests.integration.test_bad_input import gzip_of_zeros
from tests.integration.test_clients_common import now_ms
from tests.integration.test_durability import RawClient

pytestmark = pytest.mark.timeout(300)

PRODUCE, METADATA, CREATE_TOPICS, ALTER_CONFIGS, CREATE_PARTITIONS = 0, 3, 19, 33, 37
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE = 2, 10, 18
INVALID_PARTITIONS, POLICY_VIOLATION = 37, 44
INT_MAX = 2 ** 31 - 1
QUICK_S = 1.0   # a refusal is a few milliseconds of work; allow for a loaded machine


def create_topics(client, topics, version=5, timeout_ms=20_000, validate_only=False):
    """CreateTopics of ``topics`` = [(name, partitions, configs)]; returns {name: (error_code, error_message)}."""
    resp = client.call(CREATE_TOPICS, version, {"topics": [
        {"name": name, "num_partitions": n, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]} for name, n, configs in topics],
        "timeout_ms": timeout_ms, "validate_only": validate_only})
    return {t["name"]: (t["error_code"], t.get("error_message")) for t in resp["topics"]}


def create_partitions(client, name, count, timeout_ms=20_000):
    resp = client.call(CREATE_PARTITIONS, 1, {"topics": [{"name": name, "count": count, "assignments": None}],
                                              "timeout_ms": timeout_ms, "validate_only": False})
    (r,) = resp["results"]
    return r["error_code"], r["error_message"]


def topic_partitions(client, name):
    """Partitions Metadata lists for ``name``, 0 when it does not exist (all topics are asked for: naming a
    missing one would auto-create it)."""
    resp = client.call(METADATA, 1, {"topics": None})
    return {t["name"]: len(t["partitions"]) for t in resp["topics"]}.get(name, 0)


def raw_batch(codec, packed_region, count):
    """A v2 batch header (CRC correct) around an arbitrary records region: what a hostile client can send."""
    ts = now_ms()
    out = bytearray(HEADER_SIZE) + packed_region
    HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, codec, count - 1, ts, ts, -1, -1, -1, count)
    write_crc(out, 0, len(out))
    return bytes(out)


def _gzip(data):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def produce_entries(client, topic, entries, version=7):
    """One Produce (acks=1) carrying ``entries`` = {partition: records}; returns {partition: error_code}."""
    resp = client.call(PRODUCE, version, {"transactional_id": None, "acks": 1, "timeout_ms": 10_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": r} for p, r in entries.items()]}]})
    return {p["index"]: p["error_code"] for p in resp["responses"][0]["partition_responses"]}


@pytest.fixture(scope="module")
def victim(shared_broker):
    with RawClient(shared_broker, client_id="hostile-storage") as c:
        assert create_topics(c, [("target", 1, None)]) == {"target": (0, None)}
        # 64 partitions whose max.message.bytes a client raises to 2^31-1 (the issue's first step)
        assert create_topics(c, [("wide", 64, None)]) == {"wide": (0, None)}
        resp = c.call(ALTER_CONFIGS, 0, {"resources": [{"resource_type": 2, "resource_name": "wide", "configs": [
            {"name": "max.message.bytes", "value": str(INT_MAX)}]}], "validate_only": False})
        assert resp["responses"][0]["error_code"] == 0, resp
    return shared_broker


def assert_still_accepts_records(broker, topic="target"):
    with RawClient(broker) as c:
        before = c.latest_offset(topic)
        good = build_batch([Record(0, now_ms(), b"k", b"after the attack")], codec=1)
        assert c.produce(topic, 0, good, acks=1) == (0, before)


# --------------------------------------------------------------------------------------- topic creation

def test_create_topics_of_a_million_partitions_is_refused_at_once(victim):
    with StallWatch(victim) as watch, RawClient(victim) as c:
        for version in (0, 1, 5):
            t0 = time.monotonic()
            got = create_topics(c, [("huge-%d" % version, 1_000_000, None)], version=version)
            took = time.monotonic() - t0
            code, message = got["huge-%d" % version]
            assert code == INVALID_PARTITIONS, got
            if version >= 1:  # v0 has no error_message
                assert message == ("Topic 'huge-%d' would have 1000000 partitions; max.topic.partitions is 10000"
                                   % version)
            assert took < QUICK_S, took
            assert topic_partitions(c, "huge-%d" % version) == 0
        # validate_only gets the same answer
        assert create_topics(c, [("huge-v", 1_000_000, None)], validate_only=True)["huge-v"][0] == INVALID_PARTITIONS
    assert_healthy(victim, watch, what="CreateTopics of 1,000,000 partitions")


def test_create_topics_with_a_huge_explicit_assignment_is_refused(victim):
    assignments = [{"partition_index": p, "broker_ids": [0]} for p in range(20_000)]
    with StallWatch(victim) as watch, RawClient(victim) as c:
        t0 = time.monotonic()
        resp = c.call(CREATE_TOPICS, 5, {"topics": [{"name": "assigned", "num_partitions": -1,
                                                     "replication_factor": -1, "assignments": assignments,
                                                     "configs": []}], "timeout_ms": 20_000, "validate_only": False})
        assert time.monotonic() - t0 < QUICK_S * 3
        (t,) = resp["topics"]
        assert (t["error_code"], t["error_message"]) == (
            INVALID_PARTITIONS, "Topic 'assigned' would have 20000 partitions; max.topic.partitions is 10000")
        assert topic_partitions(c, "assigned") == 0
    assert_healthy(victim, watch, what="CreateTopics with 20,000 assignments")


def test_create_partitions_to_a_million_is_refused_at_once(victim):
    with StallWatch(victim) as watch, RawClient(victim) as c:
        assert create_topics(c, [("grow", 2, None)]) == {"grow": (0, None)}
        t0 = time.monotonic()
        assert create_partitions(c, "grow", 1_000_000) == (
            INVALID_PARTITIONS, "Topic 'grow' would have 1000000 partitions; max.topic.partitions is 10000")
        assert time.monotonic() - t0 < QUICK_S
        assert topic_partitions(c, "grow") == 2
        assert create_partitions(c, "grow", 3) == (0, None)  # a sane increase still works
        assert topic_partitions(c, "grow") == 3
    assert_healthy(victim, watch, what="CreatePartitions to 1,000,000")


def test_partition_ceilings_per_request_topic_and_broker(broker_factory):
    """Small ceilings make every rule visible on a fresh broker: per topic (15), per request (20, all topics of a
    request together, CreateTopics and CreatePartitions), per broker (40 replicas hosted)."""
    b = broker_factory(overrides={"max.topic.partitions": 15, "max.request.partitions": 20,
                                  "max.broker.partitions": 40})
    with StallWatch(b) as watch, RawClient(b) as c:
        got = create_topics(c, [("a", 10, None), ("b", 10, None), ("c", 5, None), ("d", 16, None)])
        assert got["a"] == got["b"] == (0, None)
        assert got["c"] == (INVALID_PARTITIONS, "Topic 'c' would bring the partitions this request adds to 25; "
                                                "max.request.partitions is 20")
        assert got["d"] == (INVALID_PARTITIONS, "Topic 'd' would have 16 partitions; max.topic.partitions is 15")
        assert create_topics(c, [("e", 15, None)]) == {"e": (0, None)}           # 35 hosted
        got = create_topics(c, [("f", 6, None)])                                 # 41 > 40
        assert got == {"f": (POLICY_VIOLATION, "Placing the partitions of 'f' would put 41 partition replicas on "
                                               "broker 0; max.broker.partitions is 40")}
        assert create_topics(c, [("f", 5, None)]) == {"f": (0, None)}            # exactly 40
        assert create_partitions(c, "a", 11) == (
            POLICY_VIOLATION, "Placing the partitions of 'a' would put 41 partition replicas on broker 0; "
                              "max.broker.partitions is 40")
        assert create_partitions(c, "a", 16)[0] == INVALID_PARTITIONS
        assert [topic_partitions(c, t) for t in "abcdef"] == [10, 10, 0, 0, 15, 5]
    assert_healthy(b, watch, what="partition ceilings")


# ------------------------------------------------------------------------------------------- record bombs

def test_gzip_batch_of_1_2_million_records_at_offset_delta_0(victim):
    n = 1_200_000
    c9 = zlib.compressobj(9, zlib.DEFLATED, 31)
    region = b"\x0c\x00\x00\x00\x01\x01\x00" * n  # empty records, every offset delta 0
    bomb = raw_batch(1, c9.compress(region) + c9.flush(), n)
    assert len(bomb) < 13_000
    with StallWatch(victim) as watch, RawClient(victim) as c:
        before = c.latest_offset("target")
        t0 = time.monotonic()
        assert produce_entries(c, "target", {0: bomb}) == {0: MESSAGE_TOO_LARGE}
        assert time.monotonic() - t0 < QUICK_S
        assert c.latest_offset("target") == before
    assert_healthy(victim, watch, what="the gzip offset-delta-0 bomb")
    assert_still_accepts_records(victim)


def test_one_mebibyte_of_empty_lz4_frames(victim):
    frame = lz4.frame.compress(b"", content_checksum=False)
    payload = frame * ((1 << 20) // len(frame) - 10)
    batch = raw_batch(3, payload, 1)
    assert 1_000_000 < len(batch) <= 1048588
    with StallWatch(victim) as watch, RawClient(victim) as c:
        before = c.latest_offset("target")
        t0 = time.monotonic()
        assert produce_entries(c, "target", {0: batch}) == {0: CORRUPT_MESSAGE}
        assert time.monotonic() - t0 < QUICK_S
        assert c.latest_offset("target") == before
    assert_healthy(victim, watch, what="1 MB of empty LZ4 frames")
    assert_still_accepts_records(victim)


def test_sixty_four_entries_of_64_mib_share_one_decompression_budget(victim):
    entry = raw_batch(1, gzip_of_zeros(64), 1)   # ~65 KB each, inflating to 64 MiB
    with StallWatch(victim) as watch, RawClient(victim, timeout=60) as c:
        t0 = time.monotonic()
        codes = produce_entries(c, "wide", {p: entry for p in range(64)})
        took = time.monotonic() - t0
        assert codes == {0: CORRUPT_MESSAGE, **{p: MESSAGE_TOO_LARGE for p in range(1, 64)}}
        assert took < 3 * QUICK_S, took
        assert all(c.latest_offset("wide", p) == 0 for p in range(64))
        good = build_batch([Record(0, now_ms(), b"k", b"v" * 1000)], codec=1)
        assert produce_entries(c, "wide", {p: good for p in range(64)}) == {p: 0 for p in range(64)}
    assert_healthy(victim, watch, what="64 x 64 MiB of gzip in one Produce")


def test_legacy_wrapper_of_100000_messages(victim):
    inner = build_message_set([(i, now_ms(), None, b"") for i in range(100_000)], 1)
    wrapper = encode_message(99_999, 1, 1, now_ms(), None, _gzip(inner))
    assert len(wrapper) < 1048588
    with StallWatch(victim) as watch, RawClient(victim) as c:
        before = c.latest_offset("target")
        t0 = time.monotonic()
        assert produce_entries(c, "target", {0: wrapper}, version=2) == {0: RECORD_LIST_TOO_LARGE}
        assert time.monotonic() - t0 < QUICK_S
        assert c.latest_offset("target") == before
    assert_healthy(victim, watch, what="a magic-1 wrapper of 100,000 messages")


def test_broker_restart_keeps_every_topic(victim):
    """The embedded store's journal survives a restart after all of the above (topics, configs, partitions)."""
    with RawClient(victim) as c:
        want = {t: topic_partitions(c, t) for t in ("target", "wide", "grow")}
    assert want == {"target": 1, "wide": 64, "grow": 3}
    victim.restart()
    with RawClient(victim) as c:
        # the listener answers before the controller has loaded the topics: wait for them, bounded
        wait_until(lambda: {t: topic_partitions(c, t) for t in want} == want, timeout=30,
                   message="the topics of the journal to be served again after a restart")
    wait_until(lambda: _accepts(victim), timeout=30, message="the partition to take records again")


def _accepts(broker):
    with RawClient(broker) as c:
        good = build_batch([Record(0, now_ms(), b"k", b"after the restart")], codec=1)
        return c.produce("target", 0, good, acks=1)[0] == 0
