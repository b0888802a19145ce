"""Controller duty: preferred-replica election (/admin/preferred_replica_election) and auto.leader.rebalance.enable.

A mixin of ``Controller`` (controller.py): its methods run in the controller's event-loop greenlet and use
the state and helpers documented there.
"""
import logging

import gevent

from kbroker.coord.errors import NoNodeError

from . import election
from .batch import RequestBatch
from .admin_znodes import PreferredReplicaElectionZNode
from .state import ONLINE

log = logging.getLogger("kbroker.controller")


class PreferredLeaders:
    # ------------------------------------------------------------------------------------------------ preferred

    def _ev_preferred_election(self):
        data, _ = self.backend.get_or_none(PreferredReplicaElectionZNode.path())
        if data is None:
            return
        try:
            tps = PreferredReplicaElectionZNode.decode(data)
        except (ValueError, KeyError, TypeError):
            log.warning("malformed %s ignored", PreferredReplicaElectionZNode.path())
            tps = []
        self._preferred_elect([tp for tp in tps if tp in self.ctx.assignments])
        try:
            self.backend.delete(PreferredReplicaElectionZNode.path())
        except NoNodeError:
            pass

    def _preferred_elect(self, tps):
        ctx = self.ctx
        batch = RequestBatch()
        moved = []
        allowed = self._leaders_allowed()
        for tp in sorted(tps):
            if tp[0] in ctx.topics_to_delete or tp in ctx.reassignments:
                continue
            replicas = ctx.assignments[tp]
            cur = ctx.leadership.get(tp)
            if cur is None or cur.leader == replicas[0]:
                continue
            new = self._write_leadership(tp, lambda c, r=replicas: election.preferred_replica_leader(r, c.isr, allowed))
            if new is None:
                log.info("%s-%d: preferred replica %d not live or not in ISR", tp[0], tp[1], replicas[0])
                continue
            ctx.partition_states[tp] = ONLINE
            self._send_leadership(batch, tp)
            moved.append(tp)
        batch.send(self)
        return moved

    def _rebalance_timer(self, gen):
        interval = float(self._cfg("leader.imbalance.check.interval.seconds"))
        while gen == self._generation:
            gevent.sleep(interval)
            if gen == self._generation:
                self._enqueue("auto_rebalance")

    def _ev_auto_rebalance(self):
        ctx = self.ctx
        pct = float(self._cfg("leader.imbalance.per.broker.percentage"))
        for bid in sorted(self._leaders_allowed()):
            preferred = [tp for tp, r in ctx.assignments.items()
                         if r and r[0] == bid and tp[0] not in ctx.topics_to_delete and tp in ctx.leadership]
            if not preferred:
                continue
            not_led = [tp for tp in preferred if ctx.leadership[tp].leader != bid]
            if len(not_led) / len(preferred) > pct / 100.0:
                log.info("broker %d leads %d of its %d preferred partitions; rebalancing", bid,
                         len(preferred) - len(not_led), len(preferred))
                self._preferred_elect([tp for tp in not_led if tp not in ctx.reassignments])
