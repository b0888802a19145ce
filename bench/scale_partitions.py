#!/usr/bin/env python3
"""One broker with many partitions (issue 15 target 4, single broker): startup, memory, Metadata, produce spread.

    python bench/scale_partitions.py --topics 1000 --partitions 10 --fill-mb 10240

Steps, on one fresh kbroker (embedded coordination backend, bench/bench_clients.py's ``BrokerProc``, RF 1):
  create        ``--topics`` x ``--partitions`` through CreateTopics (100 topics a request), wall time until every
                partition has a leader in a full Metadata answer.
  idle          broker RSS (VmRSS, MiB), open descriptors (/proc/<pid>/fd), threads.
  metadata      a full Metadata request (all topics: v1 null list and v9 null list) on a raw socket, timed at the
                client from the send to the last byte of the answer (median and max of ``--metadata-repeat``); the
                answer is decoded and must list every partition with a leader.
  produce       ``--produce-mb`` MB of 1,024-byte values (acks=1, confluent-kafka, ``--linger-ms``) to ONE partition,
                then the same to ``--spread`` partitions picked at random per record (first ``--spread`` of the
                topics' partitions); broker CPU s/GB (utime+stime from /proc) of each and the ratio (target <= 2).
  fill          (``--fill-mb`` > 0) that many MB spread across every partition at random (``--fill-value-kb`` values,
                acks=1, linger 50 ms: 10 GB over 10,000 partitions is 1 MB each, so a batch holds ~1 value anyway).
  clean restart SIGTERM, wall time of the shutdown, start: time to the first ApiVersions answer and to the first full
                Metadata listing every partition with a leader ("ready"; target <= 10 s); RSS after.
  kill restart  producing ``--kill-after-mb`` MB more across every partition then ``kill -9`` while the producer
                still writes, start: the same times (target <= 30 s with 10 GB across the partitions).
The broker runs with ``ulimit -n`` raised to 200,000 when allowed (root), as Kafka's docs ask of a Kafka broker: a
partition holding data costs ~3 descriptors (its .log, and the mapping of its .index and .timeindex: Python's mmap
keeps a dup of the descriptor), so 10,000 partitions with data need ~30,000 (the idle/after-fill "fds" figures).
``--brokers kbroker,kafka`` runs the same steps on Apache Kafka 4.4 after kbroker (bench/peers.py's one KRaft node,
broker + controller in one JVM with a 1 GB heap; its first start formats the log dir, the restarts are the same
JVM command on it, timed to the same Metadata answers -- Kafka 4.4 still answers Metadata v1 and v9) and prints
the figures side by side with kbroker / Kafka. A Kafka node keeps descriptors open per partition log; at 10,000
partitions it fits this machine's limit of 20,000.
The JSON with every figure goes to ``bench/results/scale-partitions-<broker>-<UTC time>.json`` (gitignored); the
summary is printed. ``uptime``'s load average is recorded before and after (the machine is shared).
"""
import argparse
import datetime as _dt
import json
import os
import random
import signal
import socket
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench_clients import REPO, BrokerProc, machine  # noqa: E402
from peers import make_broker  # noqa: E402

sys.path.insert(0, REPO)
from kbroker.protocol.apis.metadata import API as METADATA  # noqa: E402


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def proc_status(pid):
    """{'rss_mib', 'hwm_mib', 'threads', 'fds'} of a process."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["rss_mib"] = round(int(line.split()[1]) / 1024.0, 1)
            elif line.startswith("VmHWM:"):
                out["hwm_mib"] = round(int(line.split()[1]) / 1024.0, 1)
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
    out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    return out


def _frame(version, body, correlation_id=1):
    header = struct.pack(">hhih", 3, version, correlation_id, 5) + b"bench"
    if version >= 9:
        header += b"\x00"           # request header v2: empty tagged fields
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def metadata_all(host, port, version, timeout=30.0):
    """(seconds from send to the last byte, response bytes, decoded answer) of a Metadata request for all topics."""
    body = METADATA.encode_request(version, {"topics": None, "allow_auto_topic_creation": False}).getvalue()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = _frame(version, body)
        t0 = time.perf_counter()
        sock.sendall(frame)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        payload = _recv_exact(sock, size)
        took = time.perf_counter() - t0
    pos = 4 + (1 if version >= 9 else 0)      # correlation id (+ response header v1 tagged fields)
    return took, size + 4, METADATA.decode_response(version, payload, pos)


def count_led(answer):
    """(partitions listed, partitions with a leader) of a decoded Metadata answer."""
    total = led = 0
    for t in answer["topics"]:
        for p in t["partitions"]:
            total += 1
            led += p["error_code"] == 0 and p["leader_id"] >= 0
    return total, led


def wait_ready(broker, expect, t_start, timeout):
    """Seconds from ``t_start`` to the first ApiVersions-able connect and to the first full Metadata listing
    ``expect`` partitions all with leaders."""
    host, port = "127.0.0.1", broker.port
    first_connect = None
    deadline = t_start + timeout
    while time.monotonic() < deadline:
        if broker.proc.poll() is not None:
            raise RuntimeError("broker exited with %s:\n%s" % (broker.proc.returncode, broker.tail()))
        try:
            _took, _size, ans = metadata_all(host, port, 1, timeout=max(1.0, deadline - time.monotonic()))
        except OSError:
            time.sleep(0.05)
            continue
        if first_connect is None:
            first_connect = time.monotonic() - t_start
        total, led = count_led(ans)
        if total >= expect and led >= expect:
            return first_connect, time.monotonic() - t_start
        time.sleep(0.05)
    raise RuntimeError("not ready within %.0f s" % timeout)


def start_timed(broker, expect, timeout):
    """Start the broker process and time it to ready (bench_clients' start() waits on an AdminClient instead)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    broker._out = open(broker.out_path, "ab")
    import subprocess
    t0 = time.monotonic()
    broker.proc = subprocess.Popen(broker.argv(), stdout=broker._out, stderr=subprocess.STDOUT, cwd=broker.tmp,
                                   env=env, start_new_session=True, preexec_fn=_raise_nofile)
    first, ready = wait_ready(broker, expect, t0, timeout)
    return {"first_answer_s": round(first, 3), "ready_s": round(ready, 3)}


NOFILE = 200000   # Kafka's docs ask for >= 100,000; kbroker needs ~3 per partition with data (module docstring)


def _raise_nofile():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(NOFILE, hard), max(NOFILE, hard)))   # root only
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def create_all(broker, topics, partitions, timeout):
    admin = AdminClient(broker.conf())
    names = ["t%04d" % i for i in range(topics)]
    t0 = time.monotonic()
    for i in range(0, len(names), 100):
        futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i:i + 100]],
                                      request_timeout=timeout, operation_timeout=timeout)
        for name, fut in futures.items():
            fut.result(timeout)
    expect = topics * partitions
    deadline = time.monotonic() + timeout
    while True:
        _took, _size, ans = metadata_all("127.0.0.1", broker.port, 1)
        total, led = count_led(ans)
        if total >= expect and led >= expect:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("%d of %d partitions led after %.0f s" % (led, expect, timeout))
        time.sleep(0.2)
    return names, round(time.monotonic() - t0, 2)


def measure_metadata(broker, repeat, expect):
    out = {}
    for version in (1, 9):
        times, size = [], 0
        for _ in range(repeat):
            took, size, ans = metadata_all("127.0.0.1", broker.port, version)
            total, led = count_led(ans)
            if total != expect or led != expect:
                raise RuntimeError("Metadata v%d listed %d partitions, %d led; expected %d" % (version, total, led,
                                                                                               expect))
            times.append(took)
        out["v%d" % version] = {"median_ms": round(statistics.median(times) * 1000, 1),
                                "max_ms": round(max(times) * 1000, 1), "bytes": size}
    return out


def produce(broker, targets, total_bytes, value_size=1024, stop_at=None, linger_ms=5, seed=7, extra_conf=None,
            before_clock=None):
    """Produce ``total_bytes`` of ``value_size`` values, each to a random (topic, partition) of ``targets`` (drawn
    with ``seed``); returns (seconds, broker CPU seconds). ``stop_at(sent_bytes)`` -> True ends early (kill -9
    step). ``extra_conf``: more producer keys; ``before_clock(producer)`` runs before the clock starts
    (bench/produce_spread.py warms the connection and reads librdkafka's statistics there)."""
    p = ck.Producer(broker.conf(**{"acks": 1, "linger.ms": linger_ms, "compression.type": "none",
                                   "enable.idempotence": False, "queue.buffering.max.messages": 1000000,
                                   "queue.buffering.max.kbytes": 1048576, "batch.size": 1000000,
                                   **(extra_conf or {})}))
    value = os.urandom(value_size)
    n = total_bytes // value_size
    rnd = random.Random(seed)
    if before_clock is not None:
        before_clock(p)
    check_every = max(1, min(10000, (8 << 20) // value_size))    # poll / stop check every <= 8 MB
    cpu0, t0 = broker.cpu_seconds(), time.monotonic()
    for i in range(n):
        topic, part = targets[rnd.randrange(len(targets))] if len(targets) > 1 else targets[0]
        while True:
            try:
                p.produce(topic, value, partition=part)
                break
            except BufferError:
                p.poll(0.01)
        if i % check_every == 0:
            p.poll(0)
            if stop_at is not None and stop_at(i * value_size):
                return p
    if stop_at is not None:
        return p
    left = p.flush(120)
    if left:
        raise RuntimeError("%d records not delivered" % left)
    return time.monotonic() - t0, broker.cpu_seconds() - cpu0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--metadata-repeat", type=int, default=5)
    ap.add_argument("--produce-mb", type=int, default=300)
    ap.add_argument("--spread", type=int, default=1000)
    ap.add_argument("--linger-ms", type=int, default=100, help="producer linger.ms of the produce step")
    ap.add_argument("--fill-value-kb", type=int, default=64, help="value size of the fill and kill steps")
    ap.add_argument("--fill-mb", type=int, default=0, help="MB spread across every partition before the restarts")
    ap.add_argument("--kill-after-mb", type=int, default=200)
    ap.add_argument("--ready-timeout", type=float, default=120.0)
    ap.add_argument("--override", action="append", default=[], help="extra broker key=value")
    ap.add_argument("--keep", action="store_true", help="keep the data directory (printed) for a profile")
    ap.add_argument("--brokers", default="kbroker", help="kbroker,kafka: the same steps on each, one after the other")
    args = ap.parse_args()
    kinds = [k for k in args.brokers.split(",") if k]
    if any(k not in ("kbroker", "kafka") for k in kinds):
        ap.error("--brokers takes kbroker and kafka")
    out = {k: run(k, args) for k in kinds}
    if len(kinds) > 1:
        summary(out)


def summary(out):
    """The figures of every broker side by side, with kbroker / Kafka."""
    rows = [("create, s", ("create_s",)), ("idle RSS, MiB", ("idle", "rss_mib")),
            ("full Metadata v1, median ms", ("metadata", "v1", "median_ms")),
            ("full Metadata v9, median ms", ("metadata", "v9", "median_ms")),
            ("produce, one partition: CPU s/GB", ("produce", "one_partition", "cpu_s_per_gb")),
            ("produce, spread: CPU s/GB", ("produce", "spread", "cpu_s_per_gb")),
            ("spread / one", ("produce", "ratio")), ("SIGTERM to exit, s", ("shutdown_s",)),
            ("clean restart: ready, s", ("clean_restart", "ready_s")),
            ("clean restart: RSS, MiB", ("clean_restart", "rss_mib")),
            ("kill -9 restart: ready, s", ("kill9_restart", "ready_s")),
            ("files in the log dir (apparent sizes: sparse index files count whole), GB", ("data_gb",))]

    def get(r, path):
        for k in path:
            r = r.get(k) if isinstance(r, dict) else None
        return r

    kinds = list(out)
    print("\n| figure | %s | kbroker / kafka |\n|---|%s---|" % (" | ".join(kinds), "---|" * len(kinds)))
    for label, path in rows:
        vals = [get(out[k], path) for k in kinds]
        a, b = get(out.get("kbroker", {}), path), get(out.get("kafka", {}), path)
        ratio = "%.2fx" % (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "-"
        print("| %s | %s | %s |" % (label, " | ".join("-" if v is None else str(v) for v in vals), ratio))


def run(kind, args):
    """Every step (module docstring) on one fresh broker of ``kind`` -> its results (also written as JSON)."""
    overrides = dict(kv.split("=", 1) for kv in args.override)
    # 10,000 partitions: the default CreateTopics limit per request is fine (100 topics x 10); the broker must be
    # allowed to host that many.
    if kind == "kafka":
        broker = make_broker("kafka")     # peers.PeerUnavailable without java/mvn
    else:
        broker = BrokerProc("kbroker", overrides=overrides)
    expect = args.topics * args.partitions
    res = {"broker": kind, "machine": machine(), "args": vars(args), "load_before": loadavg()}
    try:
        if kind == "kafka":
            # the first start formats Kafka's log dir (KafkaProc.start); the restarts below run on it as it is
            broker.start(timeout=args.ready_timeout)
            res["first_start"] = None
        else:
            res["first_start"] = start_timed(broker, 0, args.ready_timeout)
        names, res["create_s"] = create_all(broker, args.topics, args.partitions, args.ready_timeout)
        print("created %d partitions in %.1f s" % (expect, res["create_s"]), flush=True)
        res["idle"] = proc_status(broker.proc.pid)
        print("idle", res["idle"], flush=True)
        res["metadata"] = measure_metadata(broker, args.metadata_repeat, expect)
        print("metadata", res["metadata"], flush=True)
        if args.produce_mb:
            one = [(names[0], 0)]
            spread = [(names[i // args.partitions], i % args.partitions)
                      for i in range(min(args.spread, expect))]
            total = args.produce_mb * 10**6
            s1, c1 = produce(broker, one, total, linger_ms=args.linger_ms)
            s2, c2 = produce(broker, spread, total, linger_ms=args.linger_ms)
            res["produce"] = {"one_partition": {"s": round(s1, 2), "cpu_s_per_gb": round(c1 / total * 1e9, 3)},
                              "spread": {"partitions": len(spread), "s": round(s2, 2),
                                         "cpu_s_per_gb": round(c2 / total * 1e9, 3)},
                              "ratio": round(c2 / c1, 2) if c1 else None,   # too little to measure
                              "linger_ms": args.linger_ms}
            print("produce", res["produce"], flush=True)
        if args.fill_mb:
            every = [(names[i // args.partitions], i % args.partitions) for i in range(expect)]
            s, c = produce(broker, every, args.fill_mb * 10**6, value_size=args.fill_value_kb * 1024, linger_ms=50)
            res["fill"] = {"mb": args.fill_mb, "s": round(s, 1), "broker_cpu_s": round(c, 1)}
            print("fill", res["fill"], flush=True)
        res["before_restart"] = proc_status(broker.proc.pid)
        t0 = time.monotonic()
        broker.proc.send_signal(signal.SIGTERM)
        broker.proc.wait(300)
        res["shutdown_s"] = round(time.monotonic() - t0, 2)
        res["clean_restart"] = start_timed(broker, expect, args.ready_timeout)
        res["clean_restart"].update(proc_status(broker.proc.pid))
        print("shutdown %.1f s; clean restart" % res["shutdown_s"], res["clean_restart"], flush=True)
        res["metadata_after_restart"] = measure_metadata(broker, args.metadata_repeat, expect)
        if args.kill_after_mb:
            every = [(names[i // args.partitions], i % args.partitions) for i in range(expect)]
            goal = args.kill_after_mb * 10**6
            producer = produce(broker, every, goal * 4, value_size=args.fill_value_kb * 1024, linger_ms=50,
                               stop_at=lambda sent: sent >= goal)
            broker.proc.kill()                    # while the producer still has records in flight
            broker.proc.wait(30)
            del producer
            res["kill9_restart"] = start_timed(broker, expect, args.ready_timeout)
            res["kill9_restart"].update(proc_status(broker.proc.pid))
            print("kill -9 restart", res["kill9_restart"], flush=True)
        logs = os.path.join(broker.tmp, "kraft" if kind == "kafka" else "logs")
        du = sum(os.path.getsize(os.path.join(dp, f)) for dp, _dn, fs in os.walk(logs) for f in fs)
        res["data_bytes"] = du
        res["data_gb"] = round(du / 1e9, 2)
    finally:
        res["load_after"] = loadavg()
        broker.stop(keep=args.keep, timeout=300)
        if args.keep:
            print("kept", broker.tmp)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "scale-partitions-%s-%s.json"
                        % (kind, _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")))
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=1))
    print("->", path)
    return res


if __name__ == "__main__":
    main()
