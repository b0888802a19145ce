"""ZooKeeper faults (issue 16 item 1): a node down, the whole ensemble down, a live broker's session expiring, and a
broker stopped while ZooKeeper is down. The faults are tests/integration/faults_zk.py's.

One 3-node ensemble and one 3-broker cluster (RCluster, chroot /kbr) for the module; zookeeper.session.timeout.ms
= 4000 and replica.lag.time.max.ms = 2000 keep every wait short. Topic `zkf`: 3 partitions, RF 3,
min.insync.replicas=2. Every test runs a workload -- an idempotent acks=all producer at 200 records/s (its own value
range) and a consumer tailing every partition -- and ends with the history checker over everything the topic holds
(0 lost, 0 duplicated, 0 out of order; `report.summary()` printed).

1. `test_one_zookeeper_node_down_changes_nothing` -- SIGKILL the quorum leader for session timeout + 1.5 s, restart
   it: acknowledgements and consumption go on throughout, and nothing changes in ZooKeeper's view of the cluster:
   same /controller_epoch, same broker sessions (ephemeralOwner) and epochs (czxid), same leaders and leader epochs.
2. `test_ensemble_down_keeps_serving_and_blocks_what_needs_zookeeper` (8 s outage; the soak twin holds 60 s:
   `.venv/bin/python -m pytest -m soak tests/integration/test_faults_zookeeper.py`) -- every node SIGKILLed. First
   half: the current leaders keep acknowledging and serving fetches; CreateTopics answers an error within the
   ZooKeeper operation timeout + 3 s. Then follower-and-leader Y is SIGKILLed: no new leader is elected for its
   partitions (the survivors still name Y) and no ISR shrinks, so no acks=all write is acknowledged until ZooKeeper
   is back (an ISR that shrank in memory only would acknowledge on two replicas what ZooKeeper's state does not
   know). Then the controller Z gets SIGTERM and must exit (code 0) within controlled.shutdown.max.retries (3) x
   controlled.shutdown.retry.backoff.ms (1 s) + the operation timeout (4 s) + 5 s -- it used to hang until killed.
   Heal: the ensemble back, Y and Z restarted, the ISRs full again, a new topic created, the producer's backlog
   acknowledged, nothing lost.
3. `test_controller_session_expiry_while_running` -- the controller's session is ended on the server while the
   process runs on (faults_zk: the test joins the session with the password ZooKeeper derives from its id and
   closes it). The broker re-registers by itself with a larger broker epoch (czxid); /controller_epoch only grows
   (every value a data watch saw); in every broker's state-change log the LeaderAndIsr requests accepted carry
   non-decreasing controller epochs and each epoch belongs to one controller (no two controllers acted under one
   epoch, none was obeyed after a newer one); while its session was gone the old controller wrote no partition
   state in which it kept its leadership and leader epoch but changed the ISR; the history checker finds nothing
   lost.
"""
from __future__ import annotations

import contextlib
import json
import random
import re
import threading
import time

import pytest

from tests.integration import faults
from tests.integration import faults_zk  # noqa: F401 - registers the ZooKeeper faults
from tests.integration.checker import check
from tests.integration.harness import wait_until
from tests.integration.test_replication_common import (
    NumberedProducer, RCluster, metadata, read_all, require_zookeeper)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

SESSION_MS = 4000
OP_TIMEOUT_S = SESSION_MS / 1000          # zk.py: operation_timeout_ms defaults to the session timeout
SHUTDOWN_RETRIES, SHUTDOWN_BACKOFF_S = 3, 1.0
TOPIC, PARTITIONS = "zkf", 3
RATE = 200
OVERRIDES = {
    "zookeeper.session.timeout.ms": SESSION_MS,
    "replica.lag.time.max.ms": 2000,
    "controlled.shutdown.max.retries": SHUTDOWN_RETRIES,
    "controlled.shutdown.retry.backoff.ms": int(SHUTDOWN_BACKOFF_S * 1000),
}
# A failure is seen within the session timeout; elections and restarts on two busy cores get 16 s more.
RECOVER_S = SESSION_MS / 1000 + 16


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_zookeeper()
    c = RCluster(tmp_path_factory.mktemp("zk-faults"), overrides=OVERRIDES)
    try:
        c.start()
        c.workload_topic = TOPIC
        c.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
        c.wait_full_isr(TOPIC, PARTITIONS)
        yield c
    finally:
        c.close()


@pytest.fixture
def healthy(cluster):
    """Every broker and ZooKeeper node running, every broker registered, full ISRs."""
    for i in range(cluster.ensemble.n):
        if not cluster.ensemble.running(i):
            cluster.ensemble.start_node(i, wait=True)
    cluster.ensure_all_running()
    cluster.wait_full_isr(TOPIC, PARTITIONS, timeout=RECOVER_S)
    return cluster


# ------------------------------------------------------------------------------------------------ the workload

class TimedProducer(NumberedProducer):
    """NumberedProducer that also keeps the monotonic time of every successful delivery report."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ack_times: list[float] = []

    def _report(self, err, msg):
        if err is None:
            self.ack_times.append(time.monotonic())
        super()._report(err, msg)

    def acks_between(self, t0: float, t1: float) -> int:
        return sum(1 for t in list(self.ack_times) if t0 <= t < t1)

    def longest_gap(self, t0: float, t1: float) -> float:
        """The longest time in [t0, t1] without a successful delivery report (a stall)."""
        times = [t0] + [t for t in list(self.ack_times) if t0 <= t < t1] + [t1]
        return max(b - a for a, b in zip(times, times[1:]))


class Tail:
    """A consumer thread tailing every partition of `topic` from its end; keeps the monotonic receive times."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.times: list[float] = []
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tail", daemon=True)

    def start(self) -> "Tail":
        self._thread.start()
        return self

    def _run(self):
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"tail-{time.monotonic_ns()}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        try:
            c.assign([TopicPartition(self.topic, p, OFFSET_END) for p in range(self.partitions)])
            while not self._stop.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    self.times.append(time.monotonic())
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            c.close()

    def received_between(self, t0: float, t1: float) -> int:
        return sum(1 for t in list(self.times) if t0 <= t < t1)

    def stop(self):
        self._stop.set()
        self._thread.join(30)


@contextlib.contextmanager
def workload(cluster, first: int):
    """Producer (values from `first`) and tail consumer; on exit the producer flushes and the checker runs over
    the whole topic (`first` of each test is above every earlier test's values, so the order check holds)."""
    producer = TimedProducer(cluster.bootstrap, TOPIC, PARTITIONS, {
        "enable.idempotence": True, "acks": "all", "message.timeout.ms": 300000, "request.timeout.ms": 10000},
        rate=RATE, first=first).start()
    tail = Tail(cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        wait_acks(producer, 100)
        yield producer, tail
    finally:
        tail.stop()
        producer.stop()
    assert tail.error is None, tail.error
    assert producer.fatal is None and producer.failed == [], (producer.fatal, producer.failed[:5])
    report = check(producer.acked, read_all(cluster.bootstrap, TOPIC, PARTITIONS))
    print(f"checker: {report.summary()}")
    assert report.acknowledged == producer.sent > 0
    assert (report.lost, report.misplaced, report.duplicated, report.out_of_order, report.offset_gaps) == \
        (0, 0, 0, 0, 0), report.summary()


def wait_acks(producer, n: int, timeout: float = 30.0) -> None:
    target = len(producer.acked) + n
    wait_until(lambda: len(producer.acked) >= target, timeout, 0.05, f"{n} more acknowledgements")


def hold(seconds: float) -> None:
    """Keep a fault in place for `seconds` (a duration under test, not a wait for some state)."""
    time.sleep(seconds)


# ------------------------------------------------------------------------------------------------ cluster reads

def snapshot(cluster) -> dict:
    """What a ZooKeeper fault that changes nothing leaves as it was: controller epoch and id, each broker's
    session and broker epoch, each partition's leader and leader epoch."""
    regs = {}
    for b in cluster.brokers:
        st = cluster.zk.exists(f"/brokers/ids/{b.broker_id}")
        regs[b.broker_id] = (st.ephemeralOwner, st.czxid) if st else None
    parts = {p: (s["leader"], s["leader_epoch"]) for p in range(PARTITIONS)
             for s in [faults.partition_state(cluster, TOPIC, p)]}
    return {"controller": (faults.controller_id(cluster), faults.controller_epoch(cluster)), "brokers": regs,
            "partitions": parts}


ACCEPTED = re.compile(r"^\[([\d\- :,]+)\] INFO Broker (\d+) completed LeaderAndIsr request from controller (\d+) "
                      r"epoch (\d+) .*: error 0 ")


def accepted_leader_and_isr(broker) -> list[tuple[str, int, int]]:
    """[(timestamp, controller id, controller epoch)] of the LeaderAndIsr partitions `broker` accepted (its
    state-change.log, in order)."""
    path = broker.server_log_dir / "state-change.log"
    out = []
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        m = ACCEPTED.match(line)
        if m:
            out.append((m.group(1), int(m.group(3)), int(m.group(4))))
    return out


# ------------------------------------------------------------------------------------------------ tests

def test_one_zookeeper_node_down_changes_nothing(healthy):
    cluster = healthy
    before = snapshot(cluster)
    fault = faults.FAULTS["zk-leader-down"](random.Random(1))
    with workload(cluster, first=0) as (producer, tail):
        fault.inject(cluster)
        t0 = time.monotonic()
        try:
            outage = SESSION_MS / 1000 + 1.5   # longer than a session: the sessions on the dead node must move
            hold(outage)
            acks, got = producer.acks_between(t0, t0 + outage), tail.received_between(t0, t0 + outage)
            gap = producer.longest_gap(t0, t0 + outage)
        finally:
            fault.heal(cluster)
        wait_acks(producer, 100)
    print(f"ZooKeeper node {fault.victim} (the quorum leader) down {outage:.1f} s: {acks} acks, {got} records "
          f"consumed meanwhile, longest time without an acknowledgement {gap:.2f} s")
    # 200 records/s, linger 5 ms: acknowledgements come every few ms; 2 s without one would be a stall (an
    # election, an ISR change), and half the rate leaves room for two busy cores
    assert gap <= 2.0 and acks >= RATE * outage / 2 and got >= RATE * outage / 2, (gap, acks, got)
    assert snapshot(cluster) == before


@pytest.mark.parametrize("outage_s", [8.0, pytest.param(60.0, marks=pytest.mark.soak, id="60s")],
                         ids=lambda v: f"{v:.0f}s")
def test_ensemble_down_keeps_serving_and_blocks_what_needs_zookeeper(healthy, outage_s):
    cluster = healthy
    z = faults.broker(cluster, faults.controller_id(cluster))            # SIGTERMed during the outage
    x, y = [b for b in cluster.brokers if b is not z]                     # x survives, y is SIGKILLed
    y_leads = {p for p in range(PARTITIONS) if faults.partition_state(cluster, TOPIC, p)["leader"] == y.broker_id}
    if not y_leads:   # y must lead something for "no election" to be checked; swap with x
        x, y = y, x
        y_leads = {p for p in range(PARTITIONS)
                   if faults.partition_state(cluster, TOPIC, p)["leader"] == y.broker_id}
    fault = faults.FAULTS["zk-ensemble-down"](random.Random(2))
    with workload(cluster, first=1_000_000 if outage_s < 30 else 1_500_000) as (producer, tail):
        fault.inject(cluster)
        t0 = time.monotonic()
        try:
            # 1. Topic creation needs ZooKeeper: an error within the operation timeout (not a hang).
            from kbroker.client.admin import AdminClient
            from kbroker.errors import KafkaError
            with AdminClient(z.bootstrap, timeout=30) as admin, pytest.raises(KafkaError) as refused:
                admin.create_topic(f"during-outage-{outage_s:.0f}s", 1, 1, timeout_ms=20000)
            create_s = time.monotonic() - t0
            assert create_s <= OP_TIMEOUT_S + 3, create_s

            # 2. Serving goes on: the current leaders need no ZooKeeper to append, replicate and answer fetches.
            hold(max(0.0, outage_s / 2 - create_s))
            t1 = time.monotonic()
            acks, got = producer.acks_between(t0, t1), tail.received_between(t0, t1)
            # the tail consumer trails the producer by its fetch round trips: half the rate is "consuming"
            assert acks >= RATE * (t1 - t0 - 1) and got >= RATE * (t1 - t0 - 1) / 2, (acks, got)

            # 3. Y dies: its partitions keep Y as leader (no election) and no leader drops Y from its ISR, so
            #    no acks=all write is acknowledged (Y is in every ISR: RF 3 on 3 brokers).
            y.kill9()
            killed = time.monotonic()
            hold(max(3.0, outage_s / 2 - (killed - t1)))   # > replica.lag.time.max.ms: the leaders try to shrink
            stalled_from = killed + 1.0                  # requests Y had fetched before dying may still complete
            blocked = time.monotonic()
            assert producer.acks_between(stalled_from, blocked) == 0, producer.acks_between(stalled_from, blocked)
            for b in (x, z):
                lead = {p: s["leader"] for p, s in metadata(b, [TOPIC])["topics"][TOPIC]["partitions"].items()}
                assert {p for p, leader in lead.items() if leader == y.broker_id} == y_leads, (b.broker_id, lead)

            # 4. A SIGTERM with ZooKeeper down ends within a bound (controlled shutdown attempts are skipped).
            started = time.monotonic()
            code = z.stop(timeout=60)
            stop_s = time.monotonic() - started
            bound = SHUTDOWN_RETRIES * SHUTDOWN_BACKOFF_S + 6
            assert code == 0 and stop_s <= bound, (code, stop_s, bound, z.log_tail(30))
            assert "controlled shutdown attempt 1 skipped: not connected to ZooKeeper" in z.log_text()
            down_s = time.monotonic() - t0
        finally:
            fault.heal(cluster)
        healed = time.monotonic()
        for b in (y, z):
            b.start(wait=False)
        for b in (y, z):
            b.wait_ready(60)
        cluster.wait_registered(timeout=RECOVER_S)
        cluster.wait_full_isr(TOPIC, PARTITIONS, timeout=RECOVER_S * 2)
        wait_acks(producer, 200, timeout=RECOVER_S * 2)
        resumed = next(t for t in producer.ack_times if t >= healed)
        cluster.create_topic(f"after-outage-{outage_s:.0f}s", 1, 3)
    print(f"ensemble down {down_s:.1f} s: {acks} acks and {got} records consumed in the first {t1 - t0:.1f} s; "
          f"CreateTopics refused in {create_s:.1f} s ({type(refused.value).__name__}); 0 acks in the "
          f"{blocked - stalled_from:.1f} s after Y died; controller SIGTERM exit in {stop_s:.1f} s (bound "
          f"{bound:.0f} s); first ack {resumed - healed:.1f} s after the ensemble came back")


def test_controller_session_expiry_while_running(healthy):
    cluster = healthy
    victim = faults.broker(cluster, faults.controller_id(cluster))
    old = cluster.zk.exists(f"/brokers/ids/{victim.broker_id}")
    epochs = []
    changes = []   # (monotonic time, partition, state) of every partition state write

    def on_epoch(data, _stat):   # a watch function returning False (exactly) would be cancelled: return None
        if data is not None:
            epochs.append(int(data))

    def watcher(p):
        def on_state(data, _stat):
            if data is not None:
                changes.append((time.monotonic(), p, json.loads(data)))
        return on_state

    cluster.zk.DataWatch("/controller_epoch", on_epoch)

    for p in range(PARTITIONS):
        cluster.zk.DataWatch(f"/brokers/topics/{TOPIC}/partitions/{p}/state", watcher(p))
    before = {p: faults.partition_state(cluster, TOPIC, p) for p in range(PARTITIONS)}
    fault = faults.FAULTS["zk-session-expiry-controller"](random.Random(3))
    with workload(cluster, first=2_000_000) as (producer, _tail):
        fault.inject(cluster)
        expired = time.monotonic()
        fault.heal(cluster)
        back = time.monotonic()
        new = cluster.zk.exists(f"/brokers/ids/{victim.broker_id}")
        wait_until(lambda: (c := faults.controller_id(cluster)) is not None
                   and faults.controller_epoch(cluster) > epochs[0] and (c,), RECOVER_S, 0.1, "a new controller term")
        cluster.wait_full_isr(TOPIC, PARTITIONS, timeout=RECOVER_S)
        wait_acks(producer, 100)
    assert victim.running
    assert new.ephemeralOwner not in (0, old.ephemeralOwner) and new.czxid > old.czxid   # a new broker epoch
    assert epochs == sorted(set(epochs)) and len(epochs) >= 2, epochs
    assert faults.controller_epoch(cluster) == epochs[-1]
    assert "resigns as controller" in victim.log_text()

    # No two controllers: per broker, the controller epochs it obeyed never go back; one controller per epoch.
    owners = {}
    for b in cluster.brokers:
        seen = accepted_leader_and_isr(b)
        assert [e for _, _, e in seen] == sorted(e for _, _, e in seen), (b.broker_id, seen)
        for _, cid, epoch in seen:
            assert owners.setdefault(epoch, cid) == cid, (epoch, owners[epoch], cid)
    assert max(owners) <= epochs[-1], (owners, epochs)   # no epoch beyond what the elections wrote was obeyed

    # While its session was gone, the old controller (a leader too) changed no ISR on its own: a write that kept
    # it leader at the same leader epoch with another ISR would be its own shrink/expand.
    for t, p, state in changes:
        if expired <= t <= back and state["leader"] == victim.broker_id:
            assert state["leader_epoch"] != before[p]["leader_epoch"] or state["isr"] == before[p]["isr"], \
                (p, state, before[p])
    print(f"controller {victim.broker_id}'s session expired: re-registered after {back - expired:.1f} s, broker "
          f"epoch {old.czxid} -> {new.czxid}, controller epochs seen {epochs} (now broker "
          f"{faults.controller_id(cluster)}), LeaderAndIsr epochs obeyed -> controller {owners}, "
          f"{len(changes)} partition state writes")
