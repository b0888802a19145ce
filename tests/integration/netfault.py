"""Network partitions for the fault tests (issue 16 item 2): every broker in its own Linux network namespace.

Mechanism (we run as root; `ip netns` and veth work here, iptables does not exist):

    root namespace                          bridge `kn<tag>br`, 10.<a>.<b>.0/24 (a = 64 + tag/256, b = tag%256)
      test process, kazoo, clients  ------- 10.<a>.<b>.1   ("host": source address of every root-side connection)
      ZooKeeper ensemble (3 JVMs)   ------- 10.<a>.<b>.2   ("zk": an alias on the bridge; the nodes listen on
                                                            0.0.0.0, the brokers connect to this address)
    netns `kn<tag>-b<i>`   veth  --------- 10.<a>.<b>.<10+i>  broker i   (`ip netns exec` runs it there)
    netns `kn<tag>-c<j>`   veth  --------- 10.<a>.<b>.<100+j> client j   (a thread `setns`es into it, see NsProducer)

A cut between two nodes is a `blackhole` route to the other's /32 inside each namespace end (a root-side end --
"host" or "zk" -- gets none: the other end's route is enough, because TCP needs both directions). Blackholed
packets vanish without an error, as on a real partitioned network: senders see timeouts, not resets. `heal()`
deletes every route it added. Broker-to-broker, broker-to-ZooKeeper and client-to-broker links can each be cut;
ZooKeeper's own quorum runs on 127.0.0.1 and is never partitioned here (F1 stops ZooKeeper nodes instead).

`NetCluster` is `RCluster` (test_replication_common.py) with its brokers and ZooKeeper on this fabric and
`capabilities = {"netns"}`; the network faults at the bottom register themselves in faults.FAULTS.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.integration import faults
from tests.integration.harness import BrokerProcess, ZkEnsemble
from tests.integration.test_replication_common import CHROOT, NumberedProducer, RCluster

CLONE_NEWNET = 0x40000000


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def netns_available() -> bool:
    """True when this process may create network namespaces (root with `ip`)."""
    return os.geteuid() == 0 and ip("netns", "list", check=False).returncode == 0


class NetFabric:
    """A bridge in the root namespace, a namespace per added node, and blackhole cuts between nodes.

    Nodes are named: "host" (the root namespace's bridge address), "zk" (ZooKeeper's alias), and whatever
    add_node() created ("b0", "c1", ...). `tag` makes names unique per process (interface names <= 15 chars)."""

    def __init__(self):
        # tag and subnet 10.<a>.<b>.0/24 from a counter: two fabrics on the machine at once (pytest-xdist workers,
        # a soak beside a test) take different ones -- the bridge name is the lock (`ip link add` fails if taken)
        for n in range(os.getpid() % 4096, os.getpid() % 4096 + 4096):
            n %= 4096
            self.tag, self.prefix, self.bridge = f"{n:04d}", f"10.{64 + n // 256}.{n % 256}", f"kn{n:04d}br"
            if ip("link", "add", self.bridge, "type", "bridge", check=False).returncode == 0:
                break
        else:
            raise RuntimeError("no free bridge name kn0000br..kn4095br")
        self.nodes: dict[str, tuple[str | None, str]] = {"host": (None, f"{self.prefix}.1"),
                                                          "zk": (None, f"{self.prefix}.2")}
        self.routes: set[tuple[str, str]] = set()   # (namespace, blackholed ip)
        self._lock = threading.Lock()
        atexit.register(self.close)
        ip("addr", "add", f"{self.prefix}.1/24", "dev", self.bridge)
        ip("addr", "add", f"{self.prefix}.2/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def ip_of(self, node: str) -> str:
        return self.nodes[node][1]

    def ns_of(self, node: str) -> str | None:
        return self.nodes[node][0]

    def add_node(self, name: str, host_number: int) -> str:
        """Create namespace `kn<tag>-<name>` joined to the bridge at 10.<a>.<b>.<host_number>; returns its ns."""
        ns, veth = f"kn{self.tag}-{name}", f"kn{self.tag}{name}"
        addr = f"{self.prefix}.{host_number}"
        ip("netns", "add", ns)
        self.nodes[name] = (ns, addr)
        ip("link", "add", veth, "type", "veth", "peer", "name", veth + "p")
        ip("link", "set", veth + "p", "netns", ns)
        ip("link", "set", veth, "master", self.bridge)
        ip("link", "set", veth, "up")
        ip("-n", ns, "addr", "add", f"{addr}/24", "dev", veth + "p")
        ip("-n", ns, "link", "set", veth + "p", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        return ns

    # -- cuts
    def cut(self, a: str, b: str) -> None:
        """No packet between nodes a and b (both directions) until heal()."""
        with self._lock:
            for here, there in ((a, b), (b, a)):
                ns = self.ns_of(here)
                if ns is None or (ns, self.ip_of(there)) in self.routes:
                    continue
                ip("-n", ns, "route", "add", "blackhole", f"{self.ip_of(there)}/32")
                self.routes.add((ns, self.ip_of(there)))

    def partition(self, *groups) -> None:
        """Cut every pair of nodes that are in different groups (nodes in no group keep every link)."""
        groups = [list(g) for g in groups]
        for i, g in enumerate(groups):
            for h in groups[i + 1:]:
                for a in g:
                    for b in h:
                        self.cut(a, b)

    def isolate(self, node: str, *, keep: tuple = ("host",)) -> None:
        """Cut `node` from every other node except those in `keep` (by default the test's own clients)."""
        for other in self.nodes:
            if other != node and other not in keep:
                self.cut(node, other)

    def heal(self) -> None:
        with self._lock:
            for ns, addr in sorted(self.routes):
                ip("-n", ns, "route", "del", "blackhole", f"{addr}/32", check=False)
            self.routes.clear()

    def close(self) -> None:
        self.heal()
        for name, (ns, _) in list(self.nodes.items()):
            if ns is not None:
                ip("netns", "del", ns, check=False)   # removes the veth pair with it
                del self.nodes[name]
        ip("link", "del", self.bridge, check=False)


def enter_netns(ns: str) -> None:
    """Move the *calling thread* into network namespace `ns` (setns(2) is per thread; threads it starts later --
    librdkafka's -- inherit it). Python 3.11 has no os.setns: libc's."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({ns}): {os.strerror(err)}")
    finally:
        os.close(fd)


class NsProducer(NumberedProducer):
    """NumberedProducer whose thread (and so its librdkafka threads and sockets) lives in namespace `netns`."""

    def __init__(self, *args, netns: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.netns = netns

    def _run(self):
        enter_netns(self.netns)
        super()._run()


class NetZkEnsemble(ZkEnsemble):
    """ZkEnsemble whose client ports listen on every address (the brokers reach it at the fabric's "zk" address;
    the harness's four-letter probes still use 127.0.0.1)."""

    def config_text(self, i: int) -> str:
        return super().config_text(i).replace("clientPortAddress=127.0.0.1", "clientPortAddress=0.0.0.0")


class NetCluster(RCluster):
    """RCluster with broker i in namespace b<i> (address .<10+i>), ZooKeeper at the "zk" address and `clients`
    client namespaces c0.. (address .<100+j>) for NsProducer. `net` is the NetFabric."""

    capabilities = frozenset({"netns"})

    def __init__(self, base: Path, n: int = 3, overrides: dict | None = None, clients: int = 0):
        super().__init__(base, n, overrides)
        self.net = NetFabric()
        self.ensemble = NetZkEnsemble(self.base / "zk", n=3)
        for b in self.brokers:
            ns = self.net.add_node(f"b{b.broker_id}", 10 + b.broker_id)
            b.host = self.net.ip_of(f"b{b.broker_id}")
            b.command = ["ip", "netns", "exec", ns, sys.executable, "-m", "kbroker.cli.server"]
        for j in range(clients):
            self.net.add_node(f"c{j}", 100 + j)

    def start(self) -> "NetCluster":
        self.ensemble.start()
        zk_connect = ",".join(f"{self.net.ip_of('zk')}:{p}" for p in self.ensemble.client_ports) + CHROOT
        for b in self.brokers:
            b.zk = zk_connect
            b.start(wait=False)
        for b in self.brokers:
            b.wait_ready(60)
        self.zk = self._kazoo(hosts=self.ensemble.connect_string + CHROOT, timeout=20.0,
                              connection_retry={"max_tries": -1}, command_retry={"max_tries": -1, "deadline": 60})
        self.zk.start(timeout=30)
        self.wait_registered()
        return self

    def close(self) -> None:
        try:
            self.net.heal()
            super().close()
        finally:
            self.net.close()

    def node(self, broker_id: int) -> str:
        return f"b{broker_id}"

    def others(self, broker_id: int) -> list[str]:
        return [self.node(b.broker_id) for b in self.brokers if b.broker_id != broker_id]


# ---------------------------------------------------------------------------------------------- network faults

class _NetFault(faults.Fault):
    requires = frozenset({"netns"})

    def heal(self, cluster) -> None:
        cluster.net.heal()
        faults.wait_registered(cluster, [b.broker_id for b in cluster.brokers if b.running], timeout=60)


@faults.register
class IsolateLeader(_NetFault):
    """Jepsen's case: a leader cut from the other brokers and from ZooKeeper while clients still reach it. With
    min.insync.replicas=2 it must stop acknowledging acks=all writes (its followers stop fetching); the majority
    elects a new leader after the session timeout; at heal the old leader learns it was replaced and truncates."""

    name = "isolate-leader"
    description = "cut a leader from the other brokers and ZooKeeper (clients still reach it)"

    def inject(self, cluster) -> None:
        self.victim = faults.a_leader(cluster, self.rng)
        cluster.net.partition([cluster.node(self.victim)], cluster.others(self.victim) + ["zk"])


@faults.register
class IsolateLeaderFromBrokers(_NetFault):
    """A leader cut from the other brokers only: it keeps its ZooKeeper session, so it stays leader and shrinks
    the ISR to itself; with min.insync.replicas=2 acks=all writes get NOT_ENOUGH_REPLICAS until heal."""

    name = "isolate-leader-from-brokers"
    description = "cut a leader from the other brokers (ZooKeeper and clients still reach it)"

    def inject(self, cluster) -> None:
        self.victim = faults.a_leader(cluster, self.rng)
        cluster.net.partition([cluster.node(self.victim)], cluster.others(self.victim))


@faults.register
class SplitMinority(_NetFault):
    """A random broker alone on one side, the other two and ZooKeeper on the other (a minority/majority split)."""

    name = "split-minority"
    description = "one random broker cut from the other two and ZooKeeper"

    def inject(self, cluster) -> None:
        self.victim = self.rng.choice([b.broker_id for b in cluster.brokers if b.running])
        cluster.net.partition([cluster.node(self.victim)], cluster.others(self.victim) + ["zk"])


@faults.register
class CutFromZooKeeper(_NetFault):
    """A random broker cut from ZooKeeper only: its session expires, the controller moves its leaderships away,
    while it still talks to the other brokers and clients."""

    name = "cut-zookeeper"
    description = "one random broker cut from ZooKeeper only"

    def inject(self, cluster) -> None:
        self.victim = self.rng.choice([b.broker_id for b in cluster.brokers if b.running])
        cluster.net.cut(cluster.node(self.victim), "zk")
