"""Heartbeat (key 12): a classic-group member proves it is alive; REBALANCE_IN_PROGRESS tells it to rejoin.

v1 adds throttle time; v2 responds before throttling; v3 adds group_instance_id; v4 is flexible.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=12, name="Heartbeat", valid="0-4", flexible="4+",
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
    ],
)
