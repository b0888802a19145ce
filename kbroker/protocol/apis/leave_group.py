"""LeaveGroup (key 13): members leave a classic group (triggers a rebalance).

v1 adds throttle time; v2 responds before throttling; v3 leaves in batches of (member_id, group_instance_id) with a
per-member result (the single member_id stops at v2); v4 is flexible; v5 adds a per-member reason (KIP-800).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=13, name="LeaveGroup", valid="0-5", flexible="4+",
    request=[
        F("group_id", "string"),
        F("member_id", "string", "0-2"),
        F("members", "[]", "3+", fields=[
            F("member_id", "string", "3+"),
            F("group_instance_id", "string", "3+", nullable="3+", default=None),
            F("reason", "string", "5+", nullable="5+", default=None),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("members", "[]", "3+", fields=[
            F("member_id", "string", "3+"),
            F("group_instance_id", "string", "3+", nullable="3+"),
            F("error_code", "int16", "3+"),
        ]),
    ],
)
