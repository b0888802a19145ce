"""ListOffsets (api key 2): find the offset for a timestamp (-1 latest, -2 earliest, -3 max timestamp, ...).

Versions 0-9, flexible from 6. v0 returns up to ``max_num_offsets`` segment-boundary offsets in
``old_style_offsets``; v1+ return one (timestamp, offset) pair. Version notes: v1 drops max_num_offsets and adds the
timestamp in the answer; v2 adds isolation level and throttle time; v3 answers before throttling; v4 adds leader
epochs; v5 adds OFFSET_NOT_AVAILABLE; v6 is the first flexible version; v7 allows -3 (max timestamp, KIP-734); v8
allows -4 (local log start, KIP-405); v9 allows -5 (last tiered offset, KIP-1005).
"""
from kbroker.protocol.schema import Api, Field as F

_PARTITION = [
    F("partition_index", "int32"),
    F("current_leader_epoch", "int32", "4+", default=-1),
    F("timestamp", "int64"),
    F("max_num_offsets", "int32", "0", default=1),
]

_TOPIC = [
    F("name", "string"),
    F("partitions", "[]", fields=_PARTITION),
]

_PARTITION_RESPONSE = [
    F("partition_index", "int32"),
    F("error_code", "int16"),
    F("old_style_offsets", "[]int64", "0"),
    F("timestamp", "int64", "1+", default=-1),
    F("offset", "int64", "1+", default=-1),
    F("leader_epoch", "int32", "4+", default=-1),
]

_TOPIC_RESPONSE = [
    F("name", "string"),
    F("partitions", "[]", fields=_PARTITION_RESPONSE),
]

API = Api(
    key=2, name="ListOffsets", valid="0-9", flexible="6+",
    request=[
        F("replica_id", "int32"),
        F("isolation_level", "int8", "2+"),
        F("topics", "[]", fields=_TOPIC),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("topics", "[]", fields=_TOPIC_RESPONSE),
    ],
)
