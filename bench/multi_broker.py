#!/usr/bin/env python3
"""More than one core (issue 15 target 8): aggregate throughput of 1 vs 2 kbroker processes on this host.

    python bench/multi_broker.py --seconds 15                   # 1 broker, then 2 brokers, same clients
    python bench/multi_broker.py --counts 1,2 --pin             # each broker's threads pinned to its own core

A Python broker runs its event loop on one core (the GIL), so on a many-core host the way to use the cores is several
broker processes in one cluster (docs/operations.md, "Using a many-core host"). This measures it: for each broker
count N in ``--counts`` a fresh cluster on a one-node ZooKeeper (Debian's zookeeper package, via
tests/integration/harness.py; chroot /kb; the integration harness's broker settings except
log.flush.interval.messages, which is back at its default), one topic of ``--partitions`` (12) partitions,
replication factor 1 (so the partitions and their leaders spread over the N brokers by the normal assignment), and
``--producers`` (4) producer processes (spawned; each its own librdkafka) sending ``--size``-byte (1 KB) values flat
out, acks=all, linger.ms=5, to the whole topic for ``--seconds``; then ``--producers`` consumer processes read it
all back (each assigned its share of the partitions from offset 0). Reported per N: aggregate produce and consume
MB/s, the brokers' summed CPU seconds per GB and cores used, each broker's cores, how long its threads were runnable
but waiting for a CPU (/proc/<pid>/task/*/schedstat, seconds per second) and the machine's idle cores
(/proc/stat) -- on a 2-core machine the clients need CPU too, so the gain of a second broker is bounded by what the
clients leave.

``--pin``: after start, every thread of broker i is bound to core i % nproc (os.sched_setaffinity per thread, as
``taskset -a -p -c i <pid>`` would do); clients are left unpinned.

Results: a markdown table on stdout, JSON in bench/results/multi-broker-<UTC time>.json (gitignored).
"""
import argparse
import datetime as _dt
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

import confluent_kafka as ck  # noqa: E402

from bench_clients import machine  # noqa: E402
from many_clients import proc_stat_cpu, run_delay  # noqa: E402
from peers import CLK_TCK, create_topics  # noqa: E402


def _r(x, nd=2):
    return None if x is None else round(x, nd)


class _Bootstrap:
    """What peers.create_topics needs of a broker: conf() and kind."""
    kind = "kbroker"

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap

    def conf(self, **extra):
        return dict({"bootstrap.servers": self.bootstrap}, **extra)


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pin(pid, core):
    """Bind every thread of ``pid`` to ``core`` (threads created later inherit it from the main thread)."""
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            os.sched_setaffinity(int(tid), {core})
        except OSError:
            pass  # the thread ended


def producer_main(bootstrap, topic, size, seconds, ready, start, out):
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "none",
                     "enable.idempotence": False, "queue.buffering.max.messages": 1000000,
                     "queue.buffering.max.kbytes": 1048576, "delivery.report.only.error": True,
                     "message.timeout.ms": 60000})
    errs = [0]
    p.produce(topic, b"warm-up")
    p.flush(60)
    ready.release()
    start.wait(600)
    value = os.urandom(size)
    t0 = time.perf_counter()
    sent = 0
    produce, poll = p.produce, p.poll
    cb = lambda err, msg: errs.__setitem__(0, errs[0] + 1)  # noqa: E731 - failures only
    while True:
        if (sent & 1023) == 0:
            if time.perf_counter() - t0 >= seconds:
                break
            poll(0)
        try:
            produce(topic, value, on_delivery=cb)
            sent += 1
        except BufferError:
            poll(0.005)
    left = p.flush(60)
    out.put({"sent": sent, "acked": sent - errs[0] - left, "t_end": time.perf_counter()})


def consumer_main(bootstrap, topic, partitions, expected_per_partition, ready, start, out):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "multi-broker", "enable.auto.commit": False,
                     "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    c.assign([ck.TopicPartition(topic, p, 0) for p in partitions])
    ready.release()
    start.wait(600)
    t0 = time.perf_counter()
    got = nbytes = 0
    done = set()
    deadline = t0 + 300
    while len(done) < len(partitions) and time.perf_counter() < deadline:
        for m in c.consume(1000, 0.2):
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF and m.offset() >= \
                        expected_per_partition.get(m.partition(), 0):
                    done.add(m.partition())
                continue
            got += 1
            nbytes += len(m.value())
    t1 = time.perf_counter()
    c.close()
    out.put({"records": got, "bytes": nbytes, "seconds": t1 - t0})


def _run_clients(ctx, target, argsets):
    ready, start, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*a, ready, start, out), daemon=True) for a in argsets]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=180):
            raise RuntimeError("clients not ready within 180 s")
    return procs, start, out


def run_count(n, args, base):
    from tests.integration.test_cluster_common import Cluster
    res = {"brokers": n, "errors": [], "loadavg_before": round(os.getloadavg()[0], 2)}
    cluster = Cluster(base / ("cluster%d" % n), args.ensemble, n=n,
                      overrides={"log.flush.interval.messages": None, "broker.rack": None})
    ctx = mp.get_context("spawn")
    procs = []
    try:
        cluster.start()
        pids = [b.pid for b in cluster.brokers]
        if args.pin:
            for i, pid in enumerate(pids):
                pin(pid, i % os.cpu_count())
        topic = "multi-%d" % n
        create_topics(_Bootstrap(cluster.bootstrap), [topic], args.partitions, timeout=60)
        procs, start, out = _run_clients(ctx, producer_main, [(cluster.bootstrap, topic, args.size, args.seconds)
                                                              for _ in range(args.producers)])
        cpu0, idle0 = [proc_cpu(p) for p in pids], proc_stat_cpu()
        wait0 = [sum(run_delay(p).values()) for p in pids]
        t0 = time.perf_counter()
        start.set()
        prods = [out.get(timeout=args.seconds + 120) for _ in procs]
        t1 = max(p["t_end"] for p in prods)  # perf_counter is CLOCK_MONOTONIC: comparable across processes
        cpu1, idle1 = [proc_cpu(p) for p in pids], proc_stat_cpu()
        wait1 = [sum(run_delay(p).values()) for p in pids]
        for p in procs:
            p.join(10)
        window = t1 - t0
        acked = sum(p["acked"] for p in prods)
        nbytes = acked * args.size
        cpu = [b - a for a, b in zip(cpu0, cpu1)]
        res.update({
            "window_s": _r(window, 3), "records_acked": acked, "produce_mb_per_s": _r(nbytes / window / 1e6),
            "produce_cpu_s_per_gb": _r(sum(cpu) / (nbytes / 1e9), 3) if nbytes else None,
            "produce_broker_cores": [_r(c / window) for c in cpu],
            # seconds its threads were runnable but waiting for a CPU, per second: > 0.5 = starved by the machine
            "produce_broker_runqueue_wait": [_r((b - a) / window) for a, b in zip(wait0, wait1)],
            "produce_idle_cores": _r((idle1[0] - idle0[0]) / max(1, idle1[1] - idle0[1]) * os.cpu_count()),
        })
        # read it all back: expected end offsets from the cluster (the warm-up records included)
        probe = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "multi-broker-probe"})
        ends = {p: probe.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1]
                for p in range(args.partitions)}
        probe.close()
        shares = [[p for p in range(args.partitions) if p % args.producers == i] for i in range(args.producers)]
        procs, start, out = _run_clients(ctx, consumer_main, [(cluster.bootstrap, topic, s,
                                                               {p: ends[p] for p in s}) for s in shares if s])
        cpu0, idle0 = [proc_cpu(p) for p in pids], proc_stat_cpu()
        t0 = time.perf_counter()
        start.set()
        cons = [out.get(timeout=330) for _ in procs]
        window = time.perf_counter() - t0
        cpu1, idle1 = [proc_cpu(p) for p in pids], proc_stat_cpu()
        cbytes = sum(c["bytes"] for c in cons)
        cpu = [b - a for a, b in zip(cpu0, cpu1)]
        res.update({
            "records_consumed": sum(c["records"] for c in cons), "expected": sum(ends.values()),
            "consume_mb_per_s": _r(cbytes / max(c["seconds"] for c in cons) / 1e6),
            "consume_cpu_s_per_gb": _r(sum(cpu) / (cbytes / 1e9), 3) if cbytes else None,
            "consume_broker_cores": [_r(c / window) for c in cpu],
            "consume_idle_cores": _r((idle1[0] - idle0[0]) / max(1, idle1[1] - idle0[1]) * os.cpu_count()),
        })
    except Exception as e:  # noqa: BLE001 - report, then clean up
        res["errors"].append("%s: %s" % (type(e).__name__, e))
    finally:
        for p in procs:
            p.join(1)
            if p.is_alive():
                p.kill()
        cluster.close()
    res["loadavg_after"] = round(os.getloadavg()[0], 2)
    return res


ROWS = [("produce 1 KB acks=all: MB/s (all brokers)", "produce_mb_per_s"),
        ("produce: brokers' CPU s per GB", "produce_cpu_s_per_gb"),
        ("produce: cores used per broker", "produce_broker_cores"),
        ("produce: per broker, threads waiting for a CPU (s per s)", "produce_broker_runqueue_wait"), ("produce: machine idle cores", "produce_idle_cores"),
        ("consume: MB/s (all brokers)", "consume_mb_per_s"), ("consume: brokers' CPU s per GB", "consume_cpu_s_per_gb"),
        ("consume: cores used per broker", "consume_broker_cores"), ("consume: machine idle cores", "consume_idle_cores"),
        ("records consumed / expected", ("records_consumed", "expected")),
        ("1-min load average before / after", ("loadavg_before", "loadavg_after"))]


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, list):
        return " / ".join(fmt(x) for x in v)
    return "{:,.2f}".format(v) if isinstance(v, float) else "{:,}".format(v) if isinstance(v, int) else str(v)


def table(results):
    lines = ["| metric | " + " | ".join("%d broker%s" % (r["brokers"], "s" * (r["brokers"] > 1)) for r in results)
             + (" | last / first |" if len(results) > 1 else " |"), "|" + "---|" * (len(results) + 1 + (len(results) > 1))]
    for label, key in ROWS:
        vals = [(" / ".join(fmt(r.get(k)) for k in key) if isinstance(key, tuple) else r.get(key)) for r in results]
        row = "| %s | %s |" % (label, " | ".join(fmt(v) for v in vals))
        if len(results) > 1:
            a, b = vals[-1], vals[0]
            row += " %s |" % ("%.2fx" % (a / b) if isinstance(a, float) and isinstance(b, float) and b else "")
        lines.append(row)
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", default="1,2", help="broker counts to run, in order")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--pin", action="store_true", help="pin broker i's threads to core i %% nproc")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    from tests.integration.harness import ZkEnsemble
    started = _dt.datetime.now(_dt.timezone.utc)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-multi-") as tmp:
        base = Path(tmp)
        args.ensemble = ZkEnsemble(base / "zk", n=1)
        args.ensemble.start()
        try:
            for n in [int(x) for x in args.counts.split(",") if x.strip()]:
                print("benchmarking %d broker(s)" % n, file=sys.stderr, flush=True)
                results.append(run_count(n, args, base))
        finally:
            args.ensemble.close()
            del args.ensemble
    doc = {"started_utc": started.isoformat(timespec="seconds"), "command": [sys.executable] + sys.argv,
           "args": vars(args), "machine": machine(), "results": results}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "multi-broker-%s.json" % started.strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    print(table(results))
    for r in results:
        for e in r["errors"]:
            print("\n%d brokers error: %s" % (r["brokers"], e))
    print("\nJSON: %s" % os.path.relpath(path))
    return 0 if all(not r["errors"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
