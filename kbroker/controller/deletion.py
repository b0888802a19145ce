"""Controller duty: topic deletion -- ``/admin/delete_topics/<t>`` -> UpdateMetadata (leader -2) + StopReplica
(delete) to every replica -> the topic's znodes removed once every replica answered 0.

State: ``ctx.topics_to_delete`` (added here; dropped when the topic is forgotten) and the replicas' deletion states
in ``ctx.replica_states`` (ReplicaDeletionStarted / Successful / Ineligible). A deletion waits while a replica's
broker is down (Ineligible, retried when a broker starts) or a partition of the topic is being reassigned; a
failed StopReplica makes the replica Ineligible, retried on the next broker startup.

A collaborator of the controller core (controller.py): runs in its event greenlet and uses the core's narrow
surface.
"""
import logging

from kbroker import errors
from kbroker.coord.errors import NoNodeError
from kbroker.coord.znodes import DeleteTopicsZNode

from . import events as ev
from .batch import RequestBatch
from .state import NON_EXISTENT, OFFLINE, R_DELETION_INELIGIBLE, R_DELETION_STARTED, R_DELETION_SUCCESSFUL

log = logging.getLogger("kbroker.controller")


class TopicDeletion:
    def __init__(self, core):
        self.core = core

    def on_marked(self, _event):
        """``/admin/delete_topics`` children changed: queue the marked topics (or drop markers that cannot be
        honoured: unknown topic, ``delete.topic.enable=false``) and resume."""
        core = self.core
        ctx = core.ctx
        try:
            marked = core.backend.get_children(DeleteTopicsZNode.path())
        except NoNodeError:
            return
        for topic in marked:
            if not core.cfg("delete.topic.enable") or topic not in ctx.topics():
                if core.cfg("delete.topic.enable"):
                    log.info("deletion marker for unknown topic %s removed", topic)
                else:
                    log.warning("delete.topic.enable=false: deletion of %s ignored", topic)
                try:
                    core.backend.delete(DeleteTopicsZNode.path(topic))
                except NoNodeError:
                    pass
                continue
            ctx.topics_to_delete.add(topic)
        self.resume()

    def _topic_tps(self, topic):
        return sorted(tp for tp in self.core.ctx.assignments if tp[0] == topic)

    def resume(self, retry_ineligible=False):
        """Advance every queued deletion that can advance (complete, start, or keep waiting)."""
        ctx = self.core.ctx
        for topic in sorted(ctx.topics_to_delete):
            tps = self._topic_tps(topic)
            replicas = [(tp, r) for tp in tps for r in ctx.assignments[tp]]
            states = [ctx.replica_states.get(k) for k in replicas]
            if all(s == R_DELETION_SUCCESSFUL for s in states):
                self._complete(topic)
                continue
            if any(s == R_DELETION_STARTED for s in states):
                continue
            if any(tp in ctx.reassignments for tp in tps):
                continue
            if any(s == R_DELETION_INELIGIBLE for s in states) and not retry_ineligible:
                continue
            if any(r not in ctx.live_brokers and ctx.replica_states.get((tp, r)) != R_DELETION_SUCCESSFUL
                   for tp, r in replicas):
                for tp, r in replicas:
                    if r not in ctx.live_brokers and ctx.replica_states.get((tp, r)) != R_DELETION_SUCCESSFUL:
                        ctx.replica_states[(tp, r)] = R_DELETION_INELIGIBLE
                log.info("deletion of %s waits: a replica broker is down", topic)
                continue
            self._start(topic, tps)

    def _start(self, topic, tps):
        ctx = self.core.ctx
        batch = RequestBatch()
        # Brokers drop the partitions from their metadata first (leader -2), so clients stop using them.
        batch.add_update_metadata(sorted(ctx.live_brokers), tps)
        tick = self.core.tick
        for tp in tps:
            tick()
            ctx.partition_states[tp] = OFFLINE
            for r in ctx.assignments[tp]:
                if ctx.replica_states.get((tp, r)) == R_DELETION_SUCCESSFUL:
                    continue
                ctx.replica_states[(tp, r)] = R_DELETION_STARTED
                batch.add_stop_replica([r], tp, True, callback=self._stop_replica_done)
        self.core.send(batch)

    def _stop_replica_done(self, bid, resp):
        # A channel sender greenlet: only enqueue.
        self.core.enqueue(ev.StopReplicaResponse(bid, resp))

    def on_stop_replica_response(self, event):
        ctx = self.core.ctx
        bid, resp = event.broker_id, event.response
        top = resp.get("error_code", 0)
        tick = self.core.tick
        for pe in resp.get("partition_errors") or ():
            tick()
            tp = (pe["topic_name"], pe["partition_index"])
            if tp[0] not in ctx.topics_to_delete or ctx.replica_states.get((tp, bid)) != R_DELETION_STARTED:
                continue
            err = top or pe["error_code"]
            ctx.replica_states[(tp, bid)] = R_DELETION_SUCCESSFUL if err == 0 else R_DELETION_INELIGIBLE
            if err:
                log.warning("broker %d could not delete %s-%d: %s", bid, tp[0], tp[1], errors.error_name(err))
        self.resume()

    def _complete(self, topic):
        core = self.core
        ctx = core.ctx
        core.topics.unwatch(topic)
        tps = self._topic_tps(topic)
        for tp in tps:
            core.tick()
            ctx.partition_states[tp] = NON_EXISTENT
        try:
            core.topic_store.delete_topic(topic)
        except errors.UnknownTopicOrPartition:
            pass
        core.topics.forget(topic)
        log.info("topic %s deleted", topic)
