"""Producer-state snapshot files (Kafka's ``ProducerStateManager`` snapshots, ``<offset>.snapshot``).

A snapshot records the producer state of a partition as of an offset: every producer's last batch and open
transaction for the log BELOW that offset, so a restart loads the newest snapshot at or below its recovery point and
replays only the batches after it instead of the whole log. One file per snapshot in the partition directory, named
``%020d.snapshot`` after the offset (Kafka's ``LogFileUtils.producerSnapshotFile``), byte-compatible with Kafka so
``kafka-dump-log.sh --files <offset>.snapshot`` decodes ours::

    version   int16   = 1                                          offset 0
    crc       uint32  CRC-32C of every byte after this field        offset 2
    count     int32   number of entries (>= 0)                      offset 6
    count x 46-byte entry, big-endian:                              offset 10
        producerId            int64
        producerEpoch         int16
        lastSequence          int32   last sequence of the producer's last data batch (-1: none)
        lastOffset            int64   last offset of that batch (-1: the producer has only written markers)
        offsetDelta           int32   last offset - first offset of that batch
        timestamp             int64   max timestamp of the producer's last append (ms)
        coordinatorEpoch      int32   epoch of the coordinator that sent the last marker (-1: none)
        currentTxnFirstOffset int64   first offset of the producer's open transaction (-1: none)

(Kafka's ``PID_SNAPSHOT_MAP_SCHEMA``: ``version``, ``crc``, ``producer_entries`` an ``ArrayOf`` with an int32 count.)
A file is read whole (46 bytes per producer: 100,000 producers are 4.6 MB) and refused -- ``CorruptSnapshotError``
-- when its version is not 1, its CRC does not match, its count is negative, or its length is not exactly
``10 + 46 * count``.

Files are written atomically (``<name>.tmp``, fsync, rename, directory fsync: checkpoint.write_atomically), so a
crash leaves the old set of files or the new one, never a torn snapshot under a real name; a leftover ``.tmp`` is
removed by the next ``write``/``latest``. Deletions of snapshots that would be WRONG after a crash (``delete_above``,
the truncation case: a snapshot of a history that no longer exists) fsync the directory; trimming old ones
(``retain``, ``delete_below``) does not need to, a surviving old snapshot is still a correct one.

Which snapshots are kept and when they are taken is the caller's policy (``Partition``/``ProducerStateManager``:
at a segment roll and a clean shutdown, trimmed to the newest ``KEEP`` = 2 as Kafka keeps them around the active
segment). This module knows the format and the files only; it never touches a segment file and the log loader
ignores ``.snapshot`` files (removing the partition directory removes them with it).
"""

import logging
import os
import struct
from collections import namedtuple

from kbroker._native import crc32c

from .checkpoint import fsync_dir, write_atomically

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
TMP_SUFFIX = ".tmp"
VERSION = 1
KEEP = 2
NO_OFFSET = -1

_HEADER = struct.Struct(">hIi")      # version, crc, count -- 10 bytes
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
HEADER_SIZE = _HEADER.size
ENTRY_SIZE = _ENTRY.size
_CRC_START = 6                       # the CRC covers count and entries: bytes [6, end)

SnapshotEntry = namedtuple(
    "SnapshotEntry",
    "producer_id producer_epoch last_sequence last_offset offset_delta timestamp coordinator_epoch "
    "current_txn_first_offset")
SnapshotEntry.__doc__ = ("One producer's state in a snapshot (field order = file order). ``last_offset`` -1: no data "
                         "batch (only markers); ``current_txn_first_offset`` -1: no open transaction.")


class CorruptSnapshotError(Exception):
    """A snapshot file that is not a valid version-1 snapshot (Kafka's CorruptSnapshotException)."""


def filename(offset):
    return "%020d%s" % (offset, SNAPSHOT_SUFFIX)


def snapshot_path(dir_path, offset):
    return os.path.join(dir_path, filename(offset))


def offset_of(name):
    """The offset a ``%020d.snapshot`` file name stands for, or None for any other name."""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[:-len(SNAPSHOT_SUFFIX)]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


# ------------------------------------------------------------------------------------------- format
def encode(entries):
    """The exact file bytes for ``entries`` (SnapshotEntry or equal 8-tuples), in the order given."""
    entries = list(entries)
    buf = bytearray(HEADER_SIZE + ENTRY_SIZE * len(entries))
    pos = HEADER_SIZE
    for e in entries:
        _ENTRY.pack_into(buf, pos, *e)
        pos += ENTRY_SIZE
    struct.pack_into(">i", buf, _CRC_START, len(entries))
    _HEADER.pack_into(buf, 0, VERSION, crc32c(memoryview(buf)[_CRC_START:]), len(entries))
    return bytes(buf)


def decode(buf, name="snapshot"):
    """``[SnapshotEntry]`` of a whole file's bytes; raises CorruptSnapshotError (see module docstring)."""
    if len(buf) < HEADER_SIZE:
        raise CorruptSnapshotError("%s: %d bytes, shorter than the %d-byte header" % (name, len(buf), HEADER_SIZE))
    version, crc, count = _HEADER.unpack_from(buf, 0)
    if version != VERSION:
        raise CorruptSnapshotError("%s: unknown snapshot version %d" % (name, version))
    computed = crc32c(memoryview(buf)[_CRC_START:])
    if crc != computed:
        raise CorruptSnapshotError("%s: CRC mismatch (stored %d, computed %d)" % (name, crc, computed))
    if count < 0 or len(buf) != HEADER_SIZE + ENTRY_SIZE * count:
        raise CorruptSnapshotError("%s: %d entries do not fit %d bytes" % (name, count, len(buf)))
    return [SnapshotEntry._make(_ENTRY.unpack_from(buf, HEADER_SIZE + i * ENTRY_SIZE)) for i in range(count)]


# ------------------------------------------------------------------------------------------- files
def write(dir_path, offset, entries, durable=True):
    """Write the snapshot of ``offset`` atomically (replacing one of the same offset); returns its path.
    ``durable=False``: no fsync (checkpoint.write_atomically; a clean shutdown syncs the file system once)."""
    if offset < 0:
        raise ValueError("snapshot offset %d is negative" % offset)
    path = snapshot_path(dir_path, offset)
    write_atomically(path, encode(entries), durable)
    return path


def read(path):
    """``[SnapshotEntry]`` of the file at ``path``; CorruptSnapshotError when it is invalid (OSError as is)."""
    with open(path, "rb") as f:
        data = f.read()
    return decode(data, path)


def _remove_tmp(dir_path, names):
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX + TMP_SUFFIX):
            _unlink(os.path.join(dir_path, name))


def list_offsets(dir_path):
    """Offsets of the snapshot files in ``dir_path``, ascending ([] for a missing directory)."""
    try:
        names = os.listdir(dir_path)
    except FileNotFoundError:
        return []
    return sorted(o for o in (offset_of(n) for n in names) if o is not None)


def latest(dir_path, at_or_below=None):
    """``(offset, [SnapshotEntry])`` of the newest valid snapshot whose offset is <= ``at_or_below`` (any offset
    when None), or None. Invalid files met on the way are deleted with a warning and the next older one is tried
    (Kafka's loadFromSnapshot); files above ``at_or_below`` are left alone (``delete_above`` is the caller's)."""
    try:
        names = os.listdir(dir_path)
    except FileNotFoundError:
        return None
    _remove_tmp(dir_path, names)
    offsets = sorted((o for o in (offset_of(n) for n in names) if o is not None), reverse=True)
    for offset in offsets:
        if at_or_below is not None and offset > at_or_below:
            continue
        path = snapshot_path(dir_path, offset)
        try:
            return offset, read(path)
        except (CorruptSnapshotError, OSError) as exc:
            logger.warning("deleting unreadable producer snapshot %s: %s", path, exc)
            _unlink(path)
    return None


def delete_above(dir_path, offset):
    """Delete the snapshots whose offset is > ``offset`` (a truncation to ``offset``); durable before it returns.
    Returns the offsets deleted."""
    doomed = [o for o in list_offsets(dir_path) if o > offset]
    return _delete(dir_path, doomed, durable=True)


def delete_below(dir_path, offset):
    """Delete the snapshots whose offset is < ``offset`` (the log start moved past them). Returns the offsets."""
    doomed = [o for o in list_offsets(dir_path) if o < offset]
    return _delete(dir_path, doomed, durable=False)


def retain(dir_path, keep=KEEP):
    """Keep the newest ``keep`` snapshots, delete the others. Returns the offsets deleted."""
    offsets = list_offsets(dir_path)
    doomed = offsets[:max(0, len(offsets) - keep)]
    return _delete(dir_path, doomed, durable=False)


def _delete(dir_path, offsets, durable):
    for o in offsets:
        _unlink(snapshot_path(dir_path, o))
    if offsets and durable:
        fsync_dir(dir_path)
    return offsets


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
