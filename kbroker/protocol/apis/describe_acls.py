"""DescribeAcls (api key 29): the ACL bindings matching one filter, grouped by resource pattern.

Versions 0-3, flexible from 2. v1 adds the pattern type (KIP-290: LITERAL 3, PREFIXED 4; a filter may also say
ANY 1 or MATCH 2); a v0 filter and v0 answer know only LITERAL. Codes are ``kbroker/security/acl.py``'s. Null
name/principal/host filters match any.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=29, name="DescribeAcls", valid="0-3", flexible="2+",
    request=[
        F("resource_type_filter", "int8"),
        F("resource_name_filter", "string", nullable="0+"),
        F("pattern_type_filter", "int8", "1+", default=3),
        F("principal_filter", "string", nullable="0+"),
        F("host_filter", "string", nullable="0+"),
        F("operation", "int8"),
        F("permission_type", "int8"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("resources", "[]", fields=[
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=3),
            F("acls", "[]", fields=[
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ]),
        ]),
    ],
)
