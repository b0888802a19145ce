"""AlterPartitionReassignments (api key 45, KIP-455): start, or cancel, moving partitions to new replica sets.

Version 0 only, flexible from 0. ``replicas`` null cancels the partition's pending reassignment (its replicas go
back to what they were). Sent to the controller; the answer comes once each partition's reassignment has been
started (or refused), not when the data has moved.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=45, name="AlterPartitionReassignments", valid="0", flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=[
                F("partition_index", "int32"),
                F("replicas", "[]int32", nullable="0+", default=None),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("responses", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=[
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ]),
        ]),
    ],
)
