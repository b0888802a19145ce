"""Open a partition directory and bring it to a consistent state (Kafka's Log.loadSegments + recoverLog).

Steps, in order (each is crash-safe to repeat):

1. Delete leftovers: ``*.deleted`` (segments whose delayed delete never ran), ``*.cleaned`` (unfinished
   cleaner output), ``*.index.swap`` / ``*.timeindex.swap``.
2. Finish interrupted swaps: for each ``<base>.log.swap`` cut its torn tail (CRC scan), delete the
   segments it replaces (bases in ``[base, swap next offset)``, including ``<base>.*`` itself) and rename
   it to ``<base>.log``; its indexes are rebuilt in step 3.  Deleting before renaming means a crash in
   between leaves the ``.swap`` to redo the step.
3. Delete orphan ``.index``/``.timeindex``/``.txnindex`` files (no ``.log``); open every segment; a segment with a
   missing index or one failing its sanity check is rebuilt (``LogSegment.recover``); a ``.txnindex`` failing
   its own is emptied (the partition's producer-state replay re-adds its entries, txn_index.py).
   A segment whose first bytes are a message set v0/v1 (Kafka < 0.11's format) stops the load with
   ``UnsupportedLogFormatError`` before anything touches it; so does one found later by a rescan (step 4).
4. Unless the directory was shut down cleanly, re-scan every segment from the one holding the recovery
   point: CRC and size <= max.message.bytes per batch, rebuild both indexes, truncate at the first
   invalid or partial batch and delete every later segment.  After a clean shutdown nothing is scanned
   and the recovery point becomes the log end offset.
5. No segment at all: create ``00000000000000000000.log``.
"""

import bisect
import logging
import os

from .index import CorruptIndexError
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, filename_prefix, iter_file_batches
from .txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


class LoadResult:
    __slots__ = ("segments", "next_offset", "recovery_point", "truncated_bytes")

    def __init__(self, segments, next_offset, recovery_point, truncated_bytes):
        self.segments = segments
        self.next_offset = next_offset
        self.recovery_point = recovery_point
        self.truncated_bytes = truncated_bytes


def _base_of(name):
    """Base offset from ``<20 digits>.<suffix>``, or None for names that are not segment files."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _delete_leftovers(dir_path):
    """Step 1. Returns (the ``.log.swap`` names to complete, the names left in the directory)."""
    swaps, kept = [], []
    for name in sorted(os.listdir(dir_path)):
        path = os.path.join(dir_path, name)
        if name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX):
            _unlink(path)
        elif name.endswith(SWAP_SUFFIX):
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and _base_of(name) is not None:
                swaps.append(name)
            else:
                _unlink(path)
        else:
            kept.append(name)
    return swaps, kept


def _complete_swap(dir_path, name, max_message_size):
    base = _base_of(name)
    path = os.path.join(dir_path, name)
    with open(path, "rb+", buffering=0) as f:
        fd = f.fileno()
        valid, last = 0, None
        for pos, size, batch_base, batch_last, _ts, _count in iter_file_batches(
                fd, 0, os.fstat(fd).st_size, True, max_message_size):
            if batch_base < base or batch_last < batch_base:
                break
            valid, last = pos + size, batch_last
        os.ftruncate(fd, valid)
        os.fsync(fd)
    next_offset = base if last is None else last + 1
    for other in os.listdir(dir_path):
        other_base = _base_of(other)
        if other_base is None or other.endswith(SWAP_SUFFIX) or not other.endswith(_SEGMENT_SUFFIXES):
            continue
        if other_base == base or base <= other_base < next_offset:
            _unlink(os.path.join(dir_path, other))
    os.rename(path, os.path.join(dir_path, filename_prefix(base) + LOG_SUFFIX))
    log.info("completed interrupted swap %s in %s (offsets %d..%d)", name, dir_path, base, next_offset)


def load_segments(dir_path, config, recovery_point=0, clean_shutdown=False):
    """Open (and if needed recover) every segment of a partition directory; returns a LoadResult."""
    max_message_size = config.max_message_bytes
    swaps, names = _delete_leftovers(dir_path)
    for swap in swaps:
        _complete_swap(dir_path, swap, max_message_size)
    if swaps:
        names = os.listdir(dir_path)     # one listing a partition otherwise (10,000 of them at a broker's start)
    log_bases = sorted(b for b in (_base_of(n) for n in names if n.endswith(LOG_SUFFIX)) if b is not None)
    have = set(log_bases)
    present = set(names)
    for name in names:
        if name.endswith(INDEX_SUFFIX) or name.endswith(TIME_INDEX_SUFFIX) or name.endswith(TXN_INDEX_SUFFIX):
            base = _base_of(name)
            if base is not None and base not in have:
                _unlink(os.path.join(dir_path, name))

    segments = []
    rebuilt = {}  # base offset -> bytes truncated while rebuilding a missing/corrupt index
    for base in log_bases:
        prefix = os.path.join(dir_path, filename_prefix(base))
        missing = not (filename_prefix(base) + INDEX_SUFFIX in present
                       and filename_prefix(base) + TIME_INDEX_SUFFIX in present)
        # v0/v1 (Kafka < 0.11) is refused before anything touches the segment, clean shutdown or not
        # (segment.recover checks later positions too: a v2 log whose later batches are v1).
        segment = LogSegment(dir_path, base, config, refuse_old_format=True)
        needs_rebuild = missing
        if not missing:
            try:
                segment.offset_index.sanity_check()
                segment.time_index.sanity_check()
            except CorruptIndexError as exc:
                log.warning("rebuilding index of %s: %s", segment.log_path, exc)
                needs_rebuild = True
        if needs_rebuild:
            rebuilt[base] = segment.recover(max_message_size)
        else:
            try:
                segment.txn_index.sanity_check()
            except CorruptIndexError as exc:
                log.warning("emptying the transaction index of %s: %s", segment.log_path, exc)
                segment.txn_index.reset()
                segment.txn_index.stale = True
        segments.append(segment)

    truncated_total = 0
    if segments and not clean_shutdown:
        bases = [s.base_offset for s in segments]
        start = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        for i in range(start, len(segments)):
            segment = segments[i]
            if segment.base_offset in rebuilt:
                truncated = rebuilt[segment.base_offset]
            else:
                truncated = segment.recover(max_message_size)
            if truncated > 0:
                truncated_total += truncated
                later = segments[i + 1:]
                log.warning("%s: cut %d invalid bytes at offset %d; deleting %d later segment(s)",
                            segment.log_path, truncated, segment.read_next_offset(), len(later))
                for dead in later:
                    dead.delete()
                del segments[i + 1:]
                break

    if not segments:
        segments.append(LogSegment(dir_path, 0, config))

    next_offset = segments[-1].read_next_offset()
    if clean_shutdown:
        recovery_point = next_offset
    else:
        recovery_point = min(recovery_point, next_offset)
    return LoadResult(segments, next_offset, recovery_point, truncated_total)
