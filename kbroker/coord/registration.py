"""Broker registration in the coordination tree: ``/brokers/ids/<id>``, generated broker ids, the cluster id.

``register_broker`` creates the ephemeral ``/brokers/ids/<id>`` with Kafka's JSON (BrokerIdZNode, version 4:
endpoints, listener_security_protocol_map, host/port of the PLAINTEXT endpoint, jmx_port, timestamp, rack).

A node that is already there belongs either to us (a create retried after a connection loss had in fact been
applied: its ``ephemeral_owner`` is our session id) -- then the registration is refreshed with a set -- or to
another session. The usual other session is this very broker's previous incarnation, restarted faster than
ZooKeeper expires sessions: its node vanishes within ``zookeeper.session.timeout.ms``. So we poll (every 100 ms)
until the node is gone, bounded by the session timeout plus a 5 s margin for the server's expiry tick, then create
it; only a node that outlives that bound (a second live broker with the same id) is an error: NodeExistsError
whose message says so.

The returned ``BrokerRegistrar`` re-registers whenever the backend establishes a new session after an expiry
(the server deleted our ephemeral node with the old session) -- through ``backend.on_reconnected`` -- and
``deregister()`` stops that and deletes our node.

Broker epoch (KIP-380): the czxid of our ``/brokers/ids/<id>`` node, read right after each (re)registration
(``epoch``; -1 before the first). Every registration is a new node, so every incarnation -- a restart, or a new
session after an expiry -- has a larger epoch; the controller stamps it on each request to this broker and the
broker refuses requests carrying another one (STALE_BROKER_EPOCH). ``wait_epoch(timeout)`` answers the epoch once
no registration is under way: between our create and the read of its czxid the controller may already know the new
epoch (it reads our node when its watch fires) and a request stamped with it must not be refused for that.

``generate_broker_id``: Kafka's scheme: a blind set of ``/brokers/seqid`` returns the node's new data version
``v`` (1, 2, ...), the id is ``reserved.broker.max.id + v`` (1001 first with the default 1000).
``cluster_id``: ``/cluster/id`` created once (``{"version":"1","id":"<22 chars>"}``), read by everybody after.
"""

import logging
import time

import gevent
from gevent.event import Event

from .errors import CoordinationError, NodeExistsError, NoNodeError
from .metadata_store import TopicStore
from .znodes import BrokerIdZNode, BrokerSequenceIdZNode

log = logging.getLogger("kbroker.coord.registration")

POLL_S = 0.1
STALE_MARGIN_MS = 5000
DEFAULT_SESSION_TIMEOUT_MS = 18000   # Kafka >= 2.5's zookeeper.session.timeout.ms; embedded backends have none


def generate_broker_id(backend, reserved_max):
    """A cluster-unique id above ``reserved.broker.max.id`` from ``/brokers/seqid``'s data version."""
    path = BrokerSequenceIdZNode.path()
    try:
        stat = backend.set(path, b"")
    except NoNodeError:
        backend.ensure_path(path)
        stat = backend.set(path, b"")
    return int(reserved_max) + stat.version


def cluster_id(backend):
    """The cluster id (``/cluster/id``), generated and stored by the first broker to ask."""
    return TopicStore(backend).cluster_id()


class BrokerRegistrar:
    """Keeps ``/brokers/ids/<id>`` registered for the backend's current session."""

    def __init__(self, backend, broker_id, endpoints, protocol_map, rack=None, jmx_port=-1, wait_timeout_ms=None):
        self.backend = backend
        self.broker_id = int(broker_id)
        self.path = BrokerIdZNode.path(self.broker_id)
        self.endpoints = [(n, h, int(p)) for n, h, p in endpoints]
        self.protocol_map = dict(protocol_map)
        self.rack = rack
        self.jmx_port = jmx_port
        if wait_timeout_ms is None:
            wait_timeout_ms = getattr(backend, "session_timeout_ms", DEFAULT_SESSION_TIMEOUT_MS) + STALE_MARGIN_MS
        self.wait_timeout_ms = wait_timeout_ms
        self.active = False
        self.epoch = -1
        self._settled = Event()   # set while no registration is under way (epoch is the current one or -1)
        self._settled.set()

    def data(self):
        return BrokerIdZNode.encode(self.endpoints, self.protocol_map, rack=self.rack, jmx_port=self.jmx_port)

    def register(self):
        """Create the node for the current session, waiting out a stale one; learn its czxid (``epoch``).
        Returns the session id used."""
        self._settled.clear()
        try:
            session = self._register()
        finally:
            self._settled.set()
        log.info("registered broker %d at %s (session 0x%x, broker epoch %d)", self.broker_id, self.path, session,
                 self.epoch)
        return session

    def _register(self):
        deadline = time.monotonic() + self.wait_timeout_ms / 1000.0
        waited_for = None
        while True:
            session = self.backend.session_id
            try:
                self.backend.create(self.path, self.data(), ephemeral=True, makepath=True)
                created = True
            except NodeExistsError:
                created = False
            stat = self.backend.exists(self.path)
            if stat is None:
                continue  # vanished between create and exists (our new session already gone?): again at once
            if stat.ephemeral_owner == session:
                if not created:
                    self.backend.set(self.path, self.data())  # ours already (a retried create had been applied)
                self.epoch = stat.czxid
                return session
            if waited_for != stat.ephemeral_owner:
                waited_for = stat.ephemeral_owner
                log.warning("%s is held by session 0x%x (not ours, 0x%x): waiting up to %d ms for it to expire",
                            self.path, stat.ephemeral_owner, session, self.wait_timeout_ms)
            if time.monotonic() >= deadline:
                raise NodeExistsError(
                    "A broker is already registered on %s (session 0x%x) and it did not go away within %d ms: "
                    "another live broker is using broker id %d" % (
                        self.path, stat.ephemeral_owner, self.wait_timeout_ms, self.broker_id), self.path)
            gevent.sleep(POLL_S)

    def wait_epoch(self, timeout):
        """This broker's epoch, after waiting up to ``timeout`` s for a registration under way; -1 when none."""
        self._settled.wait(timeout)
        return self.epoch

    def start(self):
        self.register()
        self.active = True
        self.backend.on_session_expired(self._expired)
        self.backend.on_reconnected(self._reregister)
        return self

    def _expired(self):
        # Our node went with the session: no epoch is ours until the re-registration in the next session.
        if self.active:
            self._settled.clear()

    def _reregister(self):
        if not self.active:
            return
        try:
            self.register()
        except CoordinationError:
            log.exception("re-registering broker %d after a new ZooKeeper session failed", self.broker_id)

    def deregister(self):
        """Stop re-registering and delete our node (if it is still ours; not tried while the backend has no
        connection, see ``connected`` in zk.py: then the node goes with the session)."""
        self.active = False
        self.backend.remove_session_hook(self._reregister)
        self.backend.remove_session_hook(self._expired)
        self._settled.set()
        if not getattr(self.backend, "connected", True):
            # Cut off from ZooKeeper (the whole ensemble down): asking would only wait out the operation timeout.
            # The node is ephemeral: it goes with our session, which ends when the backend stops (or expires).
            log.warning("not connected to ZooKeeper: %s is left to vanish with our session", self.path)
            return
        try:
            stat = self.backend.exists(self.path)
            if stat is not None and stat.ephemeral_owner == self.backend.session_id:
                self.backend.delete(self.path, version=stat.version)
        except CoordinationError:
            pass


def register_broker(backend, broker_id, endpoints, protocol_map, rack=None, jmx_port=-1, wait_timeout_ms=None):
    """Register ``/brokers/ids/<broker_id>`` now and again after every new session; returns the BrokerRegistrar.

    ``endpoints``: [(listener name, host, port)] (advertised); ``protocol_map``: {listener name: security protocol}.
    """
    return BrokerRegistrar(backend, broker_id, endpoints, protocol_map, rack, jmx_port, wait_timeout_ms).start()
