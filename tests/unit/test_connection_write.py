"""Connection's write loop: a response of bytes and file regions reaches the peer byte-exact, on a plain socket
(the bytes before a region sent with MSG_MORE, the region with sendfile) and through a TLS stream (whose sendall
takes no flags; regions are read and sent through it). The TLS case broke once: every Fetch over TLS failed."""
import gevent
from gevent import socket as gsocket

from kbroker.log.file_region import FileRegion
from kbroker.security.tls_stream import TlsStream
from kbroker.server.connection import Connection


class _TlsLike(TlsStream):
    """A TlsStream as the write loop sees it (no TLS underneath): records what it is handed."""
    __slots__ = ("sent",)

    def __init__(self):      # noqa: D107 - no TLS state: only sendall (and setsockopt, refused) are used
        self.raw = None
        self.sent = bytearray()

    def setsockopt(self, *args):
        raise OSError("no socket")

    def sendall(self, data):  # TlsStream's signature: no flags argument
        self.sent += data


def _write(conn, chunks):
    """Queue ``chunks`` for the connection's own writer greenlet and wait until it has written them all."""
    conn._out = list(chunks)
    conn._drained.clear()
    conn._out_ready.set()
    drained = conn._drained.wait(5)
    assert drained and not conn._writer.dead, conn._writer.exception    # a writer that died never drains
    conn.closing = True
    conn._out_ready.set()
    conn._writer.join(5)
    assert conn._writer.dead and conn._writer.exception is None, conn._writer.exception


def _response(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    data = bytes(range(256)) * 4096           # 1 MiB
    path.write_bytes(data)
    f = open(path, "rb")
    chunks = [b"head", FileRegion(f, 100, 300_000), b"mid", FileRegion(f, 500_000, 0), b"x",
              FileRegion(f, 600_000, 400_000), b"tail"]
    return f, chunks, b"head" + data[100:300_100] + b"mid" + b"x" + data[600_000:1_000_000] + b"tail"


def test_bytes_and_regions_arrive_exact_on_a_plain_socket(tmp_path):
    f, chunks, expected = _response(tmp_path)
    a, b = gsocket.socketpair()
    try:
        conn = Connection(a, ("127.0.0.1", 1), None, None, "PLAINTEXT")
        got = bytearray()
        reader = gevent.spawn(lambda: [got.extend(c) for c in iter(lambda: b.recv(1 << 16), b"")])
        _write(conn, chunks)
        a.close()
        reader.join(5)
        assert bytes(got) == expected
    finally:
        f.close()
        b.close()


def test_bytes_and_regions_arrive_exact_through_tls(tmp_path):
    f, chunks, expected = _response(tmp_path)
    try:
        sock = _TlsLike()
        conn = Connection(sock, ("127.0.0.1", 1), None, None, "SSL")
        assert conn.tls
        _write(conn, chunks)
        assert bytes(sock.sent) == expected
    finally:
        f.close()


# ------------------------------------------------------------------------------------------------ direct send
# A response with nothing ahead of it and no request buffered behind it is written by the reader itself (one send on
# the non-blocking socket): the writer greenlet is not woken. What the socket does not take goes to the writer.

from kbroker.protocol.schema import Writer  # noqa: E402


def _writer_of(*parts):
    w = Writer()
    w.buf += parts[0]
    for p in parts[1:]:
        w.parts.append(bytearray(p))
    return w


def _framed(payload):
    return len(payload).to_bytes(4, "big") + payload


def test_a_lone_response_is_sent_by_the_reader_not_the_writer():
    a, b = gsocket.socketpair()
    try:
        conn = Connection(a, ("127.0.0.1", 1), None, None, "PLAINTEXT")
        assert conn.send(_writer_of(b"hello", b" world")) is True
        # Written: nothing queued, the writer never woken.
        assert conn._out == [] and not conn._out_ready.is_set() and conn._drained.is_set()
        b.settimeout(2)
        assert b.recv(100) == _framed(b"hello world")
    finally:
        a.close()
        b.close()


def test_a_response_with_a_request_buffered_behind_it_is_queued_for_one_sendall():
    a, b = gsocket.socketpair()
    try:
        conn = Connection(a, ("127.0.0.1", 1), None, None, "PLAINTEXT")
        conn.reader.feed(b"\x00\x00")            # part of a pipelined request: its answer can share the send
        assert conn.send(_writer_of(b"first")) is False
        assert conn._out and conn._out_ready.is_set()
        conn.reader = type(conn.reader)(1 << 20)
        assert conn.send(_writer_of(b"second")) is False   # the writer still has the first: order is kept
        got = bytearray()
        b.settimeout(2)
        while len(got) < 2 * 4 + 11:
            got += b.recv(100)
        assert bytes(got) == _framed(b"first") + _framed(b"second")
    finally:
        conn.closing = True
        conn._out_ready.set()
        a.close()
        b.close()


def test_what_the_socket_does_not_take_is_sent_whole_by_the_writer():
    a, b = gsocket.socketpair()
    try:
        conn = Connection(a, ("127.0.0.1", 1), None, None, "PLAINTEXT")
        body = bytes(range(256)) * 16384           # 4 MiB: far more than a socket pair's buffer
        assert conn.send(_writer_of(b"head", body, b"tail")) is False
        assert len(conn._out) == 1 and 0 < conn._out_bytes < len(body)    # the rest, for the writer
        assert conn.send(_writer_of(b"next")) is False                    # queued behind it, never ahead
        expected = _framed(b"head" + body + b"tail") + _framed(b"next")
        got = bytearray()
        b.settimeout(5)
        while len(got) < len(expected):
            got += b.recv(1 << 16)
        assert bytes(got) == expected
        assert conn._drained.wait(5)
    finally:
        conn.closing = True
        conn._out_ready.set()
        a.close()
        b.close()


def test_a_response_with_file_regions_is_sent_directly_and_its_rest_by_the_writer(tmp_path):
    f, chunks, expected = _response(tmp_path)       # ~700 KB of regions: more than a socket pair takes at once
    a, b = gsocket.socketpair()
    try:
        conn = Connection(a, ("127.0.0.1", 1), None, None, "PLAINTEXT")
        w = Writer()
        w.buf += chunks[0]
        for c in chunks[1:]:
            if isinstance(c, bytes):
                w.buf += c
            else:
                w.add_region(c)
        regions = [(c.position, c.size) for c in chunks if not isinstance(c, bytes)]
        assert conn.send(w) is False
        rest = conn._out
        assert rest and 0 < conn._out_bytes + sum(c.size for c in rest if hasattr(c, "size")) < len(expected)
        # The socket took part of it at once; the regions handed over are copies, the response's own untouched.
        assert [(c.position, c.size) for c in chunks if not isinstance(c, bytes)] == regions
        got = bytearray()
        b.settimeout(5)
        full = len(expected) + 4
        while len(got) < full:
            got += b.recv(1 << 16)
        assert bytes(got) == len(expected).to_bytes(4, "big") + expected
        assert conn._drained.wait(5)
        # A small one alone goes out whole from the reader, region included.
        small = Writer()
        small.buf += b"h"
        small.add_region(type(chunks[1])(f, 7, 1000))
        small.buf += b"t"
        assert conn.send(small) is True and conn._out == []
        got = bytearray()
        while len(got) < 4 + 1002:
            got += b.recv(1 << 16)
        assert bytes(got) == (1002).to_bytes(4, "big") + b"h" + (bytes(range(256)) * 4)[7:1007] + b"t"
    finally:
        conn.closing = True
        conn._out_ready.set()
        f.close()
        a.close()
        b.close()


def test_with_other_connections_events_waiting_the_response_goes_to_the_writer():
    """Under load (the loop holds other ready events) responses are left for the writers, which send them after
    this pass over the ready connections, as before direct send (module docstring)."""
    class BusyLoop:
        pendingcnt = 3

    a, b = gsocket.socketpair()
    try:
        conn = Connection(a, ("127.0.0.1", 1), None, None, "PLAINTEXT")
        conn._loop = BusyLoop()
        assert conn.send(_writer_of(b"later")) is False and conn._out
        b.settimeout(2)
        assert b.recv(100) == _framed(b"later")          # the writer sent it
        conn._loop = gevent.get_hub().loop
        assert conn.send(_writer_of(b"now")) is True      # an idle loop: the reader sends it
        assert b.recv(100) == _framed(b"now")
    finally:
        conn.closing = True
        conn._out_ready.set()
        a.close()
        b.close()
