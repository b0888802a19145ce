"""EndTxn (26), served v0-v4 (before KIP-890's transaction.version 2): commit or abort the producer's transaction.

Write on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); then the coordinator's answer
(kbroker/transaction/coordinator.py ``end_txn``): 0 once PrepareCommit/PrepareAbort is logged -- the markers are
written afterwards, and the producer's next transactional request gets CONCURRENT_TRANSACTIONS (51) until they are.
PRODUCER_FENCED (90) is INVALID_PRODUCER_EPOCH (47) below v2.
"""
from kbroker import errors
from kbroker.handlers.init_producer_id import fenced_code
from kbroker.security.acl import TRANSACTIONAL_ID, WRITE
from kbroker.server.router import handler


@handler(26, (0, 4))
def end_txn(ctx, req):
    tid = req["transactional_id"]
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
        return {"throttle_time_ms": 0, "error_code": errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    coordinator = ctx.services.transactions
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE}
    code = coordinator.end_txn(tid, req["producer_id"], req["producer_epoch"], req["committed"])
    return {"throttle_time_ms": 0, "error_code": fenced_code(code, ctx.api_version, 2)}
