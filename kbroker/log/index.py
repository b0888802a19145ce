"""Sparse per-segment indexes: ``.index`` (offset -> file position) and ``.timeindex`` (timestamp -> offset).

File formats (big-endian, packed, no header, never checksummed -- rebuilt from the ``.log`` after a crash):

* ``.index``: 8-byte entries ``relative_offset int32 | position int32`` with relative_offset =
  offset - segment base offset.  Entries are strictly increasing in both columns.
* ``.timeindex``: 12-byte entries ``timestamp int64 | relative_offset int32``.  Both columns strictly
  increase (an entry is only added when the segment's max timestamp grows).

A writable index is preallocated to ``segment.index.bytes`` rounded down to a whole number of entries
(10485760 / 8 = 1310720 offset entries, 10485760 // 12 = 873813 time entries) as a sparse file and
mmap'd when its first entry is written (a new index is an empty file until then); ``trim_to_valid_size``
cuts it back to the used entries when the segment stops being active or is closed.  A reopened index that
was not trimmed (crash) has trailing zero entries; the used part ends at the last non-zero entry.  An
all-zero entry is never a real offset-index entry (the first entry is written only after
index.interval.bytes > 0 bytes, so position > 0); for the time index a lone ``(0, 0)`` entry would be
dropped, which only costs a longer scan.

File descriptors: an index keeps none (the file is opened for each resize and closed at once), mapping included:
the mapping is made with libc's mmap through ctypes (``_FileMapping``), which, as the JVM's, needs no descriptor
once made -- Python's ``mmap.mmap`` keeps a dup of the descriptor for as long as the map lives, which made a
partition holding data cost three (its ``.log`` and one per mapped index): 10,000 partitions with data needed
30,000 descriptors and a broker under ``ulimit -n`` 20,000 failed with EMFILE. Now a partition costs one (its
``.log``), as in Kafka. The mapping is read and written through a memoryview of it; after ``_unmap`` nothing may
touch that view (the pages are gone): every access goes through ``self._mm`` on the owner's thread, and
``flush`` (any thread) only calls msync on the range it read with the view, which fails harmlessly (ENOMEM) on a
range unmapped meanwhile.

Read-ahead: every mapping is advised ``MADV_RANDOM``. Without it a fault on an index page that is not resident
(the first touch of a preallocated sparse index, or a page the page cache evicted) makes the kernel read around
the fault: up to ``read_ahead_kb`` of the file (128 KiB by default, 8 MiB on this project's test machine), which
for a sparse index means zero-filling up to 2,048 pages to use one. Measured with 10,000 partitions, 1 KB values
spread over 1,000 of them and the page cache full: 85 % of the broker's CPU was that fault path (``filemap_fault``
-> ``page_cache_ra_order``, ``memset``), ~300 us per batch; the read-around pages of 20,000 indexes then evicted
each other. An index is used at its last entry (append) and by bisection (lookup): random access, one page a
touch.

``TimeIndex.is_full`` reports full one entry early so the final ``(max timestamp, offset)`` entry can
always be written on roll/close (``append(..., skip_full_check=True)``).
"""

import ctypes
import mmap
import os
import struct

from kbroker._native import bisect_index


_PAGE = mmap.PAGESIZE


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.msync.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 4                       # <sys/mman.h> on Linux
# A writable memoryview over a mapping in one C call. ``memoryview((c_char * n).from_address(a))`` built a new ctypes
# array type for every distinct length n (7.7 us each, and ctypes keeps every such type in a cache that only
# grows: index lengths vary); this is 0.5 us and leaves nothing behind. 20,000 mappings at a 10,000-partition
# startup: ~0.15 s of GIL-held time.
_memory_view = ctypes.pythonapi.PyMemoryView_FromMemory
_memory_view.restype = ctypes.py_object
_memory_view.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
_PyBUF_WRITE = 0x200


def _original_close():
    """``os.close`` as the OS has it. gevent's monkey-patched one (gevent >= 25.8) checks every descriptor with fcntl
    and fstat before closing it (3 syscalls), which a regular file opened here and closed at once never needs: a
    10,000-partition startup closes ~30,000 of them."""
    try:
        from gevent.monkey import get_original
    except ImportError:
        return os.close
    return get_original("os", "close")


close_fd = _original_close()     # also segment descriptors (descriptors.py)


class _FileMapping:
    """A shared read-write mapping of a whole file that holds no descriptor (module docstring). ``view``: a
    memoryview (format 'B') over it, which struct's pack_into/unpack_from and bisect_index take as they took an
    mmap."""
    __slots__ = ("addr", "length", "view")

    def __init__(self, fd, length):
        addr = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, "mmap of %d bytes: %s" % (length, os.strerror(err)))
        self.addr, self.length = addr, length
        # No read-around on faults (module docstring, "Read-ahead"); advice only: a failure costs speed, not data.
        _libc.madvise(addr, length, mmap.MADV_RANDOM)
        self.view = _memory_view(addr, length, _PyBUF_WRITE)      # format 'B', writable

    def msync(self):
        addr, length = self.addr, self.length
        if addr is not None and _libc.msync(addr, length, _MS_SYNC) != 0:
            err = ctypes.get_errno()
            if err != 12:                       # ENOMEM: unmapped by a resize meanwhile (that one is not durable)
                raise OSError(err, "msync: %s" % os.strerror(err))

    def close(self):
        addr, self.addr = self.addr, None
        if addr is not None:
            self.view.release()
            _libc.munmap(addr, self.length)


class CorruptIndexError(Exception):
    """An index failed its sanity check; the caller deletes and rebuilds it."""


class IndexFullError(Exception):
    pass


class _Index:
    ENTRY_SIZE = 0
    KEY_SIZE = 0
    _ENTRY = None

    def __init__(self, path, base_offset, max_index_size):
        self.path = path
        self.base_offset = base_offset
        es = self.ENTRY_SIZE
        self.max_size = max(es, max_index_size // es * es)
        self.max_entries = self.max_size // es
        self._mm = None
        self._mapping = None       # the _FileMapping behind ``_mm`` (None when nothing is mapped or while building)
        self._mm_len = 0
        self._closed = False
        self._building = None      # bytearray of the entries while ``begin_rebuild`` .. ``end_rebuild``
        # A new index is an empty file, mapped (at its preallocated size) by its first append; an existing
        # (normally trimmed) index is mapped at its size, and the first append regrows it.
        self._map(None, count_entries=True)

    # -- mapping -------------------------------------------------------------------------------
    def _map(self, length, count_entries=False):
        """Size the file to ``length`` bytes (None: keep its size) and map it (nothing mapped at 0 bytes);
        ``count_entries``: also set ``_entries`` from the file (``_used_entries``, through the same descriptor).
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if length is None:
                length = os.fstat(fd).st_size
            else:
                os.ftruncate(fd, length)
            if count_entries:
                self._entries = self._used_entries(length, fd)
            self._mapping = _FileMapping(fd, length) if length > 0 else None
            self._mm = self._mapping.view if length > 0 else None
            self._mm_len = length
            self._backed = 0     # bytes from 0 known to have blocks (``_back``); 0 = check again
        finally:
            close_fd(fd)

    def _unmap(self):
        """Drop the mapping without msync: a resize or close is not a durability point (Kafka's AbstractIndex.resize
        does not force either). ``flush`` is: ``Log.flush`` msyncs the indexes of every segment below the recovery
        point it advances, and msync(MS_SYNC) writes the file's dirty pages in the range whichever mapping dirtied
        them. An msync here cost ~2.5 ms a call on this machine's disk: 4 per segment at a rebuild or a close, 40 s
        for the 10,000 partitions of one broker."""
        if self._building is not None:
            self._building = None
            self._mm = None
        elif self._mapping is not None:
            mapping, self._mapping, self._mm = self._mapping, None, None
            mapping.close()
        self._mm_len = 0

    def begin_rebuild(self):
        """Drop every entry and collect the next appends in memory (a recovery rescan); ``end_rebuild`` writes them
        with one write. The old way (truncate, regrow the sparse file to segment.index.bytes, store each entry
        through the mapping, trim, msync) cost ~10 ms a segment: 26 s to recover 1,000 partitions under load."""
        self._unmap()
        self._building = bytearray()
        self._mm = self._building          # entry() / lookups read the entries collected so far
        self._entries = 0

    def end_rebuild(self):
        """Write the collected entries as the whole file (its used size: trimmed) and map it."""
        data, self._building, self._mm = self._building, None, None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            close_fd(fd)
        self._map(None)
        self._entries = len(data) // self.ENTRY_SIZE

    def _used_entries(self, length, fd):
        """Entries in use in a file of ``length`` bytes: all of them when the last one is not zero (a trimmed
        index), else the slots before the first all-zero one (an untrimmed preallocated file after a crash; entries
        are written contiguously from slot 0 and zeroed when dropped, so a binary search finds it). Read with pread,
        never through the mapping: on tmpfs a read fault on a hole allocates a page, and a full file system answers
        that with SIGBUS (a 10 MiB sparse index on a disk that filled up, KIP-112's case)."""
        es = self.ENTRY_SIZE
        n = length // es
        if n == 0:
            return 0

        def zero(slot):
            return not any(os.pread(fd, es, slot * es))
        if not zero(n - 1):
            return n
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if zero(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def resize(self, new_size):
        """Remap to ``new_size`` bytes (rounded down to whole entries, never below the used part)."""
        es = self.ENTRY_SIZE
        new_size = max(new_size // es * es, self._entries * es)
        if new_size == self._mm_len:
            return
        self._unmap()
        self._map(new_size)

    # -- state ---------------------------------------------------------------------------------
    @property
    def entries(self):
        return self._entries

    @property
    def size_in_bytes(self):
        return self._entries * self.ENTRY_SIZE

    @property
    def is_full(self):
        return self._entries >= self.max_entries

    def entry(self, slot):
        return self._ENTRY.unpack_from(self._mm, slot * self.ENTRY_SIZE)

    def _append_raw(self, *fields):
        es = self.ENTRY_SIZE
        if self._entries >= self.max_entries:
            raise IndexFullError("%s is full (%d entries)" % (self.path, self._entries))
        if self._building is not None:
            self._building += self._ENTRY.pack(*fields)
            self._entries += 1
            return
        if (self._entries + 1) * es > self._mm_len:
            # A trimmed index of a segment that became active again (truncate / reopen): regrow.
            self.resize(self.max_size)
        pos = self._entries * es
        if pos + es > self._backed:
            self._back(pos, es)
        self._ENTRY.pack_into(self._mm, pos, *fields)
        self._entries += 1

    def _back(self, pos, n):
        """Give the pages of ``[pos, pos + n)`` their blocks before the mapping writes there: the file is sparse,
        and a store into a page a full file system cannot back is a SIGBUS that kills the broker. posix_fallocate
        turns it into an ENOSPC OSError here (the log dir then goes offline, dir_failure.py). One call per 4 KiB of
        index (512 offset entries, ~2 MB of log at index.interval.bytes 4096)."""
        start = pos // _PAGE * _PAGE
        end = -(-(pos + n) // _PAGE) * _PAGE
        end = min(max(end, start + _PAGE), self._mm_len)
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, start, end - start)
        finally:
            close_fd(fd)
        self._backed = end

    def _truncate_to_entries(self, n):
        es = self.ENTRY_SIZE
        if n < self._entries:
            # Zero the dropped entries so a crash-reopen finds the end at the last non-zero entry.
            start, end = n * es, self._entries * es
            self._mm[start:end] = bytes(end - start)
        self._entries = n

    def reset(self):
        """Drop every entry and regrow to the preallocated size (used before a rebuild)."""
        self._unmap()
        self._map(0)  # the OS hands back zeros when the sparse file regrows
        self._entries = 0
        self._map(self.max_size)

    def trim_to_valid_size(self):
        self.resize(self._entries * self.ENTRY_SIZE)

    def flush(self):
        mapping = self._mapping
        if mapping is not None:
            mapping.msync()

    def close(self):
        if self._closed:
            return
        self.trim_to_valid_size()
        self._unmap()
        self._closed = True

    def rename(self, new_path):
        os.rename(self.path, new_path)
        self.path = new_path

    def delete(self):
        if not self._closed:
            self._unmap()
            self._closed = True
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _bisect(self, target):
        if self._entries == 0:
            return -1
        return bisect_index(self._mm, self._entries, self.ENTRY_SIZE, self.KEY_SIZE, target)


class OffsetIndex(_Index):
    ENTRY_SIZE = 8
    KEY_SIZE = 4
    _ENTRY = struct.Struct(">ii")

    def last_entry(self):
        """(offset, position) of the last entry, (base_offset, 0) when empty."""
        if self._entries == 0:
            return self.base_offset, 0
        rel, pos = self.entry(self._entries - 1)
        return self.base_offset + rel, pos

    @property
    def last_offset(self):
        return self.last_entry()[0]

    def append(self, offset, position):
        rel = offset - self.base_offset
        if self._entries and rel <= self.entry(self._entries - 1)[0]:
            raise ValueError("offset %d not above last index entry %d" % (offset, self.last_offset))
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError("offset %d out of int32 range of base %d" % (offset, self.base_offset))
        self._append_raw(rel, position)

    def lookup(self, offset):
        """(offset, position) of the largest entry with offset <= target, else (base_offset, 0)."""
        slot = self._bisect(offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        rel, pos = self.entry(slot)
        return self.base_offset + rel, pos

    def truncate_to(self, offset):
        """Remove every entry whose offset is >= ``offset``."""
        slot = self._bisect(offset - self.base_offset)
        if slot < 0:
            n = 0
        elif self.entry(slot)[0] == offset - self.base_offset:
            n = slot
        else:
            n = slot + 1
        self._truncate_to_entries(n)

    def sanity_check(self):
        length = os.stat(self.path).st_size
        if length % self.ENTRY_SIZE:
            raise CorruptIndexError("%s: size %d is not a multiple of %d" % (self.path, length, self.ENTRY_SIZE))
        if self._entries and self.last_offset <= self.base_offset:
            raise CorruptIndexError("%s: last offset %d is not above base offset %d"
                                    % (self.path, self.last_offset, self.base_offset))


class TimeIndex(_Index):
    ENTRY_SIZE = 12
    KEY_SIZE = 8
    _ENTRY = struct.Struct(">qi")

    @property
    def is_full(self):
        return self._entries >= self.max_entries - 1

    def last_entry(self):
        """(timestamp, offset) of the last entry, (-1, base_offset) when empty."""
        if self._entries == 0:
            return -1, self.base_offset
        ts, rel = self.entry(self._entries - 1)
        return ts, self.base_offset + rel

    def append(self, timestamp, offset, skip_full_check=False):
        """Add (timestamp, offset) if timestamp is above the last entry's; returns True when added."""
        last_ts, last_off = self.last_entry()
        if self._entries and offset < last_off:
            raise ValueError("time index offset %d below last entry offset %d" % (offset, last_off))
        if timestamp <= last_ts:
            return False
        if not skip_full_check and self.is_full:
            raise IndexFullError("%s is full (%d entries)" % (self.path, self._entries))
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError("offset %d out of int32 range of base %d" % (offset, self.base_offset))
        self._append_raw(timestamp, rel)
        return True

    def lookup(self, timestamp):
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base_offset)."""
        slot = self._bisect(timestamp)
        if slot < 0:
            return -1, self.base_offset
        ts, rel = self.entry(slot)
        return ts, self.base_offset + rel

    def truncate_to(self, offset):
        """Remove every entry whose offset is >= ``offset`` (offsets increase, so bisect on them)."""
        lo, hi = 0, self._entries
        rel = offset - self.base_offset
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.entry(mid)[1] < rel:
                lo = mid + 1
            else:
                hi = mid
        self._truncate_to_entries(lo)

    def sanity_check(self):
        length = os.stat(self.path).st_size
        if length % self.ENTRY_SIZE:
            raise CorruptIndexError("%s: size %d is not a multiple of %d" % (self.path, length, self.ENTRY_SIZE))
        if self._entries:
            last_ts, last_off = self.last_entry()
            if last_off < self.base_offset:
                raise CorruptIndexError("%s: last offset %d below base offset %d"
                                        % (self.path, last_off, self.base_offset))
            if last_ts < self.entry(0)[0]:
                raise CorruptIndexError("%s: last timestamp %d below first %d"
                                        % (self.path, last_ts, self.entry(0)[0]))
