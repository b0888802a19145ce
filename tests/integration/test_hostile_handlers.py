"""Requests the limits allow but whose handling grows with their elements (issue 8: no single request may hold the
event loop for more than ~100 ms), against a real embedded-mode broker.

Before the fixes, a bystander client (``hostile.StallWatch``: ApiVersions every 50 ms) waited, per request:

* CreateTopics of 10,000 partitions (max.topic.partitions): 8.6 s, and 7,502 of the partitions failed (EMFILE: gevent
  closed the fsync'd directories' descriptors late, and every partition held 5); of 1,000 partitions: 2.0 s;
* DeleteTopics of that 10,000-partition topic: 5.4 s;
* at request.max.elements (100,000 values per request): DeleteTopics naming 100,000 unknown topics 0.62 s,
  DescribeGroups of 100,000 groups 0.57 s, CreateTopics validating 14,000 topics (v5: 250,000 config entries in the
  answer) 1.37 s, FindCoordinator v4 with 100,000 keys 0.79 s, DeleteGroups of 100,000 groups 0.30 s, OffsetCommit of
  10,000 existing partitions 2.0 s (a copy of every hosted partition per committed one), Produce of 30,000 entries
  ~0.3 s (its yield did not poll sockets).

Now the hosting work runs in a worker thread, every per-element loop yields every 20 ms (kbroker/timeslice.py), long
arrays are decoded and encoded in slices (protocol/schema.py), and the per-element work is cheap. Each case asserts
its own bound, well under the shared 1 s (STALL_LIMIT_S) and under what it was before, and ``assert_healthy``.
The 10,000-partition CreateTopics still waits ~1 s in the controller (one event handles all new partitions on the
loop, and the in-process LeaderAndIsr is encoded and decoded in one piece): its 0.5 s bound is an expected failure
until that is fixed.
"""
from __future__ import annotations

import os
import time

import pytest

from kbroker.record import Record, build_batch
from tests.integration.harness import BrokerProcess, wait_until
from tests.integration.hostile import STALL_LIMIT_S, StallWatch, assert_healthy
from tests.integration.test_durability import RawClient

pytestmark = pytest.mark.timeout(300)

PRODUCE, FETCH, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 0, 1, 3, 8, 9, 10
DESCRIBE_GROUPS, CREATE_TOPICS, DELETE_TOPICS, DELETE_GROUPS = 15, 19, 20, 42
UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS = 3, 37
WIDE = "wide"                # the 10,000-partition topic
WIDE_PARTITIONS = 10_000
ELEMENT_BOUND_S = 0.3        # each element-cap case: measured 0.03-0.10 s on a loaded 2-core machine


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("hostile_handlers"))
    try:
        b.start()
        with RawClient(b) as c:
            c.create_topic("target", 1)
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def coordinator(broker):
    """The group coordinator serving: __consumer_offsets created (FindCoordinator does it) and loaded."""
    with RawClient(broker, timeout=60) as c:
        wait_until(lambda: c.call(FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})["error_code"] == 0, timeout=60,
                   message="the group coordinator to be available")
        wait_until(lambda: c.call(DESCRIBE_GROUPS, 0, {"groups": ["g"]})["groups"][0]["error_code"] == 0, timeout=60,
                   message="the offsets partitions to be loaded")
    return broker


def create(client, name, partitions, version=5, validate_only=False, timeout_ms=120_000):
    resp = client.call(CREATE_TOPICS, version, {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": timeout_ms, "validate_only": validate_only})
    (t,) = resp["topics"]
    return t["error_code"], t.get("error_message")


def partitions_led(client, name):
    """{partition: leader} Metadata shows for ``name`` (all topics asked for: naming it could auto-create it)."""
    resp = client.call(METADATA, 1, {"topics": None})
    for t in resp["topics"]:
        if t["name"] == name:
            return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
    return {}


@pytest.fixture(scope="module")
def wide(broker):
    """CreateTopics of 10,000 partitions under a StallWatch: (answer, seconds, the bystander's worst wait)."""
    with StallWatch(broker) as watch, RawClient(broker, timeout=180) as c:
        t0 = time.monotonic()
        answer = create(c, WIDE, WIDE_PARTITIONS)
        took = time.monotonic() - t0
    return answer, took, watch


# ------------------------------------------------------------------------------------------- topic creation

def test_create_topic_of_10000_partitions_hosts_every_one(broker, wide):
    answer, took, watch = wide
    assert answer == (0, None)
    assert took < 120, took                       # 4-13 s here, depending on the disk
    with RawClient(broker) as c:
        assert partitions_led(c, WIDE) == {p: 0 for p in range(WIDE_PARTITIONS)}
    names = os.listdir(broker.log_dir)
    assert sum(1 for n in names if n.startswith(WIDE + "-")) == WIDE_PARTITIONS
    # One descriptor per empty partition (its .log): 5 each used to exhaust a 20,000 ulimit at 2,498 partitions.
    assert len(os.listdir("/proc/%d/fd" % broker.pid)) < WIDE_PARTITIONS + 500
    assert watch.reconnects == 0 and watch.worst < 2 * STALL_LIMIT_S, watch.worst   # 8.6 s before
    assert_healthy(broker, what="CreateTopics of 10,000 partitions")


def test_create_topic_of_10000_partitions_keeps_the_bystander_under_half_a_second(wide):
    # 0.6-1.0 s while the controller elected and queued every new partition in one event and the in-process
    # LeaderAndIsr was encoded and decoded in one piece; 0.07-0.09 s here with both in time slices
    _answer, _took, watch = wide
    assert watch.worst < 0.5, watch.worst


def test_create_topic_of_1000_partitions(broker):
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        assert create(c, "thousand", 1000) == (0, None)
        assert len(partitions_led(c, "thousand")) == 1000
    assert watch.worst < ELEMENT_BOUND_S, watch.worst       # 2.0 s before
    assert_healthy(broker, watch, what="CreateTopics of 1,000 partitions")


# ------------------------------------------------------------------------------- requests at the element cap

def test_delete_topics_naming_100000_unknown_topics(broker):
    names = ["absent-%06d" % i for i in range(100_000)]
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        resp = c.call(DELETE_TOPICS, 1, {"topic_names": names, "timeout_ms": 5000})
        assert [r["name"] for r in resp["responses"]] == names
        assert {r["error_code"] for r in resp["responses"]} == {UNKNOWN_TOPIC_OR_PARTITION}
        assert partitions_led(c, "target") == {0: 0}
    assert watch.worst < ELEMENT_BOUND_S, watch.worst       # 0.62 s before
    assert_healthy(broker, watch, what="DeleteTopics of 100,000 names")


def test_describe_groups_of_100000_groups(broker, coordinator):
    groups = ["group-%06d" % i for i in range(100_000)]
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        resp = c.call(DESCRIBE_GROUPS, 0, {"groups": groups})
        assert [g["group_id"] for g in resp["groups"]] == groups
        assert {(g["error_code"], g["group_state"]) for g in resp["groups"]} == {(0, "Dead")}
    assert watch.worst < ELEMENT_BOUND_S, watch.worst       # 0.57 s before
    assert_healthy(broker, watch, what="DescribeGroups of 100,000 groups")


@pytest.mark.soak   # 69 s: not in the README's test command; `bash scripts/test.sh -m soak`
def test_create_topics_validating_14000_topics(broker):
    topics = [{"name": "would-%05d" % i, "num_partitions": 1, "replication_factor": 1, "assignments": [],
               "configs": []} for i in range(14_000)]
    with StallWatch(broker) as watch, RawClient(broker, timeout=120) as c:
        resp = c.call(CREATE_TOPICS, 5, {"topics": topics, "timeout_ms": 5000, "validate_only": True})
        got = resp["topics"]
        # max.request.partitions (10,000): the first 10,000 pass, with the configs they would get; the rest do not
        assert [t["error_code"] for t in got] == [0] * 10_000 + [INVALID_PARTITIONS] * 4_000
        assert got[0]["num_partitions"] == 1 and len(got[0]["configs"]) > 20
        assert got[9_999]["configs"] == got[0]["configs"]
        assert partitions_led(c, "would-00000") == {}   # validate-only created nothing
    assert watch.worst < ELEMENT_BOUND_S, watch.worst       # 1.37 s before
    assert_healthy(broker, watch, what="CreateTopics validating 14,000 topics")


def test_find_coordinator_with_100000_keys(broker, coordinator):
    keys = ["key-%06d" % i for i in range(100_000)]
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        resp = c.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": keys})
    assert [k["key"] for k in resp["coordinators"]] == keys
    assert {(k["error_code"], k["node_id"], k["port"]) for k in resp["coordinators"]} == {(0, 0, broker.port)}
    assert watch.worst < ELEMENT_BOUND_S, watch.worst       # 0.79 s before
    assert_healthy(broker, watch, what="FindCoordinator of 100,000 keys")


def test_delete_groups_of_100000_groups(broker, coordinator):
    groups = ["gone-%06d" % i for i in range(100_000)]
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        resp = c.call(DELETE_GROUPS, 1, {"groups_names": groups})
        assert [r["group_id"] for r in resp["results"]] == groups
        assert {r["error_code"] for r in resp["results"]} == {69}     # GROUP_ID_NOT_FOUND
    assert watch.worst < 0.2, watch.worst                   # 0.30 s before
    assert_healthy(broker, watch, what="DeleteGroups of 100,000 groups")


def test_offset_commit_of_10000_existing_partitions(broker, coordinator, wide):
    assert wide[0] == (0, None)
    offsets = [{"partition_index": p, "committed_offset": p, "committed_metadata": ""}
               for p in range(WIDE_PARTITIONS)]
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        resp = c.call(OFFSET_COMMIT, 2, {"group_id": "wide-reader", "generation_id_or_member_epoch": -1,
                                         "member_id": "", "retention_time_ms": -1,
                                         "topics": [{"name": WIDE, "partitions": offsets}]})
        assert {p["error_code"] for p in resp["topics"][0]["partitions"]} == {0}
        fetched = c.call(OFFSET_FETCH, 2, {"group_id": "wide-reader",
                                           "topics": [{"name": WIDE, "partition_indexes": list(range(100_000 - 10))}]})
    got = fetched["topics"][0]["partitions"]
    assert [p["committed_offset"] for p in got[:WIDE_PARTITIONS]] == list(range(WIDE_PARTITIONS))
    assert {p["committed_offset"] for p in got[WIDE_PARTITIONS:]} == {-1}
    assert watch.worst < ELEMENT_BOUND_S, watch.worst       # 2.0 s before
    assert_healthy(broker, watch, what="OffsetCommit of 10,000 partitions")


def test_produce_of_30000_entries(broker):
    batch = build_batch([Record(0, int(time.time() * 1000), None, b"x", ())])
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        before = c.latest_offset("target")
        resp = c.call(PRODUCE, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "target", "partition_data": [{"index": 0, "records": batch} for _ in range(30_000)]}]})
        parts = resp["responses"][0]["partition_responses"]
        assert [p["base_offset"] for p in parts] == list(range(before, before + 30_000))
        assert c.latest_offset("target") == before + 30_000
    # ~0.3 s before (its yield never polled sockets); 0.206 s in CI when a full GC of the 10,000-partition
    # broker landed in it (kbroker/gcpolicy.py: 0.04-0.05 s since)
    assert watch.worst < 0.2, watch.worst
    assert_healthy(broker, watch, what="Produce of 30,000 entries")


def test_fetch_of_25000_partitions(broker):
    """The per-partition loop yields every 20 ms (handlers.common.sliced), as the decode and encode do: CI saw
    0.308 s when it did not (the unknown partitions raise, ~12 us each)."""
    wanted = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1024} for p in range(24_990)]
    with StallWatch(broker) as watch, RawClient(broker, timeout=60) as c:
        resp = c.call(FETCH, 4, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                 "isolation_level": 0, "topics": [{"topic": WIDE, "partitions": wanted}]})
    codes = [p["error_code"] for p in resp["responses"][0]["partitions"]]
    assert codes == [0] * WIDE_PARTITIONS + [UNKNOWN_TOPIC_OR_PARTITION] * (24_990 - WIDE_PARTITIONS)
    assert watch.worst < ELEMENT_BOUND_S, watch.worst
    assert_healthy(broker, watch, what="Fetch of 25,000 partitions")


# ------------------------------------------------------------------------------------------- topic deletion

def test_delete_topic_of_10000_partitions(broker, wide):
    assert wide[0] == (0, None)
    with StallWatch(broker) as watch, RawClient(broker, timeout=180) as c:
        resp = c.call(DELETE_TOPICS, 1, {"topic_names": [WIDE], "timeout_ms": 120_000})
        assert [(r["name"], r["error_code"]) for r in resp["responses"]] == [(WIDE, 0)]
        assert partitions_led(c, WIDE) == {}
    assert not any(n.startswith(WIDE + "-") for n in os.listdir(broker.log_dir))
    assert watch.worst < 0.5, watch.worst       # 5.4 s, then 0.22 s (0.64 s in a loaded CI); 0.06-0.08 s now
    assert_healthy(broker, watch, what="DeleteTopics of a 10,000-partition topic")
