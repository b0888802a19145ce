"""The log cleaner (Kafka's LogCleaner / LogCleanerManager): which compacted log to clean, and its progress.

``LogCleaner(manager)`` is owned by the LogManager; ``clean_once(now)`` (plain blocking, run by the server in
its thread pool every ``log.cleaner.backoff.ms`` when ``log.cleaner.enable``) cleans logs one at a time,
filthiest first, until none is due, each at most once per call.  The mechanics of one clean are in
compact.py.

A log is a candidate when its ``cleanup.policy`` includes ``compact``.  With ``first dirty`` its recorded
first dirty offset (clamped into ``[log start, log end]``; 0 for a log never cleaned) and ``first
uncleanable`` the active segment's base lowered by ``min.compaction.lag.ms`` (compact.py):

    cleanable bytes = sizes of the segments overlapping [first dirty, first uncleanable)
    clean bytes     = sizes of the segments wholly below first dirty
    dirty ratio     = cleanable / (clean + cleanable)

It is due when ``cleanable > 0`` and the ratio is >= ``min.cleanable.dirty.ratio``, or when a tombstone or
an empty transaction's marker it retains has reached its delete horizon (so they go away without new writes, as
Kafka 3.x's cleaner does).  The pending horizon of a log is remembered from its last clean; after a restart it is
found by one read of the clean section.

Transactions: ``first uncleanable`` is also never past the partition's last stable offset, which the owner of the
partitions tells through ``stable_offset_of(tp) -> int | None`` (set by the composition root; called on the log's
owner thread via ``Log.owner_call``, since the partition's producer state changes there; None when the log has no
partition yet). Without it, and always inside a clean, the log's own open transactions bound the pass
(compact.py).

``cleaner-offset-checkpoint`` in each log dir (the checkpoint.py text format) maps ``topic partition`` to
the first dirty offset; it is read at start and rewritten after every clean of a log in that dir (entries
of logs no longer hosted are dropped).  A log whose clean failed (I/O error, corrupt segment) is skipped
until restart; one whose segments changed underneath (retention, truncation) is simply retried.
"""

import logging
import os

from kbroker.record.batch import ATTR_DELETE_HORIZON, batch_header

from .checkpoint import OffsetCheckpoint
from .compact import CleanAborted, clean_log, first_uncleanable_offset, segment_batches
from .log import Log
from .segment import now_ms

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728  # log.cleaner.dedupe.buffer.size


class LogToClean:
    __slots__ = ("tp", "log", "first_dirty", "first_uncleanable", "clean_bytes", "cleanable_bytes")

    def __init__(self, tp, log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes):
        self.tp = tp
        self.log = log
        self.first_dirty = first_dirty
        self.first_uncleanable = first_uncleanable
        self.clean_bytes = clean_bytes
        self.cleanable_bytes = cleanable_bytes

    @property
    def dirty_ratio(self):
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


class LogCleaner:
    def __init__(self, manager, dedupe_buffer_size=DEFAULT_DEDUPE_BUFFER_SIZE):
        """``manager`` gives ``log_dirs``, ``all_logs() -> {tp: Log}`` and ``log_dir_of(tp)``."""
        self.manager = manager
        self.dedupe_buffer_size = dedupe_buffer_size
        self.first_dirty = {}
        self.horizons = {}  # tp -> smallest pending tombstone horizon (None: no tombstone retained)
        self.failed = set()
        self.in_progress = None  # tp being cleaned (LogManager.check_retention leaves it alone)
        self.paused = set()      # tps not to clean now: a replica moving to another log dir (Kafka's
                                 # abortAndPauseCleaning; kbroker/replica/log_dir_move.py)
        # tp -> the partition's last stable offset, or None (module docstring); None: no partitions known
        self.stable_offset_of = None
        for d in manager.log_dirs:
            self.first_dirty.update(OffsetCheckpoint(os.path.join(d, CLEANER_CHECKPOINT)).read())

    # -- selection -----------------------------------------------------------------------------
    def _first_dirty(self, tp, log):
        offset = self.first_dirty.get(tp, 0)
        if offset > log.log_end_offset:
            offset = log.log_start_offset  # truncated below it: everything is dirty again
        return max(offset, log.log_start_offset)

    def stable_offset(self, tp):
        """The partition's last stable offset (``stable_offset_of`` on the log's owner thread), or None."""
        source = self.stable_offset_of
        if source is None:
            return None
        return Log.owner_call(lambda: source(tp))

    def to_clean(self, tp, log, now):
        first_dirty = self._first_dirty(tp, log)
        first_uncleanable = first_uncleanable_offset(log, first_dirty, now, self.stable_offset(tp))
        segments = log.segments
        clean = cleanable = 0
        for i, seg in enumerate(segments[:-1]):
            next_base = segments[i + 1].base_offset
            if next_base <= first_dirty:
                clean += seg.size
            elif seg.base_offset < first_uncleanable:
                cleanable += seg.size
        return LogToClean(tp, log, first_dirty, first_uncleanable, clean, cleanable)

    def _pending_horizon(self, tp, log, first_dirty):
        if tp not in self.horizons:
            self.horizons[tp] = scan_min_horizon(log, first_dirty)
        return self.horizons[tp]

    def due_logs(self, now, exclude=()):
        """``[LogToClean]`` due for cleaning, filthiest first (horizon-only ones last)."""
        by_ratio, by_horizon = [], []
        for tp, log in self.manager.all_logs().items():
            if tp in exclude or tp in self.failed or tp in self.paused or not log.config.compacts:
                continue
            ltc = self.to_clean(tp, log, now)
            if ltc.cleanable_bytes > 0 and ltc.dirty_ratio >= log.config.min_cleanable_dirty_ratio:
                by_ratio.append(ltc)
                continue
            horizon = self._pending_horizon(tp, log, ltc.first_dirty)
            if horizon is not None and horizon <= now:
                by_horizon.append(ltc)
        by_ratio.sort(key=lambda ltc: ltc.dirty_ratio, reverse=True)
        return by_ratio + by_horizon

    # -- cleaning ------------------------------------------------------------------------------
    def clean_log(self, ltc, now, hook=None):
        tp, log = ltc.tp, ltc.log
        self.in_progress = tp
        try:
            kwargs = {} if hook is None else {"hook": hook}
            result = clean_log(log, ltc.first_dirty, now, self.dedupe_buffer_size,
                               stable_offset=self.stable_offset(tp), **kwargs)
        finally:
            self.in_progress = None
        self.first_dirty[tp] = result.end_offset
        self.horizons[tp] = result.min_horizon
        self.checkpoint(self.manager.log_dir_of(tp))
        return result

    def clean_once(self, now=None, dedupe_buffer_size=None):
        """Clean every due log once, filthiest first; returns ``{tp: CleanResult}``."""
        if dedupe_buffer_size is not None:
            self.dedupe_buffer_size = dedupe_buffer_size
        done = {}
        while True:
            now_ = now_ms() if now is None else now
            due = self.due_logs(now_, exclude=done)
            if not due:
                return done
            ltc = due[0]
            try:
                done[ltc.tp] = self.clean_log(ltc, now_)
            except CleanAborted as exc:
                logger.info("cleaning of %s-%d abandoned: %s", ltc.tp[0], ltc.tp[1], exc)
                done[ltc.tp] = None
            except Exception:  # noqa: BLE001 - one bad log must not stop the cleaner
                logger.exception("cleaning %s-%d failed; skipping it until restart", *ltc.tp)
                self.failed.add(ltc.tp)
                done[ltc.tp] = None

    def checkpoint(self, log_dir=None):
        """Rewrite ``cleaner-offset-checkpoint`` of ``log_dir`` (default: every dir)."""
        logs = self.manager.all_logs()
        for d in self.manager.log_dirs if log_dir is None else [log_dir]:
            offsets = {tp: off for tp, off in self.first_dirty.items()
                       if tp in logs and self.manager.log_dir_of(tp) == d}
            OffsetCheckpoint(os.path.join(d, CLEANER_CHECKPOINT)).write(offsets)

    def forget(self, tp):
        """Drop a deleted log's state (its checkpoint entry goes at the next write)."""
        self.first_dirty.pop(tuple(tp), None)
        self.horizons.pop(tuple(tp), None)
        self.failed.discard(tuple(tp))


def scan_min_horizon(log, first_dirty):
    """Smallest delete horizon among the batches of the clean section that carry one, or None."""
    best = None
    for seg in log.segments[:-1]:
        if seg.base_offset >= first_dirty:
            break
        for raw in segment_batches(seg):
            head = batch_header(raw)
            if head.attributes & ATTR_DELETE_HORIZON and head.records_count > 0:
                if best is None or head.base_timestamp < best:
                    best = head.base_timestamp
    return best
