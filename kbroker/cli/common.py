"""What every ``kbroker-admin`` sub-tool shares: errors, argument parsing, output, JSON input files, ZooKeeper.

Layering (kbroker/cli): ``common`` imports no other cli module; ``topics_common`` builds on it; the tools
(``topics_zk``, ``consumer_groups``, ``reassign``, ``preferred_election``) import only these two; ``admin`` (the
dispatcher, plus the topics and configs commands) imports the tools. No tool imports ``admin`` or another tool,
and no cli module imports a name with a leading underscore from another module (tests/unit/test_cli_imports.py).

Error contract of the tools (Kafka's command-line behaviour, diagnostics on stderr so stdout stays parseable):

* ``UsageError``: a bad command line. The tool prints the message, then the usage line (``usage_error``), on
  stderr and exits 1, like Kafka's CommandLineUtils.printUsageAndDie.
* ``CommandError``: the command itself failed. Each tool prints it with its own Kafka prefix (``Error while
  executing topic command : <message>``, ``Partitions reassignment failed due to <message>``, ...) on stderr and
  exits 1.

ZooKeeper: the 0.10 tools (``topics --zookeeper``, ``reassign-partitions``, ``preferred-replica-election``) open
one session with Kafka's tool timeouts, 30 s for the session and 30 s for the connection (``TIMEOUT_MS``).
kbroker.coord is imported inside the ZooKeeper helpers: the --bootstrap-server tools never load it (~45 ms of
start-up).
"""
import argparse
import contextlib
import json
import sys

TIMEOUT_MS = 30000


# ---------------------------------------------------------------------------------------------- errors

class UsageError(Exception):
    """A bad command line: printed with the usage, exit 1."""


class CommandError(Exception):
    """A failed command: printed after the tool's Kafka prefix, exit 1."""


# ---------------------------------------------------------------------------------------------- arguments

class ArgParser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing and exiting 2 (Kafka's tools exit 1)."""

    def error(self, message):
        raise UsageError(message)


def usage_error(parser, e, file=None):
    """Print the problem, then the parser's usage line, on ``file`` (stderr by default)."""
    file = sys.stderr if file is None else file
    print(str(e), file=file)
    parser.print_usage(file)


def parse_command_line(parser, argv):
    """``(options, None)``, or ``(None, exit code)`` when the tool must stop: a usage error printed with the
    usage line (1, as Kafka's tools), ``--help`` (0)."""
    try:
        return parser.parse_args(argv), None
    except UsageError as e:
        usage_error(parser, e)
        return None, 1
    except SystemExit as e:            # --help
        return None, e.code or 0


# ---------------------------------------------------------------------------------------------- output

def emit(args, text_lines, doc):
    """``--output json``: ``doc`` as one compact JSON line on stdout; otherwise each of ``text_lines``."""
    if args.output == "json":
        print(json.dumps(doc, indent=None, sort_keys=False))
    else:
        for line in text_lines:
            print(line)


def tp_str(tp):
    """Kafka 0.10.1's TopicAndPartition.toString: ``[topic,partition]`` (the 0.10 ZooKeeper tools' messages)."""
    return "[%s,%d]" % tp


# ---------------------------------------------------------------------------------------------- JSON input files

def read_file(path):
    """The text of ``path`` (UTF-8); CommandError ``cannot read <path>: <reason>``."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CommandError("cannot read %s: %s" % (path, e.strerror or e)) from None


def load_json(text, what):
    """Parsed JSON; CommandError ``<what> is not valid JSON: <reason>``."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise CommandError("%s is not valid JSON: %s" % (what, e)) from None


def json_int(value, what):
    """``value`` when it is a JSON integer (not a bool); CommandError ``<what> must be an integer, got <json>``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CommandError("%s must be an integer, got %s" % (what, json.dumps(value)))
    return value


def duplicates(items):
    """The items that occur more than once, each listed once, in the order of their second occurrence."""
    seen, dup = set(), []
    for x in items:
        if x in seen and x not in dup:
            dup.append(x)
        seen.add(x)
    return dup


# ---------------------------------------------------------------------------------------------- ZooKeeper

@contextlib.contextmanager
def zookeeper(connect, backend=None, timeout_ms=None):
    """A started ZooKeeperBackend on ``connect`` (stopped afterwards), or ``backend`` as given (tests).

    ``timeout_ms`` (session and connection timeout) defaults to TIMEOUT_MS; a ZooKeeper that cannot be reached
    within it is a CommandError carrying the backend's message. Like Kafka's tools, it logs in with SASL when
    ``KAFKA_OPTS`` names a JAAS file with a ``Client`` section (kbroker/security/zk_client.py), and then creates
    znodes with the secure ACLs (Kafka's tools: ``isSecure = JaasUtils.isZkSaslEnabled()``).
    """
    if backend is not None:
        yield backend
        return
    from kbroker.coord.errors import CoordinationError
    from kbroker.coord.zk import ZooKeeperBackend
    from kbroker.security.zk_client import ZkClientSecurityError, zk_sasl_credentials

    timeout_ms = TIMEOUT_MS if timeout_ms is None else timeout_ms
    try:
        sasl = zk_sasl_credentials()
        zk = ZooKeeperBackend(connect, timeout_ms, timeout_ms, sasl=sasl, secure_acls=sasl is not None).start()
    except (CoordinationError, ZkClientSecurityError) as e:
        raise CommandError(str(e)) from None
    try:
        yield zk
    finally:
        zk.stop()


def live_brokers(backend):
    """{broker id: rack or None} of the brokers registered under ``/brokers/ids``."""
    from kbroker.coord.errors import NoNodeError
    from kbroker.coord.znodes import BrokerIdsZNode, BrokerIdZNode

    out = {}
    try:
        ids = backend.get_children(BrokerIdsZNode.path())
    except NoNodeError:
        return out
    for name in ids:
        data, _ = backend.get_or_none(BrokerIdZNode.path(int(name)))
        if data is not None:
            out[int(name)] = BrokerIdZNode.decode(data).rack
    return out
