"""kbroker/log/txn_index.py: Kafka's .txnindex bytes, lookups, truncation, sanity checks, and its wiring into
segments (roll, truncation, deletion, recovery, the loader)."""
import os
import struct

import pytest

from kbroker.log import Log, LogConfig
from kbroker.log.index import CorruptIndexError
from kbroker.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, collect_aborted

from .test_log_helpers import append_batch


def cfg(**kw):
    base = dict(segment_bytes=1000, segment_index_bytes=240, index_interval_bytes=200, file_delete_delay_ms=0)
    base.update(kw)
    return LogConfig(**base)


def test_entry_bytes_are_kafkas(tmp_path):
    idx = TransactionIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    assert not os.path.exists(idx.path)              # created by the first entry only
    assert idx.append(AbortedTxn(7, 3, 10, 3))
    raw = open(idx.path, "rb").read()
    assert ENTRY_SIZE == 34 and len(raw) == 34
    assert raw == struct.pack(">hqqqq", 0, 7, 3, 10, 3)
    assert idx.entries == 1 and idx.last_offset == 10


def test_append_skips_entries_already_indexed(tmp_path):
    idx = TransactionIndex(str(tmp_path / "x.txnindex"), 0)
    assert idx.append(AbortedTxn(1, 0, 5, 0))
    assert not idx.append(AbortedTxn(1, 0, 5, 0))    # a replay over an intact index
    assert not idx.append(AbortedTxn(2, 1, 4, 1))
    assert idx.append(AbortedTxn(2, 6, 9, 6))
    assert os.path.getsize(idx.path) == 68
    reopened = TransactionIndex(idx.path, 0)
    assert reopened.entries == 2 and reopened.last_offset == 9
    assert reopened.all_entries() == [AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 6, 9, 6)]


def test_collect_overlap_and_completeness(tmp_path):
    idx = TransactionIndex(str(tmp_path / "x.txnindex"), 0)
    # pid 1 aborts [0, 5] while pid 2's txn (from 3) is open: LSO 3; pid 2 aborts [3, 9], nothing open: LSO 10.
    idx.append(AbortedTxn(1, 0, 5, 3))
    idx.append(AbortedTxn(2, 3, 9, 10))
    idx.append(AbortedTxn(3, 12, 14, 15))
    assert idx.collect(0, 3) == ([AbortedTxn(1, 0, 5, 3)], True)     # LSO 3 >= 3: pid 2 started at 3, not below
    assert idx.collect(6, 10) == ([AbortedTxn(2, 3, 9, 10)], True)
    assert idx.collect(6, 11) == ([AbortedTxn(2, 3, 9, 10)], True)   # pid 3 starts at 12; its LSO 15 >= 11
    assert idx.collect(6, 16) == ([AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 14, 15)], False)
    assert idx.collect(10, 13) == ([AbortedTxn(3, 12, 14, 15)], True)
    assert idx.collect(15, 20) == ([], False)


def test_truncate_to(tmp_path):
    idx = TransactionIndex(str(tmp_path / "x.txnindex"), 0)
    for i in range(5):
        idx.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    idx.truncate_to(26)                               # drops the entries ending at 35 and 45
    assert [t.last_offset for t in idx.all_entries()] == [5, 15, 25]
    assert os.path.getsize(idx.path) == 3 * 34 and idx.last_offset == 25
    idx.truncate_to(25)
    assert idx.last_offset == 15 and idx.entries == 2
    idx.truncate_to(0)
    assert not os.path.exists(idx.path) and idx.entries == 0 and idx.last_offset == -1


def test_sanity_check(tmp_path):
    path = str(tmp_path / "00000000000000000100.txnindex")
    idx = TransactionIndex(path, 100)
    idx.sanity_check()                                # no file: fine
    idx.append(AbortedTxn(1, 90, 101, 102))
    idx.sanity_check()
    with open(path, "ab") as f:
        f.write(b"\0" * 10)                           # torn entry
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 0, 1, 0, 50, 51))   # below the base
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 3, 1, 0, 150, 151))  # unknown version
    with pytest.raises(CorruptIndexError):
        TransactionIndex(path, 100).sanity_check()


def test_segments_carry_their_txn_index(tmp_path):
    log = Log(str(tmp_path / "t-0"), cfg())
    for _ in range(8):                                # 145-byte batches of 3: 6 per segment
        append_batch(log, [b"v" * 21] * 3)
    assert [s.base_offset for s in log.segments] == [0, 18]
    assert log.add_aborted_txn(AbortedTxn(5, 0, 10, 11))
    assert log.add_aborted_txn(AbortedTxn(6, 12, 20, 21))
    assert not log.add_aborted_txn(AbortedTxn(6, 12, 20, 21))
    assert not log.add_aborted_txn(AbortedTxn(6, 12, 24, 25))     # beyond the LEO (24)
    names = sorted(n for n in os.listdir(log.dir) if n.endswith(".txnindex"))
    assert names == ["00000000000000000000.txnindex", "00000000000000000018.txnindex"]
    # Collected across segments until a search is complete.
    assert log.aborted_transactions(0, 24) == [AbortedTxn(5, 0, 10, 11), AbortedTxn(6, 12, 20, 21)]
    assert log.aborted_transactions(0, 11) == [AbortedTxn(5, 0, 10, 11)]
    assert log.aborted_transactions(11, 24) == [AbortedTxn(6, 12, 20, 21)]
    assert collect_aborted(log.segments[1:], 0, 24) == [AbortedTxn(6, 12, 20, 21)]
    # Truncation cuts the entries of markers that went; the segment deleted with it takes its file.
    log.truncate_to(20)
    assert log.aborted_transactions(0, 24) == [AbortedTxn(5, 0, 10, 11)]
    assert not os.path.exists(os.path.join(log.dir, "00000000000000000018.txnindex"))
    log.truncate_to(9)
    assert log.segments[0].txn_index.entries == 0
    assert not any(n.endswith(".txnindex") for n in os.listdir(log.dir))


def test_loader_resets_a_corrupt_txn_index_and_drops_orphans(tmp_path):
    d = str(tmp_path / "t-0")
    log = Log(d, cfg())
    for _ in range(3):
        append_batch(log, [b"v" * 21] * 3)
    log.add_aborted_txn(AbortedTxn(5, 0, 4, 5))
    log.close()
    with open(os.path.join(d, "00000000000000000000.txnindex"), "ab") as f:
        f.write(b"\1" * 7)
    open(os.path.join(d, "00000000000000000500.txnindex"), "wb").close()
    log = Log(d, cfg(), clean_shutdown=True)
    assert log.segments[0].txn_index.entries == 0
    assert sorted(os.listdir(d)) == ["00000000000000000000.index", "00000000000000000000.log",
                                     "00000000000000000000.timeindex"]


def test_recovery_empties_the_txn_index_of_recovered_segments(tmp_path):
    d = str(tmp_path / "t-0")
    log = Log(d, cfg())
    for _ in range(3):
        append_batch(log, [b"v" * 21] * 3)
    log.add_aborted_txn(AbortedTxn(5, 0, 4, 5))
    log.close()
    log = Log(d, cfg(), recovery_point=0, clean_shutdown=False)   # re-scanned: the replay re-adds entries
    assert log.segments[0].txn_index.entries == 0
    log.close()


def test_fetch_upper_offset(tmp_path):
    log = Log(str(tmp_path / "t-0"), cfg(segment_bytes=10 ** 6, index_interval_bytes=200))
    for _ in range(10):
        append_batch(log, [b"v" * 21] * 3)           # 145 bytes each; an index entry every 2nd batch from the 3rd
    sl = log.read(0, 145)
    up = log.fetch_upper_offset(sl)
    assert up > 2                                     # above every record returned
    entries = [log.segments[0].offset_index.entry(i) for i in range(log.segments[0].offset_index.entries)]
    assert up == min(rel for rel, pos in entries if pos >= 145)
    sl = log.read(27, 10 ** 6)
    assert log.fetch_upper_offset(sl) == 30          # nothing indexed after the end: the LEO


def test_collect_bisects_a_large_index(tmp_path):
    idx = TransactionIndex(str(tmp_path / "x.txnindex"), 0)
    n = 5000                                          # > one READ_WINDOW (1,927 entries): the bisect path
    for i in range(n):
        idx.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    assert idx.collect(31_003, 31_020) == ([AbortedTxn(3100, 31_000, 31_005, 31_006),
                                            AbortedTxn(3101, 31_010, 31_015, 31_016)], True)  # 3102's LSO
    assert idx.collect(31_003, 31_016) == ([AbortedTxn(3100, 31_000, 31_005, 31_006),
                                            AbortedTxn(3101, 31_010, 31_015, 31_016)], True)
    assert idx.collect(0, 1) == ([AbortedTxn(0, 0, 5, 6)], True)
    assert idx.collect(49_995, 60_000) == ([AbortedTxn(4999, 49_990, 49_995, 49_996)], False)
    assert len(idx.all_entries()) == n
