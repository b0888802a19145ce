#!/usr/bin/env python3
"""Many connections on one broker (issue 15 target 7): memory per idle connection, accept rate while serving.

    python bench/connections.py --idle 10000 --accept-rate 1000 --seconds 10

Steps, on one fresh kbroker (bench/bench_clients.py's ``BrokerProc``; this process and the broker get ``ulimit -n``
raised to 200,000 when allowed (root), as Kafka's docs ask of a broker; max.connections and max.connections.per.ip
are Kafka's defaults, unlimited):
  idle     ``--idle`` connections opened (in waves of 500), each sends one ApiVersions v0 and reads its answer (so the
           broker built the connection's whole state: greenlet, Connection, parser), then stays idle. Broker RSS
           (VmRSS) before and after, after a settle of 3 s: (after - before) / N KiB per connection (target <= 30).
           They are closed before the next step.
  accept   a producer (confluent-kafka, acks=1, 1 KB values, ``--produce-rate`` records/s paced) runs for
           ``--seconds``; in the middle ``--seconds`` new connections arrive at ``--accept-rate`` per second (4
           client threads), each connect + ApiVersions round trip + close. Reported: the connections completed per
           second (target >= 1,000), their p50/p99/max round trip, and the producer's delivered records and p99 /
           max produce latency compared with a baseline run of the same producer alone.
JSON in ``bench/results/connections-<UTC time>.json`` (gitignored); ``uptime``'s load average recorded.
"""
import argparse
import datetime as _dt
import json
import os
import resource
import socket
import struct
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import confluent_kafka as ck  # noqa: E402

from bench_clients import BrokerProc, machine  # noqa: E402
from scale_partitions import loadavg, proc_status, start_timed  # noqa: E402

API_VERSIONS_V0 = struct.pack(">ihhih", 2 + 2 + 4 + 2 + 5, 18, 0, 1, 5) + b"bench"


def raise_nofile(n=200000):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(n, hard), max(n, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def api_versions(sock):
    sock.sendall(API_VERSIONS_V0)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    _recv_exact(sock, size)


def open_idle(port, n, wave=500):
    socks = []
    while len(socks) < n:
        batch = []
        for _ in range(min(wave, n - len(socks))):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(API_VERSIONS_V0)
            batch.append(s)
        for s in batch:
            size = struct.unpack(">i", _recv_exact(s, 4))[0]
            _recv_exact(s, size)
        socks += batch
    return socks


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Producer(threading.Thread):
    """Paced producer: ``rate`` records/s of 1 KB for ``seconds``; keeps each delivery's latency."""

    def __init__(self, broker, topic, rate, seconds):
        super().__init__(daemon=True)
        self.broker, self.topic, self.rate, self.seconds = broker, topic, rate, seconds
        self.latencies, self.errors = [], 0

    def run(self):
        p = ck.Producer(self.broker.conf(**{"acks": 1, "linger.ms": 1, "enable.idempotence": False}))
        value = os.urandom(1024)

        def done(err, _msg, sent):
            if err is not None:
                self.errors += 1
            else:
                self.latencies.append(time.monotonic() - sent)

        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < self.seconds:
            due = t0 + i / self.rate
            now = time.monotonic()
            if due > now:
                p.poll(due - now)
                continue
            sent = time.monotonic()
            p.produce(self.topic, value, partition=0, on_delivery=lambda e, m, s=sent: done(e, m, s))
            i += 1
            p.poll(0)
        p.flush(30)

    def summary(self):
        lat = sorted(self.latencies)
        if not lat:
            return {"delivered": 0, "errors": self.errors}
        return {"delivered": len(lat), "errors": self.errors,
                "p50_ms": round(lat[len(lat) // 2] * 1000, 2),
                "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2), "max_ms": round(lat[-1] * 1000, 2)}


def churn(port, rate, seconds, threads=4):
    """``rate`` new connections per second for ``seconds`` over ``threads`` threads; returns their stats."""
    times, failures = [], [0]
    lock = threading.Lock()
    per = rate / threads

    def worker():
        t0 = time.monotonic()
        i = 0
        mine = []
        while True:
            due = t0 + i / per
            now = time.monotonic()
            if due - t0 >= seconds:
                break
            if due > now:
                time.sleep(due - now)
            began = time.monotonic()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    api_versions(s)
                mine.append(time.monotonic() - began)
            except OSError:
                with lock:
                    failures[0] += 1
            i += 1
        with lock:
            times.extend(mine)

    t0 = time.monotonic()
    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.monotonic() - t0
    times.sort()
    return {"completed": len(times), "failed": failures[0], "seconds": round(took, 2),
            "per_second": round(len(times) / took, 1),
            "p50_ms": round(times[len(times) // 2] * 1000, 2) if times else None,
            "p99_ms": round(times[int(len(times) * 0.99)] * 1000, 2) if times else None,
            "max_ms": round(times[-1] * 1000, 2) if times else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--accept-rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--produce-rate", type=int, default=2000)
    args = ap.parse_args()
    limit = raise_nofile()
    res = {"machine": machine(), "args": vars(args), "nofile": limit, "load_before": loadavg()}
    broker = BrokerProc("kbroker")
    try:
        start_timed(broker, 0, 60)
        from bench_clients import create_topics
        create_topics(broker, ["conn-bench"], 1)
        socks = []
        if args.idle:
            time.sleep(3)
            before = rss_kib(broker.proc.pid)
            t0 = time.monotonic()
            socks = open_idle(broker.port, args.idle)
            opened = time.monotonic() - t0
            time.sleep(3)
            after = rss_kib(broker.proc.pid)
            res["idle"] = {"connections": len(socks), "open_s": round(opened, 2), "rss_before_mib": round(before / 1024, 1),
                           "rss_after_mib": round(after / 1024, 1),
                           "kib_per_connection": round((after - before) / len(socks), 2),
                           "broker": proc_status(broker.proc.pid)}
            print("idle", res["idle"], flush=True)
            # still all alive? one more round trip on a sample
            for s in socks[::max(1, len(socks) // 50)]:
                api_versions(s)
            for s in socks:
                s.close()
        if args.accept_rate:
            base = Producer(broker, "conn-bench", args.produce_rate, args.seconds)
            base.start()
            base.join()
            res["producer_alone"] = base.summary()
            prod = Producer(broker, "conn-bench", args.produce_rate, args.seconds + 2)
            prod.start()
            time.sleep(1)
            cpu0 = broker.cpu_seconds()
            res["accept"] = churn(broker.port, args.accept_rate, args.seconds)
            res["accept"]["broker_cpu_s"] = round(broker.cpu_seconds() - cpu0, 2)
            prod.join()
            res["producer_with_churn"] = prod.summary()
            print("accept", res["accept"], "producer", res["producer_alone"], "->", res["producer_with_churn"],
                  flush=True)
    finally:
        res["load_after"] = loadavg()
        broker.stop()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "connections-%s.json"
                        % _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=1))
    print("->", path)


if __name__ == "__main__":
    main()
