"""DescribeLogDirs (35), v0-4 (KIP-113): per log directory of this broker, the partitions it holds -- current and
future (a replica moving there, AlterReplicaLogDirs) logs -- with their size and offset lag, and (v4) the directory's
file system total and usable bytes.

Behaviour (Kafka's KafkaApis.handleDescribeLogDirsRequest + ReplicaManager.describeLogDirs): no Describe on the
Cluster -> no results and, from v3, CLUSTER_AUTHORIZATION_FAILED (31) as the top-level error. ``topics`` null asks
for every partition, else only the listed ones (unknown ones are simply absent). Every directory of log.dirs
answers, in log.dirs order, by its absolute path, error 0, or KAFKA_STORAGE_ERROR (56) and no topics when the dir is
offline (KIP-112: its disk failed a write, kbroker/log/dir_failure.py). Partition entries: size = the log's bytes on disk (segments), offset lag = max(HW - LEO,
0) for a current log, the current log's LEO minus its own for a future log (``ReplicaManager.log_dir_usage``);
topics and partitions sorted. total/usable bytes come from statvfs (usable = what an unprivileged writer may use,
Java's getUsableSpace); -1 when statvfs fails.
"""
import os

from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import DESCRIBE
from kbroker.server.router import handler


def _space(path):
    """(total bytes, usable bytes) of the file system holding ``path``, (-1, -1) when unknown."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _topics(entries, wanted):
    topics = {}
    for (topic, p), size, lag, future in entries:
        if wanted is None or (topic, p) in wanted:
            topics.setdefault(topic, []).append({"partition_index": p, "partition_size": size, "offset_lag": lag,
                                                 "is_future_key": future})
    return [{"name": t, "partitions": parts} for t, parts in sorted(topics.items())]


@handler(35, (0, 4))
def describe_log_dirs(ctx, req):
    if not auth.cluster(ctx, DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    asked = req["topics"]
    wanted = None if asked is None else {(t["topic"], p) for t in asked for p in t["partitions"]}
    results = []
    for log_dir, entries in ctx.services.replicas.log_dir_usage():
        if entries is None:
            results.append({"error_code": errors.KAFKA_STORAGE_ERROR, "log_dir": log_dir, "topics": [],
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        total, usable = _space(log_dir)
        results.append({"error_code": 0, "log_dir": log_dir, "topics": _topics(entries, wanted),
                        "total_bytes": total, "usable_bytes": usable})
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}
