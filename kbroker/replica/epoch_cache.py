"""Leader-epoch cache of one partition (KIP-101 / KIP-279): which leader epoch wrote which offset range.

File ``<partition dir>/leader-epoch-checkpoint``, Kafka's format, ``\\n`` line ends::

    0              <- format version
    2              <- number of entries
    0 0            <- "<epoch> <start offset>": the first offset written in that epoch
    3 150

Invariants: entries are strictly increasing in both epoch and start offset (``assign`` drops any entry that would
break that, as Kafka's ``maybeTruncateNonMonotonicEntries``); the file is rewritten atomically (``.tmp``, fsync,
rename, fsync of the directory) after every change, so a crash leaves the old or the new list.
A missing or unreadable file (wrong count, no final newline: a torn write) is rebuilt from the log: every v2 batch
header carries ``partitionLeaderEpoch`` (read through ``Log.batch_headers``), and the first batch of each new epoch
gives its start offset (batches with epoch -1, written by no leader, are skipped). An empty rebuild writes no file
(a missing file reads back as the same empty list).

A new partition (``fresh``: its directory was created by this LeaderAndIsr) writes its first checkpoint without
fsync (``checkpoint.write_new_file``). Kafka fsyncs it (file, rename, directory) before answering LeaderAndIsr, and
so did kbroker: with the empty file written at load, two fsync'd writes per partition -- 5.1 s of a 1,000-partition
CreateTopics (2,007 writes), on the event loop. Nothing needs them: no older version of the file can exist in a new
directory, so a crash leaves no file, an unreadable one, or the whole one; the first two are rebuilt from the batch
headers, which name exactly the epochs that wrote records (an epoch that wrote none needs no entry: a follower
asking about it is answered by the next epoch's start or the log end, and there is nothing of it to truncate). A
stale but readable file, the one dangerous outcome, needs an older version; every later write is fsync'd.

Many new epochs at once (a LeaderAndIsr making this broker leader of thousands of partitions; the first one after
a restart): ``assign(..., flush=False)`` records each in memory, ``write_together`` writes all their files without
fsync and then syncs each file system once (syncfs), while those partitions' appends are held (the ReplicaManager
answers the LeaderAndIsr meanwhile). Same guarantee as one durable write each -- nothing of the new epochs is
appended before the sync returns, and a crash before it leaves old, new or unreadable files (all rebuilt or cut
correctly: an entry starting at the log end is dropped at load; what a follower or client was told of the new
epoch meanwhile -- that it starts at the log end -- stays true of the log, and the next leader's epoch is higher)
-- at 1-2 syncs instead of 2 fsyncs a partition: 750 partitions took 47 s on a busy disk, on the event loop.

``end_offset_for(epoch, log_end_offset)`` answers OffsetsForLeaderEpoch with Kafka's (>= 2.0) rules:
* the latest epoch -> ``(epoch, log_end_offset)``;
* an epoch with a higher known epoch after it -> ``(largest known epoch <= it, start offset of the next higher)``;
  when it is below every known epoch (the log's head was deleted) -> ``(epoch, start of the first known epoch)``;
* an epoch above every known one, -1, or an empty cache -> ``UNDEFINED`` = (-1, -1).
"""
import bisect
import errno
import logging
import os

from kbroker.log.checkpoint import sync_filesystem, write_atomically, write_files_unsynced, write_new_file

log = logging.getLogger(__name__)

FILE_NAME = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
FSYNC_EACH_MAX = 8        # write_together: up to this many replaced files get their own fsyncs, more one syncfs


def format_entries(entries):
    lines = [str(VERSION), str(len(entries))]
    lines.extend("%d %d" % e for e in entries)
    return "\n".join(lines) + "\n"


def parse_entries(text):
    """Inverse of ``format_entries``; ValueError on any malformation (a text not ending in a newline is torn)."""
    if not text.endswith("\n"):
        raise ValueError("leader-epoch-checkpoint does not end with a newline (torn write)")
    lines = text.split("\n")
    lines.pop()
    if len(lines) < 2 or int(lines[0]) != VERSION:
        raise ValueError("bad leader-epoch-checkpoint header")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError("leader-epoch-checkpoint says %d entries but has %d" % (count, len(lines) - 2))
    out = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != 2:
            raise ValueError("malformed leader-epoch-checkpoint line %r" % line)
        out.append((int(parts[0]), int(parts[1])))
    return out


def scan_log_epochs(log):
    """[(epoch, start_offset)] from the batch headers of ``log`` (the rebuild path)."""
    out = []
    for head in log.batch_headers():
        epoch = head.partition_leader_epoch
        if epoch >= 0 and (not out or epoch > out[-1][0]):
            out.append((epoch, head.base_offset))
    return out


class LeaderEpochCache:
    def __init__(self, dir_path, entries=(), persist=True, fresh=False):
        """``fresh``: the directory is new and holds no checkpoint; the first flush then skips fsync (module
        docstring)."""
        self.path = os.path.join(dir_path, FILE_NAME)
        self.persist = persist
        self._fresh = fresh
        self.dirty = False        # changed in memory, not written yet (assign(flush=False))
        self.version = 0          # +1 at every change: a batch writer knows whether its snapshot is still current
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]

    @classmethod
    def load(cls, lg, fresh=False):
        """The cache of ``lg`` (a Log; read from its checkpoint, else rebuilt from batch headers and written), cut to
        the log's offset range: entries at/after the LEO are gone (a crash may have cut the log's tail).
        ``fresh``: ``lg`` was created in a new directory just now -- nothing to read, and nothing is written until
        the first epoch is assigned."""
        if fresh:
            return cls(lg.dir, (), fresh=True)
        path = os.path.join(lg.dir, FILE_NAME)
        entries = None
        try:
            with open(path, "r", encoding="ascii") as f:
                entries = parse_entries(f.read())
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as e:
            log.warning("unreadable %s (%s); rebuilding it from the log", path, e)
        cache = cls(lg.dir, ())
        if entries is None:
            for epoch, start in scan_log_epochs(lg):
                cache._epochs.append(epoch)
                cache._starts.append(start)
            if cache._epochs:
                cache.flush()
        else:
            cache._epochs = [e for e, _ in entries]
            cache._starts = [s for _, s in entries]
        # In memory only (``dirty``; the next change writes it): the file keeps an epoch that wrote nothing by the
        # log end (every empty partition has one), which every load cuts the same way. Written durably it cost two
        # fsyncs and a replacing rename (~0.1 ms on ext4) per such partition at every restart: 6,000 fsyncs for
        # 3,000 empty ones (bench/become_leader.py).
        cache.truncate_from_end(lg.log_end_offset, write=False)
        return cache

    # -------------------------------------------------------------------------------------------- queries
    def entries(self):
        return list(zip(self._epochs, self._starts))

    def __len__(self):
        return len(self._epochs)

    @property
    def latest_epoch(self):
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def start_offset_of(self, epoch):
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return self._starts[i]
        return UNDEFINED_OFFSET

    def end_offset_for(self, epoch, log_end_offset):
        epochs = self._epochs
        if epoch == UNDEFINED_EPOCH or not epochs:
            return UNDEFINED
        if epoch == epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED                       # newer than anything this replica knows
        if higher == 0:
            return epoch, self._starts[0]          # older than everything kept (head deleted)
        return epochs[higher - 1], self._starts[higher]

    # -------------------------------------------------------------------------------------------- changes
    def assign(self, epoch, start_offset, flush=True):
        """Record that ``epoch`` starts at ``start_offset``; a no-op when it is already the latest epoch at or
        below that offset. Entries with an epoch >= ``epoch`` or a start >= ``start_offset`` are dropped first.
        ``flush=False``: only in memory (``dirty``); the caller writes it with ``write_together`` before the epoch
        is used. A no-op ``assign`` of a dirty cache flushes it (a batch that failed is made durable here)."""
        if epoch < 0 or start_offset < 0:
            raise ValueError("epoch %d / start offset %d must be >= 0" % (epoch, start_offset))
        if self._epochs and self._epochs[-1] == epoch and self._starts[-1] <= start_offset:
            if self.dirty and flush:
                self.flush()
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if flush:
            self.flush()
        else:
            self.version += 1
            self.dirty = True
        return True

    def truncate_from_end(self, end_offset, write=True):
        """The log was cut to ``end_offset``: forget epochs that start at or after it. ``write=False``: in memory
        only (``dirty``), where the next load redoes the cut (``load``)."""
        if not self._starts or self._starts[-1] < end_offset:
            return False
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
        if write:
            self.flush()
        else:
            self.version += 1
            self.dirty = True
        return True

    def truncate_from_start(self, start_offset):
        """The log now starts at ``start_offset``: drop epochs wholly below it, move the first kept one up."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return False
        epoch = self._epochs[i - 1]
        del self._epochs[:i - 1]
        del self._starts[:i - 1]
        self._epochs[0], self._starts[0] = epoch, start_offset
        self.flush()
        return True

    def clear(self):
        if self._epochs:
            self._epochs, self._starts = [], []
            self.flush()

    def flush(self):
        self.version += 1
        self.dirty = False
        if not self.persist:
            return
        data = format_entries(self.entries()).encode("ascii")
        if self._fresh:
            self._fresh = False
            try:
                write_new_file(self.path, data)
                return
            except FileExistsError:      # not new after all: replace it the durable way
                pass
        write_atomically(self.path, data)


def write_together(snapshots):
    """Blocking (a worker thread): ``snapshots`` [(cache, data, version)] (``snapshot``: ``data`` the cache's file
    content taken where its owner runs) each written without fsync, then one syncfs per file system holding them
    (module docstring); up to FSYNC_EACH_MAX of them each durably instead (its own temporary name, so a flush by the
    event loop meanwhile never shares a half-written file). Raises OSError when a write or sync fails: nothing may
    then be taken as durable.

    The many files go through ``checkpoint.write_files_unsynced`` (``kbroker._native.write_files``), which holds no
    GIL from the first file to the last: in Python each file's ~5 system calls each gave the GIL back and waited up
    to the switch interval (5 ms) to take it again while the event loop's thread was busy -- 3,566 checkpoints took
    4.2 s in a failover, against ~0.1 s with an idle loop. A replaced file is overwritten in place from byte 0 and cut to its length: no
    temporary file, no rename -- ext4 (auto_da_alloc) starts writing a file's data when a rename replaces another
    or a truncate to 0 precedes the write, measured 160 us a file (10,000: 1.6 s, up to 6 s on a busy disk)
    against 13 us. Its reader survives anything a crash before the syncfs leaves: the old bytes, the new, or a mix
    of both at sector granularity (the new list is a prefix of the old one plus one entry, so a mix reads as one of
    them or fails its entry count / final newline check and is rebuilt from the log)."""
    fresh, replaced = [], []
    for cache, data, _version in snapshots:
        if cache.persist:
            # A new directory's first file: created exclusively and never fsync'd (module docstring).
            (fresh if cache._fresh else replaced).append((cache.path, data))
    if fresh:
        for (path, data), (err, _dev) in zip(fresh, write_files_unsynced(fresh, exclusive=True)):
            if err == errno.EEXIST:
                replaced.append((path, data))     # not new after all: replaced like the others
            elif err:
                raise OSError(err, os.strerror(err), path)
    if len(replaced) <= FSYNC_EACH_MAX:
        # A syncfs also writes out every other dirty page of the file system (log segments: up to the kernel's
        # dirty limit, seconds at worst); a few files are cheaper with their own fsyncs.
        for path, data in replaced:
            write_atomically(path, data, tmp_suffix=".tmp-batch")
        return
    devices = {}
    for (path, _data), (err, dev) in zip(replaced, write_files_unsynced(replaced)):
        if err:
            raise OSError(err, os.strerror(err), path)
        devices.setdefault(dev, path)
    for path in devices.values():
        sync_filesystem(os.path.dirname(path))


def snapshot(cache):
    """(cache, its file content now, its version now): what ``write_together`` writes and ``settle`` checks."""
    return cache, format_entries(cache.entries()).encode("ascii"), cache.version


def settle(snapshots, ok):
    """After ``write_together`` of ``snapshots`` [(cache, data, version)]: each cache unchanged since its snapshot
    is clean (``ok``) -- the others, changed meanwhile or not synced, are flushed now, one durable write each."""
    for cache, _data, version in snapshots:
        if ok and cache.version == version:
            cache.dirty = False
            cache._fresh = False
        else:
            cache.flush()
