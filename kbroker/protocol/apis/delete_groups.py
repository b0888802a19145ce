"""DeleteGroups (key 42): delete empty groups and their committed offsets.

v1 responds before throttling; v2 is flexible. (Kafka spells the request field GroupsNames.)
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=42, name="DeleteGroups", valid="0-2", flexible="2+",
    request=[
        F("groups_names", "[]string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", "[]", fields=[
            F("group_id", "string"),
            F("error_code", "int16"),
        ]),
    ],
)
