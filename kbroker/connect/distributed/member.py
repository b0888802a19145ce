"""A Connect worker's membership in its group (Kafka's WorkerGroupMember + AbstractCoordinator, classic protocol).

Over ``kbroker.client`` (blocking sockets, one request in flight per connection; ``security``, a ChannelSecurity
built from the worker's security.protocol / ssl.* / sasl.* keys, secures each one): the herder thread owns one
connection to the group coordinator for FindCoordinator / JoinGroup / SyncGroup / LeaveGroup, the heartbeat thread
owns another for Heartbeat, so a JoinGroup parked at the coordinator for up to ``rebalance.timeout.ms`` never
delays a heartbeat and vice versa.

States: UNJOINED (no generation) -> REBALANCING (inside ``join()``) -> STABLE (assignment received; the heartbeat
thread sends a Heartbeat every ``heartbeat.interval.ms``, until the next JoinGroup). The member needs to rejoin
(``rejoin_needed``) when:

- a Heartbeat answers REBALANCE_IN_PROGRESS (27): another member joined or left;
- a Heartbeat answers ILLEGAL_GENERATION (22) or UNKNOWN_MEMBER_ID (25): the coordinator expelled us (our session
  timed out), so the generation -- and for 25 the member id -- is reset;
- no Heartbeat succeeded for ``session.timeout.ms``: the coordinator has expelled us by now (Kafka's client
  reaches the same conclusion);
- the owner calls ``request_rejoin()`` (a config change needs a new assignment).

``wakeup`` (a threading.Event) is set whenever ``rejoin_needed`` becomes true, so the herder's wait returns at once.

JoinGroup/SyncGroup errors handled as Kafka's client does: MEMBER_ID_REQUIRED (79, JoinGroup v4+) -> join again
with the id handed back; UNKNOWN_MEMBER_ID -> join again with an empty id; REBALANCE_IN_PROGRESS /
ILLEGAL_GENERATION at SyncGroup -> join again; COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS (15, 16, 14) and network errors -> find the coordinator again after
``retry.backoff.ms``; INCONSISTENT_GROUP_PROTOCOL (23), INVALID_SESSION_TIMEOUT (26), GROUP_AUTHORIZATION_FAILED
(30), INVALID_GROUP_ID (24) -> ``GroupError`` (fatal: the worker cannot be a member).
"""
import logging
import threading
import time

from kbroker import errors
from kbroker.client.connection import BrokerConnection, parse_host_port

from .protocol import PROTOCOL_TYPE

log = logging.getLogger("kbroker.connect.member")

UNJOINED, REBALANCING, STABLE = "UNJOINED", "REBALANCING", "STABLE"

COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 22, 25, 27, 79
COORDINATOR_ERRORS = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)
FATAL_ERRORS = (23, 24, 26, 30)


class GroupError(Exception):
    """The worker cannot be a member of the group (a fatal JoinGroup/SyncGroup error)."""


class RejoinNeeded(Exception):
    """``join()`` gave up this round (the member was stopped, or the deadline passed)."""


class JoinResult:
    """One completed rebalance: ``generation``, ``member_id``, ``leader_id``, ``protocol`` (the chosen name) and
    this member's ``assignment`` bytes."""
    __slots__ = ("generation", "member_id", "leader_id", "protocol", "assignment")

    def __init__(self, generation, member_id, leader_id, protocol, assignment):
        self.generation = generation
        self.member_id = member_id
        self.leader_id = leader_id
        self.protocol = protocol
        self.assignment = assignment

    @property
    def is_leader(self):
        return self.member_id == self.leader_id


class GroupMember:
    def __init__(self, bootstrap, group_id, session_timeout_ms=10000, rebalance_timeout_ms=60000,
                 heartbeat_interval_ms=3000, retry_backoff_ms=100, client_id="kbroker-connect", security=None):
        self.bootstrap = [parse_host_port(b) for b in bootstrap.split(",") if b.strip()]
        self.security = security
        self.group_id = group_id
        self.session_timeout_ms = int(session_timeout_ms)
        self.rebalance_timeout_ms = int(rebalance_timeout_ms)
        self.heartbeat_interval_ms = int(heartbeat_interval_ms)
        self.retry_backoff_ms = int(retry_backoff_ms)
        self.client_id = client_id
        self.member_id = ""
        self.generation = -1
        self.state = UNJOINED
        self.wakeup = threading.Event()
        self._rejoin = True
        self._coordinator = None          # (host, port)
        self._conn = None                 # the herder thread's connection to the coordinator
        self._lock = threading.Lock()     # guards member_id / generation / state / _rejoin
        self._stopped = threading.Event()
        self._last_heartbeat_ok = time.monotonic()
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name="connect-heartbeat", daemon=True)
        self._hb_thread.start()

    # ------------------------------------------------------------------------------------------ state

    @property
    def rejoin_needed(self):
        return self._rejoin

    def request_rejoin(self, reason=""):
        with self._lock:
            if not self._rejoin:
                log.info("rejoining group %s: %s", self.group_id, reason or "requested")
            self._rejoin = True
        self.wakeup.set()

    def _reset_generation(self, forget_member_id):
        with self._lock:
            self.generation = -1
            self.state = UNJOINED
            if forget_member_id:
                self.member_id = ""
            self._rejoin = True
        self.wakeup.set()

    # ------------------------------------------------------------------------------------------ coordinator

    def _find_coordinator(self):
        """(host, port) of the group coordinator; retries until found or stopped."""
        while not self._stopped.is_set():
            for host, port in self.bootstrap:      # any broker answers FindCoordinator
                try:
                    with self._open(host, port, 10) as conn:
                        resp = conn.request("FindCoordinator", {"key": self.group_id, "key_type": 0,
                                                                "coordinator_keys": [self.group_id]})
                        if conn.last_version >= 4:
                            c = resp["coordinators"][0]
                            code, chost, cport = c["error_code"], c["host"], c["port"]
                        else:
                            code, chost, cport = resp["error_code"], resp["host"], resp["port"]
                    if code == 0:
                        return chost, cport
                    log.debug("FindCoordinator for %s: error %d", self.group_id, code)
                except (errors.KafkaError, OSError) as e:
                    log.debug("FindCoordinator for %s at %s:%d failed: %s", self.group_id, host, port, e)
            self._stopped.wait(self.retry_backoff_ms / 1000)
        raise RejoinNeeded("stopped")

    def _open(self, host, port, timeout):
        return BrokerConnection(host, port, client_id=self.client_id, timeout=timeout, security=self.security)

    def _connection(self):
        if self._conn is None or self._conn.closed:
            self._coordinator = self._find_coordinator()
            # JoinGroup is parked at the coordinator for up to the rebalance timeout: the socket waits longer.
            self._conn = self._open(*self._coordinator, self.rebalance_timeout_ms / 1000 + 10)
        return self._conn

    def _coordinator_lost(self):
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    # ------------------------------------------------------------------------------------------ join

    def join(self, protocols, assign, timeout_s=None):
        """Join (or rejoin) the group and return a ``JoinResult``.

        ``protocols``: JoinGroup's ``[{"name", "metadata"}]``, most preferred first. ``assign(leader_id, protocol,
        members)`` runs on the leader only: ``members`` is ``[(member_id, metadata bytes)]`` in the coordinator's
        order and it returns ``{member_id: assignment bytes}``. Raises GroupError when membership is impossible,
        RejoinNeeded when stopped or ``timeout_s`` passed.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if self._stopped.is_set() or (deadline is not None and time.monotonic() > deadline):
                raise RejoinNeeded("stopped" if self._stopped.is_set() else "join timed out")
            with self._lock:
                self._rejoin = False
                self.state = REBALANCING
            self.wakeup.clear()
            try:
                result = self._join_once(protocols, assign)
            except errors.NetworkException as e:
                log.info("group %s: coordinator connection failed (%s); finding it again", self.group_id, e)
                self._coordinator_lost()
                self._stopped.wait(self.retry_backoff_ms / 1000)
                continue
            if result is None:
                continue
            with self._lock:
                if self._rejoin:       # a heartbeat or request_rejoin() arrived meanwhile: start over
                    continue
                self.generation = result.generation
                self.member_id = result.member_id
                self.state = STABLE
                self._last_heartbeat_ok = time.monotonic()
            return result

    def _join_once(self, protocols, assign):
        """One JoinGroup + SyncGroup round; None means "try again" (the reason has been dealt with)."""
        conn = self._connection()
        resp = conn.request("JoinGroup", {
            "group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": PROTOCOL_TYPE, "protocols": protocols, "reason": None})
        code = resp["error_code"]
        if code == MEMBER_ID_REQUIRED:
            self.member_id = resp["member_id"]
            return None
        if code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return None
        if code in COORDINATOR_ERRORS:
            self._coordinator_lost()
            self._stopped.wait(self.retry_backoff_ms / 1000)
            return None
        if code == REBALANCE_IN_PROGRESS:
            return None
        if code:
            raise GroupError("JoinGroup of group %s failed: %s" % (self.group_id, errors.error_name(code)))
        member_id, generation = resp["member_id"], resp["generation_id"]
        protocol, leader = resp["protocol_name"], resp["leader"]
        self.member_id = member_id
        assignments = []
        if member_id == leader:
            members = [(m["member_id"], bytes(m["metadata"])) for m in resp["members"]]
            by_member = assign(leader, protocol, members)
            assignments = [{"member_id": m, "assignment": a} for m, a in by_member.items()]
        sresp = conn.request("SyncGroup", {
            "group_id": self.group_id, "generation_id": generation, "member_id": member_id,
            "group_instance_id": None, "protocol_type": PROTOCOL_TYPE, "protocol_name": protocol,
            "assignments": assignments})
        code = sresp["error_code"]
        if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
            return None
        if code == UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return None
        if code in COORDINATOR_ERRORS:
            self._coordinator_lost()
            return None
        if code:
            raise GroupError("SyncGroup of group %s failed: %s" % (self.group_id, errors.error_name(code)))
        return JoinResult(generation, member_id, leader, protocol, bytes(sresp["assignment"]))

    # ------------------------------------------------------------------------------------------ heartbeat

    def _heartbeat_loop(self):
        conn = None
        interval = self.heartbeat_interval_ms / 1000
        while not self._stopped.wait(interval):
            with self._lock:
                # Also while a rejoin is pending but JoinGroup not yet sent (the herder is stopping tasks, up to
                # task.shutdown.graceful.timeout.ms): silence then would expire our session, as Kafka's heartbeat
                # thread knows too.
                stable = self.state == STABLE
                generation, member_id = self.generation, self.member_id
            if not stable:
                continue
            try:
                if conn is None or conn.closed:
                    host, port = self._coordinator or self._find_coordinator()
                    conn = self._open(host, port, max(1.0, self.session_timeout_ms / 1000))
                resp = conn.request("Heartbeat", {"group_id": self.group_id, "generation_id": generation,
                                                  "member_id": member_id, "group_instance_id": None})
                code = resp["error_code"]
            except (errors.KafkaError, OSError, RejoinNeeded) as e:
                log.debug("heartbeat of group %s failed: %s", self.group_id, e)
                if conn is not None:
                    conn.close()
                conn = None
                code = COORDINATOR_NOT_AVAILABLE
            with self._lock:
                # An answer about a generation we have left since (a rejoin started while the heartbeat was in
                # flight) says nothing about the new one: acting on it would restart a finished join.
                stale = self.generation != generation or self.state != STABLE
            if stale:
                continue
            if code == 0:
                self._last_heartbeat_ok = time.monotonic()
            elif code == REBALANCE_IN_PROGRESS:
                self._last_heartbeat_ok = time.monotonic()
                self.request_rejoin("the group is rebalancing")
            elif code in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                log.info("group %s: %s at heartbeat; rejoining", self.group_id, errors.error_name(code))
                self._reset_generation(forget_member_id=code == UNKNOWN_MEMBER_ID)
            elif code in COORDINATOR_ERRORS:
                if conn is not None:
                    conn.close()
                conn = None
                self._coordinator = None
                if time.monotonic() - self._last_heartbeat_ok > self.session_timeout_ms / 1000:
                    # The coordinator has expelled us by now: whatever we run may already run elsewhere.
                    self._reset_generation(forget_member_id=False)
            else:
                log.warning("heartbeat of group %s: %s", self.group_id, errors.error_name(code))
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------------------------------------ leave / stop

    def leave(self):
        """LeaveGroup (best effort): the coordinator rebalances the others at once instead of after our session
        timeout."""
        with self._lock:
            member_id, self.state, self.generation = self.member_id, UNJOINED, -1
        if not member_id:
            return
        try:
            conn = self._conn if self._conn is not None and not self._conn.closed else None
            if conn is None and self._coordinator is not None:
                conn = self._conn = self._open(*self._coordinator, 5)
            if conn is not None:
                conn.request("LeaveGroup", {"group_id": self.group_id, "member_id": member_id,
                                            "members": [{"member_id": member_id, "group_instance_id": None,
                                                         "reason": "the worker is stopping"}]})
        except (errors.KafkaError, OSError) as e:
            log.info("LeaveGroup of group %s failed: %s", self.group_id, e)
        with self._lock:
            self.member_id = ""

    def stop(self, leave=True):
        if leave:
            self.leave()
        self._stopped.set()
        self.wakeup.set()
        self._hb_thread.join(timeout=5)
        self._coordinator_lost()
