"""Compression codecs of Kafka message sets and record batches (codec ids as in the attributes bits 0-2).

| id | name   | bytes on the wire                                                                          |
|----|--------|--------------------------------------------------------------------------------------------|
| 0  | none   | as is                                                                                      |
| 1  | gzip   | RFC 1952 gzip stream(s) (Java GZIPOutputStream); concatenated members are read in turn      |
| 2  | snappy | read: xerial framing (8-byte magic ``\\x82SNAPPY\\x00`` + 2 int32 version/compat, then       |
|    |        | ``int32 BE length + raw snappy block`` repeated) OR one plain raw snappy block (librdkafka); |
|    |        | write: xerial framing with 32 KiB uncompressed blocks (what the Java clients read and write) |
| 3  | lz4    | one LZ4 frame (magic 0x184D2204), 64 KiB independent blocks, no checksums, no content size   |
| 4  | zstd   | zstd frame(s); magic 2 only                                                                |

LZ4 and magic 0 (KIP-57): Kafka < 0.10 computed the frame-descriptor checksum byte HC over
``magic .. BD`` (6 bytes) instead of ``FLG .. BD``.  Kafka kept that for magic-0 data, so magic-0 LZ4
payloads are written with the old (wrong) HC and, when read, get the correct HC patched in before the
frame reaches ``lz4.frame`` (which always verifies HC).  Magic >= 1 must carry the correct HC.

Decompression is always bounded: ``decompress(codec, data, max_size)`` never produces (or allocates)
more than ``max_size`` bytes of output; once the output would exceed it, ``OutputLimitExceeded`` (a
``CorruptMessage``) is raised.  That turns a compression bomb (1 GB of zeros gzips to ~1 MB) into a cheap
rejection.  Any codec error on decompression is ``CorruptMessage`` (Kafka answers CORRUPT_MESSAGE(2) to a
payload it cannot decompress); an unknown codec id is ``UnsupportedCompressionType``.

The work per payload is bounded too, not only the output.  Payloads are walked by offset, never by copying
"the rest of the buffer" (1 MB of 11-byte empty LZ4 frames took 4.8 s that way: 95,000 copies of up to 1 MB):

* frames / gzip members: at most ``MAX_FRAMES`` (64) per payload.  Every Kafka client writes exactly one (Java's
  GZIPOutputStream, KafkaLZ4BlockOutputStream, librdkafka, python-lz4/zstandard); more is ``CorruptMessage``;
* blocks (xerial snappy, LZ4 and zstd block headers, walked in Python to find frame ends and truncation): at
  most ``block_allowance(max_size)`` = 64 + one per 4 KiB of allowed output per payload.  Writers use 32 KiB
  (xerial), 64 KiB (Kafka's LZ4) and up to 128 KiB (zstd) blocks, so real payloads stay far below it, while
  1 MB of 4-byte empty blocks is refused after a few thousand steps;
* gzip input is fed to zlib in ``_IN_STEP`` (64 KiB) pieces, so what zlib copies between members
  (``unused_data``) is at most one piece.

LZ4 frame (walked here to find its end; lz4.frame then decompresses exactly that slice)::

    magic 04 22 4D 18 | FLG (bits 7-6 version = 01, bit 4 block checksum, bit 3 content size, bit 2 content
    checksum, bit 0 dictionary id) | BD | [content size u64 LE] | [dict id u32 LE] | HC |
    block* (u32 LE size, high bit = stored uncompressed, 0 = EndMark; data; [u32 block checksum]) |
    [u32 content checksum]

zstd frame (RFC 8878; walked to find frame ends and truncation, then decompressed by one bounded reader)::

    magic 28 B5 2F FD | FHD (bits 7-6 FCS flag, bit 5 single segment, bit 2 checksum, bits 1-0 DID flag) |
    [window descriptor, absent in single segment] | [dict id 0/1/2/4 bytes] | [content size 0/1/2/4/8 bytes] |
    block* (3-byte LE header: bit 0 last, bits 1-2 type 0 raw / 1 RLE / 2 compressed, bits 3-23 size;
    raw and compressed carry ``size`` bytes, RLE one) | [u32 checksum]
    skippable frame: magic 5? 2A 4D 18 | u32 LE size | size bytes
"""

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from kbroker._native import decode_uvarint
from kbroker.errors import CorruptMessage, UnsupportedCompressionType

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible version 1
XERIAL_BLOCK = 32 * 1024  # xerial SnappyOutputStream default block size (uncompressed bytes)

LZ4_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
# Decompressed bytes requested per step from the streaming decompressors: small enough that a bomb
# costs at most max_size + one step of memory, big enough to keep the Python loop short.
_STEP = 256 * 1024
# Compressed bytes fed to zlib per call: bounds what zlib copies into unused_data / unconsumed_tail.
_IN_STEP = 64 * 1024
# Frames (gzip members, LZ4 and zstd frames) per payload; every Kafka client writes one.
MAX_FRAMES = 64
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_BE32 = struct.Struct(">i")
_LE32 = struct.Struct("<I")


class OutputLimitExceeded(CorruptMessage):
    """The payload inflates beyond ``limit`` bytes (the ``max_size`` the caller allowed)."""

    def __init__(self, message, limit):
        super().__init__(message)
        self.limit = limit


def block_allowance(max_size):
    """Most blocks a payload allowed ``max_size`` output bytes may consist of (module docstring)."""
    return 64 + (max(0, max_size) >> 12)


def _too_many_blocks(codec, allowance):
    return CorruptMessage("%s payload has more than %d blocks" % (codec, allowance))


def codec_name(codec):
    return CODEC_NAMES.get(codec, "unknown(%d)" % codec)


def _check_codec(codec):
    if codec not in CODEC_NAMES:
        raise UnsupportedCompressionType("unknown compression codec id %d" % codec)


# --------------------------------------------------------------------------------------- xxhash32
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data, seed=0):
    """XXH32 of a (short) bytes object; only used on 2-14 byte LZ4 frame descriptors."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<IIII", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + n) & _M32
    while i + 4 <= n:
        (w,) = struct.unpack_from("<I", data, i)
        acc = (_rotl((acc + w * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        acc = (_rotl((acc + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


# ------------------------------------------------------------------------------------------- gzip
def _gzip_compress(data, level=6):
    # wbits 31 = gzip container, mtime 0: deterministic output.
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data, max_size):
    mv = memoryview(data).cast("B")
    n = len(mv)
    pos = 0
    out = bytearray()
    members = 0
    while True:
        members += 1
        if members > MAX_FRAMES:
            raise CorruptMessage("gzip payload has more than %d members" % MAX_FRAMES)
        d = zlib.decompressobj(47)  # 32 + 15: gzip (or zlib) header auto-detected
        while not d.eof:
            if pos >= n:
                raise CorruptMessage("truncated gzip payload")
            chunk_in = mv[pos:pos + _IN_STEP]
            pos += len(chunk_in)
            while True:
                budget = max_size - len(out)
                piece = d.decompress(chunk_in, min(_STEP, budget + 1))
                out += piece
                if len(out) > max_size:
                    raise OutputLimitExceeded("gzip payload inflates beyond %d bytes" % max_size, max_size)
                chunk_in = d.unconsumed_tail
                if d.eof or not chunk_in:
                    break
        pos -= len(d.unused_data)  # the part of the last piece after this member
        # Java's GZIPInputStream reads concatenated members and ignores trailing non-gzip bytes.
        if n - pos < 2 or mv[pos] != 0x1F or mv[pos + 1] != 0x8B:
            return bytes(out)


# ----------------------------------------------------------------------------------------- snappy
def _snappy_compress(data):
    mv = memoryview(data)
    parts = [XERIAL_HEADER]
    for i in range(0, len(mv), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[i:i + XERIAL_BLOCK]))
        parts.append(_BE32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(block, budget):
    """Decompress one raw snappy block after checking its declared length (leading uvarint)."""
    try:
        declared, _ = decode_uvarint(block, 0)
    except ValueError:
        raise CorruptMessage("bad snappy length preamble") from None
    if declared > budget:
        raise OutputLimitExceeded("snappy block declares %d bytes, over the %d-byte bound" % (declared, budget),
                                  budget)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # cramjam.DecompressionError
        raise CorruptMessage("bad snappy block: %s" % exc) from None


def _snappy_decompress(data, max_size):
    mv = memoryview(data).cast("B")
    if mv[:8] != XERIAL_MAGIC:
        return _snappy_raw(bytes(mv), max_size)
    # Skip the 16-byte header without interpreting version/compat: some writers put them little-endian.
    if len(mv) < 16:
        raise CorruptMessage("truncated xerial snappy header")
    pos = 16
    out = bytearray()
    n = len(mv)
    allowance = block_allowance(max_size)
    blocks = 0
    while pos < n:
        blocks += 1
        if blocks > allowance:
            raise _too_many_blocks("xerial snappy", allowance)
        if pos + 4 > n:
            raise CorruptMessage("truncated xerial snappy block length")
        (blen,) = _BE32.unpack_from(mv, pos)
        pos += 4
        if blen < 0 or pos + blen > n:
            raise CorruptMessage("xerial snappy block overruns payload")
        budget = max_size - len(out)
        try:
            out += _snappy_raw(bytes(mv[pos:pos + blen]), budget)
        except OutputLimitExceeded as e:
            raise OutputLimitExceeded(e.message, max_size) from None
        pos += blen
    return bytes(out)


# -------------------------------------------------------------------------------------------- lz4
def _lz4_descriptor_end(frame, pos):
    """Index of the HC byte of the frame starting at ``frame[pos]``."""
    if frame[pos:pos + 4] != LZ4_MAGIC or len(frame) < pos + 7:
        raise CorruptMessage("not an LZ4 frame")
    flg = frame[pos + 4]
    if flg >> 6 != 1:
        raise CorruptMessage("LZ4 frame version %d, expected 1" % (flg >> 6))
    end = pos + 6
    if flg & 0x08:  # content size present
        end += 8
    if flg & 0x01:  # dictionary id present
        end += 4
    if len(frame) <= end:
        raise CorruptMessage("truncated LZ4 frame descriptor")
    return end


def _lz4_frame_end(frame, pos, allowance):
    """End of the LZ4 frame at ``frame[pos]`` (module docstring layout) and the blocks it holds."""
    flg = frame[pos + 4]
    q = _lz4_descriptor_end(frame, pos) + 1
    n = len(frame)
    block_checksum = 4 if flg & 0x10 else 0
    blocks = 0
    while True:
        if q + 4 > n:
            raise CorruptMessage("truncated LZ4 frame")
        (size,) = _LE32.unpack_from(frame, q)
        q += 4
        if size == 0:  # EndMark
            break
        blocks += 1
        if blocks > allowance:
            raise _too_many_blocks("LZ4", allowance)
        q += (size & 0x7FFFFFFF) + block_checksum
    if flg & 0x04:
        q += 4
    if q > n:
        raise CorruptMessage("truncated LZ4 frame")
    return q, blocks


def _lz4_set_hc(frame, pos, old_kafka):
    """Rewrite the HC byte of the frame at ``pos`` in the bytearray ``frame``: correct, or KIP-57 wrong."""
    hc_at = _lz4_descriptor_end(frame, pos)
    start = pos if old_kafka else pos + 4
    frame[hc_at] = (xxh32(bytes(frame[start:hc_at])) >> 8) & 0xFF
    return hc_at


def _lz4_compress(data, magic):
    frame = lz4.frame.compress(
        bytes(data),
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )
    if magic == 0:
        frame = bytearray(frame)
        _lz4_set_hc(frame, 0, old_kafka=True)
        frame = bytes(frame)
    return frame


def _lz4_decompress(data, max_size, magic):
    # Magic 0 frames get their HC byte patched, so they need a private copy; others are read in place.
    buf = bytearray(data) if magic == 0 else memoryview(data).cast("B")
    n = len(buf)
    out = bytearray()
    pos = 0
    frames = 0
    allowance = block_allowance(max_size)
    while True:
        frames += 1
        if frames > MAX_FRAMES:
            raise CorruptMessage("LZ4 payload has more than %d frames" % MAX_FRAMES)
        _lz4_descriptor_end(buf, pos)
        if buf[pos + 4] & 0x08:
            (declared,) = struct.unpack_from("<Q", buf, pos + 6)
            if declared > max_size - len(out):
                raise OutputLimitExceeded("LZ4 frame declares %d bytes, over the %d-byte bound"
                                          % (declared, max_size), max_size)
        if magic == 0:
            _lz4_set_hc(buf, pos, old_kafka=False)
        end, blocks = _lz4_frame_end(buf, pos, allowance)
        allowance -= blocks
        d = lz4.frame.LZ4FrameDecompressor()
        chunk_in = buf[pos:end]
        try:
            while not d.eof:
                budget = max_size - len(out)
                piece = d.decompress(chunk_in, max_length=min(_STEP, budget + 1))
                chunk_in = b""
                out += piece
                if len(out) > max_size:
                    raise OutputLimitExceeded("LZ4 payload inflates beyond %d bytes" % max_size, max_size)
                if not piece and d.needs_input and not d.eof:
                    raise CorruptMessage("truncated LZ4 frame")
        except RuntimeError as exc:  # lz4.frame reports bad data as RuntimeError
            raise CorruptMessage("bad LZ4 frame: %s" % exc) from None
        if d.unused_data:
            raise CorruptMessage("LZ4 frame ends before its EndMark")
        pos = end
        if pos == n:
            return bytes(out)
        if buf[pos:pos + 4] != LZ4_MAGIC:
            raise CorruptMessage("trailing bytes after LZ4 frame")


# ------------------------------------------------------------------------------------------- zstd
def _zstd_compress(data):
    return zstandard.ZstdCompressor(level=3).compress(bytes(data))


_ZSTD_DID_BYTES = (0, 1, 2, 4)
_ZSTD_FCS_BYTES = (0, 2, 4, 8)


def _zstd_frame_end(mv, pos, allowance):
    """End of the zstd (or skippable) frame at ``mv[pos]`` (module docstring layout) and its block count."""
    n = len(mv)
    if n - pos < 8:
        raise CorruptMessage("truncated zstd frame")
    if mv[pos + 1:pos + 4] == b"\x2a\x4d\x18" and mv[pos] & 0xF0 == 0x50:  # skippable frame
        (size,) = _LE32.unpack_from(mv, pos + 4)
        end = pos + 8 + size
        if end > n:
            raise CorruptMessage("truncated zstd skippable frame")
        return end, 0
    if mv[pos:pos + 4] != ZSTD_MAGIC:
        raise CorruptMessage("not a zstd frame")
    fhd = mv[pos + 4]
    single_segment = fhd & 0x20
    fcs_bytes = _ZSTD_FCS_BYTES[fhd >> 6] or (1 if single_segment else 0)
    q = pos + 5 + (0 if single_segment else 1) + _ZSTD_DID_BYTES[fhd & 0x03] + fcs_bytes
    blocks = 0
    while True:
        if q + 3 > n:
            raise CorruptMessage("truncated zstd frame")
        header = mv[q] | (mv[q + 1] << 8) | (mv[q + 2] << 16)
        q += 3
        blocks += 1
        if blocks > allowance:
            raise _too_many_blocks("zstd", allowance)
        block_type = (header >> 1) & 0x03
        if block_type == 3:
            raise CorruptMessage("reserved zstd block type")
        q += 1 if block_type == 1 else header >> 3
        if header & 1:
            break
    if fhd & 0x04:
        q += 4
    if q > n:
        raise CorruptMessage("truncated zstd frame")
    return q, blocks


def _zstd_decompress(data, max_size):
    # The frames are walked first (their ends, truncation, the frame and block caps): the bounded stream
    # reader below ends silently on a truncated frame, and decompressobj has no output bound.  Once the
    # structure is known complete, one reader across all frames inflates it in _STEP pieces.
    mv = memoryview(data).cast("B")
    n = len(mv)
    pos = 0
    frames = 0
    allowance = block_allowance(max_size)
    while pos < n or frames == 0:
        frames += 1
        if frames > MAX_FRAMES:
            raise CorruptMessage("zstd payload has more than %d frames" % MAX_FRAMES)
        pos, blocks = _zstd_frame_end(mv, pos, allowance)
        allowance -= blocks
    out = bytearray()
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(mv, read_across_frames=True)
        while True:
            piece = reader.read(min(_STEP, max_size - len(out) + 1))
            if not piece:
                break
            out += piece
            if len(out) > max_size:
                raise OutputLimitExceeded("zstd payload inflates beyond %d bytes" % max_size, max_size)
    except zstandard.ZstdError as exc:
        raise CorruptMessage("bad zstd payload: %s" % exc) from None
    return bytes(out)


# ------------------------------------------------------------------------------------------ facade
def compress(codec, data, magic=2, fast=False):
    """Compress ``data`` (bytes-like) with ``codec``; ``magic`` only matters for LZ4 (KIP-57 HC quirk).

    ``fast`` trades ratio for speed where the codec has levels: gzip level 1 instead of 6 (6x faster: 8.4 MB of
    small records in 49 ms instead of 317 ms), used when the broker itself must recompress on the event loop.
    """
    _check_codec(codec)
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _gzip_compress(data, 1 if fast else 6)
    if codec == SNAPPY:
        return _snappy_compress(data)
    if codec == LZ4:
        return _lz4_compress(data, magic)
    return _zstd_compress(data)


def decompress(codec, data, max_size, magic=2):
    """Decompress ``data``; ``CorruptMessage`` when it is malformed or inflates beyond ``max_size`` bytes."""
    _check_codec(codec)
    if codec == NONE:
        if len(data) > max_size:
            raise OutputLimitExceeded("payload larger than %d bytes" % max_size, max_size)
        return bytes(data)
    if codec == GZIP:
        try:
            return _gzip_decompress(data, max_size)
        except zlib.error as exc:
            raise CorruptMessage("bad gzip payload: %s" % exc) from None
    if codec == SNAPPY:
        return _snappy_decompress(data, max_size)
    if codec == LZ4:
        return _lz4_decompress(data, max_size, magic)
    return _zstd_decompress(data, max_size)
