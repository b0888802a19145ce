"""What one client may cost the broker: connection counts, request memory, time, and decode work.

``ServerLimits`` gathers the keys (Kafka's where Kafka has one; defaults in ``kbroker/config/keys.py``):

=====================================  ==========  ==================================================================
key                                    default     effect (what the client sees)
=====================================  ==========  ==================================================================
``max.connections``                    2^31-1      broker-wide; at the cap the listeners stop accepting and new
                                                   connections wait in the kernel's accept backlog until one closes
                                                   (Kafka's behaviour). With several listeners the inter-broker one
                                                   is exempt and the least recently active other connection is
                                                   closed instead.
``max.connections.per.ip``             2^31-1      per client address: the connection over it is accepted and closed
``max.connections.per.ip.overrides``   ""          at once, nothing sent (Kafka: TooManyConnectionsException).
``connections.max.idle.ms``            600000      a connection with no request arriving, in flight or being answered
                                                   for this long is closed; < 0 never.
``socket.request.receive.timeout.ms``  30000       kbroker's: a request must arrive whole within this long of its
                                                   first byte, else the connection is closed (slow-loris clients).
``queued.max.request.bytes``           -1          bytes of large requests (> 64 KiB) being received or handled, all
                                                   connections together (``RequestMemory``); beyond it those
                                                   connections stop being read (TCP backpressure) until memory is
                                                   released. <= 0 means max(256 MiB, socket.request.max.bytes).
``socket.request.max.bytes``           104857600   a larger size prefix closes the connection (``FrameReader``).
``request.max.elements``               100000      kbroker's: values one request decodes into (``schema.py``); more
                                                   closes the connection, like any request that fails to parse.
``metadata.request.max.topics``        10000       kbroker's: distinct topics one Metadata request may name (a null
                                                   list is not limited); more closes the connection
                                                   (``kbroker/handlers/metadata.py``).
=====================================  ==========  ==================================================================

Requests of at most 64 KiB never wait for ``RequestMemory``: they are read into the connection's own buffer (at most
128 KiB per connection), so heartbeats, ApiVersions and Metadata keep flowing while large produce requests queue.
"""
import logging
import time

from gevent.event import Event

log = logging.getLogger(__name__)

INT_MAX = 2147483647
# queued.max.request.bytes <= 0 (Kafka: unbounded) -> this many bytes, or socket.request.max.bytes if larger
DEFAULT_REQUEST_MEMORY = 256 * 1024 * 1024


class ServerLimits:
    """The values of the limit keys, in the units the server uses (seconds, bytes)."""

    __slots__ = ("max_request_size", "max_connections", "max_connections_per_ip", "ip_overrides", "idle_s",
                 "receive_timeout_s", "request_memory", "max_elements")

    def __init__(self, max_request_size=104857600, max_connections=INT_MAX, max_connections_per_ip=INT_MAX,
                 ip_overrides=None, idle_ms=600000, receive_timeout_ms=30000, request_memory=None,
                 max_elements=100000):
        self.max_request_size = max_request_size
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.ip_overrides = dict(ip_overrides or {})
        self.idle_s = None if idle_ms is None or idle_ms < 0 else idle_ms / 1000.0
        self.receive_timeout_s = receive_timeout_ms / 1000.0
        self.request_memory = request_memory or max(DEFAULT_REQUEST_MEMORY, max_request_size)
        self.max_elements = max_elements

    @classmethod
    def from_config(cls, cfg):
        return cls(max_request_size=cfg["socket.request.max.bytes"],
                   max_connections=cfg["max.connections"],
                   max_connections_per_ip=cfg["max.connections.per.ip"],
                   ip_overrides=cfg.max_connections_per_ip_overrides,
                   idle_ms=cfg["connections.max.idle.ms"],
                   receive_timeout_ms=cfg["socket.request.receive.timeout.ms"],
                   request_memory=cfg.request_memory_bytes,
                   max_elements=cfg["request.max.elements"])

    def sweep_interval(self):
        """How often the server checks the two timeouts: a quarter of the shorter one, within 10 ms..1 s (a
        connection outlives its timeout by at most that much)."""
        shortest = self.receive_timeout_s if self.idle_s is None else min(self.idle_s, self.receive_timeout_s)
        return min(1.0, max(0.01, shortest / 4.0))


def client_ip(address):
    """The address a per-IP limit applies to: the peer's IP, IPv4-mapped IPv6 (dual-stack sockets) unmapped."""
    ip = address[0] if address else "?"
    if ip.startswith("::ffff:") and "." in ip:
        ip = ip[7:]
    return ip


class ConnectionQuotas:
    """Connection counts per listener and per client IP against ``max.connections`` and the per-IP caps.

    ``admit`` is called by the accept loop before a connection's greenlet exists (so counts are exact even when
    100 connections are accepted in one loop iteration); ``release`` when its greenlet ends.
    """

    def __init__(self, limits, protected_listener=None):
        self.limits = limits
        self.protected = protected_listener  # exempt from max.connections (the inter-broker listener, if several)
        self.total = 0
        self.per_ip = {}
        self.on_release = []                 # callables: resume listeners that stopped accepting

    def ip_limit(self, ip):
        return self.limits.ip_overrides.get(ip, self.limits.max_connections_per_ip)

    def admit(self, ip):
        """Count a new connection from ``ip``; False (nothing counted) when that IP is at its cap."""
        n = self.per_ip.get(ip, 0)
        if n >= self.ip_limit(ip):
            return False
        self.per_ip[ip] = n + 1
        self.total += 1
        return True

    def release(self, ip):
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)
        self.total -= 1
        if self.total < self.limits.max_connections:
            for fn in self.on_release:
                fn()

    def full(self, listener):
        """True when ``listener`` must stop accepting (broker-wide cap reached and the listener is not exempt)."""
        return listener != self.protected and self.total >= self.limits.max_connections

    def over(self):
        """More connections than max.connections (only an exempt listener can cause it)."""
        return self.total > self.limits.max_connections


class RequestMemory:
    """The broker-wide budget for large request buffers (``queued.max.request.bytes``), like Kafka's
    ``SimpleMemoryPool`` in its non-strict mode: a reservation is granted while anything is left, even if it then
    overshoots by its own size, so a request larger than what is free still gets through once others finish, and
    the budget can never deadlock with one request holding part of it. ``used`` may thus reach ``capacity`` plus one
    reservation (at most one grown frame buffer, <= socket.request.max.bytes).
    """

    def __init__(self, capacity):
        self.capacity = capacity
        self.used = 0
        self.peak = 0
        self._freed = Event()

    def try_reserve(self, n):
        if self.used >= self.capacity:
            return False
        self.used += n
        if self.used > self.peak:
            self.peak = self.used
        return True

    def reserve(self, n, timeout):
        """Reserve ``n`` bytes, waiting up to ``timeout`` seconds for releases; False if it never fit."""
        deadline = time.monotonic() + timeout
        while True:
            if self.try_reserve(n):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._freed.clear()  # no switch since the failed try: a release cannot fall between the two
            self._freed.wait(remaining)

    def release(self, n):
        if n:
            self.used -= n
            self._freed.set()
