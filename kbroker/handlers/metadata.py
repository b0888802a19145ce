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

A Metadata request that arrives while the broker is still starting (listening, but without the controller's first
UpdateMetadata: ``services.ready``) waits for it, at most ``READY_WAIT_S`` (30 s): answered earlier it would name no
controller and no leaders, which librdkafka's AdminClient answers by waiting ~35 s before it asks again. Kafka does
not process client requests before its startup completes either.
"""
from kbroker import errors
from kbroker.coord.metadata_store import validate_topic_name
from kbroker.internal_topics import is_internal
from kbroker.server.connection import CloseConnection
from kbroker.server.context import READY_WAIT_S
from kbroker.server.router import handler


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
    topics = []
    for name in names:
        meta = cache.topic(name)
        if meta is None and explicit:
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
            else:
                code = errors.INVALID_TOPIC_EXCEPTION if not _valid_topic_name(name) \
                    else errors.UNKNOWN_TOPIC_OR_PARTITION
                topics.append(_topic_error(name, code))
                continue
        if meta is None:
            continue
        topics.append(_topic(cache.alive_broker_ids(), name, meta, version))
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b.id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in cache.alive_brokers(ctx.listener)],
        "cluster_id": services.cluster_id,
        "controller_id": cache.controller_id,
        "topics": topics,
    }


def _valid_topic_name(name):
    try:
        validate_topic_name(name)
        return True
    except errors.KafkaError:
        return False


def _topic_error(name, code):
    return {"error_code": code, "name": name, "is_internal": False, "partitions": []}


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
        parts.append({"error_code": err, "partition_index": p, "leader_id": leader,
                      "leader_epoch": st.leader_epoch, "replica_nodes": replicas, "isr_nodes": isr,
                      "offline_replicas": offline})
    return {"error_code": 0, "name": name, "is_internal": is_internal(name), "partitions": parts}
