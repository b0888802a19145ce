"""ListOffsets (2), served v0-v6.

Behaviour: timestamp -1 = latest (the high watermark for consumers), -2 = earliest (log start offset); any other
timestamp = the first offset whose batch timestamp is >= it, or offset -1 / timestamp -1 when there is none (v1+).
v0 answers ``old_style_offsets`` with one offset (max_num_offsets is honoured only as "at most"), like kafka-python
and librdkafka expect. Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6).
Deviation: v0 with an arbitrary timestamp uses the exact time index lookup instead of Kafka 0.10's
segment-modification-time approximation (a better answer to the same question).
"""
from kbroker.handlers.common import error_code
from kbroker.server.router import handler

LATEST = -1
EARLIEST = -2


@handler(2, (0, 6))
def list_offsets(ctx, req):
    broker = ctx.broker
    version = ctx.api_version
    topics = []
    for t in req["topics"]:
        parts = []
        for p in t["partitions"]:
            r = {"partition_index": p["partition_index"], "error_code": 0, "old_style_offsets": [],
                 "timestamp": -1, "offset": -1, "leader_epoch": -1}
            try:
                part = broker.leader_partition(t["name"], p["partition_index"])
                ts = p["timestamp"]
                if ts == LATEST:
                    off, found_ts = part.high_watermark, -1
                elif ts == EARLIEST:
                    off, found_ts = part.log_start_offset, -1
                else:
                    hit = part.log.offset_for_timestamp(ts)
                    off, found_ts = hit if hit is not None else (-1, -1)
                    if hit is not None and off >= part.high_watermark:
                        off, found_ts = -1, -1
                r["offset"], r["timestamp"] = off, found_ts
                r["leader_epoch"] = part.leader_epoch
                if version == 0:
                    r["old_style_offsets"] = [off] if (off >= 0 and p["max_num_offsets"] > 0) else []
            except Exception as e:  # noqa: BLE001
                r["error_code"] = error_code(e, False)
            parts.append(r)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
