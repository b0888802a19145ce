"""Connect's records and task ids (Kafka's ConnectRecord, SourceRecord, SinkRecord, ConnectorTaskId).

A record is immutable by convention: transforms return ``record.new_record(...)`` with the fields they change
(Kafka's ``newRecord``), never mutate one that another transform or the worker may still hold.

- ``kafka_partition``: None lets the producer's partitioner choose (sources); a sink record always has one.
- ``timestamp``: milliseconds since the epoch, or None (sources: the producer stamps CreateTime then).
- ``headers``: a tuple of (key: str, value: bytes | None), in order; duplicates allowed, as Kafka's.
- ``source_partition`` / ``source_offset``: JSON-able dicts (str keys; str, int, float, bool, None values), stored
  by the offset store as Kafka does: key ``["<connector>", <partition>]``, value ``<offset>`` (kbroker/connect/offsets.py).
"""
from dataclasses import dataclass, field, replace


@dataclass(frozen=True, order=True)
class ConnectorTaskId:
    """One task of a connector; its REST and status-topic spelling is ``{"connector": name, "task": n}``."""
    connector: str
    task: int

    def to_json(self):
        return {"connector": self.connector, "task": self.task}

    def __str__(self):
        return "%s-%d" % (self.connector, self.task)


@dataclass(frozen=True)
class ConnectRecord:
    topic: str
    kafka_partition: int | None
    key_schema: object = None
    key: object = None
    value_schema: object = None
    value: object = None
    timestamp: int | None = None
    headers: tuple = field(default_factory=tuple)

    def new_record(self, **changes):
        """A copy with ``changes`` (any field name of this record's class)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class SourceRecord(ConnectRecord):
    source_partition: dict | None = None
    source_offset: dict | None = None


# Kafka's TimestampType names, as SinkRecord.timestamp_type holds them.
NO_TIMESTAMP_TYPE = "NoTimestampType"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class SinkRecord(ConnectRecord):
    kafka_offset: int = -1
    timestamp_type: str = NO_TIMESTAMP_TYPE
