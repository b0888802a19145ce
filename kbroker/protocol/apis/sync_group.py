"""SyncGroup (key 14): the leader hands in every member's assignment; every member gets its own back.

v1 adds throttle time; v2 responds before throttling; v3 adds group_instance_id; v4 is flexible; v5 sends
protocol_type/protocol_name both ways so the broker can reject a mismatch (KIP-559).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=14, name="SyncGroup", valid="0-5", flexible="4+",
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F("assignments", "[]", fields=[
            F("member_id", "string"),
            F("assignment", "bytes"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F("assignment", "bytes"),
    ],
)
