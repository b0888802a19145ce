"""ControlledShutdown (key 7): a broker asks the controller to move leadership away before it stops.

v0 uses a request header without client_id (see ``Api.request_header_version``); v1 is the same body; v2 adds
broker_epoch; v3 is flexible. The response lists partitions whose leadership could not be moved yet.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=7, name="ControlledShutdown", valid="0-3", flexible="3+",
    request=[
        F("broker_id", "int32"),
        F("broker_epoch", "int64", "2+", default=-1),
    ],
    response=[
        F("error_code", "int16"),
        F("remaining_partitions", "[]", fields=[
            F("topic_name", "string"),
            F("partition_index", "int32"),
        ]),
    ],
)
