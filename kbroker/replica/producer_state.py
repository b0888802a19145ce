"""Producer state of one partition (Kafka's ProducerStateManager + ProducerAppendInfo): idempotence and transactions.

Per producer id (``ProducerEntry``): its current epoch, the metadata of its last ``BATCHES_TO_RETAIN`` (= 5, Kafka's
``NUM_BATCHES_TO_RETAIN``, matching ``max.in.flight.requests.per.connection`` <= 5) data batches
``(first_seq, last_seq, first_offset, last_offset)``, the epoch of the transaction coordinator that sent its last
marker (``coordinator_epoch``, -1 none), the max timestamp of its last append (``last_timestamp``) and the first
offset of its open transaction (``txn_first_offset``, -1 none).

Data batches (producer_id >= 0), checked before the append (``check``) and recorded after it (``update``):
- epoch older than the current one                        -> INVALID_PRODUCER_EPOCH (47)
- a batch equal (first/last seq) to a retained one         -> duplicate: answered with the original offsets,
  unless the batch is transactional and the original lies outside the producer's open transaction (none open, or
  it opened after the original): the original's transaction has ended, so this is no retry but new records that
  reuse its sequences -> OUT_OF_ORDER_SEQUENCE_NUMBER (45). Kafka answers "duplicate" there and the new records
  are lost: librdkafka (2.x) reuses the sequences of the messages its abort_transaction purges from a partition's
  queue, including retries of a batch the broker had written (a Produce that failed with a transport error, then
  the app aborted). Seen once in tests/integration/test_txn_eos.py's broker nemesis (4 of 2,000 records gone, the
  output partition's log: seq 39..42 at offsets 93..96, ABORT at 97, the re-processed records sent again as seq
  39..42 and answered with offset 93). A retry of a batch never crosses the end of its transaction (the clients
  finish or drop in-flight batches before EndTxn, and the coordinator's markers come after that), so no genuine
  retry is refused. librdkafka treats 45 on its oldest in-flight batch as fatal: the app makes a new producer,
  whose init_transactions bumps the epoch, and re-processes from its committed offsets -- the records are written
  once. A reused range that does not equal a retained batch already got 45 by the rule below, as in Kafka.
- epoch newer than the current one (or an unknown producer): its first sequence must be 0
- same epoch, no batch retained (the producer has only written markers in it, e.g. after the coordinator bumped
  the epoch with an abort): first sequence 0 (Kafka: lastSeq is NO_SEQUENCE, and only 0 follows it)
- otherwise first_seq must be last_seq + 1 (int32 wrap to 0) -> else OUT_OF_ORDER_SEQUENCE_NUMBER (45)
- a non-transactional batch while the producer's transaction is open -> INVALID_TXN_STATE (48)
- ``coordinator=True`` (Kafka's AppendOrigin.COORDINATOR: the group coordinator's TxnOffsetCommit writes, which carry
  the producer's id/epoch with baseSequence -1): no sequence checks, no duplicate detection, nothing retained.
The first transactional batch of a producer opens its transaction at that batch's base offset.

Markers (control batches, ``complete_txn``): the leader first asks ``check_marker`` -- a producer epoch older than
the current -> INVALID_PRODUCER_EPOCH (47), a coordinator epoch older than the last recorded ->
TRANSACTION_COORDINATOR_FENCED (52); a newer producer epoch is accepted and becomes current (the coordinator fenced
the producer) -- then records it: the producer's transaction closes (its epoch, coordinator epoch and timestamp
become the marker's). A marker closing a non-empty transaction yields its ``CompletedTxn``; an ABORT yields the
``AbortedTxn`` the caller indexes in the ``.txnindex`` of the marker's segment, with the LSO at that moment: the
first offset of the oldest transaction of ANOTHER producer still open, else the marker offset + 1.

Last stable offset. ``ongoing`` holds the open transactions by first offset; transactions open in offset order, so
the dict's insertion order is offset order and its first key is the oldest. A completed transaction stays
``unreplicated`` until the high watermark passes its marker (if the marker were lost with a leader change the
transaction would be open again). ``first_unstable_offset(hw)`` = the smallest first offset of both (None when
none); the partition's LSO is ``min(that, hw)`` (Kafka's UnifiedLog.lastStableOffset).

Rebuild: ``rebuild`` replays ``Log.producer_batches()`` -- ``(BatchHeader, Marker | None)``, the marker read from the
control batch's record (a header alone cannot tell COMMIT from ABORT) -- with the replication rules (no checks).

Snapshots (``kbroker/log/producer_snapshot.py``, Kafka's ``.snapshot`` format): ``snapshot_entries`` writes one entry
per RETAINED BATCH of each producer, oldest first, every entry carrying the producer's epoch, timestamp, coordinator
epoch and open transaction (a producer with no retained batch: one entry with lastOffset -1). Kafka writes one entry
per producer and its reader keeps the last entry of a producer id, which here is the newest batch: the files stay
readable by Kafka, and a restart keeps up to 5 batches per producer, so a retry of any of them is still recognised
as a duplicate after a rolling restart. ``load_snapshot`` restores that state (unreplicated transactions are not
in a snapshot: its offset is below the high watermark's durable part), then ``replay`` applies the later batches.
"""
from collections import namedtuple

from kbroker.errors import (InvalidProducerEpoch, InvalidTxnState, OutOfOrderSequenceNumber,
                            TransactionCoordinatorFenced)
from kbroker.log.producer_snapshot import SnapshotEntry
from kbroker.log.txn_index import AbortedTxn

BATCHES_TO_RETAIN = 5
INT32_MAX = 2 ** 31 - 1
NONE = -1

ProducerInfo = namedtuple("ProducerInfo", "producer_id producer_epoch last_sequence last_timestamp coordinator_epoch "
                                          "current_txn_start_offset")
CompletedTxn = namedtuple("CompletedTxn", "producer_id first_offset last_offset is_aborted")


class ProducerEntry:
    __slots__ = ("epoch", "batches", "coordinator_epoch", "last_timestamp", "txn_first_offset", "last_offset")

    def __init__(self, epoch):
        self.epoch = epoch
        self.batches = []  # [(first_seq, last_seq, first_offset, last_offset)], oldest first
        self.coordinator_epoch = NONE
        self.last_timestamp = NONE
        self.txn_first_offset = NONE
        self.last_offset = NONE   # last offset of the producer's newest batch, data or marker

    def set_epoch(self, epoch):
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches = []   # sequences restart with the epoch; an open transaction stays open (Kafka)

    def __repr__(self):
        return "ProducerEntry(epoch=%d, batches=%s, coordinator_epoch=%d, txn_first_offset=%d)" % (
            self.epoch, self.batches, self.coordinator_epoch, self.txn_first_offset)


def _next_seq(seq):
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    def __init__(self):
        self.producers = {}
        self.ongoing = {}        # first offset -> producer id, oldest first (insertion order = offset order)
        self.unreplicated = {}   # first offset -> (producer id, marker offset): completed, marker not below the HW

    # ------------------------------------------------------------------------------------------ data batches
    def check(self, pid, epoch, first_seq, last_seq, is_transactional=False, coordinator=False):
        """Validate a data batch before append. Returns (first_offset, last_offset) of the original if it is a
        duplicate, None if it must be appended; raises on a fenced epoch, a sequence gap or a transaction
        state violation (module docstring)."""
        if pid < 0:
            return None
        e = self.producers.get(pid)
        if e is not None and epoch < e.epoch:
            raise InvalidProducerEpoch("producer %d epoch %d is older than %d" % (pid, epoch, e.epoch))
        if not coordinator:
            if e is None or epoch != e.epoch:
                if first_seq != 0:
                    raise OutOfOrderSequenceNumber("producer %d epoch %d must start at sequence 0, got %d"
                                                   % (pid, epoch, first_seq))
            else:
                batches = e.batches
                for fs, ls, fo, lo in batches:
                    if fs == first_seq and ls == last_seq:
                        if is_transactional and not 0 <= e.txn_first_offset <= fo:
                            # The original belongs to a transaction a marker has ended: not a retry (no client
                            # retries a batch across the end of its transaction) but new records reusing its
                            # sequences. Answering "duplicate" would drop them silently (module docstring).
                            raise OutOfOrderSequenceNumber(
                                "producer %d epoch %d: sequences %d..%d were written at offsets %d..%d in a "
                                "transaction that has ended; a new transaction must continue at %d"
                                % (pid, epoch, fs, ls, fo, lo, _next_seq(batches[-1][1])))
                        return fo, lo
                expected = _next_seq(batches[-1][1]) if batches else 0
                if first_seq != expected:
                    raise OutOfOrderSequenceNumber("producer %d: expected sequence %d, got %d"
                                                   % (pid, expected, first_seq))
        if e is not None and e.txn_first_offset >= 0 and not is_transactional:
            raise InvalidTxnState("producer %d has a transaction open since offset %d: expected a transactional "
                                  "batch" % (pid, e.txn_first_offset))
        return None

    def update(self, pid, epoch, first_seq, last_seq, first_offset, last_offset, is_transactional=False,
               timestamp=NONE):
        """Record an appended data batch (leader after ``check``, follower and replay without). A batch with
        first_seq < 0 (a coordinator's write) retains no sequence metadata."""
        if pid < 0:
            return
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(epoch)
        elif e.epoch != epoch:
            e.set_epoch(epoch)
        e.last_offset = last_offset
        if first_seq >= 0:
            batches = e.batches
            batches.append((first_seq, last_seq, first_offset, last_offset))
            if len(batches) > BATCHES_TO_RETAIN:
                del batches[0]
        if timestamp > e.last_timestamp:
            e.last_timestamp = timestamp
        if is_transactional and e.txn_first_offset < 0:
            e.txn_first_offset = first_offset
            self.ongoing[first_offset] = pid

    # ---------------------------------------------------------------------------------------------- markers
    def check_marker(self, pid, epoch, coordinator_epoch):
        """Leader check of a COMMIT/ABORT marker before it is written (module docstring)."""
        e = self.producers.get(pid)
        if e is None:
            return
        if epoch < e.epoch:
            raise InvalidProducerEpoch("marker for producer %d with epoch %d older than %d" % (pid, epoch, e.epoch))
        if coordinator_epoch < e.coordinator_epoch:
            raise TransactionCoordinatorFenced("marker for producer %d from coordinator epoch %d older than %d"
                                               % (pid, coordinator_epoch, e.coordinator_epoch))

    def complete_txn(self, pid, epoch, coordinator_epoch, commit, offset, timestamp=NONE):
        """Record a marker written at ``offset``. Returns the AbortedTxn to index (an ABORT closing a non-empty
        transaction), else None."""
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(epoch)
        first = e.txn_first_offset
        aborted = None
        if first >= 0:
            if not commit:
                aborted = AbortedTxn(pid, first, offset, self._lso_after(pid, offset))
            self.ongoing.pop(first, None)
            self.unreplicated[first] = (pid, offset)
        e.set_epoch(epoch)
        e.coordinator_epoch = coordinator_epoch
        e.last_offset = offset
        if timestamp > e.last_timestamp:
            e.last_timestamp = timestamp
        e.txn_first_offset = NONE
        return aborted

    def _lso_after(self, pid, offset):
        """The LSO once ``pid``'s transaction ends at ``offset``: the oldest other open transaction's first
        offset, else offset + 1 (Kafka's ProducerStateManager.lastStableOffset(completedTxn))."""
        for first, other in self.ongoing.items():
            if other != pid:
                return first
        return offset + 1

    # ------------------------------------------------------------------------------------------------ LSO
    def on_high_watermark(self, hw):
        """Forget the completed transactions whose marker is below ``hw`` (Kafka's onHighWatermarkUpdated). Done
        lazily -- by every LSO computation and by every marker appended (so the dict holds at most the markers
        above the HW, even for a partition nobody reads): the HW only moves forward between rebuilds."""
        unrep = self.unreplicated
        if unrep:
            done = [first for first, (_pid, last) in unrep.items() if last < hw]
            for first in done:
                del unrep[first]

    def first_unstable_offset(self, hw):
        """First offset of the oldest transaction that is open or whose marker is not below ``hw``; None when
        there is none (``on_high_watermark(hw)`` first)."""
        unrep = self.unreplicated
        if unrep:
            self.on_high_watermark(hw)
        best = None
        if self.ongoing:
            best = next(iter(self.ongoing))
        if unrep:
            m = min(unrep)
            if best is None or m < best:
                best = m
        return best

    # ------------------------------------------------------------------------------------------- queries
    def last_sequence(self, pid):
        e = self.producers.get(pid)
        return e.batches[-1][1] if e and e.batches else -1

    def entry(self, pid):
        return self.producers.get(pid)

    def active(self):
        """Every producer's state, as DescribeProducers answers it (``ProducerInfo``)."""
        return [ProducerInfo(pid, e.epoch, e.batches[-1][1] if e.batches else -1, e.last_timestamp,
                             e.coordinator_epoch, e.txn_first_offset)
                for pid, e in self.producers.items()]

    def open_transactions(self):
        """``[(first_offset, producer_id)]`` of the open transactions, oldest first."""
        return list(self.ongoing.items())

    # ------------------------------------------------------------------------------------------ snapshots
    def snapshot_entries(self, log_start_offset=0):
        """``[SnapshotEntry]`` of the state (module docstring), without the producers whose every batch retention
        removed (newest batch below ``log_start_offset``, no open transaction): a producer's state lives as long as
        the log holds one of its batches, as when it is rebuilt from the log alone. Safe to call from another
        thread: the producer map is copied in one C call."""
        out = []
        for pid, e in list(self.producers.items()):
            if e.last_offset < log_start_offset and e.txn_first_offset < 0:
                continue
            batches = list(e.batches)
            if not batches:
                out.append(SnapshotEntry(pid, e.epoch, -1, -1, 0, e.last_timestamp, e.coordinator_epoch,
                                         e.txn_first_offset))
            for fs, ls, fo, lo in batches:
                out.append(SnapshotEntry(pid, e.epoch, ls, lo, lo - fo, e.last_timestamp, e.coordinator_epoch,
                                         e.txn_first_offset))
        return out

    def load_snapshot(self, entries, offset, log_start_offset=0):
        """Replace the state with the ``entries`` of the snapshot at ``offset``, leaving out the producers whose
        batches are all below ``log_start_offset`` (see ``snapshot_entries``; a producer that wrote only markers
        before the snapshot counts as ending at ``offset - 1``, an upper bound: the file does not say)."""
        self.clear()
        producers = self.producers
        for en in entries:
            last = en.last_offset if en.last_offset >= 0 else offset - 1
            if last < log_start_offset and en.current_txn_first_offset < 0:
                continue
            e = producers.get(en.producer_id)
            if e is None or e.epoch != en.producer_epoch:
                e = producers[en.producer_id] = ProducerEntry(en.producer_epoch)
            if en.last_offset >= 0 and en.last_sequence >= 0:
                first_seq = en.last_sequence - en.offset_delta
                if first_seq < 0:
                    first_seq += INT32_MAX + 1          # the batch's sequences wrapped past INT32_MAX
                e.batches.append((first_seq, en.last_sequence, en.last_offset - en.offset_delta, en.last_offset))
                if len(e.batches) > BATCHES_TO_RETAIN:
                    del e.batches[0]
            e.last_timestamp = en.timestamp
            e.coordinator_epoch = en.coordinator_epoch
            e.txn_first_offset = en.current_txn_first_offset
            if last > e.last_offset:
                e.last_offset = last
        opened = sorted((e.txn_first_offset, pid) for pid, e in producers.items() if e.txn_first_offset >= 0)
        for first, pid in opened:
            self.ongoing[first] = pid

    # ------------------------------------------------------------------------------------------- rebuild
    def clear(self):
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()

    def rebuild(self, batches, hw=None, on_abort=None):
        """Replay ``batches`` -- ``(BatchHeader, Marker | None)`` in offset order (``Log.producer_batches()``) --
        over an empty state. ``on_abort(AbortedTxn)`` is called for every aborted transaction (the partition
        re-indexes them); completed transactions whose marker is below ``hw`` are forgotten at once."""
        self.clear()
        self.replay(batches, hw, on_abort)

    def replay(self, batches, hw=None, on_abort=None):
        """Apply ``batches`` on top of the current state (after a snapshot: the batches after its offset)."""
        for h, marker in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            base = h.base_offset
            if h.is_control:
                if marker is None:
                    continue                     # an unknown control type: no transaction meaning
                e = self.producers.get(pid)
                first = e.txn_first_offset if e is not None else NONE
                aborted = self.complete_txn(pid, h.producer_epoch, marker.coordinator_epoch, marker.commit, base,
                                            h.max_timestamp)
                if aborted is not None and on_abort is not None:
                    on_abort(aborted)
                if first >= 0 and hw is not None and base < hw:
                    del self.unreplicated[first]     # replicated already: keeps a long replay's memory flat
                continue
            seq, lod = h.base_sequence, h.last_offset_delta
            self.update(pid, h.producer_epoch, seq, seq + lod if seq >= 0 else -1, base, base + lod,
                        h.is_transactional, h.max_timestamp)
