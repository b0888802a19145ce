"""KTable.suppress of kbroker.streams (kbroker/streams/dsl/suppress.py) through the TopologyTestDriver. The
scenarios are Apache Kafka's SuppressScenarioTest with Kafka's exact expected outputs (final results for time,
sliding and session windows; time, record and byte limits), plus the shut-down strategy, named suppression and a
buffer restored from its changelog."""
import pytest

from kbroker.streams.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder
from kbroker.streams.dsl.windows import (BufferConfig, SessionWindows, SlidingWindows, Suppressed, TimeWindows)
from kbroker.streams.errors import StreamsException, TopologyException
from kbroker.streams.serdes import Serdes
from kbroker.streams.test_driver import TopologyTestDriver

S = Serdes.String()
L = Serdes.Long()
MAX = (1 << 63) - 1


def _kvts(out):
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def _windowed_counts(windows, store):
    b = StreamsBuilder({"default.dsl.store": store})
    counts = (b.stream("input", Consumed.with_(S, S)).group_by(lambda k, v: k, Grouped.with_(S, S))
              .windowed_by(windows).count(materialized=Materialized.as_("counts").with_caching_disabled()))
    (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().map(lambda k, v: (str(k), v)).to("output-suppressed", Produced.with_(S, L)))
    counts.to_stream().map(lambda k, v: (str(k), v)).to("output-raw", Produced.with_(S, L))
    d = TopologyTestDriver(b.build())
    return (d, d.create_input_topic("input", S, S), d.create_output_topic("output-raw", S, L),
            d.create_output_topic("output-suppressed", S, L))


@pytest.mark.parametrize("store", ["in_memory", "rocksDB"])
def test_final_results_for_time_windows(store):
    d, inp, raw, suppressed = _windowed_counts(TimeWindows.of_size_and_grace(2, 1), store)
    with d:
        for ts in (0, 1, 2, 1, 0, 5, 0):   # the last one is beyond the grace period: dropped everywhere
            inp.pipe_input("k1", "v1", ts)
        assert _kvts(raw) == [("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
                              ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 5)]
        assert _kvts(suppressed) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_final_results_for_time_windows_with_large_jump():
    d, inp, raw, suppressed = _windowed_counts(TimeWindows.of_size_and_grace(2, 2), "in_memory")
    with d:
        for ts in (0, 1, 2, 0, 3, 0, 4, 0, 30):
            inp.pipe_input("k1", "v1", ts)
        assert _kvts(raw) == [("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
                              ("[k1@2/4]", 2, 3), ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 4), ("[k1@30/32]", 1, 30)]
        assert _kvts(suppressed) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]


def test_final_results_for_sliding_windows():
    d, inp, raw, suppressed = _windowed_counts(SlidingWindows.of_time_difference_and_grace(5, 15), "in_memory")
    with d:
        for ts in (10, 11, 10, 13, 10, 24, 5, 7, 90):
            inp.pipe_input("k1", "v1", ts)
        # Kafka's assertion sorts the raw updates by (key, timestamp) (its order within a record is unspecified)
        assert sorted(_kvts(raw), key=lambda r: (r[0], r[2])) == [
            ("[k1@11/16]", 1, 11), ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
            ("[k1@5/10]", 1, 10), ("[k1@5/10]", 2, 10), ("[k1@5/10]", 3, 10), ("[k1@5/10]", 4, 10),
            ("[k1@5/10]", 5, 10), ("[k1@6/11]", 2, 11), ("[k1@6/11]", 3, 11), ("[k1@6/11]", 4, 11),
            ("[k1@6/11]", 5, 11), ("[k1@8/13]", 4, 13), ("[k1@8/13]", 5, 13), ("[k1@85/90]", 1, 90)]
        assert _kvts(suppressed) == [("[k1@5/10]", 5, 10), ("[k1@6/11]", 5, 11), ("[k1@8/13]", 5, 13),
                                     ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24)]


@pytest.mark.parametrize("store", ["in_memory", "rocksDB"])
def test_final_results_for_session_windows(store):
    d, inp, raw, suppressed = _windowed_counts(SessionWindows.of_inactivity_gap_with_no_grace(5), store)
    with d:
        inp.pipe_input("k1", "v1", 0)
        inp.pipe_input("k1", "v1", 5)
        inp.pipe_input("k1", "v1", 1)      # out of order but inside the open session
        inp.pipe_input("k2", "v1", 11)     # any key advances stream time
        inp.pipe_input("k1", "v1", 5)      # late for the closed session [0,5]: dropped from all outputs
        inp.pipe_input("k1", "v1", 30)
        assert _kvts(raw) == [("[k1@0/0]", 1, 0), ("[k1@0/0]", None, 0), ("[k1@0/5]", 2, 5), ("[k1@0/5]", None, 5),
                              ("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11), ("[k1@30/30]", 1, 30)]
        assert _kvts(suppressed) == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]
        assert d.task.metrics["dropped-records"] == 1


def _value_counts(buffer_suppressed, count_materialized=None):
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    counts = (b.table("input", Consumed.with_(S, S),
                      Materialized.with_(S, S).with_caching_disabled().with_logging_disabled())
              .group_by(lambda k, v: (v, k), Grouped.with_(S, S))
              .count(materialized=count_materialized or Materialized.with_(S, L)))
    counts.suppress(buffer_suppressed).to_stream().to("output-suppressed", Produced.with_(S, L))
    counts.to_stream().to("output-raw", Produced.with_(S, L))
    d = TopologyTestDriver(b.build())
    return (d, d.create_input_topic("input", S, S), d.create_output_topic("output-raw", S, L),
            d.create_output_topic("output-suppressed", S, L))


RAW_3 = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]


def test_time_limit_is_counted_from_the_first_buffered_update():
    d, inp, raw, suppressed = _value_counts(Suppressed.until_time_limit(2, BufferConfig.unbounded()))
    with d:
        inp.pipe_input("k1", "v1", 0)
        inp.pipe_input("k1", "v2", 1)
        inp.pipe_input("k2", "v1", 2)
        assert _kvts(raw) == RAW_3
        assert _kvts(suppressed) == [("v1", 1, 2)]
        inp.pipe_input("tick", "tick", 3)
        assert _kvts(raw) == [("tick", 1, 3)]
        assert _kvts(suppressed) == [("v2", 1, 1)]
        inp.pipe_input("tick", "tock", 4)
        assert _kvts(raw) == [("tick", 0, 4), ("tock", 1, 4)]
        assert _kvts(suppressed) == []       # "tick" was first buffered at 3: held until stream time 5


@pytest.mark.parametrize("config", [BufferConfig.max_records(1).emit_early_when_full(),
                                    BufferConfig.max_bytes(200).emit_early_when_full()])
def test_record_and_byte_limits_emit_early(config):
    d, inp, raw, suppressed = _value_counts(Suppressed.until_time_limit(MAX, config))
    with d:
        inp.pipe_input("k1", "v1", 0)
        inp.pipe_input("k1", "v2", 1)
        inp.pipe_input("k2", "v1", 2)
        assert _kvts(raw) == RAW_3
        assert _kvts(suppressed) == [("v1", 0, 1), ("v2", 1, 1)]
        inp.pipe_input("x", "x", 3)
        assert _kvts(raw) == [("x", 1, 3)]
        assert _kvts(suppressed) == [("v1", 1, 2)]


def test_shut_down_when_full_fails_the_task_with_kafkas_message():
    d, inp, raw, suppressed = _value_counts(
        Suppressed.until_time_limit(MAX, BufferConfig.max_records(1).shut_down_when_full()).with_name("sup"))
    with d:
        inp.pipe_input("k1", "v1", 0)
        with pytest.raises(StreamsException, match=r"sup buffer exceeded its max capacity. Currently \[2/1\] "
                                                   r"records and \[\d+/9223372036854775807\] bytes."):
            inp.pipe_input("k2", "v2", 1)
    text = str(_value_counts(Suppressed.until_time_limit(5, BufferConfig.unbounded()).with_name("sup"))[0]
               .topology.describe())
    assert "Processor: sup (stores: [sup-store])" in text


def test_until_window_closes_needs_a_windowed_table_and_a_strict_buffer():
    b = StreamsBuilder()
    table = b.table("t", Consumed.with_(S, S))
    with pytest.raises(TopologyException, match="Window close time is only defined for windowed computations"):
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    with pytest.raises(ValueError, match="StrictBufferConfig"):
        Suppressed.until_window_closes(BufferConfig.max_records(3))
    with pytest.raises(TopologyException, match="illegal"):
        Suppressed.until_time_limit(1, BufferConfig.unbounded()).with_name("bad name")


@pytest.mark.parametrize("logged", [True, False])
def test_suppression_buffer_is_change_logged_unless_disabled(logged):
    """Each buffered update is written to "<app>-<store>-changelog" (keyed by the serialized windowed key) and a
    tombstone when the entry is emitted; BufferConfig.with_logging_disabled() writes nothing."""
    config = BufferConfig.unbounded() if logged else BufferConfig.unbounded().with_logging_disabled()
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    (b.stream("input", Consumed.with_(S, S)).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 0)).count()
     .suppress(Suppressed.until_window_closes(config).with_name("final"))
     .to_stream().map(lambda k, v: (str(k), v)).to("out", Produced.with_(S, L)))
    with TopologyTestDriver(b.build(), {"application.id": "app"}) as d:
        inp = d.create_input_topic("input", S, S)
        for ts in (1, 2, 15):
            inp.pipe_input("a", "x", ts)
        assert _kvts(d.create_output_topic("out", S, L)) == [("[a@0/10]", 2, 2)]
        topic = "app-final-store-changelog"
        changelog = [d.read_produced(topic) for _ in range(d.queue_size(topic))]
    if not logged:
        assert changelog == []
        return
    w0 = b"a" + (0).to_bytes(8, "big")          # time-windowed key bytes: key + 8-byte window start
    w10 = b"a" + (10).to_bytes(8, "big")
    assert [(r.key, r.value is None, r.timestamp) for r in changelog] == [
        (w0, False, 1), (w0, False, 2), (w10, False, 15), (w0, True, 15)]


def test_suppressed_table_joined_sees_values_as_before_the_buffered_updates():
    """Kafka's SuppressScenarioTest.shouldWorkBeforeJoinRight: a join reads a suppressed table through the
    buffer (the value before its buffered updates), else through to the parent table."""
    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S)).suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    (left.outer_join(right, lambda l, r: "(%s,%s)" % ("null" if l is None else l, "null" if r is None else r))
     .to_stream().to("output", Produced.with_(S, S)))
    with TopologyTestDriver(b.build()) as d:
        rt = d.create_input_topic("right", S, S)
        lt = d.create_input_topic("left", S, S)
        out = d.create_output_topic("output", S, S)
        rt.pipe_input("B", "1", 0)
        rt.pipe_input("A", "1", 0)
        assert _kvts(out) == []
        rt.pipe_input("tick", "tick", 10)
        assert _kvts(out) == [("A", "(null,1)", 0), ("B", "(null,1)", 0)]
        rt.pipe_input("A", "2", 11)
        assert _kvts(out) == []
        lt.pipe_input("A", "a", 12)
        assert _kvts(out) == [("A", "(a,1)", 12)]
        lt.pipe_input("B", "b", 12)
        assert _kvts(out) == [("B", "(b,1)", 12)]
        lt.pipe_input("A", "b", 13)
        assert _kvts(out) == [("A", "(b,1)", 13)]
        rt.pipe_input("tick", "tick1", 21)
        assert _kvts(out) == [("tick", "(null,tick1)", 21), ("A", "(b,2)", 13)]


def test_a_restarted_suppression_processor_rebuilds_its_buffer_from_the_store():
    """What restore gives a new task is the buffer store's content (its changelog's): a fresh processor over the
    same store emits the entries the old one buffered, in buffer-time order, with their timestamps and headers."""
    from kbroker.streams.dsl.nodes import Change
    from kbroker.streams.keyvalue import Window, Windowed
    from kbroker.streams.processor import Record

    b = StreamsBuilder({"default.dsl.store": "in_memory"})
    (b.stream("input", Consumed.with_(S, S)).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 10))
     .count(materialized=Materialized.with_(S, L).with_caching_disabled())
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
     .to_stream().to("out"))
    topology = b.build()
    with TopologyTestDriver(topology, {"application.id": "app"}) as d:
        inp = d.create_input_topic("input", S, S)
        inp.pipe_input("b", "x", 3, headers=[("h", b"1")])
        inp.pipe_input("a", "x", 1)
        inp.pipe_input("a", "x", 12)
        store = d.get_state_store("final-store")
        assert store.approximate_num_entries() == 3

        forwarded = []

        class Context:
            def application_id(self):
                return "app"

            def get_state_store(self, name):
                assert name == "final-store"
                return store

            def key_serde(self):
                return S

            def value_serde(self):
                return S

            def record_metadata(self):
                return None

            def forward(self, record, child_name=None):
                forwarded.append(record)

        restarted = topology.node("final").supplier()
        restarted.init(Context())
        # stream time 25 closes the windows ending at 10 (10 + grace 10 <= 25), not [10,20)
        restarted.process(Record(Windowed("a", Window(20, 30)), Change(1, None), 25))
        assert store.approximate_num_entries() == 2
    assert [(r.key, r.value.new_value, r.timestamp, r.headers) for r in forwarded] == [
        (Windowed("a", Window(0, 10)), 1, 1, []), (Windowed("b", Window(0, 10)), 1, 3, [("h", b"1")])]
