"""Reading and writing the coordinator's state as ``__consumer_offsets`` records.

Record versions written (chosen so external decoders -- Burrow, kafka-consumer-groups, kafka-dump-log's offsets
decoder -- read them; they are what Kafka 0.10.1 writes):

    offset commit   key v1 (group, topic, partition)  value v1 (offset, metadata, commit_timestamp, expire_timestamp)
    group metadata  key v2 (group)                    value v1 (members carry rebalance_timeout), or value v3 when
                                                      a member is static (v1 cannot hold group_instance_id)

Deletions are tombstones (null value) with the same key: an expired/deleted offset, a deleted group.
Transactional offset commits (TxnOffsetCommit, KIP-98/447) are the same offset records in one batch marked
transactional with the producer's id and epoch and baseSequence -1 (the partition's coordinator-origin rule: no
sequence check); the transaction coordinator's COMMIT/ABORT marker (a control batch, ``record.control``) written to
the same partition later decides them.
Every write is one uncompressed v2 batch appended through the leader ``Partition`` as an internal writer
(``produce_version=None``) with acks=-1 (``kbroker.replica.delayed_produce.append_and_wait``, bounded by
offsets.commit.timeout.ms; with a single in-sync replica the append itself is the commit), so commits are in every
in-sync replica's log (in the page cache) before the client is answered.

Loading (``OffsetsStore.read``) replays a partition from its log start: for every key the last record wins and a
tombstone removes the key (``replay``). Records whose key or value cannot be decoded are skipped with a warning:
a foreign writer's garbage must not keep the coordinator from loading. Transactional offset records are held
pending per producer until that producer's marker: COMMIT applies each one whose record is newer than the
committed offset's (a later plain commit wins), ABORT drops them; still open at the end of the log -> pending
(the marker arrives later through ``GroupCoordinator.complete_transaction``). A plain offset tombstone also drops
the pending transactional offsets of that group and partition (Kafka's group coordinator, 3.7+), which is how a
deleted group loses its open transactional commits in memory and on replay alike.
"""
import logging

from kbroker import errors
from kbroker.coordinator import schemas
from kbroker.coordinator.group import OffsetAndMetadata
from kbroker.internal_topics import GROUP_METADATA_TOPIC
from kbroker.record import iter_records
from kbroker.record.batch import Record, build_batch, iter_batches
from kbroker.record.control import Marker, marker_of
from kbroker.replica.delayed_produce import append_and_wait

log = logging.getLogger(__name__)

OFFSET_VALUE_VERSION = 1
GROUP_VALUE_VERSION = 1
GROUP_VALUE_VERSION_STATIC = 3


def offset_record(group_id, topic, partition, oam):
    key = schemas.offset_commit_key(group_id, topic, partition, version=1)
    value = schemas.OFFSET_COMMIT_VALUE.encode(OFFSET_VALUE_VERSION, {
        "offset": oam.offset, "metadata": oam.metadata or "", "commit_timestamp": oam.commit_timestamp,
        "expire_timestamp": oam.expire_timestamp})
    return key, value


def offset_tombstone(group_id, topic, partition):
    return schemas.offset_commit_key(group_id, topic, partition, version=1), None


def group_record(group, now):
    """The group-metadata record of ``group`` as it is now (members' metadata = the chosen protocol's)."""
    static = any(m.group_instance_id is not None for m in group.members.values())
    version = GROUP_VALUE_VERSION_STATIC if static else GROUP_VALUE_VERSION
    members = []
    for m in group.members.values():
        members.append({
            "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
            "session_timeout": m.session_timeout, "subscription": m.metadata(group.protocol) or b"",
            "assignment": m.assignment or b""})
    value = schemas.GROUP_METADATA_VALUE.encode(version, {
        "protocol_type": group.protocol_type or "", "generation": group.generation, "protocol": group.protocol,
        "leader": group.leader_id if group.members else None, "current_state_timestamp": now,
        "members": members})
    return schemas.group_metadata_key(group.group_id), value


def group_tombstone(group_id):
    return schemas.group_metadata_key(group_id), None


def build(records, now, producer_id=-1, producer_epoch=-1):
    """One v2 batch (base offset 0: the partition assigns real offsets) holding ``[(key, value)]``; with a
    ``producer_id`` >= 0 a transactional batch of that producer (baseSequence -1)."""
    txn = producer_id >= 0
    return build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)],
                       producer_id=producer_id if txn else -1, producer_epoch=producer_epoch if txn else -1,
                       base_sequence=-1, is_transactional=txn)


class LoadedState:
    """What a partition's replay yields: committed offsets, the last group-metadata value per group, the
    transactional offsets still open at the end of the log and the highest record offset seen."""

    def __init__(self):
        self.offsets = {}      # group -> {(topic, partition): OffsetAndMetadata}
        self.groups = {}       # group -> decoded GroupMetadataValue dict
        self.pending = {}      # producer id -> group -> {(topic, partition): OffsetAndMetadata}
        self.last_offset = -1

    def complete(self, producer_id, commit):
        """The producer's marker: apply (COMMIT) or drop (ABORT) its pending offsets."""
        pending = self.pending.pop(producer_id, None)
        if not commit or not pending:
            return
        for gid, offsets in pending.items():
            if not offsets:
                continue            # all dropped by tombstones (a deleted group): nothing to bring back
            committed = self.offsets.setdefault(gid, {})
            for tp, oam in offsets.items():
                if newer(oam, committed.get(tp)):
                    committed[tp] = oam

    def _drop_pending(self, gid, tp):
        for groups in self.pending.values():
            groups.get(gid, {}).pop(tp, None)


def newer(candidate, current):
    """Does ``candidate`` replace the committed ``current`` (None: nothing committed)? Kafka's ``olderThan``: by
    the offset of their records in ``__consumer_offsets``; a record still being appended (None) is the newest."""
    if current is None or candidate.record_offset is None:
        return True
    return current.record_offset is not None and current.record_offset < candidate.record_offset


def replay(entries):
    """Fold log entries (log order) into a ``LoadedState``. An entry is ``(key, value)`` (its position counts as
    its record offset), ``(key, value, record offset, producer id)`` (producer id >= 0: a transactional record;
    ``OffsetsStore.read``'s form) or a ``control.Marker``."""
    st = LoadedState()
    for i, entry in enumerate(entries):
        if isinstance(entry, Marker):
            st.complete(entry.producer_id, entry.commit)
            continue
        if len(entry) == 2:
            (key, value), offset, pid = entry, i, -1
        else:
            key, value, offset, pid = entry
        st.last_offset = max(st.last_offset, offset)
        try:
            kind, _, k = schemas.decode_key(key)
            decoded = schemas.decode_value(kind, value)
        except Exception as e:  # noqa: BLE001 - skip undecodable records, keep loading
            log.warning("skipping undecodable __consumer_offsets record: %s", e)
            continue
        if kind == schemas.OFFSET_KEY:
            tp = (k["topic"], k["partition"])
            gid = k["group"]
            if decoded is None:
                if pid >= 0:
                    st.pending.get(pid, {}).get(gid, {}).pop(tp, None)
                else:
                    st.offsets.get(gid, {}).pop(tp, None)
                    st._drop_pending(gid, tp)
            else:
                v = decoded[1]
                oam = OffsetAndMetadata(v["offset"], v["metadata"], v["commit_timestamp"],
                                        v.get("expire_timestamp", -1), v.get("leader_epoch", -1), offset)
                if pid >= 0:
                    st.pending.setdefault(pid, {}).setdefault(gid, {})[tp] = oam
                else:
                    st.offsets.setdefault(gid, {})[tp] = oam
        else:
            if decoded is None:
                st.groups.pop(k["group"], None)
                st.offsets.pop(k["group"], None)
            else:
                st.groups[k["group"]] = decoded[1]
    return st


class OffsetsStore:
    """The coordinator's storage over the broker's ``__consumer_offsets`` partitions; ``replicas``: anything with
    ``get_partition(topic, p) -> Partition | None`` (the broker's ReplicaManager)."""

    def __init__(self, replicas, load_buffer_size=5242880, commit_timeout_ms=5000):
        self.replicas = replicas
        self.load_buffer_size = load_buffer_size
        self.commit_timeout_ms = commit_timeout_ms

    def _partition(self, index):
        part = self.replicas.get_partition(GROUP_METADATA_TOPIC, index)
        if part is None:
            raise errors.NotCoordinator("this broker does not host %s-%d" % (GROUP_METADATA_TOPIC, index))
        if not part.is_leader:
            raise errors.NotCoordinator("this broker does not lead %s-%d" % (GROUP_METADATA_TOPIC, index))
        return part

    def append(self, index, records, now, producer_id=-1, producer_epoch=-1):
        """Append and wait until every in-sync replica has it (acks=all, bounded by offsets.commit.timeout.ms):
        a commit acknowledged to a consumer survives the loss of this broker. ``producer_id`` >= 0: one
        transactional batch of that producer/epoch (TxnOffsetCommit). -> the batch's base offset."""
        batch = build(records, now, producer_id, producer_epoch)
        res, code = append_and_wait(self._partition(index), batch, None, self.commit_timeout_ms)
        if code:
            raise errors.error_for_code(code)("offset commit not replicated in %d ms" % self.commit_timeout_ms)
        return res.base_offset

    def read(self, index):
        """Yield every entry of the partition, oldest first: ``(key, value, batch base offset, producer id)`` per
        record (producer id -1 unless the batch is transactional) and a ``control.Marker`` per COMMIT/ABORT
        marker (``replay``'s input)."""
        lg = self._partition(index).log
        offset = lg.log_start_offset
        while offset < lg.log_end_offset:
            sl = lg.read(offset, self.load_buffer_size, None, True)
            if sl.region.size == 0:
                break
            buf = sl.region.read_bytes()
            last = None
            for pos, h in iter_batches(buf, include_control=True):
                if h.is_control:
                    marker = marker_of(buf, pos)
                    if marker is not None:
                        yield marker
                else:
                    pid = h.producer_id if h.is_transactional else -1
                    for _off, _ts, key, value, _hdr in iter_records(buf[pos:pos + h.size]):
                        yield (bytes(key) if key is not None else None,
                               bytes(value) if value is not None else None, h.base_offset, pid)
                last = h.last_offset
            if last is None:
                break
            offset = last + 1
