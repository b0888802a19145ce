"""Kafka's SessionStore interface and its binary key layout (SessionKeySchema).

A session is Windowed(key, Window(start, end)) with both bounds inclusive (a single-record session has start ==
end). Binary key (the RocksDB key and the changelog record key, exactly Kafka's ``SessionKeySchema.toBinary``)::

    key bytes | session end (8 bytes, big-endian signed) | session start (8 bytes, big-endian signed)

Retention: a session is kept while ``end > observed stream time - retention`` (observed stream time = the largest
session end put so far); older puts are dropped -- as Kafka's session stores.

``find_sessions(key, earliest_session_end, latest_session_start)``: sessions of ``key`` with end >=
earliest_session_end and start <= latest_session_start (the sessions a record at ts overlaps or touches, for
earliest_end = ts - gap, latest_start = ts + gap), ascending by end then start.
"""

import abc
import struct

from kbroker.streams.state.base import KeyValueIterator, StateStore

_TWO_TS = struct.Struct(">qq")
SUFFIX_SIZE = 16


def to_binary(key: bytes, start: int, end: int) -> bytes:
    """Kafka's SessionKeySchema.toBinary: key + 8-byte end + 8-byte start."""
    return bytes(key) + _TWO_TS.pack(end, start)


def from_binary(binary: bytes):
    """(key bytes, start, end) of a binary session key."""
    end, start = _TWO_TS.unpack_from(binary, len(binary) - SUFFIX_SIZE)
    return binary[:-SUFFIX_SIZE], start, end


class SessionStore(StateStore):
    """Kafka's SessionStore; keys/values are bytes at the bytes level, objects at the typed level."""

    @abc.abstractmethod
    def retention_period(self) -> int: ...

    @abc.abstractmethod
    def find_sessions(self, key, earliest_session_end: int, latest_session_start: int):
        """KeyValueIterator of KeyValue(Windowed, value), see the module docstring."""

    @abc.abstractmethod
    def backward_find_sessions(self, key, earliest_session_end: int, latest_session_start: int): ...

    @abc.abstractmethod
    def find_sessions_range(self, key_from, key_to, earliest_session_end: int, latest_session_start: int):
        """As find_sessions for every key_from <= key <= key_to (None: unbounded)."""

    @abc.abstractmethod
    def fetch_session(self, key, session_start: int, session_end: int):
        """The value of exactly that session, or None."""

    @abc.abstractmethod
    def fetch(self, key):
        """Every session of ``key`` (KeyValue(Windowed, value)), ascending by end."""

    @abc.abstractmethod
    def backward_fetch(self, key): ...

    @abc.abstractmethod
    def fetch_range(self, key_from, key_to):
        """Every session of the keys in [key_from, key_to]."""

    @abc.abstractmethod
    def put(self, windowed_key, value) -> None:
        """Put a session (windowed_key: Windowed(key, Window(start, end))); value None removes it."""

    @abc.abstractmethod
    def remove(self, windowed_key) -> None: ...


_ALL_END, _ALL_START = -1 << 63, (1 << 63) - 1     # Long.MIN_VALUE / MAX_VALUE: every session


class SessionQueriesByScan:
    """The queries of a bytes-level session store, derived from its one scan ``_find(key_from, key_to,
    earliest_end, latest_start, single=None) -> [KeyValue(Windowed, value)]`` in ascending order (the in-memory
    and the RocksDB stores; list it before SessionStore in the bases so these override the abstract methods)."""

    def find_sessions(self, key, earliest_session_end, latest_session_start):
        return KeyValueIterator(self._find(None, None, earliest_session_end, latest_session_start,
                                           single=bytes(key)))

    def backward_find_sessions(self, key, earliest_session_end, latest_session_start):
        return KeyValueIterator(reversed(self._find(None, None, earliest_session_end, latest_session_start,
                                                    single=bytes(key))))

    def find_sessions_range(self, key_from, key_to, earliest_session_end, latest_session_start):
        return KeyValueIterator(self._find(key_from, key_to, earliest_session_end, latest_session_start))

    def fetch(self, key):
        return self.find_sessions(key, _ALL_END, _ALL_START)

    def backward_fetch(self, key):
        return self.backward_find_sessions(key, _ALL_END, _ALL_START)

    def fetch_range(self, key_from, key_to):
        return self.find_sessions_range(key_from, key_to, _ALL_END, _ALL_START)
