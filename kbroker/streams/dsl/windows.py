"""Window specifications of the DSL (Kafka's org.apache.kafka.streams.kstream TimeWindows, SlidingWindows,
SessionWindows, JoinWindows, UnlimitedWindows) and suppression specs (Suppressed, BufferConfig).

All durations are milliseconds (an ``int``) or a ``datetime.timedelta``; negative or zero sizes raise
ValueError with Kafka's message (Kafka: IllegalArgumentException).

Window boundaries, exactly as Kafka's:

- TimeWindows (tumbling: advance == size; hopping: advance < size): half-open ``[start, start + size)``, starts
  aligned to the epoch: a record at ``ts`` belongs to every window whose start is a multiple of ``advance`` in
  ``(ts - size, ts]`` and >= 0 (``windows_for``). A window is *closed* once ``stream time - grace >= end``; a
  record for a closed window is dropped (late) and counted in the task's "dropped-records".
- SlidingWindows (Kafka 2.7+): windows of ``time_difference`` with both bounds inclusive ``[start, start + diff]``;
  each record creates its left window ``[ts - diff, ts]`` and, if some record falls in it, its right window
  ``[ts + 1, ts + 1 + diff]``. A window stays open while ``end >= stream time - grace``.
- SessionWindows: sessions ``[first ts, last ts]`` (inclusive) of one key, merged when a record comes within
  ``inactivity_gap`` of them. A session is closed once ``end < stream time - grace - gap`` (Kafka 4's close time).
- JoinWindows: a record of the left stream at ``ts`` joins right records in ``[ts - before, ts + after]``;
  ``size = before + after``; left/outer results without a match are emitted once ``stream time > ts + after +
  grace`` (left records) or ``ts + before + grace`` (right records).

The default grace of every ``..._with_no_grace`` factory is 0 (Kafka 3.0+).
"""
import datetime

from kbroker.streams.keyvalue import Window

__all__ = ["Windows", "TimeWindows", "SlidingWindows", "SessionWindows", "JoinWindows", "UnlimitedWindows",
           "Suppressed", "BufferConfig", "StrictBufferConfig", "EagerBufferConfig", "to_millis",
           "EmitStrategy"]

# Kafka's Long.MAX_VALUE: the bound of an unbounded buffer and the end of an unlimited window.
MAX_LONG = (1 << 63) - 1


def to_millis(duration, what):
    """``duration`` (int ms or timedelta) as int ms; ValueError naming ``what`` for other types."""
    if isinstance(duration, datetime.timedelta):
        return int(duration.total_seconds() * 1000)
    if isinstance(duration, bool) or not isinstance(duration, int):
        raise ValueError("%s must be an int of milliseconds or a timedelta, got %r" % (what, duration))
    return duration


def _non_negative_grace(grace):
    grace = to_millis(grace, "afterWindowEnd")
    if grace < 0:
        raise ValueError("Grace period must not be negative.")
    return grace


class Windows:
    """Fixed-size windows (Kafka's Windows<W>): ``windows_for(ts)`` -> {start: Window} ordered by start;
    ``size()``; ``grace_period_ms()``."""

    def windows_for(self, timestamp):
        raise NotImplementedError

    def size(self):
        raise NotImplementedError

    def grace_period_ms(self):
        raise NotImplementedError


class TimeWindows(Windows):
    """Tumbling (advance == size) and hopping (advance < size) windows, epoch-aligned."""

    def __init__(self, size_ms, advance_ms, grace_ms):
        if size_ms <= 0:
            raise ValueError("Window size (sizeMs) must be larger than zero.")
        if advance_ms <= 0 or advance_ms > size_ms:
            raise ValueError("Window advancement interval should be more than zero and less than window duration "
                             "which is %d ms, but given advancement interval is: %d ms" % (size_ms, advance_ms))
        if grace_ms < 0:
            raise ValueError("Grace period must not be negative.")
        self.size_ms = size_ms
        self.advance_ms = advance_ms
        self.grace_ms = grace_ms

    @staticmethod
    def of_size_with_no_grace(size):
        """Tumbling windows of ``size`` with grace 0 (Kafka's ofSizeWithNoGrace)."""
        size = to_millis(size, "size")
        return TimeWindows(size, size, 0)

    @staticmethod
    def of_size_and_grace(size, after_window_end):
        """Tumbling windows of ``size`` accepting out-of-order records ``after_window_end`` ms after a window's
        end (Kafka's ofSizeAndGrace)."""
        size = to_millis(size, "size")
        return TimeWindows(size, size, _non_negative_grace(after_window_end))

    def advance_by(self, advance):
        """Hopping windows: a new window every ``advance`` ms (0 < advance <= size)."""
        return TimeWindows(self.size_ms, to_millis(advance, "advance"), self.grace_ms)

    def size(self):
        return self.size_ms

    def grace_period_ms(self):
        return self.grace_ms

    def windows_for(self, timestamp):
        """{start: Window(start, start + size)} of every window containing ``timestamp`` (Kafka's windowsFor:
        first start = the largest multiple of advance <= ts - size + advance, clamped at 0)."""
        start = (max(0, timestamp - self.size_ms + self.advance_ms) // self.advance_ms) * self.advance_ms
        out = {}
        while start <= timestamp:
            out[start] = Window(start, start + self.size_ms)
            start += self.advance_ms
        return out

    def __eq__(self, other):
        return (isinstance(other, TimeWindows) and (self.size_ms, self.advance_ms, self.grace_ms)
                == (other.size_ms, other.advance_ms, other.grace_ms))

    def __hash__(self):
        return hash((self.size_ms, self.advance_ms, self.grace_ms))

    def __repr__(self):
        return "TimeWindows{sizeMs=%d, advanceMs=%d, graceMs=%d}" % (self.size_ms, self.advance_ms, self.grace_ms)


class UnlimitedWindows(Windows):
    """One window per key from ``start`` (default 0) to forever (Kafka's UnlimitedWindows; no grace)."""

    def __init__(self, start_ms=0):
        if start_ms < 0:
            raise ValueError("Window start time (startMs) cannot be negative.")
        self.start_ms = start_ms

    @staticmethod
    def of():
        return UnlimitedWindows(0)

    def start_on(self, start):
        return UnlimitedWindows(to_millis(start, "start"))

    def windows_for(self, timestamp):
        if timestamp < self.start_ms:
            return {}
        return {self.start_ms: Window(self.start_ms, MAX_LONG)}

    def size(self):
        return MAX_LONG

    def grace_period_ms(self):
        return 0

    def __repr__(self):
        return "UnlimitedWindows{startMs=%d}" % self.start_ms


class SlidingWindows:
    """Sliding windows (Kafka 2.7+ KIP-450): windows of ``time_difference`` ms, inclusive at both ends, one
    created per record (see the module docstring)."""

    def __init__(self, time_difference_ms, grace_ms):
        if time_difference_ms < 0:
            raise ValueError("Window time difference must not be negative.")
        if grace_ms < 0:
            raise ValueError("Window grace period must not be negative.")
        self.time_difference_ms = time_difference_ms
        self.grace_ms = grace_ms

    @staticmethod
    def of_time_difference_with_no_grace(time_difference):
        return SlidingWindows(to_millis(time_difference, "timeDifference"), 0)

    @staticmethod
    def of_time_difference_and_grace(time_difference, after_window_end):
        return SlidingWindows(to_millis(time_difference, "timeDifference"),
                              to_millis(after_window_end, "afterWindowEnd"))

    def time_difference(self):
        return self.time_difference_ms

    def grace_period_ms(self):
        return self.grace_ms

    def __eq__(self, other):
        return (isinstance(other, SlidingWindows)
                and (self.time_difference_ms, self.grace_ms) == (other.time_difference_ms, other.grace_ms))

    def __hash__(self):
        return hash((self.time_difference_ms, self.grace_ms))

    def __repr__(self):
        return "SlidingWindows{timeDifferenceMs=%d, graceMs=%d}" % (self.time_difference_ms, self.grace_ms)


class SessionWindows:
    """Session windows: activity periods of a key separated by more than ``inactivity_gap`` ms."""

    def __init__(self, gap_ms, grace_ms):
        if gap_ms <= 0:
            raise ValueError("Gap time cannot be zero or negative.")
        if grace_ms < 0:
            raise ValueError("Grace period must not be negative.")
        self.gap_ms = gap_ms
        self.grace_ms = grace_ms

    @staticmethod
    def of_inactivity_gap_with_no_grace(inactivity_gap):
        return SessionWindows(to_millis(inactivity_gap, "inactivityGap"), 0)

    @staticmethod
    def of_inactivity_gap_and_grace(inactivity_gap, after_window_end):
        return SessionWindows(to_millis(inactivity_gap, "inactivityGap"), _non_negative_grace(after_window_end))

    def inactivity_gap(self):
        return self.gap_ms

    def grace_period_ms(self):
        return self.grace_ms

    def __eq__(self, other):
        return isinstance(other, SessionWindows) and (self.gap_ms, self.grace_ms) == (other.gap_ms, other.grace_ms)

    def __hash__(self):
        return hash((self.gap_ms, self.grace_ms))

    def __repr__(self):
        return "SessionWindows{gapMs=%d, graceMs=%d}" % (self.gap_ms, self.grace_ms)


class JoinWindows:
    """Windows of a stream-stream join: a left record at ts joins right records in [ts - before, ts + after]."""

    def __init__(self, before_ms, after_ms, grace_ms, spurious_result_fix=True):
        if before_ms + after_ms < 0:
            raise ValueError("Window interval (ie, beforeMs+afterMs) must not be negative.")
        if grace_ms < 0:
            raise ValueError("Grace period must not be negative.")
        self.before_ms = before_ms
        self.after_ms = after_ms
        self.grace_ms = grace_ms
        # Kafka 3.1+: left/outer non-joined results wait for the window to close (no spurious early results).
        self.spurious_result_fix = spurious_result_fix

    @staticmethod
    def of_time_difference_with_no_grace(time_difference):
        d = to_millis(time_difference, "timeDifference")
        return JoinWindows(d, d, 0)

    @staticmethod
    def of_time_difference_and_grace(time_difference, after_window_end):
        d = to_millis(time_difference, "timeDifference")
        return JoinWindows(d, d, _non_negative_grace(after_window_end))

    def before(self, time_difference):
        """Change the lower bound: right records at most ``time_difference`` earlier join (may be negative)."""
        return JoinWindows(to_millis(time_difference, "timeDifference"), self.after_ms, self.grace_ms,
                           self.spurious_result_fix)

    def after(self, time_difference):
        """Change the upper bound: right records at most ``time_difference`` later join (may be negative)."""
        return JoinWindows(self.before_ms, to_millis(time_difference, "timeDifference"), self.grace_ms,
                           self.spurious_result_fix)

    def size(self):
        return self.before_ms + self.after_ms

    def grace_period_ms(self):
        return self.grace_ms

    def __eq__(self, other):
        return (isinstance(other, JoinWindows) and (self.before_ms, self.after_ms, self.grace_ms)
                == (other.before_ms, other.after_ms, other.grace_ms))

    def __hash__(self):
        return hash((self.before_ms, self.after_ms, self.grace_ms))

    def __repr__(self):
        return "JoinWindows{beforeMs=%d, afterMs=%d, graceMs=%d}" % (self.before_ms, self.after_ms, self.grace_ms)


class EmitStrategy:
    """Kafka's EmitStrategy (KIP-825): ``on_window_update()`` (default: every update is forwarded, subject to
    caching) or ``on_window_close()`` (only final results, once stream time closes the window)."""
    ON_WINDOW_UPDATE = "ON_WINDOW_UPDATE"
    ON_WINDOW_CLOSE = "ON_WINDOW_CLOSE"

    def __init__(self, kind):
        self.kind = kind

    @staticmethod
    def on_window_update():
        return EmitStrategy(EmitStrategy.ON_WINDOW_UPDATE)

    @staticmethod
    def on_window_close():
        return EmitStrategy(EmitStrategy.ON_WINDOW_CLOSE)

    def __repr__(self):
        return "EmitStrategy(%s)" % self.kind


# ---------------------------------------------------------------------------------------------------------------
# Suppression


class BufferConfig:
    """Bounds of a suppression buffer (Kafka's Suppressed.BufferConfig). ``max_records``/``max_bytes`` bound it
    (MAX_LONG: unbounded); ``strategy`` is "EMIT" (emit the oldest records early when full) or "SHUT_DOWN"
    (raise StreamsException, the task stops). Bytes are counted as Kafka's in-memory buffer counts them: per
    entry 8 + serialized key + prior/old/new serialized values + the record context (8 + 8 + 4 + topic length +
    header keys and values)."""

    EMIT = "EMIT"
    SHUT_DOWN = "SHUT_DOWN"

    def __init__(self, max_records, max_bytes, strategy, logging_enabled=True, log_config=None):
        if max_records < 0 or max_bytes < 0:
            raise ValueError("Buffer bounds must not be negative.")
        self.max_records_ = max_records
        self.max_bytes_ = max_bytes
        self.strategy = strategy
        self.logging_enabled = logging_enabled
        self.log_config = dict(log_config or {})

    def _copy(self, cls=None, **kw):
        args = dict(max_records=self.max_records_, max_bytes=self.max_bytes_, strategy=self.strategy,
                    logging_enabled=self.logging_enabled, log_config=self.log_config)
        args.update(kw)
        return (cls or type(self))(**args)

    @staticmethod
    def max_records(records):
        """At most ``records`` keys; emits early when full (Kafka: an EagerBufferConfig)."""
        return EagerBufferConfig(records, MAX_LONG, BufferConfig.EMIT)

    @staticmethod
    def max_bytes(byte_limit):
        """At most ``byte_limit`` bytes; emits early when full."""
        return EagerBufferConfig(MAX_LONG, byte_limit, BufferConfig.EMIT)

    @staticmethod
    def unbounded():
        """No bound (Kafka: a StrictBufferConfig that shuts down if memory runs out)."""
        return StrictBufferConfig(MAX_LONG, MAX_LONG, BufferConfig.SHUT_DOWN)

    def with_max_records(self, records):
        return self._copy(max_records=records)

    def with_max_bytes(self, byte_limit):
        return self._copy(max_bytes=byte_limit)

    def with_no_bound(self):
        return self._copy(StrictBufferConfig, max_records=MAX_LONG, max_bytes=MAX_LONG,
                          strategy=BufferConfig.SHUT_DOWN)

    def emit_early_when_full(self):
        return self._copy(EagerBufferConfig, strategy=BufferConfig.EMIT)

    def shut_down_when_full(self):
        return self._copy(StrictBufferConfig, strategy=BufferConfig.SHUT_DOWN)

    def with_logging_disabled(self):
        return self._copy(logging_enabled=False, log_config={})

    def with_logging_enabled(self, config):
        return self._copy(logging_enabled=True, log_config=config)

    def __repr__(self):
        return "%s(maxRecords=%d, maxBytes=%d, strategy=%s)" % (type(self).__name__, self.max_records_,
                                                                 self.max_bytes_, self.strategy)


class StrictBufferConfig(BufferConfig):
    """A buffer that never emits early (what until_window_closes requires)."""


class EagerBufferConfig(BufferConfig):
    """A buffer that emits its oldest records early when full."""


class Suppressed:
    """Kafka's Suppressed: what a KTable.suppress(...) holds back.

    - ``until_window_closes(StrictBufferConfig)``: for a windowed KTable, each window's final result once stream
      time passes window end + the window spec's grace (session windows: + gap); tombstones dropped.
    - ``until_time_limit(ms, BufferConfig)``: at most one update per key per ``ms`` of stream time, measured from
      the first buffered update of the key (Kafka's non-resetting buffer); tombstones forwarded.
    ``with_name(name)`` names the processor and its buffer store ("<name>-store").
    """

    FINAL = "FINAL"
    TIME_LIMIT = "TIME_LIMIT"

    def __init__(self, kind, buffer_config, time_to_wait_ms=None, name=None):
        self.kind = kind
        self.buffer_config = buffer_config
        self.time_to_wait_ms = time_to_wait_ms
        self.name = name

    @staticmethod
    def until_window_closes(buffer_config):
        if not isinstance(buffer_config, StrictBufferConfig):
            raise ValueError("until_window_closes needs a StrictBufferConfig (BufferConfig.unbounded() or "
                             "...shut_down_when_full()); got %r" % (buffer_config,))
        return Suppressed(Suppressed.FINAL, buffer_config)

    @staticmethod
    def until_time_limit(time_to_wait_for_more_events, buffer_config):
        if not isinstance(buffer_config, BufferConfig):
            raise ValueError("buffer_config must be a BufferConfig, got %r" % (buffer_config,))
        ms = to_millis(time_to_wait_for_more_events, "timeToWaitForMoreEvents")
        if ms < 0:
            raise ValueError("timeToWaitForMoreEvents must not be negative.")
        return Suppressed(Suppressed.TIME_LIMIT, buffer_config, ms)

    def with_name(self, name):
        """Name the processor (and its buffer store "<name>-store"); Kafka's naming rules (TopologyException)."""
        from kbroker.streams.dsl.options import validate_name
        return Suppressed(self.kind, self.buffer_config, self.time_to_wait_ms, validate_name(name))

    def __repr__(self):
        return "Suppressed(%s, %r, wait=%r, name=%r)" % (self.kind, self.buffer_config, self.time_to_wait_ms,
                                                         self.name)
