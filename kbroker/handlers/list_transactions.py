"""ListTransactions (66) v0-v1 (KIP-664, v1's duration filter KIP-994): the transactional ids this broker
coordinates, filtered by state names (unknown names are echoed in ``unknown_state_filters``), producer ids and, v1,
how long they have been running. Only the ids the principal may Describe are listed (Kafka's filter, denials
not logged). COORDINATOR_NOT_AVAILABLE (15) without a coordinator, COORDINATOR_LOAD_IN_PROGRESS (14) while one of
its partitions is loading.
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import DESCRIBE, TRANSACTIONAL_ID
from kbroker.server.router import handler


@handler(66, (0, 1))
def list_transactions(ctx, req):
    coordinator = ctx.services.transactions
    if coordinator is None:
        return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "unknown_state_filters": [],
                "transaction_states": []}
    out = coordinator.list_transactions(req["state_filters"], req["producer_id_filters"],
                                        req["duration_filter"] if ctx.api_version >= 1 else -1)
    if out["transaction_states"] and auth.enforcing(ctx):
        allowed = auth.authorized_names(ctx, DESCRIBE, TRANSACTIONAL_ID,
                                        [s["transactional_id"] for s in out["transaction_states"]], False)
        out["transaction_states"] = [s for s in out["transaction_states"] if s["transactional_id"] in allowed]
    out["throttle_time_ms"] = 0
    return out
