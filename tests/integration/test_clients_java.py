"""Apache Kafka's own Java client (kafka-clients 4.x, tests/java's driver) against a real kbroker-server process.

Shown, each with exact counts, offsets, keys, values, headers and timestamps:

- the producer at its defaults (``enable.idempotence=true``, ``acks=all``): records read back by the Java consumer
  and by confluent-kafka; the stored batches carry one producer id and gap-free sequences from 0 (idempotence
  reached the broker); a pipelined run (1 KiB batches, up to 5 in flight) appends each of 3,000 records once;
- a consumer group (subscribe, poll, commitSync): the committed offsets seen by the Java consumer, by kbroker's
  admin client and by confluent-kafka; the live group described/listed by the Java admin, not deletable while a
  member is in it; a second run of the group resumes at the commits; then described Empty, deleted, gone;
- the admin client: createTopics (configs, validateOnly, an existing topic, a bad config), listTopics,
  describeTopics, createPartitions, describeConfigs, incrementalAlterConfigs (SET/DELETE/APPEND/SUBTRACT and its
  errors; the new max.message.bytes takes effect on the next produce), alterConsumerGroupOffsets, describeCluster,
  deleteTopics;
- every codec (none, gzip, snappy, lz4, zstd) produced by Java, stored with that codec, read by Java and by
  confluent-kafka; and what the other families wrote (confluent-kafka, kcat, kafka-python in both protocol modes,
  aiokafka, kafkajs), every codec each supports, read by the Java consumer.

The JVM starts once per test (or once per module for the codec and other-families tables): each driver run
batches its steps (tests/integration/java_driver.py). The broker runs with group.initial.rebalance.delay.ms=0 so
a group's first join is not held for Kafka's default 3 s.
"""
import shutil
import time

import pytest

from kbroker.client.admin import AdminClient, NewTopic
from tests.integration import harness
from tests.integration.harness import BrokerProcess
from tests.integration.java_driver import got_of, java_driver, java_records, ok  # noqa: F401 - fixture
from tests.integration.test_clients_common import (CODECS, Rec, assert_stored_codec, confluent_consume,
                                                   confluent_produce, expected, kafkajs_spec_messages, now_ms,
                                                   sample_records, segment_batches, segment_path)
from tests.integration.test_clients_matrix import HEADERS, records_for
from tests.integration.test_clients_matrix import produce as matrix_produce

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def jbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("java_broker"), overrides={"group.initial.rebalance.delay.ms": 0})
    try:
        b.start()
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def admin(jbroker):
    client = AdminClient(jbroker.bootstrap)
    yield client
    client.close()


def by_topic(step, topic):
    return got_of({"records": [r for r in step["records"] if r["topic"] == topic]})


def error_type(result):
    return None if result is None else result["error"]["type"]


def assert_idempotent_batches(broker, topic, partition, count):
    """The partition's batches: one producer id (>= 0), epoch 0, sequences 0.. without gaps, `count` records."""
    batches = segment_batches(segment_path(broker, topic, partition))
    assert batches, f"{topic}-{partition} has no batches"
    pids = {h.producer_id for h in batches}
    assert len(pids) == 1 and min(pids) >= 0, pids
    assert {h.producer_epoch for h in batches} == {0}
    seq = 0
    for h in batches:
        assert h.base_sequence == seq and h.base_offset == seq, (h.base_sequence, h.base_offset, seq)
        seq += h.records_count
    assert seq == count
    return batches


# --------------------------------------------------------------------------------------------------- producer

def test_producer_defaults_are_idempotent_acks_all_and_exact(jbroker, java_driver):
    topic = "java-defaults"
    t0 = now_ms() - 60_000
    recs = sample_records("jv", partitions=3, per_partition=6, t0=t0)   # record j of partition p: t0 + 1000j + p
    # A Java header value may be null: the first record of each partition ends with one, after its other headers.
    recs = [r._replace(headers=r.headers + (("nil", None),)) if i < 3 else r for i, r in enumerate(recs)]
    create, produce, consume, earliest, latest, by_time, max_time = java_driver(jbroker.bootstrap, [
        {"op": "create_topics", "topics": [{"name": topic, "partitions": 3}]},
        {"op": "produce", "topic": topic, "records": java_records(recs)},   # no config: the Java defaults
        {"op": "consume", "topic": topic, "count": len(recs)},
        {"op": "list_offsets", "topic": topic, "partitions": [0, 1, 2], "spec": "earliest"},
        {"op": "list_offsets", "topic": topic, "partitions": [0, 1, 2], "spec": "latest"},
        {"op": "list_offsets", "topic": topic, "partitions": [0, 1, 2], "spec": t0 + 2500},
        {"op": "list_offsets", "topic": topic, "partitions": [0, 1, 2], "spec": "maxTimestamp"},
    ])
    assert ok(create)["results"][topic]["numPartitions"] == 3
    assert ok(produce)["effective"]["enable.idempotence"] is True and produce["effective"]["acks"] == "-1"
    # Each record's metadata: its partition and the offset a consumer will see, in send order.
    nxt = {}
    for r, md in zip(recs, produce["metadata"], strict=True):
        assert (md["partition"], md["offset"], md["timestamp"]) == (r.partition, nxt.get(r.partition, 0),
                                                                    r.timestamp)
        nxt[r.partition] = md["offset"] + 1
    want = expected(recs)
    assert got_of(ok(consume)) == want and consume["timedOut"] is False
    assert consume["endOffsets"] == {"0": 6, "1": 6, "2": 6} and consume["beginningOffsets"] == {"0": 0, "1": 0,
                                                                                                   "2": 0}
    assert {p: o["offset"] for p, o in ok(earliest)["offsets"].items()} == {"0": 0, "1": 0, "2": 0}
    assert {p: o["offset"] for p, o in ok(latest)["offsets"].items()} == {"0": 6, "1": 6, "2": 6}
    # offsetsForTimes: the first record at or after t0 + 2500 is j = 3 (t0 + 3000 + p), inside its batch.
    assert ok(by_time)["offsets"] == {str(p): {"offset": 3, "timestamp": t0 + 3000 + p} for p in range(3)}
    # OffsetSpec.maxTimestamp() (ListOffsets v7): the last record (j = 5) carries each partition's largest.
    assert ok(max_time)["offsets"] == {str(p): {"offset": 5, "timestamp": t0 + 5000 + p} for p in range(3)}
    assert confluent_consume(jbroker.bootstrap, topic, len(recs), partitions=(0, 1, 2)) == want
    pids = {assert_idempotent_batches(jbroker, topic, p, 6)[0].producer_id for p in range(3)}
    assert len(pids) == 1, f"one producer, one producer id: {pids}"


def test_pipelined_idempotent_produce_appends_each_record_once(jbroker, java_driver):
    topic = "java-pipelined"
    n = 3000
    values = [b"pipe-%05d-" % i + bytes(i % 251 for _ in range(20)) for i in range(n)]
    records = java_records([Rec(0, None, v, (), None) for v in values])
    create, produce, consume = java_driver(jbroker.bootstrap, [
        {"op": "create_topics", "topics": [{"name": topic, "partitions": 1}]},
        # 1 KiB batches and no linger: ~100 batches, up to 5 in flight per connection (the default).
        {"op": "produce", "topic": topic, "records": records, "config": {"batch.size": 1024, "linger.ms": 0}},
        {"op": "consume", "topic": topic, "count": n},
    ])
    ok(create)
    assert [md["offset"] for md in ok(produce)["metadata"]] == list(range(n))
    assert [g.value for g in got_of(ok(consume))] == values and consume["endOffsets"] == {"0": n}
    batches = assert_idempotent_batches(jbroker, topic, 0, n)
    assert len(batches) > 20, f"only {len(batches)} batches: the produce was not pipelined"


# ---------------------------------------------------------------------------------------------- consumer group

def test_consumer_group_commit_resume_describe_delete(jbroker, java_driver, admin):
    from confluent_kafka import Consumer, TopicPartition

    ta, tb, group = "java-grp-a", "java-grp-b", "java-group-1"
    admin.create_topics([NewTopic(ta, 3, 1), NewTopic(tb, 1, 1)])
    recs_a = sample_records("ga", partitions=3, per_partition=4)
    recs_b = sample_records("gb", partitions=1, per_partition=5)
    confluent_produce(jbroker.bootstrap, ta, recs_a)
    confluent_produce(jbroker.bootstrap, tb, recs_b)
    total = len(recs_a) + len(recs_b)
    all_tps = [[ta, 0], [ta, 1], [ta, 2], [tb, 0]]
    ends = {(ta, 0): 4, (ta, 1): 4, (ta, 2): 4, (tb, 0): 5}

    (run,) = java_driver(jbroker.bootstrap, [
        {"op": "group_consume", "topics": [ta, tb], "groupId": group, "count": total, "whileMember": [
            {"op": "describe_groups", "groups": [group]},
            {"op": "list_groups"},
            {"op": "list_groups", "states": ["Empty"]},
            {"op": "delete_groups", "groups": [group]},
            {"op": "list_group_offsets", "group": group},
        ]},
    ])
    ok(run)
    assert by_topic(run, ta) == expected(recs_a) and by_topic(run, tb) == expected(recs_b)
    assert run["assignment"] == all_tps and run["generationId"] >= 1
    committed = {(c["topic"], c["partition"]): c["offset"] for c in run["committed"]}
    assert committed == ends
    describe, listing, empty_ones, delete, offsets = run["whileMember"]
    g = ok(describe)["results"][group]
    assert (g["state"], g["simple"], g["assignor"], g["type"]) == ("Stable", False, "range", "Classic")
    assert [(m["memberId"], m["assignment"]) for m in g["members"]] == [(run["memberId"], all_tps)]
    assert {"groupId": group, "state": "Stable", "type": None, "simple": False} in ok(listing)["groups"]
    assert group not in [x["groupId"] for x in ok(empty_ones)["groups"]]     # the state filter (ListGroups v4)
    assert error_type(ok(delete)["results"][group]) == "GroupNotEmptyException"
    assert {(o["topic"], o["partition"]): o["offset"] for o in ok(offsets)["offsets"]} == ends

    # The same commits through two other clients.
    assert admin.list_group_offsets(group) == ends
    consumer = Consumer({"bootstrap.servers": jbroker.bootstrap, "group.id": group})
    try:
        seen = consumer.committed([TopicPartition(t, p) for t, p in ends], timeout=30)
        assert {(tp.topic, tp.partition): tp.offset for tp in seen} == ends
    finally:
        consumer.close()

    # New records only: the group resumes at its commits. Then the empty group is described, deleted and gone.
    more = sample_records("gmore", partitions=3, per_partition=2)
    confluent_produce(jbroker.bootstrap, ta, more)
    resume, describe, empty_ones, delete, delete_again, listing = java_driver(jbroker.bootstrap, [
        {"op": "group_consume", "topics": [ta, tb], "groupId": group, "count": len(more)},
        {"op": "describe_groups", "groups": [group]},
        {"op": "list_groups", "states": ["Empty"]},
        {"op": "delete_groups", "groups": [group]},
        {"op": "delete_groups", "groups": [group]},
        {"op": "list_groups"},
    ])
    assert by_topic(ok(resume), ta) == expected(more, base=4) and by_topic(resume, tb) == []
    assert {(c["topic"], c["partition"]): c["offset"] for c in resume["committed"]} == {**ends, (ta, 0): 6,
                                                                                       (ta, 1): 6, (ta, 2): 6}
    g = ok(describe)["results"][group]
    assert (g["state"], g["members"]) == ("Empty", [])
    assert {"groupId": group, "state": "Empty", "type": None, "simple": False} in ok(empty_ones)["groups"]
    assert ok(delete)["results"] == {group: None}
    assert error_type(ok(delete_again)["results"][group]) == "GroupIdNotFoundException"
    assert group not in [x["groupId"] for x in ok(listing)["groups"]]
    assert group not in [x.group_id for x in admin.list_groups()] and admin.list_group_offsets(group) == {}


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_second_member_shares_partitions_and_commits_hand_over(jbroker, java_driver, admin, tmp_path, protocol):
    """Two Java consumers in one group: the default assignors (range first: eager rebalances) or
    cooperative-sticky alone (incremental rebalances, KIP-429). A reads and commits everything; B joins, gets half
    the partitions, finds nothing uncommitted and leaves; A takes them back and reads the next records: every
    record read exactly once, by A."""
    topic, group = f"java-rebalance-{protocol}", f"java-rebalance-{protocol}"
    admin.create_topics([NewTopic(topic, 4, 1)])
    first = sample_records("rb1", partitions=4, per_partition=5)
    second = sample_records("rb2", partitions=4, per_partition=5)
    confluent_produce(jbroker.bootstrap, topic, first)
    stop = tmp_path / "stop-member-a"
    fast = {"heartbeat.interval.ms": 300}   # members notice a rebalance within 0.3 s, not Java's default 3 s
    if protocol == "cooperative":
        fast["partition.assignment.strategy"] = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
    a = java_driver.start(jbroker.bootstrap, [
        {"op": "group_consume", "topics": [topic], "groupId": group, "count": len(first) + len(second),
         "stopFile": str(stop), "commitEachPoll": True, "config": fast, "timeoutMs": 90_000}])
    try:
        committed = {(topic, p): 5 for p in range(4)}
        harness.wait_until(lambda: admin.list_group_offsets(group) == committed, 60, 0.2,
                           "member A to read and commit the first 20 records")
        (b,) = java_driver(jbroker.bootstrap, [
            {"op": "group_consume", "topics": [topic], "groupId": group, "count": 0, "untilAssigned": 2,
             "config": fast, "timeoutMs": 60_000}])
        assert ok(b)["timedOut"] is False and len(b["assignment"]) == 2 and b["records"] == []

        def a_owns_all():
            (g,) = admin.describe_groups([group]).values()
            return g.state == "Stable" and len(g.members) == 1 and len(g.members[0].assignment) == 4
        harness.wait_until(a_owns_all, 60, 0.2, "member A to own all 4 partitions again")
        confluent_produce(jbroker.bootstrap, topic, second)
        committed = {(topic, p): 10 for p in range(4)}
        harness.wait_until(lambda: admin.list_group_offsets(group) == committed, 60, 0.2,
                           "member A to read and commit the next 20 records")
        stop.touch()
        (a_result,) = a.result(60)
    finally:
        a.kill()
    assert ok(a_result)["timedOut"] is False
    assert got_of(a_result) == sorted(expected(first) + expected(second, base=5),
                                      key=lambda g: (g.partition, g.offset))
    events = [(h["event"], tuple(p for _, p in h["partitions"])) for h in a_result["history"]]
    b_parts = tuple(p for _, p in b["assignment"])
    a_half = tuple(sorted(set(range(4)) - set(b_parts)))
    if protocol == "eager":
        # Everything is revoked before each rejoin and assigned afresh after it; close() revokes last.
        assert events == [("assigned", (0, 1, 2, 3)), ("revoked", (0, 1, 2, 3)), ("assigned", a_half),
                          ("revoked", a_half), ("assigned", (0, 1, 2, 3)), ("revoked", (0, 1, 2, 3))], events
    else:
        # Only the partitions that move are revoked (B's half, once); A keeps its half throughout.
        assert [parts for what, parts in events if what != "assigned"] == [b_parts, (0, 1, 2, 3)], events
        owned, trajectory = set(), []
        for what, parts in events:
            owned = owned | set(parts) if what == "assigned" else owned - set(parts)
            if not trajectory or trajectory[-1] != tuple(sorted(owned)):
                trajectory.append(tuple(sorted(owned)))
        assert trajectory == [(0, 1, 2, 3), a_half, (0, 1, 2, 3), ()], events


# ------------------------------------------------------------------------------------------------------- admin

def test_admin_topics_configs_partitions_cluster(jbroker, java_driver, admin):
    t1, t2, t3 = "java-adm-1", "java-adm-2", "java-adm-3"
    steps = [
        {"op": "create_topics", "topics": [
            {"name": t1, "partitions": 2, "configs": {"retention.ms": 3_600_000, "segment.bytes": 1_048_576}},
            {"name": t2, "partitions": 1}]},
        {"op": "create_topics", "topics": [{"name": t1, "partitions": 1}]},
        {"op": "create_topics", "topics": [{"name": t3, "partitions": 1, "configs": {"retention.ms": "soon"}}]},
        {"op": "create_topics", "topics": [{"name": t3, "partitions": 4, "configs": {"retention.ms": 1234}}],
         "validateOnly": True},
        {"op": "list_topics"},
        {"op": "describe_topics", "topics": [t1, t3]},
        {"op": "create_partitions", "topics": {t2: 3}},
        {"op": "create_partitions", "topics": {t2: 2}},
        {"op": "describe_configs", "resources": [{"type": "topic", "name": t1}, {"type": "broker", "name": "0"}]},
        {"op": "alter_configs", "resources": [{"type": "topic", "name": t1, "ops": [
            {"name": "retention.ms", "op": "DELETE"},
            {"name": "cleanup.policy", "value": "compact", "op": "APPEND"},
            {"name": "min.insync.replicas", "value": "1", "op": "SET"}]}]},
        {"op": "describe_configs", "resources": [{"type": "topic", "name": t1}]},
        {"op": "alter_configs", "resources": [
            {"type": "topic", "name": t1, "ops": [{"name": "cleanup.policy", "value": "delete", "op": "SUBTRACT"}]},
            {"type": "topic", "name": t2, "ops": [{"name": "retention.ms", "value": "5", "op": "APPEND"}]},
            {"type": "topic", "name": t3, "ops": [{"name": "retention.ms", "value": "5"}]},
            # a read-only broker key (dynamic ones change: tests/integration/test_configs_dynamic.py)
            {"type": "broker", "name": "0", "ops": [{"name": "broker.id", "value": "5"}]}]},
        {"op": "describe_configs", "resources": [{"type": "topic", "name": t1}]},
        {"op": "alter_configs", "resources": [{"type": "topic", "name": t2, "ops": [
            {"name": "no.such.config", "value": "1"}]}]},
        {"op": "alter_configs", "resources": [{"type": "topic", "name": t2, "ops": [
            {"name": "max.message.bytes", "value": "2048"}]}]},
        # 1,000 bytes fit under the new 2,048-byte limit, 4,000 do not (MESSAGE_TOO_LARGE from the broker).
        {"op": "produce", "topic": t2, "records": java_records([Rec(0, b"k", b"s" * 1000, (), None)])},
        {"op": "produce", "topic": t2, "records": java_records([Rec(0, b"k", b"L" * 4000, (), None)])},
        {"op": "describe_cluster"},
        # A name with '/' is no topic and no path into t2's znodes (DeleteTopics used to delete t2 here).
        {"op": "delete_topics", "topics": [t2 + "/partitions"]},
        {"op": "create_partitions", "topics": {t2 + "/partitions/0": 4}},
        {"op": "describe_configs", "resources": [{"type": "topic", "name": t2 + "/partitions"}]},
        {"op": "alter_configs", "resources": [{"type": "topic", "name": t2 + "/partitions", "ops": [
            {"name": "retention.ms", "value": "5"}]}]},
        {"op": "delete_topics", "topics": [t1, t3]},
        {"op": "list_topics"},
    ]
    results = dict(zip(range(len(steps)), java_driver(jbroker.bootstrap, steps), strict=True))
    (created, exists, bad_config, validate, listed, described, grow, shrink, configs, alter1, configs1, alter2,
     configs2, unknown_key, set_max, small, large, cluster, slash_delete, slash_grow, slash_describe, slash_alter,
     deleted, listed_after) = results.values()

    assert ok(created)["results"][t1]["numPartitions"] == 2 and created["results"][t2]["replicationFactor"] == 1
    assert created["results"][t1]["configs"]["retention.ms"] == "3600000"
    assert created["results"][t1]["configs"]["segment.bytes"] == "1048576"
    assert error_type(ok(exists)["results"][t1]) == "TopicExistsException"
    assert error_type(ok(bad_config)["results"][t3]) == "InvalidConfigurationException"
    assert ok(validate)["results"][t3]["numPartitions"] == 4
    # validateOnly still reports the configs the topic would get (CreateTopics v5), every key as for a real one.
    would = validate["results"][t3]["configs"]
    assert would["retention.ms"] == "1234" and would.keys() == created["results"][t1]["configs"].keys()
    names = [t["name"] for t in ok(listed)["topics"]]
    assert t1 in names and t2 in names and t3 not in names    # neither the bad nor the validate-only one exists
    assert all(t["internal"] is False for t in listed["topics"])
    assert ok(described)["results"][t1] == {"internal": False, "partitions": [
        {"partition": p, "leader": 0, "replicas": [0], "isr": [0]} for p in (0, 1)]}
    assert error_type(described["results"][t3]) == "UnknownTopicOrPartitionException"
    assert ok(grow)["results"] == {t2: None}
    assert error_type(ok(shrink)["results"][t2]) == "InvalidPartitionsException"

    entries = ok(configs)["results"][t1]["entries"]
    assert entries["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG", "readOnly": False,
                                       "isDefault": False, "isSensitive": False}
    assert entries["cleanup.policy"]["value"] == "delete" and entries["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    broker_entries = configs["results"]["0"]["entries"]
    assert broker_entries["broker.id"]["value"] == "0" and broker_entries["broker.id"]["readOnly"] is True

    assert ok(alter1)["results"] == {t1: None}
    after = ok(configs1)["results"][t1]["entries"]
    assert (after["retention.ms"]["value"], after["retention.ms"]["source"]) == ("604800000", "DEFAULT_CONFIG")
    assert (after["cleanup.policy"]["value"], after["cleanup.policy"]["source"]) == ("delete,compact",
                                                                                     "DYNAMIC_TOPIC_CONFIG")
    assert after["segment.bytes"]["value"] == "1048576" and after["min.insync.replicas"]["isDefault"] is False
    assert ok(alter2)["results"][t1] is None
    assert error_type(alter2["results"][t2]) == "InvalidConfigurationException"
    assert error_type(alter2["results"][t3]) == "UnknownTopicOrPartitionException"
    assert error_type(alter2["results"]["0"]) == "InvalidRequestException"
    after = ok(configs2)["results"][t1]["entries"]
    assert (after["cleanup.policy"]["value"], after["min.insync.replicas"]["value"]) == ("compact", "1")
    assert error_type(ok(unknown_key)["results"][t2]) == "InvalidConfigurationException"
    assert ok(set_max)["results"] == {t2: None}
    assert ok(small)["metadata"] == [{"partition": 0, "offset": 0, "timestamp": small["metadata"][0]["timestamp"]}]
    assert error_type(ok(large)["metadata"][0]) == "RecordTooLargeException"

    assert ok(cluster)["controller"] == 0 and cluster["clusterId"]
    assert cluster["nodes"] == [{"id": 0, "host": jbroker.host, "port": jbroker.port}]
    assert error_type(ok(slash_delete)["results"][t2 + "/partitions"]) == "UnknownTopicOrPartitionException"
    assert error_type(ok(slash_grow)["results"][t2 + "/partitions/0"]) == "UnknownTopicOrPartitionException"
    assert error_type(ok(slash_describe)["results"][t2 + "/partitions"]) == "InvalidTopicException"
    assert error_type(ok(slash_alter)["results"][t2 + "/partitions"]) == "InvalidTopicException"
    assert ok(deleted)["results"][t1] is None
    assert error_type(deleted["results"][t3]) == "UnknownTopicOrPartitionException"
    assert t1 not in [t["name"] for t in ok(listed_after)["topics"]] and t2 in [t["name"] for t in
                                                                              listed_after["topics"]]

    # What the Java admin changed, as kbroker's own admin client reads it.
    cfg = {e.name: (e.value, e.source) for e in admin.topic_configs(t2)}
    assert cfg["max.message.bytes"] == ("2048", 1) and cfg["retention.ms"][1] == 5
    assert sorted(admin.cluster.partitions_for(t2, refresh=True)) == [0, 1, 2]
    assert t1 not in admin.list_topics()


def test_admin_alter_group_offsets_seen_by_confluent(jbroker, java_driver, admin):
    topic, group = "java-adm-offsets", "java-offsets-group"
    admin.create_topics([NewTopic(topic, 2, 1)])
    confluent_produce(jbroker.bootstrap, topic, sample_records("ao", partitions=2, per_partition=5))
    alter, offsets = java_driver(jbroker.bootstrap, [
        {"op": "alter_group_offsets", "group": group, "offsets": [
            {"topic": topic, "partition": 0, "offset": 3, "metadata": "java"},
            {"topic": topic, "partition": 1, "offset": 5}]},
        {"op": "list_group_offsets", "group": group},
    ])
    assert ok(alter)["results"] == {f"{topic}-0": None, f"{topic}-1": None}
    assert ok(offsets)["offsets"] == [{"topic": topic, "partition": 0, "offset": 3, "metadata": "java"},
                                      {"topic": topic, "partition": 1, "offset": 5, "metadata": ""}]
    assert admin.list_group_offsets(group) == {(topic, 0): 3, (topic, 1): 5}
    # A group member starts at those commits: 2 records left in partition 0, none in partition 1.
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": jbroker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "error"})
    got = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.partition(), msg.offset()))
    finally:
        consumer.close()
    assert got == [(0, 3), (0, 4)]


# ------------------------------------------------------------------------------------------------------ codecs

@pytest.fixture(scope="module")
def java_codecs(jbroker, java_driver):
    """Every codec produced and read by Java in one JVM: {codec: (records, produce step, consume step)}."""
    steps, recs = [], {}
    for codec in CODECS:
        topic = f"java-codec-{codec}"
        recs[codec] = sample_records(f"jc-{codec}", partitions=2, per_partition=8)
        steps += [{"op": "create_topics", "topics": [{"name": topic, "partitions": 2}]},
                  {"op": "produce", "topic": topic, "records": java_records(recs[codec]),
                   "config": {"compression.type": codec}},
                  {"op": "consume", "topic": topic, "count": len(recs[codec])}]
    results = java_driver(jbroker.bootstrap, steps)
    return {codec: (recs[codec], results[3 * i + 1], results[3 * i + 2]) for i, codec in enumerate(CODECS)}


@pytest.mark.parametrize("codec", CODECS)
def test_codec_produced_by_java_read_by_java_and_confluent(jbroker, java_codecs, codec):
    recs, produce, consume = java_codecs[codec]
    topic = f"java-codec-{codec}"
    assert ok(produce)["effective"]["compression.type"] == codec
    assert all("error" not in md for md in produce["metadata"]), produce["metadata"]
    want = expected(recs)
    assert got_of(ok(consume)) == want
    assert confluent_consume(jbroker.bootstrap, topic, len(recs), partitions=(0, 1)) == want
    for p in (0, 1):
        assert_stored_codec(jbroker, topic, p, codec)


# ------------------------------------------------------------------------------------------ the other families

FAMILIES = {
    "confluent": CODECS,
    "kcat": CODECS,
    "kafka-python": CODECS,
    "kafka-python-0.10.1": ("none", "gzip", "snappy", "lz4"),   # magic 1 has no zstd (KIP-110)
    "aiokafka": CODECS,
    "kafkajs": ("none", "gzip"),                                # what tests/js's driver can produce
}
WRITES = [(fam, codec) for fam, codecs in FAMILIES.items() for codec in codecs]


def _available(family):
    if family == "kcat":
        return shutil.which("kcat") is not None
    if family == "kafkajs":
        return shutil.which("node") is not None and (harness.JS_DIR / "node_modules" / "kafkajs").is_dir()
    return True


@pytest.fixture(scope="module")
def foreign_reads(jbroker, java_driver, admin):
    """Each family writes each codec into its own 2-partition topic; one JVM then reads every topic.
    -> {(family, codec): (records, want, produce window (before, after), Java consume step)}."""
    writes = [(f, c) for f, c in WRITES if _available(f)]
    topic = {w: "java-from-%s-%s" % (w[0].replace(".", "_"), w[1]) for w in writes}
    admin.create_topics([NewTopic(topic[w], 2, 1) for w in writes])
    out = {}
    for fam, codec in writes:
        tag = f"{fam}:{codec}:"
        recs = sample_records(tag, partitions=2, per_partition=5) if fam == "kafkajs" else records_for(fam, "java", tag)
        before = now_ms()
        if fam == "kafkajs":
            result = harness.run_kafkajs({"brokers": [jbroker.bootstrap], "topic": topic[(fam, codec)],
                                          "mode": "produce", "messages": kafkajs_spec_messages(recs),
                                          "compression": codec})
            assert all(r["errorCode"] == 0 for r in result["results"]), result
        else:
            matrix_produce(fam, jbroker, topic[(fam, codec)], recs, codec)
        want = expected(recs, headers=HEADERS.get(fam, True), timestamps=fam != "kcat")
        out[(fam, codec)] = (recs, want, (before, now_ms()))
    steps = [{"op": "consume", "topic": topic[w], "count": len(out[w][0])} for w in writes]
    for w, step in zip(writes, java_driver(jbroker.bootstrap, steps), strict=True):
        out[w] += (step,)
    return out, topic


@pytest.mark.parametrize("family,codec", WRITES, ids=[f"{f}-{c}" for f, c in WRITES])
def test_java_reads_what_other_families_wrote(jbroker, foreign_reads, family, codec):
    if family == "kcat":
        harness.require_binary("kcat")
    if family == "kafkajs":
        harness.require_kafkajs()
    reads, topic = foreign_reads
    recs, want, (before, after), step = reads[(family, codec)]
    got = got_of(ok(step))
    if family == "kcat":   # kcat cannot set timestamps: the client stamped them during the produce call
        assert all(before <= g.timestamp <= after for g in got), (before, [g.timestamp for g in got], after)
        got = [g._replace(timestamp=None) for g in got]
    assert got == want
    assert step["endOffsets"] == {"0": 5, "1": 5}
    for p in (0, 1):
        assert_stored_codec(jbroker, topic[(family, codec)], p, codec, librdkafka=family in ("confluent", "kcat"))


def test_families_table_covers_every_codec_and_family():
    assert set(FAMILIES) >= {"confluent", "kcat", "kafka-python", "aiokafka", "kafkajs"}
    assert {c for f in ("confluent", "kafka-python", "aiokafka") for c in FAMILIES[f]} == set(CODECS)
