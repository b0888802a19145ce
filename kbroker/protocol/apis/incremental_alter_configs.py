"""IncrementalAlterConfigs (api key 44, KIP-339): change individual config keys of a resource.

Versions 0-1, flexible from 1 (the only difference). Each config names an operation: ``config_operation`` 0 = SET,
1 = DELETE (back to the default), 2 = APPEND and 3 = SUBTRACT (list-type keys only: add/remove comma-separated
items). ``value`` is ignored for DELETE and may then be null. The only config-altering call of Kafka's Java Admin
client since 4.0 (``alterConfigs``, api key 33, was removed from it).
"""
from kbroker.protocol.schema import Api, Field as F

_CONFIG = [
    F("name", "string"),
    F("config_operation", "int8"),
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
    key=44, name="IncrementalAlterConfigs", valid="0-1", flexible="1+",
    request=[
        F("resources", "[]", fields=_RESOURCE),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("responses", "[]", fields=_RESPONSE),
    ],
)
