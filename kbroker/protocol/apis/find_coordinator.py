"""FindCoordinator (key 10): which broker coordinates a group (key_type 0) or a transactional id (key_type 1).

v1 adds key_type, throttle time and error messages; v2 responds before throttling; v3 is flexible; v4 batches
several keys (coordinator_keys in, coordinators[] out; the single-key fields stop at v3); v5 may return
TRANSACTION_ABORTABLE (KIP-890); v6 adds share-group keys (KIP-932). Wire layout is identical for v4-v6.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=10, name="FindCoordinator", valid="0-6", flexible="3+",
    request=[
        F("key", "string", "0-3"),
        F("key_type", "int8", "1+", default=0),
        F("coordinator_keys", "[]string", "4+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="1-3"),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F("coordinators", "[]", "4+", fields=[
            F("key", "string", "4+"),
            F("node_id", "int32", "4+"),
            F("host", "string", "4+"),
            F("port", "int32", "4+"),
            F("error_code", "int16", "4+"),
            F("error_message", "string", "4+", nullable="4+"),
        ]),
    ],
)
