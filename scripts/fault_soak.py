#!/usr/bin/env python3
"""Fault soak (issue 16): every registered fault (tests/integration/faults.py FAULTS, with netfault.py's, F1's
faults_zk.py and F3's faults_disk.py) in random order for --seconds, under a steady producer and consumer, then the
history checker. Exit status: 0 = nothing acknowledged lost, duplicated, misplaced or out of order and every
delivery succeeded; 1 = the checker found a problem; 2 = a fault could not be injected or healed (harness error).

    .venv/bin/python scripts/fault_soak.py --seconds 600 [--seed N] [--faults a,b] [--rate 300] [--out DIR]

The cluster: a 3-node ZooKeeper ensemble and 3 brokers, each broker in its own network namespace (netfault.py;
capability "netns", needs root) with a second log dir on a 64 MiB tmpfs ("tmpfs") and F3's test-only I/O fault
switch on ("io-injection"). Without root: a plain cluster and only the faults that need none of these
(`--list` shows which run). Settings: zookeeper.session.timeout.ms=4000, replica.lag.time.max.ms=2000; topic
`soak` (6 partitions, RF 3, min.insync.replicas=2); producer idempotent, acks=all, message.timeout.ms=300000
(a record is never given up during the run); a consumer in group `soak` reads along.

The faults run one at a time: the order is a shuffle of every applicable fault, reshuffled each round; each is
injected, held for its `hold_s`, healed, then the soak waits (bounded, 120 s) until every replica is back in every
ISR before the next. Printed per fault: the victim, how long inject/heal took, and the longest gap between two
acknowledgements of one partition while it ran (the longest stall of any partition). At the end the checker's
counts; `--out` also gets a JSON summary (soak.json) and keeps the cluster's directory (broker and ZooKeeper logs).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration import faults, harness  # noqa: E402
from tests.integration.test_replication_common import NumberedProducer, RCluster, read_all  # noqa: E402

TOPIC = "soak"
PARTITIONS = 6
# a follower whose fetch went into a cut notices in 3 s (replica.socket.timeout.ms, default 30 s as in Kafka)
OVERRIDES = {"zookeeper.session.timeout.ms": 4000, "replica.lag.time.max.ms": 2000,
             "replica.socket.timeout.ms": 3000}
PRODUCER = {"enable.idempotence": True, "acks": "all", "message.timeout.ms": 300000, "request.timeout.ms": 5000,
            "metadata.max.age.ms": 5000}
TMPFS_SIZE = "64m"


class AckGaps(threading.Thread):
    """Samples the producer's acknowledgements per partition every 50 ms; `longest(t0, t1)` is the longest time
    inside [t0, t1] during which some partition got no new acknowledgement (the stall a fault caused there; the
    producer writes every partition round-robin, 50 records/s each at the default rate)."""

    def __init__(self, producer, partitions: int):
        super().__init__(daemon=True, name="ack-gaps")
        self.producer, self.partitions = producer, partitions
        self.samples, self.stop_flag, self._seen = [], threading.Event(), 0
        self._counts = [0] * partitions

    def run(self):
        while not self.stop_flag.is_set():
            acked = self.producer.acked
            n = len(acked)
            for p, _, _ in acked[self._seen:n]:
                self._counts[p] += 1
            self._seen = n
            self.samples.append((time.monotonic(), tuple(self._counts)))
            self.stop_flag.wait(0.05)

    def longest(self, t0: float, t1: float) -> float:
        window = [(t, c) for t, c in self.samples if t0 <= t <= t1]
        worst = 0.0
        for p in range(self.partitions):
            last_change, last_n = t0, None
            for t, counts in window:
                if counts[p] != last_n:
                    worst = max(worst, t - last_change)
                    last_change, last_n = t, counts[p]
            worst = max(worst, (window[-1][0] if window else t1) - last_change)
        return round(worst, 2)


class Reader(threading.Thread):
    """A group consumer reading the topic along the run (the fetch and group paths under the faults); counts."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True, name="soak-reader")
        self.bootstrap, self.count, self.errors, self.stop_flag = bootstrap, 0, 0, threading.Event()

    def run(self):
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak", "auto.offset.reset": "earliest",
                      "session.timeout.ms": 10000})
        c.subscribe([TOPIC])
        try:
            while not self.stop_flag.is_set():
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    self.errors += 1
                else:
                    self.count += 1
        finally:
            c.close()


def make_cluster(base: Path, use_netns: bool):
    """NetCluster with tmpfs + I/O-injection log dirs when root, else a plain RCluster."""
    if not use_netns:
        return RCluster(base, overrides=OVERRIDES)
    from tests.integration import faults_disk, netfault

    c = netfault.NetCluster(base, overrides=OVERRIDES)
    c.tmpfs_dirs, c.extra_dirs = {}, {}
    for b in c.brokers:
        extra = b.dir / "logs-tmpfs"
        faults_disk.mount_tmpfs(extra, TMPFS_SIZE)
        c.tmpfs_dirs[b.broker_id] = c.extra_dirs[b.broker_id] = extra
        b.overrides["log.dirs"] = f"{b.log_dir},{extra}"
        b.extra_env.update(faults_disk.INJECT_ENV)
    c.capabilities = frozenset({"netns", "tmpfs", "io-injection"})
    return c


def unmount(cluster) -> None:
    from tests.integration import faults_disk

    for path in getattr(cluster, "tmpfs_dirs", {}).values():
        faults_disk.umount(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0, help="run faults for this long (default 300)")
    ap.add_argument("--seed", type=int, default=None, help="fault order and victims (printed; default random)")
    ap.add_argument("--faults", default="", help="comma-separated fault names (default: every applicable one)")
    ap.add_argument("--rate", type=float, default=300.0, help="records/s produced (default 300)")
    ap.add_argument("--out", default="", help="directory for soak.json and the cluster's logs (kept)")
    ap.add_argument("--no-netns", action="store_true", help="plain cluster: no network/disk faults")
    ap.add_argument("--list", action="store_true", help="list the registered faults and exit")
    args = ap.parse_args(argv)
    import logging

    # the test's own kazoo client logs every dropped connection at WARNING: dozens a fault, noise here
    logging.getLogger("kazoo").setLevel(logging.ERROR)

    registry = faults.load_all()
    if args.list:
        for name, cls in sorted(registry.items()):
            print(f"{name:28} requires {sorted(cls.requires) or '-'}: {cls.description}")
        return 0
    if harness.zookeeper_classpath() is None:
        print("ZooKeeper is not installed (scripts/setup.sh)", file=sys.stderr)
        return 2
    from tests.integration import netfault

    use_netns = not args.no_netns and netfault.netns_available()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    base = Path(args.out or tempfile.mkdtemp(prefix="fault-soak-"))
    base.mkdir(parents=True, exist_ok=True)
    cluster = make_cluster(base / "cluster", use_netns)
    wanted = [n for n in args.faults.split(",") if n] or sorted(registry)
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        print(f"unknown faults {unknown}; registered: {sorted(registry)}", file=sys.stderr)
        return 2
    names = [n for n in wanted if registry[n].applicable(cluster)]
    skipped = sorted(set(wanted) - set(names))
    print(f"fault soak: seed {seed}, {args.seconds:g} s, faults {names}" +
          (f", not applicable here: {skipped}" if skipped else "") + f", dir {base}", flush=True)

    log, status, producer = [], 0, None
    try:
        cluster.start()
        cluster.create_topic(TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"})
        cluster.wait_full_isr(TOPIC, PARTITIONS)
        cluster.workload_topic = TOPIC
        producer = NumberedProducer(cluster.bootstrap, TOPIC, PARTITIONS, PRODUCER, rate=args.rate).start()
        gaps, reader = AckGaps(producer, PARTITIONS), Reader(cluster.bootstrap)
        gaps.start()
        reader.start()
        harness.wait_until(lambda: len(producer.acked) >= 100, 60, 0.1, "100 acks before the first fault")
        t_end = time.monotonic() + args.seconds
        order: list[str] = []
        while time.monotonic() < t_end:
            if not order:
                order = rng.sample(names, len(names))
            fault = registry[order.pop(0)](random.Random(rng.randrange(1 << 30)))
            t0 = time.monotonic()
            entry = {"fault": fault.name}
            print(f"  {time.strftime('%H:%M:%S')} {fault.name} ...", flush=True)
            try:
                fault.inject(cluster)
                entry["victim"] = fault.victim
                entry["inject_s"] = round(time.monotonic() - t0, 2)
                time.sleep(fault.hold_s)
            finally:
                t1 = time.monotonic()
                fault.heal(cluster)
                entry["heal_s"] = round(time.monotonic() - t1, 2)
                cluster.wait_full_isr(TOPIC, PARTITIONS, timeout=120)
                entry["full_isr_s"] = round(time.monotonic() - t1, 2)
            entry["longest_ack_gap_s"] = gaps.longest(t0, time.monotonic())
            entry["acked"] = len(producer.acked)
            log.append(entry)
            print(f"  {time.strftime('%H:%M:%S')} {fault.describe():34} inject {entry['inject_s']:5.1f}s  heal "
                  f"{entry['heal_s']:5.1f}s  full ISR {entry['full_isr_s']:5.1f}s  longest ack gap "
                  f"{entry['longest_ack_gap_s']:5.1f}s  acked {entry['acked']}", flush=True)
        producer.stop()
        reader.stop_flag.set()
        gaps.stop_flag.set()
        report = faults.check_producers([producer], read_all(cluster.bootstrap, TOPIC, PARTITIONS))[0]
        failed = len(producer.failed)
        print(f"faults run: {len(log)} ({', '.join(sorted({e['fault'] for e in log}))}); consumer group read "
              f"{reader.count} records along")
        print(f"checker: {report.summary()}; failed deliveries {failed}")
        if not report.ok or failed or report.acknowledged != producer.sent:
            status = 1
        result = {"seed": seed, "seconds": args.seconds, "faults": log, "checker": report.summary(),
                  "failed_deliveries": failed, "sent": producer.sent, "ok": status == 0}
    except Exception as exc:   # a fault that could not be injected/healed, a wait that timed out
        print(f"harness error: {exc!r}", file=sys.stderr)
        status = 2
        result = {"seed": seed, "faults": log, "error": repr(exc)[:4000], "ok": False}
    finally:
        cluster.close()
        unmount(cluster)
    (base / "soak.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'OK' if status == 0 else 'FAILED'} (exit {status}); summary in {base / 'soak.json'}")
    if not args.out and status == 0:
        shutil.rmtree(base, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
