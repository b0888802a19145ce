#!/usr/bin/env python3
"""Replication benchmark for kbroker (issue 5): what RF 3 with acks=all costs against RF 1 with acks=1, and how
long a partition is unwritable after its leader dies.

    python bench/bench_replication.py                    # ~3 min: 3-node ZooKeeper ensemble, 3 brokers
    python bench/bench_replication.py --seconds 10 --rounds 3 --json /tmp/repl.json
    python bench/bench_replication.py --brokers kbroker,kafka --failover-modes ""   # beside Apache Kafka 4.4

``--brokers kafka`` runs the same throughput and latency phases on Apache Kafka 4.4 as the peer (bench/peers.py
``KafkaCluster``: 3 KRaft nodes on 127.0.0.1, each broker + controller in one JVM with a 1 GB heap, the three the
controller quorum's voters; Kafka's defaults otherwise, log dirs on the same disk). The clusters run one after the
other, never at once. The failover phase is kbroker's only (its client codec, and ZooKeeper's session as the
detector; bench/controller_scale.py compares failovers). Before the counted rounds each topic gets
``--warmup-seconds`` (3) of the same load, not counted: Kafka's first seconds are its JIT's.

Setup: a 3-node ZooKeeper ensemble and 3 kbroker processes on 127.0.0.1 (tests/integration/harness.py
`ZkEnsemble` / `BrokerProcess`: `python -m kbroker.cli.server <dir>/server.properties`, temp log dirs,
zookeeper.session.timeout.ms=6000, log.flush.interval.messages left at its default). Topics: `rf3` and `rf1`
with ``--partitions`` (6) partitions, replication factor 3 (min.insync.replicas=2) and 1, leaders spread by the
controller's round-robin assignment.

Phases (both topics get the same client load: one confluent-kafka producer, ``linger.ms`` 5, 1,024-byte values,
no idempotence, acks=all for rf3 and acks=1 for rf1; rounds alternate rf1/rf3 so drift hits both):
  throughput  produce as fast as the client queue allows for ``--seconds`` (records capped by ``--records``, 300,000),
              then flush; records/s and MB/s = acknowledged records / (first produce -> last delivery report).
              Ack latency p50/p99 over the same records: produce() call -> delivery report (includes client
              queueing, so under saturation it is mostly queue time).
  latency     ``--rate`` (1,000) records/s paced for ``--latency-seconds`` (10): p50/p99/max produce -> delivery
              report, with the brokers not saturated.
  failover    a 1-partition RF 3 topic, leader L; a loop sends one acks=-1 Produce v3 (kbroker's client codec,
              5 s timeout) every 50 ms to whatever broker a running broker's Metadata names as leader. Time from
              SIGKILL of L (or SIGTERM = controlled shutdown, ``--failover-modes``) to the first successful
              Produce answered by the new leader. After a SIGKILL the controller learns of the death only when
              L's ZooKeeper session expires (6 s), so that is the floor.
Each throughput round also reports the brokers' CPU per produced GB: utime+stime of the three broker processes
(every thread; /proc/<pid>/stat) over the round, divided by the acknowledged bytes (once, not per replica). Before
each cluster starts, ``peers.write_floor`` measures what writing into the page cache costs in this sitting (on this
VM a page touched for the first time costs ~10x a reused one; RF 3 writes every byte three times).
Results print as a markdown table per cluster; ``--json`` also writes every number. Exit code 0 when every phase
of every cluster completed.
"""
import argparse
import gc
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.harness import BrokerProcess, ZkEnsemble, wait_until  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import KafkaCluster, process_cpu, write_floor  # noqa: E402

VALUE = b"x" * 1024


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values) + 0.5)) - 1))]


class Cluster:
    def __init__(self, base, n=3, overrides=None, env=None):
        self.ensemble = ZkEnsemble(Path(base) / "zk", n=3)
        self.brokers = [BrokerProcess(Path(base) / f"b{i}", broker_id=i, overrides={
            "zookeeper.session.timeout.ms": 6000, "controlled.shutdown.retry.backoff.ms": 1000,
            "auto.leader.rebalance.enable": "false", **(overrides or {})}, env=env) for i in range(n)]

    def start(self):
        self.ensemble.start()
        for b in self.brokers:
            b.zk = self.ensemble.connect_string + "/bench"
            b.start(wait=False)
        for b in self.brokers:
            b.wait_ready(60)
        wait_until(self.converged, 60, 0.2, "all brokers registered, a controller elected")
        return self

    def converged(self):
        from kbroker.client.connection import BrokerConnection

        for b in self.brokers:
            try:
                with BrokerConnection(b.host, b.port, client_id="bench", timeout=2) as conn:
                    md = conn.request("Metadata", {"topics": []}, version=1)
            except Exception:  # noqa: BLE001 - still starting
                return False
            if len(md["brokers"]) != len(self.brokers) or md["controller_id"] < 0:
                return False
        return True

    def pids(self):
        return [b.pid for b in self.brokers if b.running]

    def close(self):
        for b in self.brokers:
            b.close()
        self.ensemble.close()

    @property
    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.brokers)

    def running(self):
        return [b for b in self.brokers if b.running]


def metadata_leader(cluster, topic, p=0):
    from kbroker.client.connection import BrokerConnection

    for b in cluster.running():
        try:
            with BrokerConnection(b.host, b.port, client_id="bench", timeout=2) as conn:
                md = conn.request("Metadata", {"topics": [{"name": topic}]}, version=1)
        except Exception:  # noqa: BLE001 - a broker going down
            continue
        for t in md["topics"]:
            for part in t["partitions"]:
                if part["partition_index"] == p and part["error_code"] == 0:
                    return part["leader_id"]
    return None


def produce_once(cluster, broker_id, topic):
    from kbroker.client.connection import BrokerConnection
    from kbroker.client.simple import make_batch

    b = cluster.brokers[broker_id]
    with BrokerConnection(b.host, b.port, client_id="bench", timeout=6) as conn:
        resp = conn.request("Produce", {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": make_batch([b"f"])}]}]}, version=3)
    return resp["responses"][0]["partition_responses"][0]["error_code"]


def create_topic(cluster, name, partitions, rf, configs=None):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})], operation_timeout=30,
                        request_timeout=35)[name].result(45)

    def led_in_full():   # every partition has a leader and its full replica set in sync
        t = admin.list_topics(name, timeout=5).topics.get(name)
        return (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values()))

    wait_until(led_in_full, 30, 0.2, f"leaders and full ISRs of {name}")


def run_producer(bootstrap, topic, acks, seconds, max_records, rate=None):
    """-> dict(records, seconds, latencies sorted in ms, errors)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "enable.idempotence": False,
                  "queue.buffering.max.messages": 200000, "queue.buffering.max.kbytes": 256 * 1024})
    lat, errs = [], []
    last = [0.0]

    def cb(err, msg, t0):
        now = time.perf_counter()
        if err is not None:
            errs.append(str(err))
        else:
            lat.append((now - t0) * 1e3)
            last[0] = now

    start = time.perf_counter()
    sent = 0
    deadline = start + seconds
    while sent < max_records and time.perf_counter() < deadline:
        if rate is not None:
            due = int((time.perf_counter() - start) * rate) + 1
            if sent >= due:
                p.poll(0.001)
                continue
        t0 = time.perf_counter()
        try:
            p.produce(topic, VALUE, on_delivery=lambda e, m, t0=t0: cb(e, m, t0))
            sent += 1
        except BufferError:
            p.poll(0.005)
            continue
        p.poll(0)
    left = p.flush(60)
    elapsed = (last[0] or time.perf_counter()) - start
    lat.sort()
    return {"sent": sent, "records": len(lat), "seconds": elapsed, "latencies": lat, "errors": len(errs) + left}


def brokers_cpu(cluster):
    """utime+stime of all the cluster's broker processes (every thread), seconds."""
    return sum(sum(process_cpu(pid)) for pid in cluster.pids())


def phase_throughput(cluster, args, results):
    if args.warmup_seconds > 0:   # not counted: a JVM's first seconds are its JIT's (Kafka's first round ran at
        # a quarter of its later ones), and every broker's first segment files and page cache are new
        for topic, acks in (("rf1", "1"), ("rf3", "all")):
            run_producer(cluster.bootstrap, topic, acks, args.warmup_seconds, args.records)
    for rnd in range(args.rounds):
        for topic, acks in (("rf1", "1"), ("rf3", "all")):
            cpu0 = brokers_cpu(cluster)
            r = run_producer(cluster.bootstrap, topic, acks, args.seconds, args.records)
            cpu = brokers_cpu(cluster) - cpu0
            key = f"{topic}_acks{acks}"
            res = results.setdefault(key, {"rounds": []})
            gb = r["records"] * len(VALUE) / 1e9
            res["rounds"].append({"records_per_s": r["records"] / r["seconds"],
                                  "mb_per_s": r["records"] * len(VALUE) / r["seconds"] / 1e6,
                                  "p50_ms": percentile(r["latencies"], 0.50), "p99_ms": percentile(r["latencies"], 0.99),
                                  "records": r["records"], "errors": r["errors"],
                                  "brokers_cpu_s_per_gb": cpu / gb if gb else float("nan")})
            print(f"  round {rnd + 1} {key}: {res['rounds'][-1]['records_per_s']:.0f} rec/s "
                  f"p99 {res['rounds'][-1]['p99_ms']:.1f} ms errors {r['errors']} "
                  f"brokers' CPU {res['rounds'][-1]['brokers_cpu_s_per_gb']:.2f} s/GB", flush=True)
        for topic, acks in (("rf1", "1"), ("rf3", "all")):
            r = run_producer(cluster.bootstrap, topic, acks, args.latency_seconds, 10 ** 9, rate=args.rate)
            res = results.setdefault(f"{topic}_acks{acks}", {"rounds": []}).setdefault("paced", [])
            res.append({"rate": args.rate, "p50_ms": percentile(r["latencies"], 0.50),
                        "p99_ms": percentile(r["latencies"], 0.99), "max_ms": r["latencies"][-1] if r["latencies"]
                        else float("nan"), "records": r["records"], "errors": r["errors"]})
            print(f"  round {rnd + 1} {topic} paced {args.rate}/s: p50 {res[-1]['p50_ms']:.2f} ms "
                  f"p99 {res[-1]['p99_ms']:.2f} ms", flush=True)


def phase_failover(cluster, args, results):
    out = results.setdefault("failover", [])
    modes = [m for m in args.failover_modes.split(",") if m]   # "" = no failover phase
    for i in range(len(modes)):  # all created up front: CreateTopics needs a controller, a kill may remove it
        create_topic(cluster, f"failover{i}", 1, 3, {"min.insync.replicas": "2"})
    for i, mode in enumerate(modes):
        topic = f"failover{i}"
        wait_until(lambda: produce_once(cluster, metadata_leader(cluster, topic), topic) == 0, 30, 0.2,
                   "first produce", ignore=(Exception,))
        leader = metadata_leader(cluster, topic)
        victim = cluster.brokers[leader]
        t0 = time.monotonic()
        if mode == "kill9":
            victim.kill9()
        else:
            threading.Thread(target=victim.stop, args=(30,), daemon=True).start()
        attempts = 0
        while True:
            attempts += 1
            new = metadata_leader(cluster, topic)
            if new is not None and new != leader:
                try:
                    if produce_once(cluster, new, topic) == 0:
                        break
                except Exception:  # noqa: BLE001 - connection refused while moving
                    pass
            if time.monotonic() - t0 > 60:
                raise RuntimeError(f"no new leader serving {topic} 60 s after {mode} of broker {leader}")
            time.sleep(0.05)
        took = time.monotonic() - t0
        out.append({"mode": mode, "old_leader": leader, "new_leader": new, "seconds": took, "attempts": attempts})
        print(f"  failover ({mode} of leader {leader}): new leader {new} serving after {took:.2f} s", flush=True)
        wait_until(lambda: not victim.running, 40, 0.1, "victim exited")
        victim.start(wait=True, timeout=60)
        wait_until(cluster.converged, 60, 0.2, "cluster converged after the restart")


def machine():
    info = {"nproc": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release(),
            "load_1m": os.getloadavg()[0]}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import confluent_kafka as ck

    info["confluent_kafka"] = ck.version()[0]
    info["librdkafka"] = ck.libversion()[0]
    return info


def median(values):
    s = sorted(values)
    if not s:
        return float("nan")
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def run_cluster(kind, args):
    """One cluster of ``kind`` started, the phases run, the cluster stopped and its files removed; -> results."""
    results = {}
    base = tempfile.mkdtemp(prefix="bench-repl-")
    results["write_floor_s_per_gb"] = write_floor(base)
    try:
        if kind == "kafka":
            cluster = KafkaCluster(3).start()
        else:
            cluster = Cluster(base, overrides=dict(kv.split("=", 1) for kv in args.override),
                              env=dict(kv.split("=", 1) for kv in args.broker_env)).start()
        try:
            create_topic(cluster, "rf1", args.partitions, 1)
            create_topic(cluster, "rf3", args.partitions, 3, {"min.insync.replicas": "2"})
            phase_throughput(cluster, args, results)
            if kind == "kbroker":   # the failover phase drives kbroker's own client codec (Produce v3)
                phase_failover(cluster, args, results)
        finally:
            gc.collect()   # the clients left in reference cycles go now, not later reconnecting to a stopped cluster
            cluster.close()
    except Exception as e:  # noqa: BLE001 - reported, exit code 1
        print(f"FAILED ({kind}): {e!r}", file=sys.stderr)
        results["failed"] = repr(e)
    finally:
        # The logs are gigabytes at --records 3,000,000 (x 3 replicas); leaving them filled this machine's disk once.
        shutil.rmtree(base, ignore_errors=True)
    return results


def report(kind, results, args):
    r1, r3 = results.get("rf1_acks1"), results.get("rf3_acksall")
    print(f"\n### {kind}")
    print("\nthe page cache's write floor before this cluster started (peers.write_floor, system s/GB of 1 MiB "
          "writes to a new file; first pass, second): %s" % ", ".join("%.2f" % x for x in results["write_floor_s_per_gb"]))
    if r1 and r3:
        t1 = median([r["records_per_s"] for r in r1["rounds"]])
        t3 = median([r["records_per_s"] for r in r3["rounds"]])
        results["ratio_rf3_over_rf1"] = t3 / t1
        print("\n| metric | RF 1, acks=1 | RF 3, acks=all |\n|---|---|---|")
        for label, key, fmt in (("throughput, records/s (median of rounds)", "records_per_s", "{:,.0f}"),
                                ("throughput, MB/s", "mb_per_s", "{:.1f}"),
                                ("the brokers' CPU per produced GB, s", "brokers_cpu_s_per_gb", "{:.2f}"),
                                ("ack latency at full load p50 / p99, ms", None, None)):
            if key:
                print(f"| {label} | {fmt.format(median([r[key] for r in r1['rounds']]))} | "
                      f"{fmt.format(median([r[key] for r in r3['rounds']]))} |")
            else:
                print(f"| {label} | {median([r['p50_ms'] for r in r1['rounds']]):.1f} / "
                      f"{median([r['p99_ms'] for r in r1['rounds']]):.1f} | "
                      f"{median([r['p50_ms'] for r in r3['rounds']]):.1f} / "
                      f"{median([r['p99_ms'] for r in r3['rounds']]):.1f} |")
        print(f"| ack latency at {args.rate}/s p50 / p99, ms | "
              f"{median([r['p50_ms'] for r in r1['paced']]):.2f} / {median([r['p99_ms'] for r in r1['paced']]):.2f} | "
              f"{median([r['p50_ms'] for r in r3['paced']]):.2f} / {median([r['p99_ms'] for r in r3['paced']]):.2f} |")
        per_round = [b["records_per_s"] / a["records_per_s"] for a, b in zip(r1["rounds"], r3["rounds"])]
        results["ratio_per_round"] = per_round
        print(f"\nper-round RF 3 / RF 1 throughput: {', '.join(f'{x:.0%}' for x in per_round)}")
        print(f"RF 3 acks=all / RF 1 acks=1 throughput (medians): {t3 / t1:.0%} (issue 15's target >= 85%: "
              f"{'met' if t3 / t1 >= 0.85 else 'NOT met'})")
    for f in results.get("failover", []):
        print(f"failover {f['mode']}: {f['seconds']:.2f} s (leader {f['old_leader']} -> {f['new_leader']})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--brokers", default="kbroker", help="kbroker,kafka: the clusters to run, one after the other")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup-seconds", type=float, default=3, help="produce to each topic first, not counted")
    ap.add_argument("--records", type=int, default=300000)
    ap.add_argument("--rounds", type=int, default=3, help="throughput/latency rounds (0: failover only)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--latency-seconds", type=float, default=10)
    ap.add_argument("--failover-modes", default="kill9,sigterm")
    ap.add_argument("--json")
    ap.add_argument("--override", action="append", default=[], help="a kbroker key=value for all three brokers")
    ap.add_argument("--broker-env", action="append", default=[], help="NAME=value in kbroker's environment")
    args = ap.parse_args()
    kinds = [k for k in args.brokers.split(",") if k]
    if any(k not in ("kbroker", "kafka") for k in kinds):
        ap.error("--brokers takes kbroker and kafka")
    signal.alarm(len(kinds) * int(120 + args.rounds * 2 * (args.seconds + args.latency_seconds + 70) + 120))

    results = {"machine": machine(), "args": vars(args)}
    for kind in kinds:
        results[kind] = run_cluster(kind, args)
    for kind in kinds:
        report(kind, results[kind], args)
    print(f"machine: {json.dumps(results['machine'])}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0 if not any("failed" in results[k] for k in kinds) else 1


if __name__ == "__main__":
    sys.exit(main())
