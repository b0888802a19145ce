"""Paused processes (issue 16 item 3): SIGSTOP of a leader and of the controller for longer than the ZooKeeper
session timeout, then SIGCONT -- the zombie is fenced and nothing acknowledged is lost.

One 3-node ensemble and one 3-broker RCluster (session timeout 4 s, replica.lag.time.max.ms 2 s) for the module;
topic `paused` (3 partitions, RF 3, min.insync.replicas=2), an idempotent acks=all producer and the history checker
(tests/integration/checker.py) at the end of each test.

While a broker is stopped its ZooKeeper session expires (its /brokers/ids znode goes), the controller moves its
leaderships (leader epoch + 1) or, if it was the controller, another broker takes over (/controller_epoch + 1).
After SIGCONT the zombie still holds the state it had at SIGSTOP: it believes it leads, or controls, and its
timers fire at once (ISR shrink -- its followers "stopped" fetching from it -- controller duties). Fencing means:

- leader epoch: the zombie's ISR change is a conditional write on the partition state znode version and must
  fail; it becomes a follower on the controller's LeaderAndIsr (higher leader epoch) and truncates to the new
  leader's history. Observed: a watcher polling every partition's state znode from SIGSTOP to the end never sees
  the zombie as leader again, never sees the leader epoch go down, and never sees a state written with a
  controller epoch older than the newest controller's.
- controller epoch: the zombie controller finds /controller taken and writes nothing (same watcher).
- broker epoch (KIP-380): the zombie registers again with a new /brokers/ids/<id> czxid, larger than before.
- data: 0 lost, 0 duplicated, 0 out of order; partition 0's replicas byte-identical below the high watermark.

`test_pause_*_long` (soak): the same with a 20 s pause and two pauses in a row.
Soak command: `.venv/bin/python -m pytest -m soak tests/integration/test_faults_pause.py`.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.integration import faults
from tests.integration.harness import wait_until
from tests.integration.test_replication_common import (
    NumberedProducer, RCluster, committed_bytes, read_all, require_zookeeper)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

SESSION_MS = 4000
OVERRIDES = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 2000,
             # a follower whose fetch went into a cut notices in 3 s (default 30 s, as Kafka) and fetches again
             "replica.socket.timeout.ms": 3000}
ELECTION_S = SESSION_MS / 1000 + 16
TOPIC = "paused"
PARTITIONS = 3
PRODUCER = {"enable.idempotence": True, "acks": "all", "message.timeout.ms": 300000, "request.timeout.ms": 5000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_zookeeper()
    c = RCluster(tmp_path_factory.mktemp("faults-pause"), overrides=OVERRIDES)
    try:
        c.start()
        c.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
        c.wait_full_isr(TOPIC, PARTITIONS)
        c.workload_topic = TOPIC
        yield c
    finally:
        c.close()


class StateWatcher:
    """Polls /controller_epoch and every partition's state znode of `topic` every 50 ms in a thread; keeps every
    distinct (partition, znode version, state) seen and the controller epochs seen, for the fencing checks."""

    def __init__(self, cluster, topic: str, partitions: int):
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.seen: list = []        # (monotonic time, partition, znode version, state dict)
        self.epochs: list = []      # (monotonic time, controller epoch)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="state-watcher")

    def _run(self):
        import json

        last = {}
        while not self._stop.is_set():
            try:
                e = faults.controller_epoch(self.cluster)
                if not self.epochs or self.epochs[-1][1] != e:
                    self.epochs.append((time.monotonic(), e))
                for p in range(self.partitions):
                    data, stat = self.cluster.zk.get(f"/brokers/topics/{self.topic}/partitions/{p}/state")
                    if last.get(p) != stat.version:
                        last[p] = stat.version
                        self.seen.append((time.monotonic(), p, stat.version, json.loads(data)))
            except Exception:   # a connection blip of the test's own kazoo client: poll again
                pass
            self._stop.wait(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def broker_epoch(cluster, broker_id: int) -> int:
    return cluster.zk.get(f"/brokers/ids/{broker_id}")[1].czxid


def pause(cluster, victim: int, extra_s: float) -> dict:
    """SIGSTOP `victim`, wait for its session to expire and for the controller to act, `extra_s` more, SIGCONT,
    wait until it registered again. Returns timings and the broker epochs before/after."""
    b = faults.broker(cluster, victim)
    epoch_before = broker_epoch(cluster, victim)
    os.kill(b.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        faults.wait_unregistered(cluster, victim, timeout=ELECTION_S)
        expired_s = time.monotonic() - t0
        # the controller (another broker, or a new controller) moves every leadership away from the victim
        wait_until(lambda: all(faults.partition_state(cluster, TOPIC, p)["leader"] != victim
                               and victim not in faults.partition_state(cluster, TOPIC, p)["isr"]
                               for p in range(PARTITIONS)), ELECTION_S, 0.2,
                   f"leaders and ISRs without broker {victim}", ignore=(Exception,))
        moved_s = time.monotonic() - t0
        time.sleep(extra_s)   # keep the zombie asleep while the others go on taking writes
    finally:
        os.kill(b.pid, signal.SIGCONT)
    woke = time.monotonic()
    faults.wait_registered(cluster, [victim], timeout=ELECTION_S)
    return {"expired_s": expired_s, "moved_s": moved_s, "paused_s": woke - t0, "woke": woke,
            "epoch_before": epoch_before, "epoch_after": broker_epoch(cluster, victim)}


def assert_fenced(watch: StateWatcher, victim: int, woke: float, new_controller_epoch: int) -> None:
    """Nothing the watcher saw after the victim woke names it leader or lowers a leader epoch, and every election
    seen after it woke (a state whose leader epoch went up: only a controller elects) was written under the newest
    controller epoch -- a zombie controller's would carry its old one. (An ISR-only change keeps the controller
    epoch of the election it follows, as in Kafka: the leader writes back the epoch its LeaderAndIsr carried.)"""
    highest = {}
    for t, p, version, s in watch.seen:
        assert s["leader_epoch"] >= highest.get(p, -1), (p, version, s)
        elected = s["leader_epoch"] > highest.get(p, -1)
        highest[p] = s["leader_epoch"]
        if t >= woke:
            assert s["leader"] != victim, f"zombie {victim} leads {TOPIC}-{p} again: {s}"
            if elected:
                assert s["controller_epoch"] >= new_controller_epoch, f"{TOPIC}-{p} elected by a stale controller: {s}"
    assert [e for _, e in watch.epochs] == sorted({e for _, e in watch.epochs}), watch.epochs


def finish(cluster, prod, label: str) -> None:
    """Every replica back in every ISR, the producer flushed, the checker clean, partition 0's replicas equal."""
    try:
        cluster.wait_full_isr(TOPIC, PARTITIONS, timeout=60)
        base = len(prod.acked)
        wait_until(lambda: len(prod.acked) >= base + 100, 30, 0.1, "100 more acks after the zombie returned")
    finally:
        prod.stop()
    # the topic holds every earlier test's records too: check_producers keeps this producer's value range
    report, _ = faults.check_producers([prod], read_all(cluster.bootstrap, TOPIC, PARTITIONS))
    print(f"checker ({label}): {report.summary()}")
    assert prod.fatal is None and prod.failed == [], (prod.fatal, prod.failed[:5])
    assert report.acknowledged == prod.sent > 0 and report.unacked_present == 0
    assert (report.lost, report.misplaced, report.duplicated, report.out_of_order, report.offset_gaps) == \
        (0, 0, 0, 0, 0), report.summary()
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bytes"})
    try:
        hw = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
    finally:
        c.close()
    wait_until(lambda: len({committed_bytes(cluster.partition_dir(b, TOPIC, 0), hw) for b in cluster.brokers}) == 1,
               30, 0.2, f"{TOPIC}-0 replicas byte-identical below HW {hw}")


def run_pause(cluster, victim_of, label: str, extra_s: float = 1.0, rounds: int = 1) -> None:
    prod = NumberedProducer(cluster.bootstrap, TOPIC, PARTITIONS, PRODUCER, rate=200, first=len_first(cluster))
    prod.start()
    wait_until(lambda: len(prod.acked) >= 100, 30, 0.1, "100 acks before the pause")
    with StateWatcher(cluster, TOPIC, PARTITIONS) as watch:
        for _ in range(rounds):
            victim = victim_of(cluster)
            was_controller = faults.controller_id(cluster) == victim
            epoch = faults.controller_epoch(cluster)
            t = pause(cluster, victim, extra_s)
            controller = faults.controller_id(cluster)
            new_epoch = faults.controller_epoch(cluster)
            print(f"\n{label}: broker {victim} (controller: {was_controller}) stopped {t['paused_s']:.1f}s; session "
                  f"expired after {t['expired_s']:.1f}s, leaderships moved after {t['moved_s']:.1f}s; broker epoch "
                  f"{t['epoch_before']} -> {t['epoch_after']}; controller {controller}, epoch {epoch} -> {new_epoch}")
            assert t["epoch_after"] > t["epoch_before"]
            if was_controller:
                assert controller != victim and new_epoch > epoch
            cluster.wait_full_isr(TOPIC, PARTITIONS, timeout=60)
            assert_fenced(watch, victim, t["woke"], new_epoch)
    finish(cluster, prod, label)


def len_first(cluster) -> int:
    """Each test's producer writes its own value range (the checker identifies records by value)."""
    cluster.runs = getattr(cluster, "runs", 0) + 1
    return cluster.runs * 10_000_000


def a_leader_not_controller(cluster) -> int:
    """The lowest-numbered partition's leader that is not the controller (a pure leader pause)."""
    ctl = faults.controller_id(cluster)
    return next(s["leader"] for p in range(PARTITIONS)
                if (s := faults.partition_state(cluster, TOPIC, p))["leader"] != ctl)


def test_paused_leader_is_fenced(cluster):
    run_pause(cluster, a_leader_not_controller, "SIGSTOP of a leader")


def test_paused_controller_is_fenced(cluster):
    run_pause(cluster, faults.PauseController().pick, "SIGSTOP of the controller")


@pytest.mark.soak
def test_pause_leader_long(cluster):
    """`.venv/bin/python -m pytest -m soak tests/integration/test_faults_pause.py`"""
    run_pause(cluster, lambda c: faults.a_leader(c, faults.random.Random(7)), "SIGSTOP of a leader, 20 s, twice",
              extra_s=15.0, rounds=2)


@pytest.mark.soak
def test_pause_controller_long(cluster):
    """`.venv/bin/python -m pytest -m soak tests/integration/test_faults_pause.py`"""
    run_pause(cluster, faults.PauseController().pick, "SIGSTOP of the controller, 20 s, twice", extra_s=15.0,
              rounds=2)
