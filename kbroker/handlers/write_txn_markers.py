"""WriteTxnMarkers (27), served v0-v1: a transaction coordinator has this broker, as partition leader, write the
COMMIT/ABORT markers that end a transaction (KIP-98; Kafka's KafkaApis.handleWriteTxnMarkersRequest).

Inter-broker only: the request needs ClusterAction on the Cluster, else every partition answers
CLUSTER_AUTHORIZATION_FAILED (31) and nothing is written. For each marker and each of its partitions the leader
appends one control batch (``Partition.write_marker``: the producer's transaction closes, an ABORT is indexed in
the ``.txnindex``, the LSO advances); every marker of the request is then waited for as acks=all (the replica
layer's delayed produce) for at most ``request.timeout.ms`` (30 s, Kafka's timeout for these appends).
Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION (3), NOT_LEADER_OR_FOLLOWER (6), REQUEST_TIMED_OUT (7),
NOT_ENOUGH_REPLICAS (19) / NOT_ENOUGH_REPLICAS_AFTER_APPEND (20), INVALID_PRODUCER_EPOCH (47, the producer's epoch
on the partition is newer), TRANSACTION_COORDINATOR_FENCED (52, a newer coordinator already wrote a marker for the
producer), KAFKA_STORAGE_ERROR (56). The coordinator retries what failed.
Once the markers are replicated, the group coordinator is told for the ``__consumer_offsets`` partitions that took
one (``GroupCoordination.complete_transaction(producer_id, [partition indexes], commit)``): offsets committed in
the transaction become visible (commit) or are dropped (abort), as Kafka's onTransactionCompleted.
"""
import logging

from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import error_code, sliced
from kbroker.internal_topics import GROUP_METADATA_TOPIC
from kbroker.replica.delayed_produce import DelayedProduce
from kbroker.security.acl import CLUSTER_ACTION
from kbroker.server.router import handler

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 30000


def _refuse_all(req, code):
    return {"markers": [
        {"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p, "error_code": code}
                                               for p in t["partition_indexes"]]}
            for t in m["topics"]]}
        for m in req["markers"]]}


@handler(27, (0, 1))
def write_txn_markers(ctx, req):
    if auth.enforcing(ctx) and not auth.cluster(ctx, CLUSTER_ACTION):
        return _refuse_all(req, errors.CLUSTER_AUTHORIZATION_FAILED)
    replicas = ctx.services.replicas
    timeout_ms = ctx.services.config.get("request.timeout.ms", DEFAULT_TIMEOUT_MS)
    delayed = DelayedProduce()
    waiting = []            # [(partition result, Ack)]
    offsets_written = []    # [(marker, partition result)] of __consumer_offsets partitions
    out = []
    for m in sliced(req["markers"]):
        pid, epoch, commit = m["producer_id"], m["producer_epoch"], m["transaction_result"]
        topics = []
        for t in m["topics"]:
            name = t["name"]
            results = []
            for index in sliced(t["partition_indexes"]):
                r = {"partition_index": index, "error_code": 0}
                try:
                    part = replicas.leader_partition(name, index)
                    _res, ack = delayed.write_marker(part, pid, epoch, m["coordinator_epoch"], commit)
                    waiting.append((r, ack))
                    if name == GROUP_METADATA_TOPIC:
                        offsets_written.append((m, r))
                except Exception as e:  # noqa: BLE001 - every failure is this partition's error code
                    r["error_code"] = error_code(e)
                results.append(r)
            topics.append({"name": name, "partitions": results})
        out.append({"producer_id": pid, "topics": topics})
    if waiting:
        conn = ctx.connection
        delayed.wait(timeout_ms, (lambda: conn.closing) if conn is not None else None)
        for r, ack in waiting:
            if ack.error_code:
                r["error_code"] = ack.error_code
    if offsets_written:
        _complete_offsets(ctx.services.groups, offsets_written)
    return {"markers": out}


def _complete_offsets(groups, written):
    """Tell the group coordinator which __consumer_offsets partitions now hold each marker (successful ones)."""
    if groups is None:          # unit tests that build Services without a group coordinator
        return
    by_marker = {}
    for m, r in written:
        if r["error_code"] == 0:
            by_marker.setdefault(id(m), (m, []))[1].append(r["partition_index"])
    for m, indexes in by_marker.values():
        try:
            groups.complete_transaction(m["producer_id"], indexes, m["transaction_result"])
        except Exception:  # noqa: BLE001 - the markers are written; the coordinator's failure is its own
            log.exception("completing the transaction of producer %d in the group coordinator failed",
                          m["producer_id"])
