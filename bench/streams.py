#!/usr/bin/env python3
"""Kafka Streams in Python (issue 18): records/s and CPU per record of kbroker.streams for a stateless map/filter and
a windowed count, one and two instances, against one kbroker broker -- beside the same pipelines in Quix Streams
and Faust (faust-streaming) when they are installed in a throwaway venv.

    .venv/bin/python bench/streams.py                                   # kbroker.streams only
    .venv/bin/python bench/streams.py --others build/bench-streams/venv/bin/python   # + quix, faust
    .venv/bin/python bench/streams.py --impls kbroker --pipelines windowed --instances 2 --records 50000

The others' venv (never the project's .venv; build/ is gitignored)::

    python3 -m venv build/bench-streams/venv
    build/bench-streams/venv/bin/pip install quixstreams==3.28.1 faust-streaming==0.15.3

Method, for each pipeline x implementation x instance count (``--instances``), one at a time:
  * a fresh kbroker broker (bench/peers.py; group.initial.rebalance.delay.ms=3000 so that two instances started
    together join the same first generation, offsets/transactions topics with 1 partition), an input topic of
    ``--partitions`` partitions (4) holding ``--records`` records written before the application starts: key
    ``k<i % 1000>`` (1,000 keys), value ``<seq:08d>:<92 random ASCII letters>`` (101 bytes), timestamp
    base + seq ms (so the windowed count sees 1-second windows of ~1,000 records), and an empty output topic;
  * stateless: ``map_values(upper)`` then ``filter`` keeping seq % 4 != 0 (3/4 of the records reach the output);
    windowed: ``group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(1000)).count()`` to the output
    (kbroker.streams: Kafka's defaults, a RocksDB window store with a changelog, the 10 MB record cache: one
    update per key and window per commit); Quix: ``tumbling_window(1000).count().current()`` (a RocksDB store with
    a changelog, every update out); Faust: ``Table.tumbling(1.0)`` += 1 in an agent (a changelogged windowed
    table; Faust writes no per-update output: the changelog is its only write);
  * every implementation commits every second (commit.interval.ms 1000, Quix commit_interval 1.0, Faust
    broker_commit_every 1000 records / commit_interval 1.0), at_least_once, state in a temporary directory;
  * the measured window runs from the first record any instance processes (each worker prints ``FIRST`` then:
    start-up, topic creation and the group join are not counted) to the group's committed offsets reaching the
    input's end (polled every 0.1 s); CPU = utime+stime of the worker processes (all threads, /proc/<pid>/stat)
    from each one's first record to the end of the window;
    records/s = records / window; "CPU us/record" = total worker CPU / records. The broker's CPU over the window
    (from /proc) is reported beside it: the broker is one Python process with one event-loop core.
The machine's load average is recorded with every run: other processes share its 2 cores.
Results: a markdown table on stdout, JSON in bench/results/streams-<UTC time>.json (gitignored).
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
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
N_KEYS = 1000
WINDOW_MS = 1000
COMMIT_MS = 1000
BASE_TS = 1_700_000_000_000


def keep(value):
    """The stateless filter: keep records whose sequence number is not a multiple of 4."""
    return int(value[:8]) % 4 != 0


# ------------------------------------------------------------------------------------------------- workers
# Each runs in its own process (``--worker IMPL PIPELINE``), prints "FIRST" at its first record, and closes on
# SIGTERM.

class FirstMark:
    def __init__(self):
        self.done = False

    def __call__(self):
        if not self.done:
            self.done = True
            os.write(1, b"FIRST\n")          # fd 1: Faust redirects sys.stdout to its logger


def worker_kbroker(args):
    sys.path.insert(0, REPO)
    from kbroker.streams.dsl.builder import StreamsBuilder
    from kbroker.streams.dsl.options import Produced
    from kbroker.streams.dsl.windows import TimeWindows
    from kbroker.streams.keyvalue import KeyValue
    from kbroker.streams.runtime.kafka_streams import KafkaStreams
    from kbroker.streams.serdes import Serdes

    first = FirstMark()
    builder = StreamsBuilder()
    source = builder.stream(args.input)
    if args.pipeline == "stateless":
        (source.peek(lambda k, v: first())
         .map_values(lambda v: v.upper())
         .filter(lambda k, v: keep(v))
         .to(args.output))
    else:
        (source.peek(lambda k, v: first())
         .group_by_key()
         .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
         .count()
         .to_stream()
         .map(lambda wk, c: KeyValue("%s@%d" % (wk.key, wk.window.start), c))
         .to(args.output, Produced.with_(Serdes.String(), Serdes.Long())))
    string_serde = "org.apache.kafka.common.serialization.Serdes$StringSerde"
    streams = KafkaStreams(builder.build(), {
        "application.id": args.app_id, "bootstrap.servers": args.bootstrap, "state.dir": args.state_dir,
        "commit.interval.ms": COMMIT_MS, "default.key.serde": string_serde, "default.value.serde": string_serde,
        "auto.offset.reset": "earliest", **dict(kv.split("=", 1) for kv in args.kbroker_config)})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    streams.start()
    stop.wait()
    streams.close(30)


def worker_quix(args):
    from quixstreams import Application

    first = FirstMark()
    app = Application(broker_address=args.bootstrap, consumer_group=args.app_id, auto_offset_reset="earliest",
                      commit_interval=COMMIT_MS / 1000.0, state_dir=args.state_dir, auto_create_topics=True,
                      processing_guarantee="at-least-once", loglevel="WARNING")
    src = app.topic(args.input, key_deserializer="string", value_deserializer="string")
    if args.pipeline == "stateless":
        out = app.topic(args.output, key_serializer="string", value_serializer="string")
        sdf = app.dataframe(src)
        sdf = sdf.update(lambda v: first()).apply(lambda v: v.upper()).filter(keep)
    else:
        out = app.topic(args.output, key_serializer="string", value_serializer="json")
        sdf = app.dataframe(src)
        sdf = sdf.update(lambda v: first()).tumbling_window(duration_ms=WINDOW_MS).count().current()
    sdf.to_topic(out)
    app.run()                           # Quix stops gracefully on SIGTERM


def worker_faust(args):
    import faust

    first = FirstMark()
    app = faust.App(args.app_id, broker="kafka://" + args.bootstrap, store="memory://", web_enabled=False,
                    topic_partitions=args.partitions, broker_commit_every=1000,
                    broker_commit_interval=COMMIT_MS / 1000.0, consumer_auto_offset_reset="earliest",
                    datadir=args.state_dir, topic_replication_factor=1)
    src = app.topic(args.input, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    if args.pipeline == "stateless":
        out = app.topic(args.output, key_serializer="raw", value_serializer="raw")

        @app.agent(src)
        async def process(stream):
            async for key, value in stream.items():
                first()
                v = value.decode().upper()
                if keep(v):
                    await out.send(key=key, value=v.encode())
    else:
        table = app.Table("counts", default=int, partitions=args.partitions).tumbling(WINDOW_MS / 1000.0,
                                                                                    expires=3600)

        @app.agent(src)
        async def process(stream):
            async for key, value in stream.items():
                first()
                table[key] += 1

    sys.argv = [sys.argv[0], "worker", "-l", "warn", "--without-web"]
    app.main()


WORKERS = {"kbroker": worker_kbroker, "quix": worker_quix, "faust": worker_faust}


# ------------------------------------------------------------------------------------------------- driver

def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def produce_input(conf, topic, records):
    from confluent_kafka import Producer

    p = Producer(dict(conf, **{"linger.ms": 20, "batch.num.messages": 10000, "compression.type": "none"}))
    rnd = random.Random(18)
    letters = string.ascii_letters
    for seq in range(records):
        value = "%08d:%s" % (seq, "".join(rnd.choice(letters) for _ in range(92)))
        while True:
            try:
                p.produce(topic, key=b"k%d" % (seq % N_KEYS), value=value.encode(), timestamp=BASE_TS + seq)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


class Worker:
    def __init__(self, python, impl, pipeline, bootstrap, app_id, topics, partitions, tmp, index, extra=()):
        self.state_dir = os.path.join(tmp, "state-%s-%d" % (impl, index))
        self.log = open(os.path.join(tmp, "worker-%s-%s-%d.log" % (impl, pipeline, index)), "wb")
        env = dict(os.environ, PYTHONPATH=REPO)
        argv = [python, os.path.abspath(__file__), "--worker", impl, pipeline, "--bootstrap", bootstrap,
                "--app-id", app_id, "--input", topics[0], "--output", topics[1], "--state-dir", self.state_dir,
                "--partitions", str(partitions)] + ["--kbroker-config=" + kv for kv in extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=tmp)
        self.first_at = self.first_cpu = self.end_cpu = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            if raw.decode().strip() == "FIRST":
                # The process's CPU read here, not the worker's own figure: Quix and Faust take SIGTERM over.
                self.first_at, self.first_cpu = time.monotonic(), proc_cpu(self.proc.pid)

    def mark_end(self):
        self.end_cpu = proc_cpu(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def run_one(python, impl, pipeline, instances, records, partitions, extra=()):
    sys.path.insert(0, HERE)
    sys.path.insert(0, REPO)
    from confluent_kafka.admin import AdminClient, NewTopic
    from peers import make_broker

    from kbroker.client.admin import AdminClient as KAdmin

    broker = make_broker("kbroker", overrides={
        "group.initial.rebalance.delay.ms": 3000, "offsets.topic.num.partitions": 1,
        "offsets.topic.replication.factor": 1, "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
        "default.replication.factor": 1, "num.partitions": partitions})
    tmp = tempfile.mkdtemp(prefix="kbench-streams-")
    workers = []
    ok = False
    try:
        broker.start()
        app_id = "bench-%s-%s" % (impl, pipeline)
        topics = ("bench-in", "bench-out")
        admin = AdminClient(broker.conf())
        for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
            fut.result(30)
        produce_input(broker.conf(), topics[0], records)
        load = load_average()
        workers = [Worker(python, impl, pipeline, broker.bootstrap, app_id, topics, partitions, tmp, i,
                          extra if impl == "kbroker" else ())
                   for i in range(instances)]
        ends = {(topics[0], p): None for p in range(partitions)}
        with KAdmin(broker.bootstrap) as kadmin:
            for (t, p), (off, _) in kadmin.partition_offsets(list(ends), -1).items():
                ends[(t, p)] = off
            assert sum(ends.values()) == records, ends
            broker_cpu0 = None
            deadline = time.monotonic() + 120 + records / 1000
            while True:
                if broker_cpu0 is None and any(w.first_at for w in workers):
                    broker_cpu0 = proc_cpu(broker.proc.pid)
                try:
                    committed = kadmin.list_group_offsets(app_id)
                except Exception:           # the group's coordinator not loaded yet
                    committed = {}
                if all(committed.get(tp, 0) >= end for tp, end in ends.items()):
                    done_at = time.monotonic()
                    break
                dead = [w for w in workers if w.proc.poll() is not None]
                if dead or time.monotonic() > deadline:
                    raise RuntimeError("%s %s: worker exited %s or timed out; committed %s of %s (logs in %s)"
                                       % (impl, pipeline, [w.proc.returncode for w in dead], committed, ends, tmp))
                time.sleep(0.1)
            broker_cpu = proc_cpu(broker.proc.pid) - (broker_cpu0 or proc_cpu(broker.proc.pid))
            for w in workers:
                w.mark_end()
        start = min(w.first_at for w in workers if w.first_at)
        for w in workers:
            w.stop()
        cpu = sum(w.end_cpu - w.first_cpu for w in workers if w.first_cpu is not None and w.end_cpu is not None)
        window = done_at - start
        ok = True
        return {"impl": impl, "pipeline": pipeline, "instances": instances, "records": records,
                "partitions": partitions, "window_s": round(window, 3), "records_per_s": round(records / window),
                "worker_cpu_s": round(cpu, 3), "cpu_us_per_record": round(cpu / records * 1e6, 1),
                "broker_cpu_s": round(broker_cpu, 3), "load_avg": load,
                "workers_processing": sum(1 for w in workers if w.first_cpu is not None)}
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
        broker.stop()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "PIPELINE"), help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--app-id", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--output", help=argparse.SUPPRESS)
    ap.add_argument("--state-dir", help=argparse.SUPPRESS)
    ap.add_argument("--kbroker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra Streams config for kbroker.streams' workers (repeatable)")
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--instances", default="1,2", help="comma-separated instance counts")
    ap.add_argument("--pipelines", default="stateless,windowed")
    ap.add_argument("--impls", default=None, help="kbroker,quix,faust (default: kbroker, + the others with --others)")
    ap.add_argument("--others", default=None, metavar="PYTHON",
                    help="the interpreter of the venv holding quixstreams and faust-streaming")
    args = ap.parse_args()
    if args.worker:
        args.pipeline = args.worker[1]
        return WORKERS[args.worker[0]](args)
    impls = (args.impls or ("kbroker,quix,faust" if args.others else "kbroker")).split(",")
    results = []
    for pipeline in args.pipelines.split(","):
        for impl in impls:
            python = sys.executable if impl == "kbroker" else args.others and os.path.abspath(args.others)
            if python is None:
                raise SystemExit("--others PYTHON is needed for %s" % impl)
            for n in (int(x) for x in args.instances.split(",")):
                try:
                    r = run_one(python, impl, pipeline, n, args.records, args.partitions, args.kbroker_config)
                except Exception as exc:            # one failed run (e.g. a peer that cannot run) is reported
                    r = {"impl": impl, "pipeline": pipeline, "instances": n, "error": str(exc)[:300]}
                print(json.dumps(r), file=sys.stderr, flush=True)
                results.append(r)
    print("| pipeline | implementation | instances | records/s | CPU us/record | worker CPU s | broker CPU s | "
          "window s | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print("| %s | %s | %d | error: %s | | | | | |" % (r["pipeline"], r["impl"], r["instances"], r["error"]))
            continue
        print("| %s | %s | %d | %d | %.1f | %.2f | %.2f | %.2f | %s |" % (
            r["pipeline"], r["impl"], r["instances"], r["records_per_s"], r["cpu_us_per_record"], r["worker_cpu_s"],
            r["broker_cpu_s"], r["window_s"], r["load_avg"]))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    with open(os.path.join(HERE, "results", "streams-%s.json" % stamp), "w") as f:
        json.dump({"machine": machine_info(), "results": results}, f, indent=1)


def machine_info():
    sys.path.insert(0, HERE)
    from bench_clients import machine
    return machine()


if __name__ == "__main__":
    sys.exit(main())
