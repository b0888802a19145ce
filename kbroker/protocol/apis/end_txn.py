"""EndTxn (api key 26): commit or abort a producer's transaction (KIP-98).

Versions 0-4, flexible from 3. v1 = v0; v2 allows PRODUCER_FENCED (90); v4 allows TRANSACTION_ABORTABLE
(KIP-890); the wire layout is the same for all (Kafka 4's v5 adds the bumped producer id/epoch of
transaction.version 2 to the response: not described, not served).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=26, name="EndTxn", valid="0-4", flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ],
)
