"""Controller duty: partition reassignment (``/admin/reassign_partitions``) -- start the new replicas, wait for
them in the ISR, move leadership, drop the old replicas.

Per partition (Kafka's two phases; OAR = original replicas, RAR = requested): (1) AR = RAR + (OAR - RAR) written to
``/brokers/topics/<t>``, a leader-epoch bump tells every replica (LeaderAndIsr names the adding and removing
replicas), the new ones start following; (2) once RAR is in the ISR: leader = the current one if in RAR, else the
first of RAR live and in the ISR; ISR and AR cut to RAR; StopReplica(delete) to the dropped replicas; the entry
leaves the znode (deleted when empty). Invalid entries (unknown partition, topic being deleted, empty or duplicate
list, unchanged list, a broker not live) are dropped from the znode at once.

State: ``ctx.reassignments`` {(t, p): state.Reassignment} (added and completed here; dropped with a forgotten
topic through ``drop``) and one data watch per moving partition's state znode (``_watches``, released on resign),
whose changes (the leader adding a caught-up replica to the ISR) are ReassignedIsrChange events.

AlterPartitionReassignments / ListPartitionReassignments (KIP-455) reach this duty as ReassignmentsRequest events
(``alter_requested`` / ``list_requested``): a started reassignment is the same state as one read from the znode
(and is written there too, so a new controller resumes it); cancelling one (``replicas`` null) cuts AR, ISR and
leadership back to the original replicas and deletes the added ones (``_finish`` with OAR), as Kafka does; a new
target for a moving partition replaces the old one (``_replace``: the replicas only the old target added are cut
and deleted, phase 1 runs again).

A collaborator of the controller core (controller.py): runs in its event greenlet and uses the core's narrow
surface.
"""
import logging

from kbroker import errors
from kbroker.coord.errors import NoNodeError
from kbroker.coord.znodes import TopicPartitionStateZNode, TopicZNode

from . import election
from . import events as ev
from .admin_znodes import ReassignPartitionsZNode
from .batch import RequestBatch
from .state import ONLINE, R_NEW, R_ONLINE

log = logging.getLogger("kbroker.controller")


class Reassignments:
    def __init__(self, core):
        self.core = core
        self._watches = {}   # (topic, p) -> watch handle of its state znode (this term)

    def on_resign(self):
        for w in self._watches.values():
            w.cancel()
        self._watches = {}

    def drop(self, tp):
        """Forget a partition's reassignment without completing it (its topic is gone)."""
        self.core.ctx.reassignments.pop(tp, None)
        w = self._watches.pop(tp, None)
        if w is not None:
            w.cancel()

    # ------------------------------------------------------------------------------------------------ events

    def on_request(self, _event):
        """``/admin/reassign_partitions`` changed: start the valid new entries, drop the invalid ones."""
        ctx = self.core.ctx
        data, _ = self.core.backend.get_or_none(ReassignPartitionsZNode.path())
        if data is None:
            return
        try:
            wanted = ReassignPartitionsZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            log.warning("malformed %s removed", ReassignPartitionsZNode.path())
            self._write_znode({})
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
            self._watches[tp] = self.core.watch_data(TopicPartitionStateZNode.path(*tp), ev.ReassignedIsrChange(tp))
            self.on_partition(tp)
        if dropped:
            self._remove_from_znode(dropped)

    def on_isr_change(self, event):
        """The state znode of a moving partition changed (e.g. the leader added a new replica to the ISR)."""
        tp = event.tp
        if tp not in self.core.ctx.reassignments:
            return
        if self.core.partitions.reload(tp) is None:
            return
        self.on_partition(tp)

    # ------------------------------------------------------------------------------------------------ phases

    def on_partition(self, tp):
        """Advance ``tp``'s reassignment: phase 1 once, completion when RAR is in the ISR (module docstring)."""
        core = self.core
        ctx = core.ctx
        ra = ctx.reassignments[tp]
        st = ctx.leadership.get(tp)
        if st is None:
            return
        if set(ra.target) <= set(st.isr):
            self._complete(tp)
            return
        if ra.started:
            return
        # Phase 1: AR = RAR + (OAR - RAR); every replica learns it (leader epoch bump); new replicas start.
        batch = RequestBatch()
        merged = list(ra.target) + [r for r in ra.original if r not in ra.target]
        if merged != ctx.assignments[tp]:
            self._write_assignment(tp, merged)
        new = core.partitions.write(tp, lambda c: (c.leader, list(c.isr)))
        if new is None:
            return
        ra.started = True
        for r in ra.target:
            if r not in ra.original:
                ctx.replica_states[(tp, r)] = R_NEW
        core.partitions.send_leadership(batch, tp)
        core.send(batch)

    def _complete(self, tp):
        ra = self.core.ctx.reassignments[tp]
        if self._finish(tp, ra.target):
            log.info("%s-%d reassigned to %s", tp[0], tp[1], ra.target)

    def _finish(self, tp, final):
        """AR, ISR and leadership cut to ``final`` (the target on completion, the original replicas on
        cancellation); StopReplica(delete) to the others; the entry leaves the state and the znode. False (nothing
        changed) when no live in-sync replica of ``final`` can lead."""
        core = self.core
        ctx = core.ctx
        allowed = core.brokers.leaders_allowed()
        removed = [r for r in ctx.assignments[tp] if r not in final]

        def choose(cur):
            isr = [r for r in cur.isr if r in final]
            if cur.leader in final and cur.leader in allowed:
                return cur.leader, isr
            res = election.reassigned_partition_leader(final, isr, allowed)
            return (res[0], isr) if res is not None else None
        batch = RequestBatch()
        new = core.partitions.write(tp, choose)
        if new is None:
            log.warning("%s-%d: no live in-sync replica among %s to lead; reassignment waits", tp[0], tp[1], final)
            return False
        self._write_assignment(tp, list(final))
        ctx.partition_states[tp] = ONLINE
        self.drop(tp)
        for r in final:
            ctx.replica_states[(tp, r)] = R_ONLINE
        core.partitions.send_leadership(batch, tp)
        for r in removed:
            ctx.replica_states.pop((tp, r), None)
            if r in ctx.live_brokers:
                batch.add_stop_replica([r], tp, True)
        core.send(batch)
        self._remove_from_znode([tp])
        core.deletion.resume()
        return True

    # ------------------------------------------------------------------------------------------ KIP-455 APIs

    def on_api_request(self, event):
        """AlterPartitionReassignments / ListPartitionReassignments from a handler on this broker (events.py)."""
        try:
            if not self.core.active:
                raise errors.NotController("broker %d is not the controller" % self.core.broker_id)
            if event.changes is not None:
                event.result.set(self.alter_requested(dict(event.changes)))
            else:
                event.result.set(self.list_requested(event.partitions))
        except Exception as e:  # noqa: BLE001 - the waiting handler answers it
            event.result.set_exception(e)

    def alter_requested(self, changes):
        """{tp: target or None} -> {tp: (error code, message or None)}. Kafka's checks, per partition: unknown ->
        UNKNOWN_TOPIC_OR_PARTITION (3); cancel without a reassignment -> NO_REASSIGNMENT_IN_PROGRESS (85); an
        empty list, duplicates, or brokers not live -> INVALID_REPLICA_ASSIGNMENT (39). A new target for a
        partition already moving replaces its target, as KIP-455 does (``_replace``; the original replicas as the
        new target cancel it). The target equal to the current replicas is a no-op. A started one is also
        written to ``/admin/reassign_partitions`` so a new controller resumes it (the tool's --verify sees it)."""
        ctx = self.core.ctx
        out, started = {}, {}
        for tp, target in changes.items():
            replicas = ctx.assignments.get(tp)
            if replicas is None or tp[0] in ctx.topics_to_delete:
                out[tp] = (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            elif target is None:
                if tp not in ctx.reassignments:
                    out[tp] = (errors.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress for %s-%d"
                               % tp)
                elif self._finish(tp, ctx.reassignments[tp].original):
                    log.info("%s-%d reassignment cancelled: back to %s", tp[0], tp[1], ctx.assignments[tp])
                    out[tp] = (0, None)
                else:
                    out[tp] = (errors.REASSIGNMENT_IN_PROGRESS, "no live in-sync original replica can lead %s-%d "
                               "yet; cancellation not possible now" % tp)
            elif not target:
                out[tp] = (errors.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition "
                           "reassignment.")
            elif len(set(target)) != len(target):
                out[tp] = (errors.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica ids in partition reassignment "
                           "replica list: %s" % list(target))
            elif any(r not in ctx.live_brokers for r in target):
                out[tp] = (errors.INVALID_REPLICA_ASSIGNMENT, "Replica assignment has brokers that are not alive. "
                           "Replica list: %s, live broker list: %s" % (list(target), sorted(ctx.live_brokers)))
            elif tp in ctx.reassignments:
                ra = ctx.reassignments[tp]
                if list(ra.target) == list(target):
                    out[tp] = (0, None)
                elif list(target) == list(ra.original):       # back to where it started: a cancellation
                    ok = self._finish(tp, ra.original)
                    out[tp] = (0, None) if ok else (errors.REASSIGNMENT_IN_PROGRESS, "no live in-sync original "
                                                    "replica can lead %s-%d yet" % tp)
                else:
                    # the znode first: a completion inside _replace removes the entry again
                    old_target = list(ra.target)
                    self._add_to_znode({tp: list(target)})
                    if self._replace(tp, list(target)):
                        out[tp] = (0, None)
                    else:
                        self._add_to_znode({tp: old_target})
                        out[tp] = (errors.REASSIGNMENT_IN_PROGRESS, "no live in-sync replica of %s can lead %s-%d "
                                   "while its target changes" % ((list(target),) + tp))
            else:
                out[tp] = (0, None)
                if list(target) != list(replicas):
                    started[tp] = list(target)
        if started:
            self._add_to_znode(started)
            for tp, target in started.items():
                ctx.reassignments[tp] = ctx.new_reassignment(target, list(ctx.assignments[tp]))
                self._watches[tp] = self.core.watch_data(TopicPartitionStateZNode.path(*tp),
                                                         ev.ReassignedIsrChange(tp))
                self.on_partition(tp)
        return out

    def _replace(self, tp, target):
        """KIP-455's new target for a partition already moving: the original replicas stay (OAR), the replicas only
        the old target added leave the assignment, the ISR and (if one led) the leadership, and are stopped and
        deleted; then phase 1 runs again for the new target (its new replicas start following). False, with
        nothing changed, when no live in-sync replica of the new assignment could lead."""
        core = self.core
        ctx = core.ctx
        ra = ctx.reassignments[tp]
        merged = list(target) + [r for r in ra.original if r not in target]
        dropped = [r for r in ctx.assignments[tp] if r not in merged]
        if dropped:
            allowed = core.brokers.leaders_allowed()

            def choose(cur):
                isr = [r for r in cur.isr if r in merged]
                if cur.leader in merged:
                    return cur.leader, isr
                res = election.reassigned_partition_leader(merged, isr, allowed)
                return (res[0], isr) if res is not None else None
            if core.partitions.write(tp, choose) is None:
                return False
            self._write_assignment(tp, merged)
        ctx.reassignments[tp] = ctx.new_reassignment(list(target), list(ra.original))
        log.info("%s-%d reassignment target changed from %s to %s", tp[0], tp[1], ra.target, target)
        self.on_partition(tp)       # phase 1 for the new target (or completion, when it is already in the ISR)
        if dropped:
            batch = RequestBatch()
            for r in dropped:
                ctx.replica_states.pop((tp, r), None)
                if r in ctx.live_brokers:
                    batch.add_stop_replica([r], tp, True)
            core.send(batch)
        return True

    def list_requested(self, partitions):
        """{tp: (replicas, adding, removing)} of the ongoing reassignments among ``partitions`` (None = all)."""
        ctx = self.core.ctx
        wanted = ctx.reassignments if partitions is None else [tp for tp in partitions if tp in ctx.reassignments]
        out = {}
        for tp in wanted:
            ra = ctx.reassignments[tp]
            out[tp] = (list(ctx.assignments.get(tp, ())), [r for r in ra.target if r not in ra.original],
                       [r for r in ra.original if r not in ra.target])
        return out

    # ------------------------------------------------------------------------------------------------ znodes

    def _write_assignment(self, tp, replicas):
        core = self.core
        path = TopicZNode.path(tp[0])
        data, stat = core.backend.get(path)
        current = TopicZNode.decode(data)
        current[tp[1]] = list(replicas)
        core.backend.set(path, TopicZNode.encode(current), version=stat.version)
        core.ctx.assignments[tp] = list(replicas)

    def _add_to_znode(self, targets):
        """Merge {tp: target} into ``/admin/reassign_partitions`` (its watch sees them already in progress)."""
        data, _ = self.core.backend.get_or_none(ReassignPartitionsZNode.path())
        try:
            wanted = ReassignPartitionsZNode.decode(data) if data is not None else {}
        except (ValueError, KeyError, TypeError):
            wanted = {}
        wanted.update(targets)
        path = ReassignPartitionsZNode.path()
        if data is None:
            self.core.backend.create(path, ReassignPartitionsZNode.encode(wanted), makepath=True)
        else:
            self.core.backend.set(path, ReassignPartitionsZNode.encode(wanted))

    def _remove_from_znode(self, tps):
        data, _ = self.core.backend.get_or_none(ReassignPartitionsZNode.path())
        if data is None:
            return
        try:
            wanted = ReassignPartitionsZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            wanted = {}
        for tp in tps:
            wanted.pop(tp, None)
        self._write_znode(wanted)

    def _write_znode(self, wanted):
        path = ReassignPartitionsZNode.path()
        try:
            if wanted:
                self.core.backend.set(path, ReassignPartitionsZNode.encode(wanted))
            else:
                self.core.backend.delete(path)
        except NoNodeError:
            pass
