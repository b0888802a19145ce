"""Controller -> broker requests: one sender greenlet and queue per destination broker.

``ControllerChannel(local_broker_id, local_handler)``: ``add_broker(id, host, port)`` starts a sender for a broker,
``remove_broker(id)`` stops it (queued requests are dropped: the broker is gone or the controller resigned),
``send(id, api_key, body, callback)`` queues a request; ``callback(response_dict)`` runs in the sender greenlet
once the broker answered. A sender keeps up to ``IN_FLIGHT`` requests written and unanswered on its connection
(a broker answers one connection's requests in order, as Kafka's do): after a broker failure at 30,000
partitions the controller sends each survivor ~20 requests, and with one in flight (Kafka's RequestSendThread)
the survivor sat idle between them while the controller's own busy process got round to reading each answer and
writing the next -- the other survivor used 0.37 of a core and still fell 0.6 s behind (docs/performance.md,
session 20). On any failure the connection is closed and every unanswered request is written again, in order,
after a backoff of 0.1 s doubling to 3 s, until answered or the broker is removed; so the order in which one
broker receives (and applies) the requests is the order they were queued, and each callback runs once, in that
order.

The controller's own broker is reached in-process: for ``local_broker_id`` the sender calls
``local_handler(api_key, version, body) -> response dict`` instead of using a socket (still from the sender
greenlet, never from the controller's event loop, so a handler may block).

Security: ``security_for(listener) -> kbroker/security/client_channel.py ChannelSecurity`` says how to reach a
broker's endpoint of ``listener`` (``add_broker``'s; the control-plane or inter-broker listener): a TLS handshake
with this broker's own client context for that listener, then SASL, before the first request (a failure is a
failed round trip: reconnect with backoff). Without it, plaintext.

Versions sent (``VERSIONS``; the cluster handlers serve them, kbroker/handlers/cluster.py): LeaderAndIsr v4,
UpdateMetadata v6, StopReplica v3 -- the newest ZooKeeper-mode shapes before topic ids (grouped by topic, flexible,
offline replicas, per-partition delete flag). No ApiVersions round trip: controller and brokers are one release.
"""
import logging
import socket
import struct
from collections import deque

import gevent
from gevent.queue import Queue

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import decode_response_header, encode_request_header
from kbroker.timeslice import TimeSlice

log = logging.getLogger("kbroker.controller.channel")

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
VERSIONS = {LEADER_AND_ISR: 4, STOP_REPLICA: 3, UPDATE_METADATA: 6}

_SIZE = struct.Struct(">i")
BACKOFF_MIN, BACKOFF_MAX = 0.1, 3.0
# Unanswered requests per broker connection (module docstring). The sender reads answers only between its writes,
# so a write may wait on a broker that waits for its answers to be read: a broker keeps reading requests until 4 MiB
# of answers are queued (server/connection.py MAX_QUEUED_BYTES), and 8 answers of at most ~90 KB (a request carries
# <= batch.MAX_ELEMENTS values: ~9,000 partitions, ~10 bytes each in a LeaderAndIsr answer) stay far below that.
IN_FLIGHT = 8
MAX_RESPONSE = 64 << 20  # controller responses are a few bytes per partition


def success_response(api_key, body):
    """The response a broker gives when every partition succeeded (used by fakes and as a shape reference)."""
    if api_key == UPDATE_METADATA:
        return {"error_code": 0}
    if api_key == LEADER_AND_ISR:
        return {"error_code": 0, "partition_errors": [
            {"topic_name": ts["topic_name"], "partition_index": ps["partition_index"], "error_code": 0}
            for ts in body["topic_states"] for ps in ts["partition_states"]]}
    if api_key == STOP_REPLICA:
        return {"error_code": 0, "partition_errors": [
            {"topic_name": ts["topic_name"], "partition_index": ps["partition_index"], "error_code": 0}
            for ts in body["topic_states"] for ps in ts["partition_states"]]}
    raise ValueError("not a controller request: api key %d" % api_key)


class _Sender:
    def __init__(self, channel, broker_id, host, port, listener=None):
        self.channel = channel
        self.broker_id = broker_id
        self.host, self.port = host, port
        self.listener = listener
        self.queue = Queue()
        self.sock = None
        self.correlation_id = 0
        self.stopped = False
        self.greenlet = gevent.spawn(self._run)

    def stop(self):
        self.stopped = True
        self._close()
        self.greenlet.kill(block=False)

    def _close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def _run(self):
        if self.broker_id == self.channel.local_broker_id and self.channel.local_handler is not None:
            self._run_local()
        else:
            self._run_remote()

    def _run_local(self):
        """The controller's own broker: each request handled in-process, one after another (a failing handler is
        retried with the same backoff as a connection)."""
        while not self.stopped:
            api_key, body, callback = self.queue.get()
            backoff = BACKOFF_MIN
            while not self.stopped:
                try:
                    resp = self.channel.local_handler(api_key, VERSIONS[api_key], body)
                    break
                except gevent.GreenletExit:
                    raise
                except Exception as e:  # noqa: BLE001 -- as a remote failure: retry after a backoff
                    log.warning("controller request %s to broker %d (in process) failed: %s; retrying in %.1fs",
                                APIS[api_key].name, self.broker_id, e, backoff)
                    gevent.sleep(backoff)
                    backoff = min(backoff * 2, BACKOFF_MAX)
            else:
                return
            self._answer(api_key, callback, resp)

    def _run_remote(self):
        # [api_key, body, callback, correlation id on this connection, or None: not written on it yet]
        inflight = deque()
        backoff = BACKOFF_MIN
        while not self.stopped:
            try:
                if not inflight:
                    inflight.append([*self.queue.get(), None])       # connect only when there is a request
                while len(inflight) < IN_FLIGHT and not self.queue.empty():
                    inflight.append([*self.queue.get(), None])
                if self.sock is None:
                    self.sock = self.channel.connect(self.host, self.port, self.listener)
                for entry in inflight:
                    if entry[3] is None:
                        entry[3] = self._write(entry[0], entry[1])
                api_key, _body, callback, corr = inflight[0]
                resp = self._read(api_key, corr)
                inflight.popleft()
                backoff = BACKOFF_MIN
            except gevent.GreenletExit:
                raise
            except Exception as e:  # noqa: BLE001 -- any failure: reconnect and write what is unanswered again
                self._close()
                for entry in inflight:
                    entry[3] = None
                if self.stopped:
                    return
                log.warning("controller request %s to broker %d (%s:%s) failed: %s; retrying in %.1fs",
                            APIS[inflight[0][0]].name if inflight else "-", self.broker_id, self.host, self.port,
                            e, backoff)
                gevent.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            self._answer(api_key, callback, resp)

    def _answer(self, api_key, callback, resp):
        if callback is not None:
            try:
                callback(resp)
            except Exception:
                log.exception("callback for %s to broker %d failed", APIS[api_key].name, self.broker_id)

    def _write(self, api_key, body):
        """Encode and write one request; returns its correlation id."""
        version = VERSIONS[api_key]
        # A request of 10,000 partitions takes ~0.1 s to encode and its answer ~30 ms to decode: both in time
        # slices, so the loop serves this broker's clients meanwhile (protocol/schema.py PAUSE_EVERY).
        pause = TimeSlice().tick
        api = APIS[api_key]
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        corr = self.correlation_id
        header = encode_request_header(api.request_header_version(version), api_key, version, corr,
                                       self.channel.client_id)
        payload = bytes(header) + api.encode_request(version, body, pause=pause).getvalue()
        self.sock.sendall(_SIZE.pack(len(payload)) + payload)
        return corr

    def _read(self, api_key, corr):
        """The answer to the oldest unanswered request (``api_key``, ``corr``): a broker answers in order."""
        version = VERSIONS[api_key]
        api = APIS[api_key]
        (size,) = _SIZE.unpack(self._recv_exact(4))
        if size < 4 or size > MAX_RESPONSE:
            raise IOError("bad response size %d" % size)
        frame = self._recv_exact(size)
        got, pos = decode_response_header(frame, api.response_header_version(version))
        if got != corr:
            raise IOError("correlation id %d in response, expected %d" % (got, corr))
        return api.decode_response(version, frame, pos, pause=TimeSlice().tick)

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise IOError("connection closed by broker")
            buf += chunk
        return bytes(buf)


class ControllerChannel:
    def __init__(self, local_broker_id=None, local_handler=None, client_id="kbroker-controller",
                 socket_timeout=30.0, security_for=None):
        self.local_broker_id = local_broker_id
        self.local_handler = local_handler
        self.client_id = client_id
        self.socket_timeout = socket_timeout
        self.security_for = security_for
        self._senders = {}

    def connect(self, host, port, listener):
        """A connected, secured socket to a broker's endpoint of ``listener`` (module docstring)."""
        from gevent import socket as gsocket
        from kbroker.security.client_channel import secure

        sock = gsocket.create_connection((host, port), timeout=self.socket_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        security = self.security_for(listener) if self.security_for is not None else None
        return secure(sock, host, security, self.socket_timeout, self.client_id)

    def brokers(self):
        return sorted(self._senders)

    def add_broker(self, broker_id, host, port, listener=None):
        cur = self._senders.get(broker_id)
        if cur is not None:
            if (cur.host, cur.port, cur.listener) == (host, port, listener):
                return
            cur.stop()
        self._senders[broker_id] = _Sender(self, broker_id, host, port, listener)

    def remove_broker(self, broker_id):
        s = self._senders.pop(broker_id, None)
        if s is not None:
            s.stop()

    def remove_all(self):
        for bid in list(self._senders):
            self.remove_broker(bid)

    def send(self, broker_id, api_key, body, callback=None):
        s = self._senders.get(broker_id)
        if s is None:
            log.info("dropping %s for broker %d: no connection (broker not live)", APIS[api_key].name, broker_id)
            return False
        s.queue.put((api_key, body, callback))
        return True
