"""Sans-IO framing: every Kafka request and response is ``int32 size | payload``.

``FrameReader`` accumulates bytes from any transport and hands out whole payloads. The size prefix is checked
*before* anything is allocated for the payload: a prefix above ``max_size`` (``socket.request.max.bytes``,
100 MiB by default) or below 8 (shorter than a request header's fixed part) raises ``FrameError`` and the caller
closes the connection -- this is how a 2 GB size prefix is refused without allocating 2 GB.
"""
import struct

from kbroker._native import receive_buffer

_SIZE = struct.Struct(">i")

# A request header's fixed part is api_key(2) + api_version(2) + correlation_id(4).
MIN_REQUEST_SIZE = 8


class FrameError(Exception):
    pass


class FrameReader:
    """Feed bytes with ``feed`` (or fill ``buffer_for_recv``), take frames with ``next_frame``."""

    __slots__ = ("_buf", "_start", "max_size", "min_size")

    def __init__(self, max_size, min_size=MIN_REQUEST_SIZE):
        self._buf = bytearray()
        self._start = 0
        self.max_size = max_size
        self.min_size = min_size

    def feed(self, data):
        self._buf += data

    def pending(self):
        return len(self._buf) - self._start

    def next_frame(self):
        """Return the next complete payload as a memoryview, or None if more bytes are needed.

        Copies at most once: when the buffer holds exactly one frame (the common case for a request read in one
        go) the buffer itself is handed out; otherwise the frame is sliced out with a single copy.
        """
        buf, start = self._buf, self._start
        avail = len(buf) - start
        if avail < 4:
            self._compact()
            return None
        size = self._check_size(buf, start)
        if avail < 4 + size:
            self._compact()
            return None
        end = start + 4 + size
        if start == 0 and end == len(buf):
            self._buf = bytearray()
            return memoryview(buf)[4:]
        with memoryview(buf) as mv:
            payload = mv[start + 4:end].tobytes()
        self._start = end
        if end == len(buf):
            self._buf = bytearray()
            self._start = 0
        return memoryview(payload)

    def take_large_frame(self):
        """For a frame whose size is known but whose body is mostly unread: allocate the payload once, at its
        exact (already validated) size, move the buffered part in, and return ``(payload, filled)``; the caller
        ``recv_into``s ``memoryview(payload)[filled:]``. Saves re-buffering a 1 MB produce request chunk by chunk."""
        buf, start = self._buf, self._start
        size = self._check_size(buf, start)
        payload = receive_buffer(size)  # not zeroed: every byte is filled from the socket before use
        have = min(len(buf) - start - 4, size)
        payload[:have] = buf[start + 4:start + 4 + have]
        self._buf = bytearray(buf[start + 4 + have:])
        self._start = 0
        return payload, have

    def _check_size(self, buf, start):
        size = _SIZE.unpack_from(buf, start)[0]
        if size < self.min_size or size > self.max_size:
            raise FrameError("invalid frame size %d (allowed %d..%d)" % (size, self.min_size, self.max_size))
        return size

    def needed(self):
        """How many more bytes complete the current frame (4 when even the size is missing)."""
        avail = len(self._buf) - self._start
        if avail < 4:
            return 4 - avail
        size = _SIZE.unpack_from(self._buf, self._start)[0]
        return max(0, 4 + size - avail)

    def _compact(self):
        if self._start:
            del self._buf[:self._start]
            self._start = 0


def frame(payload_len):
    """The 4-byte size prefix for a payload of ``payload_len`` bytes."""
    return _SIZE.pack(payload_len)
