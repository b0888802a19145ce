"""ListGroups (key 16): every group this broker coordinates.

v1 adds throttle time; v2 responds before throttling; v3 is flexible; v4 filters by state and returns it
(KIP-518); v5 filters by group type and returns it (KIP-848).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=16, name="ListGroups", valid="0-5", flexible="3+",
    request=[
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("groups", "[]", fields=[
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", "4+"),
            F("group_type", "string", "5+"),
        ]),
    ],
)
