"""TopologyTestDriver with Processor API topologies and real state stores: exact outputs (keys, values, timestamps,
order), changelog records, caches flushed after every piped record, repartition topics fed back, punctuation by
stream time and by the driver's wall clock.

The expected outputs of the word count, caching and feedback tests are what Kafka 4.4.0's own TopologyTestDriver
(kafka-streams-test-utils) produced for the same topologies written in Java (Processor API, same inputs, same
initial wall clock; the feedback topic there is a plain topic both written and read, which Java's driver feeds back
like an internal one)."""
import os
import struct

import pytest

from kbroker.streams import (KeyValue, Processor, PunctuationType, Record, RecordMetadata, Serdes, StreamsException,
                             Topology, TopologyTestDriver)
from kbroker.streams.state import Stores
from kbroker.streams.test_driver import NoSuchElementException, TestRecord

S, L = Serdes.String(), Serdes.Long()
APP = "ttd-app"


def long_bytes(n):
    return struct.pack(">q", n)


class WordCounter(Processor):
    """Counts words of the value in store "counts", forwards (word, count); every 1000 ms of wall-clock time
    forwards every (word, count) with key prefix "all:" (timestamp = the punctuation time)."""

    def init(self, context):
        self.context = context
        self.store = context.get_state_store("counts")
        context.schedule(1000, PunctuationType.WALL_CLOCK_TIME, self.dump)

    def process(self, record):
        for word in record.value.lower().split():
            n = (self.store.get(word) or 0) + 1
            self.store.put(word, n)
            self.context.forward(record.with_key(word).with_value(n))

    def dump(self, ts):
        for kv in self.store.all():
            self.context.forward(Record("all:" + kv.key, kv.value, ts))


def counting_topology(supplier, caching=False):
    builder = Stores.key_value_store_builder(supplier, S, L)
    if caching:
        builder.with_caching_enabled()
    t = Topology()
    t.add_source("src", "lines", key_deserializer=S, value_deserializer=S)
    t.add_processor("counter", WordCounter, "src")
    t.add_state_store(builder, "counter")
    t.add_sink("sink", "counts-out", "counter", key_serializer=S, value_serializer=L)
    return t


@pytest.mark.parametrize("supplier", [Stores.in_memory_key_value_store, Stores.persistent_key_value_store])
def test_word_count_processor_with_store(supplier):
    with TopologyTestDriver(counting_topology(supplier("counts")), {"application.id": APP},
                            initial_wall_clock_ms=5000) as driver:
        lines = driver.create_input_topic("lines", S, S, start_timestamp_ms=100, auto_advance_ms=10)
        out = driver.create_output_topic("counts-out", S, L)
        lines.pipe_input("all streams lead to kafka")
        lines.pipe_input("k", "hello kafka streams")
        lines.pipe_input(None, "join kafka summit", 7)         # explicit timestamp: the topic's time stays
        assert out.read_records_to_list() == [
            TestRecord("all", 1, 100), TestRecord("streams", 1, 100), TestRecord("lead", 1, 100),
            TestRecord("to", 1, 100), TestRecord("kafka", 1, 100),
            TestRecord("hello", 1, 110), TestRecord("kafka", 2, 110), TestRecord("streams", 2, 110),
            TestRecord("join", 1, 7), TestRecord("kafka", 3, 7), TestRecord("summit", 1, 7)]
        assert out.is_empty()
        lines.pipe_input("kafka")
        assert out.read_key_value() == KeyValue("kafka", 4)
        store = driver.get_key_value_store("counts")
        assert store.get("kafka") == 4 and store.get("streams") == 2 and store.get("nope") is None
        assert [kv.key for kv in store.all()] == ["all", "hello", "join", "kafka", "lead", "streams", "summit",
                                                  "to"]
        assert driver.get_window_store("counts") is None and driver.get_state_store("zzz") is None
        # the changelog: one record per put (no cache), key/value bytes of the store's serdes, input timestamps
        changelog = driver.create_output_topic(APP + "-counts-changelog", Serdes.ByteArray(), Serdes.ByteArray())
        recs = changelog.read_records_to_list()
        assert len(recs) == 12
        assert (recs[0].key, recs[0].value, recs[0].timestamp) == (b"all", long_bytes(1), 100)
        assert (recs[-1].key, recs[-1].value, recs[-1].timestamp) == (b"kafka", long_bytes(4), 120)
        # wall-clock punctuation: scheduled at 5000 + 1000
        driver.advance_wall_clock_time(999)
        assert out.is_empty()
        driver.advance_wall_clock_time(1)
        assert out.read_key_values_to_map() == {"all:all": 1, "all:hello": 1, "all:join": 1, "all:kafka": 4,
                                                "all:lead": 1, "all:streams": 2, "all:summit": 1, "all:to": 1}
        driver.advance_wall_clock_time(2500)                   # 7000 and 8000 missed: one punctuation at 8500
        assert out.get_queue_size() == 8
        assert {r.timestamp for r in out.read_records_to_list()} == {8500}


class DoublePut(Processor):
    """Puts (key, value + "-1") then (key, value + "-2") for every record."""

    def init(self, context):
        self.store = context.get_state_store("kv")

    def process(self, record):
        self.store.put(record.key, record.value + "-1")
        self.store.put(record.key, record.value + "-2")


@pytest.mark.parametrize("caching,expected", [
    (False, [("a", "x-1"), ("a", "x-2"), ("a", "y-1"), ("a", "y-2"), ("b", "z-1"), ("b", "z-2")]),
    (True, [("a", "x-2"), ("a", "y-2"), ("b", "z-2")]),    # flushed (deduplicated) after EVERY piped record
])
def test_caches_are_flushed_after_each_piped_record(caching, expected):
    builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), S, S)
    if caching:
        builder.with_caching_enabled()
    t = Topology().add_source("src", "in", key_deserializer=S, value_deserializer=S)
    t.add_processor("p", DoublePut, "src").add_state_store(builder, "p")
    with TopologyTestDriver(t, {"application.id": APP}) as driver:
        inp = driver.create_input_topic("in", S, S)
        changelog = driver.create_output_topic(APP + "-kv-changelog", S, S)
        inp.pipe_input("a", "x")
        assert changelog.read_key_values_to_list() == expected[:1 if caching else 2]
        inp.pipe_key_value_list([KeyValue("a", "y"), KeyValue("b", "z")])
        assert changelog.read_key_values_to_list() == expected[1 if caching else 2:]


class Upper(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.forward(record.with_value(record.value.upper()))


class Rekey(Processor):
    """Key := first letter of the value; also forwards a marker when stream time passes each 100 ms."""

    def init(self, context):
        self.context = context
        context.schedule(100, PunctuationType.STREAM_TIME, self.tick)

    def tick(self, ts):
        self.context.forward(Record("tick", str(ts), ts, [("punctuated", b"1")]))

    def process(self, record):
        self.context.forward(record.with_key(record.value[0]))


def test_repartition_topic_records_are_fed_back_in_order():
    t = Topology().add_internal_topic("rekey-repartition")
    t.add_source("src", "words", key_deserializer=S, value_deserializer=S)
    t.add_processor("rekey", Rekey, "src")
    t.add_sink("to-rep", "rekey-repartition", "rekey", key_serializer=S, value_serializer=S)
    t.add_source("from-rep", "rekey-repartition", key_deserializer=S, value_deserializer=S)
    t.add_processor("upper", Upper, "from-rep")
    t.add_sink("out", "upper-out", "upper", key_serializer=S, value_serializer=S)
    assert [s.id for s in t.subtopologies()] == [0, 1]
    with TopologyTestDriver(t, {"application.id": APP}) as driver:
        words = driver.create_input_topic("words", S, S)
        out = driver.create_output_topic("upper-out", S, S)
        rep = driver.create_output_topic(APP + "-rekey-repartition", S, S)
        words.pipe_input("k1", "apple", 50, [("h", b"v")])
        words.pipe_input("k2", "banana", 120)
        words.pipe_input("k3", "avocado", 130)
        assert out.read_records_to_list() == [
            TestRecord("a", "APPLE", 50, [("h", b"v")]),
            TestRecord("tick", "50", 50, [("punctuated", b"1")]),   # first stream-time punctuation: at once,
            TestRecord("b", "BANANA", 120),                         # after the record that made stream time known
            TestRecord("tick", "120", 120, [("punctuated", b"1")]),  # 100 passed (next: 200)
            TestRecord("a", "AVOCADO", 130)]
        assert driver.produced_topic_names() == {"upper-out", APP + "-rekey-repartition"}
        # what went through the repartition topic is readable too, by its full name
        assert rep.read_values_to_list() == ["apple", "50", "banana", "120", "avocado"]
        with pytest.raises(NoSuchElementException, match="Empty topic: upper-out"):
            out.read_value()
        with pytest.raises(ValueError, match="Unknown topic: nope"):
            driver.create_input_topic("nope", S, S).pipe_input("x")


def test_close_removes_the_temporary_state_dir_and_outputs_stay_readable():
    driver = TopologyTestDriver(counting_topology(Stores.persistent_key_value_store("counts")))
    assert driver.application_id == "dummy-topology-test-driver-app-id"
    state_dir = driver.config["state.dir"]
    driver.create_input_topic("lines", S, S).pipe_value_list(["a b", "a"], start_timestamp_ms=10, advance_ms=5)
    assert os.path.isdir(os.path.join(state_dir, driver.application_id, "0_0"))
    driver.close()
    assert not os.path.exists(state_dir)
    assert driver.create_output_topic("counts-out", S, L).read_records_to_list() == [
        TestRecord("a", 1, 10), TestRecord("b", 1, 10), TestRecord("a", 2, 15)]


def test_negative_timestamps_reach_the_timestamp_extractor(tmp_path):
    t = Topology().add_source("src", "in", key_deserializer=S, value_deserializer=S)
    t.add_sink("out", "out", "src", key_serializer=S, value_serializer=S)
    with TopologyTestDriver(t, {"default.timestamp.extractor": "LogAndSkipOnInvalidTimestamp",
                                "state.dir": str(tmp_path)}) as driver:
        inp, out = driver.create_input_topic("in", S, S), driver.create_output_topic("out", S, S)
        inp.pipe_input("a", "1", -5)
        inp.pipe_input("b", "2", 5)
        assert out.read_records_to_list() == [TestRecord("b", "2", 5)]
        assert driver.task.metrics["dropped-records"] == 1
    with TopologyTestDriver(t) as driver:
        with pytest.raises(StreamsException, match="has invalid \\(negative\\) timestamp"):
            driver.create_input_topic("in", S, S).pipe_input("a", "1", -5)


def test_context_accessors_in_the_driver():
    seen = {}

    class Probe(Processor):
        def init(self, context):
            self.context = context
            self.store = context.get_state_store("counts")
            seen["init"] = (context.application_id(), str(context.task_id()), context.record_metadata(),
                            context.current_stream_time_ms(), context.current_system_time_ms(),
                            context.app_configs_with_prefix("my."), os.path.relpath(context.state_dir(),
                                                                                     context.app_config()["state.dir"]))

        def process(self, record):
            seen["process"] = (self.context.record_metadata(), self.context.current_stream_time_ms(),
                               self.context.key_serde().serialize("t", "x"))
            self.context.commit()

    t = Topology().add_source("src", "in", key_deserializer=S, value_deserializer=S)
    t.add_processor("probe", Probe, "src")
    t.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, L), "probe")
    with TopologyTestDriver(t, {"application.id": APP, "my.flag": "1", "default.key.serde": "String"},
                            initial_wall_clock_ms=42) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 9)
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 3)
    assert seen["init"] == (APP, "0_0", None, -1, 42, {"flag": "1"}, os.path.join(APP, "0_0"))
    assert seen["process"] == (RecordMetadata("in", 0, 1), 9, b"x")
