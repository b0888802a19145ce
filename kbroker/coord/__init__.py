"""Coordination: a znode tree with Kafka's paths, behind one interface.

``CoordinationBackend`` (backend.py) is the interface; ``EmbeddedBackend`` (embedded.py) the single-node store
used when ``zookeeper.connect`` is empty, ``ZooKeeperBackend`` (zk.py, imported lazily: only it imports kazoo) the
ensemble-backed one; ``make_backend(config)`` picks between them; ``registration`` registers brokers; ``znodes`` holds Kafka's paths and JSON codecs; ``TopicStore``
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
    "make_backend",
]


def make_backend(config):
    """The backend a broker config asks for (not started): EmbeddedBackend in the first log dir when
    ``zookeeper.connect`` is empty, else ZooKeeperBackend with the session and connection timeouts and
    ``zookeeper.set.acl`` (its SASL credentials, from the JAAS file, are set by the composition root before
    ``start()``: kbroker/security/zk_client.py)."""
    connect = (config["zookeeper.connect"] or "").strip()
    if not connect:
        return EmbeddedBackend(config.log_dirs[0])
    from .zk import ZooKeeperBackend

    session_ms = config["zookeeper.session.timeout.ms"]
    conn_ms = config["zookeeper.connection.timeout.ms"]
    return ZooKeeperBackend(connect, session_ms, conn_ms if conn_ms is not None else session_ms,
                            secure_acls=config["zookeeper.set.acl"])
