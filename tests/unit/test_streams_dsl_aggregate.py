"""kbroker.streams DSL, stateful operators through the TopologyTestDriver with exact outputs: the quickstart's
WordCount (caching off and on), KGroupedStream count/reduce/aggregate (timestamps, null handling), KTable sources,
filter/map_values/to_stream, KStream.to_table, KGroupedTable aggregations with subtractors (Change(new, old) over
the repartition topic in Kafka's ChangedSerializer format), caching's one-update-per-key-per-commit."""
import re
import tempfile

import pytest

from kbroker.streams.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder
from kbroker.streams.dsl.nodes import Change, ChangedSerde
from kbroker.streams.errors import StreamsException
from kbroker.streams.processor import TaskId
from kbroker.streams.serdes import Serdes
from kbroker.streams.state import ProcessorStateManager
from kbroker.streams.task import ConsumedRecord, StreamTask
from kbroker.streams.test_driver import TestRecord, TopologyTestDriver

S = Serdes.String()
L = Serdes.Long()
APP = "agg-test"
CONFIG = {"application.id": APP, "default.key.serde": "String", "default.value.serde": "String"}
NO_CACHE = dict(CONFIG, **{"cache.max.bytes.buffering": 0})


def recs(*triples):
    return [TestRecord(k, v, ts) for k, v, ts in triples]


LINES = ["all streams lead to kafka", "hello kafka streams", "join kafka summit"]
# the quickstart's output, every update (cache.max.bytes.buffering=0, as Kafka's demo), line i at (i + 1) s
WORDCOUNT_OUTPUT = recs(("all", 1, 1000), ("streams", 1, 1000), ("lead", 1, 1000), ("to", 1, 1000),
                        ("kafka", 1, 1000), ("hello", 1, 2000), ("kafka", 2, 2000), ("streams", 2, 2000),
                        ("join", 1, 3000), ("kafka", 3, 3000), ("summit", 1, 3000))
LAST_VALUES = {"all": 1, "streams": 2, "lead": 1, "to": 1, "kafka": 3, "hello": 1, "join": 1, "summit": 1}


def pipe_lines(config, topology):
    with TopologyTestDriver(topology, config) as d:
        i = d.create_input_topic("streams-plaintext-input", S, S)
        for n, line in enumerate(LINES):
            i.pipe_input(None, line, (n + 1) * 1000)
        out = d.create_output_topic("streams-wordcount-output", S, L).read_records_to_list()
        store = d.get_state_store("counts-store")
        stored = {kv.key: kv.value for kv in store.all()}
        repartitioned = d.producer_history(APP + "-counts-store-repartition")
        changelog = d.producer_history(APP + "-counts-store-changelog")
    return out, stored, repartitioned, changelog


@pytest.mark.parametrize("config", [NO_CACHE, dict(NO_CACHE, **{"default.dsl.store": "in_memory"})],
                         ids=["rocksdb", "in_memory"])
def test_quickstart_wordcount_every_update(config):
    out, stored, repartitioned, changelog = pipe_lines(config, _wc_builder(config, caching=False))
    assert out == WORDCOUNT_OUTPUT
    assert {r.key: r.value for r in out} == LAST_VALUES
    assert {k: v.value for k, v in stored.items()} == LAST_VALUES
    assert {k: v.timestamp for k, v in stored.items()}["kafka"] == 3000
    # the 11 words went through "<app>-counts-store-repartition", keyed by the word (value: the word too)
    assert [(r.key, r.value) for r in repartitioned][:2] == [(b"all", b"all"), (b"streams", b"streams")]
    assert len(repartitioned) == 11
    # the changelog holds the plain 8-byte counts (Kafka's timestamped stores log the raw value)
    assert [(r.key, r.value, r.timestamp) for r in changelog][-1] == (b"summit", (1).to_bytes(8, "big"), 3000)


def _wc_builder(config, caching):
    b = StreamsBuilder(config)
    words = b.stream("streams-plaintext-input").flat_map_values(lambda v: re.split(r"\W+", v.lower()))
    m = Materialized.as_("counts-store")
    if not caching:
        m = m.with_caching_disabled()
    words.group_by(lambda k, v: v).count(materialized=m).to_stream().to("streams-wordcount-output",
                                                                        Produced.with_(S, L))
    return b.build()


def test_quickstart_wordcount_with_caching():
    """Caching on (Kafka's default): the driver commits after every processed record (Java's driver does too),
    and each repartitioned word is one record, so every word's count is still emitted once per line -- the same
    output; caching's dedup shows when one record updates a key several times (next test)."""
    out, stored, _, _ = pipe_lines(CONFIG, _wc_builder(CONFIG, caching=True))
    assert out == WORDCOUNT_OUTPUT
    assert {k: v.value for k, v in stored.items()} == LAST_VALUES


@pytest.mark.parametrize("caching", [False, True])
def test_caching_emits_one_update_per_key_per_commit(caching):
    b = StreamsBuilder()
    m = Materialized.as_("c") if caching else Materialized.as_("c").with_caching_disabled()
    (b.stream("in").flat_map_values(lambda v: v.split()).group_by_key().count(materialized=m)
     .to_stream().to("out", Produced.with_(S, L)))
    with TopologyTestDriver(b.build(), CONFIG) as d:
        i = d.create_input_topic("in", S, S)
        i.pipe_input("x", "a a a", 5)
        i.pipe_input("y", "b", 6)
        i.pipe_input("x", "c c", 7)
        out = d.create_output_topic("out", S, L).read_records_to_list()
    if caching:
        assert out == recs(("x", 3, 5), ("y", 1, 6), ("x", 5, 7))
    else:
        assert out == recs(("x", 1, 5), ("x", 2, 5), ("x", 3, 5), ("y", 1, 6), ("x", 4, 7), ("x", 5, 7))


def test_stream_count_reduce_aggregate_timestamps_and_nulls():
    """Aggregate timestamp = max(record, previous aggregate); null keys and null values are dropped (counted in
    the task's dropped-records)."""
    b = StreamsBuilder()
    g = b.stream("in").group_by_key()
    g.count(materialized=Materialized.as_("cnt").with_caching_disabled()).to_stream().to("count",
                                                                                         Produced.with_(S, L))
    g.reduce(lambda agg, v: agg + v,
             materialized=Materialized.as_("red").with_caching_disabled()).to_stream().to("reduce")
    g.aggregate(lambda: "<", lambda k, v, agg: agg + k + v,
                materialized=Materialized.as_("agg").with_caching_disabled()).to_stream().to("aggregate")
    with TopologyTestDriver(b.build(), CONFIG) as d:
        i = d.create_input_topic("in", S, S)
        for k, v, ts in [("a", "1", 100), ("a", "2", 50), ("b", "5", 70), ("a", None, 80), (None, "3", 90)]:
            i.pipe_input(k, v, ts)
        count = d.create_output_topic("count", S, L).read_records_to_list()
        reduce = d.create_output_topic("reduce", S, S).read_records_to_list()
        aggregate = d.create_output_topic("aggregate", S, S).read_records_to_list()
        assert d.task.metrics["dropped-records"] == 6        # 2 records x 3 aggregations
    assert count == recs(("a", 1, 100), ("a", 2, 100), ("b", 1, 70))
    assert reduce == recs(("a", "1", 100), ("a", "12", 100), ("b", "5", 70))
    assert aggregate == recs(("a", "<a1", 100), ("a", "<a1a2", 100), ("b", "<b5", 70))


def test_group_by_named_shares_one_repartition_topic():
    b = StreamsBuilder()
    g = b.stream("in").group_by(lambda k, v: v, Grouped.as_("by-value"))
    g.count(materialized=Materialized.as_("c1").with_caching_disabled()).to_stream().to("o1", Produced.with_(S, L))
    g.count(materialized=Materialized.as_("c2").with_caching_disabled()).to_stream().to("o2", Produced.with_(S, L))
    t = b.build()
    assert t.repartition_topics(APP) == {APP + "-by-value-repartition": None}
    names = list(t.nodes())
    assert names[:5] == ["KSTREAM-SOURCE-0000000000", "by-value", "by-value-repartition-filter",
                         "by-value-repartition-sink", "by-value-repartition-source"]
    with TopologyTestDriver(t, CONFIG) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "v", 1)
        assert d.create_output_topic("o1", S, L).read_records_to_list() == recs(("v", 1, 1))
        assert d.create_output_topic("o2", S, L).read_records_to_list() == recs(("v", 1, 1))
        assert len(d.producer_history(APP + "-by-value-repartition")) == 1


def test_ktable_source_filter_map_values_to_stream_tombstones():
    b = StreamsBuilder()
    (b.table("t", Consumed.with_(S, S)).filter(lambda k, v: v != "x").map_values(lambda v: v + "!")
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), NO_CACHE) as d:
        i = d.create_input_topic("t", S, S)
        for k, v, ts in [("a", "1", 10), ("b", "x", 20), ("a", None, 30), (None, "2", 40)]:
            i.pipe_input(k, v, ts)
        out = d.create_output_topic("out", S, S).read_records_to_list()
        assert d.task.metrics["dropped-records"] == 1          # the null key
    # a filtered-out or deleted key is a tombstone downstream (Kafka's KTableFilter without old values)
    assert out == recs(("a", "1!", 10), ("b", None, 20), ("a", None, 30))


def test_ktable_materialized_filter_store_and_queryable_name():
    b = StreamsBuilder()
    t = b.table("t", materialized=Materialized.as_("src").with_caching_disabled())
    f = t.filter(lambda k, v: int(v) > 1, materialized=Materialized.as_("big").with_caching_disabled())
    assert (t.queryable_store_name(), f.queryable_store_name()) == ("src", "big")
    assert t.map_values(str).queryable_store_name() is None
    f.to_stream().to("out")
    with TopologyTestDriver(b.build(), CONFIG) as d:
        i = d.create_input_topic("t", S, S)
        for k, v, ts in [("a", "1", 1), ("b", "2", 2), ("b", "3", 3), ("b", "0", 4), ("c", "5", 5)]:
            i.pipe_input(k, v, ts)
        out = d.create_output_topic("out", S, S).read_records_to_list()
        big = {kv.key: kv.value.value for kv in d.get_state_store("big").all()}
        src = {kv.key: kv.value.value for kv in d.get_state_store("src").all()}
    # the source is materialized (named), so the filter gets old values: ("a", "1") was never in -> no output
    assert out == recs(("b", "2", 2), ("b", "3", 3), ("b", None, 4), ("c", "5", 5))
    assert big == {"c": "5"}
    assert src == {"a": "1", "b": "0", "c": "5"}


def test_stream_to_table_after_key_change_repartitions():
    b = StreamsBuilder()
    table = b.stream("in").select_key(lambda k, v: v[0]).to_table(materialized=Materialized.as_("tt"))
    table.to_stream().to("out")
    t = b.build()
    assert t.repartition_topics(APP) == {APP + "-KSTREAM-TOTABLE-0000000002-repartition": None}
    assert "KSTREAM-SOURCE-0000000005" in t.nodes()
    with TopologyTestDriver(t, NO_CACHE) as d:
        i = d.create_input_topic("in", S, S)
        i.pipe_input("1", "ab", 1)
        i.pipe_input("2", "ac", 2)
        assert d.create_output_topic("out", S, S).read_records_to_list() == recs(("a", "ab", 1), ("a", "ac", 2))
        assert d.get_state_store("tt").get("a").value == "ac"


def _regions(kind):
    """users table "user" -> "region:amount"; per region: count of users, or the sum of amounts."""
    b = StreamsBuilder()
    g = b.table("users").group_by(lambda user, v: (v.split(":")[0], int(v.split(":")[1])),
                                  Grouped.with_(S, L).with_name("regions"))
    m = Materialized.as_("per-region").with_value_serde(L).with_caching_disabled()
    if kind == "count":
        t = g.count(materialized=m)
    elif kind == "reduce":
        t = g.reduce(lambda agg, v: agg + v, lambda agg, v: agg - v, materialized=m)
    else:
        t = g.aggregate(lambda: 0, lambda k, v, agg: agg + v, lambda k, v, agg: agg - v, materialized=m)
    t.to_stream().to("out", Produced.with_(S, L))
    return b.build()


USERS = [("u1", "A:5", 10), ("u2", "A:7", 20), ("u1", "A:6", 30), ("u2", "B:7", 40), ("u1", None, 50)]


@pytest.mark.parametrize("kind, expected", [
    ("count", recs(("A", 1, 10), ("A", 2, 20), ("A", 2, 30), ("A", 1, 40), ("B", 1, 40), ("A", 0, 50))),
    ("reduce", recs(("A", 5, 10), ("A", 12, 20), ("A", 13, 30), ("A", 6, 40), ("B", 7, 40), ("A", 0, 50))),
    ("aggregate", recs(("A", 5, 10), ("A", 12, 20), ("A", 13, 30), ("A", 6, 40), ("B", 7, 40), ("A", 0, 50))),
])
def test_kgroupedtable_adds_new_and_subtracts_old(kind, expected):
    """A value changing within a group is one Change(new, old) record; moving to another group is a subtract
    record for the old group then an add record for the new; a delete subtracts."""
    with TopologyTestDriver(_regions(kind), CONFIG) as d:
        i = d.create_input_topic("users", S, S)
        for k, v, ts in USERS:
            i.pipe_input(k, v, ts)
        out = d.create_output_topic("out", S, L).read_records_to_list()
        repartition = d.producer_history(APP + "-regions-repartition")
    assert out == expected
    # Kafka's ChangedSerializer bytes: new only ...\x01, old only ...\x00, both: zigzag varint len(new) + new +
    # old + \x02 (u1 A:5 -> A:6 keeps the group: one record)
    assert [(r.key, r.value) for r in repartition] == [
        (b"A", L.serialize("t", 5) + b"\x01"),
        (b"A", L.serialize("t", 7) + b"\x01"),
        (b"A", b"\x10" + L.serialize("t", 6) + L.serialize("t", 5) + b"\x02"),
        (b"A", L.serialize("t", 7) + b"\x00"),
        (b"B", L.serialize("t", 7) + b"\x01"),
        (b"A", L.serialize("t", 6) + b"\x00"),
    ]


def test_kgroupedtable_default_value_serde_and_generated_names():
    b = StreamsBuilder()
    b.table("users").group_by(lambda k, v: (v, k)).count().to_stream().to("out", Produced.with_(S, L))
    t = b.build()
    # store index 0 (table), source 1, table source 2, select 3, store 4, sink 5, source 6, aggregate 7
    assert t.repartition_topics(APP) == {APP + "-KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition": None}
    assert ["KSTREAM-SINK-0000000005", "KSTREAM-SOURCE-0000000006", "KTABLE-AGGREGATE-0000000007"] == \
        [n for n in t.nodes() if n[-2:] in ("05", "06", "07")]
    with TopologyTestDriver(t, NO_CACHE) as d:
        i = d.create_input_topic("users", S, S)
        i.pipe_input("u1", "A", 1)
        i.pipe_input("u1", "B", 2)
        out = d.create_output_topic("out", S, L).read_records_to_list()
    assert out == recs(("A", 1, 1), ("A", 0, 2), ("B", 1, 2))


def test_kgroupedtable_null_grouping_key_is_skipped_and_null_table_key_dropped():
    b = StreamsBuilder()
    b.table("users").group_by(lambda k, v: (None if v == "none" else v, k)).count().to_stream().to(
        "out", Produced.with_(S, L))
    with TopologyTestDriver(b.build(), NO_CACHE) as d:
        i = d.create_input_topic("users", S, S)
        i.pipe_input("u1", "none", 1)
        i.pipe_input("u2", "A", 2)
        out = d.create_output_topic("out", S, L).read_records_to_list()
    assert out == recs(("A", 1, 2))


def test_changed_serde_formats():
    cs = ChangedSerde(S)
    assert cs.serialize("t", Change("ab", None)) == b"ab\x01"
    assert cs.serialize("t", Change(None, "ab")) == b"ab\x00"
    assert cs.serialize("t", Change("a" * 70, "b")) == b"\x8c\x01" + b"a" * 70 + b"b\x02"   # zigzag(70)=140
    for c in (Change("ab", None), Change(None, "ab"), Change("a" * 70, "b"), Change("", "x")):
        assert cs.deserialize("t", cs.serialize("t", c)) == c
    with pytest.raises(StreamsException, match="Both old and new values are null"):
        cs.serialize("t", Change(None, None))
    with pytest.raises(StreamsException, match="flag 7"):
        cs.deserialize("t", b"ab\x07")
    assert str(Change(1, None)) == "(1<-null)"


def test_old_values_flow_through_filter_and_map_values_to_group_by():
    """group_by asks its parents for old values: the non-materialized filter/map_values compute them from their
    parent's old value, and the source table is materialized on demand (Kafka's enableSendingOldValues)."""
    b = StreamsBuilder()
    (b.table("users").filter(lambda k, v: v != "skip").map_values(str.upper)
     .group_by(lambda k, v: (v, k)).count().to_stream().to("out", Produced.with_(S, L)))
    t = b.build()
    assert t.node("KTABLE-SOURCE-0000000002").stores == ["users-STATE-STORE-0000000000"]
    with TopologyTestDriver(t, NO_CACHE) as d:
        i = d.create_input_topic("users", S, S)
        for k, v, ts in [("u1", "a", 1), ("u1", "skip", 2), ("u1", "b", 3), ("u2", "b", 4)]:
            i.pipe_input(k, v, ts)
        out = d.create_output_topic("out", S, L).read_records_to_list()
    assert out == recs(("A", 1, 1), ("A", 0, 2), ("B", 1, 3), ("B", 2, 4))


def test_ktable_without_downstream_needs_is_not_materialized():
    b = StreamsBuilder()
    b.table("t").map_values(str.upper).to_stream(lambda k, v: v).to("out")
    t = b.build()
    assert t.store_builders() == {}
    with TopologyTestDriver(t, CONFIG) as d:
        d.create_input_topic("t", S, S).pipe_input("k", "v", 9)
        assert d.create_output_topic("out", S, S).read_records_to_list() == recs(("V", "V", 9))


def test_materialized_flags_reach_the_store_builders():
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    g = b.stream("in").group_by_key()
    g.count(materialized=Materialized.as_("a"))
    g.count(materialized=Materialized.as_("b").with_logging_disabled().with_caching_disabled())
    g.count(materialized=Materialized.as_("c").with_logging_enabled({"retention.ms": "1000"})
            .with_store_type("rocksDB"))
    t = b.build()
    sb = t.store_builders()
    assert [(n, sb[n].persistent(), sb[n].caching_enabled(), sb[n].logging_enabled()) for n in "abc"] == [
        ("a", False, True, True), ("b", False, False, False), ("c", True, True, True)]
    assert {s.store: s.config for s in t.changelog_topics(APP).values()} == {"a": {}, "c": {"retention.ms": "1000"}}


def test_builder_config_is_checked():
    with pytest.raises(ValueError, match="default.dsl.store"):
        StreamsBuilder({"default.dsl.store": "lmdb"})
    with pytest.raises(ValueError, match="topology.optimization"):
        StreamsBuilder({"topology.optimization": "all"})
    assert StreamsBuilder({"topology.optimization": "none"}).build() is not None


def test_build_config_default_dsl_store_retypes_default_stores():
    b = StreamsBuilder()
    g = b.stream("in").group_by_key()
    g.count(materialized=Materialized.as_("d"))
    g.count(materialized=Materialized.as_("r").with_store_type("rocksDB"))
    sb = b.build({"default.dsl.store": "in_memory"}).store_builders()
    assert (sb["d"].persistent(), sb["r"].persistent()) == (False, True)


def test_materialized_may_stand_where_named_does():
    """Kafka's count(Materialized) / reduce(reducer, Materialized) / toTable(Materialized) overloads."""
    b = StreamsBuilder()
    g = b.stream("in").group_by_key()
    assert g.count(Materialized.as_("c1")).queryable_store_name() == "c1"
    assert g.reduce(lambda a, v: v, Materialized.as_("r1")).queryable_store_name() == "r1"
    assert g.aggregate(lambda: "", lambda k, v, a: v, Materialized.as_("a1")).queryable_store_name() == "a1"
    assert b.stream("in2").to_table(Materialized.as_("t1")).queryable_store_name() == "t1"
    assert b.table("in3").filter(lambda k, v: True, Materialized.as_("f1")).queryable_store_name() == "f1"
    assert set(b.build().store_builders()) == {"c1", "r1", "a1", "t1", "f1"}
    assert "c1" not in b.build().nodes()            # not taken as the processor's name


def test_quickstart_wordcount_with_caching_one_commit():
    """What a running app with caching on emits when the 3 lines fall in one commit interval: one record per word
    with its final count, in the order of each word's LAST update (Kafka's NamedCache dirty-key order) -- driven
    through a StreamTask directly, since the test driver commits after every record."""

    class Collector:
        def __init__(self):
            self.sent = []

        def send(self, topic, key, value, timestamp, headers, partition):
            self.sent.append((topic, key, value, timestamp))

        def flush(self):
            pass

    topology = _wc_builder(CONFIG, caching=True)
    with tempfile.TemporaryDirectory() as state_dir:
        config = dict(CONFIG, **{"state.dir": state_dir})
        builders = list(topology.store_builders().values())
        changelogs = {s.store: t for t, s in topology.changelog_topics(APP).items()}
        sm = ProcessorStateManager(TaskId(0, 0), APP, state_dir, builders, changelogs, False, config)
        collector = Collector()
        task = StreamTask(TaskId(0, 0), None, topology, config, sm, collector, lambda: 0)
        task.initialize()
        task.add_records("streams-plaintext-input", 0, [
            ConsumedRecord("streams-plaintext-input", 0, n, (n + 1) * 1000, None, S.serialize("t", line), [])
            for n, line in enumerate(LINES)])
        repartition = APP + "-counts-store-repartition"
        offset = 0
        while task.has_records_queued():
            task.process(100)
            fed = [r for r in collector.sent if r[0] == repartition]
            collector.sent = [r for r in collector.sent if r[0] != repartition]
            task.add_records(repartition, 0, [ConsumedRecord(repartition, 0, offset + i, ts, k, v, [])
                                              for i, (_, k, v, ts) in enumerate(fed)])
            offset += len(fed)
        assert [r for r in collector.sent if r[0] == "streams-wordcount-output"] == []    # all in the cache
        task.flush_state()                                                                # the commit
        out = [(S.deserialize("t", k), L.deserialize("t", v), ts) for topic, k, v, ts in collector.sent
               if topic == "streams-wordcount-output"]
        task.close(clean=True)
    assert out == [("all", 1, 1000), ("lead", 1, 1000), ("to", 1, 1000), ("hello", 1, 2000), ("streams", 2, 2000),
                   ("join", 1, 3000), ("kafka", 3, 3000), ("summit", 1, 3000)]
    assert dict((k, v) for k, v, _ in out) == LAST_VALUES
