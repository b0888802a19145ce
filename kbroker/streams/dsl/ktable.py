"""KTable: a changelog stream, the latest value per key (Kafka's KTable / KTableImpl).

Its processors forward ``Change(new_value, old_value)`` (nodes.py); ``to_stream()`` turns that back into plain
values (a delete becomes a record with a None value, a tombstone). Old values are sent only when a downstream
operator needs them (``group_by``'s subtractors, table-table joins): ``_enable_sending_old_values`` walks up the
chain as Kafka's does, materializing a source table if it has to.

``filter``/``map_values`` with a named ``Materialized`` keep their own store (queryable); without, they compute
from their parent's values. A source table (builder.table / KStream.to_table) is materialized when named, or when
a downstream needs its values (a join's value getter, old values).
"""
from kbroker.streams.dsl import nodes
from kbroker.streams.dsl.kstream import KStream, named_and_materialized, require
from kbroker.streams.dsl.nodes import Supplier
from kbroker.streams.dsl.options import Grouped

__all__ = ["KTable"]

FILTER_NAME = "KTABLE-FILTER-"
MAPVALUES_NAME = "KTABLE-MAPVALUES-"
TOSTREAM_NAME = "KTABLE-TOSTREAM-"
SELECT_NAME = "KTABLE-SELECT-"


class KTable:
    _is_ktable = True       # KStream's joins tell tables apart without importing this module

    def __init__(self, builder, name, key_serde, value_serde, source_topics, queryable_name, supplier):
        self._builder = builder
        self._name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._source_topics = set(source_topics)
        self._queryable_name = queryable_name
        self._supplier = supplier
        self._send_old_values = False

    def __repr__(self):
        return "KTable(%s)" % self._name

    @property
    def name(self):
        return self._name

    def queryable_store_name(self):
        """The store name when the table is materialized under a user's name (Kafka's queryableStoreName), else
        None."""
        return self._queryable_name

    # ------------------------------------------------------------------------------------------ internals
    def _enable_sending_old_values(self, force_materialization):
        """Kafka's KTableImpl.enableSendingOldValues: True when this table now forwards old values."""
        if not self._send_old_values:
            sup = self._supplier
            if isinstance(sup, nodes.KTableSourceSupplier):
                if not sup.enable_sending_old_values(force_materialization):
                    return False
            elif hasattr(sup, "enable_sending_old_values"):
                if not sup.enable_sending_old_values(force_materialization):
                    return False
            self._send_old_values = True
        return True

    def _value_getter_supplier(self):
        """What a join reads this table's current values with (Kafka's valueGetterSupplier): a source table is
        materialized on demand."""
        sup = self._supplier
        if isinstance(sup, nodes.KTableSourceSupplier):
            sup.materialize()
            return nodes.MaterializedValueGetterSupplier(sup.queryable_name)
        return sup.view()

    def _materialize(self, prefix, named, materialized):
        """(name, queryable store name, key serde, value serde, store-adder) for filter/map_values, burning the
        store index BEFORE the processor's as Kafka does."""
        b = self._builder
        queryable = None
        if materialized is not None:
            if materialized.store_name is None:
                b.new_store_name(prefix)
            queryable = materialized.store_name
        name = b.name_or_generate(named, prefix)
        return name, queryable

    def _stateful_child(self, prefix, named, materialized, supplier_factory, value_serde):
        named, materialized = named_and_materialized(named, materialized)
        b = self._builder
        name, queryable = self._materialize(prefix, named, materialized)
        key_serde = self._key_serde
        if materialized is not None:
            if materialized.key_serde is not None:
                key_serde = materialized.key_serde
            if materialized.value_serde is not None:
                value_serde = materialized.value_serde
        supplier = supplier_factory(queryable)
        b._topology.add_processor(name, supplier, self._name)
        if queryable is not None:
            b._topology.add_state_store(b.kv_store_builder(queryable, materialized, key_serde, value_serde), name)
        return KTable(b, name, key_serde, value_serde, self._source_topics, queryable, supplier)

    # ------------------------------------------------------------------------------------------ operators
    def filter(self, predicate, named=None, materialized=None):
        """Keys whose value passes ``predicate(key, value)``; a key that stops passing gets a delete."""
        require(predicate, "predicate")
        return self._stateful_child(
            FILTER_NAME, named, materialized,
            lambda q: nodes.KTableFilterSupplier(self, predicate, False, q), self._value_serde)

    def filter_not(self, predicate, named=None, materialized=None):
        require(predicate, "predicate")
        return self._stateful_child(
            FILTER_NAME, named, materialized,
            lambda q: nodes.KTableFilterSupplier(self, predicate, True, q), self._value_serde)

    def map_values(self, mapper, named=None, materialized=None, with_key=False):
        """``mapper(value)`` (``with_key=True``: ``mapper(key, value)``) of every non-deleted value."""
        require(mapper, "mapper")
        fn = nodes._with_key(mapper, with_key)
        return self._stateful_child(
            MAPVALUES_NAME, named, materialized,
            lambda q: nodes.KTableMapValuesSupplier(self, fn, q), None)

    def to_stream(self, mapper=None, named=None):
        """The table's updates as a stream (a delete: value None); ``mapper(key, value)`` selects a new key."""
        name = self._builder.name_or_generate(named, TOSTREAM_NAME)
        self._builder._topology.add_processor(name, Supplier(nodes.KTableToStream), self._name)
        stream = KStream(self._builder, name, self._key_serde, self._value_serde, self._source_topics, False)
        return stream.select_key(mapper) if mapper is not None else stream

    def group_by(self, selector, grouped=None):
        """Re-group by ``selector(key, value) -> KeyValue | (key, value)``: the KGroupedTable's aggregations add
        the new value and subtract the old one (old values are sent from here on)."""
        require(selector, "selector")
        grouped = grouped if grouped is not None else Grouped()
        name = self._builder.name_or_generate(grouped.name, SELECT_NAME)
        self._builder._topology.add_processor(name, nodes.KTableRepartitionMapSupplier(selector), self._name)
        self._enable_sending_old_values(True)
        return self._builder._kgrouped_table(name, self._source_topics, grouped)

    # ------------------------------------------------------------------------------------------ S4 delegation
    def join(self, other, joiner, named=None, materialized=None, with_key=False):
        return self._join(other, joiner, "inner", named, materialized, with_key)

    def left_join(self, other, joiner, named=None, materialized=None, with_key=False):
        return self._join(other, joiner, "left", named, materialized, with_key)

    def outer_join(self, other, joiner, named=None, materialized=None, with_key=False):
        return self._join(other, joiner, "outer", named, materialized, with_key)

    def _join(self, other, joiner, kind, named, materialized, with_key):
        named, materialized = named_and_materialized(named, materialized)
        require(other, "other")
        require(joiner, "joiner")
        joins = self._builder._joins()
        fn = joiner if with_key else (lambda _k, a, b: joiner(a, b))
        return joins.table_table_join(self, other, fn, kind, named, materialized)

    def suppress(self, suppressed):
        return self._builder._suppress().suppress_table(self, suppressed)
