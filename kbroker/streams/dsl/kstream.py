"""KStream: a record stream (Kafka's KStream / KStreamImpl).

Every operator adds a node to the builder's topology under Kafka's generated name (or the user's ``named``) and
returns a new KStream whose ``_name`` is that node. Serdes travel with the stream as far as Kafka keeps them
(a key-changing operator drops the key serde, a value-changing one the value serde); None falls back to the
config's default serdes at run time.

Repartitioning: ``map``, ``flat_map``, ``select_key``, ``process`` (and ``group_by``) may change keys, so the
stream is marked "repartition required"; the next key-based stateful operator (aggregation, join, ``to_table``)
first writes the stream to an internal topic "<application.id>-<name>-repartition" and reads it back, so records
with equal keys meet in one task. ``<name>`` is the user's Grouped/Repartitioned/Joined name, else the generated
store or processor name (Kafka's: "KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition").
"""
import re

from kbroker.streams.dsl import nodes
from kbroker.streams.dsl.nodes import Supplier
from kbroker.streams.dsl.options import (Branched, Consumed, Grouped, Materialized, Named, Printed, Produced,
                                         Repartitioned, validate_name)
from kbroker.streams.errors import TopologyException

__all__ = ["KStream", "BranchedKStream"]

FILTER_NAME = "KSTREAM-FILTER-"
MAP_NAME = "KSTREAM-MAP-"
MAPVALUES_NAME = "KSTREAM-MAPVALUES-"
FLATMAP_NAME = "KSTREAM-FLATMAP-"
FLATMAPVALUES_NAME = "KSTREAM-FLATMAPVALUES-"
KEY_SELECT_NAME = "KSTREAM-KEY-SELECT-"
PEEK_NAME = "KSTREAM-PEEK-"
FOREACH_NAME = "KSTREAM-FOREACH-"
PRINTING_NAME = "KSTREAM-PRINTER-"
BRANCH_NAME = "KSTREAM-BRANCH-"
BRANCHCHILD_NAME = "KSTREAM-BRANCHCHILD-"
MERGE_NAME = "KSTREAM-MERGE-"
SINK_NAME = "KSTREAM-SINK-"
SOURCE_NAME = "KSTREAM-SOURCE-"
REPARTITION_NAME = "KSTREAM-REPARTITION-"
PROCESSOR_NAME = "KSTREAM-PROCESSOR-"
PROCESSVALUES_NAME = "KSTREAM-PROCESSVALUES-"
TO_KTABLE_NAME = "KSTREAM-TOTABLE-"
REPARTITION_TOPIC_SUFFIX = "-repartition"

_GENERATED = re.compile(r"KSTREAM.*-[0-9]{10}")


def require(value, what):
    """Kafka's Objects.requireNonNull(x, "<what> can't be null") at DSL-build time (a TypeError here)."""
    if value is None:
        raise TypeError("%s can't be null" % what)
    return value


def named_and_materialized(named, materialized):
    """Kafka's overloads take a Materialized where a Named may stand (``count(Materialized.as_("x"))``): a
    Materialized passed positionally as ``named`` is taken as the Materialized."""
    if isinstance(named, Materialized):
        if materialized is not None:
            raise TypeError("two Materialized given")
        return None, named
    return named, materialized


def _always_true(_k, _v):
    return True


def create_repartitioned_source(builder, parent_name, prefix, key_serde, value_serde, partitioner=None,
                                partitions=None):
    """Kafka's KStreamImpl.createRepartitionedSource + the repartition node's writeToTopology: a pass-through
    processor, a sink to "<prefix>-repartition" and a source reading it back. Three indexes are burned (sink,
    filter, source, in that order); a generated prefix gets the generated node names, a user's name gets
    "<topic>-sink" / "<topic>-filter" / "<topic>-source". Returns (source node name, topic suffix)."""
    topic = prefix if prefix.endswith(REPARTITION_TOPIC_SUFFIX) else prefix + REPARTITION_TOPIC_SUFFIX
    gen_sink = builder.new_processor_name(SINK_NAME)
    gen_filter = builder.new_processor_name(FILTER_NAME)
    gen_source = builder.new_processor_name(SOURCE_NAME)
    if _GENERATED.fullmatch(prefix):
        sink, filt, source = gen_sink, gen_filter, gen_source
    else:
        sink, filt, source = topic + "-sink", topic + "-filter", topic + "-source"
    t = builder._topology
    t.add_processor(filt, Supplier(nodes.KStreamFilter, _always_true, False), parent_name)
    t.add_internal_topic(topic, "repartition", partitions)
    t.add_sink(sink, topic, filt, key_serializer=key_serde, value_serializer=value_serde, partitioner=partitioner)
    t.add_source(source, topic, key_deserializer=key_serde, value_deserializer=value_serde)
    return source, topic


def _joiner(fn, with_key):
    return fn if with_key else (lambda _k, a, b: fn(a, b))


class KStream:
    """See the module docstring. Methods mirror Kafka's in snake_case; ``named`` is a str or Named."""

    def __init__(self, builder, name, key_serde, value_serde, source_topics, repartition_required=False):
        self._builder = builder
        self._name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._source_topics = set(source_topics)
        self._repartition_required = repartition_required
        self._repartition_cache = None      # (name, KStream) of the last repartition for a join

    def __repr__(self):
        return "KStream(%s)" % self._name

    @property
    def name(self):
        return self._name

    # ------------------------------------------------------------------------------------------ internals
    def _add(self, prefix, named, supplier, parents=None):
        name = self._builder.name_or_generate(named, prefix)
        self._builder._topology.add_processor(name, supplier, *(parents or [self._name]))
        return name

    def _add_unburned(self, prefix, named, supplier):
        """process()/process_values(): Kafka takes a user's name as is, without burning an index."""
        name = named.name if isinstance(named, Named) else validate_name(named)
        if name is None:
            name = self._builder.new_processor_name(prefix)
        self._builder._topology.add_processor(name, supplier, self._name)
        return name

    def _derive(self, name, key_serde, value_serde, repartition_required=None):
        return KStream(self._builder, name, key_serde, value_serde, self._source_topics,
                       self._repartition_required if repartition_required is None else repartition_required)

    def _repartition_for_join(self, prefix, key_serde=None, value_serde=None):
        """Kafka's repartitionForJoin: this stream through "<prefix>-repartition"; reused when the same prefix
        is asked again (a stream joined twice under one name)."""
        key_serde = key_serde if key_serde is not None else self._key_serde
        value_serde = value_serde if value_serde is not None else self._value_serde
        if self._repartition_cache is not None and self._repartition_cache[0] == prefix:
            # Kafka still burns the three indexes (createRepartitionedSource is called every time)
            for p in (SINK_NAME, FILTER_NAME, SOURCE_NAME):
                self._builder.new_processor_name(p)
            return self._repartition_cache[1]
        source, topic = create_repartitioned_source(self._builder, self._name, prefix, key_serde, value_serde)
        stream = KStream(self._builder, source, key_serde, value_serde, {topic}, False)
        self._repartition_cache = (prefix, stream)
        return stream

    # ------------------------------------------------------------------------------------------ stateless
    def filter(self, predicate, named=None):
        """Records for which ``predicate(key, value)`` is true."""
        require(predicate, "predicate")
        return self._derive(self._add(FILTER_NAME, named, Supplier(nodes.KStreamFilter, predicate, False)),
                            self._key_serde, self._value_serde)

    def filter_not(self, predicate, named=None):
        require(predicate, "predicate")
        return self._derive(self._add(FILTER_NAME, named, Supplier(nodes.KStreamFilter, predicate, True)),
                            self._key_serde, self._value_serde)

    def select_key(self, mapper, named=None):
        """New key ``mapper(key, value)``; marks the stream for repartitioning."""
        require(mapper, "mapper")
        name = self._add(KEY_SELECT_NAME, named,
                         Supplier(nodes.KStreamMap, lambda k, v: (mapper(k, v), v)))
        return self._derive(name, None, self._value_serde, True)

    def map(self, mapper, named=None):
        """``mapper(key, value) -> KeyValue | (key, value)``; marks the stream for repartitioning."""
        require(mapper, "mapper")
        name = self._add(MAP_NAME, named, Supplier(nodes.KStreamMap, mapper))
        return self._derive(name, None, None, True)

    def map_values(self, mapper, named=None, with_key=False):
        """``mapper(value)`` (or ``mapper(key, value)`` with ``with_key=True``, Kafka's ValueMapperWithKey)."""
        require(mapper, "mapper")
        name = self._add(MAPVALUES_NAME, named,
                         Supplier(nodes.KStreamMapValues, nodes._with_key(mapper, with_key)))
        return self._derive(name, self._key_serde, None)

    def map_values_with_key(self, mapper, named=None):
        return self.map_values(mapper, named, with_key=True)

    def flat_map(self, mapper, named=None):
        """``mapper(key, value) -> iterable of KeyValue``; marks the stream for repartitioning."""
        require(mapper, "mapper")
        name = self._add(FLATMAP_NAME, named, Supplier(nodes.KStreamFlatMap, mapper))
        return self._derive(name, None, None, True)

    def flat_map_values(self, mapper, named=None, with_key=False):
        """``mapper(value) -> iterable of values`` (``with_key=True``: ``mapper(key, value)``)."""
        require(mapper, "mapper")
        name = self._add(FLATMAPVALUES_NAME, named,
                         Supplier(nodes.KStreamFlatMapValues, nodes._with_key(mapper, with_key)))
        return self._derive(name, self._key_serde, None)

    def flat_map_values_with_key(self, mapper, named=None):
        return self.flat_map_values(mapper, named, with_key=True)

    def peek(self, action, named=None):
        """``action(key, value)`` for each record; the records pass on unchanged."""
        require(action, "action")
        return self._derive(self._add(PEEK_NAME, named, Supplier(nodes.KStreamPeek, action, True)),
                            self._key_serde, self._value_serde)

    def foreach(self, action, named=None):
        """Terminal: ``action(key, value)`` for each record."""
        require(action, "action")
        self._add(FOREACH_NAME, named, Supplier(nodes.KStreamPeek, action, False))

    def print(self, printed=None):
        """Terminal: one line per record, "[label]: key, value" (label: this stream's node name by default)."""
        printed = printed if printed is not None else Printed.to_sys_out()
        self._add(PRINTING_NAME, printed.name, Supplier(nodes.KStreamPrint, printed, self._name))

    def split(self, named=None):
        """Kafka's split(): ``.branch(predicate, Branched.as_("x"))...default_branch()`` -> dict name -> KStream;
        branch names are the split's name (default "KSTREAM-BRANCH-<index>") + the branch name or its number
        (1, 2, ...; the default branch "0")."""
        return BranchedKStream(self, named)

    def branch(self, *predicates, named=None):
        """Kafka's deprecated KStream.branch: a list of streams, the i-th gets the records whose first matching
        predicate is the i-th (others are dropped)."""
        if not predicates:
            raise ValueError("branch() requires at least one predicate")
        for p in predicates:
            require(p, "predicate")
        b = self._builder
        branch_name = b.name_or_generate(named, BRANCH_NAME)
        child_names = [b.suffix_or_generate(named, "-predicate-%d" % i, BRANCHCHILD_NAME)
                       for i in range(len(predicates))]
        t = b._topology
        t.add_processor(branch_name, Supplier(nodes.KStreamBranch, list(predicates), child_names), self._name)
        out = []
        for child in child_names:
            t.add_processor(child, Supplier(nodes.PassThrough), branch_name)
            out.append(self._derive(child, self._key_serde, self._value_serde))
        return out

    def merge(self, other, named=None):
        """Records of both streams (no ordering guarantee between them, as Kafka's); serdes are dropped."""
        if not isinstance(other, KStream) or other._builder is not self._builder:
            raise TopologyException("merge() needs a KStream of the same StreamsBuilder")
        name = self._builder.name_or_generate(named, MERGE_NAME)
        self._builder._topology.add_processor(name, Supplier(nodes.PassThrough), self._name, other._name)
        return KStream(self._builder, name, None, None, self._source_topics | other._source_topics,
                       self._repartition_required or other._repartition_required)

    # ------------------------------------------------------------------------------------------ topics
    def to(self, topic, produced=None):
        """Terminal: write to ``topic`` (a name, or a TopicNameExtractor ``fn(key, value, record_context)``)."""
        require(topic, "topic")
        produced = produced if produced is not None else Produced()
        name = self._builder.name_or_generate(produced.name, SINK_NAME)
        self._builder._topology.add_sink(
            name, topic, self._name,
            key_serializer=produced.key_serde if produced.key_serde is not None else self._key_serde,
            value_serializer=produced.value_serde if produced.value_serde is not None else self._value_serde,
            partitioner=produced.partitioner)

    def through(self, topic, produced=None):
        """Kafka's removed ``through``: ``to(topic)`` then ``builder.stream(topic)`` with the same serdes (the
        topic is a user topic, created by the user). Prefer ``repartition()``."""
        produced = produced if produced is not None else Produced()
        key_serde = produced.key_serde if produced.key_serde is not None else self._key_serde
        value_serde = produced.value_serde if produced.value_serde is not None else self._value_serde
        self.to(topic, produced)
        return self._builder.stream(topic, Consumed.with_(key_serde, value_serde))

    def repartition(self, repartitioned=None):
        """Write through an internal topic "<app>-<name>-repartition" (name: Repartitioned's, else
        "KSTREAM-REPARTITION-<index>"), with its partition count and partitioner if given."""
        r = repartitioned if repartitioned is not None else Repartitioned()
        name = r.name if r.name is not None else self._builder.new_processor_name(REPARTITION_NAME)
        key_serde = r.key_serde if r.key_serde is not None else self._key_serde
        value_serde = r.value_serde if r.value_serde is not None else self._value_serde
        source, topic = create_repartitioned_source(self._builder, self._name, name, key_serde, value_serde,
                                                    r.partitioner, r.number_of_partitions)
        return KStream(self._builder, source, key_serde, value_serde, {topic}, False)

    # ------------------------------------------------------------------------------------------ processors
    def process(self, supplier, *store_names, named=None):
        """A user Processor (``supplier()`` -> Processor) connected to ``store_names`` (added with
        builder.add_state_store). The result may have new keys: marked for repartitioning (Kafka 3.3+)."""
        require(supplier, "processorSupplier")
        name = self._add_unburned(PROCESSOR_NAME, named, supplier)
        if store_names:
            self._builder._topology.connect_processor_and_state_stores(name, *store_names)
        return self._derive(name, None, None, True)

    def process_values(self, supplier, *store_names, named=None):
        """Like ``process`` for a processor that keeps keys (Kafka's FixedKeyProcessor): no repartitioning."""
        require(supplier, "processorSupplier")
        name = self._add_unburned(PROCESSVALUES_NAME, named, supplier)
        if store_names:
            self._builder._topology.connect_processor_and_state_stores(name, *store_names)
        return self._derive(name, self._key_serde, None)

    # ------------------------------------------------------------------------------------------ tables, groups
    def to_table(self, named=None, materialized=None):
        """A KTable of this stream's records (each one an update of its key)."""
        named, materialized = named_and_materialized(named, materialized)
        b = self._builder
        name = b.name_or_generate(named, TO_KTABLE_NAME)
        m = materialized if materialized is not None else Materialized()
        store_name = m.store_name if m.store_name is not None else b.new_store_name(TO_KTABLE_NAME)
        key_serde = m.key_serde if m.key_serde is not None else self._key_serde
        value_serde = m.value_serde if m.value_serde is not None else self._value_serde
        parent, topics = self._name, self._source_topics
        if self._repartition_required:
            parent, topic = create_repartitioned_source(b, self._name, name, key_serde, value_serde)
            topics = {topic}

        def add_store():
            b._topology.add_state_store(b.kv_store_builder(store_name, m, key_serde, value_serde), name)

        supplier = nodes.KTableSourceSupplier(store_name, m.store_name, on_materialize=add_store)
        b._topology.add_processor(name, supplier, parent)
        if m.store_name is not None:
            add_store()
        return b._ktable(name, key_serde, value_serde, topics, m.store_name, supplier)

    def group_by_key(self, grouped=None):
        """Group by the current key (repartitioned first if an upstream operator changed keys)."""
        if grouped is None:
            grouped = Grouped.with_(self._key_serde, self._value_serde)
        return self._builder._kgrouped_stream(self._name, self._source_topics, grouped, self._repartition_required)

    def group_by(self, selector, grouped=None):
        """Group by ``selector(key, value)``: a key-selecting node (named after Grouped's name when given) and a
        repartition topic before the aggregation."""
        require(selector, "keySelector")
        if grouped is None:
            grouped = Grouped.with_(None, self._value_serde)
        name = self._add(KEY_SELECT_NAME, grouped.name,
                         Supplier(nodes.KStreamMap, lambda k, v: (selector(k, v), v)))
        return self._builder._kgrouped_stream(name, self._source_topics, grouped, True)

    # ------------------------------------------------------------------------------------------ joins (S4)
    def join(self, other, joiner, windows=None, joined=None, with_key=False):
        """Inner join with a KStream (``windows``: JoinWindows; ``joined``: StreamJoined) or a KTable
        (``joined``: Joined). ``joiner(left, right)`` (``with_key=True``: ``joiner(key, left, right)``)."""
        return self._join(other, joiner, windows, joined, with_key, "inner")

    def left_join(self, other, joiner, windows=None, joined=None, with_key=False):
        return self._join(other, joiner, windows, joined, with_key, "left")

    def outer_join(self, other, joiner, windows=None, joined=None, with_key=False):
        if getattr(other, "_is_ktable", False):
            raise TopologyException("outer join of a KStream with a KTable does not exist (Kafka has none)")
        return self._join(other, joiner, windows, joined, with_key, "outer")

    def _join(self, other, joiner, windows, joined, with_key, kind):
        require(other, "otherStream")
        require(joiner, "joiner")
        joins = self._builder._joins()
        fn = _joiner(joiner, with_key)
        if getattr(other, "_is_ktable", False):
            return joins.stream_table_join(self, other, fn, joined, kind)
        if isinstance(other, KStream):
            if windows is None:
                raise TopologyException("a stream-stream join needs JoinWindows")
            return joins.stream_stream_join(self, other, fn, windows, joined, kind)
        raise TypeError("join() takes a KStream or a KTable, got %r" % (other,))


class BranchedKStream:
    """Kafka's BranchedKStream (KStream.split()). The splitter node is added at once; each ``branch`` adds a
    child; ``default_branch``/``no_default_branch`` return the dict of branch name -> KStream."""

    def __init__(self, stream, named):
        self._stream = stream
        b = stream._builder
        self._splitter = b.name_or_generate(named, BRANCH_NAME)
        self._predicates = []
        self._child_names = []
        self._outputs = {}
        b._topology.add_processor(self._splitter,
                                  Supplier(nodes.KStreamBranch, self._predicates, self._child_names),
                                  stream._name)

    def branch(self, predicate, branched=None):
        require(predicate, "predicate")
        self._predicates.append(predicate)
        self._create(branched, len(self._predicates))
        return self

    def default_branch(self, branched=None):
        self._create(branched, 0)
        return self._outputs

    def no_default_branch(self):
        return self._outputs

    def _create(self, branched, index):
        branched = branched if branched is not None else Branched()
        child = self._splitter + (branched.name if branched.name is not None else str(index))
        self._child_names.append(child)
        s = self._stream
        s._builder.new_processor_name(child)      # Kafka burns an index here (newProcessorName(branchChildName))
        s._builder._topology.add_processor(child, Supplier(nodes.PassThrough), self._splitter)
        branch = s._derive(child, s._key_serde, s._value_serde)
        if branched.chain_function is not None:
            result = branched.chain_function(branch)
            if result is not None:
                self._outputs[child] = result
        elif branched.chain_consumer is not None:
            branched.chain_consumer(branch)
        else:
            self._outputs[child] = branch
