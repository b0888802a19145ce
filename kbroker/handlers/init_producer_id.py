"""InitProducerId (22), served v0-v5: a producer id and epoch for an idempotent or a transactional producer.

Behaviour:
- A null ``transactional_id`` (idempotent producer) gets a fresh producer id (leased in blocks of 1000 from
  ``/latest_producer_id_block``, Kafka's layout) with epoch 0. v3+ with an existing producer id/epoch (KIP-360: the
  producer wants to bump its epoch after an error) keeps the id and returns epoch + 1; at epoch 32767 a new id is
  issued instead.
- A transactional id is the transaction coordinator's (``ctx.services.transactions``,
  kbroker/transaction/coordinator.py): epoch bump and fencing of the previous instance, an ongoing transaction
  aborted first (CONCURRENT_TRANSACTIONS 51 meanwhile), INVALID_TRANSACTION_TIMEOUT (50) above
  transaction.max.timeout.ms, NOT_COORDINATOR (16) / COORDINATOR_LOAD_IN_PROGRESS (14) when the id's
  ``__transaction_state`` partition is not led / not loaded here, COORDINATOR_NOT_AVAILABLE (15) without a
  coordinator. v3+'s producer id/epoch must be both -1 or both set, else INVALID_REQUEST (42), as Kafka.
- PRODUCER_FENCED (90) is answered as INVALID_PRODUCER_EPOCH (47) below v4 (older clients do not know 90).

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


def fenced_code(code, version, first_version_with_fenced):
    """PRODUCER_FENCED (90) for clients that know it, INVALID_PRODUCER_EPOCH (47) for older versions."""
    if code == errors.PRODUCER_FENCED and version < first_version_with_fenced:
        return errors.INVALID_PRODUCER_EPOCH
    return code


@handler(22, (0, 5))
def init_producer_id(ctx, req):
    tid = req["transactional_id"]
    if tid is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
            return _error(errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return _transactional(ctx, req, tid)
    if not auth.cluster(ctx, IDEMPOTENT_WRITE) and not auth.authorize_any(ctx, WRITE, TOPIC):
        return _error(errors.CLUSTER_AUTHORIZATION_FAILED)
    pid, epoch = req["producer_id"], req["producer_epoch"]
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch + 1}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": ctx.services.producer_ids.next_id(),
            "producer_epoch": 0}


def _transactional(ctx, req, tid):
    pid, epoch = req["producer_id"], req["producer_epoch"]
    if (pid == -1) != (epoch == -1):
        return _error(errors.INVALID_REQUEST)
    coordinator = ctx.services.transactions
    if coordinator is None:
        return _error(errors.COORDINATOR_NOT_AVAILABLE)
    code, pid, epoch = coordinator.init_producer_id(tid, req["transaction_timeout_ms"],
                                                    None if pid == -1 else (pid, epoch))
    if code:
        return _error(fenced_code(code, ctx.api_version, 4))
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch}
