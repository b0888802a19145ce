"""The replica tools against a real cluster: 3 broker processes (racks r0..r2) on a real 3-node ZooKeeper ensemble.

`kbroker-admin reassign-partitions` / `preferred-replica-election` (issue 5 item 5) only write the admin znodes;
what these tests prove is that the active controller carries them out and that the tools report it:

1. move an RF 1 partition to another broker: --generate proposes over the given brokers, --execute starts it,
   --verify reaches "completed successfully", the new broker leads, the records are consumable from it and the
   old broker's copy is deleted;
2. increase a partition's replication factor 1 -> 3 by reassignment: completes, the ISR becomes all 3 replicas,
   the records survive and the partition is not under-replicated;
3. stop a broker: `topics --describe --under-replicated-partitions` (ZooKeeper and broker modes) lists exactly
   the partitions it followed, `--unavailable-partitions` the one it alone hosted; restart it: leadership does not
   come back by itself (auto.leader.rebalance.enable=false here), the preferred-replica election moves it back,
   first for one partition from a file, then for all.

One ensemble and one cluster for the module (tests use their own topics and run in file order; each begins by
restarting any broker a failed predecessor left down). Waits are bounded by the cluster's failover time.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.harness import REPO_ROOT, wait_until
from tests.integration.test_cluster_common import (
    FAILOVER_WAIT_S, Cluster, consume, metadata, produce, records_for)

pytestmark = [pytest.mark.zk, pytest.mark.timeout(240)]

REASSIGN = "/admin/reassign_partitions"
ELECTION = "/admin/preferred_replica_election"
# Replication of a few records to a fresh replica and the controller's ISR/leadership steps take well under a
# second here; the margin absorbs two shared, busy cores.
REASSIGN_WAIT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    # Without the automatic rebalance the only thing moving leadership back is the tool under test.
    c = Cluster(tmp_path_factory.mktemp("cluster"), zk_ensemble, overrides={"auto.leader.rebalance.enable": "false"})
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture
def healthy(cluster):
    cluster.ensure_all_running()
    return cluster


def admin(cluster, *args, zookeeper=True, timeout=60):
    argv = [sys.executable, "-m", "kbroker.cli.admin", *args]
    if zookeeper:
        argv[4:4] = ["--zookeeper", cluster.connect]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=str(REPO_ROOT))


def ok(done):
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def create(cluster, topic, replica_assignment):
    ok(admin(cluster, "topics", "--create", "--topic", topic, "--replica-assignment", replica_assignment))


def write_json(tmp_path, name, doc) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def verify_until_complete(cluster, path, n_partitions):
    """Runs --verify until every partition of `path` is reported complete; returns the last stdout."""
    def complete():
        out = ok(admin(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", path))
        lines = out.splitlines()
        assert lines[0] == "Status of partition reassignment: "
        assert not any(" failed" in ln or ln.startswith("ERROR") for ln in lines), out
        done = [ln for ln in lines if ln.endswith(" completed successfully")]
        return out if len(done) == n_partitions else None
    return wait_until(complete, REASSIGN_WAIT_S, 0.5, f"reassignment in {path} to complete")


def isr(cluster, topic, p):
    return sorted(cluster.state(topic, p)[0]["isr"])


def wait_brokers_agree(cluster, topic, p, want, what):
    """Every running broker's Metadata for topic-p satisfies want(partition dict)."""
    def agreed():
        return all(want(metadata(b, [topic])["topics"][topic]["partitions"][p]) for b in cluster.running())
    wait_until(agreed, REASSIGN_WAIT_S, 0.2, what, ignore=(OSError, ConnectionError, KeyError))


def partition_lines(out):
    return [ln for ln in out.splitlines() if ln.startswith("\tTopic: ")]


def fields(line):
    """'\\tTopic: t\\tPartition: 0\\tLeader: 1\\tReplicas: 1,2\\tIsr: 2,1' -> {'Topic': 't', ...}."""
    return dict(part.split(": ", 1) for part in line.strip("\t").split("\t"))


# ------------------------------------------------------------------------------------------------ move

def test_move_rf1_partition_to_another_broker(healthy, tmp_path):
    cluster = healthy
    create(cluster, "move", "0,1")
    cluster.wait_topic_everywhere("move", 2)
    records = records_for("move", [0, 1], per_partition=20)
    produce(cluster.bootstrap, "move", records)

    # --generate: Kafka's headings and JSON; the proposal puts the two RF 1 partitions on brokers 1 and 2,
    # one each (rack-aware over r1, r2), and writes nothing.
    topics = write_json(tmp_path, "topics.json", {"topics": [{"topic": "move"}], "version": 1})
    out = ok(admin(cluster, "reassign-partitions", "--generate", "--topics-to-move-json-file", topics,
                   "--broker-list", "1,2"))
    lines = out.splitlines()
    assert lines[:3] == ["Current partition replica assignment", "",
                         '{"version":1,"partitions":[{"topic":"move","partition":0,"replicas":[0]},'
                         '{"topic":"move","partition":1,"replicas":[1]}]}'], out
    assert lines[3:5] == ["Proposed partition reassignment configuration", ""] and len(lines) == 6, out
    proposed = json.loads(lines[5])
    assert proposed["version"] == 1
    assert [(e["topic"], e["partition"]) for e in proposed["partitions"]] == [("move", 0), ("move", 1)]
    assert sorted(e["replicas"][0] for e in proposed["partitions"]) == [1, 2]
    assert all(len(e["replicas"]) == 1 for e in proposed["partitions"])
    assert not cluster.zk.exists(REASSIGN)

    # --execute: move partition 0 from broker 0 to broker 2.
    plan = write_json(tmp_path, "move.json",
                      {"version": 1, "partitions": [{"topic": "move", "partition": 0, "replicas": [2]}]})
    out = ok(admin(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan))
    assert out == ("Current partition replica assignment\n\n"
                   '{"version":1,"partitions":[{"topic":"move","partition":0,"replicas":[0]},'
                   '{"topic":"move","partition":1,"replicas":[1]}]}\n\n'
                   "Save this to use as the --reassignment-json-file option during rollback\n"
                   "Successfully started reassignment of partitions.\n")

    out = verify_until_complete(cluster, plan, 1)
    assert out == "Status of partition reassignment: \nReassignment of partition [move,0] completed successfully\n"
    wait_until(lambda: not cluster.zk.exists(REASSIGN), 10, 0.1, "the controller to delete " + REASSIGN)
    assert cluster.get_json("/brokers/topics/move")["partitions"] == {"0": [2], "1": [1]}
    wait_brokers_agree(cluster, "move", 0, lambda s: s["leader"] == 2 and s["replicas"] == [2] and s["isr"] == [2],
                       "every broker to see move-0 led by 2")

    # The records are served by the new leader, and the old broker dropped its copy (StopReplica delete=true).
    got = consume(cluster.bootstrap, "move", [0, 1], expected=40)
    assert got == records
    old_dir = cluster.broker(0).log_dir / "move-0"
    wait_until(lambda: not old_dir.exists(), 10, 0.2, f"{old_dir} to be deleted")
    assert (cluster.broker(2).log_dir / "move-0").is_dir()

    # Clients keep producing to the moved partition.
    more = {0: [b"after-move-%d" % i for i in range(5)]}
    produce(cluster.bootstrap, "move", more)
    assert consume(cluster.bootstrap, "move", [0], expected=25)[0] == records[0] + more[0]


# ------------------------------------------------------------------------------------------------ grow RF

def test_increase_replication_factor_1_to_3(healthy, tmp_path):
    cluster = healthy
    create(cluster, "grow", "1")
    cluster.wait_topic_everywhere("grow", 1)
    records = records_for("grow", [0], per_partition=30)
    produce(cluster.bootstrap, "grow", records)

    plan = write_json(tmp_path, "grow.json",
                      {"version": 1, "partitions": [{"topic": "grow", "partition": 0, "replicas": [1, 2, 0]}]})
    out = ok(admin(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan))
    assert out.endswith("Successfully started reassignment of partitions.\n")
    assert '{"version":1,"partitions":[{"topic":"grow","partition":0,"replicas":[1]}]}' in out

    verify_until_complete(cluster, plan, 1)
    assert cluster.get_json("/brokers/topics/grow")["partitions"] == {"0": [1, 2, 0]}
    wait_until(lambda: isr(cluster, "grow", 0) == [0, 1, 2], REASSIGN_WAIT_S, 0.2, "grow-0's ISR to be 0,1,2")
    wait_brokers_agree(cluster, "grow", 0,
                       lambda s: s["leader"] == 1 and s["replicas"] == [1, 2, 0] and sorted(s["isr"]) == [0, 1, 2],
                       "every broker to see grow-0 with 3 in-sync replicas")

    # Not under-replicated, in either tool mode; the describe line shows the new replicas.
    assert ok(admin(cluster, "topics", "--describe", "--topic", "grow", "--under-replicated-partitions")) == ""
    assert ok(admin(cluster, "topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "grow",
                    "--under-replicated-partitions", zookeeper=False)) == ""
    line, = partition_lines(ok(admin(cluster, "topics", "--describe", "--topic", "grow")))
    f = fields(line)
    assert (f["Leader"], f["Replicas"], sorted(f["Isr"].split(","))) == ("1", "1,2,0", ["0", "1", "2"])

    assert consume(cluster.bootstrap, "grow", [0], expected=30) == records


# ------------------------------------------------------------------------------------------------ broker down

def under_replicated(cluster, *extra, zookeeper=True):
    args = ["topics", "--describe", "--topic", "pref,solo", *extra]
    if not zookeeper:
        args[1:1] = ["--bootstrap-server", ",".join(b.bootstrap for b in cluster.running())]
    return partition_lines(ok(admin(cluster, *args, zookeeper=zookeeper)))


def test_follower_down_listings_and_preferred_election(healthy, tmp_path):
    cluster = healthy
    create(cluster, "pref", "0:1:2,1:2:0,2:0:1")
    create(cluster, "solo", "0")
    cluster.wait_topic_everywhere("pref", 3)
    cluster.wait_topic_everywhere("solo", 1)
    wait_until(lambda: all(isr(cluster, "pref", p) == [0, 1, 2] for p in range(3)), REASSIGN_WAIT_S, 0.2,
               "pref's ISRs to be full")
    assert under_replicated(cluster, "--under-replicated-partitions") == []
    assert under_replicated(cluster, "--unavailable-partitions") == []

    # Broker 0 stops (controlled shutdown): it leaves every ISR, pref-0's leadership moves, solo-0 goes offline.
    cluster.broker(0).stop()
    wait_until(lambda: all(0 not in isr(cluster, "pref", p) for p in range(3)), FAILOVER_WAIT_S, 0.2,
               "broker 0 to leave pref's ISRs")
    for zookeeper in (True, False):
        def listed():
            under = [fields(ln) for ln in under_replicated(cluster, "--under-replicated-partitions",
                                                           zookeeper=zookeeper)]
            return under if len(under) == 3 and all("0" not in f["Isr"].split(",") for f in under) else None
        under = wait_until(listed, FAILOVER_WAIT_S, 0.5, f"pref's 3 partitions listed as under-replicated "
                           f"({'zookeeper' if zookeeper else 'bootstrap'} mode)")
        assert [(f["Topic"], f["Partition"], f["Replicas"]) for f in under] == \
            [("pref", "0", "0,1,2"), ("pref", "1", "1,2,0"), ("pref", "2", "2,0,1")]
        assert [f["Leader"] for f in under] == ["1", "1", "2"]

        def offline():
            lines = [fields(ln) for ln in under_replicated(cluster, "--unavailable-partitions", zookeeper=zookeeper)]
            return lines if lines and lines[0]["Leader"] == "none" else None
        unavailable = wait_until(offline, FAILOVER_WAIT_S, 0.5, "solo-0 listed as unavailable")
        assert [(f["Topic"], f["Partition"], f["Leader"], f["Replicas"]) for f in unavailable] == \
            [("solo", "0", "none", "0")]

    # Broker 0 returns: it rejoins the ISRs and leads solo-0 again (its only replica), but not pref-0.
    cluster.broker(0).start()
    cluster.wait_converged()
    wait_until(lambda: all(isr(cluster, "pref", p) == [0, 1, 2] for p in range(3)), REASSIGN_WAIT_S, 0.2,
               "broker 0 to rejoin pref's ISRs")
    assert under_replicated(cluster, "--under-replicated-partitions") == []
    wait_until(lambda: under_replicated(cluster, "--unavailable-partitions") == [], FAILOVER_WAIT_S, 0.5,
               "solo-0 back online")
    assert cluster.state("pref", 0)[0]["leader"] == 1

    # Preferred election for pref-0 from a file.
    f = write_json(tmp_path, "pref0.json", {"partitions": [{"topic": "pref", "partition": 0}]})
    out = ok(admin(cluster, "preferred-replica-election", "--path-to-json-file", f))
    assert out == ('Created preferred replica election path with {"version":1,"partitions":'
                   '[{"topic":"pref","partition":0}]}\n'
                   "Successfully started preferred replica election for partitions Set([pref,0])\n")
    wait_until(lambda: not cluster.zk.exists(ELECTION), 10, 0.1, "the controller to delete " + ELECTION)
    wait_brokers_agree(cluster, "pref", 0, lambda s: s["leader"] == 0, "pref-0 led by its preferred replica 0")

    # Clients follow the move.
    produce(cluster.bootstrap, "pref", {0: [b"p0-after-election"]})
    assert consume(cluster.bootstrap, "pref", [0], expected=1)[0] == [b"p0-after-election"]

    # For all partitions (no file): every partition ends up led by its first replica.
    out = ok(admin(cluster, "preferred-replica-election"))
    created, started = out.splitlines()
    assert created.startswith('Created preferred replica election path with {"version":1,"partitions":[')
    assert '{"topic":"pref","partition":1}' in created and '{"topic":"solo","partition":0}' in created
    assert started.startswith("Successfully started preferred replica election for partitions Set(")
    assert "[pref,0], [pref,1], [pref,2]" in started
    wait_until(lambda: not cluster.zk.exists(ELECTION), 10, 0.1, "the controller to delete " + ELECTION)
    for p in range(3):
        wait_brokers_agree(cluster, "pref", p, lambda s: s["leader"] == s["replicas"][0],
                           f"pref-{p} led by its preferred replica")
