"""Record work that must not run on the event loop: one worker thread shared by the handlers.

Down-conversion for Fetch v0-v3 and ListOffsets' look inside a batch decode records in Python, and one stored
batch of ~1 MiB can hold ~10^5-10^6 records (a gzip batch of 1.2 M empty records takes ~6 s to down-convert).
Run on the loop, that would stall every connection of the broker (the bound is ~100 ms). In a worker thread the
loop keeps running: CPython hands the GIL to a waiting thread at least every ``sys.getswitchinterval()``
(5 ms), and zlib/lz4/zstd release it while they work.

What the GIL hand-over cannot fix is the cyclic garbage collector: decoding a batch creates a few container
objects per record, and each full collection walks all of them while holding the GIL (measured on a
150 000-record gzip batch: pauses of 63 ms for every thread, and 0.93 s instead of 0.60 s of work).
``gc_paused()`` turns the automatic collector off while one batch is decoded; its objects die by reference
counting right after, and the collector is back on before the next batch (a collection then finds a small heap).

One worker, not more: conversions cannot run in parallel under the GIL anyway, at most one batch's decoded
records are in memory at a time, and the collector is never held off by overlapping decodes. More requests
queue (each connection has one request in flight, so the queue is bounded by the number of connections). The
worker is separate from the broker's flush/cleaner pool (``Broker._pool``), so a long compaction never delays a
fetch and a flood of old-client fetches never delays an fsync.
"""
import gc
import threading
from contextlib import contextmanager

from gevent.threadpool import ThreadPool

WORKERS = 1
# Most records a stored batch may hold for a handler to decode it. Decoding materialises every record (~6 Python
# objects, ~360 bytes, while a batch is down-converted) and, worse for the loop, the objects die together when
# the batch is done: freeing a container of a million objects is one C loop that keeps the GIL (measured: 1.2 M
# objects, 100 ms during which no other thread runs). At this bound a down-conversion takes ~0.5 s of the
# worker, ~36 MB, and the loop never waits more than ~50 ms. The produce path accepts batches of millions of tiny
# records (a 32 MiB inflated budget / 7-byte records), real producers stay far below (librdkafka's
# batch.num.messages = 10 000, the Java producer's 16 KiB batches). Above it: Fetch v0-v3 answers
# UNSUPPORTED_VERSION (35, what Kafka answers when it will not down-convert, message.downconversion.enable=false)
# and ListOffsets answers the batch's base offset.
DECODE_MAX_RECORDS = 100_000

_pool = None
_gc_lock = threading.Lock()
_gc_holds = 0
_gc_was_enabled = False


def run_in_worker(fn, *args):
    """``fn(*args)`` in the worker thread; the calling greenlet waits, the loop runs on. Exceptions propagate.

    ``fn`` must not touch loop-owned state (Partition, Log segment lists): give it bytes or a FileRegion
    (``pread`` on an fd that stays open for file.delete.delay.ms after a segment's removal).
    """
    global _pool
    if _pool is None:
        _pool = ThreadPool(WORKERS)
    return _pool.apply(fn, args)


@contextmanager
def gc_paused():
    """The automatic cyclic collector off for the block (nested and concurrent holds are counted; the state
    found by the first hold is restored by the last release)."""
    global _gc_holds, _gc_was_enabled
    with _gc_lock:
        if _gc_holds == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holds += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holds -= 1
            if _gc_holds == 0 and _gc_was_enabled:
                gc.enable()
