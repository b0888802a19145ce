"""ElectLeaders (api key 43, KIP-183 / KIP-460): elect the preferred (0) or, with no in-sync replica alive, the
first live (1, unclean) replica as leader of partitions; ``topic_partitions`` null = every partition.

Versions 0-2, flexible from 2. Version notes: v1 adds ``election_type`` and the top-level ``error_code``; v2 is the
first flexible version.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=43, name="ElectLeaders", valid="0-2", flexible="2+",
    request=[
        F("election_type", "int8", "1+"),
        F("topic_partitions", "[]", nullable="0+", fields=[
            F("topic", "string"),
            F("partitions", "[]int32"),
        ]),
        F("timeout_ms", "int32", default=60000),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "1+"),
        F("replica_election_results", "[]", fields=[
            F("topic", "string"),
            F("partition_result", "[]", fields=[
                F("partition_id", "int32"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=""),
            ]),
        ]),
    ],
)
