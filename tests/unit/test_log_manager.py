import os

import pytest

from kbroker.log import InconsistentBrokerIdError, LogConfig, LogDirLockedError, LogManager, OffsetCheckpoint
from kbroker.log.checkpoint import format_checkpoint
from kbroker.log.manager import delete_dir_name

from .test_log_helpers import append_batch

VALUES = [b"v" * 21] * 3
CFG = LogConfig(segment_bytes=1000, segment_index_bytes=240, index_interval_bytes=200, file_delete_delay_ms=0)


def test_checkpoint_exact_text_and_roundtrip(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    cp = OffsetCheckpoint(path)
    cp.write({("b-topic", 3): 0, ("a", 0): 1234, ("a", 10): 7})
    with open(path, "rb") as f:
        assert f.read() == b"0\n3\na 0 1234\na 10 7\nb-topic 3 0\n"
    assert not os.path.exists(path + ".tmp")
    assert cp.read() == {("a", 0): 1234, ("a", 10): 7, ("b-topic", 3): 0}
    assert format_checkpoint({}) == "0\n0\n"


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "garbage", ""])
def test_unreadable_checkpoint_is_empty(tmp_path, text, caplog):
    path = tmp_path / "cp"
    path.write_text(text)
    assert OffsetCheckpoint(str(path)).read() == {}
    assert "checkpoint" in caplog.text
    assert OffsetCheckpoint(str(tmp_path / "missing")).read() == {}


def test_meta_lock_marker_and_checkpoint_files(tmp_path):
    d = str(tmp_path / "logs")
    mgr = LogManager([d], CFG, broker_id=7)
    with open(os.path.join(d, "meta.properties")) as f:
        lines = [ln for ln in f.read().splitlines() if not ln.startswith("#")]
    assert lines == ["version=0", "broker.id=7"]
    with pytest.raises(LogDirLockedError) as exc:
        LogManager([d], CFG, broker_id=7)
    assert os.path.join(d, ".lock") in str(exc.value)
    log = mgr.get_or_create_log(("my-topic", 2))
    for i in range(4):
        append_batch(log, VALUES, ts=1000 + i)
    assert mgr.get_log(("my-topic", 2)) is log
    mgr.shutdown()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    with open(os.path.join(d, "recovery-point-offset-checkpoint"), "rb") as f:
        assert f.read() == b"0\n1\nmy-topic 2 12\n"
    # Restart: the marker is consumed, the log is loaded (topic = text before the last '-').
    mgr = LogManager([d], CFG, broker_id=7)
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    log = mgr.get_log(("my-topic", 2))
    assert log.log_end_offset == 12 and log.recovery_point == 12
    mgr.close_without_marker()
    with pytest.raises(InconsistentBrokerIdError) as exc:
        LogManager([d], CFG, broker_id=8)
    assert "meta.properties" in str(exc.value) and d in str(exc.value)
    # The refused start released the lock.
    LogManager([d], CFG, broker_id=7).shutdown()


def test_unclean_restart_recovers_from_checkpoint(tmp_path):
    d = str(tmp_path / "logs")
    mgr = LogManager([d], CFG, broker_id=1)
    log = mgr.get_or_create_log(("t", 0))
    for i in range(8):
        append_batch(log, VALUES, ts=1000 + i)  # rolls at 18
    assert mgr.flush_dirty(now=0) == 1  # the roll asked for segments below 18 to be flushed
    assert log.recovery_point == 18
    mgr.checkpoint_recovery_points()
    seg_path = log.segments[-1].log_path
    mgr.close_without_marker()
    os.truncate(seg_path, 145 + 10)
    mgr = LogManager([d], CFG, broker_id=1)
    log = mgr.get_log(("t", 0))
    assert log.log_end_offset == 21 and log.recovery_point == 18
    mgr.shutdown()


def test_dir_choice_retention_flush_and_delete(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    cfg = CFG.replace(retention_bytes=290, flush_interval_messages=6)
    mgr = LogManager(dirs, cfg, broker_id=0,
                     topic_config=lambda t: cfg.replace(cleanup_policy="compact") if t == "c" else None)
    for p in range(3):
        mgr.get_or_create_log(("t", p))
    mgr.get_or_create_log(("c", 0))
    assert [mgr.log_dir_of(("t", p)) for p in range(3)] == [dirs[0], dirs[1], dirs[0]]
    assert mgr.log_dir_of(("c", 0)) == dirs[1]
    t0, c0 = mgr.get_log(("t", 0)), mgr.get_log(("c", 0))
    for log in (t0, c0):
        for i in range(14):
            append_batch(log, VALUES, ts=1000 + i)  # segments 0 (870 bytes), 18 (870), 36 (290)
    assert mgr.check_retention(now=2000) == 2  # only the delete-policy log: 2030 -> 290
    assert (t0.num_segments, c0.num_segments) == (1, 3)
    assert sorted((log.topic, up_to) for log, up_to in mgr.due_flushes(now=0)) == [("c", None), ("t", None)]
    assert mgr.flush_dirty(now=0) == 2 and t0.unflushed_messages == 0
    assert mgr.delete_log(("t", 1))
    assert not os.path.exists(os.path.join(dirs[1], "t-1")) and mgr.get_log(("t", 1)) is None
    assert not mgr.delete_log(("t", 1))
    mgr.shutdown()
    with open(os.path.join(dirs[1], "recovery-point-offset-checkpoint")) as f:
        assert f.read() == "0\n1\nc 0 42\n"


def test_interrupted_partition_delete_dir_removed(tmp_path):
    d = str(tmp_path / "logs")
    os.makedirs(os.path.join(d, "t-0.0123abcd-delete"))
    os.makedirs(os.path.join(d, "not_a_partition"))
    mgr = LogManager([d], CFG, broker_id=0)
    assert not os.path.exists(os.path.join(d, "t-0.0123abcd-delete"))
    assert mgr.all_logs() == {}
    mgr.shutdown()


def test_delete_dir_name_fits_255_bytes_like_kafka():
    uid = "0123456789abcdef0123456789abcdef"
    assert delete_dir_name("t", 3, uid) == "t-3." + uid + "-delete"
    long_topic = "a" * 249
    name = delete_dir_name(long_topic, 0, uid)
    suffix = "-0." + uid + "-delete"  # 42 characters
    assert name == "a" * (255 - len(suffix)) + suffix and len(name) == 255
    assert len(delete_dir_name("b" * 249, 12345, uid)) == 255
    assert len(delete_dir_name("c" * 200, 7)) == 200 + 42  # short enough: kept whole, random uuid
    assert delete_dir_name("c", 7) != delete_dir_name("c", 7)


def test_delete_log_of_a_249_character_topic(tmp_path, caplog):
    caplog.set_level("WARNING", logger="kbroker.log.manager")
    d = str(tmp_path / "logs")
    topic = "x" * 249
    mgr = LogManager([d], CFG, broker_id=0)
    log = mgr.get_or_create_log((topic, 0))
    append_batch(log, VALUES)
    assert os.path.isdir(os.path.join(d, topic + "-0"))
    assert mgr.delete_log((topic, 0))
    assert caplog.records == []  # renamed to the capped -delete name, not the in-place fallback (ENAMETOOLONG)
    assert [n for n in os.listdir(d) if n.startswith("x")] == []
    assert mgr.get_log((topic, 0)) is None
    again = mgr.get_or_create_log((topic, 0))  # the same name can be created again, empty
    assert again.log_end_offset == 0
    mgr.shutdown()


def test_interrupted_delete_of_a_long_topic_is_finished_at_load(tmp_path):
    d = str(tmp_path / "logs")
    topic = "y" * 249
    mgr = LogManager([d], CFG, broker_id=0)
    append_batch(mgr.get_or_create_log((topic, 0)), VALUES)
    append_batch(mgr.get_or_create_log((topic, 1)), VALUES)
    mgr.shutdown()
    # A crash between the rename and the rmtree: the renamed directory still holds the whole log.
    doomed = delete_dir_name(topic, 0)
    os.rename(os.path.join(d, topic + "-0"), os.path.join(d, doomed))
    assert len(doomed) == 255 and os.listdir(os.path.join(d, doomed))
    mgr = LogManager([d], CFG, broker_id=0)
    assert not os.path.exists(os.path.join(d, doomed))
    assert sorted(mgr.all_logs()) == [(topic, 1)]
    assert mgr.get_log((topic, 1)).log_end_offset == 3
    mgr.shutdown()


class _RecordingPool:
    """A ``load_pool`` (LogManager's seam) running ``fn`` in native threads, recording which ran it."""

    def __init__(self, threads):
        from concurrent.futures import ThreadPoolExecutor
        import threading

        self._ex, self._ident, self.idents, self.calls = ThreadPoolExecutor(threads), threading.get_ident, set(), 0

    def map(self, fn, items):
        self.calls += 1

        def run(item):
            self.idents.add(self._ident())
            return fn(item)
        try:
            return list(self._ex.map(run, items))
        finally:
            self._ex.shutdown()


@pytest.mark.parametrize("clean", [True, False])
def test_logs_open_in_the_load_pool_with_the_same_state(tmp_path, clean):
    """num.recovery.threads.per.data.dir > 1: the broker hands LogManager a pool and every partition of a dir is
    opened (after a crash: recovered) in it, with the state a one-by-one load gives."""
    import threading

    d = str(tmp_path / "logs")
    mgr = LogManager([d], CFG, broker_id=1)
    for p in range(12):
        log = mgr.get_or_create_log(("t", p))
        for i in range(p % 4 + 1):
            append_batch(log, VALUES, ts=1000 + i)
    expected = {("t", p): 3 * (p % 4 + 1) for p in range(12)}
    mgr.shutdown() if clean else mgr.close_without_marker()
    pool = _RecordingPool(4)
    mgr = LogManager([d], CFG, broker_id=1, load_pool=pool)
    assert pool.calls == 1 and threading.get_ident() not in pool.idents and len(pool.idents) >= 1
    assert {tp: mgr.get_log(tp).log_end_offset for tp in expected} == expected
    assert all(mgr.get_log(tp).recovery_point == (n if clean else 0) for tp, n in expected.items())
    mgr.shutdown()


def test_a_log_failing_in_the_load_pool_fails_its_dir_and_closes_the_others(tmp_path, monkeypatch):
    """One partition's OSError in a worker takes its dir offline (as a one-by-one load does); the logs the other
    workers opened are closed, not leaked, and the next start loads them all."""
    from kbroker.log import log as log_module

    d = str(tmp_path / "logs")
    mgr = LogManager([d], CFG, broker_id=1)
    for p in range(6):
        append_batch(mgr.get_or_create_log(("t", p)), VALUES)
    mgr.shutdown()
    real_init, closed = log_module.Log.__init__, []

    def init(self, dir_path, *a, **kw):
        if dir_path.endswith("t-3"):
            raise OSError(5, "Input/output error", dir_path)
        real_init(self, dir_path, *a, **kw)
    monkeypatch.setattr(log_module.Log, "__init__", init)
    real_close = log_module.Log.close
    monkeypatch.setattr(log_module.Log, "close", lambda self: (closed.append(self.dir), real_close(self))[1])
    d2 = str(tmp_path / "other")
    mgr = LogManager([d, d2], CFG, broker_id=1, load_pool=_RecordingPool(3))
    assert d in mgr.failures.offline and d2 not in mgr.failures.offline
    assert sorted(os.path.basename(p) for p in closed) == ["t-0", "t-1", "t-2", "t-4", "t-5"]
    assert [tp for tp in ((("t", p)) for p in range(6)) if mgr.get_log(tp) is not None] == []
    mgr.shutdown()
    monkeypatch.undo()
    mgr = LogManager([d], CFG, broker_id=1, load_pool=_RecordingPool(3))
    assert [mgr.get_log(("t", p)).log_end_offset for p in range(6)] == [3] * 6
    mgr.shutdown()
