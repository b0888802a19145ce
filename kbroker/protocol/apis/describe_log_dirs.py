"""DescribeLogDirs (api key 35): per log directory, the size and lag of the partitions it holds.

Versions 0-4, flexible from 2. ``topics`` None asks about every partition. Version notes: v1 answers before
throttling; v2 is the first flexible version; v3 adds a top-level error code; v4 adds each directory's total and
usable bytes (-1 when unknown).
"""
from kbroker.protocol.schema import Api, Field as F

_TOPIC = [
    F("topic", "string"),
    F("partitions", "[]int32"),
]

_PARTITION = [
    F("partition_index", "int32"),
    F("partition_size", "int64"),
    F("offset_lag", "int64"),
    F("is_future_key", "bool"),
]

_TOPIC_RESULT = [
    F("name", "string"),
    F("partitions", "[]", fields=_PARTITION),
]

_RESULT = [
    F("error_code", "int16"),
    F("log_dir", "string"),
    F("topics", "[]", fields=_TOPIC_RESULT),
    F("total_bytes", "int64", "4+", default=-1),
    F("usable_bytes", "int64", "4+", default=-1),
]

API = Api(
    key=35, name="DescribeLogDirs", valid="0-4", flexible="2+",
    request=[
        F("topics", "[]", nullable="0+", fields=_TOPIC),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "3+"),
        F("results", "[]", fields=_RESULT),
    ],
)
