"""What the examples share: the command line, the run loop, and Java's String.split.

Options every example takes (Kafka's config names in parentheses):

    --bootstrap-server H:P           (bootstrap.servers; default localhost:9092)
    --application-id ID              (application.id; each example has Kafka's demo's default)
    --processing-guarantee G         (processing.guarantee: at_least_once, the default, or exactly_once_v2)
    --state-dir DIR                  (state.dir; default <tempdir>/kafka-streams)
    --commit-interval-ms N           (commit.interval.ms; default Kafka's: 30000, 100 under exactly_once_v2)
    --config KEY=VALUE               any other Streams config, repeatable (e.g. consumer.session.timeout.ms=10000)

``run(topology, config)``: KafkaStreams started, SIGINT/SIGTERM close it (``close(30 s)``); the exit status is 0
after a clean close, 1 when the application reached ERROR. State changes are logged on stderr.
"""
import argparse
import logging
import re
import signal
import sys
import threading

from kbroker.streams.runtime.kafka_streams import ERROR, KafkaStreams

log = logging.getLogger("kbroker.streams.examples")
CLOSE_TIMEOUT_S = 30.0
# Java's \W without UNICODE_CHARACTER_CLASS is ASCII: [^a-zA-Z_0-9].
NON_WORD = re.compile(r"\W+", re.ASCII)


def java_split(regex, text):
    """Java's ``text.split(regex)`` (limit 0): no match -> [text]; a leading positive-width match gives a leading
    ""; trailing empty strings are removed (so "!!" -> [] and "" -> [""])."""
    parts = regex.split(text)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def words(line):
    """WordCountDemo's ``value.toLowerCase(Locale.getDefault()).split("\\\\W+")``."""
    return java_split(NON_WORD, line.lower())


def parser(prog, description, application_id):
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--bootstrap-server", default="localhost:9092", metavar="HOST:PORT")
    p.add_argument("--application-id", default=application_id)
    p.add_argument("--processing-guarantee", default="at_least_once",
                   choices=("at_least_once", "exactly_once_v2"))
    p.add_argument("--state-dir", default=None)
    p.add_argument("--commit-interval-ms", type=int, default=None)
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="another Streams config (Kafka's key names), repeatable")
    return p


def streams_config(args, **demo):
    """The Streams config: the demo's own settings (``demo``), then the command line's."""
    config = {"application.id": args.application_id, "bootstrap.servers": args.bootstrap_server,
              "processing.guarantee": args.processing_guarantee, **demo}
    if args.state_dir is not None:
        config["state.dir"] = args.state_dir
    if args.commit_interval_ms is not None:
        config["commit.interval.ms"] = args.commit_interval_ms
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit("--config takes KEY=VALUE, got %r" % item)
        config[key.strip()] = value.strip()
    return config


def run(topology, config):
    """Run until SIGINT/SIGTERM -> exit status (0 closed cleanly, 1 the application failed)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    streams = KafkaStreams(topology, config)
    stop = threading.Event()
    failed = threading.Event()

    def on_state(new, old):
        log.info("state %s -> %s", old, new)
        if new == ERROR:
            failed.set()
            stop.set()
    streams.set_state_listener(on_state)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    streams.start()
    while not stop.wait(0.5):
        pass
    closed = streams.close(CLOSE_TIMEOUT_S)
    if not closed:
        log.error("the application did not close within %gs", CLOSE_TIMEOUT_S)
    return 1 if failed.is_set() or not closed else 0
