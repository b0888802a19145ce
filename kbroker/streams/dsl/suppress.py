"""KTable.suppress (Kafka's KTableSuppressProcessorSupplier + InMemoryTimeOrderedKeyValueChangeBuffer).

``suppress_table(table, suppressed)`` (S3's KTable.suppress) adds "KTABLE-SUPPRESS-<n>" (or the Suppressed's
name) with a buffer store ("KTABLE-SUPPRESS-STATE-STORE-<n>", or "<name>-store"). The processor buffers the
latest Change per key and emits it later:

- ``Suppressed.until_window_closes(...)`` (windowed tables only): buffer time = the window's end; an entry is
  emitted once ``observed stream time - grace >= window end``, grace being the windowed aggregation's (sessions:
  grace + gap, Kafka's GraphGraceSearchUtil). Tombstones are dropped (safe for final results). A table that is
  not (derived from) a windowed aggregation raises TopologyException.
- ``Suppressed.until_time_limit(ms, ...)``: buffer time = the timestamp of the key's FIRST buffered update (Kafka's
  non-resetting buffer: later updates replace the value but keep the key's place); emitted once ``observed
  stream time - ms >= that time``; tombstones are forwarded.

Observed stream time = the max timestamp of the records this processor has received; eviction only happens when
a record arrives (as Kafka: no wall-clock punctuation). Entries leave in (buffer time, serialized key) order; an
emitted record has the timestamp and headers of the key's latest update and value Change(latest new, latest
old).

Bounds (BufferConfig): more than ``max_records`` keys or ``max_bytes`` bytes (Kafka's estimate: 8 + key bytes +
prior/old/new value bytes + 20 + topic length + header bytes per entry) -> "EMIT": the oldest entries are emitted
early until within bounds; "SHUT_DOWN": StreamsException "<node> buffer exceeded its max capacity. Currently
[n/max] records and [b/max] bytes." (the task fails, as Kafka's).

Durability: the buffer lives in an in-memory key-value store (serialized key -> entry bytes) that is change-logged
("<app>-<store>-changelog") unless ``BufferConfig.with_logging_disabled()``; a restarted task rebuilds the buffer
from it. The entry layout is ours (not Kafka's buffer changelog format): see ``_encode_entry``.
"""
import bisect
import struct

from kbroker.streams.dsl.nodes import Change
from kbroker.streams.dsl.windows import Suppressed
from kbroker.streams.errors import StreamsException, TopologyException
from kbroker.streams.processor import Processor, Record
from kbroker.streams.serdes import Serdes, as_deserializer, as_serializer
from kbroker.streams.state.base import ValueAndTimestamp

__all__ = ["suppress_table", "KTableSuppressSupplier"]

SUPPRESS_NAME = "KTABLE-SUPPRESS-"
NO_TIMESTAMP = -1

_HEAD = struct.Struct(">qqiq")       # buffer time, record timestamp, partition, offset
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")


def _put_bytes(out, b):
    out += _I32.pack(-1 if b is None else len(b))
    if b is not None:
        out += b


def _get_bytes(data, i):
    n = _I32.unpack_from(data, i)[0]
    i += 4
    if n < 0:
        return None, i
    return bytes(data[i:i + n]), i + n


class _Entry:
    """One buffered key: serialized prior/old/new values and the record context of the latest update.
    ``prior``: the value before the first buffered update (what a value getter sees while buffered)."""
    __slots__ = ("time", "prior", "old", "new", "timestamp", "headers", "topic", "partition", "offset",
                 "prior_is_old")

    def size(self, key):
        n = 8 + len(key)
        n += len(self.prior) if self.prior is not None else 0
        n += len(self.old) if self.old is not None and not self.prior_is_old else 0
        n += len(self.new) if self.new is not None else 0
        # record context (Kafka's ProcessorRecordContext.residentMemorySizeEstimate)
        n += 8 + 8 + 4 + (len(self.topic) if self.topic else 0)
        for hk, hv in self.headers:
            n += len(hk) + (len(hv) if hv is not None else 0)
        return n


def _encode_entry(e):
    """[8 time][8 record ts][4 partition][8 offset][1 prior_is_old][prior][old][new][topic][2 n headers]
    {[key][value]}; each byte field is [4-byte length, -1 = null][bytes]."""
    out = bytearray(_HEAD.pack(e.time, e.timestamp, e.partition, e.offset))
    out += b"\x01" if e.prior_is_old else b"\x00"
    _put_bytes(out, e.prior)
    _put_bytes(out, e.old)
    _put_bytes(out, e.new)
    _put_bytes(out, e.topic.encode("utf-8") if e.topic is not None else None)
    out += _U16.pack(len(e.headers))
    for hk, hv in e.headers:
        _put_bytes(out, hk.encode("utf-8"))
        _put_bytes(out, hv)
    return bytes(out)


def _decode_entry(data):
    e = _Entry()
    e.time, e.timestamp, e.partition, e.offset = _HEAD.unpack_from(data, 0)
    i = _HEAD.size
    e.prior_is_old = data[i] == 1
    i += 1
    e.prior, i = _get_bytes(data, i)
    e.old, i = _get_bytes(data, i)
    e.new, i = _get_bytes(data, i)
    topic, i = _get_bytes(data, i)
    e.topic = topic.decode("utf-8") if topic is not None else None
    (n,) = _U16.unpack_from(data, i)
    i += 2
    e.headers = []
    for _ in range(n):
        hk, i = _get_bytes(data, i)
        hv, i = _get_bytes(data, i)
        e.headers.append((hk.decode("utf-8"), hv))
    return e


class _Serdes:
    """The table's key/value serdes, None ones resolved to the app's defaults at the first init."""

    def __init__(self, key_serde, value_serde, wrap_default_key=None):
        self.key = key_serde
        self.value = value_serde
        self.wrap_default_key = wrap_default_key

    def resolve(self, context):
        if self.key is None:
            default = context.key_serde()
            self.key = self.wrap_default_key(default) if self.wrap_default_key is not None else default
        if self.value is None:
            self.value = context.value_serde()


class KTableSuppressSupplier:
    """The suppression node's supplier; also the KTable supplier of the suppressed table."""

    def __init__(self, suppressed, grace_ms, store_name, parent, serdes):
        self.kind = suppressed.kind
        self.buffer_config = suppressed.buffer_config
        # Kafka: final results wait for the window's grace; a time limit for the given time
        self.duration_ms = grace_ms if suppressed.kind == Suppressed.FINAL else suppressed.time_to_wait_ms
        self.store_name = store_name
        self.parent = parent
        self.serdes = serdes
        self.send_old_values = False
        self.queryable_name = None

    def enable_sending_old_values(self, force_materialization=True):
        ok = self.parent._enable_sending_old_values(force_materialization)
        self.send_old_values = ok
        return ok

    def view(self):
        return _SuppressValueGetterSupplier(self)

    def __call__(self):
        return _SuppressProcessor(self)


class _SuppressProcessor(Processor):
    def __init__(self, s):
        self.s = s
        self.observed = NO_TIMESTAMP
        self.final = s.kind == Suppressed.FINAL
        cfg = s.buffer_config
        self.max_records = cfg.max_records_
        self.max_bytes = cfg.max_bytes_
        self.strategy = cfg.strategy
        self.entries = {}      # key bytes -> _Entry
        self.order = []        # sorted [(buffer time, key bytes)]
        self.bytes = 0

    def init(self, context):
        self.context = context
        self.s.serdes.resolve(context)
        self.topic = "%s-%s-changelog" % (context.application_id(), self.s.store_name)
        self.ser_key = as_serializer(self.s.serdes.key)
        self.de_key = as_deserializer(self.s.serdes.key)
        self.ser_value = as_serializer(self.s.serdes.value)
        self.de_value = as_deserializer(self.s.serdes.value)
        self.store = context.get_state_store(self.s.store_name)
        # a restored buffer: rebuild the time index from the store
        for kv in list(self.store.all()):
            e = _decode_entry(kv.value)
            key = bytes(kv.key)
            self.entries[key] = e
            bisect.insort(self.order, (e.time, key))
            self.bytes += e.size(key)

    def _ser(self, v):
        return None if v is None else self.ser_value(self.topic, v)

    def process(self, record):
        self.observed = max(self.observed, record.timestamp)
        key = record.key
        if self.final:
            buffer_time = key.window.end
        else:
            buffer_time = record.timestamp
        self._put(buffer_time, record)
        self._enforce()

    def _put(self, buffer_time, record):
        key = self.ser_key(self.topic, record.key)
        change = record.value
        md = self.context.record_metadata()
        e = _Entry()
        e.old = self._ser(change.old_value)
        e.new = self._ser(change.new_value)
        e.timestamp = record.timestamp
        e.headers = list(record.headers)
        e.topic = md.topic if md is not None else None
        e.partition = md.partition if md is not None else -1
        e.offset = md.offset if md is not None else -1
        prev = self.entries.get(key)
        if prev is None:
            e.time = buffer_time
            e.prior = e.old
            e.prior_is_old = True
            bisect.insort(self.order, (e.time, key))
        else:
            # non-resetting: the key keeps its first buffer time and prior value
            e.time = prev.time
            e.prior = prev.prior
            e.prior_is_old = False
            self.bytes -= prev.size(key)
        self.entries[key] = e
        self.bytes += e.size(key)
        self.store.put(key, _encode_entry(e))

    def _over_capacity(self):
        return len(self.entries) > self.max_records or self.bytes > self.max_bytes

    def _enforce(self):
        expiry = self.observed - self.s.duration_ms
        while self.order and self.order[0][0] <= expiry:
            self._evict_first()
        if self._over_capacity():
            if self.strategy == "EMIT":
                while self.order and self._over_capacity():
                    self._evict_first()
            else:
                raise StreamsException("%s buffer exceeded its max capacity. Currently [%d/%d] records and [%d/%d] "
                                       "bytes." % (self.context.node_name(), len(self.entries), self.max_records,
                                                   self.bytes, self.max_bytes))

    def _evict_first(self):
        _time, key = self.order.pop(0)
        e = self.entries.pop(key)
        self.bytes -= e.size(key)
        self.store.delete(key)
        new = None if e.new is None else self.de_value(self.topic, e.new)
        if new is None and self.final:
            return      # a final result's tombstone: nothing to report downstream (Kafka drops it)
        old = None if e.old is None else self.de_value(self.topic, e.old)
        self.context.forward(Record(self.de_key(self.topic, key), Change(new, old), e.timestamp, e.headers))


class _SuppressValueGetterSupplier:
    """Kafka's suppression view: while a key is buffered, its value as before the buffered updates (the prior
    value); else the parent's."""

    def __init__(self, s):
        self.s = s

    def store_names(self):
        return [self.s.store_name] + list(self.s.parent._value_getter_supplier().store_names())

    def get(self):
        return _SuppressValueGetter(self.s, self.s.parent._value_getter_supplier().get())


class _SuppressValueGetter:
    def __init__(self, s, parent):
        self.s = s
        self.parent = parent

    def init(self, context):
        self.parent.init(context)
        self.s.serdes.resolve(context)
        self.topic = "%s-%s-changelog" % (context.application_id(), self.s.store_name)
        self.store = context.get_state_store(self.s.store_name)

    def get(self, key):
        raw = self.store.get(as_serializer(self.s.serdes.key)(self.topic, key))
        if raw is None:
            return self.parent.get(key)
        e = _decode_entry(raw)
        if e.prior is None:
            return None
        return ValueAndTimestamp(as_deserializer(self.s.serdes.value)(self.topic, e.prior), e.timestamp)

    def close(self):
        self.parent.close()


def _windowed_supplier(table):
    """The windowed aggregation this table derives from (Kafka's findAndVerifyWindowGrace walk), or None."""
    t = table
    while t is not None:
        supplier = getattr(t, "_supplier", None)
        if getattr(supplier, "grace_for_suppression", None) is not None:
            return supplier
        t = getattr(supplier, "parent", None)
    return None


def _windowed_default(supplier):
    """For a windowed table without a key serde: the app's default key serde wrapped as the windowed one."""
    from kbroker.streams.dsl.windows import SessionWindows, SlidingWindows
    from kbroker.streams.serdes import session_windowed_serde, time_windowed_serde
    w = supplier.windows
    if isinstance(w, SessionWindows):
        return session_windowed_serde
    size = w.time_difference_ms if isinstance(w, SlidingWindows) else w.size()
    return lambda inner: time_windowed_serde(inner, size)


def suppress_table(table, suppressed):
    """See the module docstring. Returns the suppressed KTable."""
    from kbroker.streams.dsl.ktable import KTable
    from kbroker.streams.state.stores import Stores
    if not isinstance(suppressed, Suppressed):
        raise ValueError("Custom subclasses of Suppressed are not supported.")
    builder = table._builder
    windowed = _windowed_supplier(table)
    if suppressed.kind == Suppressed.FINAL and windowed is None:
        raise TopologyException("Window close time is only defined for windowed computations. Got [%s]."
                                % (table._name,))
    grace = windowed.grace_for_suppression() if windowed is not None else None
    name = suppressed.name if suppressed.name is not None else builder.new_processor_name(SUPPRESS_NAME)
    store_name = name + "-store" if suppressed.name is not None else builder.new_store_name(SUPPRESS_NAME)
    supplier = KTableSuppressSupplier(suppressed, grace, store_name, table,
                                      _Serdes(table._key_serde, table._value_serde,
                                              _windowed_default(windowed) if windowed is not None else None))
    # the buffer keeps the old values (Kafka's supplier forces them upstream)
    table._enable_sending_old_values(True)
    sb = Stores.key_value_store_builder(Stores.in_memory_key_value_store(store_name), Serdes.ByteArray(),
                                        Serdes.ByteArray())
    sb.with_caching_disabled()
    cfg = suppressed.buffer_config
    if cfg.logging_enabled:
        sb.with_logging_enabled(cfg.log_config)
    else:
        sb.with_logging_disabled()
    topology = builder._topology
    topology.add_processor(name, supplier, table._name)
    topology.add_state_store(sb, name)
    return KTable(builder, name, table._key_serde, table._value_serde, table._source_topics, None, supplier)
