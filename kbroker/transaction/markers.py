"""Writing a transaction's COMMIT/ABORT markers: WriteTxnMarkers (27) to the leader of every partition of the
transaction, retried until each partition answered (Kafka's TransactionMarkerChannelManager and its completion
handler).

``TxnMarkerChannel(leader_of, send, scheduler)``:
* ``leader_of(topic, p)`` -> the leader's broker id; None when the partition is unknown to the metadata cache
  (deleted: Kafka skips it, the marker has nowhere to go); -1 while it has no live leader (retried).
* ``send(broker_id, request_body) -> response dict`` one WriteTxnMarkers round trip (v1 shape, see
  kbroker/protocol/apis/write_txn_markers.py); raises on a transport failure. The broker's is ``BrokerLinks.send``
  below (in-process for itself).
* ``scheduler``: ``call_later(ms, fn, *args)`` (kbroker/coordinator/timers.py).

Loops over a transaction's partitions run in 20 ms time slices (``kbroker/timeslice.py``).

``add(pending)`` takes one transaction's ``PendingMarkers``: its partitions are grouped by leader and queued on
that broker's sender. One greenlet per destination drains its queue into ONE request (every queued transaction's
markers, as Kafka batches per broker), sends it and settles each partition by its error code:

    0                                    written: removed from ``pending.remaining`` (``on_written``)
    TRANSACTION_COORDINATOR_FENCED (52),  this coordinator was deposed or the producer moved on: stop, nothing
    INVALID_PRODUCER_EPOCH (47)          more is written for the transaction (``on_abandoned``)
    UNSUPPORTED_FOR_MESSAGE_FORMAT (43),  cannot ever be written there: counted as done, as Kafka does
    UNSUPPORTED_VERSION (35)
    anything else (NOT_LEADER 6, UNKNOWN_TOPIC 3, NOT_ENOUGH_REPLICAS 19/20, REQUEST_TIMED_OUT 7, a lost
    connection...)                      retried after ``retry_backoff_ms`` (100, Kafka's retry.backoff.ms), routed
                                         again to whoever leads the partition by then

When ``remaining`` is empty ``on_complete(pending)`` runs once (the coordinator then logs CompleteCommit /
CompleteAbort). ``cancel_partition(index)`` cancels every pending transaction of a ``__transaction_state``
partition (leadership moved: the next coordinator resends them); a cancelled one is never called back again.
"""
import logging
import socket
import struct

import gevent
from gevent.queue import Queue

from kbroker.timeslice import TimeSlice

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
VERSION = 1
RETRY_BACKOFF_MS = 100
MAX_MARKERS_PER_REQUEST = 1000        # transactions per request: bounds one request's size and encode time

WRITTEN_AS_DONE = frozenset([43, 35])
FENCED = frozenset([52, 47])


class PendingMarkers:
    """One transaction's markers still to write; ``listener`` gets ``on_written(p, tp)``, ``on_complete(p)``,
    ``on_abandoned(p, code)``."""
    __slots__ = ("txn_partition", "transactional_id", "coordinator_epoch", "producer_id", "producer_epoch",
                 "commit", "remaining", "cancelled", "listener", "completed")

    def __init__(self, txn_partition, transactional_id, coordinator_epoch, producer_id, producer_epoch, commit,
                 partitions, listener):
        self.txn_partition = txn_partition
        self.transactional_id = transactional_id
        self.coordinator_epoch = coordinator_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.commit = commit
        self.remaining = set(partitions)
        self.cancelled = False
        self.completed = False
        self.listener = listener

    def __repr__(self):
        return "PendingMarkers(%r, pid=%d, epoch=%d, %s, %d left)" % (
            self.transactional_id, self.producer_id, self.producer_epoch, "COMMIT" if self.commit else "ABORT",
            len(self.remaining))


class _Destination:
    """One broker's queue of (PendingMarkers, [tp]) and the greenlet sending them."""

    def __init__(self, channel, broker_id):
        self.channel = channel
        self.broker_id = broker_id
        self.queue = Queue()
        self.greenlet = gevent.spawn(self._run)

    def _run(self):
        while True:
            items = [self.queue.get()]
            while not self.queue.empty() and len(items) < MAX_MARKERS_PER_REQUEST:
                items.append(self.queue.get_nowait())
            try:
                self.channel._send_batch(self.broker_id, items)
            except Exception:  # noqa: BLE001 - a bug must not end this destination's sender: retry them later
                log.exception("sending markers to broker %d", self.broker_id)
                for pending, tps in items:
                    self.channel._retry_later(pending, tps)


class TxnMarkerChannel:
    def __init__(self, leader_of, send, scheduler, retry_backoff_ms=RETRY_BACKOFF_MS):
        self.leader_of = leader_of
        self.send = send
        self.scheduler = scheduler
        self.retry_backoff_ms = retry_backoff_ms
        self._destinations = {}
        self._pending = set()
        self.stopped = False

    def in_flight(self):
        return [p for p in self._pending if not p.cancelled]

    def add(self, pending):
        self._pending.add(pending)
        if not pending.remaining:
            self._maybe_complete(pending)
            return
        self._route(pending, list(pending.remaining))

    def cancel_partition(self, index):
        for p in list(self._pending):
            if p.txn_partition == index:
                p.cancelled = True
                self._pending.discard(p)

    def shutdown(self):
        self.stopped = True
        for p in self._pending:
            p.cancelled = True
        self._pending.clear()
        for d in self._destinations.values():
            d.greenlet.kill(block=False)
        self._destinations.clear()

    # ------------------------------------------------------------------------------------------- routing
    def _route(self, pending, tps):
        if pending.cancelled or self.stopped:
            return
        by_broker, retry = {}, []
        tick = TimeSlice().tick            # a transaction may hold 100,000 partitions: ~1 us each here
        for tp in tps:
            tick()
            if tp not in pending.remaining:
                continue
            leader = self.leader_of(tp[0], tp[1])
            if leader is None:
                log.info("no metadata for %s-%d (deleted?): its %s marker for %r is skipped", tp[0], tp[1],
                         "COMMIT" if pending.commit else "ABORT", pending.transactional_id)
                self._written(pending, tp)
            elif leader < 0:
                retry.append(tp)
            else:
                by_broker.setdefault(leader, []).append(tp)
        for broker_id, group in by_broker.items():
            dest = self._destinations.get(broker_id)
            if dest is None:
                dest = self._destinations[broker_id] = _Destination(self, broker_id)
            dest.queue.put((pending, group))
        if retry:
            self._retry_later(pending, retry)
        self._maybe_complete(pending)

    def _retry_later(self, pending, tps):
        self.scheduler.call_later(self.retry_backoff_ms, self._route, pending, tps)

    # ------------------------------------------------------------------------------------------- sending
    @staticmethod
    def request_body(items):
        """The WriteTxnMarkers request for ``[(PendingMarkers, [tp])]`` (one marker entry per transaction)."""
        markers = []
        tick = TimeSlice().tick
        for pending, tps in items:
            topics = {}
            for t, p in tps:
                tick()
                topics.setdefault(t, []).append(p)
            markers.append({"producer_id": pending.producer_id, "producer_epoch": pending.producer_epoch,
                            "transaction_result": pending.commit,
                            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                            "coordinator_epoch": pending.coordinator_epoch})
        return {"markers": markers}

    def _send_batch(self, broker_id, items):
        merged = {}
        for pending, tps in items:
            if not pending.cancelled:
                merged.setdefault(id(pending), (pending, set()))[1].update(tp for tp in tps
                                                                           if tp in pending.remaining)
        live = [(p, sorted(tps)) for p, tps in merged.values() if tps]
        if not live:
            return
        try:
            resp = self.send(broker_id, self.request_body(live))
        except Exception as e:  # noqa: BLE001 - any transport failure: route again after the backoff
            log.warning("WriteTxnMarkers to broker %d failed: %s; retrying in %d ms", broker_id, e,
                        self.retry_backoff_ms)
            for pending, tps in live:
                self._retry_later(pending, tps)
            return
        self._settle(live, resp)

    def _settle(self, live, resp):
        # Results in request order (one marker entry per transaction); the producer id double-checks the pairing.
        results = resp.get("markers") or []
        tick = TimeSlice().tick
        for i, (pending, tps) in enumerate(live):
            codes = {}
            r = results[i] if i < len(results) else None
            if r is not None and r["producer_id"] == pending.producer_id:
                for t in r["topics"]:
                    for pr in t["partitions"]:
                        tick()
                        codes[(t["name"], pr["partition_index"])] = pr["error_code"]
            retry = []
            for tp in tps:
                tick()
                if pending.cancelled:
                    break
                code = codes.get(tp, -1)
                if code == 0 or code in WRITTEN_AS_DONE:
                    self._written(pending, tp)
                elif code in FENCED:
                    log.info("markers of %r abandoned: %s-%d answered %d", pending.transactional_id, tp[0], tp[1],
                             code)
                    pending.cancelled = True
                    self._pending.discard(pending)
                    pending.listener.on_abandoned(pending, code)
                else:
                    retry.append(tp)
            if pending.cancelled:
                continue
            if retry:
                log.debug("retrying %d markers of %r", len(retry), pending.transactional_id)
                self._retry_later(pending, retry)
            self._maybe_complete(pending)

    def _written(self, pending, tp):
        if tp in pending.remaining:
            pending.remaining.discard(tp)
            pending.listener.on_written(pending, tp)

    def _maybe_complete(self, pending):
        if not pending.remaining and not pending.cancelled and not pending.completed:
            pending.completed = True
            self._pending.discard(pending)
            pending.listener.on_complete(pending)


# ------------------------------------------------------------------------------------------ the transport
_SIZE = struct.Struct(">i")
MAX_RESPONSE = 64 << 20


class BrokerLinks:
    """WriteTxnMarkers round trips to brokers: in-process for this broker (``local(api_key, version, body)``:
    the handlers' local dispatcher), else one connection per destination on its inter-broker endpoint
    (``address_of(broker_id) -> (host, port) | None``, secured by ``security`` -- a ChannelSecurity -- as the
    controller's channel is). A connection is used by one greenlet at a time (the destination's sender) and is
    dropped on any error; the next round trip reconnects."""

    def __init__(self, local_broker_id, local, address_of, security=None, timeout_s=30.0,
                 client_id="kbroker-txn-coordinator"):
        self.local_broker_id = local_broker_id
        self.local = local
        self.address_of = address_of
        self.security = security
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._socks = {}
        self._correlation = 0

    def send(self, broker_id, body):
        if broker_id == self.local_broker_id:
            return self.local(WRITE_TXN_MARKERS, VERSION, body)
        try:
            return self._roundtrip(broker_id, body)
        except Exception:
            self._drop(broker_id)
            raise

    def close(self):
        for bid in list(self._socks):
            self._drop(bid)

    def _drop(self, broker_id):
        sock = self._socks.pop(broker_id, None)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _connect(self, broker_id):
        from gevent import socket as gsocket
        from kbroker.security.client_channel import secure
        addr = self.address_of(broker_id)
        if addr is None:
            raise IOError("broker %d has no known endpoint" % broker_id)
        sock = gsocket.create_connection(addr, timeout=self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return secure(sock, addr[0], self.security, self.timeout_s, self.client_id)

    def _roundtrip(self, broker_id, body):
        from kbroker.protocol.apis import APIS
        from kbroker.protocol.headers import decode_response_header, encode_request_header
        api = APIS[WRITE_TXN_MARKERS]
        sock = self._socks.get(broker_id)
        if sock is None:
            sock = self._socks[broker_id] = self._connect(broker_id)
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        corr = self._correlation
        header = encode_request_header(api.request_header_version(VERSION), WRITE_TXN_MARKERS, VERSION, corr,
                                       self.client_id)
        payload = bytes(header) + api.encode_request(VERSION, body).getvalue()
        sock.sendall(_SIZE.pack(len(payload)) + payload)
        (size,) = _SIZE.unpack(_recv_exact(sock, 4))
        if size < 4 or size > MAX_RESPONSE:
            raise IOError("bad response size %d" % size)
        frame = _recv_exact(sock, size)
        got, pos = decode_response_header(frame, api.response_header_version(VERSION))
        if got != corr:
            raise IOError("correlation id %d in response, expected %d" % (got, corr))
        return api.decode_response(VERSION, frame, pos)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise IOError("connection closed by broker")
        buf += chunk
    return bytes(buf)
