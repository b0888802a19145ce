#!/usr/bin/env python3
"""A kbroker.streams aggregation application for the runtime tests (issue 18), run as its own process.

    python -m tests.integration.streams_app --bootstrap H:P --application-id A --input IN --output OUT \
        --state-dir D [--guarantee at_least_once|exactly_once_v2] [--standby N] [--commit-interval-ms 300] \
        [--server host:port] [--session-timeout-ms 3000]

Topology (Processor API, one sub-topology, so one task per input partition):

    source "src" (IN: key String, value Long = 8-byte big-endian)
      -> processor "agg": totals[key] = (count + 1, sum + value), put into the persistent, change-logged,
                          uncached key-value store "totals" (changelog "<A>-totals-changelog"), and forwards
                          (key, "<count>,<sum>")
      -> sink "out" (OUT: String key, String value)

The final value per key in OUT (the last record of that key) is the aggregate of every input record of that key
processed; a record processed twice (at_least_once after a crash) counts twice.

Crash on request: SIGUSR1 arms the crash; the ``--crash-after-armed``-th record ``agg`` processes after it (after
its put and forward) makes the process flush its producer (every changelog and output record written so far is
acknowledged), print ``crash`` with ``uncommitted`` = the records this process's thread processed since its last
commit (the current one included), and SIGKILL itself -- kill -9 at a known point: under at_least_once exactly
those records are processed again by the next owner (their state updates already in the changelog), under
exactly_once_v2 their transaction is never committed.

Output: one JSON object a line on stdout (flushed): ``started`` (process id, pid), ``state`` (new, old),
``restored`` (task, store, changelog, start/end offsets, records, ms -- one per restored store), ``standby``
(tasks hosted as standby after a placement, with the records replayed so far), ``committed`` (every 10th commit:
processed so far), ``crash``, ``done``. SIGTERM closes the application (commit, checkpoints, leave the group)
and exits 0.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time

from kbroker.streams.processor import Processor
from kbroker.streams.runtime import KafkaStreams
from kbroker.streams.serdes import Serdes
from kbroker.streams.state.stores import Stores
from kbroker.streams.topology import Topology

STORE = "totals"


def emit(event: str, **fields) -> None:
    fields["event"] = event
    fields["t"] = round(time.time(), 3)
    sys.stdout.write(json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


class Crash:
    armed = False
    after = 1                     # records to process once armed before crashing (--crash-after-armed)
    processed = 0                 # records processed by agg in this process
    at_last_commit = 0


class Aggregate(Processor):
    def init(self, context):
        self.context = context
        self.store = context.get_state_store(STORE)

    def process(self, record):
        old = self.store.get(record.key)
        count, total = (0, 0) if old is None else map(int, old.split(","))
        new = "%d,%d" % (count + 1, total + record.value)
        self.store.put(record.key, new)
        self.context.forward(record.with_value(new))
        Crash.processed += 1
        if Crash.armed:
            Crash.after -= 1
            if Crash.after <= 0:
                crash_now()


def crash_now():
    thread = threading.current_thread()
    collector = getattr(thread, "collector", None)
    left = collector.producer.flush(30) if collector is not None else -1
    emit("crash", uncommitted=Crash.processed - Crash.at_last_commit, processed=Crash.processed, undelivered=left,
         delivery_error=str(collector.failed) if collector is not None and collector.failed else None)
    os.kill(os.getpid(), signal.SIGKILL)


def build_topology(input_topic: str, output_topic: str) -> Topology:
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store(STORE), Serdes.String(),
                                             Serdes.String()).with_caching_disabled()
    return (Topology()
            .add_source("src", input_topic, key_deserializer=Serdes.String(), value_deserializer=Serdes.Long())
            .add_processor("agg", Aggregate, "src")
            .add_state_store(builder, "agg")
            .add_sink("out", output_topic, "agg", key_serializer=Serdes.String(), value_serializer=Serdes.String()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--application-id", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--guarantee", default="at_least_once")
    ap.add_argument("--standby", type=int, default=0)
    ap.add_argument("--commit-interval-ms", type=int, default=300)
    ap.add_argument("--server", default="")
    ap.add_argument("--session-timeout-ms", type=int, default=3000)
    ap.add_argument("--crash-after-armed", type=int, default=1,
                    help="records processed after SIGUSR1 before the crash (the last one included)")
    args = ap.parse_args(argv)
    Crash.after = args.crash_after_armed
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    config = {
        "application.id": args.application_id, "bootstrap.servers": args.bootstrap,
        "processing.guarantee": args.guarantee, "num.standby.replicas": args.standby,
        "commit.interval.ms": args.commit_interval_ms, "state.dir": args.state_dir,
        "replication.factor": 1, "application.server": args.server,
        "consumer.session.timeout.ms": args.session_timeout_ms, "consumer.heartbeat.interval.ms": 500,
        "consumer.topic.metadata.refresh.interval.ms": 1000,
        # a killed instance's open transaction is aborted by the coordinator after this (Streams' default 10 s)
        "producer.transaction.timeout.ms": 5000,
    }
    streams = KafkaStreams(build_topology(args.input, args.output), config)
    streams.set_state_listener(lambda new, old: emit("state", new=new, old=old))

    on_restored, on_committed = streams.on_restored, streams.on_committed

    def restored(thread, tid, store, changelog, start, end, n, ms):
        on_restored(thread, tid, store, changelog, start, end, n, ms)
        emit("restored", task=str(tid), store=store, changelog=changelog, partition=tid.partition, start=start,
             end=end, records=n, ms=ms)

    commits = [0]

    def committed(thread, offsets):
        on_committed(thread, offsets)
        Crash.at_last_commit = Crash.processed
        commits[0] += 1
        if commits[0] % 10 == 0:
            emit("committed", processed=Crash.processed, commits=commits[0])

    streams.on_restored, streams.on_committed = restored, committed
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    signal.signal(signal.SIGUSR1, lambda s, f: setattr(Crash, "armed", True))
    streams.start()
    emit("started", process_id=streams.process_id, pid=os.getpid())
    reported = None
    while not stop.wait(0.2):
        if streams.state == "ERROR":
            emit("done", state=streams.state, processed=Crash.processed)
            return 3
        if streams.standby is not None:
            hosted = sorted(str(t) for t in streams.standby.tasks())
            updated = sum(streams.standby.updated.values())
            if (hosted, updated) != reported:
                reported = (hosted, updated)
                emit("standby", tasks=hosted, replayed=updated)
    ok = streams.close(30)
    emit("done", state=streams.state, processed=Crash.processed, clean=ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
