"""TransactionCoordinator: the transaction APIs for the transactional ids of the ``__transaction_state``
partitions led here (Kafka's TransactionCoordinator, KIP-98 / KIP-360 / KIP-664).

Every public method answers a Kafka error code (plus what the API returns) and may yield: it writes to
``__transaction_state`` with acks=-1 (state_manager.py). Everything runs in greenlets of one thread, so between two
writes a method's checks and ``prepare_*`` are atomic; the metadata's ``pending_state`` keeps a second request off
an id while a write (or the markers) are in flight: it answers CONCURRENT_TRANSACTIONS (51), retriable.

InitProducerId with a transactional id (``init_producer_id``):
- ``""`` -> INVALID_REQUEST (42); a timeout <= 0 or above transaction.max.timeout.ms -> INVALID_TRANSACTION_TIMEOUT
  (50); a new id gets a producer id from the block lease and epoch 0 (logged as Empty).
- idle (Empty/CompleteCommit/CompleteAbort): epoch + 1 (the previous instance is fenced: its next request gets
  PRODUCER_FENCED 90 / INVALID_PRODUCER_EPOCH 47); at epoch 32766 a new producer id at epoch 0 instead.
- KIP-360 (``expected`` = the caller's producer id/epoch, v3+): a producer id that is neither the current one nor
  (with an exhausted epoch) the last one -> PRODUCER_FENCED; its current epoch bumps; its previous epoch (a retry
  whose answer was lost) gets the current epoch again; any other epoch -> PRODUCER_FENCED.
- Ongoing: the coordinator fences the running producer (epoch + 1, PrepareEpochFence -> PrepareAbort logged), writes
  ABORT markers, and answers CONCURRENT_TRANSACTIONS; the client retries and, once the abort completed, gets the
  epoch bumped once more. PrepareCommit/PrepareAbort (markers in flight) -> CONCURRENT_TRANSACTIONS.
AddPartitionsToTxn / AddOffsetsToTxn (``add_partitions``): unknown id or another producer id ->
INVALID_PRODUCER_ID_MAPPING (49); another epoch -> PRODUCER_FENCED; markers in flight -> CONCURRENT_TRANSACTIONS;
partitions already in the Ongoing transaction -> 0 at once; else Ongoing with the union (start time set when the
transaction starts).
EndTxn (``end_txn``): Ongoing -> PrepareCommit/PrepareAbort logged, the client answered, markers sent to every
partition's leader (markers.py); when all are written CompleteCommit/CompleteAbort is logged (retried while this
broker still coordinates). A retried EndTxn of a completed transaction answers 0, of one whose markers are in
flight CONCURRENT_TRANSACTIONS; the other result, or EndTxn on Empty -> INVALID_TXN_STATE (48).
Timeouts: every transaction.abort.timed.out.transaction.cleanup.interval.ms the coordinator aborts the transactions
Ongoing for longer than their timeout as a fence does (epoch + 1: the producer's next request is fenced).
Expiry: every transaction.remove.expired.transaction.cleanup.interval.ms idle ids older than
transactional.id.expiration.ms are tombstoned.
Leadership: ``load_partition(index, epoch)`` on becoming the partition's leader (then the markers of transactions
left in PrepareCommit/PrepareAbort are sent again), ``unload_partition(index)`` when it moves away (their in-flight
markers are dropped: the new coordinator resends them).
"""
import logging

from kbroker import errors
from kbroker.transaction import metadata as m
from kbroker.transaction.markers import PendingMarkers
from kbroker.transaction.state_manager import NONE, new_metadata

log = logging.getLogger(__name__)

COMPLETE_RETRY_MS = 100         # backoff between attempts to log CompleteCommit/CompleteAbort


class TransactionCoordinator:
    """``config``: the transaction.* keys; ``scheduler``: ``now_ms()``, ``call_later(ms, fn, *args)``;
    ``state``: TransactionStateManager; ``markers``: TxnMarkerChannel (``add``, ``cancel_partition``);
    ``producer_ids``: ``next_id()``."""

    def __init__(self, config, scheduler, state, markers, producer_ids):
        self.scheduler = scheduler
        self.state = state
        self.markers = markers
        self.producer_ids = producer_ids
        self.max_timeout_ms = config["transaction.max.timeout.ms"]
        self.active = True

    def now(self):
        return self.scheduler.now_ms()

    def partition_for(self, transactional_id):
        return self.state.partition_for(transactional_id)

    def _lookup(self, transactional_id):
        if not self.active:
            return errors.COORDINATOR_NOT_AVAILABLE, None, None
        return self.state.get(transactional_id)

    # ------------------------------------------------------------------------------------ InitProducerId
    def init_producer_id(self, transactional_id, timeout_ms, expected=None):
        """-> (error code, producer id, epoch); ``expected``: (producer id, epoch) or None (module docstring)."""
        if transactional_id == "":
            return errors.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return errors.INVALID_TRANSACTION_TIMEOUT, -1, -1
        code, entry, md = self._lookup(transactional_id)
        if code:
            return code, -1, -1
        if md is None:
            pid = self._new_producer_id()
            if pid is None:
                return errors.COORDINATOR_NOT_AVAILABLE, -1, -1
            code, entry, md = self._lookup(transactional_id)
            if code:
                return code, -1, -1
            md = self.state.put_if_absent(entry, new_metadata(transactional_id, pid, timeout_ms, self.now()))
        code, transit = self._prepare_init(md, timeout_ms, expected)
        if code:
            return code, -1, -1
        if transit.state is m.PREPARE_EPOCH_FENCE:
            code = self._end(transactional_id, transit.producer_id, transit.producer_epoch, False, False)
            if md.pending_state is m.PREPARE_EPOCH_FENCE:
                md.pending_state = None        # refused before the abort took the fence over: nothing logged
            return (code or errors.CONCURRENT_TRANSACTIONS), -1, -1
        code = self.state.append(entry, md, transit)
        if code:
            return code, -1, -1
        log.info("initialized transactional id %r: producer id %d epoch %d", transactional_id, md.producer_id,
                 md.producer_epoch)
        return NONE, md.producer_id, md.producer_epoch

    def _new_producer_id(self):
        """A producer id from the leased block, or None when no block can be leased now (the coordination backend
        is unreachable: the client retries on COORDINATOR_NOT_AVAILABLE). May yield."""
        try:
            return self.producer_ids.next_id()
        except Exception:  # noqa: BLE001 - ZooKeeper errors are many; every one means "not now"
            log.warning("no producer id block could be leased", exc_info=True)
            return None

    def _prepare_init(self, md, timeout_ms, expected):
        if md.pending:
            return errors.CONCURRENT_TRANSACTIONS, None
        if expected is not None:
            pid, epoch = expected
            valid = (md.producer_epoch == m.NO_PRODUCER_EPOCH or pid == md.producer_id
                     or (pid == md.last_producer_id and m.is_epoch_exhausted(epoch)))
            if not valid:
                return errors.PRODUCER_FENCED, None
        state = md.state
        if state in (m.PREPARE_ABORT, m.PREPARE_COMMIT):
            return errors.CONCURRENT_TRANSACTIONS, None
        if state in (m.EMPTY, m.COMPLETE_ABORT, m.COMPLETE_COMMIT):
            if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                pid = self._new_producer_id()          # may yield: the id is checked again after it
                if pid is None:
                    return errors.COORDINATOR_NOT_AVAILABLE, None
                if md.pending or md.state not in (m.EMPTY, m.COMPLETE_ABORT, m.COMPLETE_COMMIT):
                    return errors.CONCURRENT_TRANSACTIONS, None
                return NONE, md.prepare_rotate_producer_id(pid, timeout_ms, self.now(), expected is not None)
            return md.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], self.now())
        if state is m.ONGOING:
            return NONE, md.prepare_fence_epoch()
        raise m.IllegalTransition("%r: InitProducerId in state %s" % (md, state.name))

    # --------------------------------------------------------------------------- AddPartitions / AddOffsets
    def add_partitions(self, transactional_id, producer_id, producer_epoch, partitions):
        """Add ``partitions`` [(topic, p)] to the transaction -> error code."""
        if not transactional_id:
            return errors.INVALID_REQUEST
        code, entry, md = self._lookup(transactional_id)
        if code:
            return code
        if md is None or md.producer_id != producer_id:
            return errors.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return errors.PRODUCER_FENCED
        if md.pending or md.state in (m.PREPARE_COMMIT, m.PREPARE_ABORT):
            return errors.CONCURRENT_TRANSACTIONS
        added = set(partitions)
        if md.state is m.ONGOING and added <= md.partitions:
            return NONE
        return self.state.append(entry, md, md.prepare_add_partitions(added, self.now()))

    # ------------------------------------------------------------------------------------------- EndTxn
    def end_txn(self, transactional_id, producer_id, producer_epoch, commit):
        return self._end(transactional_id, producer_id, producer_epoch, commit, True)

    def _end(self, transactional_id, producer_id, producer_epoch, commit, from_client):
        if not transactional_id:
            return errors.INVALID_REQUEST
        code, entry, md = self._lookup(transactional_id)
        if code:
            return code
        if md is None or md.producer_id != producer_id:
            return errors.INVALID_PRODUCER_ID_MAPPING
        # A client's epoch must match exactly; the coordinator's own abort (fence, timeout) carries epoch + 1.
        if (from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
            return errors.PRODUCER_FENCED
        if md.pending and md.pending_state is not m.PREPARE_EPOCH_FENCE:
            return errors.CONCURRENT_TRANSACTIONS
        state = md.state
        fencing = False
        if state is m.ONGOING:
            target = m.PREPARE_COMMIT if commit else m.PREPARE_ABORT
            if md.pending_state is m.PREPARE_EPOCH_FENCE:
                if target is not m.PREPARE_ABORT:
                    return errors.CONCURRENT_TRANSACTIONS
                # The fence's bumped epoch becomes the producer's before the abort is logged with it.
                fencing = True
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = m.NO_PRODUCER_EPOCH
            transit = md.prepare_abort_or_commit(target, self.now())
        elif state is m.COMPLETE_COMMIT:
            return NONE if commit else errors.INVALID_TXN_STATE
        elif state is m.COMPLETE_ABORT:
            return errors.INVALID_TXN_STATE if commit else NONE
        elif state is m.PREPARE_COMMIT:
            return errors.CONCURRENT_TRANSACTIONS if commit else errors.INVALID_TXN_STATE
        elif state is m.PREPARE_ABORT:
            return errors.INVALID_TXN_STATE if commit else errors.CONCURRENT_TRANSACTIONS
        elif state is m.EMPTY:
            return errors.INVALID_TXN_STATE
        else:
            raise m.IllegalTransition("%r: EndTxn in state %s" % (md, state.name))
        coordinator_epoch = entry.coordinator_epoch
        code = self.state.append(entry, md, transit)
        if code:
            if fencing and self.state.owned.get(entry.index) is entry:
                md.has_failed_fence = True
            return code
        # Logged: from here the transaction ends as decided, even if this client goes away.
        code, entry2, md2 = self.state.get(transactional_id)
        if code or entry2 is not entry or entry2.coordinator_epoch != coordinator_epoch or md2 is not md:
            return errors.NOT_COORDINATOR
        if md.producer_id != producer_id:
            return errors.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return errors.PRODUCER_FENCED
        if md.pending:
            return errors.CONCURRENT_TRANSACTIONS
        self._send_markers(entry, md)
        return NONE

    # ------------------------------------------------------------------------------------------ markers
    def _send_markers(self, entry, md):
        """Prepare the Complete transition (pending until the markers are written) and hand the markers to the
        channel."""
        commit = md.state is m.PREPARE_COMMIT
        transit = md.prepare_complete(self.now())
        pending = PendingMarkers(entry.index, md.transactional_id, entry.coordinator_epoch, md.producer_id,
                                 md.producer_epoch, commit, md.partitions, _Completion(self, entry, md, transit))
        self.markers.add(pending)

    def _complete(self, entry, md, transit):
        """Every marker is written: log CompleteCommit/CompleteAbort, retried until it is logged or this broker
        no longer coordinates the id."""
        if not self.active or self.state.owned.get(entry.index) is not entry or entry.txns.get(
                md.transactional_id) is not md or md.pending_state is not transit.state:
            return
        # state.append drops the pending transition on failure; a retry prepares it again.
        code = self.state.append(entry, md, transit)
        if code == NONE:
            log.debug("%r completed", md)
            return
        if code in (errors.NOT_COORDINATOR, errors.COORDINATOR_LOAD_IN_PROGRESS):
            log.info("lost the coordination of %r before logging its completion (%d)", md.transactional_id, code)
            return
        log.warning("logging the completion of %r failed (%d); retrying", md.transactional_id, code)
        md.pending_state = transit.state       # keep it fenced off (CONCURRENT_TRANSACTIONS) until it is logged
        self.scheduler.call_later(COMPLETE_RETRY_MS, self._complete, entry, md, transit)

    # ------------------------------------------------------------------------------------ timers, expiry
    def abort_timed_out(self):
        """Abort every transaction Ongoing for longer than its timeout (fence + abort) -> how many were started."""
        if not self.active:
            return 0
        started = 0
        for entry, md in self.state.timed_out(self.now()):
            if md.pending or md.state is not m.ONGOING or self.state.owned.get(entry.index) is not entry:
                continue
            log.info("aborting the transaction of %r (producer id %d epoch %d): timed out after %d ms",
                     md.transactional_id, md.producer_id, md.producer_epoch, md.timeout_ms)
            fence = md.prepare_fence_epoch()
            code = self._end(md.transactional_id, fence.producer_id, fence.producer_epoch, False, False)
            if code:
                log.info("timed-out abort of %r not done now: %d", md.transactional_id, code)
                if md.pending_state is m.PREPARE_EPOCH_FENCE:
                    md.pending_state = None
            else:
                started += 1
        return started

    def expire_transactional_ids(self):
        if not self.active:
            return 0
        return self.state.expire_transactional_ids(self.now())

    # ---------------------------------------------------------------------------------- describe, list
    def describe(self, transactional_id):
        """DescribeTransactions' entry for one id (error_code 105 when unknown)."""
        out = {"error_code": NONE, "transactional_id": transactional_id, "transaction_state": "",
               "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
               "producer_epoch": -1, "topics": []}
        if not transactional_id:
            out["error_code"] = errors.INVALID_REQUEST if self.active else errors.COORDINATOR_NOT_AVAILABLE
            return out
        code, _entry, md = self._lookup(transactional_id)
        if code:
            out["error_code"] = code
        elif md is None or md.state is m.DEAD:
            out["error_code"] = errors.TRANSACTIONAL_ID_NOT_FOUND
        else:
            topics = {}
            for t, p in sorted(md.partitions):
                topics.setdefault(t, []).append(p)
            out.update(transaction_state=md.state.name, transaction_timeout_ms=md.timeout_ms,
                       transaction_start_time_ms=md.start_ms, producer_id=md.producer_id,
                       producer_epoch=md.producer_epoch,
                       topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()])
        return out

    def list_transactions(self, state_filters, producer_id_filters, duration_filter_ms=-1):
        """ListTransactions' answer: {error_code, unknown_state_filters, transaction_states}; the caller filters
        by authorization."""
        if not self.active:
            return {"error_code": errors.COORDINATOR_NOT_AVAILABLE, "unknown_state_filters": [],
                    "transaction_states": []}
        if self.state.any_loading():
            return {"error_code": errors.COORDINATOR_LOAD_IN_PROGRESS, "unknown_state_filters": [],
                    "transaction_states": []}
        unknown = [s for s in state_filters if s not in m.BY_NAME]
        states = {m.BY_NAME[s] for s in state_filters if s in m.BY_NAME}
        pids = set(producer_id_filters)
        now = self.now()
        listed = []
        if not unknown or states:
            for _entry, md in self.state.loaded():
                if md.state is m.DEAD:
                    continue
                if state_filters and md.state not in states:
                    continue
                if pids and md.producer_id not in pids:
                    continue
                if duration_filter_ms is not None and duration_filter_ms >= 0 and (
                        md.start_ms < 0 or now - md.start_ms < duration_filter_ms):
                    continue
                listed.append({"transactional_id": md.transactional_id, "producer_id": md.producer_id,
                               "transaction_state": md.state.name})
        return {"error_code": NONE, "unknown_state_filters": unknown, "transaction_states": listed}

    # ---------------------------------------------------------------------------------------- leadership
    def begin_load(self, index, coordinator_epoch):
        self.markers.cancel_partition(index)
        self.state.begin_load(index, coordinator_epoch)

    def load_partition(self, index, coordinator_epoch):
        """Become the coordinator of ``__transaction_state``-``index``: replay it, then send again the markers of
        the transactions it left in PrepareCommit/PrepareAbort."""
        self.markers.cancel_partition(index)
        unfinished = self.state.load_partition(index, coordinator_epoch)
        if unfinished is None:
            return False
        entry = self.state.owned.get(index)
        for md in unfinished:
            if not md.pending:
                log.info("resending the %s markers of %r after loading", md.state.name, md.transactional_id)
                self._send_markers(entry, md)
        return True

    def unload_partition(self, index):
        self.state.unload_partition(index)
        self.markers.cancel_partition(index)

    def shutdown(self):
        self.active = False
        for index in list(self.state.owned):
            self.unload_partition(index)
        self.markers.shutdown()


class _Completion:
    """The marker channel's listener for one transaction: partitions written leave the metadata (Describe shows
    only those still without a marker, as Kafka); all written -> the Complete state is logged; abandoned (the
    coordinator was fenced) -> nothing more happens here, the new coordinator finishes it."""
    __slots__ = ("coordinator", "entry", "md", "transit")

    def __init__(self, coordinator, entry, md, transit):
        self.coordinator = coordinator
        self.entry = entry
        self.md = md
        self.transit = transit

    def on_written(self, _pending, tp):
        if self.md.state in (m.PREPARE_COMMIT, m.PREPARE_ABORT):
            self.md.partitions.discard(tp)

    def on_complete(self, _pending):
        # In a greenlet of its own: the Complete write waits for the in-sync replicas, and the caller is a
        # destination's marker sender, whose other transactions must not queue behind it.
        self.coordinator.scheduler.call_later(0, self.coordinator._complete, self.entry, self.md, self.transit)

    def on_abandoned(self, _pending, code):
        log.warning("markers of %r refused with %d: this coordinator was fenced", self.md.transactional_id, code)
