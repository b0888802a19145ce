"""kbroker.handlers.produce: the request-wide decompression budget and yielding between entries (issue 8)."""
import time

import gevent

from kbroker import errors
from kbroker.handlers import produce as P
from kbroker.record import _REQUEST_BUDGET, DEFAULT_REQUEST_DECOMPRESSED_BYTES
from tests.unit.ctx import make_ctx


class _Part:
    """A leader partition that records what each append saw and may take a while."""

    def __init__(self, seen, busy_s=0.0):
        self.seen, self.busy_s = seen, busy_s
        self.leadership = 1

    def append(self, records, version, acks):
        budget = _REQUEST_BUDGET.get()
        self.seen.append((budget.limit, budget.remaining) if budget is not None else None)
        budget.take(1000)  # as validate_for_append does for what it inflates
        time.sleep(self.busy_s)  # work that holds the event loop
        return type("R", (), {"base_offset": 0, "log_append_time": -1, "log_start_offset": 0, "last_offset": 0})

    def ack_status(self, last_offset, leadership):
        return 0


class _Replicas:
    """The replica collaborator: leads only topic t, every partition of it is ``part``."""

    def __init__(self, part):
        self.part = part

    def leader_partition(self, topic, p):
        if topic != "t":
            raise errors.UnknownTopicOrPartition("x")
        return self.part


def _ctx(part, config):
    return make_ctx(9, replicas=_Replicas(part), config=config)


def _request(n):
    return {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": b""} for i in range(n)]}]}


def test_every_entry_of_a_request_shares_one_budget_from_the_config():
    seen = []
    resp = P.produce(_ctx(_Part(seen), {"max.request.decompressed.bytes": 5000}), _request(3))
    assert [p["error_code"] for p in resp["responses"][0]["partition_responses"]] == [0, 0, 0]
    assert seen == [(5000, 5000), (5000, 4000), (5000, 3000)]
    assert _REQUEST_BUDGET.get() is None  # closed after the request
    seen.clear()
    P.produce(_ctx(_Part(seen), {}), _request(1))  # a config without the key: the default
    assert seen == [(DEFAULT_REQUEST_DECOMPRESSED_BYTES, DEFAULT_REQUEST_DECOMPRESSED_BYTES)]


def test_a_long_request_lets_other_greenlets_run_between_entries():
    """Each entry holds the loop 15 ms; after every SLICE_S (20 ms) of that the handler yields, so a bystander
    greenlet runs during the request instead of after it."""
    ticks = []

    def bystander():
        while True:
            ticks.append(time.monotonic())
            gevent.sleep(0)

    g = gevent.spawn(bystander)
    gevent.sleep(0)
    try:
        seen = []
        t0 = time.monotonic()
        P.produce(_ctx(_Part(seen, busy_s=0.015), {}), _request(8))
        t1 = time.monotonic()
    finally:
        g.kill()
    during = [t for t in ticks if t0 < t < t1]
    assert len(seen) == 8
    assert len(during) >= 3  # yielded about every second entry
    gaps = [b - a for a, b in zip([t0] + during, during + [t1])]
    assert max(gaps) < 0.06
