#!/usr/bin/env python3
"""Transactions benchmark (issue 11): transactional produce throughput next to idempotent produce, and the
end-to-end latency a ``read_committed`` consumer sees, per broker, side by side.

    python bench/transactions.py --brokers kbroker,tansu --seconds 10

Brokers are started one at a time exactly as bench/bench_clients.py does (bench/peers.py: a child process on
a free 127.0.0.1 port, fresh temp data dir; Apache Kafka 4.4 as one KRaft node; kbroker gets ``transaction.state.log.replication.factor=1`` and
``transaction.state.log.min.isr=1`` as a single node needs); 6 partitions, replication factor 1, confluent-kafka
(librdkafka) clients. Phases, in this order (latency first, on an empty broker, as bench_clients):

  latency-txn     a transactional producer sends ``--rate`` 1 KB records/s for ``--warmup-seconds`` +
                  ``--latency-seconds``, round-robin over the partitions, in transactions of ``--latency-txn``
                  records (begin, produce N, commit_transaction; the next transaction starts when the commit
                  returned and the schedule says so). Each value starts with time.perf_counter_ns() (CLOCK_MONOTONIC,
                  shared by processes) and a sequence number; a consumer in a spawned process, ``isolation.level=
                  read_committed``, ``assign()``ed at offset 0, stamps arrival. A record becomes visible when its
                  transaction's COMMIT marker moves the last stable offset past it, so this latency includes
                  waiting for the rest of the transaction and for the commit (EndTxn + WriteTxnMarkers).
                  Also reported: commit_transaction() call time p50/p99 (EndTxn round trip as librdkafka sees it).
  latency-idem    the same records from an idempotent producer (no transaction, acks=all, linger.ms=0), read
                  read_committed: the baseline without a transaction (the LSO follows the high watermark).
  idempotent      ``--records`` 1 KB values (random, incompressible) from an idempotent producer (acks=all,
                  linger.ms=5, delivery reports for failures only) within ``--seconds``; records/s, MB/s and the
                  broker's CPU seconds per GB (utime+stime of the broker process, /proc/<pid>/stat).
  txn-100         the same values in transactions of 100 records: begin_transaction, 100 x produce(),
  txn-1000        commit_transaction() (which flushes), repeated until the cap; 1,000 records per transaction.
                  records/s, MB/s, transactions/s, commit_transaction() time p50/p99, broker CPU s per GB.
Percentiles are nearest-rank. ``--repeat N``: N rounds, the brokers alternating within each; the table shows the
median of every figure over the rounds, the JSON keeps every round (``runs``). Everything is bounded (record caps, wall-clock caps, 30 s flushes/commits).

A broker that does not serve transactions gets ``n/a`` in those rows and the error in the JSON (``errors``).
Results: one markdown table on stdout; JSON in ``bench/results/transactions-<UTC time>.json`` (gitignored).
"""
import argparse
import datetime as _dt
import json
import multiprocessing as mp
import os
import platform
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import confluent_kafka as ck  # noqa: E402

from bench_clients import client_cpu, pct  # noqa: E402
from peers import PeerUnavailable, create_topics, make_broker, tansu_binary  # noqa: E402,F401

LAT_HDR = struct.Struct(">qi")   # perf_counter_ns int64 | sequence int32, padded to the value size
KBROKER_TXN = {"transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
               "offsets.topic.replication.factor": 1}


def _r(x, nd=2):
    return None if x is None else round(x, nd)


def _producer_conf(broker, txn_id=None, linger_ms=5):
    conf = broker.conf(**{"acks": "all", "linger.ms": linger_ms, "compression.type": "none",
                          "enable.idempotence": True, "queue.buffering.max.messages": 1000000,
                          "queue.buffering.max.kbytes": 1048576, "message.timeout.ms": 30000})
    if txn_id:
        conf["transactional.id"] = txn_id
        conf["transaction.timeout.ms"] = 60000
    return conf


# ------------------------------------------------------------------------------------------------ throughput

def produce_phase(broker, topic, size, count, seconds, txn_size=None):
    """Idempotent (txn_size None) or transactional produce of up to `count` values within `seconds`."""
    value = os.urandom(size)
    state = {"err": 0, "first_err": None}

    def on_error(err, msg):
        state["err"] += 1
        state["first_err"] = state["first_err"] or str(err)

    txn_id = "bench-txn-%s-%d" % (topic, os.getpid()) if txn_size else None
    p = ck.Producer(dict(_producer_conf(broker, txn_id), on_delivery=on_error,
                         **{"delivery.report.only.error": True}))
    commits = []
    if txn_size:
        p.init_transactions(30)
        p.begin_transaction()
    p.produce(topic, value)  # warm the connections (and, transactional, AddPartitionsToTxn) outside the clock
    if txn_size:
        p.commit_transaction(30)
    p.flush(10)
    if state["err"]:
        raise RuntimeError("warm-up record failed: %s" % state["first_err"])
    cpu0, ccpu0 = broker.cpu_seconds(), client_cpu()
    t0 = time.perf_counter()
    deadline = t0 + seconds
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        n = txn_size or min(10000, count - sent)
        if txn_size:
            p.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, value)
                    break
                except BufferError:
                    p.poll(0.001)
        sent += n
        p.poll(0)
        if txn_size:
            c0 = time.perf_counter()
            p.commit_transaction(30)
            commits.append((time.perf_counter() - c0) * 1000)
    left = p.flush(30)
    elapsed = time.perf_counter() - t0
    cpu1, ccpu1 = broker.cpu_seconds(), client_cpu()
    acked = sent - state["err"] - left
    gb = acked * size / 1e9
    commits.sort()
    res = {"records": sent, "acknowledged": acked, "errors": state["err"], "first_error": state["first_err"],
           "seconds": _r(elapsed, 3), "records_per_s": _r(acked / elapsed, 0), "mb_per_s": _r(acked * size / 1e6 /
                                                                                           elapsed),
           "broker_cpu_s_per_gb": _r((cpu1 - cpu0) / gb) if gb else None,
           "client_cpu_cores": _r((ccpu1 - ccpu0) / elapsed)}
    if txn_size:
        res.update({"records_per_txn": txn_size, "transactions": len(commits),
                    "txn_per_s": _r(len(commits) / elapsed, 1),
                    "commit_p50_ms": _r(pct(commits, 50)), "commit_p99_ms": _r(pct(commits, 99))})
    return res


# --------------------------------------------------------------------------------------------------- latency

def _latency_consumer(conf, topic, partitions, expected, warmup, seconds, ready, out):
    """Child process: read_committed consumer stamping the receive time of every record (see the docstring)."""
    c = ck.Consumer(dict(conf, **{"group.id": "kbench-txn-lat", "enable.auto.commit": False,
                                  "isolation.level": "read_committed", "enable.partition.eof": False}))
    c.assign([ck.TopicPartition(topic, i, 0) for i in range(partitions)])
    c.consume(1, 1.0)  # connection + first Fetch in flight before the producer starts
    ready.set()
    lat, seen, errs = [], 0, 0
    deadline = time.monotonic() + seconds
    now = time.perf_counter_ns
    while seen < expected and time.monotonic() < deadline:
        m = c.poll(0.2)
        t = now()
        if m is None:
            continue
        if m.error():
            errs += 1
            continue
        sent_ns, seq = LAT_HDR.unpack_from(m.value())
        seen += 1
        if seq >= warmup:
            lat.append((t - sent_ns) / 1e6)
    c.close()
    lat.sort()
    out.put({"received": seen, "errors": errs, "lat": lat})


def latency_phase(broker, topic, partitions, rate, seconds, warmup_s, size, txn_size):
    """e2e latency through a read_committed consumer; txn_size 0 = idempotent producer, no transactions."""
    total = int(rate * (seconds + warmup_s))
    warmup = int(rate * warmup_s)
    ctx = mp.get_context("spawn")  # never fork a process that holds librdkafka threads
    ready, out = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_latency_consumer, args=(broker.conf(), topic, partitions, total, warmup,
                                                        seconds + warmup_s + 30, ready, out), daemon=True)
    child.start()
    commits = []
    try:
        if not ready.wait(30):
            raise RuntimeError("latency consumer did not start within 30 s")
        txn_id = "bench-lat-%s-%d" % (topic, os.getpid()) if txn_size else None
        p = ck.Producer(_producer_conf(broker, txn_id, linger_ms=0))
        if txn_size:
            p.init_transactions(30)
        pad = b"\0" * (size - LAT_HDR.size)
        interval = 1.0 / rate
        t0 = time.perf_counter()
        seq = 0
        while seq < total:
            n = min(txn_size or 1, total - seq)
            if txn_size:
                p.begin_transaction()
            for _ in range(n):
                d = t0 + seq * interval - time.perf_counter()
                if d > 0:
                    time.sleep(d)  # a sleep, not a spin: the broker shares these cores
                p.produce(topic, LAT_HDR.pack(time.perf_counter_ns(), seq) + pad, partition=seq % partitions)
                p.poll(0)
                seq += 1
            if txn_size:
                c0 = time.perf_counter()
                p.commit_transaction(30)
                commits.append((time.perf_counter() - c0) * 1000)
        send_s = time.perf_counter() - t0
        p.flush(30)
        res = out.get(timeout=seconds + warmup_s + 60)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    lat = res["lat"]
    commits.sort()
    return {"records_per_txn": txn_size, "rate_target": rate, "rate_achieved": _r(total / send_s, 1),
            "sent": total, "received": res["received"], "measured": len(lat), "errors": res["errors"],
            "p50_ms": _r(pct(lat, 50)), "p99_ms": _r(pct(lat, 99)), "max_ms": _r(lat[-1] if lat else None),
            "commit_p50_ms": _r(pct(commits, 50)), "commit_p99_ms": _r(pct(commits, 99))}


# ------------------------------------------------------------------------------------------------ the driver

PHASES = ("latency-txn", "latency-idem", "idempotent", "txn-100", "txn-1000")


def run_broker(kind, args, tansu_bin):
    res = {"broker": kind, "phases": {}, "errors": []}
    try:
        b = make_broker(kind, tansu_bin, overrides=KBROKER_TXN if kind.startswith("kbroker") else None)
    except PeerUnavailable as e:
        res["errors"].append(str(e))
        return res
    res["loadavg_before"] = os.getloadavg()[0]
    try:
        b.start()
        topics = {ph: "txn-bench-%s" % ph for ph in PHASES}
        create_topics(b, list(topics.values()), args.partitions)
        runs = {
            "latency-txn": lambda: latency_phase(b, topics["latency-txn"], args.partitions, args.rate,
                                                 args.latency_seconds, args.warmup_seconds, 1024, args.latency_txn),
            "latency-idem": lambda: latency_phase(b, topics["latency-idem"], args.partitions, args.rate,
                                                  args.latency_seconds, args.warmup_seconds, 1024, 0),
            "idempotent": lambda: produce_phase(b, topics["idempotent"], 1024, args.records, args.seconds),
            "txn-100": lambda: produce_phase(b, topics["txn-100"], 1024, args.records, args.seconds, 100),
            "txn-1000": lambda: produce_phase(b, topics["txn-1000"], 1024, args.records, args.seconds, 1000),
        }
        for name in PHASES:
            if name not in args.phases:
                continue
            if not b.alive():
                res["errors"].append("broker died before %s:\n%s" % (name, b.tail()))
                break
            print("  [%s] %s ..." % (kind, name), file=sys.stderr, flush=True)
            try:
                res["phases"][name] = runs[name]()
            except Exception as e:  # noqa: BLE001 - one failed phase must not hide the others
                res["errors"].append("%s: %s: %s" % (name, type(e).__name__, e))
        res["broker_peak_rss_mb"] = _r(b.rss_mb())
    except Exception as e:  # noqa: BLE001
        res["errors"].append("%s: %s" % (type(e).__name__, e))
    finally:
        b.stop()
    res["loadavg_after"] = os.getloadavg()[0]
    return res


ROWS = [
    ("idempotent produce 1 KB: records/s", "idempotent", "records_per_s"),
    ("idempotent produce 1 KB: MB/s", "idempotent", "mb_per_s"),
    ("idempotent produce 1 KB: broker CPU s per GB", "idempotent", "broker_cpu_s_per_gb"),
    ("transactions of 100 x 1 KB: records/s", "txn-100", "records_per_s"),
    ("transactions of 100 x 1 KB: MB/s", "txn-100", "mb_per_s"),
    ("transactions of 100 x 1 KB: transactions/s", "txn-100", "txn_per_s"),
    ("transactions of 100 x 1 KB: commit_transaction p50 / p99 ms", "txn-100", ("commit_p50_ms", "commit_p99_ms")),
    ("transactions of 100 x 1 KB: broker CPU s per GB", "txn-100", "broker_cpu_s_per_gb"),
    ("transactions of 1,000 x 1 KB: records/s", "txn-1000", "records_per_s"),
    ("transactions of 1,000 x 1 KB: MB/s", "txn-1000", "mb_per_s"),
    ("transactions of 1,000 x 1 KB: transactions/s", "txn-1000", "txn_per_s"),
    ("transactions of 1,000 x 1 KB: commit_transaction p50 / p99 ms", "txn-1000",
     ("commit_p50_ms", "commit_p99_ms")),
    ("transactions of 1,000 x 1 KB: broker CPU s per GB", "txn-1000", "broker_cpu_s_per_gb"),
    ("e2e read_committed, transactional producer: p50 / p99 / max ms", "latency-txn", ("p50_ms", "p99_ms", "max_ms")),
    ("e2e read_committed, transactional: commit_transaction p50 / p99 ms", "latency-txn",
     ("commit_p50_ms", "commit_p99_ms")),
    ("e2e read_committed, transactional: received / measured", "latency-txn", ("received", "measured")),
    ("e2e read_committed, transactional: records/s sent (target --rate)", "latency-txn", "rate_achieved"),
    ("e2e read_committed, idempotent producer: p50 / p99 / max ms", "latency-idem", ("p50_ms", "p99_ms", "max_ms")),
    ("e2e read_committed, idempotent: received / measured", "latency-idem", ("received", "measured")),
]


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "{:,.2f}".format(v) if abs(v) < 1000 else "{:,.0f}".format(v)
    if isinstance(v, int):
        return "{:,}".format(v)
    return str(v)


def table(results):
    kinds = [r["broker"] for r in results]
    lines = ["| metric | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    for label, phase, key in ROWS:
        cells = []
        for r in results:
            ph = r["phases"].get(phase)
            if ph is None:
                cells.append("n/a")
            elif isinstance(key, tuple):
                cells.append(" / ".join(fmt(ph.get(k)) for k in key))
            else:
                cells.append(fmt(ph.get(key)))
        lines.append("| %s | %s |" % (label, " | ".join(cells)))
    lines.append("| broker peak RSS MB | %s |" % " | ".join(fmt(r.get("broker_peak_rss_mb")) for r in results))
    lines.append("| 1-min load average, lowest / highest around its rounds | %s |" % " | ".join(
        "%.1f / %.1f" % tuple(r["loadavg_range"]) for r in results))
    return "\n".join(lines)


def median_result(runs):
    """One result per broker from several rounds: every numeric field of every phase is the median (lower
    median for an even count) of the rounds that have it; errors are concatenated."""
    out = {"broker": runs[0]["broker"], "phases": {}, "errors": [e for r in runs for e in r["errors"]],
           "rounds": len(runs)}
    for name in {ph for r in runs for ph in r["phases"]}:
        have = [r["phases"][name] for r in runs if name in r["phases"]]
        merged = {}
        for key in have[0]:
            vals = sorted(v[key] for v in have if isinstance(v.get(key), (int, float)))
            merged[key] = vals[(len(vals) - 1) // 2] if vals else have[0][key]
        out["phases"][name] = merged
    for key in ("broker_peak_rss_mb", "loadavg_before", "loadavg_after"):
        vals = sorted(r[key] for r in runs if isinstance(r.get(key), (int, float)))
        out[key] = vals[(len(vals) - 1) // 2] if vals else None
    out["loadavg_range"] = [min(min(r["loadavg_before"], r["loadavg_after"]) for r in runs),
                            max(max(r["loadavg_before"], r["loadavg_after"]) for r in runs)]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="kbroker,kafka,tansu", help="any of kbroker, kafka, tansu")
    ap.add_argument("--tansu-bin", default=None)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=10.0, help="wall cap of each throughput phase (10)")
    ap.add_argument("--records", type=int, default=1000000, help="record cap of each throughput phase")
    ap.add_argument("--rate", type=float, default=1000.0, help="latency runs: records/s (1,000)")
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--warmup-seconds", type=float, default=1.0)
    ap.add_argument("--latency-txn", type=int, default=10, help="latency run: records per transaction (10)")
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--repeat", type=int, default=1, help="rounds; brokers alternate, the table shows medians")
    args = ap.parse_args(argv)
    args.phases = set(args.phases.split(","))
    tansu_bin = args.tansu_bin or tansu_binary()
    kinds = args.brokers.split(",")
    budget = 120 + args.repeat * len(kinds) * (3 * (args.seconds + 40) + 2 * (args.latency_seconds + 100))
    import signal
    signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("run budget exceeded")))
    signal.alarm(int(budget))
    rounds = {kind: [] for kind in kinds}
    for i in range(args.repeat):
        for kind in kinds:
            print("round %d/%d: %s" % (i + 1, args.repeat, kind), file=sys.stderr, flush=True)
            rounds[kind].append(run_broker(kind, args, tansu_bin))
    signal.alarm(0)
    results = [median_result(rounds[kind]) for kind in kinds]
    print(table(results))
    for r in results:
        for e in r["errors"]:
            print("%s: %s" % (r["broker"], e.splitlines()[0][:300]), file=sys.stderr)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(HERE, "results", "transactions-%s.json" % stamp)
    with open(path, "w") as f:
        json.dump({"argv": sys.argv, "args": {k: (sorted(v) if isinstance(v, set) else v)
                                              for k, v in vars(args).items()},
                   "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                               "python": platform.python_version(), "librdkafka": ck.libversion()[0]},
                   "results": results, "runs": rounds}, f, indent=1)
    print("JSON: %s" % path, file=sys.stderr)
    return 0 if all(not r["errors"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
