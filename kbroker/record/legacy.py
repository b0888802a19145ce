"""Message sets v0/v1 (magic 0 and 1): parsing with full validation, and building for down-conversion.

Entry (repeated until the buffer ends, not array-counted):
  offset int64 | message_size int32 | crc uint32 | magic int8 | attributes int8 | [timestamp int64, magic 1 only] |
  key int32-length bytes (-1 = null) | value int32-length bytes (-1 = null)
crc is the IEEE CRC32 (zlib.crc32) of magic..end of value.  attributes bits 0-2 codec, bit 3 (magic 1) timestamp
type 1 = LogAppendTime.  Minimum message_size: 14 (v0), 22 (v1); the magic byte sits at entry offset 16, exactly
where a v2 batch keeps its magic, which is how the facade tells the formats apart.

Compression: a wrapper message (null key) whose value is the compressed bytes of an inner message set of
uncompressed messages with the wrapper's magic (nested compression, a magic mismatch or an empty inner set is
CorruptMessage).  Offsets: v0 inner messages carry absolute offsets; v1 inner offsets are relative (0..n-1 when
built by us) and absolute(inner) = wrapper_offset - last_inner_relative + inner_relative; the wrapper offset is the
absolute offset of the last inner message in both magics.  A v1 wrapper with LogAppendTime gives every inner
message the wrapper's timestamp.

Everything wrong in a message set -- truncation, size below the minimum, length fields overrunning, CRC mismatch,
an unknown codec -- is CorruptMessage (CORRUPT_MESSAGE(2), the code pre-0.11 clients understand).
"""

import struct
import zlib
from collections import namedtuple

from kbroker.errors import CorruptMessage, RecordListTooLarge, UnsupportedCompressionType

from . import compression

LOG_OVERHEAD = 12
MIN_MESSAGE_SIZE = {0: 14, 1: 22}
ATTR_CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
NO_TIMESTAMP = -1

_ENTRY = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")

# One message as parsed: ``timestamp`` is -1 for magic 0; ``size`` is the entry size (12 + message_size).
Message = namedtuple("Message", "offset magic attributes timestamp key value size")
Message.codec = property(lambda m: m.attributes & ATTR_CODEC_MASK)
Message.log_append_time = property(lambda m: m.magic > 0 and bool(m.attributes & ATTR_LOG_APPEND_TIME))


def _blob(buf, pos, end, what):
    if pos + 4 > end:
        raise CorruptMessage("message truncated in %s length" % what)
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n != -1:
            raise CorruptMessage("negative %s length %d" % (what, n))
        return None, pos
    if pos + n > end:
        raise CorruptMessage("%s overruns message" % what)
    return bytes(buf[pos:pos + n]), pos + n


def iter_messages(buf, allow_partial_tail=False):
    """Yield each shallow Message of the message set ``buf``, checking sizes and CRC32.

    A truncated trailing entry is CorruptMessage unless ``allow_partial_tail`` (fetched data), when iteration
    just stops.
    """
    mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else memoryview(buf)
    n = len(mv)
    pos = 0
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            if allow_partial_tail:
                return
            raise CorruptMessage("message set truncated at %d (%d bytes left)" % (pos, n - pos))
        offset, msize = struct.unpack_from(">qi", mv, pos)
        if msize < MIN_MESSAGE_SIZE[0]:
            raise CorruptMessage("message size %d below the minimum at %d" % (msize, pos))
        end = pos + LOG_OVERHEAD + msize
        if end > n:
            if allow_partial_tail:
                return
            raise CorruptMessage("message at %d truncated: needs %d bytes, %d left" % (pos, msize + 12, n - pos))
        _o, _s, crc, magic, attributes = _ENTRY.unpack_from(mv, pos)
        if magic not in (0, 1):
            raise CorruptMessage("message magic %d in a v0/v1 message set" % magic)
        if msize < MIN_MESSAGE_SIZE[magic]:
            raise CorruptMessage("message size %d below the magic-%d minimum" % (msize, magic))
        if zlib.crc32(mv[pos + 16:end]) != crc:
            raise CorruptMessage("CRC32 mismatch in message at offset %d" % offset)
        p = pos + 18
        if magic == 1:
            (timestamp,) = _I64.unpack_from(mv, p)
            p += 8
        else:
            timestamp = NO_TIMESTAMP
        key, p = _blob(mv, p, end, "key")
        value, p = _blob(mv, p, end, "value")
        if p != end:
            raise CorruptMessage("message at offset %d has %d trailing bytes" % (offset, end - p))
        yield Message(offset, magic, attributes & 0xFF, timestamp, key, value, end - pos)
        pos = end


def inner_messages(wrapper, max_size, max_messages=None):
    """Decompress a wrapper Message and return its inner Messages (validated; offsets as stored).

    More than ``max_messages`` inner messages (None = any number) is RecordListTooLarge, found while parsing.
    """
    codec = wrapper.codec
    if codec not in (compression.GZIP, compression.SNAPPY, compression.LZ4):
        if codec == compression.ZSTD:
            raise UnsupportedCompressionType("zstd is not allowed in magic %d messages" % wrapper.magic)
        raise CorruptMessage("unknown compression codec %d" % codec)
    if wrapper.value is None:
        raise CorruptMessage("compressed message at offset %d has a null value" % wrapper.offset)
    data = compression.decompress(codec, wrapper.value, max_size, magic=wrapper.magic)
    inner = []
    for m in iter_messages(data):
        inner.append(m)
        if max_messages is not None and len(inner) > max_messages:
            raise RecordListTooLarge("compressed message at offset %d holds more than %d messages"
                                     % (wrapper.offset, max_messages))
    if not inner:
        raise CorruptMessage("compressed message at offset %d holds no messages" % wrapper.offset)
    for m in inner:
        if m.codec != compression.NONE:
            raise CorruptMessage("nested compression inside the message at offset %d" % wrapper.offset)
        if m.magic != wrapper.magic:
            raise CorruptMessage("inner magic %d differs from wrapper magic %d" % (m.magic, wrapper.magic))
    return inner


def iter_records(buf, max_size, allow_partial_tail=False):
    """Yield ``(offset, timestamp, key, value, shallow)`` for every logical record, inner ones expanded.

    Offsets are absolute (v1 relative inner offsets resolved against the wrapper); ``shallow`` is the Message
    that carried the record (itself for uncompressed messages, the wrapper otherwise).
    """
    for m in iter_messages(buf, allow_partial_tail):
        if m.codec == compression.NONE:
            yield m.offset, m.timestamp, m.key, m.value, m
            continue
        inner = inner_messages(m, max_size)
        if m.magic == 0:
            for i in inner:
                yield i.offset, NO_TIMESTAMP, i.key, i.value, m
        else:
            last_rel = inner[-1].offset
            lat = m.log_append_time
            for i in inner:
                yield m.offset - last_rel + i.offset, (m.timestamp if lat else i.timestamp), i.key, i.value, m


# --------------------------------------------------------------------------------------- building
def encode_message(offset, magic, attributes, timestamp, key, value):
    """One message-set entry (offset + size + message) with its CRC32."""
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_I64.pack(timestamp))
    for blob in (key, value):
        if blob is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(blob)))
            parts.append(bytes(blob))
    body = b"".join(parts)
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def build_message_set(records, magic, codec=0, log_append_time=None):
    """A magic 0/1 message set from ``records`` = iterable of ``(offset, timestamp, key, value)``.

    Uncompressed: one message per record at its absolute offset.  Compressed: one wrapper at the last record's
    offset holding the inner set (inner offsets absolute for v0, relative to the first record for v1); the v1
    wrapper timestamp is the largest inner timestamp, or ``log_append_time`` (then attribute bit 3 is set).
    Magic 0 drops timestamps.  ``log_append_time`` (magic 1) stamps every message with that time.
    """
    if magic not in (0, 1):
        raise ValueError("magic must be 0 or 1")
    if codec not in (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4):
        raise UnsupportedCompressionType("codec %s cannot be written in magic %d" % (compression.codec_name(codec),
                                                                                     magic))
    records = list(records)
    if not records:
        return b""
    lat_attr = ATTR_LOG_APPEND_TIME if (magic == 1 and log_append_time is not None) else 0

    def ts_of(ts):
        if magic == 0:
            return NO_TIMESTAMP
        return log_append_time if log_append_time is not None else ts

    if codec == compression.NONE:
        return b"".join(encode_message(off, magic, lat_attr, ts_of(ts), key, value)
                        for off, ts, key, value in records)
    first = records[0][0]
    inner = b"".join(
        encode_message(off if magic == 0 else off - first, magic, 0, ts_of(ts), key, value)
        for off, ts, key, value in records)
    wrapper_ts = NO_TIMESTAMP
    if magic == 1:
        wrapper_ts = log_append_time if log_append_time is not None else max(r[1] for r in records)
    payload = compression.compress(codec, inner, magic)
    return encode_message(records[-1][0], magic, codec | lat_attr, wrapper_ts, None, payload)
