"""Controller collaborator: failed log directories (KIP-112) -- replicas offline on a live broker.

A broker whose log dir fails (kbroker/log/dir_failure.py) stops its partitions there and creates a persistent
sequential ``/log_dir_event_notification/log_dir_event_<n>`` znode holding ``{"version":1,"broker":<id>,"event":1}``
(Kafka's LogDirEventNotification, event 1 = LogDirFailure; ``LogDirEventZNode``); it does the same at startup when a
dir failed to load. The controller (``on_notification``, event ``LogDirEvent``) deletes the notifications and sends
each named live broker a LeaderAndIsr of every partition it holds, at the partitions' current leader epochs, as
Kafka's onBrokerLogDirFailure does: the broker answers KAFKA_STORAGE_ERROR (56) for the partitions of its offline
dirs (and STALE_CONTROLLER_EPOCH for the others, which changes nothing). The answer -- that of every
LeaderAndIsr the controller sends (batch.py), so a new controller learns them too -- comes back as event
``OfflineReplicas`` (``on_offline``): those replicas are recorded in ``ctx.offline_replicas`` {tp: {broker}}, go
OfflineReplica -- out of the ISR in one state write, the leader elected among the other live ISR members (never an
offline replica: ``PartitionStateMachine._elect_offline`` leaves them out) -- and every broker's metadata lists them
in ``offline_replicas``. With no other in-sync replica the partition stays offline (leader -1), as Kafka's clean
election does. A broker's offline replicas are forgotten when it fails or registers again (a restart after the
repair; a dir still failing is reported again by its new registration's event).

Runs in the controller's event greenlet; uses the core's narrow surface (controller.py docstring).
"""
import json
import logging

from kbroker import errors
from kbroker.cluster_state import PartitionLeadership
from kbroker.coord.errors import NoNodeError

from .batch import RequestBatch
from .events import OfflineReplicas
from .state import R_OFFLINE

log = logging.getLogger("kbroker.controller")

LOG_DIR_FAILURE = 1          # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent


class LogDirEventZNode:
    """``/log_dir_event_notification/log_dir_event_<10 digits>`` (Kafka's LogDirEventNotificationSequenceZNode)."""
    PARENT = "/log_dir_event_notification"
    PREFIX = "log_dir_event_"

    @classmethod
    def path_prefix(cls):
        return "%s/%s" % (cls.PARENT, cls.PREFIX)

    @staticmethod
    def encode(broker_id, event=LOG_DIR_FAILURE):
        return json.dumps({"version": 1, "broker": broker_id, "event": event}, separators=(",", ":")).encode()

    @staticmethod
    def decode(data):
        """(broker id, event)."""
        d = json.loads(data.decode("utf-8"))
        return int(d["broker"]), int(d.get("event", LOG_DIR_FAILURE))


def propagate_log_dir_event(backend, broker_id):
    """The broker's side: announce that a log dir of ``broker_id`` failed (may raise CoordinationError)."""
    return backend.create(LogDirEventZNode.path_prefix(), LogDirEventZNode.encode(broker_id), sequence=True,
                          makepath=True)


class LogDirs:
    def __init__(self, core):
        self.core = core

    def on_notification(self, _event):
        """LogDirEvent: read and delete every notification, then ask each named live broker for its offline
        replicas (a LeaderAndIsr of all its partitions; the answers come back as OfflineReplicas)."""
        core = self.core
        ctx = core.ctx
        try:
            names = core.backend.get_children(LogDirEventZNode.PARENT)
        except NoNodeError:
            return
        brokers = set()
        for name in names:
            path = "%s/%s" % (LogDirEventZNode.PARENT, name)
            data = core.backend.get_or_none(path)[0]
            if data is not None:
                try:
                    bid, event = LogDirEventZNode.decode(data)
                    if event == LOG_DIR_FAILURE:
                        brokers.add(bid)
                except (ValueError, KeyError, TypeError):
                    log.warning("ignoring malformed log dir event notification %s", path)
            try:
                core.backend.delete(path)
            except NoNodeError:
                pass
        for bid in sorted(brokers):
            if bid not in ctx.live_brokers:
                continue
            log.info("controller: broker %d reported a failed log dir; asking which of its replicas are offline", bid)
            batch = RequestBatch()
            for tp, replicas in sorted(ctx.assignments.items()):
                st = ctx.leadership.get(tp)
                if bid in replicas and st is not None and tp[0] not in ctx.topics_to_delete:
                    batch.add_leader_and_isr([bid], PartitionLeadership(tp[0], tp[1], st, replicas))
            batch.leader_and_isr_callbacks[bid] = self.answer_callback(bid)
            core.send(batch)

    def answer_callback(self, bid):
        """fn(LeaderAndIsr answer of broker ``bid``): its KAFKA_STORAGE_ERROR partitions -> OfflineReplicas (every
        LeaderAndIsr's answer goes through it, batch.py: a new controller learns the offline replicas from the
        LeaderAndIsr it sends every replica, a restarted broker whose dir still fails from its first one)."""
        core = self.core

        def cb(resp):
            tps = tuple(sorted((t["topic_name"], p["partition_index"])
                               for t in _topics(resp) for p in t.get("partition_errors", ())
                               if p.get("error_code") == errors.KAFKA_STORAGE_ERROR))
            if tps:
                core.enqueue(OfflineReplicas(bid, tps))
        return cb

    def on_offline(self, event):
        """OfflineReplicas: ``event.partitions`` of broker ``event.broker_id`` are in its failed log dir."""
        core = self.core
        ctx = core.ctx
        bid = event.broker_id
        if bid not in ctx.live_brokers:
            return
        tps = [tp for tp in event.partitions if tp in ctx.assignments and tp[0] not in ctx.topics_to_delete
               and bid not in ctx.offline_replicas.get(tp, ())]      # known already: nothing to do (no loop)
        if not tps:
            return
        log.warning("controller: replicas of broker %d offline (failed log dir): %s", bid,
                    ", ".join("%s-%d" % tp for tp in tps))
        batch = RequestBatch()
        for tp in tps:
            ctx.offline_replicas.setdefault(tp, set()).add(bid)
            ctx.replica_states[(tp, bid)] = R_OFFLINE
            core.partitions.remove_replicas_from_isr(batch, tp, [bid])
        core.partitions.trigger_online(batch)
        batch.add_update_metadata(sorted(ctx.live_brokers), tps)
        core.send(batch)

    def forget_broker(self, bid):
        """A broker failed or registered again: its replicas are no longer known offline."""
        offline = self.core.ctx.offline_replicas
        for tp in [tp for tp, bs in offline.items() if bid in bs]:
            offline[tp].discard(bid)
            if not offline[tp]:
                del offline[tp]


def _topics(resp):
    """The per-topic partition errors of a LeaderAndIsr answer: "partition_errors" flat in v0-4 (the decoder also
    gives v5's "topics", empty), by topic from v5."""
    if not resp.get("partition_errors"):
        return resp.get("topics") or []
    by_topic = {}
    for p in resp.get("partition_errors", ()):
        by_topic.setdefault(p["topic_name"], []).append(p)
    return [{"topic_name": t, "partition_errors": ps} for t, ps in by_topic.items()]
