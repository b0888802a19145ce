"""InitProducerId (22), served v0-v4, for idempotent producers only.

Behaviour: a null ``transactional_id`` gets a fresh producer id (leased in blocks of 1000 from
``/latest_producer_id_block``, Kafka's layout) with epoch 0. v3+ with an existing producer id/epoch (KIP-360: the
producer wants to bump its epoch after an error) keeps the id and returns epoch + 1; at epoch 32767 a new id is
issued instead. A non-null transactional_id gets COORDINATOR_NOT_AVAILABLE (15): there is no transaction
coordinator yet (deviation from Kafka >= 0.11, documented in the README).

Authorization (Kafka >= 2.8's, KIP-679), before any id is leased: a non-null transactional_id needs Write on that
TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); a null one needs IdempotentWrite on the Cluster
or Write on at least one topic (any literal, prefixed or wildcard topic ACL allowing Write), else
CLUSTER_AUTHORIZATION_FAILED (31).
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE
from kbroker.server.router import handler

MAX_EPOCH = 32767


def _error(code):
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


@handler(22, (0, 4))
def init_producer_id(ctx, req):
    tid = req["transactional_id"]
    if tid is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
            return _error(errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return _error(errors.COORDINATOR_NOT_AVAILABLE)
    if not auth.cluster(ctx, IDEMPOTENT_WRITE) and not auth.authorize_any(ctx, WRITE, TOPIC):
        return _error(errors.CLUSTER_AUTHORIZATION_FAILED)
    pid, epoch = req["producer_id"], req["producer_epoch"]
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch + 1}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": ctx.services.producer_ids.next_id(),
            "producer_epoch": 0}
