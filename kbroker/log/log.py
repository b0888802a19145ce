"""One partition's log: an ordered list of segments in ``<log.dir>/<topic>-<partition>/`` (Kafka's Log).

Invariants:
* ``segments`` is sorted by base offset (bisect on ``_bases``); the last one is the active segment and
  is the only one appended to.  ``log_end_offset`` is the next offset to assign.
* ``log_start_offset`` (Kafka >= 0.11, KIP-107) = max(first segment's base offset, the offset DeleteRecords or the
  leader moved it to: ``maybe_increment_log_start_offset``); reads below it are OffsetOutOfRange, retention deletes
  every segment wholly below it (``delete_old_segments``), a truncation below it lowers it. It never exceeds the LEO.
  The LogManager keeps it across restarts in ``log-start-offset-checkpoint`` (given back as ``log_start_offset``).
* Every byte of every ``.log`` file is a whole v2 batch (the loader cuts torn tails at startup).
* ``recovery_point``: every offset below it is fsynced; a restart after a crash re-scans only from the
  segment holding it.  It only moves forward through ``flush`` (and back through ``truncate_to``).
* Removed segments (retention, truncation) are renamed ``*.deleted`` at once and unlinked after
  ``file.delete.delay.ms``, keeping their fds open until then so in-flight sendfile regions stay valid.

All methods are plain blocking Python; fsync happens only in ``flush`` (the server runs it in a thread
pool) and nowhere on the append path.  A roll only records that the old segments want a flush
(``flush_pending_offset``); ``LogManager.flush_dirty`` performs it.

Producer-state snapshots (``producer_snapshot.py``'s ``<offset>.snapshot`` files, Kafka's): the partition sets
``producer_snapshot_source`` (() -> its entries). A roll takes the entries at once -- the state of every offset
below the new segment's base -- and the next ``flush`` that makes those offsets durable writes the file (tmp, fsync,
rename on the owner thread, directory fsync), keeping the newest ``producer_snapshot.KEEP`` (2). So a snapshot
never describes data a crash can lose. A clean shutdown writes one at the log end (``snapshot_producer_state``,
after the final flush). A truncation to ``offset`` drops the pending ones above it and deletes the files above it
(durably) before anything else may append; ``_snapshot_generation`` makes a write racing with it land nowhere.
"""

import bisect
import itertools
import logging
import os
import shutil
import threading
import time
from collections import deque

from kbroker.errors import OffsetOutOfRange, RecordListTooLarge

from . import dir_failure, producer_snapshot
from .checkpoint import fsync_dir
from .file_region import FileRegion
from .loader import DELETED_SUFFIX, load_segments
from .segment import INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, filename_prefix, now_ms
from .txn_index import TXN_INDEX_SUFFIX, collect_aborted

logger = logging.getLogger(__name__)


def parse_topic_partition(dir_name):
    """``"my-topic-3"`` -> ``("my-topic", 3)``: the topic is the text before the LAST '-'."""
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError("not a <topic>-<partition> directory name: %r" % dir_name)
    return topic, int(partition)


class LogFlushStats:
    """Kafka's ``kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs`` timer: every ``Log.flush`` that had
    something to make durable (offsets above the recovery point) counts once, its duration in ms kept among the
    last ``SAMPLES`` (Yammer's sliding window reservoir; the metrics collector computes the quantiles at scrape).
    Process-wide, as Kafka's LogFlushStats object is per JVM (one broker per process). Flushes run in worker
    threads, so the writers take the lock (an fsync costs 100 us to tens of ms; the lock nanoseconds)."""
    SAMPLES = 1024

    def __init__(self):
        self.count = 0
        self.samples_ms = deque(maxlen=self.SAMPLES)
        self._lock = threading.Lock()

    def record(self, ms):
        with self._lock:
            self.count += 1
            self.samples_ms.append(ms)

    def snapshot(self):
        """``(count, [recent durations ms])`` read together."""
        with self._lock:
            return self.count, list(self.samples_ms)


FLUSH_STATS = LogFlushStats()


class FetchSlice:
    """What ``Log.read`` returns: a region of one segment file starting at a batch boundary, the base offset
    of that first batch and the first batch's whole size.

    An empty slice (``size == 0``) means nothing is readable yet at that offset (or nothing was allowed).
    ``first_entry_incomplete``: the region ends inside its first batch (Kafka's ``firstEntryIncomplete``):
    Fetch v3+ answers such a partition with no records (KIP-74), v0-v2 get the cut bytes.
    """
    __slots__ = ("region", "first_offset", "first_batch_size")

    def __init__(self, region, first_offset, first_batch_size=0):
        self.region = region
        self.first_offset = first_offset
        self.first_batch_size = first_batch_size

    @property
    def size(self):
        return self.region.size

    @property
    def first_entry_incomplete(self):
        return self.region.size < self.first_batch_size

    def first_batch_region(self):
        """The whole first batch (a region of the same file), however much of it ``region`` holds."""
        r = self.region
        return FileRegion(r.file, r.position, self.first_batch_size)

    def __len__(self):
        return self.region.size

    def __repr__(self):
        return "FetchSlice(%r, first_offset=%d, first_batch_size=%d)" % (self.region, self.first_offset,
                                                                         self.first_batch_size)


def _first_index_offset_from(index, position):
    """Offset of the first offset-index entry whose position is >= ``position`` (positions increase), or None."""
    lo, hi = 0, index.entries
    while lo < hi:
        mid = (lo + hi) >> 1
        if index.entry(mid)[1] < position:
            lo = mid + 1
        else:
            hi = mid
    if lo == index.entries:
        return None
    return index.base_offset + index.entry(lo)[0]


def _call_here(fn):
    return fn()


class Log:
    # How a worker thread (the cleaner) gets a segment-list change run by the thread that owns the log (the
    # server's event loop). ``_bases`` and ``_segments`` are two lists: a reader interleaved between two edits
    # made from another thread would see them disagree, so every such edit goes through ``owner_call``. The
    # server installs a loop-dispatching version at startup; plain callers (tests, tools) run it in place.
    owner_call = staticmethod(_call_here)
    def __init__(self, dir_path, config, recovery_point=0, clean_shutdown=False, log_start_offset=0):
        self.dir = dir_path
        self.config = config
        try:
            self.topic, self.partition = parse_topic_partition(os.path.basename(os.path.normpath(dir_path)))
        except ValueError:
            self.topic, self.partition = None, None
        if not os.path.isdir(dir_path):
            # Not makedirs(exist_ok=True) on an existing directory: its mkdir fails with EEXIST only after taking
            # the parent's lock -- the log dir every partition shares -- which serialised the threads loading
            # 10,000 partitions (py-spy: ~7 % of their samples).
            os.makedirs(dir_path, exist_ok=True)
        loaded = load_segments(dir_path, config, recovery_point, clean_shutdown)
        self._segments = loaded.segments
        self._bases = [s.base_offset for s in self._segments]
        self._next_offset = loaded.next_offset
        self.recovery_point = loaded.recovery_point
        self.truncated_on_load = loaded.truncated_bytes
        self.last_flush_ms = now_ms()
        self.flush_pending_offset = None  # set by roll(): flush everything below it soon
        self._pending_deletes = []  # (due_ms, segment) renamed *.deleted, unlinked when due
        self.producer_snapshot_source = None   # the partition's () -> [SnapshotEntry] (module docstring)
        self._pending_snapshots = []           # [(offset, entries, generation)] taken at rolls, written by flush
        self._snapshot_generation = 0          # +1 at every truncation
        # The DeleteRecords floor (module docstring); read as max(it, first base), clamped to the LEO: a checkpoint
        # from before a crash that lost the log's tail must not leave the start above the end.
        self._start = min(max(log_start_offset, self._bases[0]), self._next_offset)

    # -- state ---------------------------------------------------------------------------------
    @property
    def topic_partition(self):
        return self.topic, self.partition

    @property
    def log_start_offset(self):
        start = self._start
        first = self._bases[0]
        return start if start > first else first

    def maybe_increment_log_start_offset(self, offset):
        """Move the log start offset up to ``offset`` (DeleteRecords on the leader; a follower applying its leader's);
        True if it moved. An offset above the LEO raises OffsetOutOfRange; one at or below the start changes
        nothing. Segments wholly below the new start go at the next retention check (Kafka's
        deleteLogStartOffsetBreachedSegments), so an in-flight read of them stays valid."""
        if offset > self._next_offset:
            raise OffsetOutOfRange("log start offset %d above the log end offset %d of %s"
                                   % (offset, self._next_offset, self.dir))
        if offset <= self.log_start_offset:
            return False
        self._start = offset
        return True

    @property
    def log_end_offset(self):
        return self._next_offset

    @property
    def active_segment(self):
        return self._segments[-1]

    @property
    def segments(self):
        return list(self._segments)

    @property
    def num_segments(self):
        return len(self._segments)

    @property
    def size_in_bytes(self):
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self):
        return self._next_offset - self.recovery_point

    def _floor_index(self, offset):
        return bisect.bisect_right(self._bases, offset) - 1

    # -- append --------------------------------------------------------------------------------
    def append(self, info, now=None):
        """Write ``info.buffer`` (whole v2 batches with offsets assigned) to the active segment.

        ``info`` is an append result (``kbroker.record.AppendInfo`` from validation, ``StoredAppend`` for a
        follower): ``buffer``, ``first_offset``, ``last_offset``, ``max_timestamp`` and ``batches``, the entries
        the segment indexes from (no header is parsed again here).  ``info.first_offset`` must be the log end
        offset (a replica follower may leave a gap after a compacted range, so a larger first offset is accepted;
        a smaller one is a bug).
        """
        if info.first_offset < self._next_offset:
            raise ValueError("append at offset %d below log end offset %d in %s"
                             % (info.first_offset, self._next_offset, self.dir))
        size = len(info.buffer)
        if size == 0:
            return
        if size > self.config.segment_bytes:
            raise RecordListTooLarge("batch of %d bytes exceeds segment.bytes %d" % (size, self.config.segment_bytes))
        try:
            if dir_failure.INJECTED:
                dir_failure.check_injected(self.dir)
            segment = self._maybe_roll(size, info.max_timestamp, info.last_offset, now_ms() if now is None else now)
            segment.append(info.buffer, info.batches)   # a failed write is cut back (LogSegment.append)
        except OSError as exc:
            # ENOSPC, EIO...: the whole log dir goes offline (KIP-112, dir_failure.py); callers see error 56
            raise dir_failure.storage_error(self.dir, exc) from exc
        self._next_offset = info.last_offset + 1

    def _maybe_roll(self, size, max_timestamp, last_offset, now):
        segment = self._segments[-1]
        cfg = self.config
        if (segment.size > cfg.segment_bytes - size
                or (segment.size > 0
                    and segment.time_waited_for_roll(now, max_timestamp) > cfg.segment_ms - segment.roll_jitter_ms)
                or segment.indexes_full
                or last_offset - segment.base_offset > INT32_MAX):
            return self.roll()
        return segment

    def roll(self):
        """Start a new active segment at the log end offset (no-op if the active one is empty there)."""
        active = self._segments[-1]
        new_base = self._next_offset
        if active.base_offset == new_base and active.size == 0:
            return active
        if new_base < active.base_offset:
            raise ValueError("cannot roll to %d below active base %d" % (new_base, active.base_offset))
        active.on_become_inactive()
        prefix = os.path.join(self.dir, filename_prefix(new_base))
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            if os.path.exists(prefix + suffix):
                # Leftover from an older life of this offset range (a truncation); never append to it.
                logger.warning("deleting stale %s before roll", prefix + suffix)
                os.unlink(prefix + suffix)
        segment = LogSegment(self.dir, new_base, self.config)
        self._segments.append(segment)
        self._bases.append(new_base)
        self.flush_pending_offset = new_base
        source = self.producer_snapshot_source
        if source is not None:
            self._pending_snapshots.append((new_base, source(), self._snapshot_generation))
        return segment

    # -- read ----------------------------------------------------------------------------------
    def _empty(self, offset):
        active = self._segments[-1]
        return FetchSlice(active.end_region(), offset)

    def read(self, offset, max_bytes, max_offset=None, min_one=True):
        """Bytes from the batch holding ``offset``; never a batch whose base offset is >= ``max_offset``.

        Raises OffsetOutOfRange outside [log_start_offset, log_end_offset]; at the end (or at/after
        ``max_offset``) returns an empty slice.  See ``LogSegment.read`` for size rules.
        """
        leo = self._next_offset
        if offset > leo or offset < self._bases[0] or offset < self._start:
            raise OffsetOutOfRange("offset %d not in [%d, %d] of %s" % (offset, self.log_start_offset, leo, self.dir))
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return self._empty(offset)
        segments = self._segments
        i = max(0, self._floor_index(offset))
        while i < len(segments):
            segment = segments[i]
            max_position = None
            if max_offset is not None:
                if segment.base_offset >= max_offset:
                    break
                if i + 1 == len(segments) or self._bases[i + 1] > max_offset:
                    max_position = segment.position_of_first_batch_from(max_offset)
            got = segment.read(offset, max_bytes, max_position, min_one)
            if got is not None:
                return FetchSlice(*got)
            i += 1
        return self._empty(offset)

    def offset_for_timestamp(self, timestamp, resolver=None):
        """The first batch, in log order, whose max timestamp is >= ``timestamp``, or None.

        Without ``resolver`` the answer is ``(batch base offset, batch max timestamp)``.  With it,
        ``resolver(batch_bytes, timestamp) -> answer | None`` looks inside each candidate batch in turn
        (the record layer knows how to decompress) and the first non-None answer is returned: Kafka's
        searchForTimestamp, which answers the first *record* with timestamp >= the target and moves on
        to the next batch when none inside qualifies (a producer-set maxTimestamp may overstate).  The
        resolver may block the calling greenlet (it runs with a snapshot of the segment list, whose
        files stay open until file.delete.delay.ms after a removal).  -1/-2 are the caller's job.
        """
        start = self.log_start_offset
        for segment in list(self._segments):
            if segment.largest_timestamp < timestamp:
                continue
            for pos, size, base, _last, max_ts, _count in segment.batches_by_timestamp(timestamp, start):
                if resolver is None:
                    return max(base, start), max_ts
                found = resolver(FileRegion(segment.handle(), pos, size).read_bytes(), timestamp)
                if found is not None:
                    return found
        return None

    def batch_headers(self):
        """BatchHeader of every batch in the log, oldest first (``kbroker.record`` parses them; 16 KiB reads): what
        the rebuild of the leader-epoch cache reads (the producer state's: ``producer_batches``). Walks a snapshot
        of the segment list (a removed segment's file stays open until file.delete.delay.ms)."""
        for segment in list(self._segments):
            yield from segment.batch_headers()

    def producer_batches(self, from_offset=0):
        """``(BatchHeader, Marker | None)`` of every batch whose last offset is >= ``from_offset``, oldest first
        (``Marker`` for COMMIT/ABORT control batches): the producer-state replay. Walks a snapshot of the segment
        list; the first segment is entered through its offset index."""
        segments = list(self._segments)
        i = 0
        if from_offset > 0:
            i = max(0, bisect.bisect_right([s.base_offset for s in segments], from_offset) - 1)
        for k in range(i, len(segments)):
            segment = segments[k]
            position = 0
            if k == i and from_offset > segment.base_offset:
                position = segment.offset_index.lookup(from_offset)[1]
                # the index entry names a batch by its LAST offset: the batch at that position may end below
                # from_offset, hence the filter
            for h, marker in segment.producer_batches(position):
                if h.base_offset + h.last_offset_delta >= from_offset:
                    yield h, marker

    # -- transactions ----------------------------------------------------------------------------
    def add_aborted_txn(self, txn):
        """Index an aborted transaction (``txn_index.AbortedTxn``) in the segment holding its marker
        (``txn.last_offset``); an entry already there is not added twice (replays). False when no segment holds
        that offset any more (retention took it)."""
        i = self._floor_index(txn.last_offset)
        if i < 0 or txn.last_offset >= self._next_offset:
            return False
        return self._segments[i].txn_index.append(txn)

    def aborted_transactions(self, fetch_offset, upper_offset):
        """AbortedTxn values overlapping ``[fetch_offset, upper_offset)``, from the ``.txnindex`` of the segment
        holding ``fetch_offset`` and the later ones until a search is complete (txn_index.py)."""
        i = max(0, self._floor_index(fetch_offset))
        return collect_aborted(itertools.islice(self._segments, i, None), fetch_offset, upper_offset)

    def fetch_upper_offset(self, fetch_slice):
        """An offset above every record of ``fetch_slice`` (a ``read`` result), cheap to find (Kafka's
        LogSegment.fetchUpperBoundOffset): the offset-index entry at or after the slice's end position in its
        segment -- the last offset of a batch starting there -- else the next segment's base, else the LEO."""
        region = fetch_slice.region
        segments = self._segments
        # The slice starts in the segment holding its first offset (or a later one): no walk over every segment.
        for k in range(max(0, self._floor_index(fetch_slice.first_offset)), len(segments)):
            segment = segments[k]
            if segment.key == getattr(region.file, "key", None):
                found = _first_index_offset_from(segment.offset_index, region.position + region.size)
                if found is not None:
                    return found
                return segments[k + 1].base_offset if k + 1 < len(segments) else self._next_offset
        return self._next_offset

    # -- durability ----------------------------------------------------------------------------
    def flush(self, up_to=None, now=None):
        """fsync every segment holding offsets in [recovery_point, up_to) (default: the log end).

        Returns the (advanced) recovery point.  Blocking; safe to run in a worker thread.
        """
        if up_to is None or up_to > self._next_offset:
            up_to = self._next_offset
        if up_to > self.recovery_point:
            started = time.monotonic()
            segments = list(self._segments)
            bases = [s.base_offset for s in segments]
            first = max(0, bisect.bisect_right(bases, self.recovery_point) - 1)
            try:
                if dir_failure.INJECTED:
                    dir_failure.check_injected(self.dir)
                for segment in segments[first:]:
                    if segment.base_offset >= up_to:
                        break
                    if not segment.closed:
                        segment.flush()
            except OSError as exc:
                # the recovery point stays: nothing above it is known durable (KIP-112, dir_failure.py)
                raise dir_failure.storage_error(self.dir, exc) from exc
            self.recovery_point = up_to
            FLUSH_STATS.record((time.monotonic() - started) * 1000.0)
        self.last_flush_ms = now_ms() if now is None else now
        if self.flush_pending_offset is not None and self.recovery_point >= self.flush_pending_offset:
            self.flush_pending_offset = None
        if self._pending_snapshots:
            self._write_due_snapshots()
        return self.recovery_point

    # -- producer-state snapshots (module docstring) ----------------------------------------------
    def _write_due_snapshots(self):
        """Write the pending snapshots now below the recovery point (any thread; the list and the rename are
        handled on the owner thread)."""
        while True:
            item = Log.owner_call(self._take_due_snapshot)
            if item is None:
                return
            offset, entries, generation = item
            path = producer_snapshot.snapshot_path(self.dir, offset)
            tmp = path + producer_snapshot.TMP_SUFFIX
            with open(tmp, "wb") as f:
                f.write(producer_snapshot.encode(entries))
                f.flush()
                os.fsync(f.fileno())
            if not Log.owner_call(lambda: self._install_snapshot(tmp, path, offset, generation)):
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                continue
            fsync_dir(self.dir)
            producer_snapshot.retain(self.dir)

    def _take_due_snapshot(self):
        pending = self._pending_snapshots
        if pending and pending[0][0] <= self.recovery_point:
            return pending.pop(0)
        return None

    def _install_snapshot(self, tmp, path, offset, generation):
        if generation != self._snapshot_generation or offset > self._next_offset:
            return False                 # a truncation came in between: that history is gone
        os.rename(tmp, path)
        return True

    def snapshot_producer_state(self, durable=True):
        """Write a snapshot at the log end now (clean shutdown, after the final flush). Returns its path or None.
        None written when one at the log end exists already (Kafka's takeSnapshot: not a new offset): an idle
        partition's restart + clean shutdown costs no write and no two fsyncs (10,000 partitions: ~80 s of fsyncs
        at ~4 ms each on this machine's disk)."""
        source = self.producer_snapshot_source
        if source is None:
            return None
        self._pending_snapshots = []
        existing = producer_snapshot.snapshot_path(self.dir, self._next_offset)
        if os.path.exists(existing):
            return existing
        path = producer_snapshot.write(self.dir, self._next_offset, source(), durable)
        producer_snapshot.retain(self.dir)
        return path

    def _forget_snapshots_above(self, offset):
        """Truncation: pending snapshots above ``offset`` dropped, files above it deleted (durably)."""
        self._snapshot_generation += 1
        gen = self._snapshot_generation
        self._pending_snapshots = [(o, e, gen) for o, e, _g in self._pending_snapshots if o <= offset]
        producer_snapshot.delete_above(self.dir, offset)

    def stale_txn_index_from(self):
        """Base offset of the first segment whose .txnindex awaits the producer-state replay, or None."""
        for segment in self._segments:
            if segment.txn_index.stale:
                return segment.base_offset
        return None

    def clear_stale_txn_index(self):
        for segment in self._segments:
            segment.txn_index.stale = False

    # -- truncation / retention ----------------------------------------------------------------
    def truncate_to(self, offset):
        """Drop every offset >= ``offset`` (follower catching up with a new leader). Returns True if cut."""
        if offset < 0:
            raise ValueError("cannot truncate to negative offset %d" % offset)
        if offset >= self._next_offset:
            return False
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset)
            return True
        self._start = min(self._start, offset)
        self._forget_snapshots_above(offset)
        doomed = []
        while len(self._segments) > 1 and self._bases[-1] > offset:
            doomed.append(self._segments.pop())
            self._bases.pop()
        self._remove_segments(doomed, now_ms())
        self._segments[-1].truncate_to(offset)
        self._next_offset = offset
        self.recovery_point = min(self.recovery_point, offset)
        return True

    def truncate_fully_and_start_at(self, offset):
        """Delete every segment and start empty at ``offset``."""
        self._forget_snapshots_above(-1)
        doomed = self._segments
        self._segments, self._bases = [], []
        self._remove_segments(doomed, now_ms())
        self._segments.append(LogSegment(self.dir, offset, self.config))
        self._bases.append(offset)
        self._next_offset = offset
        self._start = offset
        self.recovery_point = offset

    def delete_old_segments(self, retention_ms, retention_bytes, now):
        """Time then size retention (Kafka 0.10.1 rules); returns the number of segments deleted.

        Time: delete from the oldest while ``now - largest_timestamp > retention_ms``.  Size: while
        ``total - segment.size >= retention_bytes``.  -1 (or None) disables either.  The active segment
        goes only when non-empty and everything else went too; a fresh active segment is rolled first.
        First of all, every segment whose next segment starts at or below the log start offset goes (all its
        records are below it: DeleteRecords, Kafka's deleteLogStartOffsetBreachedSegments).
        """
        deleted = self.delete_segments_below_start(now, purge=False)
        if retention_ms is not None and retention_ms >= 0:
            deleted += self._delete_while(lambda s: now - s.largest_timestamp > retention_ms, now)
        if retention_bytes is not None and retention_bytes >= 0:
            diff = self.size_in_bytes - retention_bytes
            if diff >= 0:
                def over(segment):
                    nonlocal diff
                    if diff - segment.size >= 0:
                        diff -= segment.size
                        return True
                    return False
                deleted += self._delete_while(over, now)
        self.purge_deleted(now)
        return deleted

    def delete_segments_below_start(self, now, purge=True):
        """Delete the segments wholly below the log start offset (the active one never); returns how many."""
        start = self._start
        bases = self._bases
        n = 0
        while n + 1 < len(bases) and bases[n + 1] <= start:
            n += 1
        keep_from = bases[n]            # the first segment holding an offset >= start
        deleted = self._delete_while(lambda s: s.base_offset < keep_from, now) if n else 0
        if purge:
            self.purge_deleted(now)
        return deleted

    def _delete_while(self, predicate, now):
        active = self._segments[-1]
        doomed = []
        for segment in self._segments:
            if not predicate(segment) or (segment is active and segment.size == 0):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self.roll()
        del self._segments[:len(doomed)]
        del self._bases[:len(doomed)]
        self._remove_segments(doomed, now)
        logger.info("%s: deleted %d segment(s); log start offset now %d", self.dir, len(doomed),
                    self.log_start_offset)
        return len(doomed)

    def replace_segments(self, group, replacement, now):
        """Swap the contiguous run ``group`` of (non-active) segments for ``replacement`` (the cleaner's output);
        the old files are renamed ``.deleted``. Returns False, changing nothing, when the log no longer holds
        ``group`` as is. Runs on the owner thread via ``owner_call``."""
        def swap():
            segs = self._segments
            k = len(group)
            for i, seg in enumerate(segs):
                if seg is group[0]:
                    if segs[i:i + k] != group or i + k >= len(segs):
                        return False
                    self._remove_segments(group, now)
                    self._bases[i:i + k] = [replacement.base_offset]
                    self._segments[i:i + k] = [replacement]
                    return True
            return False
        return Log.owner_call(swap)

    def _remove_segments(self, segments, now):
        delay = self.config.file_delete_delay_ms
        for segment in segments:
            try:
                segment.change_suffix(segment.suffix, segment.suffix + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
            if delay is None or delay <= 0:
                segment.delete()
            else:
                self._pending_deletes.append((now + delay, segment))

    def purge_deleted(self, now):
        """Unlink ``*.deleted`` segments whose file.delete.delay.ms has passed."""
        keep = []
        for due, segment in self._pending_deletes:
            if due <= now:
                segment.delete()
            else:
                keep.append((due, segment))
        self._pending_deletes = keep

    @property
    def truncations(self):
        """How many times the log was truncated (``truncate_to`` / ``truncate_fully_and_start_at``): a copier of
        this log (the log-dir move, kbroker/replica/log_dir_move.py) restarts when it changes."""
        return self._snapshot_generation

    # -- lifecycle -----------------------------------------------------------------------------
    def rename_dir(self, new_dir):
        """Rename the partition directory to ``new_dir`` (same file system) and follow it: segments, pending
        deletes and later rolls use the new paths; open fds and FileRegions stay valid. Owner thread only (a roll
        creates files under ``self.dir``)."""
        os.rename(self.dir, new_dir)
        self.dir = new_dir
        for segment in self._segments:
            segment.moved_to(new_dir)
        for _due, segment in self._pending_deletes:
            segment.moved_to(new_dir)

    def close(self):
        for segment in self._segments:
            segment.close()
        for _due, segment in self._pending_deletes:
            segment.delete()
        self._pending_deletes = []

    def delete(self):
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self):
        return "Log(%s, start=%d, end=%d, segments=%d)" % (self.dir, self.log_start_offset, self._next_offset,
                                                           len(self._segments))
