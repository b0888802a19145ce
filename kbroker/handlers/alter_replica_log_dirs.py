"""AlterReplicaLogDirs (34), v0-2 (KIP-113): move replicas of this broker to other log directories, online.

Behaviour (Kafka's KafkaApis.handleAlterReplicaLogDirsRequest + ReplicaManager.alterReplicaLogDirs): no Alter on
the Cluster -> CLUSTER_AUTHORIZATION_FAILED (31) for every partition asked. Otherwise per partition (a partition
named under several paths: the last one wins, as Kafka's map does): an invalid topic name -> INVALID_TOPIC_EXCEPTION
(17); a path that is not one of log.dirs (absolute, exactly) -> LOG_DIR_NOT_FOUND (57); a replica this broker does
not host -> REPLICA_NOT_AVAILABLE (9), and its log is created in that directory when it comes (Kafka's preferred
log dir); the future log cannot be made -> KAFKA_STORAGE_ERROR (56); else NONE: the move runs in the background
(kbroker/replica/log_dir_move.py) and DescribeLogDirs shows its future log and lag until the swap. Results are
grouped by topic in the order first asked.
"""
from kbroker import errors
from kbroker.coord import validate_topic_name
from kbroker.handlers import auth
from kbroker.security.acl import ALTER
from kbroker.server.router import handler
from kbroker.timeslice import TimeSlice


def _valid_topic(name):
    try:
        validate_topic_name(name)
    except errors.KafkaError:
        return False
    return True


@handler(34, (0, 2))
def alter_replica_log_dirs(ctx, req):
    targets = {}                                  # {(topic, p): path}, the last path asked wins
    for d in req["dirs"]:
        for t in d["topics"]:
            for p in t["partitions"]:
                targets.pop((t["name"], p), None)
                targets[(t["name"], p)] = d["path"]
    if not auth.cluster(ctx, ALTER):
        codes = dict.fromkeys(targets, errors.CLUSTER_AUTHORIZATION_FAILED)
    else:
        codes = {}
        slice_ = TimeSlice()
        replicas = ctx.services.replicas
        for (topic, p), path in targets.items():
            if not _valid_topic(topic):
                codes[(topic, p)] = errors.INVALID_TOPIC_EXCEPTION
            else:
                codes[(topic, p)] = replicas.alter_log_dir(topic, p, path)
            slice_.tick()
    results = {}
    for (topic, p), code in codes.items():
        results.setdefault(topic, []).append({"partition_index": p, "error_code": code})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": t, "partitions": parts} for t, parts in results.items()]}
