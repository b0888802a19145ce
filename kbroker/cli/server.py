"""kbroker-server [server.properties | config.yaml] [--override key=value]... [--check-config]
                [--log-dir DIR] [--log-config FILE] [--log-level LEVEL]

The only place (with the other cli modules) that monkey-patches: gevent's patch_all must run before anything else
imports socket/threading, so kbroker modules are imported inside ``main``.
Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 for a configuration error (the message names the key) or a
logging configuration error, 2 for usage errors.

``--check-config`` reports every key as used / defaulted / ignored (accepted, no effect) / unknown / error and
exits (1 when there is an error), starting nothing and writing nothing (kbroker/cli/check_config.py).

Logging (kbroker/cli/logging_config.py): stderr from the first line; once the configuration is valid, the files of
``--log-config`` (default: logging.properties next to the config file, else the built-in copy of
config/logging.properties) under ``--log-dir`` (default: $LOG_DIR, else ./logs): server.log, controller.log,
state-change.log, kafka-request.log (off by default), each rotated. Then, as Kafka's KafkaServer does, the version
and the effective configuration ("KafkaConfig values:", every key) are logged before the broker starts; keys set
without effect were already logged as WARNING lines by name (``effect`` in kbroker/config/keys.py).
"""
import argparse
import logging
import sys


def version_string():
    """`kbroker-server --version`: the installed distribution's version, the kernels in use and the interpreter.

    The kernels are named because a build without a C compiler falls back to the pure-Python twins (setup.py).
    """
    import platform

    kernels = "cython" if kernels_in_use() == "cython" else "pure Python"
    return "kbroker-server %s (kernels: %s; Python %s)" % (installed_version(), kernels, platform.python_version())


def installed_version():
    from importlib import metadata

    try:
        return metadata.version("kbroker")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def kernels_in_use():
    """"cython" or "python": the byte kernels this process runs (kbroker/_native picks one set, never a mix)."""
    import kbroker._native as native
    return native.IMPL


class _VersionAction(argparse.Action):
    """Like argparse's "version" action, but the string is only computed when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_string())
        parser.exit(0)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="kbroker-server", description="Kafka-compatible broker")
    p.add_argument("--version", action=_VersionAction, help="print the version and exit")
    p.add_argument("config", nargs="?", help="server.properties or YAML file (Kafka key names)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (repeatable)")
    p.add_argument("--log-level", default=None,
                   help="level of the root logger (TRACE, DEBUG, INFO, WARN, ERROR), over the logging config's")
    p.add_argument("--log-dir", default=None,
                   help="directory of server.log, controller.log, state-change.log... (default: $LOG_DIR, else ./logs)")
    p.add_argument("--log-config", default=None, metavar="FILE",
                   help="log4j.properties-style logging config (default: logging.properties next to the config "
                        "file, else the built-in copy of config/logging.properties)")
    p.add_argument("--check-config", action="store_true",
                   help="report every key as used / defaulted / ignored / unknown / error, and exit (1 on errors)")
    return p.parse_args(argv)


def _level(name):
    from kbroker.cli.logging_config import LEVELS
    return LEVELS.get((name or "INFO").upper(), logging.INFO)


def log_startup(cfg):
    """Kafka's startup report: the version, then every key's effective value ("KafkaConfig values:")."""
    from kbroker.cli.logging_config import config_values_block

    version, kernels = installed_version(), kernels_in_use()
    log = logging.getLogger("kbroker.server")
    log.info("kbroker version: %s (kernels: %s)", version, kernels)
    logging.getLogger("kbroker.config").info("%s", config_values_block(cfg, version, kernels))


def raise_open_files_limit():
    """Soft RLIMIT_NOFILE up to the hard limit, as the JVM does for Kafka at startup (HotSpot's MaxFDLimit) and Go's
    runtime does for every program: a distribution's soft 1,024 would otherwise cap connections and open segments
    (log.open.segment.files.max's automatic value is half of it) far below what the host allows."""
    import resource
    log = logging.getLogger("kbroker.server")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit cannot be the soft one (Linux caps descriptors at fs.nr_open, 1,048,576 by default).
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as e:
        log.warning("open files limit stays at %d (raising it to %d failed: %s)", soft, target, e)
        return
    log.info("open files limit raised from %d to %d (the hard limit: %s)", soft, target,
             "unlimited" if hard == resource.RLIM_INFINITY else hard)


def main(argv=None):
    from gevent import monkey
    monkey.patch_all()
    import gevent
    import signal

    args = parse_args(sys.argv[1:] if argv is None else argv)
    from kbroker.cli import logging_config
    logging_config.bootstrap(_level(args.log_level))
    if args.check_config:
        from kbroker.cli.check_config import run
        return run(args.config, args.override)
    from kbroker.config import BrokerConfig, ConfigError
    try:
        cfg = BrokerConfig.from_sources(args.config, args.override)
    except (ConfigError, OSError) as e:
        print("kbroker-server: configuration error: %s" % e, file=sys.stderr)
        return 1
    try:
        parsed = logging_config.load(logging_config.config_path_for(args.log_config, args.config),
                                     logging_config.log_dir_from(args.log_dir))
        logging_config.install(parsed, None if args.log_level is None else _level(args.log_level))
    except (logging_config.LoggingConfigError, OSError) as e:
        print("kbroker-server: logging configuration error: %s" % e, file=sys.stderr)
        return 1
    log_startup(cfg)
    raise_open_files_limit()
    from kbroker.broker import Broker
    broker = Broker(cfg)
    # Signal handlers go in before start(): the server answers requests while start() still waits for the
    # controller's first UpdateMetadata, and a SIGTERM in that window must still shut down cleanly.
    stop = gevent.event.Event()
    gevent.signal_handler(signal.SIGTERM, stop.set)
    gevent.signal_handler(signal.SIGINT, stop.set)
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001 - startup failures are reported, not traced, when they are ours
        logging.getLogger("kbroker").exception("startup failed")
        print("kbroker-server: startup failed: %s" % e, file=sys.stderr)
        try:
            broker.shutdown()
        except Exception:  # noqa: BLE001
            pass
        return 1
    print("kbroker started: broker.id=%d listeners=%s" % (broker.broker_id, broker.endpoints), flush=True)
    stop.wait()
    broker.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
