"""The DeleteRecords handler (21) over real Partitions: the low-watermark wait, its timeout, per-partition errors."""
import gevent
import pytest

from kbroker import errors
from kbroker.handlers.delete_records import delete_records
from kbroker.log import Log, LogConfig
from kbroker.replica.partition import Partition

from .ctx import make_ctx
from .test_log_helpers import append_batch


class Replicas:
    def __init__(self, parts):
        self.parts = parts

    def leader_partition(self, topic, p):
        part = self.parts.get((topic, p))
        if part is None:
            raise errors.UnknownTopicOrPartition("%s-%d" % (topic, p))
        return part


@pytest.fixture
def part(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig())
    for i in range(4):
        append_batch(log, [b"v"] * 3, ts=1000 + i)        # offsets 0..11
    p = Partition("t", 0, log, LogConfig(), broker_id=1)
    p.make_leader(1, [1, 2], [1, 2], 0)
    p.read_for_follower(2, 12, 1000, log_start_offset=0)  # in sync, start 0: the HW is 12
    assert p.high_watermark == 12
    return p


def request(offsets, timeout_ms):
    return {"topics": [{"name": t, "partitions": [{"partition_index": p, "offset": o}]} for t, p, o in offsets],
            "timeout_ms": timeout_ms}


def results(resp):
    return {(t["name"], r["partition_index"]): (r["error_code"], r["low_watermark"])
            for t in resp["topics"] for r in t["partitions"]}


def test_waits_for_the_follower_then_answers_its_low_watermark(part):
    ctx = make_ctx(2, replicas=Replicas({("t", 0): part}))
    # the follower applies the new start and reports it with its next fetch, 50 ms later
    later = gevent.spawn_later(0.05, part.read_for_follower, 2, 12, 1000, log_start_offset=6)
    resp = delete_records(ctx, request([("t", 0, 6)], 5000))
    later.join()
    assert results(resp) == {("t", 0): (0, 6)}
    assert part.log_start_offset == 6 and ctx.parked_s > 0


def test_timeout_and_errors(part):
    ctx = make_ctx(2, replicas=Replicas({("t", 0): part}))
    resp = delete_records(ctx, request([("t", 0, 9), ("t", 0, 13), ("t", 0, -2), ("u", 0, 1)], 30))
    got = [(r["error_code"], r["low_watermark"]) for t in resp["topics"] for r in t["partitions"]]
    # the follower never reported 9: REQUEST_TIMED_OUT (the leader moved already); above the HW and below -1: 1
    assert got == [(errors.REQUEST_TIMED_OUT, -1), (errors.OFFSET_OUT_OF_RANGE, -1), (errors.OFFSET_OUT_OF_RANGE, -1),
                   (errors.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert part.log_start_offset == 9


def test_leadership_lost_while_waiting(part):
    ctx = make_ctx(2, replicas=Replicas({("t", 0): part}))
    later = gevent.spawn_later(0.05, part.make_follower, 2, 2, [1, 2], [1, 2], 0)
    resp = delete_records(ctx, request([("t", 0, 3)], 5000))
    later.join()
    assert results(resp) == {("t", 0): (errors.NOT_LEADER_OR_FOLLOWER, -1)}


def test_a_closing_connection_ends_the_wait(part):
    ctx = make_ctx(2, replicas=Replicas({("t", 0): part}))
    gevent.spawn_later(0.05, setattr, ctx.connection, "closing", True)
    started = gevent.get_hub().loop.now()
    resp = delete_records(ctx, request([("t", 0, 4)], 600000))       # ten minutes asked
    assert results(resp) == {("t", 0): (errors.REQUEST_TIMED_OUT, -1)}
    assert gevent.get_hub().loop.now() - started < 3
