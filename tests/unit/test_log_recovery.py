import gc
import os

import pytest

from kbroker._native import scan_batches
from kbroker.log import Log, LogConfig
from kbroker.log.segment import UnsupportedLogFormatError, filename_prefix

from .test_log_helpers import append_batch, batch

VALUES = [b"v" * 21] * 3  # one 145-byte batch per append
CFG = LogConfig(segment_bytes=1000, segment_index_bytes=240, index_interval_bytes=200, file_delete_delay_ms=0)
# 20 batches -> segments 0 (6 batches), 18 (6), 36 (6), 54 (2)


def make_log(path, n=20):
    log = Log(path, CFG)
    batches = [append_batch(log, VALUES, ts=1000 + 10 * i) for i in range(n)]
    log.close()
    return batches


def seg_file(d, base, suffix):
    return os.path.join(d, filename_prefix(base) + suffix)


def read_all(log):
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 10 ** 6)
        data = got.region.read_bytes()
        entries, end = scan_batches(data)
        assert end == len(data) > 0
        out += data
        offset = entries[-1][3] + 1
    return out


def index_bytes(d):
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith((".index", ".timeindex")):
            with open(os.path.join(d, name), "rb") as f:
                out[name] = f.read()
    return out


def flip(path, pos):
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x01]))


def test_torn_tail_cut_back_to_last_whole_batch(tmp_path):
    d = str(tmp_path / "t-0")
    batches = make_log(d)
    os.truncate(seg_file(d, 54, ".log"), 145 + 100)  # second batch of the last segment torn after 100 bytes
    log = Log(d, CFG, recovery_point=0, clean_shutdown=False)
    assert log.truncated_on_load == 100
    assert log.log_end_offset == 57
    assert os.path.getsize(seg_file(d, 54, ".log")) == 145
    assert read_all(log) == b"".join(batches[:19])
    append_batch(log, VALUES)
    assert log.log_end_offset == 60
    log.close()


def test_flipped_byte_cuts_batch_and_deletes_later_segments(tmp_path):
    d = str(tmp_path / "t-0")
    batches = make_log(d)
    flip(seg_file(d, 36, ".log"), 5 * 145 + 70)  # inside the records of segment 36's last batch
    log = Log(d, CFG, recovery_point=20, clean_shutdown=False)
    assert [s.base_offset for s in log.segments] == [0, 18, 36]
    assert log.log_end_offset == 51 and log.segments[-1].size == 725
    assert not os.path.exists(seg_file(d, 54, ".log"))
    assert not os.path.exists(seg_file(d, 54, ".index"))
    assert read_all(log) == b"".join(batches[:17])
    assert log.recovery_point == 20
    log.close()


def test_recovery_starts_at_recovery_point_segment(tmp_path):
    d = str(tmp_path / "t-0")
    make_log(d)
    flip(seg_file(d, 0, ".log"), 100)  # below the recovery point: not rescanned
    log = Log(d, CFG, recovery_point=40, clean_shutdown=False)
    assert log.log_end_offset == 60 and log.truncated_on_load == 0
    assert log.segments[0].size == 870
    log.close()


def test_clean_shutdown_skips_scan(tmp_path):
    d = str(tmp_path / "t-0")
    make_log(d)
    flip(seg_file(d, 54, ".log"), 145 + 70)
    log = Log(d, CFG, recovery_point=0, clean_shutdown=True)
    assert log.log_end_offset == 60 and log.recovery_point == 60 and log.segments[-1].size == 290
    log.close()
    log = Log(d, CFG, recovery_point=0, clean_shutdown=False)
    assert log.log_end_offset == 57 and log.segments[-1].size == 145
    log.close()


def test_rebuilt_indexes_identical_to_originals(tmp_path):
    d = str(tmp_path / "t-0")
    make_log(d)
    original = index_bytes(d)
    assert len(original) == 8 and original[filename_prefix(0) + ".index"] != b""
    # Full rescan (recovery point 0, unclean) rebuilds every index.
    Log(d, CFG, recovery_point=0, clean_shutdown=False).close()
    assert index_bytes(d) == original
    # Deleted index files are rebuilt even after a clean shutdown.
    os.unlink(seg_file(d, 18, ".index"))
    os.unlink(seg_file(d, 36, ".timeindex"))
    log = Log(d, CFG, recovery_point=0, clean_shutdown=True)
    assert log.log_end_offset == 60
    log.close()
    assert index_bytes(d) == original


def test_insane_index_is_rebuilt(tmp_path):
    d = str(tmp_path / "t-0")
    make_log(d)
    original = index_bytes(d)
    with open(seg_file(d, 18, ".index"), "ab") as f:
        f.write(b"\x00\x00\x00")  # not a multiple of 8 bytes
    Log(d, CFG, clean_shutdown=True).close()
    assert index_bytes(d) == original


def test_crash_with_untrimmed_active_index(tmp_path):
    d = str(tmp_path / "t-0")
    log = Log(d, CFG)
    batches = [append_batch(log, VALUES, ts=1000 + 10 * i) for i in range(16)]
    for seg in log.segments:
        seg.offset_index.flush()
    del log, seg  # no close: the active index stays preallocated
    gc.collect()
    assert os.path.getsize(seg_file(d, 36, ".index")) == 240
    log = Log(d, CFG, recovery_point=18, clean_shutdown=False)
    assert log.log_end_offset == 48
    idx = log.segments[-1].offset_index
    assert [idx.entry(i) for i in range(idx.entries)] == [(8, 290)]
    assert read_all(log) == b"".join(batches)
    log.close()


def test_leftover_files_and_empty_dir(tmp_path):
    d = str(tmp_path / "t-0")
    make_log(d, n=8)
    for name in ("00000000000000000000.log.deleted", "00000000000000000007.log.cleaned",
                 "00000000000000000099.index", "00000000000000000099.timeindex",
                 "00000000000000000018.index.swap"):
        open(os.path.join(d, name), "wb").close()
    log = Log(d, CFG, clean_shutdown=True)
    assert sorted(os.listdir(d)) == sorted(filename_prefix(b) + s for b in (0, 18)
                                           for s in (".log", ".index", ".timeindex"))
    assert log.log_end_offset == 24
    log.close()
    empty = str(tmp_path / "u-1")
    os.makedirs(empty)
    log = Log(empty, CFG)
    assert os.listdir(empty) and os.path.exists(seg_file(empty, 0, ".log"))
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    log.close()


def test_interrupted_swap_is_completed(tmp_path):
    d = str(tmp_path / "t-0")
    batches = make_log(d)
    # A "cleaned" replacement for segments 0 and 18 (offsets 0..35): keep batches 2 and 10, plus a torn tail.
    swapped = batches[2] + batches[10]
    with open(seg_file(d, 0, ".log.swap"), "wb") as f:
        f.write(swapped + batch(36, VALUES)[:50])
    log = Log(d, CFG, clean_shutdown=True)
    assert [s.base_offset for s in log.segments] == [0, 36, 54]
    assert not os.path.exists(seg_file(d, 18, ".log"))
    assert log.read(0, 10 ** 6).region.read_bytes() == swapped
    assert log.read(7, 10 ** 6).first_offset == 6
    assert log.read(9, 10 ** 6).first_offset == 30
    assert log.log_end_offset == 60
    log.close()


# ------------------------------------------------------------------ Kafka < 0.11 data (message sets v0/v1)

def _message_v1(offset, value, ts=1000):
    """One message-set entry, magic 1: offset int64 | size int32 | crc uint32 | magic | attributes | timestamp
    int64 | key int32 (-1: null) | value int32 + bytes (the CRC is not checked before the refusal)."""
    import struct
    import zlib
    body = struct.pack(">bbqi", 1, 0, ts, -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_kafka_0_10_segment_is_refused_and_left_untouched(tmp_path, clean_shutdown):
    d = tmp_path / "old-0"
    d.mkdir()
    data = b"".join(_message_v1(i, b"value-%d" % i) for i in range(5))
    (d / (filename_prefix(0) + ".log")).write_bytes(data)
    with pytest.raises(UnsupportedLogFormatError, match="message format v0/v1"):
        Log(str(d), CFG, recovery_point=0, clean_shutdown=clean_shutdown)
    assert (d / (filename_prefix(0) + ".log")).read_bytes() == data      # not cut to 0 bytes (it was)
    assert sorted(os.listdir(d)) == [filename_prefix(0) + ".log"]         # no index created beside it


def test_v1_messages_after_v2_batches_are_refused_not_cut(tmp_path):
    d = str(tmp_path / "t-0")
    make_log(d, n=3)
    path = seg_file(d, 0, ".log")
    before = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(_message_v1(9, b"late v1"))
    with pytest.raises(UnsupportedLogFormatError, match="at byte %d" % before):
        Log(d, CFG, recovery_point=0, clean_shutdown=False)
    assert os.path.getsize(path) == before + len(_message_v1(9, b"late v1"))


def test_zero_filled_tail_is_still_cut(tmp_path):
    d = str(tmp_path / "t-0")
    make_log(d, n=3)
    path = seg_file(d, 0, ".log")
    before = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(bytes(64))                 # preallocated zeros after a crash: magic 0 at byte 16, size 0
    log = Log(d, CFG, recovery_point=0, clean_shutdown=False)
    assert log.truncated_on_load == 64 and os.path.getsize(path) == before
    log.close()
