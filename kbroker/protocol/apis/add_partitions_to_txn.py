"""AddPartitionsToTxn (api key 24): add partitions to a producer's ongoing transaction (KIP-98).

Versions 0-5, flexible from 3. v1 = v0; v2 allows PRODUCER_FENCED (90); v3 is the first flexible version; v4 batches
several transactions (``transactions``, ``verify_only``) and answers ``results_by_transaction`` -- the broker-to-
broker form of KIP-890 -- and v5 allows TRANSACTION_ABORTABLE. Versions 0-3 are what clients send (the
``v3_and_below_*`` fields); kbroker serves those (the handler's range), the schema describes every version.
"""
from kbroker.protocol.schema import Api, Field as F

_TOPIC = [
    F("name", "string"),
    F("partitions", "[]int32"),
]

_PARTITION_RESULT = [
    F("partition_index", "int32"),
    F("partition_error_code", "int16"),
]

_TOPIC_RESULT = [
    F("name", "string"),
    F("results_by_partition", "[]", fields=_PARTITION_RESULT),
]

API = Api(
    key=24, name="AddPartitionsToTxn", valid="0-5", flexible="3+",
    request=[
        F("transactions", "[]", "4+", fields=[
            F("transactional_id", "string", "4+"),
            F("producer_id", "int64", "4+"),
            F("producer_epoch", "int16", "4+"),
            F("verify_only", "bool", "4+", default=False),
            F("topics", "[]", "4+", fields=_TOPIC),
        ]),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", "[]", "0-3", fields=_TOPIC),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16", "4+"),
        F("results_by_transaction", "[]", "4+", fields=[
            F("transactional_id", "string", "4+"),
            F("topic_results", "[]", "4+", fields=_TOPIC_RESULT),
        ]),
        F("results_by_topic_v3_and_below", "[]", "0-3", fields=_TOPIC_RESULT),
    ],
)
