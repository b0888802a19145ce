"""Kafka's KeyValueStore interface. The same interface serves both levels of a store stack: the bytes stores
(memory.py, rocksdb.py, caching, change-logging: keys and values are ``bytes``) and the typed metered store the
application gets (objects, serialized by the store's serdes).

Ordering: ``range``/``all`` iterate in the byte order of the *serialized* keys (unsigned lexicographic, as RocksDB's
default comparator and Kafka's Bytes.compareTo), both bounds inclusive; ``from_key``/``to_key`` None means
unbounded; ``from_key`` > ``to_key`` yields nothing (Kafka logs a warning and returns an empty iterator).
``put(k, None)`` is a delete. Iterators yield KeyValue(key, value).
"""

import abc

from kbroker.streams.state.base import StateStore


class KeyValueStore(StateStore):

    @abc.abstractmethod
    def get(self, key):
        """The value for ``key`` or None."""

    @abc.abstractmethod
    def put(self, key, value) -> None:
        """Insert or replace; ``value`` None deletes."""

    @abc.abstractmethod
    def put_if_absent(self, key, value):
        """Put only when no value is present; returns the existing value (None if the put happened)."""

    @abc.abstractmethod
    def put_all(self, entries) -> None:
        """Put every KeyValue (or (key, value) pair) of ``entries`` in order."""

    @abc.abstractmethod
    def delete(self, key):
        """Delete ``key``; returns the old value or None."""

    @abc.abstractmethod
    def range(self, from_key, to_key):
        """KeyValueIterator over from_key <= k <= to_key in ascending serialized-key order."""

    @abc.abstractmethod
    def reverse_range(self, from_key, to_key):
        """The same entries as ``range`` in descending order."""

    @abc.abstractmethod
    def all(self):
        """KeyValueIterator over every entry, ascending."""

    @abc.abstractmethod
    def reverse_all(self):
        """Every entry, descending."""

    @abc.abstractmethod
    def prefix_scan(self, prefix, prefix_serializer=None):
        """Entries whose serialized key starts with ``prefix_serializer(prefix)`` (bytes stores: ``prefix`` is
        bytes and the serializer None), ascending. ``prefix_serializer`` is a Serde, a Serializer or a callable
        (topic, data) -> bytes."""

    @abc.abstractmethod
    def approximate_num_entries(self) -> int:
        """The number of entries (exact for in-memory stores; RocksDB's estimate otherwise)."""
