"""OffsetCommit (key 8): a consumer stores its position per partition in its group's coordinator.

v1 adds generation/member (and a per-partition commit timestamp, v1 only); v2-v4 carry a retention time instead,
dropped again in v5 (the broker's offsets.retention.minutes decides); v6 adds the committed leader epoch; v7 adds
group_instance_id (static membership); v8 is flexible; v9 is the first one usable by KIP-848 consumers (same body).
"""
from kbroker.protocol.schema import Api, Field as F

REQUEST_PARTITION = [
    F("partition_index", "int32"),
    F("committed_offset", "int64"),
    F("committed_leader_epoch", "int32", "6+", default=-1),
    F("commit_timestamp", "int64", "1", default=-1),       # only v1; v2+ use the broker's clock
    F("committed_metadata", "string", nullable="0+"),
]

RESPONSE_PARTITION = [
    F("partition_index", "int32"),
    F("error_code", "int16"),
]

API = Api(
    key=8, name="OffsetCommit", valid="0-9", flexible="8+",
    request=[
        F("group_id", "string"),
        F("generation_id_or_member_epoch", "int32", "1+", default=-1),
        F("member_id", "string", "1+"),
        F("group_instance_id", "string", "7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1),
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=REQUEST_PARTITION),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),                  # v3 adds throttling; v4+ respond before throttling
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=RESPONSE_PARTITION),
        ]),
    ],
)
