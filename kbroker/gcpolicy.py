"""Garbage-collector policy: keep CPython's full collections from stalling the event loop as the broker grows.

Why: a full (generation 2) collection walks every object the collector tracks, ~0.3 us each, and holds the loop
(and the GIL) the whole time. A broker hosting 10,000 partitions tracks ~500,000 objects: measured 120-180 ms
pauses (kbroker/tests: a hostile Produce of 30,000 entries saw 0.206 s where its bound is 0.2 s). CPython starts
one whenever the objects that survived into generation 2 since the last one exceed a quarter of those it kept,
which is exactly when the broker is busy growing (a topic of thousands of partitions, a request of 30,000
entries), so the pause lands in the middle of someone's request.

What: state that has settled is moved out of the collector's reach with ``gc.freeze()`` (the "permanent
generation"; reference counting still frees it, only the cycle finder skips it). Every ``CHECK_S`` a maintenance
greenlet counts the unfrozen generation-2 objects (``gc.get_objects(2)``: ~10 ns an object, and few are there
once the rest is frozen):

- below ``FREEZE_AT`` (50,000, a ~15 ms collection): nothing; CPython's own collections stay that cheap.
- up to ``COLLECT_MAX`` (100,000): collect them (cycles among them are reclaimed, ~30 ms), then freeze the rest.
- more (a burst of growth): collect the young generations only and freeze; a cycle among the frozen objects
  that dies later waits for the next compaction.

Young collections: CPython collects generation 0 every 700 net allocations, and one in ten of those also
generation 1; with the heap frozen those are cheap, but a burst of allocation runs hundreds of them, and each tenth
one counts towards a full collection of what is unfrozen. ``settle`` raises the first threshold to
``YOUNG_EVERY`` (10,000): a broker failure's controller work (20,000 partition states elected, written, sent;
30,000 partitions x RF 2, frozen heap, in-process driver) went from 0.75-0.82 to 0.66-0.71 s of CPU, against
0.61-0.63 s with the collector off. A young collection then walks at most ~10,000 objects (about a millisecond),
a generation-1 one at most ~10x that (as a ``COLLECT_MAX`` collection, tens of ms, only when everything
allocated survived).

Compaction: every ``COMPACT_S`` (an hour) everything is unfrozen, collected once and frozen again. That is the
one pause left that grows with the heap (~0.15 s at 10,000 partitions, once an hour instead of at every
quarter's growth); it reclaims reference cycles that died while frozen (a closed connection's, a deleted
partition's), so memory does not creep.

Owner: ``Broker`` starts one ``GcPolicy`` after startup (which ends with a first freeze: the loaded logs are
the bulk of the heap) and kills it on stop. Process-wide state, so a process holds one.
"""
import gc
import logging
import time

log = logging.getLogger(__name__)

CHECK_S = 1.0
FREEZE_AT = 50_000
COLLECT_MAX = 100_000
COMPACT_S = 3600.0
YOUNG_EVERY = 10_000


class GcPolicy:
    """``check()`` applies the policy once (the greenlet calls it every ``CHECK_S``); ``freezes``,
    ``compactions`` and ``last_pause_s`` say what it did (tests, logs)."""

    def __init__(self, freeze_at=FREEZE_AT, collect_max=COLLECT_MAX, compact_s=COMPACT_S, clock=time.monotonic):
        self.freeze_at = freeze_at
        self.collect_max = collect_max
        self.compact_s = compact_s
        self.clock = clock
        self.freezes = 0
        self.compactions = 0
        self.last_pause_s = 0.0
        self._compacted_at = clock()

    def settle(self):
        """After startup: collect once (nobody is waiting yet), freeze what is left, and collect the young
        generation every ``YOUNG_EVERY`` allocations from now on."""
        self._timed(lambda: (gc.collect(), gc.freeze()))
        gc.set_threshold(YOUNG_EVERY, *gc.get_threshold()[1:])
        self.freezes += 1
        self._compacted_at = self.clock()

    def check(self):
        if self.clock() - self._compacted_at >= self.compact_s:
            self._timed(self._compact)
            return
        pending = len(gc.get_objects(2))
        if pending < self.freeze_at:
            return
        if pending <= self.collect_max:
            self._timed(lambda: (gc.collect(), gc.freeze()))
        else:
            self._timed(lambda: (gc.collect(1), gc.freeze()))
        self.freezes += 1

    def _compact(self):
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.compactions += 1
        self._compacted_at = self.clock()

    def _timed(self, fn):
        start = time.perf_counter()
        fn()
        self.last_pause_s = time.perf_counter() - start
        if self.last_pause_s > 0.05:
            log.info("gc: %.0f ms (%d objects frozen)", self.last_pause_s * 1000, gc.get_freeze_count())

    def run(self, sleep):
        """The maintenance loop: ``sleep`` is gevent.sleep in the broker."""
        while True:
            sleep(CHECK_S)
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the policy must keep running
                log.exception("gc policy")
