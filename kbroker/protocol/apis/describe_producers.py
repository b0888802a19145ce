"""DescribeProducers (api key 61, KIP-664): the active producers of partitions, as the replica that answers sees
them (what ``kafka-transactions.sh describe-producers`` and ``find-hanging`` print).

Version 0 only, flexible from 0. ``producer_epoch`` is an int32 on the wire (an int16 epoch widened);
``current_txn_start_offset`` is -1 when the producer has no open transaction, ``coordinator_epoch`` -1 when no
marker was ever written for it.
"""
from kbroker.protocol.schema import Api, Field as F

_PRODUCER = [
    F("producer_id", "int64"),
    F("producer_epoch", "int32"),
    F("last_sequence", "int32", default=-1),
    F("last_timestamp", "int64", default=-1),
    F("coordinator_epoch", "int32"),
    F("current_txn_start_offset", "int64", default=-1),
]

_PARTITION = [
    F("partition_index", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("active_producers", "[]", fields=_PRODUCER),
]

API = Api(
    key=61, name="DescribeProducers", valid="0", flexible="0+",
    request=[
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partition_indexes", "[]int32"),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=_PARTITION),
        ]),
    ],
)
