"""Compaction of one log (Kafka's ``Cleaner.clean``): offset map, recopy into ``.cleaned``, crash-safe swap.

``clean_log(log, first_dirty, now, ...)`` cleans the range ``[log start, end)`` of one Log and returns a
CleanResult whose ``end_offset`` is the new first dirty offset.  ``end`` is the first uncleanable offset
(``first_uncleanable_offset``: the active segment's base, or the base of the first dirty segment whose
largest timestamp is newer than ``now - min.compaction.lag.ms``) unless the offset map filled up first.

Offset map (``OffsetMap``): 16-byte BLAKE2b digest of the key -> latest offset, built over the dirty
range ``[first dirty, first uncleanable)``.  Memory bound: at most ``dedupe_buffer_size // 128`` entries;
128 bytes is what one entry costs in CPython (33+16-byte bytes object, 32-byte int, ~48 bytes of dict
slot), so the default 128 MiB buffer holds ~1M keys per pass.  When it is full the pass ends after the
last mapped offset (records past it are kept: they are "beyond the map's range") and the rest is cleaned
next time.  A digest collision (p ~ n^2 / 2^129) could drop a record of a different key, as in Kafka.

``end`` is also never past the partition's last stable offset (``stable_offset``: the first offset of the oldest
open transaction capped by the high watermark, which the Partition knows and the LogCleaner asks for) nor past the
first offset of a transaction the log itself shows open (a transactional batch with no later control batch of its
producer; found in the same header walk that finds the producers' last batches), so the cleaner only ever sees
DECIDED transactions and never removes a record that an undecided one could still shadow or resurrect.

Transactions (KIP-98; Kafka's CleanedTransactionMetadata), tracked by ``TxnTracker`` over the batches in log order
with the aborted transactions of the log, read from the log's own ABORT markers in the same header walk
(``scan_producers``; an entry of the ``.txnindex`` files, ``Log.aborted_transactions``, gives the values recorded
for a marker when it has one -- the index alone could miss a transaction whose entry a recovery emptied):
* a batch of an ABORTED transaction is discarded whole (its records never enter the offset map either, so an
  aborted write never shadows a committed one); the producer's last batch stays as an empty header;
* a COMMIT/ABORT marker stays while any batch of its transaction was seen in this pass (the data it decides may
  still be in the log); once none is, the marker is "empty": it gets a delete horizon of ``now +
  delete.retention.ms`` (attribute bit 6, as a tombstone does) and goes at the first clean after that horizon --
  a consumer that read the data has that long to read the marker. A kept ABORT marker whose transaction still has
  batches (an emptied last batch of its producer) keeps its ``.txnindex`` entry in the cleaned segment; the entries
  of removed markers, and of markers whose data is gone, are dropped (Kafka's cleaned transaction index);
* control batches that are not COMMIT/ABORT markers are kept as they are; an empty control batch (a marker the
  cleaner already emptied) goes unless it is its producer's last batch.

Record rules, per batch of the cleaned range (segments below ``end``; the active segment never):
* a record is dropped when the map holds a later offset for its key, or it has no key (Kafka 3.x
  counts those as invalid and drops them; producers cannot write them to a compacted topic);
* a tombstone (null value) is dropped when its batch carries a delete horizon (attribute bit 6, the
  horizon is then the batch's baseTimestamp; KIP-534) that is <= now.  A kept tombstone in a batch
  without a horizon gets one: the batch is rewritten with horizon ``now + delete.retention.ms``, so a
  tombstone survives at least delete.retention.ms after the first clean that saw it;
* an unchanged batch is copied byte for byte; a changed one is rebuilt with the same base offset,
  lastOffsetDelta, partition leader epoch, producer id/epoch/base sequence and codec (recompressed),
  the kept records with their original offset deltas, maxTimestamp = max kept timestamp (the original
  for LogAppendTime);
* a batch left with no record (an empty header from an earlier clean included) is dropped, except that an EMPTY
  HEADER (61 bytes, no records, codec none) is kept when it is (a) its producer's last batch in the log -- the
  last data batch, or its last marker when it wrote only markers; the producer-state rebuild needs the last
  sequence and epoch, as Kafka keeps it -- or (b) the last batch of a segment group, so the cleaned segment
  ends at the same next offset as the group it replaces (the loader's swap completion deletes the old
  segments whose base is in ``[swap base, swap next offset)``; without (b) a crash mid-swap could leave
  old segments behind).

Segments are cleaned in groups (consecutive, total size <= segment.bytes, offsets within int32 of the
group base; a group never ends with an empty segment) into ONE segment based at the group's first base, with its
``.txnindex`` (the kept ABORT markers' entries) beside it, renamed through the same steps.
A group whose every batch is unchanged is not rewritten.  Swap steps (each fsynced; ``hook(step)`` runs
after each, for crash tests):

  "cleaned"  ``<base>.log/.index/.timeindex.cleaned`` written, fsynced, mtime = newest of the group
  "swap"     renamed to ``*.swap`` (from here the loader completes the swap)
  "deleted"  the group's segments renamed ``*.deleted`` (unlinked after file.delete.delay.ms); the Log's
             segment list now holds the new segment
  "done"     ``.swap`` suffix stripped

A crash before "swap" leaves ``.cleaned`` files that the loader deletes (the old segments are intact);
from "swap" on, the loader deletes every old segment in the swap's range and renames the swap (see
loader.py).  Either way the log holds the same latest record per key. (The loader rebuilds a swapped-in segment's
indexes and so empties its ``.txnindex``: what that loses is entries of kept ABORT markers whose transactions the
clean had just emptied of records -- nothing a consumer would have to skip -- the next clean, reading the markers
themselves, still knows those transactions aborted, and the partition's replay re-adds the entries.)

Concurrency: this runs in a worker thread while the event loop appends to the active segment and reads.
Only inactive segments are rewritten (the producer walk reads the active one's headers up to its size at the time:
a transaction opened later starts above every cleanable offset); the Log's lists are changed with in-place slice
assignments (bases first, so a concurrent reader's bisect lands at or before the right segment and scans forward),
which never lose a segment a concurrent roll appended.  Before the swap the group must still be in the log
(identity check), else the pass is abandoned (``CleanAborted``).
"""

import hashlib
import logging
import os
from collections import namedtuple

from kbroker._native import scan_batches
from kbroker.record import compression
from kbroker.record.batch import (ATTR_CODEC_MASK, ATTR_DELETE_HORIZON, LOG_APPEND_TIME, batch_header, batch_records,
                                  encode_record, header_entry, pack_batch)
from kbroker.record.control import marker_of

from .checkpoint import fsync_dir
from .loader import CLEANED_SUFFIX, SWAP_SUFFIX
from .segment import (INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, buffer_batches,
                      filename_prefix)
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn

logger = logging.getLogger(__name__)

DIGEST_SIZE = 16
ENTRY_BYTES = 128
READ_WINDOW = 1 << 20  # read segments in 1 MiB windows; write the cleaned segment in ~1 MiB appends
STEPS = ("cleaned", "swap", "deleted", "done")


class CleanAborted(Exception):
    """The log changed under the cleaner (segments deleted/truncated); nothing was swapped."""


class CorruptSegmentError(Exception):
    pass


def key_digest(key):
    return hashlib.blake2b(key, digest_size=DIGEST_SIZE).digest()


class OffsetMap:
    """Key digest -> latest offset, at most ``capacity`` keys (see module docstring for the bound)."""

    def __init__(self, memory_bytes):
        self.capacity = max(1, int(memory_bytes) // ENTRY_BYTES)
        self._offsets = {}
        self.latest_offset = -1

    def put(self, key, offset):
        """Record ``offset`` for ``key``; False (nothing stored) when a new key does not fit."""
        digest = key_digest(key)
        offsets = self._offsets
        if digest not in offsets and len(offsets) >= self.capacity:
            return False
        offsets[digest] = offset
        self.latest_offset = offset
        return True

    def get(self, key):
        return self._offsets.get(key_digest(key), -1)

    def __len__(self):
        return len(self._offsets)


class CleanResult:
    __slots__ = ("end_offset", "groups", "groups_rewritten", "bytes_read", "bytes_written", "records_read",
                 "records_kept", "min_horizon", "map_full", "aborted_records_removed", "markers_removed")

    def __init__(self, end_offset):
        self.end_offset = end_offset
        self.groups = self.groups_rewritten = 0
        self.bytes_read = self.bytes_written = 0
        self.records_read = self.records_kept = 0
        self.min_horizon = None  # smallest delete horizon of a batch still holding a tombstone or a marker
        self.map_full = False
        self.aborted_records_removed = 0  # records of aborted transactions discarded
        self.markers_removed = 0          # COMMIT/ABORT markers whose horizon had passed, removed

    def note_horizon(self, horizon):
        if horizon is not None and (self.min_horizon is None or horizon < self.min_horizon):
            self.min_horizon = horizon

    def __repr__(self):
        return ("CleanResult(end=%d, groups=%d/%d, bytes %d->%d, records %d->%d)"
                % (self.end_offset, self.groups_rewritten, self.groups, self.bytes_read, self.bytes_written,
                   self.records_read, self.records_kept))


# ------------------------------------------------------------------------------------------- transactions
class TxnTracker:
    """What the batches read so far, in log order, say about transactions (Kafka's CleanedTransactionMetadata).

    ``aborted``: the AbortedTxn entries (txn_index.py) of the range being read. An aborted transaction becomes
    current for its producer once a batch at or past its first offset is read and stays so until its ABORT marker;
    while it is, that producer's transactional batches are aborted data. ``kept_aborts`` collects, in marker order,
    the entries whose ABORT marker is kept because batches of its transaction were read (the cleaned ``.txnindex``).
    """

    def __init__(self, aborted):
        self._pending = sorted(aborted, key=lambda t: t.first_offset, reverse=True)  # pop() = lowest first offset
        self._aborted = {}     # producer id -> [AbortedTxn, a batch of it was read]
        self._committed = set()  # producer ids whose current (not aborted) transaction had a batch read
        self.kept_aborts = []

    def _start_up_to(self, offset):
        pending = self._pending
        while pending and pending[-1].first_offset <= offset:
            txn = pending.pop()
            self._aborted.setdefault(txn.producer_id, [txn, False])

    def on_data(self, head):
        """A data batch was read; True when it belongs to an aborted transaction (discard it)."""
        self._start_up_to(head.last_offset)
        if not head.is_transactional:
            return False
        current = self._aborted.get(head.producer_id)
        if current is not None:
            current[1] = True
            return True
        self._committed.add(head.producer_id)
        return False

    def on_control(self, raw, head):
        """A control batch was read; True when it may go (after its delete horizon): a COMMIT/ABORT marker no batch
        of whose transaction was read, or an empty control batch. Other control records are kept."""
        self._start_up_to(head.last_offset)
        if head.records_count == 0:
            return True
        marker = marker_of(raw)
        if marker is None:
            return False
        pid = head.producer_id
        if not marker.commit:
            current = self._aborted.pop(pid, None)
            if current is not None and current[1]:
                self.kept_aborts.append(current[0])
                return False
            return True
        if pid in self._committed:
            self._committed.discard(pid)
            return False
        return True


# ------------------------------------------------------------------------------------------- reading
def segment_batches(segment, end=None):
    """Yield ``memoryview`` of every batch in ``segment`` (1 MiB windows; a larger batch is read whole)."""
    handle = segment.handle()             # held for the walk: the descriptor stays open (descriptors.py)
    fd = handle.fd
    end = segment.size if end is None else end
    pos = 0
    while pos < end:
        buf = os.pread(fd, min(READ_WINDOW, end - pos), pos)
        entries, valid_end = scan_batches(buf, 0, len(buf), False)
        if not entries:
            head = header_entry(buf)
            if head is None or head[1] <= len(buf) or pos + head[1] > end:
                raise CorruptSegmentError("%s: no whole batch at position %d" % (segment.log_path, pos))
            buf = os.pread(fd, head[1], pos)
            entries, valid_end = [(0, head[1])], head[1]
        view = memoryview(buf)
        for entry in entries:
            yield view[entry[0]:entry[0] + entry[1]]
        pos += valid_end


def first_uncleanable_offset(log, first_dirty, now, stable_offset=None):
    """Active segment base, or the base of the first segment at/after ``first_dirty`` that is too new, or
    ``stable_offset`` (the partition's last stable offset) when that is lower."""
    segments = log.segments
    limit = segments[-1].base_offset
    if stable_offset is not None and stable_offset < limit:
        limit = stable_offset
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for i, seg in enumerate(segments[:-1]):
            if segments[i + 1].base_offset <= first_dirty:
                continue  # wholly in the clean section
            if seg.largest_timestamp > now - lag:
                return min(seg.base_offset, limit)
    return limit


def build_offset_map(log, first_dirty, first_uncleanable, omap, aborted=()):
    """Fill ``omap`` from ``[first_dirty, first_uncleanable)`` (records of the ``aborted`` transactions left out);
    returns (end offset, records read, full)."""
    read = 0
    txns = TxnTracker([t for t in aborted if t.last_offset >= first_dirty])
    for seg in log.segments[:-1]:
        if seg.base_offset >= first_uncleanable:
            break
        for raw in segment_batches(seg):
            head = batch_header(raw)
            if head.last_offset < first_dirty:
                continue
            if head.base_offset >= first_uncleanable:
                return first_uncleanable, read, False
            if head.is_control:
                txns.on_control(raw, head)
                continue
            if txns.on_data(head):
                continue
            for offset, _ts, key, _value, _headers in batch_records(raw, 0, head):
                if offset < first_dirty or key is None:
                    continue
                read += 1
                if not omap.put(key, offset):
                    return offset, read, True
    return first_uncleanable, read, False


ProducerScan = namedtuple("ProducerScan", "last first_open aborted")


def scan_producers(segments):
    """What every batch of ``segments`` says about producers and transactions (headers and marker records only,
    16 KiB reads: ``LogSegment.producer_batches``), a ProducerScan:

    * ``last``: producer id -> the last offset of its last data batch, or of its last control batch when it wrote
      only those (Kafka's lastRecordsOfActiveProducers: the batch kept for the producer state);
    * ``first_open``: the first offset of the oldest transaction the log shows open (a transactional data batch with
      no later control batch of its producer), or None;
    * ``aborted``: an AbortedTxn(producer, first offset, marker offset, last stable offset) per ABORT marker, in log
      order, the first offset being that of the transaction's first batch still in the log and the last stable
      offset the first offset of the oldest transaction still open after the marker (else marker + 1). The log
      itself is the source: a ``.txnindex`` may have lost entries (a recovery empties those of the segments it
      rescans), and a transaction missed here would be kept as committed and its marker dropped too early.
    """
    last_data, last_control, open_txns, aborted = {}, {}, {}, []
    for seg in segments:
        for head, marker in seg.producer_batches():
            pid = head.producer_id
            if pid < 0:
                continue
            if head.is_control:
                last_control[pid] = head.last_offset
                first = open_txns.pop(pid, None)
                if marker is not None and not marker.commit and first is not None:
                    lso = min(open_txns.values()) if open_txns else head.last_offset + 1
                    aborted.append(AbortedTxn(pid, first, head.last_offset, lso))
            else:
                last_data[pid] = head.last_offset
                if head.is_transactional:
                    open_txns.setdefault(pid, head.base_offset)
    last = dict(last_control)
    last.update(last_data)
    return ProducerScan(last, min(open_txns.values()) if open_txns else None, aborted)


def producer_last_batches(segments):
    """producerId -> the offset ``scan_producers`` keeps that producer's batch for."""
    return scan_producers(segments).last


def aborted_transactions(log, scanned):
    """The scan's aborted transactions, each replaced by the log's ``.txnindex`` entry of the same marker when there
    is one (the values recorded when the marker was written: the transaction's true first offset, the LSO then)."""
    if not scanned:
        return []
    indexed = {(t.producer_id, t.last_offset): t
               for t in log.aborted_transactions(scanned[0].first_offset, log.log_end_offset)}
    return [indexed.get((t.producer_id, t.last_offset), t) for t in scanned]


# ------------------------------------------------------------------------------------------- filtering
def _empty_header(head):
    """A 61-byte batch with no records keeping offsets, producer fields and timestamps (Kafka's empty header)."""
    attrs = head.attributes & ~(ATTR_CODEC_MASK | ATTR_DELETE_HORIZON)
    return bytes(pack_batch(head._replace(attributes=attrs, base_timestamp=head.max_timestamp, records_count=0), b""))


def _rebuild(head, kept, horizon):
    attrs = head.attributes
    base_ts = head.base_timestamp
    if horizon is not None:
        attrs |= ATTR_DELETE_HORIZON
        base_ts = horizon
    if head.timestamp_type == LOG_APPEND_TIME:
        max_ts = head.max_timestamp
    else:
        max_ts = max(rec[1] for rec in kept)
    region = b"".join(encode_record(off - head.base_offset, ts - base_ts, key, value, headers)
                      for off, ts, key, value, headers in kept)
    if head.codec:
        region = compression.compress(head.codec, region)
    return bytes(pack_batch(head._replace(attributes=attrs, base_timestamp=base_ts, max_timestamp=max_ts,
                                          records_count=len(kept)), region))


def _emptied(raw, head, keep_empty):
    """What becomes of a batch none of whose records stays: its empty header, or nothing."""
    if not keep_empty(head):
        return b""
    return raw if head.records_count == 0 else _empty_header(head)


def filter_batch(raw, omap, now, delete_retention_ms, keep_empty, txns=None):
    """``(bytes to write, horizon or None, records read, records kept, outcome)`` for one batch.

    The bytes are ``raw`` itself when the batch is unchanged, b"" when it is dropped; the horizon is the delete
    horizon of a kept batch still holding a tombstone or a removable marker. ``outcome`` is None, or "aborted" (the
    batch's records were aborted data) or "marker" (an empty transaction's marker was removed after its horizon).
    """
    head = batch_header(raw)
    if txns is None:
        txns = TxnTracker(())
    horizon = head.base_timestamp if head.attributes & ATTR_DELETE_HORIZON else None
    if head.is_control:
        if not txns.on_control(raw, head):
            return raw, None, 0, 0, None
        if head.records_count == 0:
            return _emptied(raw, head, keep_empty), None, 0, 0, None
        if horizon is not None and horizon <= now:
            return _emptied(raw, head, keep_empty), None, 0, 0, "marker"
        if horizon is not None:
            return raw, horizon, 0, 0, None
        horizon = now + delete_retention_ms
        return _rebuild(head, batch_records(raw, 0, head), horizon), horizon, 0, 0, None
    if txns.on_data(head):
        return _emptied(raw, head, keep_empty), None, head.records_count, 0, "aborted"
    records = batch_records(raw, 0, head)
    if not records:
        return _emptied(raw, head, keep_empty), None, 0, 0, None
    kept = []
    tombstones = False
    for rec in records:
        key, value = rec[2], rec[3]
        if key is None or omap.get(key) > rec[0]:
            continue
        if value is None:
            if horizon is not None and horizon <= now:
                continue
            tombstones = True
        kept.append(rec)
    set_horizon = tombstones and horizon is None
    if set_horizon:
        horizon = now + delete_retention_ms
    live_horizon = horizon if tombstones else None
    if len(kept) == len(records) and not set_horizon:
        return raw, live_horizon, len(records), len(kept), None
    if not kept:
        return _emptied(raw, head, keep_empty), None, len(records), 0, None
    return _rebuild(head, kept, horizon), live_horizon, len(records), len(kept), None


# ------------------------------------------------------------------------------------------- grouping
def group_segments(segments, end_offset, max_size):
    """Consecutive groups of the segments that lie wholly below ``end_offset`` (see module docstring)."""
    cleanable = []
    for i, seg in enumerate(segments[:-1]):
        nxt = segments[i + 1].base_offset
        if seg.base_offset >= end_offset:
            break
        cleanable.append((seg, nxt))
    while cleanable and cleanable[-1][0].size == 0:
        cleanable.pop()  # an empty segment may not end a group
    groups, current, size = [], [], 0
    for seg, nxt in cleanable:
        if current and (size + seg.size > max_size or nxt - 1 - current[0].base_offset > INT32_MAX):
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        groups.append(current)
    # Move trailing empty segments of each group to the next group (a group must end non-empty).
    fixed = []
    carry = []
    for group in groups:
        group = carry + group
        carry = []
        while len(group) > 1 and group[-1].size == 0:
            carry.insert(0, group.pop())
        fixed.append(group)
    return [g for g in fixed if any(s.size for s in g)]


# ------------------------------------------------------------------------------------------- cleaning
def _no_hook(_step):
    pass


def _unlink_cleaned(dir_path, base):
    prefix = os.path.join(dir_path, filename_prefix(base))
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        for extra in (CLEANED_SUFFIX, SWAP_SUFFIX):
            try:
                os.unlink(prefix + suffix + extra)
            except FileNotFoundError:
                pass


def _group_index(log, group):
    """Position of ``group`` in the log's segment list, or None when the log no longer holds it as is."""
    segments = log._segments
    for i, seg in enumerate(segments):
        if seg is group[0]:
            if segments[i:i + len(group)] == group and i + len(group) < len(segments):
                return i
            return None
    return None


def _write(cleaned, pending):
    """Append the batches ``pending`` (stored bytes, not an append result: their entries come from the kernel)."""
    buf = b"".join(pending)
    cleaned.append(buf, buffer_batches(buf))


def clean_group(log, group, omap, now, last_batches, result, hook=_no_hook, txns=None):
    """Recopy one group into ``.cleaned`` and swap it in when anything changed; returns True if swapped.
    ``txns``: the pass's TxnTracker (it has read every batch before this group)."""
    cfg = log.config
    base = group[0].base_offset
    group_last = group[-1].read_next_offset() - 1

    def keep_empty(head):
        last = head.last_offset
        return last == group_last or (head.producer_id >= 0 and last_batches.get(head.producer_id) == last)

    if txns is None:
        txns = TxnTracker(())
    kept_aborts = len(txns.kept_aborts)
    _unlink_cleaned(log.dir, base)
    cleaned = LogSegment(log.dir, base, cfg, suffix=CLEANED_SUFFIX)
    swapped = False
    try:
        changed = False
        pending = []
        pending_size = 0
        written = 0
        for seg in group:
            result.bytes_read += seg.size
            for raw in segment_batches(seg):
                out, horizon, n_read, n_kept, outcome = filter_batch(raw, omap, now, cfg.delete_retention_ms,
                                                                     keep_empty, txns)
                result.records_read += n_read
                result.records_kept += n_kept
                result.note_horizon(horizon)
                if outcome == "aborted":
                    result.aborted_records_removed += n_read
                elif outcome == "marker":
                    result.markers_removed += 1
                if out is not raw:
                    changed = True
                if out:
                    pending.append(bytes(out))
                    pending_size += len(out)
                    if pending_size >= READ_WINDOW:
                        _write(cleaned, pending)
                        written += pending_size
                        pending, pending_size = [], 0
        if pending:
            _write(cleaned, pending)
            written += pending_size
        # The group's kept ABORT markers whose transactions still have batches keep their index entries; a marker
        # that stays for its delete horizon only (no batch of its transaction left) loses its entry, as in Kafka.
        kept_entries = txns.kept_aborts[kept_aborts:]
        indexed = sum(seg.txn_index.entries for seg in group)
        if not changed and len(kept_entries) == indexed:
            result.bytes_written += sum(s.size for s in group)
            cleaned.delete()
            return False
        for txn in kept_entries:
            cleaned.txn_index.append(txn)
        result.bytes_written += written
        cleaned.on_become_inactive()
        cleaned.flush()
        mtime_ns = max(s.mtime_ns() for s in group)
        os.utime(cleaned.log_path, ns=(mtime_ns, mtime_ns))
        fsync_dir(log.dir)
        hook("cleaned")
        if _group_index(log, group) is None:
            raise CleanAborted("%s changed during cleaning" % log.dir)
        cleaned.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(log.dir)
        swapped = True
        hook("swap")
        # Renames every old file *.deleted (unlinked when due) and swaps the in-memory lists on the log's
        # owner thread, so concurrent readers never see a half-done swap.
        if not log.replace_segments(group, cleaned, now):
            raise CleanAborted("%s changed during the swap of %s" % (log.dir, cleaned.log_path))
        fsync_dir(log.dir)
        hook("deleted")
        cleaned.change_suffix(SWAP_SUFFIX, "")
        fsync_dir(log.dir)
        hook("done")
        return True
    except Exception:  # not BaseException: a simulated crash (tests) must leave the files as a real one would
        if not swapped:
            cleaned.delete()
        raise


def clean_log(log, first_dirty, now, dedupe_buffer_size=134217728, hook=_no_hook, stable_offset=None):
    """Clean ``log`` (see module docstring); returns a CleanResult (``end_offset`` = new first dirty offset).
    ``stable_offset``: the partition's last stable offset (None: not known, the log's own open transactions bound
    the pass alone)."""
    segments = log.segments
    scan = scan_producers(segments)
    if scan.first_open is not None and (stable_offset is None or scan.first_open < stable_offset):
        stable_offset = scan.first_open
    aborted = aborted_transactions(log, scan.aborted)
    first_dirty = max(first_dirty, log.log_start_offset)
    first_uncleanable = first_uncleanable_offset(log, first_dirty, now, stable_offset)
    first_dirty = min(first_dirty, first_uncleanable)
    omap = OffsetMap(dedupe_buffer_size)
    end, _n, full = build_offset_map(log, first_dirty, first_uncleanable, omap, aborted)
    result = CleanResult(max(end, first_dirty))
    result.map_full = full
    groups = group_segments(segments, result.end_offset, log.config.segment_bytes)
    result.groups = len(groups)
    if groups:
        txns = TxnTracker([t for t in aborted if t.last_offset >= groups[0][0].base_offset])
    for group in groups:
        if clean_group(log, group, omap, now, scan.last, result, hook, txns):
            result.groups_rewritten += 1
    logger.info("cleaned %s: %r", log.dir, result)
    return result
