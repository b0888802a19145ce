"""Controller duty: controlled shutdown: move leadership away from a broker that is stopping.

A mixin of ``Controller`` (controller.py): its methods run in the controller's event-loop greenlet and use
the state and helpers documented there.
"""
import logging

from kbroker import errors

from . import election
from .batch import RequestBatch
from .state import ControllerMoved

log = logging.getLogger("kbroker.controller")


class ControlledShutdown:
    # ------------------------------------------------------------------------------------------------ shutdown

    def _ev_controlled_shutdown(self, broker_id, result):
        if not self.active:
            result.set_exception(errors.NotController("broker %d is not the controller" % self.broker_id))
            return
        try:
            self._check_still_controller()
            result.set(self._controlled_shutdown(broker_id))
        except ControllerMoved:
            result.set_exception(errors.NotController("controller moved"))
            raise
        except Exception as e:  # noqa: BLE001 -- the caller gets the error, the loop goes on
            result.set_exception(e)
            if not isinstance(e, errors.KafkaError):
                raise

    def _controlled_shutdown(self, broker_id):
        ctx = self.ctx
        if broker_id not in ctx.live_brokers:
            raise errors.BrokerNotAvailable("broker %d is not registered" % broker_id)
        ctx.shutting_down.add(broker_id)
        allowed = self._leaders_allowed()
        batch = RequestBatch()
        for tp, replicas in sorted(ctx.assignments.items()):
            if broker_id not in replicas or len(replicas) < 2 or tp[0] in ctx.topics_to_delete:
                continue
            cur = ctx.leadership.get(tp)
            if cur is None:
                continue
            if cur.leader == broker_id:
                new = self._write_leadership(
                    tp, lambda c, r=replicas: election.controlled_shutdown_leader(r, c.isr, allowed, {broker_id}))
                if new is not None:
                    # The old leader is told too, so it stops accepting writes right away.
                    self._send_leadership(batch, tp, extra=[broker_id])
            else:
                batch.add_stop_replica([broker_id], tp, False)
                self._remove_replica_from_isr(batch, tp, broker_id)
        batch.send(self)
        return sorted(tp for tp, replicas in ctx.assignments.items()
                      if len(replicas) > 1 and ctx.leadership.get(tp) is not None
                      and ctx.leadership[tp].leader == broker_id)
