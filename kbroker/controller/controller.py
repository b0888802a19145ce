"""The cluster controller (Kafka 0.10-style, ZooKeeper mode): one broker decides partition leadership for all.

This module is the core: the election, the term, the event loop and the watches' lifetime. What the controller does
with an event lives in collaborators, each built with the core and owning its part (docs/architecture.md,
"controller"): ``Brokers`` (brokers.py: live brokers, broker epochs, endpoints), ``PartitionStateMachine``
(partitions.py: elections, state znode writes, what each change sends), ``TopicChanges`` (topic_changes.py: topics
and partitions appearing and vanishing), and the duties ``TopicDeletion`` (deletion.py), ``Reassignments``
(reassignment.py), ``PreferredLeaders`` (leader_balance.py) and ``ControlledShutdown`` (shutdown.py).

Election: every broker's Controller watches ``/controller``; when it is absent each tries to create it (ephemeral,
``{"version":1,"brokerid":N,"timestamp":"<ms>"}``); the winner increments ``/controller_epoch`` with a conditional
set (creating ``1`` when missing) and becomes active. Every request it sends carries that epoch; brokers refuse
lower epochs (STALE_CONTROLLER_EPOCH 11). It resigns -- drops its watches, connections and in-memory state -- when
``/controller`` disappears or names another broker, when its session expires, or when it finds a higher epoch in
``/controller_epoch`` or in a partition state it is about to overwrite (checked before every guarded event and on
every failed conditional write), so a paused-and-resumed old controller cannot overwrite its successor.

Term: from becoming active to resigning. ``generation`` counts terms (and resignations); a watch registered through
``watch_data`` / ``watch_children`` enqueues its event only while the term that registered it lasts, so a
callback from an earlier term is dropped. ``ctx`` (state.py) is rebuilt from ZooKeeper at the start of each term
and dropped at its end; collaborators holding term resources (watches, the rebalance timer) release them in
``on_resign``.

Threading: all state changes happen in ONE greenlet draining the event queue (``events.py``: the event classes,
their sources and the dispatch table ``_handlers``). Watch callbacks, the public entry points (``controlled_shutdown``,
session hooks) and channel callbacks only enqueue. Handlers re-read ZooKeeper where it is the source of truth, so
duplicated or coalesced events are harmless.

The narrow core collaborators use: ``ctx``, ``epoch``, ``broker_id``, ``backend``, ``topic_store``, ``channel``,
``cfg(key)``, ``enqueue(event)``, ``watch_data`` / ``watch_children(path, event)``, ``send(batch)`` and
``check_still_controller()``; and each other through the core's attributes ``brokers``, ``partitions``,
``topics``, ``deletion``, ``reassignments``, ``leader_balance``, ``shutdowns``. Nothing else of the core is theirs.
"""
import logging
import time

import gevent
from gevent.event import AsyncResult, Event
from gevent.queue import Queue

from kbroker import errors
from kbroker.config.keys import CONFIG_KEYS
from kbroker.coord.errors import BadVersionError, NodeExistsError, NoNodeError
from kbroker.coord.metadata_store import TopicStore
from kbroker.coord.znodes import (
    BrokerIdZNode, ControllerEpochZNode, ControllerZNode, DeleteTopicsZNode, IsrChangeNotificationSequenceZNode,
    ensure_persistent_paths,
)
from kbroker.timeslice import TimeSlice

from . import events as ev
from .admin_znodes import PreferredReplicaElectionZNode, ReassignPartitionsZNode
from .batch import RequestBatch
from .brokers import Brokers
from .deletion import TopicDeletion
from .leader_balance import PreferredLeaders
from .log_dirs import LogDirEventZNode, LogDirs
from .partitions import PartitionStateMachine
from .reassignment import Reassignments
from .shutdown import ControlledShutdown
from .state import ControllerContext, ControllerMoved
from .stats import ControllerStats
from .topic_changes import TopicChanges

log = logging.getLogger("kbroker.controller")

class Controller:
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
        self.stats = ControllerStats()   # the metrics' counters (stats.py); written by the event greenlet only
        self._slice = TimeSlice()        # the event in progress's time slice (``tick``)
        self.generation = 0
        self._queue = Queue()
        self._pending = 0
        self._idle = Event()
        self._idle.set()
        self._loop = None
        self._controller_watch = None
        self._watches = []
        self._running = False
        self.brokers = Brokers(self)
        self.partitions = PartitionStateMachine(self)
        self.topics = TopicChanges(self)
        self.deletion = TopicDeletion(self)
        self.reassignments = Reassignments(self)
        self.leader_balance = PreferredLeaders(self)
        self.shutdowns = ControlledShutdown(self)
        self.log_dirs = LogDirs(self)
        self._term_scoped = (self.topics, self.reassignments, self.leader_balance)
        self._handlers = {
            ev.Elect: self._on_elect,
            ev.Resign: self._on_resign,
            ev.Rewatch: self._on_rewatch,
            ev.ControlledShutdownRequest: self.shutdowns.on_request,
            ev.ElectLeadersRequest: self.leader_balance.on_elect_request,
            ev.BrokerChange: self.brokers.on_change,
            ev.TopicChange: self.topics.on_change,
            ev.PartitionModification: self.topics.on_partition_modification,
            ev.IsrChange: self.partitions.on_isr_change,
            ev.DeleteTopics: self.deletion.on_marked,
            ev.StopReplicaResponse: self.deletion.on_stop_replica_response,
            ev.Reassign: self.reassignments.on_request,
            ev.ReassignedIsrChange: self.reassignments.on_isr_change,
            ev.ReassignmentsRequest: self.reassignments.on_api_request,
            ev.UncleanElectionEnabled: self._on_unclean_enabled,
            ev.PreferredElection: self.leader_balance.on_request,
            ev.AutoRebalance: self.leader_balance.on_timer,
            ev.LogDirEvent: self.log_dirs.on_notification,
            ev.OfflineReplicas: self.log_dirs.on_offline,
        }
        missing = [cls.__name__ for cls in ev.ALL if cls not in self._handlers]
        if missing:
            raise TypeError("controller events without a handler: %s" % ", ".join(missing))

    # ------------------------------------------------------------------------------------------------ config

    def cfg(self, key):
        """The broker key ``key`` from ``config`` (a BrokerConfig, or a plain dict in tests), else its default from
        the key table (one source of defaults)."""
        v = self.config.get(key) if hasattr(self.config, "get") else None
        return CONFIG_KEYS[key].default if v is None else v

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
        # The event greenlet first (Kafka closes its event manager before resigning): an event may be paused in a
        # time slice or a ZooKeeper call, and must not resume on the state the resignation clears.
        in_loop = self._loop is not None and self._loop is gevent.getcurrent()
        if self._loop is not None and not in_loop:
            self._loop.kill()
        if self.active:
            self._resign()
        self._pending = 0
        self._idle.set()
        # Not connected (the ensemble down): the read would only wait out the operation timeout; our /controller
        # goes with the session.
        if was_active and getattr(self.backend, "connected", True):
            try:
                data, stat = self.backend.get(ControllerZNode.path())
                if ControllerZNode.decode(data) == self.broker_id:
                    self.backend.delete(ControllerZNode.path(), version=stat.version)
            except Exception:  # noqa: BLE001 -- gone already / session closed
                pass
        if in_loop:
            self._loop.kill()            # stopped from one of its own events: it ends here

    def wait_idle(self, timeout=5.0):
        """Block until the event queue is empty and no event is being handled; False on timeout (tests)."""
        return self._idle.wait(timeout)

    drain = wait_idle

    def session_expired(self):
        """Coordination session lost: resign (the ephemeral /controller is gone with the session)."""
        self.enqueue(ev.Resign())

    def session_renewed(self):
        """A new session exists: watches are re-registered and the election re-run."""
        self.enqueue(ev.Rewatch())

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
        self.enqueue(ev.ControlledShutdownRequest(broker_id, broker_epoch, result))
        if timeout is None:
            timeout = self.cfg("controller.socket.timeout.ms") / 1000.0
        return result.get(timeout=timeout)

    def elect_leaders(self, election_type, partitions, timeout=None):
        """ElectLeaders (KIP-460): ``election_type`` 0 preferred / 1 unclean over ``partitions`` ([(topic, p)] or None
        = all) -> {(topic, p): (error code, message or None, the elected leader or -1)}
        (``leader_balance.PreferredLeaders.elect_requested``).
        NotController when this broker is not (or stops being) the controller."""
        if not self.active:
            raise errors.NotController("broker %d is not the controller" % self.broker_id)
        result = AsyncResult()
        self.enqueue(ev.ElectLeadersRequest(election_type, None if partitions is None else tuple(partitions), result))
        if timeout is None:
            timeout = self.cfg("controller.socket.timeout.ms") / 1000.0
        return result.get(timeout=timeout)

    def alter_reassignments(self, changes, timeout=None):
        """AlterPartitionReassignments (KIP-455): ``changes`` {(topic, p): target replicas or None = cancel} ->
        {(topic, p): (error code, message or None)} once each is started, cancelled or refused
        (``reassignment.Reassignments.alter_requested``). NotController when this broker is not the controller."""
        return self._reassignments_request(tuple(changes.items()), None, timeout)

    def list_reassignments(self, partitions=None, timeout=None):
        """ListPartitionReassignments (KIP-455): {(topic, p): (replicas, adding, removing)} of the ongoing
        reassignments among ``partitions`` ([(topic, p)] or None = all). NotController as above."""
        return self._reassignments_request(None, None if partitions is None else tuple(partitions), timeout)

    def unclean_election_enabled(self):
        """unclean.leader.election.enable just became true here (dynamic broker config): elect leaders for the
        offline partitions (no-op unless this broker is the active controller)."""
        if self.active:
            self.enqueue(ev.UncleanElectionEnabled())

    def _on_unclean_enabled(self, _event):
        batch = RequestBatch()
        self.partitions.trigger_online(batch)
        self.send(batch)

    def _reassignments_request(self, changes, partitions, timeout):
        if not self.active:
            raise errors.NotController("broker %d is not the controller" % self.broker_id)
        result = AsyncResult()
        self.enqueue(ev.ReassignmentsRequest(changes, partitions, result))
        if timeout is None:
            timeout = self.cfg("controller.socket.timeout.ms") / 1000.0
        return result.get(timeout=timeout)

    def broker_epoch(self, bid):
        """The epoch stamped on requests to ``bid`` (-1 for a broker not live)."""
        return self.brokers.broker_epoch(bid)

    # ------------------------------------------------------------------------------------------------ event loop

    def enqueue(self, event):
        """Queue an ``events.Event`` for the event greenlet (any greenlet may call this)."""
        self._pending += 1
        self._idle.clear()
        self._queue.put(event)

    def _run(self):
        while True:
            event = self._queue.get()
            try:
                if event.guarded:
                    if not self.active:
                        continue
                    self.check_still_controller()
                started = time.monotonic()
                self._slice = TimeSlice()
                self._handlers[type(event)](event)
                if type(event) is ev.BrokerChange and self.active:
                    # Kafka's LeaderElectionRateAndTimeMs times exactly this event (stats.py).
                    self.stats.record_broker_change((time.monotonic() - started) * 1000.0)
            except ControllerMoved as e:
                log.warning("broker %d: controller moved (%s); resigning", self.broker_id, e)
                self._resign()
            except Exception:
                log.exception("controller event %s failed", type(event).__name__)
            finally:
                self._pending -= 1
                if self._pending <= 0:
                    self._pending = 0
                    self._idle.set()

    def tick(self):
        """Called once per partition by the collaborators' per-partition loops: yields to the event loop once the
        event has run a time slice (20 ms, kbroker/timeslice.py). Without it one event over a 10,000-partition topic
        (create: elect and log each; delete: 20,000 state changes, each a state-change.log line) held the loop
        0.2-0.6 s and every client of this broker waited. Yielding mid-event is safe because only this greenlet
        writes the controller's state: ZooKeeper watches, channel callbacks and request handlers only ``enqueue``
        (and every ZooKeeper call of an event already yields while it waits)."""
        self._slice.tick()

    def check_still_controller(self):
        """ControllerMoved unless ``/controller_epoch`` is our epoch and ``/controller`` names this broker."""
        data, _ = self.backend.get_or_none(ControllerEpochZNode.path())
        if data is None or ControllerEpochZNode.decode(data) != self.epoch:
            raise ControllerMoved("/controller_epoch is %r, ours is %d" % (data, self.epoch))
        data, _ = self.backend.get_or_none(ControllerZNode.path())
        if data is None or ControllerZNode.decode(data) != self.broker_id:
            raise ControllerMoved("/controller is %r" % (data,))

    def answer(self, result, compute):
        """Answer a request a handler waits on (an unguarded event, events.py: ControlledShutdown, ElectLeaders)
        with ``compute()`` in ``result``: NOT_CONTROLLER when this broker is not (or no longer) the controller, so
        the caller never waits for nothing; ControllerMoved and errors that are not Kafka's are raised on after
        the caller has its answer (the loop resigns or logs them), a KafkaError only goes to the caller."""
        if not self.active:
            result.set_exception(errors.NotController("broker %d is not the controller" % self.broker_id))
            return
        try:
            self.check_still_controller()
            result.set(compute())
        except ControllerMoved:
            result.set_exception(errors.NotController("controller moved"))
            raise
        except Exception as e:  # noqa: BLE001 -- the caller gets the error, the loop goes on
            result.set_exception(e)
            if not isinstance(e, errors.KafkaError):
                raise

    def send(self, batch):
        """Queue a RequestBatch on the channel (stamped with this term's epoch); the batch is empty afterwards."""
        batch.send(self)

    # ------------------------------------------------------------------------------------------------ watches

    def watch_data(self, path, event):
        """Enqueue ``event`` on every change of ``path``'s data, for this term only. Returns the watch handle."""
        return self.backend.watch_data(path, self._term_callback(event))

    def watch_children(self, path, event):
        """Enqueue ``event`` on every change of ``path``'s children, for this term only."""
        return self.backend.watch_children(path, self._term_callback(event))

    def _term_callback(self, event):
        gen = self.generation

        def cb(*_):
            if gen != self.generation or not self._running:
                return False      # the term ended: the backend drops the watch
            self.enqueue(event)
        return cb

    def _register_watches(self):
        self._watches = [
            self.watch_children(BrokerIdZNode.path(0).rsplit("/", 1)[0], ev.BrokerChange()),
            self.watch_children("/brokers/topics", ev.TopicChange()),
            self.watch_children(DeleteTopicsZNode.path(), ev.DeleteTopics()),
            self.watch_data(ReassignPartitionsZNode.path(), ev.Reassign()),
            self.watch_data(PreferredReplicaElectionZNode.path(), ev.PreferredElection()),
            self.watch_children(IsrChangeNotificationSequenceZNode.path_prefix().rsplit("/", 1)[0], ev.IsrChange()),
            self.watch_children(LogDirEventZNode.PARENT, ev.LogDirEvent()),
        ]
        self.topics.watch_all()

    # ------------------------------------------------------------------------------------------------ election

    def _watch_controller(self):
        if self._controller_watch is not None:
            self._controller_watch.cancel()

        def on_change(data, stat):
            if not self._running:
                return False
            self.enqueue(ev.Elect())
        self._controller_watch = self.backend.watch_data(ControllerZNode.path(), on_change)

    def _on_rewatch(self, _event):
        self._watch_controller()

    def _on_resign(self, _event):
        if self.active:
            self._resign()

    def _on_elect(self, _event):
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
        """A new term: epoch + 1, the context rebuilt from ZooKeeper, every broker told the cluster, watches set."""
        self._increment_epoch()
        log.info("broker %d is the controller, epoch %d", self.broker_id, self.epoch)
        self.generation += 1
        self.ctx = ControllerContext("Controller %d epoch %d" % (self.broker_id, self.epoch))
        self.brokers.load()
        self.topics.load()
        self.partitions.initialize()
        self.active = True
        batch = RequestBatch()
        self.partitions.on_become_controller(batch)
        self.send(batch)
        self._register_watches()
        self.leader_balance.start()

    def _resign(self):
        log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.epoch)
        self.active = False
        self.generation += 1
        for w in self._watches:
            w.cancel()
        self._watches = []
        for part in self._term_scoped:
            part.on_resign()
        self.channel.remove_all()
        self.ctx = None
