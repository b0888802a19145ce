#!/usr/bin/env python3
"""Overhead of the metrics on the produce path (issue 13): the same load on a broker without the metrics endpoint
and on one with it, scraped like Prometheus would.

    python bench/metrics_overhead.py --seconds 8 --repeat 3

Modes, each on a fresh kbroker (bench/bench_clients.py's ``BrokerProc``: child process on a free 127.0.0.1 port,
fresh temp data dir), alternating within every round (round 1: off, on; round 2: on, off; ...) so both see the same
machine:
  off   ``metrics.http.port=-1`` (the default): no endpoint, and no request or topic counters are kept
        (``Services.stats`` is None), so the hot path pays nothing.
  on    ``metrics.http.port`` set: every request is counted and timed (kbroker/server/stats.py), Produce counts
        messages and bytes per topic, and a scraper thread GETs ``/metrics`` every ``--scrape-interval`` seconds
        (default 5, a third of Prometheus' default 15 s) for the whole phase; the scrape's duration is reported.
        At the end the scraped ``kafka_server_brokertopicmetrics_messagesin_total`` must equal the records the
        broker acknowledged (warm-up included): the run fails otherwise.
Phases in each mode (topic with ``--partitions`` partitions, replication factor 1, confluent-kafka client,
acks=all, linger.ms=5, no compression, delivery reports for failures only, a deep local queue):
  produce-1k    1,024-byte values for ``--seconds`` (at most ``--records-1k``), time from the first produce() to
                the return of flush(); records/s, MB/s (10**6), broker CPU s per GB of values (utime+stime of the
                broker process, /proc/<pid>/stat), produce requests per GB (librdkafka's tx count).
  produce-100   the same with 100-byte values: the per-request cost weighs more.
In-process (``--micro-calls``, first, no broker): what the counting costs the broker's loop per Produce request:
the Connection's part (four clock reads, the ``_Done`` behind the response, its ``record`` into the seven histograms
and the version count, as the writer does it) plus one ``TopicStats.appended`` per partition entry
(``--micro-entries``, default 1), timed over that many calls in CPU time of the thread (a loaded machine
stretches wall time, not this).
The table shows medians over the rounds and the on / off ratio; JSON with every round in
``bench/results/metrics-overhead-<UTC time>.json`` (gitignored). Exit code 1 when a phase failed.
"""
import argparse
import datetime as _dt
import json
import os
import re
import statistics
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import confluent_kafka as ck  # noqa: E402

from bench_clients import REPO, BrokerProc, client_cpu, create_topics, free_port, machine  # noqa: E402

MODES = ("off", "on")
PHASES = (("produce-1k", 1024), ("produce-100", 100))
MESSAGES_IN = re.compile(rb"^kafka_server_brokertopicmetrics_messagesin_total (\S+)$", re.M)


def micro(calls, entries):
    """Per-Produce-request cost (us) of the counting, in-process (module docstring)."""
    sys.path.insert(0, REPO)
    from kbroker.server.connection import _Done, _request_stats
    from kbroker.server.stats import BrokerStats

    stats = BrokerStats()
    topics = [stats.topics.topic("t%d" % i) for i in range(entries)]
    req = {"acks": -1}
    monotonic = time.monotonic
    best = None
    for _ in range(3):              # best of 3, in CPU time of this thread: the machine is shared
        t0 = time.thread_time()
        for i in range(calls):
            # what Connection.dispatch and its writer do for one request with stats on, and Produce's counting
            began = monotonic()
            for t in topics:
                t.appended(16, 16384)
            done = _Done(_request_stats(stats.requests, 0, req), 9, began, began, monotonic(), 0.0, 0)
            done.record(monotonic(), monotonic())
        per = (time.thread_time() - t0) / calls * 1e6
        best = per if best is None else min(best, per)
    return round(best, 3)


class Scraper(threading.Thread):
    """GET /metrics every ``interval`` seconds until stopped; keeps the count, the slowest scrape, the size."""

    def __init__(self, port, interval):
        super().__init__(daemon=True)
        self.url = "http://127.0.0.1:%d/metrics" % port
        self.interval = interval
        self.done = threading.Event()
        self.scrapes, self.slowest_s, self.bytes, self.errors = 0, 0.0, 0, 0

    def scrape(self):
        t0 = time.perf_counter()
        body = urllib.request.urlopen(self.url, timeout=10).read()
        self.slowest_s = max(self.slowest_s, time.perf_counter() - t0)
        self.scrapes += 1
        self.bytes = len(body)
        return body

    def run(self):
        while not self.done.wait(self.interval):
            try:
                self.scrape()
            except OSError:
                self.errors += 1


def produce(broker, topic, size, count, seconds):
    """Produce up to ``count`` ``size``-byte values within ``seconds`` (then flush, <= 30 s)."""
    value = os.urandom(size)
    state = {"err": 0, "first_err": None, "tx": 0}

    def on_error(err, msg):
        state["err"] += 1
        state["first_err"] = state["first_err"] or str(err)

    def on_stats(text):
        state["tx"] = sum(b.get("tx", 0) for b in json.loads(text).get("brokers", {}).values())

    p = ck.Producer(broker.conf(**{
        "client.id": "bench", "acks": "all", "linger.ms": 5, "compression.type": "none", "enable.idempotence": False,
        "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576,
        "delivery.report.only.error": True, "on_delivery": on_error, "statistics.interval.ms": 1000,
        "stats_cb": on_stats}))
    p.produce(topic, value)    # warm the connection and metadata
    p.flush(10)
    u0, s0 = broker.cpu_split()
    c0, t0 = client_cpu(), time.perf_counter()
    deadline, sent = t0 + seconds, 0
    while sent < count:
        if (sent & 1023) == 0 and time.perf_counter() >= deadline:
            break
        try:
            p.produce(topic, value)
            sent += 1
        except BufferError:
            p.poll(0.005)
            continue
        if (sent & 1023) == 0:
            p.poll(0)
    left = p.flush(30)
    elapsed = time.perf_counter() - t0
    u1, s1 = broker.cpu_split()
    c1 = client_cpu()
    p.poll(1.5)                # one more statistics callback covering the end of the phase
    acked = sent - state["err"] - left
    gb = acked * size / 1e9
    return {"records_acked": acked, "warmup_acked": 1, "errors": state["err"], "first_error": state["first_err"],
            "seconds": round(elapsed, 3), "records_per_s": round(acked / elapsed, 1),
            "mb_per_s": round(acked * size / elapsed / 1e6, 2),
            "broker_cpu_s_per_gb": round((u1 + s1 - u0 - s0) / gb, 3) if gb else None,
            "client_cpu_cores": round((c1 - c0) / elapsed, 2),
            "requests": state["tx"], "requests_per_gb": round(state["tx"] / gb) if gb else None}


def run_mode(mode, args):
    overrides = {}
    if mode == "on":
        overrides = {"metrics.http.port": free_port(), "metrics.http.host": "127.0.0.1"}
    broker = BrokerProc("kbroker", overrides=overrides)
    out = {"mode": mode}
    scraper = None
    try:
        broker.start()
        if mode == "on":
            scraper = Scraper(overrides["metrics.http.port"], args.scrape_interval)
            scraper.start()
        topics = {name: "%s-%s" % (name, mode) for name, _ in PHASES}
        create_topics(broker, list(topics.values()), args.partitions)
        acked = 0
        for name, size in PHASES:
            if args.phases and name not in args.phases.split(","):
                continue
            cap = args.records_1k if size == 1024 else args.records_100
            out[name] = produce(broker, topics[name], size, cap, args.seconds)
            acked += out[name]["records_acked"] + out[name]["warmup_acked"]
        if scraper is not None:
            scraper.done.set()
            found = MESSAGES_IN.search(scraper.scrape())
            counted = int(float(found.group(1))) if found else None
            out["scrape"] = {"scrapes": scraper.scrapes, "slowest_ms": round(scraper.slowest_s * 1000, 1),
                             "bytes": scraper.bytes, "errors": scraper.errors, "messagesin": counted,
                             "acked": acked}
            if counted != acked:
                raise RuntimeError("scraped messagesin %s != %d records acknowledged" % (counted, acked))
        out["broker_peak_rss_mb"] = broker.rss_mb()
    except Exception as exc:  # noqa: BLE001 - reported in the table and the JSON
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        out["broker_tail"] = broker.tail()
    finally:
        if scraper is not None:
            scraper.done.set()
        broker.stop()
    return out


ROWS = [("produce-1k", "records_per_s", "produce 1 KB acks=all: records/s", "{:,.0f}"),
        ("produce-1k", "mb_per_s", "produce 1 KB: MB/s", "{:.0f}"),
        ("produce-1k", "broker_cpu_s_per_gb", "produce 1 KB: broker CPU s per GB", "{:.2f}"),
        ("produce-100", "records_per_s", "produce 100 B acks=all: records/s", "{:,.0f}"),
        ("produce-100", "broker_cpu_s_per_gb", "produce 100 B: broker CPU s per GB", "{:.2f}"),
        ("produce-1k", "requests_per_gb", "produce 1 KB: requests per GB (librdkafka tx)", "{:,.0f}"),
        ("produce-100", "requests_per_gb", "produce 100 B: requests per GB (librdkafka tx)", "{:,.0f}")]


def median_of(runs, phase, key):
    vals = [r[phase][key] for r in runs if phase in r and r[phase].get(key) is not None]
    return statistics.median(vals) if vals else None


def table(rounds):
    by_mode = {m: [r[m] for r in rounds] for m in MODES}
    lines = ["| median of %d rounds | metrics off | metrics on (scraped) | on / off |" % len(rounds),
             "|---|---|---|---|"]
    for phase, key, label, fmt in ROWS:
        a, b = (median_of(by_mode[m], phase, key) for m in MODES)
        ratio = "%.3f" % (b / a) if a and b else "n/a"
        lines.append("| %s | %s | %s | %s |" % (label, "n/a" if a is None else fmt.format(a),
                                                "n/a" if b is None else fmt.format(b), ratio))
    scrapes = [r["scrape"] for r in by_mode["on"] if "scrape" in r]
    if scrapes:
        lines.append("| scrapes per run / slowest scrape / size | | %d / %.1f ms / %d bytes | |" % (
            min(s["scrapes"] for s in scrapes), max(s["slowest_ms"] for s in scrapes),
            max(s["bytes"] for s in scrapes)))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="wall-clock cap of each produce phase")
    ap.add_argument("--records-1k", type=int, default=2000000, help="record cap of produce-1k")
    ap.add_argument("--records-100", type=int, default=5000000, help="record cap of produce-100")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the modes alternate within each")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--scrape-interval", type=float, default=5.0, help="seconds between scrapes in mode 'on'")
    ap.add_argument("--phases", default="", help="comma list of phases to run (default: all)")
    ap.add_argument("--micro-calls", type=int, default=200000, help="calls of the in-process counting timing")
    ap.add_argument("--micro-entries", type=int, default=1, help="partition entries per Produce in the timing")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory of the JSON result")
    args = ap.parse_args(argv)

    started = _dt.datetime.now(_dt.timezone.utc)
    per_call = micro(args.micro_calls, args.micro_entries)
    print("in-process counting per Produce request (%d partition entries): %s us" % (args.micro_entries, per_call),
          flush=True)
    rounds = []
    for r in range(args.repeat):
        order = MODES if r % 2 == 0 else MODES[::-1]
        rnd = {}
        for mode in order:
            load0 = os.getloadavg()[0]
            rnd[mode] = run_mode(mode, args)
            rnd[mode]["load_1min_before"] = round(load0, 2)
            print("round %d %s: %s" % (r + 1, mode, json.dumps(
                {k: (v.get("records_per_s"), v.get("broker_cpu_s_per_gb")) if isinstance(v, dict) and
                 "records_per_s" in v else v for k, v in rnd[mode].items() if k != "broker_tail"})), flush=True)
        rounds.append(rnd)
    print(table(rounds))
    failed = [m for rnd in rounds for m in MODES if "error" in rnd[m]]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "metrics-overhead-%s.json" % started.strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump({"started": started.isoformat(), "args": vars(args), "machine": machine(),
                   "micro_us_per_request": per_call, "rounds": rounds,
                   "load_1min_after": os.getloadavg()[0]}, f, indent=1)
    print("JSON: %s" % path)
    if failed:
        print("FAILED: errors in %s" % failed, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
