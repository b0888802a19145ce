"""ElectLeaders (43), served v0-v2 (KIP-183, KIP-460): preferred (0) or unclean (1) leader elections, carried out
by the controller (``Controller.elect_leaders``; the per-partition rules and codes are in
kbroker/controller/leader_balance.py's docstring). v0 has no ``election_type``: preferred.

Kafka's KafkaApis.handleElectLeaders (ZooKeeper mode):
- Alter on the Cluster, else CLUSTER_AUTHORIZATION_FAILED (31) for every named partition and at the top level
  (v1+); a request for all partitions (``topic_partitions`` null) then answers no partitions;
- a broker that is not the active controller answers NOT_CONTROLLER (41) per partition (clients send this request
  to the controller, which Metadata names); an unknown ``election_type``: INVALID_REQUEST (42) per partition;
- elected partitions answer once this broker's metadata shows their new leader (Kafka's DelayedElectLeader), or
  REQUEST_TIMED_OUT (7) after ``timeout_ms`` (the election itself stands).
The top-level ``error_code`` is 0 except for the authorization failure.
"""
import time

import gevent

from kbroker import errors
from kbroker.handlers import auth
from kbroker.security.acl import ALTER, CLUSTER
from kbroker.server.router import handler

PREFERRED, UNCLEAN = 0, 1
_POLL_S = 0.01          # how often the metadata cache is looked at while waiting for the new leaders (10 ms)


def _named(req):
    """[(topic, p)] the request names in order (duplicates dropped), or None for every partition."""
    if req["topic_partitions"] is None:
        return None
    seen = {}
    for t in req["topic_partitions"]:
        for p in t["partitions"]:
            seen.setdefault((t["topic"], p), None)
    return list(seen)


def _response(results, top=0):
    """{(topic, p): (code, message)} -> the response dict, partitions grouped by topic in first-seen order."""
    by_topic = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": top,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


@handler(43, (0, 2))
def elect_leaders(ctx, req):
    named = _named(req)
    election_type = req["election_type"] if ctx.api_version >= 1 else PREFERRED
    if not auth.cluster(ctx, ALTER):
        err = (errors.CLUSTER_AUTHORIZATION_FAILED, None)
        return _response({tp: err for tp in named or ()}, errors.CLUSTER_AUTHORIZATION_FAILED)
    if election_type not in (PREFERRED, UNCLEAN):
        err = (errors.INVALID_REQUEST, "Unknown election type %d" % election_type)
        return _response({tp: err for tp in named or ()})
    controller = ctx.services.controller
    try:
        if controller is None:
            raise errors.NotController("no controller on this broker")
        got = controller.elect_leaders(election_type, named)
    except errors.KafkaError as e:
        err = (e.code, e.message)
        return _response({tp: err for tp in named or ()})
    except gevent.Timeout:              # the controller's queue did not reach it in controller.socket.timeout.ms
        err = (errors.REQUEST_TIMED_OUT, "the controller did not answer in time")
        return _response({tp: err for tp in named or ()})
    parked = time.monotonic()
    results = _wait_for_leaders(ctx.services.metadata, got, req["timeout_ms"], ctx.connection)
    ctx.parked_s += time.monotonic() - parked
    return _response(results)


def _wait_for_leaders(cache, got, timeout_ms, connection=None):
    """{tp: (code, message, leader)} -> {tp: (code, message)}, each elected partition answered 0 once the metadata
    cache names its new leader, REQUEST_TIMED_OUT when it has not within ``timeout_ms`` (or the client's connection
    is closing)."""
    deadline = time.monotonic() + max(0, timeout_ms) / 1000.0
    waiting = {tp: leader for tp, (code, _m, leader) in got.items() if code == errors.NONE}
    while waiting:
        waiting = {tp: leader for tp, leader in waiting.items() if cache.leader(*tp) != leader}
        if not waiting or time.monotonic() >= deadline or (connection is not None and connection.closing):
            break
        gevent.sleep(_POLL_S)
    out = {}
    for tp, (code, message, _leader) in got.items():
        if tp in waiting:
            out[tp] = (errors.REQUEST_TIMED_OUT, "Leader election for %s-%d did not complete in time" % tp)
        else:
            out[tp] = (code, message)
    return out
