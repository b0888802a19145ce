"""Kafka's sampled rate (``org.apache.kafka.common.metrics.stats.Rate`` over a ``SampledStat`` of ``Sum``), the
measure every client quota is checked against.

A ``Rate`` keeps ``samples`` (``quota.window.num``, 11) windows of ``window_ms`` (``quota.window.size.seconds`` x
1000) each, as a ring of ``[start_ms, value]``:

* ``record(value, now_ms)`` adds to the current window, first moving to the next one (reset to start at
  ``now_ms``) once the current one is ``window_ms`` old;
* a window that started ``samples x window_ms`` or more ago is obsolete: reset (value 0, start ``now_ms``) before
  any measure;
* ``window_size(now_ms)`` is the elapsed time the rate divides by: ``now - oldest window start``, raised to
  ``samples - 1`` whole windows while fewer have passed (so a first burst is measured over 10 s with the defaults,
  not over the few ms it took) -- Kafka's Rate.windowSize; at least 1 ms (Kafka's would divide by 0 with one
  sample);
* ``measure(now_ms)`` = sum of the windows' values / ``window_size`` in seconds: a value per second.

Times are integer milliseconds of a monotonic clock the caller passes, so tests use a fake one and exact values.
"""


class Rate:
    """A value per second over ``samples`` windows of ``window_ms`` (module docstring)."""

    __slots__ = ("samples", "window_ms", "_ring", "_current", "last_record_ms")

    def __init__(self, samples, window_ms):
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs >= 1 sample of >= 1 ms (got %d x %d ms)" % (samples, window_ms))
        self.samples = samples
        self.window_ms = window_ms
        self._ring = []          # [start_ms, value], at most ``samples``; _current indexes the one being filled
        self._current = 0
        self.last_record_ms = None

    def record(self, value, now_ms):
        ring = self._ring
        if not ring:
            ring.append([now_ms, 0.0])
        sample = ring[self._current]
        if now_ms - sample[0] >= self.window_ms:      # Kafka's Sample.isComplete -> advance
            self._current = (self._current + 1) % self.samples
            if self._current >= len(ring):
                sample = [now_ms, 0.0]
                ring.append(sample)
            else:
                sample = ring[self._current]
                sample[0], sample[1] = now_ms, 0.0
        sample[1] += value
        self.last_record_ms = now_ms

    def _purge(self, now_ms):
        expire = self.samples * self.window_ms
        for sample in self._ring:
            if now_ms - sample[0] >= expire:
                sample[0], sample[1] = now_ms, 0.0

    def window_size(self, now_ms):
        """The elapsed ms the rate divides by (module docstring)."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self._ring), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def total(self, now_ms):
        """The sum of the live windows' values."""
        self._purge(now_ms)
        return sum(s[1] for s in self._ring)

    def measure(self, now_ms):
        """Value per second at ``now_ms``."""
        return self.measure_with_window(now_ms)[0]

    def measure_with_window(self, now_ms):
        """``(value per second, window_size ms)`` at ``now_ms`` in one pass over the windows (what a quota check
        needs: the rate, and the elapsed time the throttle is computed over)."""
        expire = self.samples * self.window_ms
        total = 0.0
        oldest = now_ms
        for sample in self._ring:
            if now_ms - sample[0] >= expire:
                sample[0], sample[1] = now_ms, 0.0
            total += sample[1]
            if sample[0] < oldest:
                oldest = sample[0]
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        if elapsed < 1:
            elapsed = 1
        return total / (elapsed / 1000.0), elapsed
