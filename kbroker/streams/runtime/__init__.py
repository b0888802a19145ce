"""The kbroker.streams runtime: KafkaStreams and what runs a Topology on a Kafka cluster through confluent-kafka
(config.py, stream_thread.py, record_collector.py, internal_topics.py, restore.py, standby.py, metadata.py;
assignment.py explains how tasks are placed without a Python partition assignor)."""
from kbroker.streams.runtime.config import StreamsConfig, StreamsConfigError
from kbroker.streams.runtime.kafka_streams import KafkaStreams
from kbroker.streams.runtime.metadata import HostInfo, KeyQueryMetadata, StreamsMetadata, ThreadMetadata

__all__ = ["KafkaStreams", "StreamsConfig", "StreamsConfigError", "HostInfo", "KeyQueryMetadata",
           "StreamsMetadata", "ThreadMetadata"]
