#!/usr/bin/env python3
"""Broker CPU of a consumer polling 1,000 idle partitions, with incremental fetch sessions (KIP-227) and without
(``max.incremental.fetch.session.cache.slots=0``: every Fetch names and is answered for every partition) -- issue 15
target 3: O(changed partitions) per poll, not O(partitions).

    .venv/bin/python bench/fetch_sessions.py --partitions 1000 --polls 2000 --seconds 20 --rounds 2

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
In-process first (``--micro-polls``, no broker, no socket): the Fetch handler alone over real Logs and Partitions
(tests/unit/test_fetch_sessions.py's fixtures), process CPU per idle incremental fetch and per sessionless fetch at
100 and ``--partitions`` partitions: the handler's share, free of the request codec and the connection.
A mode's figures are medians over the rounds; the table shows sessionless / sessions. ``perf stat`` instruction
counts are not available on this machine (perf reports instructions <not supported>), hence CPU seconds; the load
average is printed next to the figures. JSON with every round in ``bench/results/fetch_sessions-<UTC>.json``.
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

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kbroker.protocol.apis import APIS  # noqa: E402
from kbroker.protocol.headers import decode_response_header, encode_request_header  # noqa: E402
from kbroker.replica.fetch_session_client import FetchSessionClient  # noqa: E402
from tests.integration import harness  # noqa: E402
from tests.integration.harness import BrokerProcess, wait_until  # noqa: E402

MODES = ("sessions", "sessionless")
TOPIC = "idle"
TICK = os.sysconf("SC_CLK_TCK")


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


def raw_phase(b, partitions, polls):
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
        resp = c.request(1, 12, body)
        session.handle_response(resp)
        return resp

    for _ in range(20):          # warm-up: the full fetch, the session's first epochs
        poll()
    sent0, recv0 = c.sent, c.received
    cpu0, t0 = broker_cpu(b.pid), time.monotonic()
    for _ in range(polls):
        poll()
    cpu1, t1 = broker_cpu(b.pid), time.monotonic()
    out = {"polls": polls, "broker_cpu_s": cpu1 - cpu0, "wall_s": t1 - t0,
           "broker_cpu_us_per_poll": (cpu1 - cpu0) / polls * 1e6, "polls_per_s": polls / (t1 - t0),
           "request_bytes_per_poll": (c.sent - sent0) / polls, "response_bytes_per_poll": (c.received - recv0) / polls,
           "incremental": session.incremental_requests}
    c.close()
    return out


def consumer_phase(b, partitions, seconds):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=60000)
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_end()
    consumer.poll(timeout_ms=2000)            # positions resolved, first Fetch sent
    consumer.poll(timeout_ms=1000)
    fetches0 = scrape(b.metrics_port, "kafka_network_requestmetrics_requests_total", request="FetchConsumer")
    cpu0, t0 = broker_cpu(b.pid), time.monotonic()
    records = 0
    while time.monotonic() - t0 < seconds:
        records += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
    cpu1, t1 = broker_cpu(b.pid), time.monotonic()
    fetches = scrape(b.metrics_port, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") - fetches0
    consumer.close()
    assert records == 0, "idle partitions returned records"
    return {"seconds": t1 - t0, "broker_cpu_s": cpu1 - cpu0, "broker_cpu_ms_per_s": (cpu1 - cpu0) / (t1 - t0) * 1e3,
            "fetches": fetches, "broker_cpu_us_per_fetch": (cpu1 - cpu0) / max(1, fetches) * 1e6}


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--polls", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--micro-polls", type=int, default=5000)
    args = ap.parse_args()
    handler = micro(args.partitions, args.micro_polls) if args.micro_polls > 0 else {}
    runs = {m: [] for m in MODES}
    loads = []
    for rnd in range(args.rounds):
        order = MODES if rnd % 2 == 0 else MODES[::-1]
        for mode in order:
            b = start_broker(mode, args.partitions)
            try:
                loads.append(os.getloadavg()[0])
                raw = raw_phase(b, args.partitions, args.polls)
                cons = consumer_phase(b, args.partitions, args.seconds) if args.seconds > 0 else None
                loads.append(os.getloadavg()[0])
                runs[mode].append({"raw": raw, "consumer": cons, "load1": os.getloadavg()[0]})
                print("round %d %-11s raw %.1f us/poll (%d B/req, %d B/resp)%s  load %.1f" % (
                    rnd + 1, mode, raw["broker_cpu_us_per_poll"], raw["request_bytes_per_poll"],
                    raw["response_bytes_per_poll"],
                    "" if cons is None else "; consumer %.1f ms CPU/s, %.0f us/fetch over %d fetches" % (
                        cons["broker_cpu_ms_per_s"], cons["broker_cpu_us_per_fetch"], cons["fetches"]),
                    os.getloadavg()[0]), flush=True)
            finally:
                b.close()

    def med(mode, phase, key):
        vals = [r[phase][key] for r in runs[mode] if r[phase] is not None]
        return statistics.median(vals) if vals else float("nan")

    rows = [("raw: broker CPU us per idle poll", "raw", "broker_cpu_us_per_poll"),
            ("raw: request bytes per poll", "raw", "request_bytes_per_poll"),
            ("raw: response bytes per poll", "raw", "response_bytes_per_poll"),
            ("consumer: broker CPU ms per second", "consumer", "broker_cpu_ms_per_s"),
            ("consumer: broker CPU us per Fetch", "consumer", "broker_cpu_us_per_fetch")]
    loads = loads or [os.getloadavg()[0]]
    print("\n%d idle partitions, %d rounds, load average %.1f-%.1f" % (args.partitions, args.rounds, min(loads),
                                                                      max(loads)))
    print("| figure | sessions | sessionless | sessionless / sessions |\n|---|---|---|---|")
    for label, phase, key in rows:
        a, s = med("sessions", phase, key), med("sessionless", phase, key)
        print("| %s | %.1f | %.1f | %.1fx |" % (label, a, s, s / a if a else float("nan")))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(HERE, "results", "fetch_sessions-%s.json" % stamp)
    with open(path, "w") as f:
        json.dump({"args": vars(args), "handler": handler, "runs": runs, "load1": loads}, f, indent=1)
    print("results:", path)


if __name__ == "__main__":
    main()
