"""Request and response headers (Kafka RequestHeader v0-v2, ResponseHeader v0-v1).

Request header: ``api_key int16 | api_version int16 | correlation_id int32`` then, from v1, ``client_id`` as an
int16-length nullable string -- *never* compact, even in v2, so any broker can read the header of any request --
and, in v2 (flexible APIs), a tagged-field section. Response header: ``correlation_id int32`` plus, in v1, an (empty)
tagged-field section. Which header version an API/version uses is ``Api.request_header_version`` /
``Api.response_header_version``.

Bad input raises ``SchemaError`` and nothing else: a tagged-field size is a uvarint of up to 64 bits, so
``pos + size`` can exceed any buffer position (and Py_ssize_t) -- it is checked against the buffer before the next
read, and a count of tagged fields larger than the bytes left (each takes at least 2) is refused before looping.
"""
import struct

from kbroker._native import decode_uvarint
from kbroker.protocol.schema import ElementLimitError, SchemaError

_HDR = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class RequestHeader:
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id")

    def __init__(self, api_key, api_version, correlation_id, client_id=None):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id

    def __repr__(self):
        return "RequestHeader(%d, v%d, corr=%d, %r)" % (self.api_key, self.api_version, self.correlation_id,
                                                         self.client_id)


def peek_request_header(buf):
    """api_key, api_version, correlation_id: the first 8 bytes, readable for any request."""
    if len(buf) < 8:
        raise SchemaError("request shorter than its header")
    return _HDR.unpack_from(buf, 0)


def decode_request_header(buf, header_version, max_elements=None):
    """Returns (RequestHeader, body_offset). ``max_elements``: most tagged fields the header may carry
    (``ElementLimitError`` beyond; the broker passes ``request.max.elements``)."""
    api_key, api_version, corr = peek_request_header(buf)
    pos = 8
    client_id = None
    if header_version >= 1:
        if pos + 2 > len(buf):
            raise SchemaError("truncated client_id")
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
        if n >= 0:
            if pos + n > len(buf):
                raise SchemaError("truncated client_id")
            client_id = str(buf[pos:pos + n], "utf-8", "replace")
            pos += n
    if header_version >= 2:
        pos = _skip_tagged(buf, pos, "request header", max_elements)
    return RequestHeader(api_key, api_version, corr, client_id), pos


def encode_request_header(header_version, api_key, api_version, correlation_id, client_id):
    out = bytearray(_HDR.pack(api_key, api_version, correlation_id))
    if header_version >= 1:
        if client_id is None:
            out += _I16.pack(-1)
        else:
            b = client_id.encode("utf-8")
            out += _I16.pack(len(b)) + b
    if header_version >= 2:
        out.append(0)
    return out


def encode_response_header(header_version, correlation_id):
    if header_version >= 1:
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)


def decode_response_header(buf, header_version):
    """Returns (correlation_id, body_offset)."""
    if len(buf) < 4:
        raise SchemaError("truncated response header")
    corr = _I32.unpack_from(buf, 0)[0]
    pos = 4
    if header_version >= 1:
        pos = _skip_tagged(buf, pos, "response header")
    return corr, pos


def _skip_tagged(buf, pos, what, max_elements=None):
    """Skip a tagged-field section (no header tag is known to us); returns the position after it."""
    try:
        count, pos = decode_uvarint(buf, pos)
        if count > (len(buf) - pos) // 2:  # a tag and a size, one byte each at least
            raise SchemaError("%s: %d tagged fields in %d bytes" % (what, count, len(buf) - pos))
        if max_elements is not None and count > max_elements:
            raise ElementLimitError("%s: %d tagged fields, more than the %d allowed" % (what, count, max_elements))
        for _ in range(count):
            _tag, pos = decode_uvarint(buf, pos)
            size, pos = decode_uvarint(buf, pos)
            if size > len(buf) - pos:
                raise SchemaError("%s: truncated tagged field (%d bytes declared)" % (what, size))
            pos += size
    except (ValueError, OverflowError) as e:  # decode_uvarint: truncated or over-long varint
        if isinstance(e, SchemaError):
            raise
        raise SchemaError("%s: %s" % (what, e))
    return pos
