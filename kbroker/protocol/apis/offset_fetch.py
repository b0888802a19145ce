"""OffsetFetch (key 9): read a group's committed positions.

v0 read from ZooKeeper, v1+ from __consumer_offsets; v2 allows topics=null ("all topics") and adds a top-level
error code; v3 adds throttle time; v5 returns the committed leader epoch; v6 is flexible; v7 adds require_stable
(UNSTABLE_OFFSET_COMMIT while a transaction is pending); v8 batches several groups (the single-group fields stop at
v7); v9 adds member_id/member_epoch for KIP-848 consumers.
"""
from kbroker.protocol.schema import Api, Field as F

RESPONSE_PARTITION_V0_7 = [
    F("partition_index", "int32", "0-7"),
    F("committed_offset", "int64", "0-7"),
    F("committed_leader_epoch", "int32", "5-7", default=-1),
    F("metadata", "string", "0-7", nullable="0-7"),
    F("error_code", "int16", "0-7"),
]

RESPONSE_PARTITION_V8 = [
    F("partition_index", "int32", "8+"),
    F("committed_offset", "int64", "8+"),
    F("committed_leader_epoch", "int32", "8+", default=-1),
    F("metadata", "string", "8+", nullable="8+"),
    F("error_code", "int16", "8+"),
]

API = Api(
    key=9, name="OffsetFetch", valid="0-9", flexible="6+",
    request=[
        F("group_id", "string", "0-7"),
        F("topics", "[]", "0-7", nullable="2-7", fields=[
            F("name", "string", "0-7"),
            F("partition_indexes", "[]int32", "0-7"),
        ]),
        F("groups", "[]", "8+", fields=[
            F("group_id", "string", "8+"),
            F("member_id", "string", "9+", nullable="9+", default=None),
            F("member_epoch", "int32", "9+", default=-1),
            F("topics", "[]", "8+", nullable="8+", fields=[
                F("name", "string", "8+"),
                F("partition_indexes", "[]int32", "8+"),
            ]),
        ]),
        F("require_stable", "bool", "7+", default=False),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F("topics", "[]", "0-7", fields=[
            F("name", "string", "0-7"),
            F("partitions", "[]", "0-7", fields=RESPONSE_PARTITION_V0_7),
        ]),
        F("error_code", "int16", "2-7", default=0),
        F("groups", "[]", "8+", fields=[
            F("group_id", "string", "8+"),
            F("topics", "[]", "8+", fields=[
                F("name", "string", "8+"),
                F("partitions", "[]", "8+", fields=RESPONSE_PARTITION_V8),
            ]),
            F("error_code", "int16", "8+", default=0),
        ]),
    ],
)
