"""Every registered API, every version, both sides: random messages (arrays of 0-3 elements, every field set)
survive encode -> decode unchanged, and a message missing every field decodes to the schema's defaults. Covers
each generated struct codec (kbroker/protocol/schema.py ``_struct_source``: one per shape) with the values its
fields can take -- the extremes of every fixed-size type included."""
import random

import pytest

from kbroker.protocol.apis import APIS
from kbroker.protocol.schema import _in

EXTREMES = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2 ** 31, 2 ** 31 - 1),
            "int64": (-2 ** 63, 2 ** 63 - 1), "uint16": (0, 65535), "uint32": (0, 2 ** 32 - 1)}


def _value(rng, t, fields, version, depth):
    if t.startswith("["):
        elem = t[2:]
        return [_value(rng, elem, fields, version, depth + 1) if elem else _message(rng, fields, version, depth + 1)
                for _ in range(rng.randint(0, 3 if depth < 3 else 0))]
    if t == "{}":
        return _message(rng, fields, version, depth + 1)
    if t in EXTREMES:
        lo, hi = EXTREMES[t]
        return rng.choice((lo, hi, rng.randint(lo, hi)))
    return {"float64": lambda: rng.random() * 1e6, "bool": lambda: rng.random() < 0.5,
            "uuid": lambda: bytes(rng.randrange(256) for _ in range(16)),
            "string": lambda: "s\u00e9" * rng.randint(0, 3), "bytes": lambda: b"\x00b" * rng.randint(0, 3),
            "records": lambda: b"\x01r" * rng.randint(0, 3)}[t]()


def _message(rng, fields, version, depth=0):
    return {f.name: _value(rng, f.type, f.fields, version, depth) for f in fields if _in(f.versions, version)}


def _plain(v):
    """Decoded ``records`` are memoryviews: compare their bytes."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return bytes(v) if isinstance(v, memoryview) else v


def _cases():
    for key in sorted(APIS):
        api = APIS[key]
        for version in range(0, 0x80):
            if _in(api.valid, version):
                yield pytest.param(key, version, id="%s-v%d" % (api.name, version))


@pytest.mark.parametrize("key,version", list(_cases()))
def test_random_messages_round_trip(key, version):
    api = APIS[key]
    rng = random.Random(key * 1000 + version)
    for which, fields, encode, decode in (
            ("request", api.request_fields, api.encode_request, api.decode_request),
            ("response", api.response_fields, api.encode_response, lambda v, raw: api.decode_response(v, raw, 0))):
        empty = _plain(decode(version, encode(version, {}).getvalue()))
        assert set(empty) == {f.name for f in fields}, which      # every field, in the version or not
        for _ in range(6):
            msg = _message(rng, fields, version)
            got = _plain(decode(version, encode(version, msg).getvalue()))
            _assert_holds(got, _plain(msg), which)


def _assert_holds(got, sent, where):
    """``got`` has every value ``sent`` had (a decoded struct also holds the fields its version lacks, at their
    defaults), recursively."""
    if isinstance(sent, dict):
        assert isinstance(got, dict), where
        for k, v in sent.items():
            assert k in got, "%s.%s missing" % (where, k)
            _assert_holds(got[k], v, "%s.%s" % (where, k))
    elif isinstance(sent, list):
        assert isinstance(got, list) and len(got) == len(sent), (where, got, sent)
        for i, (g, v) in enumerate(zip(got, sent)):
            _assert_holds(g, v, "%s[%d]" % (where, i))
    else:
        assert got == sent and type(got) is type(sent), (where, got, sent)


def _sparse(rng, fields, version, depth=0):
    """A message as a program builds it: some fields left out (the codec's defaults apply), and fields of
    other versions present (the version drops them)."""
    out = {}
    for f in fields:
        if rng.random() < 0.3:
            continue
        if f.type == "[]":
            n = rng.randint(0, 3 if depth < 3 else 0)
            out[f.name] = [_sparse(rng, f.fields, version, depth + 1) for _ in range(n)]
        elif f.type == "{}":
            out[f.name] = _sparse(rng, f.fields, version, depth + 1)
        else:
            out[f.name] = _value(rng, f.type, f.fields, version, depth)
    return out


def _objects(v, out):
    """Every list and dict of ``v``, by identity."""
    if isinstance(v, (list, dict)):
        out.add(id(v))
        for x in (v.values() if isinstance(v, dict) else v):
            _objects(x, out)
    return out


@pytest.mark.parametrize("key,version", list(_cases()))
def test_copy_request_is_what_the_bytes_decode_to(key, version):
    """``copy_request`` (the controller's requests to its own broker, in process) gives exactly what a remote
    broker decodes from the same message -- defaults filled, other versions' fields dropped, tagged fields as
    the wire carries them -- and shares no list or dict with the message it copied."""
    api = APIS[key]
    rng = random.Random(key * 7919 + version)
    messages = [{}] + [_message(rng, api.request_fields, version) for _ in range(4)] + [
        _sparse(rng, api.request_fields, version) for _ in range(8)]
    for msg in messages:
        try:
            raw = api.encode_request(version, msg).getvalue()
        except Exception:  # noqa: BLE001 -- a sparse message may null a non-nullable field: nothing to compare
            continue
        copied = api.copy_request(version, msg)
        assert _plain(copied) == _plain(api.decode_request(version, raw))
        assert not _objects(copied, set()) & _objects(msg, set())
