"""``kbroker-connect``: Kafka Connect's ``connect-standalone.sh`` and ``connect-distributed.sh`` (docs/connect.md).

    kbroker-connect standalone WORKER.properties [CONNECTOR.properties|CONNECTOR.json ...]
    kbroker-connect distributed WORKER.properties
    kbroker-connect --version

Standalone (Kafka's ConnectStandalone): the worker file is parsed (WorkerConfig: unknown keys warned, a key this
runtime cannot honour refused naming it), the Kafka cluster id is looked up (an AdminClient's metadata, bounded by
``worker_config.CLUSTER_ID_TIMEOUT_S`` as Kafka's default.api.timeout.ms), the worker, the standalone herder and the REST server
(``listeners`` / ``rest.port``, 8083 by default) start, then each connector file creates its connector. A connector
file is, as Kafka 3.5+ reads it: a JSON object of string keys and values (a config, which must name ``name``),
a JSON create request (``{"name", "config", "initial_state"}``), or else a properties file (``name`` required).

Exit codes are Kafka's: 1 usage, 2 a worker that cannot start (bad worker config, unreachable cluster, REST port in
use), 3 a connector file that fails ("Stopping after connector error"), 0 after SIGTERM/SIGINT (graceful: REST
server, then every task and connector, offsets committed, each bounded by task.shutdown.graceful.timeout.ms).

Logs go to stdout in Kafka's connect-log4j layout: ``[2026-12-02 05:38:11,123] INFO message (logger)``.
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading

log = logging.getLogger("kbroker.connect.cli")

EXIT_USAGE, EXIT_START, EXIT_CONNECTOR = 1, 2, 3


class StartupError(Exception):
    """The worker cannot start; the message says why (exit code 2)."""


def version_string():
    from kbroker.connect.rest import kafka_version
    return "kbroker-connect %s" % kafka_version()


def configure_logging(level=logging.INFO):
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s (%(name)s)"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def load_properties(path):
    """A Java properties file -> {key: str}; StartupError naming the file when it cannot be read."""
    from kbroker.client.rdkafka_props import RdkafkaConfigError, load
    try:
        return load(path)
    except RdkafkaConfigError as e:
        raise StartupError(str(e)) from None


def load_connector_file(path):
    """``(name, config, target_state)`` from a connector file (module docstring); ValueError naming the file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError("cannot read connector configuration %s: %s" % (path, e.strerror or e)) from None
    try:
        doc = json.loads(raw.decode("utf-8"), parse_int=str, parse_float=str)
    except (UnicodeDecodeError, ValueError):
        doc = None
    target = None
    if isinstance(doc, dict) and all(isinstance(v, str) for v in doc.values()):
        config = dict(doc)
    elif isinstance(doc, dict) and isinstance(doc.get("config"), dict):
        from kbroker.connect.rest import INITIAL_STATES, config_map
        config = config_map(doc["config"])
        name = doc.get("name")
        if name is not None:
            if config.setdefault("name", name) != name:
                raise ValueError("Connector name configuration in 'config' doesn't match the one specified in "
                                 "'name' at '%s'" % path)
        if doc.get("initial_state") is not None:
            target = INITIAL_STATES.get(str(doc["initial_state"]).upper())
            if target is None:
                raise ValueError("Unknown initial state %s at '%s'" % (doc["initial_state"], path))
    else:
        config = load_properties(path)
    if not config.get("name"):
        raise ValueError("Connector configuration at '%s' is missing the mandatory 'name' configuration" % path)
    return config["name"], config, target


class StandaloneConnect:
    """The standalone process's parts, started and stopped in Kafka's order (Connect.start / Connect.stop)."""

    def __init__(self, worker_props):
        from kbroker.connect.exceptions import ConfigError, ConnectError
        from kbroker.connect.worker_config import WorkerConfig
        try:
            self.config = WorkerConfig(worker_props, distributed=False)
        except (ConfigError, ConnectError) as e:
            raise StartupError(str(e)) from None
        self.herder = None
        self.rest = None

    def start(self):
        from kbroker.connect.offsets import FileOffsetBackingStore
        from kbroker.connect.plugins import Plugins
        from kbroker.connect.rest import RestServer
        from kbroker.connect.standalone import StandaloneHerder
        from kbroker.connect.status import MemoryStatusBackingStore
        from kbroker.connect.worker import Worker
        from kbroker.connect.exceptions import ConnectError
        from kbroker.connect.worker_config import lookup_cluster_id
        config = self.config
        log.info("Kafka Connect worker initializing ...")
        plugins = Plugins(config.get("plugin.path") or ())
        try:
            cluster_id = lookup_cluster_id(config)
        except ConnectError as e:
            raise StartupError(str(e)) from None
        log.info("Kafka cluster ID: %s", cluster_id)
        host, port = config.rest_listener()
        advertised = config.advertised_url()
        worker_id = advertised.split("://", 1)[1].rstrip("/")
        offsets = FileOffsetBackingStore(config["offset.storage.file.filename"])
        statuses = MemoryStatusBackingStore()
        worker = Worker(config, plugins, offsets, statuses, worker_id)
        self.herder = StandaloneHerder(worker, plugins, cluster_id, worker_id, statuses)
        self.rest = RestServer(self.herder, host, port, advertised,
                               topic_tracking=config.get("topic.tracking.enable", True),
                               topic_tracking_reset=config.get("topic.tracking.allow.reset", True),
                               allow_origin=config.get("access.control.allow.origin") or "",
                               allow_methods=config.get("access.control.allow.methods") or "")
        self.herder.start()
        try:
            self.rest.start()
        except OSError as e:
            self.herder.stop()
            raise StartupError("Unable to initialize REST server on %s:%d: %s" % (host or "0.0.0.0", port, e)) from None
        log.info("Kafka Connect started")

    def add_connector(self, path):
        name, config, target = load_connector_file(path)
        kwargs = {"target_state": target} if target else {}
        created, info = self.herder.put_connector_config(name, config, False, **kwargs)
        log.info("Created connector %s", info["name"])

    def stop(self):
        log.info("Kafka Connect stopping")
        if self.rest is not None:
            self.rest.stop()
        if self.herder is not None:
            self.herder.stop()
        log.info("Kafka Connect stopped")


class _Interrupted(Exception):
    """SIGTERM/SIGINT during startup: unwind it and stop what was started."""


class _Signals:
    """SIGTERM and SIGINT handling, installed before anything starts (as Kafka's shutdown hook): during startup a
    signal aborts it (the main thread unwinds, what started is stopped); afterwards ``wait()`` returns."""

    def __init__(self):
        self.done = threading.Event()
        self.started = False

    def install(self):
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum, frame):
        log.info("Received signal %d, shutting down", signum)
        self.done.set()
        if not self.started:
            raise _Interrupted()

    def wait(self):
        while not self.done.wait(1.0):   # a timed wait so the handler runs promptly
            pass


def run_standalone(worker_file, connector_files):
    signals = _Signals()
    signals.install()
    connect = None
    try:
        try:
            connect = StandaloneConnect(load_properties(worker_file))
            connect.start()
        except _Interrupted:
            raise
        except Exception as e:
            log.error("Stopping due to error: %s", e, exc_info=not isinstance(e, StartupError))
            return EXIT_START
        for path in connector_files:
            try:
                connect.add_connector(path)
            except _Interrupted:
                raise
            except Exception as e:
                log.error("Failed to create connector for %s: %s", path, e)
                log.error("Stopping after connector error")
                connect.stop()
                return EXIT_CONNECTOR
        signals.started = True
        if not signals.done.is_set():
            signals.wait()
    except _Interrupted:
        pass
    if connect is not None:
        connect.stop()
    return 0


def run_distributed(worker_file):
    try:
        props = load_properties(worker_file)
    except StartupError as e:
        log.error("Stopping due to error: %s", e)
        return EXIT_START
    from kbroker.connect.distributed.main import run
    return run(props)


def build_parser():
    p = argparse.ArgumentParser(prog="kbroker-connect", description="Kafka Connect runtime (standalone or "
                                "distributed) for kbroker and any Kafka cluster.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="mode", metavar="{standalone,distributed}")
    s = sub.add_parser("standalone", help="connect-standalone.sh: one worker, connectors from files and REST")
    s.add_argument("worker", help="worker .properties file (e.g. config/connect-standalone.properties)")
    s.add_argument("connectors", nargs="*", help="connector .properties or .json files")
    d = sub.add_parser("distributed", help="connect-distributed.sh: a worker of a Connect cluster (group.id)")
    d.add_argument("worker", help="worker .properties file (e.g. config/connect-distributed.properties)")
    return p


def main(argv=None):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:   # argparse exits 2 on a usage error; Kafka's scripts exit 1
        return EXIT_USAGE if e.code else 0
    if args.version:
        print(version_string())
        return 0
    if args.mode is None:
        parser.print_usage(sys.stderr)
        return EXIT_USAGE
    configure_logging()
    if args.mode == "standalone":
        return run_standalone(args.worker, args.connectors)
    return run_distributed(args.worker)


if __name__ == "__main__":
    sys.exit(main())
