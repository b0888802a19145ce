"""Single-node coordination backend: an in-memory znode tree with ZooKeeper's semantics, made durable by a journal.

The tree (``Node`` objects, journal.py) lives on the event loop: version checks, sequence names (the parent's
cversion, 10 digits), ephemeral nodes owned by this process's one session, persistent watches. Every change of
persistent state becomes journal records; journal.py owns their bytes, the snapshot, recovery and compaction, and
documents the files in ``<data_dir>/__kbroker_meta/`` (``data_dir`` is the broker's first log dir). This module
decides when records are written, flushed and compacted. ``.lock`` there is flock'd while started: two brokers
cannot share one tree.

Acknowledgement and group commit (ZooKeeper's rule: a change is acknowledged after its transaction log record is
fsync'd). ``create``/``set``/``delete`` change the in-memory tree under the lock, queue their records, and return
after those records are durable. One caller at a time flushes: it takes every record queued so far, writes them
with one ``os.write`` and one ``fsync``, and wakes the others, so a burst of N concurrent changes costs a few fsyncs,
not N. ``create_many`` (the controller's new partition states) applies its items in chunks of ``CHUNK`` with one
flush each. Watches fire after the change is durable, in the mutating caller's thread/greenlet, in mutation order
per caller. Reads (``get``, ``exists``, ``get_children``) first wait until every change made so far is durable, so
nothing that could still be lost in a crash is ever seen.

Off the event loop: when gevent has patched ``threading`` (the broker), the write + fsync and the compaction run in
a gevent ThreadPool of two native threads; the calling greenlet waits cooperatively and the loop keeps serving. The
native threads only do file I/O and JSON; the tree and its lock stay on the loop. A flush is driven by a greenlet of
its own, not by a caller: a caller killed while it waits (its connection closed) cannot leave a write
half-accounted. Without gevent (tools, unit tests) flushes run inline in the caller. An fsync that fails leaves the
store read-only: every later change raises CoordinationError (the in-memory tree may hold changes the disk does
not).

Compaction: when the journal since the snapshot holds more than max(``COMPACT_MIN_BYTES``, snapshot size) bytes,
the flushing caller starts a new journal file at the next seq and a native thread runs ``journal.compact`` over
the older files. At most one compaction runs; a failed one is logged and retried at the next trigger (the journal
still holds everything).

Start: take ``.lock``, ``journal.recover`` (snapshot + journal replay, torn tail cut off, a fresh snapshot), open
an empty journal after the last record, and a new session id (ephemeral nodes never survive a restart). ``stop``
deletes this session's ephemeral nodes (durably, watches fired), waits for a running compaction, releases the lock.

Thread-safety: one re-entrant lock guards the tree (cooperative once gevent has patched ``threading``).
"""

import errno
import fcntl
import logging
import os
import random
import threading
import time

from .backend import CoordinationBackend, Watch, parent_of, validate_path
from .errors import (
    BadVersionError, CoordinationError, NoChildrenForEphemeralsError, NodeExistsError, NoNodeError, NotEmptyError,
)
from .journal import SNAPSHOT, Journal, Node, compact, recover

log = logging.getLogger("kbroker.coord.embedded")

META_DIR = "__kbroker_meta"
# The journal since the snapshot may grow to max(this, the snapshot's size) before it is compacted.
COMPACT_MIN_BYTES = 4 << 20
# Items of one create_many applied and flushed together: 5-20 ms of tree work on the loop per chunk.
CHUNK = 500


def _now_ms():
    return int(time.time() * 1000)


def _gevent_offloader():
    """(native thread pool, greenlet spawner) when gevent has patched threading (the broker), else (None, None)."""
    try:
        from gevent import monkey
    except ImportError:
        return None, None
    if not monkey.is_module_patched("threading"):
        return None, None
    import gevent
    from gevent.threadpool import ThreadPool
    return ThreadPool(2), gevent.spawn


class EmbeddedBackend(CoordinationBackend):
    def __init__(self, data_dir, pool=None):
        """``pool``: anything with gevent ThreadPool's ``apply(fn, args)`` and ``spawn(fn, *args)`` (returning an object
        with ``ready()`` and ``wait()``) to run file I/O on; default: a 2-thread gevent pool when gevent has patched
        threading, else inline."""
        self.meta_dir = os.path.join(data_dir, META_DIR)
        self.snapshot_path = os.path.join(self.meta_dir, SNAPSHOT)
        self._lock = threading.RLock()
        self._flushed = threading.Condition(self._lock)
        self._root = None
        self._session_id = 0
        self._lock_fd = None
        self._zxid = 0
        self._data_watches = {}
        self._child_watches = {}
        self._pool_arg = pool
        self._pool = None
        self._spawn = None         # starts a flush in a greenlet of its own (gevent), or None: flush inline
        self._own_pool = False
        self._journal = None
        self._queued = []          # records not yet handed to a flush
        self._last_seq = 0         # seq of the newest record queued
        self._durable_seq = 0      # every record up to this one is fsync'd
        self._flushing = False
        self._failed = None        # the exception that made the journal unwritable
        self._journal_bytes = 0    # written since the last compaction started
        self._snapshot_bytes = 0
        self._compaction = None    # the running compaction (a gevent AsyncResult), if any

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
                self._recover()
            except BaseException:
                self._release_lock()
                raise
            if self._pool_arg is not None:
                self._pool, self._spawn = self._pool_arg, getattr(self._pool_arg, "spawn_flusher", None)
            else:
                self._pool, self._spawn = _gevent_offloader()
            self._own_pool = self._pool_arg is None and self._pool is not None
            # ZooKeeper session ids are positive 64-bit numbers; 0 means "not an ephemeral".
            self._session_id = random.getrandbits(63) or 1
        return self

    def _recover(self):
        """Snapshot + journal -> the tree (journal.recover); then an empty journal after its last record."""
        tree, self._snapshot_bytes = recover(self.meta_dir)
        self._root, self._zxid = tree.root, tree.zxid
        self._last_seq = self._durable_seq = tree.seq
        self._queued, self._journal_bytes, self._failed = [], 0, None
        self._journal = Journal(self.meta_dir, tree.seq + 1)

    def stop(self):
        if self._root is None:
            return
        pending = []
        with self._lock:
            owned = []
            self._collect_ephemerals(self._root, "/", owned)
            for path in owned:
                self._delete_locked(path, -1, False, pending)
            seq = self._last_seq
        try:
            self._commit(seq)
        except CoordinationError:
            log.exception("coordination journal: the ephemeral nodes' removal could not be written")
        self._fire(pending)
        compaction = self._compaction
        if compaction is not None:
            compaction.wait()
        with self._lock:
            while self._flushing:
                self._flushed.wait()
            self._root = None
            self._session_id = 0
            self._data_watches.clear()
            self._child_watches.clear()
            self._journal.close()
            self._journal = None
            self._release_lock()
            if self._own_pool:
                self._pool.kill()
            self._pool = self._spawn = None

    def _release_lock(self):
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    # -- reads ----------------------------------------------------------------------------------------------------

    def get(self, path):
        self._settle()
        with self._lock:
            node = self._find(path)
            if node is None:
                raise NoNodeError(path=path)
            return node.data, node.stat()

    def exists(self, path):
        self._settle()
        with self._lock:
            node = self._find(path)
            return None if node is None else node.stat()

    def get_children(self, path):
        self._settle()
        with self._lock:
            node = self._find(path)
            if node is None:
                raise NoNodeError(path=path)
            return sorted(node.children)

    def _settle(self):
        """Wait until every change made so far is durable (a read never sees what a crash could still undo)."""
        if self._durable_seq < self._last_seq and self._failed is None:
            try:
                self._commit(self._last_seq)
            except CoordinationError:
                pass  # the store is read-only now; reads go on

    # -- writes ---------------------------------------------------------------------------------------------------

    def create(self, path, data=b"", ephemeral=False, sequence=False, makepath=False):
        pending = []
        with self._lock:
            path = self._create_locked(path, data, ephemeral, sequence, makepath, pending)
            seq = self._last_seq
        self._commit(seq)
        self._fire(pending)
        return path

    def create_many(self, items):
        """Like the base class (one result per item, nothing rolled back), applied ``CHUNK`` items at a time with
        one flush each: 10,000 partition states are ~20 fsyncs, not 10,000."""
        out = []
        items = list(items)
        for start in range(0, len(items), CHUNK):
            pending = []
            with self._lock:
                for path, data, makepath in items[start:start + CHUNK]:
                    try:
                        out.append(self._create_locked(path, data, False, False, makepath, pending))
                    except CoordinationError as e:
                        out.append(e)
                seq = self._last_seq
            self._commit(seq)
            self._fire(pending)
        return out

    def _create_locked(self, path, data, ephemeral, sequence, makepath, pending):
        validate_path(path)
        if path == "/":
            raise NodeExistsError(path="/")
        data = bytes(data)
        self._check_writable()
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
        node = Node(data, _now_ms(), self._session_id if ephemeral else 0, self._zxid)
        parent.children[name] = node
        parent.cversion += 1
        self._record(self._zxid, None if ephemeral else node.entry(path), None, (parent_path, parent.cversion))
        self._queue_create(path, node, parent_path, parent, pending)
        return path

    def set(self, path, data, version=-1):
        validate_path(path)
        pending = []
        with self._lock:
            self._check_writable()
            stat = self._set_locked(path, bytes(data), version, pending)
            seq = self._last_seq
        self._commit(seq)
        self._fire(pending)
        return stat

    def set_many(self, items, check=None, on_wave=None):
        """The base class's contract; ``CHUNK`` sets per journal flush, the ``check`` tested under the same lock as
        each chunk (so no other writer can slip in between). Unlike ZooKeeper's multi, a failing item does not hold
        back the others of its chunk (each is its own conditional set; one result per item either way). ``on_wave``
        gets each chunk's results once it is flushed."""
        items = list(items)
        for path, _data, _version in items:
            validate_path(path)
        out = []
        for start in range(0, len(items), CHUNK):
            pending = []
            with self._lock:
                self._check_writable()
                if check is not None:
                    node = self._find(check[0])
                    if node is None or node.version != check[1]:
                        raise BadVersionError("%s: not at version %d" % (check[0], check[1]), check[0])
                for path, data, version in items[start:start + CHUNK]:
                    try:
                        out.append(self._set_locked(path, bytes(data), version, pending))
                    except CoordinationError as e:
                        out.append(e)
                seq = self._last_seq
            self._commit(seq)
            self._fire(pending)
            if on_wave is not None and len(out) > start:
                on_wave(list(range(start, len(out))), out[start:])
        return out

    def _set_locked(self, path, data, version, pending):
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
            self._record(None, node.entry(path), None, None)
        return stat

    def delete(self, path, version=-1, recursive=False):
        validate_path(path)
        if path == "/":
            raise ValueError("the root node cannot be deleted")
        pending = []
        with self._lock:
            self._check_writable()
            self._delete_locked(path, version, recursive, pending)
            seq = self._last_seq
        self._commit(seq)
        self._fire(pending)

    # -- journal --------------------------------------------------------------------------------------------------

    def _check_writable(self):
        self._check_started()
        if self._failed is not None:
            raise CoordinationError("the coordination journal in %s could not be written (%s); the store is "
                                    "read-only until restarted" % (self.meta_dir, self._failed))

    def _record(self, zxid, put, deleted, cv):
        """Queue one journal record (under the lock)."""
        self._last_seq += 1
        self._queued.append((self._last_seq, zxid, put, deleted, cv))

    def _run(self, fn, *args):
        return fn(*args) if self._pool is None else self._pool.apply(fn, args)

    def _commit(self, seq):
        """Return once record ``seq`` (and so every earlier one) is durable. When no flush is running, start one: in a
        greenlet of its own under gevent (a caller killed while it waits -- its connection closed -- cannot leave a
        write half-accounted), else in this thread."""
        while True:
            with self._lock:
                if self._durable_seq >= seq:
                    return
                if self._failed is not None:
                    raise CoordinationError("the coordination journal could not be written: %s" % self._failed)
                if self._flushing:
                    self._flushed.wait()
                    continue
                self._flushing = True
                if self._spawn is not None:
                    self._spawn(self._flush)
                    continue
            self._flush()

    def _flush(self):
        """Write every queued record (one write + fsync per round) until none is left; the caller holds the flusher
        role (``_flushing``), which this gives up at the end."""
        try:
            while True:
                with self._lock:
                    batch, upto = self._queued, self._last_seq
                    self._queued = []
                    journal = self._journal
                if not batch or self._failed is not None:
                    return
                try:
                    written = self._run(journal.append, batch)
                except BaseException as e:  # noqa: BLE001 - the store turns read-only; waiters see _failed
                    # Whether the batch reached the disk is unknown: nothing more may be acknowledged.
                    log.error("coordination journal write failed; the store is read-only now: %r", e)
                    with self._lock:
                        self._failed = e
                    if isinstance(e, Exception):
                        return
                    raise
                with self._lock:
                    self._durable_seq = upto
                    self._journal_bytes += written
                    self._flushed.notify_all()
                    compact = self._compaction_due()
                if compact:
                    self._start_compaction(upto)
        finally:
            with self._lock:
                self._flushing = False
                self._flushed.notify_all()

    def _compaction_due(self):
        if self._journal_bytes <= max(COMPACT_MIN_BYTES, self._snapshot_bytes):
            return False
        return self._compaction is None or self._compaction.ready()

    def _start_compaction(self, upto):
        """Switch to a new journal file at ``upto + 1`` and rebuild the snapshot from the older files (in the
        background when there is a pool). Called with the flusher role held: no write runs meanwhile."""
        try:
            self._run(self._journal.rotate, upto + 1)
            self._journal_bytes = 0
            if self._pool is None:
                self._compaction_done(compact, self.meta_dir, upto)
            else:
                self._compaction = self._pool.spawn(self._compaction_done, compact, self.meta_dir, upto)
        except OSError as e:
            log.error("coordination journal: could not start a new file for compaction: %s", e)

    def _compaction_done(self, fn, *args):
        # Runs in the pool's native thread: it only sets an int the loop reads.
        try:
            self._snapshot_bytes = fn(*args)
        except Exception:  # noqa: BLE001 - the journal still holds everything; the next compaction retries
            log.exception("coordination snapshot compaction failed")

    def compact(self):
        """Compact now (flush, switch journal files, rebuild tree.json) and wait for it; for tools and tests."""
        with self._lock:
            self._check_started()
            seq = self._last_seq
        self._commit(seq)
        compaction = self._compaction
        if compaction is not None:
            compaction.wait()
        with self._lock:
            while self._flushing:
                self._flushed.wait()
            self._flushing = True
            upto = self._durable_seq
        try:
            self._start_compaction(upto)
        finally:
            with self._lock:
                self._flushing = False
                self._flushed.notify_all()
        if self._compaction is not None:
            self._compaction.wait()

    # -- watches --------------------------------------------------------------------------------------------------

    def watch_data(self, path, fn):
        validate_path(path)
        self._settle()
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
        self._settle()
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
                child = Node(b"", _now_ms(), 0, self._zxid)
                node.children[part] = child
                node.cversion += 1
                self._record(self._zxid, child.entry(cur), None, (parent_of(cur), node.cversion))
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
        self._record(None, None, None if node.owner else path, (parent_path, parent.cversion))
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
        watches = self._data_watches.get(path)
        if watches:
            args = (node.data, node.stat()) if node is not None else (None, None)
            for w in watches:
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
