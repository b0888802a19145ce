"""CreateAcls (api key 30): store ACL bindings; one result per creation, in request order.

Versions 0-3, flexible from 2; v1 adds ``resource_pattern_type`` (LITERAL 3 / PREFIXED 4; v0 is LITERAL).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=30, name="CreateAcls", valid="0-3", flexible="2+",
    request=[
        F("creations", "[]", fields=[
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("resource_pattern_type", "int8", "1+", default=3),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", "[]", fields=[
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        ]),
    ],
)
