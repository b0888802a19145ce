"""Record batch v2 (magic 2): header access, record decoding and batch building.

Batch layout (big-endian, offsets from the batch start; 61-byte header, see docs/architecture.md):
   0 baseOffset int64 | 8 batchLength int32 (= size - 12) | 12 partitionLeaderEpoch int32 | 16 magic int8 = 2 |
  17 crc uint32 = CRC-32C of bytes 21..end | 21 attributes int16 | 23 lastOffsetDelta int32 |
  27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 |
  53 baseSequence int32 | 57 recordsCount int32 | 61 records (one compressed blob when codec != 0)
attributes: bits 0-2 codec, bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional, bit 5 control,
bit 6 delete horizon (baseTimestamp is then the horizon, record timestamps stay relative to it).

Record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint | keyLength varint | key |
valueLength varint | value | headersCount varint | (headerKeyLength varint | key utf-8 | headerValueLength varint |
value) * headersCount.  A length of -1 means null (never for a header key).

With LogAppendTime every record's timestamp is the batch maxTimestamp (the broker's append time); the stored
deltas are ignored, as Kafka's DefaultRecordBatch does.

Decoding here is a per-record Python loop: it serves conversion (up/down), compacted-topic key checks,
opt-in timestamp checks, tools and tests -- never the plain append path, which uses the native validators.

This module is the one owner of the layout above in Python: every other module reads headers through
``batch_header`` / ``header_entry`` / ``batch_size`` and writes them through ``pack_batch`` (or the ``*_AT``
offsets, used inside ``kbroker/record`` only), never by byte position.  The second owner, by design, is the byte
kernel (``kbroker/_native/batch.pyx``, mirrored by its pure twin ``batch_py.py``): ``scan_batches`` and the record
validators walk the same bytes at C speed, and their entries ``(pos, size, base_offset, last_offset, max_timestamp,
records_count)`` are the currency the log indexes with.  ``header_entry`` is that entry read from one header, and
tests/unit/test_record.py checks that both owners agree.
"""

import struct
from collections import namedtuple

from kbroker._native import crc32c, decode_varint, encode_varint
from kbroker.errors import CorruptMessage, InvalidRecord

from . import compression


HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC = 2
NO_TIMESTAMP = -1

ATTR_CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

# Byte offsets of the header fields kbroker/record reads or rewrites in place (the layout above).
BASE_OFFSET_AT = 0
BATCH_LENGTH_AT = 8
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
CRC_FROM = 21
MAX_TIMESTAMP_AT = 35
PRODUCER_ID_AT = 43          # producerId int64, producerEpoch int16, baseSequence int32
# Smallest batchLength: the header bytes after baseOffset and batchLength (a batch of no records, 61 bytes).
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == HEADER_SIZE

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_PRODUCER = struct.Struct(">qhi")

BatchHeader = namedtuple(
    "BatchHeader",
    "base_offset batch_length partition_leader_epoch magic crc attributes last_offset_delta base_timestamp "
    "max_timestamp producer_id producer_epoch base_sequence records_count",
)
BatchHeader.size = property(lambda h: h.batch_length + LOG_OVERHEAD)
BatchHeader.codec = property(lambda h: h.attributes & ATTR_CODEC_MASK)
BatchHeader.timestamp_type = property(lambda h: LOG_APPEND_TIME if h.attributes & ATTR_LOG_APPEND_TIME else CREATE_TIME)
BatchHeader.is_transactional = property(lambda h: bool(h.attributes & ATTR_TRANSACTIONAL))
BatchHeader.is_control = property(lambda h: bool(h.attributes & ATTR_CONTROL))
BatchHeader.last_offset = property(lambda h: h.base_offset + h.last_offset_delta)

# Input of build_batch: offset_delta relative to the batch base offset, absolute timestamp (ms),
# key/value bytes or None, headers a sequence of (str|bytes key, bytes|None value).
Record = namedtuple("Record", "offset_delta timestamp key value headers")
Record.__new__.__defaults__ = ((),)


def batch_header(buf, pos=0):
    """The 61-byte header at ``buf[pos]`` as a BatchHeader; CorruptMessage when fewer bytes remain."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptMessage("record batch header truncated at %d" % pos)
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def header_entry(buf, pos=0):
    """The scan entry ``(pos, size, base_offset, last_offset, max_timestamp, records_count)`` that
    ``kbroker._native.scan_batches`` gives, read from the 61-byte header at ``buf[pos]`` alone; None when fewer than
    61 bytes remain, magic != 2 or batchLength < 49 (the kernel's checks that need no more than the header; no CRC,
    the records are not looked at).  For a batch larger than a read window, and a segment's first header."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        return None
    (base, batch_length, _epoch, magic, _crc, _attributes, last_delta, _base_ts, max_ts, _pid, _pepoch, _seq,
     count) = HEADER.unpack_from(buf, pos)
    if magic != MAGIC or batch_length < MIN_BATCH_LENGTH:
        return None
    return pos, LOG_OVERHEAD + batch_length, base, base + last_delta, max_ts, count


def replica_fields(buf, pos=0):
    """``(partition_leader_epoch, producer_id, producer_epoch, base_sequence)`` of the batch at ``buf[pos]`` (61
    bytes there, unchecked): what a follower records of each batch it copies, read in two steps (~0.3 us a batch
    against ~0.75 us for the whole ``batch_header``, on the replication path)."""
    epoch = _I32.unpack_from(buf, pos + LEADER_EPOCH_AT)[0]
    producer_id, producer_epoch, base_sequence = _PRODUCER.unpack_from(buf, pos + PRODUCER_ID_AT)
    return epoch, producer_id, producer_epoch, base_sequence


def batch_size(buf, pos=0):
    """Bytes the batch at ``buf[pos]`` occupies (12 + batchLength), read from its first 12 bytes alone; -1 when fewer
    remain.  Not checked: the caller compares it with ``HEADER_SIZE`` and with what it holds."""
    if pos < 0 or len(buf) - pos < LOG_OVERHEAD:
        return -1
    return LOG_OVERHEAD + _I32.unpack_from(buf, pos + BATCH_LENGTH_AT)[0]


def pack_batch(header, region):
    """A whole v2 batch (bytearray): the fields of ``header`` (a BatchHeader; ``_replace`` the ones that change)
    followed by the records ``region`` (already compressed when the header's codec says so).  batchLength, magic and
    the CRC are computed here, whatever ``header`` holds for them."""
    size = HEADER_SIZE + len(region)
    out = bytearray(size)
    HEADER.pack_into(out, 0, header.base_offset, size - LOG_OVERHEAD, header.partition_leader_epoch, MAGIC, 0,
                     header.attributes, header.last_offset_delta, header.base_timestamp, header.max_timestamp,
                     header.producer_id, header.producer_epoch, header.base_sequence, header.records_count)
    out[HEADER_SIZE:] = region
    write_crc(out, 0, size)
    return out


def last_sequence(base_sequence, last_offset_delta):
    """baseSequence + lastOffsetDelta with Kafka's wrap-around at 2**31-1 (-1 stays -1)."""
    if base_sequence < 0:
        return -1
    seq = base_sequence + last_offset_delta
    return seq - (1 << 31) if seq > 0x7FFFFFFF else seq


def compute_crc(buf, pos, size):
    """CRC-32C of bytes 21..end of the batch at ``buf[pos:pos+size]``."""
    return crc32c(memoryview(buf)[pos + CRC_FROM:pos + size])


def write_crc(buf, pos, size):
    """Recompute and store the CRC of the batch at ``buf[pos:pos+size]`` (``buf`` a bytearray)."""
    _U32.pack_into(buf, pos + CRC_AT, compute_crc(buf, pos, size))


# --------------------------------------------------------------------------------------- records
def _varint(buf, pos, end):
    value, pos = decode_varint(buf, pos)
    if pos > end:
        raise ValueError("varint overruns record")
    return value, pos


def _blob(buf, pos, end):
    n, pos = _varint(buf, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise ValueError("field overruns record")
    return bytes(buf[pos:pos + n]), pos + n


def decode_records(region, count, base_offset=0, base_timestamp=0, log_append_time=None):
    """Decode ``count`` records from an uncompressed records region.

    Returns a list of ``(offset, timestamp, key, value, headers)`` with absolute offsets/timestamps;
    ``headers`` is a list of ``(str key, bytes|None value)``.  When ``log_append_time`` is given it is
    every record's timestamp.  Raises InvalidRecord on malformed records (Kafka 2.x+: INVALID_RECORD).
    """
    buf = memoryview(region).cast("B") if not isinstance(region, (bytes, bytearray)) else region
    out = []
    pos = 0
    n = len(buf)
    try:
        for _ in range(count):
            length, pos = _varint(buf, pos, n)
            end = pos + length
            if length < 1 or end > n:
                raise ValueError("bad record length")
            pos += 1  # record attributes, unused
            ts_delta, pos = _varint(buf, pos, end)
            off_delta, pos = _varint(buf, pos, end)
            key, pos = _blob(buf, pos, end)
            value, pos = _blob(buf, pos, end)
            n_headers, pos = _varint(buf, pos, end)
            if n_headers < 0:
                raise ValueError("negative header count")
            headers = []
            for _h in range(n_headers):
                hkey, pos = _blob(buf, pos, end)
                if hkey is None:
                    raise ValueError("null header key")
                hval, pos = _blob(buf, pos, end)
                headers.append((hkey.decode("utf-8", "replace"), hval))
            if pos != end:
                raise ValueError("record length mismatch")
            ts = log_append_time if log_append_time is not None else base_timestamp + ts_delta
            out.append((base_offset + off_delta, ts, key, value, headers))
    except ValueError as exc:
        raise InvalidRecord("malformed record: %s" % exc) from None
    if pos != n:
        raise InvalidRecord("%d trailing bytes after %d records" % (n - pos, count))
    return out


def records_region(buf, pos, header, max_size):
    """The uncompressed records region of the batch at ``buf[pos]`` (decompressed, bounded by max_size)."""
    region = memoryview(buf)[pos + HEADER_SIZE:pos + header.size]
    if header.codec == compression.NONE:
        return region
    return compression.decompress(header.codec, region, max_size)


def batch_records(buf, pos=0, header=None, max_size=64 << 20):
    """Decoded records ``(offset, timestamp, key, value, headers)`` of the batch at ``buf[pos]``."""
    if header is None:
        header = batch_header(buf, pos)
    lat = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    region = records_region(buf, pos, header, max_size)
    return decode_records(region, header.records_count, header.base_offset, header.base_timestamp, lat)


def _blob_bytes(b):
    if b is None:
        return b"\x01"  # zig-zag(-1)
    return encode_varint(len(b)) + bytes(b)


def encode_record(offset_delta, timestamp_delta, key, value, headers=()):
    """One record, length prefix included."""
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta), _blob_bytes(key),
             _blob_bytes(value), encode_varint(len(headers))]
    for hkey, hval in headers:
        if isinstance(hkey, str):
            hkey = hkey.encode("utf-8")
        parts.append(_blob_bytes(hkey))
        parts.append(_blob_bytes(hval))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def build_batch(records, base_offset=0, codec=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                timestamp_type=CREATE_TIME, is_transactional=False, is_control=False, partition_leader_epoch=-1,
                max_timestamp=None, magic_for_codec=2):
    """Build one v2 batch from ``records`` (Record or 5-tuples, offset deltas as given) -> bytes.

    baseTimestamp is the first record's timestamp (Kafka's MemoryRecordsBuilder); maxTimestamp is the largest
    record timestamp unless ``max_timestamp`` is given (the append time for LogAppendTime batches).
    """
    records = list(records)
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_ts = records[0][1]
    encoded = []
    max_ts = NO_TIMESTAMP
    for rec in records:
        off_delta, ts, key, value = rec[0], rec[1], rec[2], rec[3]
        headers = rec[4] if len(rec) > 4 else ()
        if ts > max_ts:
            max_ts = ts
        encoded.append(encode_record(off_delta, ts - base_ts, key, value, headers))
    if max_timestamp is not None:
        max_ts = max_timestamp
    region = b"".join(encoded)
    if codec:
        region = compression.compress(codec, region, magic_for_codec)
    attributes = codec & ATTR_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= ATTR_LOG_APPEND_TIME
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    header = BatchHeader(base_offset, 0, partition_leader_epoch, MAGIC, 0, attributes, records[-1][0], base_ts, max_ts,
                         producer_id, producer_epoch, base_sequence, len(records))
    return bytes(pack_batch(header, region))


def iter_batches(buf, include_control=False):
    """Yield ``(pos, BatchHeader)`` for every complete v2 batch of ``buf`` (stops at a partial/bad tail)."""
    n = len(buf)
    pos = 0
    while n - pos >= HEADER_SIZE:
        (batch_length,) = _I32.unpack_from(buf, pos + BATCH_LENGTH_AT)
        if batch_length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + batch_length > n:
            return
        header = batch_header(buf, pos)
        if header.magic != MAGIC:
            return
        if include_control or not header.is_control:
            yield pos, header
        pos += header.size
