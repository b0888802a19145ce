"""DeleteTopics (api key 20): delete topics by name (v0-v5) or by name or topic id (v6+).

Versions 0-6, flexible from 4. Version notes: v0-v3 requests are identical (responses gain throttle time in v1,
answer-before-throttling in v2, TOPIC_DELETION_DISABLED (73) in v3); v4 is the first flexible version; v5 adds a
per-topic error message and THROTTLING_QUOTA_EXCEEDED (89, KIP-599); v6 replaces ``topic_names`` with ``topics``
entries carrying a nullable name and a topic id.
"""
from kbroker.protocol.schema import Api, Field as F

_TOPIC_STATE = [
    F("name", "string", "6+", nullable="6+", default=None),
    F("topic_id", "uuid", "6+"),
]

_RESULT = [
    F("name", "string", nullable="6+"),
    F("topic_id", "uuid", "6+"),
    F("error_code", "int16"),
    F("error_message", "string", "5+", nullable="5+", default=None),
]

API = Api(
    key=20, name="DeleteTopics", valid="0-6", flexible="4+",
    request=[
        F("topics", "[]", "6+", fields=_TOPIC_STATE),
        F("topic_names", "[]string", "0-5"),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("responses", "[]", fields=_RESULT),
    ],
)
