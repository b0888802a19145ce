"""Producer-state snapshot files (kbroker/log/producer_snapshot.py): Kafka's exact bytes, validation, file handling."""
import logging
import os
import struct

import pytest

from kbroker.log import Log, LogConfig, LogManager
from kbroker.log import producer_snapshot as ps
from kbroker.log.producer_snapshot import CorruptSnapshotError, SnapshotEntry

from .test_log_helpers import append_batch

E1 = SnapshotEntry(producer_id=1000, producer_epoch=3, last_sequence=41, last_offset=1234, offset_delta=4,
                   timestamp=1_700_000_000_123, coordinator_epoch=7, current_txn_first_offset=1200)
E2 = SnapshotEntry(producer_id=7, producer_epoch=0, last_sequence=-1, last_offset=-1, offset_delta=0,
                   timestamp=1_700_000_000_000, coordinator_epoch=-1, current_txn_first_offset=-1)


def crc32c_bitwise(data):
    """Reference CRC-32C (Castagnoli, reflected 0x82F63B78), one bit at a time: independent of kbroker._native."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_reference_crc_is_crc32c():
    assert crc32c_bitwise(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_exact_bytes_of_two_entries():
    body = bytes.fromhex(
        "00000002"                                    # count
        # entry 1: pid 1000 | epoch 3 | lastSeq 41 | lastOffset 1234 | offsetDelta 4 | ts | coordEpoch 7 | txn 1200
        "00000000000003e8" "0003" "00000029" "00000000000004d2" "00000004" "0000018bcfe5687b" "00000007"
        "00000000000004b0"
        # entry 2: pid 7 | epoch 0 | -1 | -1 | 0 | ts | -1 | -1
        "0000000000000007" "0000" "ffffffff" "ffffffffffffffff" "00000000" "0000018bcfe56800" "ffffffff"
        "ffffffffffffffff")
    expected = b"\x00\x01" + struct.pack(">I", crc32c_bitwise(body)) + body
    assert len(expected) == 10 + 2 * 46
    got = ps.encode([E1, E2])
    assert got == expected
    assert got.hex()[:12] == "0001e2e0a95d"  # version 1, crc 0xe2e0a95d (pinned)
    assert ps.decode(got) == [E1, E2]


def test_exact_bytes_of_no_entries():
    assert ps.encode([]) == bytes.fromhex("0001" "48674bc7" "00000000")
    assert crc32c_bitwise(b"\x00\x00\x00\x00") == 0x48674BC7
    assert ps.decode(ps.encode([])) == []


@pytest.mark.parametrize("mutate, reason", [
    (lambda b: b"\x00\x02" + b[2:], "version 2"),
    (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], "CRC mismatch"),
    (lambda b: b[:-1], "CRC mismatch"),       # a cut or extended file fails the CRC first
    (lambda b: b + b"\x00", "CRC mismatch"),
    (lambda b: b[:5], "shorter than"),
    (lambda b: b"", "shorter than"),
])
def test_decode_refuses_corrupt(mutate, reason):
    good = ps.encode([E1, E2])
    bad = mutate(good)
    with pytest.raises(CorruptSnapshotError, match="unknown snapshot version 2" if reason == "version 2" else reason):
        ps.decode(bad)


def test_decode_refuses_negative_count_with_valid_crc():
    body = struct.pack(">i", -1)
    buf = struct.pack(">hI", 1, crc32c_bitwise(body)) + body
    with pytest.raises(CorruptSnapshotError, match="-1 entries"):
        ps.decode(buf)


def test_count_larger_than_file_with_valid_crc():
    body = struct.pack(">i", 3) + ps.encode([E1])[10:]
    buf = struct.pack(">hI", 1, crc32c_bitwise(body)) + body
    with pytest.raises(CorruptSnapshotError, match="3 entries do not fit 56 bytes"):
        ps.decode(buf)


def test_write_read_names_and_atomic_tmp(tmp_path):
    d = str(tmp_path)
    path = ps.write(d, 1235, [E1, E2])
    assert os.path.basename(path) == "00000000000000001235.snapshot"
    assert sorted(os.listdir(d)) == ["00000000000000001235.snapshot"]  # no .tmp left
    assert ps.read(path) == [E1, E2]
    with open(path, "rb") as f:
        assert f.read() == ps.encode([E1, E2])
    ps.write(d, 1235, [E2])  # same offset: replaced
    assert ps.read(path) == [E2]
    with pytest.raises(ValueError):
        ps.write(d, -1, [])


def test_list_offsets_ignores_other_files(tmp_path):
    d = str(tmp_path)
    for o in (30, 0, 12):
        ps.write(d, o, [])
    for name in ("00000000000000000000.log", "00000000000000000000.index", "leader-epoch-checkpoint",
                 "123.snapshot", "0000000000000000001x.snapshot", "00000000000000000040.snapshot.tmp"):
        open(os.path.join(d, name), "wb").close()
    assert ps.list_offsets(d) == [0, 12, 30]
    assert ps.list_offsets(str(tmp_path / "missing")) == []


def test_latest_picks_newest_at_or_below_and_deletes_corrupt(tmp_path, caplog):
    d = str(tmp_path)
    ps.write(d, 10, [E2])
    ps.write(d, 20, [E1])
    ps.write(d, 30, [E1, E2])
    open(os.path.join(d, "00000000000000000025.snapshot.tmp"), "wb").close()  # a crash mid-write
    assert ps.latest(d) == (30, [E1, E2])
    assert ps.latest(d, at_or_below=29) == (20, [E1])
    assert ps.latest(d, at_or_below=20) == (20, [E1])
    assert ps.latest(d, at_or_below=9) is None
    assert "00000000000000000025.snapshot.tmp" not in os.listdir(d)
    # Corrupt the newest two: latest() warns, deletes them and falls back to the next older valid one.
    with open(ps.snapshot_path(d, 30), "r+b") as f:
        f.seek(12)
        f.write(b"\xff")
    with open(ps.snapshot_path(d, 20), "wb") as f:
        f.write(b"\x00\x01")
    with caplog.at_level(logging.WARNING, logger="kbroker.log.producer_snapshot"):
        assert ps.latest(d) == (10, [E2])
    assert ps.list_offsets(d) == [10]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "00000000000000000030.snapshot" in warnings[0] and "CRC mismatch" in warnings[0]
    assert "00000000000000000020.snapshot" in warnings[1] and "shorter than" in warnings[1]
    assert ps.latest(str(tmp_path / "missing")) is None


def test_delete_above_below_and_retain(tmp_path):
    d = str(tmp_path)
    for o in (0, 5, 10, 15, 20):
        ps.write(d, o, [])
    assert ps.delete_above(d, 15) == [20]
    assert ps.list_offsets(d) == [0, 5, 10, 15]
    assert ps.delete_above(d, 15) == []
    assert ps.delete_below(d, 5) == [0]
    assert ps.list_offsets(d) == [5, 10, 15]
    assert ps.retain(d) == [5]
    assert ps.list_offsets(d) == [10, 15]
    assert ps.retain(d, keep=2) == []
    assert ps.retain(d, keep=0) == [10, 15]
    assert ps.list_offsets(d) == []


CFG = LogConfig(segment_bytes=200, file_delete_delay_ms=0, index_interval_bytes=100, segment_index_bytes=4096)


def test_log_loader_ignores_snapshots_and_delete_removes_them(tmp_path):
    d = str(tmp_path / "t-0")
    log = Log(d, CFG)
    for i in range(6):
        append_batch(log, [b"v%d" % i * 20])
    assert log.num_segments > 2
    ps.write(d, log.log_end_offset, [E1])
    second = log.segments[1].base_offset
    ps.write(d, second, [E2])
    end = log.log_end_offset
    log.close()
    reopened = Log(d, CFG, recovery_point=0, clean_shutdown=False)  # full recovery scan beside the snapshots
    assert reopened.log_end_offset == end
    assert ps.latest(d) == (end, [E1])
    reopened.truncate_to(second)
    assert ps.latest(d) == (second, [E2])  # a truncation deletes the snapshots above it (Log._forget_snapshots_above)
    reopened.delete()
    assert not os.path.exists(d)


def test_log_manager_delete_log_removes_snapshots(tmp_path):
    mgr = LogManager([str(tmp_path / "logs")], CFG)
    log = mgr.get_or_create_log(("t", 0))
    append_batch(log, [b"x"])
    ps.write(log.dir, 1, [E1])
    d = log.dir
    mgr.delete_log(("t", 0))
    assert not os.path.exists(d)
    assert not any(n.startswith("t-0") for n in os.listdir(str(tmp_path / "logs")))
    mgr.shutdown()
    mgr2 = LogManager([str(tmp_path / "logs")], CFG)  # loads without tripping over anything
    assert mgr2.get_log(("t", 0)) is None
    mgr2.shutdown()
