"""DescribeConfigs (api key 32): read topic (resource_type 2) or broker (4) configuration entries.

Versions 0-4, flexible from 4. ``configuration_keys`` None means every key. Version notes: v1 adds
include_synonyms, config_source and synonyms (v0 has is_default instead of config_source); v2 answers before
throttling; v3 adds include_documentation, config_type and documentation; v4 is the first flexible version.
"""
from kbroker.protocol.schema import Api, Field as F

_RESOURCE = [
    F("resource_type", "int8"),
    F("resource_name", "string"),
    F("configuration_keys", "[]string", nullable="0+"),
]

_SYNONYM = [
    F("name", "string", "1+"),
    F("value", "string", "1+", nullable="0+"),
    F("source", "int8", "1+"),
]

_CONFIG = [
    F("name", "string"),
    F("value", "string", nullable="0+"),
    F("read_only", "bool"),
    F("is_default", "bool", "0"),
    # -1 is a placeholder: what a v0 caller should see depends on the resource (e.g. 4 for a broker).
    F("config_source", "int8", "1+", default=-1),
    F("is_sensitive", "bool"),
    F("synonyms", "[]", "1+", fields=_SYNONYM),
    F("config_type", "int8", "3+", default=0),
    F("documentation", "string", "3+", nullable="0+"),
]

_RESULT = [
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("resource_type", "int8"),
    F("resource_name", "string"),
    F("configs", "[]", fields=_CONFIG),
]

API = Api(
    key=32, name="DescribeConfigs", valid="0-4", flexible="4+",
    request=[
        F("resources", "[]", fields=_RESOURCE),
        F("include_synonyms", "bool", "1+", default=False),
        F("include_documentation", "bool", "3+", default=False),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", "[]", fields=_RESULT),
    ],
)
