#!/usr/bin/env python3
"""Many small files written from a worker thread beside a busy main thread (issue 15, session 12).

    python bench/worker_files.py [--files 3500] [--rounds 3]

Why: the broker writes thousands of leader-epoch checkpoints in a worker thread (``epoch_cache.write_together``,
through ``offload``) while its event loop's thread is busy with the same failover. In Python each system call gives
the GIL back and has to take it again; with another thread running Python, every take-back may wait up to the
switch interval (5 ms). ``kbroker._native.write_files`` writes the whole batch with the GIL released once.

For each implementation (the pure twin, the compiled kernel) and each setting of the main thread (idle: it waits
for the worker; busy: it runs a Python loop until the worker is done), each round creates ``--files`` new
directories, then times a worker thread calling ``write_files(paths, datas, exclusive=True)`` on one small file in
each (what a failover writes: ~3,500 per LeaderAndIsr on a survivor of a 27,000-partition cluster). Prints seconds
per round (median) and the GIL switch interval. No fsync, and the files go to ``--dir`` (default /dev/shm, a
tmpfs, when it exists): the disk is not what is measured -- on this VM's disk the same 3,500 creates took 0.08 s
in one round and ~3 s a few minutes later, for either implementation.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kbroker._native as native  # noqa: E402


def one_round(write_files, n, busy, where=None):
    root = tempfile.mkdtemp(prefix="kb-worker-files-", dir=where)
    try:
        paths = []
        for i in range(n):
            d = os.path.join(root, "t-%d" % i)
            os.mkdir(d)
            paths.append(os.fsencode(os.path.join(d, "leader-epoch-checkpoint")))
        datas = [b"0\n1\n%d 0\n" % i for i in range(n)]
        took = []

        def worker():
            t0 = time.perf_counter()
            res = write_files(paths, datas, True)
            took.append(time.perf_counter() - t0)
            assert all(err == 0 for err, _ in res), res[:3]

        w = threading.Thread(target=worker)
        w.start()
        if busy:
            x = 0
            while w.is_alive():
                x += 1
        w.join()
        return took[0]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=3500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where the files go (default /dev/shm when it exists, else the temp dir)")
    args = ap.parse_args()
    impls = [("python twin", native.load(pure=True).write_files)]
    try:
        impls.append(("compiled", native.load(pure=False).write_files))
    except ImportError:
        print("compiled kernels not built: the twin only")
    print("%d files a round in %s, %d rounds, switch interval %.3f s, load average %.2f"
          % (args.files, args.dir or tempfile.gettempdir(), args.rounds, sys.getswitchinterval(),
             os.getloadavg()[0]))
    print("| write_files | main thread idle: s | main thread busy: s |")
    print("|---|---|---|")
    for name, fn in impls:
        idle = statistics.median(one_round(fn, args.files, False, args.dir) for _ in range(args.rounds))
        busy = statistics.median(one_round(fn, args.files, True, args.dir) for _ in range(args.rounds))
        print("| %s | %.3f | %.3f |" % (name, idle, busy))


if __name__ == "__main__":
    main()
