"""AddPartitionsToTxn (24), served v0-v3 (the client versions; v4+ is KIP-890's broker-to-broker batch form, not
served): add partitions to the producer's ongoing transaction, before it produces to them.

Checks, in Kafka's order (KafkaApis.handleAddPartitionsToTxnRequest), each answered for every partition of the
request: Write on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); then per partition: Write on
its topic (internal topics never: ``__consumer_offsets`` is added by AddOffsetsToTxn), else
TOPIC_AUTHORIZATION_FAILED (29); a partition the metadata cache does not know, UNKNOWN_TOPIC_OR_PARTITION (3). If
any partition failed, the others answer OPERATION_NOT_ATTEMPTED (55) and nothing is added. Otherwise the
coordinator's answer (kbroker/transaction/coordinator.py ``add_partitions``) is every partition's error;
PRODUCER_FENCED (90) is answered as INVALID_PRODUCER_EPOCH (47) below v2.
"""
from kbroker import errors
from kbroker.handlers.common import sliced
from kbroker.handlers.init_producer_id import fenced_code
from kbroker.internal_topics import is_internal
from kbroker.handlers import auth
from kbroker.security.acl import TOPIC, TRANSACTIONAL_ID, WRITE
from kbroker.server.router import handler


def _answer(partitions, code_of):
    by_topic = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append({"partition_index": p, "partition_error_code": code_of((t, p))})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t, "results_by_partition": rs} for t, rs in by_topic.items()]}


@handler(24, (0, 3))
def add_partitions_to_txn(ctx, req):
    tid = req["v3_and_below_transactional_id"]
    partitions = [(t["name"], p) for t in req["v3_and_below_topics"] for p in t["partitions"]]
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
        return _answer(partitions, lambda tp: errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    allowed = auth.authorized_names(ctx, WRITE, TOPIC, (t for t, _ in partitions if not is_internal(t)))
    metadata = ctx.services.metadata
    failed = {}
    for tp in sliced(partitions):
        if tp[0] not in allowed:
            failed[tp] = errors.TOPIC_AUTHORIZATION_FAILED
        elif metadata.partition(tp[0], tp[1]) is None:
            failed[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
    if failed:
        return _answer(partitions, lambda tp: failed.get(tp, errors.OPERATION_NOT_ATTEMPTED))
    coordinator = ctx.services.transactions
    if coordinator is None:
        code = errors.COORDINATOR_NOT_AVAILABLE
    else:
        code = coordinator.add_partitions(tid, req["v3_and_below_producer_id"], req["v3_and_below_producer_epoch"],
                                          set(partitions))
    code = fenced_code(code, ctx.api_version, 2)
    return _answer(partitions, lambda tp: code)
