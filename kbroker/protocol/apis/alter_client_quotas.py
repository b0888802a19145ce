"""AlterClientQuotas (api key 49, KIP-546): set or remove client quotas of user / client-id entities.

Versions 0-1 (1 flexible). An entity is a list of (type, name) parts, name null for ``<default>``; an op sets
``key`` to ``value`` or, with ``remove``, deletes it. ``validate_only`` checks without writing. One result per
entry, in request order.
"""
from kbroker.protocol.schema import Api, Field as F

_ENTITY = [
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+"),
]

API = Api(
    key=49, name="AlterClientQuotas", valid="0-1", flexible="1+",
    request=[
        F("entries", "[]", fields=[
            F("entity", "[]", fields=_ENTITY),
            F("ops", "[]", fields=[
                F("key", "string"),
                F("value", "float64"),
                F("remove", "bool"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("entries", "[]", fields=[
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("entity", "[]", fields=_ENTITY),
        ]),
    ],
)
