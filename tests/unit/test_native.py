"""kbroker._native: every test runs against both implementations (pure twins and Cython kernels).

Batches are built here by hand with struct + the pure CRC-32C, following the v2 layout in
docs/architecture.md, so the kernels are checked against the format rather than against each other.
"""
import ast
import mmap
import os
import struct
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbroker._native as native

PURE = native.load(pure=True)
try:
    CY = native.load(pure=False)
except ImportError:  # not built: only the twins are tested
    CY = None

IMPLS = [pytest.param(PURE, id="python"),
         pytest.param(CY, id="cython", marks=pytest.mark.skipif(CY is None, reason="Cython kernels not built"))]
needs_cy = pytest.mark.skipif(CY is None, reason="Cython kernels not built")
HYP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXPORTS = ("crc32c", "encode_varint", "decode_varint", "encode_uvarint", "decode_uvarint", "scan_batches",
           "validate_records_v2", "validate_records_region", "receive_buffer", "bisect_index", "record_facts",
           "renumber_records", "write_files")
OFFSET_DELTA_REASON = "offset deltas not 0..n-1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(params=IMPLS)
def k(request):
    return request.param


# ---------------------------------------------------------------- builders (v2 format by hand)

def zz(n):
    return PURE.encode_varint(n)


def record(offset_delta, key, value, headers=(), ts_delta=0, raw_length_adjust=0):
    body = b"\x00" + zz(ts_delta) + zz(offset_delta)
    body += zz(-1) if key is None else zz(len(key)) + key
    body += zz(-1) if value is None else zz(len(value)) + value
    body += zz(len(headers))
    for hk, hv in headers:
        body += zz(len(hk)) + hk
        body += zz(-1) if hv is None else zz(len(hv)) + hv
    return zz(len(body) + raw_length_adjust) + body


def batch(base_offset, records, count=None, last_delta=None, magic=2, attributes=0,
          base_ts=1000, max_ts=None, epoch=0, crc=None):
    """One v2 batch; ``records`` is the raw records region."""
    n = count if count is not None else len(records_list_guess(records))
    last = last_delta if last_delta is not None else n - 1
    after_crc = struct.pack(">hiqqqhii", attributes, last, base_ts,
                            base_ts + last if max_ts is None else max_ts, -1, -1, -1, n) + records
    crc_val = PURE.crc32c(after_crc) if crc is None else crc
    # batchLength covers everything after itself: epoch 4 + magic 1 + crc 4 + rest
    return struct.pack(">qiib", base_offset, 9 + len(after_crc), epoch, magic) + struct.pack(">I", crc_val) + after_crc


def records_list_guess(region):
    """Count records in a well-formed region (test helper for the builder's default)."""
    n, pos = 0, 0
    while pos < len(region):
        length, pos = PURE.decode_varint(region, pos)
        pos += max(length, 0)  # a negative length would never advance
        n += 1
    return [None] * n


def simple_records(n, start_delta=0):
    return b"".join(record(start_delta + i, b"k%d" % i, b"value-%d" % i) for i in range(n))


# ---------------------------------------------------------------- loader

def test_loader_exports_and_impl():
    for name in EXPORTS:
        assert callable(getattr(native, name))
    assert native.OFFSET_DELTA_REASON == PURE.OFFSET_DELTA_REASON == OFFSET_DELTA_REASON
    assert native.IMPL in ("cython", "python")
    assert PURE.IMPL == "python"
    if CY is not None:
        assert CY.IMPL == "cython" and CY.OFFSET_DELTA_REASON == OFFSET_DELTA_REASON
        forced = os.environ.get("KBROKER_PURE", "") not in ("", "0")
        assert native.IMPL == ("python" if forced else "cython")


def test_every_export_comes_from_the_set_impl_names():
    chosen = PURE if native.IMPL == "python" else CY
    for name in EXPORTS:
        assert getattr(native, name) is getattr(chosen, name), name
        assert getattr(PURE, name).__module__.endswith("_py"), name
        if CY is not None:
            assert not getattr(CY, name).__module__.endswith("_py"), name


def test_one_missing_compiled_kernel_means_all_twins():
    """A partial build (here: the records kernel unimportable) never mixes: every export is a twin and IMPL says so."""
    code = ("import sys; sys.modules['kbroker._native.records'] = None\n"
            "import kbroker._native as n\n"
            "print(n.IMPL, n.crc32c.__module__, n.scan_batches.__module__, n.record_facts.__module__)")
    env = dict(os.environ)
    env.pop("KBROKER_PURE", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["python", "kbroker._native.crc32c_py", "kbroker._native.batch_py",
                                  "kbroker._native.records_py"]


def _kernel_submodule_imports(path, source):
    """Imports of a kernel module (``kbroker._native.<x>``) in one file: they would bypass the loader's choice."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.ImportFrom):
            # ``from kbroker._native import crc32c`` is the exported function (same name as its module): fine
            names = ([node.module] if node.module else []) + [
                "%s.%s" % (node.module, a.name) for a in node.names
                if node.module == "kbroker._native" and a.name not in native.__all__]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += ["%s:%d %s" % (path, node.lineno, n) for n in names if n.startswith("kbroker._native.")
                  and n.split(".")[2] in {k + s for k in native.KERNELS for s in ("", "_py")}]
    return found


def test_nothing_outside_the_loader_imports_a_kernel_module():
    bad = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "kbroker")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        if os.path.basename(dirpath) == "_native":
            continue   # the twins import each other relatively (records_py uses varint_py)
        for f in filenames:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    bad += _kernel_submodule_imports(os.path.relpath(path, ROOT), fh.read())
    assert bad == []
    # the check sees both spellings of a bypass
    assert len(_kernel_submodule_imports("x.py", "from kbroker._native.batch_py import OFFSET_DELTA_REASON\n"
                                                 "def f():\n    from kbroker._native import records\n")) == 2


def test_load_does_not_shadow_exports():
    native.load(pure=False) if CY is not None else None
    native.load(pure=True)
    assert native.crc32c(b"123456789") == 0xE3069283


def test_kbroker_pure_env_forces_twins():
    env = dict(os.environ, KBROKER_PURE="1")
    out = subprocess.run([sys.executable, "-c", "import kbroker._native as n; print(n.IMPL, n.crc32c.__module__, "
                          "n.record_facts.__module__)"], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["python", "kbroker._native.crc32c_py", "kbroker._native.records_py"]


# ---------------------------------------------------------------- CRC-32C

def test_crc32c_known_vectors(k):
    assert k.crc32c(b"123456789") == 0xE3069283
    assert k.crc32c(bytes(32)) == 0x8A9136AA
    assert k.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert k.crc32c(bytes(range(32))) == 0x46DD794E
    assert k.crc32c(b"") == 0
    assert k.crc32c(b"", 0x12345678) == 0x12345678


def test_crc32c_incremental_equals_one_shot(k):
    data = bytes(range(256)) * 40 + b"tail"  # > 4 KB: crosses the nogil threshold
    whole = k.crc32c(data)
    for cut in (0, 1, 7, 8, 9, 4095, 4096, len(data)):
        assert k.crc32c(data[cut:], k.crc32c(data[:cut])) == whole
    assert whole == PURE.crc32c(data)


def test_crc32c_three_chain_lengths_match_the_twin(k):
    # The hardware path runs three chains over 3 x 4096- and 3 x 512-byte rounds and joins them with shift
    # tables; lengths around every round boundary, odd alignments and a non-zero start state must all agree
    # with the pure twin (a wrong shift table shows up as a mismatch here, not as a CORRUPT_MESSAGE later).
    import random
    rnd = random.Random(5)
    data = bytes(rnd.getrandbits(8) for _ in range(3 * 4096 * 3 + 3 * 512 + 64))
    for n in (1535, 1536, 1537, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 1, 3 * 4096 + 3 * 512 + 7, len(data) - 9):
        for off in (0, 1, 5):
            view = memoryview(data)[off:off + n]
            assert k.crc32c(view) == PURE.crc32c(bytes(view)), (n, off)
            assert k.crc32c(view, 0xDEADBEEF) == PURE.crc32c(bytes(view), 0xDEADBEEF), (n, off)
    assert k.crc32c(bytes(3 * 4096)) == PURE.crc32c(bytes(3 * 4096))


def test_crc32c_accepts_buffer_types(k, tmp_path):
    data = b"123456789"
    assert k.crc32c(bytearray(data)) == 0xE3069283
    assert k.crc32c(memoryview(b"xx" + data)[2:]) == 0xE3069283
    path = tmp_path / "f"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert k.crc32c(m) == 0xE3069283


@needs_cy
def test_crc32c_cython_software_path_matches_hardware():
    import importlib
    mod = importlib.import_module("kbroker._native.crc32c")
    data = os.urandom(10007)
    try:
        mod._force_software(True)
        assert not mod.hardware()
        sw = [CY.crc32c(data[i:]) for i in range(9)]
        assert CY.crc32c(b"123456789") == 0xE3069283
    finally:
        mod._force_software(False)
    assert [CY.crc32c(data[i:]) for i in range(9)] == sw == [PURE.crc32c(data[i:]) for i in range(9)]


# ---------------------------------------------------------------- varints

VARINT_BYTES = [
    (0, b"\x00"), (1, b"\x02"), (-1, b"\x01"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (300, b"\xd8\x04"), (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-2**31, b"\xff\xff\xff\xff\x0f"),
    (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"), (-2**63, b"\xff" * 9 + b"\x01"),
]
UVARINT_BYTES = [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
                 (2**32 - 1, b"\xff\xff\xff\xff\x0f"), (2**64 - 1, b"\xff" * 9 + b"\x01")]


@pytest.mark.parametrize("value,encoded", VARINT_BYTES)
def test_varint_exact_bytes(k, value, encoded):
    assert k.encode_varint(value) == encoded
    assert k.decode_varint(encoded, 0) == (value, len(encoded))
    assert k.decode_varint(b"ab" + encoded + b"zz", 2) == (value, 2 + len(encoded))


@pytest.mark.parametrize("value,encoded", UVARINT_BYTES)
def test_uvarint_exact_bytes(k, value, encoded):
    assert k.encode_uvarint(value) == encoded
    assert k.decode_uvarint(encoded, 0) == (value, len(encoded))
    assert k.decode_uvarint(bytearray(b"?" + encoded), 1) == (value, 1 + len(encoded))
    assert k.decode_uvarint(memoryview(encoded)) == (value, len(encoded))


def test_varint_out_of_range(k):
    for bad in (2**63, -2**63 - 1):
        with pytest.raises(ValueError):
            k.encode_varint(bad)
    for bad in (-1, 2**64):
        with pytest.raises(ValueError):
            k.encode_uvarint(bad)


@pytest.mark.parametrize("data,pos", [(b"", 0), (b"\x80", 0), (b"\xff\xff", 0), (b"\x05", 1), (b"\x01\x80", 1)])
def test_varint_truncated(k, data, pos):
    with pytest.raises(ValueError, match="truncated"):
        k.decode_varint(data, pos)
    with pytest.raises(ValueError, match="truncated"):
        k.decode_uvarint(data, pos)


def test_varint_overlong(k):
    assert k.decode_uvarint(b"\x80" * 9 + b"\x00") == (0, 10)  # 10 bytes is the limit
    with pytest.raises(ValueError, match="10 bytes"):
        k.decode_uvarint(b"\x80" * 10 + b"\x00")
    with pytest.raises(ValueError, match="10 bytes"):
        k.decode_varint(b"\xff" * 11)
    # bits past 64 in the 10th byte are dropped (Java ByteUtils behaviour)
    assert k.decode_uvarint(b"\xff" * 9 + b"\x7f") == (2**64 - 1, 10)
    with pytest.raises(ValueError):
        k.decode_varint(b"\x00", -1)


@given(st.integers(min_value=-2**63, max_value=2**63 - 1))
@HYP
def test_varint_roundtrip_both(n):
    for impl in (PURE, CY) if CY else (PURE,):
        e = impl.encode_varint(n)
        assert impl.decode_varint(e, 0) == (n, len(e))
    if CY:
        assert CY.encode_varint(n) == PURE.encode_varint(n)


@given(st.integers(min_value=0, max_value=2**64 - 1))
@HYP
def test_uvarint_roundtrip_both(n):
    for impl in (PURE, CY) if CY else (PURE,):
        e = impl.encode_uvarint(n)
        assert impl.decode_uvarint(e, 0) == (n, len(e))
    if CY:
        assert CY.encode_uvarint(n) == PURE.encode_uvarint(n)


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except ValueError as exc:
        return ("ValueError", str(exc))


@needs_cy
@given(st.binary(max_size=14), st.integers(min_value=0, max_value=14))
@HYP
def test_decode_random_bytes_cython_equals_python(data, pos):
    assert _outcome(CY.decode_varint, data, pos) == _outcome(PURE.decode_varint, data, pos)
    assert _outcome(CY.decode_uvarint, data, pos) == _outcome(PURE.decode_uvarint, data, pos)


@needs_cy
@given(st.binary(max_size=3000), st.integers(min_value=0, max_value=2**32 - 1))
@HYP
def test_crc_random_cython_equals_python(data, seed):
    assert CY.crc32c(data, seed) == PURE.crc32c(data, seed)


# ---------------------------------------------------------------- scan_batches

def three_batches():
    b1 = batch(0, simple_records(3))
    b2 = batch(3, simple_records(1), base_ts=5000, max_ts=7000)
    b3 = batch(4, simple_records(5), epoch=7)
    return b1, b2, b3


def test_scan_good_batches(k):
    b1, b2, b3 = three_batches()
    buf = b1 + b2 + b3
    entries, end = k.scan_batches(buf)
    assert entries == [(0, len(b1), 0, 2, 1002, 3),
                       (len(b1), len(b2), 3, 3, 7000, 1),
                       (len(b1) + len(b2), len(b3), 4, 8, 1004, 5)]
    assert end == len(buf)
    assert len(b2) == 61 + len(simple_records(1))
    # start/end window
    entries, end = k.scan_batches(buf, len(b1), len(b1) + len(b2))
    assert entries == [(len(b1), len(b2), 3, 3, 7000, 1)] and end == len(b1) + len(b2)
    assert k.scan_batches(buf, len(buf)) == ([], len(buf))
    assert k.scan_batches(b"") == ([], 0)


def test_scan_buffer_types(k, tmp_path):
    b1, b2, b3 = three_batches()
    buf = b1 + b2 + b3
    expected = k.scan_batches(buf)
    assert k.scan_batches(bytearray(buf)) == expected
    assert k.scan_batches(memoryview(buf)) == expected
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(buf + bytes(100))  # preallocated zero tail: batchLength 0 < 49 stops the scan
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert k.scan_batches(m) == expected


@pytest.mark.parametrize("cut", [1, 11, 12, 16, 17, 60, 61, -1])
def test_scan_torn_tail(k, cut):
    b1, b2, _ = three_batches()
    buf = b1 + b2[:cut]
    assert k.scan_batches(buf) == ([(0, len(b1), 0, 2, 1002, 3)], len(b1))


def test_scan_flipped_byte_fails_crc(k):
    b1, b2, b3 = three_batches()
    bad = bytearray(b2)
    bad[70] ^= 0x01  # inside the records: covered by the CRC
    buf = b1 + bytes(bad) + b3
    assert k.scan_batches(buf) == ([(0, len(b1), 0, 2, 1002, 3)], len(b1))
    entries, end = k.scan_batches(buf, check_crc=False)
    assert len(entries) == 3 and end == len(buf)


def test_scan_epoch_not_covered_by_crc(k):
    b1, _, _ = three_batches()
    bad = bytearray(b1)
    bad[12:16] = struct.pack(">i", 99)  # partitionLeaderEpoch sits before the CRC'd region
    assert k.scan_batches(bytes(bad)) == ([(0, len(b1), 0, 2, 1002, 3)], len(b1))


def test_scan_wrong_magic(k):
    b1, b2, _ = three_batches()
    bad = bytearray(b2)
    bad[16] = 1
    assert k.scan_batches(b1 + bytes(bad)) == ([(0, len(b1), 0, 2, 1002, 3)], len(b1))
    assert k.scan_batches(b1 + bytes(bad), check_crc=False)[1] == len(b1)


@pytest.mark.parametrize("length", [48, 0, -1, -2**31])
def test_scan_short_batch_length(k, length):
    b1, b2, _ = three_batches()
    bad = bytearray(b2)
    bad[8:12] = struct.pack(">i", length)
    assert k.scan_batches(b1 + bytes(bad), check_crc=False) == ([(0, len(b1), 0, 2, 1002, 3)], len(b1))


def test_scan_minimal_empty_batch(k):
    b = batch(10, b"", count=0, last_delta=0)
    assert len(b) == 61
    assert k.scan_batches(b) == ([(0, 61, 10, 10, 1000, 0)], 61)


@needs_cy
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=255)),
                max_size=4),
       st.integers(min_value=0, max_value=400), st.booleans())
@HYP
def test_scan_mutations_cython_equals_python(flips, cut, check_crc):
    b1, b2, b3 = three_batches()
    buf = bytearray(b1 + b2 + b3)
    for where, value in flips:
        buf[where % len(buf)] = value
    buf = bytes(buf[:len(buf) - cut])
    assert CY.scan_batches(buf, 0, -1, check_crc) == PURE.scan_batches(buf, 0, -1, check_crc)


# ---------------------------------------------------------------- validate_records_v2 / region

def test_validate_good(k):
    recs = (record(0, b"key", b"value") + record(1, None, None) +
            record(2, b"", b"v", headers=[(b"h1", b"x"), (b"h2", None), (b"", b"")], ts_delta=-5) +
            record(3, b"k", b"v" * 300, ts_delta=2**40))
    b = batch(100, recs)
    buf = b"junk" + b
    assert k.validate_records_v2(buf, 4, len(b)) is None
    assert k.validate_records_region(recs, 4) is None
    assert k.validate_records_region(b"", 0) is None
    assert k.validate_records_v2(batch(0, b"", count=0), 0, 61) is None


def _v2(k, recs, **kw):
    b = batch(0, recs, **kw)
    return k.validate_records_v2(b, 0, len(b))


def test_validate_count_mismatch(k):
    recs = simple_records(3)
    assert _v2(k, recs, count=4) == "truncated varint"
    assert _v2(k, recs, count=2) == "trailing bytes after records"
    assert _v2(k, recs, count=-1) == "negative record count"
    assert k.validate_records_region(recs, 2) == "trailing bytes after records"


def test_validate_offset_deltas(k):
    recs = record(0, b"a", b"b") + record(2, b"a", b"b")
    assert _v2(k, recs) == OFFSET_DELTA_REASON
    assert k.validate_records_region(simple_records(2, start_delta=1), 2) == OFFSET_DELTA_REASON
    # a structural error wins over the offset-delta complaint
    assert _v2(k, recs + b"\x00", count=2) == "trailing bytes after records"


def test_validate_malformed_records(k):
    good = record(0, b"key", b"value")
    assert _v2(k, record(0, b"key", b"value", raw_length_adjust=1), count=1) == "record overruns batch"
    assert _v2(k, record(0, b"key", b"value", raw_length_adjust=1) + b"\x00", count=1) == "record length mismatch"
    # the record ends one byte early, just before its headers count
    assert _v2(k, record(0, b"key", b"value", raw_length_adjust=-1) + b"\x00", count=1) == "truncated varint"
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(9) + b"x"
    assert _v2(k, zz(len(body)) + body, count=1) == "value overruns record"
    assert _v2(k, b"\x01") == "negative record length"
    assert _v2(k, b"\x00") == "truncated record"
    assert _v2(k, good[:-1], count=1) == "record overruns batch"
    body = b"\x00" + zz(0) + zz(0) + zz(-2)
    assert _v2(k, zz(len(body)) + body, count=1) == "bad key length"
    body = b"\x00" + zz(0) + zz(0) + zz(5) + b"ab"
    assert _v2(k, zz(len(body)) + body, count=1) == "key overruns record"
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-3) + zz(0)
    assert _v2(k, zz(len(body)) + body, count=1) == "bad value length"
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(-1)
    assert _v2(k, zz(len(body)) + body, count=1) == "negative header count"
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(-1) + zz(-1)
    assert _v2(k, zz(len(body)) + body, count=1) == "bad header key length"
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(1) + b"h" + zz(-2)
    assert _v2(k, zz(len(body)) + body, count=1) == "bad header value length"
    body = b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1) + zz(1) + b"h" + zz(9) + b"x"
    assert _v2(k, zz(len(body)) + body, count=1) == "header overruns record"
    # int32 fields allow 5 varint bytes, the varlong timestamp delta 10
    body = b"\x00" + zz(0) + b"\x80\x80\x80\x80\x80\x00" + zz(-1) + zz(-1) + zz(0)
    assert _v2(k, zz(len(body)) + body, count=1) == "varint too long"
    body = b"\x00" + b"\x80" * 9 + b"\x00" + zz(0) + zz(-1) + zz(-1) + zz(0)
    assert _v2(k, zz(len(body)) + body, count=1) is None


def test_validate_bad_arguments(k):
    b = batch(0, simple_records(1))
    assert k.validate_records_v2(b, 0, 60) == "batch shorter than header"
    assert k.validate_records_v2(b, 1, len(b)) == "batch shorter than header"
    assert k.validate_records_v2(b, -1, len(b)) == "batch shorter than header"
    assert k.validate_records_v2(batch(0, simple_records(1), attributes=2), 0, len(b)) == "compressed batch"
    assert k.validate_records_v2(batch(0, simple_records(1), attributes=0x18), 0, len(b)) is None


@needs_cy
@given(st.binary(max_size=60), st.integers(min_value=-1, max_value=4))
@HYP
def test_validate_region_random_cython_equals_python(data, count):
    assert CY.validate_records_region(data, count) == PURE.validate_records_region(data, count)


@needs_cy
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=500), st.integers(min_value=0, max_value=255)),
                min_size=1, max_size=3))
@HYP
def test_validate_mutations_cython_equals_python(flips):
    recs = bytearray(record(0, b"key", b"value", headers=[(b"h", b"v")]) + record(1, None, b"x" * 40) +
                     record(2, b"k", None))
    for where, value in flips:
        recs[where % len(recs)] = value
    b = batch(0, bytes(recs), count=3)
    assert CY.validate_records_v2(b, 0, len(b)) == PURE.validate_records_v2(b, 0, len(b))


# ---------------------------------------------------------------- bisect_index

def offset_index(keys, slack=0):
    """.index layout: (relative offset int32, position int32) per 8-byte entry, plus zeroed slack."""
    return b"".join(struct.pack(">ii", key, 100 * i) for i, key in enumerate(keys)) + bytes(slack)


def test_bisect_offset_index(k):
    buf = offset_index([0, 5, 10, 20], slack=800)  # preallocated file: trailing zero entries ignored
    cases = {-1: -1, 0: 0, 4: 0, 5: 1, 9: 1, 10: 2, 19: 2, 20: 3, 2**31 - 1: 3, -2**31: -1, 2**40: 3, -2**70: -1}
    for target, slot in cases.items():
        assert k.bisect_index(buf, 4, 8, 4, target) == slot, target
    assert k.bisect_index(buf, 0, 8, 4, 100) == -1
    assert k.bisect_index(buf, 1, 8, 4, 100) == 0
    assert k.bisect_index(offset_index([-10, -3]), 2, 8, 4, -4) == 0


def test_bisect_time_index(k, tmp_path):
    ts = [-5, 1_600_000_000_000, 1_600_000_000_500, 2**62]
    buf = b"".join(struct.pack(">qi", t, i) for i, t in enumerate(ts))
    assert [k.bisect_index(buf, 4, 12, 8, t) for t in (-6, -5, 0, 1_600_000_000_499, 1_600_000_000_500, 2**63 - 1)] \
        == [-1, 0, 0, 1, 2, 3]
    path = tmp_path / "x.timeindex"
    path.write_bytes(buf)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert k.bisect_index(m, 4, 12, 8, 1_600_000_000_000) == 1
    assert k.bisect_index(bytearray(buf), 4, 12, 8, 1_600_000_000_000) == 1


def test_bisect_duplicates_take_last(k):
    buf = offset_index([1, 3, 3, 3, 7])
    assert k.bisect_index(buf, 5, 8, 4, 3) == 3
    assert k.bisect_index(buf, 5, 8, 4, 2) == 0


def test_bisect_bad_arguments(k):
    buf = offset_index([1, 2])
    with pytest.raises(ValueError):
        k.bisect_index(buf, 2, 8, 2, 0)
    with pytest.raises(ValueError):
        k.bisect_index(buf, 3, 8, 4, 0)
    with pytest.raises(ValueError):
        k.bisect_index(buf, -1, 8, 4, 0)


@needs_cy
@given(st.lists(st.integers(min_value=-2**31, max_value=2**31 - 1), max_size=40),
       st.integers(min_value=-2**31 - 5, max_value=2**31 + 5))
@HYP
def test_bisect_random_cython_equals_python(keys, target):
    keys.sort()
    buf = offset_index(keys)
    expected = sum(1 for key in keys if key <= target) - 1
    assert CY.bisect_index(buf, len(keys), 8, 4, target) == PURE.bisect_index(buf, len(keys), 8, 4, target) == expected


# ---------------------------------------------------------------- receive buffers

def test_receive_buffer_is_a_writable_bytearray_of_the_exact_size(k):
    for n in (0, 1, 4096, 1 << 20):
        buf = k.receive_buffer(n)
        assert type(buf) is bytearray and len(buf) == n
        view = memoryview(buf)
        view[:] = b"\x5a" * n  # recv_into fills it whole; nothing else is promised about the contents
        assert bytes(buf) == b"\x5a" * n
    with pytest.raises(ValueError):
        k.receive_buffer(-1)


# ---------------------------------------------------------------- per-record kernels (records / records_py)

NOW = 1_700_000_000_000


def facts_records():
    """Four records (value b"v") as (offset delta, timestamp delta, key, headers); delta 300 takes two varint
    bytes, so renumbering it to 3 shortens that record by one byte."""
    return [(0, 5, b"a", ()), (7, -3, None, ((b"x", b"y"),)), (1, 1 << 40, b"", ()), (300, -NOW - 1, None, ())]


def facts_region(deltas=None):
    recs = facts_records()
    return b"".join(record(d if deltas is None else deltas[i], key, b"v", headers, ts_delta=ts)
                    for i, (d, ts, key, headers) in enumerate(recs))


def test_record_facts(k):
    region = facts_region()
    # null key first at index 1; timestamps NOW + delta, NOW + (-NOW - 1) = -1 is "no timestamp" and left out
    assert k.record_facts(region, 4, NOW) == (1, NOW - 3, NOW + (1 << 40))
    assert k.record_facts(memoryview(region), 4, NOW) == (1, NOW - 3, NOW + (1 << 40))
    assert k.record_facts(region, 0, NOW) == (-1, -1, -1)
    assert k.record_facts(region, 1, NOW) == (-1, NOW + 5, NOW + 5)
    last = record(300, None, b"v", ts_delta=-NOW - 1)
    assert k.record_facts(last, 1, NOW) == (0, -1, -1)
    # base + delta wraps like a Java long
    assert k.record_facts(record(0, b"k", b"v", ts_delta=2), 1, 2**63 - 1) == (-1, -2**63 + 1, -2**63 + 1)
    for bad in (region[:-3], region[:1], b""):
        with pytest.raises(ValueError):
            k.record_facts(bad, 4, NOW)
    with pytest.raises(ValueError):
        k.record_facts(record(0, b"k", b"v", raw_length_adjust=-20), 1, NOW)   # length too short for its fields


def test_renumber_records_exact_bytes(k):
    region = facts_region()
    out = k.renumber_records(region, 4)
    assert type(out) is bytearray
    assert bytes(out) == facts_region(deltas=[0, 1, 2, 3])
    assert len(out) == len(region) - 1      # delta 300 (2 bytes) -> 3 (1 byte), its length prefix adjusted
    assert bytes(k.renumber_records(memoryview(out), 4)) == bytes(out)
    assert bytes(k.renumber_records(b"", 0)) == b""
    for bad in (region[:-1], region + b"\x00"):
        with pytest.raises(ValueError):
            k.renumber_records(bad, 4)
    with pytest.raises(ValueError):
        k.renumber_records(region, -1)
    with pytest.raises(ValueError):
        k.renumber_records(region, 5)


def _result(fn, *args):
    """("ok", value as bytes when a bytearray) or ("ValueError",)."""
    try:
        out = fn(*args)
    except ValueError:
        return ("ValueError",)
    return ("ok", bytes(out) if isinstance(out, bytearray) else out)


def _walkable(k, region, count):
    """What the record layer calls the record kernels on: a region the validator accepts, or rejects only for its
    offset deltas. The twins agree on anything else too (test_record_kernels_mutations_cython_equals_python)."""
    return k.validate_records_region(region, count) in (None, OFFSET_DELTA_REASON)


RECORDS = st.lists(st.tuples(st.integers(min_value=0, max_value=2**31 - 1),          # offset delta
                             st.integers(min_value=-2**63, max_value=2**63 - 1),     # timestamp delta
                             st.none() | st.binary(max_size=5), st.none() | st.binary(max_size=5),
                             st.lists(st.tuples(st.binary(min_size=1, max_size=3), st.none() | st.binary(max_size=3)),
                                      max_size=2)),
                   max_size=5)


@needs_cy
@given(RECORDS, st.integers(min_value=-2**63, max_value=2**63 - 1))
@HYP
def test_record_kernels_random_cython_equals_python(recs, base_ts):
    region = b"".join(record(d, key, value, headers, ts_delta=ts) for d, ts, key, value, headers in recs)
    n = len(recs)
    assert _walkable(PURE, region, n)
    facts = _result(PURE.record_facts, region, n, base_ts)
    assert facts[0] == "ok" and _result(CY.record_facts, region, n, base_ts) == facts
    renumbered = _result(PURE.renumber_records, region, n)
    assert renumbered[0] == "ok" and _result(CY.renumber_records, region, n) == renumbered
    assert PURE.validate_records_region(renumbered[1], n) is None


@needs_cy
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=500), st.integers(min_value=0, max_value=255)),
                min_size=1, max_size=3), st.integers(min_value=0, max_value=5))
@HYP
def test_record_kernels_mutations_cython_equals_python(flips, count):
    recs = bytearray(facts_region())
    for where, value in flips:
        recs[where % len(recs)] = value
    recs = bytes(recs)
    results = [(_result(k.record_facts, recs, count, NOW), _result(k.renumber_records, recs, count))
               for k in (CY, PURE)]
    # Same answer on any input, walkable or not: the twin reads varints exactly as the compiled kernel does.
    assert results[0] == results[1]



def test_record_kernels_refuse_an_int32_varint_longer_than_5_bytes(k):
    """An int32 field (here the offset delta) written in 6 bytes: Kafka's readVarint gives up after 5, and so do
    both kernels (the twin once read up to 10 and disagreed with the compiled kernel on such input)."""
    body = bytes([0]) + bytes([0]) + bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x00]) + bytes([1]) + bytes([0]) + \
        bytes([0])   # attributes, ts delta 0, 6-byte offset delta, key null (-1 = 0x01), value len 0, 0 headers
    region = bytes([len(body) << 1]) + body
    with pytest.raises(ValueError):
        k.record_facts(region, 1, NOW)
    with pytest.raises(ValueError):
        k.renumber_records(region, 1)
    ok = bytes([0, 0, 0, 1, 0, 0])
    assert k.record_facts(bytes([len(ok) << 1]) + ok, 1, NOW) == (0, NOW, NOW)


# ---------------------------------------------------------------- the GIL (issue 15: kernels run beside other threads)

def _ran_beside(call, attempts=12):
    """Whether another Python thread ran while ``call()`` was inside the kernel (i.e. the kernel released the GIL).

    A spinner thread counts its iterations while ``inside`` is set, giving the GIL back after each one
    (``time.sleep(0)``). The switch interval is raised to 2 s for the test: a kernel that holds the GIL keeps it
    for its whole call (the spinner, waiting for the GIL, asks for it only after 2 s -- far longer than the
    ~20-100 ms calls below), so the count stays 0; one that releases it lets the spinner count at once. Several
    attempts, because on a loaded machine the spinner may not be scheduled during one call (5 were not enough once
    in CI, for the 24 MB scan_batches call); a kernel holding the GIL fails every one of them alike."""
    state = {"inside": False, "count": 0, "stop": False, "started": False}

    def spin():
        state["started"] = True
        while not state["stop"]:
            if state["inside"]:
                state["count"] += 1
            time.sleep(0)

    old = sys.getswitchinterval()
    sys.setswitchinterval(2.0)
    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        while not state["started"]:
            time.sleep(0.001)
        for _ in range(attempts):
            state["inside"] = True
            call()
            state["inside"] = False
            if state["count"]:
                return True
        return False
    finally:
        state["stop"] = True
        sys.setswitchinterval(old)
        t.join(5)


# 2,000,000 records of 8 bytes (16 MB): null key, 2-byte value, offset delta 0 in every record -- a walkable region
# whose deltas are not 0..n-1, so the validators walk it all and then name OFFSET_DELTA_REASON.
_GIL_RECORD = record(0, None, b"ab")
_GIL_COUNT = 2_000_000


@pytest.fixture(scope="module")
def gil_region():
    return _GIL_RECORD * _GIL_COUNT


def test_gil_probe_sees_a_kernel_that_holds_the_gil():
    """The probe itself: a C call that keeps the GIL (hashing 256 MB with sha256 under the GIL is not
    guaranteed, so a pure busy C call is used: ``bytes.count`` over 64 MB never releases it) counts nothing."""
    data = bytes(64 << 20)
    assert not _ran_beside(lambda: data.count(b"\x01"), attempts=2)


@needs_cy
def test_compiled_crc32c_releases_the_gil():
    import importlib
    mod = importlib.import_module("kbroker._native.crc32c")
    data = os.urandom(1 << 20) * 48            # 48 MB: ~30-60 ms on the table path
    try:
        mod._force_software(True)              # the slow path, so one call lasts long enough to be seen
        want = PURE.crc32c(data[:1 << 20])
        assert CY.crc32c(data[:1 << 20]) == want
        assert _ran_beside(lambda: CY.crc32c(data))
    finally:
        mod._force_software(False)


@needs_cy
def test_compiled_scan_batches_releases_the_gil_for_large_batches():
    import importlib
    mod = importlib.import_module("kbroker._native.crc32c")
    region = _GIL_RECORD * 3_000_000             # one 24 MB batch: its CRC runs without the GIL
    b = _big_batch(region, 3_000_000)
    try:
        mod._force_software(True)
        ents, end = CY.scan_batches(b)
        assert end == len(b) and len(ents) == 1 and ents[0][5] == 3_000_000
        assert _ran_beside(lambda: CY.scan_batches(b))
    finally:
        mod._force_software(False)


@needs_cy
def test_compiled_record_walks_release_the_gil(gil_region):
    n = _GIL_COUNT
    assert CY.validate_records_region(gil_region, n) == OFFSET_DELTA_REASON
    assert _ran_beside(lambda: CY.validate_records_region(gil_region, n))
    b = _big_batch(gil_region, n)
    assert CY.validate_records_v2(b, 0, len(b)) == OFFSET_DELTA_REASON
    assert _ran_beside(lambda: CY.validate_records_v2(b, 0, len(b)))
    assert CY.record_facts(gil_region, n, NOW) == (0, NOW, NOW)
    assert _ran_beside(lambda: CY.record_facts(gil_region, n, NOW))
    out = CY.renumber_records(gil_region, n)
    assert len(out) == len(gil_region) + _renumber_growth(n)
    assert _ran_beside(lambda: CY.renumber_records(gil_region, n))


def _big_batch(region, n):
    """``batch`` with its CRC from the compiled kernel: the twin's would take seconds over megabytes."""
    b = bytearray(batch(0, region, count=n, last_delta=n - 1, crc=0))
    b[17:21] = struct.pack(">I", CY.crc32c(b[21:]))
    return bytes(b)


def _renumber_growth(n):
    """Bytes renumbering the GIL region grows by: record i's offset delta 0 (1 byte) becomes zz(i), which is 1 byte
    for i < 64, 2 below 8,192, 3 below 2**20, 4 below 2**27 (the 8-byte bodies keep a 1-byte length prefix)."""
    edges = [(0, 64, 1), (64, 8192, 2), (8192, 1 << 20, 3), (1 << 20, 1 << 27, 4)]
    return sum((size - 1) * max(0, min(n, hi) - lo) for lo, hi, size in edges)


def test_gil_kernels_agree_on_both_twins():
    """The same inputs as the GIL tests above, smaller, on both twins: the answers the threads rely on."""
    n = 5000
    region = _GIL_RECORD * n
    b = batch(0, region, count=n, last_delta=n - 1)
    for k in [PURE] + ([CY] if CY is not None else []):
        assert k.validate_records_region(region, n) == OFFSET_DELTA_REASON
        assert k.validate_records_v2(b, 0, len(b)) == OFFSET_DELTA_REASON
        assert k.record_facts(region, n, NOW) == (0, NOW, NOW)
        ents, end = k.scan_batches(b)
        assert end == len(b) and [e[5] for e in ents] == [n]
        assert k.crc32c(region) == PURE.crc32c(region)
        assert k.renumber_records(region, n) == PURE.renumber_records(region, n)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_runs_beside_other_threads(codec):
    """The codecs kbroker/record/compression.py uses (zlib, cramjam, lz4, zstandard) release the GIL while they
    inflate, so a follower thread or another greenlet hub is not stalled by a large compressed batch."""
    from kbroker.record import compression as C
    code = {"gzip": C.GZIP, "snappy": C.SNAPPY, "lz4": C.LZ4, "zstd": C.ZSTD}[codec]
    data = os.urandom(256) * (96 << 10)            # 24 MB that compresses
    comp = C.compress(code, data)
    assert C.decompress(code, comp, 1 << 30) == data
    assert _ran_beside(lambda: C.decompress(code, comp, 1 << 30))


# ---------------------------------------------------------------- files (issue 15: many small files from a worker)

def test_write_files_writes_exact_bytes_shorter_longer_or_new(k, tmp_path):
    """Each file holds exactly its data afterwards -- shorter than before (cut), longer, or new -- and answers
    (0, its st_dev); no temporary file is left."""
    paths = [os.fsencode(tmp_path / n) for n in ("a", "b", "c")]
    with open(paths[0], "wb") as f:
        f.write(b"0\n3\n1 0\n2 5\n3 900\n")            # longer than its new data
    with open(paths[1], "wb") as f:
        f.write(b"0\n0\n")                              # shorter
    datas = [b"0\n1\n8 0\n", b"0\n2\n5 0\n7 12\n", b"x" * 70_000]   # c: new, more than one page
    dev = os.stat(tmp_path).st_dev
    assert k.write_files(paths, datas) == [(0, dev)] * 3
    assert [open(p, "rb").read() for p in paths] == datas
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "c"]
    assert k.write_files([], []) == []


def test_write_files_exclusive_leaves_existing_files(k, tmp_path):
    """``exclusive``: an existing file answers EEXIST and keeps its bytes; a new one is created."""
    import errno
    old, new = os.fsencode(tmp_path / "old"), os.fsencode(tmp_path / "new")
    with open(old, "wb") as f:
        f.write(b"keep")
    assert k.write_files([old, new], [b"0\n0\n", b"0\n1\n3 0\n"], exclusive=True) == \
        [(errno.EEXIST, 0), (0, os.stat(tmp_path).st_dev)]
    assert open(old, "rb").read() == b"keep" and open(new, "rb").read() == b"0\n1\n3 0\n"


def test_write_files_reports_each_failure_and_writes_the_rest(k, tmp_path):
    import errno
    ok = os.fsencode(tmp_path / "ok")
    res = k.write_files([os.fsencode(tmp_path / "missing" / "f"), ok, os.fsencode(tmp_path)], [b"1", b"2", b"3"])
    assert res[0] == (errno.ENOENT, 0) and res[1] == (0, os.stat(tmp_path).st_dev)
    assert res[2] == (errno.EISDIR, 0)
    assert open(ok, "rb").read() == b"2"


def test_write_files_refuses_bad_arguments_before_writing(k, tmp_path):
    first = os.fsencode(tmp_path / "first")
    with pytest.raises(ValueError):
        k.write_files([first, b"a\0b"], [b"1", b"2"])             # a NUL would cut the path in C
    with pytest.raises(ValueError):
        k.write_files([first], [b"1", b"2"])
    with pytest.raises(TypeError):
        k.write_files([first], ["text"])
    with pytest.raises(TypeError):
        k.write_files([str(tmp_path / "s")], [b"1"])
    assert os.listdir(tmp_path) == []


@needs_cy
def test_compiled_write_files_releases_the_gil(tmp_path):
    """The reason for the kernel (epoch_cache.write_together): other threads -- the event loop -- run while it
    writes. That it also keeps no GIL between files (one hand-over per call, where the twin waits for the busy loop
    after each system call) is a speed property: bench/worker_files.py measures it."""
    paths = [os.fsencode(tmp_path / ("x%d" % i)) for i in range(2000)]
    assert _ran_beside(lambda: CY.write_files(paths, [b"0\n0\n"] * 2000))
    assert open(paths[-1], "rb").read() == b"0\n0\n"
