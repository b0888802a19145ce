"""kbroker-server [server.properties | config.yaml] [--override key=value]... [--check-config]

The only place (with the other cli modules) that monkey-patches: gevent's patch_all must run before anything else
imports socket/threading, so kbroker modules are imported inside ``main``.
Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 for a configuration error (the message names the key),
2 for usage errors. ``--check-config`` loads and validates the configuration exactly as startup does, prints every key
with its effective value and source, and exits (0, or 1 with the same error startup would give); keys set without
effect in kbroker are logged as WARNING lines in both modes (``effect`` in kbroker/config/keys.py).
"""
import argparse
import logging
import sys


def version_string():
    """`kbroker-server --version`: the installed distribution's version, the kernels in use and the interpreter.

    The kernels are named because a build without a C compiler falls back to the pure-Python twins (setup.py).
    """
    from importlib import metadata
    import platform

    try:
        version = metadata.version("kbroker")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown (not installed)"
    import kbroker._native as native
    kernels = "cython" if native.IMPL == "cython" else "pure Python"
    return "kbroker-server %s (kernels: %s; Python %s)" % (version, kernels, platform.python_version())


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
    p.add_argument("--log-level", default="INFO")
    p.add_argument("--check-config", action="store_true",
                   help="validate the configuration, print every key's value and source, and exit")
    return p.parse_args(argv)


def print_config(cfg, out=sys.stdout):
    """--check-config: "key=value  (source)" for every key, then the unknown keys and the keys without effect."""
    for name, value, source in cfg.describe():
        print("%s=%s  (%s)" % (name, "" if value is None else value, source), file=out)
    for name in sorted(cfg.unknown):
        print("# unknown, ignored: %s" % name, file=out)
    for name, reason in cfg.no_effect:
        print("# no effect in kbroker: %s: %s" % (name, reason), file=out)


def main(argv=None):
    from gevent import monkey
    monkey.patch_all()
    import gevent
    import signal

    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    from kbroker.config import BrokerConfig, ConfigError
    try:
        cfg = BrokerConfig.from_sources(args.config, args.override)
    except (ConfigError, OSError) as e:
        print("kbroker-server: configuration error: %s" % e, file=sys.stderr)
        return 1
    if args.check_config:
        print_config(cfg)
        return 0
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
