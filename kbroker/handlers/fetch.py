"""Fetch (1), served v0-v12: consumers, and follower replicas (replica_id >= 0; v15+ would carry it in
replica_state).

Consumers: for each requested partition, return record batches from ``fetch_offset`` up to the high watermark, at
most ``partition_max_bytes`` per partition and ``max_bytes`` (v3+) per response -- except that the first partition
with data always gets at least one whole batch even if it is larger (KIP-74), so a consumer can never get stuck on a
big batch. If fewer than ``min_bytes`` are ready the request waits up to ``max_wait_ms`` and returns the moment the
high watermark of a requested partition advances (each Partition wakes its waiters; no polling), or at once with
what it has when the broker shuts down (the connection is then closing).
Followers: the same long poll, but they read up to the leader's LEO and are woken by every append; the first pass
of the request reports the follower's LEO (= its fetch_offset) to the leader Partition (caught-up time, ISR
expansion, HW advance -- which completes delayed produces). Only the leader answers (NOT_LEADER_OR_FOLLOWER 6).
current_leader_epoch (v9+, -1 = unknown) is checked for everybody: older than the partition's ->
FENCED_LEADER_EPOCH (74), newer -> UNKNOWN_LEADER_EPOCH (75).
Stored bytes leave through ``sendfile`` for v4+; v0-v3 clients can't read v2 batches, so the batches are
down-converted (magic 0 for v0/v1, magic 1 for v2/v3; headers are dropped, as in Kafka).
Errors per partition: OFFSET_OUT_OF_RANGE (1), UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6),
FENCED_LEADER_EPOCH (74), UNKNOWN_LEADER_EPOCH (75).
Fetch sessions (v7+) are answered sessionless (session_id 0): clients then send full requests every time.
Deviation: zstd batches are not withheld from v4-v9 fetchers (Kafka answers UNSUPPORTED_COMPRESSION_TYPE); clients
that cannot read zstd do not produce it either.
"""
import time

from gevent.event import Event

from kbroker.handlers.common import error_code
from kbroker.record import down_convert
from kbroker.server.router import handler


def replica_id_of(req):
    state = req.get("replica_state")
    if state is not None and state.get("replica_id", -1) >= 0:
        return state["replica_id"]
    return req.get("replica_id", -1)


@handler(1, (0, 12))
def fetch(ctx, req):
    broker = ctx.broker
    version = ctx.api_version
    replica_id = replica_id_of(req)
    follower = replica_id >= 0
    max_wait = max(0, req["max_wait_ms"]) / 1000.0
    min_bytes = req["min_bytes"]
    deadline = time.monotonic() + max_wait
    wanted = [(t["topic"], p) for t in req["topics"] for p in t["partitions"]]
    first = True
    while True:
        responses, total, had_error = _read_all(broker, version, req, wanted, replica_id, first)
        first = False
        remaining = deadline - time.monotonic()
        if total >= min_bytes or had_error or remaining <= 0 or not wanted or ctx.connection.closing:
            break
        ev = Event()
        parts = [broker.local_partition(topic, p["partition"]) for topic, p in wanted]
        parts = [p for p in parts if p is not None]
        for p in parts:
            p.add_waiter(ev, follower)
        try:
            # Re-check after registering: an append between the read and now would otherwise be missed.
            if not ev.is_set():
                ev.wait(remaining)
        finally:
            for p in parts:
                p.remove_waiter(ev, follower)
        if not ev.is_set():
            responses, total, had_error = _read_all(broker, version, req, wanted, replica_id, False)
            break
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}


def _read_all(broker, version, req, wanted, replica_id, first):
    budget = req["max_bytes"] if version >= 3 else 0x7FFFFFFF
    follower = replica_id >= 0
    total = 0
    had_error = False
    out = []
    by_topic = {}
    for topic, p in wanted:
        r = {"partition_index": p["partition"], "error_code": 0, "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "aborted_transactions": None if version >= 4 else [],
             "preferred_read_replica": -1, "records": None}
        try:
            part = broker.leader_partition(topic, p["partition"])
            part.check_leader_epoch(p.get("current_leader_epoch", -1))
            hw = part.high_watermark
            r["high_watermark"] = r["last_stable_offset"] = hw
            r["log_start_offset"] = part.log_start_offset
            limit = min(p["partition_max_bytes"], budget)
            sl = None
            if limit > 0 or total == 0:
                if follower:
                    sl = part.read_for_follower(replica_id, p["fetch_offset"], max(limit, 1), min_one=(total == 0),
                                                record=first)
                    r["high_watermark"] = r["last_stable_offset"] = part.high_watermark
                else:
                    sl = part.read(p["fetch_offset"], max(limit, 1), min_one=(total == 0))
            if sl is not None and sl.region.size > 0:
                if version < 4:
                    data = down_convert(sl.region.read_bytes(), 0 if version < 2 else 1)
                    r["records"] = data
                    size = len(data)
                else:
                    r["records"] = sl.region
                    size = sl.region.size
                total += size
                budget -= size
            else:
                r["records"] = b""
        except Exception as e:  # noqa: BLE001
            r["error_code"] = error_code(e, version >= 4)
            r["records"] = b""
            had_error = True
        lst = by_topic.get(topic)
        if lst is None:
            lst = by_topic[topic] = []
            out.append({"topic": topic, "partitions": lst})
        lst.append(r)
    return out, total, had_error
