"""Controller collaborator: topics and partitions appearing and vanishing (``/brokers/topics`` and each
``/brokers/topics/<t>``), however they were written (CreateTopics through ``topics.create_topic``, CreatePartitions,
Kafka's tools).

State: ``ctx.assignments`` {(t, p): [replica ids]} is loaded and extended here (Reassignments rewrites entries,
``forget`` drops a topic's); one data watch per known topic (``_watches``, released on resign). A new partition
becomes New -- or Online/Offline when its state znode already exists (written before a failover) -- and goes
through the partition state machine's election (partitions.py).

Runs in the controller's event greenlet; uses the core's narrow surface (controller.py docstring).
"""
import logging

from kbroker import errors
from kbroker.coord.znodes import TopicZNode

from . import events as ev
from .batch import RequestBatch
from .state import NEW, OFFLINE, ONLINE, R_NEW, R_OFFLINE

log = logging.getLogger("kbroker.controller")


class TopicChanges:
    def __init__(self, core):
        self.core = core
        self._watches = {}   # topic -> watch handle of /brokers/topics/<t> (this term)

    # ------------------------------------------------------------------------------------------------ term

    def load(self):
        """New term: the assignment and state znode of every topic."""
        for topic in self.core.topic_store.topics():
            self._load(topic)

    def watch_all(self):
        for topic in list(self.core.ctx.topics()):
            self.watch(topic)

    def on_resign(self):
        for w in self._watches.values():
            w.cancel()
        self._watches = {}

    def _load(self, topic):
        core = self.core
        try:
            assignment = core.topic_store.assignment(topic)
        except errors.UnknownTopicOrPartition:
            return {}
        for p, replicas in assignment.items():
            tp = (topic, p)
            core.ctx.assignments[tp] = list(replicas)
            core.partitions.reload(tp)
        return assignment

    def watch(self, topic):
        self.unwatch(topic)
        self._watches[topic] = self.core.watch_data(TopicZNode.path(topic), ev.PartitionModification(topic))

    def unwatch(self, topic):
        w = self._watches.pop(topic, None)
        if w is not None:
            w.cancel()

    # ------------------------------------------------------------------------------------------------ events

    def on_change(self, _event):
        """``/brokers/topics`` children changed: load and watch new topics, forget vanished ones."""
        ctx = self.core.ctx
        current = set(self.core.topic_store.topics())
        known = ctx.topics()
        for topic in sorted(known - current):
            # Removed behind our back (or by our own deletion): forget it.
            self.forget(topic)
        new_tps = []
        for topic in sorted(current - known):
            assignment = self._load(topic)
            self.watch(topic)
            new_tps.extend((topic, p) for p in assignment)
        if new_tps:
            self._on_new_partitions(new_tps)

    def on_partition_modification(self, event):
        """``/brokers/topics/<t>`` changed: partitions added (CreatePartitions) get leaders."""
        core = self.core
        ctx = core.ctx
        topic = event.topic
        # (topic, 0) first: every known topic has a partition 0, and ctx.topics() walks every partition -- once per
        # topic's watch event, 1,000 topics of 10 made it 0.58 s of a controller's startup
        if (topic, 0) not in ctx.assignments and topic not in ctx.topics():
            return
        try:
            assignment = core.topic_store.assignment(topic)
        except errors.UnknownTopicOrPartition:
            return
        added = [(topic, p) for p in assignment if (topic, p) not in ctx.assignments]
        if not added:
            return
        if topic in ctx.topics_to_delete:
            log.warning("ignoring partitions added to %s: it is being deleted", topic)
            return
        for tp in added:
            ctx.assignments[tp] = list(assignment[tp[1]])
        self._on_new_partitions(added)

    def _on_new_partitions(self, tps):
        core = self.core
        ctx = core.ctx
        batch = RequestBatch()
        tick = core.tick
        for tp in tps:
            tick()
            if tp in ctx.leadership:  # state znode already present (e.g. written before a failover)
                st = ctx.leadership[tp]
                ctx.partition_states[tp] = ONLINE if st.leader in core.brokers.leaders_allowed() else OFFLINE
            else:
                ctx.partition_states[tp] = NEW
            for r in ctx.assignments[tp]:
                ctx.replica_states[(tp, r)] = R_NEW if r in ctx.live_brokers else R_OFFLINE
        for tp in tps:
            tick()
            if ctx.partition_states[tp] == ONLINE:
                core.partitions.send_leadership(batch, tp)
        core.partitions.trigger_online(batch, tps)
        core.send(batch)

    def forget(self, topic):
        """Drop every trace of ``topic`` from the context (deleted, or removed behind the controller's back)."""
        core = self.core
        ctx = core.ctx
        for tp in [tp for tp in ctx.assignments if tp[0] == topic]:
            core.tick()
            ctx.assignments.pop(tp, None)
            ctx.leadership.pop(tp, None)
            ctx.partition_states.pop(tp, None)
            core.reassignments.drop(tp)
        for key in [k for k in ctx.replica_states if k[0][0] == topic]:
            core.tick()
            del ctx.replica_states[key]
        ctx.topics_to_delete.discard(topic)
        self.unwatch(topic)
