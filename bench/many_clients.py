#!/usr/bin/env python3
"""Many clients (issue 15 target 2): 50 producer and 50 consumer processes over one 100-partition topic, per broker.

    python bench/many_clients.py --brokers kbroker,kafka --seconds 20
    python bench/many_clients.py --brokers kbroker --rate 0          # producers flat out instead of paced

For each broker in turn (bench/peers.py: kbroker, Apache Kafka 4.4 KRaft, Tansu; never two at once):
  * one topic of ``--partitions`` (100) partitions, replication factor 1;
  * ``--consumers`` (50) consumer processes, each ``assign()``ed its own share of the partitions (2 each) at offset
    0, started first, and ``--producers`` (50) producer processes (spawned, so every client is its own process
    with its own librdkafka), each sending ``--size``-byte (1 KB) values to the whole topic (null key: librdkafka's
    sticky partitioner), acks=all, linger.ms=5, no compression, at ``--rate`` records/s each (paced in 10 ms
    steps; 0 = as fast as the client can) for ``--warmup`` (5) seconds not counted, then ``--seconds`` counted;
  * every process connects and sends/reads one warm-up record before the common start, so the window measures
    steady state, not 100 bootstraps;
  * the measured window runs from the end of the warm-up to the last producer's flush(); a record is counted (bytes,
    latency) when it was produced inside the window (records produced just before it but acknowledged inside it
    add at most linger + one round trip of data to the window's broker CPU: < 1 % of a 20 s window).
Reported per broker: aggregate produce MB/s (acknowledged payload) and consume MB/s (every record read, warm-up
included, over the time from the common start to the last record read), broker CPU seconds per GB produced
(utime+stime of the whole broker process over the window from /proc; the same bytes are also consumed once, so this
is the cost of one GB in and one GB out), produce latency p50/p99/max (librdkafka's per-message latency: produce()
to delivery report, acks=all) over all producers, and what limited the broker:
  busiest broker thread  CPU seconds of the broker's busiest thread / window (/proc/<pid>/task/*/stat): ~1.00 means
                         that one thread -- kbroker's event loop -- had a whole core;
  run-queue wait         the share of the window the busiest broker thread was runnable but waiting for a CPU
                         (/proc/<pid>/task/<tid>/schedstat): high = the scheduler, not the loop, held it back;
  machine idle cores     idle+iowait share of all cores from /proc/stat over the window x nproc;
  loop busy (kbroker)    kbroker_event_loop_busy_ratio scraped from the broker's /metrics each second (mean / max);
  verdict                "loop-bound with idle CPU" when the busiest thread is >= 0.95 of a core while >= 0.5 core
                         of the machine is idle (the thing target 2 says must not happen); "CPU-bound (shared)" when
                         the machine has < 0.5 core idle (clients and broker compete for the 2 cores: the loop is
                         not the only bottleneck); otherwise "not saturated".
``--client-nice 19`` runs the clients at the lowest priority: on a machine with fewer cores than clients, Linux's
fair scheduler otherwise gives the one broker process about 1/(clients + 1) of the CPU (seen: 0.13 core with 100
clients and 0 idle), so the figures are the clients' and the scheduler's, not the broker's.
Results: a markdown table on stdout, JSON in bench/results/many-clients-<UTC time>.json (gitignored).
"""
import argparse
import datetime as _dt
import json
import multiprocessing as mp
import os
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import confluent_kafka as ck  # noqa: E402

from bench_clients import machine, pct  # noqa: E402
from peers import PeerUnavailable, create_topics, free_port, make_broker  # noqa: E402


def _r(x, nd=2):
    return None if x is None else round(x, nd)


# ----------------------------------------------------------------------------------------------- client processes

def _deprioritise(nice):
    """``nice`` > 0: os.nice(nice); ``nice`` < 0: SCHED_IDLE (weight ~3 against a nice-0 broker's 1,024: the
    client runs only on CPU time nothing else wants)."""
    if nice < 0:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    elif nice:
        os.nice(nice)


def producer_main(conf, topic, size, rate, warmup, seconds, nice, ready, start, out):
    """One producer process: connect, wait for the common start, send for ``warmup`` seconds (not counted: the
    JVM's JIT and every client's batching settle), then for ``seconds`` counted, flush, report."""
    _deprioritise(nice)
    p = ck.Producer(dict(conf, **{"acks": "all", "linger.ms": 5, "compression.type": "none",
                                  "enable.idempotence": False, "queue.buffering.max.messages": 1000000,
                                  "queue.buffering.max.kbytes": 1048576, "message.timeout.ms": 60000}))
    value = os.urandom(size)
    lat, state = [], {"err": 0, "first": None}

    def on_delivery(err, msg):
        if err is not None:
            state["err"] += 1
            state["first"] = state["first"] or str(err)
        else:
            lat.append(msg.latency())
    p.produce(topic, value, on_delivery=lambda e, m: None)
    p.flush(60)
    ready.release()
    start.wait(600)
    t_start = time.perf_counter()
    t0 = t_start + warmup
    sent = n = 0   # sent: counted records (after the warm-up); n: all
    produce, poll = p.produce, p.poll
    warm_cb = lambda err, msg: on_delivery(err, msg) if err is not None else None  # noqa: E731
    while True:
        now = time.perf_counter()
        if now - t0 >= seconds:
            break
        due = int(rate * (now - t_start)) + 1 if rate else n + 1000
        counted = now >= t0
        while n < due:
            try:
                produce(topic, value, on_delivery=on_delivery if counted else warm_cb)
                n += 1
                sent += counted
            except BufferError:
                poll(0.005)
        poll(0)
        if rate:
            time.sleep(0.01)  # 10 ms pacing steps: a sleep, not a spin, the broker shares the cores
    left = p.flush(60)
    t_end = time.perf_counter()
    out.put({"sent": sent, "acked": sent - state["err"] - left, "acked_all": n - state["err"] - left, "errors": state["err"], "first_error": state["first"],
             "t0": t0, "t_end": t_end, "lat": lat})


def consumer_main(conf, topic, partitions, nice, ready, stop, out):
    """One consumer process: read its partitions from offset 0 until ``stop`` is set and 2 s pass without a
    record (or 120 s after stop); report records, bytes and when the last one came."""
    _deprioritise(nice)
    c = ck.Consumer(dict(conf, **{"group.id": "many-clients", "enable.auto.commit": False,
                                  "enable.partition.eof": False, "auto.offset.reset": "earliest"}))
    c.assign([ck.TopicPartition(topic, p, 0) for p in partitions])
    c.consume(1, 2.0)  # connected, first fetch sent (the topic is empty or holds warm-up records)
    ready.release()
    got = nbytes = errs = 0
    t_last = time.perf_counter()
    hard_stop = None
    while True:
        msgs = c.consume(1000, 0.2)
        now = time.perf_counter()
        for m in msgs:
            if m.error():
                errs += 1
                continue
            got += 1
            nbytes += len(m.value())
        if msgs:
            t_last = now
        if stop.is_set():
            hard_stop = hard_stop or now + 120
            if now - t_last > 2.0 or now > hard_stop:
                break
    c.close()
    out.put({"records": got, "bytes": nbytes, "errors": errs, "t_last": t_last})


# ----------------------------------------------------------------------------------------------- broker sampling

def proc_stat_cpu():
    """(idle+iowait, total) jiffies of all cores from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[3] + v[4], sum(v[:8])


def run_delay(pid):
    """{thread id: seconds spent runnable but waiting for a CPU} of every thread of ``pid``
    (/proc/<pid>/task/<tid>/schedstat: on-CPU ns, run-queue wait ns, timeslices)."""
    out = {}
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            with open("%s/%s/schedstat" % (base, tid)) as f:
                out[int(tid)] = int(f.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            pass
    return out


class Sampler(threading.Thread):
    """Scrapes kbroker_event_loop_busy_ratio from the broker's /metrics once a second (kbroker only)."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url, self.values, self.halt = url, [], threading.Event()

    def run(self):
        while not self.halt.wait(1.0):
            try:
                body = urllib.request.urlopen(self.url, timeout=2).read().decode()
            except OSError:
                continue
            for line in body.splitlines():
                if line.startswith("kbroker_event_loop_busy_ratio "):
                    self.values.append(float(line.split()[1]))


def run_broker(kind, args):
    res = {"broker": kind, "errors": [], "loadavg_before": round(os.getloadavg()[0], 2)}
    metrics_port = free_port()
    try:
        b = make_broker(kind, args.tansu_bin, overrides={"metrics.http.port": metrics_port,
                                                         "metrics.http.host": "127.0.0.1"})
    except PeerUnavailable as e:
        res["errors"].append(str(e))
        return res
    ctx = mp.get_context("spawn")  # never fork a process that holds librdkafka threads
    procs = []
    try:
        print("  [%s] start ..." % kind, file=sys.stderr, flush=True)
        b.start()
        topic = "many-clients"
        create_topics(b, [topic], args.partitions, timeout=60)
        ready, start, stop = ctx.Semaphore(0), ctx.Event(), ctx.Event()
        pout, cout = ctx.Queue(), ctx.Queue()
        per = max(1, args.partitions // max(1, args.consumers))
        for j in range(args.consumers):
            parts = [p for p in range(j * per, (j + 1) * per) if p < args.partitions]
            if j == args.consumers - 1:
                parts += list(range((j + 1) * per, args.partitions))  # the remainder to the last one
            procs.append(ctx.Process(target=consumer_main, args=(b.conf(), topic, parts, args.client_nice, ready, stop, cout),
                                     daemon=True))
        for _ in range(args.producers):
            procs.append(ctx.Process(target=producer_main, args=(b.conf(), topic, args.size, args.rate, args.warmup,
                                                                  args.seconds, args.client_nice, ready, start, pout), daemon=True))
        print("  [%s] %d client processes ..." % (kind, len(procs)), file=sys.stderr, flush=True)
        for p in procs:
            p.start()
        deadline = time.monotonic() + args.startup_timeout
        for i in range(len(procs)):
            if not ready.acquire(timeout=max(0.1, deadline - time.monotonic())):
                raise RuntimeError("only %d of %d clients ready within %.0f s" % (i, len(procs), args.startup_timeout))
        sampler = None
        if kind.startswith("kbroker"):
            sampler = Sampler("http://127.0.0.1:%d/metrics" % metrics_port)
            sampler.start()
        print("  [%s] running %.0f + %.0f s ..." % (kind, args.warmup, args.seconds), file=sys.stderr, flush=True)
        t_start = time.perf_counter()
        start.set()
        time.sleep(args.warmup)  # the producers' uncounted warm-up
        threads0, (u0, s0), idle0 = b.threads_cpu(), b.cpu_split(), proc_stat_cpu()
        wait0 = run_delay(b.proc.pid)
        t0 = time.perf_counter()
        prods = [pout.get(timeout=args.seconds + args.warmup + 180) for _ in range(args.producers)]
        t1 = time.perf_counter()
        threads1, (u1, s1), idle1 = b.threads_cpu(), b.cpu_split(), proc_stat_cpu()
        wait1 = run_delay(b.proc.pid)
        if sampler:
            sampler.halt.set()
        stop.set()
        cons = [cout.get(timeout=180) for _ in range(args.consumers)]
        window = t1 - t0
        acked = sum(p["acked"] for p in prods)
        nbytes = acked * args.size
        lat = sorted(x * 1000.0 for p in prods for x in p["lat"])
        consumed = sum(c["records"] for c in cons)
        consumed_bytes = sum(c["bytes"] for c in cons)
        t_cons = max(c["t_last"] for c in cons) - t_start  # consumers read the warm-up records too
        busiest = max(((threads1[t][1] - threads0.get(t, ("", 0.0))[1], threads1[t][0], t) for t in threads1),
                      default=(0.0, "?", None))
        busiest_wait = wait1.get(busiest[2], 0.0) - wait0.get(busiest[2], 0.0)
        idle_cores = (idle1[0] - idle0[0]) / max(1, idle1[1] - idle0[1]) * os.cpu_count()
        busy_thread = busiest[0] / window
        verdict = ("loop-bound with idle CPU" if busy_thread >= 0.95 and idle_cores >= 0.5 else
                   "CPU-bound (shared)" if idle_cores < 0.5 else "not saturated")
        res.update({
            "producers": args.producers, "consumers": args.consumers, "partitions": args.partitions,
            "window_s": _r(window, 3), "records_sent": sum(p["sent"] for p in prods), "records_acked": acked,
            "produce_errors": sum(p["errors"] for p in prods),
            "first_error": next((p["first_error"] for p in prods if p["first_error"]), None),
            "produce_mb_per_s": _r(nbytes / window / 1e6), "produce_records_per_s": _r(acked / window, 1),
            "records_consumed": consumed, "consume_mb_per_s": _r(consumed_bytes / max(t_cons, 1e-9) / 1e6),
            "consumed_all": consumed >= sum(p["acked_all"] for p in prods),
            "broker_cpu_s": _r(u1 + s1 - u0 - s0, 3),
            "broker_cpu_s_per_gb": _r((u1 + s1 - u0 - s0) / (nbytes / 1e9), 3) if nbytes else None,
            "broker_cores": _r((u1 + s1 - u0 - s0) / window),
            "produce_latency_p50_ms": _r(pct(lat, 50)), "produce_latency_p99_ms": _r(pct(lat, 99)),
            "produce_latency_max_ms": _r(lat[-1] if lat else None),
            "busiest_thread": busiest[1], "busiest_thread_cores": _r(busy_thread),
            # runnable but not running: the share of the window the busiest thread waited in a run queue
            "busiest_thread_runqueue_wait": _r(busiest_wait / window),
            "broker_threads_over_5pct": sum(1 for t in threads1
                                            if threads1[t][1] - threads0.get(t, ("", 0.0))[1] > 0.05 * window),
            "machine_idle_cores": _r(idle_cores),
            "loop_busy_mean_max": ([_r(sum(sampler.values) / len(sampler.values)), _r(max(sampler.values))]
                                   if sampler and sampler.values else None),
            "verdict": verdict,
            "broker_peak_rss_mb": _r(b.rss_mb()),
        })
    except Exception as e:  # noqa: BLE001 - report, then clean up
        res["errors"].append("%s: %s" % (type(e).__name__, e))
    finally:
        for p in procs:
            p.join(0.5 if res["errors"] else 10)
            if p.is_alive():
                p.kill()
        b.stop()
    res["loadavg_after"] = round(os.getloadavg()[0], 2)
    return res


ROWS = [
    ("produce (acks=all, 1 KB): MB/s", "produce_mb_per_s"), ("produce: records/s", "produce_records_per_s"),
    ("consume: MB/s", "consume_mb_per_s"), ("consumed every acknowledged record", "consumed_all"),
    ("broker CPU s per GB (in + out once)", "broker_cpu_s_per_gb"), ("broker cores used", "broker_cores"),
    ("produce latency p50 / p99 / max ms", ("produce_latency_p50_ms", "produce_latency_p99_ms",
                                             "produce_latency_max_ms")),
    ("busiest broker thread: cores", "busiest_thread_cores"),
    ("busiest broker thread: share of the window waiting for a CPU", "busiest_thread_runqueue_wait"), ("broker threads > 5 % of a core", "broker_threads_over_5pct"),
    ("kbroker loop busy ratio mean / max", "loop_busy_mean_max"), ("machine idle cores", "machine_idle_cores"),
    ("verdict", "verdict"), ("produce errors", "produce_errors"), ("broker peak RSS MB", "broker_peak_rss_mb"),
    ("1-min load average before / after", ("loadavg_before", "loadavg_after")),
]


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, list):
        return " / ".join(fmt(x) for x in v)
    if isinstance(v, float):
        return "{:,.2f}".format(v)
    return "{:,}".format(v) if isinstance(v, int) and not isinstance(v, bool) else str(v)


def table(results):
    names = [r["broker"] for r in results]
    pairs = [("kbroker", p) for p in ("kafka", "tansu") if p in names and "kbroker" in names]
    lines = ["| metric | " + " | ".join(names) + " |" + "".join(" %s / %s |" % p for p in pairs),
             "|" + "---|" * (len(names) + 1 + len(pairs))]
    by = {r["broker"]: r for r in results}
    for label, key in ROWS:
        vals = {n: (" / ".join(fmt(by[n].get(k)) for k in key) if isinstance(key, tuple) else by[n].get(key))
                for n in names}
        row = "| %s | %s |" % (label, " | ".join(fmt(vals[n]) for n in names))
        for a, c in pairs:
            x, y = vals[a], vals[c]
            ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y)) and y
            row += " %s |" % ("%.2fx" % (x / y) if ok else "")
        lines.append(row)
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="kbroker,kafka", help="comma list of kbroker, kafka, tansu")
    ap.add_argument("--producers", type=int, default=50)
    ap.add_argument("--consumers", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--size", type=int, default=1024, help="value bytes")
    ap.add_argument("--rate", type=float, default=1000.0, help="records/s per producer (0 = flat out)")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of producing before the measured window")
    ap.add_argument("--startup-timeout", type=float, default=300.0, help="for all clients to connect and warm up")
    ap.add_argument("--client-nice", type=int, default=0,
                    help="nice increment of every client process: with 100 clients on a few cores the scheduler's "
                         "fair share leaves the broker ~1/100 of the CPU (clients of a real broker run elsewhere); "
                         "19 gives the broker priority; -1 = SCHED_IDLE, the lowest there is")
    ap.add_argument("--tansu-bin", default=None)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    started = _dt.datetime.now(_dt.timezone.utc)
    results = []
    for kind in [k.strip() for k in args.brokers.split(",") if k.strip()]:
        print("benchmarking %s" % kind, file=sys.stderr, flush=True)
        results.append(run_broker(kind, args))
    doc = {"started_utc": started.isoformat(timespec="seconds"), "command": [sys.executable] + sys.argv,
           "args": vars(args), "machine": machine(), "results": results}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "many-clients-%s.json" % started.strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    print(table(results))
    for r in results:
        for e in r["errors"]:
            print("\n%s error: %s" % (r["broker"], e))
    print("\nJSON: %s" % os.path.relpath(path))
    return 0 if all(not r["errors"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
