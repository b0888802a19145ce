"""Fetch (1), served v0-v12 (consumers; follower fetches arrive with replication).

Behaviour: for each requested partition, return record batches from ``fetch_offset`` up to the high watermark, at
most ``partition_max_bytes`` per partition and ``max_bytes`` (v3+) per response -- except that the first partition
with data always gets at least one whole batch even if it is larger (KIP-74), so a consumer can never get stuck on a
big batch. If fewer than ``min_bytes`` are ready the request waits up to ``max_wait_ms`` and returns the moment an
append lands on any requested partition (each Partition wakes its waiters on append; no polling), or at once with
what it has when the broker shuts down (the connection is then closing).
Stored bytes leave through ``sendfile`` for v4+; v0-v3 clients can't read v2 batches, so the batches are
down-converted (magic 0 for v0/v1, magic 1 for v2/v3; headers are dropped, as in Kafka).
Errors per partition: OFFSET_OUT_OF_RANGE (1), UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6).
Fetch sessions (v7+) are answered sessionless (session_id 0): clients then send full requests every time.
Deviation: zstd batches are not withheld from v4-v9 fetchers (Kafka answers UNSUPPORTED_COMPRESSION_TYPE); clients
that cannot read zstd do not produce it either.
"""
import time

from gevent.event import Event

from kbroker.handlers.common import error_code
from kbroker.record import down_convert
from kbroker.server.router import handler


@handler(1, (0, 12))
def fetch(ctx, req):
    broker = ctx.broker
    version = ctx.api_version
    max_wait = max(0, req["max_wait_ms"]) / 1000.0
    min_bytes = req["min_bytes"]
    deadline = time.monotonic() + max_wait
    wanted = [(t["topic"], p) for t in req["topics"] for p in t["partitions"]]
    while True:
        responses, total, had_error = _read_all(broker, version, req, wanted)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or had_error or remaining <= 0 or not wanted or ctx.connection.closing:
            break
        ev = Event()
        parts = [broker.local_partition(topic, p["partition"]) for topic, p in wanted]
        parts = [p for p in parts if p is not None]
        for p in parts:
            p.add_waiter(ev)
        try:
            # Re-check after registering: an append between the read and now would otherwise be missed.
            if not ev.is_set():
                ev.wait(remaining)
        finally:
            for p in parts:
                p.remove_waiter(ev)
        if not ev.is_set():
            responses, total, had_error = _read_all(broker, version, req, wanted)
            break
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}


def _read_all(broker, version, req, wanted):
    budget = req["max_bytes"] if version >= 3 else 0x7FFFFFFF
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
            hw = part.high_watermark
            r["high_watermark"] = r["last_stable_offset"] = hw
            r["log_start_offset"] = part.log_start_offset
            limit = min(p["partition_max_bytes"], budget)
            sl = None
            if limit > 0 or total == 0:
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

