"""Kafka's offset checkpoint files (recovery-point-offset-checkpoint, replication-offset-checkpoint, ...).

Text format, one item per line, ``\\n`` line ends::

    0                      <- format version
    2                      <- number of entries
    topic-a 0 1234         <- "<topic> <partition> <offset>"
    topic-b 3 0

Topic names cannot contain spaces (Kafka's legal set is [a-zA-Z0-9._-]), so a plain split works.
Writes go to ``<file>.tmp``, are fsynced, renamed over the file and the directory is fsynced, so a
crash leaves either the old or the new file.  A missing file reads as empty; an unreadable one logs a
warning and reads as empty (the caller then recovers from offset 0, which is always safe).
``write_new_file`` is the cheap first write of a file into a directory made moments ago (its rules below).
"""

import logging
import os
import posix

from kbroker._native import write_files

log = logging.getLogger(__name__)

VERSION = 0


def fsync_dir(path):
    """fsync a directory so a rename/create/unlink inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        # posix.close, not os.close: in the broker gevent's monkey-patched os.close closes anything but a regular
        # file only at the event loop's next iteration. Run on the loop by code that does not yield, every
        # directory fsync'd kept its descriptor: a LeaderAndIsr creating 10,000 partitions (3 directory fsyncs
        # each) ran out of descriptors (ulimit 20,000) after 2,498 partitions. A directory fd is never watched by
        # the loop, so closing it at once is what the patch would do for it anyway.
        posix.close(fd)


def write_atomically(path, data, durable=True, tmp_suffix=".tmp"):
    """Replace ``path`` with ``data`` crash-safely: write ``path.tmp``, fsync it, rename over ``path``, fsync the
    directory. A crash leaves either the old file or the new one, never a torn mix. ``durable=False``: no fsync (the
    caller makes many files durable with one ``sync_filesystem`` afterwards; until then a crash may leave the old
    file, the new one or none -- only for files whose loss the reader survives). ``tmp_suffix``: a writer on another
    thread uses its own, so it never shares a half-written temporary file with the event loop's writer."""
    tmp = path + tmp_suffix
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_files_unsynced(items, exclusive=False):
    """``[(path, data)]`` written without fsync -> ``[(errno, st_dev)]`` in order (0 and the file's device for a
    file written; a failing file does not stop the others): each from byte 0 and cut to its length, or with
    ``exclusive`` created anew (EEXIST for one that exists, left untouched). Through ``kbroker._native.write_files``,
    which holds no GIL from the first file to the last: for worker threads writing thousands of small files beside a
    busy event loop (epoch_cache.write_together; in Python each system call waited up to 5 ms for the GIL). The
    caller makes them durable: one ``sync_filesystem`` per device."""
    return write_files([os.fsencode(path) for path, _ in items], [bytes(data) for _, data in items], exclusive)


_libc = None


def sync_filesystem(path):
    """syncfs(2) of the file system holding ``path``: every dirty page and inode of it on disk in one call. A clean
    shutdown of 10,000 partitions with fresh data fsync'd each log, each index and each producer snapshot and its
    directory (~5 syncs a partition, ~4 ms each on this machine's shared disk: minutes); after one syncfs those
    fsyncs find nothing dirty. Falls back to sync(2) where syncfs is missing."""
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if getattr(_libc, "syncfs", None) is None or _libc.syncfs(fd) != 0:
            os.sync()
    finally:
        posix.close(fd)


def write_new_file(path, data):
    """Create ``path`` (which must not exist: FileExistsError) holding ``data``, without fsync.

    Only for the first version of a file in a directory created moments ago, whose reader rebuilds whatever a crash
    leaves (a leader-epoch checkpoint: from the log's batch headers). No older version exists anywhere, on disk or
    in the page cache, so an OS crash leaves no file, an empty, zero-filled or cut one (the reader must refuse those:
    an entry count and a final newline) or this one -- never a stale readable one; every later version goes through
    ``write_atomically`` (fsync before and after the rename) and replaces this one. Cost: open + write + close, no
    disk wait (``write_atomically`` waits for two fsyncs: ~0.3 ms each measured here, tens of ms on a busy disk)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def format_checkpoint(offsets):
    """The exact file text for ``{(topic, partition): offset}`` (entries sorted for stable output)."""
    lines = [str(VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        lines.append("%s %d %d" % (topic, partition, offset))
    return "\n".join(lines) + "\n"


def parse_checkpoint(text):
    """Inverse of format_checkpoint; raises ValueError on any malformation."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise ValueError("checkpoint shorter than its 2 header lines")
    if int(lines[0]) != VERSION:
        raise ValueError("unrecognized checkpoint version %r" % lines[0])
    count = int(lines[1])
    body = lines[2:]
    if count != len(body):
        raise ValueError("checkpoint says %d entries but has %d" % (count, len(body)))
    offsets = {}
    for line in body:
        parts = line.split()
        if len(parts) != 3:
            raise ValueError("malformed checkpoint line %r" % line)
        offsets[(parts[0], int(parts[1]))] = int(parts[2])
    return offsets


class OffsetCheckpoint:
    def __init__(self, path):
        self.path = path

    def write(self, offsets):
        write_atomically(self.path, format_checkpoint(offsets).encode("utf-8"))

    def read(self):
        try:
            with open(self.path, "r", encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("cannot read checkpoint %s (%s); treating it as empty", self.path, exc)
            return {}
        try:
            return parse_checkpoint(text)
        except ValueError as exc:
            log.warning("corrupt checkpoint %s (%s); treating it as empty", self.path, exc)
            return {}
