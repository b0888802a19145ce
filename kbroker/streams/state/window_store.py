"""Kafka's WindowStore interface and its binary key layout (WindowKeySchema).

A window store maps (key, window start) -> value; every window has the store's fixed ``window_size`` so a record's
Windowed key is Windowed(key, Window(start, start + size)).

Binary key (the RocksDB key and the changelog record key, exactly Kafka's ``WindowKeySchema.toStoreKeyBinary``)::

    key bytes | window start (8 bytes, big-endian signed) | seqnum (4 bytes, big-endian)

seqnum is 0 unless the store retains duplicates (stream-stream join stores), where each put gets the next seqnum so
equal (key, start) pairs coexist. Byte order of these keys is (key bytes, start, seqnum) -- for keys that are not a
prefix of another key; Kafka lives with the same caveat, and range scans filter on the decoded key.

Retention: a window is kept while ``start > observed stream time - retention`` (observed stream time = the largest
window start put so far); puts of windows at or below that bound are dropped and counted, and reads never return
them -- Kafka's AbstractRocksDBSegmentedBytesStore / InMemoryWindowStore.

Iteration order: ``fetch_range`` (one key) ascends by start (``backward_*``: descending). Key-range and ``all``
fetches: in-memory stores order by (start, key), RocksDB stores by (segment, key, start) -- as Kafka's two
implementations do. Time bounds are inclusive.
"""

import abc
import struct

from kbroker.streams.state.base import StateStore

_TS = struct.Struct(">q")
_TS_SEQ = struct.Struct(">qi")
TIMESTAMP_SIZE = 8
SEQNUM_SIZE = 4
SUFFIX_SIZE = TIMESTAMP_SIZE + SEQNUM_SIZE


def to_store_key_binary(key: bytes, window_start: int, seqnum: int = 0) -> bytes:
    """Kafka's WindowKeySchema.toStoreKeyBinary: key + 8-byte start + 4-byte seqnum."""
    return bytes(key) + _TS_SEQ.pack(window_start, seqnum)


def from_store_key_binary(binary: bytes):
    """(key bytes, window start, seqnum) of a binary window key."""
    start, seqnum = _TS_SEQ.unpack_from(binary, len(binary) - SUFFIX_SIZE)
    return binary[:-SUFFIX_SIZE], start, seqnum


class WindowStore(StateStore):
    """Kafka's WindowStore; keys/values are bytes at the bytes level, objects at the typed level."""

    @abc.abstractmethod
    def window_size(self) -> int:
        """Size of every window of the store, ms."""

    @abc.abstractmethod
    def retention_period(self) -> int:
        """ms a window is kept after stream time passes its start."""

    @abc.abstractmethod
    def put(self, key, value, window_start_ms: int) -> None:
        """Put (or, value None: delete) the value of ``key``'s window starting at ``window_start_ms``."""

    @abc.abstractmethod
    def fetch(self, key, window_start_ms: int):
        """The value of the window, or None (also when expired)."""

    @abc.abstractmethod
    def fetch_range(self, key, time_from: int, time_to: int):
        """KeyValueIterator of KeyValue(window start, value) for ``key``'s windows with time_from <= start <=
        time_to, ascending by start."""

    @abc.abstractmethod
    def backward_fetch(self, key, time_from: int, time_to: int):
        """``fetch_range`` descending."""

    @abc.abstractmethod
    def fetch_keys(self, key_from, key_to, time_from: int, time_to: int):
        """KeyValueIterator of KeyValue(Windowed(key, Window), value) for key_from <= key <= key_to (None:
        unbounded) and time_from <= start <= time_to."""

    @abc.abstractmethod
    def backward_fetch_keys(self, key_from, key_to, time_from: int, time_to: int): ...

    @abc.abstractmethod
    def fetch_all(self, time_from: int, time_to: int):
        """Every key's windows with time_from <= start <= time_to, as KeyValue(Windowed, value)."""

    @abc.abstractmethod
    def backward_fetch_all(self, time_from: int, time_to: int): ...

    @abc.abstractmethod
    def all(self):
        """Every live window, KeyValue(Windowed, value)."""

    @abc.abstractmethod
    def backward_all(self): ...
