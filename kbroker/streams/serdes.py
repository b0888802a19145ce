"""Serdes with Kafka's byte formats exactly (org.apache.kafka.common.serialization), so kbroker.streams reads and
writes the same bytes as a Java Kafka Streams application.

A ``Serde`` turns objects into bytes and back: ``serialize(topic, obj) -> bytes | None`` and
``deserialize(topic, data: bytes | None) -> obj``; None <-> None for every serde (Kafka's null convention: a null
value is a tombstone/delete). ``serializer``/``deserializer`` are the same two functions under Kafka's names.

Formats (big-endian, Java's signed types):
  String   UTF-8 (Java's decoder replaces malformed input with U+FFFD, so decoding never fails; neither does ours)
  Long     8 bytes signed         Integer 4 bytes signed      Short 2 bytes signed
  Double   8-byte IEEE 754        Float   4-byte IEEE 754     Boolean 1 byte 0x00/0x01
  ByteArray / Bytes  the bytes as they are      Void  always None (non-null data refused)
  UUID     the 36-character canonical string, UTF-8
  time-windowed key   <inner key bytes><8-byte window start>                  (TimeWindowedSerializer)
  session-windowed    <inner key bytes><8-byte window end><8-byte start>      (SessionWindowedSerializer)
A wrong size raises ``SerializationException`` with Kafka's message ("Size of data received by LongDeserializer
is not 8").

``serde_from_config(value)`` accepts what the ``default.key.serde`` / ``default.value.serde`` config keys hold:
a Serde object, a Serde class or factory, Kafka's class names ("org.apache.kafka.common.serialization.Serdes$
StringSerde"), short names ("String", "Long", ...) or a Python path ("package.module:Factory").
"""
import importlib
import struct
import uuid as _uuid

from kbroker.streams.errors import SerializationException
from kbroker.streams.keyvalue import Window, Windowed

__all__ = ["Serde", "Serdes", "time_windowed_serde", "session_windowed_serde", "serde_from_config",
           "as_serializer", "as_deserializer", "LONG_MAX"]

LONG_MAX = (1 << 63) - 1
_LONG = struct.Struct(">q")
_LONG2 = struct.Struct(">qq")


class Serde:
    """Base serde: subclasses override ``serialize`` and ``deserialize``. ``configure(configs, is_key)`` is
    Kafka's hook (called by the runtime for serdes named in the config); the default does nothing."""

    name = "Serde"

    def serialize(self, topic, data):
        raise NotImplementedError

    def deserialize(self, topic, data):
        raise NotImplementedError

    def serializer(self, topic, data):
        return self.serialize(topic, data)

    def deserializer(self, topic, data):
        return self.deserialize(topic, data)

    def configure(self, configs, is_key):
        pass

    def close(self):
        pass

    def __repr__(self):
        return "Serdes.%s()" % self.name


class _FixedSerde(Serde):
    """A fixed-size struct format; the deserializer refuses any other size with Kafka's message."""

    def __init__(self, name, fmt, what, types):
        self.name = name
        self._struct = struct.Struct(fmt)
        self._what = what
        self._types = types

    def serialize(self, topic, data):
        if data is None:
            return None
        if not isinstance(data, self._types) or isinstance(data, bool) and self._types is int:
            raise SerializationException("%s cannot serialize %r (a %s)" % (self.name, data, type(data).__name__))
        try:
            return self._struct.pack(data)
        except (struct.error, OverflowError) as e:
            raise SerializationException("%s cannot serialize %r: %s" % (self.name, data, e)) from None

    def deserialize(self, topic, data):
        if data is None:
            return None
        if len(data) != self._struct.size:
            raise SerializationException("Size of data received by %s is not %d" % (self._what, self._struct.size))
        return self._struct.unpack(data)[0]


class _StringSerde(Serde):
    name = "String"

    def __init__(self, encoding="utf-8"):
        self.encoding = encoding

    def configure(self, configs, is_key):
        # Kafka's key.serializer.encoding / value.serializer.encoding / serializer.encoding
        enc = configs.get("key.serializer.encoding" if is_key else "value.serializer.encoding",
                          configs.get("serializer.encoding"))
        if enc:
            self.encoding = enc

    def serialize(self, topic, data):
        if data is None:
            return None
        if not isinstance(data, str):
            raise SerializationException("String serde cannot serialize %r (a %s)" % (data, type(data).__name__))
        return data.encode(self.encoding)

    def deserialize(self, topic, data):
        if data is None:
            return None
        return bytes(data).decode(self.encoding, errors="replace")


class _BytesSerde(Serde):
    def __init__(self, name):
        self.name = name

    def serialize(self, topic, data):
        if data is None:
            return None
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise SerializationException("%s serde cannot serialize %r" % (self.name, type(data).__name__))
        return bytes(data)

    def deserialize(self, topic, data):
        return None if data is None else bytes(data)


class _VoidSerde(Serde):
    name = "Void"

    def serialize(self, topic, data):
        return None

    def deserialize(self, topic, data):
        if data is not None:
            raise SerializationException("Data should be null for a VoidDeserializer.")
        return None


class _BooleanSerde(Serde):
    name = "Boolean"

    def serialize(self, topic, data):
        if data is None:
            return None
        return b"\x01" if data else b"\x00"

    def deserialize(self, topic, data):
        if data is None:
            return None
        if len(data) != 1:
            raise SerializationException("Size of data received by BooleanDeserializer is not 1")
        if data[0] not in (0, 1):
            raise SerializationException("Unexpected byte received by BooleanDeserializer: %d" % data[0])
        return data[0] == 1


class _UUIDSerde(Serde):
    name = "UUID"

    def serialize(self, topic, data):
        if data is None:
            return None
        try:
            return str(data if isinstance(data, _uuid.UUID) else _uuid.UUID(data)).encode("ascii")
        except (ValueError, TypeError, AttributeError):
            raise SerializationException("UUID serde cannot serialize %r" % (data,)) from None

    def deserialize(self, topic, data):
        if data is None:
            return None
        try:
            return _uuid.UUID(bytes(data).decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise SerializationException("Error parsing data into UUID") from None


class _FunctionSerde(Serde):
    """Kafka's Serdes.serdeFrom(serializer, deserializer) over two functions ``(topic, data)``."""
    name = "serde_from"

    def __init__(self, ser, deser):
        self._ser = ser
        self._deser = deser

    def serialize(self, topic, data):
        return None if data is None else self._ser(topic, data)

    def deserialize(self, topic, data):
        return None if data is None else self._deser(topic, data)


class Serdes:
    """Kafka's Serdes factory: ``Serdes.String()``, ``Serdes.Long()``, ... each returns a fresh Serde."""

    @staticmethod
    def String():
        return _StringSerde()

    @staticmethod
    def Long():
        return _FixedSerde("Long", ">q", "LongDeserializer", int)

    @staticmethod
    def Integer():
        return _FixedSerde("Integer", ">i", "IntegerDeserializer", int)

    @staticmethod
    def Short():
        return _FixedSerde("Short", ">h", "ShortDeserializer", int)

    @staticmethod
    def Double():
        return _FixedSerde("Double", ">d", "Deserializer", (int, float))

    @staticmethod
    def Float():
        return _FixedSerde("Float", ">f", "Deserializer", (int, float))

    @staticmethod
    def Boolean():
        return _BooleanSerde()

    @staticmethod
    def ByteArray():
        return _BytesSerde("ByteArray")

    @staticmethod
    def Bytes():
        return _BytesSerde("Bytes")

    @staticmethod
    def Void():
        return _VoidSerde()

    @staticmethod
    def UUID():
        return _UUIDSerde()

    @staticmethod
    def serde_from(serializer, deserializer):
        """A serde over two functions ``(topic, data)``; None passes through without calling them."""
        return _FunctionSerde(serializer, deserializer)


class _TimeWindowedSerde(Serde):
    name = "TimeWindowed"

    def __init__(self, inner, window_size_ms):
        self.inner = inner
        self.window_size_ms = window_size_ms

    def serialize(self, topic, data):
        if data is None:
            return None
        return as_serializer(self.inner)(topic, data.key) + _LONG.pack(data.window.start)

    def deserialize(self, topic, data):
        if data is None:
            return None
        if len(data) < 8:
            raise SerializationException("time-windowed key shorter than its 8-byte window start")
        data = bytes(data)
        start = _LONG.unpack_from(data, len(data) - 8)[0]
        # Kafka's WindowKeySchema.timeWindowForSize: an end past Long.MAX_VALUE (or no size known) is MAX_VALUE.
        end = LONG_MAX if self.window_size_ms is None else start + self.window_size_ms
        if end > LONG_MAX or end < 0:
            end = LONG_MAX
        return Windowed(as_deserializer(self.inner)(topic, data[:-8]), Window(start, end))


class _SessionWindowedSerde(Serde):
    name = "SessionWindowed"

    def __init__(self, inner):
        self.inner = inner

    def serialize(self, topic, data):
        if data is None:
            return None
        return as_serializer(self.inner)(topic, data.key) + _LONG2.pack(data.window.end, data.window.start)

    def deserialize(self, topic, data):
        if data is None:
            return None
        if len(data) < 16:
            raise SerializationException("session-windowed key shorter than its 16-byte window end and start")
        data = bytes(data)
        end, start = _LONG2.unpack_from(data, len(data) - 16)
        return Windowed(as_deserializer(self.inner)(topic, data[:-16]), Window(start, end))


def time_windowed_serde(inner, window_size_ms=None):
    """Kafka's WindowedSerdes.timeWindowedSerdeFrom: key bytes + 8-byte BE window start; the deserializer makes
    ``Window(start, start + window_size_ms)`` (end Long.MAX_VALUE when the size is not given, as Kafka's)."""
    return _TimeWindowedSerde(inner, window_size_ms)


def session_windowed_serde(inner):
    """Kafka's WindowedSerdes.sessionWindowedSerdeFrom: key bytes + 8-byte BE end + 8-byte BE start."""
    return _SessionWindowedSerde(inner)


def as_serializer(obj):
    """A function ``(topic, data) -> bytes | None`` from a Serde, an object with ``serialize``, or a function."""
    if obj is None:
        return None
    fn = getattr(obj, "serialize", None)
    if fn is not None:
        return fn
    if callable(obj):
        return obj
    raise TypeError("not a serializer: %r" % (obj,))


def as_deserializer(obj):
    """A function ``(topic, data) -> object`` from a Serde, an object with ``deserialize``, or a function."""
    if obj is None:
        return None
    fn = getattr(obj, "deserialize", None)
    if fn is not None:
        return fn
    if callable(obj):
        return obj
    raise TypeError("not a deserializer: %r" % (obj,))


_KAFKA_NAMES = {
    "String": Serdes.String, "Long": Serdes.Long, "Integer": Serdes.Integer, "Short": Serdes.Short,
    "Double": Serdes.Double, "Float": Serdes.Float, "Boolean": Serdes.Boolean, "ByteArray": Serdes.ByteArray,
    "Bytes": Serdes.Bytes, "Void": Serdes.Void, "UUID": Serdes.UUID,
}


def serde_from_config(value, configs=None, is_key=False):
    """The Serde a config value names (see the module docstring); ``configure(configs, is_key)`` is called on it.
    Raises ValueError naming the value when it names nothing known."""
    serde = _resolve(value)
    if configs is not None:
        serde.configure(configs, is_key)
    return serde


def _resolve(value):
    if isinstance(value, Serde) or (hasattr(value, "serialize") and hasattr(value, "deserialize")
                                    and not isinstance(value, type)):
        return value
    if isinstance(value, type) or callable(value) and not isinstance(value, str):
        return _resolve(value())
    if not isinstance(value, str):
        raise ValueError("not a serde: %r" % (value,))
    name = value.strip()
    short = name.rsplit("$", 1)[-1] if "$" in name else name.rsplit(".", 1)[-1]
    if short.endswith("Serde") and short[:-5] in _KAFKA_NAMES and (
            "$" in name or name.startswith("org.apache.kafka.") or "." not in name):
        return _KAFKA_NAMES[short[:-5]]()
    if name in _KAFKA_NAMES:
        return _KAFKA_NAMES[name]()
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError("cannot load serde %r: %s" % (value, e)) from None
        return _resolve(obj)
    raise ValueError("unknown serde %r (Kafka's Serdes$...Serde class names, short names such as 'String', or "
                     "'package.module:Factory' are accepted)" % (value,))
