"""Record facade: validation + offset assignment on append, conversion for old clients, read helpers.

The log stores record batches v2 only (docs/architecture.md).  ``validate_for_append`` turns whatever a
producer sent into v2 bytes with offsets assigned:

* v2 batches (magic byte at offset 16 == 2) are checked and then stored AS SENT -- compressed batches stay
  compressed, nothing is re-encoded -- after an in-place rewrite of baseOffset (bytes 0-8) and
  partitionLeaderEpoch (12-16), plus attributes bit 3 / maxTimestamp and the CRC-32C when the topic uses
  LogAppendTime.  For an uncompressed batch on a default topic this is a constant number of Python steps
  around two native kernels (CRC-32C, ``validate_records_v2``); per-record Python decoding only happens when
  it is needed: compacted topics (null-key check), a finite ``timestamp_difference_max_ms``, or offset
  deltas that are not 0..n-1 (the batch is then rebuilt with sequential deltas, as Kafka's LogValidator does).
* v0/v1 message sets (Produce v0-v2) are checked message by message (CRC32 of every message, inner ones of
  compressed wrappers too) and UP-CONVERTED into one v2 batch with the producer's codec (the codec of the last
  compressed wrapper, as Kafka picks its source codec), keys/values/timestamps kept.  Magic 0 has no timestamp:
  its records get -1 (NO_TIMESTAMP), Kafka's choice, not the broker time.

Error codes (the first failing check wins; Kafka's order: produce-version rules, size, CRC, records):
* empty/truncated data: INVALID_RECORD(87) for Produce v3+, else CORRUPT_MESSAGE(2);
* Produce v3+ with more or less than one batch, or magic != 2: INVALID_RECORD;
* zstd with Produce < v7 (or in a v0/v1 message), codec id 5-7: UNSUPPORTED_COMPRESSION_TYPE(76);
* an entry (12-byte log overhead included) above ``max_message_bytes``, or an up-converted batch above it:
  MESSAGE_TOO_LARGE(10);
* bad CRC (CRC-32C for v2, CRC32 for v0/v1), malformed v0/v1 message, undecompressable payload or one that
  inflates beyond ``decompress_bound(cfg)``: CORRUPT_MESSAGE;
* v2: recordsCount != lastOffsetDelta + 1, no records, malformed record, control batch from a client:
  INVALID_RECORD;
* null key on a compacted topic: INVALID_RECORD for v2 (Kafka >= 2.x), CORRUPT_MESSAGE for v0/v1 (what Kafka 0.10
  answered; clients that speak only Produce v0-v2 do not know code 87);
* CreateTime timestamp (other than -1) further than ``timestamp_difference_max_ms`` from now: INVALID_TIMESTAMP(32).

Decompression bound: ``max(max_message_bytes * 64, 64 MiB)`` output bytes per request.  Kafka itself has no
bound; 64x covers the ratios real data reaches (text/JSON ~5-20x) with room to spare, while a compression bomb is
refused after a bounded amount of work and memory.

AppendInfo.offset_of_max_timestamp is the LAST offset of the (first) batch carrying max_timestamp -- Kafka's
"shallow" offset for v2, which is what the time index needs, and knowable without decoding records.  For an
append of several v2 batches (only accepted without a Produce v3+ version) the producer fields are the first
batch's and last_sequence the last batch's.
"""

import struct
from dataclasses import dataclass

from kbroker._native import validate_records_region, validate_records_v2
from kbroker._native.batch_py import OFFSET_DELTA_REASON
from kbroker.errors import (CorruptMessage, InvalidRecord, InvalidTimestamp, MessageTooLarge,
                            UnsupportedCompressionType)

from . import batch as _batch
from . import compression, legacy
from .batch import (HEADER_SIZE, LOG_OVERHEAD, BatchHeader, Record, batch_header, batch_records, build_batch,
                    iter_batches)
from .compression import CODEC_NAMES, compress, decompress

__all__ = [
    "RecordConfig", "AppendInfo", "validate_for_append", "down_convert", "iter_records", "batch_header",
    "BatchHeader", "Record", "build_batch", "batch_records", "iter_batches", "decompress_bound", "compress",
    "decompress", "CODEC_NAMES", "compression", "legacy", "HEADER_SIZE", "LOG_OVERHEAD",
]

MAX_LONG = (1 << 63) - 1
DECOMPRESS_FACTOR = 64
DECOMPRESS_MIN = 64 << 20

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


def decompress_bound(cfg):
    """Most bytes a request's compressed payloads may inflate to (see the module docstring)."""
    return max(cfg.max_message_bytes * DECOMPRESS_FACTOR, DECOMPRESS_MIN)


def _v3(produce_version):
    return produce_version is not None and produce_version >= 3


def validate_for_append(data, base_offset, now_ms, cfg=None, produce_version=None):
    """Validate a produced partition payload and return its v2 form with offsets from ``base_offset``.

    ``produce_version`` None means an internal writer (no Produce-version rules, control batches allowed).
    """
    cfg = cfg or DEFAULT_CONFIG
    mv = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    if len(mv) < 17:
        err = InvalidRecord if _v3(produce_version) else CorruptMessage
        raise err("record data of %d bytes holds no complete entry" % len(mv))
    magic = mv[16]
    if magic == 2:
        return _append_v2(mv, base_offset, now_ms, cfg, produce_version)
    if _v3(produce_version):
        raise InvalidRecord("Produce v%d requires record batches with magic 2, got magic %d"
                            % (produce_version, magic))
    if magic in (0, 1):
        return _append_legacy(mv, base_offset, now_ms, cfg, produce_version)
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
        if pos + header.size > n:
            err = InvalidRecord if _v3(produce_version) else CorruptMessage
            raise err("record batch at %d truncated: needs %d bytes, %d left" % (pos, header.size, n - pos))
        if header.magic != 2:
            raise CorruptMessage("magic %d entry after a magic 2 batch" % header.magic)
        out.append((pos, header))
        pos += header.size
    if _v3(produce_version) and len(out) != 1:
        raise InvalidRecord("Produce v%d must carry exactly one record batch, got %d" % (produce_version, len(out)))
    return out


def _check_batch(buf, pos, h, now_ms, cfg, produce_version, budget):
    """Validate one v2 batch; returns (decompressed bytes used, rebuilt batch bytes or None)."""
    _check_codec(h.codec, produce_version)
    if h.size > cfg.max_message_bytes:
        raise MessageTooLarge("record batch of %d bytes exceeds max.message.bytes %d" % (h.size,
                                                                                       cfg.max_message_bytes))
    if _batch.compute_crc(buf, pos, h.size) != h.crc:
        raise CorruptMessage("CRC-32C mismatch in the batch at %d" % pos)
    if h.is_control and produce_version is not None:
        raise InvalidRecord("clients may not write control batches")
    if h.records_count < 1:
        raise InvalidRecord("record batch without records")
    if h.records_count != h.last_offset_delta + 1:
        raise InvalidRecord("recordsCount %d != lastOffsetDelta %d + 1" % (h.records_count, h.last_offset_delta))
    if h.is_transactional and h.producer_id < 0:
        raise InvalidRecord("transactional batch without a producer id")
    used = 0
    if h.codec == compression.NONE:
        region = None
        reason = validate_records_v2(buf, pos, h.size)
    else:
        region = _batch.records_region(buf, pos, h, budget)
        used = len(region)
        reason = validate_records_region(region, h.records_count)
    if reason is not None and reason != OFFSET_DELTA_REASON:
        raise InvalidRecord("malformed records in the batch at %d: %s" % (pos, reason))
    check_ts = not cfg.log_append_time and cfg.timestamp_difference_max_ms < MAX_LONG
    if not (cfg.compacted or check_ts or reason is not None):
        return used, None
    if region is None:
        region = memoryview(buf)[pos + HEADER_SIZE:pos + h.size]
    records = _batch.decode_records(region, h.records_count, 0, h.base_timestamp)
    if cfg.compacted:
        for rec in records:
            if rec[2] is None:
                raise InvalidRecord("compacted topic cannot accept a record without a key")
    if check_ts:
        _check_timestamps((rec[1] for rec in records), now_ms, cfg)
    if reason is None:
        return used, None
    # Offset deltas not 0..n-1: rebuild with sequential deltas, same codec and producer fields.
    rebuilt = build_batch(
        [Record(i, rec[1], rec[2], rec[3], rec[4]) for i, rec in enumerate(records)],
        base_offset=h.base_offset, codec=h.codec, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, timestamp_type=h.timestamp_type, is_transactional=h.is_transactional,
        is_control=h.is_control, partition_leader_epoch=h.partition_leader_epoch, max_timestamp=h.max_timestamp)
    return used, rebuilt


def _check_timestamps(timestamps, now_ms, cfg):
    limit = cfg.timestamp_difference_max_ms
    for ts in timestamps:
        if ts != -1 and abs(ts - now_ms) > limit:
            raise InvalidTimestamp("timestamp %d is more than %d ms away from broker time %d" % (ts, limit, now_ms))


def _append_v2(data, base_offset, now_ms, cfg, produce_version):
    batches = _frame_v2(data, produce_version)
    budget = decompress_bound(cfg)
    rebuilt_any = False
    pieces = []
    for pos, h in batches:
        used, rebuilt = _check_batch(data, pos, h, now_ms, cfg, produce_version, budget)
        budget -= used
        if rebuilt is not None:
            rebuilt_any = True
            pieces.append(rebuilt)
        else:
            pieces.append(memoryview(data)[pos:pos + h.size])
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
    next_offset = base_offset
    max_ts = -1
    offset_of_max = -1
    total = 0
    for pos, h in batches:
        _I64.pack_into(buf, pos + _batch.BASE_OFFSET_AT, next_offset)
        _I32.pack_into(buf, pos + _batch.LEADER_EPOCH_AT, cfg.leader_epoch)
        last = next_offset + h.last_offset_delta
        batch_max = h.max_timestamp
        if lat:
            _I16.pack_into(buf, pos + _batch.ATTRIBUTES_AT, h.attributes | _batch.ATTR_LOG_APPEND_TIME)
            _I64.pack_into(buf, pos + _batch.MAX_TIMESTAMP_AT, now_ms)
            _batch.write_crc(buf, pos, h.size)
            batch_max = now_ms
        if batch_max > max_ts:
            max_ts = batch_max
            offset_of_max = last
        total += h.records_count
        next_offset = last + 1
    first = batches[0][1]
    last_h = batches[-1][1]
    return AppendInfo(
        buffer=buf, first_offset=base_offset, last_offset=next_offset - 1, max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max, record_count=total, producer_id=first.producer_id,
        producer_epoch=first.producer_epoch, base_sequence=first.base_sequence,
        last_sequence=_batch.last_sequence(last_h.base_sequence, last_h.last_offset_delta),
        is_transactional=first.is_transactional, log_append_time=now_ms if lat else -1, size=len(buf))


# ---------------------------------------------------------------------------------------- v0 / v1
def _append_legacy(data, base_offset, now_ms, cfg, produce_version):
    budget = decompress_bound(cfg)
    records = []
    codec = compression.NONE
    check_ts = not cfg.log_append_time and cfg.timestamp_difference_max_ms < MAX_LONG
    for m in legacy.iter_messages(data):
        if m.size > cfg.max_message_bytes:
            raise MessageTooLarge("message of %d bytes exceeds max.message.bytes %d" % (m.size,
                                                                                       cfg.max_message_bytes))
        if m.codec == compression.NONE:
            records.append((m.timestamp, m.key, m.value))
            continue
        if m.codec == compression.ZSTD:
            raise UnsupportedCompressionType("zstd is not allowed in magic %d messages" % m.magic)
        inner = legacy.inner_messages(m, budget)
        budget -= sum(i.size for i in inner)
        codec = m.codec
        if m.log_append_time:
            records.extend((m.timestamp, i.key, i.value) for i in inner)
        else:
            records.extend((i.timestamp, i.key, i.value) for i in inner)
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
