"""Coordination: a znode tree with Kafka's paths, behind one interface.

``CoordinationBackend`` (backend.py) is the interface; ``EmbeddedBackend`` (embedded.py) the single-node store
used when ``zookeeper.connect`` is empty; ``znodes`` holds Kafka's paths and JSON codecs; ``TopicStore``
(metadata_store.py) is the topic-metadata API the broker uses over any backend.
"""

from .backend import CoordinationBackend, Watch, ZnodeStat
from .embedded import EmbeddedBackend
from .errors import (
    BadVersionError, ConnectionLossError, CoordinationError, NoChildrenForEphemeralsError, NodeExistsError,
    NoNodeError, NotEmptyError, SessionExpiredError,
)
from .metadata_store import TopicStore, validate_topic_name
from .znodes import PartitionState, ensure_persistent_paths

__all__ = [
    "CoordinationBackend", "Watch", "ZnodeStat", "EmbeddedBackend", "BadVersionError", "ConnectionLossError",
    "CoordinationError", "NoChildrenForEphemeralsError", "NodeExistsError", "NoNodeError", "NotEmptyError",
    "SessionExpiredError", "TopicStore", "validate_topic_name", "PartitionState", "ensure_persistent_paths",
]
