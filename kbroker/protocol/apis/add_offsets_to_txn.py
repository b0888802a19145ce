"""AddOffsetsToTxn (api key 25): add a consumer group's offsets partition to a producer's transaction, so that a
later TxnOffsetCommit commits with it (KIP-98, sendOffsetsToTransaction).

Versions 0-4, flexible from 3. v1 = v0; v2 allows PRODUCER_FENCED (90); v4 allows TRANSACTION_ABORTABLE (KIP-890);
the wire layout is the same for all.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=25, name="AddOffsetsToTxn", valid="0-4", flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)
