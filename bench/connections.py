#!/usr/bin/env python3
"""Many connections on one broker (issue 15 target 7): memory per idle connection, accept rate while serving.

    python bench/connections.py --idle 10000 --accept-rate 1000 --seconds 10
    python bench/connections.py --idle 10000 --accept-rate 1000 --seconds 10 --brokers kbroker,kafka

Steps, on one fresh kbroker (bench/bench_clients.py's ``BrokerProc``; this process and the broker get ``ulimit -n``
raised to 200,000 when allowed (root), as Kafka's docs ask of a broker; max.connections and max.connections.per.ip
are Kafka's defaults, unlimited):
  idle     ``--idle`` connections opened (in waves of 500), each sends one ApiVersions v0 and reads its answer (so the
           broker built the connection's whole state: greenlet, Connection, parser), then stays idle. Broker RSS
           (VmRSS) before and after, after a settle of 3 s: (after - before) / N KiB per connection (target <= 30).
           They are then closed all at once while another client sends ApiVersions round trips on a connection
           of its own (1 ms apart): its p99 and worst round trip say how long the teardown holds the broker's
           other clients; the next step starts 3 s after the closes.
  accept   a producer (confluent-kafka, acks=1, 1 KB values, ``--produce-rate`` records/s paced) runs for
           ``--seconds``; in the middle ``--seconds`` new connections arrive at ``--accept-rate`` per second (4
           client threads), each connect + ApiVersions round trip + close. Reported: the connections completed per
           second (target >= 1,000), their p50/p99/max round trip, and the producer's delivered records and p99 /
           max produce latency compared with a baseline run of the same producer alone.
JSON in ``bench/results/connections-<UTC time>.json`` (gitignored); ``uptime``'s load average recorded.

``--brokers kbroker,kafka`` (default ``kbroker``) runs the same steps, one broker after the other, on Apache Kafka
4.4 too (bench/peers.py ``make_broker("kafka")``: one KRaft JVM, broker + controller, -Xms1g -Xmx1g G1; started by
its own ``start()``, after this process raised ``ulimit -n``, which the JVM inherits), then prints the figures side
by side with kbroker / Kafka ratios. Kafka's max.connections, max.connections.per.ip and max.connection.creation.rate
are unlimited by default too; its socket.listen.backlog.size is 50 (its default, kept). What differs:
  * RSS per idle connection is not the same measure on a JVM: the heap (1 GB) is committed up front by -Xms1g and
    never grows, but its pages count in RSS only once first touched, so the JVM's RSS delta is what the connections
    add outside the heap (native memory: NIO, thread-local buffers) plus any heap pages touched for the first time
    during the step (the connections' objects or anybody's garbage landing on fresh eden regions). It is printed
    with that note and no ratio. For Kafka the step also reports the connections' live heap: heap used after a full
    GC (``jcmd <pid> GC.run`` then ``GC.heap_info``) with the N connections open, less the same after they are
    closed, / N -- after the RSS reading, so it does not disturb it (skipped without jcmd).
  * Open time of the idle waves: Kafka listens with a backlog of 50 (socket.listen.backlog.size), kbroker with
    1,024. The waves' connects come back to back, faster than any acceptor takes them, so against Kafka every ~51st
    finds the backlog full, its SYN is dropped and resent after 1 s (seen in a probe: one ~1.02 s stall per 51
    connects). The open time then counts retransmit timers, not accept speed; the kernel's ListenOverflows counter
    is read around the waves and, when it moved, the open time gets no ratio (the paced accept step is the measure).
  * JIT warm-up: before the accept step's baseline, Kafka gets ``--jvm-warmup`` seconds of the same paced producer
    (discarded, in the JSON as producer_jvm_warmup), so the baseline and the churn run see compiled produce code,
    not the compiler; CPython has no JIT and kbroker's path has no such run.
  * Broker CPU during the accept step is the whole process (all threads: for Kafka its GC, JIT and KRaft controller
    threads and their idle background), with the paced producer's load in it for both.
"""
import argparse
import datetime as _dt
import json
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import confluent_kafka as ck  # noqa: E402

from bench_clients import BrokerProc, machine  # noqa: E402
from peers import PeerUnavailable, make_broker  # noqa: E402
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


BROKERS = ("kbroker", "kafka")


def close_all(port, socks, settle=3.0):
    """Close ``socks`` at once while another client sends ApiVersions on a connection of its own, one round trip
    at a time, 1 ms apart, from 0.5 s before the closes until ``settle`` s after: how long the broker's other
    clients wait while it tears the connections down. The steps after this one start after the settle, so the
    teardown is not in their figures."""
    ping = socket.create_connection(("127.0.0.1", port), timeout=30)
    api_versions(ping)
    rtts, stop = [], threading.Event()

    def pinger():
        while not stop.is_set():
            t = time.perf_counter()
            api_versions(ping)
            rtts.append(time.perf_counter() - t)
            stop.wait(0.001)

    th = threading.Thread(target=pinger, daemon=True)
    th.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    for s in socks:
        s.close()
    closed = time.monotonic() - t0
    time.sleep(settle)
    stop.set()
    th.join(30)
    ping.close()
    rtts.sort()
    return {"connections": len(socks), "client_close_s": round(closed, 3), "pings": len(rtts),
            "ping_p50_ms": round(rtts[len(rtts) // 2] * 1e3, 2) if rtts else None,
            "ping_p99_ms": round(rtts[int(len(rtts) * 0.99)] * 1e3, 2) if rtts else None,
            "ping_max_ms": round(rtts[-1] * 1e3, 2) if rtts else None}


def jvm_heap_used_kib(pid):
    """KiB of heap in use after a full GC of JVM ``pid`` (``jcmd GC.run``, then ``GC.heap_info``'s "used"): its
    live objects. None without jcmd or when the JVM does not answer."""
    jcmd = shutil.which("jcmd")
    if not jcmd:
        return None
    try:
        subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        out = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, timeout=60,
                             check=True).stdout.decode(errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"heap\s+total \d+K, used (\d+)K", out)
    return int(m.group(1)) if m else None


def listen_overflows():
    """The kernel's TcpExt ListenOverflows counter (/proc/net/netstat, this network namespace): connections whose
    handshake completed while a listener's accept backlog was full (the client's ACK dropped; it retransmits)."""
    with open("/proc/net/netstat") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return dict(zip(names.split()[1:], map(int, values.split()[1:]))).get("ListenOverflows")
    return None


def start_broker(broker):
    """Start ``broker`` -> its start timing."""
    if broker.kind == "kbroker":
        return start_timed(broker, 0, 60)
    t0 = time.monotonic()
    broker.start()                 # formats its log dir, waits for an AdminClient answer; inherits our ulimit -n
    return {"ready_s": round(time.monotonic() - t0, 3)}


def run_broker(kind, args):
    """The idle and accept steps (module docstring) on one fresh broker of ``kind`` -> its results."""
    res = {"load_before": loadavg()}
    broker = BrokerProc("kbroker") if kind == "kbroker" else make_broker(kind)  # PeerUnavailable: no java/mvn
    try:
        res["start"] = start_broker(broker)
        from bench_clients import create_topics
        create_topics(broker, ["conn-bench"], 1)
        socks = []
        if args.idle:
            time.sleep(3)
            before = rss_kib(broker.proc.pid)
            overflows0 = listen_overflows()
            t0 = time.monotonic()
            socks = open_idle(broker.port, args.idle)
            opened = time.monotonic() - t0
            overflows = listen_overflows()
            time.sleep(3)
            after = rss_kib(broker.proc.pid)
            res["idle"] = {"connections": len(socks), "open_s": round(opened, 2), "rss_before_mib": round(before / 1024, 1),
                           "rss_after_mib": round(after / 1024, 1),
                           "kib_per_connection": round((after - before) / len(socks), 2),
                           "broker": proc_status(broker.proc.pid),
                           "listen_overflows": None if overflows is None else overflows - overflows0}
            if kind == "kafka":
                # the JVM's RSS delta leaves out objects on heap pages touched before (module docstring): the live
                # heap with the connections open, then without, both after a full GC and after the RSS reading
                res["idle"]["heap_live_open_kib"] = jvm_heap_used_kib(broker.proc.pid)
            print(kind, "idle", res["idle"], flush=True)
            # still all alive? one more round trip on a sample
            for s in socks[::max(1, len(socks) // 50)]:
                api_versions(s)
            res["idle"]["close"] = close_all(broker.port, socks)
            print(kind, "close", res["idle"]["close"], flush=True)
            if kind == "kafka" and res["idle"]["heap_live_open_kib"] is not None:
                closed = jvm_heap_used_kib(broker.proc.pid)
                res["idle"]["heap_live_closed_kib"] = closed
                if closed is not None:
                    res["idle"]["heap_live_kib_per_connection"] = round(
                        (res["idle"]["heap_live_open_kib"] - closed) / len(socks), 2)
                print(kind, "live heap after full GC: %s KiB with the connections open, %s KiB closed" % (
                    res["idle"]["heap_live_open_kib"], closed), flush=True)
        if args.accept_rate:
            if kind == "kafka" and args.jvm_warmup > 0:
                # the JVM's produce path compiled before the baseline (module docstring); kbroker's path has no such run
                warm = Producer(broker, "conn-bench", args.produce_rate, args.jvm_warmup)
                warm.start()
                warm.join()
                res["producer_jvm_warmup"] = warm.summary()
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
            print(kind, "accept", res["accept"], "producer", res["producer_alone"], "->", res["producer_with_churn"],
                  flush=True)
    finally:
        res["load_after"] = loadavg()
        broker.stop()
    return res


def side_by_side(results, peer):
    """Markdown rows kbroker | peer | kbroker / peer of the comparable figures; the JVM's RSS row without a ratio."""
    kb, pr = results["kbroker"], results[peer]

    def get(r, *path):
        for k in path:
            r = r.get(k) if isinstance(r, dict) else None
        return r

    def per_conn_cpu_ms(r):
        a = r.get("accept") or {}
        return round(a["broker_cpu_s"] / a["completed"] * 1e3, 3) if a.get("completed") else None

    rows = [("idle: connections held", ("idle", "connections")),
            ("idle: seconds to open them (waves of 500)", ("idle", "open_s")),
            ("idle: listen backlog overflows while opening (kernel, TcpExt)", ("idle", "listen_overflows")),
            ("idle: broker RSS before, MiB", ("idle", "rss_before_mib")),
            ("idle: RSS delta per connection, KiB", ("idle", "kib_per_connection")),
            ("idle: live heap per connection after full GC, KiB (JVM only)", ("idle", "heap_live_kib_per_connection")),
            ("close: another client's ApiVersions p99 ms while they all close", ("idle", "close", "ping_p99_ms")),
            ("close: ... max ms", ("idle", "close", "ping_max_ms")),
            ("accept: connections completed per second", ("accept", "per_second")),
            ("accept: failed connections", ("accept", "failed")),
            ("accept: round trip p50 ms", ("accept", "p50_ms")),
            ("accept: round trip p99 ms", ("accept", "p99_ms")),
            ("accept: round trip max ms", ("accept", "max_ms")),
            ("accept: broker CPU s during the churn (producer's load in it)", ("accept", "broker_cpu_s")),
            ("accept: broker CPU ms per connection completed", per_conn_cpu_ms),
            ("producer alone: delivered", ("producer_alone", "delivered")),
            ("producer alone: p99 ms", ("producer_alone", "p99_ms")),
            ("producer with churn: delivered", ("producer_with_churn", "delivered")),
            ("producer with churn: p99 ms", ("producer_with_churn", "p99_ms")),
            ("producer with churn: max ms", ("producer_with_churn", "max_ms"))]
    no_ratio = {"idle: RSS delta per connection, KiB": "not comparable, see note",
                "idle: broker RSS before, MiB": "-", "idle: connections held": "-",
                "idle: live heap per connection after full GC, KiB (JVM only)": "-",
                "accept: failed connections": "-",
                "idle: listen backlog overflows while opening (kernel, TcpExt)": "-"}
    backlog_note = bool(get(pr, "idle", "listen_overflows") or get(kb, "idle", "listen_overflows"))
    if backlog_note:
        # a wave of 500 connects against a 50-deep backlog waits for the clients' retransmits: a backlog size, not
        # the accept path, sets that time
        no_ratio["idle: seconds to open them (waves of 500)"] = "not comparable, see note"
    out = ["| figure | kbroker | %s | kbroker / %s |" % (peer, peer), "|---|---|---|---|"]
    for label, key in rows:
        a, b = (key(kb), key(pr)) if callable(key) else (get(kb, *key), get(pr, *key))
        if label in no_ratio:
            r = no_ratio[label]
        else:
            r = "%.2fx" % (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"
        out.append("| %s | %s | %s | %s |" % (label, "-" if a is None else a, "-" if b is None else b, r))
    if backlog_note:
        out.append("Note (open time): the kernel counted listen backlog overflows while the waves were opened. "
                   "Kafka listens with socket.listen.backlog.size 50 (its default), kbroker with 1024; the client's "
                   "back-to-back connects outrun any acceptor, so once 50 wait the next SYN is dropped and resent "
                   "after 1 s (seen: one ~1 s stall per ~51 connects): the open time is the kernel's retransmit "
                   "timer times overflows, not how fast the broker accepts -- the paced accept step measures that.")
    if peer == "kafka":
        out.append("Note (Kafka, RSS per idle connection): the JVM's heap is preallocated (-Xms1g -Xmx1g), so the "
                   "RSS delta is what the connections add outside the heap, plus heap pages first touched during "
                   "the step (RSS counts a committed page only once touched); the connections' Java objects are in "
                   "the live-heap row instead. kbroker's delta is its whole cost (CPython heap and greenlets), so "
                   "the two RSS figures are not the same measure and get no ratio.")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--accept-rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--produce-rate", type=int, default=2000)
    ap.add_argument("--jvm-warmup", type=float, default=5.0,
                    help="Kafka only: seconds of the paced producer before the accept step's baseline (JIT; 0: none)")
    ap.add_argument("--brokers", default="kbroker",
                    help="comma list of %s (default kbroker); kafka = Apache Kafka 4.4 from bench/peers.py"
                         % ",".join(BROKERS))
    args = ap.parse_args()
    kinds = [k.strip() for k in args.brokers.split(",") if k.strip()]
    for k in kinds:
        if k not in BROKERS:
            ap.error("unknown broker %r (choose from %s)" % (k, ", ".join(BROKERS)))
    limit = raise_nofile()
    res = {"machine": machine(), "args": vars(args), "nofile": limit, "load_before": loadavg()}
    results = {}
    for kind in kinds:
        try:
            results[kind] = run_broker(kind, args)
        except PeerUnavailable as e:
            results[kind] = {"skipped": str(e)}
            print(kind, "skipped:", e, flush=True)
    # kbroker's figures stay at the top level (the JSON's shape before --brokers); every broker's under "brokers"
    for k, v in results.get("kbroker", {}).items():
        if k not in ("load_before",):
            res[k] = v
    res["brokers"] = results
    res["load_after"] = loadavg()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "connections-%s.json"
                        % _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k not in ("machine", "brokers")} if kinds == ["kbroker"]
                     else {k: v for k, v in res.items() if k != "machine"}, indent=1))
    if "kbroker" in kinds:
        for peer in kinds:
            if peer != "kbroker" and "skipped" not in results.get(peer, {}) and "skipped" not in results["kbroker"]:
                print("\nside by side: kbroker / %s (%s idle connections, %s connections/s offered for %s s)"
                      % (peer, args.idle, args.accept_rate, args.seconds))
                print(side_by_side(results, peer))
    print("->", path)


if __name__ == "__main__":
    main()
