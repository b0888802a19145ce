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
