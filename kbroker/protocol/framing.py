"""Sans-IO framing: every Kafka request and response is ``int32 size | payload``.

``FrameReader`` accumulates bytes from any transport and hands out whole payloads. The size prefix is checked
*before* anything is allocated for the payload: a prefix above ``max_size`` (``socket.request.max.bytes``,
100 MiB by default) or below 8 (shorter than a request header's fixed part) raises ``FrameError`` and the caller
closes the connection -- this is how a 2 GB size prefix is refused without allocating 2 GB.

Nor is a *valid* size trusted with memory: a large frame is received into a ``PartialFrame`` whose buffer starts at
what has arrived (or is about to: the caller passes the socket's readable byte count) and at least doubles each
time it fills, never past the declared size. So memory follows the bytes a peer really sent -- eight half-sent
64 MiB frames hold ~256 MiB, not 512 MiB, and a peer that declares 100 MiB and sends 10 bytes holds the initial
capacity. Growing resizes the buffer in place (realloc/mremap: the received bytes are not copied).
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

    def frame_size(self):
        """The (validated) size of the frame being read; needs its 4-byte prefix buffered."""
        return self._check_size(self._buf, self._start)

    def take_large_frame(self, capacity=None):
        """For a frame whose size is known but whose body is mostly unread: move the buffered part into a
        ``PartialFrame`` of ``capacity`` bytes (at least what is buffered, at most the frame's size; None = the
        whole frame) for the caller to ``recv_into`` and grow. Saves re-buffering a 1 MB produce request chunk by
        chunk."""
        buf, start = self._buf, self._start
        size = self._check_size(buf, start)
        have = min(len(buf) - start - 4, size)
        cap = size if capacity is None else min(size, max(capacity, have))
        frame = PartialFrame(size, cap)
        frame.buf[:have] = buf[start + 4:start + 4 + have]
        frame.filled = have
        self._buf = bytearray(buf[start + 4 + have:])
        self._start = 0
        return frame

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


class PartialFrame:
    """A frame's payload being received straight into its own buffer.

    Invariants: ``filled <= capacity <= size``; ``buf[:filled]`` holds the payload's first ``filled`` bytes; the
    rest of ``buf`` is uninitialised (``receive_buffer`` skips the memset) and never read. Complete when
    ``filled == size``, and then ``capacity == size``: ``payload()`` is the whole buffer, no copy.
    """
    __slots__ = ("size", "buf", "filled")

    def __init__(self, size, capacity):
        self.size = size
        self.buf = receive_buffer(capacity)
        self.filled = 0

    @property
    def capacity(self):
        return len(self.buf)

    def room(self):
        """A writable view of the unfilled part of the buffer (empty when it is full)."""
        return memoryview(self.buf)[self.filled:]

    def next_capacity(self, readable=0):
        """What ``grow`` should move to: double, or what is already readable if more, never past the size."""
        return min(self.size, max(2 * len(self.buf), self.filled + readable))

    def grow(self, capacity):
        """Enlarge the buffer to ``capacity`` bytes (``len(buf) <= capacity <= size``), keeping what was received.

        In place: bytearray resizing reallocs, which for a buffer this large is an mremap -- the received pages move
        without a copy or a new page fault (a fresh buffer plus a copy cost 4 MB frames 5x the receive path's system
        time). The new tail is written with zeros from a calloc'd bytes object; those pages would be faulted in by
        the recv anyway. No view of the buffer may be alive (``room()`` views are transient)."""
        if not len(self.buf) <= capacity <= self.size:
            raise ValueError("capacity %d outside %d..%d" % (capacity, len(self.buf), self.size))
        self.buf += bytes(capacity - len(self.buf))

    def complete(self):
        return self.filled == self.size

    def payload(self):
        """The whole payload as a writable memoryview (the record layer assigns offsets in place)."""
        if self.filled != self.size:
            raise ValueError("frame incomplete: %d of %d bytes" % (self.filled, self.size))
        return memoryview(self.buf)


def frame(payload_len):
    """The 4-byte size prefix for a payload of ``payload_len`` bytes."""
    return _SIZE.pack(payload_len)
