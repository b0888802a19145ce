"""DescribeTransactions (65) v0 (KIP-664): the coordinator's state of each named transactional id.

Per id: Describe on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); an id this broker does not
coordinate NOT_COORDINATOR (16) (COORDINATOR_LOAD_IN_PROGRESS 14 while loading), an unknown one
TRANSACTIONAL_ID_NOT_FOUND (105). The partitions listed are those still without a marker; topics the principal may
not Describe are left out, as Kafka does. Up to request.max.elements ids, looked at in 20 ms slices.
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import sliced
from kbroker.security.acl import DESCRIBE, TOPIC, TRANSACTIONAL_ID
from kbroker.server.router import handler


def _refused(tid, code):
    return {"error_code": code, "transactional_id": tid, "transaction_state": "", "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}


@handler(65, (0, 0))
def describe_transactions(ctx, req):
    coordinator = ctx.services.transactions
    out = []
    for tid in sliced(req["transactional_ids"]):
        if not ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, tid):
            out.append(_refused(tid, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        if coordinator is None:
            out.append(_refused(tid, errors.COORDINATOR_NOT_AVAILABLE))
            continue
        state = coordinator.describe(tid)
        if state["topics"] and auth.enforcing(ctx):
            allowed = auth.authorized_names(ctx, DESCRIBE, TOPIC, [t["topic"] for t in state["topics"]], False)
            state["topics"] = [t for t in state["topics"] if t["topic"] in allowed]
        out.append(state)
    return {"throttle_time_ms": 0, "transaction_states": out}
