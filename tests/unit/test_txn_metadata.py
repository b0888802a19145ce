"""The transaction state machine (kbroker/transaction/metadata.py): Kafka's legal transitions exactly, the
two-phase prepare/complete, epochs (KIP-360), and the __transaction_state record layout (txn_log.py)."""
import struct

import pytest

from kbroker.transaction import metadata as m
from kbroker.transaction import txn_log
from kbroker.transaction.metadata import IllegalTransition, TransactionMetadata

S = m.ALL_STATES

# Kafka's TransactionState.validPreviousStates, written out: (to, from) pairs that are legal.
LEGAL = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "PrepareEpochFence"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareEpochFence": {"Ongoing"},
}


def test_state_ids_and_names_are_kafkas():
    assert [(s.id, s.name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert {s.name for s in S if s.expirable} == {"Empty", "CompleteCommit", "CompleteAbort"}


@pytest.mark.parametrize("to", S, ids=lambda s: s.name)
@pytest.mark.parametrize("frm", S, ids=lambda s: s.name)
def test_every_transition_is_legal_exactly_when_kafka_allows_it(frm, to):
    md = TransactionMetadata("t", 7, 3, 60000, frm, {("a", 0)} if frm is not m.EMPTY else (), 100, 100)
    legal = frm.name in LEGAL[to.name]
    try:
        t = md._prepare(to, 7, 3, -1, 60000, md.partitions, md.start_ms, 200)
    except IllegalTransition:
        assert not legal
        assert md.pending_state is None and md.state is frm
        return
    assert legal
    assert md.pending_state is to and md.state is frm and t.state is to


def _ongoing(partitions=(("a", 0),)):
    md = TransactionMetadata("t", 7, 3, 60000, m.EMPTY, (), -1, 100)
    md.complete_transition(md.prepare_add_partitions(set(partitions), 1000))
    return md


def test_add_partitions_starts_the_transaction_and_only_grows():
    md = _ongoing()
    assert md.state is m.ONGOING and md.start_ms == 1000 and md.partitions == {("a", 0)}
    t = md.prepare_add_partitions({("b", 1)}, 2000)
    assert md.pending and md.partitions == {("a", 0)}          # nothing applied before the write
    md.complete_transition(t)
    assert md.partitions == {("a", 0), ("b", 1)} and md.start_ms == 1000 and md.last_update_ms == 2000
    with pytest.raises(IllegalTransition):                      # only one transition pending at a time
        md.prepare_add_partitions({("c", 0)}, 3000)
        md.prepare_add_partitions({("c", 0)}, 3000)


def test_commit_path_and_a_mismatched_completion_is_refused():
    md = _ongoing()
    t = md.prepare_abort_or_commit(m.PREPARE_COMMIT, 1500)
    wrong = t._replace(partitions=frozenset())
    with pytest.raises(IllegalTransition):
        md.complete_transition(wrong)
    md.complete_transition(t)
    assert md.state is m.PREPARE_COMMIT
    t = md.prepare_complete(1600)
    assert t.state is m.COMPLETE_COMMIT and t.partitions == frozenset()
    md.complete_transition(t)
    assert md.state is m.COMPLETE_COMMIT and md.partitions == set() and md.start_ms == 1000


def test_a_failed_write_leaves_everything_as_it_was():
    md = _ongoing()
    md.prepare_abort_or_commit(m.PREPARE_ABORT, 1500)
    md.abort_transition()
    assert md.state is m.ONGOING and not md.pending
    md.prepare_abort_or_commit(m.PREPARE_ABORT, 1500)      # may be prepared again


def test_init_epoch_bumps_and_kip360():
    md = TransactionMetadata("t", 7, -1, 60000, m.EMPTY, (), -1, 100)
    code, t = md.prepare_increment_epoch(60000, None, 200)
    assert code == 0 and (t.producer_epoch, t.last_producer_epoch) == (0, -1)
    md.complete_transition(t)
    # the same producer retrying with its epoch 0 (KIP-360): bump to 1, remember 0
    code, t = md.prepare_increment_epoch(50000, 0, 300)
    md.complete_transition(t)
    assert (md.producer_epoch, md.last_producer_epoch, md.timeout_ms) == (1, 0, 50000)
    # a retry whose answer was lost (expected = last epoch): the current epoch again, no bump
    code, t = md.prepare_increment_epoch(50000, 0, 400)
    assert code == 0 and t.producer_epoch == 1
    md.complete_transition(t)
    # any other epoch is fenced
    assert md.prepare_increment_epoch(50000, 5, 500) == (90, None) and not md.pending


def test_fence_bumps_once_and_a_failed_fence_is_reused():
    md = _ongoing()
    assert md.prepare_fence_epoch().producer_epoch == 4
    md.pending_state = None
    md.has_failed_fence = True
    assert md.prepare_fence_epoch().producer_epoch == 3


def test_rotation_at_exhausted_epoch():
    md = TransactionMetadata("t", 7, 32766, 60000, m.COMPLETE_COMMIT, (), 10, 100)
    assert md.epoch_exhausted
    t = md.prepare_rotate_producer_id(8, 60000, 200, True)
    md.complete_transition(t)
    assert (md.producer_id, md.producer_epoch, md.last_producer_id, md.last_producer_epoch) == (8, 0, 7, 32766)


def test_value_layout_is_kafkas_v0():
    v = txn_log.value_bytes(1234, 5, 60000, 1, [("b", 2), ("a", 1), ("a", 0)], 777, 555)
    expected = (struct.pack(">hqhib", 0, 1234, 5, 60000, 1) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
                + struct.pack(">qq", 777, 555))
    assert v == expected
    # Empty writes a null partition list (int32 -1), as Kafka
    e = txn_log.value_bytes(1234, 6, 60000, 0, (), 777, -1, empty=True)
    assert e == struct.pack(">hqhibiqq", 0, 1234, 6, 60000, 0, -1, 777, -1)
    assert txn_log.key_bytes("tx-1") == struct.pack(">hh", 0, 4) + b"tx-1"
    rec = txn_log.decode_value(v)
    assert rec.partitions == {("a", 0), ("a", 1), ("b", 2)} and rec.state_id == 1 and rec.start_ms == 555
    assert txn_log.decode_value(None) is None and txn_log.decode_key(txn_log.key_bytes("x")) == "x"
    md = m.from_record("x", txn_log.decode_value(e))
    assert md.state is m.EMPTY and md.producer_epoch == 6 and md.partitions == set()
