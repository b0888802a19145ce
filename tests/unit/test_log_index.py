import os
import struct

import pytest

from kbroker.log.index import CorruptIndexError, IndexFullError, OffsetIndex, TimeIndex


def test_offset_index_preallocated_append_lookup_trim(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100, 1003)  # rounded down to 1000 bytes = 125 entries
    assert os.path.getsize(path) == 0 and idx.max_entries == 125  # preallocated by the first entry
    assert idx.lookup(150) == (100, 0) and idx.last_entry() == (100, 0)
    for i in range(1, 11):
        idx.append(100 + i * 10, i * 5000)
        assert os.path.getsize(path) == 1000
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 5000)
    assert idx.lookup(155) == (150, 25000)
    assert idx.lookup(10 ** 12) == (200, 50000)
    with pytest.raises(ValueError):
        idx.append(200, 60000)  # offsets must increase
    idx.trim_to_valid_size()
    assert os.path.getsize(path) == 80
    with open(path, "rb") as f:
        assert f.read(16) == struct.pack(">iiii", 10, 5000, 20, 10000)
    idx.truncate_to(150)  # drops 150 and above
    assert idx.entries == 4 and idx.last_entry() == (140, 20000)
    idx.truncate_to(141)
    assert idx.entries == 4
    idx.trim_to_valid_size()
    assert os.path.getsize(path) == 32
    idx.append(145, 21000)  # regrows a trimmed index
    assert idx.entries == 5 and os.path.getsize(path) == 1000
    idx.close()
    assert os.path.getsize(path) == 40


def test_reopen_untrimmed_index_ends_at_last_nonzero_entry(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 800)
    idx.append(5, 4200)
    idx.append(9, 8400)
    idx.flush()
    # Simulate a crash: the file stays preallocated (no trim).
    idx._mapping.close()
    again = OffsetIndex(path, 0, 800)
    assert again.entries == 2 and again.lookup(100) == (9, 8400)
    again.sanity_check()
    again.close()


def test_mapped_index_holds_no_descriptor(tmp_path):
    """A mapped index (entries written, preallocated or trimmed) keeps no file descriptor open: 10,000 partitions with
    data need 10,000 descriptors (their .log files), not 30,000 (Python's mmap kept a dup per mapped index)."""
    # The descriptors open on the two index files, not the process's count: other threads of a test worker (a
    # client's, a pool's) open and close descriptors of their own meanwhile (a CI run counted 31 against 30).
    paths = {str(tmp_path / "00000000000000000000.index"), str(tmp_path / "00000000000000000000.timeindex")}

    def fds():
        held = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                continue        # closed since the listing
            if target in paths:
                held.append(target)
        return held
    idx = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 8000)
    tidx = TimeIndex(str(tmp_path / "00000000000000000000.timeindex"), 0, 12000)
    for i in range(1, 200):
        idx.append(i * 3, i * 4100)
        tidx.append(1000 + i, i * 3)
    assert fds() == []
    idx.trim_to_valid_size()
    tidx.trim_to_valid_size()
    assert fds() == [] and idx.lookup(301) == (300, 100 * 4100) and tidx.lookup(1100) == (1100, 300)
    idx.flush()
    tidx.flush()
    idx.close()
    tidx.close()
    assert fds() == []
    assert os.path.getsize(idx.path) == 199 * 8 and os.path.getsize(tidx.path) == 199 * 12


def _vm_flags_of(addr):
    """The VmFlags of the mapping of this process that contains ``addr`` (proc(5): ``rr`` = MADV_RANDOM)."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError("no mapping holds %#x" % addr)


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc/<pid>/smaps")
def test_index_mappings_are_advised_random_access(tmp_path):
    """Every mapping an index makes (its first append's, a regrow's, a reopened one's) is MADV_RANDOM, so a fault
    reads one page, not read_ahead_kb of zero-filled sparse file (module docstring, "Read-ahead")."""
    idx = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 1 << 20)
    tidx = TimeIndex(str(tmp_path / "00000000000000000000.timeindex"), 0, 1 << 20)
    idx.append(3, 4100)
    tidx.append(1000, 3)
    assert "rr" in _vm_flags_of(idx._mapping.addr) and "rr" in _vm_flags_of(tidx._mapping.addr)
    idx.trim_to_valid_size()
    idx.append(6, 8200)                        # regrown to its preallocated size: a new mapping
    assert "rr" in _vm_flags_of(idx._mapping.addr)
    idx.close()
    tidx.close()
    again = OffsetIndex(idx.path, 0, 1 << 20)  # an existing index, mapped at its size by the constructor
    assert again.lookup(6) == (6, 8200) and "rr" in _vm_flags_of(again._mapping.addr)
    again.close()


def test_offset_index_sanity_check(tmp_path):
    path = str(tmp_path / "00000000000000000007.index")
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 0, 100))  # last offset == base offset: impossible
    idx = OffsetIndex(path, 7, 800)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close()
    with open(path, "wb") as f:
        f.write(b"\x00\x00\x00\x01\x00\x00\x00\x10\x01")  # 9 bytes: not a multiple of 8
    idx = OffsetIndex(path, 7, 800)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check()
    idx.close()


def test_offset_index_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 24)
    for i in range(3):
        idx.append(i + 1, 100 * (i + 1))
    assert idx.is_full
    with pytest.raises(IndexFullError):
        idx.append(10, 1000)
    idx.close()


def test_time_index_monotonic_reserved_slot_and_truncate(tmp_path):
    path = str(tmp_path / "00000000000000000050.timeindex")
    idx = TimeIndex(path, 50, 12 * 4)
    assert idx.lookup(5) == (-1, 50)
    assert idx.append(1000, 55)
    assert not idx.append(1000, 56)  # timestamp did not grow: skipped
    assert idx.append(2000, 60)
    assert idx.append(3000, 70)
    assert idx.is_full  # 3 of 4 slots: the last is kept for the roll entry
    with pytest.raises(IndexFullError):
        idx.append(4000, 80)
    assert idx.append(4000, 80, skip_full_check=True)
    assert idx.lookup(2500) == (2000, 60)
    assert idx.lookup(999) == (-1, 50)
    idx.truncate_to(61)
    assert idx.entries == 2 and idx.last_entry() == (2000, 60)
    idx.trim_to_valid_size()
    idx.close()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">qiqi", 1000, 5, 2000, 10)
    again = TimeIndex(path, 50, 48)
    again.sanity_check()
    assert again.entries == 2
    again.reset()
    assert again.entries == 0 and os.path.getsize(path) == 48
    again.close()
    assert os.path.getsize(path) == 0
