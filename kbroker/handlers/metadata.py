"""Metadata (3), served v0-v9.

Behaviour (Kafka's): v0 empty topic list = all topics; v1+ null = all, empty = none. Unknown topics are auto-created
when ``auto.create.topics.enable`` and (v4+) ``allow_auto_topic_creation``; the broker answers with the created
topic's partitions when the controller has elected their leaders within a short wait, LEADER_NOT_AVAILABLE (5)
otherwise. Invalid names get INVALID_TOPIC_EXCEPTION (17); unknown ones UNKNOWN_TOPIC_OR_PARTITION (3). Brokers
listed are the live brokers with an endpoint on the listener the request came in on.

Named topics are answered once each, however often the request repeats them (Kafka reads them into a set). A
request naming more than ``metadata.request.max.topics`` distinct topics (kbroker's key, default 10,000) closes the
connection: each name costs a lookup and an answer entry (~5 us on a 2-core machine, so 10,000 take ~50 ms of the
event loop), the response has no request-level error code to refuse with, and a 4 MB request can name 2 M topics.
A null list (all topics) is not limited: its size is the cluster's, not the client's.

Authorization (Kafka's KafkaApis.handleTopicMetadataRequest, ``kbroker/handlers/auth.py``): a request for all
topics lists only those the principal may Describe; a named topic it may not Describe answers
TOPIC_AUTHORIZATION_FAILED (29) without its existence being looked at (whether it exists is not disclosed). An
unknown named topic that would be auto-created needs Create on the Cluster (asked once per request) or on the
topic, else 29 and nothing is created. v8+ ``include_cluster_authorized_operations`` (v8-v10) answers KIP-430's
bit field of the Cluster operations the principal may perform (0 without Describe on the Cluster),
``include_topic_authorized_operations`` each answered topic's (not the 29 ones); without an authorizer every
supported operation, as Kafka. Otherwise they stay INT32_MIN ("not provided").

A topic's answer is built and encoded once per version and change of its partition states or of the live brokers,
and its bytes reused (the cache's ``memo``, ``schema.Encoded``): a full Metadata of 27,000 partitions cost ~60 ms of
encoding on the loop, and clients ask again every 100 ms while a leader is unknown (librdkafka's
topic.metadata.refresh.fast.interval.ms) -- after a broker failure, the most loaded moment. With
``include_topic_authorized_operations`` (per principal) the answer is encoded per request.

A Metadata request that arrives while the broker is still starting (listening, but without the controller's first
UpdateMetadata: ``services.ready``) waits for it, at most ``READY_WAIT_S`` (30 s): answered earlier it would name no
controller and no leaders, which librdkafka's AdminClient answers by waiting ~35 s before it asks again. Kafka does
not process client requests before its startup completes either.
"""
from kbroker import errors
from kbroker.coord.metadata_store import validate_topic_name
from kbroker.handlers import auth
from kbroker.handlers.common import sliced
from kbroker.internal_topics import is_internal
from kbroker.protocol.apis import APIS
from kbroker.security.acl import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, TOPIC
from kbroker.server.connection import CloseConnection
from kbroker.server.context import READY_WAIT_S
from kbroker.server.router import handler


_TOPICS_API = APIS[3]


@handler(3, (0, 9))
def metadata(ctx, req):
    services = ctx.services
    cache = services.metadata
    services.ready.wait(READY_WAIT_S)
    version = ctx.api_version
    requested = req["topics"]
    if requested is None or (version == 0 and not requested):
        names = cache.topics()
        explicit = False
    else:
        names = list(dict.fromkeys(t["name"] for t in requested))  # distinct, in request order
        explicit = True
        limit = services.config.get("metadata.request.max.topics", 10000)
        if len(names) > limit:
            raise CloseConnection("Metadata request names %d topics, more than metadata.request.max.topics=%d"
                                  % (len(names), limit))
    auto = services.config["auto.create.topics.enable"] and req["allow_auto_topic_creation"]
    # None: no authorizer, every topic may be described (and no question is asked per topic).
    # Listing all topics only leaves out the ones the principal may not see: no denial in the audit log (Kafka's).
    describable = auth.authorized_names(ctx, DESCRIBE, TOPIC, names, log_denied=explicit) \
        if auth.enforcing(ctx) else None
    if describable is not None and not explicit:
        names = [n for n in names if n in describable]
    may_create = _CreateCheck(ctx)
    with_ops = version >= 8 and req["include_topic_authorized_operations"]
    topics = []
    live = cache.alive_broker_ids()
    v0 = version == 0     # v0 alone answers differently (drops offline replicas): the dict memo's key
    for name in sliced(names):
        if describable is not None and name not in describable:
            topics.append(_topic_error(name, errors.TOPIC_AUTHORIZATION_FAILED))
            continue
        # the live set read at build time: the slices above may yield to an UpdateMetadata changing it
        if with_ops:    # adds a field per principal: the memo's dict copied, not its bytes
            answer = cache.memo(name, ("dict", v0),
                                lambda meta: _topic(cache.alive_broker_ids(), name, meta, version))
            if answer is not None:
                answer = dict(answer)
        else:
            answer = cache.memo(name, ("bytes", version), lambda meta: _TOPICS_API.encode_element(
                "resp", version, "topics", _topic(cache.alive_broker_ids(), name, meta, version)))
        if answer is not None:
            topics.append(answer)
            continue
        meta = None
        if explicit:
            if auto and not may_create(name):
                topics.append(_topic_error(name, errors.TOPIC_AUTHORIZATION_FAILED, is_internal(name)))
                continue
            if auto and not is_internal(name):
                try:
                    services.topics.auto_create_topic(name)
                    meta = cache.topic(name)
                except errors.KafkaError as e:
                    topics.append(_topic_error(name, e.code))
                    continue
                if meta is None:  # created, leaders not elected yet: the client retries
                    topics.append(_topic_error(name, errors.LEADER_NOT_AVAILABLE))
                    continue
                topics.append(_topic(live, name, meta, version))
                continue
            else:
                code = errors.INVALID_TOPIC_EXCEPTION if not _valid_topic_name(name) \
                    else errors.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(_topic_error(name, code))
                continue
    if with_ops:
        # Every answered topic but the refused ones (Kafka's), ~8 questions a topic. (No Encoded entries here.)
        for t in sliced(topics):
            if t["error_code"] != errors.TOPIC_AUTHORIZATION_FAILED:
                t["topic_authorized_operations"] = auth.authorized_operations(ctx, TOPIC, t["name"])
    out = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in cache.alive_brokers(ctx.listener)],
        "cluster_id": services.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
    }
    if 8 <= version <= 10 and req["include_cluster_authorized_operations"]:
        out["cluster_authorized_operations"] = auth.authorized_operations(ctx, CLUSTER, CLUSTER_NAME) \
            if auth.cluster(ctx, DESCRIBE, log_denied=False) else 0
    return out


class _CreateCheck:
    """May the principal auto-create this topic? Create on the Cluster (asked at most once per request) or on the
    topic (Kafka's rule)."""
    __slots__ = ("ctx", "_cluster")

    def __init__(self, ctx):
        self.ctx = ctx
        self._cluster = None

    def __call__(self, name):
        if self._cluster is None:
            self._cluster = auth.cluster(self.ctx, CREATE, log_denied=False)  # Create on the topic may do
        return self._cluster or self.ctx.authorize(CREATE, TOPIC, name)


def _valid_topic_name(name):
    try:
        validate_topic_name(name)
        return True
    except errors.KafkaError:
        return False


def _topic_error(name, code, internal=False):
    return {"error_code": code, "name": name, "is_internal": internal, "partitions": []}


def _topic(live, name, meta, version):
    """One topic's answer from its cached partition states; ``live``: the live broker ids."""
    parts = []
    for p in sorted(meta):
        st = meta[p]
        err = 0
        leader = st.leader
        if leader < 0 or leader not in live:
            err, leader = errors.LEADER_NOT_AVAILABLE, -1
        replicas, isr = list(st.replicas), list(st.isr)
        offline = [r for r in replicas if r not in live]
        if version == 0 and offline:
            # v0 clients cannot handle unknown nodes in the lists: drop them and say so (Kafka 0.10.1).
            replicas = [r for r in replicas if r in live]
            isr = [r for r in isr if r in live]
            err = err or errors.REPLICA_NOT_AVAILABLE
        if st.offline_replicas:     # + replicas on live brokers whose log dir failed (the controller's, KIP-112)
            offline += [r for r in st.offline_replicas if r not in offline]
        parts.append({"error_code": err, "partition_index": p, "leader_id": leader,
                      "leader_epoch": st.leader_epoch, "replica_nodes": replicas, "isr_nodes": isr,
                      "offline_replicas": offline})
    return {"error_code": 0, "name": name, "is_internal": is_internal(name), "partitions": parts}
