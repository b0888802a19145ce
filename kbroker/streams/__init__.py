"""kbroker.streams: Kafka Streams' model as a Python library (issue 18; docs/streams.md is the user's page).

A client library (layer 6): it never imports the broker. The pieces:
- processor.py / topology.py: the Processor API and topologies (sources, processors, sinks, stores, sub-topologies);
- serdes.py, keyvalue.py, partitioner.py, errors.py: Kafka's byte formats, value types, murmur2, exceptions;
- task.py: a stream task (ordered processing, punctuation, sinks) driven by the runtime and by test_driver.py
  (Kafka's TopologyTestDriver);
- state/ (stores, changelogs, restore), dsl/ (StreamsBuilder, KStream, KTable, windows, joins), runtime/
  (KafkaStreams over confluent-kafka).
"""
from kbroker.streams.errors import (InvalidStateStoreException, ProcessorStateException, SerializationException,
                                    StreamsException, TaskMigratedException, TopologyException)
from kbroker.streams.keyvalue import KeyValue, Window, Windowed
from kbroker.streams.partitioner import default_partition, murmur2
from kbroker.streams.processor import (Cancellable, Processor, ProcessorContext, PunctuationType, Record,
                                       RecordContext, RecordMetadata, TaskId)
from kbroker.streams.serdes import Serde, Serdes, session_windowed_serde, time_windowed_serde
from kbroker.streams.task import ConsumedRecord, RecordCollector, StreamTask
from kbroker.streams.test_driver import TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver
from kbroker.streams.topology import Topology, TopologyDescription

# The DSL, stores and runtime, importable from the package as in Kafka (org.apache.kafka.streams.StreamsBuilder,
# KafkaStreams, ...) but loaded on first use (PEP 562): ``import kbroker.streams`` stays light (no
# confluent_kafka/rocksdict) and the sub-packages, which import this package's modules, never cycle with it.
_LAZY = {
    "kbroker.streams.dsl": ("StreamsBuilder", "KStream", "BranchedKStream", "KTable", "KGroupedStream",
                            "KGroupedTable", "Branched", "Consumed", "Grouped", "Materialized", "Named", "Printed",
                            "Produced", "Repartitioned", "StoreType"),
    "kbroker.streams.dsl.windows": ("TimeWindows", "SlidingWindows", "SessionWindows", "JoinWindows",
                                    "UnlimitedWindows", "Suppressed", "BufferConfig"),
    "kbroker.streams.dsl.joins": ("Joined", "StreamJoined", "TableJoined"),
    "kbroker.streams.state": ("Stores", "StoreBuilder", "QueryableStoreTypes", "StoreQueryParameters",
                              "StateRestoreListener", "ValueAndTimestamp"),
    "kbroker.streams.runtime": ("KafkaStreams", "StreamsConfig"),
}
_LAZY_NAMES = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name):
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError("module 'kbroker.streams' has no attribute %r" % (name,))
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY_NAMES))


__all__ = [
    "Cancellable", "ConsumedRecord", "InvalidStateStoreException", "KeyValue", "Processor", "ProcessorContext",
    "ProcessorStateException", "PunctuationType", "Record", "RecordCollector", "RecordContext", "RecordMetadata",
    "SerializationException", "Serde", "Serdes", "StreamTask", "StreamsException", "TaskId", "TaskMigratedException",
    "TestInputTopic", "TestOutputTopic", "TestRecord", "Topology", "TopologyDescription", "TopologyException",
    "TopologyTestDriver", "Window", "Windowed", "default_partition", "murmur2", "session_windowed_serde",
    "time_windowed_serde",
]
