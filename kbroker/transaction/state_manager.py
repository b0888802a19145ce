"""TransactionStateManager: the transactional ids of the ``__transaction_state`` partitions this broker leads, and
every read and write of those partitions (Kafka's TransactionStateManager; the API logic is coordinator.py's).

Ownership per partition (``owned``: index -> ``TxnPartition``): ``LOADING`` while its log is replayed
(requests for its ids get COORDINATOR_LOAD_IN_PROGRESS 14), then ``LOADED``; a partition not in ``owned`` is not
this broker's (NOT_COORDINATOR 16). Each owned partition carries the **coordinator epoch** it was loaded at: the
partition's leader epoch when this broker became its leader. Markers are written with it, so a partition leader
refuses a deposed coordinator's markers (TRANSACTION_COORDINATOR_FENCED 52); every write re-checks it.

Loading (``load_partition``) replays the partition from its log start: the last record of a key wins, a tombstone
removes it (``txn_log``); an undecodable record is skipped with a warning. The ids left in PrepareCommit /
PrepareAbort are returned: their markers must be (re)sent. A load that finds the partition unloaded or reloaded at
another epoch when it ends is discarded.

Writes (``append``): one uncompressed batch through the leader Partition as an internal writer, acks=-1
(``delayed_produce.append_and_wait``, bounded by ``request.timeout.ms`` as Kafka's appendRecords), so a state
change is in every in-sync replica before anyone acts on it. Kafka's error mapping: UNKNOWN_TOPIC_OR_PARTITION,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE (15); NOT_LEADER_OR_FOLLOWER,
KAFKA_STORAGE_ERROR -> NOT_COORDINATOR (16); anything else UNKNOWN_SERVER_ERROR (-1). The transit is applied to
the metadata (``complete_transition``) only when the write succeeded and the partition is still owned at the same
coordinator epoch (else NOT_COORDINATOR); a failed write drops the pending transition.

Expiration: an id idle (Empty, CompleteCommit, CompleteAbort) for ``transactional.id.expiration.ms`` since its
last update goes Dead and gets a tombstone; it leaves the cache once the tombstone is replicated.
"""
import logging

from kbroker import errors
from kbroker.internal_topics import TRANSACTION_STATE_TOPIC
from kbroker.record import iter_records
from kbroker.record.batch import iter_batches
from kbroker.replica.delayed_produce import append_and_wait
from kbroker.timeslice import TimeSlice
from kbroker.transaction import txn_log
from kbroker.transaction.metadata import (DEAD, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT,
                                          TransactionMetadata, from_record)

log = logging.getLogger(__name__)

LOADING = "loading"
LOADED = "loaded"
NONE = 0


def java_string_hash(s):
    """Java's ``String.hashCode`` (UTF-16 code units, int32 wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(transactional_id, num_partitions):
    """Kafka's ``Utils.abs(transactionalId.hashCode) % partitions`` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def append_error(exc):
    """Kafka's mapping of a ``__transaction_state`` append failure to the code the client gets."""
    if isinstance(exc, (errors.UnknownTopicOrPartition, errors.NotEnoughReplicas,
                        errors.NotEnoughReplicasAfterAppend, errors.RequestTimedOut)):
        return errors.COORDINATOR_NOT_AVAILABLE
    if isinstance(exc, (errors.NotLeaderOrFollower, errors.NotCoordinator, errors.KafkaStorageError, OSError)):
        return errors.NOT_COORDINATOR
    log.error("unexpected error appending to %s", TRANSACTION_STATE_TOPIC, exc_info=exc)
    return errors.UNKNOWN_SERVER_ERROR


class TxnStore:
    """``__transaction_state`` over the broker's Partitions; ``replicas``: ``get_partition(topic, p)``."""

    def __init__(self, replicas, load_buffer_size=5242880, timeout_ms=30000):
        self.replicas = replicas
        self.load_buffer_size = load_buffer_size
        self.timeout_ms = timeout_ms

    def _partition(self, index):
        part = self.replicas.get_partition(TRANSACTION_STATE_TOPIC, index)
        if part is None or not part.is_leader:
            raise errors.NotCoordinator("this broker does not lead %s-%d" % (TRANSACTION_STATE_TOPIC, index))
        return part

    def leader_epoch(self, index):
        return self._partition(index).leader_epoch

    def append(self, index, records, now):
        """Append ``[(key, value | None)]`` as one batch and wait for every in-sync replica; raises KafkaError."""
        _res, code = append_and_wait(self._partition(index), txn_log.build(records, now), None, self.timeout_ms)
        if code:
            raise errors.error_for_code(code)("%s-%d write not replicated (%d)" % (TRANSACTION_STATE_TOPIC, index,
                                                                                   code))

    def read(self, index):
        """Yield ``(key, value)`` of every record from the log start, oldest first (control batches skipped)."""
        lg = self._partition(index).log
        offset = lg.log_start_offset
        while offset < lg.log_end_offset:
            sl = lg.read(offset, self.load_buffer_size, None, True)
            if sl.region.size == 0:
                break
            buf = sl.region.read_bytes()
            last = None
            for pos, h in iter_batches(buf, include_control=True):
                if not h.is_control:
                    for _off, _ts, key, value, _hdr in iter_records(buf[pos:pos + h.size]):
                        yield (bytes(key) if key is not None else None,
                               bytes(value) if value is not None else None)
                last = h.last_offset
            if last is None:
                break
            offset = last + 1


class TxnPartition:
    """One owned ``__transaction_state`` partition: its coordinator epoch, LOADING/LOADED, and its ids."""
    __slots__ = ("index", "coordinator_epoch", "status", "txns")

    def __init__(self, index, coordinator_epoch):
        self.index = index
        self.coordinator_epoch = coordinator_epoch
        self.status = LOADING
        self.txns = {}          # transactional id -> TransactionMetadata


class TransactionStateManager:
    """``store``: ``append(index, [(k, v)], now)``, ``read(index)`` (``TxnStore``); ``clock() -> ms``;
    ``num_partitions() -> int`` (the topic's partition count, or transaction.state.log.num.partitions before it
    exists); ``expiration_ms``: transactional.id.expiration.ms."""

    def __init__(self, store, clock, num_partitions, expiration_ms):
        self.store = store
        self.clock = clock
        self.num_partitions = num_partitions
        self.expiration_ms = expiration_ms
        self.owned = {}

    def partition_for(self, transactional_id):
        return partition_for(transactional_id, self.num_partitions())

    # ------------------------------------------------------------------------------------------- lookups
    def get(self, transactional_id):
        """(0, TxnPartition, TransactionMetadata | None), or (NOT_COORDINATOR | COORDINATOR_LOAD_IN_PROGRESS,
        None, None)."""
        entry = self.owned.get(self.partition_for(transactional_id))
        if entry is None:
            return errors.NOT_COORDINATOR, None, None
        if entry.status == LOADING:
            return errors.COORDINATOR_LOAD_IN_PROGRESS, None, None
        return NONE, entry, entry.txns.get(transactional_id)

    def put_if_absent(self, entry, md):
        """The metadata of ``md.transactional_id`` in ``entry``, adding ``md`` when there is none."""
        return entry.txns.setdefault(md.transactional_id, md)

    def loaded(self):
        """Yield every (TxnPartition, TransactionMetadata) of the loaded partitions, in 20 ms time slices (a
        coordinator may hold 100,000 ids: one pass over them at ~1 us each must not hold the event loop). It may
        yield between two elements: a caller checks each one as it comes."""
        tick = TimeSlice().tick
        for e in list(self.owned.values()):
            if e.status != LOADED:
                continue
            for md in list(e.txns.values()):
                tick()
                yield e, md

    def any_loading(self):
        return any(e.status == LOADING for e in self.owned.values())

    # ------------------------------------------------------------------------------------ load, unload
    def begin_load(self, index, coordinator_epoch):
        """Mark the partition LOADING at ``coordinator_epoch`` (before the replay starts: requests wait meanwhile)."""
        self.owned[index] = TxnPartition(index, coordinator_epoch)

    def load_partition(self, index, coordinator_epoch):
        """Replay ``__transaction_state``-``index`` -> the loaded metadata still in PrepareCommit/PrepareAbort
        (their markers must be sent), or None when the partition could not be read or the load was superseded."""
        entry = self.owned.get(index)
        if entry is None or entry.coordinator_epoch != coordinator_epoch:
            entry = self.owned[index] = TxnPartition(index, coordinator_epoch)
        loaded = {}
        tick = TimeSlice().tick
        try:
            for key, value in self.store.read(index):
                tick()
                try:
                    tid = txn_log.decode_key(key)
                    rec = txn_log.decode_value(value)
                    if rec is None:
                        loaded.pop(tid, None)
                    else:
                        loaded[tid] = from_record(tid, rec)
                except Exception as e:  # noqa: BLE001 - a foreign or damaged record must not stop the load
                    log.warning("skipping undecodable %s-%d record: %s", TRANSACTION_STATE_TOPIC, index, e)
        except Exception:  # noqa: BLE001 - a partition we cannot read is not ours to serve
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, index)
            if self.owned.get(index) is entry:
                del self.owned[index]
            return None
        if self.owned.get(index) is not entry:
            return None                       # unloaded or reloaded at another epoch meanwhile
        # Ids of other partitions cannot be here unless the partition count changed: they are not ours to serve.
        n = self.num_partitions()
        entry.txns = {tid: md for tid, md in loaded.items() if partition_for(tid, n) == index}
        entry.status = LOADED
        log.info("loaded %d transactional ids from %s-%d at coordinator epoch %d", len(entry.txns),
                 TRANSACTION_STATE_TOPIC, index, coordinator_epoch)
        return [md for md in entry.txns.values() if md.state in (PREPARE_COMMIT, PREPARE_ABORT)]

    def unload_partition(self, index):
        """Leadership moved away (or the broker stops): forget the partition's ids -> the TxnPartition or None."""
        return self.owned.pop(index, None)

    # ------------------------------------------------------------------------------------------- writes
    def _still_owner(self, entry):
        return self.owned.get(entry.index) is entry and entry.status == LOADED

    def append(self, entry, md, transit):
        """Log ``transit`` of ``md`` (a tombstone for Dead) and apply it -> 0 or the error code (module
        docstring). The pending transition of ``md`` is always settled: completed on 0, dropped otherwise."""
        if not self._still_owner(entry):
            md.abort_transition()
            return errors.NOT_COORDINATOR
        value = None if transit.state is DEAD else txn_log.value_bytes(
            transit.producer_id, transit.producer_epoch, transit.timeout_ms, transit.state.id, transit.partitions,
            transit.last_update_ms, transit.start_ms, empty=transit.state is EMPTY)
        try:
            self.store.append(entry.index, [(txn_log.key_bytes(md.transactional_id), value)], self.clock())
            code = NONE
        except Exception as e:  # noqa: BLE001 - every failure maps to a coordinator error
            code = append_error(e)
        if code == NONE and not self._still_owner(entry):
            code = errors.NOT_COORDINATOR
        if code == NONE and entry.txns.get(md.transactional_id) is not md:
            code = errors.NOT_COORDINATOR       # expired and replaced meanwhile: not the metadata we logged for
        if code:
            md.abort_transition()
            return code
        if transit.state is DEAD:
            md.pending_state = None
            md.state = DEAD
            entry.txns.pop(md.transactional_id, None)
        else:
            md.complete_transition(transit)
        return NONE

    # ------------------------------------------------------------------------------------------- timers
    def timed_out(self, now):
        """[(TxnPartition, metadata)] Ongoing longer than their timeout, none with a transition pending."""
        return [(e, md) for e, md in self.loaded()
                if md.state is ONGOING and not md.pending and md.start_ms + md.timeout_ms < now]

    def expire_transactional_ids(self, now):
        """Tombstone the ids idle for ``expiration_ms`` -- one batch per partition, as Kafka -- and drop them once
        it is replicated -> how many were removed."""
        removed = 0
        by_entry = {}
        for entry, md in self.loaded():
            if md.pending or not md.state.expirable or md.last_update_ms > now - self.expiration_ms:
                continue
            md.prepare_dead()
            by_entry.setdefault(entry.index, (entry, []))[1].append(md)
        for entry, mds in by_entry.values():
            code = NONE
            if not self._still_owner(entry):
                code = errors.NOT_COORDINATOR
            else:
                try:
                    self.store.append(entry.index, [(txn_log.key_bytes(md.transactional_id), None) for md in mds],
                                      self.clock())
                except Exception as e:  # noqa: BLE001 - mapped and logged; the ids stay until the next round
                    code = append_error(e)
            for md in mds:
                if code == NONE and self._still_owner(entry) and entry.txns.get(md.transactional_id) is md:
                    md.pending_state = None
                    md.state = DEAD
                    del entry.txns[md.transactional_id]
                    removed += 1
                    log.info("expired transactional id %r (idle since %d)", md.transactional_id,
                             md.last_update_ms)
                else:
                    md.abort_transition()
            if code:
                log.warning("expiring %d transactional ids of %s-%d failed (%d)", len(mds), TRANSACTION_STATE_TOPIC,
                            entry.index, code)
        return removed

def new_metadata(transactional_id, producer_id, timeout_ms, now):
    """A transactional id seen for the first time: its new producer id, epoch -1 (the first InitProducerId bumps
    it to 0), Empty."""
    return TransactionMetadata(transactional_id, producer_id, -1, timeout_ms, EMPTY, (), -1, now)
