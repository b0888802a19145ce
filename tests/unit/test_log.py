import os

import pytest

from kbroker import errors
from kbroker._native import scan_batches
from kbroker.log import Log, LogConfig
from kbroker.log.segment import filename_prefix

from .test_log_helpers import append_batch, batch, info

VALUES = [b"v" * 21] * 3  # 3 records of 28 bytes -> one 145-byte batch


def small_config(**kw):
    base = dict(segment_bytes=1000, segment_index_bytes=240, index_interval_bytes=200, file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def fill(log, n, ts0=1000, ts_step=10, now=None):
    return [append_batch(log, VALUES, ts=ts0 + i * ts_step, now=now) for i in range(n)]


def test_batch_size_assumption():
    assert len(batch(0, VALUES)) == 145


def test_append_and_read_exact_bytes_across_rolls(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    batches = fill(log, 20)
    # 6 batches (870 bytes) fit in 1000; the 7th would make 1015 > 1000 and rolls.
    assert [s.base_offset for s in log.segments] == [0, 18, 36, 54]
    assert [s.size for s in log.segments] == [870, 870, 870, 290]
    assert log.log_start_offset == 0 and log.log_end_offset == 60
    assert sorted(os.listdir(log.dir)) == sorted(
        filename_prefix(b) + s for b in (0, 18, 36, 54) for s in (".log", ".index", ".timeindex"))
    # A read stops at its segment; every offset inside a batch starts the region at that batch.
    for offset in range(60):
        k = offset // 3
        got = log.read(offset, 10 ** 6)
        seg_end = (k // 6 + 1) * 6
        assert got.first_offset == 3 * k
        assert got.region.read_bytes() == b"".join(batches[k:min(seg_end, 20)])
    # Reading the whole log segment by segment yields exactly the appended bytes.
    out, offset = b"", 0
    while offset < log.log_end_offset:
        data = log.read(offset, 10 ** 6).region.read_bytes()
        entries, end = scan_batches(data)
        assert end == len(data)
        out += data
        offset = entries[-1][3] + 1
    assert out == b"".join(batches)
    log.close()


def test_index_entries_follow_interval(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 6)
    idx = log.segments[0].offset_index
    # Batch k (offsets 3k..3k+2) starts at 145*k; a batch starting > 200 bytes after the last entry's
    # position (0 at first) gets one, keyed by its last offset: batches 2 and 4.
    assert [idx.entry(i) for i in range(idx.entries)] == [(8, 290), (14, 580)]
    tidx = log.segments[0].time_index
    assert [tidx.entry(i) for i in range(tidx.entries)] == [(1022, 8), (1042, 14)]
    log.close()


def test_read_bounded_by_max_offset(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    batches = fill(log, 10)
    got = log.read(0, 10 ** 6, max_offset=7)  # batches 0-2, 3-5, 6-8 have base < 7
    assert got.region.read_bytes() == b"".join(batches[:3])
    got = log.read(0, 10 ** 6, max_offset=6)
    assert got.region.read_bytes() == b"".join(batches[:2])
    got = log.read(18, 10 ** 6, max_offset=21)  # second segment
    assert got.region.read_bytes() == batches[6]
    assert log.read(21, 10 ** 6, max_offset=21).size == 0
    assert log.read(22, 10 ** 6, max_offset=21).size == 0
    got = log.read(3, 10 ** 6, max_offset=18)  # whole first segment visible
    assert got.region.read_bytes() == b"".join(batches[1:6])
    log.close()


def test_min_one_returns_whole_oversize_batch(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    batches = fill(log, 3)
    got = log.read(3, 10, min_one=True)
    assert got.region.read_bytes() == batches[1]
    got = log.read(3, 10, min_one=False)
    assert got.region.read_bytes() == batches[1][:10]
    got = log.read(0, 200, min_one=True)  # room for one whole batch plus a partial one, like Kafka
    assert got.region.read_bytes() == (batches[0] + batches[1])[:200]
    assert log.read(3, 10, max_offset=3, min_one=True).size == 0
    log.close()


def test_first_entry_incomplete_flags_a_cut_first_batch(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    batches = fill(log, 3)  # 145-byte batches
    cut = log.read(3, 144, min_one=False)
    assert (cut.size, cut.first_batch_size, cut.first_entry_incomplete) == (144, 145, True)
    assert cut.first_batch_region().read_bytes() == batches[1]  # the whole batch, for v0-v2 down-conversion
    whole = log.read(3, 145, min_one=False)
    assert (whole.size, whole.first_entry_incomplete) == (145, False)
    # A whole first batch followed by a cut second one is complete at its first entry (Kafka sends it as is).
    two = log.read(3, 200, min_one=False)
    assert (two.size, two.first_entry_incomplete) == (200, False)
    assert log.read(3, 10, min_one=True).first_entry_incomplete is False
    nothing = log.read(3, 0, min_one=False)
    assert nothing.size == 0 and nothing.first_entry_incomplete  # no budget: nothing of the first batch
    end = log.read(9, 100)
    assert end.size == 0 and not end.first_entry_incomplete  # the log end: nothing to be incomplete
    log.close()


def test_out_of_range_and_end(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 2)
    with pytest.raises(errors.OffsetOutOfRange) as exc:
        log.read(7, 100)
    assert exc.value.code == 1
    got = log.read(6, 100)
    assert got.size == 0 and got.first_offset == 6
    log.close()


def test_record_list_too_large_and_offset_check(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config(segment_bytes=300))
    big = batch(0, [b"x" * 100] * 3)
    assert len(big) > 300
    with pytest.raises(errors.RecordListTooLarge) as exc:
        log.append(info(big))
    assert exc.value.code == 18
    append_batch(log, VALUES)
    with pytest.raises(ValueError):  # first offset below the log end offset
        log.append(info(batch(2, VALUES)))
    assert log.log_end_offset == 3 and log.size_in_bytes == 145
    log.close()


def test_offset_for_timestamp(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 20)  # batch k: timestamps 1000+10k .. 1002+10k, offsets 3k..3k+2
    assert log.offset_for_timestamp(0) == (0, 1002)
    assert log.offset_for_timestamp(1002) == (0, 1002)
    assert log.offset_for_timestamp(1003) == (3, 1012)
    assert log.offset_for_timestamp(1100) == (30, 1102)  # batch 10, in the second segment
    assert log.offset_for_timestamp(1192) == (57, 1192)
    assert log.offset_for_timestamp(1193) is None
    resolved = log.offset_for_timestamp(1101, resolver=lambda data, ts: (len(data), ts))
    assert resolved == (145, 1101)
    log.close()


def test_offset_for_timestamp_resolver_moves_on_when_no_record_qualifies(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 20)
    seen = []

    def resolver(data, ts):
        base = int.from_bytes(data[:8], "big")
        seen.append(base)
        return None if base < 33 else ("hit", base)  # batches 10 (30..32) says "nothing inside qualifies"

    # Candidates from ts 1100: batch 10 (max 1102), then 11, ...: the first resolver answer wins, in log order.
    assert log.offset_for_timestamp(1100, resolver=resolver) == ("hit", 33)
    assert seen == [30, 33]
    assert log.offset_for_timestamp(1193, resolver=resolver) is None
    # Every batch refused: None, after asking each candidate once.
    seen.clear()
    assert log.offset_for_timestamp(1150, resolver=lambda d, ts: seen.append(d[:8]) or None) is None
    assert len(seen) == 5  # batches 15..19
    log.close()


def test_roll_by_segment_ms_uses_first_batch_timestamp(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config(segment_bytes=10 ** 6, segment_ms=100))
    append_batch(log, VALUES, ts=1000)
    append_batch(log, VALUES, ts=1100)  # waited 1100 - 1002 = 98 <= 100: same segment
    append_batch(log, VALUES, ts=1101)  # 1103 - 1002 = 101 > 100: roll
    assert [s.base_offset for s in log.segments] == [0, 6]
    log.close()


def test_retention_by_time(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 20)  # segment max timestamps: 1052, 1112, 1172, 1192
    assert log.delete_old_segments(retention_ms=100, retention_bytes=-1, now=1200) == 1
    assert [s.base_offset for s in log.segments] == [18, 36, 54]
    assert log.log_start_offset == 18
    assert not any(n.startswith(filename_prefix(0)) for n in os.listdir(log.dir))
    with pytest.raises(errors.OffsetOutOfRange):
        log.read(17, 100)
    # Everything expired: roll an empty active segment first, never leave zero segments.
    assert log.delete_old_segments(retention_ms=0, retention_bytes=-1, now=10 ** 6) == 3
    assert [(s.base_offset, s.size) for s in log.segments] == [(60, 0)]
    assert log.log_start_offset == 60 == log.log_end_offset
    assert log.delete_old_segments(retention_ms=0, retention_bytes=-1, now=10 ** 7) == 0
    append_batch(log, VALUES)
    assert log.read(60, 1000).first_offset == 60
    log.close()


def test_retention_by_bytes(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 20)  # sizes 870, 870, 870, 290 = 2900
    assert log.delete_old_segments(retention_ms=-1, retention_bytes=2100, now=0) == 0  # 2900-870 < 2100
    assert log.delete_old_segments(retention_ms=-1, retention_bytes=2030, now=0) == 1  # 2030 >= 2030
    assert log.num_segments == 3 and log.size_in_bytes == 2030
    assert log.delete_old_segments(retention_ms=-1, retention_bytes=0, now=0) == 3  # rolls, keeps the empty one
    assert [(s.base_offset, s.size) for s in log.segments] == [(60, 0)]
    log.close()


def test_delayed_delete_keeps_region_readable(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config(file_delete_delay_ms=1000))
    batches = fill(log, 8)
    region = log.read(0, 10 ** 6).region
    assert log.delete_old_segments(retention_ms=-1, retention_bytes=1, now=5000) == 1
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".deleted")) == [
        filename_prefix(0) + s + ".deleted" for s in (".index", ".log", ".timeindex")]
    assert region.read_bytes() == b"".join(batches[:6])
    log.purge_deleted(5999)
    assert len([n for n in os.listdir(log.dir) if n.endswith(".deleted")]) == 3
    log.purge_deleted(6000)
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    log.close()


def test_truncate_to(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    batches = fill(log, 20)
    assert log.truncate_to(21)  # inside segment 18..35: later segments go, that one is cut after batch 6
    assert [s.base_offset for s in log.segments] == [0, 18]
    assert log.log_end_offset == 21 and log.segments[-1].size == 145
    assert log.read(18, 10 ** 6).region.read_bytes() == batches[6]
    again = append_batch(log, VALUES, ts=5000)
    assert log.read(21, 10 ** 6).region.read_bytes() == again
    assert log.truncate_to(18)
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, 870), (18, 0)]
    assert not log.truncate_to(100)
    log.truncate_to(0)
    assert [(s.base_offset, s.size) for s in log.segments] == [(0, 0)] and log.log_end_offset == 0
    log.close()


def test_flush_advances_recovery_point_and_roll_requests_flush(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config())
    fill(log, 4)
    assert log.recovery_point == 0 and log.unflushed_messages == 12
    assert log.flush(up_to=6) == 6
    assert log.flush() == 12 and log.unflushed_messages == 0
    fill(log, 4)  # rolls at 18
    assert log.flush_pending_offset == 18
    log.flush(18)
    assert log.flush_pending_offset is None and log.recovery_point == 18
    log.close()


def test_region_sendfile_matches_read_bytes(tmp_path):
    import socket
    log = Log(str(tmp_path / "t-0"), small_config())
    batches = fill(log, 4)
    region = log.read(3, 300).region
    a, b = socket.socketpair()
    try:
        sent = os.sendfile(a.fileno(), region.fileno(), region.position, region.size)
        assert sent == region.size == 300
        assert b.recv(1000) == region.read_bytes() == b"".join(batches[1:])[:300]
    finally:
        a.close()
        b.close()
    log.close()


def test_batch_headers_walk_every_segment_in_order(tmp_path):
    log = Log(str(tmp_path / "t-0"), small_config(segment_bytes=64 * 1024))
    fill(log, 4)
    big = append_batch(log, [b"x" * 6000] * 3)                     # 18 KiB: larger than the 16 KiB read window
    log.roll()
    fill(log, 2, ts0=5000)
    heads = list(log.batch_headers())
    assert [(h.base_offset, h.last_offset) for h in heads] == [(3 * k, 3 * k + 2) for k in range(7)]
    assert [h.max_timestamp for h in heads] == [1002, 1012, 1022, 1032, 1002, 5002, 5012]
    assert heads[4].size == len(big) and len(big) > 16 * 1024
    assert len(log.segments) == 2
    log.close()


def test_append_indexes_from_the_entries_it_is_given(tmp_path):
    """The segment indexes from the append result's entries (no header is parsed again): entries that do not
    cover the buffer are refused before any byte is written."""
    log = Log(str(tmp_path / "t-0"), small_config())
    b = batch(0, VALUES)
    bad = info(b)
    bad.batches = [(0, len(b) - 1) + bad.batches[0][2:]]
    with pytest.raises(ValueError, match="do not cover"):
        log.append(bad)
    assert log.size_in_bytes == 0
    fill(log, 6)
    assert [e for e in map(log.segments[0].offset_index.entry, range(2))] == [(8, 290), (14, 580)]
    log.close()
