"""kbroker.streams' exceptions (Kafka's org.apache.kafka.streams.errors, the ones a Python user meets).

Every exception of the library derives from ``StreamsException`` so an application can catch them all; the
uncaught-exception handler of KafkaStreams receives them as raised.
"""


class StreamsException(Exception):
    """Base of every kbroker.streams error (Kafka's StreamsException)."""


class TopologyException(StreamsException):
    """A topology that cannot run: unknown parent, duplicate node name, source topic registered twice, internal
    topics not co-partitioned. Kafka prefixes the message with "Invalid topology: "; so do we."""

    def __init__(self, message):
        super().__init__("Invalid topology: %s" % message)


class ProcessorStateException(StreamsException):
    """A state store could not be created, opened, restored, flushed or checkpointed."""


class SerializationException(StreamsException):
    """A serde could not (de)serialize bytes (wrong size, bad UTF-8, non-null data for Void)."""


class TaskMigratedException(StreamsException):
    """The task is no longer owned by this thread (fenced producer, lost group membership): close it dirty."""


class TaskCorruptedException(StreamsException):
    """Local state of a task cannot be trusted (e.g. no checkpoint under EOS): wipe it and restore."""


class InvalidStateStoreException(StreamsException):
    """Interactive query of a store that is not (yet, or no longer) queryable: rebalancing, closed, unknown."""


class StreamsNotStartedException(InvalidStateStoreException):
    """An interactive query before KafkaStreams.start()."""


class UnknownStateStoreException(InvalidStateStoreException):
    """An interactive query for a store name the topology does not have."""
