"""Record schemas of the ``__transaction_state`` topic (Kafka's TransactionLogKey / TransactionLogValue), so
``kafka-dump-log.sh --transaction-log-decoder`` and any other Kafka tool read what kbroker writes.

One record per transactional id and state change; the last record of a key wins, a tombstone (null value) deletes
the id (expiration). Both key and value are ``int16 version`` + a struct of that version:

    key   v0  transactional_id string                               (the version doubles as the record type:
                                                                      0 = transaction log in Kafka's coordinator
                                                                      record types)
    value v0  producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32 | transaction_status int8 |
              transaction_partitions [topic string | partition_ids [int32]] (nullable: null in state Empty) |
              transaction_last_update_timestamp_ms int64 | transaction_start_timestamp_ms int64
    value v1  the same, flexible (compact lengths, tagged fields: Kafka 4's KIP-890 additions, ignored here)

kbroker writes value v0, what Kafka writes before transaction.version 1 (Kafka 3.x); it reads v0 and v1. Status ids
are ``metadata.py``'s state ids (Empty 0 ... PrepareEpochFence 7). Records are written uncompressed, without
producer id, in one v2 batch per write (``build``), as Kafka's TransactionLog.EnforcedCompression / acks=-1.
"""
import struct
from collections import namedtuple

from kbroker.coordinator.schemas import RecordSchema
from kbroker.protocol.schema import Field as F, SchemaError
from kbroker.record.batch import Record, build_batch

KEY_VERSION = 0
VALUE_VERSION = 0

_VERSION = struct.Struct(">h")

TRANSACTION_LOG_KEY = RecordSchema("TransactionLogKey", "0", "none", [
    F("transactional_id", "string", "0"),
])

TRANSACTION_LOG_VALUE = RecordSchema("TransactionLogValue", "0-1", "1+", [
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("transaction_timeout_ms", "int32"),
    F("transaction_status", "int8"),
    F("transaction_partitions", "[]", nullable="0+", fields=[
        F("topic", "string"),
        F("partition_ids", "[]int32"),
    ]),
    F("transaction_last_update_timestamp_ms", "int64"),
    F("transaction_start_timestamp_ms", "int64"),
])

# What a value decodes to: partitions is a frozenset of (topic, partition).
TxnRecord = namedtuple("TxnRecord", "producer_id producer_epoch timeout_ms state_id partitions "
                                    "last_update_ms start_ms")


def key_bytes(transactional_id):
    return TRANSACTION_LOG_KEY.encode(KEY_VERSION, {"transactional_id": transactional_id})


def value_bytes(producer_id, producer_epoch, timeout_ms, state_id, partitions, last_update_ms, start_ms,
                empty=False):
    """The v0 value; ``partitions`` an iterable of (topic, partition), written grouped by topic in name order
    (null when ``empty``: Kafka writes no partition list in state Empty)."""
    if empty:
        grouped = None
    else:
        by_topic = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        grouped = [{"topic": t, "partition_ids": sorted(ps)} for t, ps in sorted(by_topic.items())]
    return TRANSACTION_LOG_VALUE.encode(VALUE_VERSION, {
        "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_timeout_ms": timeout_ms,
        "transaction_status": state_id, "transaction_partitions": grouped,
        "transaction_last_update_timestamp_ms": last_update_ms, "transaction_start_timestamp_ms": start_ms})


def decode_key(buf):
    """The transactional id of a key; SchemaError for another record type or a malformed key."""
    if buf is None or len(buf) < 2:
        raise SchemaError("__transaction_state key shorter than its version")
    version = _VERSION.unpack_from(buf, 0)[0]
    if version != KEY_VERSION:
        raise SchemaError("unknown __transaction_state key version %d" % version)
    return TRANSACTION_LOG_KEY.decode(buf)[1]["transactional_id"]


def decode_value(buf):
    """A ``TxnRecord``, or None for a tombstone; SchemaError for an unknown version or malformed bytes."""
    if buf is None:
        return None
    _version, v = TRANSACTION_LOG_VALUE.decode(buf)
    parts = frozenset((t["topic"], p) for t in (v["transaction_partitions"] or ()) for p in t["partition_ids"])
    return TxnRecord(v["producer_id"], v["producer_epoch"], v["transaction_timeout_ms"], v["transaction_status"],
                     parts, v["transaction_last_update_timestamp_ms"], v["transaction_start_timestamp_ms"])


def build(records, now):
    """One uncompressed v2 batch (base offset 0: the partition assigns offsets) of ``[(key, value | None)]``."""
    return build_batch([Record(i, now, k, v) for i, (k, v) in enumerate(records)])
