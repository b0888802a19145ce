"""WriteTxnMarkers (api key 27): a transaction coordinator tells partition leaders to write COMMIT/ABORT markers.

Versions 0-1, flexible from 1 (the same fields). Sent between brokers only (ClusterAction on the Cluster).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=27, name="WriteTxnMarkers", valid="0-1", flexible="1+",
    request=[
        F("markers", "[]", fields=[
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("transaction_result", "bool"),
            F("topics", "[]", fields=[
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ]),
            F("coordinator_epoch", "int32"),
        ]),
    ],
    response=[
        F("markers", "[]", fields=[
            F("producer_id", "int64"),
            F("topics", "[]", fields=[
                F("name", "string"),
                F("partitions", "[]", fields=[
                    F("partition_index", "int32"),
                    F("error_code", "int16"),
                ]),
            ]),
        ]),
    ],
)
