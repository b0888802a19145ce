"""CreatePartitions (api key 37): grow a topic to ``count`` partitions, optionally with explicit replica lists.

Versions 0-3, flexible from 2. ``assignments`` None lets the broker place the new partitions. Version notes: the v1
request equals v0 (v1 answers before throttling); v2 is the first flexible version; v3 allows
THROTTLING_QUOTA_EXCEEDED (89, KIP-599).
"""
from kbroker.protocol.schema import Api, Field as F

_ASSIGNMENT = [
    F("broker_ids", "[]int32"),
]

_TOPIC = [
    F("name", "string"),
    F("count", "int32"),
    F("assignments", "[]", nullable="0+", fields=_ASSIGNMENT),
]

_RESULT = [
    F("name", "string"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
]

API = Api(
    key=37, name="CreatePartitions", valid="0-3", flexible="2+",
    request=[
        F("topics", "[]", fields=_TOPIC),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", "[]", fields=_RESULT),
    ],
)
