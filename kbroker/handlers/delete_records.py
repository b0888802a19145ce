"""DeleteRecords (21), served v0-v2 (KIP-107): move partitions' log start offsets forward.

Per partition (Kafka's ReplicaManager.deleteRecords + DelayedDeleteRecords):
- ``offset`` -1 means the high watermark; the leader's log start offset becomes ``offset``
  (``Partition.delete_records``): consumers reading below it get OFFSET_OUT_OF_RANGE (1), ListOffsets earliest
  answers it, retention deletes the segments wholly below it, ``log-start-offset-checkpoint`` keeps it.
- the answer waits (up to ``timeout_ms``) until the partition's low watermark -- the smallest log start offset over
  the leader and its ISR followers, which learn the leader's from their next Fetch and report theirs in the one
  after -- reaches ``offset``; then ``low_watermark`` is that value. Still short at the timeout: REQUEST_TIMED_OUT
  (7), low watermark -1 (the leader has moved already; the followers catch up anyway).
- errors: OFFSET_OUT_OF_RANGE (1) for an offset above the high watermark or below -1; POLICY_VIOLATION (44) when the
  topic's cleanup.policy has no ``delete``; UNKNOWN_TOPIC_OR_PARTITION (3); NOT_LEADER_OR_FOLLOWER (6), also when
  leadership moves during the wait; TOPIC_AUTHORIZATION_FAILED (29) without Delete on the topic (asked once per
  topic, before anything moves).
A partition named twice in one request is answered once per naming, the larger offset applying (Kafka keys its map
by partition, the last one winning; moving forward only makes that order irrelevant here).
"""
import time

from gevent.event import Event

from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import error_code, sliced
from kbroker.security.acl import DELETE, TOPIC
from kbroker.server.router import handler

INVALID_LOW_WATERMARK = -1
CLOSING_CHECK_S = 1.0


def _result(index, code, low=INVALID_LOW_WATERMARK):
    return {"partition_index": index, "low_watermark": low, "error_code": code}


@handler(21, (0, 2))
def delete_records(ctx, req):
    replicas = ctx.services.replicas
    denied = auth.denied_names(ctx, DELETE, TOPIC, (t["name"] for t in req["topics"]))
    topics = []
    pending = []            # (result dict, partition, required offset)
    for t in sliced(req["topics"]):
        results = []
        for p in t["partitions"]:
            index = p["partition_index"]
            if t["name"] in denied:
                results.append(_result(index, errors.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                part = replicas.leader_partition(t["name"], index)
                if p["offset"] < -1:
                    raise errors.OffsetOutOfRange("offset %d of %s-%d is negative" % (p["offset"], t["name"], index))
                required = part.delete_records(p["offset"])
                r = _result(index, errors.REQUEST_TIMED_OUT)
                pending.append((r, part, required))
            except Exception as e:  # noqa: BLE001 - one partition's failure is its own error code
                r = _result(index, error_code(e))
            results.append(r)
        topics.append({"name": t["name"], "partitions": results})
    if pending:
        parked = time.monotonic()
        _wait_for_low_watermarks(pending, req["timeout_ms"], ctx.connection)
        ctx.parked_s += time.monotonic() - parked       # waiting on followers is not charged to the request quota
    return {"throttle_time_ms": 0, "topics": topics}


def _settle(pending):
    """Answer every pending partition whose low watermark reached its offset (or which stopped leading); returns the
    ones still waiting."""
    left = []
    for r, part, required in sliced(pending):        # up to request.max.elements partitions: 20 ms slices
        if not part.is_leader:
            r["error_code"] = errors.NOT_LEADER_OR_FOLLOWER
            continue
        low = part.low_watermark()
        if low >= required:
            r["error_code"], r["low_watermark"] = 0, low
        else:
            left.append((r, part, required))
    return left


def _wait_for_low_watermarks(pending, timeout_ms, connection=None):
    """Park until every pending partition settled, ``timeout_ms`` passed or the client's connection is closing
    (looked at every ``CLOSING_CHECK_S``: a client may ask for a timeout of days). The partitions wake their
    ``waiters`` on a follower's changed log start offset, a HW move and a role change (partition.py)."""
    pending = _settle(pending)
    if not pending or timeout_ms <= 0:
        return
    deadline = time.monotonic() + timeout_ms / 1000.0
    ev = Event()
    parts = {id(part): part for _r, part, _o in pending}
    for part in parts.values():
        part.add_waiter(ev)
    try:
        while pending:
            left = deadline - time.monotonic()
            if left <= 0 or (connection is not None and connection.closing):
                return
            ev.wait(min(left, CLOSING_CHECK_S))
            ev.clear()
            pending = _settle(pending)
    finally:
        for part in parts.values():
            part.remove_waiter(ev)
