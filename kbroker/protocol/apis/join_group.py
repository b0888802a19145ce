"""JoinGroup (key 11): a member joins a classic group; the coordinator picks a leader and a protocol.

v1 adds rebalance_timeout_ms (-1 = "use session_timeout_ms"); v2 adds throttle time; v3 responds before throttling;
v4 makes a member without an id rejoin with the id handed back (MEMBER_ID_REQUIRED); v5 adds group_instance_id;
v6 is flexible; v7 returns protocol_type and lets protocol_name be null; v8 adds the join reason (KIP-800);
v9 adds skip_assignment (the leader need not assign; the server already did).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=11, name="JoinGroup", valid="0-9", flexible="6+",
    request=[
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        F("rebalance_timeout_ms", "int32", "1+", default=-1),
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("protocol_type", "string"),
        F("protocols", "[]", fields=[
            F("name", "string"),
            F("metadata", "bytes"),
        ]),
        F("reason", "string", "8+", nullable="8+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", "7+", nullable="7+", default=None),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", "9+", default=False),
        F("member_id", "string"),
        F("members", "[]", fields=[
            F("member_id", "string"),
            F("group_instance_id", "string", "5+", nullable="5+", default=None),
            F("metadata", "bytes"),
        ]),
    ],
)
