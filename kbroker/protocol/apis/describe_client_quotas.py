"""DescribeClientQuotas (api key 48, KIP-546): the client quotas of the entities a filter matches.

Versions 0-1 (1 flexible). A filter component names an entity type (``user``, ``client-id``, ``ip``) and a match:
``match_type`` 0 = exactly ``match``, 1 = the ``<default>`` entity, 2 = any entity that has this part;
``strict`` leaves out entities with parts no component names. ``entries`` is null in an error answer; an entity
name is null for ``<default>``.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=48, name="DescribeClientQuotas", valid="0-1", flexible="1+",
    request=[
        F("components", "[]", fields=[
            F("entity_type", "string"),
            F("match_type", "int8"),
            F("match", "string", nullable="0+"),
        ]),
        F("strict", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("entries", "[]", nullable="0+", fields=[
            F("entity", "[]", fields=[
                F("entity_type", "string"),
                F("entity_name", "string", nullable="0+"),
            ]),
            F("values", "[]", fields=[
                F("key", "string"),
                F("value", "float64"),
            ]),
        ]),
    ],
)
