"""ZooKeeper coordination backend: the CoordinationBackend interface over kazoo (the only module importing kazoo).

Connection. ``connect_string`` is Kafka's ``zookeeper.connect``: ``host:port[,host:port...][/chroot]``. With a
chroot, a short-lived client on the bare hosts creates the chroot path if it is missing (as Kafka does), then the
chrooted client is used for everything; every path this backend sees is relative to the chroot. The client uses
kazoo's ``SequentialGeventHandler`` (callbacks run one at a time in one greenlet), session timeout
``zookeeper.session.timeout.ms`` and reconnects forever; ``start()`` waits at most
``zookeeper.connection.timeout.ms`` for the first session and then raises a CoordinationError naming the connect
string.

Operations are retried on connection loss (and across a session expiry) with exponential backoff (0.1 s doubling
to 1 s) until ``operation_timeout_ms`` (default: the session timeout) has passed, then ConnectionLossError: a
broker cut off from the quorum gets an error instead of hanging forever -- also for a request made while no server
is reachable at all, which kazoo queues until a connection exists (each attempt waits at most the time left).
``connected`` says whether a server answers now; ``stop()`` returns within STOP_TIMEOUT_S even then. A retried ``create`` whose first attempt
was applied reports NodeExistsError, as with any ZooKeeper client; callers creating ephemerals compare
``ephemeral_owner`` with ``session_id`` (registration.py does). kazoo's exceptions become kbroker.coord.errors.
``create_many`` pipelines many creates (the controller's new partition states) instead of one round trip each.

Watches keep the interface's semantics: called once at registration (in the caller's greenlet), then after every
change (in kazoo's callback greenlet), persistent across reconnects and new sessions, and they survive the node
being deleted and re-created. Data watches are kazoo DataWatch (called when the node's mzxid changes); children
watches are our own loop over get_children/exists one-shot watches, re-armed on every reconnect, calling back when
the sorted child list or the parent's pzxid (the zxid of the last child created or deleted) differs from the last
one delivered ([] when the node is gone, which has no pzxid: absent and empty count as the same list). The pzxid
matters: a child deleted and created again between two reads (a broker restarted faster than the watch re-read
``/brokers/ids``: [1,2,3] -> [1,2] -> [1,2,3]) leaves the same list, and a watcher comparing lists only swallowed
both changes (issue 8: the controller never saw the bounce). A re-run after a reconnect that finds nothing changed
calls nothing. ``Watch.cancel()`` takes effect at the next event.

Security (Kafka's section 7.6; the ACL rule and the credentials are in zk_security.py). ``sasl``, a
ZkSaslCredentials, makes every session (the chroot-creating one too) log in with SASL DIGEST-MD5 before its first
request; ``start()`` then makes one round trip, so wrong credentials stop it at once with a CoordinationError naming
the user and where the credentials came from (kazoo reports CONNECTED before the SASL exchange ends, and ZooKeeper
answers a failed login with an AUTHFAILED reply and a closed connection: without the round trip a broker would start
and then find every operation refused); a login refused *later* (a server restarted with another JAAS file) loses
the session and a new one is tried every RELOGIN_BACKOFF_S until one succeeds, as Kafka's ZooKeeperClient
reinitializes after an auth failure (kazoo itself would stop connecting for good); meanwhile requests wait for it
(retried as connection losses within operation_timeout_ms). A connection dropped *during* the exchange with no reply
(a node restarting) is a connection loss with the session kept, not a refusal. ``secure_acls``
(``zookeeper.set.acl``) creates every znode with ``default_acls(True, path)`` -- also the chroot and the parents a
create makes on its way, each with its own path's ACL, which kazoo's ``makepath`` would not give (it copies the
leaf's ACL to every parent: a sensitive leaf would hide its world-readable parents) -- and requires ``sasl`` (Kafka:
"zookeeper.set.acl is true, but the verification of the JAAS login file failed"): without an authenticated identity
the creator-only ACLs would name nobody. Without ``secure_acls`` nodes are world-open, as Kafka creates them.
``get_acls`` / ``set_acls`` and ``set_default_acls`` (the migration tool's pipelined tree walk) exist on this
backend only; a ZooKeeper refusal (the node's ACL does not let this session do that) is NoAuthError.

Session hooks: ``on_session_expired(cb)`` runs ``cb()`` when the session is lost (ephemeral nodes are gone);
``on_reconnected(cb)`` runs ``cb()`` once a *new* session is established after an expiry (re-register ephemerals,
re-run the controller election). Both run in fresh greenlets, never inside kazoo's event greenlet, so they may make
blocking ZooKeeper calls. A reconnect within the same session (SUSPENDED -> CONNECTED) calls neither.
"""

import contextlib
import logging
import time

import gevent
import gevent.socket

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.gevent import SequentialGeventHandler
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry, RetryFailedError

from kazoo.security import ACL, Id

from .backend import CoordinationBackend, Watch, ZnodeStat, validate_path
from .errors import (
    AuthFailedError, BadVersionError, ConnectionLossError, CoordinationError, NoAuthError,
    NoChildrenForEphemeralsError, NodeExistsError, NoNodeError, NotEmptyError, SessionExpiredError,
)
from .zk_security import Acl, default_acls, sasl_options

log = logging.getLogger("kbroker.coord.zk")

# Wait between a login ZooKeeper refused after start() and the next session's attempt.
RELOGIN_BACKOFF_S = 1.0

# Longest wait for kazoo's stop() (its Close request, its greenlets). Connected, it takes milliseconds; with no server
# reachable it may never end (see stop()).
STOP_TIMEOUT_S = 3.0

# Sets per ZooKeeper multi transaction (set_many): ~150 bytes each (path + partition state JSON), so 1,000 stay far
# below jute.maxbuffer (1 MiB), and one transaction is one log record on the ensemble.
MULTI_SETS = 1000

_TRANSLATE = (
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kz.NoAuthError, NoAuthError),
    (kz.AuthFailedError, AuthFailedError),
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionLoss, ConnectionLossError),
    (kz.OperationTimeoutError, ConnectionLossError),
    (RetryFailedError, ConnectionLossError),
)


def split_connect_string(connect_string):
    """``"h1:2181,h2:2181/kafka/x"`` -> ``("h1:2181,h2:2181", "/kafka/x")``; chroot None when absent or ``/``."""
    s = (connect_string or "").strip()
    hosts, sep, tail = s.partition("/")
    if not hosts:
        raise CoordinationError("zookeeper.connect %r names no host" % connect_string)
    chroot = ("/" + tail).rstrip("/") if sep else ""
    if not chroot:
        return hosts, None
    try:
        validate_path(chroot)
    except ValueError as e:
        raise CoordinationError("zookeeper.connect %r: bad chroot: %s" % (connect_string, e)) from None
    return hosts, chroot


def _stat(st):
    return ZnodeStat(st.version, st.ctime, st.mtime, st.ephemeralOwner, st.czxid)


class _TlsGeventHandler(SequentialGeventHandler):
    """kazoo's gevent handler whose connections are TLS with the SSLContext it is given (zookeeper.ssl.*, built by
    the composition root), instead of the one kazoo would build itself from file names -- which also trusts the
    system's CA certificates and cannot read PKCS12 stores."""

    def __init__(self, ssl_context):
        super().__init__()
        self.ssl_context = ssl_context

    def create_connection(self, address, hostname=None, timeout=None, **_ignored):
        sock = gevent.socket.create_connection(address, timeout)
        try:
            conn = self.ssl_context.wrap_socket(sock, server_hostname=hostname or address[0])
        except BaseException:
            sock.close()
            raise
        conn.setsockopt(gevent.socket.IPPROTO_TCP, gevent.socket.TCP_NODELAY, 1)
        return conn


class _SerialSubmitClient(KazooClient):
    """kazoo's client with request submission serialised among greenlets.

    kazoo's ``_call`` queues a request and writes one wake-up byte to a socketpair the connection greenlet reads
    (one byte per request). Once that pair's buffer is full -- a few hundred requests pipelined before the
    connection greenlet next runs -- the write waits for the socket, and gevent lets one greenlet at a time wait on
    a socket: a second greenlet writing meanwhile gets ConcurrentObjectUseError, which kazoo answers with
    ConnectionClosedError ("Connection has been closed") although the session is fine, and its request stays
    queued without its byte, so the connection greenlet falls one request behind for each such failure (the
    requests behind them then wait for later traffic: a broker's ISR writes and re-reads went unanswered for
    minutes). Measured: 10 greenlets each pipelining 2,000 reads -- every one failed with "client is stopped";
    after this lock, none. Waiting for the lock is cooperative; the connection greenlet never takes it (kazoo
    submits its pings and session requests itself), so it always drains the pair.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._submit_lock = self.handler.lock_object()
        self._connection._authenticate_with_sasl = self._sasl_exchange(self._connection._authenticate_with_sasl)

    @staticmethod
    def _sasl_exchange(exchange):
        """kazoo reports a connection dropped in the middle of the SASL exchange as AuthFailedError, and after one it
        stops connecting for good (the session is lost). But ZooKeeper 3.5+ refuses a login with an AUTHFAILED
        reply (kazoo raises that one from the reply's error code, left as it is); a bare drop is a server going away
        -- a node restarting during a rolling restart, or not yet serving, closes the connection whatever arrives.
        Seen in CI: rolling a 3-node ensemble to enforced SASL cost a broker its session (controller resigned,
        CreateTopics answered "client is stopped"). As the Java client does, the drop is a connection loss: kazoo
        tries the next server with the same session."""
        def authenticate(host, timeout):
            try:
                return exchange(host, timeout)
            except kz.AuthFailedError as e:
                if isinstance(e.__cause__, kz.ConnectionDropped):
                    raise kz.ConnectionDropped("connection dropped during the SASL exchange with %s" % host) from e
                raise
        return authenticate

    def _call(self, request, async_object):
        with self._submit_lock:
            return super()._call(request, async_object)


def _kazoo_acls(acls):
    return [ACL(a.perms, Id(a.scheme, a.id)) for a in acls]


def _acls(kazoo_acls):
    return [Acl(a.perms, a.id.scheme, a.id.id) for a in kazoo_acls]


class ZooKeeperBackend(CoordinationBackend):
    def __init__(self, connect_string, session_timeout_ms=18000, connection_timeout_ms=None,
                 operation_timeout_ms=None, sasl=None, secure_acls=False, ssl_context=None, tls_client_auth=False):
        self.connect_string = connect_string.strip()
        self.sasl = sasl
        self.ssl_context = ssl_context
        self.tls_client_auth = bool(tls_client_auth)
        self.secure_acls = bool(secure_acls)
        self.hosts, self.chroot = split_connect_string(self.connect_string)
        self.session_timeout_ms = int(session_timeout_ms)
        self.connection_timeout_ms = int(connection_timeout_ms or session_timeout_ms)
        self.operation_timeout_ms = int(operation_timeout_ms or session_timeout_ms)
        self._client = None
        self._handler = None
        self._session_id = 0
        self._expired = False      # a session was lost and no new one is established yet
        self._relogin = False      # a refused login's client waits out RELOGIN_BACKOFF_S before its next session
        self._stopping = False
        self._expired_hooks = []
        self._reconnected_hooks = []
        self._child_watchers = []

    # -- lifecycle ------------------------------------------------------------------------------------------------

    @property
    def session_id(self):
        client = self._client
        if client is not None:
            cid = client.client_id
            if cid:
                return cid[0]
        return self._session_id

    @property
    def client(self):
        """The kazoo client (tests and diagnostics only; callers use the interface)."""
        return self._client

    def _new_client(self, hosts):
        # Connection retries: forever, 0.1 s doubling to 1 s (a broker keeps trying to reach the quorum).
        return _SerialSubmitClient(
            hosts=hosts,
            timeout=self.session_timeout_ms / 1000.0,
            handler=self._handler,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0,
                                        sleep_func=self._handler.sleep_func),
            command_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0,
                                     deadline=self.operation_timeout_ms / 1000.0,
                                     sleep_func=self._handler.sleep_func),
            sasl_options=sasl_options(self.sasl),
            use_ssl=self.ssl_context is not None,
        )

    def _start_client(self, client):
        try:
            client.start(timeout=self.connection_timeout_ms / 1000.0)
        except (Exception, self._handler.timeout_exception) as e:  # gevent.Timeout is a BaseException
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
            raise CoordinationError("could not connect to ZooKeeper at %s within %d ms (zookeeper.connection."
                                    "timeout.ms): %s" % (self.connect_string, self.connection_timeout_ms, e)) from None
        if self.sasl is not None:
            self._check_login(client)

    def _check_login(self, client):
        """One round trip after the SASL exchange (requests are sent only once it ended): a refused login is
        AuthFailedError here, not on the broker's first real operation. A connection lost meanwhile is retried like
        any operation (until operation_timeout_ms); a refusal is not retried."""
        try:
            self._retry(client, "exists", "/")
            return
        except kz.AuthFailedError:
            problem = ("ZooKeeper refused the SASL %s login of user %r (%s): wrong username or password, or no such "
                       "user in the ensemble's JAAS Server section" % (self.sasl.mechanism, self.sasl.username,
                                                                        self.sasl.source or "zookeeper SASL client"))
            error = AuthFailedError
        except (Exception, self._handler.timeout_exception) as e:
            problem = "no answer to the first request after the SASL login: %s" % (type(e).__name__,)
            error = CoordinationError
        with contextlib.suppress(Exception):
            client.stop()
            client.close()
        raise error("could not authenticate to ZooKeeper at %s: %s" % (self.connect_string, problem))

    def start(self):
        if self._client is not None:
            return self
        if self.secure_acls and self.sasl is None and not (self.ssl_context is not None and self.tls_client_auth):
            # Kafka's KafkaServer.initZkClient refuses the same way: creator-only ACLs need an authenticated creator.
            raise CoordinationError("zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at "
                                    "least zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and "
                                    "zookeeper.ssl.keystore.location was not present and the verification of the JAAS "
                                    "login file failed: no SASL credentials for ZooKeeper (a JAAS file given with "
                                    "-Djava.security.auth.login.config in KAFKA_OPTS, with a Client section)")
        self._handler = (SequentialGeventHandler() if self.ssl_context is None
                         else _TlsGeventHandler(self.ssl_context))
        if self.chroot:
            root = self._new_client(self.hosts)
            self._start_client(root)
            try:
                self._ensure(root, self.chroot)
            finally:
                with contextlib.suppress(Exception):
                    root.stop()
                    root.close()
        client = self._new_client(self.hosts + (self.chroot or ""))
        client.add_listener(self._on_state)
        self._stopping = False
        self._start_client(client)
        self._client = client
        self._session_id = self.session_id
        return self

    def stop(self):
        client, self._client = self._client, None
        if client is None:
            return
        self._stopping = True
        for cw in self._child_watchers:
            cw.watch.cancel()
        self._child_watchers = []
        # Bounded: kazoo's stop() first joins its callback greenlet, and with no server reachable that greenlet may
        # wait forever for an answer (a DataWatch re-reading its node after the connection dropped) -- a broker
        # stopped while the whole ensemble was down never exited. Past the bound the session is simply abandoned:
        # the ensemble expires it after zookeeper.session.timeout.ms, as it would a crashed broker's.
        stopped = False
        bound = STOP_TIMEOUT_S if client.connected else STOP_TIMEOUT_S / 3   # no Close can reach a server anyway
        with contextlib.suppress(Exception), gevent.Timeout(bound, False):
            client.stop()
            stopped = True
        if not stopped:
            log.warning("ZooKeeper client for %s did not stop within %.0f s (no server reachable); session 0x%x "
                        "abandoned", self.connect_string, bound, self._session_id)
        with contextlib.suppress(Exception), gevent.Timeout(STOP_TIMEOUT_S, False):
            client.close()
        self._session_id = 0

    # -- session hooks --------------------------------------------------------------------------------------------

    def on_session_expired(self, callback):
        self._expired_hooks.append(callback)
        return callback

    def on_reconnected(self, callback):
        self._reconnected_hooks.append(callback)
        return callback

    def remove_session_hook(self, callback):
        for hooks in (self._expired_hooks, self._reconnected_hooks):
            while callback in hooks:
                hooks.remove(callback)

    def _on_state(self, state):
        # Runs inside kazoo's connection greenlet: record and spawn, never block here.
        if self._stopping:
            return
        if state == KazooState.LOST:
            client = self._client
            if client is not None and client.client_state == KeeperState.AUTH_FAILED:
                # kazoo stops connecting after a refused login. Like Kafka's ZooKeeperClient (fail fast at startup,
                # later reinitialize the session after a backoff), start a new session until a login succeeds: a
                # member of the ensemble restarted with a wrong JAAS file must not cut this broker off for good.
                log.error("ZooKeeper at %s refused the SASL login of user %r; retrying with a new session",
                          self.connect_string, getattr(self.sasl, "username", None))
                self._relogin = True
                self._handler.spawn(self._reinitialize, client)
            if not self._expired:   # one expiry per session: a failed re-login loses no second session
                log.warning("ZooKeeper session 0x%x expired (%s)", self._session_id, self.connect_string)
                self._expired = True
                self._spawn_hooks(self._expired_hooks)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection lost (%s); session 0x%x may still be alive", self.connect_string,
                        self._session_id)
        elif state == KazooState.CONNECTED:
            client = self._client
            cid = client.client_id if client is not None else None
            if cid:
                self._session_id = cid[0]
            if self._expired:
                if self.sasl is not None and client is not None:
                    # kazoo says CONNECTED before the SASL exchange ends: the hooks wait for a confirmed login.
                    self._handler.spawn(self._after_login, client)
                else:
                    self._new_session()
            for cw in list(self._child_watchers):
                self._handler.spawn(cw.run)

    def _new_session(self):
        if not self._expired:   # check and clear with no yield between: one call per new session
            return
        self._expired = False
        self._relogin = False      # the login is confirmed (SASL: _after_login's answer)
        log.info("new ZooKeeper session 0x%x established", self._session_id)
        self._spawn_hooks(self._reconnected_hooks)

    def _after_login(self, client):
        """The reconnected hooks of a SASL session, once a first answer shows ZooKeeper accepted its login (a refused
        one ends in LOST instead, and the hooks wait for the next session)."""
        try:
            client.exists_async("/").get(timeout=self.connection_timeout_ms / 1000.0)
        except (Exception, self._handler.timeout_exception):   # refused, or lost again: a later CONNECTED retries
            return
        if self._client is client:
            self._new_session()

    def _reinitialize(self, client):
        """After a refused login: wait RELOGIN_BACKOFF_S, then let kazoo connect again with a new session; a refused
        login lands here again through LOST (at most one attempt per second and broker, like Kafka's retry backoff;
        no growth: kazoo reports CONNECTED before the login ends, so there is no clean success to reset one on)."""
        gevent.sleep(RELOGIN_BACKOFF_S)
        if self._stopping or self._client is not client or client.client_state != KeeperState.CLOSED:
            return
        # Not client.stop() first: its close request would wait in the queue and end the *next* session as soon as
        # it is established.
        client.start_async()

    def _spawn_hooks(self, hooks):
        for cb in list(hooks):
            self._handler.spawn(self._run_hook, cb)

    @staticmethod
    def _run_hook(cb):
        try:
            cb()
        except Exception:
            log.exception("ZooKeeper session hook %r failed", cb)

    # -- plumbing -------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _translate(self, path):
        try:
            yield
        except kz.ConnectionClosedError:
            raise CoordinationError("ZooKeeper client for %s is stopped" % self.connect_string, path) from None
        except (kz.KazooException, RetryFailedError) as e:
            for src, dst in _TRANSLATE:
                if isinstance(e, src):
                    raise dst(path=path) from None
            raise CoordinationError("%s: %s" % (type(e).__name__, e), path) from None
        except self._handler.timeout_exception:
            raise ConnectionLossError("ZooKeeper operation timed out", path) from None

    def _call(self, path, fn, *args, **kwargs):
        client = self._check_started()
        with self._translate(path):
            return self._retry(client, fn, *args, **kwargs)

    def _retry(self, client, fn, *args, **kwargs):
        """kazoo's ``client.<fn>(*args, **kwargs)`` retried on connection loss, every attempt bounded by what is left
        of ``operation_timeout_ms``. The attempts are the ``<fn>_async`` twins awaited with a timeout: kazoo queues
        a request made while it has no connection and its synchronous form waits for a connection forever -- with
        the whole ensemble down, a broker's shutdown waited in ``deregister()``'s ``exists`` until it was killed.
        A late answer is OperationTimeoutError (retried while time is left, then RetryFailedError, i.e.
        ConnectionLossError); the request may still be sent once a connection is back, as after any connection
        loss (the caller cannot know whether it applied)."""
        deadline = time.monotonic() + self.operation_timeout_ms / 1000.0
        method = getattr(client, fn + "_async")

        def attempt(*a, **kw):
            left = deadline - time.monotonic()
            if left <= 0:
                raise kz.OperationTimeoutError("no answer within %d ms" % self.operation_timeout_ms)
            try:
                return method(*a, **kw).get(timeout=left)
            except gevent.Timeout:   # what AsyncResult.get raises (kazoo's timeout_exception is a subclass)
                raise kz.OperationTimeoutError("no answer within %d ms" % self.operation_timeout_ms) from None
            except (kz.AuthFailedError, kz.ConnectionClosedError):
                # Between a refused login and the next session (RELOGIN_BACKOFF_S) kazoo refuses every request at
                # once; the broker has not stopped, so this is a connection loss: retried while time is left, as
                # Kafka's requests wait for the reinitialized session.
                if self._relogin and self._client is client and not self._stopping:
                    raise kz.ConnectionLoss("re-login to ZooKeeper pending") from None
                raise

        return client.retry(attempt, *args, **kwargs)

    @property
    def connected(self):
        """True while the client has a live connection to a server of the ensemble (kazoo CONNECTED): operations
        are answered now. False while it is reconnecting (SUSPENDED, or after an expiry) or stopped -- callers that
        would only wait out ``operation_timeout_ms`` (a broker shutting down) can skip the call."""
        client = self._client
        return client is not None and client.connected

    def _acl(self, path):
        """The kazoo ACL list a node at ``path`` is created with (zk_security.default_acls)."""
        return _kazoo_acls(default_acls(self.secure_acls, path))

    def _ensure(self, client, path):
        """Create ``path`` and its missing ancestors, each with its own path's ACL (kazoo's ensure_path would give
        every ancestor the leaf's). An existing node is left as it is."""
        with self._translate(path):
            if self._retry(client, "exists", path) is not None:
                return
        parent = path.rsplit("/", 1)[0]
        if parent:
            self._ensure(client, parent)
        with contextlib.suppress(NodeExistsError), self._translate(path):
            self._retry(client, "create", path, b"", acl=self._acl(path))

    def _check_started(self):
        client = self._client
        if client is None:
            raise CoordinationError("ZooKeeper coordination backend is not started")
        return client

    # -- reads ----------------------------------------------------------------------------------------------------

    def get(self, path):
        validate_path(path)
        data, st = self._call(path, "get", path)
        return data, _stat(st)

    def exists(self, path):
        validate_path(path)
        st = self._call(path, "exists", path)
        return None if st is None else _stat(st)

    def get_children(self, path):
        validate_path(path)
        return sorted(self._call(path, "get_children", path))

    # -- writes ---------------------------------------------------------------------------------------------------

    def create(self, path, data=b"", ephemeral=False, sequence=False, makepath=False):
        validate_path(path)
        if path == "/":
            raise NodeExistsError(path="/")
        try:
            return self._call(path, "create", path, bytes(data), acl=self._acl(path), ephemeral=ephemeral,
                              sequence=sequence)
        except NoNodeError:
            parent = path.rsplit("/", 1)[0]
            if not makepath or not parent:
                raise
        self._ensure(self._check_started(), parent)
        return self._call(path, "create", path, bytes(data), acl=self._acl(path), ephemeral=ephemeral,
                          sequence=sequence)

    def create_many(self, items):
        """Pipelined creates: every request of a wave is sent before the first answer is awaited, so N creates cost
        about one quorum round trip plus the ensemble's (group-committed) log writes instead of N round trips.
        Missing ancestors of ``makepath`` items are created first, one pipelined wave per depth (kazoo's own
        makepath would chain a failed create, then each ancestor, per item). An item whose answer does not come
        within the operation timeout, or fails with connection loss or session expiry, is retried on its own
        through create() (whose retry may report NodeExistsError when the first attempt was applied)."""
        client = self._check_started()
        for path, _data, _makepath in items:
            validate_path(path)
        ancestors = set()
        for path, _data, makepath in items:
            if makepath:
                parent = path.rsplit("/", 1)[0]
                while parent and parent not in ancestors:
                    ancestors.add(parent)
                    parent = parent.rsplit("/", 1)[0]
        by_depth = {}
        for a in ancestors:
            by_depth.setdefault(a.count("/"), []).append(a)
        for depth in sorted(by_depth):
            # Existing ancestors just answer NodeExistsError; the wave is pipelined, so that costs no round trips.
            for path, res in [(p, client.create_async(p, b"", acl=self._acl(p))) for p in sorted(by_depth[depth])]:
                try:
                    with self._translate(path):
                        self._wait(res)
                except NodeExistsError:
                    pass
                except CoordinationError:
                    self.ensure_path(path)  # retried on its own (connection loss, a slow answer)
        pending = [client.create_async(path, bytes(data), acl=self._acl(path)) for path, data, _makepath in items]
        out = []
        for (path, data, makepath), res in zip(items, pending):
            try:
                with self._translate(path):
                    out.append(self._wait(res))
            except (ConnectionLossError, SessionExpiredError):
                try:
                    out.append(self.create(path, data, makepath=makepath))
                except CoordinationError as e:
                    out.append(e)
            except CoordinationError as e:
                out.append(e)
        return out

    def get_many(self, paths):
        """The base class's contract, pipelined: every read is sent before the first answer is awaited. A read whose
        answer is lost to the connection (or late) is retried on its own through get()."""
        client = self._check_started()
        paths = list(paths)
        for path in paths:
            validate_path(path)
        out = []
        for path, res in [(p, client.get_async(p)) for p in paths]:
            try:
                with self._translate(path):
                    data, st = self._wait(res)
                out.append((data, _stat(st)))
            except NoNodeError:
                out.append((None, None))
            except (ConnectionLossError, SessionExpiredError):
                out.append(self.get_or_none(path))
        return out

    def delete_many(self, paths):
        """The base class's contract, pipelined; a delete whose answer is lost is retried on its own."""
        client = self._check_started()
        paths = list(paths)
        for path in paths:
            validate_path(path)
        for path, res in [(p, client.delete_async(p)) for p in paths]:
            try:
                with self._translate(path):
                    self._wait(res)
            except NoNodeError:
                pass
            except (ConnectionLossError, SessionExpiredError):
                try:
                    self.delete(path)
                except NoNodeError:
                    pass

    def set_many(self, items, check=None, on_wave=None):
        """The base class's contract (one result per item, ``check`` fencing every write) with ZooKeeper multi
        transactions: ``check`` and up to ``MULTI_SETS`` sets per transaction, every transaction sent before the
        first answer is awaited -- 10,000 partition states in ~10 transactions and about one round trip. ZooKeeper
        applies a transaction whole or not at all, so a transaction with a failing item (a leader changed that ISR
        meanwhile) is re-sent as one transaction per item, and only the failing items report their error. An
        answer lost to the connection (or late) reports ConnectionLossError for its items: the write may or may not
        have applied (the caller re-reads). ``on_wave`` gets each transaction's final results as its answer comes
        in (13,500 elections: the first after ~0.1 s of the ~1.1 s the 14 transactions take here)."""
        client = self._check_started()
        items = list(items)
        for path, _data, _version in items:
            validate_path(path)
        out = [None] * len(items)

        def send(indexes):
            t = client.transaction()
            if check is not None:
                t.check(check[0], check[1])
            for i in indexes:
                path, data, version = items[i]
                t.set_data(path, bytes(data), version)
            return indexes, t.commit_async()

        def wait(indexes, res):
            """Fill ``out`` for ``indexes``; returns the indexes rolled back by another item's failure."""
            try:
                with self._translate(items[indexes[0]][0]):
                    results = self._wait(res)
            except CoordinationError as e:
                for i in indexes:
                    out[i] = e
                return []
            offset = 1 if check is not None else 0
            # ZooKeeper answers a failed transaction with the failing op's error, RolledBackError for the ops
            # before it and RuntimeInconsistency for those after it.
            undone = (kz.RolledBackError, kz.RuntimeInconsistency)
            if check is not None and isinstance(results[0], Exception) and not isinstance(results[0], undone):
                raise BadVersionError("%s: not at version %d" % (check[0], check[1]), check[0])
            again = []
            for i, r in zip(indexes, results[offset:]):
                if isinstance(r, undone) and len(indexes) > 1:
                    again.append(i)
                elif isinstance(r, Exception):
                    out[i] = self._error(r, items[i][0])
                else:
                    out[i] = _stat(r)
            return again

        def report(indexes):
            if on_wave is not None and indexes:
                on_wave(indexes, [out[i] for i in indexes])

        waves = [send(list(range(k, min(k + MULTI_SETS, len(items))))) for k in range(0, len(items), MULTI_SETS)]
        retry = []
        for indexes, res in waves:
            again = wait(indexes, res)
            retry.extend(again)
            report([i for i in indexes if i not in again] if again else indexes)
        for indexes, res in [send([i]) for i in retry]:
            wait(indexes, res)
        report(retry)
        return out

    @staticmethod
    def _error(exc, path):
        """The CoordinationError for a kazoo exception object a multi transaction answered with."""
        for src, dst in _TRANSLATE:
            if isinstance(exc, src):
                return dst(path=path)
        return CoordinationError("%s: %s" % (type(exc).__name__, exc), path)

    def _wait(self, res):
        """The result of a kazoo async call, at most the operation timeout; a late answer is a connection loss."""
        try:
            return res.get(timeout=self.operation_timeout_ms / 1000.0)
        except gevent.Timeout:
            raise kz.ConnectionLoss("no answer within %d ms" % self.operation_timeout_ms) from None

    def set(self, path, data, version=-1):
        validate_path(path)
        return _stat(self._call(path, "set", path, bytes(data), version=version))

    def delete(self, path, version=-1, recursive=False):
        validate_path(path)
        if path == "/":
            raise ValueError("the root node cannot be deleted")
        if not recursive:
            self._call(path, "delete", path, version=version)
            return
        if version != -1:
            st = self.exists(path)
            if st is None:
                raise NoNodeError(path=path)
            if st.version != version:
                raise BadVersionError("%s: expected version %d, node has %d" % (path, version, st.version), path)
        self._delete_tree(path, version, top=True)

    def _delete_tree(self, path, version, top):
        # Children first; a child created meanwhile makes the parent's delete fail with NotEmpty: go round again
        # (bounded: 10 rounds, a writer racing this long is a bug elsewhere).
        for _ in range(10):
            try:
                children = self.get_children(path)
            except NoNodeError:
                if top:
                    raise
                return
            for child in children:
                self._delete_tree(path.rstrip("/") + "/" + child, -1, top=False)
            try:
                self._call(path, "delete", path, version=version)
                return
            except NoNodeError:
                if top:
                    raise
                return
            except NotEmptyError:
                continue
        raise NotEmptyError("%s keeps getting new children" % path, path)

    def ensure_path(self, path):
        validate_path(path)
        if path != "/":
            self._ensure(self._check_started(), path)

    # -- ACLs (this backend only: the embedded store has no clients to keep out) ----------------------------------

    def get_acls(self, path):
        """``(sorted [Acl], ZnodeStat)`` of the node at ``path``."""
        validate_path(path)
        acls, st = self._call(path, "get_acls", path)
        return sorted(_acls(acls)), _stat(st)

    def set_acls(self, path, acls, version=-1):
        """Replace the ACL of the node at ``path`` with ``acls`` (Acl entries; the ``auth`` scheme means this
        session's identities). NoAuthError when this session may not (the node's ACL lacks ADMIN for it)."""
        validate_path(path)
        self._call(path, "set_acls", path, _kazoo_acls(acls), version=version)

    def set_default_acls(self, roots, secure, recursive=True, on_node=None):
        """Set ``default_acls(secure, path)`` on every node of the subtrees at ``roots`` (only the roots themselves
        when not ``recursive``), as Kafka's ZkSecurityMigrator does. Breadth first, one pipelined wave per depth:
        every setACL and getChildren of a wave is sent before the first answer is awaited (30,000 nodes: seconds,
        not one round trip each). A node deleted meanwhile is skipped (Kafka: "it could have been legitimately
        deleted"); any other failure (NoAuthError, ConnectionLossError...) is raised naming its node.
        ``on_node(path)`` is called for each node set. Returns the number of nodes set."""
        client = self._check_started()
        wave = list(roots)
        for root in wave:
            validate_path(root)
        done = 0
        while wave:
            acl_results = [client.set_acls_async(p, self._default_kazoo_acls(secure, p)) for p in wave]
            child_results = [client.get_children_async(p) for p in wave] if recursive else [None] * len(wave)
            next_wave = []
            for path, acl_res, child_res in zip(wave, acl_results, child_results):
                try:
                    with self._translate(path):
                        self._wait(acl_res)
                    done += 1
                    if on_node is not None:
                        on_node(path)
                except NoNodeError:
                    continue
                if child_res is None:
                    continue
                try:
                    with self._translate(path):
                        children = self._wait(child_res)
                except NoNodeError:
                    continue
                base = "" if path == "/" else path
                next_wave.extend(base + "/" + c for c in sorted(children))
            wave = next_wave
        return done

    @staticmethod
    def _default_kazoo_acls(secure, path):
        return _kazoo_acls(default_acls(secure, path))

    # -- watches --------------------------------------------------------------------------------------------------

    def watch_data(self, path, fn):
        validate_path(path)
        client = self._check_started()
        w = Watch(path, fn, "data")

        def relay(data, stat, event=None):
            # Three parameters so kazoo never retries us with two after a TypeError raised by ``fn``.
            if not w.active:
                return False
            try:
                result = fn(data, None if stat is None else _stat(stat))
            except Exception:
                log.exception("coordination watch callback on %s failed", path)
                return None
            if result is False:
                w.cancel()
            return result

        with self._translate(path):
            client.DataWatch(path, relay)
        return w

    def watch_children(self, path, fn):
        validate_path(path)
        self._check_started()
        cw = _ChildrenWatcher(self, path, Watch(path, fn, "children"))
        self._child_watchers.append(cw)
        cw.run()
        return cw.watch


class _ChildrenWatcher:
    """Persistent children watch: get_children with a one-shot watch, or exists with one while the node is absent."""

    def __init__(self, backend, path, watch):
        self.backend = backend
        self.path = path
        self.watch = watch
        self.lock = backend._handler.rlock_object()
        self.delivered = None

    def _zk_event(self, event):
        # NONE events announce a connection-state change; the backend's listener re-runs us on CONNECTED.
        if event.type != "NONE":
            self.run()

    def run(self):
        with self.lock:
            if not self.watch.active:
                self._forget()
                return
            client = self.backend._client
            if client is None:
                return
            try:
                while True:
                    try:
                        children, st = client.retry(client.get_children, self.path, self._zk_event,
                                                    include_data=True)
                        children, pzxid = sorted(children), st.pzxid
                        break
                    except kz.NoNodeError:
                        st = client.retry(client.exists, self.path, self._zk_event)
                        if st is None:
                            children, pzxid = [], None
                            break
                        # created between the two calls: read its children
            except (kz.ConnectionClosedError, kz.KazooException, RetryFailedError) as e:
                # The next CONNECTED state re-runs this watch.
                log.debug("children watch on %s: %s", self.path, e)
                return
            last = self.delivered
            self.delivered = (children, pzxid)
            if last is not None and children == last[0] and (pzxid is None or last[1] in (None, pzxid)):
                return  # same list, and no child created or deleted in between (as far as one can tell)
            try:
                result = self.watch.fn(children)
            except Exception:
                log.exception("coordination watch callback on %s failed", self.path)
                return
            if result is False:
                self.watch.cancel()
                self._forget()

    def _forget(self):
        with contextlib.suppress(ValueError):
            self.backend._child_watchers.remove(self)
