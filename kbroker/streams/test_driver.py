"""Kafka's TopologyTestDriver (kafka-streams-test-utils) for Python: run a Topology in memory, no broker.

Semantics as the Java driver's:
- The whole topology runs as ONE task, TaskId(0, 0), every topic has one partition (0); offsets count from 0 per
  topic.
- Every piped record is processed at once: enqueue -> process -> stream-time punctuation -> commit (stores and
  caches flushed: a caching KTable emits after every record) -> the records the task wrote to a topic the topology
  reads (repartition topics, or a sink to one of its own source topics) are fed back as input, and processed the
  same way, until nothing is left.
- ``advance_wall_clock_time(ms)`` moves the mock wall clock, fires due WALL_CLOCK_TIME punctuations, commits and
  processes what they fed back. Wall-clock time starts at ``initial_wall_clock_ms`` (default 0; Java's default is
  the system time, ours is deterministic).
- Everything the task writes (sinks, repartition and changelog topics) is captured per topic; TestOutputTopic
  reads it (each read consumes).
- Config defaults: application.id "dummy-topology-test-driver-app-id" (Java's), state.dir a temporary directory
  removed by close() (a state.dir given: close() removes the task's directory in it, as Java's driver cleans its
  state); stores are the real ones (memory or RocksDB) through kbroker.streams.state.
- Piped timestamps may be negative: the timestamp extractor decides (default FailOnInvalidTimestamp raises).
"""
import collections
import os
import shutil
import tempfile
import weakref
from typing import NamedTuple

from kbroker.streams.errors import StreamsException
from kbroker.streams.keyvalue import KeyValue
from kbroker.streams.processor import TaskId
from kbroker.streams.serdes import as_deserializer, as_serializer
from kbroker.streams.task import ConsumedRecord, StreamTask

__all__ = ["TopologyTestDriver", "TestInputTopic", "TestOutputTopic", "TestRecord", "ProducedRecord",
           "NoSuchElementException", "DEFAULT_APPLICATION_ID"]

DEFAULT_APPLICATION_ID = "dummy-topology-test-driver-app-id"


class NoSuchElementException(LookupError):
    """Reading an empty output topic (Java's NoSuchElementException "Empty topic: <name>")."""


class ProducedRecord(NamedTuple):
    """A record the task handed to its collector (bytes)."""
    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list
    partition: int | None


class TestRecord:
    """Kafka's TestRecord: key, value, timestamp (ms or None), headers (list of (str, bytes|None)). Equality
    compares all four, as Java's."""
    __test__ = False    # not a pytest test class
    __slots__ = ("key", "value", "timestamp", "headers")

    def __init__(self, key=None, value=None, timestamp=None, headers=None):
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = list(headers) if headers else []

    def key_value(self):
        return KeyValue(self.key, self.value)

    def __eq__(self, other):
        return (isinstance(other, TestRecord) and self.key == other.key and self.value == other.value
                and self.timestamp == other.timestamp and self.headers == other.headers)

    def __repr__(self):
        return "TestRecord[key=%r, value=%r, headers=%r, recordTime=%r]" % (self.key, self.value, self.headers,
                                                                            self.timestamp)


class _MemoryCollector:
    """RecordCollector capturing every send, in order."""

    def __init__(self):
        self.sent = []

    def send(self, topic, key, value, timestamp, headers, partition):
        self.sent.append(ProducedRecord(topic, key, value, timestamp, list(headers or ()), partition))

    def flush(self):
        pass

    def partitions_for(self, topic):
        return 1

    def drain(self):
        out, self.sent = self.sent, []
        return out


class TopologyTestDriver:
    """See the module docstring. Use as a context manager or call close()."""

    def __init__(self, topology, config=None, initial_wall_clock_ms=0):
        self.topology = topology
        self.config = dict(config or {})
        self.config.setdefault("application.id", DEFAULT_APPLICATION_ID)
        # Java's driver: no wall-clock throttling of outer-join / emit-on-close scans (Kafka's default 1000 ms
        # would suppress every scan after the first under the driver's mock clock)
        self.config.setdefault("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0)
        self.config.setdefault("__emit.interval.ms.kstreams.windowed.aggregation__", 0)
        self.application_id = self.config["application.id"]
        self._tmp_dir = None
        if not self.config.get("state.dir"):
            self._tmp_dir = tempfile.mkdtemp(prefix="kbroker-streams-ttd-")
            self.config["state.dir"] = self._tmp_dir
            # A driver never closed (a test that forgot, or failed before close) still removes its own temporary
            # directory once collected or at exit: 17 were left in /tmp by test runs before this.
            weakref.finalize(self, shutil.rmtree, self._tmp_dir, True)
        self._wall = initial_wall_clock_ms
        self._offsets = collections.Counter()
        self._outputs = collections.defaultdict(collections.deque)
        self._produced = set()
        self._collector = _MemoryCollector()
        self._input_topics = topology.source_topic_names(self.application_id)
        self._patterns = [n.pattern for n in topology.nodes().values()
                          if n.kind == "source" and n.pattern is not None]
        self.task_id = TaskId(0, 0)
        state_manager = self._make_state_manager()
        self.task = StreamTask(self.task_id, None, topology, self.config, state_manager, self._collector,
                               self._clock)
        self._closed = False
        self.task.initialize()
        # a processor's init may have written (e.g. a punctuation-less forward); treat it like processing output
        self._complete_all_processable_work()

    def _make_state_manager(self):
        builders = self.topology.store_builders()
        if not builders:
            return None
        from kbroker.streams.state.state_manager import ProcessorStateManager
        changelogs = {spec.store: topic for topic, spec in self.topology.changelog_topics(self.application_id).items()}
        eos = str(self.config.get("processing.guarantee", "at_least_once")).startswith("exactly_once")
        return ProcessorStateManager(self.task_id, self.application_id, self.config["state.dir"],
                                     list(builders.values()), changelogs, eos, self.config)

    def _clock(self):
        return self._wall

    # --------------------------------------------------------------------------------------------- topics
    def create_input_topic(self, name, key_serializer, value_serializer, start_timestamp_ms=None,
                           auto_advance_ms=0):
        """A TestInputTopic; records piped without a timestamp get ``start_timestamp_ms`` (default: the driver's
        wall-clock time now), then + ``auto_advance_ms`` each."""
        return TestInputTopic(self, name, key_serializer, value_serializer,
                              self._wall if start_timestamp_ms is None else start_timestamp_ms, auto_advance_ms)

    def create_output_topic(self, name, key_deserializer, value_deserializer):
        return TestOutputTopic(self, name, key_deserializer, value_deserializer)

    def producer_history(self, topic=None):
        """Not consumed: a copy of the captured records (of ``topic``) still unread."""
        if topic is not None:
            return list(self._outputs.get(topic, ()))
        return [r for q in self._outputs.values() for r in q]

    def produced_topic_names(self):
        """Every topic the topology wrote to so far, read or not (Java's producedTopicNames)."""
        return set(self._produced)

    def metrics(self):
        """The task's counters ("dropped-records", "process-total", "punctuate-total", ...)."""
        return self.task.metrics

    def input_topic_names(self):
        return set(self._input_topics)

    def _is_input(self, topic):
        return topic in self._input_topics or any(p.fullmatch(topic) for p in self._patterns)

    def pipe_raw(self, topic, key, value, timestamp, headers=None):
        """Enqueue one record (bytes) to ``topic`` and process everything (TestInputTopic calls this)."""
        self._check_open()
        if not self._is_input(topic):
            raise ValueError("Unknown topic: %s" % topic)
        if not isinstance(timestamp, int):
            # a negative one is let through: the timestamp extractor decides (FailOnInvalidTimestamp raises)
            raise ValueError("a piped record needs an integer timestamp (ms), got %r" % (timestamp,))
        self._enqueue(topic, key, value, timestamp, headers)
        self._complete_all_processable_work()

    def _enqueue(self, topic, key, value, timestamp, headers):
        offset = self._offsets[topic]
        self._offsets[topic] += 1
        self.task.add_records(topic, 0, [ConsumedRecord(topic, 0, offset, timestamp, key, value,
                                                        list(headers or ()))])

    def _capture(self):
        """Move the collector's records to the output queues; feed those of input topics back."""
        for r in self._collector.drain():
            self._outputs[r.topic].append(r)
            self._produced.add(r.topic)
            if self._is_input(r.topic):
                self._enqueue(r.topic, r.key, r.value, r.timestamp, r.headers)

    def _commit(self):
        self.task.flush_state()

    def _complete_all_processable_work(self):
        self._capture()
        task = self.task
        while task.has_records_queued():
            task.process(1)
            task.maybe_punctuate_stream_time()
            self._commit()
            self._capture()

    def advance_wall_clock_time(self, ms):
        """Move the wall clock ``ms`` (>= 0) forward, fire due wall-clock punctuations, commit, process."""
        self._check_open()
        if ms < 0:
            raise ValueError("advance must be >= 0, got %r" % (ms,))
        self._wall += ms
        self.task.maybe_punctuate_wall_clock(self._wall)
        self._commit()
        self._complete_all_processable_work()

    def wall_clock_ms(self):
        return self._wall

    def read_produced(self, topic):
        """Pop the oldest captured record of ``topic`` (NoSuchElementException when none)."""
        q = self._outputs.get(topic)
        if not q:
            raise NoSuchElementException("Empty topic: %s" % topic)
        return q.popleft()

    def queue_size(self, topic):
        return len(self._outputs.get(topic, ()))

    # --------------------------------------------------------------------------------------------- stores
    def get_all_state_stores(self):
        sm = self.task.state_manager
        if sm is None:
            return {}
        return {name: sm.get_store(name) for name in sm.store_names()}

    def get_state_store(self, name):
        """The store ``name`` (typed), or None when the topology has none of that name (Java returns null)."""
        return self.task.get_store(name)

    def _typed(self, name, kind, timestamped):
        """The store ``name`` if it is of ``kind``; None otherwise (Java returns null). timestamped None: either
        kind (a timestamped one behind a facade that hides the timestamps, as Java's KeyValueStoreFacade /
        WindowStoreFacade); True: only a timestamped store."""
        from kbroker.streams.state import KeyValueStore, SessionStore, WindowStore
        store = self.get_state_store(name)
        cls = {"kv": KeyValueStore, "window": WindowStore, "session": SessionStore}[kind]
        if store is None or not isinstance(store, cls):
            return None
        is_ts = bool(getattr(store, "timestamped", False))
        if timestamped:
            return store if is_ts else None
        return _TimestampHidingFacade(store) if is_ts else store

    def get_key_value_store(self, name):
        return self._typed(name, "kv", None)

    def get_timestamped_key_value_store(self, name):
        return self._typed(name, "kv", True)

    def get_window_store(self, name):
        return self._typed(name, "window", None)

    def get_timestamped_window_store(self, name):
        return self._typed(name, "window", True)

    def get_session_store(self, name):
        return self._typed(name, "session", None)

    # ---------------------------------------------------------------------------------------------- close
    def _check_open(self):
        if self._closed:
            raise StreamsException("TopologyTestDriver is closed")

    def close(self):
        """Close the task cleanly (processors, stores) and remove the temporary state dir."""
        if self._closed:
            return
        self._closed = True
        try:
            self.task.close(clean=True)
            self._capture_only()
        finally:
            # Java's driver cleans its state directory on close: ours is a temporary one, or only the task's
            # directory "<state.dir>/<application.id>/0_0" under a state.dir the caller gave
            shutil.rmtree(self._tmp_dir or os.path.join(self.config["state.dir"], self.application_id,
                                                        str(self.task_id)), ignore_errors=True)

    def _capture_only(self):
        for r in self._collector.drain():
            self._outputs[r.topic].append(r)
            self._produced.add(r.topic)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _TimestampHidingFacade:
    """A timestamped store seen with plain values (Java's KeyValueStoreFacade / WindowStoreFacade): reads return
    ``value`` instead of ValueAndTimestamp(value, ts); writes store ValueAndTimestamp(value, -1) (Java's
    NO_TIMESTAMP). Other attributes pass through."""
    _SINGLE = ("get", "fetch", "delete", "put_if_absent", "fetch_session")
    _ITER = ("range", "reverse_range", "all", "reverse_all", "prefix_scan", "fetch_range", "backward_fetch",
             "fetch_keys", "fetch_all", "backward_fetch_all", "backward_fetch_keys", "find_sessions")

    def __init__(self, store):
        self._store = store

    @staticmethod
    def _plain(v):
        return getattr(v, "value", v) if v is not None else None

    def _item(self, item):
        if isinstance(item, tuple) and len(item) == 2:
            return type(item)(item[0], self._plain(item[1])) if hasattr(item, "_fields") else \
                (item[0], self._plain(item[1]))
        return item

    def put(self, key, value, *window_start):
        from kbroker.streams.state import ValueAndTimestamp
        wrapped = None if value is None else ValueAndTimestamp(value, -1)
        return self._store.put(key, wrapped, *window_start)

    def put_if_absent(self, key, value):
        from kbroker.streams.state import ValueAndTimestamp
        return self._plain(self._store.put_if_absent(key, None if value is None else ValueAndTimestamp(value, -1)))

    def put_all(self, entries):
        for k, v in entries:
            self.put(k, v)

    def __getattr__(self, name):
        attr = getattr(self._store, name)
        if name in self._SINGLE:
            return lambda *a, **kw: self._plain(attr(*a, **kw))
        if name in self._ITER:
            from kbroker.streams.state import KeyValueIterator
            return lambda *a, **kw: KeyValueIterator(self._item(i) for i in attr(*a, **kw))
        return attr


class TestInputTopic:
    """Kafka's TestInputTopic (see TopologyTestDriver.create_input_topic)."""
    __test__ = False

    def __init__(self, driver, topic, key_serializer, value_serializer, start_timestamp_ms, auto_advance_ms):
        self._driver = driver
        self.topic = topic
        self._kser = as_serializer(key_serializer)
        self._vser = as_serializer(value_serializer)
        self._time = start_timestamp_ms
        self._advance = auto_advance_ms

    def advance_time(self, ms):
        """Move this topic's current time (used for records piped without a timestamp)."""
        if ms < 0:
            raise ValueError("advance must be >= 0")
        self._time += ms

    def _next_time(self, timestamp):
        if timestamp is not None:
            return timestamp
        ts = self._time
        self._time += self._advance
        return ts

    def pipe_input(self, key_or_record=None, value=..., timestamp=None, headers=None):
        """pipe_input(key, value[, timestamp][, headers]), pipe_input(value) (null key, Java's pipeInput(V)), or
        pipe_input(TestRecord)."""
        if value is ...:
            if isinstance(key_or_record, TestRecord):
                r = key_or_record
                return self.pipe_input(r.key, r.value, r.timestamp, r.headers)
            key, value = None, key_or_record
        else:
            key = key_or_record
        ts = self._next_time(timestamp)
        self._driver.pipe_raw(self.topic, self._kser(self.topic, key), self._vser(self.topic, value), ts, headers)

    def pipe_value_list(self, values, start_timestamp_ms=None, advance_ms=None):
        self._pipe_list([KeyValue(None, v) for v in values], start_timestamp_ms, advance_ms)

    def pipe_key_value_list(self, key_values, start_timestamp_ms=None, advance_ms=None):
        self._pipe_list([KeyValue(*kv) for kv in key_values], start_timestamp_ms, advance_ms)

    def pipe_record_list(self, records):
        for r in records:
            self.pipe_input(r)

    def _pipe_list(self, kvs, start, advance):
        if start is None:
            for k, v in kvs:
                self.pipe_input(k, v)
            return
        ts = start
        for k, v in kvs:
            self.pipe_input(k, v, ts)
            ts += advance or 0

    def __repr__(self):
        return "TestInputTopic[topic=%s, currentTime=%d]" % (self.topic, self._time)


class TestOutputTopic:
    """Kafka's TestOutputTopic: each read consumes the oldest captured record of the topic."""
    __test__ = False

    def __init__(self, driver, topic, key_deserializer, value_deserializer):
        self._driver = driver
        self.topic = topic
        self._kdes = as_deserializer(key_deserializer)
        self._vdes = as_deserializer(value_deserializer)

    def read_record(self):
        r = self._driver.read_produced(self.topic)
        return TestRecord(self._kdes(self.topic, r.key), self._vdes(self.topic, r.value), r.timestamp, r.headers)

    def read_value(self):
        return self.read_record().value

    def read_key_value(self):
        return self.read_record().key_value()

    def read_records_to_list(self):
        out = []
        while not self.is_empty():
            out.append(self.read_record())
        return out

    def read_values_to_list(self):
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_list(self):
        return [r.key_value() for r in self.read_records_to_list()]

    def read_key_values_to_map(self):
        """Last value per key (None values kept); a None key raises (Java's IllegalStateException)."""
        out = {}
        for r in self.read_records_to_list():
            if r.key is None:
                raise ValueError("Null keys not allowed with read_key_values_to_map method")
            out[r.key] = r.value
        return out

    def is_empty(self):
        return self._driver.queue_size(self.topic) == 0

    def get_queue_size(self):
        return self._driver.queue_size(self.topic)

    def __repr__(self):
        return "TestOutputTopic[topic=%s, size=%d]" % (self.topic, self.get_queue_size())
