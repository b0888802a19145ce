"""Sans-IO framing: every Kafka request and response is ``int32 size | payload``.

``FrameReader`` accumulates bytes from any transport and hands out whole payloads. The size prefix is checked
*before* anything is allocated for the payload: a prefix above ``max_size`` (``socket.request.max.bytes``,
100 MiB by default) or below 8 (shorter than a request header's fixed part) raises ``FrameError`` and the caller
closes the connection -- this is how a 2 GB size prefix is refused without allocating 2 GB.
"""
import struct

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
        """Return the next complete payload (a memoryview over a private copy), or None if more bytes are needed."""
        buf, start = self._buf, self._start
        avail = len(buf) - start
        if avail < 4:
            self._compact()
            return None
        size = _SIZE.unpack_from(buf, start)[0]
        if size < self.min_size or size > self.max_size:
            raise FrameError("invalid frame size %d (allowed %d..%d)" % (size, self.min_size, self.max_size))
        if avail < 4 + size:
            self._compact()
            return None
        payload = bytes(buf[start + 4:start + 4 + size])
        self._start = start + 4 + size
        if self._start == len(buf):
            self._buf = bytearray()
            self._start = 0
        return memoryview(payload)

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
