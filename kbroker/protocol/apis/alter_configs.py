"""AlterConfigs (api key 33): replace the whole dynamic config of a topic or broker (non-incremental).

Versions 0-2, flexible from 2. Version notes: the v1 request equals v0 (v1 answers before throttling); v2 is the
first flexible version.
"""
from kbroker.protocol.schema import Api, Field as F

_CONFIG = [
    F("name", "string"),
    F("value", "string", nullable="0+"),
]

_RESOURCE = [
    F("resource_type", "int8"),
    F("resource_name", "string"),
    F("configs", "[]", fields=_CONFIG),
]

_RESPONSE = [
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("resource_type", "int8"),
    F("resource_name", "string"),
]

API = Api(
    key=33, name="AlterConfigs", valid="0-2", flexible="2+",
    request=[
        F("resources", "[]", fields=_RESOURCE),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", "[]", fields=_RESPONSE),
    ],
)
