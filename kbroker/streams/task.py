"""The runtime-independent core of a stream task (Kafka's StreamTask + PartitionGroup + RecordQueue +
PunctuationQueue + ProcessorContextImpl + SourceNode/SinkNode): the test driver and the real runtime
(kbroker/streams/runtime) drive the same class.

A task is (sub-topology, partition). It owns:
- one input queue per source partition of raw ``ConsumedRecord``s (bytes); ``add_records`` appends. A queue's head
  is deserialized and its timestamp extracted when it becomes the head (Kafka's RecordQueue.updateHead): bad records
  are skipped there (deserialization handler "logAndContinue", or a timestamp extractor returning < 0) and counted
  in ``metrics["dropped-records"]``; their offsets count as consumed.
- ``process(n)``: up to n records, each time from the queue whose head has the smallest timestamp (Kafka's
  PartitionGroup; ties: the queue added first). Partition time = max timestamp taken from that partition; stream
  time = max over the task's partitions (-1 until the first record, Kafka's UNKNOWN).
- the processors of its sub-topology (one instance each, made by their suppliers), one ``TaskProcessorContext``
  per node, so forward() from a punctuator starts at the node that scheduled it;
- punctuation queues: STREAM_TIME schedules start aligned to 0 (first fire as soon as stream time is known), and
  WALL_CLOCK_TIME ones at now + interval; a fire reschedules at the next interval boundary after the fire time
  (missed intervals are skipped, one call per advance: Kafka's PunctuationSchedule.next);
- its stores through the state manager (kbroker.streams.state.ProcessorStateManager: ``init_stores(collector,
  timestamp_fn)``, ``get_store``, ``flush``, ``close(clean)``); None for a stateless task;
- a RecordCollector for sink output and changelog writes.

The runtime's loop: add_records -> process -> maybe_punctuate_stream_time / maybe_punctuate_wall_clock ->
(commit interval) flush_state + committable_offsets -> its own commit. Processing and punctuation exceptions
propagate as StreamsException (with the task, node and input record named); the caller decides (Kafka: the
uncaught exception handler).

Config keys read here (Kafka's names and defaults):
  application.id
  default.key.serde / default.value.serde   absent: none, as Kafka 3+ -- a source or sink without its own serde then
        fails at task creation with Kafka's "Please specify a key serde or set one through
        StreamsConfig#DEFAULT_KEY_SERDE_CLASS_CONFIG"
  default.deserialization.exception.handler (or deserialization.exception.handler, Kafka 4's name)
        "logAndFail" (default) | "logAndContinue" | Kafka's class names | a function (context, record, exc) ->
        "CONTINUE" | "FAIL"
  default.timestamp.extractor  FailOnInvalidTimestamp (default) | LogAndSkipOnInvalidTimestamp |
        UsePartitionTimeOnInvalidTimestamp | WallclockTimestampExtractor (Kafka's class or short names) | an
        object with extract(record, partition_time) | a function (record, partition_time) -> ms
  max.task.idle.ms (0)  used by ``is_processable``
"""
import collections
import heapq
import importlib
import itertools
import logging
from typing import NamedTuple, Protocol

from kbroker.streams.errors import StreamsException, TopologyException
from kbroker.streams.processor import (Cancellable, ProcessorContext, PunctuationType, Record, RecordContext,
                                       RecordMetadata, TaskId)
from kbroker.streams.serdes import as_deserializer, as_serializer, serde_from_config

__all__ = ["ConsumedRecord", "RecordCollector", "StreamTask", "TaskProcessorContext", "UNKNOWN_TIME",
           "timestamp_extractor_from_config", "deserialization_handler_from_config"]

log = logging.getLogger(__name__)

UNKNOWN_TIME = -1    # Kafka's RecordQueue.UNKNOWN: no record seen yet


class ConsumedRecord(NamedTuple):
    """A record as consumed (bytes key/value) -- or, after deserialization, the same tuple with objects."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: object
    value: object
    headers: tuple | list = ()    # (str, bytes | None) pairs; () when none (no shared mutable default)


class RecordCollector(Protocol):
    """Where a task's output goes (sinks, changelogs). S5 implements it over a confluent-kafka Producer; the test
    driver in memory. ``partition`` None: the collector's default partitioner (murmur2 of the key bytes for keyed
    records, kbroker.streams.partitioner)."""

    def send(self, topic: str, key, value, timestamp: int, headers, partition) -> None: ...

    def flush(self) -> None: ...

    def partitions_for(self, topic: str):
        """The partition count of ``topic`` (for sinks with a custom partitioner), None if unknown."""


# ------------------------------------------------------------------------------------------ config resolution
def _kafka_short(name):
    return name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


class _FailOnInvalidTimestamp:
    name = "FailOnInvalidTimestamp"

    def extract(self, record, partition_time):
        ts = record.timestamp
        if ts < 0:
            raise StreamsException(
                "Input record %s has invalid (negative) timestamp. Possibly because a pre-0.10 producer client was "
                "used to write this record to Kafka without embedding a timestamp, or because the input topic was "
                "created before upgrading the Kafka cluster to 0.10+. Use a different TimestampExtractor to process "
                "this data." % (_describe(record),))
        return ts


class _LogAndSkipOnInvalidTimestamp:
    name = "LogAndSkipOnInvalidTimestamp"

    def extract(self, record, partition_time):
        if record.timestamp < 0:
            log.warning("Input record %s will be dropped because it has an invalid (negative) timestamp.",
                        _describe(record))
        return record.timestamp


class _UsePartitionTimeOnInvalidTimestamp:
    name = "UsePartitionTimeOnInvalidTimestamp"

    def extract(self, record, partition_time):
        if record.timestamp >= 0:
            return record.timestamp
        if partition_time < 0:
            raise StreamsException("Could not infer new timestamp for input record %s because partition time is "
                                   "unknown." % (_describe(record),))
        log.warning("Input record %s has invalid (negative) timestamp; using partition time %d instead.",
                    _describe(record), partition_time)
        return partition_time


class _WallclockTimestampExtractor:
    name = "WallclockTimestampExtractor"

    def __init__(self, clock):
        self._clock = clock

    def extract(self, record, partition_time):
        return self._clock()


_EXTRACTORS = {"FailOnInvalidTimestamp": lambda clock: _FailOnInvalidTimestamp(),
               "LogAndSkipOnInvalidTimestamp": lambda clock: _LogAndSkipOnInvalidTimestamp(),
               "UsePartitionTimeOnInvalidTimestamp": lambda clock: _UsePartitionTimeOnInvalidTimestamp(),
               "WallclockTimestampExtractor": _WallclockTimestampExtractor}


def timestamp_extractor_from_config(value, clock):
    """A function ``(record, partition_time) -> ms`` from a config value or a per-source extractor (see the
    module docstring); None -> FailOnInvalidTimestamp."""
    if value is None:
        value = "FailOnInvalidTimestamp"
    if isinstance(value, str):
        short = _kafka_short(value.strip())
        if short in _EXTRACTORS:
            return _EXTRACTORS[short](clock).extract
        if ":" in value:
            module, _, attr = value.partition(":")
            try:
                value = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as e:
                raise StreamsException("cannot load timestamp extractor %r: %s" % (value, e)) from None
            if isinstance(value, type):
                value = value()
        else:
            raise StreamsException("unknown default.timestamp.extractor %r" % (value,))
    extract = getattr(value, "extract", None)
    if extract is not None:
        return extract
    if callable(value):
        return value
    raise StreamsException("not a timestamp extractor: %r" % (value,))


CONTINUE = "CONTINUE"
FAIL = "FAIL"


def _log_and_fail(context, record, exc):
    log.error("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %d, offset: %d",
              context, record.topic, record.partition, record.offset, exc_info=exc)
    return FAIL


def _log_and_continue(context, record, exc):
    log.warning("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %d, offset: %d",
                context, record.topic, record.partition, record.offset, exc_info=exc)
    return CONTINUE


_HANDLERS = {"logandfail": _log_and_fail, "logandfailexceptionhandler": _log_and_fail,
             "logandcontinue": _log_and_continue, "logandcontinueexceptionhandler": _log_and_continue}


def deserialization_handler_from_config(config):
    """The deserialization exception handler ``(task_id, record, exc) -> "CONTINUE" | "FAIL"`` the config names."""
    value = (config.get("deserialization.exception.handler")
             or config.get("default.deserialization.exception.handler") or "logAndFail")
    if not isinstance(value, str):
        handle = getattr(value, "handle", None) or value
        if not callable(handle):
            raise StreamsException("not a deserialization exception handler: %r" % (value,))
        # a user's handler may answer "CONTINUE", an enum member named CONTINUE, or anything else (= FAIL)
        return lambda ctx, rec, exc: CONTINUE if _response_name(handle(ctx, rec, exc)) == CONTINUE else FAIL
    fn = _HANDLERS.get(_kafka_short(str(value)).lower())
    if fn is None:
        raise StreamsException("unknown default.deserialization.exception.handler %r (logAndFail, logAndContinue, "
                               "Kafka's LogAnd...ExceptionHandler class names or a function are accepted)" % (value,))
    return fn


def _response_name(response):
    name = getattr(response, "name", response)
    return str(name).upper()


def _describe(record):
    return "ConsumerRecord(topic = %s, partition = %d, offset = %d, timestamp = %d)" % (
        record.topic, record.partition, record.offset, record.timestamp)


# ----------------------------------------------------------------------------------------------- punctuation
class _Schedule(Cancellable):
    __slots__ = ("node", "time", "interval", "callback", "cancelled", "seq")

    def __init__(self, node, time, interval, callback, seq):
        self.node = node
        self.time = time
        self.interval = interval
        self.callback = callback
        self.cancelled = False
        self.seq = seq

    def cancel(self):
        self.cancelled = True

    def __lt__(self, other):
        return (self.time, self.seq) < (other.time, other.seq)


class _PunctuationQueue:
    def __init__(self):
        self._heap = []

    def add(self, sched):
        heapq.heappush(self._heap, sched)

    def may_punctuate(self, now, fire):
        """Fire every schedule due at ``now`` (time <= now), in due order; returns whether one fired."""
        fired = False
        while self._heap and self._heap[0].time <= now:
            sched = heapq.heappop(self._heap)
            if sched.cancelled:
                continue
            fire(sched, now)
            fired = True
            if not sched.cancelled:
                nxt = sched.time + sched.interval
                if now >= nxt:
                    # missed intervals are skipped: the next fire is the first boundary after ``now``
                    nxt = sched.time + ((now - sched.time) // sched.interval + 1) * sched.interval
                sched.time = nxt
                heapq.heappush(self._heap, sched)
        return fired

    def __len__(self):
        return sum(1 for s in self._heap if not s.cancelled)


# --------------------------------------------------------------------------------------------------- queues
class _PartitionQueue:
    __slots__ = ("topic", "partition", "source", "raw", "head", "head_ts", "partition_time", "order")

    def __init__(self, topic, partition, source, order):
        self.topic = topic
        self.partition = partition
        self.source = source          # SourceNode
        self.raw = collections.deque()
        self.head = None              # deserialized ConsumedRecord, or None
        self.head_ts = UNKNOWN_TIME
        self.partition_time = UNKNOWN_TIME
        self.order = order

    def size(self):
        return len(self.raw) + (1 if self.head is not None else 0)


# -------------------------------------------------------------------------------------------------- context
class TaskProcessorContext(ProcessorContext):
    """The ProcessorContext of one node of one task."""

    def __init__(self, task, node):
        self._task = task
        self._node = node

    def application_id(self):
        return self._task.application_id

    def task_id(self):
        return self._task.task_id

    def record_metadata(self):
        return self._task.current_metadata

    def current_stream_time_ms(self):
        return self._task.stream_time

    def current_system_time_ms(self):
        return self._task.clock()

    def forward(self, record, child_name=None):
        task = self._task
        children = self._node.children
        if child_name is not None:
            if child_name not in children:
                raise StreamsException("Unknown downstream node: %s either does not exist or is not connected to "
                                       "this processor." % child_name)
            task._deliver(child_name, record)
            return
        for child in children:
            task._deliver(child, record)

    def schedule(self, interval_ms, type, callback):
        if not isinstance(interval_ms, int) or interval_ms < 1:
            raise ValueError("The minimum supported scheduling interval is 1 millisecond.")
        return self._task._schedule(self._node.name, interval_ms, type, callback)

    def get_state_store(self, name):
        node = self._node
        if name not in getattr(node, "stores", ()):
            raise StreamsException(
                "Processor %s has no access to StateStore %s as the store is not connected to the processor. If you "
                "add stores manually via 'add_state_store()' make sure to connect the added store to the processor "
                "by providing the processor name to 'add_state_store()' or connect them via "
                "'connect_processor_and_state_stores()'. DSL users need to provide the store name to '.process()' "
                "to connect the store to the corresponding operator." % (node.name, name))
        store = self._task.get_store(name)
        if store is None:
            raise StreamsException("State store %s is not available in task %s" % (name, self._task.task_id))
        return store

    def commit(self):
        self._task.commit_requested = True

    def app_config(self):
        return self._task.config

    def state_dir(self):
        sm = self._task.state_manager
        return getattr(sm, "task_dir", None) if sm is not None else None

    def key_serde(self):
        return self._task.default_key_serde

    def value_serde(self):
        return self._task.default_value_serde

    def node_name(self):
        """This context's processor node (Kafka's currentNode().name())."""
        return self._node.name

    def metrics(self):
        """The task's counters (a Counter: "dropped-records", "process-total", "punctuate-total"; processors may
        add their own), Kafka's context.metrics() reduced to what kbroker.streams counts."""
        return self._task.metrics

    def set_record_metadata(self, metadata):
        """Make ``record_metadata()`` return ``metadata`` (a caching store's flush uses the cached entry's
        metadata, as Kafka restores an entry's record context); returns the previous value."""
        old = self._task.current_metadata
        self._task.current_metadata = metadata
        return old


# ------------------------------------------------------------------------------------------------------ task
class StreamTask:
    """See the module docstring.

    task_id: TaskId; subtopology: a topology.Subtopology, its id, or None for every node of the topology (the test
    driver runs the whole topology as one task 0_0, as Kafka's TopologyTestDriver does); topology: Topology;
    config: the app config dict; state_manager: a ProcessorStateManager or None; collector: a RecordCollector;
    clock: a zero-argument function returning the wall-clock time in ms.
    """

    def __init__(self, task_id, subtopology, topology, config, state_manager, collector, clock):
        self.task_id = task_id if isinstance(task_id, TaskId) else TaskId(*task_id)
        self.topology = topology
        self.config = config
        self.application_id = config.get("application.id")
        self.state_manager = state_manager
        self.collector = collector
        self.clock = clock
        if subtopology is None:
            self.node_names = tuple(topology.nodes())
        else:
            if isinstance(subtopology, int):
                subtopology = topology.subtopologies()[subtopology]
            self.node_names = subtopology.nodes
        self.subtopology = subtopology
        self.stream_time = UNKNOWN_TIME
        self.current_metadata = None
        self._current_ts = 0
        self.commit_requested = False
        self.metrics = collections.Counter({"dropped-records": 0, "process-total": 0, "punctuate-total": 0})
        self.default_key_serde = _default_serde(config, "default.key.serde", True)
        self.default_value_serde = _default_serde(config, "default.value.serde", False)
        self._handler = deserialization_handler_from_config(config)
        self._default_extractor = timestamp_extractor_from_config(config.get("default.timestamp.extractor"), clock)
        self._queues = {}                 # (topic, partition) -> _PartitionQueue
        self._consumed = {}               # (topic, partition) -> next offset
        self._stream_punct = _PunctuationQueue()
        self._wall_punct = _PunctuationQueue()
        self._seq = itertools.count()
        self._processors = {}             # node name -> Processor instance (processor nodes only)
        self._contexts = {}
        self._sources = {}                # node name -> (key deserializer, value deserializer, extractor)
        self._sinks = {}                  # node name -> (key ser., value ser., topic | None, extractor | None,
                                          #               partitioner function | None)
        self._children = {}               # node name -> child names
        self._stores_ready = False
        self._initialized = False
        self._closed = False
        self._idle_since = None
        nodes = topology.nodes()
        for name in self.node_names:
            node = nodes[name]
            self._contexts[name] = TaskProcessorContext(self, node)
            for serde in [getattr(node, a, None) for a in ("key_deserializer", "value_deserializer",
                                                           "key_serializer", "value_serializer")]:
                if hasattr(serde, "set_if_unset"):  # wrapping serdes (dsl ChangedSerde): Kafka's setIfUnset
                    serde.set_if_unset(self.default_key_serde, self.default_value_serde)
            if node.kind == "source":
                self._sources[name] = (
                    as_deserializer(node.key_deserializer) or self._default_fn(name, "source", True).deserialize,
                    as_deserializer(node.value_deserializer) or self._default_fn(name, "source", False).deserialize,
                    (timestamp_extractor_from_config(node.timestamp_extractor, clock)
                     if node.timestamp_extractor is not None else self._default_extractor))
            elif node.kind == "sink":
                static = (topology.resolve_topic(node.topic, self.application_id) if isinstance(node.topic, str)
                          else None)
                partitioner = node.partitioner
                if partitioner is not None:
                    partitioner = getattr(partitioner, "partition", partitioner)
                self._sinks[name] = (
                    as_serializer(node.key_serializer) or self._default_fn(name, "sink", True).serialize,
                    as_serializer(node.value_serializer) or self._default_fn(name, "sink", False).serialize,
                    static, node.topic if static is None else None, partitioner)
            self._children[name] = tuple(node.children)

    def _default_fn(self, node_name, kind, is_key):
        serde = self.default_key_serde if is_key else self.default_value_serde
        if serde is None:
            what = "key" if is_key else "value"
            raise StreamsException(
                "Failed to initialize %s serdes for %s node %s: Please specify a %s serde or set one through "
                "StreamsConfig#DEFAULT_%s_SERDE_CLASS_CONFIG (default.%s.serde)"
                % (what, kind, node_name, what, what.upper(), what))
        return serde

    # ------------------------------------------------------------------------------------------- life cycle
    def init_stores(self):
        """Build and open the task's stores (before restore)."""
        if not self._stores_ready:
            if self.state_manager is not None:
                self.state_manager.init_stores(self.collector, self._timestamp)
            self._stores_ready = True

    def init_processors(self):
        """Create every processor (its supplier) and call its init(context), parents before children (after
        restore: a processor may read its stores in init)."""
        if self._initialized:
            return
        self.init_stores()
        nodes = self.topology.nodes()
        for name in self.node_names:
            node = nodes[name]
            if node.kind == "processor":
                proc = node.supplier()
                if proc is None or not hasattr(proc, "process"):
                    raise TopologyException("processor supplier of %s returned %r, not a Processor" % (name, proc))
                self._processors[name] = proc
        self._initialized = True
        for name, proc in self._processors.items():
            self._run(name, "init", proc.init, self._contexts[name])

    def initialize(self):
        """init_stores + init_processors (a task with nothing to restore, e.g. in the test driver)."""
        self.init_processors()

    def get_store(self, name):
        if self.state_manager is None:
            return None
        self.init_stores()
        return self.state_manager.get_store(name)

    def close(self, clean):
        """Close processors then stores. clean: flush first (caches forward, changelog writes handed over)."""
        if self._closed:
            return
        self._closed = True
        first_exc = None
        try:
            if clean and self._initialized:
                self.flush_state()
        except Exception as e:
            first_exc = e
        for name, proc in self._processors.items():
            try:
                proc.close()
            except Exception as e:
                log.warning("task %s: processor %s failed to close: %s", self.task_id, name, e)
                first_exc = first_exc or e
        if self.state_manager is not None and self._stores_ready:
            try:
                self.state_manager.close(clean and first_exc is None)
            except Exception as e:
                first_exc = first_exc or e
        if clean and first_exc is not None:
            if isinstance(first_exc, StreamsException):
                raise first_exc
            raise StreamsException("task %s failed to close cleanly: %s" % (self.task_id, first_exc)) from first_exc

    # ---------------------------------------------------------------------------------------------- input
    def add_records(self, topic, partition, records):
        """Buffer consumed records (raw bytes) of one input partition, in offset order. Returns the partition's
        buffered count."""
        q = self._queue(topic, partition)
        q.raw.extend(records)
        return q.size()

    def _queue(self, topic, partition):
        key = (topic, partition)
        q = self._queues.get(key)
        if q is None:
            source = self.topology.source_for_topic(topic, self.application_id)
            if source is None or source.name not in self._sources:
                raise StreamsException("task %s: no source of this task reads topic %s" % (self.task_id, topic))
            q = self._queues[key] = _PartitionQueue(topic, partition, source, len(self._queues))
        return q

    def add_partitions(self, partitions):
        """Declare the task's input partitions [(topic, partition)] before any record arrives, so
        ``is_processable`` knows which are empty (Kafka's PartitionGroup is made with all of them)."""
        for topic, partition in partitions:
            self._queue(topic, partition)

    def buffered(self, topic=None, partition=None):
        """Records buffered (heads included): of one input partition, or of all."""
        if topic is not None:
            q = self._queues.get((topic, partition))
            return q.size() if q is not None else 0
        return sum(q.size() for q in self._queues.values())

    def has_records_queued(self):
        return any(q.size() for q in self._queues.values())

    def is_processable(self, now_ms):
        """Kafka's max.task.idle.ms rule: processable when every input partition (``add_partitions``, or seen in
        ``add_records``) has buffered data, or when some has and the task has waited max.task.idle.ms since it
        became partly empty. <= 0 (Kafka's 0 and -1): no waiting. Kafka's 0 additionally waits while the consumer
        knows of unfetched data of an empty partition; this task does not see consumer lag, so 0 acts as -1."""
        sizes = [q.size() for q in self._queues.values()]
        if not any(sizes):
            self._idle_since = None
            return False
        if all(sizes):
            self._idle_since = None
            return True
        idle = int(self.config.get("max.task.idle.ms", 0))
        if idle <= 0:
            return True
        if self._idle_since is None:
            self._idle_since = now_ms
        return now_ms - self._idle_since >= idle

    def _update_head(self, q):
        """Deserialize q's next raw records until one is valid (Kafka's RecordQueue.updateHead)."""
        while q.head is None and q.raw:
            raw = q.raw.popleft()
            kdes, vdes, extract = self._sources[q.source.name]
            try:
                rec = ConsumedRecord(raw.topic, raw.partition, raw.offset, raw.timestamp, kdes(raw.topic, raw.key),
                                     vdes(raw.topic, raw.value), raw.headers)
            except Exception as exc:
                if self._handler(self.task_id, raw, exc) == CONTINUE:
                    self._drop(raw)
                    continue
                q.raw.appendleft(raw)    # still unconsumed: a retry fails on it again instead of skipping it
                raise StreamsException(
                    "Deserialization exception handler is set to fail upon a deserialization error (task %s, topic "
                    "%s, partition %d, offset %d: %s). If you would rather have the streaming pipeline continue after "
                    "a deserialization error, please set the default.deserialization.exception.handler "
                    "appropriately." % (self.task_id, raw.topic, raw.partition, raw.offset, exc)) from exc
            try:
                ts = extract(rec, q.partition_time)
            except Exception:
                q.raw.appendleft(raw)
                raise
            if ts is None or ts < 0:
                log.warning("task %s: skipping record %s with invalid timestamp %r", self.task_id,
                            _describe(raw), ts)
                self._drop(raw)
                continue
            q.head = rec
            q.head_ts = ts

    def _drop(self, raw):
        self.metrics["dropped-records"] += 1
        self._consumed[(raw.topic, raw.partition)] = raw.offset + 1

    def _next_queue(self):
        best = None
        for q in self._queues.values():
            if q.head is None:
                self._update_head(q)
            if q.head is not None and (best is None or q.head_ts < best.head_ts):
                best = q
        return best

    # -------------------------------------------------------------------------------------------- process
    def process(self, max_records=100):
        """Process up to ``max_records`` buffered records, smallest head timestamp first; returns how many."""
        if self._closed:
            raise StreamsException("task %s is closed" % (self.task_id,))
        if not self._initialized:
            self.init_processors()
        n = 0
        while n < max_records:
            q = self._next_queue()
            if q is None:
                break
            rec, ts = q.head, q.head_ts
            q.head = None
            if ts > q.partition_time:
                q.partition_time = ts
            if ts > self.stream_time:
                self.stream_time = ts
            self._process_one(q.source.name, rec, ts)
            self._consumed[(rec.topic, rec.partition)] = rec.offset + 1
            n += 1
        return n

    def _process_one(self, source_name, rec, ts):
        self.current_metadata = RecordMetadata(rec.topic, rec.partition, rec.offset)
        self._current_ts = ts
        self.metrics["process-total"] += 1
        record = Record(rec.key, rec.value, ts, rec.headers)
        for child in self._children[source_name]:
            self._deliver(child, record)

    def _deliver(self, name, record):
        """Hand ``record`` to node ``name`` (a processor or a sink)."""
        proc = self._processors.get(name)
        if proc is not None:
            prev_ts = self._current_ts
            self._current_ts = record.timestamp
            try:
                proc.process(record)
            except StreamsException:
                raise
            except Exception as exc:
                raise StreamsException("Exception caught in process. taskId=%s, processor=%s, %s, stacktrace=%r"
                                       % (self.task_id, name, self._metadata_text(), exc)) from exc
            finally:
                self._current_ts = prev_ts
            return
        if name in self._sinks:
            self._sink(name, record)
            return
        raise StreamsException("task %s: node %s is not part of this task" % (self.task_id, name))

    def _metadata_text(self):
        md = self.current_metadata
        if md is None or md.topic is None:
            return "punctuation"
        return "topic=%s, partition=%d, offset=%d" % (md.topic, md.partition, md.offset)

    def _sink(self, name, record):
        ks, vs, topic, extractor, partitioner = self._sinks[name]
        if topic is None:
            md = self.current_metadata or RecordMetadata(None, -1, -1)
            topic = extractor(record.key, record.value, RecordContext(md.topic, md.partition, md.offset,
                                                                      record.timestamp, record.headers))
            if not topic or not isinstance(topic, str):
                raise StreamsException("Topic name extractor of sink %s returned %r" % (name, topic))
        if record.timestamp < 0:
            raise StreamsException("Invalid (negative) timestamp of %d for output record <%r:%r>."
                                   % (record.timestamp, record.key, record.value))
        try:
            key = ks(topic, record.key)
            value = vs(topic, record.value)
        except Exception as exc:
            raise StreamsException("A serializer (key: %r / value: %r) is not compatible to the actual key or value "
                                   "type (key type: %s / value type: %s) of sink %s writing to topic %s: %s"
                                   % (ks, vs, type(record.key).__name__, type(record.value).__name__, name, topic,
                                      exc)) from exc
        partition = None
        if partitioner is not None:
            n = self.collector.partitions_for(topic) if hasattr(self.collector, "partitions_for") else None
            if n:
                partition = partitioner(topic, record.key, record.value, n)
        self.collector.send(topic, key, value, record.timestamp, list(record.headers), partition)

    def _timestamp(self):
        """The timestamp of the record being processed (changelog records carry it)."""
        return self._current_ts

    # --------------------------------------------------------------------------------------------- punctuate
    def _schedule(self, node_name, interval, type, callback):
        if type == PunctuationType.STREAM_TIME:
            sched = _Schedule(node_name, 0, interval, callback, next(self._seq))   # aligned to 0, as Kafka's
            self._stream_punct.add(sched)
        elif type == PunctuationType.WALL_CLOCK_TIME:
            sched = _Schedule(node_name, self.clock() + interval, interval, callback, next(self._seq))
            self._wall_punct.add(sched)
        else:
            raise ValueError("unknown punctuation type %r" % (type,))
        return sched

    def _fire(self, sched, now):
        self.metrics["punctuate-total"] += 1
        prev_md, prev_ts = self.current_metadata, self._current_ts
        self.current_metadata = RecordMetadata(None, -1, -1)
        self._current_ts = now
        try:
            sched.callback(now)
        except StreamsException:
            raise
        except Exception as exc:
            raise StreamsException("task %s: punctuator of processor %s failed at %d: %r"
                                   % (self.task_id, sched.node, now, exc)) from exc
        finally:
            self.current_metadata, self._current_ts = prev_md, prev_ts

    def maybe_punctuate_stream_time(self):
        """Fire the due stream-time punctuations (none before stream time is known)."""
        if self.stream_time == UNKNOWN_TIME or not self._initialized:
            return False
        return self._stream_punct.may_punctuate(self.stream_time, self._fire)

    def maybe_punctuate_wall_clock(self, now_ms=None):
        if not self._initialized:
            return False
        return self._wall_punct.may_punctuate(self.clock() if now_ms is None else now_ms, self._fire)

    # ------------------------------------------------------------------------------------------------ commit
    def flush_state(self):
        """Kafka's prepareCommit: flush stores (caches forward downstream; change-logging writes go to the
        collector), then flush the collector."""
        if self.state_manager is not None and self._stores_ready:
            self.state_manager.flush()
        self.collector.flush()
        self.commit_requested = False

    def committable_offsets(self):
        """{(topic, partition): next offset to consume} for every input partition this task consumed from."""
        return dict(self._consumed)

    def partition_times(self):
        return {k: q.partition_time for k, q in self._queues.items()}

    # ---------------------------------------------------------------------------------------------- helpers
    def _run(self, name, what, fn, *args):
        try:
            fn(*args)
        except StreamsException:
            raise
        except Exception as exc:
            raise StreamsException("task %s: %s of processor %s failed: %r" % (self.task_id, what, name, exc)) \
                from exc

    def __repr__(self):
        return "StreamTask(%s)" % (self.task_id,)


def _default_serde(config, key, is_key):
    value = config.get(key)
    if value is None:
        return None
    try:
        return serde_from_config(value, config, is_key)
    except ValueError as e:
        raise StreamsException("%s: %s" % (key, e)) from None
