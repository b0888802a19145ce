"""LeaderAndIsr (key 4): the controller tells a broker which partitions it leads or follows (ZooKeeper mode).

v1 adds is_new; v2 adds broker_epoch and groups partitions by topic (the flat list stops at v1, and the partition
state's topic_name with it); v3 adds adding/removing replicas (reassignment); v4 is flexible; v5 adds topic_id and
the request type (0 incremental, 1 full), and the response groups errors by topic_id; v6 adds
leader_recovery_state (KIP-704); v7 adds is_kraft_controller (KIP-866 migration).
"""
from kbroker.protocol.schema import Api, Field as F

# Kafka's common struct LeaderAndIsrPartitionState (used flat in v0-1, per topic in v2+).
PARTITION_STATE = [
    F("topic_name", "string", "0-1"),
    F("partition_index", "int32"),
    F("controller_epoch", "int32"),
    F("leader", "int32"),
    F("leader_epoch", "int32"),
    F("isr", "[]int32"),
    F("partition_epoch", "int32"),
    F("replicas", "[]int32"),
    F("adding_replicas", "[]int32", "3+"),
    F("removing_replicas", "[]int32", "3+"),
    F("is_new", "bool", "1+", default=False),
    F("leader_recovery_state", "int8", "6+", default=0),
]

# Kafka's common struct LeaderAndIsrPartitionError.
PARTITION_ERROR = [
    F("topic_name", "string", "0-4"),
    F("partition_index", "int32"),
    F("error_code", "int16"),
]

API = Api(
    key=4, name="LeaderAndIsr", valid="0-7", flexible="4+",
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "7+", default=False),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "2+", default=-1),
        F("type", "int8", "5+"),
        F("ungrouped_partition_states", "[]", "0-1", fields=PARTITION_STATE),
        F("topic_states", "[]", "2+", fields=[
            F("topic_name", "string", "2+"),
            F("topic_id", "uuid", "5+"),
            F("partition_states", "[]", "2+", fields=PARTITION_STATE),
        ]),
        F("live_leaders", "[]", fields=[
            F("broker_id", "int32"),
            F("host_name", "string"),
            F("port", "int32"),
        ]),
    ],
    response=[
        F("error_code", "int16"),
        F("partition_errors", "[]", "0-4", fields=PARTITION_ERROR),
        F("topics", "[]", "5+", fields=[
            F("topic_id", "uuid", "5+"),
            F("partition_errors", "[]", "5+", fields=PARTITION_ERROR),
        ]),
    ],
)
