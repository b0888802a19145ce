#!/usr/bin/env python3
"""Broker CPU per GB and a profile of the produce and consume paths (issue 15, target 1).

    python bench/profile_paths.py                                  # 100 B produce + consume, 1 KB consume, 3 rounds
    python bench/profile_paths.py --profile /tmp/prof              # + py-spy of every phase (collapsed stacks)
    python bench/profile_paths.py --repo /tmp/before-X             # the broker from another tree (before/after)

Each round starts a fresh kbroker exactly as ``bench_clients.py`` does (one process, temp log dir, ``--partitions``
partitions, RF 1), then runs, with the same librdkafka client code as bench_clients:
  produce-100  ``--records-100`` values of 100 bytes, acks=all, linger.ms=5, no compression
  consume-100  a fresh consumer assign()s every partition at offset 0 and reads them all back
  produce-1k   ``--records-1k`` values of 1,024 bytes (only to have data for the next phase)
  consume-1k   the same read for the 1 KB topic
Broker CPU is utime+stime of the broker process (all threads) from /proc/<pid>/stat over the phase, divided by
the payload GB (10**9 bytes of values); ``__consumer_offsets`` is created before the first phase (see
``bench_clients.warm_group_coordinator``), so no phase pays for it; framing is not counted, so at 100 B ~30 %
more bytes cross the wire than the figure's GB. The machine is shared and has no hardware counters (a VM), so CPU seconds per GB are the figure
(load disturbs them far less than throughput) and every result records the 1-minute load average before and after.
The median of ``--rounds`` rounds is printed per phase; ``--json`` keeps every round.

``--inprocess``: no client, no sockets -- the Produce path a request takes inside the broker (header and request
decode with the real codecs, the Produce handler with acks=all over real leader Partitions on a fresh Log in
/dev/shm, response encode), timed with ``time.process_time`` (best of 7 runs), for librdkafka's request shapes at
100 B: 6 partitions x 4,000 records (what one fast client sends, ~660k records/s with linger.ms=5), x 145 records
(a client at ~170k records/s) and x 1 record (the fixed cost per request and per partition entry). Then, at 1 KB,
1,000 partition entries of 10 records in one request against one request of 1,000 records to one partition (the
append path of target 4's produce spread; ``SHAPES``). Prints microseconds
per request and broker CPU seconds per payload GB. The machine's load barely moves these (no other process is in the
measured path), so before/after comparisons of code run here: ``--inprocess --repo <tree>``.

``--profile DIR``: py-spy (``.venv/bin/pip install py-spy``, bench only) samples the broker during each phase
(``--nonblocking``, 250 Hz; a few percent of a core) and the top frames by self and inclusive share of the samples
are printed. ``--repo`` runs ``python -m kbroker.cli.server`` with PYTHONPATH at that tree (its compiled kernels
must be built in place there), so before and after run in the same sitting with the same client.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_clients as bc  # noqa: E402


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run_round(args, rnd):
    b = bc.BrokerProc("kbroker")
    out = {"phases": {}, "profiles": {}}
    try:
        b.start()
        bc.create_topics(b, ["p100", "p1k"], args.partitions)
        bc.create_topics(b, ["warm"], 1)
        bc.warm_group_coordinator(b)
        steps = [
            ("produce-100", lambda: bc.produce_phase(b, "p100", 100, args.records_100, args.seconds, 5)),
            ("consume-100", lambda: bc.consume_phase(b, "p100", args.partitions,
                                                     out["phases"]["produce-100"]["records_acked"] + 1, 100,
                                                     args.seconds + 10)),
            ("produce-1k", lambda: bc.produce_phase(b, "p1k", 1024, args.records_1k, args.seconds, 5)),
            ("consume-1k", lambda: bc.consume_phase(b, "p1k", args.partitions,
                                                    out["phases"]["produce-1k"]["records_acked"] + 1, 1024,
                                                    args.seconds + 10)),
        ]
        for name, fn in steps:
            l0 = loadavg()
            if args.profile:
                os.makedirs(args.profile, exist_ok=True)
                path = os.path.join(args.profile, "r%d-%s.txt" % (rnd, name))
                with bc.Profiler(b.proc.pid, path):
                    res = fn()
                out["profiles"][name] = dict(bc.summarize_profile(path, top=args.top) or {}, path=path)
            else:
                res = fn()
            res["loadavg_before_after"] = [l0, loadavg()]
            out["phases"][name] = res
            print("  round %d %-12s %8.3f s/GB  %10.0f rec/s  load %.2f/%.2f" % (
                rnd, name, res["broker_cpu_s_per_gb"] or -1, res["records_per_s"], l0, loadavg()),
                file=sys.stderr, flush=True)
    finally:
        b.stop()
    return out


# (topics, partitions per topic, records per batch, value bytes, requests per timed run). The first four are
# librdkafka's request shapes at 100 B (module docstring); the last two are the handler's work of target 4's produce
# spread at 1 KB -- 1,000 partition entries of 10 records, put in one request so the per-entry cost shows -- and
# of one 1,000-record request to one partition. (librdkafka itself sends the spread as one entry of ~49 records
# per request: bench/produce_requests.py measures that shape, network path included.)
SHAPES = ((1, 6, 4000, 100, 150), (1, 6, 145, 100, 2000), (1, 6, 1, 100, 4000), (1, 1, 1, 100, 10000),
          (100, 10, 10, 1024, 20), (1, 1, 1000, 1024, 200))


def inprocess(args):
    """The ``--inprocess`` measurement (module docstring); imports kbroker from ``--repo`` (or this tree)."""
    import shutil
    import tempfile
    tree = os.path.abspath(args.repo) if args.repo else os.path.dirname(HERE)
    sys.path.insert(0, tree)
    from kbroker.handlers import produce as produce_handler
    from kbroker.log.config import LogConfig
    from kbroker.log.log import Log
    from kbroker.protocol.apis import APIS
    from kbroker.protocol.framing import frame
    from kbroker.protocol.headers import decode_request_header, encode_request_header, encode_response_header, \
        peek_request_header
    from kbroker.protocol.schema import Writer
    from kbroker.record import Record, build_batch
    from kbroker.replica.partition import Partition
    from kbroker.server.context import RequestContext
    from kbroker.timeslice import TimeSlice
    from tests.unit.ctx import FakeConn, identity, make_services
    import kbroker
    api = APIS[0]
    version = 9
    root = tempfile.mkdtemp(prefix="kb-paths-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    print("kbroker from %s" % os.path.dirname(kbroker.__file__))
    try:
        for ntopics, nparts, nrec, vsize, reqs in SHAPES:
            lc = LogConfig(segment_bytes=1 << 30)
            parts = {}
            for t in range(ntopics):
                for i in range(nparts):
                    p = Partition("t%d" % t, i, Log(os.path.join(root, "t%d-%d-%d-%d-%d" % (
                        t, nrec, vsize, nparts, i)), lc), lc, 1)
                    p.make_leader(1, [1], [1], 0)
                    parts["t%d" % t, i] = p

            class Replicas:
                def leader_partition(self, topic, i):
                    return parts[topic, i]

            value = os.urandom(vsize)
            batch = bytes(build_batch([Record(j, 1_700_000_000_000 + j, None, value, ()) for j in range(nrec)]))
            req = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
                {"name": "t%d" % t, "partition_data": [{"index": i, "records": batch} for i in range(nparts)]}
                for t in range(ntopics)]}
            w = Writer()
            w.buf += encode_request_header(api.request_header_version(version), 0, version, 1, "rdkafka")
            api.encode_request(version, req, w)
            wire = b"".join(bytes(c) for c in w.chunks())
            services = make_services(replicas=Replicas(), config={})
            ident, conn = identity(), FakeConn()

            def one(buf):
                payload = memoryview(buf)
                api_key, ver, corr = peek_request_header(payload)
                pause = TimeSlice().tick
                header, pos = decode_request_header(payload, api.request_header_version(ver), 1 << 20)
                r = api.decode_request(ver, payload, pos, 1 << 20, pause)
                ctx = RequestContext(ident, services, api_key, ver, corr, header.client_id, conn)
                resp = produce_handler.produce(ctx, r)
                out = Writer()
                out.buf += encode_response_header(api.response_header_version(ver), corr)
                api.encode_response(ver, resp, out, pause)
                return [frame(out.size())] + list(out.chunks())

            one(bytearray(wire))
            best = None
            for _ in range(7):
                bufs = [bytearray(wire) for _ in range(reqs)]   # the connection's receive buffers are writable
                t0 = time.process_time()
                for b in bufs:
                    one(b)
                spent = (time.process_time() - t0) / reqs
                best = spent if best is None else min(best, spent)
            gb = nrec * nparts * ntopics * vsize / 1e9
            print("produce request %4d partitions x %5d records of %4d B: %8.1f us per request, %6.3f s per payload GB"
                  % (nparts * ntopics, nrec, vsize, best * 1e6, best / gb))
            for p in parts.values():
                p.log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records-100", type=int, default=2000000)
    ap.add_argument("--records-1k", type=int, default=500000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--profile", metavar="DIR", default=None)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--repo", default=None, help="run the broker from this tree (PYTHONPATH)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--inprocess", action="store_true", help="the in-process Produce path only (no client)")
    args = ap.parse_args(argv)
    if args.inprocess:
        inprocess(args)
        return
    if args.repo:
        # BrokerProc puts REPO on the broker's PYTHONPATH; it lives in bench_clients or in peers (P4's split)
        for mod in (bc, sys.modules.get("peers")):
            if mod is not None:
                mod.REPO = os.path.abspath(args.repo)
    rounds = [run_round(args, r) for r in range(args.rounds)]
    print("broker tree: %s" % bc.REPO)
    for name in ("produce-100", "consume-100", "produce-1k", "consume-1k"):
        vals = [r["phases"][name]["broker_cpu_s_per_gb"] for r in rounds if name in r["phases"]]
        usr = [r["phases"][name].get("broker_user_s_per_gb") for r in rounds if name in r["phases"]]
        rate = [r["phases"][name]["records_per_s"] for r in rounds if name in r["phases"]]
        print("%-12s broker CPU s/GB median %.3f (rounds %s)%s  records/s median %.0f" % (
            name, statistics.median(vals), ", ".join("%.3f" % v for v in vals),
            ("  user %.3f" % statistics.median(usr)) if all(u is not None for u in usr) else "",
            statistics.median(rate)))
    if args.profile:
        for name, prof in rounds[-1]["profiles"].items():
            print("\n%s (%d samples, last round) -- self %%:" % (name, prof.get("samples", 0)))
            for fr, pct in prof.get("self_pct", []):
                print("  %5.1f  %s" % (pct, fr))
            print("%s -- inclusive %%:" % name)
            for fr, pct in prof.get("inclusive_pct", []):
                print("  %5.1f  %s" % (pct, fr))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rounds, "repo": bc.REPO}, f, indent=1)


if __name__ == "__main__":
    main()
