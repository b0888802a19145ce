"""Single-node coordination backend: an in-memory znode tree persisted to one JSON snapshot.

Layout: ``<data_dir>/__kbroker_meta/tree.json`` (plus ``.lock``, held with ``flock`` while started, so two
brokers cannot share one tree). ``data_dir`` is the broker's first log dir. Snapshot format (compact JSON)::

    {"format":1,"zxid":7,"nodes":[{"path":"/","version":0,"cversion":3,"ctime":0,"mtime":0,"czxid":0,"data":""},
     ...]}

``zxid`` is the last creation id handed out; every create (ephemeral ones too) takes the next, so a node's
``czxid`` is unique and increasing over the tree's whole life, as ZooKeeper's is (snapshots without these
fields load with 0 for both).

Nodes are listed in path order (parents first). ``data`` holds the bytes as text when they are valid UTF-8
(Kafka's JSON, readable with ``jq``), otherwise ``data_b64`` holds them base64-encoded.

Durability: the snapshot is rewritten atomically (write ``tree.json.tmp``, fsync, rename over ``tree.json``,
fsync the directory) after every mutation that changes persistent state -- creating or deleting any node (a
parent's cversion changes, which keeps sequence numbers unique across restarts) or setting a persistent node.
Setting an ephemeral node writes nothing. Ephemeral nodes are never persisted: a restart is a new session.

Thread-safety: one re-entrant lock guards the tree (cooperative once gevent has patched ``threading``). Watch
callbacks run after the lock is released, in the mutating caller's thread/greenlet, in mutation order.
"""

import base64
import errno
import fcntl
import json
import logging
import os
import random
import threading
import time

from .backend import CoordinationBackend, Watch, ZnodeStat, parent_of, validate_path
from .errors import (
    BadVersionError, CoordinationError, NoChildrenForEphemeralsError, NodeExistsError, NoNodeError, NotEmptyError,
)

log = logging.getLogger("kbroker.coord.embedded")

META_DIR = "__kbroker_meta"
SNAPSHOT = "tree.json"
SNAPSHOT_FORMAT = 1


def _now_ms():
    return int(time.time() * 1000)


class _Node:
    __slots__ = ("data", "version", "cversion", "ctime", "mtime", "owner", "children", "czxid")

    def __init__(self, data, ctime, owner=0, czxid=0):
        self.czxid = czxid
        self.data = data
        self.version = 0
        self.cversion = 0
        self.ctime = ctime
        self.mtime = ctime
        self.owner = owner
        self.children = {}

    def stat(self):
        return ZnodeStat(self.version, self.ctime, self.mtime, self.owner, self.czxid)


class EmbeddedBackend(CoordinationBackend):
    def __init__(self, data_dir):
        self.meta_dir = os.path.join(data_dir, META_DIR)
        self.snapshot_path = os.path.join(self.meta_dir, SNAPSHOT)
        self._lock = threading.RLock()
        self._root = None
        self._session_id = 0
        self._lock_fd = None
        self._zxid = 0
        self._data_watches = {}
        self._child_watches = {}

    # -- lifecycle ------------------------------------------------------------------------------------------------

    @property
    def session_id(self):
        return self._session_id

    def start(self):
        with self._lock:
            if self._root is not None:
                return self
            os.makedirs(self.meta_dir, exist_ok=True)
            fd = os.open(os.path.join(self.meta_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EAGAIN, errno.EACCES):
                    raise CoordinationError("%s is in use by another process" % self.meta_dir) from None
                raise
            self._lock_fd = fd
            try:
                self._root = self._load()
            except BaseException:
                self._release_lock()
                raise
            # ZooKeeper session ids are positive 64-bit numbers; 0 means "not an ephemeral".
            self._session_id = random.getrandbits(63) or 1
        return self

    def stop(self):
        if self._root is None:
            return
        pending = []
        with self._lock:
            owned = []
            self._collect_ephemerals(self._root, "/", owned)
            for path in owned:
                self._delete_locked(path, -1, False, pending)
            if owned:
                self._persist()
        self._fire(pending)
        with self._lock:
            self._root = None
            self._session_id = 0
            self._data_watches.clear()
            self._child_watches.clear()
            self._release_lock()

    def _release_lock(self):
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    # -- reads ----------------------------------------------------------------------------------------------------

    def get(self, path):
        with self._lock:
            node = self._find(path)
            if node is None:
                raise NoNodeError(path=path)
            return node.data, node.stat()

    def exists(self, path):
        with self._lock:
            node = self._find(path)
            return None if node is None else node.stat()

    def get_children(self, path):
        with self._lock:
            node = self._find(path)
            if node is None:
                raise NoNodeError(path=path)
            return sorted(node.children)

    # -- writes ---------------------------------------------------------------------------------------------------

    def create(self, path, data=b"", ephemeral=False, sequence=False, makepath=False):
        validate_path(path)
        if path == "/":
            raise NodeExistsError(path="/")
        data = bytes(data)
        pending = []
        with self._lock:
            self._check_started()
            parent_path = parent_of(path)
            parent = self._find(parent_path)
            if parent is None:
                if not makepath:
                    raise NoNodeError("parent of %s does not exist" % path, path=parent_path)
                parent = self._make_parents(parent_path, pending)
            if parent.owner:
                raise NoChildrenForEphemeralsError(path=parent_path)
            name = path.rsplit("/", 1)[1]
            if sequence:
                name = "%s%010d" % (name, parent.cversion)
                path = (parent_path.rstrip("/") + "/" + name)
            if name in parent.children:
                raise NodeExistsError(path=path)
            self._zxid += 1
            node = _Node(data, _now_ms(), self._session_id if ephemeral else 0, self._zxid)
            parent.children[name] = node
            parent.cversion += 1
            self._queue_create(path, node, parent_path, parent, pending)
            self._persist()
        self._fire(pending)
        return path

    def set(self, path, data, version=-1):
        validate_path(path)
        data = bytes(data)
        pending = []
        with self._lock:
            self._check_started()
            node = self._find(path)
            if node is None:
                raise NoNodeError(path=path)
            if version != -1 and version != node.version:
                raise BadVersionError("%s: expected version %d, node has %d" % (path, version, node.version), path)
            node.data = data
            node.version += 1
            node.mtime = _now_ms()
            stat = node.stat()
            self._queue_data(path, node, pending)
            if not node.owner:
                self._persist()
        self._fire(pending)
        return stat

    def delete(self, path, version=-1, recursive=False):
        validate_path(path)
        if path == "/":
            raise ValueError("the root node cannot be deleted")
        pending = []
        with self._lock:
            self._check_started()
            self._delete_locked(path, version, recursive, pending)
            self._persist()
        self._fire(pending)

    # -- watches --------------------------------------------------------------------------------------------------

    def watch_data(self, path, fn):
        validate_path(path)
        w = Watch(path, fn, "data")
        with self._lock:
            self._check_started()
            self._data_watches.setdefault(path, []).append(w)
            node = self._find(path)
            args = (node.data, node.stat()) if node is not None else (None, None)
        self._fire([(w, args)])
        return w

    def watch_children(self, path, fn):
        validate_path(path)
        w = Watch(path, fn, "children")
        with self._lock:
            self._check_started()
            self._child_watches.setdefault(path, []).append(w)
            node = self._find(path)
            args = (sorted(node.children) if node is not None else [],)
        self._fire([(w, args)])
        return w

    # -- internals ------------------------------------------------------------------------------------------------

    def _check_started(self):
        if self._root is None:
            raise CoordinationError("embedded coordination backend is not started")

    def _find(self, path):
        validate_path(path)
        self._check_started()
        node = self._root
        if path == "/":
            return node
        for part in path[1:].split("/"):
            node = node.children.get(part)
            if node is None:
                return None
        return node

    def _make_parents(self, path, pending):
        """Create every missing ancestor of a node (and ``path`` itself) as empty persistent nodes."""
        node, cur = self._root, ""
        for part in path[1:].split("/"):
            cur = cur + "/" + part
            child = node.children.get(part)
            if child is None:
                if node.owner:
                    raise NoChildrenForEphemeralsError(path=parent_of(cur))
                self._zxid += 1
                child = _Node(b"", _now_ms(), 0, self._zxid)
                node.children[part] = child
                node.cversion += 1
                self._queue_create(cur, child, parent_of(cur), node, pending)
            node = child
        return node

    def _delete_locked(self, path, version, recursive, pending):
        parent_path = parent_of(path)
        parent = self._find(parent_path)
        name = path.rsplit("/", 1)[1]
        node = parent.children.get(name) if parent is not None else None
        if node is None:
            raise NoNodeError(path=path)
        if version != -1 and version != node.version:
            raise BadVersionError("%s: expected version %d, node has %d" % (path, version, node.version), path)
        if node.children and not recursive:
            raise NotEmptyError("%s has children %s" % (path, sorted(node.children)[:5]), path)
        for child in sorted(node.children):
            self._delete_locked(path.rstrip("/") + "/" + child, -1, True, pending)
        del parent.children[name]
        parent.cversion += 1
        self._queue_data(path, None, pending)
        for w in self._child_watches.get(path, ()):
            pending.append((w, ([],)))
        self._queue_children(parent_path, parent, pending)

    def _collect_ephemerals(self, node, path, out):
        for name, child in node.children.items():
            child_path = path.rstrip("/") + "/" + name
            if child.owner and child.owner == self._session_id:
                out.append(child_path)
            else:
                self._collect_ephemerals(child, child_path, out)

    def _queue_create(self, path, node, parent_path, parent, pending):
        self._queue_data(path, node, pending)
        self._queue_children(parent_path, parent, pending)

    def _queue_data(self, path, node, pending):
        args = (node.data, node.stat()) if node is not None else (None, None)
        for w in self._data_watches.get(path, ()):
            pending.append((w, args))

    def _queue_children(self, path, node, pending):
        watches = self._child_watches.get(path)
        if watches:
            args = (sorted(node.children),)
            for w in watches:
                pending.append((w, args))

    def _fire(self, pending):
        for w, args in pending:
            if not w.active:
                continue
            try:
                result = w.fn(*args)
            except Exception:
                log.exception("coordination watch callback on %s failed", w.path)
                continue
            if result is False:
                w.cancel()
        if pending:
            with self._lock:
                for table in (self._data_watches, self._child_watches):
                    for path in {w.path for w, _ in pending if not w.active}:
                        live = [x for x in table.get(path, ()) if x.active]
                        if live:
                            table[path] = live
                        else:
                            table.pop(path, None)

    # -- persistence ----------------------------------------------------------------------------------------------

    def _persist(self):
        nodes = []
        self._dump(self._root, "/", nodes)
        nodes.sort(key=lambda n: n["path"])
        body = json.dumps({"format": SNAPSHOT_FORMAT, "zxid": self._zxid, "nodes": nodes}, separators=(",", ":"), sort_keys=True)
        tmp = self.snapshot_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(body.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.snapshot_path)
        dfd = os.open(self.meta_dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _dump(self, node, path, out):
        entry = {"path": path, "version": node.version, "cversion": node.cversion, "ctime": node.ctime,
                 "mtime": node.mtime, "czxid": node.czxid}
        try:
            entry["data"] = node.data.decode("utf-8")
        except UnicodeDecodeError:
            entry["data_b64"] = base64.b64encode(node.data).decode("ascii")
        out.append(entry)
        for name, child in node.children.items():
            if not child.owner:
                self._dump(child, path.rstrip("/") + "/" + name, out)

    def _load(self):
        tmp = self.snapshot_path + ".tmp"
        if os.path.exists(tmp):
            os.unlink(tmp)  # a write that never reached its rename; tree.json is still the last good state
        root = _Node(b"", 0)
        self._zxid = 0
        if not os.path.exists(self.snapshot_path):
            return root
        try:
            with open(self.snapshot_path, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
            if doc.get("format") != SNAPSHOT_FORMAT:
                raise ValueError("unsupported snapshot format %r" % doc.get("format"))
            self._zxid = int(doc.get("zxid", 0))
            for entry in doc["nodes"]:
                path = validate_path(entry["path"])
                if "data_b64" in entry:
                    data = base64.b64decode(entry["data_b64"])
                else:
                    data = entry["data"].encode("utf-8")
                if path == "/":
                    node = root
                else:
                    parent = root
                    for part in path[1:].split("/")[:-1]:
                        parent = parent.children[part]
                    node = _Node(data, entry["ctime"])
                    parent.children[path.rsplit("/", 1)[1]] = node
                node.data = data
                node.version = entry["version"]
                node.cversion = entry["cversion"]
                node.ctime = entry["ctime"]
                node.mtime = entry["mtime"]
                node.czxid = int(entry.get("czxid", 0))
        except (ValueError, KeyError, TypeError) as e:
            raise CoordinationError("corrupt coordination snapshot %s: %s" % (self.snapshot_path, e)) from None
        return root
