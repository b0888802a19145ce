"""ZooKeeper faults (issue 16 item 1, helper F1), registered in tests/integration/faults.py's FAULTS.

- ``zk-node-down``: SIGKILL of one node of the 3-node ensemble (the quorum leader when ``leader=True``, else a
  random node); heal restarts it. Two of three keep a quorum: nothing should notice beyond the sessions that were
  connected to the dead node moving to another (same session, no expiry).
- ``zk-ensemble-down``: SIGKILL of every node; heal starts them again (same data dirs). ZooKeeper restores the
  sessions from its snapshot and log and gives each a fresh timeout once a leader is elected, so a broker that
  reconnects within ``zookeeper.session.timeout.ms`` of the quorum's return keeps its session.
- ``zk-session-expiry`` / ``zk-session-expiry-controller``: a live broker's session ends while the process runs
  on -- a random running broker, or the controller. ZooKeeper derives a session's password from its id
  (ZooKeeperServer.generatePasswd: ``new java.util.Random(sessionId ^ 0xB3415C00L).nextBytes(16 bytes)``), so the
  test joins the broker's session (id = ephemeralOwner of its /brokers/ids/<id>) with a second client and closes
  it: the server ends the session (its ephemerals go, watches fire) and the broker's own client is told "session
  expired" when it next talks to the server, as after a real expiry. ``inject`` returns once the broker's znode
  is gone; ``heal`` waits until it is back, owned by a new session (the broker re-registered itself; nothing is
  restarted).

The cluster is faults.py's (``brokers``, ``ensemble``, ``zk``).
"""
from __future__ import annotations

from tests.integration import faults
from tests.integration.harness import wait_until

# ZooKeeperServer.superSecret: the seed mask of every session password (ZooKeeper 3.x).
_SUPER_SECRET = 0xB3415C00
_PASSWORD_LEN = 16


def _java_random_bytes(seed: int, n: int) -> bytes:
    """``new java.util.Random(seed).nextBytes(new byte[n])``: the 48-bit LCG, 4 bytes per nextInt, low byte first."""
    mask = (1 << 48) - 1
    state = (seed ^ 0x5DEECE66D) & mask
    out = bytearray()
    while len(out) < n:
        state = (state * 0x5DEECE66D + 0xB) & mask
        r = state >> 16                       # next(32), as an unsigned 32-bit value: only its bytes matter
        for _ in range(min(4, n - len(out))):
            out.append(r & 0xFF)
            r >>= 8
    return bytes(out)


def session_password(session_id: int) -> bytes:
    """The password ZooKeeper gave session ``session_id`` (what a client must present to resume it)."""
    return _java_random_bytes((session_id ^ _SUPER_SECRET) & ((1 << 64) - 1), _PASSWORD_LEN)


def expire_session(connect_string: str, session_id: int, timeout: float = 10.0) -> None:
    """End session ``session_id`` on the server: join it with its password, then close it."""
    from kazoo.client import KazooClient

    other = KazooClient(hosts=connect_string, client_id=(session_id, session_password(session_id)), timeout=10.0,
                        connection_retry={"max_tries": 3})
    other.start(timeout=timeout)
    if other.client_id[0] != session_id:   # the server did not let us resume it: the fault did not happen
        other.stop()
        other.close()
        raise AssertionError(f"could not join session 0x{session_id:x} (got 0x{other.client_id[0]:x})")
    other.stop()    # closeSession: the server deletes the session's ephemerals now
    other.close()


def registration(cluster, broker_id: int):
    """The ZnodeStat of /brokers/ids/<broker_id> (ephemeralOwner = the broker's session, czxid = its broker
    epoch), or None."""
    return cluster.zk.exists(f"/brokers/ids/{broker_id}")


@faults.register
class ZkNodeDown(faults.Fault):
    name = "zk-node-down"
    description = "SIGKILL one of the three ZooKeeper nodes (a random one), restart it at heal"
    hold_s = 6.0
    leader = False

    def inject(self, cluster) -> None:
        ens = cluster.ensemble
        node = ens.leader() if self.leader else None
        self.victim = node if node is not None else self.rng.randrange(ens.n)
        ens.kill(self.victim)

    def heal(self, cluster) -> None:
        if self.victim is not None and not cluster.ensemble.running(self.victim):
            cluster.ensemble.start_node(self.victim, wait=True, timeout=60)


@faults.register
class ZkLeaderDown(ZkNodeDown):
    name = "zk-leader-down"
    description = "SIGKILL the ZooKeeper quorum leader (the other two elect a new one), restart it at heal"
    leader = True


@faults.register
class ZkEnsembleDown(faults.Fault):
    name = "zk-ensemble-down"
    description = "SIGKILL every ZooKeeper node; brokers keep serving their current leaders; restart at heal"
    hold_s = 10.0

    def inject(self, cluster) -> None:
        self.victim = "all"
        for i in range(cluster.ensemble.n):
            cluster.ensemble.kill(i)

    def heal(self, cluster) -> None:
        ens = cluster.ensemble
        down = [i for i in range(ens.n) if not ens.running(i)]
        for i in down:
            ens.start_node(i, wait=False)
        ens.wait_serving(down, timeout=60)
        revive_client(cluster.zk)


def revive_client(zk, timeout: float = 10.0) -> None:
    """Make the test's own kazoo client usable after an outage: its session (20 s) may have expired while the
    ensemble was down longer, and a client that only reports SessionExpiredError is started again."""
    from tests.integration.harness import HarnessError

    try:
        wait_until(lambda: zk.exists("/") is not None, timeout, 0.2, "the test's ZooKeeper client",
                   ignore=(Exception,))
    except HarnessError:
        zk.restart()
        wait_until(lambda: zk.exists("/") is not None, 30, 0.2, "the test's ZooKeeper client (new session)",
                   ignore=(Exception,))


@faults.register
class ZkSessionExpiry(faults.Fault):
    name = "zk-session-expiry"
    description = "end a live broker's ZooKeeper session on the server (the process runs on); it must re-register"
    hold_s = 2.0

    def pick(self, cluster) -> int:
        return self.rng.choice([b.broker_id for b in cluster.brokers if b.running])

    def inject(self, cluster) -> None:
        self.victim = self.pick(cluster)
        stat = wait_until(lambda: registration(cluster, self.victim), 30, 0.1,
                          f"broker {self.victim} registered", ignore=(Exception,))
        self.old_session, self.old_epoch = stat.ephemeralOwner, stat.czxid
        expire_session(cluster.ensemble.connect_string, self.old_session)
        wait_until(lambda: (st := registration(cluster, self.victim)) is None
                   or st.ephemeralOwner != self.old_session, 15, 0.05,
                   f"broker {self.victim}'s session 0x{self.old_session:x} to end", ignore=(Exception,))

    def heal(self, cluster) -> None:
        if self.victim is None:
            return
        wait_until(lambda: (st := registration(cluster, self.victim)) is not None
                   and st.ephemeralOwner != self.old_session, 60, 0.1,
                   f"broker {self.victim} to re-register in a new session", ignore=(Exception,))


@faults.register
class ZkControllerSessionExpiry(ZkSessionExpiry):
    name = "zk-session-expiry-controller"
    description = "end the controller's ZooKeeper session (the process runs on); another term must begin"

    def pick(self, cluster) -> int:
        return wait_until(lambda: (c := faults.controller_id(cluster)) is not None and (c,), 30, 0.1,
                          "a controller")[0]
