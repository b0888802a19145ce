"""Embedded coordination store under gevent: what the controller's new-partition path costs, and what the event loop
sees meanwhile.

    .venv/bin/python bench/bench_coord.py 1000 10000

For each N: ``create_many`` of N partition-state znodes (``/brokers/topics/t/partitions/<p>/state``, parents made on
the way: 2N + 3 nodes), as the controller writes them for a new N-partition topic; then 200 greenlets setting one
state each at the same moment (group commit); then a restart (journal replay and a fresh snapshot). A bystander
greenlet wakes every 2 ms and records the longest gap between its wake-ups: how long the store held the loop.

Before the journal (kbroker/coord/embedded.py rewrote and fsync'd its whole tree for every change, on the loop):
N=1,000 took 5.1 s and N=10,000 535 s, the loop blocked throughout.
"""
from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

from kbroker.coord import EmbeddedBackend  # noqa: E402
from kbroker.coord.znodes import TopicPartitionStateZNode  # noqa: E402


class LoopWatch:
    """A greenlet waking every 2 ms; ``take()`` returns the longest gap since the last take, in ms."""

    def __init__(self):
        self.worst = 0.0
        self._stop = False
        self._g = gevent.spawn(self._run)

    def _run(self):
        last = time.monotonic()
        while not self._stop:
            gevent.sleep(0.002)
            now = time.monotonic()
            self.worst = max(self.worst, now - last)
            last = now

    def take(self):
        worst, self.worst = self.worst, 0.0
        return round(worst * 1000, 1)

    def stop(self):
        self._stop = True
        self._g.join()


def run(n):
    data_dir = tempfile.mkdtemp(prefix="bench-coord-")
    try:
        items = [(TopicPartitionStateZNode.path("t", p), TopicPartitionStateZNode.encode(0, 0, [0], 1), True)
                 for p in range(n)]
        b = EmbeddedBackend(data_dir).start()
        watch = LoopWatch()
        gevent.sleep(0.01)
        watch.take()
        t0 = time.monotonic()
        b.create_many(items)
        create_s, create_gap = time.monotonic() - t0, watch.take()
        t0 = time.monotonic()
        gevent.joinall([gevent.spawn(b.set, TopicPartitionStateZNode.path("t", p),
                                     TopicPartitionStateZNode.encode(0, 1, [0], 1)) for p in range(min(n, 200))])
        sets_s, sets_gap = time.monotonic() - t0, watch.take()
        watch.stop()
        b.stop()
        t0 = time.monotonic()
        b = EmbeddedBackend(data_dir).start()
        restart_s = time.monotonic() - t0
        assert len(b.get_children("/brokers/topics/t/partitions")) == n
        b.stop()
        return {"partitions": n, "create_many_s": round(create_s, 3), "create_worst_loop_gap_ms": create_gap,
                "200_concurrent_sets_s": round(sets_s, 3), "sets_worst_loop_gap_ms": sets_gap,
                "restart_s": round(restart_s, 3)}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["1000", "10000"]:
        print(json.dumps(run(int(arg))), flush=True)
