"""Controller duty: controlled shutdown -- move leadership away from a broker that is stopping.

Only the broker itself may ask: the request names the broker and carries its broker epoch (the czxid of its
registration, KIP-380), which must equal the one the controller read; else STALE_BROKER_EPOCH (77) and nothing
moves. Then the broker joins ``ctx.shutting_down`` (it may no longer lead; Brokers drops it when it goes) and, for
each partition with RF > 1 not being deleted: where it leads, a new leader from the ISR without it
(``election.controlled_shutdown_leader``), the old leader told too (LeaderAndIsr) so it stops accepting writes at
once; where it follows, StopReplica(delete=false) and out of the ISR. The answer lists the partitions it still
leads (no other ISR member could take over); the broker asks again (``controlled.shutdown.max.retries``) while
that list is not empty.

A collaborator of the controller core (controller.py): runs in its event greenlet (the caller of
``Controller.controlled_shutdown`` waits on the event's AsyncResult) and uses the core's narrow surface.
"""
import logging
import time

from kbroker import errors

from . import election
from .batch import RequestBatch

log = logging.getLogger("kbroker.controller")


class ControlledShutdown:
    def __init__(self, core):
        self.core = core

    def on_request(self, event):
        """Not guarded (events.py): answers NOT_CONTROLLER itself, so the caller never waits for nothing."""
        self.core.answer(event.result, lambda: self._shut_down(event.broker_id, event.broker_epoch))

    def _shut_down(self, broker_id, broker_epoch):
        core = self.core
        ctx = core.ctx
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
        started = time.monotonic()
        allowed = core.brokers.leaders_allowed()
        batch = RequestBatch()
        led, followed = {}, []
        for tp, replicas in sorted(ctx.assignments.items()):
            if broker_id not in replicas or len(replicas) < 2 or tp[0] in ctx.topics_to_delete:
                continue
            cur = ctx.leadership.get(tp)
            if cur is None:
                continue
            if cur.leader == broker_id:
                led[tp] = lambda c, r=replicas: election.controlled_shutdown_leader(r, c.isr, allowed, {broker_id})
            else:
                followed.append(tp)
        # Two batched writes (ZooKeeper multi transactions, partitions.write_many): a broker leading 10,000
        # partitions moves them in a few round trips, not 10,000 (issue 15 target 4: <= 10 s).
        for tp, new in core.partitions.write_many(led).items():
            if new is not None:
                # The old leader is told too, so it stops accepting writes right away.
                core.partitions.send_leadership(batch, tp, extra=[broker_id])
        for tp in followed:
            batch.add_stop_replica([broker_id], tp, False)
        core.partitions.remove_many(batch, {tp: (broker_id,) for tp in followed})
        core.send(batch)
        remaining = sorted(tp for tp, replicas in ctx.assignments.items()
                           if len(replicas) > 1 and ctx.leadership.get(tp) is not None
                           and ctx.leadership[tp].leader == broker_id)
        log.info("controlled shutdown of broker %d: %d leaders moved, %d followers stopped, %d partitions still led, "
                 "state written in %.0f ms", broker_id, len(led) - len(remaining), len(followed), len(remaining),
                 (time.monotonic() - started) * 1000.0)
        return remaining
