"""Moving a hosted replica to another log dir while it serves (KIP-113; AlterReplicaLogDirs, Kafka's
ReplicaAlterLogDirsThread and Partition.maybeReplaceCurrentWithFutureReplica).

One ``LogDirMove`` greenlet per moving partition, spawned by the ReplicaManager:

1. **Copy.** The future log (``LogManager.make_future_log``: ``<dest>/<topic>-<p>.<uuid>-future``) catches up from
   the partition's current log in steps of at most ``CHUNK_BYTES`` (1 MiB: one pread and one ``os.write``, ~1 ms
   from the page cache), on the event loop with a yield between steps, so producers keep appending to the current
   log meanwhile. Batches are copied byte for byte, offsets kept (gaps of a compacted log stay gaps); the aborted
   transactions of the copied range are indexed in the future's ``.txnindex``; the future is fsync'd in
   ``offload`` every ``FLUSH_EVERY_BYTES`` and before the swap. A truncation of the current log (a follower
   meeting a new leader: ``Log.truncations`` changed) restarts the copy from the current log's first batch; the
   current log's start moving past the copy (retention, DeleteRecords) restarts it there.
2. **Swap**, once the future's log end offset equals the current one, in one greenlet step (nothing yields, so no
   append can come between the last check and the renames; the steps are short: the future's unflushed tail --
   what arrived since the last offload flush -- and two directory entries are fsync'd):
   a. the future's tail fsync'd (all of its data is durable before the old copy may disappear);
   b. the current log's directory renamed ``<topic>-<p>.<uuid>-delete`` (its files stay open), the source log
      dir fsync'd;
   c. the future directory renamed ``<topic>-<p>`` (``Log.rename_dir``), the destination log dir fsync'd;
   d. the LogManager and the Partition switch to the new log (``replace_current_with_future``,
      ``Partition.replace_log``: the same offsets, bytes, producer state, HW and epochs);
   e. file.delete.delay.ms later (Kafka's addLogToBeDeleted: a read handed out before the swap may still be
      sending the old files), the old log closed and its ``-delete`` directory removed in ``offload``.
   A crash before (b) is durable leaves the current log and the future, which is loaded as the future and the move
   resumes; between (b) and (c) leaves a ``-delete`` directory (removed at load) and a complete ``-future`` one,
   which the load renames to the partition's name (``LogManager._load_futures``); after (c) the move is done.
   The leader-epoch checkpoint is not copied: the new directory gets the cache's entries at its next change, and a
   missing file is rebuilt from the batch headers at load (epoch_cache.py explains why that is exact).
The cleaner is not raced: it skips the partition while it moves (``LogCleaner.paused``, Kafka's
abortAndPauseCleaning), and a swap waits for a clean that had already begun (``LogCleaner.in_progress``); its
progress (first dirty offset) carries over to the new log, which holds the same offsets and bytes.
A move ends (``ReplicaManager.alter_log_dir`` to another dir, StopReplica, shutdown) by killing the greenlet; the
future log stays on disk until the ReplicaManager removes it (StopReplica with delete, a move elsewhere) or the
next start resumes it.
"""
import logging
import os
import shutil
import time

import gevent

from kbroker.errors import CorruptMessage, OffsetOutOfRange
from kbroker.log.checkpoint import fsync_dir
from kbroker.log.manager import delete_dir_name
from kbroker.record import replicated_batches, stored_append
from kbroker.replica.epoch_cache import LeaderEpochCache

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
FLUSH_EVERY_BYTES = 16 << 20
IDLE_WAIT_S = 0.05          # caught up but the swap must wait (the cleaner works on it): check again this often


class LogDirMove:
    """Copies one partition's log into its future log, then swaps them (module docstring)."""

    def __init__(self, replica_manager, tp):
        self.rm = replica_manager
        self.tp = tuple(tp)
        self.copied_bytes = 0
        self.done = False
        self._truncations = None
        self._unflushed = 0
        self._stuck = False
        self._greenlet = None

    def start(self):
        self._greenlet = gevent.spawn(self._run)
        return self

    def stop(self):
        if self._greenlet is not None:
            self._greenlet.kill()

    def join(self, timeout=None):
        if self._greenlet is not None:
            self._greenlet.join(timeout)

    # ----------------------------------------------------------------------------------------------- copy
    def _run(self):
        rm, tp = self.rm, self.tp
        lm = rm.log_manager
        lm.cleaner.paused.add(tp)
        try:
            while True:
                part = rm.get_partition(*tp)
                got = lm.future_log(tp)
                if part is None or got is None:
                    return
                future = got[0]
                if self._copy_step(part.log, future):
                    gevent.sleep(0)
                    continue
                if self._unflushed:
                    rm.offload(future.flush)
                    self._unflushed = 0
                    continue              # more may have arrived during the flush
                if lm.cleaner.in_progress == tp:
                    gevent.sleep(IDLE_WAIT_S)
                    continue
                if self._swap(part, future):
                    self.done = True
                    return
                gevent.sleep(IDLE_WAIT_S)     # behind again, or a batch the copy cannot take (logged once)
        except gevent.GreenletExit:
            raise
        except Exception:  # noqa: BLE001 - the move stops; the replica keeps serving from its current log
            log.exception("%s-%d: moving the replica to another log dir failed", tp[0], tp[1])
        finally:
            lm.cleaner.paused.discard(tp)
            rm.move_ended(self)

    def _copy_step(self, current, future):
        """Copy at most CHUNK_BYTES of whole batches; True if anything was copied (or the copy restarted)."""
        if self._truncations != current.truncations:
            # Offsets below the future's end may hold other records now: start over (truncations are rare).
            self._truncations = current.truncations
            if future.log_end_offset > 0 or future.size_in_bytes:
                future.truncate_fully_and_start_at(current.segments[0].base_offset)
                return True
        leo = future.log_end_offset
        if leo > current.log_end_offset:
            future.truncate_to(current.log_end_offset)
            return True
        start = current.log_start_offset
        if leo < start:
            first = current.read(start, 1).first_offset         # the base of the batch holding the start
            if leo < first:
                future.truncate_fully_and_start_at(first)
                return True
        try:
            # From the log start offset when it lies inside the batch the copy starts at (DeleteRecords moves it to
            # any offset): the read then starts at that batch, whose base is ``leo``.
            sl = current.read(max(leo, start), CHUNK_BYTES)
        except OffsetOutOfRange:
            return True                       # retention moved the start meanwhile: the next step restarts there
        if sl.size == 0:
            return False
        data = sl.region.read_bytes()
        try:
            entries = replicated_batches(data)           # the whole batches, CRC-checked
        except CorruptMessage:
            entries = []
        if not entries:
            if not self._stuck:
                self._stuck = True
                log.error("%s-%d: the batch at offset %d of %s fails its CRC check: the move waits", self.tp[0],
                          self.tp[1], leo, current.dir)
            return False
        entries = [e for e in entries if e[3] >= leo]
        if not entries:
            return False
        if entries[0][2] < leo:
            # A batch straddling our end: the current log was rewritten (compaction) around it. Re-copy it whole.
            future.truncate_to(entries[0][2])
            return True
        info = stored_append(memoryview(data), entries)
        future.append(info)
        for txn in current.aborted_transactions(info.first_offset, info.last_offset + 1):
            if info.first_offset <= txn.last_offset <= info.last_offset:
                future.add_aborted_txn(txn)
        self.copied_bytes += len(info.buffer)
        self._unflushed += len(info.buffer)
        if self._unflushed >= FLUSH_EVERY_BYTES:
            self.rm.offload(future.flush)
            self._unflushed = 0
        return True

    # ----------------------------------------------------------------------------------------------- swap
    def _swap(self, part, future):
        """Steps a-e of the module docstring; False (nothing changed) when the copy is behind again."""
        current = part.log
        if future.log_end_offset != current.log_end_offset or self._truncations != current.truncations:
            return False
        rm, tp = self.rm, self.tp
        lm = rm.log_manager
        old_dir = lm.log_dir_of(tp)
        new_dir = lm.future_log(tp)[1]
        # No yield from here to the end of step d.
        started = time.monotonic()
        future.flush()                                                   # a
        future.maybe_increment_log_start_offset(current.log_start_offset)
        entries = part.epoch_cache.entries()
        doomed = os.path.join(old_dir, delete_dir_name(tp[0], tp[1]))  # b
        current.rename_dir(doomed)
        fsync_dir(old_dir)
        future.rename_dir(os.path.join(new_dir, "%s-%d" % tp))          # c
        fsync_dir(new_dir)
        lm.replace_current_with_future(tp)                               # d
        part.replace_log(future, LeaderEpochCache(future.dir, entries))
        log.info("%s-%d: moved from %s to %s (%d bytes copied; the swap held the loop %.1f ms)", tp[0], tp[1], old_dir,
                 new_dir, self.copied_bytes, (time.monotonic() - started) * 1000.0)
        delay = current.config.file_delete_delay_ms or 0                # e
        if delay > 0:
            gevent.spawn_later(delay / 1000.0, self._remove_old, current, doomed)
        else:
            self._remove_old(current, doomed)
        return True

    def _remove_old(self, old, doomed):
        """Close the old log and remove its ``-delete`` directory (step e): file.delete.delay.ms after the swap, as
        Kafka's addLogToBeDeleted, so a consumer's read handed out just before the swap (a FileRegion of the old
        files, sent later) still finds its files open. A shutdown before that leaves the directory to the next
        load, which removes every ``-delete`` directory."""
        try:
            self.rm.offload(_close_and_remove, old, doomed)
        except Exception:  # noqa: BLE001 - a leftover -delete directory goes at the next start
            log.exception("removing %s", doomed)


def _close_and_remove(old, doomed):
    old.close()
    shutil.rmtree(doomed, ignore_errors=True)

