"""Controller duty: preferred-replica election (``/admin/preferred_replica_election``) and
``auto.leader.rebalance.enable``.

A preferred election moves a partition's leadership to its first assigned replica when that one is live, not
shutting down and in the ISR (``election.preferred_replica_leader``; ISR unchanged, leader epoch + 1); partitions
of topics being deleted or being reassigned are skipped. The znode is deleted once handled (Kafka's tools wait for
that). With ``auto.leader.rebalance.enable`` a timer enqueues AutoRebalance every
``leader.imbalance.check.interval.seconds``: a broker whose preferred partitions are led by others in more than
``leader.imbalance.per.broker.percentage`` % of cases gets them back.

ElectLeaders (KIP-460, ``ElectLeadersRequest`` from ``Controller.elect_leaders``; Kafka's
KafkaController.onReplicaElection), per partition: UNKNOWN_TOPIC_OR_PARTITION (3) when not assigned,
INVALID_TOPIC_EXCEPTION (17) while its topic is being deleted; preferred (0): ELECTION_NOT_NEEDED (84) when the
preferred replica leads already, PREFERRED_LEADER_NOT_AVAILABLE (80) when it is not live or not in the ISR;
unclean (1): ELECTION_NOT_NEEDED when a live broker leads, else the first live ISR replica, else the first live
replica (the unclean choice, whatever ``unclean.leader.election.enable`` says: asking is the operator's consent),
ELIGIBLE_LEADERS_NOT_AVAILABLE (83) when no replica is live. Elected partitions get LeaderAndIsr/UpdateMetadata in
one batch.

State: the rebalance timer greenlet of the current term (``_timer``, killed on resign). A collaborator of the
controller core (controller.py): runs in its event greenlet and uses the core's narrow surface.
"""
import logging

import gevent

from kbroker import errors
from kbroker.coord.errors import NoNodeError

from . import election
from . import events as ev
from .admin_znodes import PreferredReplicaElectionZNode
from .batch import RequestBatch
from .state import ONLINE

log = logging.getLogger("kbroker.controller")

PREFERRED, UNCLEAN = 0, 1


class PreferredLeaders:
    def __init__(self, core):
        self.core = core
        self._timer = None

    # ------------------------------------------------------------------------------------------------ term

    def start(self):
        """New term: the rebalance timer, when ``auto.leader.rebalance.enable``."""
        if self.core.cfg("auto.leader.rebalance.enable"):
            self._timer = gevent.spawn(self._run_timer, self.core.generation)

    def on_resign(self):
        if self._timer is not None:
            self._timer.kill(block=False)
            self._timer = None

    def _run_timer(self, gen):
        core = self.core
        interval = float(core.cfg("leader.imbalance.check.interval.seconds"))
        while gen == core.generation:
            gevent.sleep(interval)
            if gen == core.generation:
                core.enqueue(ev.AutoRebalance())

    # ------------------------------------------------------------------------------------------------ events

    def on_request(self, _event):
        core = self.core
        data, _ = core.backend.get_or_none(PreferredReplicaElectionZNode.path())
        if data is None:
            return
        try:
            tps = PreferredReplicaElectionZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            log.warning("malformed %s ignored", PreferredReplicaElectionZNode.path())
            tps = []
        self.elect([tp for tp in tps if tp in core.ctx.assignments])
        try:
            core.backend.delete(PreferredReplicaElectionZNode.path())
        except NoNodeError:
            pass

    def on_timer(self, _event):
        ctx = self.core.ctx
        pct = float(self.core.cfg("leader.imbalance.per.broker.percentage"))
        for bid in sorted(self.core.brokers.leaders_allowed()):
            preferred = [tp for tp, r in ctx.assignments.items()
                         if r and r[0] == bid and tp[0] not in ctx.topics_to_delete and tp in ctx.leadership]
            if not preferred:
                continue
            not_led = [tp for tp in preferred if ctx.leadership[tp].leader != bid]
            if len(not_led) / len(preferred) > pct / 100.0:
                log.info("broker %d leads %d of its %d preferred partitions; rebalancing", bid,
                         len(preferred) - len(not_led), len(preferred))
                self.elect([tp for tp in not_led if tp not in ctx.reassignments])

    def elect(self, tps):
        """Preferred-replica election of ``tps``; returns those whose leader moved."""
        core = self.core
        ctx = core.ctx
        batch = RequestBatch()
        moved = []
        allowed = core.brokers.leaders_allowed()
        for tp in sorted(tps):
            if tp[0] in ctx.topics_to_delete or tp in ctx.reassignments:
                continue
            replicas = ctx.assignments[tp]
            cur = ctx.leadership.get(tp)
            if cur is None or cur.leader == replicas[0]:
                continue
            new = core.partitions.write(tp, lambda c, r=replicas: election.preferred_replica_leader(r, c.isr, allowed))
            if new is None:
                log.info("%s-%d: preferred replica %d not live or not in ISR", tp[0], tp[1], replicas[0])
                continue
            ctx.partition_states[tp] = ONLINE
            core.partitions.send_leadership(batch, tp)
            moved.append(tp)
        core.send(batch)
        return moved

    # ------------------------------------------------------------------------------------------- ElectLeaders

    def on_elect_request(self, event):
        """Not guarded (events.py): answers NOT_CONTROLLER itself, so the caller never waits for nothing."""
        self.core.answer(event.result, lambda: self.elect_requested(event.election_type, event.partitions))

    def elect_requested(self, election_type, tps):
        """The module docstring's ElectLeaders rules over ``tps`` (None: every partition) -> {tp: (code, message,
        the elected leader or -1)}."""
        core = self.core
        ctx = core.ctx
        if tps is None:
            tps = sorted(ctx.assignments)
        allowed = core.brokers.leaders_allowed()
        batch = RequestBatch()
        out = {}
        for tp in tps:
            replicas = ctx.assignments.get(tp)
            if not replicas:
                out[tp] = (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.", -1)
                continue
            if tp[0] in ctx.topics_to_delete:
                out[tp] = (errors.INVALID_TOPIC_EXCEPTION, "Deletion of topic %s in progress" % tp[0], -1)
                continue
            cur = ctx.leadership.get(tp)
            if election_type == PREFERRED:
                if cur is not None and cur.leader == replicas[0]:
                    out[tp] = (errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition", -1)
                    continue
                new = core.partitions.write(tp, lambda c, r=replicas: election.preferred_replica_leader(r, c.isr,
                                                                                                        allowed))
                failed = (errors.PREFERRED_LEADER_NOT_AVAILABLE, "Failed to elect leader for partition %s-%d under "
                          "strategy PreferredReplicaPartitionLeaderElection" % tp, -1)
            else:
                if cur is not None and cur.leader in ctx.live_brokers:
                    out[tp] = (errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition", -1)
                    continue
                new = core.partitions.write(tp, lambda c, r=replicas: election.offline_partition_leader(
                    r, c.isr, allowed, True))
                failed = (errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Failed to elect leader for partition %s-%d under "
                          "strategy OfflinePartitionLeaderElection" % tp, -1)
                if new is not None and cur is not None and new.leader not in cur.isr:
                    core.stats.unclean_elections += 1         # the metrics' UncleanLeaderElectionsPerSec
                    log.warning("%s-%d: unclean leader election of broker %d asked by ElectLeaders (ISR was %s)",
                                tp[0], tp[1], new.leader, list(cur.isr))
            if new is None:
                out[tp] = failed
                continue
            ctx.partition_states[tp] = ONLINE
            core.partitions.send_leadership(batch, tp)
            out[tp] = (errors.NONE, None, new.leader)
        core.send(batch)
        return out
