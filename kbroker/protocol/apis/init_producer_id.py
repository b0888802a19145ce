"""InitProducerId (api key 22): allocate a producer id + epoch for an idempotent (or transactional) producer.

Versions 0-5, flexible from 2. Version notes: v1 answers before throttling; v2 is the first flexible version; v3
lets a producer pass its current id/epoch to resume after INVALID_PRODUCER_EPOCH (47); v4 allows PRODUCER_FENCED
(90); v5 allows TRANSACTION_ABORTABLE (121, KIP-890).
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=22, name="InitProducerId", valid="0-5", flexible="2+",
    request=[
        F("transactional_id", "string", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
    ],
)
