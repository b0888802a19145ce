"""Cooperative time slices: how long one greenlet may keep the event loop before other clients get their turn.

Issue 8's rule: no single request may hold the event loop for more than ~100 ms. Work that grows with a request's
elements (a LeaderAndIsr naming 10,000 partitions, a DeleteTopics naming 100,000 topics) is cut into slices of
``SLICE_S`` (20 ms): ``TimeSlice.tick()`` after each element reads the clock (~60 ns) and, once the slice is
spent, yields to the loop. A client waiting meanwhile is served within about two slices (its socket is polled at
the first yield, its greenlet may run after ours at the second).

How to yield matters. ``gevent.sleep(0)`` only switches to greenlets that are already runnable and does not poll
sockets: measured, a greenlet yielding with it every 20 ms for 1 s kept another client's round trip at 0.99 s.
A timer of 1 us makes the hub run one full loop iteration, socket poll included (the same client then waited at
most 42 ms), and costs ~3 us when nothing else is waiting. A timer is also always fired, so, unlike
``gevent.idle()``, the yielding greenlet is never starved by a loop that is never idle.
"""
import time

import gevent

SLICE_S = 0.02
_TIMER_S = 1e-6


def yield_to_loop():
    """Let the hub run one loop iteration (poll sockets, run every ready greenlet), then continue."""
    gevent.sleep(_TIMER_S)


class TimeSlice:
    """``tick()`` after each element of a long loop on the event loop; it yields once ``budget`` seconds have
    passed since the slice began (then a new slice begins). ``yields`` counts the yields (tests, logs)."""

    __slots__ = ("budget", "yields", "_start")

    def __init__(self, budget=SLICE_S):
        self.budget = budget
        self.yields = 0
        self._start = time.monotonic()

    def tick(self):
        if time.monotonic() - self._start >= self.budget:
            yield_to_loop()
            self.yields += 1
            self._start = time.monotonic()
