"""On-disk format of the embedded coordination store: a snapshot plus an append-only journal (file work only).

This module knows the bytes: record encoding and decoding with their CRC, snapshot writing and reading, recovery
of a torn tail, compaction. ZooKeeper's semantics (version checks, sequence names, watches, sessions) and when to
write, flush or compact are embedded.py's. embedded.py runs ``Journal.append`` and ``compact`` in native threads,
so nothing here touches more than files and the objects it is given.

Files, in ``<data_dir>/__kbroker_meta/`` (``data_dir`` is the broker's first log dir)::

    .lock                             flock'd by the backend while started: two brokers cannot share one tree
    tree.json                         the snapshot: every persistent node as of journal record ``seq``
    journal.00000000000000000042      journal records with seq >= 42 (the name is the first seq, 20 digits)

Snapshot (one JSON object, one node per line so that it can be written and read in small steps)::

    {"format":1,"seq":41,"zxid":7,"nodes":[
    {"path":"/","version":0,"cversion":3,"ctime":0,"mtime":0,"czxid":0,"data":""},
    ...
    ]}

Nodes are listed in path order (parents first). ``data`` holds the bytes as text when they are valid UTF-8 (Kafka's
JSON, readable with ``jq``), otherwise ``data_b64`` holds them base64-encoded. ``seq`` is the last journal record
the snapshot includes; ``zxid`` the last creation id handed out: every create (ephemeral ones too) takes the next,
so a node's ``czxid`` is unique and increasing over the tree's whole life, as ZooKeeper's is (snapshots without
these fields, written before the journal existed, load with 0).

Journal: one line per mutation of persistent state, appended and fsync'd before the mutation is acknowledged::

    <CRC-32 (zlib, IEEE) of the payload: 8 lowercase hex digits> <payload: compact JSON, ASCII>\\n
    payload {"seq":N, ["zxid":Z,] ["put":{node entry as in the snapshot},] ["del":"/path",] ["cv":["/parent",C]]}

``put`` creates or overwrites a node's fields (never its children), ``del`` removes a node, ``cv`` sets a node's
cversion, ``zxid`` the creation counter. A persistent create is ``zxid + put + cv`` (its parent's cversion), an
ephemeral create ``zxid + cv`` (ephemeral nodes are never persisted: a restart is a new session, but the parent's
cversion -- which keeps sequence numbers unique -- and the zxid are), a set of a persistent node ``put``, a delete
``del + cv`` (``cv`` only for an ephemeral node). Setting an ephemeral node writes nothing. ``seq`` increases by
exactly 1 per record over the tree's life. A queued record, as embedded.py hands it to ``Journal.append``, is the
tuple ``(seq, zxid|None, entry|None, deleted path|None, (parent path, cversion)|None)``; ``entry`` is
``Node.entry(path)``, immutable, so the writer thread never reads the live tree.

Compaction (``compact(meta_dir, upto)``, after the writer started a new journal file at ``upto + 1``): rebuild the
snapshot from ``tree.json`` plus the older journal files (never from the live tree): write ``tree.json.tmp``, fsync,
rename over ``tree.json``, fsync the directory, then delete the journal files it covered. Each record is thus
written about twice over its life; nothing is rewritten per change (the previous store rewrote and fsync'd the
whole tree twice per change: 1,000 partition states took 5.1 s, 3,000 took 64 s).

Recovery (``recover``): load ``tree.json`` (a leftover ``tree.json.tmp`` is deleted: it never reached its rename),
replay the journal records after its ``seq`` in order, then write a fresh snapshot; the backend then starts an
empty journal. Journal files wholly covered by the snapshot (a compaction that stopped before deleting them) are
deleted. In the last journal file, the first record that is incomplete (no newline: a torn write), fails its CRC,
does not parse or breaks the seq sequence ends the journal: it and everything after it is cut off with a warning --
only the last write can be torn, and it was never acknowledged. The same in an older file, or a gap between files,
means acknowledged changes are damaged: ``recover`` raises CoordinationError (the backend does not start).
"""

import base64
import json
import logging
import os
import zlib

from .backend import ZnodeStat, parent_of, validate_path
from .errors import CoordinationError

log = logging.getLogger("kbroker.coord.journal")

SNAPSHOT = "tree.json"
SNAPSHOT_FORMAT = 1
_SNAPSHOT_HEAD = '{"format":%d,"seq":%d,"zxid":%d,"nodes":[\n'
JOURNAL_PREFIX = "journal."


class Node:
    """One znode: the persisted fields (a snapshot entry), the ephemeral owner (0: persistent) and the children by
    name. The live tree (embedded.py) and the trees rebuilt here (recovery, compaction) are made of these."""

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

    def entry(self, path):
        """This node's fields as a tuple (immutable: safe to hand to the writer thread)."""
        return (path, self.version, self.cversion, self.ctime, self.mtime, self.czxid, self.data)


# -- records and snapshot entries (pure functions: they run in the writer/compaction threads too) ------------

def _entry_json(entry):
    path, version, cversion, ctime, mtime, czxid, data = entry
    out = {"path": path, "version": version, "cversion": cversion, "ctime": ctime, "mtime": mtime, "czxid": czxid}
    try:
        out["data"] = data.decode("utf-8")
    except UnicodeDecodeError:
        out["data_b64"] = base64.b64encode(data).decode("ascii")
    return out


def _entry_data(entry):
    if "data_b64" in entry:
        return base64.b64decode(entry["data_b64"])
    return entry["data"].encode("utf-8")


def _encode_record(rec):
    """One journal line from a queued record ``(seq, zxid|None, entry|None, deleted path|None, (path, cv)|None)``."""
    seq, zxid, put, deleted, cv = rec
    doc = {"seq": seq}
    if zxid is not None:
        doc["zxid"] = zxid
    if put is not None:
        doc["put"] = _entry_json(put)
    if deleted is not None:
        doc["del"] = deleted
    if cv is not None:
        doc["cv"] = list(cv)
    payload = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("ascii")
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def _decode_line(line):
    """The payload dict of one journal line (without its newline), or None when it is damaged."""
    if len(line) < 10 or line[8:9] != b" ":
        return None
    payload = line[9:]
    try:
        if int(line[:8], 16) != zlib.crc32(payload):
            return None
        doc = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("seq"), int):
        return None
    return doc


class Tree:
    """A persistent-state tree being rebuilt from a snapshot and journal records (recovery and compaction)."""

    def __init__(self):
        self.root = Node(b"", 0)
        self.zxid = 0
        self.seq = 0

    def find(self, path):
        node = self.root
        if path == "/":
            return node
        for part in path[1:].split("/"):
            node = node.children.get(part)
            if node is None:
                return None
        return node

    def put(self, entry):
        path = validate_path(entry["path"])
        node = self.find(path)
        if node is None:
            parent = self.find(parent_of(path))
            if parent is None:
                raise KeyError("parent of %s missing" % path)
            node = parent.children[path.rsplit("/", 1)[1]] = Node(b"", 0)
        node.data = _entry_data(entry)
        node.version = entry["version"]
        node.cversion = entry["cversion"]
        node.ctime = entry["ctime"]
        node.mtime = entry["mtime"]
        node.czxid = int(entry.get("czxid", 0))

    def apply(self, doc):
        if "zxid" in doc:
            self.zxid = max(self.zxid, int(doc["zxid"]))
        if "put" in doc:
            self.put(doc["put"])
        if "del" in doc:
            path = validate_path(doc["del"])
            parent = self.find(parent_of(path))
            if parent is not None:
                parent.children.pop(path.rsplit("/", 1)[1], None)
        if "cv" in doc:
            path, cversion = doc["cv"]
            node = self.find(validate_path(path))
            if node is not None:
                node.cversion = cversion
        self.seq = doc["seq"]

    def dump(self):
        """The snapshot bytes: one JSON document, written one node per line (module docstring)."""
        entries = []
        stack = [("/", self.root)]
        while stack:
            path, node = stack.pop()
            entries.append(node.entry(path))
            for name, child in node.children.items():
                if not child.owner:
                    stack.append((path.rstrip("/") + "/" + name, child))
        entries.sort(key=lambda e: e[0])
        # One small json.dumps per node, not one for the document: the C encoder holds the GIL for a whole call
        # (~0.2 s for 20,000 nodes), which would stall the event loop while a native thread compacts.
        lines = [_SNAPSHOT_HEAD % (SNAPSHOT_FORMAT, self.seq, self.zxid)]
        lines.append(",\n".join(json.dumps(_entry_json(e), separators=(",", ":"), sort_keys=True) for e in entries))
        lines.append("\n]}\n")
        return "".join(lines).encode("utf-8")


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _snapshot_nodes(raw):
    """(header dict, iterator of node entries) of a snapshot. Files written one node per line are parsed line by
    line (see ``Tree.dump`` on the GIL); anything else as one document."""
    head_end = raw.find(b"\n")
    head = raw[:head_end]
    if head.startswith(b'{"format":') and head.endswith(b'"nodes":['):
        header = json.loads(head[:-len(b'"nodes":[')].rstrip(b",") + b"}")
        lines = raw[head_end + 1:].rstrip().split(b"\n")
        if lines[-1] != b"]}":
            raise ValueError("snapshot does not end with ]}")
        return header, (json.loads(line.rstrip(b",")) for line in lines[:-1])
    doc = json.loads(raw.decode("utf-8"))
    return doc, iter(doc["nodes"])


def _read_snapshot(meta_dir):
    tree = Tree()
    path = os.path.join(meta_dir, SNAPSHOT)
    if not os.path.exists(path):
        return tree
    try:
        with open(path, "rb") as f:
            header, entries = _snapshot_nodes(f.read())
        if header.get("format") != SNAPSHOT_FORMAT:
            raise ValueError("unsupported snapshot format %r" % header.get("format"))
        tree.zxid = int(header.get("zxid", 0))
        tree.seq = int(header.get("seq", 0))
        for entry in entries:
            if entry["path"] == "/":
                node = tree.root
                node.data = _entry_data(entry)
                node.version, node.cversion = entry["version"], entry["cversion"]
                node.ctime, node.mtime, node.czxid = entry["ctime"], entry["mtime"], int(entry.get("czxid", 0))
            else:
                tree.put(entry)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CoordinationError("corrupt coordination snapshot %s: %s" % (path, e)) from None
    return tree


def journal_files(meta_dir):
    """[(first seq, path)] of the journal files, in seq order."""
    out = []
    for name in os.listdir(meta_dir):
        if name.startswith(JOURNAL_PREFIX) and name[len(JOURNAL_PREFIX):].isdigit():
            out.append((int(name[len(JOURNAL_PREFIX):]), os.path.join(meta_dir, name)))
    return sorted(out)


def _journal_name(meta_dir, first_seq):
    return os.path.join(meta_dir, "%s%020d" % (JOURNAL_PREFIX, first_seq))


def _replay(tree, files, repair):
    """Apply the records of ``files`` after ``tree.seq``. With ``repair`` (recovery) a damaged tail of the last file
    is cut off; anything else damaged raises CoordinationError."""
    for i, (first, path) in enumerate(files):
        last_file = i == len(files) - 1
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        last_seq = first - 1
        while pos < len(data):
            nl = data.find(b"\n", pos)
            doc = _decode_line(data[pos:nl]) if nl >= 0 else None
            if doc is not None and doc["seq"] != last_seq + 1:
                doc = None
            if doc is None:
                if not (repair and last_file):
                    raise CoordinationError("coordination journal %s is damaged at byte %d (after seq %d)"
                                            % (path, pos, last_seq))
                log.warning("coordination journal %s: cutting off %d bytes after seq %d at byte %d (a write the "
                            "crash interrupted; it was never acknowledged)", path, len(data) - pos, last_seq, pos)
                with open(path, "r+b") as f:
                    f.truncate(pos)
                    f.flush()
                    os.fsync(f.fileno())
                break
            last_seq = doc["seq"]
            if last_seq > tree.seq:
                if last_seq != tree.seq + 1:
                    raise CoordinationError("coordination journal %s starts at seq %d, the snapshot ends at %d: "
                                            "records are missing" % (path, last_seq, tree.seq))
                try:
                    tree.apply(doc)
                except (ValueError, KeyError, TypeError) as e:
                    raise CoordinationError("coordination journal %s: record %d cannot be applied: %s"
                                            % (path, last_seq, e)) from None
            pos = nl + 1


def _write_snapshot(meta_dir, body):
    path = os.path.join(meta_dir, SNAPSHOT)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(meta_dir)


def compact(meta_dir, upto):
    """Rebuild tree.json from itself plus the journal files holding only records <= ``upto``, then delete those
    files. Runs in a native thread: reads and writes files only. Returns the new snapshot's size."""
    tree = _read_snapshot(meta_dir)
    files = [(first, path) for first, path in journal_files(meta_dir) if first <= upto]
    _replay(tree, files, repair=False)
    body = tree.dump()
    _write_snapshot(meta_dir, body)
    for _first, path in files:
        os.unlink(path)
    _fsync_dir(meta_dir)
    return len(body)


def recover(meta_dir):
    """Snapshot + journal -> ``(Tree, snapshot size)``; afterwards tree.json holds every record and no journal file
    is left (module docstring, Recovery). The caller holds the directory's ``.lock``."""
    snapshot = os.path.join(meta_dir, SNAPSHOT)
    tmp = snapshot + ".tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)  # a write that never reached its rename; tree.json is still the last good state
    tree = _read_snapshot(meta_dir)
    snapshot_seq = tree.seq
    files = journal_files(meta_dir)
    _replay(tree, files, repair=True)
    if not files and tree.seq == snapshot_seq and os.path.exists(snapshot):
        return tree, os.path.getsize(snapshot)
    body = tree.dump()
    _write_snapshot(meta_dir, body)
    for _first, path in files:
        os.unlink(path)
    _fsync_dir(meta_dir)
    return tree, len(body)


class Journal:
    """The journal file being appended to. One writer at a time (the flushing caller), never the event loop."""

    def __init__(self, meta_dir, first_seq):
        self.meta_dir = meta_dir
        self.fd = None
        self.open(first_seq)

    def open(self, first_seq):
        self.fd = os.open(_journal_name(self.meta_dir, first_seq), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _fsync_dir(self.meta_dir)

    def append(self, records):
        """Encode, write and fsync ``records``; returns the bytes written."""
        data = b"".join(_encode_record(r) for r in records)
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        os.fsync(self.fd)
        return len(data)

    def rotate(self, first_seq):
        """Continue in a new file starting at ``first_seq`` (the old one is complete and fsync'd)."""
        os.close(self.fd)
        self.open(first_seq)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
