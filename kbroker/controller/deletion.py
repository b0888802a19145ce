"""Controller duty: topic deletion: /admin/delete_topics -> UpdateMetadata(leader -2) + StopReplica(delete) -> znodes removed.

A mixin of ``Controller`` (controller.py): its methods run in the controller's event-loop greenlet and use
the state and helpers documented there.
"""
import logging

from kbroker import errors
from kbroker.coord.errors import NoNodeError
from kbroker.coord.znodes import DeleteTopicsZNode

from .batch import RequestBatch
from .state import NON_EXISTENT, OFFLINE, R_DELETION_INELIGIBLE, R_DELETION_STARTED, R_DELETION_SUCCESSFUL

log = logging.getLogger("kbroker.controller")


class TopicDeletion:
    # ------------------------------------------------------------------------------------------------ deletion

    def _ev_delete_topics(self):
        ctx = self.ctx
        try:
            marked = self.backend.get_children(DeleteTopicsZNode.path())
        except NoNodeError:
            return
        for topic in marked:
            if not self._cfg("delete.topic.enable") or topic not in ctx.topics():
                if self._cfg("delete.topic.enable"):
                    log.info("deletion marker for unknown topic %s removed", topic)
                else:
                    log.warning("delete.topic.enable=false: deletion of %s ignored", topic)
                try:
                    self.backend.delete(DeleteTopicsZNode.path(topic))
                except NoNodeError:
                    pass
                continue
            ctx.topics_to_delete.add(topic)
        self._resume_deletions()

    def _topic_tps(self, topic):
        return sorted(tp for tp in self.ctx.assignments if tp[0] == topic)

    def _resume_deletions(self, retry_ineligible=False):
        ctx = self.ctx
        for topic in sorted(ctx.topics_to_delete):
            tps = self._topic_tps(topic)
            replicas = [(tp, r) for tp in tps for r in ctx.assignments[tp]]
            states = [ctx.replica_states.get(k) for k in replicas]
            if all(s == R_DELETION_SUCCESSFUL for s in states):
                self._complete_deletion(topic)
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
            self._start_deletion(topic, tps)

    def _start_deletion(self, topic, tps):
        ctx = self.ctx
        batch = RequestBatch()
        # Brokers drop the partitions from their metadata first (leader -2), so clients stop using them.
        batch.add_update_metadata(sorted(ctx.live_brokers), tps)
        for tp in tps:
            ctx.partition_states[tp] = OFFLINE
            for r in ctx.assignments[tp]:
                if ctx.replica_states.get((tp, r)) == R_DELETION_SUCCESSFUL:
                    continue
                ctx.replica_states[(tp, r)] = R_DELETION_STARTED
                batch.add_stop_replica([r], tp, True, callback=self._stop_replica_done)
        batch.send(self)

    def _stop_replica_done(self, bid, resp):
        self._enqueue("stop_replica_response", bid, resp)

    def _ev_stop_replica_response(self, bid, resp):
        ctx = self.ctx
        top = resp.get("error_code", 0)
        for pe in resp.get("partition_errors") or ():
            tp = (pe["topic_name"], pe["partition_index"])
            if tp[0] not in ctx.topics_to_delete or ctx.replica_states.get((tp, bid)) != R_DELETION_STARTED:
                continue
            err = top or pe["error_code"]
            ctx.replica_states[(tp, bid)] = R_DELETION_SUCCESSFUL if err == 0 else R_DELETION_INELIGIBLE
            if err:
                log.warning("broker %d could not delete %s-%d: %s", bid, tp[0], tp[1], errors.error_name(err))
        self._resume_deletions()

    def _complete_deletion(self, topic):
        ctx = self.ctx
        w = self._topic_watches.pop(topic, None)
        if w is not None:
            w.cancel()
        tps = self._topic_tps(topic)
        for tp in tps:
            ctx.partition_states[tp] = NON_EXISTENT
        try:
            self.topic_store.delete_topic(topic)
        except errors.UnknownTopicOrPartition:
            pass
        self._forget_topic(topic)
        log.info("topic %s deleted", topic)
