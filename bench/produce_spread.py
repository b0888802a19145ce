#!/usr/bin/env python3
"""Produce to one partition vs spread over 1,000: broker CPU per GB, side by side (issue 15, target 4's spread).

    python bench/produce_spread.py --brokers kbroker,kafka,tansu           # 3 rounds of 300 MB each way
    python bench/produce_spread.py --brokers kbroker --mb 300 --rounds 5 --repo /tmp/before-X

The target: producing to 1,000 random partitions costs the broker at most 2x the CPU per GB of producing to one.
``bench/scale_partitions.py`` measures it for kbroker alone; this runs the same client workload against every
broker of ``--brokers`` in turn (bench/peers.py: kbroker, Apache Kafka 4.4 as one KRaft node, Tansu with its
memory store; never two at once), so the ratio can be read next to Kafka's and Tansu's own.

Per broker: start it, create ``one`` (1 partition) and ``--spread`` / 10 topics of 10 partitions (RF 1), warm up
(``--warm-mb`` each way, not measured: the JVM compiles its hot paths, kbroker maps every partition's indexes),
then ``--rounds`` rounds of: ``--mb`` MB of 1,024-byte random values to ``one``, then the same to the spread
partitions, each record to a random one (seeded). The producer is scale_partitions.py's: confluent-kafka, acks=1,
``--linger-ms`` (100), batch.size 1,000,000, no compression, no idempotence, a fresh producer per phase; time
from the first produce() to the return of flush(); every record must be acknowledged (delivery errors fail the
run). Measured per phase: broker CPU (utime+stime of the whole process from /proc) per GB of values, and the
Produce requests librdkafka sent (its statistics: brokers[].req.Produce over the phase) -- how many
requests carry the GB is what the spread changes, and it
depends on how fast broker and client each are at that moment, so it is printed beside the CPU.

``--client java``: the same phases from Apache Kafka's producer (kafka-clients 4.4, tests/java's driver, one JVM
per broker, ``java_phases`` below). It differs from librdkafka in the one way that matters here: it drains every
ready partition led by a broker into one Produce request (up to max.request.size, 1 MiB), where librdkafka
(2.16, confluentinc/librdkafka#1700, open) sends one partition per request. Tansu 0.6 accepts no record from it
(every batch expires unsent), so that broker is reported FAILED and the others still run.

Output: a line per phase, then per broker the medians and the ratio spread / one; JSON in
``bench/results/produce-spread-<UTC time>.json``. Exit 0 when every phase of every broker delivered everything.
"""
import argparse
import bisect
import datetime as _dt
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers  # noqa: E402
import scale_partitions  # noqa: E402


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class Stats:
    """The last of librdkafka's statistics callbacks: Produce requests sent to real brokers (cumulative)."""

    def __init__(self):
        self.last = None

    def __call__(self, js):
        self.last = json.loads(js)

    def requests(self):
        return sum(b.get("req", {}).get("Produce", 0) for b in self.last["brokers"].values()
                   if b.get("nodeid", -1) >= 0)


def produce(broker, targets, total_bytes, linger_ms, seed, value_size):
    """``total_bytes`` of ``value_size``-byte records, each to a random (topic, partition) of ``targets``: the
    producer and loop of scale_partitions.produce, with librdkafka's statistics on. Returns {seconds, cpu_s,
    requests}."""
    stats = Stats()
    failed = []
    held = {}

    def on_error(err, msg):
        failed.append(str(err))

    def warm(p):     # connection and metadata before the clock starts; Produce requests counted from here
        held["producer"] = p
        p.produce(targets[0][0], b"w" * value_size, partition=targets[0][1])
        if p.flush(30) or failed:
            raise RuntimeError("warm-up record not delivered: %s" % failed[:1])
        deadline = time.monotonic() + 5
        while stats.last is None and time.monotonic() < deadline:
            p.poll(0.05)
        held["requests"] = stats.requests()

    seconds, cpu = scale_partitions.produce(
        broker, targets, total_bytes, value_size, linger_ms=linger_ms, seed=seed, before_clock=warm,
        extra_conf={"statistics.interval.ms": 100, "stats_cb": stats, "on_delivery": on_error,
                    "delivery.report.only.error": True})
    if failed:
        raise RuntimeError("%s: %d records failed (%s)" % (broker.kind, len(failed), failed[:1]))
    # the statistics are a snapshot every 100 ms: wait for one taken after the flush
    p, stamp = held["producer"], stats.last["ts"]
    deadline = time.monotonic() + 5
    while stats.last["ts"] == stamp and time.monotonic() < deadline:
        p.poll(0.05)
    return {"seconds": round(seconds, 3), "cpu_s": round(cpu, 3), "requests": stats.requests() - held["requests"]}


class CpuSampler(threading.Thread):
    """(wall clock, broker CPU seconds) every ``period`` s, so a phase timed by another process (the Java
    producer's epoch-ms start and end) gets its broker CPU by interpolation. /proc counts CPU in 10 ms ticks."""

    def __init__(self, broker, period=0.005):
        super().__init__(daemon=True)
        self.broker, self.period = broker, period
        self.samples = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.samples.append((time.time(), *self.broker.cpu_split()))
            self.done.wait(self.period)

    def at(self, t):
        """(user, system) CPU seconds at wall-clock time ``t``, interpolated between the samples around it."""
        s = self.samples
        i = bisect.bisect_left(s, (t, -1.0, -1.0))
        if i == 0 or i == len(s):
            raise RuntimeError("no CPU sample around %.3f" % t)
        (t0, u0, s0), (t1, u1, s1) = s[i - 1], s[i]
        f = (t - t0) / max(t1 - t0, 1e-9)
        return u0 + (u1 - u0) * f, s0 + (s1 - s0) * f


def java_phases(b, phases, args):
    """Every phase in one JVM (kafka-clients 4.4 through tests/java's driver, op ``produce_spread``): one
    producer with librdkafka's settings here (acks=1, linger.ms, batch.size 1,000,000, no compression, no
    idempotence) and ``buffer.memory`` for a batch per partition (the Java client allocates batch.size per open
    batch: 1,000 partitions x 1 MB). The JIT compiles during the warm phases. Broker CPU per phase from a
    sampler: the JVM reports each phase's wall-clock start and end."""
    sys.path.insert(0, peers.REPO)
    from tests.integration.java_driver import build_driver, run_java
    cp = build_driver()
    conf = {"acks": "1", "linger.ms": str(args.linger_ms), "batch.size": str(args.java_batch_size),
            "compression.type": "none", "enable.idempotence": "false",
            "buffer.memory": str(max(256 << 20, (args.spread + 1) * args.java_batch_size + (64 << 20)))}
    heap = "-Xmx%dm" % max(1024, (int(conf["buffer.memory"]) >> 20) + 1024)
    step = {"op": "produce_spread", "valueSize": args.value, "config": conf,
            "phases": [{"name": n, "targets": [list(t) for t in targets], "bytes": nbytes, "seed": seed}
                       for n, targets, nbytes, seed in phases]}
    sampler = CpuSampler(b)
    sampler.start()
    try:
        # delivery.timeout.ms = timeoutMs: a broker the client cannot produce to (Tansu 0.6) fails in 2 min
        (res,) = run_java(cp, b.bootstrap, [step], timeout=1800, jvm_flags=("-Xms512m", heap), timeoutMs=120000)
    finally:
        time.sleep(0.02)        # one sample after the last phase's end
        sampler.done.set()
        sampler.join()
    if "error" in res:
        raise RuntimeError("java produce_spread: %s" % res["error"])
    out = []
    for ph in res["phases"]:
        if ph["failed"]:
            raise RuntimeError("%s: %d records failed (%s)" % (b.kind, ph["failed"], ph["firstError"]))
        t0, t1 = ph["startMs"] / 1000.0, ph["endMs"] / 1000.0
        (ua, sa), (ub, sb) = sampler.at(t0), sampler.at(t1)
        out.append({"seconds": round(t1 - t0, 3), "cpu_s": round(ub - ua + sb - sa, 3), "user_s": round(ub - ua, 3),
                    "sys_s": round(sb - sa, 3), "requests": int(ph["requests"])})
    if len(out) != len(phases):
        raise RuntimeError("java produce_spread ran %d of %d phases" % (len(out), len(phases)))
    return out


def run_broker(kind, args):
    b = peers.make_broker(kind, args.tansu_bin, overrides=dict(kv.split("=", 1) for kv in args.override))
    out = {"one": [], "spread": [], "load": [loadavg()]}
    try:
        b.start()
        ntopics = -(-args.spread // 10)
        names = ["s%04d" % t for t in range(ntopics)]
        for i in range(0, ntopics, 100):           # CreateTopics in requests of 100 topics
            peers.create_topics(b, names[i:i + 100], 10, timeout=120)
        peers.create_topics(b, ["one"], 1)
        spread = [(names[i // 10], i % 10) for i in range(args.spread)]
        one = [("one", 0)]
        total = args.mb * 1000000
        measured = [(name, targets, total, 100 + r) for r in range(args.rounds)
                    for name, targets in (("one", one), ("spread", spread))]
        if args.client == "java":
            warm = [("warm-one", one, args.warm_mb * 1000000, 1), ("warm-spread", spread, args.warm_mb * 1000000, 1)]
            java_res = java_phases(b, warm + measured, args)[len(warm):]
        else:
            for targets in (one, spread):
                produce(b, targets, args.warm_mb * 1000000, args.linger_ms, 1, args.value)
        for i, (name, targets, nbytes, seed) in enumerate(measured):
            if args.client == "java":
                res = java_res[i]
            else:
                res = produce(b, targets, nbytes, args.linger_ms, seed, args.value)
            res["cpu_s_per_gb"] = round(res["cpu_s"] / (nbytes / 1e9), 3)
            res["requests_per_gb"] = round(res["requests"] / (nbytes / 1e9))
            out[name].append(res)
            split = " (user %.2f sys %.2f s)" % (res["user_s"], res["sys_s"]) if "user_s" in res else ""
            print("%-8s round %d %-6s %5.2f s  broker CPU %6.3f s/GB%s  %6d Produce requests"
                  % (kind, i // 2 + 1, name, res["seconds"], res["cpu_s_per_gb"], split, res["requests"]), flush=True)
        out["peak_rss_mb"] = b.rss_mb()
    finally:
        b.stop()
    out["load"].append(loadavg())
    med = {k: statistics.median(x["cpu_s_per_gb"] for x in out[k]) for k in ("one", "spread")}
    out["median_cpu_s_per_gb"] = med
    out["ratio"] = round(med["spread"] / med["one"], 2)
    out["ratios_per_round"] = [round(s["cpu_s_per_gb"] / o["cpu_s_per_gb"], 2)
                               for o, s in zip(out["one"], out["spread"])]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="kbroker,kafka,tansu")
    ap.add_argument("--mb", type=int, default=300, help="MB of values per measured phase")
    ap.add_argument("--warm-mb", type=int, default=100, help="MB each way before the measured rounds")
    ap.add_argument("--spread", type=int, default=1000, help="partitions of the spread phase (topics of 10)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--linger-ms", type=int, default=100)
    ap.add_argument("--value", type=int, default=1024)
    ap.add_argument("--tansu-bin", default=None)
    ap.add_argument("--client", default="librdkafka", choices=("librdkafka", "java"),
                    help="java: Apache Kafka's producer (kafka-clients 4.4), which puts every ready partition of a "
                         "broker into one Produce request; librdkafka sends one partition per request")
    ap.add_argument("--java-batch-size", type=int, default=1000000, help="the Java producer's batch.size")
    ap.add_argument("--repo", default=None, help="run kbroker from this tree (PYTHONPATH)")
    ap.add_argument("--override", action="append", default=[], help="a kbroker key=value (ignored by the peers)")
    args = ap.parse_args(argv)
    if args.repo:
        peers.REPO = os.path.abspath(args.repo)
    results = {"machine": os.uname().release, "args": vars(args), "client": args.client, "brokers": {},
               "started": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    failed = {}
    for kind in args.brokers.split(","):
        try:
            results["brokers"][kind] = run_broker(kind, args)
        except peers.PeerUnavailable as e:
            print("%s: skipped (%s)" % (kind, e), flush=True)
        except RuntimeError as e:
            # the Java producer against Tansu 0.6: every batch expires unsent (2026-12-04); the others still run
            failed[kind] = str(e)[:500]
            print("%s: FAILED (%s)" % (kind, failed[kind]), flush=True)
    results["failed"] = failed
    print("\n| broker | one partition s/GB | %d partitions s/GB | ratio (median; per round) | Produce requests "
          "per GB one / spread |" % args.spread)
    print("|---|---|---|---|---|")
    for kind, r in results["brokers"].items():
        print("| %s | %.3f | %.3f | %.2f (%s) | %s / %s |" % (
            kind, r["median_cpu_s_per_gb"]["one"], r["median_cpu_s_per_gb"]["spread"], r["ratio"],
            ", ".join("%.2f" % x for x in r["ratios_per_round"]),
            statistics.median(x["requests_per_gb"] for x in r["one"]),
            statistics.median(x["requests_per_gb"] for x in r["spread"])))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "produce-spread-%s.json" % _dt.datetime.now(_dt.timezone.utc).strftime(
        "%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print("->", path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
