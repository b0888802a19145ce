"""KIP-73 replication quotas end to end: 2 broker processes on a real 3-node ZooKeeper ensemble.

A partition holding 20 MB on broker 0 is moved to broker 1 with `kbroker-admin reassign-partitions --execute
--throttle 1000000` (1 MB/s). The tool writes the rates into /config/brokers/<id> and the throttled-replica lists
into /config/topics/<t> as Kafka's does; broker 0 (leader side, `0:0`) and broker 1 (follower side, `0:1`) bound
the copy. The test samples the size of broker 1's copy every 0.2 s and asserts the copy took at least 15.4 s and
averaged at most 1.3 MB/s from its first byte to its last. Unthrottled, the same copy takes about a second here
(replica.fetch.max.bytes = 1 MiB per fetch, back to back), so both checks fail without the quota.

Tolerance (1.3 x the throttle): the rate is Kafka's SimpleRate over 11 x 1 s windows whose elapsed time is never
less than one window, so the copy may run one window ahead (1 MB) plus one fetch past the check (1 MiB) -- about
+10 % over 20 MB -- and the sampling adds 0.2 s at each end (+2 %); the rest is room for a loaded machine, which
only slows the copy. Then `--verify` reports completion, prints "Throttle was removed." and the znodes no longer
hold the rates or the lists.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.integration.harness import REPO_ROOT, wait_until
from tests.integration.test_cluster_common import Cluster

pytestmark = [pytest.mark.zk, pytest.mark.timeout(180)]

TOPIC = "throttled"
THROTTLE = 1_000_000                 # bytes/s
RECORD = 100_000                     # bytes of value per record
N_RECORDS = 200                      # 20 MB
MAX_RATE = 1.3 * THROTTLE            # module docstring: tolerance
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LIST_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("cluster"), zk_ensemble, n=2,
                overrides={"auto.leader.rebalance.enable": "false"})
    try:
        c.start()
        yield c
    finally:
        c.close()


def admin(cluster, *args):
    argv = [sys.executable, "-m", "kbroker.cli.admin", args[0], "--zookeeper", cluster.connect, *args[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=str(REPO_ROOT))
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def log_bytes(broker, topic, p):
    d = broker.log_dir / f"{topic}-{p}"
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.is_dir() else 0


def config(cluster, entity_type, name):
    if not cluster.zk.exists(f"/config/{entity_type}/{name}"):
        return None
    return cluster.get_json(f"/config/{entity_type}/{name}")["config"]


def produce_bulk(bootstrap):
    from confluent_kafka import Producer
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "message.max.bytes": 1_000_000,
                  "compression.type": "none"})
    for i in range(N_RECORDS):
        # Distinct bytes per record (no compression anywhere, but no accidental dedup of pages either).
        p.produce(TOPIC, value=bytes([i % 251]) * RECORD, partition=0,
                  on_delivery=lambda err, msg: err is not None and errors.append(err))
        p.poll(0)
    assert p.flush(60) == 0 and errors == [], errors[:3]


def test_reassignment_with_throttle_moves_no_faster_than_it_and_verify_removes_it(cluster, tmp_path):
    admin(cluster, "topics", "--create", "--topic", TOPIC, "--replica-assignment", "0")
    cluster.wait_topic_everywhere(TOPIC, 1)
    produce_bulk(cluster.bootstrap)
    source, target = cluster.broker(0), cluster.broker(1)
    total = log_bytes(source, TOPIC, 0)
    assert total >= N_RECORDS * RECORD

    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1]}]}))
    out = admin(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                "--throttle", str(THROTTLE))
    assert out.splitlines()[-3:] == [
        "Warning: You must run Verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed. You can also alter the throttle by rerunning the Execute command passing a new value.",
        f"The throttle limit was set to {THROTTLE} B/s", "Successfully started reassignment of partitions."], out
    # What Kafka's tool writes: both rates on every broker involved, the lists on the moved topic.
    for b in ("0", "1"):
        assert config(cluster, "brokers", b) == {k: str(THROTTLE) for k in RATE_KEYS}
    assert config(cluster, "topics", TOPIC) == {LIST_KEYS[0]: "0:0", LIST_KEYS[1]: "0:1"}

    # Sample the growth of broker 1's copy.
    samples = []
    deadline = time.monotonic() + 3 * total / THROTTLE + 30
    while time.monotonic() < deadline:
        n = log_bytes(target, TOPIC, 0)
        samples.append((time.monotonic(), n))
        if n >= total:
            break
        time.sleep(0.2)
    assert samples[-1][1] >= total, f"copy incomplete: {samples[-1][1]} of {total} bytes"
    t_first = next(t for t, n in samples if n > 0)
    elapsed = samples[-1][0] - t_first
    rate = total / elapsed
    assert rate <= MAX_RATE, f"{total} bytes in {elapsed:.1f} s: {rate:.0f} B/s > {MAX_RATE:.0f}"
    assert elapsed >= total / MAX_RATE, elapsed

    # --verify: completion, then the throttle is removed (rates from every broker, lists from the topic).
    def completed():
        out = admin(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
        return out if f"Reassignment of partition [{TOPIC},0] completed successfully" in out else None
    out = wait_until(completed, 30, 0.5, "the reassignment to complete")
    assert out.splitlines()[-1] == "Throttle was removed.", out
    for b in ("0", "1"):
        assert config(cluster, "brokers", b) == {}
    assert config(cluster, "topics", TOPIC) == {}
