"""How Kafka's Java tools print a broker error: ``<exception class>: <message>`` (``Throwable.toString``), the message
being the broker's when it sent one, else the error's default description (``Errors.exception()``; Kafka 3.9's
protocol_errors table). Only the codes kbroker's admin tools can meet are listed; any other prints as
``org.apache.kafka.common.errors.ApiException: <ERROR_NAME>``."""
from kbroker import errors

_PREFIX = "org.apache.kafka.common.errors."

# code -> (Java exception class, Kafka's default message)
_KNOWN = {
    errors.UNKNOWN_SERVER_ERROR: ("UnknownServerException", "The server experienced an unexpected error when "
                                                             "processing the request."),
    errors.OFFSET_OUT_OF_RANGE: ("OffsetOutOfRangeException", "The requested offset is not within the range of "
                                                               "offsets maintained by the server."),
    errors.UNKNOWN_TOPIC_OR_PARTITION: ("UnknownTopicOrPartitionException", "This server does not host this "
                                                                            "topic-partition."),
    errors.LEADER_NOT_AVAILABLE: ("LeaderNotAvailableException", "There is no leader for this topic-partition as we "
                                                                 "are in the middle of a leadership election."),
    errors.NOT_LEADER_OR_FOLLOWER: ("NotLeaderOrFollowerException", "For requests intended only for the leader, this "
                                    "error indicates that the broker is not the current leader. For requests intended "
                                    "for any replica, this error indicates that the broker is not a replica of the "
                                    "topic partition."),
    errors.REQUEST_TIMED_OUT: ("TimeoutException", "The request timed out."),
    errors.INVALID_TOPIC_EXCEPTION: ("InvalidTopicException", "The request attempted to perform an operation on an "
                                                              "invalid topic."),
    errors.TOPIC_AUTHORIZATION_FAILED: ("TopicAuthorizationException", "Topic authorization failed."),
    errors.CLUSTER_AUTHORIZATION_FAILED: ("ClusterAuthorizationException", "Cluster authorization failed."),
    errors.NOT_CONTROLLER: ("NotControllerException", "This is not the correct controller for this cluster."),
    errors.INVALID_REQUEST: ("InvalidRequestException", "This most likely occurs because of a request being "
                             "malformed by the client library or the message was sent to an incompatible broker. See "
                             "the broker logs for more details."),
    errors.POLICY_VIOLATION: ("PolicyViolationException", "Request parameters do not satisfy the configured "
                                                          "policy."),
    errors.KAFKA_STORAGE_ERROR: ("KafkaStorageException", "Disk error when trying to access log file on the disk."),
    errors.PREFERRED_LEADER_NOT_AVAILABLE: ("PreferredLeaderNotAvailableException", "The preferred leader was not "
                                                                                    "available."),
    errors.ELIGIBLE_LEADERS_NOT_AVAILABLE: ("EligibleLeadersNotAvailableException", "Eligible topic partition "
                                                                                    "leaders are not available."),
    errors.ELECTION_NOT_NEEDED: ("ElectionNotNeededException", "Leader election not needed for topic partition."),
}


def exception_text(code, message=None):
    """``org.apache.kafka.common.errors.<Class>: <message>`` for a non-zero wire code."""
    cls, default = _KNOWN.get(code, ("ApiException", errors.error_name(code)))
    return "%s%s: %s" % (_PREFIX, cls, message or default)
