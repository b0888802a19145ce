"""CreateTopics (api key 19): create topics with a partition count + replication factor or explicit assignments.

Versions 0-7, flexible from 5. ``num_partitions``/``replication_factor`` of -1 mean "broker default" (v4+, KIP-464)
or "given by assignments". Version notes: v1 adds validate_only and a per-topic error message; v2 adds throttle
time; v3 answers before throttling; v4 lets -1 pick broker defaults; v5 is the first flexible version and echoes the
resulting topic configs (KIP-525); v6 allows THROTTLING_QUOTA_EXCEEDED (89, KIP-599); v7 returns the new topic id.
"""
from kbroker.protocol.schema import Api, Field as F

_ASSIGNMENT = [
    F("partition_index", "int32"),
    F("broker_ids", "[]int32"),
]

_CONFIG = [
    F("name", "string"),
    F("value", "string", nullable="0+"),
]

_TOPIC = [
    F("name", "string"),
    F("num_partitions", "int32"),
    F("replication_factor", "int16"),
    F("assignments", "[]", fields=_ASSIGNMENT),
    F("configs", "[]", fields=_CONFIG),
]

_CONFIG_RESULT = [
    F("name", "string", "5+"),
    F("value", "string", "5+", nullable="5+"),
    F("read_only", "bool", "5+"),
    F("config_source", "int8", "5+", default=-1),
    F("is_sensitive", "bool", "5+"),
]

_TOPIC_RESULT = [
    F("name", "string"),
    F("topic_id", "uuid", "7+"),
    F("error_code", "int16"),
    F("error_message", "string", "1+", nullable="0+"),
    F("topic_config_error_code", "int16", "5+", tag=0),
    F("num_partitions", "int32", "5+", default=-1),
    F("replication_factor", "int16", "5+", default=-1),
    F("configs", "[]", "5+", nullable="5+", fields=_CONFIG_RESULT),
]

API = Api(
    key=19, name="CreateTopics", valid="0-7", flexible="5+",
    request=[
        F("topics", "[]", fields=_TOPIC),
        F("timeout_ms", "int32", default=60000),
        F("validate_only", "bool", "1+", default=False),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("topics", "[]", fields=_TOPIC_RESULT),
    ],
)
