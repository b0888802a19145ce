"""UpdateMetadata (key 6): the controller pushes cluster metadata (live brokers, partition states) to a broker.

v1 gives each broker a list of endpoints (v0 had one host/port); v2 adds the rack; v3 the listener name; v4 the
offline replicas; v5 adds broker_epoch and groups partitions by topic; v6 is flexible; v7 adds topic_id; v8 adds
is_kraft_controller and a tagged request type (KIP-866 migration).
"""
from kbroker.protocol.schema import Api, Field as F

# Kafka's common struct UpdateMetadataPartitionState (flat in v0-4, per topic in v5+).
PARTITION_STATE = [
    F("topic_name", "string", "0-4"),
    F("partition_index", "int32"),
    F("controller_epoch", "int32"),
    F("leader", "int32"),
    F("leader_epoch", "int32"),
    F("isr", "[]int32"),
    F("zk_version", "int32"),
    F("replicas", "[]int32"),
    F("offline_replicas", "[]int32", "4+"),
]

API = Api(
    key=6, name="UpdateMetadata", valid="0-8", flexible="6+",
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "8+", default=False),
        F("type", "int8", "8+", default=0, tag=0),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "5+", default=-1),
        F("ungrouped_partition_states", "[]", "0-4", fields=PARTITION_STATE),
        F("topic_states", "[]", "5+", fields=[
            F("topic_name", "string", "5+"),
            F("topic_id", "uuid", "7+"),
            F("partition_states", "[]", "5+", fields=PARTITION_STATE),
        ]),
        F("live_brokers", "[]", fields=[
            F("id", "int32"),
            F("v0_host", "string", "0"),
            F("v0_port", "int32", "0"),
            F("endpoints", "[]", "1+", fields=[
                F("port", "int32", "1+"),
                F("host", "string", "1+"),
                F("listener", "string", "3+"),
                F("security_protocol", "int16", "1+"),
            ]),
            F("rack", "string", "2+", nullable="0+"),
        ]),
    ],
    response=[
        F("error_code", "int16"),
    ],
)
