"""DescribeGroups (key 15): state, protocol and members of classic groups.

v1 adds throttle time; v2 responds before throttling; v3 can ask for authorized operations (a bit field, INT32_MIN
= "not requested"); v4 returns members' group_instance_id; v5 is flexible. protocol_data and the members'
metadata/assignment are only filled while the group is Stable; a Dead group has no members.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=15, name="DescribeGroups", valid="0-5", flexible="5+",
    request=[
        F("groups", "[]string"),
        F("include_authorized_operations", "bool", "3+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("groups", "[]", fields=[
            F("error_code", "int16"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            F("protocol_data", "string"),
            F("members", "[]", fields=[
                F("member_id", "string"),
                F("group_instance_id", "string", "4+", nullable="4+", default=None),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            ]),
            F("authorized_operations", "int32", "3+", default=-2147483648),
        ]),
    ],
)
