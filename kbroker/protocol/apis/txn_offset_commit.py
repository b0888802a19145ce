"""TxnOffsetCommit (key 28): a transactional producer commits its consumer group's offsets inside its transaction
(KIP-98, ``sendOffsetsToTransaction``); they become the group's committed offsets when the transaction commits.

v1 is v0 (answered before throttling); v2 adds the committed leader epoch; v3 adds the group's generation,
member id and group instance id (KIP-447: the coordinator fences zombie members) and is flexible; v4 only allows
TRANSACTION_ABORTABLE (121) in the answer (KIP-890), which kbroker never sends, so its body is v3's.
"""
from kbroker.protocol.schema import Api, Field as F

API = Api(
    key=28, name="TxnOffsetCommit", valid="0-4", flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+", default=""),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=[
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", "2+", default=-1),
                F("committed_metadata", "string", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("topics", "[]", fields=[
            F("name", "string"),
            F("partitions", "[]", fields=[
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)
