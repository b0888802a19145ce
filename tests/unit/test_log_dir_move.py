"""The log-dir move (kbroker/replica/log_dir_move.py, KIP-113) on real logs in two directories, without a broker: the
copy (offsets, gaps, aborted-transaction index, a truncation of the source mid-copy), the swap, and a crash at
every step of the swap -- the reopened LogManager holds exactly one complete copy, or the current log and a future
one the move resumes from."""
import os

import pytest

from kbroker.log import LogConfig, LogManager
from kbroker.log.manager import FUTURE_DIR_SUFFIX
from kbroker.log.txn_index import AbortedTxn
from kbroker.replica import log_dir_move
from kbroker.replica.log_dir_move import LogDirMove
from kbroker.replica.partition import Partition
from kbroker.record import batch_records, iter_batches

from .test_log_helpers import append_batch

CFG = LogConfig(segment_bytes=2000, segment_index_bytes=4096, index_interval_bytes=100, file_delete_delay_ms=0)
TP = ("t", 0)


class Crash(Exception):
    pass


class StubReplicas:
    """What LogDirMove uses of the ReplicaManager: the partition, the log manager, offload in place."""

    def __init__(self, lm, part):
        self.log_manager, self.part, self.ended = lm, part, []

    def get_partition(self, topic, p):
        return self.part if (topic, p) == TP else None

    @staticmethod
    def offload(fn, *args):
        return fn(*args)

    def move_ended(self, move):
        self.ended.append(move)


def _setup(tmp_path, batches=30):
    dirs = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    lm = LogManager(dirs, CFG)
    log = lm.get_or_create_log(TP)
    assert lm.log_dir_of(TP) == dirs[0]
    for i in range(batches):
        append_batch(log, [b"v%03d-%d" % (i, k) for k in range(3)], ts=1000 + i)
    part = Partition("t", 0, log, CFG, 0)
    rm = StubReplicas(lm, part)
    lm.add_future_log(TP, lm.make_future_log(TP, dirs[1]), dirs[1])
    return dirs, lm, part, rm


def _records(log):
    out = []
    for seg in log.segments:
        with open(seg.log_path, "rb") as f:
            data = f.read()
        for pos, head in iter_batches(data, include_control=True):
            out.extend((r[0], r[3]) for r in batch_records(data, pos, head))
    return out


def _partition_dirs(dirs):
    return sorted((d, n) for d in dirs for n in os.listdir(d) if n.startswith("t-0"))


def test_move_copies_every_batch_and_swaps(tmp_path):
    dirs, lm, part, rm = _setup(tmp_path)
    before = _records(part.log)
    old = part.log
    old.add_aborted_txn(AbortedTxn(7, 3, 5, 6))                  # as if offsets 3..5 were an aborted transaction
    move = LogDirMove(rm, TP)
    move._run()
    assert move.done and rm.ended == [move]
    assert lm.log_dir_of(TP) == dirs[1] and lm.future_log(TP) is None
    assert part.log is lm.get_log(TP) and part.log is not old
    assert part.log.dir == os.path.join(dirs[1], "t-0")
    assert _partition_dirs(dirs) == [(dirs[1], "t-0")]            # the old directory is gone
    assert _records(part.log) == before and len(before) == 90
    assert part.log.log_end_offset == 90
    assert [tuple(e) for e in part.log.aborted_transactions(0, 90)] == [(7, 3, 5, 6)]
    append_batch(part.log, [b"after"])                           # the partition goes on in the new directory
    assert part.log.log_end_offset == 91
    lm.shutdown()
    lm2 = LogManager(dirs, CFG)
    assert lm2.log_dir_of(TP) == dirs[1] and _records(lm2.get_log(TP))[-1] == (90, b"after")
    lm2.shutdown()


def test_the_cleaner_skips_a_moving_partition_and_keeps_its_progress(tmp_path, monkeypatch):
    dirs, lm, part, rm = _setup(tmp_path)
    lm.cleaner.first_dirty[TP] = 30
    seen = []
    real = LogDirMove._copy_step

    def copy_step(self, current, future):
        seen.append(TP in lm.cleaner.paused)
        return real(self, current, future)
    monkeypatch.setattr(LogDirMove, "_copy_step", copy_step)
    LogDirMove(rm, TP)._run()
    assert seen and all(seen) and lm.cleaner.paused == set()
    assert lm.log_dir_of(TP) == dirs[1] and lm.cleaner.first_dirty[TP] == 30
    lm.shutdown()


def test_copy_restarts_after_a_truncation_of_the_source(tmp_path):
    dirs, lm, part, rm = _setup(tmp_path)
    future = lm.future_log(TP)[0]
    move = LogDirMove(rm, TP)
    while future.log_end_offset < 60:
        assert move._copy_step(part.log, future)
    part.log.truncate_to(45)                                    # a new leader: offsets 45.. are rewritten
    for i in range(10):
        append_batch(part.log, [b"new-%d" % i])
    move._run()
    assert move.done
    assert _records(part.log) == _records(lm.get_log(TP))
    assert _records(part.log)[45:] == [(45 + i, b"new-%d" % i) for i in range(10)]
    lm.shutdown()


def test_move_keeps_a_log_start_offset_inside_a_batch(tmp_path):
    dirs, lm, part, rm = _setup(tmp_path)
    assert part.log.maybe_increment_log_start_offset(40)     # DeleteRecords: offset 40 is inside batch 39..41
    move = LogDirMove(rm, TP)
    move._run()
    assert move.done and lm.log_dir_of(TP) == dirs[1]
    assert part.log.log_start_offset == 40
    assert _records(part.log) == [(o, b"v%03d-%d" % (o // 3, o % 3)) for o in range(39, 90)]
    lm.shutdown()


@pytest.mark.parametrize("crash_at", ["rename-current", "rename-future", "fsync-destination"])
def test_a_crash_at_any_step_of_the_swap_leaves_one_complete_log(tmp_path, monkeypatch, crash_at):
    dirs, lm, part, rm = _setup(tmp_path)
    before = _records(part.log)
    real_rename, real_fsync = type(part.log).rename_dir, log_dir_move.fsync_dir
    calls = {"rename": 0, "fsync": 0}

    def rename_dir(log, new_dir):
        calls["rename"] += 1
        if (crash_at, calls["rename"]) in (("rename-current", 1), ("rename-future", 2)):
            raise Crash(crash_at)
        return real_rename(log, new_dir)

    def fsync_dir(d):
        calls["fsync"] += 1
        if crash_at == "fsync-destination" and calls["fsync"] == 2:
            raise Crash(crash_at)
        return real_fsync(d)
    monkeypatch.setattr(type(part.log), "rename_dir", rename_dir)
    monkeypatch.setattr(log_dir_move, "fsync_dir", fsync_dir)
    move = LogDirMove(rm, TP)
    with pytest.raises(Crash):
        future = lm.future_log(TP)[0]
        while move._copy_step(part.log, future):
            pass
        move._swap(part, future)
    monkeypatch.undo()
    lm.close_without_marker()
    lm2 = LogManager(dirs, CFG)                                 # the restart
    names = _partition_dirs(dirs)
    if crash_at == "rename-current":
        # nothing renamed: the current log stays, the future is loaded for the move to resume
        assert lm2.log_dir_of(TP) == dirs[0] and lm2.future_log(TP)[1] == dirs[1]
        assert len(names) == 2 and names[1][1].endswith(FUTURE_DIR_SUFFIX)
        assert _records(lm2.future_log(TP)[0]) == before
    else:
        # the old directory was renamed -delete (removed at load); the complete future became the log
        assert lm2.log_dir_of(TP) == dirs[1] and lm2.future_log(TP) is None
        assert names == [(dirs[1], "t-0")]
    assert _records(lm2.get_log(TP)) == before
    lm2.shutdown()


# ------------------------------------------------------------------------------ through the ReplicaManager
def _rm(dirs):
    from kbroker.replica.manager import ReplicaManager
    lm = LogManager(dirs, CFG)
    return lm, ReplicaManager(0, lm, lambda topic: CFG, isr_writer=None, connect=lambda b: None)


def _lead(rm, topic, p, epoch=1):
    from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
    st = PartitionLeadership(topic, p, LeaderAndIsr(0, epoch, (0,), 1, 0), (0,))
    return rm.apply_leader_and_isr(0, 1, [st], [])


def _wait(pred, timeout=10.0):
    import gevent
    import time
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        gevent.sleep(0.01)


def test_replica_manager_moves_prefers_cancels_and_resumes(tmp_path):
    dirs = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    lm, rm = _rm(dirs)
    assert _lead(rm, "t", 0) == {("t", 0): 0} and lm.log_dir_of(("t", 0)) == dirs[0]
    for i in range(20):
        append_batch(rm.get_partition("t", 0).log, [b"r%d" % i])
    # a replica not hosted yet: REPLICA_NOT_AVAILABLE, and it is created in the asked dir
    assert rm.alter_log_dir("t", 1, dirs[1]) == 9
    assert _lead(rm, "t", 1) == {("t", 1): 0} and lm.log_dir_of(("t", 1)) == dirs[1]
    assert rm.alter_log_dir("t", 0, dirs[0] + "x") == 57
    assert rm.alter_log_dir("t", 0, dirs[0]) == 0 and lm.future_log(("t", 0)) is None      # already there
    assert rm.alter_log_dir("t", 0, dirs[1]) == 0
    assert [u[0] for u in rm.log_dir_usage()] == dirs
    _wait(lambda: lm.log_dir_of(("t", 0)) == dirs[1])
    assert _records(rm.get_partition("t", 0).log) == [(i, b"r%d" % i) for i in range(20)]
    assert [(d, [(tp, fut) for tp, _s, _l, fut in parts]) for d, parts in rm.log_dir_usage()] == [
        (dirs[0], []), (dirs[1], [(("t", 0), False), (("t", 1), False)])]
    # StopReplica(delete) of a partition with a future log removes both directories
    lm.add_future_log(("t", 1), lm.make_future_log(("t", 1), dirs[0]), dirs[0])
    assert rm.stop_replicas(1, [("t", 1, True)]) == {("t", 1): 0}
    assert not [n for d in dirs for n in os.listdir(d) if n.startswith("t-1")]
    # a future log found at start resumes its move once the partition is hosted
    lm.add_future_log(("t", 0), lm.make_future_log(("t", 0), dirs[0]), dirs[0])
    size = lm.get_log(("t", 0)).size_in_bytes
    assert rm.log_dir_usage() == [(dirs[0], [(("t", 0), 0, 20, True)]), (dirs[1], [(("t", 0), size, 0, False)])]
    rm.shutdown()
    lm.shutdown()
    lm, rm = _rm(dirs)
    assert lm.future_log(("t", 0))[1] == dirs[0]
    assert _lead(rm, "t", 0, epoch=2) == {("t", 0): 0}
    _wait(lambda: lm.log_dir_of(("t", 0)) == dirs[0] and lm.future_log(("t", 0)) is None)
    assert _records(rm.get_partition("t", 0).log) == [(i, b"r%d" % i) for i in range(20)]
    assert _partition_dirs(dirs) == [(dirs[0], "t-0")]
    rm.shutdown()
    lm.shutdown()
