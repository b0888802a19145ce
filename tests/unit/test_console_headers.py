"""The console producer's line format with headers and the null marker (Kafka 3.x's LineMessageReader)."""
import pytest

from kbroker.cli import console_producer as cp


def parser(**props):
    return cp.LineParser({k.replace("_", "."): v for k, v in props.items()})


def test_headers_key_value():
    p = parser(parse_headers="true", parse_key="true", key_separator=":")
    assert p(b"h1:v1,h2\tk:v:w") == (b"k", b"v:w", [("h1", b"v1"), ("h2", None)])
    assert p(b"\tk:v") == (b"k", b"v", [("", None)])        # an empty headers part is one empty header, as Kafka
    only = parser(parse_headers="true", headers_delimiter="|", headers_separator=";", headers_key_separator="=")
    assert only(b"a=1;b=2|value|x") == (None, b"value|x", [("a", b"1"), ("b", b"2")])


def test_null_marker():
    p = parser(parse_headers="true", parse_key="true", key_separator=":", null_marker="NULL")
    assert p(b"h:NULL\tNULL:NULL") == (None, None, [("h", None)])
    assert p(b"NULL\tk:v") == (b"k", b"v", ())                 # headers equal to the marker: none
    with pytest.raises(cp.ProducerError, match="Header keys should not be equal to the null marker 'NULL'"):
        p(b"NULL:x\tk:v")
    plain = parser(null_marker="-")
    assert plain(b"-") == (None, None) and plain(b"--") == (None, b"--")


def test_missing_delimiters():
    p = parser(parse_headers="true", parse_key="true")
    with pytest.raises(cp.ProducerError, match="No headers delimiter found on line number 1: 'nothing'"):
        p(b"nothing")
    with pytest.raises(cp.ProducerError, match="No key separator found on line number 2: 'h:1\tnokey'"):
        p(b"h:1\tnokey")
    lenient = parser(parse_headers="true", parse_key="true", ignore_error="true")
    assert lenient(b"just a value") == (None, b"just a value", ())
    with pytest.raises(cp.ProducerError, match="headers.delimiter must not be empty"):
        parser(parse_headers="true", headers_delimiter="")


def test_records_with_headers_are_batched_with_them():
    from kbroker.client.simple import make_batch
    from kbroker.record import iter_records
    recs = [(b"k", b"v", [("h", b"x"), ("n", None)])]
    assert cp.chunk_records(recs, 16384) == [recs]
    (offset, _ts, key, value, headers), = list(iter_records(bytes(make_batch(recs))))
    assert (offset, key, value, [(k, None if v is None else bytes(v)) for k, v in headers]) == \
        (0, b"k", b"v", [("h", b"x"), ("n", None)])
