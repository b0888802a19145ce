"""The aborted-transaction index of one segment: ``<base>.txnindex`` (Kafka's TransactionIndex, KIP-98).

File format (big-endian, packed, no header, no checksum -- rebuilt from the log's markers when lost):
34-byte entries

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64

one per ABORTED transaction whose ABORT marker lies in this segment (``lastOffset`` = the marker's offset,
``firstOffset`` = the transaction's first data offset, possibly in an earlier segment; ``lastStableOffset`` = the
partition's LSO once the marker was written: the first offset of the oldest transaction still open then, else
lastOffset + 1). Entries are appended in marker order, so ``lastOffset`` strictly increases through a file.
Committed transactions are not indexed: read_committed consumers only need to know what to drop.

A read_committed Fetch answers the aborted transactions overlapping the records it returns, ``[fetch_offset,
upper)``: ``collect(fetch_offset, upper)`` gives every entry with ``lastOffset >= fetch_offset`` and ``firstOffset <
upper`` and says whether the search is complete -- an entry whose ``lastStableOffset >= upper`` proves that no
transaction aborted later in the log can have started below ``upper`` (every transaction open when that marker was
written started at or after its LSO). ``collect_aborted`` walks segments forward from the one holding
``fetch_offset`` until a segment's search is complete (Kafka's UnifiedLog.collectAbortedTransactions).

The file is created by the first entry (most segments never hold an aborted transaction: no empty file, no
descriptor) and read with ``pread`` for each lookup; memory holds only the entry count and the last entry's
``lastOffset``, whatever the file's size. Appends write one entry with ``os.write`` on an ``O_APPEND`` descriptor
opened for it (aborts are rare next to data); durability follows the segment's flush (``flush`` fsyncs). A crash may
leave a torn tail entry: ``sanity_check`` refuses a size that is not a multiple of 34 or a last entry below the
segment's base, and the loader then resets the file; the partition's producer-state replay re-adds the entries
of the markers it reads (``append`` of an entry at or below the last ``lastOffset`` is skipped, so a replay over
a complete index changes nothing). An index emptied that way (or by a segment's recovery) is ``stale`` until that
replay: the partition replays from a producer snapshot at or below the first stale segment's base.
"""
import os
import struct
from collections import namedtuple

from .index import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
_LAST_OFFSET_AT = 18     # version 2 + producerId 8 + firstOffset 8
_I64 = struct.Struct(">q")
# Lookups read this many bytes per pread (1,927 entries).
READ_WINDOW = ENTRY_SIZE * 1927

AbortedTxn = namedtuple("AbortedTxn", "producer_id first_offset last_offset last_stable_offset")


class TransactionIndex:
    __slots__ = ("path", "base_offset", "_entries", "_last_offset", "stale")

    def __init__(self, path, base_offset):
        self.path = path
        self.base_offset = base_offset
        self.stale = False   # emptied by recovery: its entries come back with the producer-state replay
        self._entries = 0
        self._last_offset = -1
        self._load()

    def _load(self):
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            self._entries, self._last_offset = 0, -1
            return
        self._entries = size // ENTRY_SIZE
        self._last_offset = -1
        if self._entries:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                raw = os.pread(fd, ENTRY_SIZE, (self._entries - 1) * ENTRY_SIZE)
            finally:
                os.close(fd)
            if len(raw) == ENTRY_SIZE:
                self._last_offset = ENTRY.unpack(raw)[3]

    # -- state ---------------------------------------------------------------------------------
    @property
    def entries(self):
        return self._entries

    @property
    def last_offset(self):
        """``lastOffset`` of the last entry, -1 when empty."""
        return self._last_offset

    # -- writing -------------------------------------------------------------------------------
    def append(self, txn):
        """Add ``txn`` (an AbortedTxn); returns False (nothing written) when an entry at or past its lastOffset is
        already there (a replay over an intact index). Entries must come in marker order."""
        if txn.last_offset <= self._last_offset:
            return False
        if txn.last_offset < self.base_offset:
            raise ValueError("aborted transaction ending at %d below segment base %d"
                             % (txn.last_offset, self.base_offset))
        raw = ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, raw)
        finally:
            os.close(fd)
        self._entries += 1
        self._last_offset = txn.last_offset
        return True

    def flush(self):
        if not self._entries:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate_to(self, offset):
        """Drop every entry whose lastOffset is >= ``offset`` (the log was cut there)."""
        if self._last_offset < offset:
            return
        keep = 0
        for i, txn in enumerate(self._iter()):
            if txn.last_offset >= offset:
                keep = i
                break
        else:
            keep = self._entries
        self._cut(keep)

    def _cut(self, n):
        if n == 0:
            self.reset()
            return
        with open(self.path, "r+b") as f:
            f.truncate(n * ENTRY_SIZE)
        self._load()

    def reset(self):
        """Drop every entry (the file goes; the replay of the segment's markers rebuilds it)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._entries, self._last_offset = 0, -1

    def rename(self, new_path):
        if os.path.exists(self.path):
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self):
        self.reset()

    def close(self):
        """Nothing held open between calls; kept for symmetry with the other indexes."""

    # -- reading -------------------------------------------------------------------------------
    def _iter(self, from_offset=None):
        """Every entry, oldest first (pread in READ_WINDOW pieces; a torn tail entry is ignored); with
        ``from_offset``, from the first entry whose lastOffset is >= it (a bisect over the file: entries are
        in lastOffset order and fixed-size)."""
        if not self._entries:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            pos = 0
            if from_offset is not None and self._entries > READ_WINDOW // ENTRY_SIZE:
                lo, hi = 0, self._entries
                while lo < hi:
                    mid = (lo + hi) >> 1
                    raw = os.pread(fd, 8, mid * ENTRY_SIZE + _LAST_OFFSET_AT)
                    if len(raw) < 8 or _I64.unpack(raw)[0] >= from_offset:
                        hi = mid
                    else:
                        lo = mid + 1
                pos = lo * ENTRY_SIZE
            while True:
                buf = os.pread(fd, READ_WINDOW, pos)
                n = len(buf) // ENTRY_SIZE
                for i in range(n):
                    yield AbortedTxn(*ENTRY.unpack_from(buf, i * ENTRY_SIZE)[1:])
                if len(buf) < READ_WINDOW:
                    return
                pos += n * ENTRY_SIZE
        finally:
            os.close(fd)

    def all_entries(self):
        return list(self._iter())

    def collect(self, fetch_offset, upper_offset):
        """``(entries overlapping [fetch_offset, upper_offset), complete)`` (module docstring)."""
        out = []
        if self._last_offset < fetch_offset:
            return out, False
        # Entries ending below fetch_offset are skipped unread: their LSO <= lastOffset + 1 <= fetch_offset, so
        # none of them completes the search either.
        for txn in self._iter(fetch_offset):
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_offset:
                return out, True
        return out, False

    def sanity_check(self):
        """CorruptIndexError when the file cannot be this segment's index (torn entry, wrong version, entries
        below the base offset)."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size % ENTRY_SIZE:
            raise CorruptIndexError("%s: size %d is not a multiple of %d" % (self.path, size, ENTRY_SIZE))
        if not size:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            first = os.pread(fd, ENTRY_SIZE, 0)
            last = os.pread(fd, ENTRY_SIZE, size - ENTRY_SIZE)
        finally:
            os.close(fd)
        for raw in (first, last):
            version, _pid, _first, last_offset, _lso = ENTRY.unpack(raw)
            if version != VERSION:
                raise CorruptIndexError("%s: entry version %d (only %d is known)" % (self.path, version, VERSION))
            if last_offset < self.base_offset:
                raise CorruptIndexError("%s: last offset %d below the segment base %d"
                                        % (self.path, last_offset, self.base_offset))

    def __repr__(self):
        return "TransactionIndex(%s, entries=%d, last=%d)" % (self.path, self._entries, self._last_offset)


def collect_aborted(segments, fetch_offset, upper_offset):
    """The aborted transactions overlapping ``[fetch_offset, upper_offset)`` from the ``txn_index`` of
    ``segments`` (the log's segments from the one holding ``fetch_offset`` on, in order), as AbortedTxn values:
    each segment is searched until one search is complete (module docstring)."""
    out = []
    for segment in segments:
        found, complete = segment.txn_index.collect(fetch_offset, upper_offset)
        out.extend(found)
        if complete:
            break
    return out
