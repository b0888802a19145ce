"""One client connection: read frames, dispatch to handlers, write responses in request order.

Ordering: a connection handles one request at a time, in arrival order, in its own greenlet, exactly as Kafka mutes
a channel while a request is in flight. Clients pipeline several requests; the ones behind simply wait in the
socket buffer (and in ``FrameReader``), so responses can never be reordered.

Bad input policy (Kafka's): a size prefix outside 8..socket.request.max.bytes, an unknown API key, an unsupported
version of any API except ApiVersions, or a body that does not parse -> the connection is closed; nothing reached a
log because handlers only run on fully-decoded requests. ApiVersions at an unsupported version is answered with a v0
body carrying UNSUPPORTED_VERSION (35) and our ApiVersions range (KIP-511) so the client can retry.

Responses are written as: size prefix + header + encoded body chunks; record bytes held in a ``FileRegion`` go out
with ``os.sendfile`` straight from the segment file. A per-connection writer greenlet sends them, in order: while the
reader works through requests that a client pipelined, their responses queue up and leave together in one
``sendall`` (one syscall for many small Produce responses), and as soon as the reader blocks -- on the socket, a
long-poll Fetch, an acks=all wait -- the writer runs and flushes what is ready. The queue is bounded
(``MAX_QUEUED_BYTES``): a client that pipelines without reading stops being read.
"""
import errno
import logging
import os
import time
import socket as _socket

import gevent
from gevent.event import Event
from gevent.socket import wait_write

from kbroker.errors import UNSUPPORTED_VERSION
from kbroker.protocol.apis import APIS
from kbroker.protocol.framing import FrameError, FrameReader, frame
from kbroker.protocol.headers import decode_request_header, encode_response_header, peek_request_header
from kbroker.protocol.schema import SchemaError, Writer

log = logging.getLogger(__name__)

RECV_CHUNK = 64 * 1024
# Frames needing more than this are received straight into an exactly-sized buffer (one allocation, no copies).
LARGE_FRAME = 64 * 1024
# Queued response bytes (file regions excluded: they are not in memory) above which the reader waits for the writer.
MAX_QUEUED_BYTES = 4 * 1024 * 1024


class RequestContext:
    __slots__ = ("broker", "header", "api_version", "connection", "listener")

    def __init__(self, broker, header, connection, listener):
        self.broker = broker
        self.header = header
        self.api_version = header.api_version
        self.connection = connection
        self.listener = listener

    @property
    def client_id(self):
        return self.header.client_id


class CloseConnection(Exception):
    """Raised by a handler (or the dispatcher) to drop the connection without a response."""


class Connection:
    def __init__(self, sock, address, broker, router, listener, max_request_size):
        self.sock = sock
        self.address = address
        self.broker = broker
        self.router = router
        self.listener = listener
        self.reader = FrameReader(max_request_size)
        self._dispatching = False
        self.closing = False
        self.last_request = time.monotonic()
        self._out = []            # queued wire chunks: bytes-like or file regions, in response order
        self._out_bytes = 0
        self._out_ready = Event()
        self._drained = Event()
        self._drained.set()
        self._writer = gevent.spawn(self._write_loop)
        try:
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        except OSError:
            pass

    # ------------------------------------------------------------------------------------------------- loop
    def serve(self):
        sock, reader = self.sock, self.reader
        try:
            while not self.closing:
                try:
                    payload = reader.next_frame()
                except FrameError as e:
                    log.warning("closing %s: %s", self._peer(), e)
                    return
                if payload is None:
                    need = reader.needed()
                    if need > LARGE_FRAME and reader.pending() >= 4:
                        payload = self._read_large(reader)
                        if payload is None:
                            return
                    else:
                        data = sock.recv(RECV_CHUNK)
                        if not data:
                            return
                        reader.feed(data)
                        continue
                self._dispatching = True
                self.last_request = time.monotonic()
                try:
                    self.dispatch(payload)
                finally:
                    self._dispatching = False
                if self._out_bytes > MAX_QUEUED_BYTES:
                    self._drained.wait()
        except CloseConnection as e:
            log.info("closing %s: %s", self._peer(), e)
        except (ConnectionError, OSError) as e:
            if getattr(e, "errno", None) not in (errno.ECONNRESET, errno.EPIPE, errno.EBADF, None):
                log.info("connection %s: %s", self._peer(), e)
        finally:
            self._finish()

    @property
    def busy(self):
        """A request is being handled or responses are still queued (graceful shutdown waits for both)."""
        return self._dispatching or bool(self._out)

    def _finish(self, drain_seconds=10.0):
        """Let the writer send what is queued (bounded: a peer that stopped reading is not waited for), close."""
        self.closing = True
        self._out_ready.set()
        if not self._writer.dead:
            self._writer.join(drain_seconds)
        self.close()

    def _read_large(self, reader):
        payload, filled = reader.take_large_frame()
        view = memoryview(payload)
        size = len(payload)
        recv_into = self.sock.recv_into
        while filled < size:
            n = recv_into(view[filled:])
            if not n:
                return None
            filled += n
        return view

    def dispatch(self, payload):
        try:
            api_key, version, corr = peek_request_header(payload)
        except SchemaError as e:
            raise CloseConnection(str(e))
        h = self.router.get(api_key)
        if api_key == 18 and (h is None or not h.serves(version)):
            self._unsupported_api_versions(corr)
            return
        if h is None:
            raise CloseConnection("unknown api key %d" % api_key)
        if not h.serves(version):
            raise CloseConnection("unsupported %s version %d" % (h.api.name, version))
        api = h.api
        try:
            header, pos = decode_request_header(payload, api.request_header_version(version))
            req = api.decode_request(version, payload, pos)
        except SchemaError as e:
            raise CloseConnection("malformed %s v%d request: %s" % (api.name, version, e))
        ctx = RequestContext(self.broker, header, self, self.listener)
        resp = h.fn(ctx, req)
        if resp is None:
            return
        w = Writer()
        w.buf += encode_response_header(api.response_header_version(version), corr)
        api.encode_response(version, resp, w)
        self.send(w)

    def _unsupported_api_versions(self, corr):
        api = APIS[18]
        w = Writer()
        w.buf += encode_response_header(0, corr)
        keys = [{"api_key": k, "min_version": lo, "max_version": hi}
                for k, lo, hi in self.router.api_versions() if k == 18]
        api.encode_response(0, {"error_code": UNSUPPORTED_VERSION, "api_keys": keys}, w)
        self.send(w)

    # ----------------------------------------------------------------------------------------------- output
    def send(self, w):
        """Queue one response (size prefix + chunks) for the writer greenlet."""
        out = self._out
        out.append(frame(w.size()))
        for c in w.chunks():
            out.append(c)
            if isinstance(c, bytearray):
                self._out_bytes += len(c)
        self._drained.clear()
        self._out_ready.set()

    def _write_loop(self):
        sock = self.sock
        try:
            while True:
                if not self._out:
                    self._drained.set()
                    if self.closing:
                        return
                    self._out_ready.wait()
                    self._out_ready.clear()
                    continue
                out, self._out = self._out, []
                self._out_bytes = 0
                pending = []
                for c in out:
                    if isinstance(c, (bytes, bytearray)):
                        pending.append(c)
                    else:
                        if pending:
                            sock.sendall(b"".join(pending))
                            pending = []
                        self._sendfile(c)
                if pending:
                    sock.sendall(pending[0] if len(pending) == 1 else b"".join(pending))
        except (CloseConnection, ConnectionError, OSError) as e:
            if not isinstance(e, OSError) or getattr(e, "errno", None) not in (errno.ECONNRESET, errno.EPIPE,
                                                                              errno.EBADF):
                log.info("closing %s while writing: %s", self._peer(), e)
            self._drained.set()
            self.close()

    def _sendfile(self, region):
        fd = region.fileno()
        sockfd = self.sock.fileno()
        offset, remaining = region.position, region.size
        while remaining > 0:
            try:
                sent = os.sendfile(sockfd, fd, offset, remaining)
            except BlockingIOError:
                wait_write(sockfd)
                continue
            if sent == 0:
                # The segment shrank under us (truncation): the frame can't be completed honestly.
                raise CloseConnection("segment file shorter than the fetch response promised")
            offset += sent
            remaining -= sent

    def _peer(self):
        return "%s:%s" % (self.address[0], self.address[1]) if self.address else "?"

    def close(self):
        self.closing = True
        self._out_ready.set()
        try:
            self.sock.close()
        except OSError:
            pass
