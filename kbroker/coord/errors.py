"""Errors of the coordination layer, shared by every backend.

The embedded backend raises these directly; a ZooKeeper (kazoo) backend translates kazoo's exceptions
(``NoNodeError``, ``NodeExistsError``, ``BadVersionError``, ``NotEmptyError``, ``NoChildrenForEphemeralsError``,
``ConnectionLoss``, ``SessionExpiredError``, ``NoAuthError``, ``AuthFailedError``) into the classes of the same
meaning here, so callers never import kazoo.
"""


class CoordinationError(Exception):
    """Base class; ``path`` is the znode the operation was about (or None)."""

    def __init__(self, message=None, path=None):
        super().__init__(message or (("%s: %s" % (self.__class__.__name__, path)) if path else self.__class__.__name__))
        self.path = path


class NoNodeError(CoordinationError):
    """The node (or, for create, its parent) does not exist."""


class NodeExistsError(CoordinationError):
    """create() of a path that already exists."""


class BadVersionError(CoordinationError):
    """A conditional set/delete named a version other than the node's current one."""


class NotEmptyError(CoordinationError):
    """delete() of a node that has children, without recursive=True."""


class NoChildrenForEphemeralsError(CoordinationError):
    """create() under an ephemeral node (ZooKeeper forbids children of ephemerals)."""


class ConnectionLossError(CoordinationError):
    """A networked backend lost its connection; the operation may or may not have been applied."""


class SessionExpiredError(CoordinationError):
    """A networked backend's session expired; its ephemeral nodes are gone."""


class NoAuthError(CoordinationError):
    """A networked backend's session may not do this to the node: the node's ACL does not grant it (ZooKeeper's
    NOAUTH; ``zookeeper.set.acl``)."""


class AuthFailedError(CoordinationError):
    """A networked backend's login (SASL) was refused: wrong credentials, or a user the ensemble does not know."""
