"""kbroker.streams' core: Kafka's serde bytes, murmur2, Topology (describe text, sub-topologies, internal topic
names), and StreamTask (timestamp-ordered processing, punctuation, forwarding, record metadata, sinks,
deserialization handlers, timestamp extractors) driven directly, without stores or a broker."""
import struct
import uuid

import pytest

from kbroker.streams import (KeyValue, Processor, PunctuationType, Record, RecordMetadata, Serdes, StreamsException,
                             TaskId, Topology, TopologyException, Window, Windowed, default_partition, murmur2,
                             session_windowed_serde, time_windowed_serde)
from kbroker.streams.errors import SerializationException
from kbroker.streams.serdes import serde_from_config
from kbroker.streams.task import ConsumedRecord, StreamTask


# ------------------------------------------------------------------------------------------------- serdes
def test_serde_bytes_are_kafkas():
    s = Serdes.String()
    assert s.serialize("t", "héllo") == "héllo".encode("utf-8") == b"h\xc3\xa9llo"
    assert s.deserialize("t", b"h\xc3\xa9llo") == "héllo"
    assert s.deserialize("t", b"\xff") == "\ufffd"           # Java's decoder replaces, never fails
    assert Serdes.Long().serialize("t", 1) == b"\x00\x00\x00\x00\x00\x00\x00\x01"
    assert Serdes.Long().serialize("t", -2) == b"\xff" * 7 + b"\xfe"
    assert Serdes.Long().deserialize("t", b"\x7f" + b"\xff" * 7) == (1 << 63) - 1
    assert Serdes.Integer().serialize("t", 258) == b"\x00\x00\x01\x02"
    assert Serdes.Short().serialize("t", -1) == b"\xff\xff"
    assert Serdes.Double().serialize("t", 1.5) == b"\x3f\xf8" + b"\x00" * 6
    assert Serdes.Float().serialize("t", -2.0) == b"\xc0\x00\x00\x00"
    assert Serdes.Boolean().serialize("t", True) == b"\x01"
    assert Serdes.Boolean().deserialize("t", b"\x00") is False
    u = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    assert Serdes.UUID().serialize("t", u) == b"123e4567-e89b-12d3-a456-426614174000"
    assert Serdes.UUID().deserialize("t", b"123e4567-e89b-12d3-a456-426614174000") == u
    assert Serdes.ByteArray().serialize("t", bytearray(b"ab")) == b"ab"
    assert Serdes.Void().serialize("t", None) is None
    for serde in (Serdes.String(), Serdes.Long(), Serdes.Integer(), Serdes.Double(), Serdes.Bytes(), Serdes.UUID()):
        assert serde.serialize("t", None) is None and serde.deserialize("t", None) is None   # tombstones


def test_serde_errors_use_kafkas_messages():
    with pytest.raises(SerializationException, match="^Size of data received by LongDeserializer is not 8$"):
        Serdes.Long().deserialize("t", b"\x00" * 7)
    with pytest.raises(SerializationException, match="IntegerDeserializer is not 4"):
        Serdes.Integer().deserialize("t", b"\x00")
    with pytest.raises(SerializationException, match="Data should be null for a VoidDeserializer"):
        Serdes.Void().deserialize("t", b"x")
    with pytest.raises(SerializationException):
        Serdes.Long().serialize("t", 1 << 63)                # out of Java's long range
    with pytest.raises(SerializationException):
        Serdes.Long().serialize("t", "7")
    with pytest.raises(SerializationException):
        Serdes.String().serialize("t", 7)


def test_windowed_serdes():
    key = Windowed("k", Window(1000, 1500))
    tw = time_windowed_serde(Serdes.String(), 500)
    data = tw.serialize("t", key)
    assert data == b"k" + struct.pack(">q", 1000)
    assert tw.deserialize("t", data) == key
    assert time_windowed_serde(Serdes.String()).deserialize("t", data).window == Window(1000, (1 << 63) - 1)
    sw = session_windowed_serde(Serdes.String())
    skey = Windowed("k", Window(10, 20))
    assert sw.serialize("t", skey) == b"k" + struct.pack(">qq", 20, 10)   # end before start, as Kafka's
    assert sw.deserialize("t", sw.serialize("t", skey)) == skey
    assert str(key) == "[k@1000/1500]"
    assert KeyValue.pair(1, 2) == KeyValue(1, 2)


def test_serde_from_config_names():
    assert serde_from_config("org.apache.kafka.common.serialization.Serdes$StringSerde").serialize("t", "a") == b"a"
    assert serde_from_config("org.apache.kafka.common.serialization.Serdes$LongSerde").serialize("t", 1) == \
        b"\x00" * 7 + b"\x01"
    assert serde_from_config("Integer").serialize("t", 1) == b"\x00\x00\x00\x01"
    assert serde_from_config(Serdes.Double).serialize("t", 0.0) == b"\x00" * 8
    with pytest.raises(ValueError, match="unknown serde 'Nope'"):
        serde_from_config("Nope")


# ------------------------------------------------------------------------------------------------ murmur2
@pytest.mark.parametrize("data,expected", [
    (b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829), (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107)])
def test_murmur2_kafka_vectors(data, expected):
    # Kafka's UtilsTest.testMurmur2 values (Java's signed int)
    assert murmur2(data) == expected


def test_default_partition():
    assert default_partition(b"foobar", 6) == (-790332482 & 0x7FFFFFFF) % 6 == 0
    assert default_partition(b"a", 3) == 1
    with pytest.raises(ValueError):
        default_partition(b"a", 0)


# ----------------------------------------------------------------------------------------------- topology
class FakeStoreBuilder:
    def __init__(self, name, logged=True, windowed=False, retention_ms=None):
        self._name, self._logged, self._windowed, self.retention_ms = name, logged, windowed, retention_ms

    def is_windowed(self):
        return self._windowed

    def name(self):
        return self._name

    def logging_enabled(self):
        return self._logged

    def log_config(self):
        return {"min.insync.replicas": "1"} if self._logged else {}


class Passthrough(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.forward(record)


def two_stage_topology():
    t = Topology()
    t.add_internal_topic("x-repartition")
    t.add_source("src", "in")
    t.add_processor("p1", Passthrough, "src")
    t.add_sink("rep-sink", "x-repartition", "p1")
    t.add_source("rep-src", "x-repartition")
    t.add_processor("agg", Passthrough, "rep-src")
    t.add_state_store(FakeStoreBuilder("counts"), "agg")
    t.add_state_store(FakeStoreBuilder("scratch", logged=False), "agg")
    t.add_processor("z-proc", Passthrough, "agg")
    t.add_state_store(FakeStoreBuilder("win", windowed=True, retention_ms=5000), "z-proc")
    t.add_sink("out", "output", "agg")
    t.add_sink("out2", "output2", "z-proc")
    return t


def test_describe_is_kafkas_text():
    """Byte for byte what Kafka 4.4.0's Topology.describe() prints for the same Processor API topology."""
    assert str(two_stage_topology().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: src (topics: [in])\n"
        "      --> p1\n"
        "    Processor: p1 (stores: [])\n"
        "      --> rep-sink\n"
        "      <-- src\n"
        "    Sink: rep-sink (topic: x-repartition)\n"
        "      <-- p1\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: rep-src (topics: [x-repartition])\n"
        "      --> agg\n"
        "    Processor: agg (stores: [counts, scratch])\n"
        "      --> z-proc, out\n"
        "      <-- rep-src\n"
        "    Processor: z-proc (stores: [win])\n"
        "      --> out2\n"
        "      <-- agg\n"
        "    Sink: out (topic: output)\n"
        "      <-- agg\n"
        "    Sink: out2 (topic: output2)\n"
        "      <-- z-proc\n"
        "\n")


def test_subtopologies_and_internal_topic_names():
    t = two_stage_topology()
    s0, s1 = t.subtopologies("app")
    assert (s0.id, s0.nodes, s0.source_topics, s0.sink_topics, s0.repartition_sources) == \
        (0, ("src", "p1", "rep-sink"), {"in"}, {"app-x-repartition"}, frozenset())
    assert (s1.id, s1.source_topics, s1.sink_topics, s1.stores, s1.repartition_sources) == \
        (1, {"app-x-repartition"}, {"output", "output2"}, {"counts", "scratch", "win"}, {"app-x-repartition"})
    assert t.subtopologies()[1].source_topics == {"x-repartition"}      # undecorated without an app id
    assert t.source_topic_names("app") == {"in", "app-x-repartition"}
    assert t.repartition_topics("app") == {"app-x-repartition": None}
    cl = t.changelog_topics("app")
    assert sorted(cl) == ["app-counts-changelog", "app-win-changelog"]  # "scratch" is not logged
    assert cl["app-counts-changelog"].store == "counts" and cl["app-counts-changelog"].subtopology == 1
    assert (cl["app-counts-changelog"].windowed, cl["app-counts-changelog"].retention_ms) == (False, None)
    assert (cl["app-win-changelog"].windowed, cl["app-win-changelog"].retention_ms) == (True, 5000)
    assert cl["app-counts-changelog"].config == {"min.insync.replicas": "1"}
    assert t.resolve_topic("x-repartition", "app") == "app-x-repartition" and t.resolve_topic("in", "app") == "in"
    assert t.source_for_topic("app-x-repartition", "app").name == "rep-src" and t.source_for_topic("nope") is None
    t.add_source("late", "late-topic", offset_reset="latest")
    assert (t.offset_reset_for("late-topic"), t.offset_reset_for("in"), t.offset_reset_for("zz")) == ("latest", None,
                                                                                                      None)


def test_shared_store_joins_subtopologies_and_ids_follow_insertion_order():
    t = Topology()
    t.add_source("b-src", "b").add_processor("pb", Passthrough, "b-src")
    t.add_source("a-src", "a").add_processor("pa", Passthrough, "a-src")
    t.add_source("c-src", "c").add_processor("pc", Passthrough, "c-src")
    assert [s.source_topics for s in t.subtopologies()] == [{"b"}, {"a"}, {"c"}]
    t.add_state_store(FakeStoreBuilder("shared"), "pb", "pc")
    assert [s.source_topics for s in t.subtopologies()] == [{"b", "c"}, {"a"}]


def test_next_name_and_topology_errors():
    t = Topology()
    assert t.next_name("KSTREAM-SOURCE-") == "KSTREAM-SOURCE-0000000000"
    assert t.next_name("KSTREAM-FILTER-") == "KSTREAM-FILTER-0000000001"
    t.add_source("s", "in")
    with pytest.raises(TopologyException, match="^Invalid topology: Processor s is already added.$"):
        t.add_processor("s", Passthrough, "s")
    with pytest.raises(TopologyException, match="Topic in has already been registered by another source"):
        t.add_source("s2", "in")
    with pytest.raises(TopologyException, match="Predecessor processor nope is not added yet for p"):
        t.add_processor("p", Passthrough, "nope")
    with pytest.raises(TopologyException, match="Processor p must have at least one parent"):
        t.add_processor("p", Passthrough)
    t.add_sink("k", "out", "s")
    with pytest.raises(TopologyException, match="Sink k cannot be used a parent"):
        t.add_processor("p", Passthrough, "k")
    with pytest.raises(TopologyException, match="StateStore zz is not added yet"):
        t.connect_processor_and_state_stores("p", "zz")
    t.add_processor("p", Passthrough, "s")
    t.add_state_store(FakeStoreBuilder("st"), "p")
    with pytest.raises(TopologyException, match="A different StateStore has already been added with the name st"):
        t.add_state_store(FakeStoreBuilder("st"))
    t.copartition("in", "other")
    with pytest.raises(TopologyException, match=r"Topics not co-partitioned: \[in=3,other=4\]"):
        t.check_copartitioned("app", {"in": 3, "other": 4}.get)
    t.check_copartitioned("app", {"in": 3, "other": 3}.get)


# --------------------------------------------------------------------------------------------------- task
class Collector:
    def __init__(self):
        self.sent = []

    def send(self, topic, key, value, timestamp, headers, partition):
        self.sent.append((topic, key, value, timestamp, headers, partition))

    def flush(self):
        pass

    def partitions_for(self, topic):
        return 4


class Recorder(Processor):
    """Records (metadata, key, value, timestamp, stream time) of every record and forwards it."""
    log = None

    def init(self, context):
        self.context = context

    def process(self, record):
        self.log.append((self.context.record_metadata(), record.key, record.value, record.timestamp,
                         self.context.current_stream_time_ms()))
        self.context.forward(record)


def make_task(topology, config=None, clock=lambda: 0):
    cfg = {"application.id": "app", "default.key.serde": "String", "default.value.serde": "String"}
    cfg.update(config or {})
    collector = Collector()
    return StreamTask(TaskId(0, 0), 0, topology, cfg, None, collector, clock), collector


def rec(topic, partition, offset, ts, key=b"k", value=b"v", headers=()):
    return ConsumedRecord(topic, partition, offset, ts, key, value, list(headers))


def test_task_processes_smallest_head_timestamp_first_with_metadata_and_stream_time():
    log = []
    t = Topology().add_source("src", "in").add_processor("r", type("R", (Recorder,), {"log": log}), "src") \
        .add_sink("out", "output", "r")
    task, collector = make_task(t)
    task.add_records("in", 0, [rec("in", 0, 0, 10, value=b"a"), rec("in", 0, 1, 30, value=b"b")])
    task.add_records("in", 1, [rec("in", 1, 7, 20, value=b"c"), rec("in", 1, 8, 5, value=b"d", headers=[("h", b"1")])])
    assert task.process(3) == 3 and task.process(100) == 1 and task.process() == 0
    assert log == [(RecordMetadata("in", 0, 0), "k", "a", 10, 10),
                   (RecordMetadata("in", 1, 7), "k", "c", 20, 20),
                   (RecordMetadata("in", 1, 8), "k", "d", 5, 20),      # out of order: stream time stays 20
                   (RecordMetadata("in", 0, 1), "k", "b", 30, 30)]
    assert task.stream_time == 30
    assert task.committable_offsets() == {("in", 0): 2, ("in", 1): 9}
    assert [c[2] for c in collector.sent] == [b"a", b"c", b"d", b"b"]
    assert collector.sent[2] == ("output", b"k", b"d", 5, [("h", b"1")], None)


def test_stream_time_punctuation_aligned_to_zero_skips_missed_intervals():
    """Kafka 4.4.0's TopologyTestDriver fires the same punctuations (3, 25, 30) with the same metadata for the
    same records (checked)."""
    fired = []

    class P(Processor):
        def init(self, context):
            self.context = context
            context.schedule(10, PunctuationType.STREAM_TIME, self.punct)

        def punct(self, ts):
            fired.append((ts, self.context.record_metadata()))
            self.context.forward(Record("p", str(ts), ts))

        def process(self, record):
            pass

    t = Topology().add_source("src", "in").add_processor("p", P, "src").add_sink("out", "output", "p")
    task, collector = make_task(t)
    task.initialize()
    assert task.maybe_punctuate_stream_time() is False          # stream time unknown yet
    for off, ts in enumerate([3, 9, 25, 30, 31]):
        task.add_records("in", 0, [rec("in", 0, off, ts)])
        task.process()
        task.maybe_punctuate_stream_time()
    assert [f[0] for f in fired] == [3, 25, 30]
    assert fired[0][1] == RecordMetadata(None, -1, -1)          # Kafka's punctuation record context
    assert [(c[1], c[2], c[3]) for c in collector.sent] == [(b"p", b"3", 3), (b"p", b"25", 25), (b"p", b"30", 30)]


def test_wall_clock_punctuation_and_cancel():
    """Kafka 4.4.0's TopologyTestDriver fires at 1100, 1350, 1400 for the same clock steps (checked)."""
    now = [1000]
    fired = []

    class P(Processor):
        def init(self, context):
            self.handle = context.schedule(100, PunctuationType.WALL_CLOCK_TIME, self.punct)

        def punct(self, ts):
            fired.append(ts)
            if ts >= 1400:
                self.handle.cancel()

        def process(self, record):
            pass

    task, _ = make_task(Topology().add_source("src", "in").add_processor("p", P, "src"), clock=lambda: now[0])
    task.initialize()
    for t in (1099, 1100, 1150, 1350, 1399, 1400, 1500, 1600):
        task.maybe_punctuate_wall_clock(t)
    assert fired == [1100, 1350, 1400]        # first at now + 100; 1350 skips 1200/1300; cancelled after 1400


def test_forward_to_named_child_and_unknown_child():
    class Router(Processor):
        def init(self, context):
            self.context = context

        def process(self, record):
            self.context.forward(record, "to-b" if record.value == "b" else "to-a")
            if record.value == "x":
                self.context.forward(record, "nope")

    t = Topology().add_source("src", "in").add_processor("route", Router, "src")
    t.add_sink("to-a", "A", "route").add_sink("to-b", "B", "route")
    task, collector = make_task(t)
    task.add_records("in", 0, [rec("in", 0, 0, 1, value=b"a"), rec("in", 0, 1, 2, value=b"b")])
    task.process()
    assert [(c[0], c[2]) for c in collector.sent] == [("A", b"a"), ("B", b"b")]
    task.add_records("in", 0, [rec("in", 0, 2, 3, value=b"x")])
    with pytest.raises(StreamsException, match="Unknown downstream node: nope"):
        task.process()


def test_sink_resolves_internal_topics_extractors_and_partitioners():
    t = Topology().add_internal_topic("rep").add_source("src", "in")
    t.add_sink("s1", "rep", "src")
    t.add_sink("s2", lambda k, v, ctx: "dyn-%s-%d" % (v, ctx.offset), "src", partitioner=lambda tp, k, v, n: n - 1)
    task, collector = make_task(t)
    task.add_records("in", 0, [rec("in", 0, 5, 1, value=b"v")])
    task.process()
    assert collector.sent == [("app-rep", b"k", b"v", 1, [], None), ("dyn-v-5", b"k", b"v", 1, [], 3)]


def bad_value_topology():
    return Topology().add_source("src", "in", value_deserializer=Serdes.Long()).add_sink(
        "out", "output", "src", value_serializer=Serdes.Long())


def test_deserialization_log_and_fail_names_the_record():
    task, collector = make_task(bad_value_topology())
    task.add_records("in", 3, [rec("in", 3, 0, 1, value=b"\x00" * 8), rec("in", 3, 1, 2, value=b"\x01")])
    with pytest.raises(StreamsException, match="topic in, partition 3, offset 1") as info:
        task.process()
    assert "LongDeserializer is not 8" in str(info.value)
    assert len(collector.sent) == 1 and task.committable_offsets() == {("in", 3): 1}
    with pytest.raises(StreamsException, match="offset 1"):    # not skipped by a retry
        task.process()


@pytest.mark.parametrize("handler", ["logAndContinue",
                                     "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler"])
def test_deserialization_log_and_continue_skips_exactly_the_bad_record(handler):
    task, collector = make_task(bad_value_topology(), {"default.deserialization.exception.handler": handler})
    task.add_records("in", 0, [rec("in", 0, 0, 1, value=struct.pack(">q", 1)), rec("in", 0, 1, 2, value=b"bad"),
                               rec("in", 0, 2, 3, value=struct.pack(">q", 3))])
    assert task.process() == 2
    assert [c[2] for c in collector.sent] == [struct.pack(">q", 1), struct.pack(">q", 3)]
    assert task.metrics["dropped-records"] == 1
    assert task.committable_offsets() == {("in", 0): 3}


def test_timestamp_extractors():
    t = Topology().add_source("src", "in").add_sink("out", "output", "src")
    task, _ = make_task(t)
    task.add_records("in", 0, [rec("in", 0, 0, -1)])
    with pytest.raises(StreamsException, match="has invalid \\(negative\\) timestamp"):
        task.process()
    task, collector = make_task(t, {"default.timestamp.extractor":
                                    "org.apache.kafka.streams.processor.UsePartitionTimeOnInvalidTimestamp"})
    task.add_records("in", 0, [rec("in", 0, 0, 50), rec("in", 0, 1, -1)])
    task.process()
    assert [c[3] for c in collector.sent] == [50, 50]
    task, collector = make_task(t, {"default.timestamp.extractor": "LogAndSkipOnInvalidTimestamp"})
    task.add_records("in", 0, [rec("in", 0, 0, -1), rec("in", 0, 1, 7)])
    assert task.process() == 1 and task.metrics["dropped-records"] == 1 and collector.sent[0][3] == 7
    task, collector = make_task(t, {"default.timestamp.extractor": "WallclockTimestampExtractor"}, clock=lambda: 999)
    task.add_records("in", 0, [rec("in", 0, 0, 5)])
    task.process()
    assert collector.sent[0][3] == 999
    # a source's own extractor sees the deserialized record and the partition time
    seen = []
    per_source = Topology().add_source("src", "in", timestamp_extractor=lambda r, pt: seen.append(pt) or
                                       1000 * len(r.value)).add_sink("out", "output", "src")
    task, collector = make_task(per_source)
    task.add_records("in", 0, [rec("in", 0, 0, 5, value=b"ab"), rec("in", 0, 1, 6, value=b"a")])
    task.process()
    assert [c[3] for c in collector.sent] == [2000, 1000] and seen == [-1, 2000]


def test_processor_exception_is_wrapped_with_task_node_and_record():
    class Boom(Processor):
        def process(self, record):
            raise KeyError("x")

    task, _ = make_task(Topology().add_source("src", "in").add_processor("boom", Boom, "src"))
    task.add_records("in", 2, [rec("in", 2, 4, 1)])
    with pytest.raises(StreamsException, match="taskId=0_0, processor=boom, topic=in, partition=2, offset=4"):
        task.process()


def test_get_state_store_needs_a_connection():
    class P(Processor):
        def init(self, context):
            context.get_state_store("other")

        def process(self, record):
            pass

    t = Topology().add_source("src", "in").add_processor("p", P, "src")
    with pytest.raises(StreamsException, match="Processor p has no access to StateStore other"):
        make_task(t)[0].initialize()


def test_record_is_immutable_by_convention():
    r = Record("k", "v", 5, [("h", b"x")])
    r2 = r.with_value("w").with_timestamp(6)
    assert (r.value, r.timestamp, r2.key, r2.value, r2.timestamp, r2.headers) == ("v", 5, "k", "w", 6, [("h", b"x")])
    assert r2.headers is not r.headers
    with pytest.raises(StreamsException):
        Record("k", "v", -1)
    assert str(TaskId(1, 3)) == "1_3" and TaskId.parse("1_3") == TaskId(1, 3)


def test_missing_serde_without_default_fails_at_task_creation():
    t = Topology().add_source("src", "in", key_deserializer=Serdes.String()).add_sink(
        "out", "output", "src", key_serializer=Serdes.String())
    with pytest.raises(StreamsException, match="Failed to initialize value serdes for source node src: Please "
                                               "specify a value serde"):
        StreamTask(TaskId(0, 0), 0, t, {"application.id": "app"}, None, Collector(), lambda: 0)
    task = StreamTask(TaskId(0, 0), 0, t, {"application.id": "app", "default.value.serde": "Long"}, None,
                      Collector(), lambda: 0)
    with pytest.raises(StreamsException, match="key serdes for sink node out"):
        StreamTask(TaskId(0, 1), 0, Topology().add_source("s", "in", value_deserializer=Serdes.Long(),
                                                          key_deserializer=Serdes.Long()).add_sink("out", "o", "s"),
                   {"application.id": "app"}, None, Collector(), lambda: 0)
    assert task.default_key_serde is None and task.default_value_serde.serialize("t", 1) == b"\x00" * 7 + b"\x01"


def test_user_deserialization_handler_sees_the_raw_record():
    seen = []

    def handler(task_id, record, exc):
        seen.append((str(task_id), record.offset, record.value, type(exc).__name__))
        return "continue" if record.offset == 1 else "FAIL"

    task, collector = make_task(bad_value_topology(), {"deserialization.exception.handler": handler,
                                                       "default.deserialization.exception.handler": None})
    task.add_records("in", 0, [rec("in", 0, 0, 1, value=struct.pack(">q", 1)), rec("in", 0, 1, 2, value=b"x"),
                               rec("in", 0, 2, 3, value=b"yy")])
    with pytest.raises(StreamsException, match="offset 2"):
        task.process()
    assert seen == [("0_0", 1, b"x", "SerializationException"), ("0_0", 2, b"yy", "SerializationException")]
    assert len(collector.sent) == 1 and task.metrics["dropped-records"] == 1


def test_max_task_idle_waits_for_empty_partitions():
    t = Topology().add_source("src", "a", "b").add_sink("out", "output", "src")
    task, collector = make_task(t, {"max.task.idle.ms": 100})
    task.add_partitions([("a", 0), ("b", 0)])
    assert task.is_processable(0) is False and task.buffered() == 0
    task.add_records("a", 0, [rec("a", 0, 0, 5)])
    assert (task.is_processable(1000), task.is_processable(1099), task.is_processable(1100)) == (False, False, True)
    task.add_records("b", 0, [rec("b", 0, 0, 1)])
    assert task.is_processable(1101) and task.buffered("a", 0) == 1 and task.buffered() == 2
    task.process()
    assert [(c[3]) for c in collector.sent] == [1, 5]          # b's earlier record first
    no_idle, _ = make_task(t)
    no_idle.add_partitions([("a", 0), ("b", 0)])
    no_idle.add_records("a", 0, [rec("a", 0, 0, 5)])
    assert no_idle.is_processable(0)


def test_supplier_with_stores_connects_them():
    class Supplier:
        def __call__(self):
            return Passthrough()

        def stores(self):
            return [FakeStoreBuilder("own")]

    t = Topology().add_source("src", "in").add_processor("p", Supplier(), "src")
    assert t.node("p").stores == ["own"] and set(t.store_builders()) == {"own"}


def test_describe_orders_sets_as_javas_hashset():
    """Printed by Kafka 4.4.0's Topology.describe() for the same topology (topics and stores in Java's HashSet
    order, diamond sizes, a processor without children, a pattern source)."""
    t = Topology()
    t.add_source("multi", "zeta", "alpha", "mid", "b", "a", "streams-plaintext-input")
    t.add_processor("d1", Passthrough, "multi").add_processor("d2", Passthrough, "multi")
    t.add_processor("join", Passthrough, "d1", "d2")
    for store in ("store-b", "KSTREAM-AGGREGATE-STATE-STORE-0000000003", "a-store"):
        t.add_state_store(FakeStoreBuilder(store), "join")
    t.add_sink("s", "o", "join")
    t.add_source("pat", pattern="topic-.*").add_sink("s2", "o2", "pat")
    t.add_source("other", "other").add_processor("other-p", Passthrough, "other")
    t.connect_processor_and_state_stores("other-p", "a-store")
    assert str(t.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: multi (topics: [zeta, a, b, streams-plaintext-input, alpha, mid])\n"
        "      --> d1, d2\n"
        "    Processor: d1 (stores: [])\n"
        "      --> join\n"
        "      <-- multi\n"
        "    Processor: d2 (stores: [])\n"
        "      --> join\n"
        "      <-- multi\n"
        "    Processor: join (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000003, a-store, store-b])\n"
        "      --> s\n"
        "      <-- d1, d2\n"
        "    Source: other (topics: [other])\n"
        "      --> other-p\n"
        "    Processor: other-p (stores: [a-store])\n"
        "      --> none\n"
        "      <-- other\n"
        "    Sink: s (topic: o)\n"
        "      <-- join\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: pat (topics: topic-.*)\n"
        "      --> s2\n"
        "    Sink: s2 (topic: o2)\n"
        "      <-- pat\n"
        "\n")
