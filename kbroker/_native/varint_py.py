"""Pure-Python varints, the twin of ``varint.pyx``.

Encoding (protobuf style, used by record batch v2 and by flexible protocol versions):
base-128 little-endian groups of 7 bits, high bit set on every byte but the last.
- ``uvarint``: the unsigned value itself, 0 .. 2**64-1, at most 10 bytes.
- ``varint`` : zig-zag of a signed 64-bit value, ``zz = (n << 1) ^ (n >> 63)``, so small negative
  numbers stay short (0 -> 00, -1 -> 01, 1 -> 02, 300 -> d8 04).

Decoding raises ValueError on a truncated varint (buffer ends while the continuation bit is set)
or an overlong one (an 11th byte would be needed).  Bits beyond 64 in the 10th byte are dropped,
as Java's ByteUtils does; callers that want int32 check the range themselves.
"""

_MASK64 = (1 << 64) - 1


def encode_uvarint(n):
    """Unsigned base-128 encoding of 0 <= n < 2**64."""
    if n < 0 or n > _MASK64:
        raise ValueError("uvarint out of range: %r" % (n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n):
    """Zig-zag encoding of a signed 64-bit integer."""
    if n < -(1 << 63) or n >= (1 << 63):
        raise ValueError("varint out of range: %r" % (n,))
    return encode_uvarint(((n << 1) ^ (n >> 63)) & _MASK64)


def decode_uvarint(buf, pos=0):
    """Decode an unsigned varint at ``buf[pos]``; returns ``(value, new_pos)``."""
    if pos < 0:
        raise ValueError("negative position")
    if not isinstance(buf, (bytes, bytearray)):
        buf = memoryview(buf).cast("B")
    n = len(buf)
    result = 0
    shift = 0
    for _ in range(10):
        if pos >= n:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & _MASK64, pos
        shift += 7
    raise ValueError("varint longer than 10 bytes")


def decode_varint(buf, pos=0):
    """Decode a zig-zag signed varint at ``buf[pos]``; returns ``(value, new_pos)``."""
    zz, pos = decode_uvarint(buf, pos)
    return (zz >> 1) ^ -(zz & 1), pos
