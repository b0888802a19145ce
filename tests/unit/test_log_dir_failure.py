"""Failed log dirs (KIP-112, kbroker/log/dir_failure.py) without a broker: the LogManager and ReplicaManager on real
logs in two directories, I/O errors injected through dir_failure.INJECTED; index pages backed before the mapping
writes them; an untrimmed sparse index sized by pread."""
import errno
import os

import pytest

from kbroker import errors
from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from kbroker.log import LogConfig, LogManager, dir_failure
from kbroker.log.index import OffsetIndex
from kbroker.log.manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from kbroker.replica.manager import ReplicaManager

from .test_log_helpers import append_batch

CFG = LogConfig(segment_bytes=4000, segment_index_bytes=4096, index_interval_bytes=100, file_delete_delay_ms=0)


@pytest.fixture
def two_dirs(tmp_path):
    dirs = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    yield dirs
    dir_failure.INJECTED.clear()


def _lead(topic, p, epoch=1, is_new=False):
    return PartitionLeadership(topic, p, LeaderAndIsr(0, epoch, (0,), 1, 0), (0,), is_new=is_new)


def test_failed_write_takes_its_dir_offline_and_nothing_else(two_dirs):
    lm = LogManager(two_dirs, CFG)
    a, b = lm.get_or_create_log(("a", 0)), lm.get_or_create_log(("b", 0))
    assert (lm.log_dir_of(("a", 0)), lm.log_dir_of(("b", 0))) == tuple(two_dirs)
    reported = []
    lm.failures.on_failure = reported.append
    append_batch(a, [b"x"] * 3)
    dir_failure.INJECTED.add(two_dirs[0])
    with pytest.raises(errors.KafkaStorageError):
        append_batch(a, [b"y"])
    with pytest.raises(errors.KafkaStorageError):
        append_batch(a, [b"z"])                    # reported once
    assert reported == [two_dirs[0]] and lm.offline_dirs == [two_dirs[0]] and lm.online_dirs == [two_dirs[1]]
    assert a.log_end_offset == 3                   # the failed appends changed nothing
    append_batch(b, [b"w"] * 2)                    # the other dir keeps working
    assert lm.handle_dir_failure(two_dirs[0]) == [("a", 0)]
    assert lm.get_log(("a", 0)) is None and lm.get_log(("b", 0)) is b
    assert list(lm.place_new_logs([("c", 0)]).values()) == [two_dirs[1]]   # new logs only in online dirs
    dir_failure.INJECTED.clear()
    lm.checkpoint_recovery_points()
    lm.shutdown()
    assert not os.path.exists(os.path.join(two_dirs[0], RECOVERY_POINT_CHECKPOINT))   # nothing written there
    assert not os.path.exists(os.path.join(two_dirs[0], CLEAN_SHUTDOWN_FILE))         # recovered at the next load
    assert os.path.exists(os.path.join(two_dirs[1], CLEAN_SHUTDOWN_FILE))
    again = LogManager(two_dirs, CFG)              # "repaired": both dirs load, the log holds what was written
    assert again.get_log(("a", 0)).log_end_offset == 3 and again.get_log(("b", 0)).log_end_offset == 2
    again.shutdown()


def test_failed_flush_and_checkpoint_report_too(two_dirs):
    lm = LogManager(two_dirs, CFG)
    a = lm.get_or_create_log(("a", 0))
    append_batch(a, [b"x"])
    dir_failure.INJECTED.add(two_dirs[1])
    lm.checkpoint_recovery_points()                # d1's checkpoint fails: d1 offline, d0 written
    assert lm.offline_dirs == [two_dirs[1]]
    dir_failure.INJECTED.add(two_dirs[0])
    with pytest.raises(errors.KafkaStorageError):
        a.flush()
    assert a.recovery_point == 0                   # nothing known durable
    assert set(lm.offline_dirs) == set(two_dirs)
    lm.close_without_marker()


def test_replica_manager_offline_partitions(two_dirs):
    lm = LogManager(two_dirs, CFG)
    rm = ReplicaManager(0, lm, lambda topic: CFG, isr_writer=None, connect=lambda b: None)
    assert rm.apply_leader_and_isr(0, 1, [_lead("a", 0), _lead("b", 0)], []) == {("a", 0): 0, ("b", 0): 0}
    changes = []
    rm.leadership_listeners.append(lambda tp, was, now: changes.append((tp, was, now)))
    assert rm.handle_log_dir_failure(two_dirs[0]) == [("a", 0)]
    assert changes == [(("a", 0), True, False)]
    with pytest.raises(errors.KafkaStorageError):
        rm.leader_partition("a", 0)
    assert rm.leader_partition("b", 0).is_leader
    # the controller's question: 56 for the offline replica (any epoch), the other as usual
    assert rm.apply_leader_and_isr(0, 1, [_lead("a", 0, 2), _lead("b", 0, 1)], []) == {
        ("a", 0): errors.KAFKA_STORAGE_ERROR, ("b", 0): errors.STALE_CONTROLLER_EPOCH}
    # a replica not found while a dir is offline is not created elsewhere unless the partition is new
    assert rm.apply_leader_and_isr(0, 1, [_lead("c", 0), _lead("d", 0, is_new=True)], []) == {
        ("c", 0): errors.KAFKA_STORAGE_ERROR, ("d", 0): 0}
    assert lm.log_dir_of(("d", 0)) == two_dirs[1]
    usage = dict(rm.log_dir_usage())
    assert usage[two_dirs[0]] is None and [e[0] for e in usage[two_dirs[1]]] == [("b", 0), ("d", 0)]
    assert rm.stop_replicas(1, [("a", 0, True)]) == {("a", 0): errors.KAFKA_STORAGE_ERROR}
    rm.checkpoint_high_watermarks()                # only the online dir gets its file
    assert not os.path.exists(os.path.join(two_dirs[0], "replication-offset-checkpoint"))
    rm.shutdown()
    lm.shutdown()


def test_index_pages_backed_before_the_mapping_writes(tmp_path, monkeypatch):
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 1 << 20)
    calls = []
    real = os.posix_fallocate
    monkeypatch.setattr(os, "posix_fallocate", lambda fd, off, n: (calls.append((off, n)), real(fd, off, n))[1])
    for k in range(1, 600):                        # 599 entries of 8 bytes: pages 0 and 1
        idx.append(k, k * 100)
    assert calls == [(0, 4096), (4096, 4096)]
    assert os.stat(path).st_blocks * 512 >= 8192
    monkeypatch.setattr(os, "posix_fallocate",
                        lambda fd, off, n: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    idx2 = OffsetIndex(str(tmp_path / "00000000000000001000.index"), 1000, 1 << 20)
    with pytest.raises(OSError):
        idx2.append(1001, 100)                     # ENOSPC here, not a SIGBUS in the store
    idx.close()


def test_untrimmed_index_sized_by_pread(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 1 << 20)
    for k in range(1, 101):
        idx.append(k, k * 10)
    idx._unmap()                                   # a crash: the preallocated 1 MiB file stays untrimmed
    assert os.path.getsize(path) == 1 << 20
    again = OffsetIndex(path, 0, 1 << 20)
    assert again.entries == 100 and again.lookup(57) == (57, 570)
    again.close()
