#!/usr/bin/env python3
"""Two micro-benchmarks of issue 15 session 18 (docs/performance.md), each on one core, no broker:

    .venv/bin/python bench/micro_session18.py [--segments 20000] [--limit 10000] [--lines 50000]

pool     a DescriptorPool (kbroker/log/descriptors.py) of --limit slots over --segments segments of one small
         file, visited round robin 3 times (every visit past the limit is a reopen plus an eviction's close);
         beside it, os.open + os.close alone.
logging  --lines state-change lines (the controller's "changed partition ... to OnlinePartition") through the
         broker's own file handler and Kafka's layout, with logging's record switches as Python leaves them and
         as kbroker/cli/logging_records.py sets them for that layout.
"""
import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbroker.cli.logging_config import SizeRotatingHandler, python_format  # noqa: E402
from kbroker.cli.logging_records import SRCFILE, record_only_what_is_printed  # noqa: E402
from kbroker.log.descriptors import DescriptorPool  # noqa: E402


class _Segment:
    def __init__(self, key):
        self.key, self._touched, self._file = key, True, None

    def _evict(self):
        self._file = None


def pool(segments, limit, path):
    p = DescriptorPool(limit)
    segs = [_Segment(i) for i in range(segments)]
    t = time.perf_counter()
    for _ in range(3):
        for s in segs:
            s._touched = True
            if s._file is None:
                s._file = p.open(s, path, os.O_RDONLY, s.key)
    took = time.perf_counter() - t
    n = 20000
    t = time.perf_counter()
    for _ in range(n):
        os.close(os.open(path, os.O_RDONLY))
    print("pool: %.2f us per visit (%d opens, %d evictions); open+close alone %.2f us"
          % (took / (3 * segments) * 1e6, p.opens, p.evictions, (time.perf_counter() - t) / n * 1e6))


def lines(n, directory):
    h = SizeRotatingHandler(os.path.join(directory, "state-change.log"), 1 << 30, 1)
    h.setFormatter(logging.Formatter(python_format("bench", "[%d] %p %m (%c)%n")))
    lg = logging.getLogger("state.change.logger")
    lg.propagate, lg.handlers = False, [h]
    lg.setLevel(logging.INFO)
    for label in ("Python's defaults", "kbroker's switches"):
        if label.startswith("kbroker"):
            record_only_what_is_printed([h])
        t = time.perf_counter()
        for i in range(n):
            lg.log(logging.INFO, "%s changed %s from %s to %s", "Controller 2 epoch 5",
                   "partition [scale-001,%d] state" % i, "OfflinePartition", "OnlinePartition")
        print("logging, %s: %.2f us a line" % (label, (time.perf_counter() - t) / n * 1e6))
    logging._srcfile = SRCFILE


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=20000)
    ap.add_argument("--limit", type=int, default=10000)
    ap.add_argument("--lines", type=int, default=50000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "00000000000000000000.log")
        Path(path).write_bytes(b"x" * 1000)
        pool(args.segments, args.limit, path)
        lines(args.lines, d)


if __name__ == "__main__":
    main()
