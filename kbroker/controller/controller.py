"""The cluster controller (Kafka 0.10-style, ZooKeeper mode): one broker decides partition leadership for all.

Election: every broker's Controller watches ``/controller``; when it is absent each tries to create it (ephemeral,
``{"version":1,"brokerid":N,"timestamp":"<ms>"}``); the winner increments ``/controller_epoch`` with a conditional
set (creating ``1`` when missing) and becomes active. Every request it sends carries that epoch; brokers refuse
lower epochs (STALE_CONTROLLER_EPOCH 11). It resigns -- drops its watches, connections and in-memory state -- when
``/controller`` disappears or names another broker, when its session expires, or when it finds a higher epoch in
``/controller_epoch`` or in a partition state it is about to overwrite (checked before every event it handles and on
every failed conditional write), so a paused-and-resumed old controller cannot overwrite its successor.

Threading: all state changes happen in ONE greenlet draining ``self._queue``. Coordination watch callbacks and the
public entry points (``controlled_shutdown``, session hooks, channel callbacks) only enqueue events. Handlers re-read
ZooKeeper where it is the source of truth, so duplicated or coalesced events are harmless.

State kept while active (rebuilt from ZooKeeper on every election): live brokers (registrations), shutting-down
brokers, assignments ``{(t, p): [replicas]}``, leadership ``{(t, p): LeaderAndIsr}`` (the state znode + its data
version), partition states (NonExistent/New/Online/Offline) and replica states (New/Online/Offline/
ReplicaDeletionStarted/Successful/Ineligible/NonExistent), topics queued for deletion, reassignments in progress.

Partition state znode writes (``{"controller_epoch","leader","version":1,"leader_epoch","isr"}``) are conditional
on the data version the controller last saw; ``leader_epoch`` grows by one on every write the controller makes
(leader change or ISR change). On a version conflict it re-reads (a leader changed the ISR, issue 5) and retries,
or resigns if the znode was written by a higher controller epoch.

Elections (``election.py``): new partition -> first live assigned replica, ISR = live assigned replicas; offline ->
first assigned replica that is live and in the ISR, ISR = live ISR members; none -> stays offline (with
``unclean.leader.election.enable``, broker or topic level, the first live replica). A replica leaving (broker
failure, controlled shutdown, reassignment) is removed from the ISR; when it led the partition the leader becomes
-1, and the last ISR member is kept so it can lead cleanly when it returns (Kafka >= 1.1 behaviour).

Broker epochs (KIP-380): a broker's epoch is the czxid of its ``/brokers/ids/<id>`` node, so each registration --
a restart, or a new session after an expiry -- has a new, larger one. The controller reads every live broker's
epoch with its registration and stamps it on each LeaderAndIsr / UpdateMetadata / StopReplica to that broker
(``broker_epoch``); the broker refuses any other value (STALE_BROKER_EPOCH 77), so requests meant for an earlier
incarnation are not applied to a new one. On every ``/brokers/ids`` change the controller compares the epochs: a
broker still listed but with another epoch was *bounced* -- killed and restarted, and registered again, between two
reads of the children ([1,2,3] -> [1,2] -> [1,2,3]; issue 8: its partitions stayed led by a broker that knew
nothing of them) -- and is handled as a failure followed by a startup: leadership and ISR membership move away
from it, then it gets LeaderAndIsr for all its replicas and every broker an UpdateMetadata naming it. The same
epochs authenticate ControlledShutdown: the request must carry the named broker's current epoch.

Controller requests go to each broker's ``control.plane.listener.name`` endpoint when that is configured (KIP-291;
brokers then accept them only there), else to its inter-broker endpoint.

Timers: ``auto.leader.rebalance.enable`` runs a check every ``leader.imbalance.check.interval.seconds``; a broker
whose preferred partitions are led by others in more than ``leader.imbalance.per.broker.percentage`` % of cases gets
them back (preferred replica election).
"""
import logging
from collections import namedtuple

import gevent
from gevent.event import AsyncResult, Event
from gevent.queue import Queue

from kbroker import errors
from kbroker.coord.errors import BadVersionError, NodeExistsError, NoNodeError
from kbroker.coord.metadata_store import TopicStore
from kbroker.coord.znodes import (
    BrokerIdZNode, ControllerEpochZNode, ControllerZNode, DeleteTopicsZNode, IsrChangeNotificationSequenceZNode,
    TopicPartitionStateZNode, TopicZNode, ensure_persistent_paths,
)

from . import election
from .batch import ALL, RequestBatch
from .topics import create_topic
from .admin_znodes import PreferredReplicaElectionZNode, ReassignPartitionsZNode
from .state import (
    ControllerMoved, NEW, NON_EXISTENT, OFFLINE, ONLINE, R_DELETION_INELIGIBLE, R_DELETION_SUCCESSFUL, R_NEW, R_OFFLINE, R_ONLINE,
    ControllerContext,
)
from kbroker.cluster_state import LeaderAndIsr, PartitionLeadership
from .deletion import TopicDeletion
from .leader_balance import PreferredLeaders
from .reassignment import Reassignment
from .shutdown import ControlledShutdown

log = logging.getLogger("kbroker.controller")

# Kafka's LeaderAndIsr.LeaderDuringDelete in UpdateMetadata: brokers drop the partition from their cache.
LEADER_DURING_DELETE = -2
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
# How often a conditional partition-state write is retried after a concurrent (leader) ISR change.
WRITE_RETRIES = 5

_DEFAULTS = {
    "delete.topic.enable": True,
    "unclean.leader.election.enable": False,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.check.interval.seconds": 300,
    "leader.imbalance.per.broker.percentage": 10,
    "controller.socket.timeout.ms": 30000,
    "inter.broker.listener.name": None,
    "control.plane.listener.name": None,
    "security.inter.broker.protocol": "PLAINTEXT",
    "num.partitions": 1,
    "default.replication.factor": 1,
}


Pending = namedtuple("Pending", "name args")


class Controller(TopicDeletion, PreferredLeaders, Reassignment, ControlledShutdown):
    def __init__(self, broker_id, backend, channel, config=None, topic_store=None):
        self.broker_id = broker_id
        self.backend = backend
        self.channel = channel
        self.config = config if config is not None else {}
        self.topic_store = topic_store or TopicStore(backend)
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        self.active_controller_id = -1
        self.ctx = None
        self._queue = Queue()
        self._pending = 0
        self._idle = Event()
        self._idle.set()
        self._loop = None
        self._controller_watch = None
        self._watches = []
        self._topic_watches = {}
        self._reassign_watches = {}
        self._generation = 0
        self._rebalancer = None
        self._running = False

    # ------------------------------------------------------------------------------------------------ config

    def _cfg(self, key):
        v = self.config.get(key) if hasattr(self.config, "get") else None
        return _DEFAULTS.get(key) if v is None else v

    # ------------------------------------------------------------------------------------------------ lifecycle

    def start(self):
        """Spawn the event loop and join the election (watch on /controller). Returns self."""
        if self._running:
            return self
        self._running = True
        ensure_persistent_paths(self.backend)
        self._loop = gevent.spawn(self._run)
        for hook, fn in (("on_session_expired", self.session_expired), ("on_reconnected", self.session_renewed)):
            if hasattr(self.backend, hook):
                getattr(self.backend, hook)(fn)
        self._watch_controller()
        return self

    def stop(self):
        """Leave the election: resign if active (deleting our /controller node, as a closed session would)."""
        if not self._running:
            return
        self._running = False
        if hasattr(self.backend, "remove_session_hook"):
            self.backend.remove_session_hook(self.session_expired)
            self.backend.remove_session_hook(self.session_renewed)
        if self._controller_watch is not None:
            self._controller_watch.cancel()
        was_active = self.active
        if self.active:
            self._resign()
        if self._loop is not None:
            self._loop.kill()
        self._pending = 0
        self._idle.set()
        if was_active:
            try:
                data, stat = self.backend.get(ControllerZNode.path())
                if ControllerZNode.decode(data) == self.broker_id:
                    self.backend.delete(ControllerZNode.path(), version=stat.version)
            except Exception:  # noqa: BLE001 -- gone already / session closed
                pass

    def wait_idle(self, timeout=5.0):
        """Block until the event queue is empty and no event is being handled; False on timeout (tests)."""
        return self._idle.wait(timeout)

    drain = wait_idle

    def session_expired(self):
        """Coordination session lost: resign (the ephemeral /controller is gone with the session)."""
        self._enqueue("resign")

    def session_renewed(self):
        """A new session exists: watches are re-registered and the election re-run."""
        self._enqueue("rewatch")

    # ------------------------------------------------------------------------------------------------ public API

    def is_active(self):
        return self.active

    def controlled_shutdown(self, broker_id, broker_epoch, timeout=None):
        """Move leadership off ``broker_id``; returns the [(topic, p)] it still leads (RF > 1 only).

        ``broker_epoch`` must be the broker's current epoch (the czxid of its registration), which only the broker
        itself and ZooKeeper readers know: a client naming some broker cannot make the controller move leadership.
        NotController when this broker is not (or stops being) the controller; BrokerNotAvailable for a broker
        that is not registered; StaleBrokerEpoch when ``broker_epoch`` is another one (a request from an earlier
        incarnation, a forgery, or a registration this controller has not processed yet -- the broker retries).
        """
        if not self.active:
            raise errors.NotController("broker %d is not the controller" % self.broker_id)
        result = AsyncResult()
        self._enqueue("controlled_shutdown", broker_id, broker_epoch, result)
        if timeout is None:
            timeout = self._cfg("controller.socket.timeout.ms") / 1000.0
        return result.get(timeout=timeout)

    def create_topic(self, name, num_partitions=-1, replication_factor=-1, assignment=None, configs=None,
                     validate_only=False, validate_configs=None):
        """CreateTopics/auto-creation in cluster mode (``topics.create_topic``); callable on any broker, any
        greenlet. The active controller elects the leaders when its /brokers/topics watch fires."""
        return create_topic(self.topic_store, name, num_partitions, replication_factor, assignment, configs,
                            validate_only, default_partitions=self._cfg("num.partitions"),
                            default_replication_factor=self._cfg("default.replication.factor"),
                            validate_configs=validate_configs)

    # ------------------------------------------------------------------------------------------------ event loop

    def _enqueue(self, name, *args):
        self._pending += 1
        self._idle.clear()
        self._queue.put(Pending(name, args))

    def _run(self):
        while True:
            ev = self._queue.get()
            try:
                if ev.name in ("elect", "resign", "rewatch", "controlled_shutdown"):
                    getattr(self, "_ev_" + ev.name)(*ev.args)
                elif self.active:
                    self._check_still_controller()
                    getattr(self, "_ev_" + ev.name)(*ev.args)
            except ControllerMoved as e:
                log.warning("broker %d: controller moved (%s); resigning", self.broker_id, e)
                self._resign()
            except Exception:
                log.exception("controller event %s failed", ev.name)
            finally:
                self._pending -= 1
                if self._pending <= 0:
                    self._pending = 0
                    self._idle.set()

    def _check_still_controller(self):
        data, _ = self.backend.get_or_none(ControllerEpochZNode.path())
        if data is None or ControllerEpochZNode.decode(data) != self.epoch:
            raise ControllerMoved("/controller_epoch is %r, ours is %d" % (data, self.epoch))
        data, _ = self.backend.get_or_none(ControllerZNode.path())
        if data is None or ControllerZNode.decode(data) != self.broker_id:
            raise ControllerMoved("/controller is %r" % (data,))

    # ------------------------------------------------------------------------------------------------ election

    def _watch_controller(self):
        if self._controller_watch is not None:
            self._controller_watch.cancel()

        def on_change(data, stat):
            if not self._running:
                return False
            self._enqueue("elect")
        self._controller_watch = self.backend.watch_data(ControllerZNode.path(), on_change)

    def _ev_rewatch(self):
        self._watch_controller()

    def _ev_resign(self):
        if self.active:
            self._resign()

    def _ev_elect(self):
        if not self._running:
            return
        data, stat = self.backend.get_or_none(ControllerZNode.path())
        if data is not None:
            cid = ControllerZNode.decode(data)
            self.active_controller_id = cid
            if cid != self.broker_id:
                if self.active:
                    self._resign()
                return
            if self.active:
                return
            # Our id but we are not active: a node left by an earlier session of this broker. It vanishes when
            # that session expires (the watch brings us back here); one from our own session is removed now.
            if stat.ephemeral_owner == self.backend.session_id and self.backend.session_id:
                try:
                    self.backend.delete(ControllerZNode.path(), version=stat.version)
                except (NoNodeError, BadVersionError):
                    pass
            return
        if self.active:
            self._resign()
        try:
            self.backend.create(ControllerZNode.path(), ControllerZNode.encode(self.broker_id), ephemeral=True)
        except NodeExistsError:
            data, _ = self.backend.get_or_none(ControllerZNode.path())
            self.active_controller_id = ControllerZNode.decode(data) if data is not None else -1
            return
        self.active_controller_id = self.broker_id
        try:
            self._on_become_controller()
        except ControllerMoved as e:
            log.warning("broker %d lost the controller race while starting: %s", self.broker_id, e)
            self._resign()

    def _increment_epoch(self):
        path = ControllerEpochZNode.path()
        data, stat = self.backend.get_or_none(path)
        if data is None:
            try:
                self.backend.create(path, ControllerEpochZNode.encode(1))
                self.epoch, self.epoch_zk_version = 1, 0
                return
            except NodeExistsError:
                data, stat = self.backend.get(path)
        new = ControllerEpochZNode.decode(data) + 1
        try:
            st = self.backend.set(path, ControllerEpochZNode.encode(new), version=stat.version)
        except BadVersionError:
            raise ControllerMoved("/controller_epoch changed while incrementing it") from None
        self.epoch, self.epoch_zk_version = new, st.version

    def _on_become_controller(self):
        self._increment_epoch()
        log.info("broker %d is the controller, epoch %d", self.broker_id, self.epoch)
        self._generation += 1
        self.ctx = ctx = ControllerContext()
        ids = self._read_broker_ids()
        for bid in ids:
            reg, epoch = self._read_registration(bid)
            if reg is not None:
                ctx.live_brokers[bid] = reg
                ctx.broker_epochs[bid] = epoch
        for bid, reg in ctx.live_brokers.items():
            self._connect(bid, reg)
        for topic in self.topic_store.topics():
            self._load_topic(topic)
        for tp, replicas in ctx.assignments.items():
            for r in replicas:
                ctx.replica_states[(tp, r)] = R_ONLINE if r in ctx.live_brokers else R_OFFLINE
            st = ctx.leadership.get(tp)
            if st is None:
                ctx.partition_states[tp] = NEW
            elif st.leader in ctx.live_brokers:
                ctx.partition_states[tp] = ONLINE
            else:
                ctx.partition_states[tp] = OFFLINE
        self.active = True
        batch = RequestBatch()
        live = sorted(ctx.live_brokers)
        batch.add_update_metadata(live, ALL)
        # Like Kafka's replica state machine startup: every live replica learns its partition's leadership.
        for tp, replicas in sorted(ctx.assignments.items()):
            st = ctx.leadership.get(tp)
            if st is not None:
                targets = [r for r in replicas if r in ctx.live_brokers]
                if targets:
                    batch.add_leader_and_isr(targets, PartitionLeadership(tp[0], tp[1], st, replicas))
        self._trigger_online_partitions(batch)
        # A leader that died while no controller was active (typically the previous controller itself) is still
        # named in its partition's state: record it as gone (leader -1, last ISR member kept), as the failure
        # handler would have, so ZooKeeper readers and every broker's metadata agree the partition is offline.
        for tp, st in sorted(ctx.leadership.items()):
            if st.leader >= 0 and st.leader not in ctx.live_brokers and tp[0] not in ctx.topics_to_delete:
                self._remove_replica_from_isr(batch, tp, st.leader)
        batch.send(self)
        self._register_watches()
        if self._cfg("auto.leader.rebalance.enable"):
            self._rebalancer = gevent.spawn(self._rebalance_timer, self._generation)

    def _register_watches(self):
        gen = self._generation

        def make(name, *args):
            def cb(*_):
                if gen != self._generation or not self._running:
                    return False
                self._enqueue(name, *args)
            return cb
        b = self.backend
        self._watches = [
            b.watch_children(BrokerIdZNode.path(0).rsplit("/", 1)[0], make("broker_change")),
            b.watch_children("/brokers/topics", make("topic_change")),
            b.watch_children(DeleteTopicsZNode.path(), make("delete_topics")),
            b.watch_data(ReassignPartitionsZNode.path(), make("reassign")),
            b.watch_data(PreferredReplicaElectionZNode.path(), make("preferred_election")),
            b.watch_children(IsrChangeNotificationSequenceZNode.path_prefix().rsplit("/", 1)[0],
                             make("isr_change")),
        ]
        for topic in list(self.ctx.topics()):
            self._watch_topic(topic)

    def _watch_topic(self, topic):
        gen = self._generation

        def cb(data, stat):
            if gen != self._generation or not self._running:
                return False
            self._enqueue("partition_modification", topic)
        old = self._topic_watches.pop(topic, None)
        if old is not None:
            old.cancel()
        self._topic_watches[topic] = self.backend.watch_data(TopicZNode.path(topic), cb)

    def _resign(self):
        log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.epoch)
        self.active = False
        self._generation += 1
        for w in self._watches:
            w.cancel()
        for w in list(self._topic_watches.values()) + list(self._reassign_watches.values()):
            w.cancel()
        self._watches, self._topic_watches, self._reassign_watches = [], {}, {}
        if self._rebalancer is not None:
            self._rebalancer.kill(block=False)
            self._rebalancer = None
        self.channel.remove_all()
        self.ctx = None

    # ------------------------------------------------------------------------------------------------ reading ZK

    def _read_broker_ids(self):
        try:
            return sorted(int(c) for c in self.backend.get_children("/brokers/ids"))
        except NoNodeError:
            return []

    def _read_registration(self, bid):
        """(BrokerRegistration, broker epoch = the node's czxid), or (None, -1) when the broker is not registered
        or its node cannot be read."""
        data, stat = self.backend.get_or_none(BrokerIdZNode.path(bid))
        if data is None:
            return None, -1
        try:
            return BrokerIdZNode.decode(data), stat.czxid
        except (ValueError, KeyError, TypeError):
            log.error("unreadable registration of broker %d: %r; ignoring the broker", bid, data[:200])
            return None, -1

    def _read_state(self, tp):
        data, stat = self.backend.get_or_none(TopicPartitionStateZNode.path(*tp))
        if data is None:
            return None
        st = TopicPartitionStateZNode.decode(data, stat.version)
        if st.controller_epoch > self.epoch:
            raise ControllerMoved("%s-%d state written by controller epoch %d" % (tp[0], tp[1], st.controller_epoch))
        return LeaderAndIsr.of(st)

    def _load_topic(self, topic):
        try:
            assignment = self.topic_store.assignment(topic)
        except errors.UnknownTopicOrPartition:
            return {}
        for p, replicas in assignment.items():
            tp = (topic, p)
            self.ctx.assignments[tp] = list(replicas)
            st = self._read_state(tp)
            if st is not None:
                self.ctx.leadership[tp] = st
        return assignment

    def _connect(self, bid, reg):
        ep = self._endpoint(reg, control=True)
        if ep is not None:
            self.channel.add_broker(bid, ep[0], ep[1])

    def _endpoint(self, reg, control=False):
        """(host, port) of a registration's inter-broker listener (first endpoint as a fallback); with ``control``,
        its ``control.plane.listener.name`` endpoint when both sides have one (where controller requests go)."""
        cp = (self._cfg("control.plane.listener.name") or "").strip().upper() if control else None
        if cp:
            for name, host, port in reg.endpoints:
                if name.upper() == cp:
                    return host, port
        want = self._cfg("inter.broker.listener.name")
        proto = self._cfg("security.inter.broker.protocol")
        for name, host, port in reg.endpoints:
            if want is not None and name == want:
                return host, port
        if want is None:
            for name, host, port in reg.endpoints:
                if reg.security_protocol_map.get(name, name) == proto:
                    return host, port
        return (reg.endpoints[0][1], reg.endpoints[0][2]) if reg.endpoints else None

    # ------------------------------------------------------------------------------------------------ batch view

    def broker_epoch(self, bid):
        """The epoch stamped on requests to ``bid`` (-1 for a broker not live)."""
        return self.ctx.broker_epochs.get(bid, -1) if self.ctx else -1

    def inter_broker_endpoint(self, bid):
        reg = self.ctx.live_brokers.get(bid) if self.ctx else None
        return self._endpoint(reg) if reg is not None else None

    def update_metadata_brokers(self):
        out = []
        for bid, reg in sorted(self.ctx.live_brokers.items()):
            eps = [{"port": port, "host": host, "listener": name,
                    "security_protocol": SECURITY_PROTOCOL_IDS.get(reg.security_protocol_map.get(name, name), 0)}
                   for name, host, port in reg.endpoints]
            out.append({"id": bid, "endpoints": eps, "rack": reg.rack})
        return out

    def all_partitions(self):
        return [tp for tp in self.ctx.assignments if tp[0] not in self.ctx.topics_to_delete]

    def update_metadata_state(self, tp):
        ctx = self.ctx
        replicas = ctx.assignments.get(tp)
        st = ctx.leadership.get(tp)
        if replicas is None or tp[0] in ctx.topics_to_delete:
            return {"partition_index": tp[1], "controller_epoch": self.epoch, "leader": LEADER_DURING_DELETE,
                    "leader_epoch": -1, "isr": [], "zk_version": -1, "replicas": list(replicas or []),
                    "offline_replicas": []}
        if st is None:
            st = LeaderAndIsr(-1, -1, (), self.epoch, -1)
        return {"partition_index": tp[1], "controller_epoch": st.controller_epoch, "leader": st.leader,
                "leader_epoch": st.leader_epoch, "isr": list(st.isr), "zk_version": st.zk_version,
                "replicas": list(replicas), "offline_replicas": [r for r in replicas if r not in ctx.live_brokers]}

    def response_callback(self, api_key, bid):
        def cb(resp):
            if resp.get("error_code"):
                log.warning("broker %d answered controller request %d with error %s", bid, api_key,
                            errors.error_name(resp["error_code"]))
        return cb

    # ------------------------------------------------------------------------------------------------ state writes

    def _leaders_allowed(self):
        """Brokers that may lead: live and not shutting down."""
        return set(self.ctx.live_brokers) - self.ctx.shutting_down

    def _write_leadership(self, tp, choose):
        """Conditionally rewrite the state znode with ``choose(current LeaderAndIsr) -> (leader, isr) | None``.

        leader_epoch + 1, controller_epoch = ours. Returns the new LeaderAndIsr, or None when ``choose`` declined or
        the partition vanished. Re-reads and retries on a concurrent change; ControllerMoved when a newer
        controller wrote it.
        """
        ctx = self.ctx
        for _ in range(WRITE_RETRIES):
            cur = ctx.leadership.get(tp)
            if cur is None:
                return None
            res = choose(cur)
            if res is None:
                # Our copy may be stale (a leader changed the ISR and its notification is not in yet): decide
                # again on the znode's current content before declining.
                fresh = self._read_state(tp)
                if fresh is None or fresh.zk_version == cur.zk_version:
                    return None
                ctx.leadership[tp] = fresh
                continue
            leader, isr = res[0], tuple(res[1])
            leader_epoch = cur.leader_epoch + 1
            try:
                stat = self.backend.set(TopicPartitionStateZNode.path(*tp),
                                        TopicPartitionStateZNode.encode(leader, leader_epoch, isr, self.epoch),
                                        version=cur.zk_version)
            except BadVersionError:
                fresh = self._read_state(tp)
                if fresh is None:
                    ctx.leadership.pop(tp, None)
                    return None
                ctx.leadership[tp] = fresh
                continue
            except NoNodeError:
                ctx.leadership.pop(tp, None)
                return None
            new = LeaderAndIsr(leader, leader_epoch, isr, self.epoch, stat.version)
            ctx.leadership[tp] = new
            return new
        log.error("could not update the state of %s-%d after %d attempts", tp[0], tp[1], WRITE_RETRIES)
        return None

    def _send_leadership(self, batch, tp, is_new=False, extra=()):
        """LeaderAndIsr to the partition's live replicas (+ ``extra``), UpdateMetadata to every live broker."""
        ctx = self.ctx
        replicas = ctx.assignments[tp]
        st = ctx.leadership[tp]
        targets = sorted({r for r in list(replicas) + list(extra) if r in ctx.live_brokers})
        reassign = ctx.reassignments.get(tp)
        adding = [r for r in reassign.target if r not in reassign.original] if reassign else ()
        removing = [r for r in reassign.original if r not in reassign.target] if reassign else ()
        if targets:
            batch.add_leader_and_isr(targets, PartitionLeadership(tp[0], tp[1], st, replicas, adding, removing, is_new))
        batch.add_update_metadata(sorted(ctx.live_brokers), [tp])

    def _unclean_allowed(self, topic):
        v = self.topic_store.topic_config(topic).get("unclean.leader.election.enable")
        if v is None:
            return bool(self._cfg("unclean.leader.election.enable"))
        return str(v).lower() == "true"

    # ------------------------------------------------------------------------------------------------ partition SM

    def _trigger_online_partitions(self, batch, tps=None):
        """New and Offline partitions (not being deleted) -> Online, electing leaders where possible."""
        ctx = self.ctx
        if tps is None:
            tps = [tp for tp, s in ctx.partition_states.items() if s in (NEW, OFFLINE)]
        todo = [tp for tp in sorted(tps) if tp[0] not in ctx.topics_to_delete]
        created = self._create_states([tp for tp in todo if ctx.partition_states.get(tp, NON_EXISTENT) == NEW])
        for tp in todo:
            state = ctx.partition_states.get(tp, NON_EXISTENT)
            if state == NEW:
                self._init_leadership(batch, tp, created.get(tp))
            elif state == OFFLINE:
                self._elect_offline(batch, tp)

    def _create_states(self, tps):
        """First leader and ISR of new partitions, their state znodes created in one pipelined go (Kafka 0.10 made
        one synchronous create per partition: ~23 ms each against a 3-node ensemble, 23 s for 1,000 partitions).
        Returns {tp: ((leader, isr), create result or CoordinationError)} for those with a live replica."""
        ctx = self.ctx
        allowed = self._leaders_allowed()
        plans = []
        for tp in tps:
            res = election.new_partition_leader(ctx.assignments[tp], allowed)
            if res is not None:
                plans.append((tp, res))
        if not plans:
            return {}
        results = self.backend.create_many(
            [(TopicPartitionStateZNode.path(*tp), TopicPartitionStateZNode.encode(leader, 0, isr, self.epoch), True)
             for tp, (leader, isr) in plans])
        return {tp: (plan, result) for (tp, plan), result in zip(plans, results)}

    def _init_leadership(self, batch, tp, created):
        """NewPartition -> Online. ``created``: ((leader, isr), create result) from _create_states, None when no
        replica was live to lead."""
        ctx = self.ctx
        if created is None:
            log.warning("%s-%d: no live replica among %s; stays new", tp[0], tp[1], ctx.assignments[tp])
            return
        (leader, isr), outcome = created
        if isinstance(outcome, NodeExistsError):
            st = self._read_state(tp)
            ctx.leadership[tp] = st
            if st.leader in self._leaders_allowed():
                ctx.partition_states[tp] = ONLINE
                self._send_leadership(batch, tp)
            else:
                ctx.partition_states[tp] = OFFLINE
                self._elect_offline(batch, tp)
            return
        if isinstance(outcome, Exception):
            raise outcome
        ctx.leadership[tp] = LeaderAndIsr(leader, 0, isr, self.epoch, 0)
        ctx.partition_states[tp] = ONLINE
        for r in ctx.assignments[tp]:
            if r in ctx.live_brokers:
                ctx.replica_states[(tp, r)] = R_ONLINE
        self._send_leadership(batch, tp, is_new=True)

    def _elect_offline(self, batch, tp):
        ctx = self.ctx
        replicas = ctx.assignments[tp]
        allowed = self._leaders_allowed()
        unclean = None

        def choose(cur):
            nonlocal unclean
            res = election.offline_partition_leader(replicas, cur.isr, allowed, False)
            if res is None:
                if unclean is None:
                    unclean = self._unclean_allowed(tp[0])
                if unclean:
                    res = election.offline_partition_leader(replicas, cur.isr, allowed, True)
                    if res is not None:
                        log.warning("%s-%d: unclean leader election of broker %d (ISR was %s)",
                                    tp[0], tp[1], res[0], cur.isr)
            return res
        new = self._write_leadership(tp, choose)
        if new is None:
            log.warning("%s-%d: no live in-sync replica (replicas %s); stays offline", tp[0], tp[1], replicas)
            return False
        ctx.partition_states[tp] = ONLINE
        self._send_leadership(batch, tp)
        return True

    def _remove_replica_from_isr(self, batch, tp, broker):
        """Replica -> Offline: out of the ISR (leader -1 if it led; the last ISR member is kept)."""
        ctx = self.ctx

        def choose(cur):
            if broker not in cur.isr and cur.leader != broker:
                return None
            leader = -1 if cur.leader == broker else cur.leader
            isr = [r for r in cur.isr if r != broker] or list(cur.isr)
            return leader, isr
        new = self._write_leadership(tp, choose)
        ctx.replica_states[(tp, broker)] = R_OFFLINE
        if new is not None:
            if new.leader < 0:
                ctx.partition_states[tp] = OFFLINE
            self._send_leadership(batch, tp)
        return new

    # ------------------------------------------------------------------------------------------------ brokers

    def _ev_broker_change(self):
        """Diff ``/brokers/ids`` and each registration's epoch against the live brokers: gone -> failure, new ->
        startup, same id with another epoch (bounced) -> failure, then startup (module docstring)."""
        ctx = self.ctx
        regs = {}
        for bid in self._read_broker_ids():
            reg, epoch = self._read_registration(bid)
            if reg is not None:
                regs[bid] = (reg, epoch)
        live = set(ctx.live_brokers)
        new = sorted(set(regs) - live)
        dead = sorted(live - set(regs))
        bounced = sorted(bid for bid in set(regs) & live if regs[bid][1] != ctx.broker_epochs.get(bid))
        for bid in bounced:
            log.info("controller: broker %d registered again (broker epoch %d -> %d): handled as failed, then started",
                     bid, ctx.broker_epochs.get(bid, -1), regs[bid][1])
        if dead or bounced:
            self._on_broker_failure(sorted(dead + bounced))
        if new or bounced:
            self._on_broker_startup(sorted(new + bounced), regs)

    def _on_broker_failure(self, dead):
        ctx = self.ctx
        log.info("controller: brokers %s failed", dead)
        for bid in dead:
            ctx.live_brokers.pop(bid, None)
            ctx.broker_epochs.pop(bid, None)
            ctx.shutting_down.discard(bid)
            self.channel.remove_broker(bid)
        batch = RequestBatch()
        dead_set = set(dead)
        affected = []
        for tp, replicas in sorted(ctx.assignments.items()):
            if not dead_set & set(replicas):
                continue
            affected.append(tp)
            if tp[0] in ctx.topics_to_delete:
                for r in replicas:
                    if r in dead_set and ctx.replica_states.get((tp, r)) != R_DELETION_SUCCESSFUL:
                        ctx.replica_states[(tp, r)] = R_DELETION_INELIGIBLE
                continue
            st = ctx.leadership.get(tp)
            if st is not None and st.leader in dead_set:
                ctx.partition_states[tp] = OFFLINE
        self._trigger_online_partitions(batch)
        for tp in affected:
            if tp[0] in ctx.topics_to_delete:
                continue
            for r in ctx.assignments[tp]:
                if r in dead_set:
                    self._remove_replica_from_isr(batch, tp, r)
        batch.add_update_metadata(sorted(ctx.live_brokers), affected)
        batch.send(self)

    def _on_broker_startup(self, new, regs):
        """``regs``: {id: (registration, epoch)} as the broker-change handler read them."""
        ctx = self.ctx
        log.info("controller: brokers %s started", new)
        for bid in new:
            reg, epoch = regs[bid]
            ctx.live_brokers[bid] = reg
            ctx.broker_epochs[bid] = epoch
            self._connect(bid, reg)
        new = [b for b in new if b in ctx.live_brokers]
        batch = RequestBatch()
        batch.add_update_metadata(sorted(ctx.live_brokers), ALL)
        new_set = set(new)
        for tp, replicas in sorted(ctx.assignments.items()):
            if tp[0] in ctx.topics_to_delete:
                continue
            here = [r for r in replicas if r in new_set]
            if not here:
                continue
            for r in here:
                ctx.replica_states[(tp, r)] = R_ONLINE
            st = ctx.leadership.get(tp)
            if st is not None:
                batch.add_leader_and_isr(here, PartitionLeadership(tp[0], tp[1], st, replicas))
        self._trigger_online_partitions(batch)
        batch.send(self)
        for tp in list(ctx.reassignments):
            if new_set & set(ctx.reassignments[tp].target):
                self._on_reassignment(tp)
        self._resume_deletions(retry_ineligible=True)

    # ------------------------------------------------------------------------------------------------ topics

    def _ev_topic_change(self):
        ctx = self.ctx
        current = set(self.topic_store.topics())
        known = ctx.topics()
        for topic in sorted(known - current):
            # Removed behind our back (or by our own deletion): forget it.
            self._forget_topic(topic)
        new_tps = []
        for topic in sorted(current - known):
            assignment = self._load_topic(topic)
            self._watch_topic(topic)
            new_tps.extend((topic, p) for p in assignment)
        if new_tps:
            self._on_new_partitions(new_tps)

    def _ev_partition_modification(self, topic):
        ctx = self.ctx
        if topic not in ctx.topics():
            return
        try:
            assignment = self.topic_store.assignment(topic)
        except errors.UnknownTopicOrPartition:
            return
        added = [(topic, p) for p in assignment if (topic, p) not in ctx.assignments]
        if not added:
            return
        if topic in ctx.topics_to_delete:
            log.warning("ignoring partitions added to %s: it is being deleted", topic)
            return
        for tp in added:
            ctx.assignments[tp] = list(assignment[tp[1]])
        self._on_new_partitions(added)

    def _on_new_partitions(self, tps):
        ctx = self.ctx
        batch = RequestBatch()
        for tp in tps:
            if tp in ctx.leadership:  # state znode already present (e.g. written before a failover)
                st = ctx.leadership[tp]
                ctx.partition_states[tp] = ONLINE if st.leader in self._leaders_allowed() else OFFLINE
            else:
                ctx.partition_states[tp] = NEW
            for r in ctx.assignments[tp]:
                ctx.replica_states[(tp, r)] = R_NEW if r in ctx.live_brokers else R_OFFLINE
        for tp in tps:
            if ctx.partition_states[tp] == ONLINE:
                self._send_leadership(batch, tp)
        self._trigger_online_partitions(batch, tps)
        batch.send(self)

    def _forget_topic(self, topic):
        ctx = self.ctx
        for tp in [tp for tp in ctx.assignments if tp[0] == topic]:
            ctx.assignments.pop(tp, None)
            ctx.leadership.pop(tp, None)
            ctx.partition_states.pop(tp, None)
            ctx.reassignments.pop(tp, None)
            w = self._reassign_watches.pop(tp, None)
            if w is not None:
                w.cancel()
        for key in [k for k in ctx.replica_states if k[0][0] == topic]:
            del ctx.replica_states[key]
        ctx.topics_to_delete.discard(topic)
        w = self._topic_watches.pop(topic, None)
        if w is not None:
            w.cancel()

    # ------------------------------------------------------------------------------------------------ ISR changes

    def _ev_isr_change(self):
        ctx = self.ctx
        parent = IsrChangeNotificationSequenceZNode.path_prefix().rsplit("/", 1)[0]
        try:
            children = self.backend.get_children(parent)
        except NoNodeError:
            return
        tps = set()
        for c in children:
            path = parent + "/" + c
            data, _ = self.backend.get_or_none(path)
            if data is not None:
                try:
                    tps.update(IsrChangeNotificationSequenceZNode.decode(data))
                except (ValueError, KeyError, TypeError):
                    log.warning("ignoring malformed ISR change notification %s", path)
            try:
                self.backend.delete(path)
            except NoNodeError:
                pass
        tps = sorted(tp for tp in tps if tp in ctx.assignments)
        for tp in tps:
            st = self._read_state(tp)
            if st is not None:
                ctx.leadership[tp] = st
        if tps:
            batch = RequestBatch()
            batch.add_update_metadata(sorted(ctx.live_brokers), tps)
            batch.send(self)
        for tp in tps:
            if tp in ctx.reassignments:
                self._on_reassignment(tp)
