"""The DSL's processors: what ``KStream``/``KTable``/``KGroupedStream``/``KGroupedTable`` operators put in the
topology (Kafka's KStreamFilter, KStreamMap, ..., KTableSource, KStreamAggregate, KTableAggregate, ...).

Each operator registers a *supplier* (a zero-argument callable returning a new Processor per task). Suppliers of
KTable operators are objects with state the DSL may still change after they are registered and before the
topology runs -- ``send_old_values`` (a downstream needs the old value: KGroupedTable subtractors, table-table
joins) and, for source tables, ``materialize()`` -- exactly as Kafka's suppliers, since processors are created
only when a task starts.

KTable processors forward ``Record(key, Change(new_value, old_value))``: ``old_value`` is None unless the
supplier sends old values. A KTable update is stored in a *timestamped* key-value store (value + the timestamp of
the update, Kafka's ValueAndTimestamp); an aggregate's timestamp is the max of the records that made it.

Caching: when the store has a caching layer (``set_flush_listener`` returns True), the processor does not forward;
the cache forwards the latest (new, old) per key when it is flushed (commit) or evicts -- "one update per key per
commit". Without caching every update is forwarded at once.

Null handling (Kafka's): stream aggregations drop records with a null key or value (counted as dropped records);
table sources drop null keys; a null value in a table is a delete (tombstone) and is forwarded as Change(None,
old). KGroupedTable aggregations refuse a null key with StreamsException.
"""
import logging
from typing import Any, NamedTuple

from kbroker.streams.errors import StreamsException
from kbroker.streams.keyvalue import KeyValue
from kbroker.streams.processor import Processor, Record
from kbroker.streams.serdes import Serde, as_deserializer, as_serializer
from kbroker.streams.state.base import ValueAndTimestamp
from kbroker.streams.state.caching import cache_size_from_config

log = logging.getLogger(__name__)

__all__ = ["Change", "ChangedSerde", "record_dropped", "TimestampedKV", "TupleForwarder"]


# ----------------------------------------------------------------------------------------------------------------
# Change and its wire format

class Change(NamedTuple):
    """A KTable update (Kafka's Change): the new value (None = deleted) and the old one (None unless sent)."""
    new_value: Any
    old_value: Any = None
    is_latest: bool = True

    def __str__(self):
        return "(%s<-%s)" % (_java_str(self.new_value), _java_str(self.old_value))


def _java_str(v):
    return "null" if v is None else str(v)


def _zigzag_varint(n):
    z = (n << 1) ^ (n >> 31)
    z &= 0xFFFFFFFF
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_zigzag_varint(data):
    value = shift = 0
    for i, b in enumerate(data):
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), i + 1
        shift += 7
        if shift > 28:
            break
    raise StreamsException("malformed varint in a Change value")


class ChangedSerde(Serde):
    """Kafka's ChangedSerializer/ChangedDeserializer (3.x+ format), used on KGroupedTable repartition topics:

        <old bytes><0x00>                              only the old value
        <new bytes><0x01>                              only the new value
        <zigzag varint len(new)><new bytes><old bytes><0x02>   both (same grouping key before and after)

    Both values null is refused (Kafka's "Both old and new values are null in ChangeSerializer")."""

    name = "Changed"

    def __init__(self, inner):
        self.inner = inner

    def set_if_unset(self, default_key_serde, default_value_serde):
        """Kafka's ChangedSerializer.setIfUnset: no inner serde given -> the app's default value serde (the
        task calls this when it builds its sinks and sources)."""
        if self.inner is None:
            self.inner = default_value_serde

    def serialize(self, topic, change):
        if change is None:
            return None
        ser = as_serializer(self.inner)
        new = ser(topic, change.new_value) if change.new_value is not None else None
        old = ser(topic, change.old_value) if change.old_value is not None else None
        if new is not None and old is not None:
            return _zigzag_varint(len(new)) + new + old + b"\x02"
        if new is not None:
            return new + b"\x01"
        if old is not None:
            return old + b"\x00"
        raise StreamsException("Both old and new values are null in ChangeSerializer, which is not allowed.")

    def deserialize(self, topic, data):
        if data is None:
            return None
        if not data:
            raise StreamsException("empty Change value")
        de = as_deserializer(self.inner)
        flag = data[-1]
        body = data[:-1]
        if flag == 1:
            return Change(de(topic, body), None)
        if flag == 0:
            return Change(None, de(topic, body))
        if flag == 2:
            n, used = _read_zigzag_varint(body)
            new = body[used:used + n]
            old = body[used + n:]
            return Change(de(topic, new), de(topic, old))
        raise StreamsException("Encoding flag %d of a Change value is not 0, 1 or 2" % flag)


# ----------------------------------------------------------------------------------------------------------------
# helpers shared by the processors

def record_dropped(context, reason):
    """Count a dropped record in the task's metrics ("dropped-records", Kafka's dropped-records sensor) and log it
    with the input record's coordinates, as Kafka's warning does."""
    metrics = getattr(context, "metrics", None)
    if callable(metrics):
        metrics = metrics()
    if metrics is None:
        task = getattr(context, "_task", None) or getattr(context, "task", None)
        metrics = getattr(task, "metrics", None)
    if isinstance(metrics, dict):
        metrics["dropped-records"] = metrics.get("dropped-records", 0) + 1
    md = context.record_metadata() if hasattr(context, "record_metadata") else None
    if md is not None:
        log.warning("Skipping record due to %s. topic=[%s] partition=[%s] offset=[%s]", reason, md.topic,
                    md.partition, md.offset)
    else:
        log.warning("Skipping record due to %s. Topic, partition, and offset not known.", reason)


def _cache_disabled(context):
    config = context.app_config() if hasattr(context, "app_config") else None
    try:
        return cache_size_from_config(config) == 0
    except (TypeError, ValueError):
        return False


def _unwrap(v):
    return v.value if isinstance(v, ValueAndTimestamp) else v


class TimestampedKV:
    """A KTable's store as (value, timestamp) pairs over whichever typed key-value store the stack gives:
    a timestamped store (values are ValueAndTimestamp) keeps the update timestamps; a plain store (a user's
    supplier) keeps values only and reports the timestamp of the record being processed."""

    __slots__ = ("store", "_timestamped")

    def __init__(self, store):
        self.store = store
        self._timestamped = bool(getattr(store, "timestamped", False) or getattr(store, "is_timestamped", False))

    def name(self):
        return self.store.name()

    def get(self, key):
        """ValueAndTimestamp or None."""
        v = self.store.get(key)
        if v is None:
            return None
        if isinstance(v, ValueAndTimestamp):
            if v.value is None:
                return None
            return v
        return ValueAndTimestamp(v, -1)

    def put(self, key, value, timestamp):
        if value is None:
            self.store.delete(key)
        elif self._timestamped:
            self.store.put(key, ValueAndTimestamp(value, timestamp))
        else:
            self.store.put(key, value)


class TupleForwarder:
    """Kafka's TimestampedTupleForwarder + TimestampedCacheFlushListener: forwards an update at once when the
    store has no cache, else registers a flush listener that forwards the cache's (new, old) per key. Without
    ``send_old_values`` the old value is dropped (None).

    A record cache of 0 bytes (cache.max.bytes.buffering / statestore.cache.max.bytes = 0) counts as no cache:
    Kafka strips the caching layers then (InternalTopologyBuilder.rewriteTopology), which is visible -- a cache
    never forwards an update whose new and old values are both null, a processor without one does."""

    def __init__(self, store, context, send_old_values):
        self.context = context
        self.send_old_values = send_old_values
        setter = getattr(store, "set_flush_listener", None)
        self.caching = False
        if setter is not None and not _cache_disabled(context):
            self.caching = bool(setter(self._on_flush, send_old_values))

    def maybe_forward(self, record):
        if self.caching:
            return
        if not self.send_old_values and record.value.old_value is not None:
            record = record.with_value(Change(record.value.new_value, None, record.value.is_latest))
        self.context.forward(record)

    def _on_flush(self, key, new, old, timestamp):
        if isinstance(new, ValueAndTimestamp):
            timestamp = new.timestamp
        self.context.forward(Record(key, Change(_unwrap(new), _unwrap(old) if self.send_old_values else None),
                                    timestamp))


def _as_key_value(kv):
    """A mapper result: KeyValue, a (key, value) tuple, or None."""
    if kv is None:
        return None
    if isinstance(kv, KeyValue):
        return kv
    try:
        k, v = kv
    except (TypeError, ValueError):
        raise StreamsException("a key-value mapper must return a KeyValue or a (key, value) pair, got %r" % (kv,)) \
            from None
    return KeyValue(k, v)


def _with_key(fn, with_key):
    """Kafka's ValueMapper vs ValueMapperWithKey: a mapper of ``value`` or of ``(key, value)``."""
    return fn if with_key else (lambda _k, v: fn(v))


# ----------------------------------------------------------------------------------------------------------------
# stateless KStream processors

class _Contextual(Processor):
    context = None

    def init(self, context):
        self.context = context


class KStreamFilter(_Contextual):
    def __init__(self, predicate, filter_not):
        self.predicate = predicate
        self.filter_not = filter_not

    def process(self, record):
        if bool(self.predicate(record.key, record.value)) != self.filter_not:
            self.context.forward(record)


class KStreamMap(_Contextual):
    """map / select_key: ``mapper(key, value) -> KeyValue``; a None result is an error as in Kafka (NPE)."""

    def __init__(self, mapper):
        self.mapper = mapper

    def process(self, record):
        kv = _as_key_value(self.mapper(record.key, record.value))
        if kv is None:
            raise StreamsException("The provided KeyValueMapper returned null which is not allowed.")
        self.context.forward(record.with_key(kv.key).with_value(kv.value))


class KStreamMapValues(_Contextual):
    def __init__(self, mapper):
        self.mapper = mapper    # (key, value) -> new value

    def process(self, record):
        self.context.forward(record.with_value(self.mapper(record.key, record.value)))


class KStreamFlatMap(_Contextual):
    def __init__(self, mapper):
        self.mapper = mapper

    def process(self, record):
        for kv in self.mapper(record.key, record.value) or ():
            kv = _as_key_value(kv)
            self.context.forward(record.with_key(kv.key).with_value(kv.value))


class KStreamFlatMapValues(_Contextual):
    def __init__(self, mapper):
        self.mapper = mapper

    def process(self, record):
        for v in self.mapper(record.key, record.value) or ():
            self.context.forward(record.with_value(v))


class KStreamPeek(_Contextual):
    def __init__(self, action, forward=True):
        self.action = action
        self.forward_downstream = forward

    def process(self, record):
        self.action(record.key, record.value)
        if self.forward_downstream:
            self.context.forward(record)


class KStreamPrint(_Contextual):
    """Kafka's KStreamPrint: one line "[label]: key, value" per record (Java's "null" for None), flushed."""

    def __init__(self, printed, label):
        self.printed = printed
        self.label = printed.label if printed.label is not None else label
        self.out = None
        self.owned = False

    def init(self, context):
        super().init(context)
        self.out, self.owned = self.printed._open()

    def process(self, record):
        if self.printed.mapper is not None:
            text = str(self.printed.mapper(record.key, record.value))
        else:
            text = "%s, %s" % (_java_str(record.key), _java_str(record.value))
        self.out.write("[%s]: %s\n" % (self.label, text))
        self.out.flush()

    def close(self):
        if self.owned and self.out is not None:
            self.out.close()
        self.out = None


class KStreamBranch(_Contextual):
    """split()/branch(): the first matching predicate's child gets the record; a default child (one more child
    name than predicates) gets the rest. ``predicates``/``child_names`` are shared lists the DSL keeps
    appending to while branches are declared (Kafka's KStreamBranch)."""

    def __init__(self, predicates, child_names):
        self.predicates = predicates
        self.child_names = child_names

    def process(self, record):
        for i, predicate in enumerate(self.predicates):
            if predicate(record.key, record.value):
                self.context.forward(record, self.child_names[i])
                return
        if len(self.child_names) > len(self.predicates):
            self.context.forward(record, self.child_names[len(self.predicates)])


class PassThrough(_Contextual):
    def process(self, record):
        self.context.forward(record)


class KTableToStream(_Contextual):
    """KTable.to_stream: the Change's new value (None for a delete: a tombstone on the stream)."""

    def process(self, record):
        self.context.forward(record.with_value(record.value.new_value))


class Supplier:
    """A processor supplier for a fixed processor class and arguments."""

    def __init__(self, cls, *args):
        self.cls = cls
        self.args = args

    def __call__(self):
        return self.cls(*self.args)


# ----------------------------------------------------------------------------------------------------------------
# KTable processors (suppliers with send_old_values / materialization flags)

class _KTableSupplier:
    """Base of KTable processor suppliers. ``enable_sending_old_values(force_materialization)`` returns whether
    this node can now send old values (Kafka's KTableProcessorSupplier)."""

    send_old_values = False
    queryable_name = None

    def enable_sending_old_values(self, force_materialization):
        self.send_old_values = True
        return True

    def view(self):
        """A ValueGetterSupplier reading this table's current values (for joins)."""
        return MaterializedValueGetterSupplier(self.queryable_name)


class KTableSourceSupplier(_KTableSupplier):
    """builder.table() / KStream.to_table(): stores each update (when materialized) and forwards Change(new, old).
    A source table is materialized when the user named its store, or when a downstream needs old values or a
    value getter (``materialize()``)."""

    def __init__(self, store_name, queryable_name, on_materialize=None):
        self.store_name = store_name
        self.queryable_name = queryable_name
        self._on_materialize = on_materialize

    def materialized(self):
        return self.queryable_name is not None

    def materialize(self):
        if self.queryable_name is None:
            self.queryable_name = self.store_name
            if self._on_materialize is not None:
                self._on_materialize()

    def enable_sending_old_values(self, force_materialization):
        if not force_materialization and not self.materialized():
            return False
        self.materialize()
        self.send_old_values = True
        return True

    def __call__(self):
        return _KTableSourceProcessor(self.queryable_name, self.send_old_values)


class _KTableSourceProcessor(_Contextual):
    def __init__(self, store_name, send_old_values):
        self.store_name = store_name
        self.send_old_values = send_old_values
        self.store = self.forwarder = None

    def init(self, context):
        super().init(context)
        if self.store_name is not None:
            raw = context.get_state_store(self.store_name)
            self.store = TimestampedKV(raw)
            self.forwarder = TupleForwarder(raw, context, self.send_old_values)

    def process(self, record):
        if record.key is None:
            record_dropped(self.context, "null key")
            return
        if self.store is None:
            self.context.forward(record.with_value(Change(record.value, None)))
            return
        old = self.store.get(record.key)
        if old is not None and old.timestamp >= 0 and record.timestamp < old.timestamp:
            log.warning("Detected out-of-order KTable update for %s, old timestamp=[%d] new timestamp=[%d].",
                        self.store.name(), old.timestamp, record.timestamp)
        self.store.put(record.key, record.value, record.timestamp)
        self.forwarder.maybe_forward(record.with_value(Change(record.value, _unwrap(old))))


class KTableFilterSupplier(_KTableSupplier):
    def __init__(self, parent, predicate, filter_not, queryable_name):
        self.parent = parent              # the parent KTable (dsl.ktable.KTable)
        self.predicate = predicate
        self.filter_not = filter_not
        self.queryable_name = queryable_name
        self.send_old_values = parent._enable_sending_old_values(False)

    def enable_sending_old_values(self, force_materialization):
        if self.queryable_name is not None:
            self.send_old_values = True
            return True
        if self.parent._enable_sending_old_values(force_materialization):
            self.send_old_values = True
        return self.send_old_values

    def compute(self, key, value):
        if value is not None and bool(self.predicate(key, value)) != self.filter_not:
            return value
        return None

    def view(self):
        if self.queryable_name is not None:
            return MaterializedValueGetterSupplier(self.queryable_name)
        parent = self.parent._value_getter_supplier()

        def compute(key, vat):
            if vat is None:
                return None
            return vat if self.compute(key, vat.value) is not None else None
        return DerivedValueGetterSupplier(parent, compute)

    def __call__(self):
        return _KTableFilterProcessor(self, self.queryable_name, self.send_old_values)


class _KTableFilterProcessor(_Contextual):
    def __init__(self, supplier, store_name, send_old_values):
        self.s = supplier
        self.store_name = store_name
        self.send_old_values = send_old_values
        self.store = self.forwarder = None

    def init(self, context):
        super().init(context)
        if self.store_name is not None:
            raw = context.get_state_store(self.store_name)
            self.store = TimestampedKV(raw)
            self.forwarder = TupleForwarder(raw, context, self.send_old_values)

    def process(self, record):
        key, change = record.key, record.value
        new = self.s.compute(key, change.new_value)
        old = None
        if self.send_old_values:
            old = _unwrap(self.store.get(key)) if self.store is not None else self.s.compute(key, change.old_value)
            if old is None and new is None:
                return      # nothing passed the filter before or now: unnecessary to forward (Kafka's)
        if self.store is not None:
            self.store.put(key, new, record.timestamp)
            self.forwarder.maybe_forward(record.with_value(Change(new, old, change.is_latest)))
        else:
            self.context.forward(record.with_value(Change(new, old, change.is_latest)))


class KTableMapValuesSupplier(_KTableSupplier):
    def __init__(self, parent, mapper, queryable_name):
        self.parent = parent
        self.mapper = mapper                # (key, value) -> new value
        self.queryable_name = queryable_name

    def enable_sending_old_values(self, force_materialization):
        if self.queryable_name is not None:
            self.send_old_values = True
            return True
        if self.parent._enable_sending_old_values(force_materialization):
            self.send_old_values = True
        return self.send_old_values

    def compute(self, key, value):
        return None if value is None else self.mapper(key, value)

    def view(self):
        if self.queryable_name is not None:
            return MaterializedValueGetterSupplier(self.queryable_name)
        parent = self.parent._value_getter_supplier()

        def compute(key, vat):
            if vat is None:
                return None
            return ValueAndTimestamp(self.mapper(key, vat.value), vat.timestamp)
        return DerivedValueGetterSupplier(parent, compute)

    def __call__(self):
        return _KTableMapValuesProcessor(self, self.queryable_name, self.send_old_values)


class _KTableMapValuesProcessor(_KTableFilterProcessor):
    def process(self, record):
        key, change = record.key, record.value
        new = self.s.compute(key, change.new_value)
        old = None
        if self.send_old_values:
            old = _unwrap(self.store.get(key)) if self.store is not None else self.s.compute(key, change.old_value)
        if self.store is not None:
            self.store.put(key, new, record.timestamp)
            self.forwarder.maybe_forward(record.with_value(Change(new, old, change.is_latest)))
        else:
            self.context.forward(record.with_value(Change(new, old, change.is_latest)))


# ---- value getters (used by S4's joins through KTable._value_getter_supplier())

class MaterializedValueGetterSupplier:
    """Reads a materialized table's store: ``get().init(context)`` then ``get(key) -> ValueAndTimestamp|None``.
    ``store_names()`` are the stores a processor using it must be connected to."""

    def __init__(self, store_name):
        self.store_name = store_name

    def store_names(self):
        return [self.store_name]

    def get(self):
        return _StoreGetter(self.store_name)


class _StoreGetter:
    def __init__(self, store_name):
        self.store_name = store_name
        self.store = None

    def init(self, context):
        self.store = TimestampedKV(context.get_state_store(self.store_name))

    def get(self, key):
        return self.store.get(key)

    def close(self):
        pass


class DerivedValueGetterSupplier:
    """A getter computing a non-materialized table's value from its parent's (filter / map_values views)."""

    def __init__(self, parent, compute):
        self.parent = parent
        self.compute = compute

    def store_names(self):
        return self.parent.store_names()

    def get(self):
        return _DerivedGetter(self.parent.get(), self.compute)


class _DerivedGetter:
    def __init__(self, parent, compute):
        self.parent = parent
        self.compute = compute

    def init(self, context):
        self.parent.init(context)

    def get(self, key):
        return self.compute(key, self.parent.get(key))

    def close(self):
        self.parent.close()


# ----------------------------------------------------------------------------------------------------------------
# aggregations

class KStreamAggregateSupplier(_KTableSupplier):
    """KGroupedStream.count/aggregate (``reducer`` None) and reduce (``reducer`` set), Kafka's KStreamAggregate /
    KStreamReduce: new aggregate = aggregator(key, value, old or initializer()); timestamp = max(record, old)."""

    def __init__(self, store_name, initializer=None, aggregator=None, reducer=None):
        self.store_name = store_name
        self.queryable_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator
        self.reducer = reducer

    def __call__(self):
        return _KStreamAggregateProcessor(self, self.send_old_values)


class _KStreamAggregateProcessor(_Contextual):
    def __init__(self, supplier, send_old_values):
        self.s = supplier
        self.send_old_values = send_old_values

    def init(self, context):
        super().init(context)
        raw = context.get_state_store(self.s.store_name)
        self.store = TimestampedKV(raw)
        self.forwarder = TupleForwarder(raw, context, self.send_old_values)

    def process(self, record):
        if record.key is None or record.value is None:
            record_dropped(self.context, "null key or value")
            return
        old = self.store.get(record.key)
        s = self.s
        if s.reducer is not None:
            if old is None:
                old_agg, new_agg, ts = None, record.value, record.timestamp
            else:
                old_agg = old.value
                new_agg = s.reducer(old_agg, record.value)
                ts = max(record.timestamp, old.timestamp)
        else:
            if old is None:
                old_agg, ts = s.initializer(), record.timestamp
            else:
                old_agg, ts = old.value, max(record.timestamp, old.timestamp)
            new_agg = s.aggregator(record.key, record.value, old_agg)
        self.store.put(record.key, new_agg, ts)
        self.forwarder.maybe_forward(
            Record(record.key, Change(new_agg, old_agg if self.send_old_values else None), ts, record.headers))


class KTableRepartitionMapSupplier:
    """KTable.group_by's selector (Kafka's KTableRepartitionMap): maps the new and the old value to (new key,
    value); same key before and after -> one Change(new, old) record; else a subtract record Change(None, old)
    under the old key then an add record Change(new, None) under the new key. A null key is an error."""

    def __init__(self, selector):
        self.selector = selector

    def __call__(self):
        return _KTableRepartitionMapProcessor(self.selector)


class _KTableRepartitionMapProcessor(_Contextual):
    def __init__(self, selector):
        self.selector = selector

    def process(self, record):
        if record.key is None:
            raise StreamsException("Record key for the grouping KTable should not be null.")
        change = record.value
        new = _as_key_value(self.selector(record.key, change.new_value)) if change.new_value is not None else None
        old = _as_key_value(self.selector(record.key, change.old_value)) if change.old_value is not None else None
        new_ok = new is not None and new.key is not None and new.value is not None
        old_ok = old is not None and old.key is not None and old.value is not None
        if new_ok and old_ok and new.key == old.key:
            self.context.forward(record.with_key(old.key).with_value(Change(new.value, old.value)))
            return
        if old_ok:
            self.context.forward(record.with_key(old.key).with_value(Change(None, old.value)))
        if new_ok:
            self.context.forward(record.with_key(new.key).with_value(Change(new.value, None)))


class KTableAggregateSupplier(_KTableSupplier):
    """KGroupedTable.count/aggregate (``reducer`` None) and reduce (adder/subtractor reducers), Kafka's
    KTableAggregate / KTableReduce: the old value is subtracted, then the new one added."""

    def __init__(self, store_name, initializer=None, adder=None, subtractor=None, reduce=False):
        self.store_name = store_name
        self.queryable_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor
        self.reduce = reduce

    def __call__(self):
        return _KTableAggregateProcessor(self, self.send_old_values)


class _KTableAggregateProcessor(_KStreamAggregateProcessor):
    def process(self, record):
        s = self.s
        if record.key is None:
            raise StreamsException("Record key for KTable %s operator with state %s should not be null."
                                   % ("reduce" if s.reduce else "aggregate", s.store_name))
        change = record.value
        old = self.store.get(record.key)
        old_agg = old.value if old is not None else None
        ts = record.timestamp
        if change.old_value is not None and old_agg is not None:
            mid = (s.subtractor(old_agg, change.old_value) if s.reduce
                   else s.subtractor(record.key, change.old_value, old_agg))
            ts = max(record.timestamp, old.timestamp)
        else:
            mid = old_agg
        if change.new_value is not None:
            if s.reduce:
                if mid is None:
                    new_agg = change.new_value
                else:
                    new_agg = s.adder(mid, change.new_value)
                    if old is not None:
                        ts = max(record.timestamp, old.timestamp)
            else:
                new_agg = s.adder(record.key, change.new_value, s.initializer() if mid is None else mid)
                if old is not None:
                    ts = max(record.timestamp, old.timestamp)
        else:
            new_agg = mid
        self.store.put(record.key, new_agg, ts)
        self.forwarder.maybe_forward(
            Record(record.key, Change(new_agg, old_agg if self.send_old_values else None), ts, record.headers))
