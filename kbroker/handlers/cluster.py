"""Inter-broker (controller) APIs: LeaderAndIsr (4) v0-v4, StopReplica (5) v0-v3, UpdateMetadata (6) v0-v6,
ControlledShutdown (7) v0-v3. The controller sends LeaderAndIsr v4, StopReplica v3, UpdateMetadata v6
(kbroker/controller/channel.py); older versions are served for completeness (same semantics, flat shapes).

Who may send them (issue 8: a client's UpdateMetadata had listed a broker as 6.6.6.6:6666 and locked the real
controller out; a client's StopReplica had deleted a log). LeaderAndIsr, StopReplica and UpdateMetadata are applied
only when the request comes from the current controller, checked in this order (Kafka's order: broker epoch, then
controller epoch); the first failing check is the answer, for the request and each of its partitions, and nothing
is applied -- no cache update, no log touched, and the broker's highest controller epoch stays where it was:

1. The sender's principal needs ClusterAction on the Cluster (``ctx.authorize``; with an authorizer configured the
   brokers' own principals must be super users or hold it, as in Kafka), and with ``control.plane.listener.name``
   set (``services.control_plane.listener``) the request must arrive on that listener; else
   CLUSTER_AUTHORIZATION_FAILED (31), Kafka's answer to a sender without ClusterAction.
2. ``broker_epoch`` must equal this broker's current epoch (KIP-380: the czxid of its ``/brokers/ids/<id>``,
   ``services.control_plane.broker_epoch``; -1 before the broker registered), else STALE_BROKER_EPOCH (77).
   Versions without the field (LeaderAndIsr v0-v1, UpdateMetadata v0-v4, StopReplica v0) and -1 ("unknown",
   which Kafka lets through for pre-KIP-380 controllers) never match: no legitimate sender uses them (the
   controller sends LeaderAndIsr v4, UpdateMetadata v6, StopReplica v3), and a forged one would need nothing but
   the public controller id and epoch.
3. ``controller_id`` and ``controller_epoch`` must be what ``/controller`` and ``/controller_epoch`` say
   (``services.control_plane.view``, kept by watches; a request ahead of the view waits for it up to
   ``VIEW_WAIT_S``), else STALE_CONTROLLER_EPOCH (11); and never lower than the highest epoch this broker has
   applied (``services.metadata.accept_controller``).

ControlledShutdown (answered by the active controller only, else NOT_CONTROLLER 41) goes through check 1 first, and the
controller requires the named broker's current epoch (v2+; v0-v1 carry none): else STALE_BROKER_EPOCH (77).

What these checks do not stop: the broker epoch is a ZooKeeper czxid, unknown to a Kafka client but readable by
anyone who can read ZooKeeper; the controller id and epoch are public. So a party with ZooKeeper read access and a
route to a listener that accepts controller requests can still forge them. Without authentication (issue 10) the
defence is the network: set ``control.plane.listener.name`` to a listener bound to an address only the brokers can
reach (a private interface or firewalled port), and keep ZooKeeper private as Kafka requires.

The in-process path (``local_dispatcher``: the controller's requests to its own broker) runs the same checks except
the listener one: it never crosses a socket.

Applied requests are handed to the collaborators that own the state (``ctx.services``, kbroker/server/context.py):

* ``metadata.update(request, version) -> [(topic, p) deleted]`` (the cache tells its deletion listeners);
* ``replicas.apply_leader_and_isr(controller_id, controller_epoch, partition_states, live_leaders)
  -> {(topic, p): error_code}``, partition states decoded into frozen ``kbroker.cluster_state.PartitionLeadership``
  values (``from_wire``, any version) and live leaders into ``[(broker_id, host, port)]``;
* ``replicas.stop_replicas(controller_epoch, [(topic, p, delete)]) -> {(topic, p): error_code}``;
* ``controller`` -- the local Controller or None (ControlledShutdown is answered only by the active controller,
  else NOT_CONTROLLER 41).
An exception from one of them answers the request with its error code (UNKNOWN_SERVER_ERROR -1 for a bug, logged)
instead of failing the connection.

``local_dispatcher(services)`` returns the in-process entry the controller's channel uses for its own broker: the
request goes through the codec (encode + decode) so it has exactly the shape a network request would have, and
its context carries ``IN_PROCESS`` (no listener) as identity.
"""
import logging

from kbroker import errors
from kbroker.cluster_state import PartitionLeadership
from kbroker.handlers.common import error_code
from kbroker.handlers import auth
from kbroker.protocol.apis import APIS
from kbroker.security.acl import CLUSTER_ACTION
from kbroker.server.context import IN_PROCESS, RequestContext
from kbroker.server.router import _REGISTRY, handler
from kbroker.timeslice import TimeSlice

log = logging.getLogger("kbroker.handlers.cluster")


# How long a request may wait for this broker's view of the controller (or its own registration) to catch up with
# the controller: the watch of a ZooKeeper follower trails the controller's write by milliseconds; 5 s also covers a
# follower catching up after an ensemble leader election. Only the waiting request's greenlet waits.
VIEW_WAIT_S = 5.0

# First version of each API that carries broker_epoch (the protocol specs: LeaderAndIsr v2, StopReplica v1,
# UpdateMetadata v5, ControlledShutdown v2).
BROKER_EPOCH_SINCE = {4: 2, 5: 1, 6: 5, 7: 2}


def _on_control_listener(ctx):
    """False when a control-plane listener is configured and the request came in on another one."""
    cp = ctx.services.control_plane.listener
    return not cp or ctx.identity.in_process or ctx.listener == cp


def _cluster_action_denied(ctx, name):
    """True (and logged) when the sender may not send controller requests: its principal lacks ClusterAction on
    the Cluster. Asked before anything else of the request is looked at (Kafka's authorizeClusterOperation)."""
    if auth.cluster(ctx, CLUSTER_ACTION):
        return False
    log.warning("%s refused: principal %s from %s has no ClusterAction on the Cluster", name,
                ctx.identity.principal, ctx.identity.host)
    return True


def _refusal(ctx, req, api_key):
    """0 when the request comes from the current controller (module docstring), else the error code to answer.
    Records the controller epoch as applied only when every check passed."""
    name = APIS[api_key].name
    if _cluster_action_denied(ctx, name):
        return errors.CLUSTER_AUTHORIZATION_FAILED
    plane = ctx.services.control_plane
    view = plane.view
    if not _on_control_listener(ctx):
        log.warning("%s refused: it came in on listener %s, not on the control plane listener %s", name,
                    ctx.listener, plane.listener)
        return errors.CLUSTER_AUTHORIZATION_FAILED
    cid, cepoch = req["controller_id"], req["controller_epoch"]
    sent = req.get("broker_epoch", -1) if ctx.api_version >= BROKER_EPOCH_SINCE[api_key] else -1
    own = plane.broker_epoch(VIEW_WAIT_S)
    if sent < 0 or sent != own:
        log.warning("%s v%d from controller %d (epoch %d) refused: broker epoch %d, ours is %d", name,
                    ctx.api_version, cid, cepoch, sent, own)
        return errors.STALE_BROKER_EPOCH
    if not view.is_current(cid, cepoch, VIEW_WAIT_S):
        log.warning("%s from controller %d epoch %d refused: the controller is %d, epoch %d", name, cid, cepoch,
                    view.controller_id, view.epoch)
        return errors.STALE_CONTROLLER_EPOCH
    if not ctx.services.metadata.accept_controller(cid, cepoch):
        return errors.STALE_CONTROLLER_EPOCH
    return 0


# ------------------------------------------------------------------------------------------------ LeaderAndIsr

def leader_and_isr_states(req, version):
    """[PartitionLeadership] of a decoded LeaderAndIsr request, in request order (flat in v0-1, by topic in v2+)."""
    if version <= 1:
        return [PartitionLeadership.from_wire(ps["topic_name"], ps) for ps in req["ungrouped_partition_states"]]
    return [PartitionLeadership.from_wire(ts["topic_name"], ps)
            for ts in req["topic_states"] for ps in ts["partition_states"]]


@handler(4, (0, 4))
def leader_and_isr(ctx, req):
    states = leader_and_isr_states(req, ctx.api_version)

    def answer(top, per=None):
        return {"error_code": top, "partition_errors": [
            {"topic_name": s.topic, "partition_index": s.partition,
             "error_code": top if per is None else per.get(s.tp, 0)} for s in states]}
    refused = _refusal(ctx, req, 4)
    if refused:
        return answer(refused)
    leaders = [(lb["broker_id"], lb["host_name"], lb["port"]) for lb in req["live_leaders"]]
    try:
        result = ctx.services.replicas.apply_leader_and_isr(req["controller_id"], req["controller_epoch"], states,
                                                            leaders) or {}
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
    parts = stop_replica_partitions(req, ctx.api_version)

    def answer(top, per=None):
        return {"error_code": top, "partition_errors": [
            {"topic_name": t, "partition_index": p,
             "error_code": top if per is None else per.get((t, p), 0)} for t, p, _ in parts]}
    refused = _refusal(ctx, req, 5)
    if refused:
        return answer(refused)
    try:
        result = ctx.services.replicas.stop_replicas(req["controller_epoch"], parts) or {}
    except Exception as e:  # noqa: BLE001
        return answer(error_code(e))
    deleted = [(t, p) for t, p, delete in parts if delete and not result.get((t, p), 0)]
    if deleted:
        ctx.services.groups.on_partitions_deleted(deleted)     # Kafka's onPartitionsDeleted: no stale offsets
    return answer(0, result)


# ------------------------------------------------------------------------------------------------ UpdateMetadata

@handler(6, (0, 6))
def update_metadata(ctx, req):
    refused = _refusal(ctx, req, 6)
    if refused:
        return {"error_code": refused}
    try:
        ctx.services.metadata.update(req, ctx.api_version)
    except Exception as e:  # noqa: BLE001
        return {"error_code": error_code(e)}
    return {"error_code": 0}


# ------------------------------------------------------------------------------------------------ ControlledShutdown

@handler(7, (0, 3))
def controlled_shutdown(ctx, req):
    if _cluster_action_denied(ctx, "ControlledShutdown"):
        return {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    if not _on_control_listener(ctx):
        log.warning("ControlledShutdown for broker %d refused: it came in on listener %s, not on %s",
                    req["broker_id"], ctx.listener, ctx.services.control_plane.listener)
        return {"error_code": errors.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    controller = ctx.services.controller
    if controller is None or not controller.is_active():
        return {"error_code": errors.NOT_CONTROLLER, "remaining_partitions": []}
    epoch = req.get("broker_epoch", -1) if ctx.api_version >= BROKER_EPOCH_SINCE[7] else -1
    try:
        remaining = controller.controlled_shutdown(req["broker_id"], epoch)
    except Exception as e:  # noqa: BLE001
        return {"error_code": error_code(e), "remaining_partitions": []}
    return {"error_code": 0, "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}


# ------------------------------------------------------------------------------------------------ in-process path

def local_dispatcher(services):
    """``fn(api_key, version, body) -> response dict`` serving controller requests to the broker of ``services``
    in-process (identity ``IN_PROCESS``: no listener, no connection)."""
    def dispatch(api_key, version, body):
        # The handler sees what a remote broker decodes (``copy_request``: every field of the version, fresh dicts
        # and lists), without the bytes: encoding and decoding were ~5 us a partition state, 0.34 s of the
        # controller's broker in a 30,000-partition failover (docs/performance.md, session 21); the copy is ~1 us.
        # In time slices, as the server decodes.
        req = APIS[api_key].copy_request(version, body, pause=TimeSlice().tick)
        return _REGISTRY[api_key].fn(RequestContext(IN_PROCESS, services, api_key, version), req)
    return dispatch
