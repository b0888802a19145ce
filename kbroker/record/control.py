"""Transaction markers: the control batches a transaction coordinator has partition leaders write (KIP-98).

A marker is one v2 batch with attributes ``isTransactional`` (bit 4) and ``isControl`` (bit 5) set, the producer's
id and epoch in the header, baseSequence -1, and exactly one record:

    key   = version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)             -- 4 bytes
    value = version int16 (0) | coordinatorEpoch int32                          -- 6 bytes

(Kafka's ControlRecordType / EndTransactionMarker; types 2/3 are KRaft's leader-change and snapshot records, which
kbroker never writes and skips like any unknown control type.) The record's offset delta and timestamp delta are 0;
its timestamp is the time the leader wrote it. Consumers never see control records: clients skip batches with the
control bit, and ``iter_records`` leaves them out unless asked.

Everything else in kbroker learns a marker's meaning from ``marker_of(buf, pos)`` on a whole batch, so no other
module knows where the type or the coordinator epoch sit.
"""
import struct
from collections import namedtuple

from kbroker.errors import InvalidRecord
from kbroker.record.batch import Record, batch_header, batch_records, build_batch

ABORT = 0
COMMIT = 1

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_VERSION = 0

Marker = namedtuple("Marker", "producer_id producer_epoch commit coordinator_epoch")


def marker_key(commit):
    return _KEY.pack(CONTROL_VERSION, COMMIT if commit else ABORT)


def marker_value(coordinator_epoch):
    return _VALUE.pack(CONTROL_VERSION, coordinator_epoch)


def marker_batch(producer_id, producer_epoch, coordinator_epoch, commit, timestamp, partition_leader_epoch=-1):
    """One marker batch (base offset 0: the leader's append assigns the offset) -> bytes."""
    return build_batch([Record(0, timestamp, marker_key(commit), marker_value(coordinator_epoch))],
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                       is_transactional=True, is_control=True, partition_leader_epoch=partition_leader_epoch)


def control_type(key):
    """The control record type of a control record key (bytes-like), or None when the key is malformed."""
    if key is None or len(key) < 4:
        return None
    version, kind = _KEY.unpack_from(key, 0)
    if version < 0:
        return None
    return kind


def marker_of(buf, pos=0):
    """The ``Marker`` held by the control batch at ``buf[pos:]``; None when it is not a control batch or its record
    is not a COMMIT/ABORT marker (an unknown control type, a malformed value)."""
    h = batch_header(buf, pos)
    if not h.is_control:
        return None
    try:
        records = batch_records(buf, pos, h, max_size=4096)   # a marker record is 19 bytes
    except (InvalidRecord, ValueError):
        return None
    if not records:
        return None
    key, value = records[0][2], records[0][3]
    kind = control_type(key)
    if kind not in (ABORT, COMMIT) or value is None or len(value) < 6:
        return None
    _version, coordinator_epoch = _VALUE.unpack_from(value, 0)
    return Marker(h.producer_id, h.producer_epoch, kind == COMMIT, coordinator_epoch)
