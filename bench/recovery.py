#!/usr/bin/env python3
"""Restart after kill -9 during heavy writes (issue 15 target 5): the rescan is bounded by the unflushed tail.

    python bench/recovery.py --sizes-gb 1,10 --tail-mb 300

For each size, a fresh kbroker (bench/bench_clients.py's ``BrokerProc``) with one topic of one partition:
  fill     ``size`` GB of 512 KiB values (acks=1, confluent-kafka). segment.bytes is Kafka's default (1 GiB): a roll
           flushes the older segments and advances the recovery point; the recovery-point checkpoint is written
           every log.flush.offset.checkpoint.interval.ms (60 s by default; ``--checkpoint-ms``, 5,000 here, so the
           run need not wait a minute for it).
  settle   one checkpoint interval + 1 s, so the checkpoint holds the recovery point of the last roll.
  kill     ``--tail-mb`` more MB, then kill -9 while the producer still writes.
  restart  start, time to the first Metadata naming the partition led. The bytes the loader rescans
           (kbroker/log/loader.py step 4: every segment from the one holding the checkpointed recovery point) are
           computed from the checkpoint file and the segment sizes left by the kill.
The restart time follows the rescanned bytes, not the log size. JSON in bench/results/recovery-<UTC time>.json.

``--brokers kbroker,kafka`` runs each size on Apache Kafka 4.4 too (bench/peers.py's one KRaft node, the same
checkpoint interval in its server.properties, segment.bytes its default 1 GiB as well), one broker after the
other: the same fill, settle, kill -9 and restart (the JVM started on the same log dir, timed to the same Metadata
answer). Kafka's log dir holds the same recovery-point-offset-checkpoint file and segment names, so "rescanned" is
computed alike; Kafka, like kbroker, recovers the segments from the one holding the recovery point.
"""
import argparse
import datetime as _dt
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_clients import BrokerProc, create_topics, machine  # noqa: E402
from peers import KafkaProc, PeerUnavailable, kafka_classpath  # noqa: E402
from scale_partitions import loadavg, produce, start_timed  # noqa: E402

TOPIC = "recovery"


def rescanned_bytes(log_dir):
    """(recovery point, log bytes, bytes from the segment holding the recovery point to the end)."""
    point = 0
    with open(os.path.join(log_dir, "recovery-point-offset-checkpoint")) as f:
        lines = f.read().split("\n")
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == TOPIC and parts[1] == "0":
            point = int(parts[2])
    pdir = os.path.join(log_dir, TOPIC + "-0")
    segs = sorted((int(n[:20]), os.path.getsize(os.path.join(pdir, n))) for n in os.listdir(pdir) if n.endswith(".log"))
    start = max([b for b, _s in segs if b <= point] or [0])
    return point, sum(s for _b, s in segs), sum(s for b, s in segs if b >= start)


class KafkaRecoveryProc(KafkaProc):
    """Apache Kafka 4.4 (bench/peers.py's one KRaft node) with the run's recovery-point checkpoint interval."""

    def __init__(self, classpath, checkpoint_ms):
        super().__init__(classpath)
        self.checkpoint_ms = checkpoint_ms

    def extra_props(self):
        return {"log.flush.offset.checkpoint.interval.ms": self.checkpoint_ms}


def new_broker(kind, checkpoint_ms):
    if kind == "kafka":
        cp = kafka_classpath()
        if not cp or not shutil.which("java"):
            raise PeerUnavailable("Apache Kafka not available (needs java and mvn for bench/kafka/pom.xml)")
        return KafkaRecoveryProc(cp, checkpoint_ms)
    return BrokerProc("kbroker", overrides={"log.flush.offset.checkpoint.interval.ms": checkpoint_ms})


def one(size_gb, tail_mb, checkpoint_ms, kind="kbroker"):
    broker = new_broker(kind, checkpoint_ms)
    out = {"broker": kind, "size_gb": size_gb, "load_before": loadavg()}
    try:
        if kind == "kafka":
            broker.start()      # formats its log dir; later starts (start_timed) reuse it
        else:
            start_timed(broker, 0, 60)
        create_topics(broker, [TOPIC], 1)
        s, c = produce(broker, [(TOPIC, 0)], int(size_gb * 1e9), value_size=1 << 19, linger_ms=5)
        out["fill_s"] = round(s, 1)
        time.sleep(checkpoint_ms / 1000.0 + 1)
        goal = tail_mb * 10**6
        producer = produce(broker, [(TOPIC, 0)], goal * 10, value_size=1 << 19, linger_ms=5,
                           stop_at=lambda sent: sent >= goal)
        broker.proc.kill()
        broker.proc.wait(30)
        del producer
        # Kafka's log dir has the same layout and checkpoint file (kbroker writes Kafka's)
        point, total, scan = rescanned_bytes(os.path.join(broker.tmp, "kraft" if kind == "kafka" else "logs"))
        out.update({"recovery_point": point, "log_bytes": total, "rescanned_bytes": scan})
        out["restart"] = start_timed(broker, 1, 600)
        out["load_after"] = loadavg()
    finally:
        broker.stop()
    print(out, flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-gb", default="1,10")
    ap.add_argument("--tail-mb", type=int, default=300)
    ap.add_argument("--checkpoint-ms", type=int, default=5000)
    ap.add_argument("--brokers", default="kbroker", help="kbroker,kafka: each size on each, one after the other")
    args = ap.parse_args()
    kinds = [k for k in args.brokers.split(",") if k]
    if any(k not in ("kbroker", "kafka") for k in kinds):
        ap.error("--brokers takes kbroker and kafka")
    res = {"machine": machine(), "args": vars(args),
           "runs": [one(float(s), args.tail_mb, args.checkpoint_ms, k) for s in args.sizes_gb.split(",")
                    for k in kinds]}
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "recovery-%s.json"
                        % _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("%8s %8s %12s %14s %10s" % ("broker", "log GB", "rescanned MB", "restart s", "load"))
    for r in res["runs"]:
        print("%8s %8.1f %12.0f %14.2f %10s" % (r["broker"], r["log_bytes"] / 1e9, r["rescanned_bytes"] / 1e6,
                                                r["restart"]["ready_s"], r["load_after"]))
    print("->", path)


if __name__ == "__main__":
    main()
