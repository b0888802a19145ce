"""Produce (0), served v0-v9.

Behaviour: acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS 21 for every partition). Each partition's records go
through the record layer's validator (CRC, sizes, timestamps, v2 structure; v0/v1 message sets are up-converted to a
v2 batch), then idempotence checks, then one ``os.write`` to the active segment. Nothing of a rejected batch reaches
the log. Errors are per partition: UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6), CORRUPT_MESSAGE (2),
MESSAGE_TOO_LARGE (10), RECORD_LIST_TOO_LARGE (18), INVALID_TIMESTAMP (32), OUT_OF_ORDER_SEQUENCE_NUMBER (45),
INVALID_PRODUCER_EPOCH (47), UNSUPPORTED_COMPRESSION_TYPE (76, zstd before v7), INVALID_RECORD (87), and
INVALID_TOPIC_EXCEPTION (17) for internal topics. A duplicate idempotent batch is answered with its original base
offset. acks=0 gets no response at all (Kafka's contract); acks=1 is answered after the local append.
acks=-1 (all): before the append, an ISR smaller than min.insync.replicas (topic, else broker) gets
NOT_ENOUGH_REPLICAS (19) and nothing is appended. After appending every partition of the request, the request waits
(the replica layer's delayed produce, kbroker/replica/delayed_produce.py) until each partition's HW is past its
batch's last offset, at most ``timeout_ms``; partitions still short then answer REQUEST_TIMED_OUT (7) (the records
stay in the log, as in Kafka). A partition whose HW got there while its ISR is below min.insync.replicas answers
NOT_ENOUGH_REPLICAS_AFTER_APPEND (20); one whose broker stopped leading meanwhile answers NOT_LEADER_OR_FOLLOWER (6).
With ISR = [leader] the HW moves in the append itself, so acks=-1 costs no Event, timer or greenlet switch.
Transactional batches (KIP-98): a producer's first transactional batch opens its transaction on the partition (the
last stable offset stays at its first offset until the coordinator's marker, kbroker/replica/producer_state.py); a
non-transactional batch from a producer whose transaction is open answers INVALID_TXN_STATE (48).
Quotas (``ctx.services.quotas``, kbroker/quota): the bytes of every partition entry's records -- appended or not,
as Kafka records the request whatever became of it -- go to the ``producer_byte_rate`` quota once the request is
done, and its throttle to ``ctx.throttle`` (the connection answers, then mutes: KIP-219; an acks=0 request is
muted too). Time spent waiting for acks=all is not charged to the request quota; acks=0 requests are exempt
from it (Kafka's handleProduceRequest).

Authorization (Kafka's KafkaApis.handleProduceRequest, ``kbroker/handlers/auth.py``), before anything is appended:
a request whose records are transactional (the first batch of any partition has the transactional bit) needs
Write on its ``transactional_id`` (a null one never has it), else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) -- and an acks=0 request has its connection closed, Kafka's answer
when a request that wants no response fails as a whole. Then each topic needs Write, asked once per topic: the
partitions of a denied topic answer TOPIC_AUTHORIZATION_FAILED (29) and nothing of them is appended, whatever
their acks, records or existence. Idempotent batches need no IdempotentWrite here (Kafka >= 2.8, KIP-679:
InitProducerId is where idempotence is authorized).

Bounded work (issue 8): all partition entries of one request share one decompression budget,
``max.request.decompressed.bytes`` (32 MiB; kbroker's key, Kafka has none): an entry that inflates beyond what the
earlier entries left answers MESSAGE_TOO_LARGE (10), one that inflates beyond the whole budget CORRUPT_MESSAGE (2)
(the rules are in kbroker/record/__init__.py). And a request that has held the event loop for ``SLICE_S`` (20 ms)
of appending yields before its next entry, so other connections are served between the entries of a large request
(a connection serves one request at a time, so its own later requests still wait their turn).

Metrics (``ctx.services.stats.topics``, kbroker/server/stats.py; None = not counted): every partition entry of a
request with valid acks and an authorized topic counts once (Kafka's BrokerTopicMetrics: a total produce request
per partition; messages -- the appended batch's offset span, no per-record work -- and bytes in when appended;
failed and rejected per ``TopicStats.append_failed``). An unknown topic counts in the totals only, so made-up
names cannot grow the per-topic table.
"""
import time

from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import error_code
from kbroker.internal_topics import is_internal
from kbroker.record import DEFAULT_REQUEST_DECOMPRESSED_BYTES, request_budget
from kbroker.record.batch import ATTR_TRANSACTIONAL, ATTRIBUTES_AT, MAGIC, MAGIC_AT
from kbroker.replica.delayed_produce import DelayedProduce
from kbroker.security.acl import TOPIC, TRANSACTIONAL_ID, WRITE
from kbroker.server.connection import CloseConnection
from kbroker.server.router import handler
from kbroker.timeslice import yield_to_loop

# Appending time after which a request lets other greenlets run before its next partition entry.
SLICE_S = 0.02

@handler(0, (0, 9))
def produce(ctx, req):
    replicas = ctx.services.replicas
    version = ctx.api_version
    acks = req["acks"]
    responses = []
    delayed = DelayedProduce() if acks == -1 else None
    waiting = []                # [(partition response, Ack)] of the acks=-1 appends
    stats = ctx.services.stats
    topic_stats = stats.topics if stats is not None and acks in (-1, 0, 1) else None
    refused = _transactional_refusal(ctx, req)
    if refused:
        if acks == 0:
            raise CloseConnection("transactional produce without Write on its transactional id")
        return _refuse_all(req, refused)
    denied = auth.denied_names(ctx, WRITE, TOPIC, (t["name"] for t in req["topic_data"]))
    limit = ctx.services.config.get("max.request.decompressed.bytes", DEFAULT_REQUEST_DECOMPRESSED_BYTES)
    with request_budget(limit):
        slice_start = time.monotonic()
        for t in req["topic_data"]:
            name = t["name"]
            parts = []
            for pd in t["partition_data"]:
                if name in denied:
                    parts.append(_partition_response(pd["index"], errors.TOPIC_AUTHORIZATION_FAILED))
                    continue
                parts.append(_append_one(replicas, version, acks, name, pd, delayed, waiting, topic_stats))
                if time.monotonic() - slice_start >= SLICE_S:
                    yield_to_loop()         # not gevent.sleep(0): that never polls sockets (kbroker/timeslice.py)
                    slice_start = time.monotonic()
            responses.append({"name": name, "partition_responses": parts})
    if waiting:
        conn = ctx.connection
        parked = time.monotonic()
        delayed.wait(req["timeout_ms"], (lambda: conn.closing) if conn is not None else None)
        ctx.parked_s += time.monotonic() - parked
        for resp, ack in waiting:
            if ack.error_code:
                resp["error_code"] = ack.error_code
    quotas = ctx.services.quotas
    if quotas is not None and not ctx.identity.in_process:
        _record_quota(ctx, quotas, req, acks)
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def _record_quota(ctx, quotas, req, acks):
    """The request's record bytes into producer_byte_rate (module docstring: Quotas)."""
    if acks == 0:
        ctx.quota_exempt = True
    if not quotas.produce.enabled():
        return
    size = 0
    for t in req["topic_data"]:
        for pd in t["partition_data"]:
            records = pd["records"]
            if records is not None:
                size += len(records)
    ctx.throttle(quotas.produce.record(ctx.identity, ctx.client_id, size))


def _partition_response(index, code=0):
    return {"index": index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": None}


def _is_transactional(records):
    """Whether a partition entry's first batch is a v2 batch with the transactional bit (Kafka's
    RequestUtils.hasTransactionalRecords looks at the first batch only). Three byte reads; a short or malformed
    entry is not transactional here (the record layer rejects it later)."""
    if records is None or len(records) <= ATTRIBUTES_AT + 1 or records[MAGIC_AT] != MAGIC:
        return False
    return bool(records[ATTRIBUTES_AT + 1] & ATTR_TRANSACTIONAL)  # int16 big-endian: the flags are the low byte


def _transactional_refusal(ctx, req):
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED when the request carries transactional records and its principal may
    not Write its transactional_id (or it has none), else 0. Walks the entries only until the first
    transactional one (~0.3 us an entry)."""
    if not any(_is_transactional(pd["records"]) for t in req["topic_data"] for pd in t["partition_data"]):
        return 0
    tid = req.get("transactional_id")
    if tid is not None and ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
        return 0
    return errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _refuse_all(req, code):
    """The whole request answered with ``code`` for each of its partitions (Kafka's ProduceRequest error
    response), nothing appended."""
    return {"throttle_time_ms": 0, "responses": [
        {"name": t["name"], "partition_responses": [_partition_response(pd["index"], code)
                                                    for pd in t["partition_data"]]}
        for t in req["topic_data"]]}


def _append_one(replicas, version, acks, topic, pd, delayed, waiting, stats=None):
    """One partition entry -> its partition response; an acks=-1 append joins ``delayed`` and ``waiting``;
    counted in ``stats`` (BrokerTopicStats) when given."""
    resp = _partition_response(pd["index"])
    try:
        if acks not in (-1, 0, 1):
            raise errors.InvalidRequiredAcks("acks must be -1, 0 or 1, got %d" % acks)
        if is_internal(topic):
            # No client may write there, whatever its client_id (Kafka lets "__admin_client" through; issue 8):
            # the group coordinator appends to __consumer_offsets in-process, never through Produce.
            raise errors.InvalidTopicException("cannot produce to internal topic %s" % topic)
        part = replicas.leader_partition(topic, pd["index"])
        # Null is an empty record set; the record layer answers it like Kafka: INVALID_RECORD (87) for v3+
        # ("exactly one record batch"), CORRUPT_MESSAGE (2) for the message sets of v0-v2.
        records = b"" if pd["records"] is None else pd["records"]
        if delayed is not None:
            res, ack = delayed.append(part, records, version)
            waiting.append((resp, ack))
        else:
            res = part.append(records, version, acks)
        resp["base_offset"] = res.base_offset
        resp["log_append_time_ms"] = res.log_append_time
        resp["log_start_offset"] = res.log_start_offset
        if stats is not None:
            stats.topic(topic).appended(res.last_offset - res.base_offset + 1, len(records))
    except Exception as e:  # noqa: BLE001 - every failure becomes this partition's error code
        code = resp["error_code"] = error_code(e, version >= 4, errors.NOT_LEADER_OR_FOLLOWER)
        if isinstance(e, errors.KafkaError) and e.message:
            resp["error_message"] = e.message
        if stats is not None:
            size = len(pd["records"]) if pd["records"] is not None else 0
            (stats.all if code == errors.UNKNOWN_TOPIC_OR_PARTITION else stats.topic(topic)).append_failed(code, size)
    return resp
