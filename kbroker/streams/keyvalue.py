"""Small value types shared by the whole library (Kafka's KeyValue, Window, Windowed).

- ``KeyValue(key, value)``: a pair, as the stores' iterators and the DSL's mappers return them.
- ``Window(start, end)``: milliseconds since the epoch. Time windows are half-open ``[start, end)`` (Kafka's
  TimeWindow); session windows are closed ``[start, end]`` (Kafka's SessionWindow, end = the last record's
  timestamp). The tuple does not know which kind it is; the store/DSL that made it does.
- ``Windowed(key, window)``: a windowed key; ``str()`` is Kafka's ``"[key@start/end]"``.
"""
from typing import Any, NamedTuple


class KeyValue(NamedTuple):
    key: Any
    value: Any

    @staticmethod
    def pair(key, value):
        """Kafka's ``KeyValue.pair``."""
        return KeyValue(key, value)

    def __str__(self):
        return "KeyValue(%s, %s)" % (self.key, self.value)


class Window(NamedTuple):
    start: int
    end: int

    def overlap(self, other):
        """Kafka's TimeWindow.overlap (half-open windows): they share at least one millisecond."""
        return self.start < other.end and other.start < self.end

    def __str__(self):
        return "Window{startMs=%d, endMs=%d}" % (self.start, self.end)


class Windowed(NamedTuple):
    key: Any
    window: Window

    def __str__(self):
        return "[%s@%d/%d]" % (self.key, self.window.start, self.window.end)
