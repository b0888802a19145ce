"""kbroker.streams DSL against Apache Kafka's own unit tests: the inputs and expected results of Kafka's
KTableFilterTest, KGroupedStreamImplTest and KGroupedTableImplTest (streams/src/test/java/.../kstream/internals),
replayed through our DSL and TopologyTestDriver. Same inputs, same (key, Change(new, old), timestamp) sequences and
store contents as Kafka asserts."""
import pytest

from kbroker.streams.dsl import Branched, Consumed, Grouped, Materialized, Named, Printed, Produced, StreamsBuilder
from kbroker.streams.dsl.nodes import Change
from kbroker.streams.processor import Processor
from kbroker.streams.serdes import Serdes
from kbroker.streams.state import ValueAndTimestamp
from kbroker.streams.test_driver import TopologyTestDriver

S, I, D = Serdes.String(), Serdes.Integer(), Serdes.Double()
CONFIG = {"application.id": "parity", "default.key.serde": "String", "default.value.serde": "String",
          "cache.max.bytes.buffering": 0}


def capture(topology, parent):
    """Kafka's MockApiProcessorSupplier: a processor under ``parent`` recording (key, value, timestamp)."""
    seen = []

    class Capture(Processor):
        def process(self, record):
            seen.append((record.key, record.value, record.timestamp))

    topology.add_processor("capture-" + parent, Capture, parent)
    return seen


def take(seen):
    out = list(seen)
    seen.clear()
    return out


def even(k, v):
    return v % 2 == 0


@pytest.mark.parametrize("materialized", [False, True])
def test_ktable_filter_and_filter_not(materialized):
    """KTableFilterTest.doTestKTable (shouldPassThroughWithoutMaterialization / ...OnMaterialization)."""
    b = StreamsBuilder()
    t1 = b.table("topic", Consumed.with_(S, I))
    m2 = Materialized.as_("anyStoreNameFilter") if materialized else None
    m3 = Materialized.as_("anyStoreNameFilterNot") if materialized else None
    t2 = t1.filter(even, materialized=m2)
    t3 = t1.filter_not(even, materialized=m3)
    out2, out3 = [], []
    t2.to_stream().foreach(lambda k, v: out2.append((k, v)))
    t3.to_stream().foreach(lambda k, v: out3.append((k, v)))
    with TopologyTestDriver(b.build(), CONFIG) as d:
        i = d.create_input_topic("topic", S, I)
        for k, v, ts in [("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18), ("B", None, 15)]:
            i.pipe_input(k, v, ts)
    assert out2 == [("A", None), ("B", 2), ("C", None), ("D", 4), ("A", None), ("B", None)]
    assert out3 == [("A", 1), ("B", None), ("C", 3), ("D", None), ("A", None), ("B", None)]


SENDING_INPUTS = [("A", 1, 5), ("B", 1, 10), ("C", 1, 15), ("A", 2, 15), ("B", 2, 8), ("A", 3, 20), ("A", None, 10),
                  ("B", None, 20)]


def _filter_old_values(send_old):
    b = StreamsBuilder()
    t1 = b.table("topic1", Consumed.with_(S, I))
    t2 = t1.filter(even)
    if send_old:
        assert t2._enable_sending_old_values(True)
    topology = b.build()
    seen1 = capture(topology, t1.name)
    seen2 = capture(topology, t2.name)
    steps = []
    with TopologyTestDriver(topology, CONFIG) as d:
        i = d.create_input_topic("topic1", S, I)
        pos = 0
        for n in (3, 2, 1, 2):      # Kafka's test checks the outputs after these groups of inputs
            for k, v, ts in SENDING_INPUTS[pos:pos + n]:
                i.pipe_input(k, v, ts)
            pos += n
            steps.append((take(seen1), take(seen2)))
    return steps


def test_ktable_filter_not_sending_old_values():
    """KTableFilterTest.doTestNotSendingOldValue: a non-materialized filter forwards Change(None, None) for a
    value that does not pass (downstream sees a tombstone)."""
    steps = _filter_old_values(False)
    assert steps == [
        ([("A", Change(1, None), 5), ("B", Change(1, None), 10), ("C", Change(1, None), 15)],
         [("A", Change(None, None), 5), ("B", Change(None, None), 10), ("C", Change(None, None), 15)]),
        ([("A", Change(2, None), 15), ("B", Change(2, None), 8)],
         [("A", Change(2, None), 15), ("B", Change(2, None), 8)]),
        ([("A", Change(3, None), 20)], [("A", Change(None, None), 20)]),
        ([("A", Change(None, None), 10), ("B", Change(None, None), 20)],
         [("A", Change(None, None), 10), ("B", Change(None, None), 20)]),
    ]


def test_ktable_filter_sending_old_values():
    """KTableFilterTest.doTestSendingOldValue (shouldSendOldValuesWhenEnabledWithoutMaterialization): the source
    is materialized on demand and sends old values; the filter skips updates that neither were nor are in."""
    steps = _filter_old_values(True)
    assert steps == [
        ([("A", Change(1, None), 5), ("B", Change(1, None), 10), ("C", Change(1, None), 15)], []),
        ([("A", Change(2, 1), 15), ("B", Change(2, 1), 8)],
         [("A", Change(2, None), 15), ("B", Change(2, None), 8)]),
        ([("A", Change(3, 2), 20)], [("A", Change(None, 2), 20)]),
        ([("A", Change(None, 3), 10), ("B", Change(None, 2), 20)], [("B", Change(None, 2), 20)]),
    ]


def _grouped_stream_data(d):
    i = d.create_input_topic("topic", S, S)
    for k, v, ts in [("1", "A", 5), ("2", "B", 1), ("1", "C", 3), ("1", "D", 10), ("3", "E", 8), ("3", "F", 9),
                     ("3", None, 9)]:
        i.pipe_input(k, v, ts)


def test_kgroupedstream_reduce_and_aggregate_materialized():
    """KGroupedStreamImplTest.shouldReduceAndMaterializeResults / shouldAggregateAndMaterializeResults."""
    b = StreamsBuilder()
    g = b.stream("topic", Consumed.with_(S, S)).group_by_key()
    g.reduce(lambda a, v: a + "+" + v, materialized=Materialized.as_("reduce").with_key_serde(S).with_value_serde(S))
    g.aggregate(lambda: "0", lambda k, v, a: a + "+" + v,
                materialized=Materialized.as_("aggregate").with_key_serde(S).with_value_serde(S))
    with TopologyTestDriver(b.build(), CONFIG) as d:
        _grouped_stream_data(d)
        r, a = d.get_key_value_store("reduce"), d.get_key_value_store("aggregate")
        assert [r.get(k) for k in "123"] == ["A+C+D", "B", "E+F"]
        assert [a.get(k) for k in "123"] == ["0+A+C+D", "0+B", "0+E+F"]
        rt = d.get_timestamped_key_value_store("reduce")
        assert [rt.get(k) for k in "123"] == [ValueAndTimestamp("A+C+D", 10), ValueAndTimestamp("B", 1),
                                              ValueAndTimestamp("E+F", 9)]
        at = d.get_timestamped_key_value_store("aggregate")
        assert [at.get(k) for k in "123"] == [ValueAndTimestamp("0+A+C+D", 10), ValueAndTimestamp("0+B", 1),
                                              ValueAndTimestamp("0+E+F", 9)]


@pytest.mark.parametrize("store_name", ["reduced", None])
def test_kgroupedtable_reduce(store_name):
    """KGroupedTableImplTest.shouldReduce / shouldReduceWithInternalStoreName (assertReduced)."""
    b = StreamsBuilder()
    reduced = (b.table("topic", Consumed.with_(S, D), Materialized.as_("store").with_key_serde(S).with_value_serde(D))
               .group_by(lambda k, v: (k, int(v)), Grouped.with_(S, I))
               .reduce(lambda a, v: a + v, lambda a, v: a - v,
                       materialized=(Materialized.as_(store_name) if store_name else Materialized())
                       .with_value_serde(I)))
    assert reduced.queryable_store_name() == store_name
    last = {}
    reduced.to_stream().process(lambda: _LastValue(last))
    with TopologyTestDriver(b.build(), CONFIG) as d:
        i = d.create_input_topic("topic", S, D)
        i.pipe_input("A", 1.1, 10)
        i.pipe_input("B", 2.2, 11)
        assert last == {"A": (1, 10), "B": (2, 11)}
        for k, v, ts in [("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50), ("B", 6.2, 20)]:
            i.pipe_input(k, v, ts)
        assert last == {"A": (5, 50), "B": (6, 30)}


class _LastValue(Processor):
    def __init__(self, last):
        self.last = last

    def process(self, record):
        self.last[record.key] = (record.value, record.timestamp)


def _grouped_table_data(d):
    i = d.create_input_topic("topic", S, S)
    for k, v, ts in [("A", "1", 10), ("B", "1", 50), ("C", "1", 30), ("D", "2", 40), ("E", "2", 60)]:
        i.pipe_input(k, v, ts)


def test_kgroupedtable_count_and_aggregate_materialized():
    """KGroupedTableImplTest.shouldCountAndMaterializeResults / shouldAggregateAndMaterializeResults."""
    b = StreamsBuilder()
    g = b.table("topic", Consumed.with_(S, S)).group_by(lambda k, v: (v, v), Grouped.with_(S, S))
    g.count(materialized=Materialized.as_("count").with_key_serde(S).with_value_serde(Serdes.Long()))
    g.aggregate(lambda: "0", lambda k, v, a: a + "+" + v, lambda k, v, a: a + "-" + v,
                materialized=Materialized.as_("aggregate").with_key_serde(S).with_value_serde(S))
    with TopologyTestDriver(b.build(), CONFIG) as d:
        _grouped_table_data(d)
        assert [d.get_key_value_store("count").get(k) for k in "12"] == [3, 2]
        assert [d.get_timestamped_key_value_store("count").get(k) for k in "12"] == [
            ValueAndTimestamp(3, 50), ValueAndTimestamp(2, 60)]
        assert [d.get_timestamped_key_value_store("aggregate").get(k) for k in "12"] == [
            ValueAndTimestamp("0+1+1+1", 50), ValueAndTimestamp("0+2+2", 60)]


# Kafka's RepartitionTopicNamingTest.EXPECTED_UNOPTIMIZED_TOPOLOGY (buildTopology("none")): every node, topic and
# store name of a topology with named/unnamed groupings, three aggregations and a windowed join (S4's part).
KAFKA_UNOPTIMIZED_TOPOLOGY = (
    'Topologies:\n'
    '   Sub-topology: 0\n'
    '    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n'
    '      --> KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-MAP-0000000001 (stores: [])\n'
    '      --> KSTREAM-FILTER-0000000029, KSTREAM-FILTER-0000000002, KSTREAM-FILTER-0000000020, '
    'aggregate-stream-repartition-filter, count-stream-repartition-filter\n'
    '      <-- KSTREAM-SOURCE-0000000000\n'
    '    Processor: KSTREAM-FILTER-0000000020 (stores: [])\n'
    '      --> KSTREAM-PEEK-0000000021\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-FILTER-0000000002 (stores: [])\n'
    '      --> KSTREAM-MAPVALUES-0000000003\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-FILTER-0000000029 (stores: [])\n'
    '      --> joined-stream-left-repartition-filter\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: KSTREAM-PEEK-0000000021 (stores: [])\n'
    '      --> reduced-stream-repartition-filter\n'
    '      <-- KSTREAM-FILTER-0000000020\n'
    '    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n'
    '      --> KSTREAM-PROCESSOR-0000000004\n'
    '      <-- KSTREAM-FILTER-0000000002\n'
    '    Processor: aggregate-stream-repartition-filter (stores: [])\n'
    '      --> aggregate-stream-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: count-stream-repartition-filter (stores: [])\n'
    '      --> count-stream-repartition-sink\n'
    '      <-- KSTREAM-MAP-0000000001\n'
    '    Processor: joined-stream-left-repartition-filter (stores: [])\n'
    '      --> joined-stream-left-repartition-sink\n'
    '      <-- KSTREAM-FILTER-0000000029\n'
    '    Processor: reduced-stream-repartition-filter (stores: [])\n'
    '      --> reduced-stream-repartition-sink\n'
    '      <-- KSTREAM-PEEK-0000000021\n'
    '    Processor: KSTREAM-PROCESSOR-0000000004 (stores: [])\n'
    '      --> none\n'
    '      <-- KSTREAM-MAPVALUES-0000000003\n'
    '    Sink: aggregate-stream-repartition-sink (topic: aggregate-stream-repartition)\n'
    '      <-- aggregate-stream-repartition-filter\n'
    '    Sink: count-stream-repartition-sink (topic: count-stream-repartition)\n'
    '      <-- count-stream-repartition-filter\n'
    '    Sink: joined-stream-left-repartition-sink (topic: joined-stream-left-repartition)\n'
    '      <-- joined-stream-left-repartition-filter\n'
    '    Sink: reduced-stream-repartition-sink (topic: reduced-stream-repartition)\n'
    '      <-- reduced-stream-repartition-filter\n'
    '\n'
    '  Sub-topology: 1\n'
    '    Source: count-stream-repartition-source (topics: [count-stream-repartition])\n'
    '      --> KSTREAM-AGGREGATE-0000000007\n'
    '    Processor: KSTREAM-AGGREGATE-0000000007 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000006])\n'
    '      --> KTABLE-TOSTREAM-0000000011\n'
    '      <-- count-stream-repartition-source\n'
    '    Processor: KTABLE-TOSTREAM-0000000011 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000012, joined-stream-other-windowed\n'
    '      <-- KSTREAM-AGGREGATE-0000000007\n'
    '    Source: joined-stream-left-repartition-source (topics: [joined-stream-left-repartition])\n'
    '      --> joined-stream-this-windowed\n'
    '    Processor: joined-stream-other-windowed (stores: [joined-stream-other-join-store])\n'
    '      --> joined-stream-other-join\n'
    '      <-- KTABLE-TOSTREAM-0000000011\n'
    '    Processor: joined-stream-this-windowed (stores: [joined-stream-this-join-store])\n'
    '      --> joined-stream-this-join\n'
    '      <-- joined-stream-left-repartition-source\n'
    '    Processor: joined-stream-other-join (stores: [joined-stream-this-join-store])\n'
    '      --> joined-stream-merge\n'
    '      <-- joined-stream-other-windowed\n'
    '    Processor: joined-stream-this-join (stores: [joined-stream-other-join-store])\n'
    '      --> joined-stream-merge\n'
    '      <-- joined-stream-this-windowed\n'
    '    Processor: joined-stream-merge (stores: [])\n'
    '      --> KSTREAM-SINK-0000000038\n'
    '      <-- joined-stream-this-join, joined-stream-other-join\n'
    '    Sink: KSTREAM-SINK-0000000012 (topic: outputTopic_0)\n'
    '      <-- KTABLE-TOSTREAM-0000000011\n'
    '    Sink: KSTREAM-SINK-0000000038 (topic: outputTopicForJoin)\n'
    '      <-- joined-stream-merge\n'
    '\n'
    '  Sub-topology: 2\n'
    '    Source: aggregate-stream-repartition-source (topics: [aggregate-stream-repartition])\n'
    '      --> KSTREAM-AGGREGATE-0000000014\n'
    '    Processor: KSTREAM-AGGREGATE-0000000014 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000013])\n'
    '      --> KTABLE-TOSTREAM-0000000018\n'
    '      <-- aggregate-stream-repartition-source\n'
    '    Processor: KTABLE-TOSTREAM-0000000018 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000019\n'
    '      <-- KSTREAM-AGGREGATE-0000000014\n'
    '    Sink: KSTREAM-SINK-0000000019 (topic: outputTopic_1)\n'
    '      <-- KTABLE-TOSTREAM-0000000018\n'
    '\n'
    '  Sub-topology: 3\n'
    '    Source: reduced-stream-repartition-source (topics: [reduced-stream-repartition])\n'
    '      --> KSTREAM-REDUCE-0000000023\n'
    '    Processor: KSTREAM-REDUCE-0000000023 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000022])\n'
    '      --> KTABLE-TOSTREAM-0000000027\n'
    '      <-- reduced-stream-repartition-source\n'
    '    Processor: KTABLE-TOSTREAM-0000000027 (stores: [])\n'
    '      --> KSTREAM-SINK-0000000028\n'
    '      <-- KSTREAM-REDUCE-0000000023\n'
    '    Sink: KSTREAM-SINK-0000000028 (topic: outputTopic_2)\n'
    '      <-- KTABLE-TOSTREAM-0000000027\n'
    '\n'
)


def _normalized(description):
    """The successor/predecessor lists sorted: Kafka orders them with a TreeSet whose comparator reads subtree
    sizes that change while the set is filled (InternalTopologyBuilder.describeSubtopology), an order we do not
    reproduce; every name, edge, topic, store and sub-topology must still match."""
    out = []
    for line in description.splitlines():
        for arrow in ("      --> ", "      <-- "):
            if line.startswith(arrow):
                line = arrow + ", ".join(sorted(line[len(arrow):].split(", ")))
        out.append(line)
    return out


def test_kafka_repartition_topic_naming_unoptimized_topology():
    from kbroker.streams.dsl.joins import StreamJoined
    from kbroker.streams.dsl.windows import JoinWindows
    L = Serdes.Long()
    b = StreamsBuilder()
    mapped = b.stream("input", Consumed.with_(S, S)).map(lambda k, v: (k.upper(), v))
    mapped.filter(lambda k, v: k == "B").map_values(str.upper).process(lambda: _LastValue({}))
    count_stream = (mapped.group_by_key(Grouped.as_("count-stream")).count(materialized=Materialized.with_(S, L))
                    .to_stream())
    count_stream.to("outputTopic_0", Produced.with_(S, L))
    (mapped.group_by_key(Grouped.as_("aggregate-stream"))
     .aggregate(lambda: 0, lambda k, v, agg: agg + len(v), materialized=Materialized.with_(S, I))
     .to_stream().to("outputTopic_1", Produced.with_(S, I)))
    (mapped.filter(lambda k, v: True).peek(lambda k, v: None).group_by_key(Grouped.as_("reduced-stream"))
     .reduce(lambda a, v: a + ":" + v, materialized=Materialized.with_(S, S))
     .to_stream().to("outputTopic_2", Produced.with_(S, S)))
    (mapped.filter(lambda k, v: k == "A")
     .join(count_stream, lambda v1, v2: "%s:%s" % (v1, v2), JoinWindows.of_time_difference_with_no_grace(5000),
           StreamJoined.with_(S, S, L).with_store_name("joined-stream").with_name("joined-stream"))
     .to("outputTopicForJoin"))
    assert _normalized(str(b.build().describe())) == _normalized(KAFKA_UNOPTIMIZED_TOPOLOGY)


def test_same_grouped_name_on_two_streams_is_refused():
    """RepartitionTopicNamingTest.shouldFailWithSameRepartitionTopicName (we refuse at declaration, Kafka at
    build())."""
    from kbroker.streams.errors import TopologyException
    b = StreamsBuilder()
    b.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping")).count()
    with pytest.raises(TopologyException, match="grouping-repartition"):
        b.stream("topicII").select_key(lambda k, v: k).group_by_key(Grouped.as_("grouping")).count()


# ---- KStreamImplTest's toTable tests: Kafka's exact topology descriptions and outputs

def _blocks(description):
    """{sub-topology header: set of node blocks (a node's line + its sorted arrow lines)}: names, edges, topics
    and stores exactly; the order of nodes and of arrow lists left out (see _normalized)."""
    out, current, block = {}, None, None
    for line in _normalized(description):
        if line.startswith("   Sub-topology") or line.startswith("  Sub-topology"):
            current = line.strip()
            out[current] = set()
        elif line.startswith("    ") and not line.startswith("      "):
            block = [line]
            out[current].add(tuple(block))
        elif line.startswith("      "):
            out[current].discard(tuple(block))
            block.append(line)
            out[current].add(tuple(block))
    return out


def _assert_same_topology(topology, kafka_text):
    assert _blocks(str(topology.describe())) == _blocks(kafka_text)


def _pipe(d, topic, records, serdes=(S, S)):
    i = d.create_input_topic(topic, *serdes)
    for r in records:
        i.pipe_input(*r)


def test_kstream_to_table_not_materialized():
    b = StreamsBuilder()
    b.stream("input", Consumed.with_(S, S)).to_table().to_stream().to("output")
    t = b.build()
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000003\n\n")
    with TopologyTestDriver(t, CONFIG) as d:
        records = [("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0), ("A", "05", 10), ("A", "06", 8)]
        _pipe(d, "input", records)
        got = d.create_output_topic("output", S, S).read_records_to_list()
        assert [(r.key, r.value, r.timestamp) for r in got] == records


def test_kstream_to_table_materialized_with_a_store_supplier():
    from kbroker.streams.state import Stores
    b = StreamsBuilder()
    b.stream("input", Consumed.with_(S, S)).to_table(Materialized.as_(Stores.in_memory_key_value_store("store")))
    t = b.build()
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [store])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000000\n\n")
    with TopologyTestDriver(t, CONFIG) as d:
        _pipe(d, "input", [("A", "01", 0), ("B", "02", 0), ("A", "03", 0)])
        assert {kv.key: kv.value for kv in d.get_key_value_store("store").all()} == {"A": "03", "B": "02"}


def test_kstream_to_table_after_key_change():
    b = StreamsBuilder()
    (b.stream("input", Consumed.with_(S, S)).map(lambda k, v: (ord(k[0]) - ord("A"), v))
     .to_table(Materialized.with_(I, None)).to_stream().to("output"))
    t = b.build()
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-MAP-0000000001\n"
        "    Processor: KSTREAM-MAP-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-MAP-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-TOTABLE-0000000002-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000005\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-TOTABLE-0000000002-repartition])\n"
        "      --> KSTREAM-TOTABLE-0000000002\n"
        "    Processor: KSTREAM-TOTABLE-0000000002 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000008\n"
        "      <-- KSTREAM-TOTABLE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000008 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000007\n\n")
    with TopologyTestDriver(t, CONFIG) as d:
        _pipe(d, "input", [("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0), ("A", "05", 10),
                           ("A", "06", 8)])
        got = d.create_output_topic("output", I, S).read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in got] == [(0, "01", 5), (1, "02", 100), (2, "03", 0),
                                                            (3, "04", 0), (0, "05", 10), (0, "06", 8)]


def test_kstream_to_table_group_by_count():
    b = StreamsBuilder()
    (b.stream("input", Consumed.with_(S, S)).to_table().group_by(lambda k, v: (v, v), Grouped.with_(S, S))
     .count().to_stream().to("output", Produced.with_(S, Serdes.Long())))
    t = b.build()
    _assert_same_topology(t, (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-SELECT-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-SELECT-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
        "      <-- KTABLE-SELECT-0000000003\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
        "      --> KTABLE-AGGREGATE-0000000007\n"
        "    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n"
        "      --> KTABLE-TOSTREAM-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KTABLE-AGGREGATE-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000008\n\n"))
    with TopologyTestDriver(t, CONFIG) as d:
        _pipe(d, "input", [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
                           ("D", "green", 11)])
        got = d.create_output_topic("output", S, Serdes.Long()).read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in got] == [
        ("green", 1, 10), ("green", 2, 10), ("green", 1, 12), ("blue", 1, 12), ("yellow", 1, 15), ("green", 2, 12)]


def test_kstream_to_table_map_values_materialized():
    b = StreamsBuilder()
    (b.stream("input", Consumed.with_(S, S)).to_table()
     .map_values(lambda v: ord(v[0]) - ord("a"), Materialized.as_("store").with_key_serde(S).with_value_serde(I))
     .to_stream().to("output", Produced.with_(S, I)))
    t = b.build()
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [])\n"
        "      --> KTABLE-MAPVALUES-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KTABLE-MAPVALUES-0000000003 (stores: [store])\n"
        "      --> KTABLE-TOSTREAM-0000000004\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KTABLE-MAPVALUES-0000000003\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000004\n\n")
    with TopologyTestDriver(t, CONFIG) as d:
        _pipe(d, "input", [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
                           ("D", "green", 11)])
        assert {kv.key: kv.value for kv in d.get_key_value_store("store").all()} == {"A": 1, "B": 6, "C": 24, "D": 6}
        got = d.create_output_topic("output", S, I).read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in got] == [
        ("A", 6, 10), ("B", 6, 9), ("A", 1, 12), ("C", 24, 15), ("D", 6, 11)]


def _lhs_rhs(d, left, right):
    out = d.create_output_topic("output", S, S)
    _pipe(d, right, [("lhs1", "rhsValue1", 0), ("rhs2", "rhsValue2", 0), ("lhs3", "rhsValue3", 0)])
    assert out.read_key_values_to_map() == {}
    _pipe(d, left, [("lhs1", "lhsValue1", 0), ("lhs2", "lhsValue2", 0)])
    assert out.read_key_values_to_map() == {"lhs1": "lhsValue1+rhsValue1"}
    _pipe(d, left, [("lhs3", "lhsValue3", 0)])
    assert out.read_key_values_to_map() == {"lhs3": "lhsValue3+rhsValue3"}
    _pipe(d, left, [("lhs1", "lhsValue4", 0)])
    assert out.read_key_values_to_map() == {"lhs1": "lhsValue4+rhsValue1"}


def test_table_table_join_of_kstream_to_ktable():
    b = StreamsBuilder()
    t1 = b.stream("left", Consumed.with_(S, S)).to_table()
    t2 = b.stream("right", Consumed.with_(S, S)).to_table()
    t1.join(t2, lambda a, c: a + "+" + c).to_stream().to("output")
    t = b.build()
    _assert_same_topology(t, (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-TOTABLE-0000000001\n"
        "    Source: KSTREAM-SOURCE-0000000003 (topics: [right])\n"
        "      --> KSTREAM-TOTABLE-0000000004\n"
        "    Processor: KSTREAM-TOTABLE-0000000001 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-JOINTHIS-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-TOTABLE-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n"
        "      --> KTABLE-JOINOTHER-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000003\n"
        "    Processor: KTABLE-JOINOTHER-0000000008 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-MERGE-0000000006\n"
        "      <-- KSTREAM-TOTABLE-0000000004\n"
        "    Processor: KTABLE-JOINTHIS-0000000007 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000005])\n"
        "      --> KTABLE-MERGE-0000000006\n"
        "      <-- KSTREAM-TOTABLE-0000000001\n"
        "    Processor: KTABLE-MERGE-0000000006 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000009\n"
        "      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008\n"
        "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000010\n"
        "      <-- KTABLE-MERGE-0000000006\n"
        "    Sink: KSTREAM-SINK-0000000010 (topic: output)\n"
        "      <-- KTABLE-TOSTREAM-0000000009\n\n"))
    with TopologyTestDriver(t, CONFIG) as d:
        _lhs_rhs(d, "left", "right")


def test_stream_table_join_of_kstream_to_ktable():
    b = StreamsBuilder()
    stream = b.stream("streamTopic", Consumed.with_(S, S))
    table = b.stream("tableTopic", Consumed.with_(S, S)).to_table()
    stream.join(table, lambda a, c: a + "+" + c).to("output")
    t = b.build()
    _assert_same_topology(t, (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [streamTopic])\n"
        "      --> KSTREAM-JOIN-0000000004\n"
        "    Processor: KSTREAM-JOIN-0000000004 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000003])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [tableTopic])\n"
        "      --> KSTREAM-TOTABLE-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: output)\n"
        "      <-- KSTREAM-JOIN-0000000004\n"
        "    Processor: KSTREAM-TOTABLE-0000000002 (stores: [KSTREAM-TOTABLE-STATE-STORE-0000000003])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000001\n\n"))
    with TopologyTestDriver(t, CONFIG) as d:
        _lhs_rhs(d, "streamTopic", "tableTopic")


@pytest.mark.parametrize("values", [False, True])
def test_named_process_and_process_values_burn_no_index(values):
    """KStreamImplTest.shouldBindStateWithOldProcessor / shouldProcessValues: Named.as("p") -> "p", the sink
    after it is KSTREAM-SINK-0000000001."""
    class Length(Processor):
        def init(self, context):
            self.context = context

        def process(self, record):
            self.context.forward(record.with_value(len(record.value)))

    b = StreamsBuilder()
    s = b.stream("input", Consumed.with_(S, S))
    s = s.process_values(Length, named=Named.as_("fkp")) if values else s.process(Length, named=Named.as_("p"))
    s.to("output", Produced.value_serde_(I))
    name = "fkp" if values else "p"
    t = b.build()
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> %s\n"
        "    Processor: %s (stores: [])\n"
        "      --> KSTREAM-SINK-0000000001\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000001 (topic: output)\n"
        "      <-- %s\n\n" % (name, name, name))
    with TopologyTestDriver(t, CONFIG) as d:
        records = [("A", "0", 5), ("B", "00", 100), ("C", "000", 0), ("D", "0000", 0), ("A", "00000", 10),
                   ("A", "000000", 8)]
        _pipe(d, "input", records)
        got = d.create_output_topic("output", S, I).read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in got] == [(k, len(v), ts) for k, v, ts in records]


def test_streams_builder_test_specified_names():
    """StreamsBuilderTest.shouldUseSpecifiedNameFor{TableSourceProcessor, SinkProcessor, SplitOperation,
    MergeOperation, PrintOperation, ToStreamWithMapper, AggregateOperationGivenTable}: processor (and store)
    names in Kafka's order."""
    def names(build):
        b = StreamsBuilder()
        build(b)
        t = b.build()
        return list(t.nodes()), list(t.store_builders())

    assert names(lambda b: (b.table("stream-topic", Consumed.as_("source-node")), b.table("stream-topic-two"))) == (
        ["source-node-source", "source-node", "KSTREAM-SOURCE-0000000004", "KTABLE-SOURCE-0000000005"], [])

    def sinks(b):
        s = b.stream("stream-topic")
        s.to("stream-topic-two", Produced.as_("sink-processor"))
        s.to("stream-topic-two")
    assert names(sinks)[0] == ["KSTREAM-SOURCE-0000000000", "sink-processor", "KSTREAM-SINK-0000000002"]

    assert names(lambda b: b.stream("stream-topic").split(Named.as_("branch-processor"))
                 .branch(lambda k, v: True, Branched.as_("-1")).branch(lambda k, v: False, Branched.as_("-2")))[0] == \
        ["KSTREAM-SOURCE-0000000000", "branch-processor", "branch-processor-1", "branch-processor-2"]
    assert names(lambda b: b.stream("topic-1").merge(b.stream("topic-2"), Named.as_("merge-processor")))[0] == \
        ["KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001", "merge-processor"]
    assert names(lambda b: b.stream("stream-topic").print(Printed.to_sys_out().with_name("print-processor")))[0] == \
        ["KSTREAM-SOURCE-0000000000", "print-processor"]
    assert names(lambda b: b.table("stream-topic").to_stream(lambda k, v: k, Named.as_("to-stream")))[0] == \
        ["KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "to-stream", "KSTREAM-KEY-SELECT-0000000004"]
    assert names(lambda b: b.table("stream-topic").group_by(lambda k, v: (k, v), Grouped.as_("group-operation"))
                 .count(Named.as_("op"))) == (
        ["KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "group-operation", "op-sink", "op-source", "op"],
        ["stream-topic-STATE-STORE-0000000000", "KTABLE-AGGREGATE-STATE-STORE-0000000004"])
