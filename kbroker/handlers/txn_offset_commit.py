"""TxnOffsetCommit (28) v0-v4: a transactional producer's ``sendOffsetsToTransaction`` -- the consumer group's
offsets written inside the producer's transaction (KIP-98), visible as the group's committed offsets only once the
transaction commits (``GroupCoordinator.handle_txn_commit``; the marker completes them, group_metadata.py).

Checks, in Kafka's order (KafkaApis.handleTxnOffsetCommitRequest), before the coordinator is asked anything:
- Write on the TransactionalId, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) for every partition;
- Read on the Group, else GROUP_AUTHORIZATION_FAILED (30) for every partition;
- Read on each topic (once per topic), else TOPIC_AUTHORIZATION_FAILED (29) for its partitions; only the allowed
  partitions reach the coordinator, and none at all means the coordinator is not asked.
- a producer id < 0 cannot hold a transaction: INVALID_REQUEST (42) for every partition (Kafka would store such
  a "transactional" commit as a plain one, outside any transaction).
Then the coordinator: unknown topic/partition => UNKNOWN_TOPIC_OR_PARTITION (3), metadata over
offset.metadata.max.bytes => OFFSET_METADATA_TOO_LARGE (12), NOT_COORDINATOR (16), COORDINATOR_LOAD_IN_PROGRESS
(14; COORDINATOR_NOT_AVAILABLE 15 for v0-v1, whose 0.11-2.0 clients did not expect it, as Kafka), v3's KIP-447
member checks (ILLEGAL_GENERATION 22, UNKNOWN_MEMBER_ID 25, FENCED_INSTANCE_ID 82), and the append's errors (a
stale producer epoch's INVALID_PRODUCER_EPOCH 47 as the partition reports it).
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import sliced
from kbroker.security.acl import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from kbroker.server.router import handler


@handler(28, (0, 4))
def txn_offset_commit(ctx, req):
    version = ctx.api_version
    coord = ctx.services.groups
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, req["transactional_id"]):
        refused, denied = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, frozenset()
    elif not ctx.authorize(READ, GROUP, req["group_id"]):
        refused, denied = errors.GROUP_AUTHORIZATION_FAILED, frozenset()
    elif req["producer_id"] < 0:
        refused, denied = errors.INVALID_REQUEST, frozenset()
    else:
        refused, denied = 0, auth.denied_names(ctx, READ, TOPIC, (t["name"] for t in req["topics"]))
    results, offsets = {}, {}
    for t in req["topics"]:
        name = t["name"]
        code = refused or (errors.TOPIC_AUTHORIZATION_FAILED if name in denied else 0)
        for p in sliced(t["partitions"]):
            tp = (name, p["partition_index"])
            if code:
                results[tp] = code
            else:
                offsets[tp] = (p["committed_offset"], p["committed_leader_epoch"], p["committed_metadata"], -1)
    if not offsets:
        pass            # nothing allowed (or nothing asked): the coordinator is not involved (Kafka's)
    elif coord is None:
        results.update({tp: errors.COORDINATOR_NOT_AVAILABLE for tp in offsets})
    else:
        try:
            ctx.services.topics.ensure_offsets_topic()
        except errors.KafkaError:
            pass        # the coordinator then answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE
        results.update(coord.handle_txn_commit(req["group_id"], req["producer_id"], req["producer_epoch"],
                                               req["generation_id"], req["member_id"], req["group_instance_id"],
                                               offsets))
    if version < 2:
        results = {tp: errors.COORDINATOR_NOT_AVAILABLE if c == errors.COORDINATOR_LOAD_IN_PROGRESS else c
                   for tp, c in results.items()}
    topics = [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": results[(t["name"], p["partition_index"])]}
        for p in sliced(t["partitions"])]} for t in req["topics"]]
    return {"throttle_time_ms": 0, "topics": topics}
