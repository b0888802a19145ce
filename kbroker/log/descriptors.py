"""Open descriptors of segment ``.log`` files, bounded (kbroker; Kafka keeps one open per segment for its whole life).

Kafka holds a FileChannel open for every segment, so a broker needs ``RLIMIT_NOFILE`` above its segment count plus
its connections: 20,000 replicas of one segment each plus sockets is over this VM's hard limit of 20,000 (root
cannot raise it here), and every log directory went offline with EMFILE (docs/performance.md, issue 15 session
9). Here a segment opens its file on first use and the process keeps at most ``limit`` of them open
(``log.open.segment.files.max``; 0 = half the soft ``RLIMIT_NOFILE``, the other half left to sockets -- 10,000 of
20,000 here), closing the least recently useful one when a new one is needed.

``SegmentFile`` is one open descriptor of one segment file. It is closed when the last reference to it goes
(CPython reference counting, at once): the segment's, and those of whoever is reading it meanwhile -- a FileRegion
waiting in a connection's send queue for ``sendfile``, a flush running in a worker thread, a cleaner walking the
segment. Eviction only drops the segment's reference, so it never closes a descriptor in use, and a descriptor
number is never reused under a reader. Readers therefore keep the ``SegmentFile`` (not its ``fd`` alone) for as long
as they use the number.

The bound counts the descriptors segments hold. Regions waiting to be sent hold theirs on top of it, for as long as
the answer is queued: the process's ``.log`` descriptors are at most ``limit`` plus those in queued Fetch answers
(bounded by the connections' queued bytes).

Eviction is CLOCK (second chance): using a segment's file marks the segment; when a file is opened past the limit
the pool walks its ring from the oldest entry, unmarking marked segments (they go to the back) and evicting the
first unmarked one. Marking is one attribute store on the hot path (append, read), where an LRU move costs a dict
operation per access. An eviction ends within one turn of the ring: every entry it passes over loses its mark, so
the walk comes back to an unmarked one.

A reopen costs one ``open`` and, later, a ``close`` (~4 us together on this machine): a workload over more segments
than the limit pays it per eviction. An evicted file loses nothing -- its written bytes are in the page cache; an
fsync on any later descriptor of the file flushes them (fsync is per inode).

Threads: segments are opened on the event loop, in log-loading worker threads and in the flusher's and cleaner's
threads; the ring is guarded by a real (not gevent) lock, held for dictionary work only, never over I/O.
"""

import os
import resource
import weakref
from collections import OrderedDict

from gevent import monkey

from .index import close_fd

_allocate_lock = monkey.get_original("_thread", "allocate_lock")

# Floor of the automatic limit: a process with a soft limit of 256 still keeps 128 segments open.
MIN_AUTO_LIMIT = 128


def auto_limit():
    """Half the soft ``RLIMIT_NOFILE`` (sockets, indexes opened for a resize, checkpoints get the rest)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MIN_AUTO_LIMIT, soft // 2)


class SegmentFile:
    """One open descriptor of a segment file; closed when unreferenced (module docstring). ``key``: the segment's,
    so a FileRegion can tell which segment it reads whatever descriptor backs it."""
    __slots__ = ("fd", "key")

    def __init__(self, fd, key):
        self.fd = fd
        self.key = key

    def fileno(self):
        return self.fd

    def __del__(self):
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                close_fd(fd)
            except Exception:  # noqa: BLE001 - EBADF, or at interpreter exit a module already torn down
                pass

    def __repr__(self):
        return "SegmentFile(fd=%d)" % self.fd


class DescriptorPool:
    """The segments holding an open ``SegmentFile``, at most ``limit`` (module docstring)."""

    def __init__(self, limit=0):
        self._lock = _allocate_lock()
        # key -> weakref to the segment, in clock order. An OrderedDict: popping a plain dict's first entry leaves a
        # hole its next first-entry lookup scans past, O(holes) until a resize compacts it.
        self._ring = OrderedDict()
        self.limit = limit if limit > 0 else auto_limit()
        self.opens = 0               # files opened (first opens and reopens), for metrics and tests
        self.evictions = 0

    def set_limit(self, limit):
        """``limit`` > 0, or 0 for ``auto_limit()``; evicts down to it at once."""
        self.limit = limit if limit > 0 else auto_limit()
        self._evict_over(self.limit)

    def __len__(self):
        return len(self._ring)

    def open(self, segment, path, flags, key):
        """A new ``SegmentFile`` of ``path`` for ``segment`` (which stores it), evicting another segment's first if
        the pool is full. ``segment`` has ``key`` (unique in the process), ``_touched`` and ``_evict()``."""
        self._evict_over(self.limit - 1)
        handle = SegmentFile(os.open(path, flags, 0o644), key)
        with self._lock:
            self._ring[key] = weakref.ref(segment)
            self.opens += 1
        return handle

    def forget(self, segment):
        """``segment`` closed its file itself (close, delete)."""
        with self._lock:
            self._ring.pop(segment.key, None)

    def _evict_over(self, keep):
        victims = []
        with self._lock:
            ring = self._ring
            while len(ring) > keep:
                key, ref = ring.popitem(last=False)
                segment = ref()
                if segment is None:
                    continue                 # gone without a close; its SegmentFile went with it
                if segment._touched:
                    segment._touched = False
                    ring[key] = ref          # second chance: to the back of the ring
                    continue
                victims.append(segment)
                self.evictions += 1
        for segment in victims:              # outside the lock: dropping the last reference closes (a syscall)
            segment._evict()


POOL = DescriptorPool()
