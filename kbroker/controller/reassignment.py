"""Controller duty: partition reassignment (/admin/reassign_partitions): start new replicas, wait for the ISR, move leadership, drop old replicas.

A mixin of ``Controller`` (controller.py): its methods run in the controller's event-loop greenlet and use
the state and helpers documented there.
"""
import logging

from kbroker.coord.errors import NoNodeError
from kbroker.coord.znodes import TopicPartitionStateZNode, TopicZNode

from . import election
from .batch import RequestBatch
from .admin_znodes import ReassignPartitionsZNode
from .state import ONLINE, R_NEW, R_ONLINE

log = logging.getLogger("kbroker.controller")


class Reassignment:
    # ------------------------------------------------------------------------------------------------ reassignment

    def _ev_reassign(self):
        ctx = self.ctx
        data, _ = self.backend.get_or_none(ReassignPartitionsZNode.path())
        if data is None:
            return
        try:
            wanted = ReassignPartitionsZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            log.warning("malformed %s removed", ReassignPartitionsZNode.path())
            self._write_reassign_znode({})
            return
        dropped = []
        for tp, target in wanted.items():
            if tp in ctx.reassignments:
                continue
            replicas = ctx.assignments.get(tp)
            reason = None
            if replicas is None:
                reason = "unknown partition"
            elif tp[0] in ctx.topics_to_delete:
                reason = "topic is being deleted"
            elif not target or len(set(target)) != len(target):
                reason = "bad replica list %s" % (target,)
            elif list(target) == list(replicas):
                reason = "already has replicas %s" % (target,)
            elif any(r not in ctx.live_brokers for r in target):
                reason = "not all of %s are live" % (target,)
            if reason is not None:
                log.warning("reassignment of %s-%d dropped: %s", tp[0], tp[1], reason)
                dropped.append(tp)
                continue
            ctx.reassignments[tp] = ctx.new_reassignment(list(target), list(replicas))
            self._watch_reassigned_state(tp)
            self._on_reassignment(tp)
        if dropped:
            self._remove_from_reassign_znode(dropped)

    def _watch_reassigned_state(self, tp):
        gen = self._generation

        def cb(data, stat):
            if gen != self._generation or not self._running:
                return False
            self._enqueue("reassign_isr_change", tp)
        self._reassign_watches[tp] = self.backend.watch_data(TopicPartitionStateZNode.path(*tp), cb)

    def _ev_reassign_isr_change(self, tp):
        if tp not in self.ctx.reassignments:
            return
        st = self._read_state(tp)
        if st is None:
            return
        cur = self.ctx.leadership.get(tp)
        if cur is None or cur.zk_version != st.zk_version:
            self.ctx.leadership[tp] = st
        self._on_reassignment(tp)

    def _on_reassignment(self, tp):
        ctx = self.ctx
        ra = ctx.reassignments[tp]
        st = ctx.leadership.get(tp)
        if st is None:
            return
        if set(ra.target) <= set(st.isr):
            self._complete_reassignment(tp)
            return
        if ra.started:
            return
        # Phase 1: AR = RAR + (OAR - RAR); every replica learns it (leader epoch bump); new replicas start.
        batch = RequestBatch()
        merged = list(ra.target) + [r for r in ra.original if r not in ra.target]
        if merged != ctx.assignments[tp]:
            self._write_assignment(tp, merged)
        new = self._write_leadership(tp, lambda c: (c.leader, list(c.isr)))
        if new is None:
            return
        ra.started = True
        for r in ra.target:
            if r not in ra.original:
                ctx.replica_states[(tp, r)] = R_NEW
        self._send_leadership(batch, tp)
        batch.send(self)

    def _complete_reassignment(self, tp):
        ctx = self.ctx
        ra = ctx.reassignments[tp]
        allowed = self._leaders_allowed()
        removed = [r for r in ctx.assignments[tp] if r not in ra.target]

        def choose(cur):
            isr = [r for r in cur.isr if r in ra.target]
            if cur.leader in ra.target and cur.leader in allowed:
                return cur.leader, isr
            res = election.reassigned_partition_leader(ra.target, isr, allowed)
            return (res[0], isr) if res is not None else None
        batch = RequestBatch()
        new = self._write_leadership(tp, choose)
        if new is None:
            log.warning("%s-%d: no live in-sync replica among %s to lead; reassignment waits",
                        tp[0], tp[1], ra.target)
            return
        self._write_assignment(tp, list(ra.target))
        ctx.partition_states[tp] = ONLINE
        del ctx.reassignments[tp]
        w = self._reassign_watches.pop(tp, None)
        if w is not None:
            w.cancel()
        for r in ra.target:
            ctx.replica_states[(tp, r)] = R_ONLINE
        self._send_leadership(batch, tp)
        for r in removed:
            ctx.replica_states.pop((tp, r), None)
            if r in ctx.live_brokers:
                batch.add_stop_replica([r], tp, True)
        batch.send(self)
        self._remove_from_reassign_znode([tp])
        log.info("%s-%d reassigned to %s", tp[0], tp[1], ra.target)
        self._resume_deletions()

    def _write_assignment(self, tp, replicas):
        topic = tp[0]
        path = TopicZNode.path(topic)
        data, stat = self.backend.get(path)
        current = TopicZNode.decode(data)
        current[tp[1]] = list(replicas)
        self.backend.set(path, TopicZNode.encode(current), version=stat.version)
        self.ctx.assignments[tp] = list(replicas)

    def _remove_from_reassign_znode(self, tps):
        data, _ = self.backend.get_or_none(ReassignPartitionsZNode.path())
        if data is None:
            return
        try:
            wanted = ReassignPartitionsZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            wanted = {}
        for tp in tps:
            wanted.pop(tp, None)
        self._write_reassign_znode(wanted)

    def _write_reassign_znode(self, wanted):
        path = ReassignPartitionsZNode.path()
        try:
            if wanted:
                self.backend.set(path, ReassignPartitionsZNode.encode(wanted))
            else:
                self.backend.delete(path)
        except NoNodeError:
            pass
