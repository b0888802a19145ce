"""A processor topology (Kafka's Topology / InternalTopologyBuilder): sources, processors, sinks, state stores,
internal topics, and how they split into sub-topologies.

Nodes are added by name; a node's parents must exist first (a DAG by construction). Sources name topics (or a
regex ``pattern``); sinks name a topic or a TopicNameExtractor function ``(key, value, record_context) -> topic``.
Serdes on sources/sinks are Serde objects, objects with ``serialize``/``deserialize``, functions ``(topic, data)``,
or None for the app's ``default.key.serde`` / ``default.value.serde``.

Internal topics: ``add_internal_topic("x-repartition")`` registers a topic the app owns; sources and sinks name it
by that suffix and it becomes ``"<application.id>-x-repartition"`` at run time (``resolve_topic``). ``describe()``
shows the suffix, as Kafka's does.

Sub-topologies (Kafka's node groups) are the connected components of the graph where parent/child edges and
"uses the same state store" join nodes. Ids are given in Kafka's order (InternalTopologyBuilder.makeNodeGroups):
nodes in insertion order (a topological order), each new component met gets the next id, so upstream
sub-topologies come first. A task is (sub-topology id, partition).

Node names the DSL generates are Kafka's: ``next_name("KSTREAM-FILTER-")`` -> "KSTREAM-FILTER-0000000001" with
one counter per Topology (10 digits, from 0).
"""
import re
from typing import NamedTuple

from kbroker.streams.errors import TopologyException

__all__ = ["Topology", "TopologyDescription", "Subtopology", "StoreChangelogSpec", "InternalTopicSpec",
           "SourceNode", "ProcessorNode", "SinkNode"]


class SourceNode:
    kind = "source"

    def __init__(self, name, topics, pattern, key_deserializer, value_deserializer, timestamp_extractor,
                 offset_reset):
        self.name = name
        self.topics = list(topics)
        self.pattern = pattern
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self.timestamp_extractor = timestamp_extractor
        self.offset_reset = offset_reset
        self.parents = []
        self.children = []


class ProcessorNode:
    kind = "processor"

    def __init__(self, name, supplier, parents):
        self.name = name
        self.supplier = supplier
        self.parents = list(parents)
        self.children = []
        self.stores = []


class SinkNode:
    kind = "sink"

    def __init__(self, name, topic, key_serializer, value_serializer, partitioner, parents):
        self.name = name
        self.topic = topic                      # str, or a TopicNameExtractor function
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.partitioner = partitioner
        self.parents = list(parents)
        self.children = []


class InternalTopicSpec(NamedTuple):
    suffix: str
    kind: str                   # "repartition" | "changelog"
    partitions: int | None      # None: decided at start (repartition: max of the writing sub-topology's sources)


class StoreChangelogSpec(NamedTuple):
    store: str
    topic: str                  # "<application.id>-<store>-changelog"
    subtopology: int
    windowed: bool              # window/session stores: cleanup.policy compact,delete
    retention_ms: int | None
    config: dict                # the store builder's log_config() (topic configs)


class Subtopology(NamedTuple):
    id: int
    nodes: tuple                # node names in insertion order
    source_topics: frozenset    # every topic its sources read (repartition ones included)
    sink_topics: frozenset      # fixed sink topics (extractor sinks are not known in advance)
    stores: frozenset           # store names used by its processors
    repartition_sources: frozenset  # the subset of source_topics that are internal repartition topics
    source_patterns: tuple = ()     # compiled regexes of pattern sources


class Topology:
    """See the module docstring. Every ``add_*`` returns the topology (chaining, as Kafka's)."""

    def __init__(self):
        self._nodes = {}                 # name -> node, insertion order
        self._topic_to_source = {}       # topic (as given) -> source node name
        self._stores = {}                # store name -> StoreBuilder
        self._internal = {}              # suffix -> InternalTopicSpec
        self._copartition = []           # list of frozenset(topic names as given)
        self._counter = 0
        self._subtopologies = None       # cache, cleared on change

    # ------------------------------------------------------------------------------------------------ building
    def next_name(self, prefix):
        """``prefix`` + the next index of this topology, 10 digits (Kafka's InternalStreamsBuilder.newProcessorName
        / newStoreName counter, shared by node and store names)."""
        name = "%s%010d" % (prefix, self._counter)
        self._counter += 1
        return name

    def add_source(self, name, *topics, key_deserializer=None, value_deserializer=None, timestamp_extractor=None,
                   offset_reset=None, pattern=None):
        self._check_new(name, "Source")
        if pattern is None and not topics:
            raise TopologyException("You must provide at least one topic")
        if pattern is not None and topics:
            raise TopologyException("Source %s: give topics or a pattern, not both" % name)
        if isinstance(pattern, str):
            pattern = re.compile(pattern)
        if offset_reset not in (None, "earliest", "latest", "none"):
            raise TopologyException("Source %s: offset_reset must be 'earliest', 'latest' or 'none'" % name)
        patterns = [n.pattern for n in self._nodes.values() if n.kind == "source" and n.pattern is not None]
        for t in topics:
            if t in self._topic_to_source:
                raise TopologyException("Topic %s has already been registered by another source." % t)
            if any(p.fullmatch(t) for p in patterns):
                raise TopologyException("Topic %s matches a Pattern already registered by another source." % t)
        if pattern is not None and any(pattern.fullmatch(t) for t in self._topic_to_source):
            raise TopologyException("Pattern %s will match a topic that has already been registered by another "
                                    "source." % pattern.pattern)
        node = SourceNode(name, topics, pattern, key_deserializer, value_deserializer, timestamp_extractor,
                          offset_reset)
        for t in topics:
            self._topic_to_source[t] = name
        self._nodes[name] = node
        self._subtopologies = None
        return self

    def add_processor(self, name, supplier, *parent_names):
        self._check_new(name, "Processor")
        if not callable(supplier):
            raise TopologyException("Processor %s: the supplier must be a callable returning a Processor" % name)
        if not parent_names:
            raise TopologyException("Processor %s must have at least one parent" % name)
        self._check_parents(name, parent_names)
        node = ProcessorNode(name, supplier, parent_names)
        self._link(node, parent_names)
        # Kafka's ConnectedStoreProvider: a supplier with stores() brings its own StoreBuilders, added and
        # connected to this processor
        stores = getattr(supplier, "stores", None)
        for builder in (stores() if callable(stores) else None) or ():
            self.add_state_store(builder, name)
        return self

    def add_sink(self, name, topic_or_extractor, *parent_names, key_serializer=None, value_serializer=None,
                 partitioner=None):
        self._check_new(name, "Sink")
        if not parent_names:
            raise TopologyException("Sink %s must have at least one parent" % name)
        if not (isinstance(topic_or_extractor, str) and topic_or_extractor) and not callable(topic_or_extractor):
            raise TopologyException("Sink %s: topic must be a non-empty name or a TopicNameExtractor" % name)
        self._check_parents(name, parent_names, sink=True)
        node = SinkNode(name, topic_or_extractor, key_serializer, value_serializer, partitioner, parent_names)
        self._link(node, parent_names)
        return self

    def add_state_store(self, store_builder, *processor_names):
        name = store_builder.name()
        if self._stores.get(name, store_builder) is not store_builder:
            raise TopologyException("A different StateStore has already been added with the name %s" % name)
        for p in processor_names:
            self._processor(p)
        self._stores[name] = store_builder
        for p in processor_names:
            self._connect(p, name)
        self._subtopologies = None
        return self

    def connect_processor_and_state_stores(self, processor_name, *store_names):
        if not store_names:
            raise TopologyException("Must provide at least one state store name.")
        for s in store_names:
            if s not in self._stores:
                raise TopologyException("StateStore %s is not added yet." % s)
        self._processor(processor_name)
        for s in store_names:
            self._connect(processor_name, s)
        self._subtopologies = None
        return self

    def add_internal_topic(self, name_suffix, kind="repartition", partitions=None):
        """Register an internal topic; its full name is "<application.id>-<name_suffix>". Registering the same
        suffix again keeps one entry (a larger explicit partition count wins)."""
        if kind not in ("repartition", "changelog"):
            raise TopologyException("internal topic %s: kind must be 'repartition' or 'changelog'" % name_suffix)
        old = self._internal.get(name_suffix)
        if old is not None and old.partitions is not None and (partitions is None or old.partitions > partitions):
            partitions = old.partitions
        self._internal[name_suffix] = InternalTopicSpec(name_suffix, kind, partitions)
        self._subtopologies = None
        return self

    def copartition(self, *topic_names):
        """Declare that these topics (names as sources use them) must have equal partition counts (joins)."""
        self._copartition.append(frozenset(topic_names))
        return self

    # -------------------------------------------------------------------------------------------- inspecting
    def nodes(self):
        """name -> SourceNode | ProcessorNode | SinkNode, in insertion order (read-only by convention)."""
        return self._nodes

    def node(self, name):
        return self._nodes[name]

    def store_builders(self):
        """store name -> StoreBuilder."""
        return dict(self._stores)

    def internal_topics(self):
        """suffix -> InternalTopicSpec."""
        return dict(self._internal)

    def copartition_groups(self, app_id=None):
        """The co-partitioning groups, topic names resolved with ``app_id`` when given."""
        if app_id is None:
            return list(self._copartition)
        return [frozenset(self.resolve_topic(t, app_id) for t in g) for g in self._copartition]

    def check_copartitioned(self, app_id, partitions_of):
        """Raise TopologyException("Topics not co-partitioned: [a,b]") (Kafka's CopartitionedTopicsEnforcer) when
        a co-partition group's topics have different partition counts; ``partitions_of(real topic name)`` gives a
        count or None (unknown: not checked)."""
        for group in self.copartition_groups(app_id):
            counts = {t: partitions_of(t) for t in sorted(group)}
            known = {c for c in counts.values() if c is not None}
            if len(known) > 1:
                raise TopologyException("Topics not co-partitioned: [%s]" % ",".join(
                    "%s=%s" % (t, c) for t, c in counts.items()))

    def is_internal(self, topic):
        return topic in self._internal

    def resolve_topic(self, topic, app_id):
        """The real topic name: "<app_id>-<topic>" for a registered internal topic, else ``topic``."""
        return "%s-%s" % (app_id, topic) if topic in self._internal else topic

    def source_for_topic(self, topic, app_id=None):
        """The SourceNode reading ``topic`` (a real name when ``app_id`` is given), or None."""
        for t, name in self._topic_to_source.items():
            if (t if app_id is None else self.resolve_topic(t, app_id)) == topic:
                return self._nodes[name]
        for node in self._nodes.values():
            if node.kind == "source" and node.pattern is not None and node.pattern.fullmatch(topic):
                return node
        return None

    def offset_reset_for(self, topic, app_id=None):
        """The source's offset reset policy for ``topic`` ("earliest" | "latest" | "none"), or None when the
        source named none (then the consumer's auto.offset.reset applies: Kafka Streams' default "earliest")."""
        node = self.source_for_topic(topic, app_id)
        return node.offset_reset if node is not None else None

    def subtopologies(self, app_id=None):
        """The sub-topologies in id order; topic names resolved with ``app_id`` when given (else as sources and
        sinks name them: internal topics by suffix)."""
        groups = self._groups()
        out = []
        for gid, names in enumerate(groups):
            sources, sinks, stores, rep, patterns = set(), set(), set(), set(), []
            for n in names:
                node = self._nodes[n]
                if node.kind == "source":
                    for t in node.topics:
                        real = t if app_id is None else self.resolve_topic(t, app_id)
                        sources.add(real)
                        if self._internal.get(t, InternalTopicSpec(t, "", None)).kind == "repartition":
                            rep.add(real)
                    if node.pattern is not None:
                        patterns.append(node.pattern)
                elif node.kind == "sink":
                    if isinstance(node.topic, str):
                        sinks.add(node.topic if app_id is None else self.resolve_topic(node.topic, app_id))
                else:
                    stores.update(node.stores)
            out.append(Subtopology(gid, tuple(names), frozenset(sources), frozenset(sinks), frozenset(stores),
                                   frozenset(rep), tuple(patterns)))
        return out

    def subtopology_of_store(self, store_name):
        for st in self.subtopologies():
            if store_name in st.stores:
                return st.id
        return None

    def changelog_topics(self, app_id):
        """"<app>-<store>-changelog" -> StoreChangelogSpec, for every store whose builder has logging enabled
        (a builder without ``logging_enabled`` counts as logged, Kafka's default). Stores no processor uses are
        left out (they belong to no task)."""
        out = {}
        for st in self.subtopologies():
            for store in sorted(st.stores):
                b = self._stores[store]
                logged = getattr(b, "logging_enabled", None)
                if logged is not None and not logged():
                    continue
                topic = "%s-%s-changelog" % (app_id, store)
                log_config = getattr(b, "log_config", None)
                windowed = _store_attr(b, "is_windowed", None)
                if windowed is None:
                    windowed = _store_attr(b, "windowed", False)
                out[topic] = StoreChangelogSpec(store, topic, st.id, bool(windowed),
                                                _store_attr(b, "retention_ms", None),
                                                dict(log_config() if log_config else {}))
        return out

    def source_topic_names(self, app_id):
        """Every topic a source reads (external and repartition), real names. Pattern sources are not included."""
        return {self.resolve_topic(t, app_id) for t in self._topic_to_source}

    def external_source_topic_names(self):
        return {t for t in self._topic_to_source if t not in self._internal}

    def repartition_topics(self, app_id):
        """Real name -> partition count (None: decided at start) of every repartition topic."""
        return {"%s-%s" % (app_id, s): spec.partitions for s, spec in self._internal.items()
                if spec.kind == "repartition"}

    def describe(self):
        return TopologyDescription(self)

    def __str__(self):
        return str(self.describe())

    # ------------------------------------------------------------------------------------------------ internals
    def _check_new(self, name, what):
        if not isinstance(name, str) or not name:
            raise TopologyException("%s name must be a non-empty string" % what)
        if name in self._nodes:
            # Kafka says "Processor" whatever the node's kind
            raise TopologyException("Processor %s is already added." % name)

    def _check_parents(self, name, parent_names, sink=False):
        for p in parent_names:
            if p == name:
                raise TopologyException("Processor %s cannot be a predecessor of itself." % name)
            node = self._nodes.get(p)
            if node is None:
                raise TopologyException("Predecessor processor %s is not added yet%s" % (
                    p, "." if sink else " for %s" % name))
            if node.kind == "sink":
                raise TopologyException("Sink %s cannot be used a parent." % p)

    def _link(self, node, parent_names):
        self._nodes[node.name] = node
        for p in parent_names:
            self._nodes[p].children.append(node.name)
        self._subtopologies = None

    def _processor(self, name):
        node = self._nodes.get(name)
        if node is None:
            raise TopologyException("Processor %s is not added yet." % name)
        if node.kind != "processor":
            raise TopologyException("cannot connect a state store to a source node or a sink node (%s)." % name)
        return node

    def _connect(self, processor_name, store_name):
        node = self._nodes[processor_name]
        if store_name not in node.stores:
            node.stores.append(store_name)

    def _groups(self):
        if self._subtopologies is not None:
            return self._subtopologies
        parent = {n: n for n in self._nodes}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def unite(a, b):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra

        store_user = {}
        for node in self._nodes.values():
            for p in node.parents:
                unite(p, node.name)
            if node.kind == "processor":
                for s in node.stores:
                    if s in store_user:
                        unite(store_user[s], node.name)
                    else:
                        store_user[s] = node.name
        # Kafka's makeNodeGroups: nodes in insertion (topological) order; upstream groups get the lower ids.
        root_to_gid = {}
        for n in self._nodes:
            root_to_gid.setdefault(find(n), len(root_to_gid))
        groups = [[] for _ in root_to_gid]
        for n in self._nodes:
            groups[root_to_gid[find(n)]].append(n)
        self._subtopologies = groups
        return groups


def _store_attr(builder, name, default):
    v = getattr(builder, name, default)
    return v() if callable(v) else v


class TopologyDescription:
    """Kafka's TopologyDescription; ``str()`` is Kafka's text format:

        Topologies:
           Sub-topology: 0
            Source: KSTREAM-SOURCE-0000000000 (topics: [input])
              --> KSTREAM-FILTER-0000000001
            Processor: KSTREAM-FILTER-0000000001 (stores: [])
              --> KSTREAM-SINK-0000000002
              <-- KSTREAM-SOURCE-0000000000
            Sink: KSTREAM-SINK-0000000002 (topic: output)
              <-- KSTREAM-FILTER-0000000001

    Nodes of a sub-topology (and a node's successors/predecessors) are ordered as Kafka's NodeComparator does:
    larger "size" first, then by name; size = 1 + the sizes of the node's children (Kafka's updateSize: a node
    reached by two paths counts twice). A pattern source prints "(topics: <regex>)", as Kafka's does. Topic and
    store lists are in Java's HashSet order (``_java_hashset_order``), as Kafka prints them.
    """

    def __init__(self, topology):
        self.topology = topology
        self.subtopologies = topology.subtopologies()

    def _subtree_sizes(self):
        nodes = self.topology.nodes()
        memo = {}

        def size(n):
            if n not in memo:
                memo[n] = 1 + sum(size(c) for c in nodes[n].children)
            return memo[n]

        return {n: size(n) for n in nodes}

    def __str__(self):
        nodes = self.topology.nodes()
        size = self._subtree_sizes()

        def order(names):
            return sorted(names, key=lambda n: (-size[n], n))

        def names(lst):
            return ", ".join(order(lst)) if lst else "none"

        out = ["Topologies:\n "]
        for st in self.subtopologies:
            lines = ["  Sub-topology: %d\n" % st.id]
            for n in order(st.nodes):
                node = nodes[n]
                if node.kind == "source":
                    what = ("topics: %s" % node.pattern.pattern if node.pattern is not None
                            else "topics: [%s]" % ", ".join(_java_hashset_order(node.topics)))
                    lines.append("    Source: %s (%s)\n      --> %s\n" % (n, what, names(node.children)))
                elif node.kind == "processor":
                    lines.append("    Processor: %s (stores: [%s])\n      --> %s\n      <-- %s\n"
                                 % (n, ", ".join(_java_hashset_order(node.stores)), names(node.children),
                                    names(node.parents)))
                else:
                    what = ("topic: %s" % node.topic if isinstance(node.topic, str)
                            else "extractor class: %s" % _callable_name(node.topic))
                    lines.append("    Sink: %s (%s)\n      <-- %s\n" % (n, what, names(node.parents)))
            lines.append("\n")
            out.append("".join(lines))
        return "".join(out)

    def __repr__(self):
        return str(self)


def _java_string_hash(text):
    """Java's String.hashCode (over UTF-16 code units, int32 arithmetic), as an unsigned 32-bit value."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _java_hashset_order(items):
    """The iteration order of Java's ``new HashSet<>(items)`` for strings: by bucket -- (hash ^ hash >>> 16) &
    (table size - 1), table size = the power of two >= max(n / 0.75 + 1, 16) -- then insertion order within a
    bucket. Kafka's describe() prints topic and store sets in this order, so ours matches it byte for byte."""
    n = len(items)
    size = 16
    while size < int(n / 0.75) + 1:
        size <<= 1

    def bucket(text):
        h = _java_string_hash(text)
        return (h ^ (h >> 16)) & (size - 1)

    return [t for _, _, t in sorted((bucket(t), i, t) for i, t in enumerate(dict.fromkeys(items)))]


def _callable_name(fn):
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__
