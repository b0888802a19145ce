"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), v0 (KIP-455): the controller's
reassignment duty (kbroker/controller/reassignment.py) driven by the Admin API instead of the znode.

Kafka's KafkaApis (ZooKeeper mode):
- Alter needs Alter on the Cluster, List needs Describe on the Cluster, else CLUSTER_AUTHORIZATION_FAILED (31) at
  the top level (and, for Alter, on every named partition);
- a broker that is not the active controller answers NOT_CONTROLLER (41) at the top level (clients send these
  requests to the controller, which Metadata names); the controller not answering within its
  ``controller.socket.timeout.ms`` is REQUEST_TIMED_OUT (7);
- Alter answers per partition once its reassignment is started, cancelled (``replicas`` null) or refused (codes:
  ``Reassignments.alter_requested``); the same partition twice in one request keeps the last entry. List answers
  the ongoing reassignments among the named partitions (``topics`` null: all) with the full replica set, the
  replicas being added and those being removed.
"""
import gevent

from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import ALTER, DESCRIBE
from kbroker.server.router import handler


def _alter_response(results, top=0, message=None):
    by_topic = {}
    for (topic, p), (code, msg) in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": 0, "error_code": top, "error_message": message,
            "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


def _controller(ctx):
    controller = ctx.services.controller
    if controller is None or not controller.is_active():
        raise errors.NotController("This is not the correct controller for this cluster.")
    return controller


@handler(45, (0, 0))
def alter_partition_reassignments(ctx, req):
    changes = {}
    for t in req["topics"]:
        for p in t["partitions"]:
            replicas = p["replicas"]
            changes[(t["name"], p["partition_index"])] = None if replicas is None else tuple(replicas)
    if not auth.cluster(ctx, ALTER):
        err = (errors.CLUSTER_AUTHORIZATION_FAILED, None)
        return _alter_response({tp: err for tp in changes}, errors.CLUSTER_AUTHORIZATION_FAILED)
    try:
        results = _controller(ctx).alter_reassignments(changes)
    except errors.KafkaError as e:
        return _alter_response({tp: (e.code, e.message) for tp in changes}, e.code, e.message)
    except gevent.Timeout:
        msg = "the controller did not answer in time"
        return _alter_response({tp: (errors.REQUEST_TIMED_OUT, msg) for tp in changes}, errors.REQUEST_TIMED_OUT, msg)
    return _alter_response({tp: results[tp] for tp in changes})


@handler(46, (0, 0))
def list_partition_reassignments(ctx, req):
    out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
    if not auth.cluster(ctx, DESCRIBE):
        out["error_code"] = errors.CLUSTER_AUTHORIZATION_FAILED
        return out
    named = None
    if req["topics"] is not None:
        named = [(t["name"], p) for t in req["topics"] for p in t["partition_indexes"]]
    try:
        found = _controller(ctx).list_reassignments(named)
    except errors.KafkaError as e:
        out["error_code"], out["error_message"] = e.code, e.message
        return out
    except gevent.Timeout:
        out["error_code"], out["error_message"] = errors.REQUEST_TIMED_OUT, "the controller did not answer in time"
        return out
    by_topic = {}
    for (topic, p), (replicas, adding, removing) in sorted(found.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas,
                                               "adding_replicas": adding, "removing_replicas": removing})
    out["topics"] = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
    return out
