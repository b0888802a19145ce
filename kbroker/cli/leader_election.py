"""``kbroker-admin leader-election``: Kafka's kafka-leader-election.sh (``LeaderElectionCommand``, KIP-460):
ElectLeaders (43) to the controller.

    kbroker-admin leader-election --bootstrap-server H:P --election-type PREFERRED|UNCLEAN
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F) [--admin.config FILE]

``F``: ``{"partitions": [{"topic": "foo", "partition": 1}]}`` (Kafka's; not JSON -> ``Replica election data is
empty``, no ``partitions`` -> ``Replica election data is missing "partitions" field``, a partition twice ->
``Replica election data contains duplicate partitions: [foo-1]``).
``--all-topic-partitions`` asks for every partition (the request's partitions null). ``--admin.config`` (Kafka's name)
is read like every tool's ``--command-config``.

Output (stdout), Kafka's lines; partitions ``topic-partition`` sorted (Kafka: its set's hash order)::

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: org.apache.kafka.common.errors.<Class>: <msg>

the last once per failed partition, followed by ``<n> replica(s) could not be elected`` on stderr and exit 1 (Kafka
throws that AdminCommandFailedException). ELECTION_NOT_NEEDED is the "already elected" line, not a failure.
A top-level failure (Alter on the Cluster refused): ``Not authorized to perform leader election``, exit 1; the
controller not answering: ``Timeout waiting for election results``, exit 1. Kafka 3.9's option checks, their
message alone on stderr, exit 1: ``Missing required option(s): bootstrap-server, election-type``, ``One and only one
of the following options is required: topic, all-topic-partitions, path-to-json-file``, ``Missing required
option(s): partition``, ``Option partition is only allowed if topic is used``.
"""
import json
import sys

from kbroker import errors
from kbroker.client.cluster import Cluster

from kbroker.client import client_config
from .common import ArgParser, CommandError, duplicates, load_json, parse_command_line, read_file
from .java_errors import exception_text

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
TIMEOUT_MS = 30000
# The controller may move between the Metadata that names it and the request: NOT_CONTROLLER is retried after a
# fresh Metadata, at most this many times (Kafka's admin client retries it too).
NOT_CONTROLLER_RETRIES = 5


def parser():
    p = ArgParser(prog="kbroker-admin leader-election",
                  description="Elect the preferred or an unclean leader for partitions (kafka-leader-election.sh).")
    p.add_argument("--bootstrap-server", help="REQUIRED: the server(s) to connect to")
    p.add_argument("--admin.config", dest="admin_config", help="admin client properties (security settings)")
    p.add_argument("--election-type", help="REQUIRED: type of election to attempt: PREFERRED or UNCLEAN")
    p.add_argument("--topic", help="name of the topic; requires --partition")
    p.add_argument("--partition", type=int, help="partition id of the topic; requires --topic")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="perform the election on all topic partitions")
    p.add_argument("--path-to-json-file", help='the JSON file with the partitions: {"partitions": [{"topic": '
                                               '"foo", "partition": 1}]}')
    return p


def check_options(opts):
    """Kafka's LeaderElectionCommandOptions.validate -> (election type code, where the partitions come from);
    CommandError with Kafka's message otherwise."""
    missing = [name for name, value in (("bootstrap-server", opts.bootstrap_server),
                                        ("election-type", opts.election_type)) if value is None]
    if missing:
        raise CommandError("Missing required option(s): " + ", ".join(missing))
    chosen = [o for o, on in (("topic", opts.topic is not None), ("all-topic-partitions", opts.all_topic_partitions),
                              ("path-to-json-file", opts.path_to_json_file is not None)) if on]
    if len(chosen) != 1:
        raise CommandError("One and only one of the following options is required: topic, all-topic-partitions, "
                           "path-to-json-file")
    if opts.topic is not None and opts.partition is None:
        raise CommandError("Missing required option(s): partition")
    if opts.partition is not None and opts.topic is None:
        raise CommandError("Option partition is only allowed if topic is used")
    etype = ELECTION_TYPES.get(opts.election_type.upper())
    if etype is None:       # joptsimple's EnumConverter
        raise CommandError("Value [%s] for option [election-type] should be one of [PREFERRED, UNCLEAN]"
                           % opts.election_type)
    return etype, chosen[0]


def parse_partitions(text):
    try:
        doc = load_json(text, "replica election file")
    except CommandError:
        raise CommandError("Replica election data is empty") from None
    if not isinstance(doc, dict) or "partitions" not in doc:
        raise CommandError('Replica election data is missing "partitions" field')
    entries = doc["partitions"]
    if not isinstance(entries, list):
        raise CommandError('"partitions" must be a list, got %s' % json.dumps(entries))
    tps = []
    for e in entries:
        if (not isinstance(e, dict) or not isinstance(e.get("topic"), str)
                or isinstance(e.get("partition"), bool) or not isinstance(e.get("partition"), int)):
            raise CommandError('each partition must be {"topic": <string>, "partition": <int>}, got %s'
                               % json.dumps(e))
        tps.append((e["topic"], e["partition"]))
    dup = duplicates(tps)
    if dup:
        raise CommandError("Replica election data contains duplicate partitions: [%s]"
                           % ", ".join("%s-%d" % tp for tp in dup))
    return tps


def elect(cluster, election_type, tps, timeout_ms=TIMEOUT_MS):
    """ElectLeaders at the controller -> (top-level code, {(topic, p): (code, message)})."""
    body = {"election_type": election_type, "timeout_ms": timeout_ms,
            "topic_partitions": None if tps is None else [
                {"topic": t, "partitions": [p for tt, p in tps if tt == t]} for t in dict.fromkeys(t for t, _ in tps)]}
    for _ in range(NOT_CONTROLLER_RETRIES):
        resp = cluster.controller().request("ElectLeaders", body)
        results = {(t["topic"], r["partition_id"]): (r["error_code"], r["error_message"])
                   for t in resp["replica_election_results"] for r in t["partition_result"]}
        if not any(code == errors.NOT_CONTROLLER for code, _m in results.values()):
            break
    return resp.get("error_code", 0), results


def report(election_name, results, out):
    """Print Kafka's lines; returns the number of failed partitions."""
    succeeded = sorted(tp for tp, (code, _m) in results.items() if code == 0)
    noop = sorted(tp for tp, (code, _m) in results.items() if code == errors.ELECTION_NOT_NEEDED)
    failed = sorted(tp for tp, (code, _m) in results.items() if code not in (0, errors.ELECTION_NOT_NEEDED))
    if succeeded:
        print("Successfully completed leader election (%s) for partitions %s"
              % (election_name, ", ".join("%s-%d" % tp for tp in succeeded)), file=out)
    if noop:
        print("Valid replica already elected for partitions %s" % ", ".join("%s-%d" % tp for tp in noop), file=out)
    for tp in failed:
        code, message = results[tp]
        print("Error completing leader election (%s) for partition: %s-%d: %s"
              % (election_name, tp[0], tp[1], exception_text(code, message)), file=out)
    return len(failed)


def run(opts, etype, source, out):
    if opts.admin_config:
        client_config.install(opts.admin_config)
    if source == "topic":
        tps = [(opts.topic, opts.partition)]
    elif source == "path-to-json-file":
        tps = parse_partitions(read_file(opts.path_to_json_file))
    else:
        tps = None
    name = opts.election_type.upper()
    with Cluster(opts.bootstrap_server) as cluster:
        top, results = elect(cluster, etype, tps)
    if top == errors.CLUSTER_AUTHORIZATION_FAILED:
        print("Not authorized to perform leader election", file=out)
        raise CommandError("Not authorized to perform leader election")
    if top:
        raise CommandError(exception_text(top))
    failed = report(name, results, out)
    if failed:
        raise CommandError("%d replica(s) could not be elected" % failed)
    return 0


def main(argv):
    opts, code = parse_command_line(parser(), argv)
    if opts is None:
        return code
    try:
        etype, source = check_options(opts)
        return run(opts, etype, source, sys.stdout)
    except errors.RequestTimedOut:
        print("Timeout waiting for election results", file=sys.stdout)
        return 1
    except (CommandError, errors.KafkaError, OSError, ValueError) as e:
        print(getattr(e, "message", None) or str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
