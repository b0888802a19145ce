"""Log compaction with transactions (kbroker/log/compact.py, cleaner.py; KIP-98's rules for compacted topics):
aborted data discarded, markers kept until their transaction is empty and delete.retention.ms has passed, the
producer's last batch kept as an empty header, never a pass past an open transaction or the last stable offset."""
import gc
import os

from kbroker.log import Log, LogConfig, LogManager
from kbroker.log.compact import clean_log, segment_batches
from kbroker.log.txn_index import AbortedTxn
from kbroker.record import RecordConfig, build_batch, validate_for_append
from kbroker.record.batch import ATTR_DELETE_HORIZON, batch_header, batch_records
from kbroker.record.control import marker_batch, marker_of

NOW = 1_700_000_000_000
RETENTION = 1000
CFG = LogConfig(segment_bytes=1 << 20, cleanup_policy="compact", delete_retention_ms=RETENTION,
                min_compaction_lag_ms=0, min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0,
                index_interval_bytes=100, segment_index_bytes=4096)


def _append(log, data, ts=NOW):
    info = validate_for_append(bytearray(data), log.log_end_offset, ts, RecordConfig(compacted=True))
    log.append(info, now=ts)
    return info.first_offset


def data(log, records, pid=-1, transactional=False, seq=0, ts=NOW):
    """One batch of ``records`` [(key, value)]; returns its base offset."""
    recs = [(i, ts + i, k, v, ()) for i, (k, v) in enumerate(records)]
    return _append(log, build_batch(recs, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                    base_sequence=seq if pid >= 0 else -1, is_transactional=transactional), ts)


def marker(log, pid, commit, ts=NOW):
    return _append(log, marker_batch(pid, 0, 5, commit, ts), ts)


def abort(log, pid, first_offset, ts=NOW):
    """An ABORT marker and its .txnindex entry (what Partition.write_marker does); returns the marker's offset."""
    offset = marker(log, pid, False, ts)
    assert log.add_aborted_txn(AbortedTxn(pid, first_offset, offset, offset + 1))
    return offset


def dump(log):
    """Every stored batch: (base, last, producer id, 'T' txn/'C' control/'-' flags, horizon or None, content) where
    content is [(offset, key, value)] for data and 'COMMIT'/'ABORT'/'empty' for control batches."""
    out = []
    for seg in log.segments:
        for raw in segment_batches(seg):
            h = batch_header(raw)
            flags = ("T" if h.is_transactional else "-") + ("C" if h.is_control else "-")
            horizon = h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None
            if h.is_control:
                m = marker_of(raw)
                content = "empty" if h.records_count == 0 else ("COMMIT" if m.commit else "ABORT")
            else:
                content = [(o, k, v) for o, _ts, k, v, _hd in batch_records(raw, 0, h)]
            out.append((h.base_offset, h.last_offset, h.producer_id, flags, horizon, content))
    return out


def txn_entries(log):
    return [t for seg in log.segments for t in seg.txn_index.all_entries()]


def test_aborted_data_discarded_committed_kept_and_markers_stay_while_their_data_does(tmp_path):
    log = Log(str(tmp_path / "t-0"), CFG)
    assert data(log, [(b"k1", b"v0")]) == 0
    assert data(log, [(b"k1", b"c1"), (b"k2", b"c2")], pid=100, transactional=True) == 1
    assert marker(log, 100, True) == 3
    assert data(log, [(b"k1", b"a1"), (b"k3", b"a3")], pid=200, transactional=True) == 4
    assert abort(log, 200, 4) == 6
    assert data(log, [(b"k4", b"v4")]) == 7
    log.roll()

    result = clean_log(log, 0, NOW)
    assert result.end_offset == 8
    assert result.aborted_records_removed == 2
    assert result.markers_removed == 0
    assert dump(log) == [
        # k1=v0 is shadowed by the COMMITTED k1=c1 at 1, not by the aborted k1=a1 at 4
        (1, 2, 100, "T-", None, [(1, b"k1", b"c1"), (2, b"k2", b"c2")]),
        (3, 3, 100, "TC", None, "COMMIT"),        # its transaction's data was read in this pass
        (4, 5, 200, "T-", None, []),             # producer 200's last batch: an empty header
        (6, 6, 200, "TC", None, "ABORT"),
        (7, 7, -1, "--", None, [(7, b"k4", b"v4")]),
    ]
    # The kept ABORT marker keeps its index entry in the cleaned segment (its empty batch still belongs to it).
    assert txn_entries(log) == [AbortedTxn(200, 4, 6, 7)]
    assert sorted(n for n in os.listdir(log.dir) if n.startswith("0000")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000000.txnindex", "00000000000000000008.index", "00000000000000000008.log",
        "00000000000000000008.timeindex"]

    # A second pass changes nothing: the committed data and the aborted empty header keep both markers.
    before = dump(log)
    again = clean_log(log, 0, NOW + 10 * RETENTION)
    assert again.groups_rewritten == 0
    assert dump(log) == before
    assert txn_entries(log) == [AbortedTxn(200, 4, 6, 7)]
    log.close()

    reopened = Log(log.dir, CFG, recovery_point=8, clean_shutdown=True)   # (a recovery empties .txnindex files:
    assert dump(reopened) == before                                        # the producer-state replay re-adds)
    assert txn_entries(reopened) == [AbortedTxn(200, 4, 6, 7)]
    reopened.close()


def test_markers_of_emptied_transactions_get_a_horizon_then_go(tmp_path):
    log = Log(str(tmp_path / "t-0"), CFG)
    assert data(log, [(b"k1", b"t1"), (b"k2", b"t2")], pid=100, transactional=True) == 0
    assert marker(log, 100, True) == 2
    assert data(log, [(b"k1", b"a")], pid=200, transactional=True) == 3
    assert abort(log, 200, 3) == 4
    assert data(log, [(b"k1", b"n1"), (b"k2", b"n2")]) == 5
    assert data(log, [(b"k5", b"x")], pid=200, seq=1) == 7      # producer 200's last batch: idempotent data
    assert data(log, [(b"k6", b"y")], pid=100, seq=2) == 8
    log.roll()
    live = [(5, 6, -1, "--", None, [(5, b"k1", b"n1"), (6, b"k2", b"n2")]),
            (7, 7, 200, "--", None, [(7, b"k5", b"x")]),
            (8, 8, 100, "--", None, [(8, b"k6", b"y")])]

    # Pass 1: the transactions' data goes (superseded / aborted); both markers stay this pass (data was read).
    r1 = clean_log(log, 0, NOW)
    assert (r1.aborted_records_removed, r1.markers_removed, r1.min_horizon) == (1, 0, None)
    assert dump(log) == [(2, 2, 100, "TC", None, "COMMIT"), (4, 4, 200, "TC", None, "ABORT")] + live
    assert txn_entries(log) == [AbortedTxn(200, 3, 4, 5)]

    # Pass 2: no batch of either transaction is left: both markers get horizon now + delete.retention.ms, and
    # the ABORT marker's index entry goes (nothing left for a read_committed consumer to skip).
    t2 = NOW + 5
    r2 = clean_log(log, 0, t2)
    assert r2.markers_removed == 0
    assert r2.min_horizon == t2 + RETENTION
    assert dump(log) == [(2, 2, 100, "TC", t2 + RETENTION, "COMMIT"),
                         (4, 4, 200, "TC", t2 + RETENTION, "ABORT")] + live
    assert txn_entries(log) == []

    # Before the horizon nothing changes; at it both markers go.
    assert clean_log(log, 0, t2 + RETENTION - 1).groups_rewritten == 0
    r3 = clean_log(log, 0, t2 + RETENTION)
    assert (r3.markers_removed, r3.min_horizon) == (2, None)
    assert dump(log) == live
    log.close()


def test_producer_that_wrote_only_markers_keeps_its_last_marker_as_an_empty_batch(tmp_path):
    log = Log(str(tmp_path / "t-0"), CFG)
    assert marker(log, 400, False) == 0          # e.g. the coordinator aborting a fenced producer's empty txn
    assert data(log, [(b"k", b"v")]) == 1
    log.roll()
    clean_log(log, 0, NOW)
    assert dump(log)[0] == (0, 0, 400, "TC", NOW + RETENTION, "ABORT")
    r = clean_log(log, 0, NOW + RETENTION)
    assert r.markers_removed == 1
    assert dump(log) == [(0, 0, 400, "TC", None, "empty"), (1, 1, -1, "--", None, [(1, b"k", b"v")])]
    assert clean_log(log, 0, NOW + 2 * RETENTION).groups_rewritten == 0   # stays, unchanged
    log.close()


def test_never_cleans_at_or_past_an_open_transaction(tmp_path):
    log = Log(str(tmp_path / "t-0"), CFG)
    data(log, [(b"k1", b"v1")])
    data(log, [(b"k1", b"v2")])
    log.roll()
    assert data(log, [(b"k1", b"open")], pid=300, transactional=True) == 2
    data(log, [(b"k2", b"z")])
    log.roll()
    data(log, [(b"k1", b"later")])   # above the open transaction: must not shadow anything yet
    log.roll()

    r = clean_log(log, 0, NOW)
    assert r.end_offset == 2         # the log's own open transaction bounds the pass
    assert dump(log) == [(1, 1, -1, "--", None, [(1, b"k1", b"v2")]),
                         (2, 2, 300, "T-", None, [(2, b"k1", b"open")]),
                         (3, 3, -1, "--", None, [(3, b"k2", b"z")]),
                         (4, 4, -1, "--", None, [(4, b"k1", b"later")])]

    # The transaction aborts: its data goes, and k1=v2 is no longer shadowed by it -- only by k1=later.
    assert abort(log, 300, 2) == 5
    log.roll()
    r = clean_log(log, r.end_offset, NOW)
    assert r.end_offset == 6
    assert r.aborted_records_removed == 1
    assert [b for b in dump(log) if b[3] != "TC"] == [(2, 2, 300, "T-", None, []),
                                                     (3, 3, -1, "--", None, [(3, b"k2", b"z")]),
                                                     (4, 4, -1, "--", None, [(4, b"k1", b"later")])]
    log.close()


def test_aborted_records_never_shadow_committed_ones(tmp_path):
    log = Log(str(tmp_path / "t-0"), CFG)
    data(log, [(b"k", b"committed")])
    assert data(log, [(b"k", b"aborted")], pid=7, transactional=True) == 1
    abort(log, 7, 1)
    data(log, [(b"other", b"x")])
    log.roll()
    clean_log(log, 0, NOW)
    assert [b[5] for b in dump(log) if b[3] == "--"] == [[(0, b"k", b"committed")], [(3, b"other", b"x")]]
    log.close()


def test_stable_offset_bounds_the_pass(tmp_path):
    log = Log(str(tmp_path / "t-0"), CFG)
    for i in range(4):
        data(log, [(b"k", b"v%d" % i)])
        log.roll()
    assert clean_log(log, 0, NOW, stable_offset=2).end_offset == 2
    assert [b[0] for b in dump(log)] == [1, 2, 3]        # only [0, 2) was cleaned
    assert clean_log(log, 0, NOW, stable_offset=None).end_offset == 4
    assert [b[0] for b in dump(log)] == [3]
    log.close()


def test_log_cleaner_asks_the_partition_for_its_last_stable_offset(tmp_path):
    mgr = LogManager([str(tmp_path / "d")], CFG, topic_config=lambda topic: CFG)
    log = mgr.get_or_create_log(("t", 0))
    for i in range(4):
        data(log, [(b"k", b"v%d" % i)])
        log.roll()
    asked = []

    def lso(tp):
        asked.append(tp)
        return 2 if tp == ("t", 0) else None
    mgr.cleaner.stable_offset_of = lso
    ltc = mgr.cleaner.to_clean(("t", 0), log, NOW)
    assert ltc.first_uncleanable == 2
    done = mgr.clean_once(NOW)
    assert done[("t", 0)].end_offset == 2
    assert ("t", 0) in asked
    assert [b[0] for b in dump(log)] == [1, 2, 3]
    mgr.cleaner.stable_offset_of = lambda tp: None   # no partition: the active segment bounds it
    assert mgr.clean_once(NOW)[("t", 0)].end_offset == 4
    mgr.shutdown()


def test_log_cleaner_due_for_a_marker_horizon_without_new_writes(tmp_path):
    mgr = LogManager([str(tmp_path / "d")], CFG, topic_config=lambda topic: CFG)
    log = mgr.get_or_create_log(("t", 0))
    data(log, [(b"k", b"t")], pid=9, transactional=True)
    marker(log, 9, True)
    data(log, [(b"k", b"n")], pid=9, seq=1)
    log.roll()
    mgr.clean_once(NOW)            # the transaction's data is superseded; its marker stays this pass
    mgr.clean_once(NOW)            # nothing dirty: not due (ratio 0 of 0 cleanable bytes)
    cleaner = mgr.cleaner
    assert cleaner.clean_log(cleaner.to_clean(("t", 0), log, NOW), NOW).min_horizon == NOW + RETENTION
    assert [b[:5] for b in dump(log)] == [(1, 1, 9, "TC", NOW + RETENTION), (2, 2, 9, "--", None)]
    assert cleaner.due_logs(NOW + RETENTION - 1) == []
    assert [ltc.tp for ltc in cleaner.due_logs(NOW + RETENTION)] == [("t", 0)]
    assert mgr.clean_once(NOW + RETENTION)[("t", 0)].markers_removed == 1
    assert [b[0] for b in dump(log)] == [2]
    mgr.shutdown()


# ------------------------------------------------------------------------------------------------ crash safety
class Crash(BaseException):
    """A simulated process death: not an Exception, so no cleanup handler runs."""


SMALL = LogConfig(segment_bytes=400, cleanup_policy="compact", delete_retention_ms=RETENTION,
                  min_compaction_lag_ms=0, min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0,
                  index_interval_bytes=100, segment_index_bytes=4096)


def _txn_fixture(d):
    """Transactions of three producers over several segments: every third one aborted, keys k0..k3."""
    log = Log(d, SMALL)
    seqs = {100: 0, 200: 0, 300: 0}
    for i in range(18):
        pid = (100, 200, 300)[i % 3]
        first = data(log, [(b"k%d" % (i % 4), b"v%d" % i), (b"k%d" % ((i + 1) % 4), b"w%d" % i)], pid=pid,
                     transactional=True, seq=seqs[pid])
        seqs[pid] += 2
        if i % 3 == 1:
            abort(log, pid, first)
        else:
            marker(log, pid, True)
    data(log, [(b"end", b"x")])
    log.roll()
    return log


def _converge(log):
    for now in (NOW, NOW + 1, NOW + 10 * RETENTION, NOW + 20 * RETENTION):
        clean_log(log, 0, now)
    return dump(log)


def test_crash_at_every_step_of_a_transactional_clean_converges(tmp_path):
    ref = _txn_fixture(str(tmp_path / "ref" / "t-0"))
    steps = []
    clean_log(ref, 0, NOW, hook=steps.append)
    assert len(steps) >= 8 and len(steps) % 4 == 0      # at least two groups rewritten
    expected = _converge(ref)
    ref.close()
    # The latest committed value of every key, and nothing of an aborted transaction, whatever the crash.
    values = {}
    for i in range(18):
        if i % 3 != 1:
            values[b"k%d" % (i % 4)] = b"v%d" % i
            values[b"k%d" % ((i + 1) % 4)] = b"w%d" % i
    values[b"end"] = b"x"
    assert {k: v for b in expected if isinstance(b[5], list) for _o, k, v in b[5]} == values
    assert len(values) == 5
    # Only the markers of each producer's last transaction stay: its last batch (kept for the producer state)
    # belongs to that transaction. Every other marker went once its transaction was empty and its horizon passed.
    assert expected == [(45, 46, 100, "T-", None, [(45, b"k3", b"v15"), (46, b"k0", b"w15")]),
                        (47, 47, 100, "TC", None, "COMMIT"),
                        (48, 49, 200, "T-", None, []),
                        (50, 50, 200, "TC", None, "ABORT"),
                        (51, 52, 300, "T-", None, [(51, b"k1", b"v17"), (52, b"k2", b"w17")]),
                        (53, 53, 300, "TC", None, "COMMIT"),
                        (54, 54, -1, "--", None, [(54, b"end", b"x")])]
    for k in range(len(steps)):
        d = str(tmp_path / ("crash%d" % k) / "t-0")
        log = _txn_fixture(d)
        seen = []

        def hook(step, k=k):
            seen.append(step)
            if len(seen) == k + 1:
                raise Crash(step)
        try:
            clean_log(log, 0, NOW, hook=hook)
        except Crash:
            pass
        del log
        gc.collect()
        reopened = Log(d, SMALL, recovery_point=0, clean_shutdown=True)
        assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap", ".deleted"))], k
        assert _converge(reopened) == expected, (k, seen)
        reopened.close()


# ------------------------------------------------------------------------------------------------ producer state
def _state(log):
    from kbroker.replica.producer_state import ProducerStateManager

    psm = ProducerStateManager()
    psm.rebuild(log.producer_batches(), hw=log.log_end_offset)
    return sorted(psm.active()), psm.open_transactions()


def test_producer_state_rebuilt_from_a_cleaned_log_is_unchanged(tmp_path):
    log = _txn_fixture(str(tmp_path / "t-0"))
    # A fourth producer leaves a transaction open at the end, above everything cleanable.
    open_at = data(log, [(b"k0", b"open")], pid=400, transactional=True)
    before = _state(log)
    assert before[1] == [(open_at, 400)]
    assert [(p.producer_id, p.last_sequence, p.current_txn_start_offset) for p in before[0]] == [
        (100, 11, -1), (200, 11, -1), (300, 11, -1), (400, 0, open_at)]
    for now in (NOW, NOW + 1, NOW + 10 * RETENTION, NOW + 20 * RETENTION):
        clean_log(log, 0, now)
        assert _state(log) == before, now
    log.close()
