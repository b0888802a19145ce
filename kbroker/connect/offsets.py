"""Source offsets: their bytes (as Kafka stores them) and the stores that keep them.

Format (Kafka's OffsetStorageWriter with its internal JsonConverter, schemas disabled -- what Kafka's tools and UIs
read from ``offset.storage.topic``):

- key   = ``["<connector>",{<source partition>}]``  UTF-8 JSON, compact separators (Jackson writes no spaces);
- value = ``{<source offset>}`` likewise; a None offset is a tombstone (None value).

Partition dict keys keep the order the connector gave them (Jackson keeps a map's insertion order). Keys are
compared as bytes, so one partition must always be spelled with the same key order -- as in Kafka.

Stores map key bytes -> value bytes. ``set`` returns only when the values are durable: the file store writes a
new file, fsyncs it and renames it over the old one (so a crash leaves the old or the new offsets, never a torn
file); Kafka's topic store (distributed/kafka_stores.py) returns after the producer's acknowledgement.
"""
import base64
import json
import os
import threading

from kbroker.connect.exceptions import ConnectError, DataError


def _dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def offset_key(connector, partition):
    """Key bytes of ``partition`` (a dict) of ``connector``."""
    return _dumps([connector, partition])


def offset_value(offset):
    """Value bytes of ``offset`` (a dict), None for None (a tombstone)."""
    return None if offset is None else _dumps(offset)


def parse_key(data):
    """(connector, partition) from key bytes; DataError when they are not Kafka's two-element array."""
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError("offset key is not JSON: %s" % e) from None
    if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[0], str)
            and (parsed[1] is None or isinstance(parsed[1], dict))):
        raise DataError("offset key must be [connector name, partition], got %r" % (parsed,))
    return parsed[0], parsed[1]


def parse_value(data):
    if data is None:
        return None
    try:
        parsed = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError("offset value is not JSON: %s" % e) from None
    if parsed is not None and not isinstance(parsed, dict):
        raise DataError("offset value must be a JSON object, got %r" % (parsed,))
    return parsed


class OffsetBackingStore:
    """Key bytes -> value bytes (module docstring). Thread-safe."""

    def start(self):
        pass

    def stop(self):
        pass

    def get(self, keys):
        """{key: value bytes or None (never written / tombstone)} for every key asked."""
        raise NotImplementedError

    def set(self, values):
        """Write ``values`` ({key: bytes or None}); returns when they are durable; ConnectError when they are not."""
        raise NotImplementedError

    def snapshot(self):
        """{key: value bytes} of every offset held (KIP-875's offsets endpoints list and reset them)."""
        raise NotImplementedError


class MemoryOffsetBackingStore(OffsetBackingStore):
    """Offsets in memory only (lost with the process)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._data = {}

    def get(self, keys):
        with self._lock:
            return {k: self._data.get(k) for k in keys}

    def set(self, values):
        with self._lock:
            for k, v in values.items():
                if v is None:
                    self._data.pop(k, None)
                else:
                    self._data[k] = v

    def snapshot(self):
        with self._lock:
            return dict(self._data)


class FileOffsetBackingStore(MemoryOffsetBackingStore):
    """Standalone mode's ``offset.storage.file.filename``.

    File format (ours; Kafka's is a Java-serialised HashMap no Python tool reads): one JSON object
    ``{"version": 1, "offsets": [[key_b64, value_b64], ...]}`` with base64 (RFC 4648) key and value bytes, so the
    stored bytes are exactly those Kafka's topic store would hold. Written whole on every ``set`` (offsets are few:
    one entry per source partition), to ``<file>.tmp`` + fsync + rename + directory fsync.
    """

    def __init__(self, path):
        super().__init__()
        self.path = os.fspath(path)

    def start(self):
        self._data = self._load()

    def _load(self):
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise ConnectError("cannot read offsets file %s: %s" % (self.path, e)) from None
        if not raw.strip():
            return {}
        try:
            doc = json.loads(raw)
            entries = doc["offsets"]
            return {base64.b64decode(k): base64.b64decode(v) for k, v in entries}
        except (ValueError, KeyError, TypeError) as e:
            raise ConnectError("offsets file %s is not a kbroker-connect offsets file: %s" % (self.path, e)) from None

    def set(self, values):
        with self._lock:
            data = dict(self._data)
            for k, v in values.items():
                if v is None:
                    data.pop(k, None)
                else:
                    data[k] = v
            self._write(data)
            self._data = data

    def _write(self, data):
        doc = {"version": 1, "offsets": [[base64.b64encode(k).decode(), base64.b64encode(v).decode()]
                                         for k, v in sorted(data.items())]}
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(json.dumps(doc, separators=(",", ":")).encode())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as e:
            raise ConnectError("cannot write offsets file %s: %s" % (self.path, e)) from None


class OffsetStorageReader:
    """A task's view of its connector's committed offsets (Kafka's OffsetStorageReader)."""

    def __init__(self, connector, store):
        self.connector = connector
        self.store = store

    def offset(self, partition):
        return self.offsets([partition]).get(_freeze(partition))

    def offsets(self, partitions):
        """{frozen partition: offset dict or None}; look an entry up with ``offset`` or by ``_freeze(partition)``."""
        partitions = list(partitions)
        keys = [offset_key(self.connector, p) for p in partitions]
        found = self.store.get(keys)
        return {_freeze(p): parse_value(found.get(k)) for p, k in zip(partitions, keys)}


def _freeze(partition):
    return None if partition is None else tuple(sorted(partition.items(), key=lambda kv: kv[0]))
