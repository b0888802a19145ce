"""Kafka error codes (protocol_errors) and the exceptions handlers raise to produce them.

Each ``KafkaError`` subclass carries the wire ``code``; ``retriable`` mirrors Kafka's classification.
``error_for_code(code)`` maps back (used by the admin client and tests).
"""


class KafkaError(Exception):
    code = -1
    retriable = False

    def __init__(self, message=None):
        super().__init__(message or self.__class__.__name__)
        self.message = message


_BY_CODE = {}

# (code, name, retriable) -- names follow Kafka's Errors enum.
_TABLE = [
    (-1, "UNKNOWN_SERVER_ERROR", False),
    (1, "OFFSET_OUT_OF_RANGE", False),
    (2, "CORRUPT_MESSAGE", True),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
    (4, "INVALID_FETCH_SIZE", False),
    (5, "LEADER_NOT_AVAILABLE", True),
    (6, "NOT_LEADER_OR_FOLLOWER", True),
    (7, "REQUEST_TIMED_OUT", True),
    (8, "BROKER_NOT_AVAILABLE", False),
    (9, "REPLICA_NOT_AVAILABLE", True),
    (10, "MESSAGE_TOO_LARGE", False),
    (11, "STALE_CONTROLLER_EPOCH", False),
    (12, "OFFSET_METADATA_TOO_LARGE", False),
    (13, "NETWORK_EXCEPTION", True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True),
    (15, "COORDINATOR_NOT_AVAILABLE", True),
    (16, "NOT_COORDINATOR", True),
    (17, "INVALID_TOPIC_EXCEPTION", False),
    (18, "RECORD_LIST_TOO_LARGE", False),
    (19, "NOT_ENOUGH_REPLICAS", True),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
    (21, "INVALID_REQUIRED_ACKS", False),
    (22, "ILLEGAL_GENERATION", False),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False),
    (24, "INVALID_GROUP_ID", False),
    (25, "UNKNOWN_MEMBER_ID", False),
    (26, "INVALID_SESSION_TIMEOUT", False),
    (27, "REBALANCE_IN_PROGRESS", False),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False),
    (29, "TOPIC_AUTHORIZATION_FAILED", False),
    (30, "GROUP_AUTHORIZATION_FAILED", False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False),
    (32, "INVALID_TIMESTAMP", False),
    (33, "UNSUPPORTED_SASL_MECHANISM", False),
    (34, "ILLEGAL_SASL_STATE", False),
    (35, "UNSUPPORTED_VERSION", False),
    (36, "TOPIC_ALREADY_EXISTS", False),
    (37, "INVALID_PARTITIONS", False),
    (38, "INVALID_REPLICATION_FACTOR", False),
    (39, "INVALID_REPLICA_ASSIGNMENT", False),
    (40, "INVALID_CONFIG", False),
    (41, "NOT_CONTROLLER", True),
    (42, "INVALID_REQUEST", False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False),
    (44, "POLICY_VIOLATION", False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False),
    (47, "INVALID_PRODUCER_EPOCH", False),
    (48, "INVALID_TXN_STATE", False),
    (49, "INVALID_PRODUCER_ID_MAPPING", False),
    (50, "INVALID_TRANSACTION_TIMEOUT", False),
    (51, "CONCURRENT_TRANSACTIONS", True),
    (52, "TRANSACTION_COORDINATOR_FENCED", False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False),
    (54, "SECURITY_DISABLED", False),
    (55, "OPERATION_NOT_ATTEMPTED", False),
    (56, "KAFKA_STORAGE_ERROR", True),
    (57, "LOG_DIR_NOT_FOUND", False),
    (58, "SASL_AUTHENTICATION_FAILED", False),
    (59, "UNKNOWN_PRODUCER_ID", False),
    (60, "REASSIGNMENT_IN_PROGRESS", False),
    (68, "NON_EMPTY_GROUP", False),
    (69, "GROUP_ID_NOT_FOUND", False),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True),
    (71, "INVALID_FETCH_SESSION_EPOCH", True),
    (73, "TOPIC_DELETION_DISABLED", False),
    (74, "FENCED_LEADER_EPOCH", True),
    (75, "UNKNOWN_LEADER_EPOCH", True),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False),
    (77, "STALE_BROKER_EPOCH", False),
    (79, "MEMBER_ID_REQUIRED", False),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True),
    (82, "FENCED_INSTANCE_ID", False),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True),
    (84, "ELECTION_NOT_NEEDED", True),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False),
    (87, "INVALID_RECORD", False),
    (88, "UNSTABLE_OFFSET_COMMIT", True),
    (90, "PRODUCER_FENCED", False),
    (91, "RESOURCE_NOT_FOUND", False),
    (92, "DUPLICATE_RESOURCE", False),
    (93, "UNACCEPTABLE_CREDENTIAL", False),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False),
    (114, "MISMATCHED_ENDPOINT_TYPE", False),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False),
]


def _camel(name):
    return "".join(p.capitalize() for p in name.lower().split("_"))


for _code, _name, _retriable in _TABLE:
    _cls = type(_camel(_name), (KafkaError,), {"code": _code, "retriable": _retriable, "name": _name})
    globals()[_cls.__name__] = _cls
    globals()[_name] = _code
    _BY_CODE[_code] = _cls

NONE = 0


def error_for_code(code):
    """The exception class for a wire error code (KafkaError itself for unknown codes)."""
    return _BY_CODE.get(code, KafkaError)


def error_name(code):
    if code == 0:
        return "NONE"
    cls = _BY_CODE.get(code)
    return cls.name if cls else "UNKNOWN(%d)" % code
