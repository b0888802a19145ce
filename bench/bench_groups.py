#!/usr/bin/env python3
"""Consumer-group benchmark for kbroker: rebalance time of a 10-member group and offset-commit throughput.

    python bench/bench_groups.py                      # delays 0 and 3000 ms, one broker each, ~2 min
    python bench/bench_groups.py --heartbeat-ms 300   # the same with a short client heartbeat, ~1 min
    python bench/bench_groups.py --delays 0 --repeat 1 --commits 5000

For each value of ``group.initial.rebalance.delay.ms`` in ``--delays`` a fresh broker is started (child process
``python -m kbroker.cli.server --override ...`` on a free 127.0.0.1 port, temp ``log.dirs``), a topic with
``--partitions`` (20) partitions is created, and these phases run, each bounded by ``--timeout`` seconds:

  join        ``--members`` (10) confluent-kafka consumers, one Python thread each (each thread owns its Consumer
              and polls it every 20 ms; librdkafka runs the group protocol in its own threads and delivers
              on_assign/on_revoke from poll()), all in one new group subscribed to the topic. Time runs from
              the first subscribe() to the first moment every member holds a non-empty assignment (its latest
              on_assign, not revoked since) and the assignments are disjoint and cover every partition.
              ``on_assign calls`` counts the callbacks in that window: 10 means one generation, more means
              members were assigned and then revoked by a further rebalance (late joiners). Kafka's rules
              decide the shape: with delay 0 the first JoinGroup of an empty group completes at once (a
              one-member generation), the others' JoinGroups then wait until that member rejoins, i.e. until
              its next heartbeat; with delay D the first join waits D and, while new members keep arriving,
              D again (bounded by the rebalance timeout), so 10 members arriving within D take about 2 x D.
              Run ``--repeat`` (5) rounds, each with a fresh group; the table shows median and min-max.
  rejoin      one more consumer subscribes to the stable group; time runs from its subscribe() to all
              members+1 holding disjoint assignments covering the topic again. Existing members only learn of
              the rebalance from a Heartbeat answered REBALANCE_IN_PROGRESS, so this is bounded below by
              librdkafka's ``heartbeat.interval.ms`` (3000 by default, ``--heartbeat-ms``); the initial delay
              does not apply (Kafka delays only the first join of an empty group). The newcomer arrives a
              seeded-random pause (``--settle`` + uniform over one heartbeat interval) after the group became
              complete, so the rounds sample the heartbeat phase instead of always hitting the same point.
  commit-sync one consumer, member of its own group (assigned all partitions), calls
              commit(offsets=[partition 0 -> i], asynchronous=False) for i = 1..``--commits`` (or until
              ``--seconds``): commits/s and per-commit latency p50/p99 (nearest rank).
  commit-async the same number of commit(..., asynchronous=True) calls issued back to back, polling to serve
              the callbacks; time from the first call to the last on_commit callback. Every callback must
              report no error; afterwards committed() must return the last offset.
Broker CPU for the commit phases is utime+stime of the broker process (/proc/<pid>/stat fields 14, 15).

Consumers use librdkafka's defaults except ``heartbeat.interval.ms`` and ``enable.auto.commit=false``; the
assignor is the default ``range,roundrobin`` list (eager protocol: a rebalance revokes everything first).
Exit code 0 when every phase of every run completed.
"""
import argparse
import datetime as _dt
import json
import os
import platform
import random
import signal
import subprocess
import sys
import threading
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_clients import BrokerProc  # noqa: E402 - the one broker-process helper of bench/

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TOPIC = "bench-groups"


class Broker(BrokerProc):
    """A kbroker child process as bench_clients starts it, with ``group.initial.rebalance.delay.ms`` set."""

    def __init__(self, delay_ms):
        super().__init__("kbroker", overrides={"group.initial.rebalance.delay.ms": delay_ms})
        self.delay_ms = delay_ms


def create_topic(bootstrap, partitions, timeout):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
        if md and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError("topic %s has no leaders after %.0f s" % (TOPIC, timeout))


class Member(threading.Thread):
    """One group member: its own Consumer, polled from this thread; records assignment changes in `group`."""

    def __init__(self, group, name, conf):
        super().__init__(name=name, daemon=True)
        self.group, self.conf = group, conf
        self.stop_flag = threading.Event()
        self.subscribed_at = None
        self.error = None

    def run(self):
        try:
            c = ck.Consumer(self.conf)
            self.subscribed_at = time.perf_counter()
            c.subscribe([TOPIC], on_assign=lambda _c, ps: self.group.assigned(self.name, ps),
                        on_revoke=lambda _c, ps: self.group.revoked(self.name))
            while not self.stop_flag.is_set():
                c.poll(0.02)
            c.close()  # LeaveGroup
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc


class Group:
    """Current assignment per member, and the time the assignments last became complete."""

    def __init__(self, partitions):
        self.partitions = partitions
        self.lock = threading.Lock()
        self.current = {}
        self.assign_calls = 0
        self.first_assign_at = None
        self.complete_at = None
        self.expected = 0

    def assigned(self, name, parts):
        with self.lock:
            self.assign_calls += 1
            if self.first_assign_at is None:
                self.first_assign_at = time.perf_counter()
            self.current[name] = sorted(p.partition for p in parts)
            self._check()

    def revoked(self, name):
        with self.lock:
            self.current[name] = []
            self.complete_at = None

    def _check(self):
        owned = [p for ps in self.current.values() for p in ps]
        if (len(self.current) == self.expected and all(self.current.values())
                and sorted(owned) == list(range(self.partitions))):
            if self.complete_at is None:
                self.complete_at = time.perf_counter()
        else:
            self.complete_at = None

    def wait_complete(self, expected, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                self.expected = expected
                self._check()
                if self.complete_at is not None:
                    return self.complete_at
            time.sleep(0.005)
        with self.lock:
            raise RuntimeError("group not complete after %.0f s: %s" % (timeout, self.current))


def consumer_conf(bootstrap, group_id, args, client_id):
    return {"bootstrap.servers": bootstrap, "group.id": group_id, "client.id": client_id,
            "enable.auto.commit": False, "heartbeat.interval.ms": args.heartbeat_ms}


def phase_rebalance(broker, args, round_no):
    group = Group(args.partitions)
    gid = "bench-rebalance-%d-%d" % (broker.delay_ms, round_no)
    members = [Member(group, "m%02d" % i, consumer_conf(broker.bootstrap, gid, args, "m%02d" % i))
               for i in range(args.members)]
    out = {}
    try:
        for m in members:
            m.start()
        done = group.wait_complete(args.members, args.timeout)
        t0 = min(m.subscribed_at for m in members)
        out["join_s"] = done - t0
        out["first_assign_s"] = group.first_assign_at - t0
        out["join_assign_calls"] = group.assign_calls
        out["join_assignment"] = {k: v for k, v in sorted(group.current.items())}
        # The existing members notice the new join at their next heartbeat, so the rejoin time depends on where in
        # the heartbeat cycle the newcomer arrives: a fixed pause would measure one fixed phase. Pause `settle`
        # plus a uniform draw over one heartbeat interval (seeded: rounds are reproducible).
        pause = args.settle + random.Random(args.seed * 1000 + round_no).uniform(0, args.heartbeat_ms / 1000)
        out["rejoin_pause_s"] = pause
        time.sleep(pause)
        with group.lock:
            calls_before = group.assign_calls
        extra = Member(group, "m%02d" % args.members, consumer_conf(broker.bootstrap, gid, args, "extra"))
        members.append(extra)
        extra.start()
        done = group.wait_complete(args.members + 1, args.timeout)
        out["rejoin_s"] = done - extra.subscribed_at
        out["rejoin_assign_calls"] = group.assign_calls - calls_before
        out["rejoin_assignment"] = {k: v for k, v in sorted(group.current.items())}
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            m.join(30)
    errors = [repr(m.error) for m in members if m.error]
    if errors:
        raise RuntimeError("member errors: %s" % errors)
    return out


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 100)) - 1))  # nearest rank
    return sorted_values[k]


def phase_commits(broker, args):
    gid = "bench-commit-%d" % broker.delay_ms
    group = Group(args.partitions)
    c = ck.Consumer(dict(consumer_conf(broker.bootstrap, gid, args, "committer")))
    c.subscribe([TOPIC], on_assign=lambda _c, ps: group.assigned("committer", ps))
    deadline = time.monotonic() + args.timeout
    while not group.current.get("committer") and time.monotonic() < deadline:
        c.poll(0.05)
    if not group.current.get("committer"):
        raise RuntimeError("committer got no assignment in %.0f s" % args.timeout)
    out = {}
    try:
        # synchronous: one OffsetCommit round trip per call
        lat = []
        cpu0 = broker.cpu_seconds()
        t_start = time.perf_counter()
        stop_at = t_start + args.seconds
        for i in range(1, args.commits + 1):
            t = time.perf_counter()
            c.commit(offsets=[ck.TopicPartition(TOPIC, 0, i)], asynchronous=False)
            lat.append(time.perf_counter() - t)
            if t > stop_at:
                break
        elapsed = time.perf_counter() - t_start
        lat.sort()
        out.update(sync_commits=len(lat), sync_per_s=len(lat) / elapsed, sync_p50_ms=percentile(lat, 50) * 1e3,
                   sync_p99_ms=percentile(lat, 99) * 1e3,
                   sync_broker_cpu_ms_per_commit=(broker.cpu_seconds() - cpu0) * 1e3 / len(lat))
        base = len(lat)

        # asynchronous: every call queued at once, completions served by poll()
        done = {"n": 0, "errors": 0, "last": None}

        def on_commit(err, _parts):
            done["n"] += 1
            done["errors"] += err is not None
            done["last"] = time.perf_counter()

        c2_conf = dict(consumer_conf(broker.bootstrap, gid + "-async", args, "committer-async"))
        c2_conf["on_commit"] = on_commit
        c2 = ck.Consumer(c2_conf)
        try:
            c2.subscribe([TOPIC], on_assign=lambda _c, ps: group.assigned("async", ps))
            deadline = time.monotonic() + args.timeout
            while not group.current.get("async") and time.monotonic() < deadline:
                c2.poll(0.05)
            if not group.current.get("async"):
                raise RuntimeError("async committer got no assignment in %.0f s" % args.timeout)
            n = base
            cpu0 = broker.cpu_seconds()
            t_start = time.perf_counter()
            for i in range(1, n + 1):
                c2.commit(offsets=[ck.TopicPartition(TOPIC, 0, base + i)], asynchronous=True)
            deadline = time.monotonic() + args.timeout
            while done["n"] < n and time.monotonic() < deadline:
                c2.poll(0.01)
            if done["n"] < n:
                raise RuntimeError("only %d of %d async commits completed in %.0f s" % (done["n"], n, args.timeout))
            elapsed = done["last"] - t_start
            out.update(async_commits=n, async_per_s=n / elapsed, async_errors=done["errors"],
                       async_broker_cpu_ms_per_commit=(broker.cpu_seconds() - cpu0) * 1e3 / n)
            last = c2.committed([ck.TopicPartition(TOPIC, 0)], timeout=10)[0].offset
            if last != 2 * base or done["errors"]:
                raise RuntimeError("async: committed %d (want %d), %d errors" % (last, 2 * base, done["errors"]))
        finally:
            c2.close()
        last = c.committed([ck.TopicPartition(TOPIC, 0)], timeout=10)[0].offset
        if last != base:
            raise RuntimeError("sync: committed %d, want %d" % (last, base))
    finally:
        c.close()
    return out


def machine():
    info = {"nproc": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release(),
            "confluent_kafka": ck.__version__, "librdkafka": ck.libversion()[0]}
    try:
        info["commit"] = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True, timeout=5).stdout.strip()
    except OSError:
        pass
    try:
        sys.path.insert(0, REPO)
        import kbroker._native as native
        info["native"] = native.IMPL
    except Exception:  # noqa: BLE001 - informational only
        pass
    return info


def fmt(v, digits=2):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "{:,.{}f}".format(v, digits)
    return "{:,}".format(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delays", default="0,3000", help="group.initial.rebalance.delay.ms values, one broker each")
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--heartbeat-ms", type=int, default=3000, help="librdkafka heartbeat.interval.ms (default 3000)")
    ap.add_argument("--commits", type=int, default=2000, help="commits per commit phase (cap)")
    ap.add_argument("--seconds", type=float, default=20.0, help="wall cap of the sync commit phase")
    ap.add_argument("--timeout", type=float, default=60.0, help="bound of every wait")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random pause before the rejoin")
    ap.add_argument("--repeat", type=int, default=5, help="rebalance rounds per broker (fresh group each); the "
                    "table shows the median and the min-max range")
    ap.add_argument("--settle", type=float, default=1.0, help="pause between the join and the rejoin phase")
    ap.add_argument("--keep", action="store_true", help="keep the broker's temp dir")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    delays = [int(d) for d in args.delays.split(",") if d != ""]
    # Whole-run budget: startup + two group phases + two commit phases per broker, each bounded by --timeout.
    signal.alarm(int(len(delays) * (30 + args.repeat * (2 * args.timeout + args.settle + args.heartbeat_ms / 1000)
                                    + 3 * args.timeout + args.seconds)))

    results, ok = {}, True
    for delay in delays:
        broker = Broker(delay)
        res = results[delay] = {"load_before": os.getloadavg()[0]}
        try:
            broker.start()
            create_topic(broker.bootstrap, args.partitions, args.timeout)
            rounds = [phase_rebalance(broker, args, r) for r in range(args.repeat)]
            res["rounds"] = rounds
            for key in ("join_s", "first_assign_s", "join_assign_calls", "rejoin_s", "rejoin_assign_calls"):
                vals = sorted(r[key] for r in rounds)
                res[key] = vals[(len(vals) - 1) // 2]  # median (lower middle for an even count)
                res[key + "_range"] = (vals[0], vals[-1])
            res.update(phase_commits(broker, args))
        except Exception as exc:  # noqa: BLE001 - report and continue with the next delay
            ok = False
            res["error"] = repr(exc)
            print("delay %d: %r\n%s" % (delay, exc, broker.tail()), file=sys.stderr)
        finally:
            res["load_after"] = os.getloadavg()[0]
            broker.stop(keep=args.keep)

    rows = [
        ("initial join, %d members: all assigned (s)" % args.members, "join_s", 3),
        ("  min - max over rounds (s)", "join_s_range", 3),
        ("initial join: first on_assign (s)", "first_assign_s", 3),
        ("initial join: on_assign calls", "join_assign_calls", 0),
        ("  min - max over rounds", "join_assign_calls_range", 0),
        ("member %d joins: group re-stabilised (s)" % (args.members + 1), "rejoin_s", 3),
        ("  min - max over rounds (s)", "rejoin_s_range", 3),
        ("rejoin: on_assign calls", "rejoin_assign_calls", 0),
        ("sync commit: commits/s", "sync_per_s", 0),
        ("sync commit latency p50 / p99 (ms)", ("sync_p50_ms", "sync_p99_ms"), 2),
        ("sync commit: broker CPU ms per commit", "sync_broker_cpu_ms_per_commit", 3),
        ("async commit: commits/s", "async_per_s", 0),
        ("async commit: broker CPU ms per commit", "async_broker_cpu_ms_per_commit", 3),
        ("commits per phase", "sync_commits", 0),
        ("1-min load average before / after", ("load_before", "load_after"), 2),
    ]
    print("| metric | " + " | ".join("initial delay %d ms" % d for d in delays) + " |")
    print("|---|" + "---|" * len(delays))
    for label, key, digits in rows:
        cells = []
        for d in delays:
            r = results[d]
            keys = key if isinstance(key, tuple) else (key,)
            vals = [r.get(k) for k in keys]
            if len(vals) == 1 and isinstance(vals[0], tuple):
                vals = list(vals[0])
            vals = [round(v) if (digits == 0 and isinstance(v, float)) else v for v in vals]
            cells.append((" - " if "range" in keys[0] else " / ").join(fmt(v, digits) for v in vals))
        print("| %s | %s |" % (label, " | ".join(cells)))
    info = machine()
    print("\nmachine: %s; heartbeat.interval.ms=%d; %d partitions; %d rebalance rounds (medians)" % (
        ", ".join("%s=%s" % kv for kv in info.items()), args.heartbeat_ms, args.partitions, args.repeat))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"when": _dt.datetime.now(_dt.timezone.utc).isoformat(), "args": vars(args), "machine": info,
                       "results": results}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
