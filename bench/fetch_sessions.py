#!/usr/bin/env python3
"""Broker CPU of a consumer polling 1,000 idle partitions, with incremental fetch sessions (KIP-227) and without
(``max.incremental.fetch.session.cache.slots=0``: every Fetch names and is answered for every partition) -- issue 15
target 3: O(changed partitions) per poll, not O(partitions). With ``--brokers kbroker,kafka`` Apache Kafka 4.4 (KRaft,
one JVM, bench/peers.py) runs the same raw and consumer phases beside kbroker, and the figures are set side by side.

    .venv/bin/python bench/fetch_sessions.py --partitions 1000 --polls 2000 --seconds 20 --rounds 2
    .venv/bin/python bench/fetch_sessions.py --partitions 1000 --brokers kbroker,kafka   # the same beside Apache Kafka

Each round starts one fresh broker per mode (tests/integration/harness.py BrokerProcess, embedded backend, metrics
on a free port), alternating the order between rounds (round 1: sessions, sessionless; round 2: the reverse), so
both see the same machine. On each: one topic of ``--partitions`` partitions, nothing produced (every partition
idle), then two phases:
  raw       one Fetch v12 client (kbroker's own FetchSessionClient, Kafka's FetchSessionHandler: full, then only
            changed partitions) polling back to back with max_wait_ms=0 for ``--polls`` requests: broker CPU
            (utime+stime of the broker process, all threads, /proc/<pid>/stat) per poll, request and response bytes
            per poll. This is the per-poll cost with nothing else in it.
  consumer  kafka-python (3.x, the Python client with KIP-227 sessions; librdkafka 2.x fetches sessionless, so it
            cannot show the difference) assigned every partition at its end, polling for ``--seconds`` with its
            defaults (fetch_max_wait_ms 500): broker CPU per second and per Fetch request (the broker's
            kafka_network_requestmetrics_requests_total{request="FetchConsumer"}).
  no client (after the two, ``--idle-seconds``; 0 skips it) the broker with no client at all: its own background
            CPU per second (timers, a JVM's GC and controller threads), the floor under the consumer's figures.
In-process first (``--micro-polls``, no broker, no socket): the Fetch handler alone over real Logs and Partitions
(tests/unit/test_fetch_sessions.py's fixtures), process CPU per idle incremental fetch and per sessionless fetch at
100 and ``--partitions`` partitions: the handler's share, free of the request codec and the connection.
A mode's figures are medians over the rounds; the table shows sessionless / sessions. ``perf stat`` instruction
counts are not available on this machine (perf reports instructions <not supported>), hence CPU seconds; the load
average is printed next to the figures. JSON with every round in ``bench/results/fetch_sessions-<UTC>.json``.

Apache Kafka (``--brokers ...,kafka``): bench/peers.py's ``make_broker("kafka")`` (4.4.0, broker + controller in one
JVM, 1 GB heap), its defaults but for what peers.py sets; "sessions" is Kafka's default cache of 1,000 session slots
(the value kbroker gets here), "sessionless" a KafkaProc subclass below whose extra_props() sets
``max.incremental.fetch.session.cache.slots=0`` (Kafka has no other switch: a full fetch then gets session id 0 and
the client stays sessionless, as against kbroker). Fetch v12 is checked against Kafka's ApiVersions answer first
(KIP-896 removed only v0-v3). In the rounds' order a broker's two modes follow each other (kbroker's, then Kafka's;
reversed in the next round). Broker CPU is the JVM process's utime+stime, all threads (GC, JIT compiler, controller,
network and request handler threads). Differences from kbroker's path, and why:
  * JIT warm-up: after the same 20 warm-up polls the raw client polls for ``--jvm-warmup`` more seconds before the
    measured polls, so C2 has compiled the Fetch path and the figure is the JVM's steady state, not its compiler's
    work (CPython has no JIT; kbroker's path has no such step). The warm-up's own CPU per poll is printed and in the
    JSON.
  * Fetch requests of the consumer phase: Kafka's request counters are JMX only, so its requests are counted on the
    client (kafka-python's Fetcher builds them; the count wraps its _create_fetch_requests). kbroker's table keeps the
    broker's counter; the client's count is taken for both too (JSON "client_fetches") and the side-by-side table's
    "per Fetch" row divides both brokers' CPU by the client's count, so the two are counted alike.
  * The in-process handler phase and the metrics counters are kbroker's own: no Kafka figure.
  * Kafka's background: an idle JVM broker burns CPU of its own (GC, KRaft heartbeats and metadata no-ops, timers:
    tens of ms per second here, against ~0-2 for kbroker), which sits in every one of its figures and dominates the
    consumer phase (2 Fetches a second). The side-by-side table therefore adds, per Fetch, the consumer phase's CPU
    less the "no client" floor over the same seconds (noisy: the difference of two 10 ms-tick readings, can come
    out below 0), and prints the floor itself; the raw phase polls back to back, where the floor is a small share.
Every row of the side-by-side table is the same measure on both brokers (same client, same Fetch version, same
counting), so each gets a kbroker / Kafka ratio; the floor's row says how much of a ratio is background.
"""
import argparse
import datetime as _dt
import json
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kbroker.protocol.apis import APIS  # noqa: E402
from kbroker.protocol.headers import decode_response_header, encode_request_header  # noqa: E402
from kbroker.replica.fetch_session_client import FetchSessionClient  # noqa: E402
from peers import KafkaProc, PeerUnavailable, create_topics, make_broker  # noqa: E402
from tests.integration import harness  # noqa: E402
from tests.integration.harness import BrokerProcess, wait_until  # noqa: E402

MODES = ("sessions", "sessionless")
BROKERS = ("kbroker", "kafka")
TOPIC = "idle"
TICK = os.sysconf("SC_CLK_TCK")
FETCH_VERSION = 12


def broker_cpu(pid):
    """utime + stime (s) of process ``pid``, all threads."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def scrape(port, name, **labels):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


class Raw:
    """One connection speaking Fetch v12 (flexible) with our schemas; bytes counted both ways."""

    def __init__(self, broker):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self.sent = self.received = 0

    def request(self, key, version, body):
        api = APIS[key]
        self.corr += 1
        payload = bytes(encode_request_header(api.request_header_version(version), key, version, self.corr,
                                              "bench-fetch-sessions"))
        payload += api.encode_request(version, body).getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        self.sent += 4 + len(payload)
        (size,) = struct.unpack(">i", self._exact(4))
        frame = self._exact(size)
        self.received += 4 + size
        _corr, pos = decode_response_header(frame, api.response_header_version(version))
        return api.decode_response(version, frame, pos)

    def _exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def close(self):
        self.sock.close()


def start_broker(mode, partitions):
    port = harness.free_port()
    b = BrokerProcess(tempfile.mkdtemp(prefix="bench-fs-"), overrides={
        "max.incremental.fetch.session.cache.slots": 1000 if mode == "sessions" else 0,
        "metrics.http.port": port, "metrics.http.host": "127.0.0.1", "num.partitions": 1})
    b.metrics_port = port
    b.start()
    from confluent_kafka.admin import AdminClient, NewTopic
    from tests.integration.test_fetch_limits import wait_for_controller
    wait_for_controller(b)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)], operation_timeout=120, request_timeout=130)[TOPIC].result(140)
    wait_until(lambda: scrape(port, "kafka_server_replicamanager_leadercount") >= partitions, 120,
               message="partitions led")
    return b


class KafkaNoSessions(KafkaProc):
    """Apache Kafka with no incremental fetch session slot: its only switch for sessionless fetching (a full fetch is
    answered with session id 0, so the client sends every partition every time). Everything else as KafkaProc."""

    def extra_props(self):
        return dict(super().extra_props(), **{"max.incremental.fetch.session.cache.slots": 0})


def start_kafka(mode, partitions):
    """A started Apache Kafka (bench/peers.py) with one idle topic of ``partitions``, dressed like BrokerProcess for
    the phases (host, pid, close; metrics_port None: no metrics endpoint)."""
    b = make_broker("kafka")       # PeerUnavailable without java/mvn; "sessions": Kafka's default 1,000 slots
    if mode == "sessionless":
        b.stop()                   # not started: only drops its temp dir; the subclass gets its own
        b = KafkaNoSessions(b.classpath)
    try:
        b.start()
        b.host, b.pid, b.metrics_port, b.close = "127.0.0.1", b.proc.pid, None, b.stop
        create_topics(b, [TOPIC], partitions, timeout=120)
        wait_fetchable(b, partitions, 60)
    except BaseException:
        b.stop()
        raise
    return b


def wait_fetchable(b, partitions, timeout):
    """Until a sessionless Fetch is answered for every partition without error. Kafka's Metadata lists a leader as
    soon as the broker's metadata cache has the topic; its ReplicaManager makes the partitions leaders a moment
    later (NOT_LEADER_OR_FOLLOWER until then)."""
    c = Raw(b)
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for p in range(partitions)]}]}
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                check_full_answer(c.request(1, FETCH_VERSION, body), partitions)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()


def fetch_versions(b):
    """(min, max) Fetch version the broker's ApiVersions (v3) answer lists; ValueError if v12 is outside."""
    c = Raw(b)
    try:
        resp = c.request(18, 3, {"client_software_name": "bench-fetch-sessions", "client_software_version": "1"})
    finally:
        c.close()
    if resp.get("error_code"):
        raise ValueError("ApiVersions v3 answered error %s" % resp["error_code"])
    for k in resp["api_keys"]:
        if k["api_key"] == 1:
            lo, hi = k["min_version"], k["max_version"]
            if not lo <= FETCH_VERSION <= hi:
                raise ValueError("broker accepts Fetch v%d-v%d, not v%d" % (lo, hi, FETCH_VERSION))
            return lo, hi
    raise ValueError("broker lists no Fetch API")


def check_full_answer(resp, partitions):
    """A full (or sessionless) answer must name every partition, none in error: the measured polls are then real
    fetches of idle partitions, not error replies (cheaper on any broker)."""
    if resp.get("error_code"):
        raise RuntimeError("Fetch answered top-level error %s" % resp["error_code"])
    got = [p for t in resp["responses"] for p in t["partitions"]]
    bad = [(p["partition_index"], p["error_code"]) for p in got if p["error_code"]]
    if len(got) != partitions or bad:
        raise RuntimeError("full Fetch answer: %d of %d partitions, errors %s" % (len(got), partitions, bad[:5]))


def raw_phase(b, partitions, polls, warmup_s=0.0):
    c = Raw(b)
    session = FetchSessionClient()
    wanted = {(TOPIC, p): {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                           "partition_max_bytes": 1 << 20} for p in range(partitions)}

    def poll():
        sid, epoch, send, forgotten = session.build(wanted)
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
                "session_id": sid, "session_epoch": epoch, "rack_id": "",
                "topics": [{"topic": TOPIC, "partitions": list(send.values())}] if send else [],
                "forgotten_topics_data": [{"topic": t, "partitions": [p for _t, p in forgotten]}
                                          for t in {t for t, _p in forgotten}]}
        resp = c.request(1, FETCH_VERSION, body)
        session.handle_response(resp)
        return resp

    for i in range(20):          # warm-up: the full fetch, the session's first epochs
        resp = poll()
        if i == 0:
            check_full_answer(resp, partitions)     # client side only, outside the measured polls
    warm = None
    if warmup_s > 0:             # a JVM's JIT warm-up (module docstring); kbroker's path has warmup_s=0
        n, cpu0, t0 = 0, broker_cpu(b.pid), time.monotonic()
        while time.monotonic() - t0 < warmup_s:
            poll()
            n += 1
        warm = {"polls": n, "seconds": time.monotonic() - t0,
                "broker_cpu_us_per_poll": (broker_cpu(b.pid) - cpu0) / max(1, n) * 1e6}
    sent0, recv0 = c.sent, c.received
    full0, inc0 = session.full_requests, session.incremental_requests
    cpu0, t0 = broker_cpu(b.pid), time.monotonic()
    for _ in range(polls):
        poll()
    cpu1, t1 = broker_cpu(b.pid), time.monotonic()
    out = {"polls": polls, "broker_cpu_s": cpu1 - cpu0, "wall_s": t1 - t0,
           "broker_cpu_us_per_poll": (cpu1 - cpu0) / polls * 1e6, "polls_per_s": polls / (t1 - t0),
           "request_bytes_per_poll": (c.sent - sent0) / polls, "response_bytes_per_poll": (c.received - recv0) / polls,
           "incremental": session.incremental_requests,
           "measured_full": session.full_requests - full0, "measured_incremental": session.incremental_requests - inc0}
    if warm is not None:
        out["jvm_warmup"] = warm
    c.close()
    return out


def count_fetches(consumer):
    """[Fetch requests built, of which incremental (session epoch > 0)] by kafka-python's Fetcher from now on: the
    client's count of its Fetch requests (one per node and send; a broker's own counter where there is none)."""
    counts = [0, 0]
    fetcher = consumer._fetcher
    build = fetcher._create_fetch_requests

    def counting():
        requests = build()
        for request, _offsets in requests.values():
            counts[0] += 1
            counts[1] += (getattr(request, "session_epoch", 0) or 0) > 0
        return requests

    fetcher._create_fetch_requests = counting    # an instance attribute: found before the class's method
    return counts


def consumer_phase(b, partitions, seconds):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=60000)
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_end()
    consumer.poll(timeout_ms=2000)            # positions resolved, first Fetch sent
    consumer.poll(timeout_ms=1000)
    client = count_fetches(consumer)          # client side, costs the broker nothing
    metrics = b.metrics_port is not None      # kbroker's metrics endpoint; Kafka: the client's count only
    if metrics:
        fetches0 = scrape(b.metrics_port, "kafka_network_requestmetrics_requests_total", request="FetchConsumer")
    cpu0, t0 = broker_cpu(b.pid), time.monotonic()
    records = 0
    while time.monotonic() - t0 < seconds:
        records += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
    cpu1, t1 = broker_cpu(b.pid), time.monotonic()
    client_fetches, client_incremental = client
    if metrics:
        fetches = scrape(b.metrics_port, "kafka_network_requestmetrics_requests_total",
                         request="FetchConsumer") - fetches0
    else:
        fetches = client_fetches
    consumer.close()
    assert records == 0, "idle partitions returned records"
    return {"seconds": t1 - t0, "broker_cpu_s": cpu1 - cpu0, "broker_cpu_ms_per_s": (cpu1 - cpu0) / (t1 - t0) * 1e3,
            "fetches": fetches, "fetches_counted_by": "broker" if metrics else "client",
            "broker_cpu_us_per_fetch": (cpu1 - cpu0) / max(1, fetches) * 1e6,
            "client_fetches": client_fetches, "client_incremental_fetches": client_incremental,
            "client_fetches_per_s": client_fetches / (t1 - t0),
            "broker_cpu_us_per_client_fetch": (cpu1 - cpu0) / max(1, client_fetches) * 1e6}


def idle_phase(b, seconds):
    """Broker CPU per second with no client connected: its own background work."""
    cpu0, t0 = broker_cpu(b.pid), time.monotonic()
    time.sleep(seconds)
    cpu1, t1 = broker_cpu(b.pid), time.monotonic()
    return {"seconds": t1 - t0, "broker_cpu_s": cpu1 - cpu0, "broker_cpu_ms_per_s": (cpu1 - cpu0) / (t1 - t0) * 1e3}


def micro(partitions, polls):
    """{n: (us per idle incremental fetch, us per sessionless fetch)} through the handler in process."""
    import pathlib
    from tests.unit.test_fetch_sessions import Broker, request
    out = {}
    for n in (100, partitions):
        names = [("t", p) for p in range(n)]
        b = Broker(pathlib.Path(tempfile.mkdtemp(prefix="bench-fs-micro-")), names)
        full = [(t, p, 0) for t, p in names]
        sid = b.fetch(request(0, 0, full))["session_id"]
        t0 = time.process_time()
        for epoch in range(1, polls + 1):
            assert b.fetch(request(sid, epoch))["responses"] == []
        inc = (time.process_time() - t0) / polls * 1e6
        k = max(5, polls // n)
        t0 = time.process_time()
        for _ in range(k):
            b.fetch(request(0, -1, full))
        out[n] = (inc, (time.process_time() - t0) / k * 1e6)
        print("handler, %d partitions: %.1f us per idle incremental fetch, %.1f us per sessionless fetch"
              % (n, out[n][0], out[n][1]), flush=True)
    return out


def run_one(kind, mode, args, rnd):
    """One fresh broker of ``kind`` in ``mode``: its phases -> the round's record (PeerUnavailable when the peer
    cannot run here)."""
    if kind == "kbroker":
        b = start_broker(mode, args.partitions)
    else:
        b = start_kafka(mode, args.partitions)
    try:
        rec = {"load1_before": os.getloadavg()[0]}
        if kind != "kbroker":
            rec["fetch_versions"] = fetch_versions(b)
            if rnd == 0 and mode == MODES[0]:
                print("%s: ApiVersions lists Fetch v%d-v%d: v%d accepted" % ((kind,) + rec["fetch_versions"]
                                                                           + (FETCH_VERSION,)), flush=True)
        raw = raw_phase(b, args.partitions, args.polls, args.jvm_warmup if kind == "kafka" else 0.0)
        cons = consumer_phase(b, args.partitions, args.seconds) if args.seconds > 0 else None
        rec["load1_after"] = os.getloadavg()[0]
        idle = idle_phase(b, args.idle_seconds) if args.idle_seconds > 0 else None
        if cons is not None and idle is not None:
            # the consumer's own share: its phase's broker CPU less the no-client floor over the same seconds
            # (noisy: two 10 ms-tick differences; may come out below 0 where the floor dominates)
            net = cons["broker_cpu_s"] - idle["broker_cpu_ms_per_s"] / 1e3 * cons["seconds"]
            cons["broker_cpu_us_per_client_fetch_net"] = net / max(1, cons["client_fetches"]) * 1e6
        rec.update({"raw": raw, "consumer": cons, "no_client": idle, "load1": rec["load1_after"]})
        if raw["measured_full"] != (0 if mode == "sessions" else args.polls):
            print("WARNING: %s %s: %d of the %d measured polls were full fetches" % (
                kind, mode, raw["measured_full"], args.polls), flush=True)
        print("round %d %s%-11s raw %.1f us/poll (%d B/req, %d B/resp)%s%s%s  load %.1f" % (
            rnd + 1, "" if kind == "kbroker" else kind + " ", mode, raw["broker_cpu_us_per_poll"],
            raw["request_bytes_per_poll"], raw["response_bytes_per_poll"],
            "" if "jvm_warmup" not in raw else " after %d JIT warm-up polls at %.0f us/poll" % (
                raw["jvm_warmup"]["polls"], raw["jvm_warmup"]["broker_cpu_us_per_poll"]),
            "" if cons is None else "; consumer %.1f ms CPU/s, %.0f us/fetch over %d fetches%s" % (
                cons["broker_cpu_ms_per_s"], cons["broker_cpu_us_per_fetch"], cons["fetches"],
                "" if cons["fetches_counted_by"] == "broker" else " (client-counted)"),
            "" if idle is None else "; no client %.1f ms CPU/s" % idle["broker_cpu_ms_per_s"],
            os.getloadavg()[0]), flush=True)
        return rec
    finally:
        b.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--polls", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--micro-polls", type=int, default=5000)
    ap.add_argument("--brokers", default="kbroker",
                    help="comma list of %s (default kbroker); kafka = Apache Kafka 4.4 from bench/peers.py"
                         % ",".join(BROKERS))
    ap.add_argument("--idle-seconds", type=float, default=10.0,
                    help="after the phases: broker CPU with no client for this long (0: skip)")
    ap.add_argument("--jvm-warmup", type=float, default=5.0,
                    help="Kafka only: seconds of raw polls before the measured ones (JIT; module docstring)")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.brokers.split(",") if k.strip()]
    for k in kinds:
        if k not in BROKERS:
            ap.error("unknown broker %r (choose from %s)" % (k, ", ".join(BROKERS)))
    handler = micro(args.partitions, args.micro_polls) if args.micro_polls > 0 and "kbroker" in kinds else {}
    runs = {k: {m: [] for m in MODES} for k in kinds}
    skipped = {}
    loads = []
    # One round: every broker's two modes, in this order; the next round the reverse (with kbroker alone: round 1
    # sessions, sessionless; round 2 the reverse, as before --brokers).
    pairs = [(k, m) for k in kinds for m in MODES]
    for rnd in range(args.rounds):
        for kind, mode in (pairs if rnd % 2 == 0 else pairs[::-1]):
            if kind in skipped:
                continue
            try:
                rec = run_one(kind, mode, args, rnd)
            except PeerUnavailable as e:
                skipped[kind] = str(e)
                print("%s skipped: %s" % (kind, e), flush=True)
                continue
            loads += [rec["load1_before"], rec["load1_after"]]
            runs[kind][mode].append(rec)

    def med(kind, mode, phase, key):
        vals = [r[phase][key] for r in runs[kind][mode] if r[phase] is not None and key in r[phase]]
        return statistics.median(vals) if vals else float("nan")

    def ratio(a, b):
        return a / b if b and a == a and b == b else float("nan")

    rows = [("raw: broker CPU us per idle poll", "raw", "broker_cpu_us_per_poll"),
            ("raw: request bytes per poll", "raw", "request_bytes_per_poll"),
            ("raw: response bytes per poll", "raw", "response_bytes_per_poll"),
            ("consumer: broker CPU ms per second", "consumer", "broker_cpu_ms_per_s"),
            ("consumer: broker CPU us per Fetch", "consumer", "broker_cpu_us_per_fetch")]
    loads = loads or [os.getloadavg()[0]]
    print("\n%d idle partitions, %d rounds, load average %.1f-%.1f" % (args.partitions, args.rounds, min(loads),
                                                                      max(loads)))
    for kind in kinds:
        if kind in skipped:
            continue
        if len(kinds) > 1 or kind != "kbroker":
            print("\n%s%s" % ("kbroker" if kind == "kbroker" else "Apache Kafka 4.4 (JVM process CPU, all threads)",
                              "" if kind == "kbroker" else "; per Fetch: the client's count of its requests"))
        print("| figure | sessions | sessionless | sessionless / sessions |\n|---|---|---|---|")
        extra = [] if args.idle_seconds <= 0 else [("no client: broker CPU ms per second", "no_client",
                                                    "broker_cpu_ms_per_s")]
        for label, phase, key in rows + extra:
            a, s = med(kind, "sessions", phase, key), med(kind, "sessionless", phase, key)
            print("| %s | %.1f | %.1f | %.1fx |" % (label, a, s, ratio(s, a)))
    peers = [k for k in kinds if k != "kbroker" and k not in skipped]
    if "kbroker" in kinds and peers:
        side = [("raw: broker CPU us per idle poll", "raw", "broker_cpu_us_per_poll"),
                ("raw: request bytes per poll", "raw", "request_bytes_per_poll"),
                ("raw: response bytes per poll", "raw", "response_bytes_per_poll"),
                ("consumer: broker CPU ms per second", "consumer", "broker_cpu_ms_per_s"),
                ("consumer: broker CPU us per Fetch (client-counted, both)", "consumer",
                 "broker_cpu_us_per_client_fetch"),
                ("consumer: the same, net of the no-client floor", "consumer", "broker_cpu_us_per_client_fetch_net"),
                ("consumer: Fetch requests per second (client-counted)", "consumer", "client_fetches_per_s")]
        if args.idle_seconds > 0:
            side.append(("no client: broker CPU ms per second", "no_client", "broker_cpu_ms_per_s"))
        for peer in peers:
            print("\nside by side (medians): kbroker / %s" % peer)
            print("| figure | mode | kbroker | %s | kbroker / %s |\n|---|---|---|---|---|" % (peer, peer))
            for label, phase, key in side:
                for mode in MODES:
                    a, k = med("kbroker", mode, phase, key), med(peer, mode, phase, key)
                    # a net figure below 0 is the floor's noise (module docstring): no ratio of it
                    r = "n/a (below the floor: noise)" if a < 0 or k < 0 else "%.2fx" % ratio(a, k)
                    print("| %s | %s | %.1f | %.1f | %s |" % (label, mode, a, k, r))
            print("(CPU: utime+stime of each broker process, all threads -- the JVM's GC, JIT and KRaft controller "
                  "threads included; 'no client' is each broker's own background floor, part of the consumer rows. "
                  "Kafka's raw figure is after a %.0f s JIT warm-up.)" % args.jvm_warmup)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(HERE, "results", "fetch_sessions-%s.json" % stamp)
    with open(path, "w") as f:
        # "runs" keeps its old shape (kbroker's); every broker's in "runs_by_broker"
        json.dump({"args": vars(args), "handler": handler, "runs": runs.get("kbroker", {}),
                   "runs_by_broker": runs, "skipped": skipped, "load1": loads}, f, indent=1)
    print("results:", path)


if __name__ == "__main__":
    main()
