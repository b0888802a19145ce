#!/usr/bin/env python3
"""Kafka Connect throughput (issue 17): records/s through FileStreamSource -> topic -> FileStreamSink and the
worker's CPU per MB, kbroker-connect beside Apache Kafka's own Connect runtime, both on the same kbroker broker.

    .venv/bin/python bench/connect.py                                # both runtimes, 100 B and 1 KB lines
    .venv/bin/python bench/connect.py --runtimes kbroker --sizes 100 --records 50000

For each line size (``--sizes``, bytes per line including its "\\n") and runtime (``--runtimes``: ``kafka`` =
Kafka 4.3.1's ConnectDistributed from tests/kafka_connect, full JIT, -Xmx1g; ``kbroker`` = ``kbroker-connect
distributed``), one at a time on one kbroker broker (bench/peers.py; group.initial.rebalance.delay.ms=0):
  * a fresh worker (its own group and internal topics), converters ``--converter`` (``string``: Kafka's
    StringConverter, the runtime's own cost; ``json``: JsonConverter with schemas, the quickstart's), offsets
    flushed every second, each runtime's own producer defaults (Kafka's worker: acks=all, linger.ms=5,
    max.in.flight.requests.per.connection=1, no idempotence; kbroker-connect: acks=all, idempotent, librdkafka's
    5 in flight) unless ``--kafka-producer KEY=VALUE`` changes Kafka's;
  * a source file of ``--records`` lines of random printable ASCII written before the connectors exist, a topic of
    one partition, then over REST FileStreamSink (tasks.max 1) -- waited until its consumer group is Stable with
    the partition assigned -- and FileStreamSource (tasks.max 1, batch.size 2000: Kafka's default);
  * the measured window runs from the first bytes seen in the sink file (so JVM/interpreter start-up, task start
    and the sink's group join are not counted) to the sink file holding every line (its size equal to the
    source's); records and bytes are those that reached the sink inside the window;
  * worker CPU = utime+stime of the whole worker process (all threads: JVM compiler and GC included) from
    /proc/<pid>/stat over the window; "CPU s per MB" divides it by the payload MB (1e6 bytes) moved inside the
    window -- each MB is read from the source file, produced, consumed and written to the sink by the one worker;
    the broker's CPU over the same window is reported beside it (both runtimes share one kbroker broker, which can
    be what limits them: "broker cores" near 1.0 means its event loop had a whole core); the worker's four busiest
    threads (/proc/<pid>/task, cores over the window) are in the JSON lines.
The machine's load average (``uptime``) is recorded before every run: other processes share its 2 cores.
Results: a markdown table on stdout, JSON in bench/results/connect-<UTC time>.json (gitignored).
"""
import argparse
import datetime as _dt
import json
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench_clients import machine  # noqa: E402
from peers import free_port, make_broker  # noqa: E402
from tests.kafka_connect import KafkaConnectWorker, resolve_classpath, rest  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
CONVERTERS = {"string": "org.apache.kafka.connect.storage.StringConverter",
              "json": "org.apache.kafka.connect.json.JsonConverter"}
SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
# Full JIT (C2) and a heap that never limits 50 MB in flight: the JVM's steady state, not its start-up.
KAFKA_JVM_FLAGS = ("-Xms256m", "-Xmx1g", "-Djava.awt.headless=true")
RUN_TIMEOUT = 600.0


def cpu_seconds(pid):
    """utime+stime of process ``pid`` (all its threads), seconds."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def threads_cpu(pid):
    """{thread id: (name, utime+stime seconds)} of every thread of ``pid`` (/proc/<pid>/task): Python threads show
    as the interpreter's name, librdkafka's as rdk:*, the JVM's by their Java names (first 15 characters)."""
    out = {}
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            with open("%s/%s/stat" % (base, tid)) as f:
                stat = f.read()
        except OSError:
            continue                      # the thread ended between listdir and open
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def busiest(before, after, seconds, top=4):
    """The ``top`` threads by CPU over the window: [(name, cores)]."""
    used = [(name, cpu - before.get(tid, (name, 0.0))[1]) for tid, (name, cpu) in after.items()]
    return [(name, round(cpu / seconds, 2)) for name, cpu in sorted(used, key=lambda x: -x[1])[:top]]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def write_source(path, records, size, seed=17):
    """``records`` lines of ``size`` bytes each ("\\n" included), random printable ASCII without spaces."""
    rng = random.Random(seed)
    alphabet = (string.ascii_letters + string.digits).encode()
    block = bytes(rng.choice(alphabet) for _ in range(size * 64))
    with open(path, "wb") as f:
        for i in range(records):
            start = (i * 7) % (len(block) - size)
            f.write(block[start:start + size - 1] + b"\n")
    return records * size


def worker_props(bootstrap, prefix, port, converter):
    props = {
        "bootstrap.servers": bootstrap, "group.id": prefix + "-connect",
        "key.converter": CONVERTERS[converter], "value.converter": CONVERTERS[converter],
        "offset.storage.topic": prefix + "-offsets", "config.storage.topic": prefix + "-configs",
        "status.storage.topic": prefix + "-status", "offset.storage.replication.factor": 1,
        "config.storage.replication.factor": 1, "status.storage.replication.factor": 1,
        "offset.flush.interval.ms": 1000, "listeners": "http://127.0.0.1:%d" % port,
    }
    return props


class KbrokerWorker:
    """``kbroker-connect distributed`` as a process (the console script of this interpreter's environment)."""

    def __init__(self, tmpdir, props):
        self.dir = tmpdir
        self.props = props
        self.url = props["listeners"].rstrip("/") + "/"
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid

    def start(self, timeout=60.0):
        path = os.path.join(self.dir, "worker.properties")
        with open(path, "w") as f:
            f.write("".join("%s=%s\n" % kv for kv in self.props.items()))
        script = os.path.join(os.path.dirname(sys.executable), "kbroker-connect")
        cmd = [script] if os.path.exists(script) else [sys.executable, "-m", "kbroker.connect.cli"]
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log = open(os.path.join(self.dir, "worker.log"), "wb")
        self.proc = subprocess.Popen(cmd + ["distributed", path], stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd=self.dir, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("kbroker-connect exited with %s:\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                if rest(self.url, timeout=2.0)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("kbroker-connect did not answer GET / in %gs:\n%s" % (timeout, self.log_tail()))

    def stop(self, timeout=30.0):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()

    def log_tail(self, lines=40):
        with open(os.path.join(self.dir, "worker.log"), "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")


def create(url, name, config, timeout=60.0):
    """POST /connectors, asked again while the herder answers 409 (not joined yet / rebalancing)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = rest(url, "POST", "/connectors", {"name": name, "config": config})
        if status == 201:
            return
        if status != 409 or time.monotonic() > deadline:
            raise RuntimeError("POST /connectors %s -> %s %s" % (name, status, body))
        time.sleep(0.2)


def wait_assigned(admin, group, topic, timeout=60.0):
    """Until consumer group ``group`` is Stable with a member assigned partition 0 of ``topic``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            g = admin.describe_consumer_groups([group])[group].result(10)
            if str(g.state).endswith("STABLE") and any(
                    tp.topic == topic for m in g.members for tp in m.assignment.topic_partitions):
                return
        except KafkaException:
            pass
        time.sleep(0.1)
    raise RuntimeError("the sink's group %s got no assignment of %s in %gs" % (group, topic, timeout))


def run_one(broker, runtime, size, records, converter, jars, kafka_producer=()):
    tmp = tempfile.mkdtemp(prefix="kbench-connect-%s-" % runtime)
    prefix = "bench-%s-%d-%d" % (runtime, size, int(time.time() * 1000) % 10 ** 8)
    src, out = os.path.join(tmp, "in.txt"), os.path.join(tmp, "out.txt")
    total = write_source(src, records, size)
    props = worker_props(broker.bootstrap, prefix, free_port(), converter)
    if runtime == "kafka":
        props.update(("producer." + k, v) for k, v in kafka_producer)
        worker = KafkaConnectWorker(tmp, props, jars, jvm_flags=KAFKA_JVM_FLAGS, log_level="warn")
    else:
        worker = KbrokerWorker(tmp, props)
    load = loadavg()
    worker.start()
    try:
        topic = prefix + "-data"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        # The sink first, running and assigned, then the source: source and sink then work at the same time
        # through the window (a sink still joining its group would find the topic already filled and measure
        # only its own drain).
        create(worker.url, "sink", {"connector.class": SINK_CLASS, "tasks.max": "1", "file": out, "topics": topic})
        wait_assigned(admin, "connect-sink", topic)
        create(worker.url, "src", {"connector.class": SOURCE_CLASS, "tasks.max": "1", "file": src, "topic": topic})
        deadline = time.monotonic() + RUN_TIMEOUT
        first = None
        while True:
            now = time.monotonic()
            done = os.path.getsize(out) if os.path.exists(out) else 0
            if first is None and done > 0:
                first = (now, done, cpu_seconds(worker.pid), broker.cpu_seconds(), threads_cpu(worker.pid))
            if done >= total:
                end = (now, done, cpu_seconds(worker.pid), broker.cpu_seconds(), threads_cpu(worker.pid))
                break
            if now > deadline:
                raise RuntimeError("%s: sink has %d of %d bytes after %gs:\n%s"
                                   % (runtime, done, total, RUN_TIMEOUT, worker.log_tail()))
            if worker.proc.poll() is not None:
                raise RuntimeError("%s worker exited:\n%s" % (runtime, worker.log_tail()))
            time.sleep(0.02)
        with open(src, "rb") as a, open(out, "rb") as b:
            identical = a.read() == b.read()
        seconds = end[0] - first[0]
        moved = end[1] - first[1]
        cpu = end[2] - first[2]
        broker_cpu = end[3] - first[3]
        return {"runtime": runtime, "size": size, "records": records, "converter": converter,
                "window_s": round(seconds, 3), "records_per_s": round(moved / size / seconds),
                "mb_per_s": round(moved / 1e6 / seconds, 2), "worker_cpu_s": round(cpu, 2),
                "cpu_s_per_mb": round(cpu / (moved / 1e6), 4), "cores": round(cpu / seconds, 2),
                "broker_cpu_s_per_mb": round(broker_cpu / (moved / 1e6), 4),
                "broker_cores": round(broker_cpu / seconds, 2),
                "busiest_threads": busiest(first[4], end[4], seconds),
                "sink_equals_source": identical, "loadavg_before": load}
    finally:
        worker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def table(rows):
    out = ["| runtime | line | converter | records | window s | records/s | MB/s | worker CPU s | CPU s per MB "
           "| cores | broker CPU s per MB | broker cores | sink == source | load before |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %d B | %s | %d | %.2f | %d | %.2f | %.2f | %.4f | %.2f | %.4f | %.2f | %s | %s |" % (
            r["runtime"], r["size"], r["converter"], r["records"], r["window_s"], r["records_per_s"], r["mb_per_s"],
            r["worker_cpu_s"], r["cpu_s_per_mb"], r["cores"], r["broker_cpu_s_per_mb"], r["broker_cores"],
            r["sink_equals_source"], r["loadavg_before"]))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runtimes", default="kbroker,kafka")
    ap.add_argument("--sizes", default="100,1024", help="bytes per line, newline included")
    ap.add_argument("--records", type=int, default=0,
                    help="lines per run (default: 200,000 of 100 B, 50,000 of 1 KB: 20 and 51 MB)")
    ap.add_argument("--converter", choices=sorted(CONVERTERS), default="string")
    ap.add_argument("--kafka-producer", action="append", default=[], metavar="KEY=VALUE",
                    help="a producer key for Kafka's worker (written as producer.KEY), e.g. "
                         "max.in.flight.requests.per.connection=5 (its worker default is 1)")
    args = ap.parse_args(argv)
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    jars = resolve_classpath(offline=True) if "kafka" in runtimes else None
    broker = make_broker("kbroker", overrides={"group.initial.rebalance.delay.ms": 0,
                                                "offsets.topic.num.partitions": 1,
                                                "offsets.topic.replication.factor": 1})
    broker.start()
    rows = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            records = args.records or (200000 if size <= 512 else 50000)
            for runtime in runtimes:
                row = run_one(broker, runtime, size, records, args.converter, jars,
                              [kv.split("=", 1) for kv in args.kafka_producer])
                if runtime == "kafka" and args.kafka_producer:
                    row["kafka_producer"] = args.kafka_producer
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        broker.stop()
    print()
    print(table(rows))
    info = machine()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(HERE, "results", "connect-%s.json" % stamp)
    with open(path, "w") as f:
        json.dump({"machine": info, "args": vars(args), "rows": rows}, f, indent=1)
    print("\nmachine: %s; results: %s" % (json.dumps(info), path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
