"""Builds v2 record batches for the log tests without kbroker.record (struct + the _native kernels)."""

import struct
from types import SimpleNamespace

from kbroker._native import crc32c, encode_varint


def record(offset_delta, ts_delta, value, key=None):
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    body += encode_varint(-1) if key is None else encode_varint(len(key)) + key
    body += encode_varint(-1) if value is None else encode_varint(len(value)) + value
    body += encode_varint(0)  # no headers
    return encode_varint(len(body)) + body


def batch(base_offset, values, base_ts=1000, ts_step=1, max_ts=None):
    """A v2 batch of uncompressed records; record i has timestamp base_ts + i*ts_step."""
    records = b"".join(record(i, i * ts_step, v) for i, v in enumerate(values))
    n = len(values)
    if max_ts is None:
        max_ts = base_ts + (n - 1) * ts_step if n else base_ts
    after_crc = struct.pack(">hiqqqhii", 0, n - 1, base_ts, max_ts, -1, -1, -1, n) + records
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # epoch + magic + crc + the rest
    return struct.pack(">qiibI", base_offset, batch_length, -1, 2, crc) + after_crc


def info(buf):
    """An AppendInfo look-alike read straight from the batch headers in ``buf`` (``batches``: the entries
    ``(pos, size, base, last, max_ts, count)`` the log indexes from)."""
    pos, first, last, max_ts, off_max, batches = 0, None, None, -1, -1, []
    while pos < len(buf):
        base, length = struct.unpack_from(">qi", buf, pos)
        delta = struct.unpack_from(">i", buf, pos + 23)[0]
        ts = struct.unpack_from(">q", buf, pos + 35)[0]
        count = struct.unpack_from(">i", buf, pos + 57)[0]
        first = base if first is None else first
        last = base + delta
        if ts > max_ts:
            max_ts, off_max = ts, last
        batches.append((pos, 12 + length, base, last, ts, count))
        pos += 12 + length
    return SimpleNamespace(buffer=buf, first_offset=first, last_offset=last, max_timestamp=max_ts,
                           offset_of_max_timestamp=off_max, batches=batches)


def append_batch(log, values, ts=1000, ts_step=1, now=None):
    """Append one batch at the log end; returns its bytes."""
    b = batch(log.log_end_offset, values, base_ts=ts, ts_step=ts_step)
    log.append(info(b), now=now)
    return b
