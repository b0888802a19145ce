"""Metadata (api key 3): brokers, controller, cluster id and the partition layout of topics.

Versions 0-12, flexible from 9. ``topics``: in v0 an empty list means "all topics"; from v1 ``None`` means all
topics and an empty list means none. Version notes: v1 adds rack, controller id and is_internal; v2 adds cluster id;
v3 adds throttle time; v4 adds allow_auto_topic_creation; v5 adds offline replicas; v6 answers before throttling;
v7 adds leader epochs; v8 adds authorized-operation bitfields; v9 is the first flexible version; v10 adds topic ids
(nullable names, unused until v12); v11 drops the cluster-level operations (moved to DescribeCluster, KIP-700);
v12 lets a client ask by topic id.
"""
from kbroker.protocol.schema import Api, Field as F

_REQUEST_TOPIC = [
    F("topic_id", "uuid", "10+"),
    F("name", "string", nullable="10+"),
]

_BROKER = [
    F("node_id", "int32"),
    F("host", "string"),
    F("port", "int32"),
    F("rack", "string", "1+", nullable="1+", default=None),
]

_PARTITION = [
    F("error_code", "int16"),
    F("partition_index", "int32"),
    F("leader_id", "int32"),
    F("leader_epoch", "int32", "7+", default=-1),
    F("replica_nodes", "[]int32"),
    F("isr_nodes", "[]int32"),
    F("offline_replicas", "[]int32", "5+"),
]

_TOPIC = [
    F("error_code", "int16"),
    F("name", "string", nullable="12+"),
    F("topic_id", "uuid", "10+"),
    F("is_internal", "bool", "1+", default=False),
    F("partitions", "[]", fields=_PARTITION),
    # -2147483648 (INT32_MIN) means "not requested".
    F("topic_authorized_operations", "int32", "8+", default=-2147483648),
]

API = Api(
    key=3, name="Metadata", valid="0-12", flexible="9+",
    request=[
        F("topics", "[]", nullable="1+", fields=_REQUEST_TOPIC),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F("brokers", "[]", fields=_BROKER),
        F("cluster_id", "string", "2+", nullable="2+", default=None),
        F("controller_id", "int32", "1+", default=-1),
        F("topics", "[]", fields=_TOPIC),
        F("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    ],
)
