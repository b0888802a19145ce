"""StreamsBuilder: the DSL's entry point (Kafka's StreamsBuilder + InternalStreamsBuilder).

The DSL writes straight into one S1 ``Topology`` as operators are declared (Kafka builds an intermediate graph and
writes it at ``build()``; with optimization "none", its default, the result is the same). Names are Kafka's:
every operator takes the next index of the topology's counter ("KSTREAM-FILTER-0000000001") -- also when the user
names it (Kafka burns the index for topology compatibility) -- and generated store names are
``prefix + "STATE-STORE-" + index`` ("KSTREAM-AGGREGATE-STATE-STORE-0000000003").

State stores of KTables are timestamped key-value stores (values with the update's timestamp). Their kind comes
from ``Materialized`` (store supplier or store type), else from the config given to ``StreamsBuilder(config)``:
"default.dsl.store" = "rocksDB" (Kafka's default: persistent, RocksDB) or "in_memory".
"""
import re

from kbroker.streams.dsl.grouped import KGroupedStream, KGroupedTable
from kbroker.streams.dsl.kstream import KStream
from kbroker.streams.dsl.ktable import KTable
from kbroker.streams.dsl.nodes import KTableSourceSupplier
from kbroker.streams.dsl.options import Consumed, Materialized, Named, StoreType, validate_name
from kbroker.streams.errors import TopologyException
from kbroker.streams.state.stores import Stores
from kbroker.streams.topology import Topology

__all__ = ["StreamsBuilder"]

SOURCE_NAME = "KSTREAM-SOURCE-"
TABLE_SOURCE_NAME = "KTABLE-SOURCE-"
TABLE_SOURCE_SUFFIX = "-source"

_OPTIMIZATION_KEY = "topology.optimization"


class StreamsBuilder:
    """Kafka's StreamsBuilder. ``config``: the app config (only "default.dsl.store" and "topology.optimization"
    matter while building)."""

    def __init__(self, config=None):
        self._topology = Topology()
        self._config = dict(config or {})
        self._check_optimization(self._config)
        self._store_type = self._check_store_type(self._config)
        self._default_typed = []        # (store name, StoreBuilder) whose kind follows default.dsl.store
        self._built = False

    # ------------------------------------------------------------------------------------------ name helpers
    def new_processor_name(self, prefix):
        return self._topology.next_name(prefix)

    def new_store_name(self, prefix):
        return self._topology.next_name(prefix + "STATE-STORE-")

    def name_or_generate(self, named, prefix):
        """Kafka's NamedInternal.orElseGenerateWithPrefix: the user's name, or a generated one; an index is
        burned either way."""
        name = _name_of(named)
        generated = self.new_processor_name(prefix)
        return name if name is not None else generated

    def suffix_or_generate(self, named, suffix, prefix):
        """Kafka's NamedInternal.suffixWithOrElseGet(suffix, provider, prefix)."""
        name = _name_of(named)
        generated = self.new_processor_name(prefix)
        return validate_name(name + suffix) if name is not None else generated

    def store_type(self):
        return self._store_type

    def copartition(self, *streams_or_tables):
        """Declare the source topics of these streams/tables co-partitioned (joins)."""
        topics = set()
        for s in streams_or_tables:
            topics |= set(s._source_topics)
        if len(topics) > 1:
            self._topology.copartition(*sorted(topics))

    def kv_store_builder(self, store_name, materialized, key_serde, value_serde):
        """The timestamped key-value store builder a Materialized describes (Kafka's KeyValueStoreMaterializer):
        supplier (given, or by store type), caching (on unless disabled) and change-logging (on unless disabled)
        flags."""
        m = materialized if materialized is not None else Materialized()
        supplier = m.store_supplier
        if supplier is None:
            supplier = self._kv_supplier(store_name, m.store_type or self._store_type)
        b = Stores.timestamped_key_value_store_builder(supplier, key_serde, value_serde)
        if m.store_supplier is None and m.store_type is None:
            self._default_typed.append((store_name, b))
        if m.logging_enabled:
            b.with_logging_enabled(m.log_config)
        else:
            b.with_logging_disabled()
        if m.caching_enabled:
            b.with_caching_enabled()
        else:
            b.with_caching_disabled()
        return b

    # ------------------------------------------------------------------------------------------ factories
    # KStream, KTable and the grouped streams create each other through their builder, and reach the windows,
    # joins and suppression modules through it: the builder is the one module importing them all, so the DSL's
    # modules form no import cycle (tests/unit/test_architecture.py).
    def _ktable(self, name, key_serde, value_serde, source_topics, queryable_name, supplier):
        return KTable(self, name, key_serde, value_serde, source_topics, queryable_name, supplier)

    def _kgrouped_stream(self, name, source_topics, grouped, repartition_required):
        return KGroupedStream(self, name, source_topics, grouped, repartition_required)

    def _kgrouped_table(self, name, source_topics, grouped):
        return KGroupedTable(self, name, source_topics, grouped)

    @staticmethod
    def _joins():
        from kbroker.streams.dsl import joins
        return joins

    @staticmethod
    def _windowed():
        from kbroker.streams.dsl import windowed
        return windowed

    @staticmethod
    def _suppress():
        from kbroker.streams.dsl import suppress
        return suppress

    # ------------------------------------------------------------------------------------------ public API
    def stream(self, topics, consumed=None):
        """A KStream over one topic, a list of topics, or a compiled regex (pattern subscription)."""
        consumed = _consumed(consumed)
        name = self.name_or_generate(consumed.name, SOURCE_NAME)
        if isinstance(topics, re.Pattern):
            self._topology.add_source(name, pattern=topics, **_source_kwargs(consumed))
            source_topics = set()
        else:
            topic_list = [topics] if isinstance(topics, str) else list(topics)
            if not topic_list:
                raise TopologyException("You must provide at least one topic")
            self._topology.add_source(name, *topic_list, **_source_kwargs(consumed))
            source_topics = set(topic_list)
        return KStream(self, name, consumed.key_serde, consumed.value_serde, source_topics)

    def table(self, topic, consumed=None, materialized=None):
        """A KTable over a topic: every record is an update of its key (null value: delete; null key: dropped).
        Materialized in a store only when ``materialized`` names it, or a downstream operator needs it."""
        consumed = _consumed(consumed)
        m = materialized if materialized is not None else Materialized()
        store_name = m.store_name if m.store_name is not None else self.new_store_name(topic + "-")
        key_serde = m.key_serde if m.key_serde is not None else consumed.key_serde
        value_serde = m.value_serde if m.value_serde is not None else consumed.value_serde
        source_name = self.suffix_or_generate(consumed.name, TABLE_SOURCE_SUFFIX, SOURCE_NAME)
        table_name = self.name_or_generate(consumed.name, TABLE_SOURCE_NAME)
        self._topology.add_source(source_name, topic, **_source_kwargs(consumed))

        def add_store():
            self._topology.add_state_store(self.kv_store_builder(store_name, m, key_serde, value_serde),
                                           table_name)

        supplier = KTableSourceSupplier(store_name, m.store_name, on_materialize=add_store)
        self._topology.add_processor(table_name, supplier, source_name)
        if m.store_name is not None:
            add_store()
        return KTable(self, table_name, key_serde, value_serde, {topic}, m.store_name, supplier)

    def global_table(self, topic, consumed=None, materialized=None):
        raise NotImplementedError("GlobalKTable is not supported by kbroker.streams (use table() on a "
                                  "co-partitioned topic)")

    def add_state_store(self, store_builder):
        """A store for ``KStream.process(supplier, store_name)`` / user processors (Kafka's addStateStore)."""
        self._topology.add_state_store(store_builder)
        return self

    @staticmethod
    def _kv_supplier(store_name, kind):
        return (Stores.in_memory_key_value_store(store_name) if kind == StoreType.IN_MEMORY
                else Stores.persistent_timestamped_key_value_store(store_name))

    def build(self, config=None):
        """The Topology (the same object on every call, as Kafka's). A "default.dsl.store" in ``config``
        re-types the stores whose Materialized named no type or supplier."""
        if config:
            self._check_optimization(config)
            if "default.dsl.store" in config:
                kind = self._check_store_type(config)
                if kind != self._store_type:
                    self._store_type = kind
                    for name, store_builder in self._default_typed:
                        store_builder.supplier = self._kv_supplier(name, kind)
        self._built = True
        return self._topology

    @staticmethod
    def _check_store_type(config):
        store_type = config.get("default.dsl.store", StoreType.ROCKS_DB)
        if store_type not in (StoreType.ROCKS_DB, StoreType.IN_MEMORY):
            raise ValueError("Invalid value %r for configuration default.dsl.store: String must be one of: "
                             "rocksDB, in_memory" % (store_type,))
        return store_type

    @staticmethod
    def _check_optimization(config):
        value = config.get(_OPTIMIZATION_KEY, "none")
        if value not in ("none", None):
            # Accepting "all" without applying its rewrites would change internal topic names silently later.
            raise ValueError("topology.optimization=%r is not supported by kbroker.streams (only 'none', Kafka's "
                             "default)" % (value,))


def _name_of(named):
    if named is None:
        return None
    if isinstance(named, str):
        return validate_name(named)
    if isinstance(named, Named):
        return named.name
    return getattr(named, "name", None)


def _consumed(consumed):
    if consumed is None:
        return Consumed()
    if not isinstance(consumed, Consumed):
        raise TypeError("consumed must be a Consumed, got %r" % (consumed,))
    return consumed


def _source_kwargs(consumed):
    return dict(key_deserializer=consumed.key_serde, value_deserializer=consumed.value_serde,
                timestamp_extractor=consumed.timestamp_extractor, offset_reset=consumed.offset_reset)
