"""Windowed aggregations of kbroker.streams' DSL (kbroker/streams/dsl/windows.py, windowed.py) through the
TopologyTestDriver: exact outputs (windowed keys, values, timestamps, order) with out-of-order and late records,
grace, hopping overlap, sliding windows and session merges. Where a scenario is one of Apache Kafka's own unit
tests (KStreamWindowAggregateTest, KStreamSlidingWindowAggregateTest), the expected output is Kafka's. The
other scenarios' outputs were checked once against Apache Kafka 4.4.0's own TopologyTestDriver running the same
Java topology (kafka-streams + kafka-streams-test-utils 4.4.0 from ~/.m2; that Java program is not in the suite)."""
import datetime

import pytest

from kbroker.streams.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder
from kbroker.streams.dsl.windows import (EmitStrategy, JoinWindows, SessionWindows, SlidingWindows, TimeWindows,
                                         UnlimitedWindows)
from kbroker.streams.keyvalue import Window, Windowed
from kbroker.streams.serdes import Serdes, session_windowed_serde, time_windowed_serde
from kbroker.streams.test_driver import TopologyTestDriver

S = Serdes.String()


def _records(out):
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def _driver(builder, config=None):
    return TopologyTestDriver(builder.build(), config)


def _builder(store="in_memory"):
    return StreamsBuilder({"default.dsl.store": store})


def _string_adder(_key, value, agg):
    return "%s+%s" % (agg, value)


# ---------------------------------------------------------------------------------------------------- specs

def test_time_windows_for_tumbling_hopping_and_epoch_alignment():
    tumbling = TimeWindows.of_size_with_no_grace(10)
    assert tumbling.windows_for(0) == {0: Window(0, 10)}
    assert tumbling.windows_for(19) == {10: Window(10, 20)}
    hopping = TimeWindows.of_size_and_grace(10, 3).advance_by(4)
    # windows of size 10 every 4 ms that contain 21: starts 12, 16, 20 (start 8 ends at 18 <= 21)
    assert hopping.windows_for(21) == {12: Window(12, 22), 16: Window(16, 26), 20: Window(20, 30)}
    # no window starts before the epoch
    assert hopping.windows_for(3) == {0: Window(0, 10)}
    assert hopping.grace_period_ms() == 3 and hopping.size() == 10
    assert TimeWindows.of_size_with_no_grace(datetime.timedelta(seconds=2)).size() == 2000
    assert UnlimitedWindows.of().start_on(5).windows_for(4) == {}


@pytest.mark.parametrize("make, message", [
    (lambda: TimeWindows.of_size_with_no_grace(0), "Window size (sizeMs) must be larger than zero."),
    (lambda: TimeWindows.of_size_with_no_grace(10).advance_by(11), "Window advancement interval should be more"),
    (lambda: TimeWindows.of_size_and_grace(10, -1), "Grace period must not be negative."),
    (lambda: SessionWindows.of_inactivity_gap_with_no_grace(0), "Gap time cannot be zero or negative."),
    (lambda: SlidingWindows.of_time_difference_and_grace(-1, 0), "Window time difference must not be negative."),
    (lambda: JoinWindows.of_time_difference_with_no_grace(5).before(-6), "must not be negative"),
    (lambda: TimeWindows.of_size_with_no_grace("10"), "must be an int of milliseconds or a timedelta"),
])
def test_window_specs_refuse_bad_durations_with_kafkas_messages(make, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_explicit_retention_smaller_than_size_plus_grace_is_refused():
    b = _builder()
    grouped = b.stream("in", Consumed.with_(S, S)).group_by_key()
    with pytest.raises(ValueError, match=r"must be no smaller than its window size plus the grace period. "
                                         r"Got size=\[10\], grace=\[5\], retention=\[14\]"):
        grouped.windowed_by(TimeWindows.of_size_and_grace(10, 5)).count(
            materialized=Materialized.as_("w").with_retention(14))


# ---------------------------------------------------------------------------------------- tumbling / hopping

@pytest.mark.parametrize("caching", [True, False])
def test_hopping_windows_late_records_dropped_and_counted_kafka_oracle(caching):
    """Kafka's KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindow: size 10, advance 5,
    grace 90; k@0..6 arrive when stream time is 100: their [0,10) window closed (10 <= 100 - 90), [5,15) open."""
    b = _builder()
    m = Materialized.as_("topic1-Canonicalized").with_value_serde(S).with_logging_disabled().with_retention(100)
    if not caching:
        m = m.with_caching_disabled()
    (b.stream("topic", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S))
     .windowed_by(TimeWindows.of_size_and_grace(10, 90).advance_by(5))
     .aggregate(lambda: "", _string_adder, materialized=m)
     .to_stream().map(lambda k, v: (str(k), v)).to("output", Produced.with_(S, S)))
    with _driver(b) as d:
        inp = d.create_input_topic("topic", S, S)
        for ts in (100, 0, 1, 2, 3, 4, 5, 6, 105, 106):
            inp.pipe_input("k", str(ts), ts)
        out = d.create_output_topic("output", S, S)
        assert _records(out) == [
            ("[k@95/105]", "+100", 100), ("[k@100/110]", "+100", 100),
            ("[k@5/15]", "+5", 5), ("[k@5/15]", "+5+6", 6),
            ("[k@100/110]", "+100+105", 105), ("[k@105/115]", "+105", 105),
            ("[k@100/110]", "+100+105+106", 106), ("[k@105/115]", "+105+106", 106)]
        assert d.task.metrics["dropped-records"] == 7
        # the store holds the aggregates (IQ through the driver: plain values)
        store = d.get_window_store("topic1-Canonicalized")
        assert store.fetch("k", 100) == "+100+105+106"
        assert store.fetch("k", 0) is None


def test_tumbling_count_out_of_order_within_grace_and_late_after_grace():
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 5)).count()
     .to_stream().to("out", Produced.with_(time_windowed_serde(S, 10), Serdes.Long())))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        out = d.create_output_topic("out", time_windowed_serde(S, 10), Serdes.Long())
        for key, ts in (("a", 3), ("b", 9), ("a", 12), ("a", 7),   # 7: out of order, [0,10) open (10 > 12 - 5)
                        ("a", 15),                                  # stream time 15: [0,10) closes (10 <= 15 - 5)
                        ("b", 4),                                   # late: dropped
                        ("a", 14)):                                 # out of order, [10,20) still open
            inp.pipe_input(key, "x", ts)
        w = Windowed
        assert _records(out) == [
            (w("a", Window(0, 10)), 1, 3), (w("b", Window(0, 10)), 1, 9), (w("a", Window(10, 20)), 1, 12),
            (w("a", Window(0, 10)), 2, 7), (w("a", Window(10, 20)), 2, 15), (w("a", Window(10, 20)), 3, 15)]
        assert d.task.metrics["dropped-records"] == 1


def test_windowed_count_names_are_kafkas():
    # an unnamed count burns one index before naming its store, as Kafka's does
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(10)).count().to_stream().to("out"))
    text = str(b.build().describe())
    assert "Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])" in text
    assert "Processor: KTABLE-TOSTREAM-0000000004 (stores: [])" in text


def test_windowed_reduce_after_key_change_goes_through_a_repartition_topic():
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).select_key(lambda k, v: v[0])
     .group_by_key(Grouped.with_(S, S).with_name("by-first"))
     .windowed_by(TimeWindows.of_size_and_grace(100, 100))
     .reduce(lambda a, v: a + "," + v)
     .to_stream().map(lambda k, v: ("%s@%d" % (k.key, k.window.start), v)).to("out", Produced.with_(S, S)))
    topology = b.build()
    assert set(topology.repartition_topics("app")) == {"app-by-first-repartition"}
    with TopologyTestDriver(topology, {"application.id": "app"}) as d:
        inp = d.create_input_topic("in", S, S)
        for k, v, ts in (("1", "x1", 10), ("2", "y1", 20), ("3", "x2", 150), ("4", "x3", 90)):
            inp.pipe_input(k, v, ts)
        assert _records(d.create_output_topic("out", S, S)) == [
            ("x@0", "x1", 10), ("y@0", "y1", 20), ("x@100", "x2", 150), ("x@0", "x1,x3", 90)]


def test_emit_on_window_close_forwards_each_closed_window_once():
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 2)).emit_strategy(EmitStrategy.on_window_close())
     .count().to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, Serdes.Long())))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        out = d.create_output_topic("out", S, Serdes.Long())
        for key, ts in (("a", 1), ("b", 5), ("a", 11), ("a", 9)):
            inp.pipe_input(key, "x", ts)
        assert _records(out) == []               # stream time 11: [0,10) closes at 12
        inp.pipe_input("b", "x", 12)
        assert _records(out) == [("[a@0/10]", 2, 9), ("[b@0/10]", 1, 5)]
        inp.pipe_input("a", "x", 35)
        assert _records(out) == [("[a@10/20]", 1, 11), ("[b@10/20]", 1, 12)]


# ---------------------------------------------------------------------------------------------------- sliding

SLIDING_INPUT = [("1", 10), ("2", 10), ("3", 14), ("4", 15), ("5", 20), ("6", 22), ("7", 30)]


@pytest.mark.parametrize("store", ["in_memory", "rocksDB"])
def test_sliding_windows_kafka_oracle(store):
    """Kafka's KStreamSlidingWindowAggregateTest.testAggregateSmallInput (time difference 10, grace 5): every
    update, grouped by window start (Kafka's own assertion is per start, as sets), plus our exact order."""
    b = _builder(store)
    (b.stream("topic", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S))
     .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5))
     .aggregate(lambda: "0", _string_adder, materialized=Materialized.with_(S, S))
     .to_stream().to("out", Produced.with_(time_windowed_serde(S, 10), S)))
    with _driver(b) as d:
        inp = d.create_input_topic("topic", S, S)
        for v, ts in SLIDING_INPUT:
            inp.pipe_input("A", v, ts)
        got = _records(d.create_output_topic("out", time_windowed_serde(S, 10), S))
    by_start = {}
    for key, value, ts in got:
        assert key.key == "A" and key.window.end == key.window.start + 10
        by_start.setdefault(key.window.start, set()).add((value, ts))
    assert by_start == {
        0: {("0+1", 10), ("0+1+2", 10)},
        4: {("0+1+2+3", 14)},
        5: {("0+1+2+3+4", 15)},
        10: {("0+1+2+3+4+5", 20)},
        11: {("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)},
        12: {("0+3+4+5+6", 22)},
        15: {("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)},
        16: {("0+5", 20), ("0+5+6", 22)},
        20: {("0+5+6+7", 30)},
        21: {("0+6", 22), ("0+6+7", 30)},
        23: {("0+7", 30)},
    }
    w = lambda s: Windowed("A", Window(s, s + 10))  # noqa: E731
    # order within one record: existing windows updated newest first, then the previous record's right window,
    # the record's left window and its right window are created (Kafka's reverse-iterator path)
    assert got == [
        (w(0), "0+1", 10), (w(0), "0+1+2", 10),
        (w(11), "0+3", 14), (w(4), "0+1+2+3", 14),
        (w(11), "0+3+4", 15), (w(15), "0+4", 15), (w(5), "0+1+2+3+4", 15),
        (w(15), "0+4+5", 20), (w(11), "0+3+4+5", 20), (w(16), "0+5", 20), (w(10), "0+1+2+3+4+5", 20),
        (w(16), "0+5+6", 22), (w(15), "0+4+5+6", 22), (w(21), "0+6", 22), (w(12), "0+3+4+5+6", 22),
        (w(21), "0+6+7", 30), (w(23), "0+7", 30), (w(20), "0+5+6+7", 30)]


def test_sliding_windows_out_of_order_and_late_record():
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(5, 5)).count()
     .to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, Serdes.Long())))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        inp.pipe_input("k", "x", 10)   # left window [5,10]
        inp.pipe_input("k", "x", 20)   # [15,20]; 10's right window [11,16] is empty of 20: not created
        inp.pipe_input("k", "x", 16)   # out of order: joins [15,20]; creates [11,16] and its right [17,22]
        inp.pipe_input("k", "x", 9)    # late: 9 + 5 < 20 - 5: dropped whole
        assert _records(d.create_output_topic("out", S, Serdes.Long())) == [
            ("[k@5/10]", 1, 10), ("[k@15/20]", 1, 20),
            ("[k@15/20]", 2, 20), ("[k@11/16]", 1, 16), ("[k@17/22]", 1, 20)]
        assert d.task.metrics["dropped-records"] == 1


def test_sliding_windows_records_before_time_difference_share_the_early_window():
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
     .aggregate(lambda: "0", _string_adder, materialized=Materialized.with_(S, S))
     .to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, S)))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        inp.pipe_input("k", "a", 2)
        inp.pipe_input("k", "b", 5)
        assert _records(d.create_output_topic("out", S, S)) == [
            ("[k@0/10]", "0+a", 2), ("[k@3/13]", "0+b", 5), ("[k@0/10]", "0+a+b", 5)]


# ---------------------------------------------------------------------------------------------------- sessions

@pytest.mark.parametrize("store", ["in_memory", "rocksDB"])
def test_session_windows_merge_tombstones_and_late_records(store):
    b = _builder(store)
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0))
     .count(materialized=Materialized.as_("sessions").with_retention(1000))
     .to_stream().to("out", Produced.with_(session_windowed_serde(S), Serdes.Long())))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        out = d.create_output_topic("out", session_windowed_serde(S), Serdes.Long())
        w = lambda k, s, e: Windowed(k, Window(s, e))  # noqa: E731
        inp.pipe_input("a", "x", 0)
        inp.pipe_input("b", "x", 1)
        inp.pipe_input("a", "x", 3)        # merges [0,0] -> [0,3]
        assert _records(out) == [(w("a", 0, 0), 1, 0), (w("b", 1, 1), 1, 1),
                                 (w("a", 0, 0), None, 0), (w("a", 0, 3), 2, 3)]
        inp.pipe_input("a", "x", 30)
        inp.pipe_input("a", "x", 40)       # close time now 40 - 0 - 5 = 35
        inp.pipe_input("a", "x", 36)       # within gap of [40,40] only: [36,40]
        inp.pipe_input("a", "x", 10)       # its own session [10,10] ends before 35: late, dropped
        inp.pipe_input("a", "x", 33)       # bridges [30,30] and [36,40] -> [30,40] = 4
        assert _records(out) == [
            (w("a", 30, 30), 1, 30), (w("a", 40, 40), 1, 40),
            (w("a", 40, 40), None, 40), (w("a", 36, 40), 2, 40),
            (w("a", 30, 30), None, 30), (w("a", 36, 40), None, 40), (w("a", 30, 40), 4, 40)]
        assert d.task.metrics["dropped-records"] == 1
        sessions = d.get_session_store("sessions")
        assert [(kv.key, kv.value) for kv in sessions.fetch("a")] == [(w("a", 0, 3), 2), (w("a", 30, 40), 4)]


def test_session_windows_aggregate_with_merger():
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
     .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a1, a2: a1 + "|" + a2,
                materialized=Materialized.as_("sessions").with_value_serde(S).with_retention(1000))
     .to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, S)))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        for v, ts in (("a", 0), ("b", 20), ("c", 10)):   # "c" is within the gap of both sessions
            inp.pipe_input("k", v, ts)
        assert _records(d.create_output_topic("out", S, S)) == [
            ("[k@0/0]", "a", 0), ("[k@20/20]", "b", 20),
            ("[k@0/0]", None, 0), ("[k@20/20]", None, 20), ("[k@0/20]", "|a|bc", 20)]


def test_sliding_windows_emit_on_window_close_kafka_oracle():
    """Kafka's KStreamSlidingWindowAggregateTest.testAggregateSmallInput with EmitStrategy.onWindowClose():
    only closed windows' final aggregates (window end + grace < stream time)."""
    b = _builder()
    (b.stream("topic", Consumed.with_(S, S)).group_by_key(Grouped.with_(S, S))
     .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5)).emit_strategy(EmitStrategy.on_window_close())
     .aggregate(lambda: "0", _string_adder, materialized=Materialized.as_("store-name").with_value_serde(S))
     .to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, S)))
    with _driver(b) as d:
        inp = d.create_input_topic("topic", S, S)
        for v, ts in SLIDING_INPUT:
            inp.pipe_input("A", v, ts)
        assert _records(d.create_output_topic("out", S, S)) == [
            ("[A@0/10]", "0+1+2", 10), ("[A@4/14]", "0+1+2+3", 14), ("[A@5/15]", "0+1+2+3+4", 15),
            ("[A@10/20]", "0+1+2+3+4+5", 20), ("[A@11/21]", "0+3+4+5", 20), ("[A@12/22]", "0+3+4+5+6", 22)]


def test_session_windows_emit_on_window_close():
    b = _builder()
    (b.stream("in", Consumed.with_(S, S)).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5)).emit_strategy(EmitStrategy.on_window_close())
     .count().to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, Serdes.Long())))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        out = d.create_output_topic("out", S, Serdes.Long())
        for key, ts in (("a", 0), ("a", 3), ("b", 8)):
            inp.pipe_input(key, "x", ts)
        assert _records(out) == []               # [a@0/3] closes once stream time > 3 + gap 5
        inp.pipe_input("b", "x", 9)
        assert _records(out) == [("[a@0/3]", 2, 3)]
        inp.pipe_input("c", "x", 30)
        assert _records(out) == [("[b@8/9]", 2, 9)]


def test_windowed_tables_carry_kafkas_windowed_key_serdes_to_sinks():
    """Without Produced serdes a windowed count writes Kafka's bytes: key + 8-byte window start (time windows),
    key + 8-byte end + 8-byte start (sessions); the count as an 8-byte big-endian long."""
    b = _builder()
    grouped = b.stream("in", Consumed.with_(S, S)).group_by_key()
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count().to_stream().to("out")
    grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count().to_stream().to("out2")
    with _driver(b) as d:
        d.create_input_topic("in", S, S).pipe_input("ab", "x", 12)
        one = (1).to_bytes(8, "big")
        r = d.read_produced("out")
        assert (r.key, r.value, r.timestamp) == (b"ab" + (10).to_bytes(8, "big"), one, 12)
        r = d.read_produced("out2")
        assert (r.key, r.value, r.timestamp) == (b"ab" + (12).to_bytes(8, "big") * 2, one, 12)


@pytest.mark.parametrize("store", ["in_memory", "rocksDB"])
@pytest.mark.parametrize("windows, expected", [
    (TimeWindows.of_size_and_grace(10, 5), [("[a@0/10]", 1, 3), ("[b@0/10]", 1, 1), ("[a@10/20]", 1, 12)]),
    (SessionWindows.of_inactivity_gap_and_grace(5, 10), [("[b@1/1]", 1, 1), ("[a@3/3]", 1, 3), ("[a@12/12]", 1, 12)]),
])
def test_emit_on_window_close_scans_in_time_then_key_order(store, windows, expected):
    """Several windows closed by one record come out by window start (sessions: end), then key -- Kafka 4.4.0's
    time-ordered emit-on-close stores (checked with its TopologyTestDriver; its in-memory session store loses
    these sessions to retention and emits nothing, ours keeps them)."""
    b = _builder(store)
    (b.stream("in", Consumed.with_(S, S)).group_by_key().windowed_by(windows)
     .emit_strategy(EmitStrategy.on_window_close()).count()
     .to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, Serdes.Long())))
    with _driver(b) as d:
        inp = d.create_input_topic("in", S, S)
        for key, ts in (("b", 1), ("a", 12), ("a", 3), ("c", 50)):
            inp.pipe_input(key, "x", ts)
        assert _records(d.create_output_topic("out", S, Serdes.Long())) == expected
