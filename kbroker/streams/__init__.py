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

__all__ = [
    "Cancellable", "ConsumedRecord", "InvalidStateStoreException", "KeyValue", "Processor", "ProcessorContext",
    "ProcessorStateException", "PunctuationType", "Record", "RecordCollector", "RecordContext", "RecordMetadata",
    "SerializationException", "Serde", "Serdes", "StreamTask", "StreamsException", "TaskId", "TaskMigratedException",
    "TestInputTopic", "TestOutputTopic", "TestRecord", "Topology", "TopologyDescription", "TopologyException",
    "TopologyTestDriver", "Window", "Windowed", "default_partition", "murmur2", "session_windowed_serde",
    "time_windowed_serde",
]
