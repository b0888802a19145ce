"""A TLS connection over memory BIOs: one socket-like object for a broker connection (SSL / SASL_SSL listeners).

Why not ``ssl.SSLSocket`` (gevent's): OpenSSL there reads the socket itself, a TLS record at a time with read-ahead
off (Python offers no switch): two ``read`` syscalls per 16 KiB record, each a chance to hit EAGAIN and go through
the event loop. Measured on 1 KiB produce (bench/bench_clients.py, kbroker-tls): 5.3 s of broker CPU per GB, 3.1 of
them in the kernel, against 0.9 s/GB in plaintext. Here the raw socket is read in ``RECV_SIZE`` (64 KiB) pieces into
an incoming ``ssl.MemoryBIO`` and OpenSSL decrypts from memory; writes are encrypted into an outgoing BIO and leave
in one ``sendall`` per ``WRITE_SIZE`` piece.

Memory: the incoming BIO is filled only when OpenSSL has nothing left to decrypt, so a connection holds at most
``RECV_SIZE`` bytes of ciphertext in user space (while its reader waits, e.g. for request memory) -- the same bound
as a plaintext connection's receive chunk. 64 KiB rather than more: 256 KiB pieces measured no cheaper (0.93 vs
0.9-1.1 s of CPU per GB received) and would hold 4x as much per connection.

The interface is what ``kbroker/server/connection.py`` uses of a socket: ``recv``, ``recv_into``, ``sendall``,
``fileno``, ``setsockopt``, ``close`` (and ``settimeout``/``gettimeout``/``getpeername``/``shutdown`` of the raw
socket, for the blocking clients), plus ``pending()`` (decrypted bytes not yet read + ciphertext not yet
decrypted), ``getpeercert``, ``version``, ``cipher``.

Concurrency (one reader and one writer greenlet per connection): every drain of the outgoing BIO and its send happen
under ``_send_lock``, so TLS records reach the wire in the order OpenSSL made them -- a read may produce records too
(TLS 1.3 KeyUpdate answers), and those wait for the writer's send in progress. Renegotiation is refused by the
contexts (OP_NO_RENEGOTIATION), so a write never needs to read.
"""
import ssl

from gevent.lock import Semaphore

RECV_SIZE = 64 * 1024
WRITE_SIZE = 256 * 1024


class TlsStream:
    __slots__ = ("raw", "_in", "_out", "_obj", "_send_lock", "_eof")

    def __init__(self, raw, context, server_side, server_hostname=None):
        self.raw = raw
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=server_side, server_hostname=server_hostname)
        self._send_lock = Semaphore()
        self._eof = False

    # ----------------------------------------------------------------------------------------- handshake
    def do_handshake(self):
        """Run the handshake to completion (the caller bounds it in time); raises ssl.SSLError / OSError, or
        ConnectionError when the peer closes during it."""
        while True:
            try:
                self._obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ConnectionError("peer closed the connection during the TLS handshake") from None
            except ssl.SSLError:
                try:
                    self._flush()   # the alert that tells the peer why (no certificate, unknown CA, ...)
                except OSError:
                    pass
                raise
        self._flush()

    # ---------------------------------------------------------------------------------------------- read
    def _fill(self):
        """Move what the socket has (at least one byte, waiting for it) into the incoming BIO; False at EOF."""
        data = self.raw.recv(RECV_SIZE)
        if not data:
            self._in.write_eof()
            self._eof = True
            return False
        self._in.write(data)
        return True

    def recv_into(self, buffer, nbytes=0):
        n = nbytes or len(buffer)
        while True:
            try:
                got = self._obj.read(n, buffer)
            except ssl.SSLWantReadError:
                if self._eof or not self._fill():
                    return 0
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return 0
            if self._out.pending:
                self._flush()
            return got

    def recv(self, nbytes):
        while True:
            try:
                data = self._obj.read(nbytes)
            except ssl.SSLWantReadError:
                if self._eof or not self._fill():
                    return b""
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            if self._out.pending:
                self._flush()
            return data

    def pending(self):
        """Bytes readable without touching the socket: decrypted, plus received but not yet decrypted."""
        return self._obj.pending() + self._in.pending

    # --------------------------------------------------------------------------------------------- write
    def _flush(self):
        with self._send_lock:
            data = self._out.read()
            if data:
                self.raw.sendall(data)

    def sendall(self, data):
        view = memoryview(data).cast("B")
        with self._send_lock:
            for start in range(0, len(view), WRITE_SIZE):
                self._obj.write(view[start:start + WRITE_SIZE])
                self.raw.sendall(self._out.read())

    # ---------------------------------------------------------------------------------------------- misc
    def fileno(self):
        return self.raw.fileno()

    def setsockopt(self, *args):
        return self.raw.setsockopt(*args)

    def settimeout(self, timeout):
        self.raw.settimeout(timeout)

    def gettimeout(self):
        return self.raw.gettimeout()

    def getpeername(self):
        return self.raw.getpeername()

    def shutdown(self, how):
        self.raw.shutdown(how)

    def getpeercert(self, binary_form=False):
        return self._obj.getpeercert(binary_form)

    def version(self):
        return self._obj.version()

    def cipher(self):
        return self._obj.cipher()

    def close(self):
        self.raw.close()
