"""kbroker.record.compression: codec round trips, snappy framings, the LZ4 magic-0 HC quirk, bounded inflation."""

import gzip
import os
import struct
import time
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from kbroker.errors import CorruptMessage, UnsupportedCompressionType
from kbroker.record import compression as C

DATA = os.urandom(3000) + b"kafka " * 20000 + bytes(70000)  # 193000 bytes, partly compressible


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_round_trip(codec, magic):
    packed = C.compress(codec, DATA, magic)
    if codec:
        assert len(packed) < len(DATA)
    assert C.decompress(codec, packed, len(DATA), magic) == DATA
    assert C.decompress(codec, C.compress(codec, b"", magic), 0, magic) == b""


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_output_one_byte_over_the_bound_is_refused(codec):
    packed = C.compress(codec, DATA)
    with pytest.raises(CorruptMessage):
        C.decompress(codec, packed, len(DATA) - 1)


def test_codec_names_and_unknown_ids():
    assert C.CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    for bad in (5, 6, 7):
        with pytest.raises(UnsupportedCompressionType):
            C.compress(bad, b"x")
        with pytest.raises(UnsupportedCompressionType):
            C.decompress(bad, b"x", 10)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_is_corrupt(codec):
    with pytest.raises(CorruptMessage):
        C.decompress(codec, b"\x04\x22\x4d\x18 this is not compressed data at all", 1 << 20)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_is_corrupt(codec):
    packed = C.compress(codec, DATA)
    with pytest.raises(CorruptMessage):
        C.decompress(codec, packed[:len(packed) // 2], 1 << 20)


# ------------------------------------------------------------------------------------------- gzip
def test_gzip_is_a_gzip_stream_readable_by_the_stdlib():
    packed = C.compress(1, DATA)
    assert packed[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(packed) == DATA


def test_gzip_concatenated_members_and_stdlib_input():
    two = gzip.compress(b"abc") + gzip.compress(b"defg")
    assert C.decompress(1, two, 100) == b"abcdefg"
    assert C.decompress(1, gzip.compress(DATA, 9), len(DATA)) == DATA


def _gzip_bomb(total):
    """gzip of ``total`` zero bytes, built from one full-flushed 1 MiB deflate block repeated (cheap to make)."""
    step = 1 << 20
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(b"") + c.flush(zlib.Z_SYNC_FLUSH)
    block = c.compress(bytes(step)) + c.flush(zlib.Z_FULL_FLUSH)
    # After Z_FULL_FLUSH the compressor forgets history, so the same input compresses to the same block.
    block2 = c.compress(bytes(step)) + c.flush(zlib.Z_FULL_FLUSH)
    assert block2 == block
    tail = c.flush()  # final empty block; the trailer's CRC/size are never reached by a bounded reader
    return head + block * (total // step) + tail


def test_gzip_bomb_is_refused_quickly_with_bounded_memory():
    bomb = _gzip_bomb(1 << 30)  # 1 GiB of zeros
    assert len(bomb) < 1_200_000
    tracemalloc.start()
    t0 = time.process_time()
    try:
        with pytest.raises(CorruptMessage):
            C.decompress(1, bomb, 4 << 20)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.process_time() - t0 < 2.0
    # bound (4 MiB) + one 256 KiB step + the 1.1 MB input copy, with slack; nowhere near 1 GiB
    assert peak < 16 << 20


@pytest.mark.parametrize("codec", [3, 4])
def test_lz4_and_zstd_bombs_are_refused_with_bounded_memory(codec):
    bomb = C.compress(codec, bytes(64 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(CorruptMessage):
            C.decompress(codec, bomb, 1 << 20)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


# ----------------------------------------------------------------------------------------- snappy
def test_snappy_writes_xerial_framing_with_32k_blocks():
    data = bytes(range(256)) * 512  # 131072 bytes = 4 blocks of 32 KiB
    packed = C.compress(2, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert pos == len(packed)
    assert [len(b) for b in blocks] == [32768] * 4
    assert b"".join(blocks) == data


def test_snappy_reads_raw_and_xerial():
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert C.decompress(2, raw, len(DATA)) == DATA
    # xerial with little-endian version/compat ints (some writers): only the 8-byte magic is significant
    block = bytes(cramjam.snappy.compress_raw(b"hello xerial"))
    le = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert C.decompress(2, le, 100) == b"hello xerial"


def test_snappy_cross_checks_with_kafka_python_codec():
    from kafka import codec as kc
    assert kc.snappy_decode(C.compress(2, DATA)) == DATA
    assert C.decompress(2, kc.snappy_encode(DATA), len(DATA)) == DATA
    assert C.decompress(2, kc.snappy_encode(DATA, xerial_compatible=False), len(DATA)) == DATA


def test_snappy_declared_length_over_bound_is_refused_before_decompressing():
    # uvarint 0x7fffffff (2 GiB - 1) followed by junk: refused on the preamble alone
    claim = b"\xff\xff\xff\xff\x07" + b"\x00" * 10
    with pytest.raises(CorruptMessage, match="declares 2147483647"):
        C.decompress(2, claim, 1 << 20)
    framed = b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2 + struct.pack(">i", len(claim)) + claim
    with pytest.raises(CorruptMessage, match="declares"):
        C.decompress(2, framed, 1 << 20)


# -------------------------------------------------------------------------------------------- lz4
def test_xxh32_known_values():
    assert C.xxh32(b"") == 0x02CC5D05
    assert C.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    # HC of lz4.frame's own descriptors (FLG, BD [, content size]) is (xxh32 >> 8) & 0xff
    for kwargs in ({}, {"store_size": True}, {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "content_checksum": True}):
        frame = lz4.frame.compress(b"x" * 100, **kwargs)
        end = 6 + (8 if frame[4] & 0x08 else 0)
        assert frame[end] == (C.xxh32(frame[4:end]) >> 8) & 0xFF


def test_lz4_frame_descriptor_is_kafkas():
    frame = C.compress(3, DATA, magic=1)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] == 0x60  # version 01, independent blocks, no checksums, no content size
    assert frame[5] == 0x40  # 64 KiB max block
    assert frame[6] == (C.xxh32(frame[4:6]) >> 8) & 0xFF
    assert lz4.frame.decompress(frame) == DATA


def test_lz4_magic0_writes_the_old_wrong_hc():
    good = C.compress(3, DATA, magic=1)
    old = C.compress(3, DATA, magic=0)
    assert old[6] == (C.xxh32(old[0:6]) >> 8) & 0xFF  # KIP-57: hashed from the frame magic on
    assert old[6] != good[6]
    assert old[:6] + old[7:] == good[:6] + good[7:]
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(old)


def test_lz4_magic0_read_fixes_hc_both_ways():
    old = C.compress(3, DATA, magic=0)
    good = C.compress(3, DATA, magic=1)
    assert C.decompress(3, old, len(DATA), magic=0) == DATA
    assert C.decompress(3, good, len(DATA), magic=0) == DATA  # writers that got HC right are fine too
    assert C.decompress(3, good, len(DATA), magic=1) == DATA
    with pytest.raises(CorruptMessage, match="headerChecksum|LZ4"):
        C.decompress(3, old, len(DATA), magic=1)


def test_lz4_declared_content_size_over_bound_is_refused():
    frame = lz4.frame.compress(bytes(5000), store_size=True)
    with pytest.raises(CorruptMessage, match="declares 5000"):
        C.decompress(3, frame, 4999)
    assert C.decompress(3, frame, 5000) == bytes(5000)


# ------------------------------------------------------------------------------------------- zstd
def test_zstd_multiple_frames_and_foreign_frames():
    a = zstandard.ZstdCompressor(level=1).compress(b"first|")
    b = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(b"second")
    assert C.decompress(4, a + b, 100) == b"first|second"
    assert zstandard.ZstdDecompressor().decompress(C.compress(4, DATA)) == DATA


# ------------------------------------------------------------------ bounded work (issue 8: frame walks, caps)
def _empty_frames(codec):
    """One empty frame / member of ``codec`` as the real libraries write it."""
    return {1: gzip.compress(b""), 3: lz4.frame.compress(b"", content_checksum=False),
            4: zstandard.ZstdCompressor().compress(b"")}[codec]


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_up_to_max_frames_are_read_and_one_more_is_refused(codec):
    frame = _empty_frames(codec)
    last = C.compress(codec, b"tail")
    assert C.decompress(codec, frame * (C.MAX_FRAMES - 1) + last, 100) == b"tail"
    with pytest.raises(CorruptMessage, match="more than 64 (frames|members)"):
        C.decompress(codec, frame * C.MAX_FRAMES + last, 100)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_one_mebibyte_of_empty_frames_is_refused_in_milliseconds(codec):
    """The issue's case: 1 MB of 11-byte empty LZ4 frames took 4.8 s when each frame step copied the rest of the
    buffer; gzip members and zstd frames had the same walk. Now the 65th frame ends it."""
    frame = _empty_frames(codec)
    payload = frame * ((1 << 20) // len(frame))
    t0 = time.process_time()
    with pytest.raises(CorruptMessage, match="more than 64"):
        C.decompress(codec, payload, 64 << 20)
    assert time.process_time() - t0 < 0.05


def _lz4_frame_of_blocks(n_blocks, block=b"\x01\x00\x00\x80x"):
    """An LZ4 frame of ``n_blocks`` stored 1-byte blocks (u32 LE 0x80000001 = uncompressed, 1 byte)."""
    desc = bytes([0x60, 0x40])
    hc = (C.xxh32(desc) >> 8) & 0xFF
    return C.LZ4_MAGIC + desc + bytes([hc]) + block * n_blocks + b"\x00\x00\x00\x00"


def test_lz4_blocks_are_walked_and_capped():
    assert C.decompress(3, _lz4_frame_of_blocks(100), 1 << 20) == b"x" * 100
    allowance = C.block_allowance(1 << 20)
    assert allowance == 64 + 256
    assert C.decompress(3, _lz4_frame_of_blocks(allowance), 1 << 20) == b"x" * allowance
    with pytest.raises(CorruptMessage, match="more than 320 blocks"):
        C.decompress(3, _lz4_frame_of_blocks(allowance + 1), 1 << 20)
    t0 = time.process_time()
    with pytest.raises(CorruptMessage, match="blocks"):  # 1 MB of 5-byte blocks: stops at the allowance
        C.decompress(3, _lz4_frame_of_blocks(200_000), 64 << 20)
    assert time.process_time() - t0 < 0.05


def test_lz4_truncated_or_trailing_frame_is_corrupt():
    frame = C.compress(3, DATA)
    for bad in (frame[:-1], frame[:-4], frame + b"junk", frame + C.LZ4_MAGIC):
        with pytest.raises(CorruptMessage):
            C.decompress(3, bad, 1 << 20)
    wrong_version = bytearray(frame)
    wrong_version[4] = 0x20
    with pytest.raises(CorruptMessage, match="version"):
        C.decompress(3, bytes(wrong_version), 1 << 20)


def _zstd_frame_of_raw_blocks(n_blocks):
    """A zstd frame (single segment, content size 0..255 in 1 byte) of ``n_blocks`` raw 1-byte blocks."""
    blocks = b"".join((((1 << 3) | (1 if i == n_blocks - 1 else 0)).to_bytes(3, "little") + b"z")
                      for i in range(n_blocks))
    return C.ZSTD_MAGIC + bytes([0x20, n_blocks & 0xFF]) + blocks


def test_zstd_blocks_are_walked_and_capped():
    assert C.decompress(4, _zstd_frame_of_raw_blocks(200), 1 << 20) == b"z" * 200
    allowance = C.block_allowance(1 << 20)
    with pytest.raises(CorruptMessage, match="more than 320 blocks"):
        C.decompress(4, _zstd_frame_of_raw_blocks(allowance + 1), 1 << 20)


def test_zstd_skippable_frames_are_skipped_and_truncation_found():
    skippable = b"\x50\x2a\x4d\x18" + struct.pack("<I", 3) + b"abc"
    packed = C.compress(4, b"payload")
    assert C.decompress(4, skippable + packed + skippable, 100) == b"payload"
    for bad in (skippable[:-1] + packed, packed + skippable[:-1], packed + b"\x00" * 8):
        with pytest.raises(CorruptMessage):
            C.decompress(4, bad, 100)


def test_snappy_xerial_blocks_are_capped():
    one = cramjam.snappy.compress_raw(b"s")
    framed = C.XERIAL_HEADER + (struct.pack(">i", len(one)) + bytes(one)) * 100
    assert C.decompress(2, framed, 1 << 20) == b"s" * 100
    allowance = C.block_allowance(4096)
    assert allowance == 65
    framed = C.XERIAL_HEADER + (struct.pack(">i", len(one)) + bytes(one)) * (allowance + 1)
    with pytest.raises(CorruptMessage, match="more than 65 blocks"):
        C.decompress(2, framed, 4096)


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_output_limit_exceeded_carries_the_limit(codec):
    with pytest.raises(C.OutputLimitExceeded) as ei:
        C.decompress(codec, C.compress(codec, DATA), 1000)
    assert ei.value.limit == 1000
    assert isinstance(ei.value, CorruptMessage)


def test_gzip_member_walk_copies_at_most_one_input_piece():
    """Members are found by offset: 64 members of a 1 MB payload decompress without copying the remainder per
    member (peak traced memory stays near the output, not 64 x 1 MB)."""
    big = os.urandom(1 << 20)
    payload = gzip.compress(b"a") * 63 + gzip.compress(big, 1)
    tracemalloc.start()
    try:
        assert C.decompress(1, payload, 2 << 20) == b"a" * 63 + big
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 << 20
