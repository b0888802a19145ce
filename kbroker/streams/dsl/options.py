"""The DSL's option objects (Kafka's org.apache.kafka.streams.kstream Consumed, Produced, Grouped, Materialized,
Repartitioned, Named, Printed, Branched), as immutable-by-convention value objects built with Kafka's factory
names in snake_case::

    Consumed.with_(Serdes.String(), Serdes.Long()).with_name("src")
    Materialized.as_("counts-store").with_value_serde(Serdes.Long()).with_caching_disabled()
    Grouped.as_("by-word")           ->  repartition topic "<application.id>-by-word-repartition"
    Repartitioned.with_(k, v).with_number_of_partitions(3)

Every ``with_*`` method returns a NEW object (Kafka's objects are reused by applications; mutating a shared one
would change topologies built earlier). ``None`` for a serde means "inherit": from the upstream operator when the
DSL knows it, else ``default.key.serde`` / ``default.value.serde`` of the config.

Names given by the user are checked as Kafka's ``Named.validate``: 1-249 characters of ASCII letters, digits,
'.', '_' and '-' (they become parts of topic names); anything else raises TopologyException.
"""
import copy
import re
import sys

from kbroker.streams.errors import TopologyException

__all__ = ["Named", "Consumed", "Produced", "Grouped", "Materialized", "Repartitioned", "Printed", "Branched",
           "StoreType", "validate_name"]

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249


def validate_name(name):
    """Kafka's Named.validate: a name becomes part of processor/store/topic names, so topic rules apply."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TopologyException("Name must be a string, got %r" % (name,))
    if not name:
        raise TopologyException("Name is illegal, it can't be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise TopologyException("Name is illegal, it can't be longer than %d characters, name: %s"
                                % (MAX_NAME_LENGTH, name))
    if not _LEGAL.match(name):
        raise TopologyException("Name \"%s\" is illegal, it contains a character other than ASCII alphanumerics, "
                                "'.', '_' and '-'" % name)
    return name


class _Options:
    """Base: ``_with(field=value)`` copies the object with fields changed."""

    name = None

    def _with(self, **fields):
        other = copy.copy(self)
        for k, v in fields.items():
            setattr(other, k, v)
        return other

    def with_name(self, name):
        return self._with(name=validate_name(name))

    def __repr__(self):
        items = ", ".join("%s=%r" % kv for kv in sorted(vars(self).items()) if kv[1] is not None)
        return "%s(%s)" % (type(self).__name__, items)


class Named(_Options):
    """A processor name (Kafka's Named.as)."""

    def __init__(self, name=None):
        self.name = validate_name(name)

    @staticmethod
    def as_(name):
        return Named(name)


class Consumed(_Options):
    """How a source topic is read: serdes, timestamp extractor, offset reset ("earliest"/"latest"), processor
    name (Kafka's Consumed)."""

    def __init__(self, key_serde=None, value_serde=None, timestamp_extractor=None, offset_reset=None, name=None):
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.timestamp_extractor = timestamp_extractor
        self.offset_reset = _check_reset(offset_reset)
        self.name = validate_name(name)

    @staticmethod
    def with_(key_serde=None, value_serde=None, timestamp_extractor=None, offset_reset=None):
        return Consumed(key_serde, value_serde, timestamp_extractor, offset_reset)

    @staticmethod
    def as_(name):
        return Consumed(name=name)

    def with_key_serde(self, serde):
        return self._with(key_serde=serde)

    def with_value_serde(self, serde):
        return self._with(value_serde=serde)

    def with_timestamp_extractor(self, extractor):
        return self._with(timestamp_extractor=extractor)

    def with_offset_reset_policy(self, policy):
        return self._with(offset_reset=_check_reset(policy))


def _check_reset(policy):
    if policy is None:
        return None
    p = str(policy).lower()
    if p not in ("earliest", "latest"):
        raise ValueError("offset reset policy must be 'earliest' or 'latest', got %r" % (policy,))
    return p


class Produced(_Options):
    """How a sink writes: serdes, partitioner ``fn(topic, key, value, num_partitions) -> int|None``, processor
    name (Kafka's Produced)."""

    def __init__(self, key_serde=None, value_serde=None, partitioner=None, name=None):
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.partitioner = partitioner
        self.name = validate_name(name)

    @staticmethod
    def with_(key_serde=None, value_serde=None, partitioner=None):
        return Produced(key_serde, value_serde, partitioner)

    @staticmethod
    def as_(name):
        return Produced(name=name)

    @staticmethod
    def key_serde_(serde):
        return Produced(key_serde=serde)

    @staticmethod
    def value_serde_(serde):
        return Produced(value_serde=serde)

    @staticmethod
    def stream_partitioner(partitioner):
        return Produced(partitioner=partitioner)

    def with_key_serde(self, serde):
        return self._with(key_serde=serde)

    def with_value_serde(self, serde):
        return self._with(value_serde=serde)

    def with_stream_partitioner(self, partitioner):
        return self._with(partitioner=partitioner)


class Grouped(_Options):
    """Serdes of a grouping's repartition topic and its name: ``Grouped.as_("x")`` names the topic
    "<application.id>-x-repartition" (and the key-selecting processor of ``group_by`` "x"), as Kafka's."""

    def __init__(self, key_serde=None, value_serde=None, name=None):
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = validate_name(name)

    @staticmethod
    def with_(key_serde=None, value_serde=None, name=None):
        return Grouped(key_serde, value_serde, name)

    @staticmethod
    def as_(name):
        return Grouped(name=name)

    @staticmethod
    def key_serde_(serde):
        return Grouped(key_serde=serde)

    @staticmethod
    def value_serde_(serde):
        return Grouped(value_serde=serde)

    def with_key_serde(self, serde):
        return self._with(key_serde=serde)

    def with_value_serde(self, serde):
        return self._with(value_serde=serde)


class Repartitioned(_Options):
    """Options of ``KStream.repartition``: serdes, topic name ("<app>-<name>-repartition"), partition count
    (None: the max of the upstream source topics' counts, decided by the runtime), partitioner."""

    def __init__(self, key_serde=None, value_serde=None, name=None, number_of_partitions=None, partitioner=None):
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = validate_name(name)
        self.number_of_partitions = _check_partitions(number_of_partitions)
        self.partitioner = partitioner

    @staticmethod
    def with_(key_serde=None, value_serde=None):
        return Repartitioned(key_serde, value_serde)

    @staticmethod
    def as_(name):
        return Repartitioned(name=name)

    @staticmethod
    def number_of_partitions_(n):
        return Repartitioned(number_of_partitions=n)

    @staticmethod
    def stream_partitioner(partitioner):
        return Repartitioned(partitioner=partitioner)

    def with_key_serde(self, serde):
        return self._with(key_serde=serde)

    def with_value_serde(self, serde):
        return self._with(value_serde=serde)

    def with_number_of_partitions(self, n):
        return self._with(number_of_partitions=_check_partitions(n))

    def with_stream_partitioner(self, partitioner):
        return self._with(partitioner=partitioner)


def _check_partitions(n):
    if n is None:
        return None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError("number of partitions must be a positive integer, got %r" % (n,))
    return n


class StoreType:
    """Kafka's Materialized.StoreType (also config "default.dsl.store": "rocksDB" | "in_memory")."""
    ROCKS_DB = "rocksDB"
    IN_MEMORY = "in_memory"


class Materialized(_Options):
    """How an aggregation/table is stored: store name (queryable), serdes, caching (on by default, as Kafka),
    change-logging (on by default, topic configs in ``log_config``), store type or a store supplier, retention
    (windowed stores: S4's windowed aggregations read ``retention_ms``)."""

    def __init__(self, store_name=None, key_serde=None, value_serde=None, store_supplier=None):
        self.store_name = validate_name(store_name) if store_name is not None else None
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.store_supplier = store_supplier
        self.caching_enabled = True
        self.logging_enabled = True
        self.log_config = {}
        self.retention_ms = None
        self.store_type = None

    @staticmethod
    def as_(store_name_or_supplier):
        """``Materialized.as_("name")``, a store supplier (its ``name()`` is the store name), or a StoreType."""
        if isinstance(store_name_or_supplier, str) and store_name_or_supplier in (StoreType.ROCKS_DB,
                                                                                 StoreType.IN_MEMORY):
            m = Materialized()
            m.store_type = store_name_or_supplier
            return m
        if isinstance(store_name_or_supplier, str) or store_name_or_supplier is None:
            return Materialized(store_name_or_supplier)
        supplier = store_name_or_supplier
        return Materialized(supplier.name(), store_supplier=supplier)

    @staticmethod
    def with_(key_serde=None, value_serde=None):
        return Materialized(key_serde=key_serde, value_serde=value_serde)

    @property
    def name(self):
        return self.store_name

    def with_key_serde(self, serde):
        return self._with(key_serde=serde)

    def with_value_serde(self, serde):
        return self._with(value_serde=serde)

    def with_caching_enabled(self):
        return self._with(caching_enabled=True)

    def with_caching_disabled(self):
        return self._with(caching_enabled=False)

    def with_logging_enabled(self, config=None):
        return self._with(logging_enabled=True, log_config=dict(config or {}))

    def with_logging_disabled(self):
        return self._with(logging_enabled=False, log_config={})

    def with_retention(self, retention_ms):
        if not isinstance(retention_ms, int) or retention_ms < 0:
            raise ValueError("retention must be a non-negative number of milliseconds, got %r" % (retention_ms,))
        return self._with(retention_ms=retention_ms)

    def with_store_type(self, store_type):
        if store_type not in (StoreType.ROCKS_DB, StoreType.IN_MEMORY):
            raise ValueError("store type must be %r or %r" % (StoreType.ROCKS_DB, StoreType.IN_MEMORY))
        return self._with(store_type=store_type)


class Printed(_Options):
    """``KStream.print`` options: to stdout or a file, a label (default: the parent processor's name), a
    ``mapper(key, value) -> str`` (default "key, value"). Lines are Kafka's: "[label]: key, value" with Java's
    "null" for None."""

    def __init__(self, path=None, stream=None, label=None, mapper=None, name=None):
        self.path = path
        self.stream = stream
        self.label = label
        self.mapper = mapper
        self.name = validate_name(name)

    @staticmethod
    def to_sys_out():
        return Printed()

    @staticmethod
    def to_file(path):
        if not path:
            raise TopologyException("filePath can't be an empty string")
        return Printed(path=path)

    @staticmethod
    def to_stream(stream):
        """Python extra: print to a file-like object (tests capture output this way)."""
        return Printed(stream=stream)

    def with_label(self, label):
        return self._with(label=label)

    def with_key_value_mapper(self, mapper):
        return self._with(mapper=mapper)

    def _open(self):
        if self.path is not None:
            return open(self.path, "a", encoding="utf-8"), True
        return (self.stream if self.stream is not None else sys.stdout), False


class Branched(_Options):
    """A branch of ``KStream.split()``: its name suffix, and optionally a chain ``function(stream) -> stream|None``
    or a ``consumer(stream)`` applied to the branch (Kafka's Branched)."""

    def __init__(self, name=None, chain_function=None, chain_consumer=None):
        self.name = validate_name(name)
        self.chain_function = chain_function
        self.chain_consumer = chain_consumer

    @staticmethod
    def as_(name):
        return Branched(name)

    @staticmethod
    def with_function(fn, name=None):
        return Branched(name, chain_function=fn)

    @staticmethod
    def with_consumer(fn, name=None):
        return Branched(name, chain_consumer=fn)
