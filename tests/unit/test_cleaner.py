"""Log compaction (kbroker/log/compact.py, cleaner.py): semantics, crash safety, selection, checkpoint."""
import gc
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.log import Log, LogConfig, LogManager
from kbroker.log import compact
from kbroker.log.cleaner import CLEANER_CHECKPOINT, LogCleaner
from kbroker.log.compact import STEPS, clean_log
from kbroker.record import RecordConfig, build_batch, iter_batches, iter_records, validate_for_append
from kbroker.record.batch import ATTR_DELETE_HORIZON

NOW = 1_700_000_000_000
COMPACT = LogConfig(segment_bytes=300, cleanup_policy="compact", delete_retention_ms=0, min_compaction_lag_ms=0,
                    min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0, index_interval_bytes=100,
                    segment_index_bytes=4096)


class Crash(BaseException):
    """A simulated process death: not an Exception, so no cleanup handler runs."""


def append(log, records, codec=0, producer_id=-1, base_sequence=-1, ts=NOW):
    """records: [(key, value)]; one batch; returns its base offset."""
    recs = [(i, ts + i, k, v, ()) for i, (k, v) in enumerate(records)]
    data = build_batch(recs, codec=codec, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                       base_sequence=base_sequence)
    info = validate_for_append(bytearray(data), log.log_end_offset, ts, RecordConfig(compacted=True))
    log.append(info, now=ts)
    return info.first_offset


def read_all(log):
    """What a consumer fetching from offset 0 sees: [(offset, key, value)] via Log.read."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).region.read_bytes()
        assert data, "no data at %d below LEO %d" % (offset, log.log_end_offset)
        last = None
        for _pos, head in iter_batches(data, include_control=True):
            last = head.last_offset
        for off, _ts, key, value, _h in iter_records(data):
            if off >= offset:
                out.append((off, key, value))
        offset = last + 1
    return out


def segment_bytes(seg):
    return os.pread(seg.fileno(), seg.size, 0)


def dir_names(path):
    return sorted(os.listdir(path))


def expected_after_clean(written, active_base, tombstones_gone=True):
    """Latest record per key below active_base (tombstones dropped), plus everything from active_base on."""
    latest = {}
    for off, key, value in written:
        if off < active_base:
            latest[key] = (off, key, value)
    cleaned = sorted(r for r in latest.values() if not (tombstones_gone and r[2] is None))
    return cleaned + [r for r in written if r[0] >= active_base]


# ------------------------------------------------------------------------------------------------ property
ops = st.lists(
    st.tuples(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
                                 st.one_of(st.none(), st.binary(min_size=0, max_size=12))),
                       min_size=1, max_size=3),
              st.sampled_from([0, 0, 1, 3])),
    min_size=1, max_size=40)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=ops)
def test_property_latest_value_per_key(tmp_path_factory, batches):
    d = str(tmp_path_factory.mktemp("p") / "t-0")
    log = Log(d, COMPACT)
    written = []
    for records, codec in batches:
        base = append(log, records, codec=codec)
        written += [(base + i, k, v) for i, (k, v) in enumerate(records)]
    leo = log.log_end_offset
    active = log.active_segment
    active_base, active_before = active.base_offset, segment_bytes(active)

    first = clean_log(log, 0, NOW)           # drops superseded records, stamps tombstones' horizon (now + 0)
    clean_log(log, first.end_offset, NOW + 1)  # past the horizon: tombstones go

    got = read_all(log)
    assert got == expected_after_clean(written, active_base)
    assert log.log_end_offset == leo and log.log_start_offset == 0
    assert log.active_segment is active and segment_bytes(active) == active_before
    assert first.end_offset == active_base
    assert not [n for n in dir_names(d) if n.endswith((".cleaned", ".swap"))]
    log.close()
    reopened = Log(d, COMPACT)  # what is on disk loads (full recovery scan) to the same records
    assert read_all(reopened) == got and reopened.truncated_on_load == 0
    reopened.close()


# ------------------------------------------------------------------------------------------------ crash safety
def _crash_fixture(d):
    log = Log(d, COMPACT)
    written = []
    for i in range(30):
        key = b"k%d" % (i % 4)
        value = None if i % 7 == 6 else b"v%d" % i
        base = append(log, [(key, value)], codec=1 if i % 5 == 0 else 0)
        written.append((base, key, value))
    return log, written


def _count_steps(tmp_path):
    log, _w = _crash_fixture(str(tmp_path / "count" / "t-0"))
    calls = []
    clean_log(log, 0, NOW, hook=calls.append)
    log.close()
    return calls


def _live(records):
    latest = {}
    for off, key, value in records:
        latest[key] = (off, value)
    return {k: v for k, v in latest.items() if v[1] is not None}


def test_crash_at_every_step_recovers(tmp_path):
    calls = _count_steps(tmp_path)
    assert calls[:4] == list(STEPS) and len(calls) % 4 == 0 and len(calls) >= 12  # several groups
    # Every step of the first two groups and of the last one (the middle groups repeat the second's case).
    for k in list(range(8)) + list(range(len(calls) - 4, len(calls))):
        d = str(tmp_path / ("crash%d" % k) / "t-0")
        log, written = _crash_fixture(d)
        active_base = log.active_segment.base_offset
        seen = []

        def hook(step, k=k):
            seen.append(step)
            if len(seen) == k + 1:
                raise Crash(step)

        with pytest.raises(Crash):
            clean_log(log, 0, NOW, hook=hook)
        del log
        gc.collect()  # the crashed process's fds go away; nothing else is cleaned up

        reopened = Log(d, COMPACT)
        names = dir_names(d)
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], (k, names)
        got = read_all(reopened)
        offsets = [r[0] for r in got]
        assert offsets == sorted(set(offsets))
        assert set(got) <= set(written), k
        assert _live(got) == _live(written), (k, seen)
        assert reopened.log_end_offset == 30 and reopened.truncated_on_load == 0
        # Cleaning again from scratch reaches the fully compacted state.
        first = clean_log(reopened, 0, NOW)
        clean_log(reopened, first.end_offset, NOW + 1)
        assert read_all(reopened) == expected_after_clean(written, active_base), k
        reopened.close()


def test_failure_before_swap_removes_cleaned_files(tmp_path):
    d = str(tmp_path / "t-0")
    log, written = _crash_fixture(d)
    before = read_all(log)

    def hook(step):
        if step == "cleaned":
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        clean_log(log, 0, NOW, hook=hook)
    assert not [n for n in dir_names(d) if n.endswith((".cleaned", ".swap"))]
    assert read_all(log) == before
    log.close()


# ------------------------------------------------------------------------------------------------ batch rules
def test_rewritten_batch_keeps_header_fields_and_codec(tmp_path):
    log = Log(str(tmp_path / "t-0"), COMPACT.replace(segment_bytes=10000))
    append(log, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")], codec=1, producer_id=7, base_sequence=0)
    log.roll()
    append(log, [(b"z", b"9")])
    clean_log(log, 0, NOW)
    seg = log.segments[0]
    data = segment_bytes(seg)
    (pos, head), = list(iter_batches(data))
    assert (head.base_offset, head.last_offset_delta, head.records_count, head.codec) == (0, 2, 2, 1)
    assert (head.producer_id, head.producer_epoch, head.base_sequence) == (7, 0, 0)
    assert head.max_timestamp == NOW + 2
    assert [(o, k, v) for o, _t, k, v, _h in iter_records(data)] == [(1, b"b", b"2"), (2, b"a", b"3")]
    log.close()


def test_tombstone_gets_delete_horizon_then_goes(tmp_path):
    cfg = COMPACT.replace(segment_bytes=10000, delete_retention_ms=5000)
    log = Log(str(tmp_path / "t-0"), cfg)
    append(log, [(b"a", b"1")])
    append(log, [(b"a", None)])
    log.roll()
    append(log, [(b"b", b"x")])
    r = clean_log(log, 0, NOW)
    assert r.min_horizon == NOW + 5000
    data = segment_bytes(log.segments[0])
    heads = [h for _p, h in iter_batches(data)]
    # offset 0 superseded; its empty header is not kept (no producer); the tombstone batch carries the horizon.
    assert [(h.base_offset, h.records_count) for h in heads] == [(1, 1)]
    assert heads[0].attributes & ATTR_DELETE_HORIZON and heads[0].base_timestamp == NOW + 5000
    assert list(iter_records(data))[0][:4] == (1, NOW, b"a", None)  # record timestamp unchanged
    clean_log(log, 2, NOW + 4999)
    assert read_all(log) == [(1, b"a", None), (2, b"b", b"x")]
    r = clean_log(log, 2, NOW + 5000)
    assert read_all(log) == [(2, b"b", b"x")]
    # the group's last batch stays as an empty header so the segment still ends at offset 1
    assert [(h.base_offset, h.records_count, h.batch_length) for _p, h in
            iter_batches(segment_bytes(log.segments[0]))] == [(1, 0, 49)]
    assert r.min_horizon is None
    log.close()


def test_empty_header_kept_for_producers_last_batch(tmp_path):
    log = Log(str(tmp_path / "t-0"), COMPACT.replace(segment_bytes=10000))
    append(log, [(b"a", b"1")], producer_id=5, base_sequence=0)   # offset 0, superseded, not pid 5's last
    append(log, [(b"b", b"1")], producer_id=5, base_sequence=1)   # offset 1, pid 5's last batch, superseded
    append(log, [(b"a", b"2")], producer_id=6, base_sequence=0)   # 2
    append(log, [(b"b", b"2")], producer_id=6, base_sequence=1)   # 3
    append(log, [(b"c", b"1")])                                   # 4
    log.roll()
    append(log, [(b"z", b"1")])
    clean_log(log, 0, NOW)
    heads = [h for _p, h in iter_batches(segment_bytes(log.segments[0]))]
    assert [(h.base_offset, h.records_count, h.producer_id, h.base_sequence) for h in heads] == [
        (1, 0, 5, 1), (2, 1, 6, 0), (3, 1, 6, 1), (4, 1, -1, -1)]
    log.close()


def test_unchanged_group_is_not_rewritten(tmp_path):
    log = Log(str(tmp_path / "t-0"), COMPACT)
    for i in range(12):
        append(log, [(b"k%d" % i, b"v")])
    inodes = [os.fstat(s.fileno()).st_ino for s in log.segments]
    r = clean_log(log, 0, NOW)
    assert r.groups >= 2 and r.groups_rewritten == 0
    assert [os.fstat(s.fileno()).st_ino for s in log.segments] == inodes
    log.close()


def test_offset_map_capacity_limits_a_pass(tmp_path):
    log = Log(str(tmp_path / "t-0"), COMPACT)
    written = []
    for i in range(40):
        key = b"k%d" % (i % 10)
        written.append((append(log, [(key, b"v%d" % i)]), key, b"v%d" % i))
    active_base = log.active_segment.base_offset
    first_dirty, passes = 0, 0
    while first_dirty < active_base:
        r = clean_log(log, first_dirty, NOW, dedupe_buffer_size=4 * compact.ENTRY_BYTES)  # 4 keys per pass
        assert r.end_offset > first_dirty
        first_dirty = r.end_offset
        passes += 1
    assert passes >= 3
    assert read_all(log) == expected_after_clean(written, active_base)
    log.close()


def test_min_compaction_lag_keeps_new_segments_dirty(tmp_path):
    cfg = COMPACT.replace(min_compaction_lag_ms=10_000)
    log = Log(str(tmp_path / "t-0"), cfg)
    for i in range(10):
        append(log, [(b"k", b"%d" % i)], ts=NOW)
    old_end = log.active_segment.base_offset
    for i in range(10):
        append(log, [(b"k", b"n%d" % i)], ts=NOW + 20_000)
    too_new = [s.base_offset for s in log.segments[:-1] if s.largest_timestamp > NOW + 15_000]
    r = clean_log(log, 0, NOW + 25_000)  # segments with largest ts > now - lag = NOW + 15000 are too new
    end = r.end_offset
    assert end == too_new[0] and 0 < end <= 10
    got = read_all(log)
    assert [(o, v) for o, _k, v in got if o < end] == [(end - 1, b"%d" % (end - 1))]
    assert [v for o, _k, v in got if o >= end] == ([b"%d" % i for i in range(end, 10)]
                                                   + [b"n%d" % i for i in range(10)])
    log.close()


def test_keyless_records_are_dropped(tmp_path):
    log = Log(str(tmp_path / "t-0"), COMPACT.replace(segment_bytes=10000))
    data = build_batch([(0, NOW, None, b"x", ()), (1, NOW, b"k", b"y", ())])
    log.append(validate_for_append(bytearray(data), 0, NOW), now=NOW)
    log.roll()
    append(log, [(b"z", b"1")])
    clean_log(log, 0, NOW)
    assert read_all(log) == [(1, b"k", b"y"), (2, b"z", b"1")]
    log.close()


# ------------------------------------------------------------------------------------------------ manager
def _manager(tmp_path, configs):
    def topic_config(topic):
        return configs.get(topic)
    return LogManager([str(tmp_path / "d")], LogConfig(file_delete_delay_ms=0), topic_config=topic_config)


def _fill(log, n, keys=3):
    for i in range(n):
        append(log, [(b"k%d" % (i % keys), b"value-%03d" % i)])


def test_cleaner_checkpoint_exact_text_and_reload(tmp_path):
    configs = {"comp": COMPACT, "other": COMPACT}
    mgr = _manager(tmp_path, configs)
    a = mgr.get_or_create_log(("comp", 0))
    b = mgr.get_or_create_log(("other", 3))
    plain = mgr.get_or_create_log(("plain", 0))
    for lg in (a, b, plain):
        _fill(lg, 20)
    results = mgr.clean_once(NOW)
    assert set(results) == {("comp", 0), ("other", 3)}
    path = str(tmp_path / "d" / CLEANER_CHECKPOINT)
    with open(path) as f:
        text = f.read()
    assert text == "0\n2\ncomp 0 %d\nother 3 %d\n" % (a.active_segment.base_offset, b.active_segment.base_offset)
    assert LogCleaner(mgr).first_dirty == {("comp", 0): a.active_segment.base_offset,
                                           ("other", 3): b.active_segment.base_offset}
    assert mgr.clean_once(NOW) == {}  # nothing dirty, no tombstone waiting
    mgr.delete_log(("other", 3))
    _fill(a, 10)
    mgr.clean_once(NOW)
    with open(path) as f:
        assert f.read() == "0\n1\ncomp 0 %d\n" % a.active_segment.base_offset
    mgr.shutdown()


def test_dirty_ratio_threshold_and_filthiest_first(tmp_path):
    cfg = COMPACT.replace(min_cleanable_dirty_ratio=0.3)
    mgr = _manager(tmp_path, {"x": cfg, "y": cfg})
    x = mgr.get_or_create_log(("x", 0))
    y = mgr.get_or_create_log(("y", 0))
    _fill(x, 30)
    _fill(y, 30)
    cleaner = mgr.cleaner
    segs = x.segments
    cleaner.first_dirty[("x", 0)] = segs[len(segs) // 2].base_offset
    ltc = cleaner.to_clean(("x", 0), x, NOW)
    inactive = segs[:-1]
    assert ltc.clean_bytes == sum(s.size for s in inactive[:len(segs) // 2])
    assert ltc.cleanable_bytes == sum(s.size for s in inactive[len(segs) // 2:])
    assert 0.3 <= ltc.dirty_ratio < 1.0
    assert [l.tp for l in cleaner.due_logs(NOW)] == [("y", 0), ("x", 0)]  # y: ratio 1.0 goes first
    cleaner.first_dirty[("x", 0)] = segs[-2].base_offset  # one dirty segment out of many
    ltc = cleaner.to_clean(("x", 0), x, NOW)
    assert ltc.cleanable_bytes == segs[-2].size and ltc.dirty_ratio < 0.3
    assert [l.tp for l in cleaner.due_logs(NOW)] == [("y", 0)]
    mgr.shutdown()


def test_retention_skips_compact_only_logs_and_runs_for_compact_delete(tmp_path):
    old = dict(retention_ms=1000)
    mgr = _manager(tmp_path, {"c": COMPACT.replace(**old), "cd": COMPACT.replace(cleanup_policy="compact,delete",
                                                                                  **old)})
    c = mgr.get_or_create_log(("c", 0))
    cd = mgr.get_or_create_log(("cd", 0))
    _fill(c, 20)
    _fill(cd, 20)
    n_c = c.num_segments
    deleted = mgr.check_retention(NOW + 10_000)
    assert c.num_segments == n_c and c.log_start_offset == 0
    assert cd.log_start_offset == cd.log_end_offset == 20 and deleted > 1
    mgr.shutdown()


def test_clean_once_skips_failed_log_until_restart(tmp_path, monkeypatch):
    mgr = _manager(tmp_path, {"c": COMPACT})
    c = mgr.get_or_create_log(("c", 0))
    _fill(c, 20)

    def boom(*_a, **_k):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("kbroker.log.cleaner.clean_log", boom)
    assert mgr.clean_once(NOW) == {("c", 0): None}
    assert mgr.cleaner.failed == {("c", 0)} and mgr.clean_once(NOW) == {}
    mgr.shutdown()
