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
more than ``max_size`` bytes of output; once the output would exceed it, ``CorruptMessage`` is raised.
That turns a compression bomb (1 GB of zeros gzips to ~1 MB) into a cheap rejection.  Any codec error
on decompression is ``CorruptMessage`` (Kafka answers CORRUPT_MESSAGE(2) to a payload it cannot
decompress); an unknown codec id is ``UnsupportedCompressionType``.
"""

import io
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

_BE32 = struct.Struct(">i")


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
def _gzip_compress(data):
    # wbits 31 = gzip container, mtime 0: deterministic output.
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data, max_size):
    out = bytearray()
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(47)  # 32 + 15: gzip (or zlib) header auto-detected
        chunk_in = rest
        while not d.eof:
            budget = max_size - len(out)
            piece = d.decompress(chunk_in, min(_STEP, budget + 1))
            chunk_in = d.unconsumed_tail
            out += piece
            if len(out) > max_size:
                raise CorruptMessage("gzip payload inflates beyond %d bytes" % max_size)
            if not piece and not chunk_in and not d.eof:
                raise CorruptMessage("truncated gzip payload")
        rest = d.unused_data
        # Java's GZIPInputStream reads concatenated members and ignores trailing non-gzip bytes.
        if len(rest) < 2 or rest[:2] != b"\x1f\x8b":
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
        raise CorruptMessage("snappy block declares %d bytes, over the %d-byte bound" % (declared, budget))
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:  # cramjam.DecompressionError
        raise CorruptMessage("bad snappy block: %s" % exc) from None


def _snappy_decompress(data, max_size):
    data = bytes(data)
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data, max_size)
    # Skip the 16-byte header without interpreting version/compat: some writers put them little-endian.
    if len(data) < 16:
        raise CorruptMessage("truncated xerial snappy header")
    pos = 16
    out = bytearray()
    n = len(data)
    while pos < n:
        if pos + 4 > n:
            raise CorruptMessage("truncated xerial snappy block length")
        (blen,) = _BE32.unpack_from(data, pos)
        pos += 4
        if blen < 0 or pos + blen > n:
            raise CorruptMessage("xerial snappy block overruns payload")
        out += _snappy_raw(data[pos:pos + blen], max_size - len(out))
        pos += blen
    return bytes(out)


# -------------------------------------------------------------------------------------------- lz4
def _lz4_descriptor_end(frame, pos):
    """Index of the HC byte of the frame starting at ``frame[pos]``."""
    if frame[pos:pos + 4] != LZ4_MAGIC or len(frame) < pos + 7:
        raise CorruptMessage("not an LZ4 frame")
    flg = frame[pos + 4]
    end = pos + 6
    if flg & 0x08:  # content size present
        end += 8
    if flg & 0x01:  # dictionary id present
        end += 4
    if len(frame) <= end:
        raise CorruptMessage("truncated LZ4 frame descriptor")
    return end


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
    buf = bytearray(data)
    out = bytearray()
    pos = 0
    while True:
        _lz4_descriptor_end(buf, pos)
        if buf[pos + 4] & 0x08:
            (declared,) = struct.unpack_from("<Q", buf, pos + 6)
            if declared > max_size - len(out):
                raise CorruptMessage("LZ4 frame declares %d bytes, over the %d-byte bound" % (declared, max_size))
        if magic == 0:
            _lz4_set_hc(buf, pos, old_kafka=False)
        d = lz4.frame.LZ4FrameDecompressor()
        chunk_in = bytes(buf[pos:])
        try:
            while not d.eof:
                budget = max_size - len(out)
                piece = d.decompress(chunk_in, max_length=min(_STEP, budget + 1))
                chunk_in = b""
                out += piece
                if len(out) > max_size:
                    raise CorruptMessage("LZ4 payload inflates beyond %d bytes" % max_size)
                if not piece and d.needs_input and not d.eof:
                    raise CorruptMessage("truncated LZ4 frame")
        except RuntimeError as exc:  # lz4.frame reports bad data as RuntimeError
            raise CorruptMessage("bad LZ4 frame: %s" % exc) from None
        rest = d.unused_data
        if not rest:
            return bytes(out)
        pos = len(buf) - len(rest)
        if buf[pos:pos + 4] != LZ4_MAGIC:
            raise CorruptMessage("trailing bytes after LZ4 frame")


# ------------------------------------------------------------------------------------------- zstd
def _zstd_compress(data):
    return zstandard.ZstdCompressor(level=3).compress(bytes(data))


def _zstd_decompress(data, max_size):
    # Two passes.  The stream reader is the only bounded API, but it ends silently on a truncated frame;
    # decompressobj reports truncation (eof stays False) but has no output bound.  So: count the output
    # with the reader in _STEP pieces, discarding them (memory O(_STEP)), and only when the total fits
    # decompress frame by frame with decompressobj.  zstd inflates at GB/s, the second pass is cheap.
    data = bytes(data)
    dctx = zstandard.ZstdDecompressor()
    try:
        reader = dctx.stream_reader(io.BytesIO(data), read_across_frames=True)
        total = 0
        while True:
            piece = reader.read(min(_STEP, max_size - total + 1))
            if not piece:
                break
            total += len(piece)
            if total > max_size:
                raise CorruptMessage("zstd payload inflates beyond %d bytes" % max_size)
        out = []
        rest = data
        while rest:
            d = dctx.decompressobj()
            out.append(d.decompress(rest))
            if not d.eof:
                raise CorruptMessage("truncated zstd frame")
            rest = d.unused_data
    except zstandard.ZstdError as exc:
        raise CorruptMessage("bad zstd payload: %s" % exc) from None
    return b"".join(out)


# ------------------------------------------------------------------------------------------ facade
def compress(codec, data, magic=2):
    """Compress ``data`` (bytes-like) with ``codec``; ``magic`` only matters for LZ4 (KIP-57 HC quirk)."""
    _check_codec(codec)
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return _gzip_compress(data)
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
            raise CorruptMessage("payload larger than %d bytes" % max_size)
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
