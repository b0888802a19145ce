#!/usr/bin/env python3
"""In-process CPU cost of the broker's produce, fetch and replication paths, for side-by-side runs of two trees.

    .venv/bin/python bench/bench_append.py                            # this tree
    PYTHONPATH=/tmp/kb-base .venv/bin/python bench/bench_append.py    # another tree's kbroker (kernels built there)

No network and no client: a leader Partition on a fresh Log (in /dev/shm when it exists, so the disk stays out of
it) is handed the same batches a librdkafka producer sends, and each step is timed in CPU seconds of this process
(``time.process_time``, all threads; ``os.write`` into the page cache included), the best of ``--repeat`` runs:

  produce-1k    ``Partition.append`` (validation, offsets, log append, indexes) of batches of 16 records x 1 KB
  produce-100   the same with batches of 100 records x 100 B
  fetch         ``Log.read`` of 1 MiB from every batch's base offset (index lookup + header scan, no copy)
  follower      ``Partition.append_as_follower`` of the leader's log in 1 MiB fetch answers (CRC check, copy)
  rebuild       a Partition built over the log without its leader-epoch checkpoint (producer state and epoch
                cache rebuilt from the batch headers)

Prints one JSON line: the tree's ``kbroker.__file__`` (proof of which code ran), the kernels in use and, per
step, microseconds per batch. bench_clients.py is the end-to-end benchmark; this one isolates the broker's own
per-batch work from the client and the machine's other load, which end-to-end figures on a shared machine are not.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import kbroker
from kbroker import _native
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.record import Record, build_batch
from kbroker.replica.partition import Partition


def batches(n, count, size, pid):
    """``n`` idempotent batches of ``count`` records of ``size`` bytes (sequence numbers continue)."""
    value = bytes(range(256)) * (size // 256 + 1)
    out = []
    for i in range(n):
        recs = [Record(j, 1_700_000_000_000 + j, None, value[j % 256:j % 256 + size], ()) for j in range(count)]
        out.append(build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=i * count))
    return out


def cpu(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def run_once(root, n):
    lc = LogConfig(segment_bytes=256 << 20)
    out = {}
    for name, count, size in (("produce-1k", 16, 1024), ("produce-100", 100, 100)):
        data = batches(n, count, size, 7)
        lg = Log(os.path.join(root, "%s-0" % name), lc)
        part = Partition(name, 0, lg, lc, 1)
        part.make_leader(1, [1], [1], 0)
        work = [bytearray(b) for b in data]          # the request buffer is writable, as the connection's is
        out[name] = cpu(lambda: [part.append(b, 7, 1) for b in work]) / n
        if name == "produce-1k":
            leader = part
        else:
            lg.close()
    lg = leader.log
    bases = [e.base_offset for e in lg.batch_headers()] if hasattr(lg, "batch_headers") else None
    if bases is None:                                 # older trees: the same offsets from the segment walk
        bases = [e[2] for s in lg.segments for e in s.batches()]
    out["fetch"] = cpu(lambda: [lg.read(o, 1 << 20) for o in bases]) / len(bases)
    follower = Partition("f", 0, Log(os.path.join(root, "f-0"), lc), lc, 2)
    follower.make_follower(1, 1, [1, 2], [1, 2], 0)

    def follow():
        while follower.log.log_end_offset < lg.log_end_offset:
            follower.append_as_follower(lg.read(follower.log.log_end_offset, 1 << 20).region.read_bytes())
    out["follower"] = cpu(follow) / len(bases)
    follower.log.close()
    lg.close()
    os.unlink(os.path.join(lg.dir, "leader-epoch-checkpoint"))

    def rebuild():
        Partition("produce-1k", 0, Log(lg.dir, lc), lc, 1).log.close()
    out["rebuild"] = cpu(rebuild) / len(bases)
    return {k: v * 1e6 for k, v in out.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=4000, help="batches per produce step")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the best (lowest CPU) of each step is reported")
    args = ap.parse_args(argv)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    best = {}
    for _ in range(args.repeat):
        root = tempfile.mkdtemp(prefix="kb-append-", dir=base)
        try:
            for k, v in run_once(root, args.batches).items():
                best[k] = min(v, best.get(k, v))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"kbroker": os.path.dirname(kbroker.__file__), "kernels": _native.IMPL,
                      "us_per_batch": {k: round(v, 2) for k, v in best.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
