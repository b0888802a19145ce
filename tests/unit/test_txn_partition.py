"""Transactions on the partition side: producer state (open transactions, markers, fencing, the LSO), the leader's
write_marker, followers applying markers, the .txnindex entries, rebuilds after restart and truncation, and
read_committed reads -- with exact offsets."""
import os
import struct
import time

import pytest

from kbroker import errors
from kbroker.log import producer_snapshot as ps
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.producer_snapshot import SnapshotEntry
from kbroker.log.txn_index import AbortedTxn
from kbroker.record import Record, batch_header, build_batch, iter_records
from kbroker.record.control import marker_of
from kbroker.replica.partition import Partition
from kbroker.replica.producer_state import ProducerInfo, ProducerStateManager

LC = LogConfig(min_insync_replicas=1, file_delete_delay_ms=0)


def data(n, pid=-1, epoch=0, seq=-1, txn=False, value=b"v", ts=None):
    # Current timestamps: a marker (stamped now) after records from 1970 would roll the segment by time.
    ts = int(time.time() * 1000) if ts is None else ts
    return build_batch([Record(i, ts + i, None, value, ()) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch if pid >= 0 else -1, base_sequence=seq, is_transactional=txn)


def standalone(tmp_path, name="t-0", config=LC):
    return Partition("t", 0, Log(str(tmp_path / name), config), config, 1)


def txn_files(part):
    return sorted(n for n in os.listdir(part.log.dir) if n.endswith(".txnindex"))


# ----------------------------------------------------------------------------------- producer state alone
def test_manager_opens_and_closes_transactions_in_offset_order():
    m = ProducerStateManager()
    m.update(7, 0, 0, 2, 10, 12, is_transactional=True, timestamp=5)
    m.update(8, 0, 0, 0, 13, 13, is_transactional=True)
    m.update(7, 0, 3, 3, 14, 14, is_transactional=True)
    assert m.open_transactions() == [(10, 7), (13, 8)]
    assert m.first_unstable_offset(100) == 10
    # pid 7 aborts at 15 while pid 8's (from 13) is open: the index entry's LSO is 13.
    assert m.complete_txn(7, 0, 4, False, 15, 20) == AbortedTxn(7, 10, 15, 13)
    assert m.first_unstable_offset(15) == 10        # marker 15 not below the HW: still unstable
    assert m.first_unstable_offset(16) == 13
    assert m.complete_txn(8, 0, 4, True, 16) is None   # commit: nothing to index
    assert m.first_unstable_offset(16) == 13
    assert m.first_unstable_offset(17) is None
    assert m.complete_txn(8, 0, 4, False, 17) is None  # no transaction open: an empty abort
    info = {p.producer_id: p for p in m.active()}
    assert info[7] == ProducerInfo(7, 0, 3, 20, 4, -1)
    assert info[8] == ProducerInfo(8, 0, 0, -1, 4, -1)


def test_manager_fencing_and_txn_state():
    m = ProducerStateManager()
    m.update(7, 3, 0, 0, 0, 0, is_transactional=True)
    m.complete_txn(7, 3, 5, True, 1)
    with pytest.raises(errors.InvalidProducerEpoch):
        m.check_marker(7, 2, 5)
    with pytest.raises(errors.TransactionCoordinatorFenced):
        m.check_marker(7, 3, 4)
    m.check_marker(7, 4, 5)                          # a newer producer epoch (the coordinator fenced it): fine
    m.update(7, 3, 1, 1, 2, 2, is_transactional=True)
    with pytest.raises(errors.InvalidTxnState):
        m.check(7, 3, 2, 2, is_transactional=False)
    m.check(7, 3, 2, 2, is_transactional=True)
    # The coordinator bumps the epoch with an abort: the next epoch starts at sequence 0, even as the same epoch.
    m.complete_txn(7, 4, 5, False, 3)
    assert m.entry(7).epoch == 4 and m.entry(7).txn_first_offset == -1
    with pytest.raises(errors.OutOfOrderSequenceNumber):
        m.check(7, 4, 5, 5)
    m.check(7, 4, 0, 0)
    with pytest.raises(errors.InvalidProducerEpoch):
        m.check(7, 3, 0, 0)
    # Coordinator-origin writes (baseSequence -1): no sequence checks, nothing retained.
    assert m.check(7, 4, -1, -1, is_transactional=True, coordinator=True) is None
    m.update(7, 4, -1, -1, 4, 4, is_transactional=True)
    assert m.entry(7).batches == [] and m.entry(7).txn_first_offset == 4


def test_a_duplicate_across_the_end_of_its_transaction_is_out_of_order():
    """librdkafka's abort_transaction reuses the sequences of purged retries: the "duplicate" is new records."""
    m = ProducerStateManager()
    m.update(7, 0, 0, 3, 10, 13, is_transactional=True)
    assert m.check(7, 0, 0, 3, is_transactional=True) == (10, 13)      # a retry inside its transaction
    m.complete_txn(7, 0, 2, False, 14)                                  # ABORT at 14
    with pytest.raises(errors.OutOfOrderSequenceNumber) as exc:
        m.check(7, 0, 0, 3, is_transactional=True)
    assert "offsets 10..13" in str(exc.value) and "continue at 4" in str(exc.value)
    m.update(7, 0, 4, 5, 15, 16, is_transactional=True)                 # the next transaction opens at 15
    with pytest.raises(errors.OutOfOrderSequenceNumber):
        m.check(7, 0, 0, 3, is_transactional=True)                     # 10..13 is before it: still refused
    assert m.check(7, 0, 4, 5, is_transactional=True) == (15, 16)       # its own batch: a duplicate
    # Idempotent producers have no transactions: a retried batch is a duplicate at any time.
    m.update(8, 0, 0, 1, 20, 21)
    assert m.check(8, 0, 0, 1) == (20, 21)


def test_partition_refuses_a_reused_range_after_the_abort_and_after_a_restart(tmp_path):
    part = standalone(tmp_path)
    part.append(data(4, pid=5, seq=0, txn=True), 9, 1)                  # 0-3 (seq 0..3)
    assert part.append(data(4, pid=5, seq=0, txn=True), 9, 1).duplicate    # a retry: offsets 0..3 again
    part.write_marker(5, 0, 2, commit=False)                            # 4: ABORT
    with pytest.raises(errors.OutOfOrderSequenceNumber):
        part.append(data(4, pid=5, seq=0, txn=True, value=b"new"), 9, 1)
    assert part.log_end_offset == 5
    part.log.close()
    again = standalone(tmp_path)                                        # rebuilt from the log
    with pytest.raises(errors.OutOfOrderSequenceNumber):
        again.append(data(4, pid=5, seq=0, txn=True, value=b"new"), 9, 1)
    assert again.append(data(4, pid=5, seq=4, txn=True), 9, 1).base_offset == 5


# ------------------------------------------------------------------------------------------ partition
def test_transaction_lso_and_read_committed(tmp_path):
    part = standalone(tmp_path)
    part.append(data(2), 9, 1)                                             # 0-1 plain
    part.append(data(3, pid=5, seq=0, txn=True), 9, 1)                     # 2-4 pid 5 txn
    part.append(data(2, pid=6, seq=0, txn=True), 9, 1)                     # 5-6 pid 6 txn
    part.append(data(1), 9, 1)                                             # 7 plain
    assert part.high_watermark == 8 and part.last_stable_offset == 2
    sl = part.read(0, 10 ** 6, isolation_level=1)
    assert [o for o, *_ in iter_records(sl.region.read_bytes())] == [0, 1]
    assert len(list(iter_records(part.read(0, 10 ** 6).region.read_bytes()))) == 8
    assert part.read(2, 10 ** 6, isolation_level=1).size == 0
    res = part.write_marker(5, 0, 3, commit=False)                         # 8: ABORT pid 5
    assert res.base_offset == 8 and part.high_watermark == 9
    assert part.last_stable_offset == 5                                    # pid 6 still open
    assert txn_files(part) == ["00000000000000000000.txnindex"]
    raw = open(os.path.join(part.log.dir, "00000000000000000000.txnindex"), "rb").read()
    assert raw == struct.pack(">hqqqq", 0, 5, 2, 8, 5)
    res = part.write_marker(6, 0, 3, commit=True)                          # 9: COMMIT pid 6
    assert res.base_offset == 9 and part.last_stable_offset == 10 == part.high_watermark
    m = marker_of(part.log.read(9, 1000).region.read_bytes())
    assert (m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch) == (6, 0, True, 3)
    sl, lso, aborted = part.read_committed(0, 10 ** 6)
    assert lso == 10 and aborted == [(5, 2)]
    # Control records are never returned as records.
    assert [o for o, *_ in iter_records(sl.region.read_bytes())] == list(range(8))
    assert part.read_committed(9, 10 ** 6)[2] == []                        # fetch after the abort's marker
    assert part.read_committed(10, 10 ** 6)[0].size == 0
    assert part.aborted_transactions(0, 2) == []                           # [0, 2) does not overlap 2..8


def test_non_transactional_batch_while_open_is_invalid_txn_state(tmp_path):
    part = standalone(tmp_path)
    part.append(data(1, pid=5, seq=0, txn=True), 9, 1)
    with pytest.raises(errors.InvalidTxnState):
        part.append(data(1, pid=5, seq=1, txn=False), 9, 1)
    assert part.log_end_offset == 1
    part.append(data(1, pid=5, seq=1, txn=True), 9, 1)
    assert part.log_end_offset == 2 and part.last_stable_offset == 0


def test_write_marker_fencing_codes(tmp_path):
    part = standalone(tmp_path)
    part.append(data(1, pid=5, epoch=2, seq=0, txn=True), 9, 1)
    part.write_marker(5, 2, 4, commit=True)
    with pytest.raises(errors.TransactionCoordinatorFenced) as e:
        part.write_marker(5, 2, 3, commit=True)
    assert e.value.code == 52
    with pytest.raises(errors.InvalidProducerEpoch) as e:
        part.write_marker(5, 1, 4, commit=True)
    assert e.value.code == 47
    assert part.log_end_offset == 2                                        # nothing written for the refused ones
    part.append(data(1, pid=5, epoch=2, seq=1, txn=True), 9, 1)             # 2
    part.write_marker(5, 3, 4, commit=False)                               # 3: fenced by the coordinator
    assert part.producers.entry(5).epoch == 3
    with pytest.raises(errors.InvalidProducerEpoch):
        part.append(data(1, pid=5, epoch=2, seq=2, txn=True), 9, 1)
    part.make_follower(2, 1, [1, 2], [1, 2], 1)
    with pytest.raises(errors.NotLeaderOrFollower):
        part.write_marker(5, 3, 4, commit=True)


def test_coordinator_origin_batches_skip_sequences(tmp_path):
    part = standalone(tmp_path, name="__consumer_offsets-0")
    b = build_batch([Record(0, 1000, b"k", b"v", ())], producer_id=9, producer_epoch=1, base_sequence=-1,
                    is_transactional=True)
    part.append(b, None, -1)
    part.append(b, None, -1)                                               # no duplicate detection either
    assert part.log_end_offset == 2 and part.last_stable_offset == 0
    part.write_marker(9, 1, 0, commit=True)
    assert part.last_stable_offset == 3


def test_follower_applies_markers_and_leader_state_survives_failover(tmp_path):
    leader = standalone(tmp_path, "l-0")
    leader.append(data(2, pid=5, seq=0, txn=True), 9, 1)                   # 0-1
    leader.append(data(1, pid=6, seq=0, txn=True), 9, 1)                   # 2
    leader.write_marker(5, 0, 1, commit=False)                             # 3
    leader.append(data(1), 9, 1)                                           # 4
    follower = standalone(tmp_path, "f-0")
    follower.make_follower(2, 1, [1, 2], [1, 2], 0)
    follower.append_as_follower(leader.log.read(0, 10 ** 6).region.read_bytes())
    assert follower.log_end_offset == 5
    follower.update_follower_hw(5)
    assert follower.last_stable_offset == 2                                # pid 6's transaction from 2
    assert follower.aborted_transactions(0, 5) == [(5, 0)]
    assert follower.log.segments[0].txn_index.all_entries() == [AbortedTxn(5, 0, 3, 2)]
    follower.make_leader(2, [1], [1, 2], 1)
    with pytest.raises(errors.InvalidTxnState):
        follower.append(data(1, pid=6, seq=1), 9, 1)
    follower.write_marker(6, 0, 1, commit=True)                            # 5
    assert follower.last_stable_offset == 6


def test_lso_waits_for_the_marker_to_replicate(tmp_path):
    lc = LC
    part = Partition("t", 0, Log(str(tmp_path / "t-0"), lc), lc, 1)
    part.make_leader(1, [1, 2], [1, 2], 0)
    part.append(data(1, pid=5, seq=0, txn=True), 9, -1)                   # 0
    part.update_follower(2, 1)
    assert part.high_watermark == 1 and part.last_stable_offset == 0
    part.write_marker(5, 0, 1, commit=True)                                # 1
    assert part.last_stable_offset == 0                                    # marker above the HW
    part.update_follower(2, 2)
    assert part.high_watermark == 2 and part.last_stable_offset == 2


def test_rebuild_after_restart_reads_markers(tmp_path):
    d = str(tmp_path / "t-0")
    part = Partition("t", 0, Log(d, LC), LC, 1)
    part.append(data(2, pid=5, seq=0, txn=True), 9, 1)                    # 0-1
    part.append(data(1, pid=6, seq=0, txn=True), 9, 1)                    # 2
    part.write_marker(5, 0, 7, commit=False)                              # 3
    part.append(data(1, pid=7, seq=0, txn=True), 9, 1)                    # 4
    part.write_marker(7, 0, 7, commit=True)                               # 5
    part.log.close()
    # Unclean: the loader empties the recovered segment's .txnindex, the replay re-adds the entry.
    again = Partition("t", 0, Log(d, LC, recovery_point=0), LC, 1, high_watermark=6)
    assert again.log.segments[0].txn_index.all_entries() == [AbortedTxn(5, 0, 3, 2)]
    assert again.last_stable_offset == 2
    assert again.producers.entry(5).coordinator_epoch == 7 and again.producers.entry(5).txn_first_offset == -1
    assert again.producers.entry(7).txn_first_offset == -1
    assert again.producers.open_transactions() == [(2, 6)]
    with pytest.raises(errors.TransactionCoordinatorFenced):
        again.write_marker(5, 0, 6, commit=True)
    again.log.close()
    clean = Partition("t", 0, Log(d, LC, clean_shutdown=True), LC, 1, high_watermark=6)
    assert clean.aborted_transactions(0, 6) == [(5, 0)]
    assert os.path.getsize(os.path.join(d, "00000000000000000000.txnindex")) == 34


def test_truncation_reopens_transactions(tmp_path):
    part = standalone(tmp_path)
    part.append(data(1, pid=5, seq=0, txn=True), 9, 1)                    # 0
    part.write_marker(5, 0, 1, commit=False)                              # 1
    part.append(data(1, pid=5, seq=1, txn=True), 9, 1)                    # 2
    assert part.last_stable_offset == 2
    part.make_follower(2, 1, [1, 2], [1, 2], 0)
    part.truncate_to(1)                                                   # the marker goes: txn from 0 open again
    assert part.producers.open_transactions() == [(0, 5)]
    assert part.last_stable_offset == 0
    assert part.aborted_transactions(0, 10) == [] and txn_files(part) == []


def test_txn_index_entry_lands_in_the_markers_segment(tmp_path):
    lc = LogConfig(segment_bytes=300, file_delete_delay_ms=0)
    part = standalone(tmp_path, config=lc)
    part.append(data(1, pid=5, seq=0, txn=True, value=b"x" * 100), 9, 1)  # 0 (~170 bytes)
    part.append(data(1, value=b"y" * 100), 9, 1)                          # 1: rolls
    part.write_marker(5, 0, 1, commit=False)                              # 2
    assert [s.base_offset for s in part.log.segments] == [0, 1]
    assert txn_files(part) == ["00000000000000000001.txnindex"]
    assert part.aborted_transactions(0, 3) == [(5, 0)]
    sl, lso, aborted = part.read_committed(0, 10 ** 6)
    assert lso == 3 and aborted == [(5, 0)]
    assert batch_header(part.log.read(2, 1000).region.read_bytes()).is_control


# ------------------------------------------------------------------------------------- producer snapshots

SMALL = LogConfig(segment_bytes=400, file_delete_delay_ms=0, min_insync_replicas=1)


def test_snapshot_taken_at_roll_written_by_the_flush(tmp_path):
    part = standalone(tmp_path, config=SMALL)
    part.append(data(1, pid=5, seq=0, value=b"x" * 100), 9, 1)            # 0
    part.append(data(1, pid=5, seq=1, value=b"x" * 100), 9, 1)            # 1
    part.append(data(1, pid=6, seq=0, txn=True, value=b"x" * 100), 9, 1)  # 2: rolls at 2 (~170 bytes each)
    assert [s.base_offset for s in part.log.segments] == [0, 2]
    assert ps.list_offsets(part.log.dir) == []                            # not durable yet: nothing written
    part.log.flush()
    assert ps.list_offsets(part.log.dir) == [2]
    entries = ps.read(ps.snapshot_path(part.log.dir, 2))
    # every retained batch of pid 5 (oldest first); pid 6 wrote nothing below 2
    assert [(e.producer_id, e.last_sequence, e.last_offset, e.offset_delta, e.current_txn_first_offset)
            for e in entries] == [(5, 0, 0, 0, -1), (5, 1, 1, 0, -1)]


def test_restart_loads_the_snapshot_and_replays_the_rest(tmp_path):
    d = str(tmp_path / "t-0")
    part = Partition("t", 0, Log(d, SMALL), SMALL, 1)
    part.append(data(1, pid=5, seq=0, value=b"x" * 100), 9, 1)            # 0
    part.append(data(1, pid=5, seq=1, value=b"x" * 100), 9, 1)            # 1
    part.append(data(1, pid=6, seq=0, txn=True, value=b"x" * 100), 9, 1)  # 2: roll at 2
    part.write_marker(6, 0, 2, commit=False)                               # 3
    part.append(data(1, pid=5, seq=2, txn=False), 9, 1)                   # 4
    part.log.flush()
    # A producer only the snapshot knows proves the snapshot was loaded rather than the whole log replayed.
    ps.write(d, 2, ps.read(ps.snapshot_path(d, 2)) + [SnapshotEntry(99, 3, 7, 1, 0, 5, 4, -1)])
    part.log.close()
    again = Partition("t", 0, Log(d, SMALL, clean_shutdown=True), SMALL, 1, high_watermark=5)
    assert again.producers.entry(99).epoch == 3 and again.producers.last_sequence(99) == 7
    assert again.producers.entry(5).batches == [(0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 4, 4)]
    assert again.producers.entry(6).coordinator_epoch == 2 and again.last_stable_offset == 5
    assert again.append(data(1, pid=5, seq=1), 9, 1).duplicate            # an older retained batch: duplicate
    assert again.aborted_transactions(0, 5) == [(6, 2)]


def test_clean_shutdown_snapshot_at_the_log_end_and_open_transaction(tmp_path):
    d = str(tmp_path / "t-0")
    part = Partition("t", 0, Log(d, LC), LC, 1)
    part.append(data(2, pid=5, seq=0, txn=True), 9, 1)                    # 0-1, open
    part.log.flush()
    assert part.log.snapshot_producer_state() == ps.snapshot_path(d, 2)
    part.log.close()
    again = Partition("t", 0, Log(d, LC, clean_shutdown=True), LC, 1, high_watermark=2)
    assert again.producers.open_transactions() == [(0, 5)] and again.last_stable_offset == 0
    again.write_marker(5, 0, 0, commit=False)
    assert again.aborted_transactions(0, 3) == [(5, 0)] and again.last_stable_offset == 3


def test_unclean_restart_replays_from_below_the_first_emptied_txn_index(tmp_path):
    d = str(tmp_path / "t-0")
    part = Partition("t", 0, Log(d, SMALL), SMALL, 1)
    part.append(data(1, pid=6, seq=0, txn=True, value=b"x" * 100), 9, 1)  # 0
    part.append(data(1, value=b"x" * 100), 9, 1)                          # 1
    part.append(data(1, value=b"x" * 100), 9, 1)                          # 2: roll at 2
    part.write_marker(6, 0, 1, commit=False)                               # 3 in segment 2
    part.append(data(1, value=b"x" * 100), 9, 1)                          # 4: roll at 4 (marker ~80 bytes)
    part.append(data(1, value=b"x" * 100), 9, 1)                          # 5
    part.log.flush()
    assert ps.list_offsets(d) == [2, 4]
    part.log.close()
    # Recovery from offset 3 empties segment 2's .txnindex: the snapshot at 4 is above it, the one at 2 is used.
    again = Partition("t", 0, Log(d, SMALL, recovery_point=3), SMALL, 1, high_watermark=6)
    assert again.log.segments[1].txn_index.all_entries() == [AbortedTxn(6, 0, 3, 4)]
    assert again.log.stale_txn_index_from() is None
    assert again.aborted_transactions(0, 6) == [(6, 0)] and again.last_stable_offset == 6


def test_truncation_forgets_snapshots_above_and_races(tmp_path):
    part = standalone(tmp_path, config=SMALL)
    d = part.log.dir
    for i in range(5):
        part.append(data(1, pid=5, seq=i, value=b"x" * 100), 9, 1)       # rolls at 2 and 4
    part.log.flush()
    assert ps.list_offsets(d) == [2, 4]
    part.append(data(1, pid=5, seq=5, value=b"x" * 100), 9, 1)           # 5
    part.append(data(1, pid=5, seq=6, value=b"x" * 100), 9, 1)           # 6: roll at 6, pending
    taken = part.log._take_due_snapshot()                                  # not durable yet
    assert taken is None and [o for o, *_ in part.log._pending_snapshots] == [6]
    part.make_follower(2, 1, [1, 2], [1, 2], 0)
    part.truncate_to(3)
    assert ps.list_offsets(d) == [2] and part.log._pending_snapshots == []
    assert part.producers.entry(5).batches[-1] == (2, 2, 2, 2)
    # A write racing with a truncation (generation moved) never lands.
    tmp = ps.snapshot_path(d, 3) + ".tmp"
    open(tmp, "wb").close()
    assert not part.log._install_snapshot(tmp, ps.snapshot_path(d, 3), 3, part.log._snapshot_generation - 1)
    part.truncate_fully_and_start_at(10)
    assert ps.list_offsets(d) == []


def test_follower_snapshot_at_a_roll_inside_one_fetch_answer(tmp_path):
    leader = standalone(tmp_path, "l-0", config=LogConfig(segment_bytes=10 ** 6, min_insync_replicas=1))
    for i in range(4):
        leader.append(data(1, pid=5, seq=i, value=b"x" * 100), 9, 1)     # 0-3, ~170 bytes each
    follower = standalone(tmp_path, "f-0", config=SMALL)                  # 400-byte segments: rolls at 2
    follower.make_follower(2, 1, [1, 2], [1, 2], 0)
    follower.append_as_follower(leader.log.read(0, 10 ** 6).region.read_bytes())   # 680 bytes > one segment
    assert [s.base_offset for s in follower.log.segments] == [0, 2]
    follower.log.flush()
    entries = ps.read(ps.snapshot_path(follower.log.dir, 2))
    assert [(e.producer_id, e.last_sequence, e.last_offset) for e in entries] == [(5, 0, 0), (5, 1, 1)]


def test_completed_transactions_are_forgotten_without_readers(tmp_path):
    part = Partition("t", 0, Log(str(tmp_path / "t-0"), LC), LC, 1)
    part.make_leader(1, [1, 2], [1, 2], 0)
    for i in range(50):
        part.append(data(1, pid=5, seq=i, txn=True), 9, -1)
        part.write_marker(5, 0, 0, commit=True)
        part.update_follower(2, part.log_end_offset)          # replicated; nobody computes the LSO
    assert len(part.producers.unreplicated) <= 1


def test_producers_whose_batches_retention_removed_leave_the_snapshots(tmp_path):
    d = str(tmp_path / "t-0")
    part = Partition("t", 0, Log(d, SMALL), SMALL, 1)
    part.append(data(1, pid=5, seq=0, value=b"x" * 100), 9, 1)            # 0
    part.append(data(1, pid=7, seq=0, txn=True, value=b"x" * 100), 9, 1)  # 1: open, survives retention
    part.append(data(1, pid=6, seq=0, value=b"x" * 100), 9, 1)            # 2: roll at 2
    part.append(data(1, pid=6, seq=1, value=b"x" * 100), 9, 1)            # 3
    part.append(data(1, pid=6, seq=2, value=b"x" * 100), 9, 1)            # 4: roll at 4
    assert part.log.delete_old_segments(None, 400, int(time.time() * 1000)) == 1
    assert part.log.log_start_offset == 2
    part.log.roll()                                                         # snapshot at 5, log start 2
    part.log.flush()
    assert sorted({e.producer_id for e in ps.read(ps.snapshot_path(d, 5))}) == [6, 7]
    # An older snapshot still naming pid 5 is filtered at load by the log start too.
    old = ps.read(ps.snapshot_path(d, 4))                                   # taken before the retention
    assert 5 in {e.producer_id for e in old}
    ps.write(d, 5, old)
    part.log.close()
    again = Partition("t", 0, Log(d, SMALL, clean_shutdown=True), SMALL, 1, high_watermark=5)
    assert sorted(again.producers.producers) == [6, 7] and again.last_stable_offset == 1
