"""Windowed aggregations (Kafka's TimeWindowedKStream, SessionWindowedKStream and their processors
KStreamWindowAggregate, KStreamSlidingWindowAggregate, KStreamSessionWindowAggregate).

``KGroupedStream.windowed_by(TimeWindows | SlidingWindows)`` returns a TimeWindowedKStream,
``windowed_by(SessionWindows)`` a SessionWindowedKStream; their ``count`` / ``reduce`` / ``aggregate`` return a
KTable keyed by ``Windowed(key, Window(start, end))``. The window boundaries and close times are in windows.py's
docstring; what each processor does per record:

- Time windows: for each window of ``windows_for(ts)``: if ``end > stream time - grace`` the window's aggregate
  becomes ``aggregator(key, value, old or initializer())`` with timestamp ``max(ts, old timestamp)`` and is
  forwarded as ``Change(new, old)``; else the record is dropped for that window (logged, "dropped-records" + 1).
  Null keys are dropped.
- Sliding windows: Kafka's algorithm (KIP-450): the record's left window ``[ts - diff, ts]`` and, when a later
  record exists within ``diff``, its right window ``[ts + 1, ts + 1 + diff]`` are created; every existing window
  containing ts is updated (descending start order, as Kafka's reverse-iterator path). Null keys/values dropped.
  A record whose ``ts + diff < stream time - grace`` is dropped whole.
- Session windows: sessions of the key overlapping ``[ts - gap, ts + gap]`` are merged with the new record; each
  merged-away session is forwarded as a delete ``Change(None, old)`` (a tombstone on to_stream), then the merged
  session ``Change(agg, None)`` with timestamp = the session end. Dropped when the merged session's
  ``end < stream time - grace - gap``.

"Stream time" here is the processor's observed stream time: the max timestamp of the records it has seen (Kafka's
``observedStreamTime``; not restored after a restart, as in Kafka).

Stores (Kafka's WindowStoreMaterializer / SlidingWindowStoreMaterializer / SessionStoreMaterializer): a timestamped
window store (values ValueAndTimestamp) of window size = ``windows.size()`` (sliding: ``time_difference``),
retention = Materialized.with_retention or ``size + grace`` (sliding: ``2 * diff + grace``; sessions: ``gap +
grace``); a smaller explicit retention raises ValueError with Kafka's message. Store type: Materialized's store
type / supplier, else config "default.dsl.store" at build time ("rocksDB" default: persistent).
Store/processor names: "KSTREAM-AGGREGATE-STATE-STORE-<n>" / "KSTREAM-AGGREGATE-<n>" (reduce: "KSTREAM-REDUCE-"),
and an unnamed ``count()`` burns one index first, as Kafka's does for topology compatibility.

EmitStrategy.on_window_close() (KIP-825): nothing is forwarded on update; each closed window is forwarded once
(``Change(agg, None)``, timestamp of the aggregate) when a record moves the close time past it (scanned before the
record's own updates, so a window the store expires with this record is not lost); the scan is throttled to once
per config "__emit.interval.ms.kstreams.windowed.aggregation__" ms of wall-clock (default 1000, Kafka's internal
config; the TopologyTestDriver sets 0 as Java's does).
"""
import logging

from kbroker.streams.dsl.nodes import Change, TupleForwarder, record_dropped
from kbroker.streams.dsl.windows import (EmitStrategy, SessionWindows, SlidingWindows, TimeWindows,
                                         UnlimitedWindows)
from kbroker.streams.keyvalue import Window, Windowed
from kbroker.streams.processor import Processor, Record
from kbroker.streams.state.base import ValueAndTimestamp

log = logging.getLogger(__name__)

__all__ = ["windowed_by", "TimeWindowedKStream", "SessionWindowedKStream", "KStreamWindowAggregateSupplier",
           "KStreamSlidingWindowAggregateSupplier", "KStreamSessionWindowAggregateSupplier",
           "EMIT_INTERVAL_WINDOWED_KEY", "window_retention_ms"]

NO_TIMESTAMP = -1
EMIT_INTERVAL_WINDOWED_KEY = "__emit.interval.ms.kstreams.windowed.aggregation__"
AGGREGATE_NAME = "KSTREAM-AGGREGATE-"
REDUCE_NAME = "KSTREAM-REDUCE-"
STORE_SUFFIX = "STATE-STORE-"


def _vat(v):
    """A stored window value as ValueAndTimestamp (a plain store -- a user's supplier -- has no timestamps)."""
    if v is None or isinstance(v, ValueAndTimestamp):
        return v
    return ValueAndTimestamp(v, NO_TIMESTAMP)


def _emit_interval(context):
    try:
        return int(context.app_config().get(EMIT_INTERVAL_WINDOWED_KEY, 1000))
    except (TypeError, ValueError):
        return 1000


class _AggSupplier:
    """Base of the windowed aggregation suppliers: the DSL may enable old values after registering it (Kafka's
    KStreamAggProcessorSupplier.enableSendingOldValues) and reads ``view()`` for joins / suppression."""

    send_old_values = False

    def enable_sending_old_values(self, force_materialization=True):
        self.send_old_values = True
        return True

    def view(self):
        session = isinstance(self, KStreamSessionWindowAggregateSupplier)
        return _WindowedValueGetterSupplier(self.store_name, session)


class _WindowedValueGetterSupplier:
    """Reads a windowed aggregate: ``get(Windowed) -> ValueAndTimestamp | None``."""

    def __init__(self, store_name, session):
        self.store_name = store_name
        self.session = session

    def store_names(self):
        return [self.store_name]

    def get(self):
        return _WindowedValueGetter(self.store_name, self.session)


class _WindowedValueGetter:
    def __init__(self, store_name, session):
        self.store_name = store_name
        self.session = session
        self.store = None

    def init(self, context):
        self.store = context.get_state_store(self.store_name)

    def get(self, windowed):
        if self.session:
            v = self.store.fetch_session(windowed.key, windowed.window.start, windowed.window.end)
            return None if v is None else ValueAndTimestamp(v, windowed.window.end)
        return _vat(self.store.fetch(windowed.key, windowed.window.start))

    def close(self):
        pass


class _EmitFinalTracker:
    """KIP-825's emit-on-window-close bookkeeping: last emitted close time + the wall-clock throttle."""

    def __init__(self, context):
        self.context = context
        self.interval = _emit_interval(context)
        self.next_time_to_emit = 0
        self.last_emit_close_time = NO_TIMESTAMP

    def should_emit(self, close_time):
        now = self.context.current_system_time_ms()
        if now < self.next_time_to_emit:
            return False
        self.next_time_to_emit = now + self.interval
        return self.last_emit_close_time == NO_TIMESTAMP or self.last_emit_close_time < close_time


class _TimeWindowAggProcessor(Processor):
    """Shared by time and sliding windows (Kafka's AbstractKStreamTimeWindowAggregateProcessor)."""

    def __init__(self, supplier):
        self.s = supplier
        self.send_old_values = supplier.send_old_values
        self.on_close = supplier.emit_strategy.kind == EmitStrategy.ON_WINDOW_CLOSE
        self.observed = NO_TIMESTAMP

    def init(self, context):
        self.context = context
        self.store = context.get_state_store(self.s.store_name)
        if self.on_close:
            self.tracker = _EmitFinalTracker(context)
            self.forwarder = _DirectForwarder(context)
        else:
            self.forwarder = TupleForwarder(self.store, context, self.send_old_values)

    def forward_update(self, record, window, old, new, ts):
        """Forward (or leave to the cache) the window's update; the input record's headers are kept (Kafka's
        record.withKey(...).withValue(...).withTimestamp(...))."""
        if self.on_close:
            return
        self.forwarder.maybe_forward(Record(Windowed(record.key, window),
                                            Change(new, old if self.send_old_values else None), ts, record.headers))

    def drop_expired(self, record, window_text, close_time):
        record_dropped(self.context, "expired window. timestamp=[%d] window=%s expiration=[%d] streamTime=[%d]"
                       % (record.timestamp, window_text, close_time, self.observed))

    def maybe_forward_final(self, record, close_time):
        """KIP-825's final results. Called BEFORE this record's puts (Kafka calls it after): the record only
        updates open windows, so the output is the same, and windows its put expires from the store (retention =
        size + grace, exact in kbroker's stores) are emitted first instead of lost."""
        if not self.on_close or not self.tracker.should_emit(close_time):
            return
        upper = self.emit_upper(close_time)
        if upper < 0:
            return
        lower = self.emit_lower(close_time)
        if not self.should_range_fetch(lower, upper):
            return
        # by window start, then key bytes: Kafka's emit-on-close stores are time-ordered; our stores return
        # (start, key) in memory and (segment, key, start) in RocksDB, so a stable sort on the start gives both
        for kv in sorted(self.store.fetch_all(lower, upper), key=lambda kv: kv.key.window.start):
            vat = _vat(kv.value)
            self.context.forward(Record(kv.key, Change(vat.value, None), vat.timestamp, record.headers))
        self.tracker.last_emit_close_time = close_time

    def should_range_fetch(self, lower, upper):
        return True


class _DirectForwarder:
    def __init__(self, context):
        self.context = context

    def maybe_forward(self, record):
        self.context.forward(record)


# ------------------------------------------------------------------------------------------------- time windows

class KStreamWindowAggregateSupplier(_AggSupplier):
    """Tumbling/hopping (and unlimited) window aggregation; ``initializer()`` and ``aggregator(key, value, agg)``
    as Kafka's (reduce: initializer returns None, aggregator = value if agg is None else reducer(agg, value))."""

    def __init__(self, windows, store_name, initializer, aggregator, emit_strategy=None):
        if emit_strategy is not None and emit_strategy.kind == EmitStrategy.ON_WINDOW_CLOSE \
                and not isinstance(windows, TimeWindows):
            raise ValueError("ON_WINDOW_CLOSE strategy is only supported for TimeWindows and SlidingWindows for "
                             "TimeWindowedKStream")
        self.windows = windows
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator
        self.emit_strategy = emit_strategy or EmitStrategy.on_window_update()

    def grace_for_suppression(self):
        return self.windows.grace_period_ms()

    def __call__(self):
        return _WindowAggProcessor(self)


class _WindowAggProcessor(_TimeWindowAggProcessor):
    def process(self, record):
        if record.key is None:
            record_dropped(self.context, "null key")
            return
        s = self.s
        ts = record.timestamp
        self.observed = max(self.observed, ts)
        close_time = self.observed - s.windows.grace_period_ms()
        self.maybe_forward_final(record, close_time)
        for start, window in s.windows.windows_for(ts).items():
            if window.end > close_time:
                old = _vat(self.store.fetch(record.key, start))
                if old is None or old.value is None:
                    old_agg, new_ts = s.initializer(), ts
                else:
                    old_agg, new_ts = old.value, max(ts, old.timestamp)
                new_agg = s.aggregator(record.key, record.value, old_agg)
                self.store.put(record.key, ValueAndTimestamp(new_agg, new_ts), start)
                self.forward_update(record, window, old_agg, new_agg, new_ts)
            else:
                self.drop_expired(record, "[%d,%d)" % (start, window.end), close_time)

    def emit_lower(self, close_time):
        last = self.tracker.last_emit_close_time
        size = self.s.windows.size()
        return 0 if last == NO_TIMESTAMP else max(0, last - size) + 1

    def emit_upper(self, close_time):
        return close_time - self.s.windows.size()

    def should_range_fetch(self, lower, upper):
        if self.tracker.last_emit_close_time != NO_TIMESTAMP:
            w = self.s.windows
            if w.windows_for(upper) == w.windows_for(lower - 1):
                return False
        return True


# ---------------------------------------------------------------------------------------------- sliding windows

class KStreamSlidingWindowAggregateSupplier(_AggSupplier):
    """Sliding window aggregation (Kafka's KStreamSlidingWindowAggregate, reverse-iterator path)."""

    def __init__(self, windows, store_name, initializer, aggregator, emit_strategy=None):
        self.windows = windows
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator
        self.emit_strategy = emit_strategy or EmitStrategy.on_window_update()

    def grace_for_suppression(self):
        return self.windows.grace_period_ms()

    def __call__(self):
        return _SlidingAggProcessor(self)


class _SlidingAggProcessor(_TimeWindowAggProcessor):
    def process(self, record):
        if record.key is None or record.value is None:
            record_dropped(self.context, "null key or value")
            return
        diff = self.s.windows.time_difference_ms
        ts = record.timestamp
        self.observed = max(self.observed, ts)
        close_time = self.observed - self.s.windows.grace_period_ms()
        if ts + diff < close_time:
            self.drop_expired(record, "[%d,%d]" % (ts, ts + diff), close_time)
            return
        if ts < diff:
            self._process_early(record, close_time)
            return
        self.maybe_forward_final(record, close_time)
        self._process_reverse(record, close_time)

    def _windows_desc(self, key, time_from, time_to):
        return list(self.store.backward_fetch_keys(key, key, time_from, time_to))

    def _process_reverse(self, record, close_time):
        diff = self.s.windows.time_difference_ms
        ts = record.timestamp
        starts = set()
        left_agg = right_agg = None
        left_created = right_created = False
        previous_ts = None
        for kv in self._windows_desc(record.key, max(0, ts - 2 * diff), ts + 1):
            start = kv.key.window.start
            starts.add(start)
            end = start + diff
            vat = _vat(kv.value)
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right_agg is None:
                    right_agg = vat
                self._update(kv.key.window, vat, record, close_time)
            elif end == ts:
                left_created = True
                self._update(kv.key.window, vat, record, close_time)
                if vat.timestamp < ts:
                    previous_ts = vat.timestamp
                else:
                    # a record at ts existed already: its windows exist and were just updated (Kafka returns)
                    return
            else:
                left_agg = vat
                previous_ts = vat.timestamp
                break
        self._create_windows(record, close_time, starts, right_agg, left_agg, left_created, right_created,
                             previous_ts)

    def _process_early(self, record, close_time):
        diff = self.s.windows.time_difference_ms
        ts = record.timestamp
        combined = None
        right_agg = None
        right_created = False
        starts = set()
        previous_ts = None
        for kv in list(self.store.fetch_keys(record.key, record.key, 0, ts + 1)):
            start = kv.key.window.start
            starts.add(start)
            vat = _vat(kv.value)
            if start == 0:
                combined = (kv.key.window, vat)
                if vat.timestamp < ts:
                    previous_ts = vat.timestamp
            elif start <= ts:
                right_agg = vat
                self._update(kv.key.window, vat, record, close_time)
            elif start == ts + 1:
                right_created = True
            else:
                raise RuntimeError("Unexpected window found when processing sliding windows")
        if right_agg is None and combined is not None and combined[1].timestamp > ts:
            right_agg = combined[1]
        if not right_created and right_agg is not None and right_agg.timestamp > ts:
            self._create_current_right(record, right_agg)
        if previous_ts is not None and (previous_ts + 1) not in starts:
            self._create_previous_right(previous_ts + 1, record, close_time)
        if combined is None:
            self._update(Window(0, diff), ValueAndTimestamp(self.s.initializer(), ts), record, close_time)
        else:
            self._update(combined[0], combined[1], record, close_time)

    def _create_windows(self, record, close_time, starts, right_agg, left_agg, left_created, right_created,
                        previous_ts):
        diff = self.s.windows.time_difference_ms
        ts = record.timestamp
        if previous_ts is not None:
            prev_right_start = previous_ts + 1
            if prev_right_start not in starts and prev_right_start + diff >= ts:
                self._create_previous_right(prev_right_start, record, close_time)
        if not left_created:
            if previous_ts is not None and ts - diff <= previous_ts:
                vat = ValueAndTimestamp(left_agg.value, ts)
            else:
                vat = ValueAndTimestamp(self.s.initializer(), ts)
            self._update(Window(ts - diff, ts), vat, record, close_time)
        if not right_created and right_agg is not None and right_agg.timestamp > ts:
            self._create_current_right(record, right_agg)

    def _create_current_right(self, record, right_agg):
        diff = self.s.windows.time_difference_ms
        window = Window(record.timestamp + 1, record.timestamp + 1 + diff)
        self.store.put(record.key, right_agg, window.start)
        self.forward_update(record, window, None, right_agg.value, right_agg.timestamp)

    def _create_previous_right(self, start, record, close_time):
        diff = self.s.windows.time_difference_ms
        self._update(Window(start, start + diff), ValueAndTimestamp(self.s.initializer(), record.timestamp), record,
                     close_time)

    def _update(self, window, vat, record, close_time):
        if window.end >= close_time:
            old_agg = vat.value if vat is not None else None
            new_agg = self.s.aggregator(record.key, record.value, old_agg)
            new_ts = record.timestamp if old_agg is None else max(record.timestamp, vat.timestamp)
            self.store.put(record.key, ValueAndTimestamp(new_agg, new_ts), window.start)
            self.forward_update(record, window, old_agg, new_agg, new_ts)
        else:
            self.drop_expired(record, "[%d,%d]" % window, close_time)

    def emit_lower(self, close_time):
        last = self.tracker.last_emit_close_time
        diff = self.s.windows.time_difference_ms
        return 0 if last == NO_TIMESTAMP else max(0, last - diff)

    def emit_upper(self, close_time):
        return close_time - self.s.windows.time_difference_ms - 1


# ---------------------------------------------------------------------------------------------- session windows

class KStreamSessionWindowAggregateSupplier(_AggSupplier):
    """Session window aggregation; ``merger(key, agg1, agg2)`` combines the aggregates of merged sessions."""

    def __init__(self, windows, store_name, initializer, aggregator, merger, emit_strategy=None):
        self.windows = windows
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger
        self.emit_strategy = emit_strategy or EmitStrategy.on_window_update()

    def grace_for_suppression(self):
        # Kafka's GraphGraceSearchUtil: a session closes gap + grace after its end
        return self.windows.grace_period_ms() + self.windows.inactivity_gap()

    def __call__(self):
        return _SessionAggProcessor(self)


class _SessionAggProcessor(Processor):
    def __init__(self, supplier):
        self.s = supplier
        self.send_old_values = supplier.send_old_values
        self.on_close = supplier.emit_strategy.kind == EmitStrategy.ON_WINDOW_CLOSE
        self.observed = NO_TIMESTAMP

    def init(self, context):
        self.context = context
        self.store = context.get_state_store(self.s.store_name)
        self.cached = False
        if self.on_close:
            self.tracker = _EmitFinalTracker(context)
        else:
            # Kafka's SessionCacheFlushListener: a flushed session is forwarded at its end's timestamp
            self.cached = bool(self.store.set_flush_listener(self._on_flush, self.send_old_values))

    def _on_flush(self, key, new, old, _timestamp):
        self.context.forward(Record(key, Change(new, old if self.send_old_values else None), key.window.end))

    def process(self, record):
        if record.key is None:
            record_dropped(self.context, "null key")
            return
        s = self.s
        gap = s.windows.inactivity_gap()
        ts = record.timestamp
        self.observed = max(self.observed, ts)
        close_time = self.observed - s.windows.grace_period_ms() - gap
        self._maybe_forward_final(record, close_time)
        merged = list(self.store.find_sessions(record.key, ts - gap, ts + gap))
        agg = s.initializer()
        start = end = ts
        for kv in merged:
            agg = s.merger(record.key, agg, kv.value)
            start = min(start, kv.key.window.start)
            end = max(end, kv.key.window.end)
        if end < close_time:
            record_dropped(self.context, "expired window. timestamp=[%d] window=[%d,%d] expiration=[%d] "
                           "streamTime=[%d]" % (ts, start, end, close_time, self.observed))
        else:
            if (start, end) != (ts, ts):
                for kv in merged:
                    self.store.remove(kv.key)
                    self._forward(kv.key, kv.value, None)
            agg = s.aggregator(record.key, record.value, agg)
            key = Windowed(record.key, Window(start, end))
            self.store.put(key, agg)
            self._forward(key, None, agg)

    def _forward(self, windowed, old, new):
        if self.on_close or self.cached:
            return
        self.context.forward(Record(windowed, Change(new, old if self.send_old_values else None),
                                    windowed.window.end))

    def _maybe_forward_final(self, record, close_time):
        if not self.on_close or not self.tracker.should_emit(close_time):
            return
        upper = close_time - 1
        if upper < 0:
            return
        lower = max(0, self.tracker.last_emit_close_time)
        if upper < lower:
            return
        # sessions with lower <= end <= upper, every key (Kafka's findSessions(earliestEnd, latestEnd))
        # by session end, then key bytes (Kafka's time-ordered session store), see maybe_forward_final above
        found = self.store.find_sessions_range(None, None, lower, upper)
        for kv in sorted(found, key=lambda kv: kv.key.window.end):
            if kv.key.window.end <= upper:
                self.context.forward(Record(kv.key, Change(kv.value, None), kv.key.window.end, record.headers))
        self.tracker.last_emit_close_time = close_time


# ------------------------------------------------------------------------------------------- the DSL's objects

def window_retention_ms(windows, materialized_retention, store_name):
    """The store retention Kafka's materializers choose, and their check of an explicit one (ValueError)."""
    if isinstance(windows, SlidingWindows):
        need = 2 * windows.time_difference_ms + windows.grace_period_ms()
        retention = materialized_retention if materialized_retention is not None else need
        if need > retention:
            raise ValueError("The retention period of the window store %s must be no smaller than 2 * time "
                             "difference plus the grace period. Got time difference=[%d], grace=[%d], "
                             "retention=[%d]" % (store_name, windows.time_difference_ms, windows.grace_period_ms(),
                                                  retention))
        return retention
    if isinstance(windows, SessionWindows):
        need = windows.inactivity_gap() + windows.grace_period_ms()
        retention = materialized_retention if materialized_retention is not None else need
        if need > retention:
            raise ValueError("The retention period of the session store %s must be no smaller than the session "
                             "inactivity gap plus the grace period. Got gap=[%d], grace=[%d], retention=[%d]"
                             % (store_name, windows.inactivity_gap(), windows.grace_period_ms(), retention))
        return retention
    need = windows.size() + windows.grace_period_ms()
    if isinstance(windows, UnlimitedWindows):
        need = (1 << 63) - 1
    retention = materialized_retention if materialized_retention is not None else need
    if need > retention:
        raise ValueError("The retention period of the window store %s must be no smaller than its window size plus "
                         "the grace period. Got size=[%d], grace=[%d], retention=[%d]"
                         % (store_name, windows.size(), windows.grace_period_ms(), retention))
    return retention


def _count_initializer():
    return 0


def _count_aggregator(_key, _value, agg):
    return agg + 1


def _reduce_initializer():
    return None


def _reduce_aggregator(reducer):
    return lambda _key, value, agg: value if agg is None else reducer(agg, value)


def windowed_by(grouped, windows):
    """S3's ``KGroupedStream.windowed_by``: a TimeWindowedKStream for TimeWindows / UnlimitedWindows /
    SlidingWindows, a SessionWindowedKStream for SessionWindows."""
    if isinstance(windows, SessionWindows):
        return SessionWindowedKStream(grouped, windows)
    if isinstance(windows, (TimeWindows, UnlimitedWindows, SlidingWindows)):
        return TimeWindowedKStream(grouped, windows)
    raise ValueError("windowed_by takes TimeWindows, SlidingWindows, SessionWindows or UnlimitedWindows, got %r"
                     % (windows,))


def _store_builder(builder, windows, store_name, materialized, key_serde, value_serde, emit_final=False):
    """The windowed store of an aggregation, as Kafka's Window/SlidingWindow/SessionStoreMaterializer build it."""
    from kbroker.streams.state.stores import Stores
    explicit = materialized.retention_ms if materialized is not None else None
    retention = window_retention_ms(windows, explicit, store_name)
    if emit_final and explicit is None and isinstance(windows, SessionWindows):
        # a session ending exactly at stream time - gap - grace is expired by the store (end <= observed -
        # retention) one record before it counts as closed (end < stream time - gap - grace): keep it 1 ms
        # longer so the emit-on-close scan still finds it (Kafka's RocksDB segments hide this off-by-one)
        retention += 1
    supplier = materialized.store_supplier if materialized is not None else None
    store_type = (materialized.store_type if materialized is not None else None) or builder.store_type()
    session = isinstance(windows, SessionWindows)
    if supplier is None:
        if session:
            factory = (Stores.in_memory_session_store if store_type == "in_memory"
                       else Stores.persistent_session_store)
            supplier = factory(store_name, retention)
        else:
            size = windows.time_difference_ms if isinstance(windows, SlidingWindows) else windows.size()
            factory = (Stores.in_memory_window_store if store_type == "in_memory"
                       else Stores.persistent_timestamped_window_store)
            supplier = factory(store_name, retention, size, False)
    if session:
        sb = Stores.session_store_builder(supplier, key_serde, value_serde)
    else:
        sb = Stores.timestamped_window_store_builder(supplier, key_serde, value_serde)
    if materialized is None or materialized.caching_enabled:
        sb.with_caching_enabled()
    else:
        sb.with_caching_disabled()
    if materialized is not None and not materialized.logging_enabled:
        sb.with_logging_disabled()
    else:
        sb.with_logging_enabled(materialized.log_config if materialized is not None else {})
    return sb


def _windowed_key_serde(windows, key_serde):
    from kbroker.streams.serdes import session_windowed_serde, time_windowed_serde
    if key_serde is None:
        return None
    if isinstance(windows, SessionWindows):
        return session_windowed_serde(key_serde)
    size = windows.time_difference_ms if isinstance(windows, SlidingWindows) else windows.size()
    return time_windowed_serde(key_serde, size)


class _WindowedKStreamBase:
    """Shared by Time/SessionWindowedKStream: ``grouped`` is S3's KGroupedStream; the repartitioning and the
    resulting KTable come from its ``_build_aggregate`` (/work/helpers/s3-s4-seam.md)."""

    def __init__(self, grouped, windows):
        self._grouped = grouped
        self._windows = windows
        self._emit_strategy = EmitStrategy.on_window_update()

    def emit_strategy(self, strategy):
        if isinstance(self._windows, UnlimitedWindows) and strategy.kind == EmitStrategy.ON_WINDOW_CLOSE:
            raise ValueError("ON_WINDOW_CLOSE emit strategy cannot be used for UnlimitedWindows")
        self._emit_strategy = strategy
        return self

    def _build(self, prefix, make_supplier, named, materialized, value_serde_default, burn_store_name=False):
        """Kafka's order: (count: burn one index when the store is unnamed), the store name (materialized name or
        "<prefix>STATE-STORE-<n>"), the processor name, then the repartition topic and nodes if needed."""
        from kbroker.streams.dsl.options import Materialized
        g = self._grouped
        builder = g._builder
        if materialized is not None and not isinstance(materialized, Materialized):
            raise ValueError("materialized must be a Materialized, got %r" % (materialized,))
        user_store = materialized.store_name if materialized is not None else None
        if burn_store_name and user_store is None:
            builder.new_store_name(AGGREGATE_NAME)
        store_name = user_store or builder.new_store_name(prefix)
        key_serde = (materialized.key_serde if materialized is not None else None) or g._key_serde
        value_serde = materialized.value_serde if materialized is not None else None
        if value_serde is None:
            value_serde = g._value_serde if value_serde_default == "inherit" else value_serde_default
        func_name = builder.name_or_generate(named, prefix)
        store_builder = _store_builder(builder, self._windows, store_name, materialized, key_serde, value_serde,
                                       self._emit_strategy.kind == EmitStrategy.ON_WINDOW_CLOSE)
        supplier = make_supplier(store_name)
        return g._build_aggregate(func_name, store_builder, supplier, _windowed_key_serde(self._windows, key_serde),
                                  value_serde, user_store)


class TimeWindowedKStream(_WindowedKStreamBase):
    """Kafka's TimeWindowedKStream over TimeWindows (tumbling/hopping), UnlimitedWindows or SlidingWindows."""

    def _supplier_cls(self):
        if isinstance(self._windows, SlidingWindows):
            return KStreamSlidingWindowAggregateSupplier
        return KStreamWindowAggregateSupplier

    def count(self, named=None, materialized=None):
        from kbroker.streams.serdes import Serdes
        cls, emit = self._supplier_cls(), self._emit_strategy
        return self._build(
            AGGREGATE_NAME,
            lambda store: cls(self._windows, store, _count_initializer, _count_aggregator, emit),
            named, materialized, Serdes.Long(), burn_store_name=not isinstance(self._windows, SlidingWindows))

    def aggregate(self, initializer, aggregator, named=None, materialized=None):
        cls, emit = self._supplier_cls(), self._emit_strategy
        return self._build(AGGREGATE_NAME, lambda store: cls(self._windows, store, initializer, aggregator, emit),
                           named, materialized, None)

    def reduce(self, reducer, named=None, materialized=None):
        cls, emit = self._supplier_cls(), self._emit_strategy
        return self._build(
            REDUCE_NAME,
            lambda store: cls(self._windows, store, _reduce_initializer, _reduce_aggregator(reducer), emit),
            named, materialized, "inherit")


class SessionWindowedKStream(_WindowedKStreamBase):
    """Kafka's SessionWindowedKStream."""

    def count(self, named=None, materialized=None):
        from kbroker.streams.serdes import Serdes
        emit = self._emit_strategy

        def merger(_key, a, b):
            return a + b
        return self._build(
            AGGREGATE_NAME,
            lambda store: KStreamSessionWindowAggregateSupplier(self._windows, store, _count_initializer,
                                                                _count_aggregator, merger, emit),
            named, materialized, Serdes.Long(), burn_store_name=True)

    def aggregate(self, initializer, aggregator, session_merger, named=None, materialized=None):
        emit = self._emit_strategy
        return self._build(
            AGGREGATE_NAME,
            lambda store: KStreamSessionWindowAggregateSupplier(self._windows, store, initializer, aggregator,
                                                                session_merger, emit),
            named, materialized, None)

    def reduce(self, reducer, named=None, materialized=None):
        emit = self._emit_strategy
        agg = _reduce_aggregator(reducer)

        def merger(_key, a, b):
            return b if a is None else reducer(a, b)
        return self._build(
            REDUCE_NAME,
            lambda store: KStreamSessionWindowAggregateSupplier(self._windows, store, _reduce_initializer, agg,
                                                                merger, emit),
            named, materialized, "inherit")
