"""The network layer: one gevent StreamServer per listener, each connection in its own greenlet.

Graceful shutdown (SIGTERM): stop accepting, close idle connections, let busy ones finish the request in flight
(bounded by ``grace_seconds``), then the broker flushes logs and writes the clean-shutdown marker. A request parked
in a wait (a long-poll Fetch, up to its max_wait_ms) is woken through ``wake`` and, seeing ``Connection.closing``,
answers at once with what it has -- otherwise every idle consumer would hold the shutdown for the whole grace period.

Limits (``kbroker/server/limits.py`` has the table): every accepted connection is counted in ``ConnectionQuotas``
before its greenlet starts; one over its IP's cap is closed at once, and at ``max.connections`` the listeners stop
accepting (``_Listener.full``) until a connection ends. One sweeper greenlet closes connections whose request is
arriving too slowly or that have been idle too long (``Connection.timed_out``), every ``sweep_interval``.

Socket buffers: ``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes`` set explicitly are applied to every
accepted connection (``apply_socket_buffers``); left at their default, nothing is set and Linux autotunes them
(``BrokerConfig.socket_buffer_sizes`` says why).

TLS (SSL and SASL_SSL listeners): the accepted socket is wrapped and handshaken in the connection's own greenlet
(``kbroker/security/tls.py`` ListenerTls.accept), within ``socket.request.receive.timeout.ms`` -- a peer that never
completes the handshake is dropped; a plaintext Kafka request fails the handshake and is closed unanswered. The
connection's ClientIdentity carries the client certificate's principal (``User:ANONYMOUS`` without one); a SASL_SSL
listener's authenticator replaces it after SASL. A TLS listener missing from ``tls`` serves nobody (fail closed).
"""
import dataclasses
import logging
import socket
import time

import gevent
from gevent.server import StreamServer

from kbroker.security.tls import HandshakeFailed
from kbroker.server.connection import Connection
from kbroker.server.context import ClientIdentity
from kbroker.server.limits import ConnectionQuotas, RequestMemory, ServerLimits, client_ip

log = logging.getLogger(__name__)

TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def apply_socket_buffers(sock, sizes):
    """setsockopt(SOL_SOCKET, SO_SNDBUF / SO_RCVBUF) for each {"SO_SNDBUF": bytes, ...} entry. Linux doubles the
    value (bookkeeping overhead) and caps it at net.core.wmem_max / rmem_max; a failure is logged, not raised: the
    connection still works with the OS's buffer."""
    for opt, size in sizes.items():
        try:
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, opt), size)
        except OSError as e:
            log.warning("cannot set %s=%d on an accepted connection: %s", opt, size, e)


class _Listener(StreamServer):
    """A StreamServer that admits connections through the server's ConnectionQuotas."""

    def __init__(self, address, handle, name, quotas, **kw):
        super().__init__(address, handle, **kw)
        self.name = name
        self.quotas = quotas

    def full(self):
        # Checked by gevent's accept loop before every accept: True stops accepting until ``resume``.
        return self.quotas.full(self.name)

    def do_handle(self, sock, address):
        ip = client_ip(address)
        if not self.quotas.admit(ip):
            log.info("rejected connection from %s: it has the maximum of %d connections (max.connections.per.ip"
                     "%s)", ip, self.quotas.ip_limit(ip),
                     ".overrides" if ip in self.quotas.limits.ip_overrides else "")
            sock.close()
            return
        try:
            super().do_handle(sock, address)
        except BaseException:
            self.quotas.release(ip)
            raise

    def resume(self):
        if self.started and not self.full():
            self.start_accepting()


class KafkaServer:
    def __init__(self, services, router, listeners, max_request_size=None, backlog=1024, limits=None,
                 protected_listener=None, sasl=None, tls=None):
        """``services``: the broker's Services (kbroker/server/context.py), which every request's context carries
        (None in tests that serve only ApiVersions). listeners: [(name, host, port)]; port 0 picks a free port (see
        ``bound_ports``). ``limits``: a ServerLimits; by default read from ``services.config`` (Kafka's defaults
        without one). ``protected_listener``: exempt from max.connections; by default the inter-broker listener
        when there are several listeners. ``sasl``: {listener name: ``kbroker/security/authenticator.py``
        ListenerSasl} for the SASL_PLAINTEXT / SASL_SSL listeners; a SASL listener missing from it serves nobody
        (fail closed). ``tls``: {listener name: ``kbroker/security/tls.py`` ListenerTls} for the SSL / SASL_SSL
        listeners, likewise."""
        self.services = services
        self.router = router
        self.listeners = listeners
        config = getattr(services, "config", None)
        if limits is None:
            limits = ServerLimits.from_config(config) if config is not None else \
                ServerLimits(max_request_size=max_request_size or 104857600)
        if protected_listener is None and config is not None and len(listeners) > 1:
            protected_listener = config.inter_broker_listener
        self.limits = limits
        self.max_request_size = limits.max_request_size
        self.backlog = backlog
        self.servers = []
        self.connections = set()
        self.quotas = ConnectionQuotas(limits, protected_listener)
        self.memory = RequestMemory(limits.request_memory)
        self.socket_buffers = getattr(config, "socket_buffer_sizes", None) or {}
        # Each accepted connection's ClientIdentity names its listener's security protocol.
        self.protocol_map = getattr(config, "listener_security_protocol_map", None) or {}
        self._sweeper = None
        self.sasl = dict(sasl or {})
        self.tls = dict(tls or {})

    def start(self):
        for name, host, port in self.listeners:
            srv = _Listener((host or "0.0.0.0", port), self._handler(name), name, self.quotas, backlog=self.backlog)
            srv.reuse_addr = 1
            srv.start()
            self.quotas.on_release.append(srv.resume)
            self.servers.append((name, srv))
            log.info("listening on %s %s:%d", name, host or "0.0.0.0", srv.server_port)
        self._sweeper = gevent.spawn(self._sweep)

    def bound_ports(self):
        return {name: srv.server_port for name, srv in self.servers}

    def _handler(self, listener_name):
        def handle(sock, address):
            if self.socket_buffers:
                apply_socket_buffers(sock, self.socket_buffers)
            identity = ClientIdentity.accepted(listener_name, self.protocol_map, address)
            if identity.security_protocol in TLS_PROTOCOLS:
                sock, identity = self._tls_accept(sock, address, identity)
                if sock is None:
                    self.quotas.release(client_ip(address))
                    return
            sasl = self.sasl.get(listener_name)
            if sasl is None and identity.security_protocol.startswith("SASL_"):
                log.error("closing %s: listener %s is %s but has no SASL settings", address, listener_name,
                          identity.security_protocol)
                sock.close()
                self.quotas.release(client_ip(address))
                return
            conn = Connection(sock, address, self.services, self.router, listener_name, limits=self.limits,
                              memory=self.memory, identity=identity,
                              authenticator=sasl.new_authenticator() if sasl is not None else None)
            self.connections.add(conn)
            try:
                if self.quotas.over():
                    self._close_least_active(listener_name)
                conn.serve()
            finally:
                self.connections.discard(conn)
                self.quotas.release(client_ip(address))
        return handle

    def _tls_accept(self, sock, address, identity):
        """(TlsStream, identity with the certificate's principal), or (None, identity) when the handshake failed
        (logged; the socket is closed). The log line names the principal the connection's identity carries."""
        listener_tls = self.tls.get(identity.listener)
        if listener_tls is None:
            log.error("closing %s: listener %s is %s but has no TLS settings", address, identity.listener,
                      identity.security_protocol)
            sock.close()
            return None, identity
        try:
            ssl_sock, principal = listener_tls.accept(sock, self.limits.receive_timeout_s)
        except HandshakeFailed as e:
            log.info("closing %s:%s on listener %s: %s", identity.host, identity.port, identity.listener, e)
            return None, identity
        identity = dataclasses.replace(identity, principal=principal)
        log.info("TLS connection from %s:%s on listener %s: %s %s, principal %s", identity.host, identity.port,
                 identity.listener, ssl_sock.version(), ssl_sock.cipher()[0], identity.principal)
        return ssl_sock, identity

    def _close_least_active(self, protected):
        """Over max.connections through the exempt listener: close the least recently active connection of
        another listener (Kafka's rule), so the total comes back to the cap."""
        others = [c for c in self.connections if c.listener != protected and not c.closing]
        if others:
            victim = min(others, key=lambda c: c.last_active)
            log.info("closing %s: max.connections (%d) exceeded by an inter-broker connection",
                     victim._peer(), self.limits.max_connections)
            victim.close()

    def _sweep(self):
        """Close connections past socket.request.receive.timeout.ms or connections.max.idle.ms."""
        interval = self.limits.sweep_interval()
        while True:
            gevent.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                why = conn.timed_out(now)
                if why is not None:
                    log.info("closing %s: %s", conn._peer(), why)
                    conn.close()

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
        if self._sweeper is not None:
            self._sweeper.kill()
        for _, srv in self.servers:
            srv.stop(timeout=1)
