#!/usr/bin/env python3
"""Cluster-mode benchmark: partition creation at scale and controller failover, on a real 3-node ZooKeeper ensemble.

    python bench/bench_cluster.py [--brokers 3] [--rounds 3] [--failovers 3]

Starts a local 3-node ensemble (Debian's zookeeper package, tickTime 500 ms) and `--brokers` kbroker processes
(zookeeper.session.timeout.ms=6000, Kafka 0.10.1's default; chroot /kb) with the integration-test harness
(tests/integration/harness.py, test_cluster_common.py), then measures:

  create-1x1000   one CreateTopics of 1 topic x 1,000 partitions (RF 1), sent through confluent-kafka's AdminClient
                  (operation_timeout 120 s); time from the call until *every* broker's own Metadata v1 answer lists
                  all 1,000 partitions, each with a live leader. Also reported: until the CreateTopics futures
                  resolved (the controller wrote the assignment znodes and answered).
  create-100x10   the same for one CreateTopics of 100 topics x 10 partitions.
  failover        (run first, on 10 topics x 3 partitions) kill -9 of the current controller; "elected" = until /controller names another broker (kazoo
                  polled every 10 ms); "serving" = until a topic created (1 partition) through a survivor after the
                  election has a leader in every survivor's Metadata, measured from the kill. Between rounds the
                  killed broker is restarted and the cluster settles (every partition led everywhere).

Failover rounds run before the create rounds. Each create round uses fresh topic names on the same cluster (so later rounds run with more partitions already
present: 1,000 then 2,000 ...). Figures are printed as a markdown table (median, min-max) and written as JSON to
bench/results/cluster-<UTC time>.json with the machine's load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.harness import ZkEnsemble, wait_until  # noqa: E402
from tests.integration.test_cluster_common import Cluster, leaders, metadata  # noqa: E402


def all_led_everywhere(cluster, brokers, topics, n_per_topic):
    alive = {b.broker_id for b in brokers}
    for b in brokers:
        md = metadata(b, None, timeout=30)
        for t in topics:
            lead = leaders(md, t)
            if len(lead) != n_per_topic or not set(lead.values()) <= alive:
                return False
    return True


def create_round(cluster, topics, n_per_topic):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    t0 = time.monotonic()
    futures = admin.create_topics([NewTopic(t, n_per_topic, 1) for t in topics], operation_timeout=120,
                                  request_timeout=150)
    for f in futures.values():
        f.result(180)
    answered = time.monotonic() - t0
    wait_until(lambda: all_led_everywhere(cluster, cluster.brokers, topics, n_per_topic), 300, 0.05,
               f"{len(topics)} topics x {n_per_topic} partitions led everywhere", ignore=(OSError, ConnectionError))
    return {"answered_s": answered, "everywhere_s": time.monotonic() - t0}


def failover_round(cluster, i):
    from confluent_kafka.admin import AdminClient, NewTopic

    old = cluster.controller_id()
    survivors = [b for b in cluster.brokers if b.broker_id != old]
    cluster.broker(old).kill9()
    t0 = time.monotonic()
    new = wait_until(lambda: (c := cluster.controller_id()) not in (None, old) and [c], 60, 0.01, "new controller")[0]
    elected = time.monotonic() - t0
    topic = f"failover-{i}"
    wait_until(lambda: all(metadata(b, [])["controller"] == new for b in survivors), 60, 0.01,
               "survivors to name the new controller", ignore=(OSError, ConnectionError))
    named = time.monotonic() - t0

    def created():
        admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in survivors)})
        # Survivors may still name the dead controller for a moment: retry until the create is accepted.
        try:
            admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10, request_timeout=15)[topic].result(20)
        except Exception as exc:  # noqa: BLE001
            print(f"  create {topic}: {exc}", file=sys.stderr)
            if "already exists" in str(exc).lower() or "TOPIC_ALREADY_EXISTS" in str(exc):
                return True
            return False
        return True

    wait_until(created, 60, 0.05, f"create {topic} after failover")
    wait_until(lambda: all_led_everywhere(cluster, survivors, [topic], 1), 60, 0.02, f"{topic} led everywhere",
               ignore=(OSError, ConnectionError))
    serving = time.monotonic() - t0
    cluster.ensure_all_running()
    return {"old": old, "new": new, "elected_s": elected, "named_s": named, "serving_s": serving}


def summary(values):
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="create rounds per shape")
    ap.add_argument("--failovers", type=int, default=3)
    args = ap.parse_args(argv)

    result = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "brokers": args.brokers,
              "loadavg_before": os.getloadavg(), "create": {"1x1000": [], "100x10": []}, "failover": []}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        ens = ZkEnsemble(Path(tmp) / "zk", n=3)
        ens.start()
        cluster = Cluster(Path(tmp) / "cluster", ens, n=args.brokers,
                          overrides={"log.flush.interval.messages": None})
        try:
            cluster.start()
            # Failover first, on a cluster holding 30 partitions (10 topics x 3): the figure is the election and
            # propagation path, not the time to re-elect thousands of partitions the create rounds leave behind.
            create_round(cluster, [f"small-{i}" for i in range(10)], 3)
            for i in range(args.failovers):
                f = failover_round(cluster, i)
                result["failover"].append(f)
                print(f"failover {i}: {f}", file=sys.stderr)
            for r in range(args.rounds):
                one = create_round(cluster, [f"big-{r}"], 1000)
                result["create"]["1x1000"].append(one)
                print(f"round {r}: 1x1000 {one}", file=sys.stderr)
                many = create_round(cluster, [f"t{r}-{i:03d}" for i in range(100)], 10)
                result["create"]["100x10"].append(many)
                print(f"round {r}: 100x10 {many}", file=sys.stderr)
        finally:
            cluster.close()
            ens.close()
    result["loadavg_after"] = os.getloadavg()

    rows = [
        ("create 1 topic x 1,000 partitions: CreateTopics answered, s",
         [x["answered_s"] for x in result["create"]["1x1000"]]),
        ("create 1 topic x 1,000 partitions: all leaders in every broker's Metadata, s",
         [x["everywhere_s"] for x in result["create"]["1x1000"]]),
        ("create 100 topics x 10 partitions: CreateTopics answered, s",
         [x["answered_s"] for x in result["create"]["100x10"]]),
        ("create 100 topics x 10 partitions: all leaders in every broker's Metadata, s",
         [x["everywhere_s"] for x in result["create"]["100x10"]]),
        ("controller kill -9 -> new /controller, s", [x["elected_s"] for x in result["failover"]]),
        ("controller kill -9 -> every survivor's Metadata names it, s", [x["named_s"] for x in result["failover"]]),
        ("controller kill -9 -> new topic led in every survivor's Metadata, s",
         [x["serving_s"] for x in result["failover"]]),
    ]
    print("| metric | median (min-max) |\n|---|---|")
    for name, values in rows:
        if values:
            print(f"| {name} | {summary(values)} |")
    out = REPO / "bench" / "results" / f"cluster-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"\nJSON: {out.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
