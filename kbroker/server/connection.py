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

Direct send: a response with nothing queued ahead of it (the writer idle) and no request buffered behind it (no
pipelined request whose response it could share a ``sendall`` with) is written by the reader itself, without
waiting: its bytes with ``send`` on the non-blocking socket under gevent's (MSG_MORE before a region, as the writer
does), its file regions with one ``sendfile`` each; only what the socket did not take -- a byte tail, the rest of a
region (a copy of it, so a spilled down-conversion's file stays owned), the chunks after -- goes to the writer.
That saves, per request, a wakeup of the writer greenlet, two greenlet switches and gevent's ``sendall`` (its
Python layers and a ``getsockopt(SO_SNDBUF)`` syscall per call): the tiny-Produce round trip of
``bench/produce_requests.py --records 1 --value 100`` spent 15 % of the broker's samples in the writer's
``sendall`` (py-spy), 3.2 % on that ``getsockopt`` alone; it went from 136-173 to 119-137 us of CPU. Only while
the loop holds no other connection's ready event (libev's ``pendingcnt`` is 0; any other loop: never): under load
the writers send after the pass over the ready connections, as before. Sending from each reader in the middle of
that pass saved no CPU at 50 producers + 50 consumers and raised their median produce latency in 6 of 6 paired
runs (40-86 -> 63-123 ms on this 2-core machine, ``bench/many_clients.py``); with the load check the pairs came
out even (docs/performance.md, session 24).

Through TLS (SSL / SASL_SSL listeners; the server hands over the handshaken ``kbroker/security/tls_stream.py``
TlsStream) there is no ``sendfile``: the kernel cannot encrypt. A file region is read in ``TLS_FILE_CHUNK`` (256 KiB)
pieces with ``preadv`` into one buffer per region and ``sendall``-ed through the stream (OpenSSL cuts it into 16 KiB
records, sent in one syscall): at most 256 KiB of a region is in memory at a time, never the whole region, and the
read is from the page cache like sendfile's.

Receiving (hostile peers, issue 8): a frame of at most ``LARGE_FRAME`` bytes is read in ``RECV_CHUNK`` pieces into
the ``FrameReader`` (under 128 KiB per connection). A larger one goes into a ``PartialFrame``: whole up to
``EAGER_FRAME`` (1 MiB), else sized by what has arrived -- the buffered bytes plus what the socket holds (FIONREAD)
-- and grown as more arrives, every byte of it
reserved in the server's ``RequestMemory`` (``queued.max.request.bytes``) until the request has been handled; when
the budget is spent the connection stops reading until another request releases memory. A request must arrive whole
within ``socket.request.receive.timeout.ms`` of its first byte, and a connection with nothing happening for
``connections.max.idle.ms`` is closed: ``timed_out``, polled by the server (see ``kbroker/server/limits.py``).

Quotas (KIP-219; ``kbroker/quota``, ``RequestContext.throttle``): after its handler returned, a request's handler
time (less the time it sat parked) is recorded with the request quota (``request_percentage``; the controller's
requests -- Kafka's ClusterAction APIs -- and follower fetches are exempt), the response's ``throttle_time_ms``
becomes the largest of what the handler wrote and ``ctx.throttle_ms``, the response is queued at once, and then the
connection reads nothing -- neither the socket nor requests the client already pipelined -- for ``ctx.throttle_ms``
(a throttled acks=0 Produce, which has no response, is muted the same). Muted time counts neither for
socket.request.receive.timeout.ms nor for connections.max.idle.ms. Without quotas (``services.quotas is None``) all
of this is one attribute test per request, and with no request quota anywhere one ``enabled()`` call.
Deviation: Kafka delays the response itself for clients older than KIP-219 (Produce < v6, Fetch < v8, ...); here
every version gets its response at once and is muted after it -- the client is held to its quota all the same, it
only learns the throttle earlier.

Request metrics (``services.stats``, ``kbroker/server/stats.py`` RequestStats; None = not counted): each request
is counted by API and version and its seven intervals recorded (Kafka's RequestMetrics, in ms) when its response has
been written to the socket -- the reader at once for a direct send (*response queue* and *send* then ~0), the
writer greenlet every response of a ``sendall`` batch after it -- or,
without a response (acks=0), when its handler returns. ``arrived``: the recv that completed the frame, or, for a
frame that was already buffered behind earlier requests (pipelined), the end of the request before it (the moment
this connection could take it; Kafka does not read a muted channel either). *queue*: arrived -> handler called
(header and body decoding included); *local*: the handler's time less *remote*, the time it sat parked (an
acks=all wait for followers, a long-poll Fetch, a JoinGroup: Kafka's purgatory); *throttle*: the quota throttle
asked (the mute that follows the response); *response queue*: handler returned -> the writer took the response
(it waits for the writer greenlet to run and for the responses ahead of it to be sent); *send*: taken -> written
(its whole ``sendall`` batch); *total*: arrived -> written. A Fetch counts under ``Fetch`` and under
``FetchConsumer`` or ``FetchFollower``, as in Kafka. The cost: four clock reads and ~2.5 us of CPU per request
(bench/metrics_overhead.py). SASL frames before authentication and an ApiVersions answered UNSUPPORTED_VERSION are
not counted.
"""
import copy
import errno
import fcntl
import logging
import os
import struct
import termios
import time
import socket as _socket
import ssl
from dataclasses import replace

import gevent
import gevent.ssl
from gevent.event import Event
from gevent.socket import wait_write

from kbroker.errors import UNSUPPORTED_VERSION
from kbroker.protocol.apis import APIS
from kbroker.protocol.framing import MIN_REQUEST_SIZE, FrameError, FrameReader, frame
from kbroker.protocol.headers import decode_request_header, encode_response_header, peek_request_header
from kbroker.protocol.schema import ElementLimitError, SchemaError, Writer
from kbroker.security.tls_stream import TlsStream
from kbroker.server.context import ClientIdentity, RequestContext
from kbroker.server.limits import RequestMemory, ServerLimits
from kbroker.timeslice import TimeSlice

log = logging.getLogger(__name__)
request_log = logging.getLogger("kafka.request.logger")   # Kafka's name (config/logging.properties)

RECV_CHUNK = 64 * 1024
# Frames needing more than this are received straight into their own buffer (a PartialFrame)...
LARGE_FRAME = 64 * 1024
# ... allocated whole when at most this big (producers' default max.request.size is 1 MiB: the common large request,
# received with no copies -- growing those from 64 KiB cost 2x the receive path's CPU), else at this size or what
# is already readable, then doubled as bytes arrive. So a frame that stalls holds at most 1 MiB (+ what it sent).
EAGER_FRAME = 1024 * 1024
_FIONREAD_ARG = bytes(4)
# A full PartialFrame waits for more with a recv of at most this much, then grows for it and what else is readable.
GROW_PROBE = 4096
# Queued response bytes (file regions excluded: they are not in memory) above which the reader waits for the writer.
MAX_QUEUED_BYTES = 4 * 1024 * 1024
# File regions through TLS go out in pieces of this size: 16 TLS records per piece, so the per-piece cost (a preadv
# and a Python-level sendall) is small next to the encryption; one piece per sending connection in memory.
TLS_FILE_CHUNK = 256 * 1024


# Response chunks held in memory; anything else queued is a file region (``.fileno()``, ``.position``, ``.size``).
_IN_MEMORY = (bytes, bytearray, memoryview)

_SSL_SOCKETS = (ssl.SSLSocket, gevent.ssl.SSLSocket, TlsStream)


# The controller's requests (Kafka's ClusterAction APIs: LeaderAndIsr, StopReplica, UpdateMetadata,
# ControlledShutdown, WriteTxnMarkers): exempt from the request quota, as Kafka's sendResponseExemptThrottle.
QUOTA_EXEMPT_APIS = frozenset((4, 5, 6, 7, 27))


def _send_some(raw, pieces, flags):
    """One non-blocking ``send`` of ``pieces`` (bytes-likes) joined; None when all went, else the unsent tail."""
    data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    try:
        sent = raw.send(data, flags)
    except BlockingIOError:
        sent = 0
    return None if sent == len(data) else memoryview(data)[sent:]


class CloseConnection(Exception):
    """Raised by a handler (or the dispatcher) to drop the connection without a response."""


def _request_stats(requests, api_key, req):
    """The RequestStats entries a request counts in: its API's, and for a Fetch also FetchConsumer or
    FetchFollower (a follower names its replica id: replica_id, or replica_state in v15+)."""
    if api_key != 1:
        return (requests.api(api_key),)
    state = req.get("replica_state")
    replica = state.get("replica_id", -1) if state is not None else req.get("replica_id", -1)
    return requests.api(1), requests.named("FetchFollower" if replica >= 0 else "FetchConsumer")


class _Done:
    """A handled request's times (monotonic seconds), queued behind its response in ``Connection._out``; the
    writer calls ``record(now)`` once the response is written (module docstring: request metrics)."""

    __slots__ = ("stats", "version", "arrived", "began", "handled", "parked", "throttle_ms")

    def __init__(self, stats, version, arrived, began, handled, parked, throttle_ms):
        self.stats = stats
        self.version = version
        self.arrived = arrived
        self.began = began
        self.handled = handled
        self.parked = parked
        self.throttle_ms = throttle_ms

    def record(self, now, picked=None):
        """``now``: the response is written; ``picked``: the writer took it from the queue (None: no response)."""
        if picked is None:
            picked = now
        remote = self.parked * 1000.0
        total = (now - self.arrived) * 1000.0
        queue = (self.began - self.arrived) * 1000.0
        local = max(0.0, (self.handled - self.began) * 1000.0 - remote)
        response_queue = max(0.0, (picked - self.handled) * 1000.0)
        send = (now - picked) * 1000.0
        for s in self.stats:
            s.record(self.version, now, total, queue, local, remote, self.throttle_ms, response_queue, send)


class Connection:
    def __init__(self, sock, address, services, router, listener, max_request_size=None, limits=None, memory=None,
                 identity=None, authenticator=None):
        """``services``: the broker's Services (kbroker/server/context.py), handed to every handler;
        ``identity``: the ClientIdentity the server built on accept (default: ``listener`` named after its
        protocol, as when listener.security.protocol.map does not list it); ``limits``: a ServerLimits (default:
        Kafka's defaults with ``max_request_size``); ``memory``: the server's RequestMemory shared by all
        connections (default: one of this connection's own); ``authenticator``: a SASL listener's
        ``kbroker/security/authenticator.py`` Authenticator, which sees every frame until it is complete."""
        if limits is None:
            limits = ServerLimits(max_request_size=max_request_size or 104857600)
        if identity is None:
            identity = ClientIdentity.accepted(listener, None, address)
        self.sock = sock
        self.address = address
        self.services = services
        self.identity = identity
        self.router = router
        self.listener = listener
        self.limits = limits
        self.memory = memory if memory is not None else RequestMemory(limits.request_memory)
        self.reader = FrameReader(limits.max_request_size)
        self.authenticator = authenticator
        self.tls = isinstance(sock, _SSL_SOCKETS)   # no sendfile through TLS
        # The non-blocking socket under gevent's (module docstring: direct send); None: always the writer.
        self._raw = None if self.tls else getattr(sock, "_sock", None)
        self._loop = gevent.get_hub().loop   # its pendingcnt: other connections' events waiting (direct send)
        if authenticator is not None:   # frames before authentication: sasl.server.max.receive.size at most
            self.reader.max_size = min(limits.max_request_size, authenticator.max_receive_size)
        self._dispatching = False
        self.closing = False
        self.last_request = time.monotonic()
        self.last_active = self.last_request   # last byte received, response sent, or request finished
        self.frame_started = None              # when the first byte of the request being received came
        self._sending = False
        self._out = []            # queued wire chunks: bytes-like or file regions, in response order
        self._out_bytes = 0
        self._out_ready = Event()
        self._drained = Event()
        self._drained.set()
        # Services is frozen: its quotas are read once (tests' stand-ins for Services may have none).
        self._quotas = getattr(services, "quotas", None)
        self._muted_until = 0.0   # monotonic time until which nothing is read (a quota's throttle, KIP-219)
        self._stats = getattr(services, "stats", None)   # request metrics (module docstring); None = not counted
        self._closed = Event()    # set by close(): ends a mute early
        self._writer = gevent.spawn(self._write_loop)
        try:
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        except OSError:
            pass

    # ------------------------------------------------------------------------------------------------- loop
    def serve(self):
        sock, reader = self.sock, self.reader
        arrived = time.monotonic()   # when the next frame could be taken (module docstring: request metrics)
        try:
            while not self.closing:
                if self._muted_until:
                    self._stay_muted()
                    arrived = self.last_active
                    continue
                try:
                    payload = reader.next_frame()
                except FrameError as e:
                    log.warning("closing %s: %s", self._peer(), e)
                    return
                charge = 0
                if payload is None:
                    need = reader.needed()
                    if need > LARGE_FRAME and reader.pending() >= 4:
                        try:
                            payload, charge = self._read_large(reader)
                        except FrameError as e:
                            log.warning("closing %s: %s", self._peer(), e)
                            return
                        if payload is None:
                            return
                        arrived = time.monotonic()
                    else:
                        data = sock.recv(RECV_CHUNK)
                        if not data:
                            return
                        now = time.monotonic()
                        self.last_active = now
                        if self.frame_started is None:
                            self.frame_started = now
                        reader.feed(data)
                        arrived = now
                        continue
                self.frame_started = None
                self._dispatching = True
                self.last_request = time.monotonic()
                try:
                    self.dispatch(payload, arrived)
                finally:
                    payload = None
                    self._dispatching = False
                    self.last_active = arrived = time.monotonic()
                    if charge:
                        self.memory.release(charge)
                if self._out_bytes > MAX_QUEUED_BYTES:
                    self._drained.wait()
                # pipelined bytes already buffered start the next request's clock now, not while we were busy
                self.frame_started = time.monotonic() if reader.pending() else None
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
        return self._dispatching or bool(self._out) or self._sending

    def timed_out(self, now):
        """Why this connection must be closed at ``now`` (monotonic), or None: a request that started arriving more
        than socket.request.receive.timeout.ms ago, or nothing received, sent or handled for
        connections.max.idle.ms. Time spent handling a request counts for neither."""
        if self.closing or self._dispatching or self._muted_until:
            return None
        started = self.frame_started
        limits = self.limits
        if started is not None:
            if now - started > limits.receive_timeout_s:
                return ("request not received whole within %d ms of its first byte (socket.request.receive."
                        "timeout.ms)" % (limits.receive_timeout_s * 1000))
            return None
        if limits.idle_s is not None and now - self.last_active > limits.idle_s:
            return "idle for more than %d ms (connections.max.idle.ms)" % (limits.idle_s * 1000)
        return None

    def _stay_muted(self):
        """Read nothing until the throttle asked for the last request has passed (or the connection closes); the
        receive timeout of requests already buffered and the idle clock start again afterwards."""
        left = self._muted_until - time.monotonic()
        if left > 0:
            self._closed.wait(left)
        self._muted_until = 0.0
        now = time.monotonic()
        self.last_active = now
        self.frame_started = now if self.reader.pending() else None

    def _finish(self, drain_seconds=10.0):
        """Let the writer send what is queued (bounded: a peer that stopped reading is not waited for), close."""
        self.closing = True
        self._out_ready.set()
        if not self._writer.dead:
            self._writer.join(drain_seconds)
        self.close()

    def _readable(self):
        """Bytes waiting in the socket's receive queue (FIONREAD): what a buffer may be sized for right away."""
        try:
            n = struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.FIONREAD, _FIONREAD_ARG))[0]
        except OSError:
            return 0
        # TLS: the kernel holds ciphertext (a little more than the plaintext it carries); bytes OpenSSL has
        # already decrypted are pending in the SSL object.
        return n + self.sock.pending() if self.tls else n

    def _reserve(self, n, size):
        """Reserve ``n`` bytes of request memory for a ``size``-byte request, waiting at most until its receive
        deadline (socket.request.receive.timeout.ms after its first byte); False = give up and close."""
        started = self.frame_started if self.frame_started is not None else time.monotonic()
        left = started + self.limits.receive_timeout_s - time.monotonic()
        if self.memory.reserve(n, max(0.0, left)):
            return True
        if not self.closing:
            log.warning("closing %s: no request memory for its %d-byte request within socket.request.receive."
                        "timeout.ms (queued.max.request.bytes: %d of %d bytes in use)", self._peer(), size,
                        self.memory.used, self.memory.capacity)
        return False

    def _read_large(self, reader):
        """Receive the frame whose size prefix is buffered into a PartialFrame grown as bytes arrive.
        Returns (payload memoryview, bytes of request memory to release after handling), or (None, 0)."""
        size = reader.frame_size()
        # A frame of at most EAGER_FRAME is allocated whole whatever is readable: no FIONREAD ioctl for it (one
        # syscall saved per produce request of the common <= 1 MiB size).
        want = size if size <= EAGER_FRAME else min(size, max(EAGER_FRAME, reader.pending() - 4 + self._readable()))
        if not self._reserve(want, size):
            return None, 0
        charge = want
        ok = False
        try:
            frame = reader.take_large_frame(want)  # capacity == want: what is buffered is <= pending - 4
            recv_into = self.sock.recv_into
            while frame.filled < size:
                if frame.filled == frame.capacity:
                    # Grow only for bytes that are here: a peer that stops sending holds what it sent, no more.
                    # Waiting is a small recv through the socket itself, so a close by the sweeper wakes it.
                    early = b""
                    if not self._readable():
                        early = self.sock.recv(min(GROW_PROBE, size - frame.filled))  # never past this frame
                    if self._readable() == 0 and not early:
                        return None, 0           # the peer closed
                    grown = frame.next_capacity(len(early) + self._readable())
                    if not self._reserve(grown - frame.capacity, size):
                        return None, 0
                    charge = grown  # the buffer grows in place: it is all the request holds
                    frame.grow(grown)
                    if early:
                        frame.room()[:len(early)] = early
                        frame.filled += len(early)
                        continue
                n = recv_into(frame.room())
                if not n:
                    return None, 0
                frame.filled += n
                self.last_active = time.monotonic()
            ok = True
            return frame.payload(), charge
        finally:
            if not ok:  # closed, timed out or failed: the reservation goes back
                self.memory.release(charge)

    def dispatch(self, payload, arrived=None):
        """Handle one request frame; ``arrived``: when it could be taken (monotonic; request metrics)."""
        if self.authenticator is not None and not self.authenticator.complete and not self._sasl_step(payload):
            return
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
        max_elements = self.limits.max_elements
        # Long arrays (> 1,024 elements) are decoded and encoded in time slices (issue 8; protocol/schema.py).
        pause = TimeSlice().tick
        try:
            header, pos = decode_request_header(payload, api.request_header_version(version), max_elements)
            req = api.decode_request(version, payload, pos, max_elements, pause)
        except ElementLimitError as e:
            raise CloseConnection("%s v%d request refused: %s (request.max.elements=%d)"
                                  % (api.name, version, e, max_elements))
        except SchemaError as e:
            raise CloseConnection("malformed %s v%d request: %s" % (api.name, version, e))
        except Exception as e:  # noqa: BLE001 - any decode failure is bad input: close, never crash the loop
            log.warning("closing %s: %s v%d request failed to decode: %r", self._peer(), api.name, version, e)
            raise CloseConnection("undecodable %s v%d request" % (api.name, version))
        ctx = RequestContext(self.identity, self.services, api_key, version, corr, header.client_id, self)
        # The request log (kafka.request.logger at DEBUG; off by default): one cached level check when off.
        logged_from = time.monotonic() if request_log.isEnabledFor(logging.DEBUG) else None
        quotas = self._quotas
        stats = self._stats
        if stats is not None:
            began = time.monotonic()
            if arrived is None:
                arrived = began
        if quotas is None or not quotas.request.enabled():
            resp = h.fn(ctx, req)
        else:
            started = time.perf_counter()
            resp = h.fn(ctx, req)
            if not ctx.quota_exempt and api_key not in QUOTA_EXEMPT_APIS:
                # Kafka's request_percentage unit: handler seconds x 100 (per second of the quota window).
                spent = max(0.0, time.perf_counter() - started - ctx.parked_s) * 100.0
                ctx.throttle(quotas.request.record(self.identity, header.client_id, spent))
        throttle_ms = ctx.throttle_ms
        if logged_from is not None:
            self._log_request(api, version, corr, header.client_id, logged_from, ctx.parked_s, throttle_ms)
        done = None
        if stats is not None:
            done = _Done(_request_stats(stats.requests, api_key, req), version, arrived, began, time.monotonic(),
                         ctx.parked_s, throttle_ms)
        if resp is None:
            if throttle_ms:
                self._muted_until = time.monotonic() + throttle_ms / 1000.0
            if done is not None:
                done.record(done.handled)
            return
        if throttle_ms and resp.get("throttle_time_ms", 0) < throttle_ms:
            resp["throttle_time_ms"] = throttle_ms      # versions without the field do not encode it
        w = Writer()
        w.buf += encode_response_header(api.response_header_version(version), corr)
        api.encode_response(version, resp, w, pause)
        if self.send(w):
            if done is not None:
                done.record(self.last_active)
        elif done is not None:
            self._out.append(done)    # recorded by the writer once the response is written
        if throttle_ms:
            self._muted_until = time.monotonic() + throttle_ms / 1000.0

    def _sasl_step(self, payload):
        """Hand a frame to the SASL authenticator; True when it is a request to serve as usual (ApiVersions)."""
        auth = self.authenticator
        verdict = auth.receive(payload)
        if verdict.close and auth.failed and auth.failure_delay_s:
            gevent.sleep(auth.failure_delay_s)   # connection.failed.authentication.delay.ms (KIP-306)
        if verdict.reply is not None:
            self.send(verdict.reply)
        if verdict.close:
            if verdict.reply is not None:
                self._linger()
            raise CloseConnection(verdict.close)
        # v0 raw tokens may be shorter than a request header; once authenticated, requests get the full size.
        self.reader.min_size = 0 if auth.raw else MIN_REQUEST_SIZE
        if auth.complete:
            self.reader.max_size = self.limits.max_request_size
            self.identity = replace(self.identity, principal=auth.principal)
        return verdict.dispatch

    def _linger(self, seconds=1.0):
        """Before closing after a final answer (a SASL failure): let the writer send it, then wait -- at most
        ``seconds`` -- for the peer to close first, reading and dropping what it still sends. A client that read
        the answer closes at once; closing first sends a FIN (or, with unread bytes, a RST) that some clients see
        before the answer (kafka-python 3 then reports a lost connection instead of the broker's message)."""
        self._drained.wait(seconds)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                with gevent.Timeout(max(0.0, deadline - time.monotonic()), False):
                    if not self.sock.recv(RECV_CHUNK):
                        return
        except OSError:
            pass

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
        """Send one response (size prefix + chunks): straight to the socket when nothing is ahead of it, no
        request is buffered behind it and the loop has nothing else ready (module docstring: direct send), else
        queued for the writer greenlet. True when it was written whole here."""
        chunks = w.chunks()
        if (self._raw is not None and not self._out and not self._sending and not self.reader.pending()
                and not getattr(self._loop, "pendingcnt", 1)):
            if len(chunks) == 1 and isinstance(chunks[0], bytearray):
                rest = self._send_now([frame(len(chunks[0])) + chunks[0]])
            else:
                rest = self._send_now([frame(w.size())] + chunks)
            if rest is None:
                self.last_active = time.monotonic()
                return True
            chunks = rest
        else:
            chunks.insert(0, frame(w.size()))
        out = self._out
        for c in chunks:
            out.append(c)
            if isinstance(c, _IN_MEMORY):
                self._out_bytes += len(c)
        self._drained.clear()
        self._out_ready.set()
        return False

    def _send_now(self, chunks):
        """Write ``chunks`` (bytes-likes and file regions) without waiting: bytes with one ``send`` each run of
        them (MSG_MORE before a region, as the writer does), regions with one ``sendfile``. None when all of it
        went out, else what the socket did not take (a byte tail, a region's rest, the chunks after) for the
        writer."""
        raw = self._raw
        pending = []
        for i, c in enumerate(chunks):
            if isinstance(c, _IN_MEMORY):
                pending.append(c)
                continue
            if c.size == 0:
                continue
            if pending:
                tail = _send_some(raw, pending, _socket.MSG_MORE)
                pending = []
                if tail is not None:
                    return [tail] + chunks[i:]
            try:
                sent = os.sendfile(raw.fileno(), c.fileno(), c.position, c.size)
            except BlockingIOError:
                sent = -1
            if sent == 0:
                # The segment shrank under us (truncation): the frame can't be completed honestly.
                raise CloseConnection("segment file shorter than the fetch response promised")
            if sent < c.size:
                rest = copy.copy(c)     # the same file (and its owner: a SpilledRegion's spill file)
                rest.position += max(sent, 0)
                rest.size -= max(sent, 0)
                return [rest] + chunks[i + 1:]
        if pending:
            tail = _send_some(raw, pending, 0)
            if tail is not None:
                return [tail]
        return None

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
                picked = time.monotonic() if self._stats is not None else None
                self._out_bytes = 0
                self._sending = True
                pending = []
                done = None
                for c in out:
                    if isinstance(c, _IN_MEMORY):
                        pending.append(c)
                    elif type(c) is _Done:
                        if done is None:
                            done = []
                        done.append(c)
                    else:
                        if pending:
                            # MSG_MORE: the bytes before a file region (a response's header, a partition's entry
                            # up to its records) go out in the region's first segment, not as a packet of their
                            # own. Without it a 6-partition Fetch answer cost ~5 extra loopback packets, each a
                            # softirq delivery and a wakeup of the client (py-spy: 15 % of the broker's consume
                            # samples on those sends; 1 KB consume 0.52 -> 0.44 CPU s/GB, docs/performance.md).
                            # An empty region would send nothing to push them: those go unflagged, and so does
                            # everything on TLS (its sendall takes no flags; the region goes through it too).
                            if not self.tls and c.size > 0:
                                sock.sendall(b"".join(pending), _socket.MSG_MORE)
                            else:
                                sock.sendall(b"".join(pending))
                            pending = []
                        self._sendfile(c)
                if pending:
                    sock.sendall(pending[0] if len(pending) == 1 else b"".join(pending))
                if done is not None:
                    now = time.monotonic()
                    for d in done:
                        d.record(now, picked)
                self._sending = False
                self.last_active = time.monotonic()
        except (CloseConnection, ConnectionError, OSError) as e:
            if not isinstance(e, OSError) or getattr(e, "errno", None) not in (errno.ECONNRESET, errno.EPIPE,
                                                                              errno.EBADF):
                log.info("closing %s while writing: %s", self._peer(), e)
            self._sending = False
            self._drained.set()
            self.close()

    def _sendfile(self, region):
        if self.tls:
            self._send_region_tls(region)
            return
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

    def _send_region_tls(self, region):
        """A file region through the SSL socket, TLS_FILE_CHUNK bytes at a time (module docstring)."""
        fd = region.fileno()
        offset, remaining = region.position, region.size
        buf = memoryview(bytearray(min(TLS_FILE_CHUNK, remaining)))
        sendall = self.sock.sendall
        while remaining > 0:
            n = os.preadv(fd, [buf[:remaining]] if remaining < len(buf) else [buf], offset)
            if n == 0:
                # The segment shrank under us (truncation): the frame can't be completed honestly.
                raise CloseConnection("segment file shorter than the fetch response promised")
            sendall(buf[:n])
            offset += n
            remaining -= n

    def _log_request(self, api, version, corr, client_id, began, parked_s, throttle_ms):
        """One kafka-request.log line, Kafka's "Completed request" layout; times in ms from the handler's call to
        its return (remoteTime: parked waiting for followers / data / a rebalance; throttleTime: the quota's)."""
        total = (time.monotonic() - began) * 1000.0
        ident = self.identity
        request_log.debug("Completed request:{api_key=%d,api_version=%d,correlation_id=%d,client_id=%s} (%s) from "
                          "connection %s;totalTime:%.3f,localTime:%.3f,remoteTime:%.3f,throttleTime:%d,"
                          "securityProtocol:%s,principal:%s", api.key, version, corr, client_id, api.name,
                          self._peer(), total, max(0.0, total - parked_s * 1000.0), parked_s * 1000.0, throttle_ms,
                          getattr(ident, "security_protocol", "PLAINTEXT"), getattr(ident, "principal", "?"))

    def _peer(self):
        return "%s:%s" % (self.address[0], self.address[1]) if self.address else "?"

    def close(self):
        self.closing = True
        self._closed.set()
        self._out_ready.set()
        try:
            self.sock.close()
        except OSError:
            pass
