"""The Processor API (Kafka's org.apache.kafka.streams.processor.api): what user and DSL processors implement
and what they may call.

- ``Record(key, value, timestamp, headers)``: the record a processor receives and forwards; objects (already
  deserialized). ``timestamp`` is milliseconds since the epoch; ``headers`` a list of ``(str, bytes | None)`` in
  order, duplicates allowed. Treat it as immutable: ``with_key`` / ``with_value`` / ``with_timestamp`` /
  ``with_headers`` return a new Record (Kafka's), so forwarding one object to several children is safe.
- ``RecordMetadata(topic, partition, offset)``: where the input record being processed came from; during a
  punctuation ``topic`` is None and partition/offset -1 (Kafka's punctuation record context).
- ``Processor``: ``init(context)`` once before the first record, ``process(record)`` per record, ``close()``.
- ``ProcessorContext``: forward to all children or one named child, schedule punctuations (stream time or wall
  clock), the state stores connected to this processor, stream time, task id, app config. Implemented by
  kbroker/streams/task.py (one context per processor node, so a punctuator forwards from the node that
  scheduled it).
- ``TaskId(subtopology, partition)``: ``str()`` is Kafka's "0_3"; ``TaskId.parse("0_3")``.
"""
import enum
from typing import Callable, NamedTuple

from kbroker.streams.errors import StreamsException

__all__ = ["Record", "RecordMetadata", "PunctuationType", "Cancellable", "Processor", "ProcessorContext",
           "TaskId", "RecordContext", "ProcessorSupplier", "Punctuator", "FixedKeyProcessor"]


class Record:
    """One record flowing through the topology (see the module docstring)."""
    __slots__ = ("key", "value", "timestamp", "headers")

    def __init__(self, key, value, timestamp, headers=None):
        if timestamp is None or timestamp < 0:
            # Kafka's Record constructor: "Timestamp must be a positive number"; a negative one is a bug upstream
            raise StreamsException("Malformed Record: Timestamp may not be negative. Got: %r" % (timestamp,))
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = list(headers) if headers else []

    def with_key(self, key):
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value):
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp):
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers):
        return Record(self.key, self.value, self.timestamp, headers)

    def __eq__(self, other):
        return (isinstance(other, Record) and self.key == other.key and self.value == other.value
                and self.timestamp == other.timestamp and self.headers == other.headers)

    def __repr__(self):
        return "Record(key=%r, value=%r, timestamp=%d, headers=%r)" % (self.key, self.value, self.timestamp,
                                                                       self.headers)


class RecordMetadata(NamedTuple):
    topic: str | None
    partition: int
    offset: int


class RecordContext(NamedTuple):
    """What a TopicNameExtractor (a sink's ``topic_or_extractor`` function ``(key, value, record_context) ->
    topic``) sees: the input record's metadata, and the timestamp and headers of the record being sunk."""
    topic: str | None
    partition: int
    offset: int
    timestamp: int
    headers: list


class PunctuationType(enum.Enum):
    STREAM_TIME = "STREAM_TIME"          # fires as stream time (max record timestamp seen by the task) advances
    WALL_CLOCK_TIME = "WALL_CLOCK_TIME"  # fires as the system clock advances (checked between records)


class TaskId(NamedTuple):
    subtopology: int
    partition: int

    def __str__(self):
        return "%d_%d" % (self.subtopology, self.partition)

    @staticmethod
    def parse(text):
        a, sep, b = text.partition("_")
        if not sep:
            raise ValueError("task id %r is not '<subtopology>_<partition>'" % (text,))
        return TaskId(int(a), int(b))


class Cancellable:
    """Returned by ``ProcessorContext.schedule``; ``cancel()`` stops the punctuation (idempotent)."""

    def cancel(self):
        raise NotImplementedError


# A punctuator is a function of the punctuation's timestamp (stream time or wall-clock ms).
Punctuator = Callable[[int], None]


class Processor:
    """Subclass this; the defaults do nothing (Kafka's Processor interface defaults)."""

    def init(self, context):
        pass

    def process(self, record):
        raise NotImplementedError

    def close(self):
        pass


class FixedKeyProcessor(Processor):
    """A processor that promises not to change keys (Kafka's FixedKeyProcessor: no repartition needed). Same
    interface here; the DSL uses the distinction only for repartitioning decisions."""


# A supplier is a zero-argument callable returning a NEW Processor each call (one instance per task).
ProcessorSupplier = Callable[[], Processor]


class ProcessorContext:
    """What a processor may call (implemented by kbroker/streams/task.py; a test may subclass it)."""

    def application_id(self) -> str:
        raise NotImplementedError

    def task_id(self) -> TaskId:
        raise NotImplementedError

    def record_metadata(self) -> RecordMetadata | None:
        """The input record's topic/partition/offset (Kafka's Optional<RecordMetadata>); None outside any
        record (e.g. init)."""
        raise NotImplementedError

    def current_stream_time_ms(self) -> int:
        raise NotImplementedError

    def current_system_time_ms(self) -> int:
        raise NotImplementedError

    def forward(self, record, child_name=None) -> None:
        """Send ``record`` to every child of this node, or only to ``child_name`` (a TopologyException names an
        unknown child, as Kafka's StreamsException "Unknown downstream node")."""
        raise NotImplementedError

    def schedule(self, interval_ms, type, callback) -> Cancellable:
        """Call ``callback(timestamp)`` every ``interval_ms`` (>= 1) of stream time or wall-clock time.
        Stream time: schedules are aligned to 0, so the first call comes as soon as stream time is known (the
        first record), then at each interval boundary stream time reaches; ``timestamp`` is the stream time then.
        Several intervals passed at once give ONE call (Kafka's PunctuationSchedule.next skips missed ones).
        Wall clock: first at now + interval; checked by the runtime between records and by the test driver's
        advance_wall_clock_time. A callback may cancel its own schedule."""
        raise NotImplementedError

    def get_state_store(self, name):
        """The store ``name`` connected to this processor (add_state_store / connect_processor_and_state_stores):
        the typed store (kbroker.streams.state's wrappers)."""
        raise NotImplementedError

    def commit(self) -> None:
        """Request a commit soon (Kafka's context.commit())."""
        raise NotImplementedError

    def app_config(self) -> dict:
        raise NotImplementedError

    def app_configs_with_prefix(self, prefix) -> dict:
        """The app config keys starting with ``prefix``, prefix stripped (Kafka's appConfigsWithPrefix)."""
        return {k[len(prefix):]: v for k, v in self.app_config().items() if k.startswith(prefix)}

    def state_dir(self):
        """This task's state directory (Kafka's stateDir())."""
        raise NotImplementedError

    def key_serde(self):
        """The default key serde (default.key.serde)."""
        raise NotImplementedError

    def value_serde(self):
        """The default value serde (default.value.serde)."""
        raise NotImplementedError
