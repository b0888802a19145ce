"""Clocks and one-shot timers for the group coordinator.

The coordinator never sleeps: it asks a scheduler to call it back (``call_later(delay_ms, fn) -> handle``,
``handle.cancel()``) and reads time through ``now_ms()``. ``GeventScheduler`` backs this with ``gevent.spawn_later``
on the broker; ``FakeScheduler`` is a manual clock for unit tests (``advance(ms)`` runs every callback that falls
due, in due-time order, including callbacks scheduled by callbacks).
Invariant: a callback never runs after its handle was cancelled.
"""
import heapq
import itertools
import time


class _GeventHandle:
    __slots__ = ("greenlet", "cancelled")

    def __init__(self):
        self.greenlet = None
        self.cancelled = False

    def cancel(self):
        self.cancelled = True
        g = self.greenlet
        if g is not None and not g.dead:
            g.kill(block=False)


class GeventScheduler:
    def now_ms(self):
        return int(time.time() * 1000)

    def call_later(self, delay_ms, fn, *args):
        import gevent
        h = _GeventHandle()

        def run():
            if not h.cancelled:
                fn(*args)
        h.greenlet = gevent.spawn_later(max(0, delay_ms) / 1000.0, run)
        return h


class _FakeHandle:
    __slots__ = ("cancelled",)

    def __init__(self):
        self.cancelled = False

    def cancel(self):
        self.cancelled = True


class FakeScheduler:
    """Manual clock: time moves only in ``advance``."""

    def __init__(self, start_ms=1_000_000):
        self.now = start_ms
        self._heap = []
        self._seq = itertools.count()

    def now_ms(self):
        return self.now

    def call_later(self, delay_ms, fn, *args):
        h = _FakeHandle()
        heapq.heappush(self._heap, (self.now + max(0, delay_ms), next(self._seq), h, fn, args))
        return h

    def pending(self):
        return sum(1 for e in self._heap if not e[2].cancelled)

    def advance(self, ms):
        target = self.now + ms
        while self._heap and self._heap[0][0] <= target:
            due, _, h, fn, args = heapq.heappop(self._heap)
            self.now = max(self.now, due)
            if not h.cancelled:
                fn(*args)
        self.now = target
