"""DescribeCluster (60), served v0-v1 (KIP-700): the cluster id, the controller's id and the live brokers.

Answered from this broker's metadata cache, as Metadata's broker list is: the brokers' endpoints on the listener
the request came in on, ``controller_id`` -1 while no controller is known. ``endpoint_type`` (v1): 1 (brokers)
answers; 2 (controllers, KRaft's) MISMATCHED_ENDPOINT_TYPE (114), as a Kafka broker does; anything else
UNSUPPORTED_ENDPOINT_TYPE (115). ``include_cluster_authorized_operations``: KIP-430's bit field for the Cluster
when the principal may Describe it, else 0 (Kafka's); not asked: INT32_MIN.
"""
from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import CLUSTER, CLUSTER_NAME, DESCRIBE
from kbroker.server.router import handler

BROKERS, CONTROLLERS = 1, 2


@handler(60, (0, 1))
def describe_cluster(ctx, req):
    services = ctx.services
    endpoint_type = req["endpoint_type"]
    out = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": endpoint_type,
           "cluster_id": services.cluster_id, "controller_id": -1, "brokers": [],
           "cluster_authorized_operations": auth.OPERATIONS_OMITTED}
    if endpoint_type != BROKERS:
        if endpoint_type == CONTROLLERS:
            out["error_code"] = errors.MISMATCHED_ENDPOINT_TYPE
            out["error_message"] = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                                    "of type CONTROLLER")
        else:
            out["error_code"] = errors.UNSUPPORTED_ENDPOINT_TYPE
            out["error_message"] = "Unsupported endpoint type %d" % endpoint_type
        return out
    cache = services.metadata
    out["controller_id"] = cache.controller_id
    out["brokers"] = [{"broker_id": b.id, "host": b.host, "port": b.port, "rack": b.rack}
                      for b in cache.alive_brokers(ctx.listener)]
    if req["include_cluster_authorized_operations"]:
        out["cluster_authorized_operations"] = auth.authorized_operations(ctx, CLUSTER, CLUSTER_NAME) \
            if auth.cluster(ctx, DESCRIBE, log_denied=False) else 0
    return out
