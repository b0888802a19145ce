"""Inter-broker (controller) APIs: LeaderAndIsr (4) v0-v4, StopReplica (5) v0-v3, UpdateMetadata (6) v0-v6,
ControlledShutdown (7) v0-v3. The controller sends LeaderAndIsr v4, StopReplica v3, UpdateMetadata v6
(kbroker/controller/channel.py); older versions are served for completeness (same semantics, flat shapes).

Fencing: LeaderAndIsr, StopReplica and UpdateMetadata carry the sender's controller epoch; one lower than the
highest this broker has seen (kept in ``broker.metadata_cache``) gets STALE_CONTROLLER_EPOCH (11) and changes
nothing. Otherwise the request is handed to the broker-side interface (docs/architecture.md, "controller"):

* ``broker.metadata_cache.update(request, version) -> [(topic, p) deleted]`` and, when the broker has it,
  ``broker.metadata_updated(deleted)``;
* ``broker.apply_leader_and_isr(controller_id, controller_epoch, partition_states, live_leaders)
  -> {(topic, p): error_code}``, partition states normalised to dicts ``{topic, partition, controller_epoch,
  leader, leader_epoch, isr, zk_version, replicas, adding_replicas, removing_replicas, is_new}`` and live leaders
  to ``[(broker_id, host, port)]``;
* ``broker.stop_replicas(controller_epoch, [(topic, p, delete)]) -> {(topic, p): error_code}``;
* ``broker.controller`` -- the local Controller (ControlledShutdown is answered only by the active controller,
  else NOT_CONTROLLER 41).

A broker lacking one of these answers the request with UNKNOWN_SERVER_ERROR (-1) (logged) instead of failing the
connection, so this module is safe to load before the broker is wired for cluster mode.

``local_dispatcher(broker)`` returns the in-process entry the controller's channel uses for its own broker: the
request goes through the codec (encode + decode) so it has exactly the shape a network request would have.
"""
import logging

from kbroker import errors
from kbroker.handlers.common import error_code
from kbroker.protocol.apis import APIS
from kbroker.server.router import _REGISTRY, handler

log = logging.getLogger("kbroker.handlers.cluster")


def _broker_fn(broker, name):
    fn = getattr(broker, name, None)
    if fn is None:
        log.error("broker has no %s(): cluster mode is not wired; answering UNKNOWN_SERVER_ERROR", name)
    return fn


def _fenced(broker, req):
    """True when the request comes from a stale controller (or the broker has no metadata cache)."""
    cache = getattr(broker, "metadata_cache", None)
    if cache is None:
        return None
    return not cache.accept_controller(req["controller_id"], req["controller_epoch"])


# ------------------------------------------------------------------------------------------------ LeaderAndIsr

def leader_and_isr_states(req, version):
    out = []
    if version <= 1:
        groups = [(ps["topic_name"], [ps]) for ps in req["ungrouped_partition_states"]]
    else:
        groups = [(ts["topic_name"], ts["partition_states"]) for ts in req["topic_states"]]
    for topic, states in groups:
        for ps in states:
            out.append({"topic": topic, "partition": ps["partition_index"],
                        "controller_epoch": ps["controller_epoch"], "leader": ps["leader"],
                        "leader_epoch": ps["leader_epoch"], "isr": list(ps["isr"]),
                        "zk_version": ps["partition_epoch"], "replicas": list(ps["replicas"]),
                        "adding_replicas": list(ps.get("adding_replicas") or ()),
                        "removing_replicas": list(ps.get("removing_replicas") or ()),
                        "is_new": bool(ps.get("is_new"))})
    return out


@handler(4, (0, 4))
def leader_and_isr(ctx, req):
    broker = ctx.broker
    states = leader_and_isr_states(req, ctx.api_version)

    def answer(top, per=None):
        return {"error_code": top, "partition_errors": [
            {"topic_name": s["topic"], "partition_index": s["partition"],
             "error_code": top if per is None else per.get((s["topic"], s["partition"]), 0)} for s in states]}
    fenced = _fenced(broker, req)
    if fenced is None:
        return answer(errors.UNKNOWN_SERVER_ERROR)
    if fenced:
        return answer(errors.STALE_CONTROLLER_EPOCH)
    fn = _broker_fn(broker, "apply_leader_and_isr")
    if fn is None:
        return answer(errors.UNKNOWN_SERVER_ERROR)
    leaders = [(lb["broker_id"], lb["host_name"], lb["port"]) for lb in req["live_leaders"]]
    try:
        result = fn(req["controller_id"], req["controller_epoch"], states, leaders) or {}
    except Exception as e:  # noqa: BLE001
        return answer(error_code(e))
    return answer(0, result)


# ------------------------------------------------------------------------------------------------ StopReplica

def stop_replica_partitions(req, version):
    if version == 0:
        return [(p["topic_name"], p["partition_index"], bool(req["delete_partitions"]))
                for p in req["ungrouped_partitions"]]
    if version <= 2:
        return [(t["name"], p, bool(req["delete_partitions"])) for t in req["topics"] for p in t["partition_indexes"]]
    return [(t["topic_name"], ps["partition_index"], bool(ps["delete_partition"]))
            for t in req["topic_states"] for ps in t["partition_states"]]


@handler(5, (0, 3))
def stop_replica(ctx, req):
    broker = ctx.broker
    parts = stop_replica_partitions(req, ctx.api_version)

    def answer(top, per=None):
        return {"error_code": top, "partition_errors": [
            {"topic_name": t, "partition_index": p,
             "error_code": top if per is None else per.get((t, p), 0)} for t, p, _ in parts]}
    fenced = _fenced(broker, req)
    if fenced is None:
        return answer(errors.UNKNOWN_SERVER_ERROR)
    if fenced:
        return answer(errors.STALE_CONTROLLER_EPOCH)
    fn = _broker_fn(broker, "stop_replicas")
    if fn is None:
        return answer(errors.UNKNOWN_SERVER_ERROR)
    try:
        result = fn(req["controller_epoch"], parts) or {}
    except Exception as e:  # noqa: BLE001
        return answer(error_code(e))
    return answer(0, result)


# ------------------------------------------------------------------------------------------------ UpdateMetadata

@handler(6, (0, 6))
def update_metadata(ctx, req):
    broker = ctx.broker
    fenced = _fenced(broker, req)
    if fenced is None:
        log.error("broker has no metadata_cache: cluster mode is not wired")
        return {"error_code": errors.UNKNOWN_SERVER_ERROR}
    if fenced:
        return {"error_code": errors.STALE_CONTROLLER_EPOCH}
    try:
        deleted = broker.metadata_cache.update(req, ctx.api_version)
        hook = getattr(broker, "metadata_updated", None)
        if hook is not None:
            hook(deleted)
    except Exception as e:  # noqa: BLE001
        return {"error_code": error_code(e)}
    return {"error_code": 0}


# ------------------------------------------------------------------------------------------------ ControlledShutdown

@handler(7, (0, 3))
def controlled_shutdown(ctx, req):
    controller = getattr(ctx.broker, "controller", None)
    if controller is None or not controller.is_active():
        return {"error_code": errors.NOT_CONTROLLER, "remaining_partitions": []}
    try:
        remaining = controller.controlled_shutdown(req["broker_id"])
    except Exception as e:  # noqa: BLE001
        return {"error_code": error_code(e), "remaining_partitions": []}
    return {"error_code": 0, "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}


# ------------------------------------------------------------------------------------------------ in-process path

class _LocalContext:
    __slots__ = ("broker", "api_version", "listener", "header", "connection")

    def __init__(self, broker, version):
        self.broker, self.api_version = broker, version
        self.listener, self.header, self.connection = None, None, None


def local_dispatcher(broker):
    """``fn(api_key, version, body) -> response dict`` serving controller requests to ``broker`` in-process."""
    def dispatch(api_key, version, body):
        api = APIS[api_key]
        req = api.decode_request(version, api.encode_request(version, body).getvalue())
        return _REGISTRY[api_key].fn(_LocalContext(broker, version), req)
    return dispatch
