"""The bounded pool of segment descriptors (kbroker/log/descriptors.py): at most ``limit`` .log files open, CLOCK
eviction, reopen on use, and a FileRegion keeps its descriptor open past an eviction, a close or a delete."""
import gc
import os

import pytest

from kbroker.log import Log, descriptors
from kbroker.log.descriptors import DescriptorPool, SegmentFile, auto_limit

from .test_log import VALUES, fill, small_config
from .test_log_helpers import append_batch
from .test_replica_hosting import open_fds


@pytest.fixture
def pool(monkeypatch):
    p = DescriptorPool(3)
    monkeypatch.setattr(descriptors, "POOL", p)
    return p


def open_logs(tmp_path):
    """Descriptors of .log files under tmp_path (an index holds none: index.py)."""
    n = 0
    prefix = str(tmp_path) + "/"
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith(prefix) and ".log" in target:
            n += 1
    return n


def _names(fd, path):
    """Whether descriptor ``fd`` is open on ``path`` (a closed number may be reused at once by another thread of the
    test process, so "fstat fails" would be a flaky check)."""
    try:
        return os.readlink("/proc/self/fd/%d" % fd) == path
    except OSError:
        return False


def test_auto_limit_is_half_the_soft_limit_with_a_floor(monkeypatch):
    monkeypatch.setattr(descriptors.resource, "getrlimit", lambda _r: (20000, 20000))
    assert auto_limit() == 10000
    monkeypatch.setattr(descriptors.resource, "getrlimit", lambda _r: (64, 20000))
    assert auto_limit() == descriptors.MIN_AUTO_LIMIT == 128
    assert DescriptorPool(0).limit == 128 and DescriptorPool(7).limit == 7


def test_at_most_limit_logs_are_open_and_every_one_reads_and_appends_after_a_reopen(tmp_path, pool):
    logs = [Log(str(tmp_path / ("t-%d" % i)), small_config()) for i in range(10)]
    written = [[append_batch(log, VALUES, ts=1000 + i)] for i, log in enumerate(logs)]
    assert open_logs(tmp_path) == 3 and len(pool) == 3 and pool.opens - pool.evictions == 3
    for _round in range(2):
        for i, log in enumerate(logs):
            written[i].append(append_batch(log, VALUES, ts=2000 + i))   # an evicted active segment reopens
            assert open_logs(tmp_path) == 3
    for i, log in enumerate(logs):
        got = log.read(0, 10 ** 6)
        assert got.first_offset == 0 and got.region.read_bytes() == b"".join(written[i])
        assert log.log_end_offset == 9
    del got
    assert pool.opens >= 30 and pool.opens - pool.evictions == 3 and open_logs(tmp_path) == 3
    for log in logs:
        log.close()
    gc.collect()
    assert open_logs(tmp_path) == 0 and len(pool) == 0


def test_a_segment_in_use_gets_a_second_chance_over_idle_ones(tmp_path, pool):
    hot = Log(str(tmp_path / "hot-0"), small_config())
    idle = [Log(str(tmp_path / ("idle-%d" % i)), small_config()) for i in range(2)]
    cold = []
    for i in range(6):
        append_batch(hot, VALUES)                                      # marks the hot segment again
        cold.append(Log(str(tmp_path / ("cold-%d" % i)), small_config()))   # each open evicts one
    # 3 first opens + 6 cold + 1 reopen of hot: the first eviction found all three new (marked), unmarked them in
    # one pass and took the oldest, hot; from then on hot is marked at every sweep and an unmarked one goes.
    assert pool.opens == 3 + 6 + 1 and pool.evictions == 7
    assert hot.segments[-1].holds_descriptor
    assert not any(log.segments[-1].holds_descriptor for log in idle)
    for log in [hot] + idle + cold:
        log.close()


def test_a_region_keeps_its_descriptor_through_eviction_close_and_delete(tmp_path, pool):
    log = Log(str(tmp_path / "t-0"), small_config())
    batches = fill(log, 8)                      # 6 batches in segment 0, 2 in segment 18
    region = log.read(0, 10 ** 6).region
    fd = region.fileno()
    others = [Log(str(tmp_path / ("o-%d" % i)), small_config()) for i in range(3)]
    assert not log.segments[0].holds_descriptor and not log.segments[1].holds_descriptor
    assert region.fileno() == fd and os.readlink("/proc/self/fd/%d" % fd).endswith("00000000000000000000.log")
    assert region.read_bytes() == b"".join(batches[:6])
    log.close()
    os.unlink(log.segments[0].log_path)         # gone from the directory: the descriptor still reads it
    assert region.read_bytes() == b"".join(batches[:6])
    path = os.readlink("/proc/self/fd/%d" % fd)
    del region
    assert not _names(fd, path)                 # the last holder let go: closed at once
    for other in others:
        other.close()


def test_the_empty_region_at_the_log_end_opens_nothing(tmp_path, pool):
    logs = [Log(str(tmp_path / ("t-%d" % i)), small_config()) for i in range(6)]
    for log in logs:
        append_batch(log, VALUES)
    opens = pool.opens
    for log in logs:
        got = log.read(3, 10 ** 6)
        assert got.size == 0 and got.region.read_bytes() == b""
        assert log.fetch_upper_offset(got) == 3
    assert pool.opens == opens
    for log in logs:
        log.close()


def test_flush_of_an_evicted_segment_reopens_it_and_syncs_the_file(tmp_path, pool, monkeypatch):
    log = Log(str(tmp_path / "t-0"), small_config())
    append_batch(log, VALUES)
    others = [Log(str(tmp_path / ("o-%d" % i)), small_config()) for i in range(3)]
    seg = log.segments[0]
    assert not seg.holds_descriptor
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink("/proc/self/fd/%d" % fd)),
                                                 real_fsync(fd)))
    assert log.flush() == 3
    assert any(p.endswith("t-0/00000000000000000000.log") for p in synced)
    for other in [log] + others:
        other.close()


def test_retention_walk_over_evicted_segments_reopens_none(tmp_path, pool):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 30)                                # 5 segments
    others = [Log(str(tmp_path / ("o-%d" % i)), small_config()) for i in range(3)]
    assert not any(s.holds_descriptor for s in log.segments)
    opens = pool.opens
    mtimes = [s.last_modified for s in log.segments]
    assert pool.opens == opens and all(m > 0 for m in mtimes)
    assert [s.mtime_ns() // 1_000_000 for s in log.segments] == mtimes
    assert mtimes == [os.stat(s.log_path).st_mtime_ns // 1_000_000 for s in log.segments]
    for other in [log] + others:
        other.close()


def test_a_segment_file_closes_when_unreferenced():
    r, w = os.pipe()
    f = SegmentFile(r, 1)
    assert f.fileno() == r
    path = os.readlink("/proc/self/fd/%d" % r)
    del f
    assert not _names(r, path)
    os.close(w)
    SegmentFile(-1, 2)                          # a placeholder closes nothing
