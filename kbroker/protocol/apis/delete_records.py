"""DeleteRecords (api key 21): advance partitions' log start offsets (``offset`` -1 means the high watermark).

Versions 0-2, flexible from 2. Version notes: the v1 request equals v0 (v1 answers before throttling); v2 is the
first flexible version.
"""
from kbroker.protocol.schema import Api, Field as F

_PARTITION = [
    F("partition_index", "int32"),
    F("offset", "int64"),
]

_TOPIC = [
    F("name", "string"),
    F("partitions", "[]", fields=_PARTITION),
]

_PARTITION_RESULT = [
    F("partition_index", "int32"),
    F("low_watermark", "int64"),
    F("error_code", "int16"),
]

_TOPIC_RESULT = [
    F("name", "string"),
    F("partitions", "[]", fields=_PARTITION_RESULT),
]

API = Api(
    key=21, name="DeleteRecords", valid="0-2", flexible="2+",
    request=[
        F("topics", "[]", fields=_TOPIC),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", "[]", fields=_TOPIC_RESULT),
    ],
)
