"""One log segment: ``<base>.log`` plus its ``<base>.index``, ``<base>.timeindex`` and, once it holds an ABORT marker,
``<base>.txnindex`` (``txn_index.py``) (Kafka's LogSegment).

``<base>`` is the segment's base offset (the first offset it may hold) zero-padded to 20 digits, e.g.
``00000000000000368769.log``.  The ``.log`` file is a plain concatenation of v2 record batches exactly as
they are served to consumers (61-byte header, laid out in ``kbroker/record/batch.py``); a byte position in
it is what the offset index stores.  Nothing here knows where a header field sits: appends bring their batches'
entries ``(pos, size, base, last, max_ts, count)`` (the append result's ``batches``), file walks get them from the
kernel's ``scan_batches`` (the byte-level owner of the layout, by design) and ``kbroker.record.header_entry``,
headers from ``kbroker.record.batch_header``.

Invariants:
* Batches are appended whole with ``os.write`` on an ``O_APPEND`` unbuffered file: no user-space buffer,
  so a FileRegion handed out right after ``append`` returns sees the bytes.
* Offsets in a segment fit ``base .. base + 2**31 - 1`` (index entries store int32 relative offsets).
* Index cadence (identical on append and on rebuild, so a rebuilt index equals the original byte for
  byte): a batch that starts more than ``index.interval.bytes`` (4096) bytes after the position of the
  last offset-index entry (0 initially) gets an offset entry ``(batch last offset, batch position)`` and,
  if the segment's max timestamp grew since the last time entry, a time entry
  ``(max timestamp so far, last offset of the batch that set it)``.  When the segment stops being
  active (roll) or is closed, or after a rebuild, one final time entry for the max timestamp is added.
* The batch entries drive the indexes: on append the ones validation parsed (no header is read again), on
  recovery the ones the kernel's CRC-checked scan gives.
"""

import itertools
import os
import random
import time

from kbroker._native import scan_batches
from kbroker.record import HEADER_SIZE, batch_header, header_entry
from kbroker.record.control import marker_of

from . import descriptors
from .file_region import FileRegion
from .index import OffsetIndex, TimeIndex
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

INT32_MAX = 0x7FFFFFFF

# Header reads scan this much per pread: an index entry is at most ~index.interval.bytes (4096) plus one
# batch before the target, so 16 KiB usually answers in one system call.
HEADER_WINDOW = 16 * 1024
# CRC-checked scans (recovery) read whole batches; 1 MiB windows keep memory bounded on 1 GiB segments.
RECOVERY_WINDOW = 1024 * 1024

# A reopen must find the file (no O_CREAT): a segment file gone behind the broker's back is an I/O error, as it was
# with the descriptor Kafka keeps.
_REOPEN_FLAGS = os.O_RDWR | os.O_APPEND
_CREATE_FLAGS = _REOPEN_FLAGS | os.O_CREAT
_keys = itertools.count(1)


def filename_prefix(base_offset):
    return "%020d" % base_offset


def now_ms():
    return int(time.time() * 1000)


def buffer_batches(buffer):
    """Entries of every batch in an in-memory buffer of stored v2 batches (no CRC check), for writers of bytes that
    are not an append result (the cleaner copies batches it read); ValueError unless it is whole batches."""
    entries, valid_end = scan_batches(buffer, 0, len(buffer), False)
    if valid_end != len(buffer) or not entries:
        raise ValueError("append buffer is not a sequence of whole v2 batches (%d of %d bytes parse)"
                         % (valid_end, len(buffer)))
    return entries


def iter_file_batches(file, start, end, check_crc=False, max_batch_size=None, headers=False, markers=False):
    """Yield entries ``(pos, size, base, last, max_ts, count)`` of the batches in file[start:end] -- or, with
    ``headers``, each batch's BatchHeader, parsed by kbroker/record from the window already read (no extra read);
    with ``markers`` too, ``(BatchHeader, Marker | None)``: a control batch's COMMIT/ABORT marker
    (``record.control.marker_of``, from the same window: a marker batch is ~80 bytes).

    Stops silently at the first truncated or malformed batch (or CRC mismatch when ``check_crc``, or a
    batch bigger than ``max_batch_size``).  Header-only walks read 16 KiB windows; CRC walks 1 MiB
    windows, re-reading a single larger batch whole when it straddles a window.

    ``file``: a descriptor, or a ``SegmentFile`` -- held here for as long as the walk reads it (descriptors.py).
    """
    fd = file if isinstance(file, int) else file.fd
    window = RECOVERY_WINDOW if check_crc else HEADER_WINDOW
    pos = start
    while pos < end:
        buf = os.pread(fd, min(end - pos, window), pos)
        if not buf:
            return
        entries, valid_end = scan_batches(buf, 0, len(buf), check_crc)
        for e in entries:
            if max_batch_size is not None and e[1] > max_batch_size:
                return
            if headers:
                h = batch_header(buf, e[0])
                if markers:
                    yield h, (marker_of(buf, e[0]) if h.is_control else None)
                else:
                    yield h
            else:
                yield (pos + e[0],) + e[1:]
        if valid_end > 0:
            pos += valid_end
            continue
        # Nothing whole in this window: either a batch larger than the window, or the end of good data.
        head = header_entry(buf)
        if head is None:
            return
        size = head[1]
        if size <= len(buf) or pos + size > end:
            return  # fitted in the window yet failed (bad CRC), or runs past the end (torn tail)
        if max_batch_size is not None and size > max_batch_size:
            return
        if check_crc:
            whole = os.pread(fd, size, pos)
            got, whole_end = scan_batches(whole, 0, len(whole), True)
            if whole_end != size:
                return
            head = got[0]
        if headers:
            h = batch_header(buf)
            yield (h, None) if markers else h      # a control batch this large holds no marker
        else:
            yield (pos,) + head[1:]
        pos += size


class UnsupportedLogFormatError(Exception):
    """A segment holds message sets v0/v1 (Kafka < 0.11's on-disk format, or a later Kafka writing
    ``log.message.format.version`` <= 0.10.2): kbroker stores v2 batches only and must not mistake that data for a
    torn tail and cut it. Startup stops naming the file; the data stays as it was."""


# A message set entry v0/v1: offset int64 | size int32 | crc uint32 | magic int8 (byte 16) | ...; the smallest v0
# message is 14 bytes (crc 4, magic 1, attributes 1, key length 4, value length 4). A zero-filled tail (magic 0 at
# byte 16 too) has size 0, so it is still cut as a torn write.
_OLD_FORMAT_MIN_SIZE = 14


def old_format_at(fd, position, file_size):
    """True when the bytes at ``position`` start a v0/v1 message-set entry rather than a v2 batch."""
    if file_size - position < 17:
        return False
    head = os.pread(fd, 17, position)
    size = int.from_bytes(head[8:12], "big", signed=True)
    return head[16] in (0, 1) and _OLD_FORMAT_MIN_SIZE <= size <= file_size - position - 12


class LogSegment:
    def __init__(self, dir_path, base_offset, config, suffix="", created_ms=None, refuse_old_format=False):
        """``refuse_old_format``: UnsupportedLogFormatError (file closed, no index created) when the ``.log``
        starts with a message set v0/v1 (the loader's check of every segment it opens, through this segment's
        own descriptor: one open of the file at load, not two)."""
        self.dir = dir_path
        self.base_offset = base_offset
        self.config = config
        self.suffix = suffix
        prefix = os.path.join(dir_path, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + suffix
        # The .log descriptor comes from the process's bounded pool (descriptors.py): ``handle()`` reopens it after an
        # eviction. ``key`` names this segment's file for its whole life (a FileRegion's ``file.key``).
        self.key = next(_keys)
        self._touched = True
        self._closed = False
        self._file = None
        f = self._file = descriptors.POOL.open(self, self.log_path, _CREATE_FLAGS, self.key)
        self._size = os.fstat(f.fd).st_size
        if refuse_old_format and old_format_at(f.fd, 0, self._size):
            self._drop_file()
            raise UnsupportedLogFormatError(
                "%s holds message format v0/v1 (written by Kafka < 0.11 or with log.message.format.version <= "
                "0.10.2): kbroker stores record batches v2 only and leaves this log untouched; copy the data with "
                "kbroker-mirror-maker instead (docs/upgrading.md)" % self.log_path)
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX + suffix, base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX + suffix, base_offset, config.segment_index_bytes)
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_SUFFIX + suffix, base_offset)
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = now_ms() if created_ms is None else created_ms
        # Kafka spreads time-based rolls of many partitions with a random jitter in [0, segment.jitter.ms).
        self.roll_jitter_ms = random.randrange(config.segment_jitter_ms) if config.segment_jitter_ms > 0 else 0
        self._rolling_ts = None
        self._load_state()

    # -- the descriptor (descriptors.py) --------------------------------------------------------
    def handle(self):
        """The open ``SegmentFile`` of the ``.log``, reopened if the pool evicted it. Keep the handle, not its
        ``fd`` alone, for as long as the number is used: the descriptor closes when its last holder lets go."""
        self._touched = True
        f = self._file
        if f is None:
            f = self._reopen()
        return f

    def _reopen(self):
        if self._closed:
            raise ValueError("I/O operation on closed segment %s" % self.log_path)
        f = self._file = descriptors.POOL.open(self, self.log_path, _REOPEN_FLAGS, self.key)
        return f

    def _evict(self):
        """The pool's: let go of the descriptor (it closes once no reader holds it)."""
        self._file = None

    def _drop_file(self):
        self._closed = True
        self._file = None
        descriptors.POOL.forget(self)

    @property
    def closed(self):
        return self._closed

    @property
    def holds_descriptor(self):
        return self._file is not None

    def _load_state(self):
        """Derive in-memory bookkeeping from the indexes (exact after a close, a roll or a rebuild)."""
        self.max_timestamp_so_far, self.offset_of_max_timestamp = self.time_index.last_entry()
        self._bytes_since_last_index_entry = self._size - self.offset_index.last_entry()[1]

    # -- properties ----------------------------------------------------------------------------
    @property
    def size(self):
        return self._size

    @property
    def last_modified(self):
        """File mtime in ms."""
        return self.mtime_ns() // 1_000_000

    def mtime_ns(self):
        """File mtime in ns (a stat of the path when the descriptor was evicted: retention's walk over every segment
        must not reopen them all)."""
        f = self._file
        if f is None:
            try:
                return os.stat(self.log_path).st_mtime_ns
            except FileNotFoundError:      # renamed meanwhile (a delete or a swap): ask a descriptor
                f = self.handle()
        return os.fstat(f.fd).st_mtime_ns

    @property
    def largest_timestamp(self):
        """Max batch timestamp, or the file mtime when no batch carries a timestamp (0.10.1 retention)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified

    @property
    def rolling_timestamp(self):
        """Max timestamp of the first batch (Kafka rolls by time relative to it), or None."""
        if self._rolling_ts is None and self._size >= HEADER_SIZE:
            f = self.handle()            # a local: the descriptor stays open through the read (descriptors.py)
            head = header_entry(os.pread(f.fd, HEADER_SIZE, 0))
            if head is not None:
                self._rolling_ts = head[4]
        return self._rolling_ts

    def time_waited_for_roll(self, now, incoming_timestamp):
        ts = self.rolling_timestamp
        if ts is not None and ts >= 0:
            return incoming_timestamp - ts
        return now - self.created_ms

    @property
    def indexes_full(self):
        return self.offset_index.is_full or self.time_index.is_full

    def fileno(self):
        """The descriptor's number, for a caller on the event loop that uses it before anything else can open a
        segment file; a walk or a worker thread holds ``handle()`` and reads its ``fd`` instead."""
        return self.handle().fd

    # -- writing -------------------------------------------------------------------------------
    def append(self, buffer, entries):
        """Append the whole v2 batches of ``buffer``, whose entries ``(pos, size, base, last, max_ts, count)``
        (positions in ``buffer``, in order) are ``entries`` -- the append result's ``batches``: the headers were
        parsed once, by validation.  The indexes follow the cadence in the module docstring."""
        n = len(buffer)
        if n == 0:
            return
        if not entries or entries[-1][0] + entries[-1][1] != n:
            raise ValueError("the batch entries do not cover the %d-byte buffer" % n)
        last = entries[-1][3]
        if entries[0][2] < self.base_offset or last - self.base_offset > INT32_MAX:
            raise ValueError("offsets %d..%d do not fit segment %d" % (entries[0][2], last, self.base_offset))
        position = self._size
        view = memoryview(buffer).cast("B")
        self._touched = True
        f = self._file
        if f is None:
            f = self._reopen()
        fd = f.fd
        try:
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            os.ftruncate(fd, position)  # never leave a torn batch behind a failed write
            raise
        self._size = position + n
        for rel, size, _base, batch_last, max_ts, _count in entries:
            if max_ts > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = max_ts, batch_last
            self._maybe_index(batch_last, position + rel)
            self._bytes_since_last_index_entry += size
        if self._rolling_ts is None and position == 0:
            self._rolling_ts = entries[0][4]

    def _maybe_index(self, batch_last, batch_pos):
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            # A full index only loses precision; the log rolls before the next append.
            if not self.offset_index.is_full:
                self.offset_index.append(batch_last, batch_pos)
            if not self.time_index.is_full:
                self.time_index.append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0

    def on_become_inactive(self):
        """Roll/close: write the final time entry (reserved slot) and trim both indexes."""
        if self.max_timestamp_so_far >= 0:
            self.time_index.append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def flush(self):
        """fsync the ``.log`` and the indexes. Runs in the flusher's thread: an evicted ``.log`` is reopened for it
        (its unsynced bytes are the inode's, not the old descriptor's); a segment closed or renamed meanwhile is
        left to whoever closed or renamed it."""
        f = self._file
        if f is None and not self._closed:
            path = self.log_path
            try:
                f = self._reopen()
            except (FileNotFoundError, ValueError):
                if not self._closed and self.log_path == path:
                    raise
        if f is None:
            return
        os.fsync(f.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    # -- reading -------------------------------------------------------------------------------
    def batches(self, start_position=0, end_position=None, check_crc=False):
        end = self._size if end_position is None else min(end_position, self._size)
        return iter_file_batches(self.handle(), start_position, end, check_crc)

    def batch_headers(self, start_position=0):
        """BatchHeader of every batch from ``start_position`` on, in order (16 KiB reads, no CRC check)."""
        return iter_file_batches(self.handle(), start_position, self._size, headers=True)

    def producer_batches(self, start_position=0):
        """``(BatchHeader, Marker | None)`` of every batch from ``start_position`` on: what the producer-state
        replay reads (a batch header alone cannot tell COMMIT from ABORT)."""
        return iter_file_batches(self.handle(), start_position, self._size, headers=True, markers=True)

    def translate_offset(self, offset, start_position=0):
        """Entry of the first batch whose last offset is >= ``offset`` (index lookup, then scan), or None."""
        _idx_offset, position = self.offset_index.lookup(offset)
        for entry in self.batches(max(position, start_position)):
            if entry[3] >= offset:
                return entry
        return None

    def position_of_first_batch_from(self, offset):
        """File position of the first batch whose base offset is >= ``offset`` (segment size if none)."""
        entry = self.translate_offset(offset)
        if entry is None:
            return self._size
        if entry[2] >= offset:
            return entry[0]
        return entry[0] + entry[1]  # ``offset`` is inside this batch: the next batch starts after it

    def read(self, start_offset, max_size, max_position=None, min_one=False):
        """``(FileRegion, first batch base offset, first batch size)`` from the batch holding
        ``start_offset``, or None.

        None means the segment holds nothing at or after ``start_offset``.  The region is at most
        ``max_size`` bytes and ends at or before ``max_position`` (it may end mid-batch, as Kafka's
        does; clients drop a trailing partial batch).  With ``min_one`` a first batch larger than
        ``max_size`` is returned whole (KIP-74) unless it lies beyond ``max_position``.  The region
        starts at the first batch, so ``region.size < first batch size`` means that batch is cut
        (Kafka's ``firstEntryIncomplete``, which Fetch v3+ answers with no records at all).
        """
        if max_size < 0:
            raise ValueError("invalid max size %d" % max_size)
        entry = self.translate_offset(start_offset)
        if entry is None:
            return None
        position, batch_size, base = entry[0], entry[1], entry[2]
        if max_position is None:
            max_position = self._size
        adjusted = max(max_size, batch_size) if min_one else max_size
        size = max(0, min(max_position - position, adjusted))
        return FileRegion(self.handle(), position, size), base, batch_size

    def end_region(self):
        """An empty region at the end of the segment (a fetch at the log end): no descriptor is opened for it."""
        f = self._file
        return FileRegion(f if f is not None else descriptors.SegmentFile(-1, self.key), self._size, 0)

    def batches_by_timestamp(self, timestamp, starting_offset=0):
        """Entries, in log order, of the batches with max timestamp >= ``timestamp`` and last offset >=
        ``starting_offset``, starting from the time index's floor entry (Kafka's findOffsetByTimestamp +
        searchForTimestamp walk; the caller looks inside each batch and stops at the first record that
        qualifies)."""
        _ts, ts_offset = self.time_index.lookup(timestamp)
        _off, position = self.offset_index.lookup(max(ts_offset, starting_offset))
        for entry in self.batches(position):
            if entry[4] >= timestamp and entry[3] >= starting_offset:
                yield entry

    def find_offset_by_timestamp(self, timestamp, starting_offset=0):
        """Entry of the first batch with max timestamp >= ``timestamp`` and last offset >= starting_offset."""
        return next(self.batches_by_timestamp(timestamp, starting_offset), None)

    def read_next_offset(self):
        """One past the last offset in the segment (base offset when empty)."""
        _off, position = self.offset_index.last_entry()
        last = None
        for entry in self.batches(position):
            last = entry[3]
        return self.base_offset if last is None else last + 1

    # -- recovery / truncation -----------------------------------------------------------------
    def recover(self, max_message_size):
        """Rescan with CRC checks, rebuild both indexes, cut a torn/corrupt tail; returns bytes cut. The
        transaction index is emptied: the partition's producer-state replay re-adds its entries (txn_index.py).
        The indexes are built in memory and written once each, trimmed (``_Index.begin_rebuild``)."""
        self.offset_index.begin_rebuild()
        self.time_index.begin_rebuild()
        self.txn_index.reset()
        self.txn_index.stale = True
        self.max_timestamp_so_far, self.offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_last_index_entry = 0
        valid = 0
        f = self.handle()
        for pos, size, base, last, max_ts, _count in iter_file_batches(f, 0, self._size, True,
                                                                       max_message_size):
            if base < self.base_offset or last < base or last - self.base_offset > INT32_MAX:
                break
            if max_ts > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = max_ts, last
            self._bytes_since_last_index_entry = pos - self.offset_index.last_entry()[1]
            self._maybe_index(last, pos)
            valid = pos + size
        truncated = self._size - valid
        if truncated and old_format_at(f.fd, valid, self._size):
            raise UnsupportedLogFormatError(
                "%s holds message format v0/v1 at byte %d (written by Kafka < 0.11 or with log.message.format."
                "version <= 0.10.2): kbroker stores record batches v2 only and leaves this segment untouched; "
                "copy the data with kbroker-mirror-maker instead (docs/upgrading.md)" % (self.log_path, valid))
        if truncated:
            os.ftruncate(f.fd, valid)
            self._size = valid
        self._bytes_since_last_index_entry = valid - self.offset_index.last_entry()[1]
        self._rolling_ts = None
        # on_become_inactive's final time entry; end_rebuild writes both at their used size (= trimmed)
        if self.max_timestamp_so_far >= 0:
            self.time_index.append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.end_rebuild()
        self.time_index.end_rebuild()
        return truncated

    def truncate_to(self, offset):
        """Drop every batch from the one holding ``offset`` onward; returns bytes removed."""
        entry = self.translate_offset(offset)
        if entry is None:
            return 0
        position = entry[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self._size - position
        f = self.handle()
        os.ftruncate(f.fd, position)
        self._size = position
        self._load_state()
        # The surviving time entries cover batches up to the last offset-index entry; the batches after
        # it may hold a larger timestamp.
        for _pos, _size, _base, last, max_ts, _count in self.batches(self.offset_index.last_entry()[1]):
            if max_ts > self.max_timestamp_so_far:
                self.max_timestamp_so_far, self.offset_of_max_timestamp = max_ts, last
        if position == 0:
            self._rolling_ts = None
            self.created_ms = now_ms()
        return removed

    # -- lifecycle -----------------------------------------------------------------------------
    def change_suffix(self, old, new):
        """Rename every file from ``...<old>`` to ``...<new>`` (e.g. "" -> ".deleted"); an open descriptor stays."""
        def renamed(path):
            assert path.endswith(old)
            return path[:len(path) - len(old)] + new
        new_log = renamed(self.log_path)
        os.rename(self.log_path, new_log)
        self.log_path = new_log
        for index in (self.offset_index, self.time_index):
            if os.path.exists(index.path):
                index.rename(renamed(index.path))
            else:
                index.path = renamed(index.path)
        self.txn_index.rename(renamed(self.txn_index.path))
        self.suffix = self.suffix[:len(self.suffix) - len(old)] + new

    def moved_to(self, dir_path):
        """The segment's directory was renamed to ``dir_path`` (``Log.rename_dir``): file paths follow; fds stay."""
        def moved(path):
            return os.path.join(dir_path, os.path.basename(path))
        self.dir = dir_path
        self.log_path = moved(self.log_path)
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.path = moved(index.path)

    def close(self):
        """Trim the indexes and let go of the descriptor (a FileRegion still queued for sendfile keeps it open until
        it is sent: descriptors.py)."""
        if self._closed:
            return
        self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        self._drop_file()

    def delete(self):
        """Close and unlink every file (missing files are fine)."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self._drop_file()
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass

    def __repr__(self):
        return "LogSegment(%s, base=%d, size=%d)" % (self.dir, self.base_offset, self._size)
