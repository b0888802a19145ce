"""``kbroker-connect distributed WORKER.properties`` (Kafka's ConnectDistributed): ``run(worker_props)``.

Start order (Kafka's): parse the worker config (a bad key -> exit 1 naming it), look up the Kafka cluster id, build
the stores (config, offset, status topics; created compacted when missing), the worker, the group member and the
herder, start the herder (stores read to their end, then the herder thread joins the group), then the REST server.
SIGTERM / SIGINT stop it in the reverse order: REST, then the herder (tasks stopped with their offsets committed,
LeaveGroup so the others rebalance at once instead of after session.timeout.ms).

This module must not import kbroker.connect.cli (which imports it): the cluster-id lookup and the signal wait
are its own.
"""
import logging
import signal
import threading

from kbroker.connect.exceptions import ConfigError, ConnectError
from kbroker.connect.worker_config import lookup_cluster_id

log = logging.getLogger("kbroker.connect.distributed")

EXIT_START = 1
def membership_security(config):
    """The group membership's ChannelSecurity (None: PLAINTEXT) from the worker's top-level security.protocol,
    ssl.* and sasl.* keys -- the ones Kafka's worker gives its group member (kbroker/client/client_config.py reads
    them as Kafka's tools do); ConfigError naming the key when they cannot be honoured."""
    from kbroker.client.client_config import ClientConfigError, security_from
    props = {k: v for k, v in config.originals.items()
             if k.startswith(("security.", "ssl.", "sasl.")) and k != "ssl.client.auth"}
    try:
        security = security_from(props, "worker config")
    except ClientConfigError as e:
        raise ConfigError(str(e)) from None
    return None if security.protocol == "PLAINTEXT" else security


class DistributedConnect:
    def __init__(self, worker_props):
        from kbroker.connect.worker_config import WorkerConfig
        self.config = WorkerConfig(worker_props, distributed=True)
        self.security = membership_security(self.config)
        self.herder = None
        self.rest = None

    def start(self):
        from kbroker.connect.plugins import Plugins
        from kbroker.connect.rest import RestServer
        from kbroker.connect.worker import Worker

        from .herder import DistributedHerder
        from .kafka_stores import KafkaConfigBackingStore, KafkaOffsetBackingStore, KafkaStatusBackingStore
        from .member import GroupMember
        config = self.config
        log.info("Kafka Connect distributed worker initializing ...")
        plugins = Plugins(config.get("plugin.path") or ())
        cluster_id = lookup_cluster_id(config)
        log.info("Kafka cluster ID: %s", cluster_id)
        host, port = config.rest_listener()
        advertised = config.advertised_url()
        worker_id = advertised.split("://", 1)[1].rstrip("/")
        offsets = KafkaOffsetBackingStore(config)
        statuses = KafkaStatusBackingStore(config, worker_id)
        configs = KafkaConfigBackingStore(config)
        # The worker's offset store is started by the worker (Kafka's Worker.start starts its offset store).
        worker = Worker(config, plugins, offsets, statuses, worker_id)
        member = GroupMember(",".join(config["bootstrap.servers"]), config["group.id"],
                             session_timeout_ms=config["session.timeout.ms"],
                             rebalance_timeout_ms=config["rebalance.timeout.ms"],
                             heartbeat_interval_ms=config["heartbeat.interval.ms"],
                             retry_backoff_ms=config["retry.backoff.ms"],
                             client_id=config.get("client.id") or "connect-" + worker_id,
                             security=self.security)
        self.herder = DistributedHerder(config, worker, plugins, configs, statuses, member, cluster_id, worker_id,
                                        advertised)
        self.rest = RestServer(self.herder, host, port, advertised,
                               topic_tracking=config.get("topic.tracking.enable", True),
                               topic_tracking_reset=config.get("topic.tracking.allow.reset", True))
        self.herder.start()
        try:
            self.rest.start()
        except OSError as e:
            self.herder.stop()
            raise ConnectError("Unable to initialize REST server on %s:%d: %s" % (host or "0.0.0.0", port, e)) \
                from None
        log.info("Kafka Connect started (worker %s, group %s)", worker_id, config["group.id"])

    def stop(self):
        log.info("Kafka Connect stopping")
        if self.rest is not None:
            self.rest.stop()
        if self.herder is not None:
            self.herder.stop()
        log.info("Kafka Connect stopped")


def run(worker_props):
    """Run a distributed worker until SIGTERM/SIGINT; the process's exit code."""
    try:
        connect = DistributedConnect(worker_props)
        connect.start()
    except Exception as e:
        log.error("Stopping due to error: %s", e, exc_info=not isinstance(e, (ConfigError, ConnectError)))
        return EXIT_START
    done = threading.Event()

    def on_signal(signum, _frame):
        log.info("Received signal %d, shutting down", signum)
        done.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while not done.wait(1.0):     # a timed wait: the handler runs promptly in the main thread
            pass
    finally:
        connect.stop()
    return 0
