"""kbroker.record: exact bytes of v1 messages / v2 batches, append validation, offsets, up/down conversion.

Expected CRCs are computed independently here: zlib.crc32 for v0/v1, the pure-Python CRC-32C twin for v2.
Golden data from kafka-python's own record builders (real client bytes) is used where it can express the case.
"""

import struct
import time
import zlib

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

import kbroker.record as R
from kbroker import _native
from kbroker._native.crc32c_py import crc32c as crc32c_twin
from kbroker.errors import (CorruptMessage, InvalidRecord, InvalidTimestamp, MessageTooLarge, RecordListTooLarge,
                            UnsupportedCompressionType)
from kbroker.record import batch as B
from kbroker.record import compression as C
from kbroker.record import legacy as L

NOW = 1_700_000_000_000
VALUE = b"value-" * 40  # compressible, so kafka-python keeps the codec instead of falling back to none


def kp_v2(n=5, codec=0, ts0=NOW - 1000, producer_id=-1, producer_epoch=-1, base_sequence=-1, headers=True,
          key_of=lambda i: b"k%d" % i):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts0 + i, key=key_of(i), value=VALUE + b"%d" % i,
                 headers=[("h", b"x%d" % i)] if headers else [])
    return bytes(b.build())


def kp_legacy(magic, n=5, codec=0, ts0=NOW - 1000, key_of=lambda i: b"k%d" % i):
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=ts0 + i if magic else None, key=key_of(i), value=VALUE + b"%d" % i)
    return bytes(b.build())


def refresh_crc(buf):
    buf = bytearray(buf)
    struct.pack_into(">I", buf, 17, crc32c_twin(bytes(buf[21:])))
    return bytes(buf)


# ----------------------------------------------------------------------------------- exact bytes
def test_v1_message_exact_bytes():
    body = bytes.fromhex("01" "00" "00000000000003e8" "00000001") + b"k" + bytes.fromhex("00000001") + b"v"
    expected = bytes.fromhex("0000000000000005" "00000018") + struct.pack(">I", zlib.crc32(body)) + body
    got = L.build_message_set([(5, 1000, b"k", b"v")], magic=1)
    assert got == expected
    assert len(got) == 36
    kp = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1024)
    kp.append(5, timestamp=1000, key=b"k", value=b"v")
    assert bytes(kp.build()) == expected


def test_v0_message_exact_bytes_with_null_key():
    body = bytes.fromhex("00" "00" "ffffffff" "00000002") + b"hi"
    expected = bytes.fromhex("0000000000000007" "00000010") + struct.pack(">I", zlib.crc32(body)) + body
    assert L.build_message_set([(7, 1234, None, b"hi")], magic=0) == expected


def test_v2_batch_exact_bytes():
    record = bytes.fromhex("18" "00" "00" "00" "02") + b"k" + bytes.fromhex("02") + b"v" + \
        bytes.fromhex("02" "02") + b"h" + bytes.fromhex("02") + b"x"
    after_crc = bytes.fromhex(
        "0000"                 # attributes
        "00000000"             # lastOffsetDelta
        "00000000000003e8"     # baseTimestamp 1000
        "00000000000003e8"     # maxTimestamp
        "ffffffffffffffff"     # producerId
        "ffff"                 # producerEpoch
        "ffffffff"             # baseSequence
        "00000001") + record   # recordsCount
    expected = bytes.fromhex("0000000000000000" "0000003e" "ffffffff" "02") + \
        struct.pack(">I", crc32c_twin(after_crc)) + after_crc
    got = B.build_batch([B.Record(0, 1000, b"k", b"v", [("h", b"x")])])
    assert got == expected
    assert len(got) == 74
    # kafka-python writes partitionLeaderEpoch 0; otherwise identical bytes
    kp = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1024)
    kp.append(0, 1000, b"k", b"v", [("h", b"x")])
    assert bytes(kp.build()) == B.build_batch([(0, 1000, b"k", b"v", [("h", b"x")])], partition_leader_epoch=0)


def test_batch_header_fields():
    data = kp_v2(3, producer_id=77, producer_epoch=2, base_sequence=10)
    h = R.batch_header(data)
    assert (h.magic, h.records_count, h.last_offset_delta, h.producer_id, h.producer_epoch, h.base_sequence) == \
        (2, 3, 2, 77, 2, 10)
    assert (h.size, h.codec, h.timestamp_type, h.is_transactional, h.is_control) == (len(data), 0, 0, False, False)
    assert (h.base_timestamp, h.max_timestamp) == (NOW - 1000, NOW - 998)
    with pytest.raises(CorruptMessage):
        R.batch_header(data[:60])


def test_last_sequence_wraps():
    assert B.last_sequence(10, 4) == 14
    assert B.last_sequence(-1, 4) == -1
    assert B.last_sequence(2**31 - 2, 3) == 1  # Kafka's incrementSequence wraps to 0 after MAX
    assert B.last_sequence(2**31 - 1, 1) == 0


# ---------------------------------------------------------------------------------- v2 append path
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_append_assigns_offsets_in_place(codec):
    data = kp_v2(5, codec=codec, producer_id=9, producer_epoch=1, base_sequence=40)
    assert R.batch_header(data).codec == codec
    info = R.validate_for_append(data, 1000, NOW, R.RecordConfig(leader_epoch=3), produce_version=7)
    out = bytes(info.buffer)
    # only baseOffset and partitionLeaderEpoch differ; both are outside the CRC, which stays the producer's
    assert out[:8] == struct.pack(">q", 1000) and out[12:16] == struct.pack(">i", 3)
    assert out[8:12] == data[8:12] and out[16:] == data[16:]
    assert (info.first_offset, info.last_offset, info.record_count, info.size) == (1000, 1004, 5, len(data))
    assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (NOW - 996, 1004, -1)
    assert (info.producer_id, info.producer_epoch, info.base_sequence, info.last_sequence) == (9, 1, 40, 44)
    assert info.is_transactional is False
    recs = list(R.iter_records(out))
    assert [r[0] for r in recs] == list(range(1000, 1005))
    assert recs[2] == (1002, NOW - 998, b"k2", VALUE + b"2", [("h", b"x2")])
    if codec != 4:  # kafka-python reads it back, CRC included
        batch = MemoryRecords(out).next_batch()
        assert batch.validate_crc()
        assert [(r.offset, r.key) for r in batch] == [(1000 + i, b"k%d" % i) for i in range(5)]


def test_v2_uncompressed_append_does_not_decode_records_in_python(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("per-record Python decoding on the fast path")
    monkeypatch.setattr(B, "decode_records", boom)
    data = kp_v2(2000, headers=False)
    info = R.validate_for_append(data, 0, NOW, produce_version=3)
    assert (info.last_offset, info.record_count) == (1999, 2000)


def test_v2_log_append_time_sets_bit3_max_timestamp_and_crc():
    for codec in (0, 1):
        data = kp_v2(4, codec=codec)
        cfg = R.RecordConfig(timestamp_type="LogAppendTime")
        info = R.validate_for_append(data, 50, NOW, cfg, produce_version=5)
        out = bytes(info.buffer)
        h = R.batch_header(out)
        assert h.attributes == codec | 0x08
        assert h.max_timestamp == NOW and h.base_timestamp == NOW - 1000
        assert h.crc == crc32c_twin(out[21:])
        assert (info.log_append_time, info.max_timestamp, info.offset_of_max_timestamp) == (NOW, NOW, 53)
        assert [r[1] for r in R.iter_records(out)] == [NOW] * 4
        assert all(r.timestamp == NOW for r in MemoryRecords(out).next_batch())


def test_v2_crc_flip_is_corrupt():
    data = bytearray(kp_v2(3))
    data[-1] ^= 0x01
    with pytest.raises(CorruptMessage):
        R.validate_for_append(bytes(data), 0, NOW, produce_version=3)
    assert CorruptMessage.code == 2


def test_v2_count_mismatch_is_invalid_record():
    data = bytearray(kp_v2(3))
    struct.pack_into(">i", data, 57, 4)
    with pytest.raises(InvalidRecord) as exc:
        R.validate_for_append(refresh_crc(data), 0, NOW, produce_version=3)
    assert exc.value.code == 87


def test_v2_malformed_record_is_invalid_record():
    data = bytearray(kp_v2(3, headers=False))
    data[61] = 0x7E  # first record's length varint: 63, overruns the batch
    with pytest.raises(InvalidRecord, match="malformed"):
        R.validate_for_append(refresh_crc(data), 0, NOW, produce_version=3)


def test_v2_compressed_malformed_region_is_invalid_record():
    region = B.encode_record(0, 0, b"k", b"v") + b"\x00"  # a trailing byte after the only record
    packed = C.compress(1, region)
    h = B.HEADER.pack(0, 49 + len(packed), -1, 2, 0, 1, 0, NOW, NOW, -1, -1, -1, 1)
    with pytest.raises(InvalidRecord, match="trailing"):
        R.validate_for_append(refresh_crc(h + packed), 0, NOW, produce_version=3)


def test_produce_v3_rules():
    one = kp_v2(2)
    with pytest.raises(InvalidRecord, match="exactly one"):
        R.validate_for_append(one + one, 0, NOW, produce_version=3)
    with pytest.raises(InvalidRecord):
        R.validate_for_append(one[:-3], 0, NOW, produce_version=3)
    with pytest.raises(InvalidRecord, match="magic 2"):
        R.validate_for_append(kp_legacy(1), 0, NOW, produce_version=3)
    with pytest.raises(InvalidRecord):
        R.validate_for_append(b"", 0, NOW, produce_version=3)
    with pytest.raises(CorruptMessage):
        R.validate_for_append(b"", 0, NOW, produce_version=2)
    # internal writers may append several batches: offsets continue across them
    info = R.validate_for_append(one + kp_v2(3), 10, NOW)
    assert (info.first_offset, info.last_offset, info.record_count) == (10, 14, 5)
    assert [r[0] for r in R.iter_records(info.buffer)] == list(range(10, 15))


def test_zstd_needs_produce_v7():
    data = kp_v2(3, codec=4)
    with pytest.raises(UnsupportedCompressionType) as exc:
        R.validate_for_append(data, 0, NOW, produce_version=6)
    assert exc.value.code == 76
    assert R.validate_for_append(data, 0, NOW, produce_version=7).record_count == 3
    assert R.validate_for_append(data, 0, NOW).record_count == 3


def test_control_batch_from_client_is_invalid():
    ctrl = B.build_batch([(0, NOW, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", ())], producer_id=5,
                         producer_epoch=0, is_transactional=True, is_control=True)
    with pytest.raises(InvalidRecord):
        R.validate_for_append(ctrl, 0, NOW, produce_version=3)
    assert R.validate_for_append(ctrl, 0, NOW).is_transactional


def test_message_too_large():
    data = kp_v2(5)
    cfg = R.RecordConfig(max_message_bytes=len(data) - 1)
    with pytest.raises(MessageTooLarge) as exc:
        R.validate_for_append(data, 0, NOW, cfg, produce_version=3)
    assert exc.value.code == 10
    assert R.validate_for_append(data, 0, NOW, R.RecordConfig(max_message_bytes=len(data))).record_count == 5
    legacy = kp_legacy(1, 1)
    with pytest.raises(MessageTooLarge):
        R.validate_for_append(legacy, 0, NOW, R.RecordConfig(max_message_bytes=len(legacy) - 1), produce_version=2)


def test_compacted_topic_needs_keys():
    cfg = R.RecordConfig(compacted=True)
    keyless = kp_v2(3, key_of=lambda i: None if i == 1 else b"k")
    with pytest.raises(InvalidRecord, match="key"):
        R.validate_for_append(keyless, 0, NOW, cfg, produce_version=3)
    with pytest.raises(InvalidRecord, match="key"):
        R.validate_for_append(kp_v2(3, codec=1, key_of=lambda i: None), 0, NOW, cfg, produce_version=3)
    assert R.validate_for_append(kp_v2(3), 0, NOW, cfg, produce_version=3).record_count == 3
    with pytest.raises(CorruptMessage, match="key"):
        R.validate_for_append(kp_legacy(1, key_of=lambda i: None), 0, NOW, cfg, produce_version=2)


def test_timestamp_difference():
    cfg = R.RecordConfig(timestamp_difference_max_ms=5000)
    assert R.validate_for_append(kp_v2(3, ts0=NOW - 5000), 0, NOW, cfg).record_count == 3
    with pytest.raises(InvalidTimestamp) as exc:
        R.validate_for_append(kp_v2(3, ts0=NOW - 5001), 0, NOW, cfg, produce_version=3)
    assert exc.value.code == 32
    with pytest.raises(InvalidTimestamp):
        R.validate_for_append(kp_legacy(1, ts0=NOW + 6000), 0, NOW, cfg, produce_version=1)
    # magic 0 has no timestamp (-1): never out of range
    assert R.validate_for_append(kp_legacy(0), 0, NOW, cfg, produce_version=0).record_count == 5
    # LogAppendTime topics ignore producer timestamps
    lat = R.RecordConfig(timestamp_type="LogAppendTime", timestamp_difference_max_ms=1)
    assert R.validate_for_append(kp_v2(3, ts0=0), 0, NOW, lat).max_timestamp == NOW


@pytest.mark.parametrize("codec", [0, 3])
def test_offset_deltas_not_sequential_are_rewritten(codec):
    recs = [B.Record(d, NOW + i, b"k%d" % i, b"v%d" % i, ()) for i, d in enumerate((0, 5, 2))]
    data = B.build_batch(recs, codec=codec, producer_id=3, producer_epoch=0, base_sequence=0)
    info = R.validate_for_append(data, 100, NOW, produce_version=3)
    h = R.batch_header(info.buffer)
    assert (h.records_count, h.last_offset_delta, h.codec, h.producer_id) == (3, 2, codec, 3)
    assert h.crc == crc32c_twin(bytes(info.buffer[21:]))
    assert [(r[0], r[2]) for r in R.iter_records(info.buffer)] == [(100, b"k0"), (101, b"k1"), (102, b"k2")]


# --------------------------------------------------------------------------------- v0/v1 append path
def _check_upconverted(info, magic, codec, base, n=5, ts0=NOW - 1000):
    h = R.batch_header(info.buffer)
    assert (h.magic, h.codec, h.records_count, h.base_offset, h.producer_id) == (2, codec, n, base, -1)
    assert h.crc == crc32c_twin(bytes(info.buffer[21:]))
    want_ts = [ts0 + i if magic else -1 for i in range(n)]
    assert list(R.iter_records(info.buffer)) == [
        (base + i, want_ts[i], b"k%d" % i, VALUE + b"%d" % i, []) for i in range(n)]
    assert (info.first_offset, info.last_offset, info.record_count) == (base, base + n - 1, n)
    assert info.max_timestamp == (ts0 + n - 1 if magic else -1)
    assert len(info.buffer) == info.size


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_upconvert_kafka_python_message_sets(magic, codec):
    if magic == 0 and codec == 3:
        data = L.build_message_set([(i, 0, b"k%d" % i, VALUE + b"%d" % i) for i in range(5)], 0, codec=3)
        assert data[26:30] == b"\x04\x22\x4d\x18"  # 12 + crc, magic, attrs, null key, value length
    else:
        data = kp_legacy(magic, codec=codec)
    info = R.validate_for_append(data, 42, NOW, produce_version=2)
    _check_upconverted(info, magic, codec, 42)


def test_upconvert_v0_lz4_with_old_hc_from_outside():
    inner = b"".join(L.encode_message(i, 0, 0, -1, b"k%d" % i, VALUE + b"%d" % i) for i in range(5))
    frame = bytearray(C.compress(3, inner, magic=1))
    frame[6] = (C.xxh32(bytes(frame[0:6])) >> 8) & 0xFF  # what Kafka 0.8/0.9 wrote
    wrapper = L.encode_message(4, 0, 3, -1, None, bytes(frame))
    _check_upconverted(R.validate_for_append(wrapper, 0, NOW, produce_version=0), 0, 3, 0)
    with pytest.raises(CorruptMessage):  # the same frame is refused under magic 1
        R.validate_for_append(L.encode_message(4, 1, 3, NOW, None, bytes(frame)), 0, NOW, produce_version=2)


def test_upconvert_with_log_append_time():
    cfg = R.RecordConfig(timestamp_type="LogAppendTime")
    info = R.validate_for_append(kp_legacy(1, codec=1), 7, NOW, cfg, produce_version=2)
    h = R.batch_header(info.buffer)
    assert (h.attributes, h.max_timestamp, info.log_append_time) == (1 | 0x08, NOW, NOW)
    assert [r[1] for r in R.iter_records(info.buffer)] == [NOW] * 5


def test_legacy_crc_flip_is_corrupt():
    data = bytearray(kp_legacy(1, 3))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptMessage, match="CRC32"):
        R.validate_for_append(bytes(data), 0, NOW, produce_version=2)


def test_legacy_inner_crc_flip_is_corrupt():
    inner = bytearray(L.encode_message(0, 1, 0, NOW, b"k", b"value"))
    inner[-1] ^= 0x01
    wrapper = L.encode_message(0, 1, 1, NOW, None, C.compress(1, bytes(inner)))
    with pytest.raises(CorruptMessage, match="CRC32"):
        R.validate_for_append(wrapper, 0, NOW, produce_version=2)


def test_legacy_nested_compression_and_magic_mismatch_are_corrupt():
    inner_wrapper = L.build_message_set([(0, NOW, b"k", b"v")], 1, codec=1)
    nested = L.encode_message(0, 1, 2, NOW, None, C.compress(2, inner_wrapper))
    with pytest.raises(CorruptMessage, match="nested"):
        R.validate_for_append(nested, 0, NOW, produce_version=2)
    v0_inner = L.build_message_set([(0, -1, b"k", b"v")], 0)
    mismatch = L.encode_message(0, 1, 1, NOW, None, C.compress(1, v0_inner))
    with pytest.raises(CorruptMessage, match="magic"):
        R.validate_for_append(mismatch, 0, NOW, produce_version=2)
    empty = L.encode_message(0, 1, 1, NOW, None, C.compress(1, b""))
    with pytest.raises(CorruptMessage, match="no messages"):
        R.validate_for_append(empty, 0, NOW, produce_version=2)


def test_legacy_truncation_and_bad_sizes_are_corrupt():
    data = kp_legacy(1, 2)
    with pytest.raises(CorruptMessage, match="truncated"):
        R.validate_for_append(data[:-1], 0, NOW, produce_version=2)
    short = bytearray(data)
    struct.pack_into(">i", short, 8, 13)
    with pytest.raises(CorruptMessage, match="minimum"):
        R.validate_for_append(bytes(short), 0, NOW, produce_version=2)
    body = bytes.fromhex("01" "00" "0000000000000001" "00000064") + b"k" * 8  # key length 100 overruns
    bad = struct.pack(">qiI", 0, 4 + len(body), zlib.crc32(body)) + body
    with pytest.raises(CorruptMessage, match="overruns"):
        R.validate_for_append(bad, 0, NOW, produce_version=2)


def test_legacy_zstd_is_unsupported():
    wrapper = L.encode_message(0, 1, 4, NOW, None, C.compress(4, L.build_message_set([(0, NOW, b"k", b"v")], 1)))
    with pytest.raises(UnsupportedCompressionType):
        R.validate_for_append(wrapper, 0, NOW, produce_version=2)


def test_legacy_gzip_bomb_is_corrupt(monkeypatch):
    inner = L.build_message_set([(0, NOW, b"k", bytes(8 << 20))], 1)
    wrapper = L.encode_message(0, 1, 1, NOW, None, C.compress(1, inner))
    assert len(wrapper) < 20000
    # bound = max(max_message_bytes * 64, 64 MiB) = 64 MiB: 8 MiB fits
    assert R.validate_for_append(wrapper, 0, NOW, produce_version=2).record_count == 1
    monkeypatch.setattr(R, "DECOMPRESS_MIN", 1 << 20)
    cfg = R.RecordConfig(max_message_bytes=10000)  # bound now max(640000, 1 MiB) = 1 MiB < 8 MiB
    assert R.decompress_bound(cfg) == 1 << 20
    with pytest.raises(CorruptMessage, match="inflates"):
        R.validate_for_append(wrapper, 0, NOW, cfg, produce_version=2)


# --------------------------------------------------------------------------------- down-conversion
def _stored(n=5, codec=0, base=100, lat=False):
    cfg = R.RecordConfig(timestamp_type="LogAppendTime" if lat else "CreateTime")
    return bytes(R.validate_for_append(kp_v2(n, codec=codec), base, NOW, cfg).buffer)


@pytest.mark.parametrize("to_magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_down_convert_round_trip(to_magic, codec):
    stored = _stored(codec=codec) + _stored(n=2, codec=codec, base=105)
    out = R.down_convert(stored, to_magic)
    got = [(o, t, k, v) for o, t, k, v, _m in L.iter_records(out, 1 << 20)]
    want_ts = [(NOW - 1000 + i) if to_magic else -1 for i in range(5)] + \
        [(NOW - 1000 + i) if to_magic else -1 for i in range(2)]
    assert got == [(100 + i, want_ts[i], b"k%d" % (i % 5 if i < 5 else i - 5),
                    VALUE + b"%d" % (i if i < 5 else i - 5)) for i in range(7)]
    shallow = list(L.iter_messages(out))
    assert {m.magic for m in shallow} == {to_magic}
    if codec:
        assert [(m.offset, m.codec) for m in shallow] == [(104, codec), (106, codec)]
        assert shallow[0].key is None
        if codec == 3:
            frame = shallow[0].value
            hc_from = 0 if to_magic == 0 else 4  # KIP-57 wrong HC is what magic-0 readers expect
            assert frame[6] == (C.xxh32(frame[hc_from:6]) >> 8) & 0xFF
    else:
        assert [m.offset for m in shallow] == list(range(100, 107))
    # kafka-python can read what old clients receive (except magic-0 lz4: it needs the xxhash package)
    if not (codec == 3 and to_magic == 0):
        mr = MemoryRecords(out)
        seen = []
        while True:
            batch = mr.next_batch()
            if batch is None:
                break
            seen += [(r.offset, r.key) for r in batch]
        assert [o for o, _k in seen] == list(range(100, 107))
    # the down-converted set goes back in as a Produce v0-v2 payload
    info = R.validate_for_append(out, 100, NOW, produce_version=2 if to_magic else 0)
    assert [(r[0], r[2], r[3]) for r in R.iter_records(info.buffer)] == [(g[0], g[2], g[3]) for g in got]


def test_down_convert_v1_wrapper_offsets_are_relative():
    out = R.down_convert(_stored(codec=1, base=500), 1)
    (wrapper,) = list(L.iter_messages(out))
    inner = L.inner_messages(wrapper, 1 << 20)
    assert wrapper.offset == 504 and [m.offset for m in inner] == [0, 1, 2, 3, 4]
    out0 = R.down_convert(_stored(codec=1, base=500), 0)
    (wrapper0,) = list(L.iter_messages(out0))
    assert wrapper0.offset == 504 and [m.offset for m in L.inner_messages(wrapper0, 1 << 20)] == list(range(500, 505))


def test_down_convert_log_append_time():
    out = R.down_convert(_stored(lat=True), 1)
    msgs = list(L.iter_messages(out))
    assert all(m.attributes == 0x08 and m.timestamp == NOW for m in msgs)
    out_c = R.down_convert(_stored(codec=2, lat=True), 1)
    (wrapper,) = list(L.iter_messages(out_c))
    assert (wrapper.attributes, wrapper.timestamp) == (2 | 0x08, NOW)
    assert {r[1] for r in L.iter_records(out_c, 1 << 20)} == {NOW}


def test_down_convert_drops_partial_tail_and_control_batches():
    ctrl = bytes(R.validate_for_append(
        B.build_batch([(0, NOW, b"\x00\x00\x00\x01", b"\x00" * 6, ())], producer_id=1, producer_epoch=0,
                      is_transactional=True, is_control=True), 105, NOW).buffer)
    stored = _stored() + ctrl + _stored(base=106)
    out = R.down_convert(stored + stored[:30], 1)
    assert [m.offset for m in L.iter_messages(out)] == [100, 101, 102, 103, 104, 106, 107, 108, 109, 110]
    assert R.down_convert(stored[:60], 0) == b""
    assert [r[0] for r in R.iter_records(stored, include_control=True)][5] == 105


def test_down_convert_zstd_is_unsupported():
    with pytest.raises(UnsupportedCompressionType):
        R.down_convert(_stored(codec=4), 1)
    with pytest.raises(ValueError):
        R.down_convert(_stored(), 2)


# ------------------------------------------------------------- bounded work (issue 8: bombs, shared budget)
# Time bounds hold for the compiled kernels; the pure twins (KBROKER_PURE=1) are checked for results only.
NATIVE = _native.IMPL == "cython"

def _raw_batch(codec, packed_region, count, base_timestamp=NOW, attributes_extra=0):
    """A v2 batch header around an arbitrary (possibly hostile) records region, CRC correct."""
    out = bytearray(B.HEADER_SIZE) + packed_region
    B.HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, codec | attributes_extra, count - 1, base_timestamp,
                       base_timestamp, -1, -1, -1, count)
    B.write_crc(out, 0, len(out))
    return bytes(out)


# length 6 | attributes 0 | timestampDelta 0 | offsetDelta 0 | key null | value null | 0 headers
EMPTY_RECORD_AT_DELTA_0 = b"\x0c\x00\x00\x00\x01\x01\x00"


def _gzip9(data):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def test_gzip_batch_of_records_all_at_offset_delta_0_is_bounded():
    """The issue's bomb: 12 KB of gzip holding 1.2 M records all at offset delta 0. Rebuilding it in Python took
    5.1 s and 523 MB; it inflates to 8.4 MB, above REBUILD_MAX_BYTES: refused without rebuilding."""
    n = 1_200_000
    bomb = _raw_batch(1, _gzip9(EMPTY_RECORD_AT_DELTA_0 * n), n)
    assert len(bomb) < 13000
    t0 = time.process_time()
    with pytest.raises(MessageTooLarge, match="rewritten only up to 8388608"):
        R.validate_for_append(bomb, 0, NOW, produce_version=7)
    assert not NATIVE or time.process_time() - t0 < 0.2


def test_large_renumbering_is_native_and_a_rebuilt_batch_above_max_message_bytes_is_too_large():
    """1.19 M records at delta 0 (8.3 MB, under the rebuild bound) are renumbered and recompressed in well under
    the old 5 s; the rebuilt batch (~1.7 MB) is above max.message.bytes: MESSAGE_TOO_LARGE, as Kafka checks
    rebuilt batches. With the limit raised it is accepted, offsets sequential."""
    n = 1_190_000
    bomb = _raw_batch(1, _gzip9(EMPTY_RECORD_AT_DELTA_0 * n), n)
    t0 = time.process_time()       # CPU time, not wall: another process on the 2 cores does not count
    with pytest.raises(MessageTooLarge, match="rewritten with sequential offset deltas"):
        R.validate_for_append(bomb, 0, NOW, produce_version=7)
    assert not NATIVE or time.process_time() - t0 < 1.0
    info = R.validate_for_append(bomb, 10, NOW, R.RecordConfig(max_message_bytes=4 << 20), produce_version=7)
    assert (info.first_offset, info.last_offset, info.record_count) == (10, 10 + n - 1, n)
    h = R.batch_header(info.buffer)
    region = C.decompress(1, memoryview(info.buffer)[B.HEADER_SIZE:], 64 << 20)
    assert R.validate_for_append(bytes(info.buffer), 0, NOW, R.RecordConfig(max_message_bytes=4 << 20),
                                 produce_version=7).size == len(info.buffer)  # now in order: stored as is
    assert (h.records_count, h.last_offset_delta, h.codec) == (n, n - 1, 1)
    assert region[:14] == b"\x0c\x00\x00\x00\x01\x01\x00" + b"\x0c\x00\x00\x02\x01\x01\x00"


def test_rebuild_keeps_header_fields_and_every_record_byte():
    recs = [B.Record(d, NOW + 7 * i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else [])
            for i, d in enumerate((0, 0, 9, 2, 4))]
    for codec in (0, 1, 2, 3, 4):
        data = B.build_batch(recs, codec=codec, producer_id=9, producer_epoch=2, base_sequence=40,
                             max_timestamp=NOW + 99)
        h0 = R.batch_header(data)
        info = R.validate_for_append(data, 500, NOW, produce_version=7)
        h = R.batch_header(info.buffer)
        assert h._replace(base_offset=0, batch_length=0, crc=0, partition_leader_epoch=0) == \
            h0._replace(base_offset=0, batch_length=0, crc=0, partition_leader_epoch=0)
        assert list(R.iter_records(info.buffer)) == [
            (500 + i, NOW + 7 * i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else []) for i in range(5)]


def test_compacted_and_timestamp_checks_use_native_facts(monkeypatch):
    """Large batches on compacted topics / with a finite timestamp difference are checked without decoding
    records in Python (the old path decoded every record: seconds for a 1 M-record batch)."""
    n = 200_000
    big = B.build_batch([B.Record(i, NOW, b"k", None) for i in range(n)], codec=1)
    monkeypatch.setattr(B, "decode_records", lambda *a, **k: pytest.fail("records decoded in Python"))
    cfg = R.RecordConfig(compacted=True, timestamp_difference_max_ms=1000)
    t0 = time.process_time()
    assert R.validate_for_append(big, 0, NOW, cfg, produce_version=7).record_count == n
    assert not NATIVE or time.process_time() - t0 < 0.5
    one_null = B.build_batch([B.Record(0, NOW, b"k", None), B.Record(1, NOW, None, b"v")], codec=3)
    with pytest.raises(InvalidRecord, match="record 1 of the batch"):
        R.validate_for_append(one_null, 0, NOW, cfg, produce_version=7)
    # -1 = no timestamp is never out of range; one record far off is
    ok = B.build_batch([B.Record(0, -1, b"k", None), B.Record(1, NOW + 1000, b"k", None)])
    assert R.validate_for_append(ok, 0, NOW, cfg, produce_version=7).record_count == 2
    late = B.build_batch([B.Record(0, NOW, b"k", None), B.Record(1, -1, b"k", None),
                          B.Record(2, NOW - 1001, b"k", None)])
    with pytest.raises(InvalidTimestamp):
        R.validate_for_append(late, 0, NOW, cfg, produce_version=7)


def _gzip_zeros_batch(mib):
    """A v2 gzip batch whose payload inflates to ``mib`` MiB of zeros (~1 KB per MiB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(b"") + c.flush(zlib.Z_SYNC_FLUSH)  # the gzip header, once
    block = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)  # history reset: every MiB the same bytes
    return _raw_batch(1, head + block * mib + c.flush(), 1)


def test_request_budget_is_shared_by_the_entries_of_a_request():
    """The issue's case: max.message.bytes raised to 2^31-1 made each entry's own bound 2^37, and 64 entries of
    64 MiB took 25 s. With one 32 MiB budget for the request: the first entry inflates up to it and is CORRUPT
    (it can never fit), the others are refused at once as MESSAGE_TOO_LARGE; the whole request is ~0.1 s."""
    entry = _gzip_zeros_batch(64)
    cfg = R.RecordConfig(max_message_bytes=2 ** 31 - 1)
    assert R.decompress_bound(cfg) > 1 << 36
    codes = []
    t0 = time.process_time()
    with R.request_budget(32 << 20) as budget:
        for _ in range(64):
            with pytest.raises((CorruptMessage, MessageTooLarge)) as ei:
                R.validate_for_append(entry, 0, NOW, cfg, produce_version=7)
            codes.append(ei.value.code)
    assert time.process_time() - t0 < 1.0
    assert codes == [2] + [10] * 63
    assert budget.remaining == 0
    assert R._REQUEST_BUDGET.get() is None  # closed with the block


def test_request_budget_accepts_what_fits_and_names_the_key():
    small = _raw_batch(1, _gzip9(bytes(3 << 20)), 1)  # 3 MiB of zeros: malformed records, inflation is the point
    good = kp_v2(50, codec=1)
    inflated = len(C.decompress(1, memoryview(good)[B.HEADER_SIZE:], 1 << 20))
    budget = R.RequestBudget(4 << 20)
    with pytest.raises(InvalidRecord):   # inflated fully: 3 MiB used
        R.validate_for_append(small, 0, NOW, produce_version=7, budget=budget)
    assert budget.remaining == (1 << 20)
    assert R.validate_for_append(good, 0, NOW, produce_version=7, budget=budget).record_count == 50
    assert budget.remaining == (1 << 20) - inflated
    with pytest.raises(MessageTooLarge, match="max.request.decompressed.bytes=4194304") as ei:
        R.validate_for_append(small, 0, NOW, produce_version=7, budget=budget)
    assert ei.value.code == 10
    assert budget.remaining == 0
    # without a budget (internal writers) only the entry's own bound applies
    with pytest.raises(InvalidRecord):
        R.validate_for_append(small, 0, NOW, produce_version=7)


def test_legacy_entries_share_the_budget_and_are_capped_in_messages():
    inner = L.build_message_set([(0, NOW, b"k", bytes(3 << 20))], 1)
    wrapper = L.encode_message(0, 1, 1, NOW, None, C.compress(1, inner))
    with R.request_budget(4 << 20):
        assert R.validate_for_append(wrapper, 0, NOW, R.RecordConfig(max_message_bytes=8 << 20),
                                     produce_version=2).record_count == 1
        with pytest.raises(MessageTooLarge, match="max.request.decompressed.bytes"):
            R.validate_for_append(wrapper, 0, NOW, R.RecordConfig(max_message_bytes=8 << 20), produce_version=2)
    many = R.LEGACY_MAX_MESSAGES + 1
    for codec in (0, 1):
        at_cap = L.build_message_set([(i, NOW, b"k", b"") for i in range(many - 1)], 1, codec)
        assert R.validate_for_append(at_cap, 0, NOW, produce_version=2).record_count == many - 1
        over = L.build_message_set([(i, NOW, b"k", b"") for i in range(many)], 1, codec)
        with pytest.raises(RecordListTooLarge) as ei:
            R.validate_for_append(over, 0, NOW, produce_version=2)
        assert ei.value.code == 18


# ------------------------------------------------------------------ one owner of the layout (issue 9 item 4)
def _odd_batch(base=7, epoch=3, codec=0, lat=False, pid=42):
    """A kbroker-built batch with every header field away from its default (so a misplaced field shows)."""
    return B.build_batch([B.Record(i, NOW + 5 * i, b"k%d" % i, b"v" * (10 + i)) for i in range(4)],
                         base_offset=base, codec=codec, producer_id=pid, producer_epoch=9, base_sequence=17,
                         partition_leader_epoch=epoch, timestamp_type=B.LOG_APPEND_TIME if lat else B.CREATE_TIME,
                         max_timestamp=NOW + 999 if lat else None)


@pytest.mark.parametrize("pure", [False, True])
def test_header_entry_agrees_with_the_kernel_scan(pure):
    kernels = _native.load(pure)
    for data in (_odd_batch(), _odd_batch(codec=1), _odd_batch(lat=True), kp_v2(3), kp_v2(2, codec=2)):
        padded = b"\x00" * 5 + data
        assert R.header_entry(padded, 5) == kernels.scan_batches(padded, 5, len(padded), True)[0][0]
    data = _odd_batch()
    assert R.header_entry(data) == (0, len(data), 7, 10, NOW + 15, 4)
    assert R.header_entry(data[:60]) is None                       # fewer than 61 bytes
    bad_magic = bytearray(data)
    bad_magic[16] = 1
    assert R.header_entry(bad_magic) is None
    short = bytearray(data)
    short[8:12] = struct.pack(">i", 48)                            # batchLength below 49
    assert R.header_entry(short) is None
    assert (R.batch_size(data), R.batch_size(data[:12]), R.batch_size(data[:11])) == (len(data), len(data), -1)
    assert R.batch_size(b"\x00" * 3 + data, 3) == len(data)


def test_pack_batch_writes_back_what_batch_header_read():
    for data in (_odd_batch(), _odd_batch(codec=1, lat=True), kp_v2(4, codec=3, producer_id=8, producer_epoch=2,
                                                                      base_sequence=5)):
        h = R.batch_header(data)
        assert bytes(R.pack_batch(h, data[R.HEADER_SIZE:])) == data
    # batchLength, magic and the CRC are the function's own, whatever the header says
    h = R.batch_header(_odd_batch())._replace(batch_length=1, magic=0, crc=0, records_count=0, attributes=0)
    empty = bytes(R.pack_batch(h, b""))
    assert len(empty) == 61 and R.header_entry(empty) == (0, 61, 7, 10, NOW + 15, 0)
    assert _native.scan_batches(empty, 0, 61, True)[1] == 61          # CRC valid
    assert R.batch_header(empty)[:4] == (7, 49, 3, 2) and R.batch_header(empty).producer_id == 42


def test_append_info_carries_the_entries_and_epoch_the_log_needs():
    two = kp_v2(2, ts0=NOW - 50) + kp_v2(3, ts0=NOW - 500)
    info = R.validate_for_append(two, 100, NOW, R.RecordConfig(leader_epoch=6))
    assert info.leader_epoch == 6
    # the entries are exactly what the kernel reads back from the stored bytes
    assert info.batches == _native.scan_batches(info.buffer, 0, len(info.buffer), True)[0]
    assert [e[2:4] for e in info.batches] == [(100, 101), (102, 104)]
    assert [R.batch_header(info.buffer, e[0]).partition_leader_epoch for e in info.batches] == [6, 6]
    lat = R.validate_for_append(two, 0, NOW, R.RecordConfig(timestamp_type="LogAppendTime", leader_epoch=2))
    assert [e[4] for e in lat.batches] == [NOW, NOW]
    assert lat.batches == _native.scan_batches(lat.buffer, 0, len(lat.buffer), True)[0]
    up = R.validate_for_append(kp_legacy(1, 3), 40, NOW, R.RecordConfig(leader_epoch=1))
    assert up.batches == _native.scan_batches(up.buffer, 0, len(up.buffer), True)[0]
    assert (up.batches[0][2:4], up.leader_epoch) == ((40, 42), 1)


def test_replicated_batches_and_stored_append():
    a, b, c = _odd_batch(base=0), _odd_batch(base=4, epoch=4), _odd_batch(base=8, epoch=5)
    data = a + b + c
    entries = R.replicated_batches(data + c[:30])                    # a trailing partial batch is not an entry
    assert entries == _native.scan_batches(data, 0, len(data), True)[0] and len(entries) == 3
    assert R.replicated_batches(b"") == [] and R.replicated_batches(a[:-1]) == []
    corrupt = bytearray(a)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptMessage):
        R.replicated_batches(bytes(corrupt) + b)
    assert R.replicated_batches(b + bytes(corrupt)) == [_native.scan_batches(b, 0, len(b), True)[0][0]]
    st = R.stored_append(memoryview(data), entries[1:])
    assert bytes(st.buffer) == b + c
    assert (st.first_offset, st.last_offset) == (4, 11)
    assert (st.max_timestamp, st.offset_of_max_timestamp) == (NOW + 15, 7)  # the first batch holding the max
    assert st.batches == [(0,) + entries[1][1:], (len(b),) + entries[2][1:]]


def test_replica_fields_are_the_header_fields_a_follower_records():
    for data in (_odd_batch(), _odd_batch(epoch=-1, pid=-1), kp_v2(2, producer_id=1 << 40, producer_epoch=300,
                                                                    base_sequence=(1 << 31) - 1)):
        padded = b"\x00" * 9 + data
        h = R.batch_header(data)
        assert R.replica_fields(padded, 9) == (h.partition_leader_epoch, h.producer_id, h.producer_epoch,
                                               h.base_sequence)
    assert R.replica_fields(_odd_batch()) == (3, 42, 9, 17)
