"""GroupMetadataManager: the cache of the groups whose ``__consumer_offsets`` partitions this broker owns, and every
read and write of those partitions (Kafka's GroupMetadataManager; the membership protocol is coordinator.py's).

Ownership per partition (``owned``): ``LOADING`` while the partition is replayed, then ``LOADED``; a partition not
in ``owned`` is not this broker's. ``load_partition`` folds the log (``offsets_log.replay``: the last record per key
wins, tombstones delete) into ``Group`` objects: a group whose last metadata record lists members comes back Stable
at that generation and protocol with those members and assignments (leader kept when it is among them, else the
first), one without members Empty; committed offsets attach to their group (an Empty one is made for offsets
without metadata). ``on_loaded(group)`` is called for each restored group so that the coordinator arms its
members' session timers. ``unload_partition`` forgets the partition's groups and hands them back to be failed.

Writes: one ``store.append(partition, records, now)`` per operation, all records of it in one batch; a failure maps
to a coordinator error code (``append_error``, Kafka's mapping) and leaves the cache as it was. An append waits
for the in-sync replicas (acks=-1) and so may yield to other greenlets: a caller that goes on using a group after
a write re-checks it (coordinator.sync_group does).

Offsets (``stage_offsets``, then ``write_offsets``): metadata longer than ``offset.metadata.max.bytes`` (UTF-8) =>
OFFSET_METADATA_TOO_LARGE, a partition ``topic_exists`` denies => UNKNOWN_TOPIC_OR_PARTITION; the rest is written
with ``expire_timestamp`` = commit time + retention (the request's ``retention_ms`` when >= 0, else
``offsets.retention.minutes``) and enters the cache only after the append succeeded. They expire
(``expire_offsets``, every ``offsets.retention.check.interval.ms``) only while the group has no members, once
``expire_timestamp`` and ``offsets.retention.minutes`` since the group became Empty have both passed. An Empty group
left without offsets is removed (group tombstone). Deviation: OffsetCommit/OffsetFetch v0 (ZooKeeper-stored in
Kafka) use the same ``__consumer_offsets`` store. Every committed offset remembers the offset of its record in
``__consumer_offsets`` (``record_offset``; the store's append returns the batch's base offset).

Transactional offsets (TxnOffsetCommit, KIP-98/447; Kafka's GroupMetadataManager with a producer id): validated
and encoded as above, written as ONE transactional batch of the producer (``write_txn_offsets``) and held in
``group.pending_txn[producer id]`` -- from before the append (record offset None while it waits for the in-sync
replicas, as Kafka's prepareTxnOffsetCommit) until ``complete_transaction``, which the WriteTxnMarkers handler calls
once the producer's marker is replicated in the group's partition: COMMIT makes each pending offset the committed
one unless a plain commit with a newer record came in between (``offsets_log.newer``), ABORT drops them. A failed
append removes them again. ``producer_groups`` indexes the groups each producer has pending offsets in. A
completion for a partition that is loading is ignored: the marker is already in the log the load is reading (the
load reads up to the log end and installs its groups without yielding after the last read). Pending offsets are
never fetched as committed; OffsetFetch ``require_stable`` asks ``pending_partitions``. Expiry leaves a partition
with pending offsets alone and never removes a group that has some (Kafka's group coordinator, 3.7+); deleting a
group tombstones its pending partitions too, and a plain tombstone drops pending offsets on replay as well
(offsets_log.py), so the group's open transactional commits vanish alike in memory and after a restart.
"""
import logging

from kbroker import errors
from kbroker.coordinator import offsets_log
from kbroker.coordinator.offsets_log import newer
from kbroker.coordinator.group import DEAD, EMPTY, STABLE, Group, Member, OffsetAndMetadata, partition_for

log = logging.getLogger(__name__)

LOADING = "loading"
LOADED = "loaded"
INT64_MAX = 2 ** 63 - 1   # an offset expiry past this is "never" (stage_offsets)

NONE = 0


def append_error(exc):
    """Kafka's mapping of an offsets-topic append failure to a coordinator error code."""
    if isinstance(exc, (errors.UnknownTopicOrPartition, errors.NotEnoughReplicas,
                        errors.NotEnoughReplicasAfterAppend, errors.RequestTimedOut, OSError)):
        return errors.COORDINATOR_NOT_AVAILABLE
    if isinstance(exc, (errors.NotLeaderOrFollower, errors.NotCoordinator)):
        return errors.NOT_COORDINATOR
    if isinstance(exc, (errors.MessageTooLarge, errors.RecordListTooLarge, errors.InvalidFetchSize)):
        return errors.INVALID_COMMIT_OFFSET_SIZE
    if isinstance(exc, errors.KafkaError) and exc.code > 0:
        # Kafka's "case other => other": a transactional append's INVALID_PRODUCER_EPOCH (47), PRODUCER_FENCED
        # (90), INVALID_TXN_STATE (48) reach the producer as they are.
        return exc.code
    log.error("unexpected error appending to __consumer_offsets", exc_info=exc)
    return errors.UNKNOWN_SERVER_ERROR


class StagedOffsets:
    """A commit validated and encoded, not yet written: ``results`` {tp: error code} of the partitions refused,
    ``offsets`` {tp: OffsetAndMetadata} and ``records`` (their ``__consumer_offsets`` records) of the rest."""

    __slots__ = ("results", "offsets", "records")

    def __init__(self, results, offsets, records):
        self.results = results
        self.offsets = offsets
        self.records = records


class GroupMetadataManager:
    """``store``: ``append(partition, [(k, v)], now)`` and ``read(partition) -> [(k, v)]``
    (``offsets_log.OffsetsStore``); ``clock() -> ms`` (the coordinator's scheduler's ``now_ms``);
    ``topic_exists((topic, partition)) -> bool`` or None (no check)."""

    def __init__(self, store, clock, num_partitions, retention_ms, max_metadata, topic_exists=None):
        self.store = store
        self.clock = clock
        self.num_partitions = num_partitions
        self.retention_ms = retention_ms
        self.max_metadata = max_metadata
        self.topic_exists = topic_exists
        self.groups = {}                # group id -> Group, for the owned partitions only
        self.owned = {}                 # offsets partition -> LOADING | LOADED
        self.producer_groups = {}       # producer id -> {group id} with pending transactional offsets
        self._last_record = -1          # the highest record offset known (orders a store that returns none)

    def partition_for(self, group_id):
        return partition_for(group_id, self.num_partitions)

    def ownership(self, group_id):
        """``LOADING``, ``LOADED`` or None (the group's partition is not this broker's)."""
        return self.owned.get(self.partition_for(group_id))

    def any_loading(self):
        return any(st == LOADING for st in self.owned.values())

    # ------------------------------------------------------------------------------------ load, unload
    def load_partition(self, index, on_loaded):
        """Replay ``__consumer_offsets``-``index`` into the cache -> False when it cannot be read (the partition is
        then not owned). Restored groups are Empty/Stable since the end of the replay."""
        self.owned[index] = LOADING
        try:
            state = offsets_log.replay(self.store.read(index))
        except Exception:  # noqa: BLE001 - a partition we cannot read is not ours to serve
            log.exception("loading __consumer_offsets-%d failed", index)
            self.owned.pop(index, None)
            return False
        now = self.clock()
        self._last_record = max(self._last_record, state.last_offset)
        for gid, value in state.groups.items():
            if self.partition_for(gid) == index:
                group = self.groups[gid] = self._restore_group(gid, value, now)
                on_loaded(group)
        for gid, offsets in state.offsets.items():
            if self.partition_for(gid) != index:
                continue
            group = self.groups.get(gid)
            if group is None:
                group = self.groups[gid] = Group(gid, EMPTY, now)
            group.offsets.update(offsets)
        for pid, by_group in state.pending.items():
            for gid, offsets in by_group.items():
                if not offsets or self.partition_for(gid) != index:
                    continue
                group = self.groups.get(gid)
                if group is None:
                    group = self.groups[gid] = Group(gid, EMPTY, now)
                group.pending_txn[pid] = dict(offsets)
                self.producer_groups.setdefault(pid, set()).add(gid)
        if self.owned.get(index) == LOADING:
            self.owned[index] = LOADED
        log.debug("loaded __consumer_offsets-%d", index)
        return True

    @staticmethod
    def _restore_group(gid, value, now):
        """The Group a decoded group-metadata value describes (members without timers or callbacks)."""
        members = value["members"]
        group = Group(gid, STABLE if members else EMPTY, now)
        group.protocol_type = value["protocol_type"] or None
        group.generation = value["generation"]
        group.protocol = value["protocol"]
        for mv in members:
            m = Member(mv["member_id"], mv.get("group_instance_id"), mv["client_id"], mv["client_host"],
                       mv["rebalance_timeout"] if mv["rebalance_timeout"] >= 0 else mv["session_timeout"],
                       mv["session_timeout"], group.protocol_type, [(group.protocol, bytes(mv["subscription"]))])
            m.assignment = bytes(mv["assignment"])
            m.is_new = False
            group.add_member(m)
        group.leader_id = value["leader"] if value["leader"] in group.members else next(iter(group.members), None)
        return group

    def unload_partition(self, index):
        """Leadership of the partition moved away: drop it and its groups -> the groups dropped."""
        self.owned.pop(index, None)
        dropped = [self.groups.pop(gid) for gid in [g for g in self.groups if self.partition_for(g) == index]]
        for group in dropped:
            for pid in group.pending_txn:
                self._untrack(pid, group.group_id)
        return dropped

    def unload_all(self):
        """Drop every partition and group (shutdown) -> the groups dropped."""
        dropped = [self.groups.pop(gid) for gid in list(self.groups)]
        self.owned.clear()
        self.producer_groups.clear()
        return dropped

    # ------------------------------------------------------------------------------------------- writes
    def _persist(self, group_id, records):
        """Append records to the group's partition: 0 or the mapped error code."""
        return self._append(group_id, records)[0]

    def _append(self, group_id, records, producer_id=-1, producer_epoch=-1):
        """Append records (one transactional batch of the producer when ``producer_id`` >= 0) to the group's
        partition -> (0 or the mapped error code, the batch's base offset or None)."""
        index = self.partition_for(group_id)
        try:
            if producer_id >= 0:
                base = self.store.append(index, records, self.clock(), producer_id=producer_id,
                                         producer_epoch=producer_epoch)
            else:
                base = self.store.append(index, records, self.clock())
        except Exception as e:  # noqa: BLE001 - every failure maps to a coordinator error
            return append_error(e), None
        if base is None:        # a store that does not tell (tests' in-memory ones): append order
            base = self._last_record + 1
        self._last_record = max(self._last_record, base)
        return NONE, base

    def _untrack(self, producer_id, group_id):
        gids = self.producer_groups.get(producer_id)
        if gids is not None:
            gids.discard(group_id)
            if not gids:
                del self.producer_groups[producer_id]

    def store_group(self, group, now):
        """Write ``group``'s metadata record as it is now (generation, protocol, members, assignments): 0 or the
        error code."""
        return self._persist(group.group_id, [offsets_log.group_record(group, now)])

    def stage_offsets(self, group_id, retention_ms, offsets, tick=None):
        """Validate and encode a commit, nothing written yet: ``offsets`` {(topic, partition): (offset, leader_epoch,
        metadata, commit_timestamp)} -> ``StagedOffsets`` for ``write_offsets``. ``tick()``, when given, is called
        before each partition (the coordinator's time slice: it may yield)."""
        now = self.clock()
        retention = retention_ms if retention_ms is not None and retention_ms >= 0 else self.retention_ms
        results, staged, records = {}, {}, []
        for tp, (offset, leader_epoch, metadata, commit_ts) in offsets.items():
            if tick is not None:
                tick()
            if metadata is not None and len(metadata.encode("utf-8")) > self.max_metadata:
                results[tp] = errors.OFFSET_METADATA_TOO_LARGE
                continue
            if self.topic_exists is not None and not self.topic_exists(tp):
                results[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            ts = commit_ts if commit_ts is not None and commit_ts >= 0 else now
            # A client's retention_time_ms (v2-v4) or commit_timestamp (v1) may be up to 2^63 - 1: the sum is
            # held at the int64 maximum ("never"), where Kafka's Long wraps negative (expired at the next sweep)
            # and the record's encoder here refused it, dropping the connection mid-commit.
            oam = OffsetAndMetadata(offset, metadata or "", ts, min(ts + retention, INT64_MAX), leader_epoch)
            staged[tp] = oam
            records.append(offsets_log.offset_record(group_id, tp[0], tp[1], oam))
        return StagedOffsets(results, staged, records)

    def write_offsets(self, group, staged):
        """Write a staged commit into ``group`` (one append; the cache changes only when it succeeded) ->
        {(topic, partition): error code}."""
        results = staged.results
        if staged.records:
            err, base = self._append(group.group_id, staged.records)
            if err:
                results.update({tp: err for tp in staged.offsets})
                return results
            for tp, oam in staged.offsets.items():
                oam.record_offset = base
                # A transactional commit with a newer record may have completed while this append waited.
                if newer(oam, group.offsets.get(tp)):
                    group.offsets[tp] = oam
        results.update({tp: NONE for tp in staged.offsets})
        return results

    def write_txn_offsets(self, group, staged, producer_id, producer_epoch):
        """Write a staged commit as producer ``producer_id``'s transactional batch; the offsets stay pending until
        ``complete_transaction`` (module docstring) -> {(topic, partition): error code}."""
        results = staged.results
        if not staged.records:
            return results
        gid = group.group_id
        mine = group.pending_txn.setdefault(producer_id, {})
        for tp, oam in staged.offsets.items():
            oam.record_offset = None            # in flight: a marker completing it now treats it as newest
            mine[tp] = oam
        self.producer_groups.setdefault(producer_id, set()).add(gid)
        err, base = self._append(gid, staged.records, producer_id, producer_epoch)
        current = group.pending_txn.get(producer_id)
        for tp, oam in staged.offsets.items():
            # Still the entry this request put there (a retry or a completion may have replaced or taken it)?
            ours = current is not None and current.get(tp) is oam
            if err:
                if ours:
                    del current[tp]
                elif oam.record_offset is None:
                    oam.record_offset = -1      # completed while in flight, then failed: no longer the newest
            else:
                oam.record_offset = base
        if current is not None and not current:
            del group.pending_txn[producer_id]
        if producer_id not in group.pending_txn and self.groups.get(gid) is group:
            # (A group unloaded during the append is no longer the one the index speaks of.)
            self._untrack(producer_id, gid)
        results.update({tp: err for tp in staged.offsets})
        return results

    def complete_transaction(self, producer_id, partitions, commit):
        """The producer's COMMIT (``commit``) or ABORT marker is replicated in the offsets ``partitions`` (Kafka's
        handleTxnCompletion): its pending offsets of the groups there become committed or are dropped -> the
        number of groups completed. Partitions not loaded here are skipped (module docstring)."""
        partitions = {p for p in partitions if self.owned.get(p) == LOADED}
        done = 0
        for gid in [g for g in self.producer_groups.get(producer_id, ()) if self.partition_for(g) in partitions]:
            self._untrack(producer_id, gid)
            group = self.groups.get(gid)
            if group is None:
                continue
            pending = group.pending_txn.pop(producer_id, None)
            done += 1
            if commit and pending:
                for tp, oam in pending.items():
                    if newer(oam, group.offsets.get(tp)):
                        group.offsets[tp] = oam
        return done

    def pending_partitions(self, group_id):
        """The partitions of ``group_id`` with a transactional commit not yet completed (any producer)."""
        group = self.groups.get(group_id)
        return group.pending_txn_partitions() if group is not None else set()

    def fetch_offsets(self, group_id, partitions):
        """``partitions``: [(topic, partition)] or None (= all committed) -> {tp: OffsetAndMetadata | None}."""
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            return dict(committed)
        return {tp: committed.get(tp) for tp in partitions}

    def expire_offsets(self):
        """Drop expired offsets of member-less groups (tombstones) and remove Empty groups left without offsets ->
        the number of offsets dropped."""
        now = self.clock()
        removed = 0
        for gid, group in list(self.groups.items()):
            if self.ownership(gid) != LOADED or group.members or not group.is_(EMPTY):
                continue
            pending = group.pending_txn_partitions()
            if now < group.state_timestamp + self.retention_ms:
                expired = []
            else:
                expired = [tp for tp, o in group.offsets.items()
                           if tp not in pending and now >= (o.expire_timestamp if o.expire_timestamp >= 0
                                                            else o.commit_timestamp + self.retention_ms)]
            records = [offsets_log.offset_tombstone(gid, t, p) for t, p in expired]
            drop_group = len(expired) == len(group.offsets) and not group.pending_txn
            if drop_group:
                records.append(offsets_log.group_tombstone(gid))
            if not records:
                continue
            if self._persist(gid, records):
                continue
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if drop_group:
                group.transition(DEAD, now)
                del self.groups[gid]
        return removed

    def delete_offsets(self, group, partitions):
        """Tombstone the committed (and pending transactional) offsets of ``partitions`` in ``group`` and forget them:
        0 or the append's error code (nothing forgotten then). Partitions without an offset need no record."""
        gid = group.group_id
        pending = group.pending_txn_partitions()
        doomed = [tp for tp in partitions if tp in group.offsets or tp in pending]
        if not doomed:
            return NONE
        err = self._persist(gid, [offsets_log.offset_tombstone(gid, t, p) for t, p in doomed])
        if err:
            return err
        for tp in doomed:
            group.offsets.pop(tp, None)
            for offsets in group.pending_txn.values():
                offsets.pop(tp, None)
        return NONE

    def delete_group(self, group):
        """Tombstone ``group``'s offsets and metadata, then make it Dead and forget it: 0 or the error code (the
        group is left as it was)."""
        gid = group.group_id
        doomed = list(group.offsets)
        doomed += sorted(group.pending_txn_partitions().difference(group.offsets))
        records = [offsets_log.offset_tombstone(gid, t, p) for t, p in doomed]
        records.append(offsets_log.group_tombstone(gid))
        err = self._persist(gid, records)
        if err:
            return err
        for pid in group.pending_txn:
            self._untrack(pid, gid)
        group.pending_txn.clear()
        group.transition(DEAD, self.clock())
        del self.groups[gid]
        return NONE
