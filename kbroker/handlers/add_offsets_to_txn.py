"""AddOffsetsToTxn (25), served v0-v4: add the consumer group's ``__consumer_offsets`` partition to the producer's
transaction (``sendOffsetsToTransaction``: the TxnOffsetCommit that follows goes to the group coordinator and
becomes visible with the transaction's COMMIT marker).

Write on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); Read on the Group, else
GROUP_AUTHORIZATION_FAILED (30); then the coordinator's answer for the partition ``groups.partition_for(group)``
(kbroker/transaction/coordinator.py ``add_partitions``). PRODUCER_FENCED (90) is INVALID_PRODUCER_EPOCH (47) below
v2.
"""
from kbroker import errors
from kbroker.handlers.init_producer_id import fenced_code
from kbroker.internal_topics import GROUP_METADATA_TOPIC
from kbroker.security.acl import GROUP, READ, TRANSACTIONAL_ID, WRITE
from kbroker.server.router import handler


@handler(25, (0, 4))
def add_offsets_to_txn(ctx, req):
    tid = req["transactional_id"]
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
        return {"throttle_time_ms": 0, "error_code": errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not ctx.authorize(READ, GROUP, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": errors.GROUP_AUTHORIZATION_FAILED}
    coordinator, groups = ctx.services.transactions, ctx.services.groups
    if coordinator is None or groups is None:
        return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE}
    code = coordinator.add_partitions(tid, req["producer_id"], req["producer_epoch"],
                                      {(GROUP_METADATA_TOPIC, groups.partition_for(req["group_id"]))})
    return {"throttle_time_ms": 0, "error_code": fenced_code(code, ctx.api_version, 2)}
