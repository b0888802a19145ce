#!/usr/bin/env python3
"""Quota accounting overhead on the unthrottled produce path (issue 12): the same load on a broker without any
quota and on one where quotas are configured but never throttle this client.

    python bench/quotas.py --seconds 8 --repeat 3

Modes, each on a fresh kbroker (bench/bench_clients.py's ``BrokerProc``: child process on a free 127.0.0.1 port,
fresh temp data dir), one at a time, alternating within every round (round 1: none, quotas; round 2: quotas,
none; ...), so both see the same machine:
  none     no quota anywhere: the broker has no entity and the static defaults (``quota.producer.default``) are
           unlimited.
  quotas   before the load, AlterClientQuotas sets ``producer_byte_rate=1048576`` for ``--other-clients``
           client ids ``other-<n>`` that never connect, and ``kbroker-admin configs --bootstrap-server`` sets on
           ``--entity-type users --entity-default`` ``producer_byte_rate=10**12`` (1 TB/s) and
           ``request_percentage=100000`` -- so the bench's client (user ANONYMOUS, client.id ``bench``) resolves
           to the default-user quota and every produce request is recorded against a bound (byte rate and
           handler time), without ever reaching it. The client's librdkafka statistics must show no throttle
           (``brokers.*.throttle.max`` == 0); the run fails otherwise.
Phases in each mode (topic with ``--partitions`` partitions, replication factor 1, confluent-kafka client,
acks=all, linger.ms=5, no compression, delivery reports for failures only, a deep local queue):
  produce-1k    1,024-byte random values for ``--seconds`` (at most ``--records-1k``), time from the first
                produce() to the return of flush(); records/s, MB/s (10**6), broker CPU s per GB of values
                (utime+stime of the broker process, all threads, /proc/<pid>/stat).
  produce-100   the same with 100-byte values: the per-request cost weighs more.
In-process (``--micro-calls``, first, no broker): what one produce request's accounting costs the broker's
loop, timed over that many calls: ``ClientQuotas.produce.record(identity, "bench", 65536)`` plus
``.request.record(identity, "bench", 0.5)`` (the two calls a Produce makes), the limits loaded from an embedded
store holding the quotas mode's entities (``QuotaLimits.load_all``), against the same calls with no entity at all
(the ``has_quotas`` short cut). The connection's two ``perf_counter()`` calls around the handler (made only when a
request quota exists) are not included: ~0.1 us.
The table shows medians over the rounds and the quotas / none ratio; JSON with every round in
``bench/results/quotas-<UTC time>.json`` (gitignored). Exit code 1 when a phase failed or was throttled.
"""
import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import confluent_kafka as ck  # noqa: E402

from bench_clients import REPO, BrokerProc, client_cpu, create_topics, machine  # noqa: E402

sys.path.insert(0, REPO)
from tests.integration.test_quotas_common import alter_client_quotas_api  # noqa: E402

MODES = ("none", "quotas")
PHASES = (("produce-1k", 1024), ("produce-100", 100))


def configure_quotas(broker, other_clients):
    """The ``quotas`` mode's entities, through the admin tool (AlterClientQuotas), as an operator would."""
    def admin(*args):
        done = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "configs", "--bootstrap-server",
                               broker.bootstrap, "--alter", *args], capture_output=True, text=True, timeout=60,
                              cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
        if done.returncode != 0:
            raise RuntimeError("kbroker-admin configs %s: %s" % (" ".join(args), done.stderr.strip()))

    # the many client-id entities through AlterClientQuotas directly (one tool process each would take minutes)
    for n in range(other_clients):
        err = alter_client_quotas_api("127.0.0.1", broker.port, [("clients", "other-%d" % n)],
                                      add={"producer_byte_rate": 1048576})
        if err != (0, None):
            raise RuntimeError("AlterClientQuotas clients/other-%d: %s" % (n, err))
    admin("--entity-type", "users", "--entity-default", "--add-config",
          "producer_byte_rate=1000000000000,request_percentage=100000")


def micro(calls, other_clients):
    """Per-call cost (us) of a Produce's quota accounting, no quota vs the quotas mode's entities (docstring)."""
    import tempfile
    import types

    from kbroker.coord import EmbeddedBackend
    from kbroker.quota.manager import ClientQuotas
    from kbroker.quota.store import QuotaLimits, write_entity

    out = {}
    identity = types.SimpleNamespace(principal="User:ANONYMOUS")
    for mode in MODES:
        with tempfile.TemporaryDirectory() as tmp:
            backend = EmbeddedBackend(tmp).start()
            try:
                if mode == "quotas":
                    for n in range(other_clients):
                        write_entity(backend, client="other-%d" % n, upserts={"producer_byte_rate": 1048576})
                    write_entity(backend, user=None, upserts={"producer_byte_rate": 10 ** 12,
                                                              "request_percentage": 100000})
                quotas = ClientQuotas(QuotaLimits(backend).load_all())
                produce_q, request_q = quotas.produce.record, quotas.request.record
                best = None
                for _ in range(3):    # best of 3: the machine is shared
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        produce_q(identity, "bench", 65536)
                        request_q(identity, "bench", 0.5)
                    per = (time.perf_counter() - t0) / calls * 1e6
                    best = per if best is None else min(best, per)
                if mode == "quotas":
                    assert quotas.produce.enabled() and quotas.request.enabled()
                    assert quotas.produce.stats() is not None
                out[mode] = round(best, 3)
            finally:
                backend.stop()
    return out


def produce(broker, topic, size, count, seconds):
    """Produce up to ``count`` ``size``-byte values within ``seconds`` (then flush, <= 30 s); figures as
    bench_clients.produce_phase, plus the largest throttle librdkafka's statistics reported."""
    value = os.urandom(size)
    state = {"err": 0, "first_err": None, "throttle_max": 0, "stats": 0, "tx": 0}

    def on_error(err, msg):
        state["err"] += 1
        state["first_err"] = state["first_err"] or str(err)

    def on_stats(text):
        brokers = json.loads(text).get("brokers", {}).values()
        state["stats"] += 1
        # requests sent to the brokers so far (cumulative: the warm-up's few and metadata requests included)
        state["tx"] = sum(b.get("tx", 0) for b in json.loads(text).get("brokers", {}).values())
        state["throttle_max"] = max([state["throttle_max"]] + [b.get("throttle", {}).get("max", 0) for b in brokers])

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
    return {"records_acked": acked, "errors": state["err"], "first_error": state["first_err"],
            "seconds": round(elapsed, 3), "records_per_s": round(acked / elapsed, 1),
            "mb_per_s": round(acked * size / elapsed / 1e6, 2),
            "broker_cpu_s_per_gb": round((u1 + s1 - u0 - s0) / gb, 3) if gb else None,
            "broker_user_s_per_gb": round((u1 - u0) / gb, 3) if gb else None,
            "client_cpu_cores": round((c1 - c0) / elapsed, 2),
            "throttle_max_ms": state["throttle_max"], "stats_callbacks": state["stats"],
            "requests": state["tx"], "requests_per_gb": round(state["tx"] / gb) if gb else None}


def run_mode(mode, args):
    broker = BrokerProc("kbroker")
    out = {"mode": mode}
    try:
        broker.start()
        if mode == "quotas":
            configure_quotas(broker, args.other_clients)
        topics = {name: "%s-%s" % (name, mode) for name, _ in PHASES}
        create_topics(broker, list(topics.values()), args.partitions)
        for name, size in PHASES:
            if args.phases and name not in args.phases.split(","):
                continue
            cap = args.records_1k if size == 1024 else args.records_100
            out[name] = produce(broker, topics[name], size, cap, args.seconds)
        out["broker_peak_rss_mb"] = broker.rss_mb()
    except Exception as exc:  # noqa: BLE001 - reported in the table and the JSON
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
        out["broker_tail"] = broker.tail()
    finally:
        broker.stop()
    return out


ROWS = [("produce-1k", "records_per_s", "produce 1 KB acks=all: records/s", "{:,.0f}"),
        ("produce-1k", "mb_per_s", "produce 1 KB: MB/s", "{:.0f}"),
        ("produce-1k", "broker_cpu_s_per_gb", "produce 1 KB: broker CPU s per GB", "{:.2f}"),
        ("produce-100", "records_per_s", "produce 100 B acks=all: records/s", "{:,.0f}"),
        ("produce-100", "broker_cpu_s_per_gb", "produce 100 B: broker CPU s per GB", "{:.2f}"),
        ("produce-1k", "requests_per_gb", "produce 1 KB: requests per GB (librdkafka tx)", "{:,.0f}"),
        ("produce-100", "requests_per_gb", "produce 100 B: requests per GB (librdkafka tx)", "{:,.0f}"),
        ("produce-1k", "throttle_max_ms", "largest throttle_time_ms seen (1 KB / 100 B)", "{}")]


def median_of(runs, phase, key):
    vals = [r[phase][key] for r in runs if phase in r and r[phase].get(key) is not None]
    return statistics.median(vals) if vals else None


def table(rounds):
    by_mode = {m: [r[m] for r in rounds] for m in MODES}
    lines = ["| median of %d rounds | no quotas | quotas configured (not throttling) | quotas / none |" % len(rounds),
             "|---|---|---|---|"]
    for phase, key, label, fmt in ROWS:
        if key == "throttle_max_ms":
            cells = ["%s / %s" % (max((r.get("produce-1k", {}).get(key) or 0 for r in by_mode[m]), default=0),
                                  max((r.get("produce-100", {}).get(key) or 0 for r in by_mode[m]), default=0))
                     for m in MODES]
            lines.append("| %s | %s | %s | |" % (label, cells[0], cells[1]))
            continue
        a, b = (median_of(by_mode[m], phase, key) for m in MODES)
        ratio = "%.3f" % (b / a) if a and b else "n/a"
        lines.append("| %s | %s | %s | %s |" % (label, "n/a" if a is None else fmt.format(a),
                                                "n/a" if b is None else fmt.format(b), ratio))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="wall-clock cap of each produce phase")
    ap.add_argument("--records-1k", type=int, default=2000000, help="record cap of produce-1k")
    ap.add_argument("--records-100", type=int, default=5000000, help="record cap of produce-100")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the modes alternate within each")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--other-clients", type=int, default=100, help="client-id quota entities in the quotas mode")
    ap.add_argument("--phases", default="", help="comma list of phases to run (default: all)")
    ap.add_argument("--micro-calls", type=int, default=200000, help="calls of the in-process accounting timing")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory of the JSON result")
    args = ap.parse_args(argv)

    started = _dt.datetime.now(_dt.timezone.utc)
    sys.path.insert(0, REPO)
    per_call = micro(args.micro_calls, args.other_clients)
    print("in-process accounting per Produce request: %s us (none), %s us (quotas)"
          % (per_call["none"], per_call["quotas"]), flush=True)
    rounds = []
    for r in range(args.repeat):
        order = MODES if r % 2 == 0 else MODES[::-1]
        rnd = {}
        for mode in order:
            load0 = os.getloadavg()[0]
            rnd[mode] = run_mode(mode, args)
            rnd[mode]["load_1min_before"] = round(load0, 2)
            print("round %d %s: %s" % (r + 1, mode, json.dumps(
                {k: (v.get("records_per_s"), v.get("broker_cpu_s_per_gb"), v.get("throttle_max_ms"))
                 if isinstance(v, dict) else v for k, v in rnd[mode].items() if k != "broker_tail"})), flush=True)
        rounds.append(rnd)
    print(table(rounds))
    failed = [m for rnd in rounds for m in MODES if "error" in rnd[m]]
    throttled = [m for rnd in rounds for m in MODES for ph, _ in PHASES if rnd[m].get(ph, {}).get("throttle_max_ms")]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "quotas-%s.json" % started.strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump({"started": started.isoformat(), "args": vars(args), "machine": machine(),
                   "micro_us_per_request": per_call, "rounds": rounds,
                   "load_1min_after": os.getloadavg()[0]}, f, indent=1)
    print("JSON: %s" % path)
    if failed or throttled:
        print("FAILED: errors in %s, throttled in %s" % (failed, throttled), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
