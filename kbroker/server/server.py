"""The network layer: one gevent StreamServer per listener, each connection in its own greenlet.

Graceful shutdown (SIGTERM): stop accepting, close idle connections, let busy ones finish the request in flight
(bounded by ``grace_seconds``), then the broker flushes logs and writes the clean-shutdown marker. A request parked
in a wait (a long-poll Fetch, up to its max_wait_ms) is woken through ``wake`` and, seeing ``Connection.closing``,
answers at once with what it has -- otherwise every idle consumer would hold the shutdown for the whole grace period.
"""
import logging
import time

import gevent
from gevent.server import StreamServer

from kbroker.server.connection import Connection

log = logging.getLogger(__name__)


class KafkaServer:
    def __init__(self, broker, router, listeners, max_request_size, backlog=1024):
        """listeners: [(name, host, port)]; port 0 picks a free port (see ``bound_ports``)."""
        self.broker = broker
        self.router = router
        self.listeners = listeners
        self.max_request_size = max_request_size
        self.backlog = backlog
        self.servers = []
        self.connections = set()

    def start(self):
        for name, host, port in self.listeners:
            srv = StreamServer((host or "0.0.0.0", port), self._handler(name), backlog=self.backlog)
            srv.reuse_addr = 1
            srv.start()
            self.servers.append((name, srv))
            log.info("listening on %s %s:%d", name, host or "0.0.0.0", srv.server_port)

    def bound_ports(self):
        return {name: srv.server_port for name, srv in self.servers}

    def _handler(self, listener_name):
        def handle(sock, address):
            conn = Connection(sock, address, self.broker, self.router, listener_name, self.max_request_size)
            self.connections.add(conn)
            try:
                conn.serve()
            finally:
                self.connections.discard(conn)
        return handle

    def drain(self, max_seconds=2.0, quiet_seconds=0.2):
        """Keep answering for a moment before closing: stop accepting, then wait (at most ``max_seconds``) until
        no connection has received a request for ``quiet_seconds``.

        After a controlled shutdown this broker answers produce/fetch with NOT_LEADER_OR_FOLLOWER, and clients move
        to the new leaders. Closing a connection with requests still in flight instead turns them into transport
        errors -- for an idempotent producer "possibly persisted" messages, which can make librdkafka declare its
        sequence state unrecoverable when the new leader has not got them. Kafka's clients see the same only on
        a crash, not on a clean shutdown; so do ours.
        """
        for _, srv in self.servers:
            srv.close()
        deadline = time.monotonic() + max_seconds
        while time.monotonic() < deadline:
            now = time.monotonic()
            if all(now - c.last_request >= quiet_seconds for c in self.connections):
                return
            gevent.sleep(0.02)

    def stop(self, grace_seconds=10.0, wake=None):
        """``wake()``: called once every connection is marked closing, to end waits parked in handlers."""
        for _, srv in self.servers:
            srv.close()  # stop accepting; existing connection greenlets keep running
        for conn in list(self.connections):
            conn.closing = True
            if not conn.busy:
                conn.close()
        if wake is not None:
            wake()
        with gevent.Timeout(grace_seconds, False):
            while any(c.busy for c in self.connections):
                gevent.sleep(0.01)
        for conn in list(self.connections):
            conn.close()
        for _, srv in self.servers:
            srv.stop(timeout=1)
