"""The broker: the composition root and lifecycle owner. It builds configuration, coordination backend, controller,
metadata cache, hosted partitions, the group coordinator and the network server, hands the handlers their
collaborators once (``Services``, kbroker/server/context.py: the handlers never see this object), starts them in
order and stops them in reverse.

One code path for both modes. With ``zookeeper.connect`` the backend is a ZooKeeper ensemble; without it, the
embedded single-node backend with the same interface. Either way this broker registers ``/brokers/ids/<id>``, joins
the controller election, and learns what to host from LeaderAndIsr / UpdateMetadata sent by whichever broker is
controller (itself, in embedded mode, through the channel's in-process path).

Ownership:
- topic metadata (assignments, topic configs, partition state) lives in the coordination backend under Kafka's znode
  paths, read and written through ``TopicStore`` (``TopicAdmin`` for client requests, the controller for the rest);
- what this broker believes about the cluster is ``metadata_cache``, changed only by UpdateMetadata;
- ``self.partitions`` (the partitions hosted here) changes only in ``apply_leader_and_isr`` / ``stop_replicas``;
- the logs are owned by ``LogManager``;
- the LogConfig each topic runs with here by ``TopicConfigs`` (topic_admin.py), changed by TopicAdmin's
  AlterConfigs and ConfigWatcher, forgotten for deleted topics (a MetadataCache deletion listener); the LogManager
  loads and creates logs with it and is the one writer of ``Log.config`` afterwards (``set_topic_config``).
This object keeps no state of its own beyond its collaborators and its periodic tasks; ``write_isr`` and
``replica_address`` are the replica manager's bridges to the coordination backend and the metadata cache (the
replica layer imports neither).
"""
import logging
import os
import time

import gevent
import gevent.ssl
from gevent.event import Event
from gevent.threadpool import ThreadPool

from kbroker import errors
from kbroker.coord import make_backend
from kbroker.coord.metadata_store import TopicStore
from kbroker.coord.controller_view import ControllerView
from kbroker.coord.registration import BrokerRegistrar, cluster_id as read_cluster_id, generate_broker_id
from kbroker.coord.znodes import ensure_persistent_paths
from kbroker.gcpolicy import GcPolicy
from kbroker.internal_topics import GROUP_METADATA_TOPIC
from kbroker.controller.log_dirs import propagate_log_dir_event
from kbroker.log import descriptors, dir_failure
from kbroker.log.log import Log
from kbroker.log.manager import LogManager, read_properties
from kbroker.producer_ids import ProducerIdManager
from kbroker.quota.manager import ClientQuotas
from kbroker.quota.store import CONSUMER as _CONSUMER_QUOTA, PRODUCER as _PRODUCER_QUOTA, QuotaAdmin, QuotaLimits
from kbroker.quota.replication import RATE_KEYS as _REPLICATION_RATE_KEYS, ReplicationQuotas
from kbroker.replica.isr_writes import IsrWriteBatcher
from kbroker.replica.manager import ReplicaManager
from kbroker.config import listener_sasl, listener_ssl
from kbroker.config.dynamic import DynamicBrokerConfig
from kbroker.security import jaas
from kbroker.security.authenticator import ListenerSasl, MechanismContext, load_factory
from kbroker.security.sasl.client import inter_broker_factory
from kbroker.security import tls
from kbroker.security.authorizer import AclAuthorizer
from kbroker.security.client_channel import ChannelSecurity
from kbroker.security.tls import ListenerTls
from kbroker.security.scram_store import ScramAdmin, ScramStore
from kbroker.security.zk_client import ZK_TLS_KEYS, zk_sasl_credentials, zk_tls_context
from kbroker.server.context import READY_WAIT_S, ControlPlane, Services
from kbroker.server import stats as _stats
from kbroker.server.stats import BrokerStats
from kbroker.metrics.exporter import MetricsExporter
from kbroker.metrics.requests import server_collectors
from kbroker.server.loopcall import make_owner_call
from kbroker.server.fetch_sessions import FetchSessionCache
from kbroker.server.metadata_cache import MetadataCache
from kbroker.handlers import registry as handler_registry
from kbroker.server.router import Router
from kbroker.server.server import KafkaServer
from kbroker.topic_admin import ConfigWatcher, TopicAdmin, TopicConfigs, default_log_config

log = logging.getLogger(__name__)

# How long start() waits for the controller's first UpdateMetadata naming this broker (then it serves anyway); a
# Metadata request waits as long for ``ready``.
METADATA_WAIT_S = READY_WAIT_S


def static_quotas(cfg):
    """The static client-id quotas of ``quota.producer.default`` / ``quota.consumer.default`` (Kafka 0.10.1's
    lowest-precedence defaults) as QuotaLimits takes them; Long.MAX_VALUE, their default, is no quota."""
    keys = (("quota.producer.default", _PRODUCER_QUOTA), ("quota.consumer.default", _CONSUMER_QUOTA))
    return {kind: float(cfg[key]) for key, kind in keys if cfg[key] < 2 ** 63 - 1}


class Broker:
    def __init__(self, config):
        self.config = config
        self.broker_id = config["broker.id"]
        self.rack = config.get("broker.rack")
        self.backend = make_backend(config)
        self.topic_store = TopicStore(self.backend)
        self._isr_writes = IsrWriteBatcher(self.topic_store)   # leaders' ISR changes, batched (isr_writes.py)
        self.metadata_cache = MetadataCache()
        self.topic_configs = None
        self.topic_admin = None
        self.producer_ids = None
        self.replica_manager = None
        self.cluster_id = None
        self.log_manager = None
        self.server = None
        self.controller = None
        self.channel = None
        self.registrar = None
        self.authorizer = None   # the ACL authorizer when authorizer.class.name selects it
        self._channel_security = {}   # {listener: ChannelSecurity} of this broker's connections to other brokers
        self.scram_store = None  # every user's SCRAM credentials (kbroker/security/scram_store.py)
        self.scram_admin = None
        # Controller requests are accepted only from the controller /controller and /controller_epoch name
        # (controller_view), stamped with this broker's epoch (registrar.epoch), and, when set, only on the
        # control-plane listener: the handlers see these three as ``control_plane`` (kbroker/handlers/cluster.py).
        self.controller_view = None
        self.control_plane_listener = config.control_plane_listener
        self.control_plane = None
        # What the handlers get (kbroker/server/context.py), built once in start() before the listeners open.
        self.services = None
        self.endpoints = []
        self.router = Router(handler_registry())
        self._tasks = []
        self._pool = ThreadPool(1)
        # Hosting a LeaderAndIsr's new partitions (directories, segments: seconds for 10,000) has its own worker:
        # behind a compaction in _pool it could wait minutes, longer than the controller waits for the answer.
        self._replica_pool = ThreadPool(1)
        self.group_coordinator = None
        self.transaction_coordinator = None
        self._txn_links = None
        self.started = False
        # Set once start() has heard the controller's first UpdateMetadata naming this broker (or given up after
        # METADATA_WAIT_S). The listener must open earlier -- the controller's LeaderAndIsr/UpdateMetadata reach
        # this broker through it -- but a client's Metadata answered before then says controller -1 and no
        # leaders, and librdkafka's AdminClient then waits ~35 s for a controller; Metadata waits for this instead.
        self.ready = Event()
        # Metrics (issue 13): the handlers' and connections' counters, and the endpoint that reads them (started
        # first in start(), stopped last in shutdown(): /readyz says why the broker is not ready all along). Without
        # an endpoint (metrics.http.port=-1) nothing reads the request and topic counters: none are kept (Services.
        # stats None), which saves their ~2 us a request (bench/metrics_overhead.py).
        self.stats = BrokerStats.from_config(config) if config["metrics.http.port"] >= 0 else None
        self.metadata_cache.deletion_listeners.append(self._forget_topic_stats)
        self.exporter = None
        self.gc_policy = None      # kbroker/gcpolicy.py, from start()
        self.state = _stats.NOT_RUNNING     # Kafka's BrokerState (kafka_server_kafkaserver_brokerstate)
        self._lag_hws = None       # consumer-group lag's cache of remote high watermarks (kbroker/metrics/groups.py)
        self.shutting_down = False

    # -------------------------------------------------------------------------------------------- lifecycle
    def start(self):
        from kbroker.handlers.cluster import local_dispatcher
        cfg = self.config
        collectors = server_collectors(self.stats, lambda: self.server, time.monotonic,
                                       lambda: self.state) if self.stats else ()
        self.exporter = MetricsExporter(cfg, collectors, readiness=self.readiness).start()
        self.state = _stats.STARTING
        if not cfg.embedded:
            # SASL to ZooKeeper from KAFKA_OPTS' JAAS Client section (kbroker/security/zk_client.py); resolved here,
            # inside start(), so a bad JAAS setup is a startup failure with its message, like any other.
            self.backend.sasl = zk_sasl_credentials()
            self.backend.ssl_context, self.backend.tls_client_auth = zk_tls_context(
                {key: cfg[key] for key in ZK_TLS_KEYS})
        self.backend.start()
        ensure_persistent_paths(self.backend)
        self.controller_view = ControllerView(self.backend).start()
        if self.broker_id < 0:
            self.broker_id = self._stored_broker_id()
            if self.broker_id is None:
                self.broker_id = generate_broker_id(self.backend, cfg["reserved.broker.max.id"])
        self.cluster_id = read_cluster_id(self.backend)
        self.producer_ids = ProducerIdManager(self.backend, self.broker_id)
        # Worker threads (cleaner) change a log's segment list only through the event loop's thread.
        Log.owner_call = staticmethod(make_owner_call(gevent.get_hub()))
        self.topic_configs = TopicConfigs(cfg, self.topic_store, lambda: self.log_manager, lambda: self.partitions)
        # Logs found on disk start with their topic's config (retention, compaction and rolls apply to them before
        # any LeaderAndIsr hosts them), as Kafka's LogManager loads them with the topic overrides from ZooKeeper.
        # num.recovery.threads.per.data.dir native threads open the logs of each dir (LogManager._load_dir).
        # Segment descriptors are bounded per process (kbroker/log/descriptors.py): set before any log opens.
        descriptors.POOL.set_limit(cfg["log.open.segment.files.max"])
        load_threads = cfg["num.recovery.threads.per.data.dir"]
        load_pool = ThreadPool(load_threads) if load_threads > 1 else None
        try:
            self.log_manager = LogManager(cfg.log_dirs, default_log_config(cfg), broker_id=self.broker_id,
                                          topic_config=self.topic_configs.log_config, load_pool=load_pool)
        finally:
            if load_pool is not None:
                load_pool.kill()
        # The log cleaner never cleans past a partition's last stable offset (KIP-98; asked on the event loop).
        self.log_manager.cleaner.stable_offset_of = self._last_stable_offset
        self.metadata_cache.deletion_listeners.append(self.topic_configs.forget)
        self.topic_admin = TopicAdmin(self.topic_store, cfg, self.metadata_cache, self.topic_configs.apply)
        # KIP-73: the static rates, overridden by /config/brokers/<id> or <default> (kept current by the watcher).
        self.replication_quotas = ReplicationQuotas(
            self.broker_id, cfg["replication.quota.window.num"], cfg["replication.quota.window.size.seconds"],
            static={k: cfg[k] for k in _REPLICATION_RATE_KEYS}, overrides_for=self.topic_configs.overrides)
        # KIP-226: /config/brokers/<id> and <default> over server.properties; the one watcher of their changes
        # (topic LogConfigs recomputed from the new defaults, the throttle bounds).
        self.dynamic_config = DynamicBrokerConfig(cfg, self.broker_id, self.backend, gevent.spawn, listeners=[
            lambda changed, per_broker, default: self.replication_quotas.apply_dynamic(per_broker, default),
            self._dynamic_defaults_changed]).start()
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, log_config_for=self.topic_configs.log_config, isr_writer=self.write_isr,
            connect=self.replica_address, flusher=self._flush_log, config=cfg,
            isr_eligible=lambda broker_id: self.replica_address(broker_id) is not None,
            partition_exists=lambda t, p: self.metadata_cache.partition(t, p) is not None,
            offload=lambda fn, *args: self._replica_pool.apply(fn, args),
            security=self.channel_security(cfg.inter_broker_listener),
            replication_quotas=self.replication_quotas).start()
        hub = gevent.get_hub()       # a failed log dir (KIP-112): reported from any thread, handled on the loop
        self.log_manager.failures.on_failure = lambda d: hub.loop.run_callback_threadsafe(
            gevent.spawn, self._log_dir_failed, d)
        self._start_group_coordinator()
        self._build_controller()
        self._start_transaction_coordinator()
        self._start_authorizer()
        # SCRAM credentials (/config/users) cached before the listeners open; ConfigWatcher keeps them current.
        self.scram_store = ScramStore(self.backend).load_all()
        self.scram_admin = ScramAdmin(self.backend, self.scram_store)
        # Client quotas (/config/clients, /config/users) likewise; the static defaults are the lowest precedence.
        self.quota_limits = QuotaLimits(self.backend, static=static_quotas(cfg)).load_all()
        self.control_plane = ControlPlane(self.controller_view, self.control_plane_listener)
        self.services = Services(
            config=cfg, broker_id=self.broker_id, cluster_id=self.cluster_id, metadata=self.metadata_cache,
            replicas=self.replica_manager, topics=self.topic_admin, producer_ids=self.producer_ids,
            groups=self.group_coordinator, control_plane=self.control_plane, controller=self.controller,
            ready=self.ready, authorizer=self.authorizer, scram=self.scram_admin, stats=self.stats,
            client_quotas=QuotaAdmin(self.backend, self.quota_limits),
            # Always built: quotas may be added at any time; without any, a record is one dict read.
            quotas=ClientQuotas(self.quota_limits, cfg["quota.window.num"], cfg["quota.window.size.seconds"]),
            transactions=self.transaction_coordinator, replication=self.replication_quotas.leader,
            broker_configs=self.dynamic_config,
            fetch_sessions=FetchSessionCache(cfg["max.incremental.fetch.session.cache.slots"],
                                             follower_refresh_ms=cfg["replica.lag.time.max.ms"] // 4))
        self.channel.local_handler = local_dispatcher(self.services)
        # A broker that (re)joined may be taken back into idle ISRs this broker leads (fetch_sessions.py).
        sessions = self.services.fetch_sessions
        self.metadata_cache.broker_listeners.append(lambda joined: sessions.refresh_followers_soon())
        self._add_state_metrics()
        self.server = KafkaServer(self.services, self.router, cfg.listeners, cfg["socket.request.max.bytes"],
                                  sasl=self._sasl_listeners(), tls=self._tls_listeners())
        self.server.start()
        self.endpoints = self._endpoints()
        # Attached before it registers: a controller request may arrive while it does (the handlers wait for it).
        self.registrar = BrokerRegistrar(self.backend, self.broker_id, self.endpoints,
                                         cfg.listener_security_protocol_map, rack=self.rack)
        self.control_plane.attach_registrar(self.registrar)
        self.registrar.start()
        ConfigWatcher(self.backend, self.topic_configs.reload, user_changed=self.scram_store.user_changed,
                      entity_changed=self.quota_limits.entity_changed).start()
        self.scram_store.load_all()   # again, now that changes are watched: none written meanwhile is missed
        self.quota_limits.load_all()
        self.controller.start()  # joins the election
        if self.log_manager.offline_dirs:  # a dir that failed to load: the controller learns which replicas are out
            self._log_dir_event()
        self._wait_for_metadata()
        self.ready.set()
        self._tasks += [
            gevent.spawn(self._every, cfg["log.retention.check.interval.ms"], self._check_retention),
            # Every second at most: rolled segments and flush.ms deadlines are fsynced promptly even though
            # log.flush.scheduler.interval.ms defaults to Long.MAX (Kafka flushes rolled segments at once too).
            gevent.spawn(self._every, min(cfg["log.flush.scheduler.interval.ms"], 1000), self._flush),
            gevent.spawn(self._every, cfg["log.flush.offset.checkpoint.interval.ms"], self._checkpoint),
            gevent.spawn(self._every, cfg["log.flush.start.offset.checkpoint.interval.ms"], self._checkpoint_starts),
        ]
        if os.environ.get(dir_failure.INJECT_ENV) == "1":    # tests only: dir_failure.py's module docstring
            self._tasks.append(gevent.spawn(self._every, 100, self._poll_io_injection))
        if cfg["log.cleaner.enable"]:
            self._tasks.append(gevent.spawn(self._every, cfg["log.cleaner.backoff.ms"], self._clean))
        # Full collections would otherwise stall the loop in proportion to the heap (kbroker/gcpolicy.py)
        self.gc_policy = GcPolicy()
        self.gc_policy.settle()
        self._tasks.append(gevent.spawn(self.gc_policy.run, gevent.sleep))
        self.started = True
        self.state = _stats.RUNNING_AS_BROKER
        log.info("kbroker %d started (cluster %s, %s backend)", self.broker_id, self.cluster_id,
                 "embedded" if cfg.embedded else "ZooKeeper")

    def _start_authorizer(self):
        """The ACL authorizer (kbroker/security/authorizer.py) over this broker's coordination backend, every ACL
        loaded before the listeners open, when authorizer.class.name names it; else none (everything allowed)."""
        if self.config.authorizer_class is None:
            return
        cfg = self.config
        self.authorizer = AclAuthorizer(
            self.backend, super_users=AclAuthorizer.parse_super_users(cfg["super.users"]),
            allow_everyone_if_no_acl_found=cfg["allow.everyone.if.no.acl.found"]).start()

    def _sasl_listeners(self):
        """{listener: ListenerSasl} for the SASL listeners (kbroker/security/authenticator.py): each enabled
        mechanism's server factory from its JAAS entry (config/listener_sasl.py checked they exist)."""
        cfg = self.config
        out = {}
        parsed = listener_sasl.jaas_file() if listener_sasl.sasl_listeners(cfg) else None
        settings = {k: cfg[k] for k in ("sasl.kerberos.service.name", "sasl.kerberos.principal.to.local.rules")
                    if k in cfg}
        for listener in listener_sasl.sasl_listeners(cfg):
            mechanisms, jaas_values = listener_sasl.listener_settings(cfg, listener)
            context = MechanismContext(listener, self.scram_store.lookup, settings)
            factories = {m: load_factory(m, jaas.server_entry(listener, m, jaas_values, parsed), context)
                         for m in mechanisms}
            out[listener] = ListenerSasl(listener, factories, cfg["sasl.server.max.receive.size"],
                                         cfg["connection.failed.authentication.delay.ms"])
        return out

    def _tls_listeners(self):
        """{listener: ListenerTls} for the SSL / SASL_SSL listeners: the server context (gevent's SSLContext class:
        wrapped sockets are cooperative) and principal mapping rules of each (config/listener_ssl.py checked them
        when the config was built)."""
        cfg = self.config
        return {name: ListenerTls(tls.server_context(listener_ssl.settings(cfg, name), gevent.ssl.SSLContext),
                                  listener_ssl.mapper(cfg, name))
                for name in listener_ssl.tls_listeners(cfg)}

    def channel_security(self, listener):
        """How this broker reaches other brokers' endpoints of ``listener`` (the inter-broker or the control-plane
        listener): its security protocol, a TLS client context from this broker's own ssl.* settings for that
        listener (truststore, keystore for mutual TLS, host-name check), and for SASL_* the inter-broker SASL client
        (``_inter_broker_sasl``). One ChannelSecurity per listener, built on first use."""
        cached = self._channel_security.get(listener)
        if cached is None:
            cfg = self.config
            protocol = cfg.listener_security_protocol_map.get(listener, "PLAINTEXT")
            context = None
            if protocol in listener_ssl.TLS_PROTOCOLS:
                context = tls.client_context(listener_ssl.settings(cfg, listener), gevent.ssl.SSLContext)
            sasl = self._inter_broker_sasl(listener) if protocol.startswith("SASL_") else None
            cached = self._channel_security[listener] = ChannelSecurity(protocol, context, sasl)
        return cached

    def _inter_broker_sasl(self, listener):
        """``sasl(host) -> ClientMechanism`` for this broker's connections to ``listener`` (the SASL part wires the
        inter-broker mechanism here); None refuses to build the channel (ChannelSecurity: fail closed). The
        mechanism is sasl.mechanism.inter.broker.protocol, logged in with the listener's KafkaServer JAAS entry for
        it (kbroker/security/sasl/client.py inter_broker_factory; config/listener_sasl.py checked it exists)."""
        cfg = self.config
        mechanism = cfg["sasl.mechanism.inter.broker.protocol"]
        _, jaas_values = listener_sasl.listener_settings(cfg, listener)
        entry = jaas.server_entry(listener, mechanism, jaas_values, listener_sasl.jaas_file())
        return inter_broker_factory(mechanism, entry, cfg["sasl.kerberos.service.name"])

    def _build_controller(self):
        """The controller and its channel, not started yet (``Services`` names the controller; the channel's
        in-process path to this broker needs the ``Services``, so it is set once they exist)."""
        from kbroker.controller.channel import ControllerChannel
        from kbroker.controller.controller import Controller
        cfg = self.config
        self.channel = ControllerChannel(local_broker_id=self.broker_id,
                                         socket_timeout=cfg["controller.socket.timeout.ms"] / 1000.0,
                                         security_for=self.channel_security)
        self.controller = Controller(self.broker_id, self.backend, self.channel, cfg, self.topic_store)

    def _wait_for_metadata(self):
        deadline = time.monotonic() + METADATA_WAIT_S
        while self.broker_id not in self.metadata_cache.alive_broker_ids():
            if time.monotonic() >= deadline:
                log.warning("no UpdateMetadata from a controller after %.0f s; serving anyway", METADATA_WAIT_S)
                return
            gevent.sleep(0.02)

    def shutdown(self):
        log.info("shutting down broker %d", self.broker_id)
        self.shutting_down = True   # /readyz answers 503 from now on; /healthz until the exporter stops, last
        if self.started and not self.config.embedded and self.config["controlled.shutdown.enable"]:
            self.state = _stats.PENDING_CONTROLLED_SHUTDOWN
            if self.replica_manager is not None:
                self.replica_manager.begin_controlled_shutdown()   # KIP-841: no ISR rejoin while stopping
            self._controlled_shutdown()
            if self.server:
                self.server.drain()  # let clients hear NOT_LEADER_OR_FOLLOWER and move before we close
        self.state = _stats.BROKER_SHUTTING_DOWN
        self._stop_group_coordinator()
        self._stop_transaction_coordinator()
        if self.server:
            self.server.stop(wake=self._wake_waiters)
        if self.controller is not None:
            self.controller.stop()
        if self.channel is not None:
            self.channel.remove_all()
        gevent.killall(self._tasks)
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        self._isr_writes.stop()
        if self.registrar is not None:
            try:
                self.registrar.deregister()
            except Exception:  # noqa: BLE001 - the session may already be gone
                log.warning("could not deregister broker %d", self.broker_id)
        if self.log_manager:
            self.log_manager.shutdown()
        if self.controller_view is not None:
            self.controller_view.stop()
        if self.authorizer is not None:
            self.authorizer.stop()
        try:
            self.backend.stop()
        except Exception:  # noqa: BLE001 - shutdown must finish
            log.exception("stopping the coordination backend")
        self.started = False
        self.state = _stats.NOT_RUNNING
        if self._lag_hws is not None:
            self._lag_hws.stop()
        if self.exporter is not None:
            self.exporter.stop()

    def readiness(self):
        """Why this broker is not ready to serve clients (``/readyz``; empty = ready): still starting, not
        registered in the coordination backend, no controller known, no metadata from it yet, consumer-group
        partitions still loading, or shutting down."""
        if self.shutting_down:
            return ["shutting down"]
        reasons = []
        if not self.started:
            reasons.append("starting")
        if self.registrar is None or self.registrar.epoch < 0:
            reasons.append("not registered")
        if self.metadata_cache.controller_id < 0:
            reasons.append("controller unknown")
        if not self.ready.is_set():
            reasons.append("no metadata from the controller yet")
        coordinator = self.group_coordinator
        if coordinator is not None:
            from kbroker.coordinator.coordinator import LOADING
            loading = sum(1 for state in list(coordinator.owned.values()) if state == LOADING)
            if loading:
                reasons.append("partitions loading: %d consumer-offsets partitions" % loading)
        return reasons

    def _add_state_metrics(self):
        """The state collectors (kbroker/metrics/cluster.py: replication, controller, log flushes, quotas;
        groups.py: consumer-group lag, with its background cache of other leaders' high watermarks). None without
        an endpoint (metrics.http.port=-1): nothing would read them."""
        if not self.exporter.enabled:
            return
        from kbroker.metrics.cluster import state_collectors
        from kbroker.metrics.groups import GroupLagCollector, RemoteHighWatermarks, inter_broker_connect
        self._lag_hws = RemoteHighWatermarks(
            self.metadata_cache.leader, self.replica_address,
            inter_broker_connect(self.channel_security(self.config.inter_broker_listener))).start()
        for c in state_collectors(self.replica_manager, self.controller, self.services.quotas,
                                  self.services.fetch_sessions) + [
                GroupLagCollector(self.group_coordinator, self.replica_manager, self._lag_hws)]:
            self.exporter.add_collector(c)

    def _forget_topic_stats(self, deleted):
        """A metadata update deleted partitions: the per-topic counters of topics now gone go too."""
        if self.stats is None:
            return
        for topic in {t for t, _ in deleted}:
            if not self.metadata_cache.contains_topic(topic):
                self.stats.topics.remove(topic)

    def _controlled_shutdown(self):
        """Ask the controller to move leadership away before we go (Kafka's ControlledShutdown): retried
        ``controlled.shutdown.max.retries`` times, ``controlled.shutdown.retry.backoff.ms`` apart, until no
        partition is left led here. The rest of shutdown proceeds either way (an unclean-but-safe exit).

        Two differences from Kafka, both about attempts that cannot succeed: no backoff after the last attempt
        (Kafka sleeps once more before giving up), and no further attempt when no partition still led here has
        another replica on a live broker (``_movable``): the last broker of a replica set -- stopping a cluster,
        the last broker goes last -- spent 3 x 5 s retrying at the defaults, and only a broker starting *and*
        catching up within the backoff could have changed the answer."""
        cfg = self.config
        retries = cfg["controlled.shutdown.max.retries"]
        for attempt in range(1, retries + 1):
            if not getattr(self.backend, "connected", True):
                # No controller can move leadership without ZooKeeper as far as we can tell, and a controller stuck
                # on it would hold the request for request.timeout.ms (3 x 30 s: a SIGTERM with the ensemble down
                # hung): the attempt is skipped, so the whole phase lasts (max.retries - 1) x retry.backoff.ms.
                log.warning("controlled shutdown attempt %d skipped: not connected to ZooKeeper", attempt)
                if attempt < retries:
                    gevent.sleep(cfg["controlled.shutdown.retry.backoff.ms"] / 1000.0)
                continue
            try:
                remaining = self._request_controlled_shutdown()
            except Exception as e:  # noqa: BLE001 - controller moving or unreachable: retry
                log.warning("controlled shutdown attempt %d failed: %s", attempt, e)
                remaining = None
            if remaining == []:
                log.info("controlled shutdown complete: no partitions led by broker %d", self.broker_id)
                return
            if remaining:
                log.info("controlled shutdown attempt %d: %d partitions still led here", attempt, len(remaining))
                if attempt < retries and not self._movable(remaining):
                    log.warning("controlled shutdown: no partition still led here has another replica on a live "
                                "broker, so no retry can move them; shutting down without further attempts")
                    return
            if attempt < retries:
                gevent.sleep(cfg["controlled.shutdown.retry.backoff.ms"] / 1000.0)
        log.warning("controlled shutdown did not complete; shutting down anyway")

    def _movable(self, partitions):
        """Whether any of ``partitions`` [(topic, p)] has a replica other than this broker on a live broker, in
        this broker's metadata (a partition it does not know counts as movable: the controller may know more)."""
        live = self.metadata_cache.alive_broker_ids() - {self.broker_id}
        for topic, p in partitions:
            st = self.metadata_cache.partition(topic, p)
            if st is None or live.intersection(st.replicas):
                return True
        return False

    def _request_controlled_shutdown(self):
        """One ControlledShutdown (v3, with our broker epoch) to the controller, on its control-plane endpoint when
        one is configured; returns the partitions still led here."""
        epoch = self.registrar.epoch
        if self.controller is not None and self.controller.is_active():
            return list(self.controller.controlled_shutdown(self.broker_id, epoch))
        cid = self.metadata_cache.controller_id
        node = via = None
        for listener in (self.control_plane_listener, self.config.inter_broker_listener):
            if listener and node is None:
                node = next((b for b in self.metadata_cache.alive_brokers(listener) if b.id == cid), None)
                via = listener
        if node is None:
            raise errors.NotController("no live controller known")
        from kbroker.client.connection import BrokerConnection
        conn = BrokerConnection(node.host, node.port, client_id="kbroker-%d" % self.broker_id,
                                timeout=self.config["request.timeout.ms"] / 1000.0,
                                security=self.channel_security(via))
        try:
            resp = conn.request(7, {"broker_id": self.broker_id, "broker_epoch": epoch}, version=3)
        finally:
            conn.close()
        if resp["error_code"]:
            raise errors.error_for_code(resp["error_code"])("ControlledShutdown answered %d" % resp["error_code"])
        return [(r["topic_name"], r["partition_index"]) for r in resp["remaining_partitions"]]

    def _dynamic_defaults_changed(self, changed, _per_broker, _default):
        """A dynamic broker config changed: topics without their own value run with the new default at once; an
        unclean.leader.election.enable turned on lets the controller (if it is this broker) elect the offline
        partitions now."""
        if changed:
            self.topic_configs.reapply_all({t for t, _ in self.log_manager.all_logs()})
        if ("unclean.leader.election.enable" in changed and self.config["unclean.leader.election.enable"]
                and self.controller is not None):
            self.controller.unclean_election_enabled()

    @property
    def partitions(self):
        """{(topic, p): Partition} hosted here (owned by the ReplicaManager)."""
        return self.replica_manager.partitions() if self.replica_manager is not None else {}

    def _wake_waiters(self):
        """Wake every parked long-poll Fetch (they see their connection closing and answer now)."""
        for part in list(self.partitions.values()):
            part._wake()

    def _every(self, interval_ms, fn):
        interval = max(0.01, min(interval_ms, 2 ** 31) / 1000.0)
        while True:
            gevent.sleep(interval)
            try:
                fn()
            except Exception:  # noqa: BLE001 - a periodic task must keep running
                log.exception("periodic task %s", fn.__name__)

    def _check_retention(self):
        self.log_manager.check_retention(int(time.time() * 1000))

    def _flush(self):
        # fsync blocks: run it on a native thread so the event loop keeps serving requests.
        self._pool.apply(self.log_manager.flush_dirty, (int(time.time() * 1000),))

    def _flush_log(self, lg):
        self._pool.apply(lg.flush)

    def _log_dir_failed(self, log_dir):
        """A log dir went offline (kbroker/log/dir_failure.py, KIP-112): its partitions stop here, the controller
        is told; with no log dir left the broker halts, as Kafka's does (Exit.halt(1): nothing can be written)."""
        self.replica_manager.handle_log_dir_failure(log_dir)
        if not self.log_manager.online_dirs:
            log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(self.log_manager.log_dirs))
            logging.shutdown()
            os._exit(1)
        self._log_dir_event()

    def _log_dir_event(self):
        for attempt in range(30):        # ZooKeeper may be away: retried for ~30 s, then logged
            try:
                propagate_log_dir_event(self.backend, self.broker_id)
                return
            except Exception as exc:  # noqa: BLE001 - a coordination error; retried
                log.warning("cannot write the log dir event notification (attempt %d): %s", attempt + 1, exc)
                gevent.sleep(1.0)
        log.error("gave up writing the log dir event notification: the controller keeps this broker's replicas "
                  "of the offline log dirs %s until it restarts", self.log_manager.offline_dirs)

    def _poll_io_injection(self):
        dir_failure.poll_injection(self.log_manager.log_dirs)

    def _checkpoint(self):
        self._pool.apply(self.log_manager.checkpoint_recovery_points)

    def _checkpoint_starts(self):
        self._pool.apply(self.log_manager.checkpoint_log_start_offsets)   # DeleteRecords' log start offsets

    def _clean(self):
        # Log compaction reads and rewrites whole segments: off the event loop, like fsync.
        self._pool.apply(self.log_manager.clean_once,
                         (int(time.time() * 1000), self.config["log.cleaner.dedupe.buffer.size"]))

    def _stored_broker_id(self):
        for d in self.config.log_dirs:
            meta = os.path.join(d, "meta.properties")
            if os.path.exists(meta):
                stored = read_properties(meta).get("broker.id")
                if stored is not None:
                    return int(stored)
        return None

    def _endpoints(self):
        ports = self.server.bound_ports()
        out = []
        for name, host, port in self.config.advertised_listeners:
            if port == 0:
                port = ports.get(name, port)
            out.append((name, host, port))
        return out

    # --------------------------------------------------------------------- the replica manager's callbacks
    def replica_address(self, broker_id):
        """(host, port) of another broker on the inter-broker listener, or None while it is unknown/offline."""
        for b in self.metadata_cache.alive_brokers(self.config.inter_broker_listener):
            if b.id == broker_id:
                return b.host, b.port
        return None

    def write_isr(self, topic, p, leader, leader_epoch, new_isr, zk_version):
        """The leader's ISR change: a conditional write of the partition state znode (Kafka's JSON, the
        controller epoch it was given), then an /isr_change_notification for the controller -- batched with the
        other leaders' changes in flight (kbroker/replica/isr_writes.py). None when the znode moved on (a
        controller decision won the race): the leader keeps its old ISR."""
        part = self.replica_manager.get_partition(topic, p)
        controller_epoch = part.controller_epoch if part is not None else -1
        return self._isr_writes.write(topic, p, leader, leader_epoch, controller_epoch, new_isr, zk_version)

    # ------------------------------------------------------------------------------------ group coordinator
    # The consumer-group coordinator (kbroker/coordinator) owns the groups of the __consumer_offsets partitions
    # this broker leads: it loads a partition when LeaderAndIsr makes this broker its leader and unloads it when
    # leadership moves away.
    def _start_group_coordinator(self):
        from kbroker.coordinator.coordinator import GroupCoordinator
        from kbroker.coordinator.offsets_log import OffsetsStore
        from kbroker.coordinator.timers import GeventScheduler
        cfg = self.config
        self.group_coordinator = GroupCoordinator(cfg, GeventScheduler(),
                                                  OffsetsStore(self.replica_manager, cfg["offsets.load.buffer.size"],
                                                               cfg["offsets.commit.timeout.ms"]),
                                                  topic_exists=self._group_partition_exists)
        self.replica_manager.leadership_listeners.append(self._group_leadership_changed)
        self._tasks.append(gevent.spawn(self._every, cfg["offsets.retention.check.interval.ms"],
                                        self._expire_group_offsets))

    def _group_leadership_changed(self, tp, was_leader, is_leader):
        from kbroker.coordinator.coordinator import LOADING
        if tp[0] != GROUP_METADATA_TOPIC or self.group_coordinator is None or was_leader == is_leader:
            return
        if is_leader:
            self.group_coordinator.owned[tp[1]] = LOADING  # COORDINATOR_LOAD_IN_PROGRESS until replayed
            gevent.spawn(self.group_coordinator.load_partition, tp[1])
        else:
            self.group_coordinator.unload_partition(tp[1])

    def _expire_group_offsets(self):
        removed = self.group_coordinator.expire_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)

    def _stop_group_coordinator(self):
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()

    def _last_stable_offset(self, tp):
        part = self.replica_manager.get_partition(tp[0], tp[1]) if self.replica_manager else None
        return None if part is None else part.last_stable_offset

    def _group_partition_exists(self, tp):
        # Asked once per committed partition: a lookup, not ``tp in self.partitions`` (a copy of every hosted
        # partition each time: an OffsetCommit of 10,000 partitions on a broker hosting 10,000 took 1.7 s).
        return (self.replica_manager.get_partition(tp[0], tp[1]) is not None
                or self.metadata_cache.partition(tp[0], tp[1]) is not None)

    # ------------------------------------------------------------------------------ transaction coordinator
    # The transaction coordinator (kbroker/transaction) owns the transactional ids of the __transaction_state
    # partitions this broker leads, loaded at the partition's leader epoch (the coordinator epoch its markers carry)
    # when LeaderAndIsr makes this broker their leader, dropped when leadership moves away. Its markers go to the
    # partition leaders over the inter-broker listener, to this broker in-process.
    def _start_transaction_coordinator(self):
        from kbroker.coordinator.timers import GeventScheduler
        from kbroker.transaction.coordinator import TransactionCoordinator
        from kbroker.transaction.markers import BrokerLinks, TxnMarkerChannel
        from kbroker.transaction.state_manager import TransactionStateManager, TxnStore
        cfg = self.config
        scheduler = GeventScheduler()
        store = TxnStore(self.replica_manager, cfg["transaction.state.log.load.buffer.size"],
                         cfg["request.timeout.ms"])
        state = TransactionStateManager(store, scheduler.now_ms, self._txn_partition_count,
                                        cfg["transactional.id.expiration.ms"])
        self._txn_links = BrokerLinks(self.broker_id, lambda *a: self.channel.local_handler(*a), self.replica_address,
                                      self.channel_security(cfg.inter_broker_listener),
                                      timeout_s=cfg["request.timeout.ms"] / 1000.0 + 5)
        markers = TxnMarkerChannel(self._txn_leader_of, self._txn_links.send, scheduler)
        self.transaction_coordinator = TransactionCoordinator(cfg, scheduler, state, markers, self.producer_ids)
        self.replica_manager.leadership_listeners.append(self._txn_leadership_changed)
        self._tasks += [
            gevent.spawn(self._every, cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                         self.transaction_coordinator.abort_timed_out),
            gevent.spawn(self._every, cfg["transaction.remove.expired.transaction.cleanup.interval.ms"],
                         self.transaction_coordinator.expire_transactional_ids)]

    def _txn_partition_count(self):
        from kbroker.internal_topics import TRANSACTION_STATE_TOPIC
        parts = self.metadata_cache.partitions(TRANSACTION_STATE_TOPIC) if self.metadata_cache.contains_topic(
            TRANSACTION_STATE_TOPIC) else None
        return len(parts) if parts else self.config["transaction.state.log.num.partitions"]

    def _txn_leader_of(self, topic, p):
        """The marker channel's routing: the leader's id; None for a partition unknown here (deleted); -1 while
        it has no live leader."""
        state = self.metadata_cache.partition(topic, p)
        if state is None:
            return None
        leader = state.leader
        return leader if leader >= 0 and leader in self.metadata_cache.alive_broker_ids() else -1

    def _txn_leadership_changed(self, tp, was_leader, is_leader):
        from kbroker.internal_topics import TRANSACTION_STATE_TOPIC
        coordinator = self.transaction_coordinator
        if tp[0] != TRANSACTION_STATE_TOPIC or coordinator is None or not coordinator.active:
            return
        if not is_leader:
            if was_leader:
                coordinator.unload_partition(tp[1])
            return
        part = self.replica_manager.get_partition(tp[0], tp[1])
        if part is None:
            return
        owned = coordinator.state.owned.get(tp[1])
        if owned is not None and owned.coordinator_epoch == part.leader_epoch:
            return
        # COORDINATOR_LOAD_IN_PROGRESS until replayed; a new leader epoch reloads (Kafka's onElection).
        coordinator.begin_load(tp[1], part.leader_epoch)
        gevent.spawn(coordinator.load_partition, tp[1], part.leader_epoch)

    def _stop_transaction_coordinator(self):
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.shutdown()
        if self._txn_links is not None:
            self._txn_links.close()
