"""How long a broker takes to lead N partitions it already hosts on disk: the restart path (the first LeaderAndIsr
after a restart hosts every partition again and records its new leader epoch), the failover path (a follower of
N partitions becomes their leader) and the bump path (a leader of N partitions gets a new epoch for each). In-process: a LogManager and a ReplicaManager as broker.py wires them (a real
gevent thread pool as ``offload``), no network; the time is the LeaderAndIsr call's wall time and fsync count.

    .venv/bin/python bench/become_leader.py [--partitions 3000] [--dir /var/tmp/kb-become-leader]

Prints one JSON object. The directory should be on the disk the broker's logs use (not tmpfs: fsync costs are the
point); it is removed afterwards.
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gevent.threadpool import ThreadPool  # noqa: E402

from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership  # noqa: E402
from kbroker.log.config import LogConfig  # noqa: E402
from kbroker.log.manager import LogManager  # noqa: E402
from kbroker.replica.manager import ReplicaManager  # noqa: E402


def states(n, leader, epoch):
    return [PartitionLeadership("t%d" % (p // 10), p % 10, LeaderAndIsr(leader, epoch, (0, 1), epoch, 0), (0, 1))
            for p in range(n)]


def manager(root, pool):
    lm = LogManager([root], LogConfig(), broker_id=0)
    rm = ReplicaManager(0, lm, lambda topic: LogConfig(), isr_writer=None, connect=lambda b: None,
                        offload=lambda fn, *args: pool.apply(fn, args))
    return lm, rm


def timed(fn, *args):
    calls = [0]
    real = os.fsync

    def counting(fd):
        calls[0] += 1
        return real(fd)
    os.fsync = counting
    try:
        t0 = time.monotonic()
        result = fn(*args)
        took = time.monotonic() - t0
    finally:
        os.fsync = real
    assert set(result.values()) == {0}, result
    return round(took, 3), calls[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--dir", default="/var/tmp/kb-become-leader")
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    pool = ThreadPool(1)
    out = {"partitions": a.partitions, "load": os.getloadavg()[0]}
    try:
        lm, rm = manager(a.dir, pool)
        out["create_as_leader_s"], out["create_fsyncs"] = timed(rm.apply_leader_and_isr, 0, 1,
                                                                 states(a.partitions, 0, 1), [])
        lm.shutdown()
        lm, rm = manager(a.dir, pool)             # a restart: every log on disk, epoch files from epoch 1
        out["restart_lead_s"], out["restart_fsyncs"] = timed(rm.apply_leader_and_isr, 0, 1,
                                                             states(a.partitions, 0, 2), [])
        timed(rm.apply_leader_and_isr, 0, 1, states(a.partitions, 1, 3), [])
        out["failover_lead_s"], out["failover_fsyncs"] = timed(rm.apply_leader_and_isr, 0, 1,
                                                               states(a.partitions, 0, 4), [])
        # a leader -> leader LeaderAndIsr (a new epoch after the controller shrank the ISR)
        out["bump_lead_s"], out["bump_fsyncs"] = timed(rm.apply_leader_and_isr, 0, 1, states(a.partitions, 0, 5), [])
        lm.shutdown()
    finally:
        pool.kill()
        shutil.rmtree(a.dir, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
