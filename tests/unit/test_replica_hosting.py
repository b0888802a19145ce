"""Hosting and removing many partitions in one controller request without holding the event loop (issue 8).

A LeaderAndIsr for a new topic names up to max.topic.partitions (10,000) partitions; a StopReplica(delete) for its
deletion as many. ``ReplicaManager`` does their file work in ``offload`` (a real gevent thread pool here, as the
broker wires it) and the per-partition state changes in time slices, so a greenlet ticking every 5 ms keeps ticking.
The costs that made it hang are pinned too: fsyncs (one per log dir, not four per partition), descriptors (one per
empty partition, not five; directory descriptors closed at once under gevent's patched ``os.close``).
"""
import gc
import os
import time
import types

import gevent
import gevent.event
import pytest
from gevent.threadpool import ThreadPool

from kbroker import errors
from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from kbroker.log import checkpoint
from kbroker.log.config import LogConfig
from kbroker.log.index import OffsetIndex
from kbroker.log.log import Log
from kbroker.log.manager import LogManager
from kbroker.record import Record, RecordConfig, build_batch, validate_for_append
from kbroker.replica.epoch_cache import FILE_NAME, LeaderEpochCache
from kbroker.replica.manager import ReplicaManager
from kbroker.timeslice import TimeSlice

N = 3000            # enough for seconds of file work on a slow disk; the loop bound does not depend on it
LOOP_GAP_S = 0.1    # issue 8's bound for one request's hold on the event loop


def open_fds(under=None):
    """This process's open descriptors; with ``under``, only those naming a file below that directory (in a full
    run, clients earlier integration tests left alive open and close sockets in their own threads meanwhile: seen
    as 33 extra descriptors in CI)."""
    if under is None:
        return len(os.listdir("/proc/self/fd"))
    prefix = str(under).rstrip("/") + "/"
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd).startswith(prefix):
                n += 1
        except OSError:
            pass                                  # closed between the listing and the readlink
    return n


class LoopWatch:
    """A greenlet that sleeps 5 ms at a time and records the longest it waited beyond that (the loop's worst gap).

    The objects earlier tests left alive are frozen meanwhile (``gc.freeze``): in a full unit run a collection of
    the oldest generation walks them all and pauses every thread ~100 ms, which is the test process's, not the code
    under test's.

    ``worst`` is wall time: it also sees a blocking call on the loop (an fsync), and also the OS descheduling the
    test process (a parallel CI run on 2 cores measured 0.106 s for work that takes 0.03-0.05 s alone).
    ``worst_cpu`` is the loop thread's CPU time over the same gap: the work the loop did before the tick could run,
    blind to blocking calls but not to preemption -- for tests of CPU-bound work held in one piece."""

    def __init__(self):
        self.worst = 0.0
        self.worst_cpu = 0.0     # the same gap in the loop thread's CPU time (see ``worst_cpu`` below)
        self.ticks = 0
        self._g = None

    def __enter__(self):
        gc.collect()
        gc.freeze()

        def run():
            while True:
                t0, c0 = time.monotonic(), time.thread_time()
                gevent.sleep(0.005)
                self.worst = max(self.worst, time.monotonic() - t0 - 0.005)
                self.worst_cpu = max(self.worst_cpu, time.thread_time() - c0)
                self.ticks += 1
        self._g = gevent.spawn(run)
        gevent.sleep(0.01)
        return self

    def __exit__(self, *exc):
        gevent.sleep(0.02)                           # the tick pending since the work began records its gap
        self._g.kill()
        gc.unfreeze()


@pytest.fixture
def pool():
    p = ThreadPool(1)
    yield p
    p.kill()


def make_rm(tmp_path, pool, dirs=1, broker_id=0):
    lm = LogManager([str(tmp_path / ("d%d" % i)) for i in range(dirs)], LogConfig(), broker_id=broker_id)
    rm = ReplicaManager(broker_id, lm, lambda topic: LogConfig(), isr_writer=None, connect=lambda b: None,
                        offload=lambda fn, *args: pool.apply(fn, args))
    return lm, rm


def busy_listener(tp, was_leader, is_leader):
    """A leadership listener costing 0.1 ms (the group coordinator's is one): N of them, 0.3 s, in one stretch
    without the time slices."""
    end = time.perf_counter() + 0.0001
    while time.perf_counter() < end:
        pass


def states(topic, n, leader=0, epoch=5, replicas=(0,)):
    return [PartitionLeadership(topic, p, LeaderAndIsr(leader, epoch, tuple(replicas), 1, 0), tuple(replicas))
            for p in range(n)]


def test_leader_and_isr_of_thousands_of_new_partitions_keeps_the_loop_free(tmp_path, pool, monkeypatch):
    lm, rm = make_rm(tmp_path, pool)
    rm.leadership_listeners.append(busy_listener)
    pool.apply(len, ((),))                           # the worker thread exists before descriptors are counted
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    fds_before = open_fds(tmp_path)
    with LoopWatch() as watch:
        result = rm.apply_leader_and_isr(0, 1, states("big", N), [])
    assert result == {("big", p): 0 for p in range(N)}
    assert watch.worst < LOOP_GAP_S, "the loop waited %.3f s" % watch.worst
    assert watch.ticks > 10                          # the loop really ran meanwhile
    # One fsync for the whole request: the log dir, making the N new directory entries durable. (Before: the log dir
    # per partition, plus an empty and a first epoch checkpoint per partition, each file + directory: 5 per partition.)
    assert len(fsyncs) == 1
    # One descriptor per empty partition (its .log; the empty indexes are not mapped) -- 5 before.
    assert open_fds(tmp_path) - fds_before == N
    for p in (0, N - 1):
        part = rm.get_partition("big", p)
        assert part.is_leader and part.leader_epoch == 5 and part.epoch_cache.entries() == [(5, 0)]
        d = tmp_path / "d0" / ("big-%d" % p)
        assert (d / FILE_NAME).read_bytes() == b"0\n1\n5 0\n"
        assert sorted(os.listdir(d)) == ["00000000000000000000.index", "00000000000000000000.log",
                                         "00000000000000000000.timeindex", FILE_NAME]
    assert len(lm.all_logs()) == N
    # A second LeaderAndIsr with the same epoch changes nothing (11 per partition), a newer one is applied.
    assert set(rm.apply_leader_and_isr(0, 1, states("big", 2), []).values()) == {errors.STALE_CONTROLLER_EPOCH}
    assert rm.apply_leader_and_isr(0, 1, states("big", 1, epoch=6), []) == {("big", 0): 0}
    assert (tmp_path / "d0" / "big-0" / FILE_NAME).read_bytes() == b"0\n1\n6 0\n"   # the same start: replaced
    lm.shutdown()


def test_stop_replica_deleting_thousands_of_partitions_keeps_the_loop_free(tmp_path, pool, monkeypatch):
    lm, rm = make_rm(tmp_path, pool)
    assert set(rm.apply_leader_and_isr(0, 1, states("big", N), []).values()) == {0}
    for _ in range(2):                               # the second batch writes the first index entries (maps both)
        rm.get_partition("big", 7).append(build_batch([Record(0, 1000, None, b"v" * 5000, ())]), None, 1)
    rm.leadership_listeners.append(busy_listener)
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    fds_before = open_fds(tmp_path)
    with LoopWatch() as watch:
        result = rm.stop_replicas(1, [("big", p, True) for p in range(N)] + [("unknown", 0, True)])
    assert result == {**{("big", p): 0 for p in range(N)}, ("unknown", 0): 0}
    assert watch.worst < LOOP_GAP_S, "the loop waited %.3f s" % watch.worst
    assert len(fsyncs) == 1                          # the renames to -delete, one log dir
    assert fds_before - open_fds(tmp_path) == N              # one .log each; a mapped index holds none (index.py)
    assert [name for name in os.listdir(tmp_path / "d0") if name.startswith("big")] == []
    assert lm.all_logs() == {} and rm.partitions() == {}
    lm.shutdown()


def test_new_partitions_spread_over_log_dirs_and_a_failed_one_answers_storage_error(tmp_path, pool):
    lm, rm = make_rm(tmp_path, pool, dirs=2)
    # A plain file where big-3's directory would go (the fewest-partitions rule puts p 3 in the second dir).
    (tmp_path / "d1" / "big-3").write_bytes(b"not a directory")
    result = rm.apply_leader_and_isr(0, 1, states("big", 6), [])
    assert result == {("big", 0): 0, ("big", 1): 0, ("big", 2): 0, ("big", 3): errors.KAFKA_STORAGE_ERROR,
                      ("big", 4): 0, ("big", 5): 0}
    assert {tp: lm.log_dir_of(tp) for tp in lm.all_logs()} == {
        ("big", 0): str(tmp_path / "d0"), ("big", 1): str(tmp_path / "d1"), ("big", 2): str(tmp_path / "d0"),
        ("big", 4): str(tmp_path / "d0"), ("big", 5): str(tmp_path / "d1")}
    assert rm.get_partition("big", 3) is None
    # The next placements count what each dir holds: 3 and 2 -> the second dir.
    assert lm.place_new_logs([("x", 0), ("x", 1)]) == {("x", 0): str(tmp_path / "d1"), ("x", 1): str(tmp_path / "d0")}
    lm.shutdown()


def test_a_log_dir_left_by_a_failed_attempt_is_loaded_not_fresh(tmp_path):
    lm = LogManager([str(tmp_path)], LogConfig())
    d = tmp_path / "t-0"
    lg = Log(str(d), LogConfig())
    lg.append(_info(build_batch([Record(0, 1000, None, b"kept", ())]), 3))
    lg.close()
    new = lm.create_logs(lm.place_new_logs([("t", 0), ("t", 1)]), {"t": LogConfig()})
    assert new.fresh == {("t", 1)} and not new.failed
    assert new.logs[("t", 0)].log_end_offset == 1
    lm.add_logs(new)
    assert lm.get_or_create_log(("t", 0)) is new.logs[("t", 0)]
    with pytest.raises(RuntimeError):
        lm.add_logs(new)                             # registering the same logs twice is a bug
    lm.shutdown()


def _info(buf, epoch):
    """What Log.append takes: ``buf`` validated as the leader of ``epoch`` would (offsets from 0)."""
    return validate_for_append(buf, 0, 1000, RecordConfig(leader_epoch=epoch))


# ------------------------------------------------------------------------------------ leader-epoch checkpoint

def test_a_fresh_cache_writes_its_first_checkpoint_without_fsync_and_later_ones_with(tmp_path, monkeypatch):
    d = tmp_path / "t-0"
    lg = Log(str(d), LogConfig())
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    cache = LeaderEpochCache.load(lg, fresh=True)
    assert not (d / FILE_NAME).exists()              # nothing to read, nothing written yet
    cache.assign(4, 0)
    assert (d / FILE_NAME).read_bytes() == b"0\n1\n4 0\n" and fsyncs == []
    cache.assign(6, 0)
    assert (d / FILE_NAME).read_bytes() == b"0\n1\n6 0\n" and len(fsyncs) == 2   # the file, then its directory
    lg.close()


def test_a_fresh_cache_whose_file_exists_after_all_replaces_it_durably(tmp_path, monkeypatch):
    d = tmp_path / "t-0"
    lg = Log(str(d), LogConfig())
    (d / FILE_NAME).write_bytes(b"0\n1\n2 0\n")
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    LeaderEpochCache.load(lg, fresh=True).assign(4, 0)
    assert (d / FILE_NAME).read_bytes() == b"0\n1\n4 0\n" and len(fsyncs) == 2
    lg.close()


@pytest.mark.parametrize("torn", [b"", b"\x00" * 9, b"0\n1\n5 0", b"0\n2\n5 0\n"])
def test_what_a_crash_leaves_of_an_unsynced_checkpoint_is_rebuilt_from_the_log(tmp_path, torn):
    """No file, an empty, zero-filled or cut one: all unreadable, so the cache comes from the batch headers (the
    epoch a batch was written in is in its header) -- never a shorter list read as if it were whole."""
    d = tmp_path / "t-0"
    lg = Log(str(d), LogConfig())
    lg.append(_info(build_batch([Record(0, 1000, None, b"a", ())]), 5))
    (d / FILE_NAME).write_bytes(torn)
    assert LeaderEpochCache.load(lg).entries() == [(5, 0)]
    assert (d / FILE_NAME).read_bytes() == b"0\n1\n5 0\n"    # rewritten (durably) from the rebuild
    lg.close()


def test_an_empty_rebuild_writes_no_file(tmp_path):
    d = tmp_path / "t-0"
    lg = Log(str(d), LogConfig())
    assert LeaderEpochCache.load(lg).entries() == []
    assert not (d / FILE_NAME).exists()
    lg.close()


# ------------------------------------------------------------------------------------ descriptors, time slices

def test_an_index_holds_no_descriptor_even_while_mapped(tmp_path):
    before = open_fds()
    idx = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 8000)
    assert open_fds() == before and os.path.getsize(idx.path) == 0
    idx.append(3, 4100)
    assert open_fds() == before and os.path.getsize(idx.path) == 8000      # mapped through libc: no descriptor kept
    idx.close()
    assert open_fds() == before and os.path.getsize(idx.path) == 8


def test_fsync_dir_closes_its_descriptor_at_once_under_gevent(tmp_path):
    """gevent's patched os.close defers closing a non-regular file to the loop's next iteration; a greenlet that
    fsyncs many directories without yielding must not pile up their descriptors."""
    from gevent import os as gevent_os
    monkey_close = gevent_os.close
    before = open_fds()
    real = os.close
    os.close = monkey_close                          # what monkey.patch_all() installs in the broker
    try:
        for _ in range(200):
            checkpoint.fsync_dir(str(tmp_path))
        assert open_fds() == before
    finally:
        os.close = real


def test_time_slice_yields_to_the_loop_so_sockets_are_served():
    """gevent.sleep(0) never polls sockets; the slice's yield does: a timer set by another greenlet fires while a
    busy greenlet ticks."""
    fired = []
    gevent.spawn_later(0.01, fired.append, True)
    slice_ = TimeSlice(budget=0.005)
    deadline = time.monotonic() + 0.2
    while not fired and time.monotonic() < deadline:
        sum(range(100))
        slice_.tick()
    assert fired and slice_.yields >= 1


def test_the_high_watermark_checkpoint_is_written_off_the_loop(tmp_path, pool):
    """Gathered on the loop, formatted and fsync'd in offload: read back by the next ReplicaManager."""
    import threading
    lm = LogManager([str(tmp_path / "d0")], LogConfig())
    threads = []

    def offload(fn, *args):
        def run():
            threads.append(threading.get_ident())
            return fn(*args)
        return pool.apply(run)
    rm = ReplicaManager(0, lm, lambda topic: LogConfig(), isr_writer=None, connect=lambda b: None, offload=offload)
    assert set(rm.apply_leader_and_isr(0, 1, states("hw", 3), []).values()) == {0}
    for _ in range(4):
        rm.get_partition("hw", 1).append(build_batch([Record(0, 1000, None, b"v", ())]), None, 1)
    threads.clear()
    rm.checkpoint_high_watermarks()
    assert threads and threading.get_ident() not in threads
    assert (tmp_path / "d0" / "replication-offset-checkpoint").read_text() == "0\n3\nhw 0 0\nhw 1 4\nhw 2 0\n"
    again = ReplicaManager(0, lm, lambda topic: LogConfig(), isr_writer=None, connect=lambda b: None)
    assert again._hw_checkpoint == {("hw", 0): 0, ("hw", 1): 4, ("hw", 2): 0}
    lm.shutdown()


# ---------------------------------------------------------------------- new leader epochs of hosted partitions

def test_leader_and_isr_making_thousands_of_hosted_partitions_leaders_keeps_the_loop_free(tmp_path, pool,
                                                                                           monkeypatch):
    """A failover: this broker led n partitions at epoch 5, follows them at epoch 6 and leads them again at epoch 7.
    Each new epoch's checkpoint was written by make_leader with two fsyncs, on the loop (750 partitions: 47 s on a
    busy disk); now all are written in offload and made durable by one syncfs while their appends are held (the
    request is answered meanwhile). 1,000 of them: the old way held the loop for seconds at that count too, and the
    3,000 of N made this the serial phase's slowest unit test (10-12 s, mostly creating the logs)."""
    n = 1000
    from kbroker.replica import epoch_cache
    lm, rm = make_rm(tmp_path, pool)
    assert set(rm.apply_leader_and_isr(0, 1, states("f", n, replicas=(1, 0)), []).values()) == {0}
    assert set(rm.apply_leader_and_isr(0, 1, states("f", n, leader=1, epoch=6, replicas=(1, 0)), []).values()) == {0}
    for p in (0, 9):                                 # two of them hold records: their new epoch starts at the end
        rm.get_partition("f", p).append_as_follower(build_batch([Record(i, 1000, None, b"v", ()) for i in range(3)]))
    syncs, fsyncs = [], []
    real_fsync = os.fsync
    monkeypatch.setattr(epoch_cache, "sync_filesystem", lambda path: syncs.append(path))
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    with LoopWatch() as watch:
        result = rm.apply_leader_and_isr(0, 1, states("f", n, leader=0, epoch=7, replicas=(1, 0)), [])
        assert rm.await_epochs_durable(60)
    assert result == {("f", p): 0 for p in range(n)}
    assert watch.worst < LOOP_GAP_S, "the loop waited %.3f s" % watch.worst
    assert fsyncs == [] and len(syncs) == 1          # one syncfs for the whole request, no fsync per file
    for p in (0, 9, 1, n - 1):
        part = rm.get_partition("f", p)
        want = [(5, 0), (7, 3)] if p in (0, 9) else [(7, 0)]
        assert part.is_leader and part.leader_epoch == 7 and part.epoch_cache.entries() == want
        assert not part.epoch_cache.dirty
        assert (tmp_path / "d0" / ("f-%d" % p) / FILE_NAME).read_bytes() == epoch_cache.format_entries(want).encode()
    lm.shutdown()


def test_when_the_batched_epoch_write_fails_each_partition_writes_its_own(tmp_path, pool, monkeypatch):
    from kbroker.replica import epoch_cache
    lm, rm = make_rm(tmp_path, pool)
    assert set(rm.apply_leader_and_isr(0, 1, states("f", 20, replicas=(1, 0)), []).values()) == {0}
    assert set(rm.apply_leader_and_isr(0, 1, states("f", 20, leader=1, epoch=6, replicas=(1, 0)), []).values()) == {0}

    def broken(path):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(epoch_cache, "sync_filesystem", broken)
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    result = rm.apply_leader_and_isr(0, 1, states("f", 20, leader=0, epoch=7, replicas=(1, 0)), [])
    assert result == {("f", p): 0 for p in range(20)}
    assert rm.await_epochs_durable(30)
    assert len(fsyncs) == 2 * 20                     # each one durable on its own: the file and its directory
    for p in range(20):
        assert (tmp_path / "d0" / ("f-%d" % p) / FILE_NAME).read_bytes() == b"0\n1\n7 0\n"
    lm.shutdown()


def test_a_cache_changed_while_its_batch_was_written_is_flushed_again(tmp_path, monkeypatch):
    from kbroker.replica import epoch_cache
    monkeypatch.setattr(epoch_cache, "sync_filesystem", lambda path: None)
    caches = []
    for p in range(epoch_cache.FSYNC_EACH_MAX + 1):
        lg = Log(str(tmp_path / ("t-%d" % p)), LogConfig())
        caches.append((lg, LeaderEpochCache.load(lg)))        # an existing partition's cache, no file yet
    snaps = []
    for lg, cache in caches:
        assert cache.assign(3, 0, flush=False) and cache.dirty
        assert not os.path.exists(cache.path)        # in memory only
        snaps.append(epoch_cache.snapshot(cache))
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    epoch_cache.write_together(snaps)
    assert fsyncs == []                              # more than FSYNC_EACH_MAX files: one syncfs, no fsync
    caches[0][1].assign(4, 2)                        # the loop changed one meanwhile (and flushed it)
    epoch_cache.settle(snaps, True)
    assert open(caches[0][1].path, "rb").read() == b"0\n2\n3 0\n4 2\n"   # not overwritten by the old snapshot
    for _, cache in caches[1:]:
        assert not cache.dirty and open(cache.path, "rb").read() == b"0\n1\n3 0\n"
    fsyncs.clear()
    few = []
    for lg, cache in caches[1:3]:
        cache.assign(5, 4, flush=False)
        few.append(epoch_cache.snapshot(cache))
    epoch_cache.write_together(few)
    assert len(fsyncs) == 2 * 2                      # a few files: each its own fsyncs
    for lg, _ in caches:
        lg.close()


def test_an_epoch_starting_at_the_log_end_is_cut_at_load_in_memory(tmp_path, monkeypatch):
    """Every empty partition's checkpoint names an epoch that wrote nothing (it starts at the log end); the load
    drops it (as Kafka's truncateFromEnd) in memory only -- every load cuts it the same way, the next change writes
    the file. Two fsyncs and a rename per such partition at every restart before (6,000 fsyncs for 3,000 empty
    partitions)."""
    d = tmp_path / "t-0"
    lg = Log(str(d), LogConfig())
    lg.append(_info(build_batch([Record(i, 1000, None, b"a", ()) for i in range(2)]), 5))
    (d / FILE_NAME).write_bytes(b"0\n2\n5 0\n7 2\n")
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    cache = LeaderEpochCache.load(lg)
    assert cache.entries() == [(5, 0)] and cache.dirty and fsyncs == []
    assert (d / FILE_NAME).read_bytes() == b"0\n2\n5 0\n7 2\n"    # untouched
    assert LeaderEpochCache.load(lg).entries() == [(5, 0)]          # cut the same way by every load
    cache.assign(8, 2)                                               # the next change writes the whole list
    assert (d / FILE_NAME).read_bytes() == b"0\n2\n5 0\n8 2\n" and not cache.dirty and len(fsyncs) == 2
    lg.close()


def test_write_together_overwrites_in_place_without_fsync_and_syncs_once(tmp_path, monkeypatch):
    """epoch_cache.write_together's non-durable writes: no temporary file, no rename, no fsync (a replacing rename
    costs ~160 us a file on ext4, this ~13 us), each file ending exactly where its data does (shorter, longer or
    new), then one syncfs for the file system; a fresh cache's file is created exclusively."""
    from kbroker.replica import epoch_cache as ec
    fsyncs, syncs = [], []
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd))
    monkeypatch.setattr(ec, "sync_filesystem", lambda path: syncs.append(path))
    n = ec.FSYNC_EACH_MAX + 2                       # more than get their own fsyncs
    caches = []
    for i in range(n):
        d = tmp_path / ("t-%d" % i)
        d.mkdir()
        (d / FILE_NAME).write_bytes(b"0\n3\n1 0\n2 5\n3 900\n" if i % 2 else b"0\n1\n8 0\n")
        caches.append(types.SimpleNamespace(path=str(d / FILE_NAME), persist=True, _fresh=False))
    fresh_dir = tmp_path / "t-new"
    fresh_dir.mkdir()
    caches.append(types.SimpleNamespace(path=str(fresh_dir / FILE_NAME), persist=True, _fresh=True))
    datas = [b"0\n2\n5 0\n7 12\n" for _ in range(n)] + [b"0\n1\n3 0\n"]
    ec.write_together([(c, d, 0) for c, d in zip(caches, datas)])
    assert [open(c.path, "rb").read() for c in caches] == datas
    assert all(sorted(os.listdir(os.path.dirname(c.path))) == [FILE_NAME] for c in caches)
    assert fsyncs == [] and len(syncs) == 1


def test_write_together_fails_when_a_file_cannot_be_written(tmp_path, monkeypatch):
    """A write that fails raises OSError naming the file: nothing may be taken as durable (the caller settles each
    partition on its own, and one whose checkpoint cannot be written does not lead)."""
    from kbroker.replica import epoch_cache as ec
    monkeypatch.setattr(ec, "sync_filesystem", lambda path: None)
    caches = [types.SimpleNamespace(path=str(tmp_path / ("t-%d" % i) / FILE_NAME), persist=True, _fresh=False)
              for i in range(ec.FSYNC_EACH_MAX + 1)]
    for c in caches[1:]:
        os.mkdir(os.path.dirname(c.path))
    with pytest.raises(FileNotFoundError) as e:                # t-0 has no directory
        ec.write_together([(c, b"0\n0\n", 0) for c in caches])
    assert e.value.filename == caches[0].path


def test_a_partition_that_already_leads_holds_its_appends_while_its_new_epoch_is_written(tmp_path, pool):
    """A leader -> leader LeaderAndIsr (a new epoch, e.g. after the controller shrank the ISR) whose batch also
    makes followers leaders: the epochs of both kinds are written together (one offload), and a produce request
    arriving meanwhile to a partition that led throughout waits (Kafka's leaderIsrUpdateLock): its records are
    appended after make_leader, stamped with the new epoch, which starts at the log end it was recorded at."""
    lm, rm = make_rm(tmp_path, pool)
    assert set(rm.apply_leader_and_isr(0, 1, states("l", 20, replicas=(0, 1)), []).values()) == {0}
    rm.get_partition("l", 13).append(build_batch([Record(i, 1000, None, b"v", ()) for i in range(2)]), None, 1)
    real = rm.offload
    producers = []
    written = []

    def offload_with_a_produce(fn, *args):
        if fn.__name__ == "_write_together":   # while the batched epoch checkpoints are written
            written.append(len(args[0]))
            producers.append(gevent.spawn(rm.get_partition("l", 13).append,
                                          build_batch([Record(i, 1000, None, b"v", ()) for i in range(4)]), None, 1))
            gevent.sleep(0.05)
            assert not producers[-1].ready()   # held
        return real(fn, *args)
    rm.offload = offload_with_a_produce
    # partitions 0-9 move to broker 1 (followers), then back: 10-19 stay leaders with a new epoch
    assert set(rm.apply_leader_and_isr(0, 1, states("l", 10, leader=1, epoch=6, replicas=(0, 1)), []).values()) == {0}
    held_at_listener = []     # a listener runs with the partition's appends still held (none waits for one)
    rm.leadership_listeners.append(lambda tp, was, now: held_at_listener.append(rm.get_partition(*tp)._append_gate))
    assert set(rm.apply_leader_and_isr(0, 1, states("l", 20, epoch=7, replicas=(0, 1)), []).values()) == {0}
    assert len(held_at_listener) == 20 and None not in held_at_listener
    assert rm.await_epochs_durable(30)
    assert written == [20]                  # 10 followers -> leaders and 10 bumps, one batched write
    producers[0].join(5)
    assert producers[0].successful() and producers[0].value.base_offset == 2
    part = rm.get_partition("l", 13)
    assert part.epoch_cache.entries() == [(5, 0), (7, 2)]        # led throughout: starts at its end
    assert [h.partition_leader_epoch for h in part.log.batch_headers()] == [5, 7]
    assert part._append_gate is None
    assert rm.get_partition("l", 3).epoch_cache.entries() == [(7, 0)]          # follower -> leader: batched
    from kbroker.replica.epoch_cache import parse_entries
    with open(part.epoch_cache.path) as f:
        assert parse_entries(f.read()) == [(5, 0), (7, 2)]
    lm.shutdown()


def test_leader_and_isr_is_answered_while_the_new_epochs_are_made_durable(tmp_path, pool):
    """Many new leaderships: the request is answered while their checkpoints are still being written (a survivor
    of a 27,000-partition failover waited one syncfs per request before reading the next), their appends held
    until the write is done; a request about other partitions is applied meanwhile; a later request about one of
    them waits for it (and, holding the state lock, so do the requests behind it, as Kafka's replicaStateChangeLock
    orders them)."""
    lm, rm = make_rm(tmp_path, pool)
    assert set(rm.apply_leader_and_isr(0, 1, states("f", 10, leader=1, replicas=(1, 0)), []).values()) == {0}
    assert set(rm.apply_leader_and_isr(0, 1, states("o", 3, leader=1, replicas=(1, 0)), []).values()) == {0}
    real = rm.offload
    writing, release = gevent.event.Event(), gevent.event.Event()

    def slow_write(fn, *args):
        if fn.__name__ == "_write_together":
            writing.set()
            release.wait()
        return real(fn, *args)
    rm.offload = slow_write
    gevent.spawn_later(10, release.set)     # a broker that answers only after the write fails below, not hangs
    result = rm.apply_leader_and_isr(0, 1, states("f", 10, epoch=6, replicas=(1, 0)), [])
    assert result == {("f", p): 0 for p in range(10)}
    assert writing.wait(5) and not release.is_set()       # answered, the write not done
    part = rm.get_partition("f", 4)
    assert part.is_leader and part.leader_epoch == 6
    produce = gevent.spawn(part.append, build_batch([Record(i, 1000, None, b"v", ()) for i in range(2)]), None, 1)
    other = gevent.spawn(rm.apply_leader_and_isr, 0, 1, states("o", 3, epoch=6, replicas=(1, 0))[:1], [])
    other.join(5)
    assert other.value == {("o", 0): 0}                   # other partitions: not held up
    again = gevent.spawn(rm.apply_leader_and_isr, 0, 1, states("f", 10, epoch=7, replicas=(1, 0))[4:5], [])
    gevent.sleep(0.05)
    assert not produce.ready() and not again.ready()      # held until the checkpoint is durable
    assert part.epoch_cache.dirty
    release.set()
    produce.join(5)
    again.join(5)
    assert produce.successful() and produce.value.base_offset == 0
    assert again.value == {("f", 4): 0} and part.leader_epoch == 7
    assert [h.partition_leader_epoch for h in part.log.batch_headers()] == [6]
    assert rm.await_epochs_durable(30) and not rm._epochs_pending
    from kbroker.replica.epoch_cache import parse_entries
    with open(rm.get_partition("f", 5).epoch_cache.path) as f:
        assert parse_entries(f.read()) == [(6, 0)]
    with open(part.epoch_cache.path) as f:
        assert parse_entries(f.read()) == [(6, 0), (7, 2)]
    lm.shutdown()


def test_a_bumped_leader_whose_epoch_cannot_be_written_stops_leading_and_releases_its_appends(tmp_path, pool):
    """The batched write fails and so does the partition's own retry, after the LeaderAndIsr was answered: the
    partition leads no more (nothing may be appended in the old epoch after a file that may name the new one), its
    log dir is reported failed (so the controller hears of it, Kafka's LogDirFailureChannel), and a produce request
    held meanwhile is answered NOT_LEADER_OR_FOLLOWER instead of waiting."""
    lm, rm = make_rm(tmp_path, pool)
    assert set(rm.apply_leader_and_isr(0, 1, states("f", 3, replicas=(0, 1)), []).values()) == {0}
    producers = []
    real = rm.offload

    def failing(fn, *args):
        if fn.__name__ == "_write_together":
            producers.append(gevent.spawn(rm.get_partition("f", 1).append,
                                          build_batch([Record(0, 1000, None, b"v", ())]), None, 1))
            gevent.sleep(0.05)
            raise OSError(5, "Input/output error")
        return real(fn, *args)
    rm.offload = failing
    caches = [rm.get_partition("f", p).epoch_cache for p in range(3)]
    broken = caches[1]
    broken.flush = lambda: (_ for _ in ()).throw(OSError(5, "Input/output error"))
    result = rm.apply_leader_and_isr(0, 1, states("f", 3, epoch=6, replicas=(0,)), [])
    assert result == {("f", p): 0 for p in range(3)}          # answered before the write ended
    assert not lm.failures.offline
    assert rm.await_epochs_durable(30)
    assert not rm.get_partition("f", 1).is_leader
    assert lm.failures.offline == {str(tmp_path / "d0")}
    producers[0].join(5)
    assert isinstance(producers[0].exception, errors.NotLeaderOrFollower)
    assert rm.get_partition("f", 0).leader_epoch == 6 and rm.get_partition("f", 0).is_leader
    lm.shutdown()


def test_new_leaderships_are_applied_before_epoch_bumps_of_partitions_already_led(tmp_path, pool):
    """One LeaderAndIsr after a broker failure: partitions this broker already leads get a new epoch (their ISR
    shrank), others it followed become leaders. The new leaderships are applied first -- the bumps' appends wait
    for theirs -- and the answer keeps the request's order."""
    lm, rm = make_rm(tmp_path, pool)
    led = states("a", 4, replicas=(0, 1))                       # led here at epoch 5
    followed = states("b", 4, leader=1, replicas=(1, 0))         # followed here at epoch 5
    assert set(rm.apply_leader_and_isr(0, 1, led + followed, []).values()) == {0}
    order = []
    rm.leadership_listeners.append(lambda tp, was, now: order.append(tp))
    # Interleaved in the request: a-0, b-0, a-1, b-1, ...
    mixed = [st for pair in zip(states("a", 4, epoch=6, replicas=(0,)), states("b", 4, epoch=6, replicas=(0,)))
             for st in pair]
    result = rm.apply_leader_and_isr(0, 1, mixed, [])
    assert list(result) == [st.tp for st in mixed] and set(result.values()) == {0}
    assert order == [("b", p) for p in range(4)] + [("a", p) for p in range(4)]
    assert all(rm.get_partition(t, p).is_leader and rm.get_partition(t, p).leader_epoch == 6
               for t in "ab" for p in range(4))
    lm.shutdown()
