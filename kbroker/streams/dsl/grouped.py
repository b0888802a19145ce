"""KGroupedStream and KGroupedTable: non-windowed aggregations (Kafka's KGroupedStreamImpl +
GroupedStreamAggregateBuilder, KGroupedTableImpl).

Store naming as Kafka's: a Materialized with a name gives the store (and changelog "<app>-<name>-changelog");
otherwise "KSTREAM-AGGREGATE-STATE-STORE-<index>" (stream count/aggregate), "KSTREAM-REDUCE-STATE-STORE-<index>"
(stream reduce), "KTABLE-AGGREGATE-STATE-STORE-<index>" (every table aggregation). The store name is taken
before the processor's name, so ``stream.group_by(f).count()`` on a fresh builder gives store index 3,
aggregate 4, repartition sink/filter/source 5/6/7 and topic "KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition".

Repartition topics: a KGroupedStream whose key may have changed writes "<Grouped name or store name>-repartition"
before its aggregation (one per aggregation unless the Grouped is named: then the aggregations share it). A
KGroupedTable always repartitions ("<Grouped name or store name>-repartition"), carrying Change values in Kafka's
ChangedSerializer format so the aggregation can subtract the old value and add the new one.
"""
from kbroker.streams.dsl import nodes
from kbroker.streams.dsl.kstream import (SINK_NAME, SOURCE_NAME, create_repartitioned_source, named_and_materialized,
                                         require)
from kbroker.streams.dsl.nodes import ChangedSerde
from kbroker.streams.dsl.options import Materialized
from kbroker.streams.serdes import Serdes

__all__ = ["KGroupedStream", "KGroupedTable"]

STREAM_AGGREGATE_NAME = "KSTREAM-AGGREGATE-"
STREAM_REDUCE_NAME = "KSTREAM-REDUCE-"
TABLE_AGGREGATE_NAME = "KTABLE-AGGREGATE-"
TABLE_REDUCE_NAME = "KTABLE-REDUCE-"


def _count_init():
    return 0


def _count_add(_key, _value, agg):
    return agg + 1


def _count_sub(_key, _value, agg):
    return agg - 1


class KGroupedStream:
    def __init__(self, builder, name, source_topics, grouped, repartition_required):
        self._builder = builder
        self._name = name
        self._source_topics = set(source_topics)
        self._grouped = grouped
        self._key_serde = grouped.key_serde
        self._value_serde = grouped.value_serde
        self._repartition_required = repartition_required
        self._repartition = None        # (source name, topic) when the user named the Grouped (shared)

    def __repr__(self):
        return "KGroupedStream(%s)" % self._name

    def _materialized(self, materialized, prefix):
        """Kafka's MaterializedInternal(materialized, builder, prefix): (Materialized, store name, queryable)."""
        m = materialized if materialized is not None else Materialized()
        if m.store_name is not None:
            return m, m.store_name, m.store_name
        return m, self._builder.new_store_name(prefix), None

    def _build_aggregate(self, func_name, store_builder, supplier, key_serde, value_serde, queryable_name):
        """Kafka's GroupedStreamAggregateBuilder.build (see the seam note /work/helpers/s3-s4-seam.md)."""
        b = self._builder
        parent, topics = self._name, self._source_topics
        if self._repartition_required:
            prefix = self._grouped.name if self._grouped.name is not None else store_builder.name()
            if self._repartition is not None and self._grouped.name is not None:
                for p in (SINK_NAME, "KSTREAM-FILTER-", SOURCE_NAME):
                    b.new_processor_name(p)     # Kafka burns the indexes even when reusing the node
                parent, topic = self._repartition
            else:
                parent, topic = create_repartitioned_source(b, self._name, prefix, self._key_serde,
                                                            self._value_serde)
                self._repartition = (parent, topic)
            topics = {topic}
        b._topology.add_processor(func_name, supplier, parent)
        b._topology.add_state_store(store_builder, func_name)
        return b._ktable(func_name, key_serde, value_serde, topics, queryable_name, supplier)

    def _do_aggregate(self, supplier_factory, named, prefix, m, store_name, queryable, value_serde):
        b = self._builder
        key_serde = m.key_serde if m.key_serde is not None else self._key_serde
        value_serde = m.value_serde if m.value_serde is not None else value_serde
        func_name = b.name_or_generate(named, prefix)
        store_builder = b.kv_store_builder(store_name, m, key_serde, value_serde)
        return self._build_aggregate(func_name, store_builder, supplier_factory(store_name), key_serde,
                                     value_serde, queryable)

    def count(self, named=None, materialized=None):
        """The number of records per key (records with a null key or value are dropped); Long values."""
        named, materialized = named_and_materialized(named, materialized)
        if materialized is not None and materialized.store_name is None:
            self._builder.new_store_name(STREAM_AGGREGATE_NAME)   # Kafka burns one more index here
        m, store, queryable = self._materialized(materialized, STREAM_AGGREGATE_NAME)
        return self._do_aggregate(lambda s: nodes.KStreamAggregateSupplier(s, _count_init, _count_add), named,
                                  STREAM_AGGREGATE_NAME, m, store, queryable, Serdes.Long())

    def reduce(self, reducer, named=None, materialized=None):
        """``reducer(aggregate, value)`` per key; the first value is the initial aggregate."""
        require(reducer, "reducer")
        named, materialized = named_and_materialized(named, materialized)
        m, store, queryable = self._materialized(materialized, STREAM_REDUCE_NAME)
        return self._do_aggregate(lambda s: nodes.KStreamAggregateSupplier(s, reducer=reducer), named,
                                  STREAM_REDUCE_NAME, m, store, queryable, self._value_serde)

    def aggregate(self, initializer, aggregator, named=None, materialized=None):
        """``aggregator(key, value, aggregate)`` per key, starting from ``initializer()``."""
        require(initializer, "initializer")
        require(aggregator, "aggregator")
        named, materialized = named_and_materialized(named, materialized)
        m, store, queryable = self._materialized(materialized, STREAM_AGGREGATE_NAME)
        return self._do_aggregate(lambda s: nodes.KStreamAggregateSupplier(s, initializer, aggregator), named,
                                  STREAM_AGGREGATE_NAME, m, store, queryable, None)

    def windowed_by(self, windows):
        """TimeWindows / SlidingWindows / SessionWindows -> a windowed grouped stream (S4's windowed.py)."""
        return self._builder._windowed().windowed_by(self, windows)


class KGroupedTable:
    def __init__(self, builder, name, source_topics, grouped):
        self._builder = builder
        self._name = name
        self._source_topics = set(source_topics)
        self._grouped = grouped
        self._key_serde = grouped.key_serde
        self._value_serde = grouped.value_serde
        self._repartition_source = None

    def __repr__(self):
        return "KGroupedTable(%s)" % self._name

    def _do_aggregate(self, supplier_factory, named, func_prefix, materialized, value_serde):
        named, materialized = named_and_materialized(named, materialized)
        b = self._builder
        m = materialized if materialized is not None else Materialized()
        store_name = m.store_name if m.store_name is not None else b.new_store_name(TABLE_AGGREGATE_NAME)
        key_serde = m.key_serde if m.key_serde is not None else self._key_serde
        value_serde = m.value_serde if m.value_serde is not None else value_serde
        sink_name = b.suffix_or_generate(named, "-sink", SINK_NAME)
        source_name = b.suffix_or_generate(named, "-source", SOURCE_NAME)
        func_name = b.name_or_generate(named, func_prefix)
        topic = (self._grouped.name if self._grouped.name is not None else store_name) + "-repartition"
        t = b._topology
        if self._repartition_source is None or self._grouped.name is None:
            changed = ChangedSerde(self._value_serde)
            t.add_internal_topic(topic, "repartition")
            t.add_sink(sink_name, topic, self._name, key_serializer=self._key_serde, value_serializer=changed)
            t.add_source(source_name, topic, key_deserializer=self._key_serde, value_deserializer=changed)
            self._repartition_source = source_name
        supplier = supplier_factory(store_name)
        t.add_processor(func_name, supplier, self._repartition_source)
        t.add_state_store(b.kv_store_builder(store_name, m, key_serde, value_serde), func_name)
        return b._ktable(func_name, key_serde, value_serde, {topic}, m.store_name, supplier)

    def count(self, named=None, materialized=None):
        return self._do_aggregate(
            lambda s: nodes.KTableAggregateSupplier(s, _count_init, _count_add, _count_sub), named,
            TABLE_AGGREGATE_NAME, materialized, Serdes.Long())

    def reduce(self, adder, subtractor, named=None, materialized=None):
        """``adder(aggregate, new value)`` and ``subtractor(aggregate, old value)``."""
        require(adder, "adder")
        require(subtractor, "subtractor")
        return self._do_aggregate(
            lambda s: nodes.KTableAggregateSupplier(s, None, adder, subtractor, reduce=True), named,
            TABLE_REDUCE_NAME, materialized, self._value_serde)

    def aggregate(self, initializer, adder, subtractor, named=None, materialized=None):
        """``adder(key, new value, aggregate)`` / ``subtractor(key, old value, aggregate)`` from
        ``initializer()``."""
        require(initializer, "initializer")
        require(adder, "adder")
        require(subtractor, "subtractor")
        return self._do_aggregate(
            lambda s: nodes.KTableAggregateSupplier(s, initializer, adder, subtractor), named,
            TABLE_AGGREGATE_NAME, materialized, None)
