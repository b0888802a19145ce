"""Disk faults (issue 16 items 4-6): failing log dirs (KIP-112), a slow follower, power loss -- each with the history
checker (tests/integration/checker.py) and the fault classes of tests/integration/faults_disk.py.

One 3-node ensemble and one 3-broker cluster for the module (zookeeper.session.timeout.ms 4000,
replica.lag.time.max.ms 2000), every broker started with kbroker's test-only I/O switch (KBROKER_TEST_IO_FAULTS=1).
Log dirs: broker 0 `<tmpfs 8 MiB>,<logs>`, broker 1 `<extra>,<logs>`, broker 2 `<logs>`; a new partition goes to the
dir holding the fewest partitions, the first on ties. Tests run in file order:

1. `test_full_log_dir_goes_offline` -- topics `full-a` and `full-b` (1 partition each, replicas [0, 1, 2], min ISR 2)
   are led by broker 0, one in each of its dirs; idempotent acks=all producers write both. The tmpfs is filled
   (ENOSPC). The partition in it must go offline on broker 0 only: its leadership moves to broker 1 and broker 0
   leaves its ISR, every broker's Metadata (v5) lists broker 0 in its offline_replicas, a Produce to broker 0 for
   it answers KAFKA_STORAGE_ERROR (56), DescribeLogDirs reports the dir
   with 56 and the other with its partition; the other partition stays led by broker 0 and keeps acknowledging. The
   checker reports 0 lost / duplicated / out of order. Repair (ballast removed) + restart: broker 0 is back in the
   ISR and its copy is byte-identical to broker 1's below the high watermark (nothing left corrupt).
2. `test_failing_io_log_dir_goes_offline` (soak: `-m soak`) -- the same with injected EIO in broker 1's first dir.
3. `test_slow_follower_leaves_isr_and_rejoins` -- broker 2's replicated appends wait 5 s each: it leaves the ISR
   of `slow` within replica.lag.time.max.ms + the expiry check's period (+ slack), the longest gap between two
   acknowledgements of a steady acks=all producer stays within that bound, and once fast again it rejoins; the
   checker reports nothing lost.
4. `test_power_loss_rf3_recovers_rf1_loses` -- default flush settings (no fsync but at segment rolls): records
   acknowledged on `pl3` (RF 3, led by broker 2) and `pl1` (RF 1, on broker 2), then broker 2 loses power
   (kill -9 + every log cut back to its last recovery-point checkpoint). After its restart `pl3` lost nothing (the
   other replicas had every acknowledged record; broker 2 re-fetches them) while `pl1` lost exactly the acknowledged
   records above the checkpointed recovery point -- the loss Kafka's documentation accepts for an unreplicated
   topic without `flush.messages`; the test asserts lost > 0 there.
5. `test_broker_halts_when_its_last_log_dir_fails` (its own embedded broker) -- every log dir offline: exit code 1.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from kbroker import errors
from kbroker.client.connection import BrokerConnection
from kbroker.client.simple import make_batch
from tests.integration import faults_disk
from tests.integration.checker import check
from tests.integration.harness import wait_until
from tests.integration.test_replication_common import (NumberedProducer, RCluster, committed_bytes, read_all,
                                                       require_zookeeper)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

LAG_MS = 2000
PRODUCER = {"enable.idempotence": True, "acks": "all", "message.timeout.ms": 120000,
            "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000}


class DiskCluster(RCluster):
    capabilities = frozenset({"tmpfs", "io-injection"})

    def __init__(self, base: Path):
        super().__init__(base, overrides={"replica.lag.time.max.ms": LAG_MS, "zookeeper.session.timeout.ms": 4000})
        self.tmpfs_dirs = {0: self.base / "tmpfs0"}
        self.extra_dirs = {1: self.base / "extra1"}
        faults_disk.mount_tmpfs(self.tmpfs_dirs[0], "8m")
        self.extra_dirs[1].mkdir(parents=True, exist_ok=True)
        first = {0: self.tmpfs_dirs[0], 1: self.extra_dirs[1]}
        for b in self.brokers:
            b.extra_env.update(faults_disk.INJECT_ENV)
            if b.broker_id in first:
                b.overrides["log.dirs"] = f"{first[b.broker_id]},{b.log_dir}"

    def close(self) -> None:
        try:
            for b in self.brokers:          # nothing to keep: no controlled shutdowns (8 s of the module)
                if b.running:
                    b.kill9()
            super().close()
        finally:
            faults_disk.umount(self.tmpfs_dirs[0])


class TimedProducer(NumberedProducer):
    """NumberedProducer that also keeps the monotonic time of every successful delivery report."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.ack_times: list = []

    def _report(self, err, msg):
        if err is None:
            self.ack_times.append(time.monotonic())
        super()._report(err, msg)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_zookeeper()
    if not faults_disk.tmpfs_available():
        pytest.skip("cannot mount a tmpfs here (needs root)")
    c = DiskCluster(tmp_path_factory.mktemp("faults-disk"))
    try:
        c.start()
        yield c
    finally:
        c.close()


# ------------------------------------------------------------------------------------------------ helpers

def produce_raw(broker, topic: str, p: int) -> int:
    """One Produce v7 (acks=all) of one record to `broker` for topic-p; returns the partition's error code."""
    with BrokerConnection(broker.host, broker.port, timeout=10) as conn:
        resp = conn.request("Produce", {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": p, "records": make_batch([(b"k", b"v")])}]}]}, version=7)
    return resp["responses"][0]["partition_responses"][0]["error_code"]


def describe_log_dirs(broker) -> dict:
    """DescribeLogDirs v1 of every partition -> {log dir: (error code, {topic names})}."""
    with BrokerConnection(broker.host, broker.port, timeout=10) as conn:
        resp = conn.request("DescribeLogDirs", {"topics": None}, version=1)
    return {r["log_dir"]: (r["error_code"], {t["name"] for t in r["topics"]}) for r in resp["results"]}


def offline_replicas(broker, topic: str) -> list:
    """Metadata v5's offline_replicas of topic-0 as `broker` answers it."""
    with BrokerConnection(broker.host, broker.port, timeout=10) as conn:
        resp = conn.request("Metadata", {"topics": [{"name": topic}], "allow_auto_topic_creation": False}, version=5)
    (t,) = resp["topics"]
    return sorted(t["partitions"][0]["offline_replicas"])


def dir_holding(broker_dirs, topic: str, p: int = 0) -> Path:
    (d,) = [Path(d) for d in broker_dirs if (Path(d) / f"{topic}-{p}").is_dir()]
    return d


def partition_dir(cluster, broker_id: int, topic: str, p: int = 0) -> Path:
    """The directory of topic-p on broker `broker_id`, whichever of its log dirs holds it."""
    dirs = [cluster.brokers[broker_id].log_dir, cluster.tmpfs_dirs.get(broker_id), cluster.extra_dirs.get(broker_id)]
    return dir_holding([d for d in dirs if d is not None], topic, p) / f"{topic}-{p}"


def run_checker(cluster, producers: dict) -> None:
    for topic, prod in producers.items():
        prod.stop()
        assert not prod.failed, f"{topic}: delivery failures {prod.failed[:5]}"
        report = check(prod.acked, read_all(cluster.bootstrap, topic, 1))
        print(f"{topic}: {report.summary()}")
        assert report.ok and report.lost == 0, report.summary()
        assert report.acknowledged == len(prod.acked) > 0


def dir_failure_scenario(cluster, victim: int, failing: Path, other: Path, prefix: str, fault) -> None:
    """Module docstring, tests 1 and 2: `fault` (a faults_disk Fault aimed at `victim`'s dir `failing`)."""
    a, b = f"{prefix}-a", f"{prefix}-b"
    others = [i for i in range(3) if i != victim]
    for t in (a, b):
        cluster.create_topic(t, assignment=[[victim, *others]], configs={"min.insync.replicas": "2"})
    for t in (a, b):
        cluster.wait_full_isr(t, 1)
    dirs = (failing, other)
    assert dir_holding(dirs, a) == failing and dir_holding(dirs, b) == other
    producers = {t: NumberedProducer(cluster.bootstrap, t, 1, PRODUCER, rate=100).start() for t in (a, b)}
    wait_until(lambda: all(len(p.acked) >= 50 for p in producers.values()), 30, 0.1, "first acknowledgements")

    fault.victim = None
    fault.rng.choice = lambda seq: victim           # aim the fault at this broker
    fault.inject(cluster)
    t0 = time.monotonic()
    wait_until(lambda: cluster.state(a, 0)["leader"] != victim and victim not in cluster.state(a, 0)["isr"], 30,
               0.1, f"{a}: leadership away from broker {victim} and out of its ISR")
    moved_s = time.monotonic() - t0
    st_b = cluster.state(b, 0)
    assert st_b["leader"] == victim and victim in st_b["isr"], st_b
    acked_b = len(producers[b].acked)
    wait_until(lambda: len(producers[b].acked) >= acked_b + 100, 30, 0.1, f"{b} keeps acknowledging on {victim}")
    vb = cluster.brokers[victim]
    assert produce_raw(vb, a, 0) == errors.KAFKA_STORAGE_ERROR      # appends nothing
    for br in cluster.brokers:                      # every broker's metadata names the offline replica
        wait_until(lambda: offline_replicas(br, a) == [victim], 10, 0.1, f"offline replicas of {a} on {br}")
        assert offline_replicas(br, b) == []
    logdirs = describe_log_dirs(vb)
    assert logdirs[str(failing)] == (errors.KAFKA_STORAGE_ERROR, set()), logdirs
    assert logdirs[str(other)][0] == 0 and b in logdirs[str(other)][1], logdirs
    acked_a = len(producers[a].acked)
    wait_until(lambda: len(producers[a].acked) >= acked_a + 100, 30, 0.1, f"{a} acknowledged by its new leader")
    print(f"{prefix}: leadership of {a} moved {moved_s:.2f} s after the fault")
    run_checker(cluster, producers)

    fault.heal(cluster)                             # repair + restart
    cluster.wait_registered()
    cluster.wait_full_isr(a, 1)
    assert describe_log_dirs(vb)[str(failing)][0] == 0
    assert offline_replicas(vb, a) == []
    hw = len(read_all(cluster.bootstrap, a, 1)[0])
    mine = committed_bytes(failing / f"{a}-0", hw)
    theirs = committed_bytes(partition_dir(cluster, others[0], a), hw)
    assert len(mine) > 0 and mine == theirs


# ------------------------------------------------------------------------------------------------ tests

def test_full_log_dir_goes_offline(cluster):
    dir_failure_scenario(cluster, 0, cluster.tmpfs_dirs[0], cluster.brokers[0].log_dir, "full",
                         faults_disk.DiskFull())


@pytest.mark.soak
def test_failing_io_log_dir_goes_offline(cluster):
    """.venv/bin/python -m pytest -m soak tests/integration/test_faults_disk.py (its in-suite twin: the same
    assertions on ENOSPC, test_full_log_dir_goes_offline; the EIO path's unit test: test_log_dir_failure.py)"""
    dir_failure_scenario(cluster, 1, cluster.extra_dirs[1], cluster.brokers[1].log_dir, "eio",
                         faults_disk.DiskIoErrors())


def test_slow_follower_leaves_isr_and_rejoins(cluster):
    topic = "slow"
    cluster.create_topic(topic, assignment=[[0, 1, 2]], configs={"min.insync.replicas": "2"})
    cluster.wait_full_isr(topic, 1)
    prod = TimedProducer(cluster.bootstrap, topic, 1, PRODUCER, rate=100).start()
    wait_until(lambda: len(prod.acked) >= 50, 30, 0.1, "first acknowledgements")
    fault = faults_disk.SlowFollowerDisk()
    fault.rng.choice = lambda seq: 2
    fault.inject(cluster)
    t0 = time.monotonic()
    wait_until(lambda: 2 not in cluster.state(topic, 0)["isr"], 20, 0.1, "broker 2 out of the ISR")
    left_s = time.monotonic() - t0
    # lag + the expiry check's period (lag / 2) + the ISR write, the produce round trip and two busy cores (a run
    # under load saw 5.0 s once; 2.8-3.4 s is usual)
    bound_s = LAG_MS / 1000 * 1.5 + 2.5
    n = len(prod.ack_times)
    wait_until(lambda: len(prod.ack_times) >= n + 200, 30, 0.1, "acknowledgements go on without broker 2")
    fault.heal(cluster)
    t1 = time.monotonic()
    wait_until(lambda: 2 in cluster.state(topic, 0)["isr"], 30, 0.1, "broker 2 back in the ISR")
    rejoin_s = time.monotonic() - t1
    times = [t for t in prod.ack_times if t >= t0 - 1]
    gap, at = max((b - a, a) for a, b in zip(times, times[1:]))
    print(f"slow follower: out of the ISR after {left_s:.2f} s, longest acknowledgement gap {gap:.2f} s from "
          f"{at - t0:+.2f} s (bound {bound_s:.1f} s), back in the ISR {rejoin_s:.2f} s after the disk was fast again "
          f"(at {t1 - t0:+.2f} s)")
    assert left_s <= bound_s
    assert gap <= bound_s
    run_checker(cluster, {topic: prod})


def test_power_loss_rf3_recovers_rf1_loses(cluster):
    cluster.create_topic("pl3", assignment=[[2, 0, 1]], configs={"min.insync.replicas": "2"})
    cluster.create_topic("pl1", assignment=[[2]])
    cluster.wait_full_isr("pl3", 1)
    producers = {t: NumberedProducer(cluster.bootstrap, t, 1, PRODUCER, rate=200).start() for t in ("pl3", "pl1")}
    wait_until(lambda: all(len(p.acked) >= 300 for p in producers.values()), 30, 0.1, "acknowledgements")
    for p in producers.values():
        p.stop()
        assert not p.failed
    fault = faults_disk.PowerLoss()
    fault.rng.choice = lambda seq: cluster.brokers[2]
    fault.inject(cluster)                           # kill -9 + page cache lost
    cut = faults_disk.lose_page_cache(cluster.brokers[2].log_dir)    # idempotent: what it cut, for the report
    cluster.wait_isr("pl3", [0], lambda p: [0, 1], 30)
    fault.heal(cluster)
    cluster.wait_registered()
    cluster.wait_full_isr("pl3", 1)
    r3 = check(producers["pl3"].acked, read_all(cluster.bootstrap, "pl3", 1))
    print(f"power loss, RF 3: {r3.summary()}")
    assert r3.ok and r3.lost == 0 and r3.acknowledged > 0
    hw = r3.consumed
    mine, theirs = (committed_bytes(partition_dir(cluster, i, "pl3"), hw) for i in (2, 0))
    assert len(mine) > 0 and mine == theirs
    rp = cut[("pl1", 0)][0]
    expect_lost = sum(1 for _p, off, _v in producers["pl1"].acked if off >= rp)
    wait_until(lambda: cluster.state("pl1", 0)["leader"] == 2, 30, 0.1, "pl1 led by broker 2 again")
    r1 = check(producers["pl1"].acked, read_all(cluster.bootstrap, "pl1", 1))
    print(f"power loss, RF 1 (recovery point {rp}): {r1.summary()}")
    assert expect_lost > 0 and r1.lost == expect_lost
    assert r1.duplicated == 0 and r1.out_of_order == 0


def test_fault_classes_registered():
    from tests.integration import faults
    for name in ("disk-full", "disk-eio", "slow-follower", "power-loss"):
        assert faults.FAULTS[name].name == name



def test_broker_halts_when_its_last_log_dir_fails(tmp_path):
    """One embedded broker, one log dir: when it fails (injected EIO) nothing can be written anywhere, so the broker
    exits with code 1 (Kafka's Exit.halt(1)) after answering the failed Produce with 56; after the repair it starts,
    recovers the log and serves every record acknowledged before the failure."""
    from kbroker.client.admin import AdminClient
    from tests.integration.harness import BrokerProcess

    b = BrokerProcess(tmp_path / "solo", env=faults_disk.INJECT_ENV)
    try:
        b.start(wait=True, timeout=60)
        with AdminClient(b.bootstrap) as admin:
            admin.create_topic("solo", 1, 1)
        wait_until(lambda: produce_raw(b, "solo", 0) == 0, 20, 0.1, "first produce")
        for _ in range(9):
            assert produce_raw(b, "solo", 0) == 0
        (b.log_dir / faults_disk.INJECT_EIO).touch()
        acked = 10

        def refused():                               # (the switch is polled every 100 ms: a write may pass first)
            nonlocal acked
            code = produce_raw(b, "solo", 0)
            acked += code == 0
            assert code in (0, errors.KAFKA_STORAGE_ERROR), code
            return code == errors.KAFKA_STORAGE_ERROR
        wait_until(refused, 10, 0.02, "a Produce answered KAFKA_STORAGE_ERROR")
        wait_until(lambda: b.proc.poll() is not None, 10, 0.1, "the broker to halt")
        assert b.proc.returncode == 1
        assert "all log dirs" in b.log_text()
        (b.log_dir / faults_disk.INJECT_EIO).unlink()
        b.start(wait=True, timeout=60)
        wait_until(lambda: len(read_all(b.bootstrap, "solo", 1)[0]) == acked, 30, 0.5, "the acknowledged records back")
    finally:
        b.close()
