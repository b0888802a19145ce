#!/usr/bin/env python3
"""Where a kbroker produce run spends its CPU: ``perf record -g`` on the broker during one produce phase.

    python bench/perf_produce.py                 # 1 KB values, 1,000,000 records, perf data in /tmp/kbroker.perf
    python bench/perf_produce.py --size 100 --records 3000000
    perf report -i /tmp/kbroker.perf --no-children --sort dso,sym --stdio | less

Starts kbroker exactly as ``bench_clients.py`` does (fresh temp dir, 6 partitions) and drives it with the same
``produce_phase``; prints that phase's JSON. Needs ``perf`` (Debian ``linux-perf``); ``--no-perf`` just runs the
phase (CPU per GB with the user / system split, no sampling).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_clients as bc  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--linger-ms", type=float, default=5.0)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--output", default="/tmp/kbroker.perf")
    ap.add_argument("--no-perf", action="store_true")
    args = ap.parse_args(argv)
    b = bc.BrokerProc("kbroker")
    b.start()
    perf = None
    try:
        bc.create_topics(b, ["perf"], args.partitions)
        if not args.no_perf:
            perf = subprocess.Popen(["perf", "record", "-F", "999", *(["-e", os.environ["P3_EVENT"]] if os.environ.get("P3_EVENT") else ["-g"]), "-o", args.output, "-p", str(b.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # perf attaches asynchronously; the phase must not start before it samples
        res = bc.produce_phase(b, "perf", args.size, args.records, args.seconds, args.linger_ms)
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(30)
        b.stop()
    print(json.dumps(res, indent=1))
    if perf is not None:
        print("perf data: %s" % args.output, file=sys.stderr)


if __name__ == "__main__":
    main()
