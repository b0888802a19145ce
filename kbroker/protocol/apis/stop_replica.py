"""StopReplica (key 5): the controller tells a broker to stop fetching (and maybe delete) some partitions.

v1 adds broker_epoch and groups partitions per topic; v2 is flexible; v3 moves delete_partition into a per-partition
state with the leader epoch (KIP-570; the response may carry FENCED_LEADER_EPOCH); v4 adds is_kraft_controller.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=5, name="StopReplica", valid="0-4", flexible="2+",
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "4+", default=False),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "1+", default=-1),
        F("delete_partitions", "bool", "0-2"),
        F("ungrouped_partitions", "[]", "0", fields=[
            F("topic_name", "string", "0"),
            F("partition_index", "int32", "0"),
        ]),
        F("topics", "[]", "1-2", fields=[
            F("name", "string", "1-2"),
            F("partition_indexes", "[]int32", "1-2"),
        ]),
        F("topic_states", "[]", "3+", fields=[
            F("topic_name", "string", "3+"),
            F("partition_states", "[]", "3+", fields=[
                F("partition_index", "int32", "3+"),
                F("leader_epoch", "int32", "3+", default=-1),
                F("delete_partition", "bool", "3+"),
            ]),
        ]),
    ],
    response=[
        F("error_code", "int16"),
        F("partition_errors", "[]", fields=[
            F("topic_name", "string"),
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ],
)
