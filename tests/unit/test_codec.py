"""The schema codec itself: primitive encodings, compact/flexible forms, tagged fields, defaults, bad input."""
import struct

import pytest

from kbroker.protocol.framing import FrameError, FrameReader, frame
from kbroker.protocol.headers import decode_request_header, encode_request_header, encode_response_header
from kbroker.protocol.schema import Api, Field as F, SchemaError, Writer

TOY = Api(key=999, name="Toy", valid="0-2", flexible="2+",
          request=[
              F("name", "string"),
              F("id", "int32", "1+", default=-1),
              F("maybe", "string", "0+", nullable="0+", default=None),
              F("items", "[]", fields=[F("p", "int32"), F("data", "bytes", nullable="0+")]),
              F("ints", "[]int32"),
              F("hint", "string", "2+", tag=0, default=""),
              F("sub", "{}", "2+", fields=[F("a", "int16"), F("b", "bool")]),
          ],
          response=[F("error_code", "int16")])


def test_v0_exact_bytes():
    w = TOY.encode_request(0, {"name": "ab", "items": [{"p": 7, "data": None}], "ints": [1, 2]})
    assert w.getvalue() == (b"\x00\x02ab" + b"\xff\xff" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x07"
                            + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01\x00\x00\x00\x02")


def test_flexible_exact_bytes_and_tagged():
    msg = {"name": "ab", "id": 5, "maybe": None, "items": [], "ints": [3], "hint": "x", "sub": {"a": 1, "b": True}}
    raw = TOY.encode_request(2, msg).getvalue()
    assert raw == (b"\x03ab" + b"\x00\x00\x00\x05" + b"\x00" + b"\x01" + b"\x02\x00\x00\x00\x03"
                   + b"\x00\x01\x01\x00"  # sub: a, b, empty tagged section
                   + b"\x01" + b"\x00\x02\x02x")  # one tagged field: tag 0, size 2, compact string "x"
    assert TOY.decode_request(2, raw) == msg


def test_defaults_fill_absent_fields():
    raw = TOY.encode_request(0, {"name": "n"}).getvalue()
    d = TOY.decode_request(0, raw)
    assert d["id"] == -1 and d["hint"] == "" and d["sub"] == {"a": 0, "b": False}


def test_unknown_tag_skipped():
    base = TOY.encode_request(2, {"name": "n"}).getvalue()
    assert base.endswith(b"\x00")
    raw = base[:-1] + b"\x01\x07\x03abc"
    assert TOY.decode_request(2, raw)["name"] == "n"


@pytest.mark.parametrize("raw", [b"", b"\x00\x05ab", b"\x00\x01a\x7f\xff\xff\xff", b"\x00\x01a\xff\xff\xff\xff"])
def test_bad_input_raises_schema_error(raw):
    with pytest.raises(SchemaError):
        TOY.decode_request(0, raw)


def test_array_count_larger_than_message_refused_before_allocating():
    raw = b"\x00\x01a\xff\xff" + struct.pack(">i", 2**31 - 1)
    with pytest.raises(SchemaError):
        TOY.decode_request(0, raw)


def test_records_region_is_separate_chunk():
    class Region:
        size = 3

        def sendfile(self):  # marker attribute only
            pass

        def read_bytes(self):
            return b"xyz"
    api = Api(key=998, name="R", valid="0", flexible="none", request=[F("r", "records", nullable="0+")],
              response=[])
    w = api.encode_request(0, {"r": Region()})
    chunks = w.chunks()
    assert len(chunks) == 2 and bytes(chunks[0]) == b"\x00\x00\x00\x03" and w.size() == 7
    assert w.getvalue() == b"\x00\x00\x00\x03xyz"


def test_request_header_versions():
    raw = bytes(encode_request_header(2, 18, 3, 77, "cli")) + b"body"
    hdr, pos = decode_request_header(raw, 2)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (18, 3, 77, "cli")
    assert raw[pos:] == b"body"
    assert encode_response_header(0, 5) == b"\x00\x00\x00\x05"
    assert encode_response_header(1, 5) == b"\x00\x00\x00\x05\x00"


def test_frame_reader_refuses_huge_prefix_before_allocating():
    r = FrameReader(max_size=1024)
    r.feed(struct.pack(">i", 2**31 - 1))
    with pytest.raises(FrameError):
        r.next_frame()


def test_frame_reader_split_frames():
    r = FrameReader(max_size=1024)
    data = frame(8) + b"A" * 8 + frame(9) + b"B" * 9
    r.feed(data[:5])
    assert r.next_frame() is None and r.needed() == 7
    r.feed(data[5:])
    assert bytes(r.next_frame()) == b"A" * 8
    assert bytes(r.next_frame()) == b"B" * 9
    assert r.next_frame() is None


def test_frame_reader_whole_buffer_frame_is_not_copied():
    r = FrameReader(max_size=1024)
    r.feed(frame(8) + b"C" * 8)
    mv = r.next_frame()
    assert bytes(mv) == b"C" * 8 and not mv.readonly  # writable: the record layer assigns offsets in place


def test_frame_reader_take_large_frame():
    r = FrameReader(max_size=1 << 20)
    r.feed(frame(100000) + b"D" * 1000)
    assert r.next_frame() is None and r.needed() == 99000
    f = r.take_large_frame()  # no capacity given: the whole frame at once
    assert (f.size, f.capacity, f.filled) == (100000, 100000, 1000) and bytes(f.buf[:1000]) == b"D" * 1000
    assert r.pending() == 0


def test_frame_reader_take_large_frame_refuses_oversize():
    r = FrameReader(max_size=1000)
    r.feed(struct.pack(">i", 5000))
    with pytest.raises(FrameError):
        r.take_large_frame()


# ------------------------------------------------ generated struct codecs: fixed-size runs and fixed-size arrays

RUNS = Api(key=998, name="Runs", valid="0-1", flexible="1+",
           request=[
               F("a", "int8"), F("b", "int16"), F("c", "int32"), F("d", "int64"),      # one run of 15 bytes
               F("s", "string"),
               F("e", "uint16"), F("f", "uint32"), F("g", "float64"), F("h", "bool"),  # another, 15 bytes
               F("i32", "[]int32", nullable="0+", default=None), F("i64", "[]int64"), F("flags", "[]bool"),
               F("last", "int32", "1+", default=-1),
           ],
           response=[F("error_code", "int16")])

RUNS_MSG = {"a": -1, "b": -2, "c": -3, "d": -4, "s": "x", "e": 65535, "f": 4294967295, "g": 0.5, "h": True,
            "i32": [1, -1], "i64": [2 ** 40], "flags": [True, False, True], "last": 9}


def test_runs_and_fixed_arrays_exact_bytes_v0():
    msg = dict(RUNS_MSG)
    del msg["last"]
    raw = RUNS.encode_request(0, msg).getvalue()
    assert raw == (struct.pack(">bhiq", -1, -2, -3, -4) + b"\x00\x01x" + struct.pack(">HId?", 65535, 4294967295, 0.5, 1)
                   + b"\x00\x00\x00\x02" + struct.pack(">ii", 1, -1) + b"\x00\x00\x00\x01" + struct.pack(">q", 2 ** 40)
                   + b"\x00\x00\x00\x03\x01\x00\x01")
    assert RUNS.decode_request(0, raw) == {**msg, "last": -1}


def test_runs_and_fixed_arrays_exact_bytes_flexible():
    raw = RUNS.encode_request(1, RUNS_MSG).getvalue()
    assert raw == (struct.pack(">bhiq", -1, -2, -3, -4) + b"\x02x" + struct.pack(">HId?", 65535, 4294967295, 0.5, 1)
                   + b"\x03" + struct.pack(">ii", 1, -1) + b"\x02" + struct.pack(">q", 2 ** 40) + b"\x04\x01\x00\x01"
                   + struct.pack(">i", 9) + b"\x00")
    assert RUNS.decode_request(1, raw) == RUNS_MSG


@pytest.mark.parametrize("n", [0, 1, 3, 64, 65, 127, 128, 5000])
def test_fixed_arrays_of_any_length_round_trip(n):
    """Short arrays use a kept layout, longer ones one built per call; a compact count of n + 1 >= 128 takes two
    bytes."""
    msg = {**RUNS_MSG, "i32": list(range(-n // 2, n - n // 2)), "i64": [7] * n, "flags": [k % 3 == 0 for k in range(n)]}
    raw = RUNS.encode_request(1, msg).getvalue()
    assert RUNS.decode_request(1, raw) == msg
    assert RUNS.decode_request(0, RUNS.encode_request(0, msg).getvalue())["i64"] == [7] * n


def test_fixed_array_null_and_non_zero_bool_bytes():
    raw = RUNS.encode_request(1, {**RUNS_MSG, "i32": None}).getvalue()
    assert raw[30:31] == b"\x00" and RUNS.decode_request(1, raw)["i32"] is None      # compact null: count 0
    raw = RUNS.encode_request(0, {**RUNS_MSG, "i32": None}).getvalue()
    assert RUNS.decode_request(0, raw)["i32"] is None
    with pytest.raises(SchemaError, match="null array i64"):
        RUNS.encode_request(0, {**RUNS_MSG, "i64": None})
    flags = raw.rindex(b"\x00\x00\x00\x03\x01\x00\x01")
    raw = raw[:flags] + b"\x00\x00\x00\x03\x02\x00\xff"          # any non-zero byte is true
    assert RUNS.decode_request(0, raw)["flags"] == [True, False, True]


@pytest.mark.parametrize("cut", [1, 14, 17, 31])
def test_truncated_inside_a_run_is_a_schema_error(cut):
    raw = RUNS.encode_request(0, RUNS_MSG).getvalue()
    with pytest.raises(SchemaError, match="truncated"):
        RUNS.decode_request(0, raw[:cut])


def test_fixed_array_count_beyond_the_message_and_the_element_limit_are_refused():
    head = struct.pack(">bhiq", 0, 0, 0, 0) + b"\x00\x00" + struct.pack(">HId?", 0, 0, 0.0, 0)
    with pytest.raises(SchemaError, match="array i32: 3 elements of >= 4 bytes exceed the 8 bytes left"):
        RUNS.decode_request(0, head + b"\x00\x00\x00\x03" + b"\x00" * 8)
    ok = head + b"\x00\x00\x00\x03" + b"\x00" * 12 + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
    assert RUNS.decode_request(0, ok, max_elements=3)["i32"] == [0, 0, 0]
    with pytest.raises(SchemaError, match="more than 2 array elements"):
        RUNS.decode_request(0, ok, max_elements=2)
