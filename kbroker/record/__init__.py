"""Record facade: validation + offset assignment on append, conversion for old clients, read helpers.

The log stores record batches v2 only (docs/architecture.md).  ``validate_for_append`` turns whatever a
producer sent into v2 bytes with offsets assigned:

* v2 batches (magic byte at offset 16 == 2) are checked and then stored AS SENT -- compressed batches stay
  compressed, nothing is re-encoded -- after an in-place rewrite of baseOffset (bytes 0-8) and
  partitionLeaderEpoch (12-16), plus attributes bit 3 / maxTimestamp and the CRC-32C when the topic uses
  LogAppendTime.  Per-record work is native, never a Python loop over decoded records: structure
  (``validate_records_v2`` / ``validate_records_region``), the compacted-topic null-key rule and the timestamp
  difference check (``record_facts``: first null key, smallest and largest timestamp), and offset deltas that are
  not 0..n-1, which Kafka's LogValidator rewrites instead of rejecting ("some older clients do not implement the
  inner offsets correctly"): ``renumber_records`` rewrites them, the batch keeps its header fields and codec and
  is recompressed (gzip at level 1).  A rebuilt batch above ``max_message_bytes`` is MESSAGE_TOO_LARGE, as in
  Kafka.  Rebuilding is bounded to ``REBUILD_MAX_BYTES`` (8 MiB) of records: an 11 KiB gzip batch of 1.2 M
  records all at offset delta 0 (8.4 MB inflated) cost 5.1 s and 523 MB when rebuilt in Python; now it is
  refused after inflating (45 ms in all), and one just under the bound (1.19 M records) is renumbered in ~15 ms,
  recompressed in ~50 ms and refused because the rebuilt batch (1.7 MB) is above max.message.bytes.
* v0/v1 message sets (Produce v0-v2) are checked message by message (CRC32 of every message, inner ones of
  compressed wrappers too) and UP-CONVERTED into one v2 batch with the producer's codec (the codec of the last
  compressed wrapper, as Kafka picks its source codec), keys/values/timestamps kept.  Magic 0 has no timestamp:
  its records get -1 (NO_TIMESTAMP), Kafka's choice, not the broker time.  This path is Python per message
  (~6 us), so one partition entry may hold at most ``LEGACY_MAX_MESSAGES`` (16,384, ~0.1 s) messages, inner ones
  included; 0.10-era clients send 16 KiB batches (a few hundred messages).

Error codes (the first failing check wins; Kafka's order: produce-version rules, size, CRC, records):
* empty/truncated data: INVALID_RECORD(87) for Produce v3+, else CORRUPT_MESSAGE(2);
* Produce v3+ with more or less than one batch, or magic != 2: INVALID_RECORD;
* zstd with Produce < v7 (or in a v0/v1 message), codec id 5-7: UNSUPPORTED_COMPRESSION_TYPE(76);
* an entry (12-byte log overhead included) above ``max_message_bytes``, or an up-converted or rebuilt batch
  above it: MESSAGE_TOO_LARGE(10);
* bad CRC (CRC-32C for v2, CRC32 for v0/v1), malformed v0/v1 message, undecompressable payload or one that
  inflates beyond what the entry may inflate (below): CORRUPT_MESSAGE;
* a payload that inflates beyond what is LEFT of the request's shared budget, after other entries of the same
  request used part of it: MESSAGE_TOO_LARGE (it may fit in a smaller request; the Java producer splits the
  batch and retries);
* a batch with non-sequential offset deltas above ``REBUILD_MAX_BYTES`` inflated: MESSAGE_TOO_LARGE;
* a message set entry of more than ``LEGACY_MAX_MESSAGES`` messages: RECORD_LIST_TOO_LARGE(18);
* v2: recordsCount != lastOffsetDelta + 1, no records, malformed record, control batch from a client:
  INVALID_RECORD;
* null key on a compacted topic: INVALID_RECORD for v2 (Kafka >= 2.x), CORRUPT_MESSAGE for v0/v1 (what Kafka 0.10
  answered; clients that speak only Produce v0-v2 do not know code 87);
* CreateTime timestamp (other than -1) further than ``timestamp_difference_max_ms`` from now: INVALID_TIMESTAMP(32).

Decompression bounds.  Kafka itself has none.  Here a partition entry may inflate to ``decompress_bound(cfg)`` =
``max(max_message_bytes * 64, 64 MiB)`` bytes (64x covers the ratios real data reaches, text/JSON ~5-20x), AND
all entries of one Produce request share a ``RequestBudget`` (the broker key max.request.decompressed.bytes,
32 MiB by default): ``max.message.bytes`` is a topic config any client may raise to 2^31-1 (through CreateTopics or
AlterConfigs), which made the per-entry bound 2^37 and let one request of 64 entries inflate 64 x 64 MiB (25 s of
the event loop).  The produce handler opens the budget (``request_budget(limit)``, a context variable, so
``Partition.append`` passes it on without knowing); ``validate_for_append(..., budget=)`` takes one explicitly.
Inflated bytes count against it whether the entry is accepted or not (the work was done).  gzip inflates at
~3 ms per MiB, so the default bounds one request to ~0.1 s of the event loop.  Internal writers (no budget) only
have the per-entry bound.

Records per batch need no separate cap: a v2 record is at least 7 bytes, so a batch holds at most
(inflated bytes) / 7 records, bounded by the budget above (32 MiB: 4.8 M records, ~50 ms of native walks).

AppendInfo.offset_of_max_timestamp is the LAST offset of the (first) batch carrying max_timestamp -- Kafka's
"shallow" offset for v2, which is what the time index needs, and knowable without decoding records.  For an
append of several v2 batches (only accepted without a Produce v3+ version) the producer fields are the first
batch's and last_sequence the last batch's.

The append result carries what its consumers would otherwise parse again from the bytes: ``batches``, one scan
entry per batch (the kernel's tuple, positions in ``buffer``), which the log's indexes are built from, and
``leader_epoch``, the partitionLeaderEpoch written into every batch, which the leader-epoch cache records.  A
follower copies its leader's batches unchanged: ``replicated_batches`` checks them (kernel, CRC included),
``stored_append`` is their append result for the log and ``replica_fields`` what the follower records of each.
Nothing outside ``kbroker/record`` (and the kernel, the byte-level owner by design: ``batch.py``) knows where a
header field sits.
"""

import contextvars
import struct
from contextlib import contextmanager
from dataclasses import dataclass

from kbroker._native import (OFFSET_DELTA_REASON, crc32c, record_facts, renumber_records, scan_batches,
                             validate_records_region, validate_records_v2)
from kbroker.errors import (CorruptMessage, InvalidRecord, InvalidTimestamp, MessageTooLarge, RecordListTooLarge,
                            UnsupportedCompressionType)

from . import batch as _batch
from . import compression, legacy
from .batch import (HEADER_SIZE, LOG_OVERHEAD, BatchHeader, Record, batch_header, batch_records, batch_size,
                    build_batch, header_entry, iter_batches, pack_batch, replica_fields)
from .compression import CODEC_NAMES, OutputLimitExceeded, compress, decompress

__all__ = [
    "RecordConfig", "AppendInfo", "validate_for_append", "down_convert", "iter_records", "batch_header",
    "BatchHeader", "Record", "build_batch", "batch_records", "iter_batches", "header_entry", "batch_size",
    "pack_batch", "replica_fields", "StoredAppend", "replicated_batches", "stored_append", "decompress_bound",
    "compress", "decompress", "CODEC_NAMES", "compression", "legacy", "HEADER_SIZE", "LOG_OVERHEAD", "RequestBudget",
    "request_budget", "DEFAULT_REQUEST_DECOMPRESSED_BYTES",
]

MAX_LONG = (1 << 63) - 1
DECOMPRESS_FACTOR = 64
DECOMPRESS_MIN = 64 << 20
# max.request.decompressed.bytes default: gzip inflates ~3 ms per MiB, so ~0.1 s of the event loop per request.
DEFAULT_REQUEST_DECOMPRESSED_BYTES = 32 << 20
# Records of a batch with non-sequential offset deltas that are renumbered and recompressed (~8 ms per MiB with
# gzip level 1); Kafka clients writing v2 never need it.
REBUILD_MAX_BYTES = 8 << 20
# Messages (inner ones included) one v0/v1 message-set entry may hold: up-conversion is ~6 us per message.
LEGACY_MAX_MESSAGES = 16384

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


@dataclass
class RecordConfig:
    """The topic settings validation needs (Kafka names: max.message.bytes, message.timestamp.type, ...)."""
    max_message_bytes: int = 1048588
    timestamp_type: str = "CreateTime"
    timestamp_difference_max_ms: int = MAX_LONG
    compacted: bool = False
    leader_epoch: int = 0

    @property
    def log_append_time(self):
        return self.timestamp_type in ("LogAppendTime", 1)


DEFAULT_CONFIG = RecordConfig()


@dataclass
class AppendInfo:
    """What ``validate_for_append`` returns: the bytes to store and the facts about them (module docstring)."""
    buffer: bytearray          # v2 batches, offsets assigned, ready to be written to the log as is
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    log_append_time: int       # the broker time stamped on the data, -1 for CreateTime topics
    size: int                  # len(buffer)
    # One entry per batch, in order: (position in buffer, size, base offset, last offset, max timestamp, records
    # count) -- the tuple kbroker._native.scan_batches gives, the maxTimestamp as stored (the append time with
    # LogAppendTime); the log indexes from these without reading the headers again.
    batches: list
    leader_epoch: int          # the partitionLeaderEpoch written into every batch


class StoredAppend:
    """The append result of batches stored unchanged (a follower's copy of its leader's): what ``Log.append`` reads
    -- ``buffer``, ``first_offset`` / ``last_offset`` (first batch's base, last batch's last), ``max_timestamp`` and
    ``offset_of_max_timestamp`` (the last offset of the first batch holding it), ``batches`` (entries as in
    AppendInfo, positions in ``buffer``)."""
    __slots__ = ("buffer", "first_offset", "last_offset", "max_timestamp", "offset_of_max_timestamp", "batches")

    def __init__(self, buffer, first_offset, last_offset, max_timestamp, offset_of_max_timestamp, batches):
        self.buffer = buffer
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.batches = batches


def replicated_batches(data):
    """Scan entries of the whole v2 batches at the start of ``data`` (a leader's Fetch answer, which may end in one
    partial batch), CRC-checked by the kernel; [] when not even the first batch is whole (the next fetch gets it
    whole). CorruptMessage when the first batch is whole but fails a check (bad CRC, magic, batchLength)."""
    n = len(data)
    if n == 0:
        return []
    entries, _valid_end = scan_batches(data, 0, n, True)
    if not entries and n >= HEADER_SIZE and batch_size(data) <= n:
        raise CorruptMessage("the first batch (%d of %d bytes) fails its checks" % (batch_size(data), n))
    return entries


def stored_append(view, entries):
    """StoredAppend of the batches ``entries`` (scan entries, consecutive, positions in ``view``) stored as they are:
    the buffer is the slice of ``view`` they cover, positions rebased to it."""
    start = entries[0][0]
    end = entries[-1][0] + entries[-1][1]
    max_ts, off_max = -1, entries[0][3]
    for e in entries:
        if e[4] > max_ts:
            max_ts, off_max = e[4], e[3]
    batches = entries if start == 0 else [(e[0] - start,) + e[1:] for e in entries]
    return StoredAppend(view[start:end], entries[0][2], entries[-1][3], max_ts, off_max, batches)


class RequestBudget:
    """Bytes the partition entries of one Produce request may still inflate, shared by all of them."""

    __slots__ = ("limit", "remaining")

    def __init__(self, limit):
        self.limit = self.remaining = max(0, int(limit))

    def take(self, n):
        self.remaining = max(0, self.remaining - n)


_REQUEST_BUDGET = contextvars.ContextVar("kbroker_record_request_budget", default=None)


@contextmanager
def request_budget(limit):
    """Open a shared RequestBudget of ``limit`` bytes for every ``validate_for_append`` in this block (this greenlet
    or thread only: a context variable). Yields the budget."""
    budget = RequestBudget(limit)
    token = _REQUEST_BUDGET.set(budget)
    try:
        yield budget
    finally:
        _REQUEST_BUDGET.reset(token)


class _Inflation:
    """What one partition entry may inflate: its own bound (``decompress_bound``) and the request's budget."""

    __slots__ = ("own", "budget")

    def __init__(self, own, budget):
        self.own, self.budget = own, budget

    def allowed(self):
        return self.own if self.budget is None else min(self.own, self.budget.remaining)

    def used(self, n):
        self.own -= n
        if self.budget is not None:
            self.budget.take(n)

    def failed(self, exc, allowed):
        """The exception for a payload that inflated beyond ``allowed`` (those bytes were inflated: they count).
        CORRUPT_MESSAGE when nothing more was ever possible for it; MESSAGE_TOO_LARGE when only the share other
        entries of the request had taken stood in the way."""
        budget = self.budget
        self.used(allowed)
        if budget is not None and allowed < min(self.own + allowed, budget.limit):
            return MessageTooLarge(
                "the request's record batches inflate beyond max.request.decompressed.bytes=%d (%d bytes were left "
                "for this one); send fewer or smaller batches per request" % (budget.limit, allowed))
        return exc


def decompress_bound(cfg):
    """Most bytes a request's compressed payloads may inflate to (see the module docstring)."""
    return max(cfg.max_message_bytes * DECOMPRESS_FACTOR, DECOMPRESS_MIN)


def _v3(produce_version):
    return produce_version is not None and produce_version >= 3


def validate_for_append(data, base_offset, now_ms, cfg=None, produce_version=None, budget=None):
    """Validate a produced partition payload and return its v2 form with offsets from ``base_offset``.

    ``produce_version`` None means an internal writer (no Produce-version rules, control batches allowed).
    ``budget``: the request's shared RequestBudget; default the one ``request_budget`` opened, if any.
    """
    cfg = cfg or DEFAULT_CONFIG
    if budget is None:
        budget = _REQUEST_BUDGET.get()
    inflation = _Inflation(decompress_bound(cfg), budget)
    mv = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    if len(mv) <= _batch.MAGIC_AT:  # v0/v1 messages and v2 batches have their magic byte at 16
        err = InvalidRecord if _v3(produce_version) else CorruptMessage
        raise err("record data of %d bytes holds no complete entry" % len(mv))
    magic = mv[_batch.MAGIC_AT]
    if magic == 2:
        return _append_v2(mv, base_offset, now_ms, cfg, produce_version, inflation)
    if _v3(produce_version):
        raise InvalidRecord("Produce v%d requires record batches with magic 2, got magic %d"
                            % (produce_version, magic))
    if magic in (0, 1):
        return _append_legacy(mv, base_offset, now_ms, cfg, produce_version, inflation)
    raise CorruptMessage("unknown magic %d" % magic)


# -------------------------------------------------------------------------------------------- v2
def _check_codec(codec, produce_version):
    if codec > compression.ZSTD:
        raise UnsupportedCompressionType("unknown compression codec id %d" % codec)
    if codec == compression.ZSTD and produce_version is not None and produce_version < 7:
        raise UnsupportedCompressionType("zstd requires Produce v7+, got v%d" % produce_version)


def _frame_v2(buf, produce_version):
    """Split ``buf`` into v2 batches: list of (pos, BatchHeader)."""
    n = len(buf)
    pos = 0
    out = []
    while pos < n:
        if n - pos < HEADER_SIZE:
            err = InvalidRecord if _v3(produce_version) else CorruptMessage
            raise err("record batch truncated at %d (%d bytes left)" % (pos, n - pos))
        header = batch_header(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptMessage("batchLength %d below the 49-byte minimum" % header.batch_length)
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > n:
            err = InvalidRecord if _v3(produce_version) else CorruptMessage
            raise err("record batch at %d truncated: needs %d bytes, %d left" % (pos, size, n - pos))
        if header.magic != 2:
            raise CorruptMessage("magic %d entry after a magic 2 batch" % header.magic)
        out.append((pos, header))
        pos += size
    if _v3(produce_version) and len(out) != 1:
        raise InvalidRecord("Produce v%d must carry exactly one record batch, got %d" % (produce_version, len(out)))
    return out


def _check_batch(buf, pos, h, now_ms, cfg, produce_version, inflation):
    """Validate one v2 batch; returns the rebuilt batch bytes (offset deltas renumbered) or None.

    The checks run in Kafka's order (codec, size, CRC, control, count, producer id, records); the header's flags
    are read from ``attributes`` once here rather than through BatchHeader's properties (this runs once per
    partition entry of every Produce request: ~1 us of the ~17 us an entry costs in Python)."""
    attributes = h.attributes
    codec = attributes & _batch.ATTR_CODEC_MASK
    if codec:  # NONE (0) always passes _check_codec
        _check_codec(codec, produce_version)
    size = h.batch_length + LOG_OVERHEAD
    if size > cfg.max_message_bytes:
        raise MessageTooLarge("record batch of %d bytes exceeds max.message.bytes %d" % (size,
                                                                                       cfg.max_message_bytes))
    if crc32c(memoryview(buf)[pos + _batch.CRC_FROM:pos + size]) != h.crc:
        raise CorruptMessage("CRC-32C mismatch in the batch at %d" % pos)
    if attributes & _batch.ATTR_CONTROL and produce_version is not None:
        raise InvalidRecord("clients may not write control batches")
    count = h.records_count
    if count < 1:
        raise InvalidRecord("record batch without records")
    if count != h.last_offset_delta + 1:
        raise InvalidRecord("recordsCount %d != lastOffsetDelta %d + 1" % (count, h.last_offset_delta))
    if attributes & _batch.ATTR_TRANSACTIONAL and h.producer_id < 0:
        raise InvalidRecord("transactional batch without a producer id")
    if codec == compression.NONE:
        region = None   # the records of buf[pos:pos+size], sliced only when a check below needs them
        reason = validate_records_v2(buf, pos, size)
    else:
        allowed = inflation.allowed()
        try:
            region = _batch.records_region(buf, pos, h, allowed)
        except OutputLimitExceeded as e:
            raise inflation.failed(e, allowed) from None
        inflation.used(len(region))
        reason = validate_records_region(region, count)
    if reason is not None and reason != OFFSET_DELTA_REASON:
        raise InvalidRecord("malformed records in the batch at %d: %s" % (pos, reason))
    check_ts = cfg.timestamp_difference_max_ms < MAX_LONG and not cfg.log_append_time
    if cfg.compacted or check_ts:
        if region is None:
            region = memoryview(buf)[pos + HEADER_SIZE:pos + size]
        null_key, min_ts, max_ts = record_facts(region, count, h.base_timestamp)
        if cfg.compacted and null_key >= 0:
            raise InvalidRecord("compacted topic cannot accept a record without a key (record %d of the batch "
                                "at %d)" % (null_key, pos))
        if check_ts and min_ts != -1:
            _check_timestamps((min_ts, max_ts), now_ms, cfg)
    if reason is None:
        return None
    if region is None:
        region = memoryview(buf)[pos + HEADER_SIZE:pos + size]
    return _rebuild(h, region, cfg)


def _rebuild(h, region, cfg):
    """The batch ``h`` with offset deltas 0..n-1 (Kafka rewrites, never rejects, such batches): same header
    fields and codec, records renumbered natively, recompressed fast. Bounded by REBUILD_MAX_BYTES."""
    if len(region) > REBUILD_MAX_BYTES:
        raise MessageTooLarge("offset deltas not 0..n-1 in a batch of %d records inflating to %d bytes: such "
                              "batches are rewritten only up to %d bytes" % (h.records_count, len(region),
                                                                             REBUILD_MAX_BYTES))
    records = renumber_records(region, h.records_count)
    if h.codec != compression.NONE:
        records = compress(h.codec, records, fast=True)
    size = HEADER_SIZE + len(records)
    if size > cfg.max_message_bytes:
        raise MessageTooLarge("record batch rewritten with sequential offset deltas is %d bytes, above "
                              "max.message.bytes %d" % (size, cfg.max_message_bytes))
    return pack_batch(h, records)


def _check_timestamps(timestamps, now_ms, cfg):
    limit = cfg.timestamp_difference_max_ms
    for ts in timestamps:
        if ts != -1 and abs(ts - now_ms) > limit:
            raise InvalidTimestamp("timestamp %d is more than %d ms away from broker time %d" % (ts, limit, now_ms))


def _append_v2(data, base_offset, now_ms, cfg, produce_version, inflation):
    batches = _frame_v2(data, produce_version)
    rebuilt_any = False
    pieces = []
    for pos, h in batches:
        rebuilt = _check_batch(data, pos, h, now_ms, cfg, produce_version, inflation)
        if rebuilt is not None:
            rebuilt_any = True
            pieces.append(rebuilt)
        elif len(batches) > 1:  # one batch (every Produce v3+ entry) needs no pieces: nothing was rebuilt
            pieces.append(memoryview(data)[pos:pos + h.batch_length + LOG_OVERHEAD])
    if rebuilt_any:
        buf = bytearray(b"".join(pieces))
        batches = _frame_v2(buf, None)
    elif isinstance(data, memoryview) and not data.readonly:
        # The request buffer is ours (the connection allocated it): assign offsets in place, no copy.
        buf = data
    else:
        buf = bytearray(data)
    return _assign(buf, batches, base_offset, now_ms, cfg)


def _assign(buf, batches, base_offset, now_ms, cfg):
    """Write offsets / leader epoch (and LogAppendTime) into the v2 batches of ``buf`` in place."""
    lat = cfg.log_append_time
    epoch = cfg.leader_epoch
    next_offset = base_offset
    max_ts = -1
    offset_of_max = -1
    total = 0
    entries = []
    for pos, h in batches:
        _I64.pack_into(buf, pos + _batch.BASE_OFFSET_AT, next_offset)
        _I32.pack_into(buf, pos + _batch.LEADER_EPOCH_AT, epoch)
        last = next_offset + h.last_offset_delta
        batch_max = h.max_timestamp
        size = h.batch_length + LOG_OVERHEAD
        if lat:
            _I16.pack_into(buf, pos + _batch.ATTRIBUTES_AT, h.attributes | _batch.ATTR_LOG_APPEND_TIME)
            _I64.pack_into(buf, pos + _batch.MAX_TIMESTAMP_AT, now_ms)
            _batch.write_crc(buf, pos, size)
            batch_max = now_ms
        if batch_max > max_ts:
            max_ts = batch_max
            offset_of_max = last
        total += h.records_count
        entries.append((pos, size, next_offset, last, batch_max, h.records_count))
        next_offset = last + 1
    first = batches[0][1]
    last_h = batches[-1][1]
    return AppendInfo(
        buffer=buf, first_offset=base_offset, last_offset=next_offset - 1, max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max, record_count=total, producer_id=first.producer_id,
        producer_epoch=first.producer_epoch, base_sequence=first.base_sequence,
        last_sequence=_batch.last_sequence(last_h.base_sequence, last_h.last_offset_delta),
        is_transactional=first.is_transactional, log_append_time=now_ms if lat else -1, size=len(buf),
        batches=entries, leader_epoch=epoch)


# ---------------------------------------------------------------------------------------- v0 / v1
def _append_legacy(data, base_offset, now_ms, cfg, produce_version, inflation):
    records = []
    codec = compression.NONE
    check_ts = not cfg.log_append_time and cfg.timestamp_difference_max_ms < MAX_LONG
    for m in legacy.iter_messages(data):
        if m.size > cfg.max_message_bytes:
            raise MessageTooLarge("message of %d bytes exceeds max.message.bytes %d" % (m.size,
                                                                                       cfg.max_message_bytes))
        if m.codec == compression.NONE:
            records.append((m.timestamp, m.key, m.value))
        else:
            if m.codec == compression.ZSTD:
                raise UnsupportedCompressionType("zstd is not allowed in magic %d messages" % m.magic)
            allowed = inflation.allowed()
            try:
                inner = legacy.inner_messages(m, allowed, LEGACY_MAX_MESSAGES - len(records))
            except OutputLimitExceeded as e:
                raise inflation.failed(e, allowed) from None
            inflation.used(sum(i.size for i in inner))
            codec = m.codec
            if m.log_append_time:
                records.extend((m.timestamp, i.key, i.value) for i in inner)
            else:
                records.extend((i.timestamp, i.key, i.value) for i in inner)
        if len(records) > LEGACY_MAX_MESSAGES:
            raise RecordListTooLarge("message set holds more than %d messages; send smaller batches"
                                     % LEGACY_MAX_MESSAGES)
    if cfg.compacted:
        for _ts, key, _value in records:
            if key is None:
                raise CorruptMessage("compacted topic cannot accept a message without a key")
    if check_ts:
        _check_timestamps((r[0] for r in records), now_ms, cfg)
    lat = cfg.log_append_time
    out = build_batch(
        [Record(i, ts, key, value, ()) for i, (ts, key, value) in enumerate(records)],
        base_offset=base_offset, codec=codec,
        timestamp_type=_batch.LOG_APPEND_TIME if lat else _batch.CREATE_TIME,
        partition_leader_epoch=cfg.leader_epoch, max_timestamp=now_ms if lat else None)
    if len(out) > cfg.max_message_bytes:
        raise MessageTooLarge("up-converted batch of %d bytes exceeds max.message.bytes %d"
                              % (len(out), cfg.max_message_bytes))
    buf = bytearray(out)
    return _assign(buf, [(0, batch_header(buf, 0))], base_offset, now_ms, cfg)


# ------------------------------------------------------------------------------------------- read
def down_convert(v2_bytes, to_magic, max_size=DECOMPRESS_MIN):
    """Magic 0/1 message set holding every record of the COMPLETE v2 batches of ``v2_bytes``.

    Control batches are skipped and headers dropped; offsets stay absolute; a batch keeps its codec
    (one wrapper per batch); a trailing partial batch is dropped.  zstd batches cannot be expressed in
    magic 0/1: UnsupportedCompressionType (the fetch handler answers UNSUPPORTED_COMPRESSION_TYPE).
    """
    if to_magic not in (0, 1):
        raise ValueError("down-conversion targets magic 0 or 1, not %r" % (to_magic,))
    out = []
    for pos, h in iter_batches(v2_bytes):
        if h.codec == compression.ZSTD:
            raise UnsupportedCompressionType("zstd batch at offset %d cannot be down-converted" % h.base_offset)
        records = batch_records(v2_bytes, pos, h, max_size)
        if not records:
            continue
        lat = h.max_timestamp if h.timestamp_type == _batch.LOG_APPEND_TIME else None
        out.append(legacy.build_message_set([r[:4] for r in records], to_magic, h.codec, lat))
    return b"".join(out)


def iter_records(v2_bytes, include_control=False, max_size=DECOMPRESS_MIN):
    """Yield ``(offset, timestamp, key, value, headers)`` for the records of every complete v2 batch."""
    for pos, h in iter_batches(v2_bytes, include_control=include_control):
        yield from batch_records(v2_bytes, pos, h, max_size)
