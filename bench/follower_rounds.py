#!/usr/bin/env python3
"""Followers at scale: what replicating a few busy partitions costs when a broker follows thousands of idle ones.

    python bench/follower_rounds.py [--partitions 10000] [--topics 10] [--hot 20] [--rate 2000] [--seconds 20]

Starts a 1-node ZooKeeper and 2 kbroker processes (tests/integration harness), creates --topics topics of
--partitions / --topics partitions each at RF 2 (each broker leads half and follows the other half: 5,000 followed
partitions each at the default), waits until every ISR is full, then produces for --seconds with one librdkafka
producer, acks=all, --rate records/s of 100 bytes spread round-robin over --hot partitions (the rest stay idle).
Reports, over that window:

  broker CPU s      both brokers' user + system CPU (from /proc), and per 10,000 records;
  ack latency       p50 / p99 of the acknowledgements (acks=all waits for the follower's next fetch);
  delivered         records acknowledged / offered (a follower too slow to keep up shows here and in the p99).

Each follower fetch round used to re-list and compare every followed partition (~1 us each); with a record on some
partition every few hundred microseconds the rounds follow each other as fast as the follower can build them, so
that cost is paid per round, not per second. Prints one JSON line (with the commit and the load average).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))   # bench/ (not a package): peers
from peers import process_cpu  # noqa: E402
from tests.integration.harness import ZkEnsemble, wait_until  # noqa: E402
from tests.integration.test_cluster_common import Cluster, metadata  # noqa: E402


def full_isrs(cluster: Cluster, topics: list[str], per_topic: int) -> bool:
    md = metadata(cluster.running()[0], topics)
    parts = [p for t in md["topics"].values() for p in t["partitions"].values()]
    return len(parts) == len(topics) * per_topic and all(len(p["isr"]) == 2 for p in parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--hot", type=int, default=20)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hot-topic", action="store_true",
                    help="the hot partitions in a topic of their own (the client then knows only --hot partitions: "
                         "tells the broker's cost from a client's that grows with the partitions it knows)")
    args = ap.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    per_topic = args.partitions // args.topics
    topics = [f"f{i:03d}" for i in range(args.topics)]
    tmp = tempfile.mkdtemp(prefix="kb-follower-rounds-")
    ensemble = ZkEnsemble(Path(tmp) / "zk", n=1).start()
    cluster = Cluster(Path(tmp) / "cluster", ensemble, n=2, overrides={"auto.leader.rebalance.enable": False,
                                                                    # Kafka's default, not the harness's fsync
                                                                    # per record (its kill -9 tests need that)
                                                                    "log.flush.interval.messages": 2**63 - 1})
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for t in topics:
            admin.create_topics([NewTopic(t, per_topic, 2)], operation_timeout=300, request_timeout=330)[t].result(400)
        if args.hot_topic:
            admin.create_topics([NewTopic("hot", args.hot, 2)], operation_timeout=300,
                                request_timeout=330)["hot"].result(400)
        wait_until(lambda: full_isrs(cluster, topics, per_topic), 600, 1.0, "every ISR full",
                   ignore=(OSError, ConnectionError, KeyError))
        time.sleep(5)      # the followers' first full fetches and ISR writes are over before the window opens
        hot = ([("hot", i) for i in range(args.hot)] if args.hot_topic else
               [(topics[i % len(topics)], (i // len(topics)) % per_topic) for i in range(args.hot)])
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for t in sorted({t for t, _ in hot}):
            producer.list_topics(t, timeout=30)
        lat: list[float] = []
        errors: list = []

        def delivered(err, msg, sent):
            if err is not None:
                errors.append(err)
            else:
                lat.append(time.monotonic() - sent)
        pids = [b.pid for b in cluster.running()]
        cpu0 = sum(sum(process_cpu(p)) for p in pids)
        t0 = time.monotonic()
        offered = 0
        value = b"x" * 100
        while True:
            now = time.monotonic()
            if now - t0 >= args.seconds:
                break
            due = int((now - t0) * args.rate)
            while offered < due:
                t, p = hot[offered % len(hot)]
                producer.produce(t, value=value, partition=p,
                                 on_delivery=lambda err, msg, sent=time.monotonic(): delivered(err, msg, sent))
                offered += 1
            producer.poll(0.001)
        cpu1 = sum(sum(process_cpu(p)) for p in pids)
        window = time.monotonic() - t0
        producer.flush(60)
        lat.sort()
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        out = {"commit": commit, "partitions": args.partitions, "followed_per_broker": args.partitions // 2,
               "hot": args.hot, "hot_topic": args.hot_topic, "rate": args.rate, "seconds": round(window, 1), "offered": offered,
               "acked": len(lat), "errors": len(errors),
               "broker_cpu_s": round(cpu1 - cpu0, 2),
               "broker_cpu_s_per_10k_records": round((cpu1 - cpu0) / max(1, len(lat)) * 10000, 3),
               "ack_p50_ms": round(lat[len(lat) // 2] * 1000, 2) if lat else None,
               "ack_p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2) if lat else None,
               "load_average": [round(x, 2) for x in os.getloadavg()]}
        print(json.dumps(out))
        return 0
    finally:
        cluster.close()
        ensemble.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
