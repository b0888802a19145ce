"""The fault-injection interface shared by the fault tests (issue 16) and scripts/fault_soak.py.

A fault is a class with a unique `name`, registered in `FAULTS` by `register` (a class decorator). One instance
is made per injection, with a `random.Random` to pick its victim reproducibly:

    fault = FAULTS["pause-leader"](rng)
    fault.inject(cluster)      # break something; returns once the fault is in place
    ...                        # the workload runs for about `fault.hold_s` seconds
    fault.heal(cluster)        # undo it; returns once the processes/links are back (not necessarily the ISRs)

`inject` and `heal` are each called once, in that order; `heal` must also work when `inject` raised half-way
(it undoes whatever is in place). `describe()` names the victim after `inject` (for the soak's log).

The cluster (duck-typed; tests/integration/test_replication_common.py `RCluster` and netfault.py `NetCluster`):
    brokers       list of harness.BrokerProcess (broker_id, pid, running, start(), kill9(), stop())
    ensemble      harness.ZkEnsemble (3 nodes)
    zk            a started kazoo client on the brokers' chroot
    capabilities  set of strings naming what the cluster can do beyond processes and ZooKeeper: "netns"
                  (netfault.NetCluster: every broker in its own network namespace), "tmpfs" (F3's disks); a fault
                  whose `requires` is not a subset is skipped by the soak (`applicable`)
    workload_topic  optional: the topic the workload writes; faults aimed at "a leader" aim at a leader of it

Other modules add faults with `faults.register`: tests/integration/faults_zk.py (ZooKeeper, helper F1),
tests/integration/faults_disk.py (disks, helper F3); netfault.py adds the network partitions. `load_all()`
imports every one of them that exists, so `FAULTS` is complete.
"""
from __future__ import annotations

import importlib
import json
import os
import random
import signal
import time

from tests.integration.harness import wait_until

# Modules that register faults when imported (missing ones are skipped: they are written in parallel).
FAULT_MODULES = ("tests.integration.netfault", "tests.integration.faults_zk", "tests.integration.faults_disk")


class Fault:
    """One kind of failure. Subclasses set `name` (unique, kebab-case), `description` (one line: what breaks) and
    may set `requires` (cluster capabilities, see the module docstring) and `hold_s` (how long the soak keeps it
    injected; the default outlasts a 4-6 s ZooKeeper session so elections happen)."""

    name: str = ""
    description: str = ""
    requires: frozenset = frozenset()
    hold_s: float = 8.0

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random()
        self.victim = None   # what inject() chose (broker ids, node index, ...), for describe()

    @classmethod
    def applicable(cls, cluster) -> bool:
        return cls.requires <= set(getattr(cluster, "capabilities", ()))

    def inject(self, cluster) -> None:
        raise NotImplementedError

    def heal(self, cluster) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name}({self.victim})" if self.victim is not None else self.name


FAULTS: dict[str, type[Fault]] = {}


def register(cls: type[Fault]) -> type[Fault]:
    """Class decorator: add `cls` to FAULTS under `cls.name` (a second class with the same name is an error)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if FAULTS.get(cls.name, cls) is not cls:
        raise ValueError(f"fault name {cls.name!r} registered twice ({FAULTS[cls.name].__name__}, {cls.__name__})")
    FAULTS[cls.name] = cls
    return cls


def load_all() -> dict[str, type[Fault]]:
    """Import every module of FAULT_MODULES that exists (each registers its faults); returns FAULTS."""
    for mod in FAULT_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    return FAULTS


# ------------------------------------------------------------------------------------------------ cluster reads

def controller_id(cluster) -> int | None:
    """The broker id in /controller, or None while there is none."""
    try:
        return json.loads(cluster.zk.get("/controller")[0])["brokerid"]
    except Exception:   # NoNodeError, or a half-written value
        return None


def controller_epoch(cluster) -> int:
    return int(cluster.zk.get("/controller_epoch")[0])


def partition_state(cluster, topic: str, p: int) -> dict:
    """/brokers/topics/<topic>/partitions/<p>/state: {"leader", "leader_epoch", "isr", "controller_epoch", ...}."""
    return json.loads(cluster.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])


def broker(cluster, broker_id: int):
    return next(b for b in cluster.brokers if b.broker_id == broker_id)


def a_leader(cluster, rng: random.Random) -> int:
    """A broker leading some partition of `cluster.workload_topic` (random among them), else a random running
    broker."""
    topic = getattr(cluster, "workload_topic", None)
    leaders = []
    if topic:
        try:
            for p in cluster.zk.get_children(f"/brokers/topics/{topic}/partitions"):
                leaders.append(partition_state(cluster, topic, int(p))["leader"])
        except Exception:
            leaders = []
    running = {b.broker_id for b in cluster.brokers if b.running}
    leaders = sorted({b for b in leaders if b in running})
    return rng.choice(leaders or sorted(running))


def wait_registered(cluster, broker_ids, timeout: float = 60.0) -> None:
    """Bounded wait until every id in `broker_ids` has its ephemeral /brokers/ids/<id>."""
    want = {str(b) for b in broker_ids}
    wait_until(lambda: want <= set(cluster.zk.get_children("/brokers/ids")), timeout, 0.2,
               f"brokers {sorted(want)} registered", ignore=(Exception,))


def wait_unregistered(cluster, broker_id: int, timeout: float = 30.0) -> None:
    wait_until(lambda: str(broker_id) not in cluster.zk.get_children("/brokers/ids"), timeout, 0.2,
               f"broker {broker_id}'s session to expire", ignore=(Exception,))


# ---------------------------------------------------------------------------------------------- process faults

@register
class Kill9(Fault):
    """kill -9 of a random running broker; heal starts it again (log recovery, truncation, catch-up)."""

    name = "kill9"
    description = "SIGKILL a random broker, start it again at heal"
    hold_s = 4.0

    def inject(self, cluster) -> None:
        b = self.rng.choice([b for b in cluster.brokers if b.running])
        self.victim = b.broker_id
        b.kill9()

    def heal(self, cluster) -> None:
        for b in cluster.brokers:
            if not b.running:
                b.start(wait=True, timeout=60)
        if self.victim is not None:
            wait_registered(cluster, [self.victim])


class _Pause(Fault):
    """SIGSTOP of one broker for longer than the ZooKeeper session timeout, then SIGCONT.

    While stopped the broker's session expires (its /brokers/ids znode goes, the controller -- a new one if it was
    the controller -- elects other leaders and bumps the leader epochs). After SIGCONT the zombie still believes
    what it believed at SIGSTOP; it must be fenced: its stale requests refused by epoch (leader epoch, controller
    epoch, broker epoch), its sessions re-created, and nothing it acknowledged before or after lost.
    `inject` returns once the session has expired (bounded: session timeout + margin)."""

    hold_s = 2.0

    def pick(self, cluster) -> int:
        raise NotImplementedError

    def inject(self, cluster) -> None:
        self.victim = self.pick(cluster)
        b = broker(cluster, self.victim)
        os.kill(b.pid, signal.SIGSTOP)
        self.stopped_at = time.monotonic()
        wait_unregistered(cluster, self.victim, timeout=40)

    def heal(self, cluster) -> None:
        if self.victim is None:
            return
        b = broker(cluster, self.victim)
        if b.running:
            os.kill(b.pid, signal.SIGCONT)
        wait_registered(cluster, [self.victim])


@register
class PauseLeader(_Pause):
    name = "pause-leader"
    description = "SIGSTOP a leader of the workload topic past the session timeout, then SIGCONT"

    def pick(self, cluster) -> int:
        return a_leader(cluster, self.rng)


@register
class PauseController(_Pause):
    name = "pause-controller"
    description = "SIGSTOP the controller past the session timeout, then SIGCONT"

    def pick(self, cluster) -> int:
        # a 1-tuple: broker 0 is a valid controller id and would be falsy for wait_until
        return wait_until(lambda: controller_id(cluster) is not None and (controller_id(cluster),), 30, 0.2,
                          "a controller")[0]


# --------------------------------------------------------------------------------------------- history checks

def check_producers(producers, consumed: dict):
    """The checker run once per NumberedProducer (each writes its own value range, starting at its `first`, and
    the checker's order check holds per producer only) -> (combined Report, [per-producer Report]).

    `consumed` is read_all()'s {partition: [(offset, value)]}; each producer sees the records whose value falls in
    [first, next producer's first). The combined report sums the counts (examples from the per-producer ones)."""
    from tests.integration.checker import Report, check

    firsts = sorted(p.first for p in producers)
    reports = []
    for prod in producers:
        above = [f for f in firsts if f > prod.first]
        hi = above[0] if above else float("inf")
        mine = {p: [(o, v) for o, v in recs if prod.first <= int(v) < hi] for p, recs in consumed.items()}
        reports.append(check(prod.acked, mine))
    total = Report()
    for r in reports:
        for f in ("acknowledged", "consumed", "lost", "misplaced", "duplicated", "out_of_order", "unacked_present",
                  "offset_gaps"):
            setattr(total, f, getattr(total, f) + getattr(r, f))
        for k, v in r.examples.items():
            total.examples.setdefault(k, []).extend(v[:5 - len(total.examples.get(k, []))])
    return total, reports
