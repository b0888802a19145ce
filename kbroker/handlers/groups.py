"""Consumer-group APIs, all served by the broker's ``GroupCoordinator`` (``kbroker/coordinator/coordinator.py``).

Versions served: FindCoordinator (10) v0-v4 (v0 is 0.8.2's GroupCoordinator), JoinGroup (11) v0-v7,
SyncGroup (14) v0-v5, Heartbeat (12) v0-v4, LeaveGroup (13) v0-v4, OffsetCommit (8) v0-v8, OffsetFetch (9) v0-v7,
DescribeGroups (15) v0-v5, ListGroups (16) v0-v4, DeleteGroups (42) v0-v2.

Behaviour:
- FindCoordinator key_type 0 creates ``__consumer_offsets`` on first use and answers the leader of the group's
  partition (COORDINATOR_NOT_AVAILABLE 15 when it has none); key_type 1 (transactions) likewise creates
  ``__transaction_state`` (transaction.state.log.* settings) and answers the leader of the transactional id's
  partition; other key types INVALID_REQUEST (42). v4 answers each of ``coordinator_keys``.
- JoinGroup v4+ with an empty member id gets MEMBER_ID_REQUIRED (79) and its id (KIP-394); v5+ group_instance_id
  is static membership (KIP-345). JoinGroup and SyncGroup park the connection's greenlet until the coordinator
  answers (rebalance complete / leader's assignment stored). v0 members' rebalance timeout is their session timeout.
- LeaveGroup v0-v2 leave one member (its error is the top-level error); v3+ a batch with per-member errors.
- OffsetCommit v0 is stored like v1+ but without the group-membership checks (Kafka kept v0 in ZooKeeper and never
  checked it); v1 per-partition commit timestamps are honoured; v2-v4 retention_time_ms (-1 = broker default).
  Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION (3).
- OffsetFetch: unknown group/partition => offset -1, metadata "", error 0; v2+ null topics => every committed
  offset of the group; errors go top-level from v2 and per partition before. ``require_stable`` (v7, KIP-447):
  a partition with a transactional commit not yet committed or aborted answers UNSTABLE_OFFSET_COMMIT (88) with
  offset -1 (the client retries); without it the last committed offset (pending ones are never shown).
- DescribeGroups: an unknown group is "Dead" with error 0 (Kafka's answer); members' metadata/assignment only while
  Stable. v3+ ``include_authorized_operations`` answers KIP-430's bit field of the group operations the principal
  may perform (every supported one without an authorizer, as Kafka); otherwise INT32_MIN ("not provided").
- ListGroups v4 filters by state names case-insensitively.
Authorization (Kafka's KafkaApis, ``kbroker/handlers/auth.py``), always before the coordinator is asked anything,
so a denied request changes no group state and creates no offsets topic:
- FindCoordinator: Describe on the Group (key type 0), else GROUP_AUTHORIZATION_FAILED (30); Describe on the
  TransactionalId (key type 1), else TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); per key in v4.
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the Group, else 30 (top-level; LeaveGroup v3+ with no
  member entries, JoinGroup with member id "" and generation -1, as Kafka's error responses).
- OffsetCommit: Read on the Group, else 30 for every partition; then Read on each topic (once per topic), else
  TOPIC_AUTHORIZATION_FAILED (29) for its partitions; only the allowed partitions reach the coordinator, and a
  request with none does not reach it at all.
- OffsetFetch: Describe on the Group, else 30 (where the version puts errors); named partitions of a topic the
  principal may not Describe answer 29 with offset -1 and are not looked up; with null topics (all), the
  offsets of such topics are left out.
- DescribeGroups: Describe on each Group, else 30 for that group. DeleteGroups: Delete on each Group, else 30.
- ListGroups: Describe on the Cluster lists every group; otherwise only the groups the principal may Describe.
Client host is reported as Kafka does (``InetAddress.toString``: "/127.0.0.1").

Bounded loop time (issue 8): a request may name up to request.max.elements (100,000) groups, keys or partitions;
every per-element loop here hands the event loop back every 20 ms (``common.sliced``). FindCoordinator v4 ensures
the offsets topic and lists the live brokers once per request, not once per key.
"""
import time

from gevent.event import AsyncResult

from kbroker import errors
from kbroker.handlers import auth
from kbroker.handlers.common import sliced
from kbroker.internal_topics import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from kbroker.security.acl import DELETE, DESCRIBE, GROUP, READ, TOPIC, TRANSACTIONAL_ID
from kbroker.server.router import handler

NONE = 0
GROUP_DENIED = errors.GROUP_AUTHORIZATION_FAILED


def _client_host(ctx):
    host = ctx.identity.host
    return "/%s" % host if host else ""


def _coordinator(ctx):
    return ctx.services.groups


def _wait(ctx, fn, *args):
    """Call the coordinator with a callback and wait for it; the wait (a rebalance may take minutes) is parked
    time, not charged to the request quota (ctx.parked_s)."""
    res = AsyncResult()
    fn(*args, res.set)
    parked = time.monotonic()
    try:
        return res.get()
    finally:
        ctx.parked_s += time.monotonic() - parked


# ------------------------------------------------------------------------------------------- FindCoordinator
@handler(10, (0, 4))
def find_coordinator(ctx, req):
    version = ctx.api_version
    keys = req["coordinator_keys"] if version >= 4 else [req["key"]]
    finder = _CoordinatorFinder(ctx, req["key_type"])
    found = [finder.find(key) for key in sliced(keys)]
    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": found}
    one = found[0]
    return {"throttle_time_ms": 0, "error_code": one["error_code"], "error_message": one["error_message"],
            "node_id": one["node_id"], "host": one["host"], "port": one["port"]}


class _CoordinatorFinder:
    """FindCoordinator's answer for one key after another (v4 names up to 100,000 keys), with what every key shares
    found once per request: the offsets topic ensured (its creation may wait for the controller; it was tried again
    for every key) and the live brokers of the request's listener (a list built per key: 0.8 s for 100,000)."""

    def __init__(self, ctx, key_type):
        self.ctx = ctx
        self.key_type = key_type
        self._brokers = None            # {broker id: BrokerEndpoint}, once the shared part succeeded
        self._failure = None            # the KafkaError the shared part raised, answered for every key

    def _refusal(self, key):
        """The authorization error for ``key`` (module docstring), or 0."""
        if self.key_type == 0 and not self.ctx.authorize(DESCRIBE, GROUP, key):
            return GROUP_DENIED
        if self.key_type == 1 and not self.ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, key):
            return errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return 0

    def _shared(self):
        if self._failure is not None:
            raise self._failure
        if self._brokers is None:
            services = self.ctx.services
            try:
                if self.key_type == 1:
                    if services.transactions is None or not services.transactions.active:
                        raise errors.CoordinatorNotAvailable("the transaction coordinator is not running")
                    services.topics.ensure_transaction_state_topic()
                else:
                    if services.groups is None or not services.groups.active:
                        raise errors.CoordinatorNotAvailable("the group coordinator is not running")
                    services.topics.ensure_offsets_topic()
            except errors.KafkaError as e:
                self._failure = e
                raise
            except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable while creating the topic (issue 16)
                self._failure = errors.CoordinatorNotAvailable("cannot create the coordinator's topic: %s" % e)
                raise self._failure from None
            self._brokers = {b.id: b for b in services.metadata.alive_brokers(self.ctx.listener)}
        return self._brokers

    def find(self, key):
        out = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": NONE, "error_message": None}
        refused = self._refusal(key)
        if refused:
            out["error_code"] = refused
            out["error_message"] = "%s authorization failed." % ("Group" if refused == GROUP_DENIED
                                                                  else "Transactional Id")
            return out
        if self.key_type not in (0, 1):
            out["error_code"] = errors.INVALID_REQUEST
            out["error_message"] = "unknown coordinator key type %d" % self.key_type
            return out
        try:
            brokers = self._shared()
            # None while a concurrent request's creation of the offsets topic has not reached the metadata cache.
            services = self.ctx.services
            if self.key_type == 1:
                state = services.metadata.partition(TRANSACTION_STATE_TOPIC, services.transactions.partition_for(key))
            else:
                state = services.metadata.partition(GROUP_METADATA_TOPIC, services.groups.partition_for(key))
            node = brokers.get(state.leader if state is not None else -1)
            if node is None:
                raise errors.CoordinatorNotAvailable("the coordinator of %s %r is not available"
                                                     % ("transactional id" if self.key_type == 1 else "group", key))
            out.update(node_id=node.id, host=node.host, port=node.port)
        except errors.KafkaError as e:
            code = e.code if e.code in (errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR,
                                        errors.INVALID_REQUEST) else errors.COORDINATOR_NOT_AVAILABLE
            out.update(error_code=code, error_message=e.message or str(e))
        return out


# ------------------------------------------------------------------------------------------------ JoinGroup
@handler(11, (0, 7))
def join_group(ctx, req):
    version = ctx.api_version
    coord = _coordinator(ctx)
    protocols = [(p["name"], p["metadata"]) for p in req["protocols"]]
    rebalance = req["rebalance_timeout_ms"] if version >= 1 else req["session_timeout_ms"]
    if not ctx.authorize(READ, GROUP, req["group_id"]):
        r = {"error_code": GROUP_DENIED, "generation_id": -1, "protocol_name": None, "leader": "",
             "member_id": "", "members": []}
    elif coord is None:
        r = {"error_code": errors.COORDINATOR_NOT_AVAILABLE, "generation_id": -1, "protocol_name": None,
             "leader": "", "member_id": req["member_id"], "members": []}
    else:
        r = _wait(ctx, coord.join_group, req["group_id"], req["member_id"], req["group_instance_id"], ctx.client_id,
                  _client_host(ctx), rebalance, req["session_timeout_ms"], req["protocol_type"], protocols,
                  version >= 4)
    return {"throttle_time_ms": 0, "error_code": r["error_code"], "generation_id": r["generation_id"],
            "protocol_type": r.get("protocol_type"),
            "protocol_name": r["protocol_name"] if (version >= 7 or r["protocol_name"] is not None) else "",
            "leader": r["leader"] or "", "member_id": r["member_id"] or "",
            "members": r["members"]}


# ------------------------------------------------------------------------------------------------ SyncGroup
@handler(14, (0, 5))
def sync_group(ctx, req):
    coord = _coordinator(ctx)
    if not ctx.authorize(READ, GROUP, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "assignment": b""}
    if coord is None:
        return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE, "assignment": b""}
    assignments = {a["member_id"]: bytes(a["assignment"]) for a in req["assignments"]}
    r = _wait(ctx, coord.sync_group, req["group_id"], req["generation_id"], req["member_id"], req["group_instance_id"],
              req["protocol_type"], req["protocol_name"], assignments)
    return {"throttle_time_ms": 0, "error_code": r["error_code"], "protocol_type": r["protocol_type"],
            "protocol_name": r["protocol_name"], "assignment": r["assignment"] or b""}


# ----------------------------------------------------------------------------------------------- Heartbeat
@handler(12, (0, 4))
def heartbeat(ctx, req):
    coord = _coordinator(ctx)
    if not ctx.authorize(READ, GROUP, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED}
    if coord is None:
        return {"throttle_time_ms": 0, "error_code": errors.COORDINATOR_NOT_AVAILABLE}
    code = coord.heartbeat(req["group_id"], req["generation_id"], req["member_id"], req["group_instance_id"])
    return {"throttle_time_ms": 0, "error_code": code}


# ---------------------------------------------------------------------------------------------- LeaveGroup
@handler(13, (0, 4))
def leave_group(ctx, req):
    version = ctx.api_version
    coord = _coordinator(ctx)
    if version >= 3:
        leaving = [(m["member_id"], m["group_instance_id"]) for m in req["members"]]
    else:
        leaving = [(req["member_id"], None)]
    if not ctx.authorize(READ, GROUP, req["group_id"]):
        top, per = GROUP_DENIED, [GROUP_DENIED] * len(leaving)
    elif coord is None:
        top, per = errors.COORDINATOR_NOT_AVAILABLE, [errors.COORDINATOR_NOT_AVAILABLE] * len(leaving)
    else:
        top, per = coord.leave_group(req["group_id"], leaving)
    if version < 3:
        return {"throttle_time_ms": 0, "error_code": top or per[0]}
    members = [] if top else [{"member_id": mid, "group_instance_id": inst, "error_code": code}
                              for (mid, inst), code in zip(leaving, per)]
    return {"throttle_time_ms": 0, "error_code": top, "members": members}


# -------------------------------------------------------------------------------------------- OffsetCommit
@handler(8, (0, 8))
def offset_commit(ctx, req):
    version = ctx.api_version
    coord = _coordinator(ctx)
    results = {}
    if not ctx.authorize(READ, GROUP, req["group_id"]):
        denied, group_denied = frozenset(), True
    else:
        denied, group_denied = auth.denied_names(ctx, READ, TOPIC, (t["name"] for t in req["topics"])), False
    offsets = {}
    for t in req["topics"]:
        name = t["name"]
        refused = GROUP_DENIED if group_denied else errors.TOPIC_AUTHORIZATION_FAILED if name in denied else 0
        for p in sliced(t["partitions"]):
            if refused:
                results[(name, p["partition_index"])] = refused
                continue
            offsets[(name, p["partition_index"])] = (
                p["committed_offset"], p["committed_leader_epoch"], p["committed_metadata"],
                p["commit_timestamp"] if version == 1 else -1)
    if not offsets:
        pass            # nothing allowed (or nothing asked): the coordinator is not involved (Kafka's)
    elif coord is None:
        results.update({tp: errors.COORDINATOR_NOT_AVAILABLE for tp in offsets})
    else:
        try:
            ctx.services.topics.ensure_offsets_topic()
        except errors.KafkaError:
            pass        # the coordinator then answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE
        retention = req["retention_time_ms"] if 2 <= version <= 4 else -1
        if version == 0:
            results.update(coord.commit_unchecked(req["group_id"], offsets))
        else:
            results.update(coord.handle_commit(req["group_id"], req["generation_id_or_member_epoch"],
                                               req["member_id"], req["group_instance_id"], retention, offsets))
    topics = []
    for t in req["topics"]:
        topics.append({"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": results[(t["name"], p["partition_index"])]}
            for p in sliced(t["partitions"])]})
    return {"throttle_time_ms": 0, "topics": topics}


# --------------------------------------------------------------------------------------------- OffsetFetch
@handler(9, (0, 7))
def offset_fetch(ctx, req):
    coord = _coordinator(ctx)
    requested = req["topics"]
    partitions = None if requested is None else [(t["name"], p) for t in requested for p in t["partition_indexes"]]
    group_ok = ctx.authorize(DESCRIBE, GROUP, req["group_id"])
    denied = unstable = frozenset()
    if group_ok and requested is not None:
        denied = auth.denied_names(ctx, DESCRIBE, TOPIC, (t["name"] for t in requested))
    if not group_ok:
        err, found = GROUP_DENIED, {}
    elif coord is None:
        err, found = errors.COORDINATOR_NOT_AVAILABLE, {}
    else:
        asked = partitions if not denied else [tp for tp in partitions if tp[0] not in denied]
        err, found = coord.fetch_offsets(req["group_id"], asked)
        if not err and ctx.api_version >= 7 and req["require_stable"]:
            unstable = coord.pending_partitions(req["group_id"])
        if requested is None and auth.enforcing(ctx):
            # All the group's offsets: those of topics the principal may not Describe are left out (Kafka's).
            visible = auth.authorized_names(ctx, DESCRIBE, TOPIC, (tp[0] for tp in found))
            found = {tp: oam for tp, oam in found.items() if tp[0] in visible}
    by_topic = {}
    if err:
        for tp in sliced(partitions or ()):
            by_topic.setdefault(tp[0], []).append(_fetched(tp[1], None, err))
    else:
        for tp in sliced(partitions if partitions is not None else sorted(found)):
            code = errors.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied else \
                errors.UNSTABLE_OFFSET_COMMIT if tp in unstable else NONE
            by_topic.setdefault(tp[0], []).append(_fetched(tp[1], None if code else found.get(tp), code))
    topics = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    return {"throttle_time_ms": 0, "topics": topics, "error_code": err}


def _fetched(partition, oam, err):
    if oam is None:
        return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": err}
    return {"partition_index": partition, "committed_offset": oam.offset, "committed_leader_epoch": oam.leader_epoch,
            "metadata": oam.metadata, "error_code": err}


# ------------------------------------------------------------------------------ DescribeGroups, ListGroups
@handler(15, (0, 5))
def describe_groups(ctx, req):
    coord = _coordinator(ctx)
    with_ops = ctx.api_version >= 3 and req["include_authorized_operations"]
    out = []
    for gid in sliced(req["groups"]):
        if not ctx.authorize(DESCRIBE, GROUP, gid):
            err, s = GROUP_DENIED, None
        else:
            err, s = (errors.COORDINATOR_NOT_AVAILABLE, None) if coord is None else coord.describe_group(gid)
        if err:
            out.append({"error_code": err, "group_id": gid, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": []})
            continue
        out.append({"error_code": NONE, "group_id": gid, "group_state": s["state"],
                    "protocol_type": s["protocol_type"], "protocol_data": s["protocol"],
                    "members": [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                                 "client_id": m["client_id"], "client_host": m["client_host"],
                                 "member_metadata": m["metadata"], "member_assignment": m["assignment"]}
                                for m in s["members"]]})
        if with_ops:
            out[-1]["authorized_operations"] = auth.authorized_operations(ctx, GROUP, gid)
    return {"throttle_time_ms": 0, "groups": out}


@handler(16, (0, 4))
def list_groups(ctx, req):
    coord = _coordinator(ctx)
    err, groups = (errors.COORDINATOR_NOT_AVAILABLE, []) if coord is None else coord.list_groups()
    if auth.enforcing(ctx) and not auth.cluster(ctx, DESCRIBE, log_denied=False):   # filters only: not audited
        visible = auth.authorized_names(ctx, DESCRIBE, GROUP, (g for g, _, _ in groups), log_denied=False)
        groups = [g for g in groups if g[0] in visible]
    wanted = {s.lower() for s in (req["states_filter"] or ())}
    return {"throttle_time_ms": 0, "error_code": err,
            "groups": [{"group_id": g, "protocol_type": pt, "group_state": st}
                       for g, pt, st in groups if not wanted or st.lower() in wanted]}


# -------------------------------------------------------------------------------------------- DeleteGroups
@handler(42, (0, 2))
def delete_groups(ctx, req):
    coord = _coordinator(ctx)
    results = []
    for gid in sliced(req["groups_names"]):
        if not ctx.authorize(DELETE, GROUP, gid):
            code = GROUP_DENIED
        else:
            code = errors.COORDINATOR_NOT_AVAILABLE if coord is None else coord.delete_group(gid)
        results.append({"group_id": gid, "error_code": code})
    return {"throttle_time_ms": 0, "results": results}
