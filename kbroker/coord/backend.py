"""The coordination backend interface: a ZooKeeper-shaped tree of znodes.

Paths are absolute, ``/``-separated, without a trailing slash (except the root ``/``), without empty, ``.`` or
``..`` components. Data is bytes (Kafka's JSON). Semantics follow ZooKeeper, so a kazoo-backed implementation
is a thin translation:

* every node has a data ``version`` (0 at create, +1 per set); ``set``/``delete`` with ``version=-1`` are
  unconditional, otherwise they raise ``BadVersionError`` on mismatch;
* ``create(..., sequence=True)`` appends the parent's child-change counter (cversion) as 10 zero-padded digits;
  ``cversion`` grows by one per child created or deleted, so sequence numbers never repeat under a parent;
* ephemeral nodes belong to the backend's session (``ephemeral_owner`` = ``session_id``), vanish when the session
  ends (``stop()``), and cannot have children;
* watches are persistent (kazoo's DataWatch/ChildrenWatch style): the callback runs once at registration with
  the current state, then after every change, in the thread/greenlet that made the change, after the change is
  complete. A callback returning ``False`` (exactly) cancels its watch; ``Watch.cancel()`` does the same.
  Data callbacks get ``(data, stat)`` (both None when the node does not exist); children callbacks get the
  sorted child names (``[]`` when the node does not exist).
"""

import abc
from collections import namedtuple

from .errors import BadVersionError, CoordinationError, NodeExistsError, NoNodeError

ZnodeStat = namedtuple("ZnodeStat", "version ctime mtime ephemeral_owner czxid", defaults=(0,))
ZnodeStat.__doc__ = (
    "Node metadata: data version, create/modify time (ms since epoch), owning session id or 0, and czxid: the "
    "id of the transaction that created the node, unique and increasing across the tree's whole life (a node "
    "deleted and created again gets a larger one). Kafka's broker epoch (KIP-380) is the czxid of "
    "/brokers/ids/<id>.")


def validate_path(path):
    """Raise ValueError unless ``path`` is a legal absolute znode path."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError("znode path must be an absolute string path: %r" % (path,))
    if path == "/":
        return path
    if path.endswith("/"):
        raise ValueError("znode path must not end with '/': %r" % path)
    for part in path[1:].split("/"):
        if part in ("", ".", "..") or "\x00" in part:
            raise ValueError("illegal znode path component %r in %r" % (part, path))
    return path


def parent_of(path):
    """``/a/b`` -> ``/a``; ``/a`` -> ``/``."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def join(*parts):
    """``join("/brokers", "ids", 1)`` -> ``/brokers/ids/1``."""
    out = "/".join(str(p).strip("/") for p in parts if str(p).strip("/"))
    return "/" + out


class Watch:
    """Handle of a registered watch; ``cancel()`` stops further callbacks."""

    __slots__ = ("path", "fn", "kind", "active")

    def __init__(self, path, fn, kind):
        self.path, self.fn, self.kind, self.active = path, fn, kind, True

    def cancel(self):
        self.active = False


class CoordinationBackend(abc.ABC):
    """Abstract znode store. See the module docstring for the semantics every backend keeps."""

    @property
    @abc.abstractmethod
    def session_id(self):
        """Id of the current session (owner of this backend's ephemeral nodes); 0 before start()."""

    @abc.abstractmethod
    def start(self):
        """Open the store / connect; returns self."""

    @abc.abstractmethod
    def stop(self):
        """End the session (ephemeral nodes vanish, watches fire) and release resources."""

    @abc.abstractmethod
    def create(self, path, data=b"", ephemeral=False, sequence=False, makepath=False):
        """Create a node; returns its actual path (with the sequence suffix if any).

        NodeExistsError if it exists; NoNodeError if the parent is missing and makepath is False (makepath creates
        missing ancestors as empty persistent nodes); NoChildrenForEphemeralsError under an ephemeral parent.
        """

    @abc.abstractmethod
    def get(self, path):
        """``(data bytes, ZnodeStat)``; NoNodeError if missing."""

    @abc.abstractmethod
    def set(self, path, data, version=-1):
        """Replace the data; returns the new ZnodeStat. NoNodeError / BadVersionError."""

    @abc.abstractmethod
    def delete(self, path, version=-1, recursive=False):
        """Delete a node (and with recursive=True its whole subtree). NoNodeError / BadVersionError / NotEmptyError."""

    @abc.abstractmethod
    def exists(self, path):
        """ZnodeStat or None."""

    @abc.abstractmethod
    def get_children(self, path):
        """Sorted child names (not paths); NoNodeError if missing."""

    @abc.abstractmethod
    def watch_data(self, path, fn):
        """Call ``fn(data, stat)`` now and after every create/set/delete of ``path``; returns a Watch."""

    @abc.abstractmethod
    def watch_children(self, path, fn):
        """Call ``fn(children)`` now and after every child create/delete under ``path``; returns a Watch."""

    # Session hooks. A networked backend (zk.py) calls them from a fresh greenlet; a backend whose session cannot
    # expire (embedded: the session lives as long as the process) never calls them, so these defaults do nothing.

    def on_session_expired(self, callback):
        """Run ``callback()`` when the session is lost (its ephemeral nodes are gone). Returns ``callback``."""
        return callback

    def on_reconnected(self, callback):
        """Run ``callback()`` when a new session is established after an expiry. Returns ``callback``."""
        return callback

    def remove_session_hook(self, callback):
        """Forget ``callback`` registered with either hook."""

    def ensure_path(self, path):
        """Create ``path`` and its missing ancestors as empty persistent nodes (no error if present)."""
        validate_path(path)
        if path == "/" or self.exists(path) is not None:
            return
        try:
            self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass

    def create_many(self, items):
        """Create several persistent nodes; ``items`` is ``[(path, data, makepath)]``. Returns one entry per item, in
        order: the created path, or the CoordinationError that create() would have raised for it (NodeExistsError
        and the like are per item; nothing is rolled back). This default creates them one after another; a
        networked backend pipelines them (zk.py), which is what makes a 1,000-partition topic quick to set up."""
        out = []
        for path, data, makepath in items:
            try:
                out.append(self.create(path, data, makepath=makepath))
            except CoordinationError as e:
                out.append(e)
        return out

    def set_many(self, items, check=None, on_wave=None):
        """Conditional sets of several nodes: ``items`` is ``[(path, data, version)]``. Returns one entry per item,
        in order: its new ZnodeStat, or the CoordinationError set() would have raised for it (BadVersionError,
        NoNodeError: per item). ``check``: ``(path, version)`` of a node that must still have that version for any
        item to apply -- the controller passes ``/controller_epoch`` and the version its own election wrote, so a
        controller that lost office writes nothing (Kafka >= 2.2 does the same with a check op in every write);
        when it fails, BadVersionError naming ``check``'s path is raised and nothing of the call applied -- nothing
        of that transaction: ``on_wave(indexes, results)``, when given, is called with results as they become
        final, each item's exactly once before the call returns, in the caller's greenlet (so the controller sends
        the first elections' requests while ZooKeeper still applies the rest); items an earlier call reported had
        applied (under the check) when a later transaction's check fails.
        This default checks once, then sets one after another; ZooKeeper (zk.py) applies them as multi
        transactions of many ops each, the embedded backend a chunk per journal flush: a controller electing
        leaders for 10,000 partitions makes a handful of round trips, not 10,000."""
        if check is not None:
            stat = self.exists(check[0])
            if stat is None or stat.version != check[1]:
                raise BadVersionError("%s: expected version %d, node has %s"
                                      % (check[0], check[1], stat.version if stat else "none"), check[0])
        out = []
        for path, data, version in items:
            try:
                out.append(self.set(path, data, version=version))
            except CoordinationError as e:
                out.append(e)
        if on_wave is not None and out:
            on_wave(list(range(len(out))), list(out))
        return out

    def get_many(self, paths):
        """``get_or_none`` of several nodes: one ``(data, stat)`` or ``(None, None)`` per path, in order; other
        errors are raised. This default reads one after another; ZooKeeper (zk.py) pipelines the reads (the
        controller re-reading 2,000 partition states after as many ISR changes: one round trip, not 2,000)."""
        return [self.get_or_none(path) for path in paths]

    def delete_many(self, paths):
        """Delete several leaf nodes, any version; one already gone is no error. This default deletes one after
        another; ZooKeeper (zk.py) pipelines them (the controller consuming 2,000 ISR change notifications)."""
        for path in paths:
            try:
                self.delete(path)
            except NoNodeError:
                pass

    def get_or_none(self, path):
        """``(data, stat)`` or ``(None, None)`` when the node does not exist."""
        try:
            return self.get(path)
        except NoNodeError:
            return None, None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
