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
