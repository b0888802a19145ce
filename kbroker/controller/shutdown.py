"""Controller duty: controlled shutdown: move leadership away from a broker that is stopping.

Only the broker itself may ask: the request names the broker and carries its broker epoch (the czxid of its
registration, KIP-380), which must equal the one the controller read; else STALE_BROKER_EPOCH (77) and nothing moves.

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

    def _ev_controlled_shutdown(self, broker_id, broker_epoch, result):
        if not self.active:
            result.set_exception(errors.NotController("broker %d is not the controller" % self.broker_id))
            return
        try:
            self._check_still_controller()
            result.set(self._controlled_shutdown(broker_id, broker_epoch))
        except ControllerMoved:
            result.set_exception(errors.NotController("controller moved"))
            raise
        except Exception as e:  # noqa: BLE001 -- the caller gets the error, the loop goes on
            result.set_exception(e)
            if not isinstance(e, errors.KafkaError):
                raise

    def _controlled_shutdown(self, broker_id, broker_epoch):
        ctx = self.ctx
        if broker_id not in ctx.live_brokers:
            raise errors.BrokerNotAvailable("broker %d is not registered" % broker_id)
        current = ctx.broker_epochs.get(broker_id, -1)
        if broker_epoch != current or current < 0:
            # Kafka refuses only an older epoch; an equal one is required here: the epoch is what tells the
            # broker itself from a client that names it (issue 8).
            log.warning("controlled shutdown of broker %d refused: broker epoch %d, registered %d",
                        broker_id, broker_epoch, current)
            raise errors.StaleBrokerEpoch("broker %d has broker epoch %d, not %d" % (broker_id, current, broker_epoch))
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
