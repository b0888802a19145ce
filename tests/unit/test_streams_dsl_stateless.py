"""kbroker.streams DSL, stateless KStream operators, through the TopologyTestDriver with exact outputs (keys,
values, timestamps, order), plus Kafka's generated names, repartition topics and option validation."""
import io
import re

import pytest

from kbroker.streams.dsl import (Branched, Consumed, Named, Printed, Produced, Repartitioned, StreamsBuilder)
from kbroker.streams.errors import TopologyException
from kbroker.streams.processor import Processor
from kbroker.streams.serdes import Serdes
from kbroker.streams.test_driver import TestRecord, TopologyTestDriver

S = Serdes.String()
L = Serdes.Long()
APP = "dsl-test"
CONFIG = {"application.id": APP, "default.key.serde": "String", "default.value.serde": "String"}


def run(builder, inputs, outputs, config=None, value_serdes=None):
    """Pipe ``inputs`` [(topic, key, value, ts)] and return {output topic: [TestRecord...]}."""
    value_serdes = value_serdes or {}
    with TopologyTestDriver(builder.build(), dict(CONFIG, **(config or {}))) as d:
        topics = {}
        for topic, key, value, ts in inputs:
            if topic not in topics:
                topics[topic] = d.create_input_topic(topic, S, S)
            topics[topic].pipe_input(key, value, ts)
        return {t: d.create_output_topic(t, S, value_serdes.get(t, S)).read_records_to_list() for t in outputs}


def recs(*triples):
    return [TestRecord(k, v, ts) for k, v, ts in triples]


def test_filter_filter_not_map_values_select_key():
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, S))
    s.filter(lambda k, v: v.startswith("a")).to("even")
    s.filter_not(lambda k, v: v.startswith("a")).to("odd")
    s.map_values(str.upper).to("upper")
    s.map_values(lambda k, v: "%s=%s" % (k, v), with_key=True).to("withkey")
    s.select_key(lambda k, v: v[:1]).to("rekeyed")
    out = run(b, [("in", "k1", "apple", 5), ("in", "k2", "banana", 7), ("in", None, "avocado", 9)],
              ["even", "odd", "upper", "withkey", "rekeyed"])
    assert out["even"] == recs(("k1", "apple", 5), (None, "avocado", 9))
    assert out["odd"] == recs(("k2", "banana", 7))
    assert out["upper"] == recs(("k1", "APPLE", 5), ("k2", "BANANA", 7), (None, "AVOCADO", 9))
    assert out["withkey"] == recs(("k1", "k1=apple", 5), ("k2", "k2=banana", 7), (None, "None=avocado", 9))
    assert out["rekeyed"] == recs(("a", "apple", 5), ("b", "banana", 7), ("a", "avocado", 9))


def test_map_flat_map_flat_map_values_keep_timestamps_and_headers():
    b = StreamsBuilder()
    s = b.stream("in")
    s.map(lambda k, v: (v, k)).to("swapped")
    s.flat_map(lambda k, v: [(k + str(i), v * i) for i in range(1, 3)]).to("flat")
    s.flat_map_values(lambda v: v.split(",")).to("parts")
    s.flat_map_values(lambda v: []).to("nothing")
    with TopologyTestDriver(b.build(), CONFIG) as d:
        i = d.create_input_topic("in", S, S)
        i.pipe_input(TestRecord("k", "x,y", 42, [("h", b"1")]))
        swapped = d.create_output_topic("swapped", S, S).read_records_to_list()
        flat = d.create_output_topic("flat", S, S).read_records_to_list()
        parts = d.create_output_topic("parts", S, S).read_records_to_list()
        assert d.create_output_topic("nothing", S, S).is_empty()
    h = [("h", b"1")]
    assert swapped == [TestRecord("x,y", "k", 42, h)]
    assert flat == [TestRecord("k1", "x,y", 42, h), TestRecord("k2", "x,yx,y", 42, h)]
    assert parts == [TestRecord("k", "x", 42, h), TestRecord("k", "y", 42, h)]


def test_peek_foreach_and_print():
    seen, each = [], []
    buf = io.StringIO()
    b = StreamsBuilder()
    s = b.stream("in")
    s.peek(lambda k, v: seen.append((k, v))).to("out")
    s.foreach(lambda k, v: each.append(v))
    s.print(Printed.to_stream(buf))
    s.print(Printed.to_stream(buf).with_label("lbl").with_key_value_mapper(lambda k, v: "%s->%s" % (k, v)))
    out = run(b, [("in", "a", "1", 1), ("in", None, "2", 2)], ["out"])
    assert out["out"] == recs(("a", "1", 1), (None, "2", 2))
    assert seen == [("a", "1"), (None, "2")]
    assert each == ["1", "2"]
    # Kafka's KStreamPrint: "[label]: key, value", label = the parent node's name, null for None
    assert buf.getvalue() == ("[KSTREAM-SOURCE-0000000000]: a, 1\n[lbl]: a->1\n"
                              "[KSTREAM-SOURCE-0000000000]: null, 2\n[lbl]: None->2\n")


def test_split_branches_names_and_routing():
    b = StreamsBuilder()
    s = b.stream("in")
    branches = (s.split(Named.as_("sp-"))
                .branch(lambda k, v: int(v) < 10, Branched.as_("small"))
                .branch(lambda k, v: int(v) < 100)
                .default_branch())
    assert sorted(branches) == ["sp-0", "sp-2", "sp-small"]
    branches["sp-small"].to("small")
    branches["sp-2"].to("medium")
    branches["sp-0"].to("large")
    out = run(b, [("in", "a", "5", 1), ("in", "b", "50", 2), ("in", "c", "500", 3), ("in", "d", "7", 4)],
              ["small", "medium", "large"])
    assert out["small"] == recs(("a", "5", 1), ("d", "7", 4))      # first matching predicate only
    assert out["medium"] == recs(("b", "50", 2))
    assert out["large"] == recs(("c", "500", 3))


def test_split_unnamed_no_default_and_chain_function():
    b = StreamsBuilder()
    s = b.stream("in")
    branches = (s.split()
                .branch(lambda k, v: v == "x", Branched.with_function(lambda ks: ks.map_values(str.upper)))
                .branch(lambda k, v: v == "y", Branched.with_consumer(lambda ks: ks.to("ys")))
                .no_default_branch())
    # splitter KSTREAM-BRANCH-0000000001; unnamed branches are numbered from 1; consumer branches are not returned
    assert list(branches) == ["KSTREAM-BRANCH-00000000011"]
    branches["KSTREAM-BRANCH-00000000011"].to("xs")
    out = run(b, [("in", "k", "x", 1), ("in", "k", "y", 2), ("in", "k", "z", 3)], ["xs", "ys"])
    assert out["xs"] == recs(("k", "X", 1))
    assert out["ys"] == recs(("k", "y", 2))


def test_deprecated_branch_returns_list():
    b = StreamsBuilder()
    a, c = b.stream("in").branch(lambda k, v: v == "a", lambda k, v: True)
    assert (a.name, c.name) == ("KSTREAM-BRANCHCHILD-0000000002", "KSTREAM-BRANCHCHILD-0000000003")
    a.to("a")
    c.to("c")
    out = run(b, [("in", "k", "a", 1), ("in", "k", "b", 2)], ["a", "c"])
    assert out == {"a": recs(("k", "a", 1)), "c": recs(("k", "b", 2))}


def test_merge():
    b = StreamsBuilder()
    b.stream("in1").merge(b.stream("in2")).map_values(lambda v: v + "!").to("out")
    out = run(b, [("in1", "a", "1", 10), ("in2", "b", "2", 11), ("in1", "c", "3", 12)], ["out"])
    assert out["out"] == recs(("a", "1!", 10), ("b", "2!", 11), ("c", "3!", 12))


def test_to_with_topic_extractor_and_produced_serdes():
    b = StreamsBuilder()
    s = b.stream("in")
    s.to(lambda k, v, ctx: "topic-" + v[0])
    s.map_values(len).to("lengths", Produced.with_(S, Serdes.Integer()).with_name("len-sink"))
    with TopologyTestDriver(b.build(), CONFIG) as d:
        i = d.create_input_topic("in", S, S)
        i.pipe_input("k", "abc", 1)
        i.pipe_input("k", "bcd", 2)
        assert d.create_output_topic("topic-a", S, S).read_records_to_list() == recs(("k", "abc", 1))
        assert d.create_output_topic("topic-b", S, S).read_records_to_list() == recs(("k", "bcd", 2))
        raw = d.producer_history("lengths")
        assert [(r.key, r.value) for r in raw] == [(b"k", b"\x00\x00\x00\x03")] * 2   # Integer: 4 bytes BE
    assert "len-sink" in b.build().nodes()


def test_repartition_named_and_unnamed_topics():
    b = StreamsBuilder()
    s = b.stream("in")
    s.select_key(lambda k, v: v).repartition(Repartitioned.as_("rp").with_number_of_partitions(4)).to("out1")
    s.repartition().to("out2")
    t = b.build()
    assert t.repartition_topics(APP) == {APP + "-rp-repartition": 4,
                                         APP + "-KSTREAM-REPARTITION-0000000006-repartition": None}
    names = list(t.nodes())
    # a user's name gives "<topic>-sink/-filter/-source"; a generated one Kafka's indexed names
    assert {"rp-repartition-sink", "rp-repartition-filter", "rp-repartition-source"} <= set(names)
    assert {"KSTREAM-SINK-0000000007", "KSTREAM-FILTER-0000000008", "KSTREAM-SOURCE-0000000009"} <= set(names)
    with TopologyTestDriver(t, CONFIG) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "v", 3)
        # the record went through the internal topic (captured) and came back
        assert [(r.key, r.value, r.timestamp) for r in d.producer_history(APP + "-rp-repartition")] == \
            [(b"v", b"v", 3)]
        assert d.create_output_topic("out1", S, S).read_records_to_list() == recs(("v", "v", 3))
        assert d.create_output_topic("out2", S, S).read_records_to_list() == recs(("k", "v", 3))


def test_through_writes_and_reads_back_a_user_topic():
    b = StreamsBuilder()
    b.stream("in").map_values(str.upper).through("mid").map_values(lambda v: v + "?").to("out")
    out = run(b, [("in", "k", "a", 1)], ["mid", "out"])
    assert out == {"mid": recs(("k", "A", 1)), "out": recs(("k", "A?", 1))}


def test_process_user_processor_forwards():
    class Doubler(Processor):
        def init(self, context):
            self.context = context

        def process(self, record):
            md = self.context.record_metadata()
            self.context.forward(record.with_value("%s@%s:%d" % (record.value * 2, md.topic, md.offset)))

    b = StreamsBuilder()
    s = b.stream("in").process(Doubler)
    assert s.name == "KSTREAM-PROCESSOR-0000000001" and s._repartition_required
    s.to("out")
    out = run(b, [("in", "k", "ab", 1), ("in", "k", "c", 2)], ["out"])
    assert out["out"] == recs(("k", "abab@in:0", 1), ("k", "cc@in:1", 2))


WORDCOUNT_DESCRIPTION = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> KSTREAM-FILTER-0000000006
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FILTER-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000005 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition)
      <-- KSTREAM-FILTER-0000000006

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000007 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition])
      --> KSTREAM-AGGREGATE-0000000004
    Processor: KSTREAM-AGGREGATE-0000000004 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000003])
      --> KTABLE-TOSTREAM-0000000008
      <-- KSTREAM-SOURCE-0000000007
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- KSTREAM-AGGREGATE-0000000004
    Sink: KSTREAM-SINK-0000000009 (topic: streams-wordcount-output)
      <-- KTABLE-TOSTREAM-0000000008

"""


def test_wordcount_topology_names_are_kafkas():
    """Kafka 4's WordCountDemo topology (count() unnamed) described with Kafka's generated names."""
    b = StreamsBuilder()
    (b.stream("streams-plaintext-input")
     .flat_map_values(lambda v: re.split(r"\W+", v.lower()))
     .group_by(lambda k, v: v)
     .count()
     .to_stream()
     .to("streams-wordcount-output", Produced.with_(S, L)))
    t = b.build()
    assert str(t.describe()) == WORDCOUNT_DESCRIPTION
    assert t.repartition_topics("wc") == {"wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition": None}
    assert list(t.changelog_topics("wc")) == ["wc-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"]


def test_named_operators_burn_indexes_like_kafka():
    b = StreamsBuilder()
    s = b.stream("in", Consumed.as_("src")).filter(lambda k, v: True, named="f").map_values(str, named=Named.as_("m"))
    s.to("out")
    assert list(b.build().nodes()) == ["src", "f", "m", "KSTREAM-SINK-0000000003"]


@pytest.mark.parametrize("bad, msg", [
    ("", "can't be empty"),
    ("a" * 250, "can't be longer than 249"),
    ("has space", "contains a character other than ASCII alphanumerics"),
])
def test_illegal_names_are_refused(bad, msg):
    with pytest.raises(TopologyException, match=msg):
        Named.as_(bad)
    with pytest.raises(TopologyException, match=msg):
        Repartitioned.as_(bad)


def test_source_topic_registered_twice_is_refused():
    b = StreamsBuilder()
    b.stream("in")
    with pytest.raises(TopologyException, match="already been registered"):
        b.stream(["other", "in"])


def test_process_with_a_state_store_and_group_by_key_after_it_repartitions():
    from kbroker.streams.state import Stores

    class Dedup(Processor):
        def init(self, context):
            self.context = context
            self.seen = context.get_state_store("seen")

        def process(self, record):
            if self.seen.get(record.value) is None:
                self.seen.put(record.value, record.key)
                self.context.forward(record.with_key(record.value))

    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), S, S))
    deduped = b.stream("in").process(Dedup, "seen")
    deduped.to("out")
    deduped.group_by_key().count().to_stream().to("counts", Produced.with_(S, L))
    t = b.build()
    # process() may change keys: the aggregation reads "<store>-repartition" (process 1, sink 2, store 3)
    assert t.repartition_topics(APP) == {APP + "-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition": None}
    out = run(b, [("in", "k1", "x", 1), ("in", "k2", "x", 2), ("in", "k3", "y", 3)], ["out", "counts"],
              value_serdes={"counts": L})
    assert out["out"] == recs(("x", "x", 1), ("y", "y", 3))
    assert out["counts"] == recs(("x", 1, 1), ("y", 1, 3))


def test_null_functions_are_refused_at_build_time():
    """Kafka's Objects.requireNonNull checks ("predicate can't be null") when the topology is declared."""
    b = StreamsBuilder()
    s = b.stream("in")
    for call, what in [(lambda: s.filter(None), "predicate"), (lambda: s.map_values(None), "mapper"),
                       (lambda: s.group_by(None), "keySelector"), (lambda: s.foreach(None), "action"),
                       (lambda: s.group_by_key().reduce(None), "reducer"),
                       (lambda: s.group_by_key().aggregate(lambda: 0, None), "aggregator"),
                       (lambda: b.table("t").group_by(lambda k, v: (k, v)).reduce(lambda a, v: a, None),
                        "subtractor"),
                       (lambda: s.split().branch(None), "predicate")]:
        with pytest.raises(TypeError, match="%s can't be null" % what):
            call()


def test_printed_to_file_and_consumed_options_reach_the_source(tmp_path):
    path = tmp_path / "printed.txt"
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, S).with_offset_reset_policy("earliest")
                 .with_timestamp_extractor(lambda record, partition_time: 777))
    s.print(Printed.to_file(str(path)).with_label("f"))
    s.to("out")
    t = b.build()
    assert t.node("KSTREAM-SOURCE-0000000000").offset_reset == "earliest"
    out = run(b, [("in", "k", "v", 1)], ["out"])
    assert out["out"] == recs(("k", "v", 777))       # the Consumed's timestamp extractor was used
    assert path.read_text() == "[f]: k, v\n"
    with pytest.raises(ValueError, match="earliest"):
        Consumed.with_(S, S).with_offset_reset_policy("smallest")
