"""Joins of kbroker.streams' DSL (kbroker/streams/dsl/joins.py) through the TopologyTestDriver, exact outputs:
stream-stream inner/left/outer (Kafka 3.1+: non-joined results only once the window closed), stream-table
inner/left, table-table inner/left/outer, co-partitioning and repartitioning before a join. Scenarios named after
Apache Kafka's unit tests (KStreamKStreamLeftJoinTest, KStreamKStreamOuterJoinTest) expect Kafka's output. The
other scenarios' outputs were checked once against Apache Kafka 4.4.0's own TopologyTestDriver running the same
Java topology (kafka-streams + kafka-streams-test-utils 4.4.0 from ~/.m2; that Java program is not in the suite)."""
import pytest

from kbroker.streams.dsl import Consumed, Materialized, Produced, StreamsBuilder
from kbroker.streams.dsl.joins import Joined, StreamJoined
from kbroker.streams.dsl.windows import JoinWindows
from kbroker.streams.errors import TopologyException
from kbroker.streams.serdes import Serdes
from kbroker.streams.test_driver import TopologyTestDriver

I = Serdes.Integer()
S = Serdes.String()
L = Serdes.Long()


def _j(a, b):
    """Kafka's MockValueJoiner.TOSTRING_JOINER: "left+right" with Java's "null"."""
    return "%s+%s" % ("null" if a is None else a, "null" if b is None else b)


def _records(out):
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


class _Join:
    """topic1 (Integer, String) joined with topic2 (Integer, ``right_serde``) into "out"."""

    def __init__(self, kind, windows, right_serde=S, store="in_memory", stream_joined=None):
        b = StreamsBuilder({"default.dsl.store": store})
        s1 = b.stream("topic1", Consumed.with_(I, S))
        s2 = b.stream("topic2", Consumed.with_(I, right_serde))
        method = {"inner": s1.join, "left": s1.left_join, "outer": s1.outer_join}[kind]
        sj = stream_joined or StreamJoined.with_(I, S, right_serde)
        method(s2, _j, windows, sj).to("out", Produced.with_(I, S))
        self.topology = b.build()
        self.driver = TopologyTestDriver(self.topology)
        self.t1 = self.driver.create_input_topic("topic1", I, S)
        self.t2 = self.driver.create_input_topic("topic2", I, right_serde)
        self.out = self.driver.create_output_topic("out", I, S)

    def read(self):
        return _records(self.out)

    def close(self):
        self.driver.close()


# ------------------------------------------------------------------------------------------ stream-stream

@pytest.mark.parametrize("store", ["in_memory", "rocksDB"])
def test_inner_join_kafka_run_join(store):
    """Kafka's KStreamKStreamJoinTest.runJoin shape: every pair within the window joins, in store order."""
    j = _Join("inner", JoinWindows.of_time_difference_and_grace(100, 0), store=store)
    try:
        for k in (0, 1):
            j.t1.pipe_input(k, "A%d" % k, 0)
        assert j.read() == []
        for k in (0, 1):
            j.t2.pipe_input(k, "a%d" % k, 0)
        assert j.read() == [(0, "A0+a0", 0), (1, "A1+a1", 0)]
        for k in (0, 1, 2):
            j.t1.pipe_input(k, "B%d" % k, 0)
        assert j.read() == [(0, "B0+a0", 0), (1, "B1+a1", 0)]
        for k in (0, 1, 2, 3):
            j.t2.pipe_input(k, "b%d" % k, 0)
        assert j.read() == [(0, "A0+b0", 0), (0, "B0+b0", 0), (1, "A1+b1", 0), (1, "B1+b1", 0), (2, "B2+b2", 0)]
        # the result's timestamp is the max of both records'
        j.t1.pipe_input(3, "C3", 50)
        assert j.read() == [(3, "C3+b3", 50)]
        # a null key or value never joins: dropped and counted
        j.t1.pipe_input(None, "X", 50)
        j.t1.pipe_input(3, None, 50)
        assert j.read() == []
        assert j.driver.task.metrics["dropped-records"] == 2
        # both sides' topics must be co-partitioned
        assert j.topology.copartition_groups() == [frozenset({"topic1", "topic2"})]
    finally:
        j.close()


def test_left_join_duplicates_kafka_oracle():
    """Kafka's KStreamKStreamLeftJoinTest.testLeftJoinDuplicates (window 100, grace 10)."""
    j = _Join("left", JoinWindows.of_time_difference_and_grace(100, 10))
    try:
        j.t1.pipe_input(0, "A0", 0)
        j.t1.pipe_input(0, "A0-0", 0)
        j.t2.pipe_input(1, "a0", 111)     # stream time 111 > 0 + 100 + 10: A0's window closed
        j.t2.pipe_input(2, "dummy", 500)
        assert j.read() == [(0, "A0+null", 0), (0, "A0-0+null", 0)]
        j.t1.pipe_input(2, "A2", 1000)
        j.t1.pipe_input(2, "A2-0", 1000)
        j.t2.pipe_input(2, "a2", 1001)    # joins both: no spurious "A2+null" later
        assert j.read() == [(2, "A2+a2", 1001), (2, "A2-0+a2", 1001)]
        j.t2.pipe_input(3, "a3", 315)     # late right record, no left match: nothing (not an outer side)
        j.t1.pipe_input(9, "Z", 5000)
        assert j.read() == []
    finally:
        j.close()


def test_left_join_with_zero_after_kafka_oracle():
    """Kafka's KStreamKStreamLeftJoinTest.testLeftJoinedRecordsWithZeroAfterAreEmitted: before 100, after 0 --
    a left record's window closes as soon as stream time passes it; right records look 100 ms ahead."""
    j = _Join("left", JoinWindows.of_time_difference_with_no_grace(100).after(0))
    try:
        for k in range(4):
            j.t1.pipe_input(k, "A%d" % k, 1000 + k)
        assert j.read() == [(0, "A0+null", 1000), (1, "A1+null", 1001), (2, "A2+null", 1002)]
        expected = {999: [0, 1, 2, 3], 1000: [0, 1, 2, 3], 1001: [1, 2, 3], 1002: [2, 3], 1003: [3], 1100: []}
        for (ts, keys), prefix in zip(expected.items(), "abcdef"):
            for k in range(4):
                j.t2.pipe_input(k, "%s%d" % (prefix, k), ts)
            assert j.read() == [(k, "A%d+%s%d" % (k, prefix, k), 1000 + k) for k in keys]
    finally:
        j.close()


def test_left_join_waits_for_window_close_and_late_left_record_is_emitted_at_once():
    j = _Join("left", JoinWindows.of_time_difference_and_grace(10, 5))
    try:
        j.t1.pipe_input(1, "A", 100)
        j.t1.pipe_input(2, "B", 104)
        assert j.read() == []                          # windows still open: no early "A+null"
        j.t2.pipe_input(2, "b", 110)                   # joins B (104 in [100, 120])
        assert j.read() == [(2, "B+b", 110)]
        j.t1.pipe_input(3, "C", 115)                   # 115 = 100 + 10 + 5: A's window still open
        assert j.read() == []
        j.t1.pipe_input(4, "D", 116)                   # A's closed; C's not
        assert j.read() == [(1, "A+null", 100)]
        j.t1.pipe_input(5, "E", 90)                    # too late to wait: 90 + 10 < 116: joined with null at once
        assert j.read() == [(5, "E+null", 90)]
        j.t2.pipe_input(9, "z", 200)
        assert j.read() == [(3, "C+null", 115), (4, "D+null", 116)]
    finally:
        j.close()


@pytest.mark.parametrize("store", ["in_memory", "rocksDB"])
def test_outer_join_grace_period_kafka_oracle(store):
    """Kafka's KStreamKStreamOuterJoinTest.testGracePeriod (window 100, grace 10)."""
    j = _Join("outer", JoinWindows.of_time_difference_and_grace(100, 10), right_serde=L, store=store)
    try:
        j.t1.pipe_input(0, "A0", 0)
        j.t2.pipe_input(1, 11, 0)
        assert j.read() == []
        j.t1.pipe_input(1, "A1", 101)
        j.t2.pipe_input(0, 10, 101)
        assert j.read() == []
        j.t2.pipe_input(0, 100, 112)
        assert j.read() == [(1, "null+11", 0), (0, "A0+null", 0)]
    finally:
        j.close()


def test_outer_join_asymmetric_window_kafka_oracle():
    """Kafka's KStreamKStreamOuterJoinTest.testEmitAllNonJoinedResultsForAsymmetricWindow (before 5, after 20):
    right records wait ``before`` after their time, left records ``after``."""
    j = _Join("outer", JoinWindows.of_time_difference_with_no_grace(5).after(20), right_serde=L)
    try:
        j.t1.pipe_input(0, "A0", 29)
        j.t1.pipe_input(1, "A1", 30)
        j.t2.pipe_input(2, 12, 31)
        j.t2.pipe_input(3, 13, 36)
        assert j.read() == []
        j.t2.pipe_input(4, 14, 37)
        assert j.read() == [(2, "null+12", 31)]
        j.t2.pipe_input(5, 15, 50)
        assert j.read() == [(0, "A0+null", 29), (3, "null+13", 36), (4, "null+14", 37)]
    finally:
        j.close()


def test_outer_join_ordering_kafka_oracle():
    """Kafka's KStreamKStreamOuterJoinTest.testOrdering: the expired non-joined record comes before the join."""
    j = _Join("outer", JoinWindows.of_time_difference_with_no_grace(100), right_serde=L)
    try:
        j.t1.pipe_input(0, "A0", 0)
        j.t1.pipe_input(1, "A1", 100)
        assert j.read() == []
        j.t2.pipe_input(1, 11, 110)
        assert j.read() == [(0, "A0+null", 0), (1, "A1+11", 110)]
        # the topology has Kafka's names
        text = str(j.topology.describe())
        for name in ("KSTREAM-WINDOWED-0000000002", "KSTREAM-OUTERTHIS-0000000004", "KSTREAM-OUTEROTHER-0000000005",
                     "KSTREAM-MERGE-0000000006", "KSTREAM-OUTERSHARED-0000000004-store",
                     "KSTREAM-OUTERTHIS-0000000004-store"):
            assert name in text
    finally:
        j.close()


def test_outer_join_null_key_is_emitted_at_once_and_names_from_stream_joined():
    sj = StreamJoined.with_(I, S, S).with_name("j").with_store_name("st")
    j = _Join("outer", JoinWindows.of_time_difference_with_no_grace(10), stream_joined=sj)
    try:
        j.t1.pipe_input(None, "N", 5)
        assert j.read() == [(None, "N+null", 5)]
        text = str(j.topology.describe())
        for name in ("j-this-windowed", "j-outer-this-join", "j-outer-other-join", "j-merge",
                     "st-outer-this-join-store", "st-outer-other-join-store", "st-outer-shared-join-store"):
            assert name in text, name
    finally:
        j.close()


def test_stream_join_after_key_change_repartitions_both_sides_and_emit_interval_throttles():
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    s1 = b.stream("t1", Consumed.with_(S, S)).select_key(lambda k, v: v)
    s2 = b.stream("t2", Consumed.with_(S, S))
    s1.left_join(s2, _j, JoinWindows.of_time_difference_with_no_grace(5),
                 StreamJoined.with_(S, S, S).with_name("x")).to("out", Produced.with_(S, S))
    topology = b.build()
    assert set(topology.repartition_topics("app")) == {"app-x-left-repartition"}
    assert topology.copartition_groups() == [frozenset({"x-left-repartition", "t2"})]
    # Kafka's internal emit interval (wall clock) throttles the scan for expired non-joined records; the first
    # record's (empty) scan takes the first slot, as in Kafka 4.4.0 (checked with its TopologyTestDriver)
    cfg = {"application.id": "app", "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__": 1000}
    with TopologyTestDriver(topology, cfg) as d:
        t1 = d.create_input_topic("t1", S, S)
        t2 = d.create_input_topic("t2", S, S)
        out = d.create_output_topic("out", S, S)
        t1.pipe_input("k1", "a", 0)
        t1.pipe_input("k2", "b", 1)
        t2.pipe_input("a", "R", 3)
        assert _records(out) == [("a", "a+R", 3)]
        t2.pipe_input("q", "R", 10)          # b@1's window closed (1 + 5 < 10), but the next scan is due at 1000
        t1.pipe_input("k3", "c", 11)
        t2.pipe_input("q", "R", 30)
        assert _records(out) == []
        d.advance_wall_clock_time(1000)
        t2.pipe_input("q", "R", 31)
        assert _records(out) == [("b", "b+null", 1), ("c", "c+null", 11)]


# ------------------------------------------------------------------------------------------- stream-table

def test_stream_table_inner_and_left_join():
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    stream = b.stream("s", Consumed.with_(S, S))
    table = b.table("t", Consumed.with_(S, S))
    stream.join(table, _j).to("inner", Produced.with_(S, S))
    stream.left_join(table, _j, joined=Joined.as_("lj")).to("left", Produced.with_(S, S))
    topology = b.build()
    assert topology.copartition_groups() == [frozenset({"s", "t"})] * 2
    with TopologyTestDriver(topology) as d:
        s = d.create_input_topic("s", S, S)
        t = d.create_input_topic("t", S, S)
        inner = d.create_output_topic("inner", S, S)
        left = d.create_output_topic("left", S, S)
        s.pipe_input("a", "s1", 10)            # table empty
        t.pipe_input("a", "t1", 20)            # table updates emit nothing
        s.pipe_input("a", "s2", 5)             # joins the CURRENT table value; the stream record's timestamp
        t.pipe_input("a", None, 30)            # delete
        s.pipe_input("a", "s3", 40)
        s.pipe_input(None, "n", 41)            # null key: dropped by the inner join, joined with null by the left
        s.pipe_input("a", None, 42)            # null value: dropped by both
        assert _records(inner) == [("a", "s2+t1", 5)]
        assert _records(left) == [("a", "s1+null", 10), ("a", "s2+t1", 5), ("a", "s3+null", 40),
                                  (None, "n+null", 41)]
        assert d.task.metrics["dropped-records"] == 3


def test_stream_table_join_grace_needs_a_versioned_table():
    b = StreamsBuilder()
    stream = b.stream("s", Consumed.with_(S, S))
    table = b.table("t", Consumed.with_(S, S))
    with pytest.raises(TopologyException, match="KTable must be versioned to use a grace period"):
        stream.join(table, _j, joined=Joined.as_("x").with_grace_period(10))
    with pytest.raises(TopologyException, match="outer join of a KStream with a KTable"):
        stream.outer_join(table, _j)


# -------------------------------------------------------------------------------------------- table-table

def _table_join(kind, materialized=None):
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    left = b.table("l", Consumed.with_(S, S))
    right = b.table("r", Consumed.with_(S, S))
    method = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[kind]
    method(right, _j, materialized=materialized).to_stream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build())
    return d, d.create_input_topic("l", S, S), d.create_input_topic("r", S, S), d.create_output_topic("out", S, S)


STEPS = [("l", "a", "L1", 1), ("r", "a", "R1", 2), ("l", "a", "L2", 3), ("r", "b", "Rb", 4), ("r", "a", None, 5),
         ("l", "a", None, 6), ("l", "b", "Lb", 7)]


def _run_steps(lt, rt):
    for side, key, value, ts in STEPS:
        (lt if side == "l" else rt).pipe_input(key, value, ts)


@pytest.mark.parametrize("kind, expected", [
    ("inner", [("a", "L1+R1", 2), ("a", "L2+R1", 3), ("a", None, 5), ("b", "Lb+Rb", 7)]),
    ("left", [("a", "L1+null", 1), ("a", "L1+R1", 2), ("a", "L2+R1", 3), ("a", "L2+null", 5), ("a", None, 6),
              ("b", "Lb+Rb", 7)]),
    ("outer", [("a", "L1+null", 1), ("a", "L1+R1", 2), ("a", "L2+R1", 3), ("b", "null+Rb", 4),
               ("a", "L2+null", 5), ("a", None, 6), ("b", "Lb+Rb", 7)]),
])
def test_table_table_joins(kind, expected):
    d, lt, rt, out = _table_join(kind)
    with d:
        _run_steps(lt, rt)
        assert _records(out) == expected


def test_table_table_join_materialized_is_queryable():
    d, lt, rt, out = _table_join("outer", Materialized.as_("joined").with_value_serde(S))
    with d:
        _run_steps(lt, rt)
        assert _records(out)[-1] == ("b", "Lb+Rb", 7)
        store = d.get_key_value_store("joined")
        assert store.get("a") is None
        assert store.get("b") == "Lb+Rb"


def test_joins_read_a_non_materialized_join_result_through_both_sides():
    """A table-table join's result, not materialized, is read by a later table join and a stream-table join
    through its two parents' values (Kafka's KTableKTable*JoinValueGetter)."""
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    a, c, e = (b.table(t, Consumed.with_(S, S)) for t in "ace")
    ac = a.left_join(c, _j)
    ac.join(e, lambda x, y: "[%s|%s]" % (x, y)).to_stream().to("out", Produced.with_(S, S))
    b.stream("s", Consumed.with_(S, S)).join(ac, lambda x, y: x + ":" + y).to("out2", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        ta, tc, te, ts = (d.create_input_topic(t, S, S) for t in "aces")
        ta.pipe_input("k", "A", 1)
        te.pipe_input("k", "E", 2)        # looks up a left-join c = "A+null"
        tc.pipe_input("k", "C", 3)
        ts.pipe_input("k", "s", 4)
        ta.pipe_input("k", None, 5)       # the left join's delete reaches the inner join as a tombstone
        assert _records(d.create_output_topic("out", S, S)) == [
            ("k", "[A+null|E]", 2), ("k", "[A+C|E]", 3), ("k", None, 5)]
        assert _records(d.create_output_topic("out2", S, S)) == [("k", "s:A+C", 4)]
