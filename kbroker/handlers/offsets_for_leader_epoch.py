"""OffsetForLeaderEpoch (23), served v0-v3: the end offset of a leader epoch on this broker (KIP-101/279/320).

Followers send it when they start following (v3 with replica_id = their broker id) and truncate to the answer;
consumers may send it to detect truncation. Per partition the answer is the partition's leader-epoch cache
(``kbroker/replica/epoch_cache.py``): ``(largest epoch <= the requested one, where it ends)``, the latest epoch
ending at the log end offset, (-1, -1) = UNDEFINED for an epoch above every known one.
Who answers: the leader, except for replica_id -2 (the "debugging" replica id, also the default of v0-v2), which any
replica hosting the partition may answer, as in Kafka.
Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6), FENCED_LEADER_EPOCH (74) when
current_leader_epoch (v2+) is older than the partition's, UNKNOWN_LEADER_EPOCH (75) when newer.
Authorization (Kafka's, KIP-320): ClusterAction on the Cluster (followers) answers every topic; otherwise each
topic needs Describe (consumers), asked once per topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED (29)
unlooked-up.
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import error_code
from kbroker.security.acl import CLUSTER_ACTION, DESCRIBE, TOPIC
from kbroker.server.router import handler

DEBUGGING_REPLICA_ID = -2


@handler(23, (0, 3))
def offset_for_leader_epoch(ctx, req):
    replicas = ctx.services.replicas
    any_replica = req.get("replica_id", DEBUGGING_REPLICA_ID) == DEBUGGING_REPLICA_ID
    denied = frozenset() if not auth.enforcing(ctx) or auth.cluster(ctx, CLUSTER_ACTION, log_denied=False) \
        else auth.denied_names(ctx, DESCRIBE, TOPIC, (t["topic"] for t in req["topics"]))
    topics = []
    for t in req["topics"]:
        parts = []
        refused = t["topic"] in denied
        for p in t["partitions"]:
            r = {"error_code": 0, "partition": p["partition"], "leader_epoch": -1, "end_offset": -1}
            if refused:
                r["error_code"] = errors.TOPIC_AUTHORIZATION_FAILED
                parts.append(r)
                continue
            try:
                part = replicas.get_partition(t["topic"], p["partition"]) if any_replica else None
                if part is None or part.leader == -1:
                    part = replicas.leader_partition(t["topic"], p["partition"])
                part.check_leader_epoch(p.get("current_leader_epoch", -1))
                r["leader_epoch"], r["end_offset"] = part.epoch_cache.end_offset_for(p["leader_epoch"],
                                                                                     part.log_end_offset)
            except errors.KafkaError as e:
                r["error_code"] = e.code
            except Exception as e:  # noqa: BLE001
                r["error_code"] = error_code(e)
            parts.append(r)
        topics.append({"topic": t["topic"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
