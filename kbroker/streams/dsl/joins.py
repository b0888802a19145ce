"""Joins of the DSL (Kafka's KStreamImplJoin, KStreamKStreamJoin, KStreamKTableJoin, KTableKTable*Join) and their
options (StreamJoined, Joined, TableJoined).

Entry points (called by S3's KStream.join/left_join/outer_join and KTable.join/left_join/outer_join; the joiner
is already ``joiner(key, left_value, right_value)``):

- ``stream_stream_join(left, right, joiner, windows, stream_joined, kind)``: windowed join, kind "inner" | "left" |
  "outer". Topology (Kafka's names): each side -> "KSTREAM-WINDOWED-<n>" (forwards the record, then puts it in its
  side's window store: retain duplicates, window size = before + after, retention = size + grace) -> the join
  processors "KSTREAM-JOINTHIS-<n>" / "KSTREAM-OUTERTHIS-<n>" and "KSTREAM-JOINOTHER-<n>" / "KSTREAM-OUTEROTHER-<n>"
  (each looks its record up in the OTHER side's store) -> "KSTREAM-MERGE-<n>". A left record at ts joins right
  records with timestamps in [ts - before, ts + after] (a right record: left records in [ts - after, ts + before]);
  a result's timestamp is max(both). Left/outer (Kafka 3.1+): a record without a match is parked in the shared
  "KSTREAM-OUTERSHARED-<n>-store" and emitted joined with None only once its window closed (stream time > ts +
  after + grace for left records, ts + before + grace for right records), when a later record advances stream
  time; a later match removes it. A record too late to wait (its window already closed) is emitted joined with
  None at once. Null keys/values are dropped (counted), except a null key on an outer side, emitted at once.
  The emit scan is throttled to once per config "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__"
  ms of wall-clock time (Kafka's internal config; default 1000).
- ``stream_table_join(stream, table, joiner, joined, kind)``: kind "inner" | "left": each stream record is joined
  with the table's current value for its key (no window; table updates emit nothing); output timestamp = the
  stream record's. Null value or (inner) null key: dropped and counted; left join with a null key: joined with None.
- ``table_table_join(left, right, joiner, kind, named, materialized)``: kind "inner" | "left" | "outer": an update
  on either side joins with the other side's current value (Kafka's KTableKTableInner/Left/Right/OuterJoin):
  result timestamp max(both), deletes propagate as tombstones, "KTABLE-MERGE-<n>" (+ "KTABLE-JOINTHIS-<n>",
  "KTABLE-JOINOTHER-<n>"), optionally materialized.

Key-changed streams are repartitioned first ("<name>-left"/"-right" or the node name, "-repartition"), and the
source topics of both sides are declared co-partitioned (topology.copartition: the runtime refuses to start
when their partition counts differ, with a TopologyException naming them).
"""
import struct

from kbroker.streams.dsl.nodes import Change, TupleForwarder, record_dropped
from kbroker.streams.dsl.options import Materialized, _Options, validate_name
from kbroker.streams.dsl.windows import JoinWindows, to_millis
from kbroker.streams.errors import StreamsException, TopologyException
from kbroker.streams.processor import Processor
from kbroker.streams.serdes import Serde, as_deserializer, as_serializer
from kbroker.streams.state.base import ValueAndTimestamp

__all__ = ["StreamJoined", "Joined", "TableJoined", "stream_stream_join", "stream_table_join", "table_table_join",
           "EMIT_INTERVAL_OUTER_JOIN_KEY"]

EMIT_INTERVAL_OUTER_JOIN_KEY = "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__"
NO_TIMESTAMP = -1
MAX_LONG = (1 << 63) - 1

JOINTHIS_NAME = "KSTREAM-JOINTHIS-"
JOINOTHER_NAME = "KSTREAM-JOINOTHER-"
OUTERTHIS_NAME = "KSTREAM-OUTERTHIS-"
OUTEROTHER_NAME = "KSTREAM-OUTEROTHER-"
OUTERSHARED_NAME = "KSTREAM-OUTERSHARED-"
WINDOWED_NAME = "KSTREAM-WINDOWED-"
MERGE_NAME = "KSTREAM-MERGE-"
JOIN_NAME = "KSTREAM-JOIN-"
LEFTJOIN_NAME = "KSTREAM-LEFTJOIN-"
KTABLE_JOINTHIS_NAME = "KTABLE-JOINTHIS-"
KTABLE_JOINOTHER_NAME = "KTABLE-JOINOTHER-"
KTABLE_MERGE_NAME = "KTABLE-MERGE-"


# ------------------------------------------------------------------------------------------------------ options

class StreamJoined(_Options):
    """Kafka's StreamJoined: serdes of the join's stores (key, this value, other value), a name (processors
    "<name>-this-windowed", "<name>-join-this", ... and repartition topics "<name>-left"/"-right"), a base store
    name ("<store>-this-join-store" / "-other-join-store"), store suppliers for each side, logging flags."""

    def __init__(self, key_serde=None, value_serde=None, other_value_serde=None, name=None, store_name=None,
                 this_store_supplier=None, other_store_supplier=None, logging_enabled=True, log_config=None):
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.other_value_serde = other_value_serde
        self.name = validate_name(name)
        self.store_name = validate_name(store_name)
        self.this_store_supplier = this_store_supplier
        self.other_store_supplier = other_store_supplier
        self.logging_enabled = logging_enabled
        self.log_config = dict(log_config or {})

    @staticmethod
    def with_(key_serde=None, value_serde=None, other_value_serde=None):
        return StreamJoined(key_serde, value_serde, other_value_serde)

    @staticmethod
    def as_(store_name):
        return StreamJoined(store_name=store_name)

    def with_store_name(self, store_name):
        return self._with(store_name=validate_name(store_name))

    def with_key_serde(self, serde):
        return self._with(key_serde=serde)

    def with_value_serde(self, serde):
        return self._with(value_serde=serde)

    def with_other_value_serde(self, serde):
        return self._with(other_value_serde=serde)

    def with_this_store_supplier(self, supplier):
        return self._with(this_store_supplier=supplier)

    def with_other_store_supplier(self, supplier):
        return self._with(other_store_supplier=supplier)

    def with_logging_enabled(self, config=None):
        return self._with(logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self):
        return self._with(logging_enabled=False, log_config={})


class Joined(_Options):
    """Kafka's Joined (stream-table joins): serdes (key, stream value, table value), a name (the processor and the
    repartition topic "<name>-repartition"). ``with_grace_period`` needs a versioned table, which kbroker.streams
    does not have: refused at join time with Kafka's message."""

    def __init__(self, key_serde=None, value_serde=None, other_value_serde=None, name=None, grace_period_ms=None):
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.other_value_serde = other_value_serde
        self.name = validate_name(name)
        self.grace_period_ms = grace_period_ms

    @staticmethod
    def with_(key_serde=None, value_serde=None, other_value_serde=None, name=None):
        return Joined(key_serde, value_serde, other_value_serde, name)

    @staticmethod
    def as_(name):
        return Joined(name=name)

    @staticmethod
    def key_serde_(serde):
        return Joined(key_serde=serde)

    @staticmethod
    def value_serde_(serde):
        return Joined(value_serde=serde)

    @staticmethod
    def other_value_serde_(serde):
        return Joined(other_value_serde=serde)

    def with_key_serde(self, serde):
        return self._with(key_serde=serde)

    def with_value_serde(self, serde):
        return self._with(value_serde=serde)

    def with_other_value_serde(self, serde):
        return self._with(other_value_serde=serde)

    def with_grace_period(self, grace):
        return self._with(grace_period_ms=to_millis(grace, "gracePeriod"))


class TableJoined(_Options):
    """Kafka's TableJoined (table-table joins): a name; partitioners only matter for foreign-key joins (not
    implemented) and are refused."""

    def __init__(self, name=None):
        self.name = validate_name(name)

    @staticmethod
    def as_(name):
        return TableJoined(name)


def _name_of(named):
    if named is None:
        return None
    if isinstance(named, str):
        return named
    return getattr(named, "name", None)


# ------------------------------------------------------------------------------------------- stream-stream join

class _TimeTracker:
    """Kafka's KStreamImplJoin.TimeTracker, shared by both join processors of one task."""

    def __init__(self):
        self.emit_interval = 1000
        self.stream_time = NO_TIMESTAMP
        self.min_time = MAX_LONG
        self.next_time_to_emit = 0

    def advance_stream_time(self, ts):
        self.stream_time = max(ts, self.stream_time)

    def update_min_time(self, ts):
        self.min_time = min(ts, self.min_time)


def _wrap64(n):
    """``n`` as a Java long (two's complement, 64 bits)."""
    return ((n + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


class _TimeTrackers:
    def __init__(self):
        self._by_task = {}

    def get(self, task_id):
        t = self._by_task.get(task_id)
        if t is None:
            t = self._by_task[task_id] = _TimeTracker()
        return t

    def remove(self, task_id):
        self._by_task.pop(task_id, None)


class KStreamJoinWindowSupplier:
    """"KSTREAM-WINDOWED-<n>": forward the record, then store it (non-null keys) in this side's window store."""

    def __init__(self, store_name):
        self.store_name = store_name

    def __call__(self):
        return _JoinWindowProcessor(self.store_name)


class _JoinWindowProcessor(Processor):
    def __init__(self, store_name):
        self.store_name = store_name

    def init(self, context):
        self.context = context
        self.store = context.get_state_store(self.store_name)

    def process(self, record):
        self.context.forward(record)
        if record.key is not None:
            self.store.put(record.key, record.value, record.timestamp)


class KStreamKStreamJoinSupplier:
    """One side of a stream-stream join. ``left_side``: this processor handles the left stream's records.
    ``join_before``/``join_after``: the window around this side's records (the right side gets them swapped)."""

    def __init__(self, other_store, windows, joiner, outer, outer_store, left_side, trackers, outer_serdes=None):
        self.other_store = other_store
        self.outer_serdes = outer_serdes
        self.windows = windows
        self.joiner = joiner
        self.outer = outer
        self.outer_store = outer_store
        self.left_side = left_side
        self.trackers = trackers
        if left_side:
            self.join_before, self.join_after = windows.before_ms, windows.after_ms
        else:
            self.join_before, self.join_after = windows.after_ms, windows.before_ms

    def __call__(self):
        return _StreamStreamJoinProcessor(self)


class _StreamStreamJoinProcessor(Processor):
    def __init__(self, s):
        self.s = s
        self.grace = s.windows.grace_period_ms()

    def init(self, context):
        self.context = context
        s = self.s
        self.other = context.get_state_store(s.other_store)
        self.tracker = s.trackers.get(context.task_id())
        self.outer_store = None
        if s.windows.spurious_result_fix and s.outer_store is not None:
            self.outer_store = context.get_state_store(s.outer_store)
            _resolve_outer_serdes(s.outer_serdes, context)
            try:
                self.tracker.emit_interval = int(context.app_config().get(EMIT_INTERVAL_OUTER_JOIN_KEY, 1000))
            except (TypeError, ValueError):
                self.tracker.emit_interval = 1000

    def _join(self, key, this_value, other_value):
        if self.s.left_side:
            return self.s.joiner(key, this_value, other_value)
        return self.s.joiner(key, other_value, this_value)

    def process(self, record):
        s = self.s
        ts = record.timestamp
        self.tracker.advance_stream_time(ts)
        if s.outer and record.key is None and record.value is not None:
            self.context.forward(record.with_value(self._join(None, record.value, None)))
            return
        if record.key is None or record.value is None:
            record_dropped(self.context, "null key or value")
            return
        if self.outer_store is not None and ts == self.tracker.stream_time:
            self._emit_non_joined(record)
        time_from = max(0, ts - s.join_before)
        time_to = max(0, ts + s.join_after)
        matches = list(self.other.fetch_range(record.key, time_from, time_to))
        for kv in matches:
            other_ts, other_value = kv.key, kv.value
            if self.outer_store is not None:
                other_key = (other_ts, not s.left_side, record.key)
                if self.outer_store.get(other_key) is not None:
                    self.outer_store.delete(other_key)
            self.context.forward(record.with_value(self._join(record.key, record.value, other_value))
                                 .with_timestamp(max(ts, other_ts)))
        if s.outer and not matches:
            if self.outer_store is None or time_to < self.tracker.stream_time:
                self.context.forward(record.with_value(self._join(record.key, record.value, None)))
            else:
                self.tracker.update_min_time(ts)
                k = (ts, s.left_side, record.key)
                values = list(self.outer_store.get(k) or [])
                values.append((s.left_side, record.value))
                self.outer_store.put(k, values)

    def _window_open(self, ts, is_left):
        look = self.s.windows.after_ms if is_left else self.s.windows.before_ms
        return self.tracker.min_time + look + self.grace >= self.tracker.stream_time

    def _emit_non_joined(self, record):
        t = self.tracker
        s = self.s
        # only scan when some parked record's window may have closed (Kafka: the store's all() is expensive).
        # Java's long arithmetic: with nothing parked (min time = Long.MAX_VALUE) the sum wraps negative, so the
        # (empty) scan runs and takes the throttle's slot -- reproduced, it decides when later scans may run
        if _wrap64(t.min_time + s.join_after + self.grace) >= t.stream_time:
            return
        now = self.context.current_system_time_ms()
        if now < t.next_time_to_emit:
            return
        t.next_time_to_emit = now + t.emit_interval
        t.min_time = MAX_LONG
        left_open = right_open = False
        emitted = []
        for kv in list(self.outer_store.all()):
            ts, is_left, key = kv.key
            t.min_time = ts
            if left_open and right_open:
                break
            if self._window_open(ts, is_left):
                if is_left:
                    left_open = True
                else:
                    right_open = True
                continue
            for side, value in kv.value:
                left, right = (value, None) if side else (None, value)
                self.context.forward(record.with_key(key).with_value(s.joiner(key, left, right)).with_timestamp(ts))
            emitted.append(kv.key)
        for k in emitted:
            self.outer_store.delete(k)

    def close(self):
        self.s.trackers.remove(self.context.task_id())


# The shared outer-join store: a key-value store keyed by (timestamp, is_left, key), laid out as Kafka's
# TimestampedKeyAndJoinSide (8-byte big-endian timestamp, 1 byte side: 1 left / 0 right, key bytes) so a scan
# visits parked records by time, right before left, then key; the value is the list of parked (is_left, value)
# (Kafka's ListValueStore), encoded as repeated [1 byte side][4-byte length, -1 = null][value bytes].

_TS = struct.Struct(">q")
_LEN = struct.Struct(">i")


class _OuterKeySerde(Serde):
    name = "TimestampedKeyAndJoinSide"

    def __init__(self, key_serde):
        self.inner = key_serde

    def serialize(self, topic, data):
        if data is None:
            return None
        ts, is_left, key = data
        return _TS.pack(ts) + (b"\x01" if is_left else b"\x00") + as_serializer(self.inner)(topic, key)

    def deserialize(self, topic, data):
        if data is None:
            return None
        return (_TS.unpack_from(data)[0], data[8] == 1, as_deserializer(self.inner)(topic, bytes(data[9:])))


class _LeftOrRightListSerde(Serde):
    name = "LeftOrRightValueList"

    def __init__(self, left_serde, right_serde):
        self.left = left_serde
        self.right = right_serde

    def serialize(self, topic, data):
        if data is None:
            return None
        out = bytearray()
        for is_left, value in data:
            b = as_serializer(self.left if is_left else self.right)(topic, value)
            out += b"\x01" if is_left else b"\x00"
            out += _LEN.pack(-1 if b is None else len(b))
            if b is not None:
                out += b
        return bytes(out)

    def deserialize(self, topic, data):
        if data is None:
            return None
        out = []
        i = 0
        while i < len(data):
            is_left = data[i] == 1
            n = _LEN.unpack_from(data, i + 1)[0]
            i += 5
            raw = None if n < 0 else bytes(data[i:i + n])
            i += max(n, 0)
            out.append((is_left, as_deserializer(self.left if is_left else self.right)(topic, raw)))
        return out


def _resolve_outer_serdes(serdes, context):
    """The outer store's serdes wrap the join's serdes; None ones become the app's defaults (known only at run
    time). Idempotent: every task resolves to the same defaults."""
    key, lr = serdes
    if key.inner is None:
        key.inner = context.key_serde()
    if lr.left is None:
        lr.left = context.value_serde()
    if lr.right is None:
        lr.right = context.value_serde()


def _kv_supplier(builder, name, in_memory):
    from kbroker.streams.state.stores import Stores
    if in_memory or builder.store_type() == "in_memory":
        return Stores.in_memory_key_value_store(name)
    return Stores.persistent_key_value_store(name)


def stream_stream_join(left, right, joiner, windows, stream_joined, kind):
    """See the module docstring. Returns the joined KStream (its value serde unknown: None)."""
    from kbroker.streams.dsl.kstream import KStream
    from kbroker.streams.state.stores import Stores
    if not isinstance(windows, JoinWindows):
        raise TopologyException("a stream-stream join needs JoinWindows, got %r" % (windows,))
    if kind not in ("inner", "left", "outer"):
        raise ValueError("join kind must be inner, left or outer, got %r" % (kind,))
    sj = stream_joined if stream_joined is not None else StreamJoined()
    if not isinstance(sj, StreamJoined):
        raise TopologyException("a stream-stream join takes a StreamJoined, got %r" % (sj,))
    left_outer = kind in ("left", "outer")
    right_outer = kind == "outer"
    builder = left._builder
    topology = builder._topology
    name = sj.name

    if left._repartition_required:
        left = left._repartition_for_join(name + "-left" if name else left._name, sj.key_serde, sj.value_serde)
    if right._repartition_required:
        right = right._repartition_for_join(name + "-right" if name else right._name, sj.key_serde,
                                            sj.other_value_serde)
    builder.copartition(left, right)

    key_serde = sj.key_serde if sj.key_serde is not None else left._key_serde
    this_serde = sj.value_serde if sj.value_serde is not None else left._value_serde
    other_serde = sj.other_value_serde if sj.other_value_serde is not None else right._value_serde

    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    this_windowed = builder.suffix_or_generate(name, "-this-windowed", WINDOWED_NAME)
    other_windowed = builder.suffix_or_generate(name, "-other-windowed", WINDOWED_NAME)
    this_generated = builder.new_processor_name(OUTERTHIS_NAME if right_outer else JOINTHIS_NAME)
    other_generated = builder.new_processor_name(OUTEROTHER_NAME if left_outer else JOINOTHER_NAME)
    join_this = validate_name(name + this_suffix) if name else this_generated
    join_other = validate_name(name + other_suffix) if name else other_generated
    merge = builder.suffix_or_generate(name, "-merge", MERGE_NAME)

    size = windows.size()
    retention = size + windows.grace_period_ms()

    def window_store(generated, suffix, supplier, value_serde):
        if supplier is not None:
            if not supplier.retain_duplicates:
                raise StreamsException("The StoreSupplier must set retainDuplicates=true, found "
                                       "retainDuplicates=false")
            if supplier.retention_ms != retention or supplier.window_size_ms != size:
                raise StreamsException("Window settings mismatch. WindowBytesStoreSupplier settings %s must match "
                                       "JoinWindows settings %r for the window size and retention period"
                                       % (supplier.name(), windows))
        else:
            store_name = (sj.store_name + suffix if sj.store_name else generated) + "-store"
            factory = (Stores.in_memory_window_store if builder.store_type() == "in_memory"
                       else Stores.persistent_window_store)
            supplier = factory(store_name, retention, size, True)
        sb = Stores.window_store_builder(supplier, key_serde, value_serde)
        if sj.logging_enabled:
            sb.with_logging_enabled(sj.log_config)
        else:
            sb.with_logging_disabled()
        return sb

    if sj.this_store_supplier is not None and sj.other_store_supplier is not None \
            and sj.this_store_supplier.name() == sj.other_store_supplier.name():
        raise StreamsException("Both StoreSuppliers have the same name.  StoreSuppliers must provide unique names")
    this_store = window_store(this_generated, this_suffix, sj.this_store_supplier, this_serde)
    other_store = window_store(other_generated, other_suffix, sj.other_store_supplier, other_serde)

    outer_store_name = None
    outer_builder = None
    outer_serdes = None
    if left_outer and windows.spurious_result_fix:
        shared_suffix = "-outer-shared-join" if right_outer else "-left-shared-join"
        if sj.this_store_supplier is not None:
            base = sj.this_store_supplier.name() + shared_suffix
        elif sj.store_name is not None:
            base = sj.store_name + shared_suffix
        else:
            base = OUTERSHARED_NAME + this_generated[len(OUTERTHIS_NAME if right_outer else JOINTHIS_NAME):]
        outer_store_name = base + "-store"
        in_memory = sj.this_store_supplier is not None and getattr(sj.this_store_supplier, "kind", None) == "memory"
        kserde = _OuterKeySerde(key_serde)
        vserde = _LeftOrRightListSerde(this_serde, other_serde)
        outer_serdes = (kserde, vserde)
        outer_builder = Stores.key_value_store_builder(_kv_supplier(builder, outer_store_name, in_memory), kserde,
                                                       vserde)
        if sj.logging_enabled:
            outer_builder.with_logging_enabled(sj.log_config)
        else:
            outer_builder.with_logging_disabled()

    trackers = _TimeTrackers()
    topology.add_processor(this_windowed, KStreamJoinWindowSupplier(this_store.name()), left._name)
    topology.add_processor(other_windowed, KStreamJoinWindowSupplier(other_store.name()), right._name)
    topology.add_processor(join_this, KStreamKStreamJoinSupplier(other_store.name(), windows, joiner, left_outer,
                                                                 outer_store_name, True, trackers, outer_serdes),
                           this_windowed)
    topology.add_processor(join_other, KStreamKStreamJoinSupplier(this_store.name(), windows, joiner, right_outer,
                                                                  outer_store_name, False, trackers, outer_serdes),
                           other_windowed)
    topology.add_processor(merge, _PassThroughSupplier(), join_this, join_other)
    topology.add_state_store(this_store, this_windowed, join_other)
    topology.add_state_store(other_store, other_windowed, join_this)
    if outer_builder is not None:
        topology.add_state_store(outer_builder, join_this, join_other)
    return KStream(builder, merge, key_serde, None, set(left._source_topics) | set(right._source_topics), False)


class _PassThroughSupplier:
    def __call__(self):
        return _PassThrough()


class _PassThrough(Processor):
    def init(self, context):
        self.context = context

    def process(self, record):
        self.context.forward(record)


# -------------------------------------------------------------------------------------------- stream-table join

class KStreamKTableJoinSupplier:
    def __init__(self, value_getter_supplier, joiner, left_join):
        self.value_getter_supplier = value_getter_supplier
        self.joiner = joiner
        self.left_join = left_join

    def __call__(self):
        return _StreamTableJoinProcessor(self.value_getter_supplier.get(), self.joiner, self.left_join)


class _StreamTableJoinProcessor(Processor):
    def __init__(self, getter, joiner, left_join):
        self.getter = getter
        self.joiner = joiner
        self.left_join = left_join

    def init(self, context):
        self.context = context
        self.getter.init(context)

    def process(self, record):
        key = record.key
        if not (self.left_join and key is None and record.value is not None):
            if key is None or record.value is None:
                record_dropped(self.context, "null join key or value")
                return
        vat = self.getter.get(key) if key is not None else None
        other = vat.value if vat is not None else None
        if self.left_join or other is not None:
            self.context.forward(record.with_value(self.joiner(key, record.value, other)))

    def close(self):
        self.getter.close()


def stream_table_join(stream, table, joiner, joined, kind):
    """See the module docstring."""
    from kbroker.streams.dsl.kstream import KStream
    if kind not in ("inner", "left"):
        raise TopologyException("a stream-table join is inner or left, got %r" % (kind,))
    jd = joined if joined is not None else Joined()
    if not isinstance(jd, Joined):
        raise TopologyException("a stream-table join takes a Joined, got %r" % (jd,))
    if jd.grace_period_ms is not None:
        raise TopologyException("KTable must be versioned to use a grace period in a stream table join.")
    builder = stream._builder
    if stream._repartition_required:
        stream = stream._repartition_for_join(jd.name if jd.name else stream._name, jd.key_serde, jd.value_serde)
    builder.copartition(stream, table)
    name = builder.name_or_generate(jd.name, LEFTJOIN_NAME if kind == "left" else JOIN_NAME)
    getter = table._value_getter_supplier()
    topology = builder._topology
    topology.add_processor(name, KStreamKTableJoinSupplier(getter, joiner, kind == "left"), stream._name)
    stores = list(getter.store_names())
    if stores:
        topology.connect_processor_and_state_stores(name, *stores)
    key_serde = jd.key_serde if jd.key_serde is not None else stream._key_serde
    return KStream(builder, name, key_serde, None, set(stream._source_topics) | set(table._source_topics), False)


# --------------------------------------------------------------------------------------------- table-table join

class _TableJoinSide:
    """One side of a table-table join (Kafka's KTableKTableInnerJoin / LeftJoin / RightJoin / OuterJoin): an
    update of this side's table joined with the other side's current value. ``mode``: "inner", "left" (this is
    the left table of a left join), "right" (this is the right table of a left join), "outer"."""

    def __init__(self, other_getter_supplier, joiner, mode, this_is_left):
        self.other = other_getter_supplier
        self.joiner = joiner
        self.mode = mode
        self.this_is_left = this_is_left
        self.send_old_values = False

    def enable_sending_old_values(self, force_materialization=True):
        self.send_old_values = True
        return True

    def __call__(self):
        return _TableJoinProcessor(self, self.other.get())


class _TableJoinProcessor(Processor):
    def __init__(self, s, getter):
        self.s = s
        self.getter = getter
        self.send_old_values = s.send_old_values

    def init(self, context):
        self.context = context
        self.getter.init(context)

    def _j(self, this_value, other_value):
        if self.s.this_is_left:
            return self.s.joiner(self.key, this_value, other_value)
        return self.s.joiner(self.key, other_value, this_value)

    def process(self, record):
        if record.key is None:
            record_dropped(self.context, "null key")
            return
        change = record.value
        self.key = record.key
        vat = self.getter.get(record.key)
        other = vat.value if vat is not None else None
        mode = self.s.mode
        new = old = None
        if mode == "inner":
            if other is None:
                return
            ts = max(record.timestamp, vat.timestamp)
            if change.new_value is not None:
                new = self._j(change.new_value, other)
            if self.send_old_values and change.old_value is not None:
                old = self._j(change.old_value, other)
        elif mode == "left":
            if other is None:
                if change.new_value is None and change.old_value is None:
                    return
                ts = record.timestamp
            else:
                ts = max(record.timestamp, vat.timestamp)
            if change.new_value is not None:
                new = self._j(change.new_value, other)
            if self.send_old_values and change.old_value is not None:
                old = self._j(change.old_value, other)
        elif mode == "right":
            if other is None:
                return
            ts = max(record.timestamp, vat.timestamp)
            new = self._j(change.new_value, other)
            if self.send_old_values:
                old = self._j(change.old_value, other)
        else:
            if other is None:
                if change.new_value is None and change.old_value is None:
                    return
                ts = record.timestamp
            else:
                ts = max(record.timestamp, vat.timestamp)
            if other is not None or change.new_value is not None:
                new = self._j(change.new_value, other)
            if self.send_old_values and (other is not None or change.old_value is not None):
                old = self._j(change.old_value, other)
        self.context.forward(record.with_value(Change(new, old, change.is_latest)).with_timestamp(ts))

    def close(self):
        self.getter.close()


class KTableKTableJoinMergerSupplier:
    """"KTABLE-MERGE-<n>": forwards both sides' results (materializing them when asked); the KTable supplier of
    the join's result (``view()`` / ``enable_sending_old_values``)."""

    def __init__(self, this_side, other_side, this_getters, other_getters, joiner, kind, queryable_name):
        self.this_side = this_side
        self.other_side = other_side
        self.this_getters = this_getters
        self.other_getters = other_getters
        self.joiner = joiner
        self.kind = kind
        self.queryable_name = queryable_name
        self.send_old_values = False

    def enable_sending_old_values(self, force_materialization=True):
        self.this_side.enable_sending_old_values()
        self.other_side.enable_sending_old_values()
        self.send_old_values = True
        return True

    def view(self):
        if self.queryable_name is not None:
            from kbroker.streams.dsl.nodes import MaterializedValueGetterSupplier
            return MaterializedValueGetterSupplier(self.queryable_name)
        return _JoinValueGetterSupplier(self)

    def __call__(self):
        return _JoinMergerProcessor(self.queryable_name, self.send_old_values)


class _JoinMergerProcessor(Processor):
    def __init__(self, store_name, send_old_values):
        self.store_name = store_name
        self.send_old_values = send_old_values

    def init(self, context):
        from kbroker.streams.dsl.nodes import TimestampedKV
        self.context = context
        self.store = self.forwarder = None
        if self.store_name is not None:
            raw = context.get_state_store(self.store_name)
            self.store = TimestampedKV(raw)
            self.forwarder = TupleForwarder(raw, context, self.send_old_values)

    def process(self, record):
        change = record.value
        if self.store is not None:
            self.store.put(record.key, change.new_value, record.timestamp)
            self.forwarder.maybe_forward(record)
        elif self.send_old_values:
            self.context.forward(record)
        else:
            self.context.forward(record.with_value(Change(change.new_value, None, change.is_latest)))


class _JoinValueGetterSupplier:
    """The join result's value computed from both sides' getters (Kafka's KTableKTable*JoinValueGetter)."""

    def __init__(self, merger):
        self.m = merger

    def store_names(self):
        return list(self.m.this_getters.store_names()) + list(self.m.other_getters.store_names())

    def get(self):
        return _JoinValueGetter(self.m.this_getters.get(), self.m.other_getters.get(), self.m.joiner, self.m.kind)


class _JoinValueGetter:
    def __init__(self, left, right, joiner, kind):
        self.left = left
        self.right = right
        self.joiner = joiner
        self.kind = kind

    def init(self, context):
        self.left.init(context)
        self.right.init(context)

    def get(self, key):
        lv = self.left.get(key)
        if lv is None and self.kind != "outer":
            return None
        rv = self.right.get(key)
        if self.kind == "inner" and rv is None:
            return None
        if lv is None and rv is None:
            return None
        ts = max(lv.timestamp if lv is not None else -1, rv.timestamp if rv is not None else -1)
        return ValueAndTimestamp(self.joiner(key, lv.value if lv is not None else None,
                                             rv.value if rv is not None else None), ts)

    def close(self):
        self.left.close()
        self.right.close()


def table_table_join(left, right, joiner, kind, named=None, materialized=None):
    """See the module docstring; ``joiner(key, left_value, right_value)`` (S3 adapts Kafka's 2-argument
    ValueJoiner)."""
    from kbroker.streams.dsl.ktable import KTable
    if kind not in ("inner", "left", "outer"):
        raise ValueError("join kind must be inner, left or outer, got %r" % (kind,))
    if materialized is not None and not isinstance(materialized, Materialized):
        raise TopologyException("materialized must be a Materialized, got %r" % (materialized,))
    if isinstance(named, TableJoined):
        named = named.name
    builder = left._builder
    topology = builder._topology
    store_name = None
    if materialized is not None:
        store_name = materialized.store_name or builder.new_store_name(KTABLE_MERGE_NAME)
    merge = builder.name_or_generate(named, KTABLE_MERGE_NAME)
    builder.copartition(left, right)
    left_outer = kind in ("left", "outer")
    right_outer = kind == "outer"
    if left_outer:
        left._enable_sending_old_values(True)
    if right_outer:
        right._enable_sending_old_values(True)
    left_getters = left._value_getter_supplier()
    right_getters = right._value_getter_supplier()
    mode_this, mode_other = {"inner": ("inner", "inner"), "left": ("left", "right"),
                             "outer": ("outer", "outer")}[kind]
    this_side = _TableJoinSide(right_getters, joiner, mode_this, True)
    other_side = _TableJoinSide(left_getters, joiner, mode_other, False)
    name_of = _name_of(named)
    join_this = builder.suffix_or_generate(name_of, "-join-this", KTABLE_JOINTHIS_NAME)
    join_other = builder.suffix_or_generate(name_of, "-join-other", KTABLE_JOINOTHER_NAME)
    topology.add_processor(join_this, this_side, left._name)
    topology.add_processor(join_other, other_side, right._name)
    key_serde = left._key_serde
    value_serde = None
    queryable = None
    if materialized is not None:
        if materialized.key_serde is not None:
            key_serde = materialized.key_serde
        value_serde = materialized.value_serde
        queryable = store_name
    merger = KTableKTableJoinMergerSupplier(this_side, other_side, left_getters, right_getters, joiner, kind,
                                            queryable)
    topology.add_processor(merge, merger, join_this, join_other)
    for proc, getters in ((join_this, right_getters), (join_other, left_getters)):
        names = list(getters.store_names())
        if names:
            topology.connect_processor_and_state_stores(proc, *names)
    if materialized is not None:
        topology.add_state_store(builder.kv_store_builder(store_name, materialized, key_serde, value_serde), merge)
    return KTable(builder, merge, key_serde, value_serde, set(left._source_topics) | set(right._source_topics),
                  queryable, merger)
