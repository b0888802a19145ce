"""ListOffsets (2), served v0-v7.

Behaviour: timestamp -1 = latest (the high watermark for consumers, with the current leader epoch), -2 = earliest
(log start offset, with the epoch of the leader-epoch cache's first entry when it starts at or before it, else
-1). Any other timestamp = the first *record* whose timestamp is >= it, answered with that record's offset and
timestamp and its batch's partition leader epoch (Kafka's FileRecords.searchForTimestamp: the time index narrows
the walk to batches whose max timestamp is >= the target, then the records inside are looked at, so a batch
written by a lingering producer answers the exact record, not its base offset and max timestamp), or offset -1 /
timestamp -1 when there is none below the high watermark (v1+). With isolation_level 1 (read_committed, v2+) the
last stable offset takes the high watermark's place in both rules, as in Kafka. -3 (v7, KIP-734: Kafka's Java admin
``OffsetSpec.maxTimestamp()``) = the first record carrying the log's largest timestamp (the segments' max
timestamps, then the same record lookup), -1/-1 when it is not below the high watermark or no record has a
timestamp. Looking inside a batch decodes it (decompressing when needed), which a worker thread does
(``workers.py``): one stored batch may hold 10^5+ records.
v0 answers ``old_style_offsets`` with one offset (max_num_offsets is honoured only as "at most"), like kafka-python
and librdkafka expect. Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6), and
TOPIC_AUTHORIZATION_FAILED (29) for every partition of a topic the principal may not Describe (asked once per
topic, before anything is looked up: Kafka's KafkaApis.handleListOffsetRequest).
Deviations: a batch of more than 100 000 records (``workers.DECODE_MAX_RECORDS``) is answered by its base offset
and max timestamp, without decoding it. v0 with an arbitrary timestamp uses the exact record lookup instead of
Kafka 0.10's segment-modification-time approximation (a better answer to the same question).
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import error_code
from kbroker.handlers.workers import DECODE_MAX_RECORDS, gc_paused, run_in_worker
from kbroker.record import batch_header, batch_records
from kbroker.security.acl import DESCRIBE, TOPIC
from kbroker.server.router import handler

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


def first_record_at_or_after(batch, timestamp):
    """``(offset, timestamp, partition leader epoch)`` of the first record of the stored v2 ``batch`` whose
    timestamp is >= ``timestamp`` (LogAppendTime batches: every record has the batch's max timestamp), or None.
    A batch of more than ``DECODE_MAX_RECORDS`` records is not decoded: its base offset and max timestamp answer
    (at or before the exact record, so a consumer seeking by time skips nothing)."""
    h = batch_header(batch, 0)
    if h.records_count > DECODE_MAX_RECORDS:
        return h.base_offset, h.max_timestamp, h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1
    with gc_paused():
        for offset, ts, _key, _value, _headers in batch_records(batch, 0, h):
            if ts >= timestamp:
                return offset, ts, h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1
    return None


def _resolve_in_worker(batch, timestamp):
    return run_in_worker(first_record_at_or_after, batch, timestamp)


def _earliest_epoch(part):
    """Kafka's: the first cached epoch if it starts at or before the log start offset, else -1."""
    cache = getattr(part, "epoch_cache", None)
    entries = cache.entries() if cache is not None else []
    if entries and entries[0][1] <= part.log_start_offset:
        return entries[0][0]
    return -1


def _max_timestamp(log):
    """The largest record timestamp in the log, or -1 when no batch carries one."""
    return max((s.max_timestamp_so_far for s in log.segments), default=-1)


@handler(2, (0, 7))
def list_offsets(ctx, req):
    replicas = ctx.services.replicas
    version = ctx.api_version
    committed = version >= 2 and req.get("isolation_level", 0) == 1
    denied = auth.denied_names(ctx, DESCRIBE, TOPIC, (t["name"] for t in req["topics"]))
    topics = []
    for t in req["topics"]:
        parts = []
        refused = t["name"] in denied
        for p in t["partitions"]:
            r = {"partition_index": p["partition_index"], "error_code": 0, "old_style_offsets": [],
                 "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if refused:
                r["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                parts.append(r)
                continue
            try:
                part = replicas.leader_partition(t["name"], p["partition_index"])
                ts = p["timestamp"]
                fetchable = part.last_stable_offset if committed else part.high_watermark
                if ts == LATEST:
                    off, found_ts, epoch = fetchable, -1, part.leader_epoch
                elif ts == EARLIEST:
                    off, found_ts, epoch = part.log_start_offset, -1, _earliest_epoch(part)
                else:
                    if ts == MAX_TIMESTAMP:
                        ts = _max_timestamp(part.log)
                        hit = part.log.offset_for_timestamp(ts, resolver=_resolve_in_worker) if ts >= 0 else None
                    else:
                        hit = part.log.offset_for_timestamp(ts, resolver=_resolve_in_worker)
                    off, found_ts, epoch = hit if hit is not None else (-1, -1, -1)
                    if hit is not None and off >= fetchable:
                        off, found_ts, epoch = -1, -1, -1
                r["offset"], r["timestamp"], r["leader_epoch"] = off, found_ts, epoch
                if version == 0:
                    r["old_style_offsets"] = [off] if (off >= 0 and p["max_num_offsets"] > 0) else []
            except Exception as e:  # noqa: BLE001
                r["error_code"] = error_code(e, False)
            parts.append(r)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
