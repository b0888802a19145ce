"""kbroker.streams.state through the TopologyTestDriver: a Processor-API processor with its own stores, the
changelog records the task's collector receives (read back as the driver's output topics), caching's dedup per
commit (the driver commits after every piped record, as Java's) and stores read back through the driver."""

import struct

import pytest

from kbroker.streams.keyvalue import KeyValue, Window, Windowed
from kbroker.streams.processor import Processor, Record
from kbroker.streams.serdes import Serdes
from kbroker.streams.state import Stores
from kbroker.streams.test_driver import TopologyTestDriver
from kbroker.streams.topology import Topology

S, LONG = Serdes.String(), Serdes.Long()


class DoubleWriteCounter(Processor):
    """Writes each key twice per record (n, then n + 1): caching must collapse the pair into one changelog record
    per commit, change-logging without a cache logs both."""

    def init(self, context):
        self.context = context
        self.store = context.get_state_store("counts")
        self.windows = context.get_state_store("windows")

    def process(self, record):
        n = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, n)
        self.store.put(record.key, n + 1)
        self.windows.put(record.key, n + 1, record.timestamp - record.timestamp % 100)
        self.context.forward(Record(record.key, n + 1, record.timestamp))


def topology(caching):
    kv = Stores.key_value_store_builder(Stores.persistent_key_value_store("counts"), S, LONG)
    kv = kv.with_caching_enabled() if caching else kv.with_caching_disabled()
    win = Stores.window_store_builder(Stores.in_memory_window_store("windows", 1000, 100), S, LONG)
    t = Topology()
    t.add_source("src", "in", key_deserializer=S, value_deserializer=S)
    t.add_processor("proc", DoubleWriteCounter, "src")
    t.add_state_store(kv, "proc")
    t.add_state_store(win, "proc")
    t.add_sink("sink", "out", "proc", key_serializer=S, value_serializer=LONG)
    return t


@pytest.mark.parametrize("caching", [True, False])
def test_changelog_records_through_the_driver(caching):
    with TopologyTestDriver(topology(caching), {"application.id": "app"}) as d:
        inp = d.create_input_topic("in", S, S)
        inp.pipe_input("a", "x", 10)
        inp.pipe_input("a", "x", 20)
        inp.pipe_input("b", "x", 130)
        changelog = d.create_output_topic("app-counts-changelog", S, LONG)
        got = [(r.key, r.value, r.timestamp) for r in changelog.read_records_to_list()]
        if caching:   # one record per key per commit (the driver commits after every record)
            assert got == [("a", 2, 10), ("a", 4, 20), ("b", 2, 130)]
        else:
            assert got == [("a", 1, 10), ("a", 2, 10), ("a", 3, 20), ("a", 4, 20), ("b", 1, 130), ("b", 2, 130)]
        # the window store's changelog key is Kafka's: key + 8-byte start + 4-byte seqnum
        wlog = d.create_output_topic("app-windows-changelog", Serdes.ByteArray(), LONG)
        assert [kv for kv in wlog.read_key_values_to_list()] == [
            KeyValue(b"a" + struct.pack(">qi", 0, 0), 2), KeyValue(b"a" + struct.pack(">qi", 0, 0), 4),
            KeyValue(b"b" + struct.pack(">qi", 100, 0), 2)]
        assert d.create_output_topic("out", S, LONG).read_values_to_list() == [2, 4, 2]
        store = d.get_key_value_store("counts")
        assert list(store.all()) == [("a", 4), ("b", 2)]
        assert list(d.get_window_store("windows").fetch_all(0, 1000)) == [
            (Windowed("a", Window(0, 100)), 4), (Windowed("b", Window(100, 200)), 2)]
