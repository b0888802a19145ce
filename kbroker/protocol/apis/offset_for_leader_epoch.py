"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, so a follower/consumer can truncate correctly.

v1 returns the leader epoch actually found; v2 adds current_leader_epoch (fencing) and throttle time; v3 adds
replica_id (default -2, the "debug consumer" that may read past the high watermark); v4 is flexible.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=23, name="OffsetForLeaderEpoch", valid="0-4", flexible="4+",
    request=[
        F("replica_id", "int32", "3+", default=-2),
        F("topics", "[]", fields=[
            F("topic", "string"),
            F("partitions", "[]", fields=[
                F("partition", "int32"),
                F("current_leader_epoch", "int32", "2+", default=-1),
                F("leader_epoch", "int32"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("topics", "[]", fields=[
            F("topic", "string"),
            F("partitions", "[]", fields=[
                F("error_code", "int16"),
                F("partition", "int32"),
                F("leader_epoch", "int32", "1+", default=-1),
                F("end_offset", "int64", default=-1),
            ]),
        ]),
    ],
)
