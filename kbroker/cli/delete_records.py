"""``kbroker-admin delete-records``: Kafka's kafka-delete-records.sh (``DeleteRecordsCommand``): DeleteRecords (21)
to each partition's leader.

    kbroker-admin delete-records --bootstrap-server H:P --offset-json-file F [--command-config FILE]

``F`` (Kafka's format): ``{"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}``; offset -1
means the high watermark (everything). ``version`` may be left out (1); another value -> ``Not supported version
field value 2``; no ``partitions`` -> ``Missing partitions field``; a partition twice -> ``Offset json file contains
duplicate topic partitions: foo-1``.

Output (stdout), Kafka's lines; partitions in (topic, partition) order (Kafka: its hash map's order)::

    Executing records delete operation
    Records delete operation completed:
    partition: foo-1<TAB>low_watermark: 1
    partition: foo-2<TAB>error: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset ...

A partition error is a line of the output, not a failure (exit 0, as Kafka). Errors of the command itself: the
message alone on stderr, exit 1 (Kafka 3.9's DeleteRecordsCommand prints the exception's message, then its stack
trace); usage errors: the problem and the usage.
"""
import json
import sys

from kbroker import errors
from kbroker.client.cluster import Cluster

from .common import ArgParser, CommandError, duplicates, load_json, parse_command_line, read_file
from .java_errors import exception_text

TIMEOUT_MS = 30000      # the Java admin client's default.api.timeout.ms / request timeout


def parser():
    p = ArgParser(prog="kbroker-admin delete-records",
                  description="Delete records of the given partitions down to the specified offset "
                              "(kafka-delete-records.sh).")
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: the server to connect to")
    p.add_argument("--offset-json-file", required=True,
                   help='REQUIRED: the JSON file with offset per partition: {"partitions": [{"topic": "foo", '
                        '"partition": 1, "offset": 1}], "version": 1}')
    return p


def parse_offset_json(text):
    """The file's text -> [((topic, partition), offset)] in file order; CommandError with Kafka's messages."""
    doc = load_json(text, "offset json file")
    if not isinstance(doc, dict):
        raise CommandError("The input string is not a valid JSON")
    version = doc.get("version", 1)
    if version != 1:
        raise CommandError("Not supported version field value %s" % json.dumps(version))
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise CommandError("Missing partitions field")
    out = []
    for e in parts:
        if (not isinstance(e, dict) or not isinstance(e.get("topic"), str)
                or any(isinstance(e.get(k), bool) or not isinstance(e.get(k), int) for k in ("partition", "offset"))):
            raise CommandError('each partition must be {"topic": <string>, "partition": <int>, "offset": <long>}, '
                               'got %s' % json.dumps(e))
        out.append(((e["topic"], e["partition"]), e["offset"]))
    dup = duplicates(tp for tp, _ in out)
    if dup:
        raise CommandError("Offset json file contains duplicate topic partitions: %s"
                           % ",".join("%s-%d" % tp for tp in dup))
    return out


def delete_records(cluster, wanted, timeout_ms=TIMEOUT_MS):
    """[((topic, p), offset)] -> {(topic, p): (low watermark, 0) | (-1, code)}: one DeleteRecords per leader."""
    cluster.metadata(sorted({t for (t, _p), _o in wanted}))
    results, by_leader = {}, {}
    for (topic, p), offset in wanted:
        info = cluster.topics.get(topic, {}).get(p)
        if info is None:
            results[(topic, p)] = (-1, errors.UNKNOWN_TOPIC_OR_PARTITION)
        elif info.leader < 0:
            results[(topic, p)] = (-1, errors.LEADER_NOT_AVAILABLE)
        else:
            by_leader.setdefault(info.leader, {}).setdefault(topic, []).append(
                {"partition_index": p, "offset": offset})
    for leader, topics in sorted(by_leader.items()):
        resp = cluster.connection(leader).request("DeleteRecords", {
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()], "timeout_ms": timeout_ms})
        for t in resp["topics"]:
            for pr in t["partitions"]:
                results[(t["name"], pr["partition_index"])] = (pr["low_watermark"], pr["error_code"])
    return results


def run(opts, out):
    wanted = parse_offset_json(read_file(opts.offset_json_file))
    with Cluster(opts.bootstrap_server) as cluster:
        print("Executing records delete operation", file=out)
        results = delete_records(cluster, wanted)
    print("Records delete operation completed:", file=out)
    for tp in sorted(results):
        low, code = results[tp]
        if code:
            print("partition: %s-%d\terror: %s" % (tp[0], tp[1], exception_text(code)), file=out)
        else:
            print("partition: %s-%d\tlow_watermark: %d" % (tp[0], tp[1], low), file=out)
    return 0


def main(argv):
    opts, code = parse_command_line(parser(), argv)
    if opts is None:
        return code
    try:
        return run(opts, sys.stdout)
    except (CommandError, errors.KafkaError, OSError) as e:
        print(getattr(e, "message", None) or str(e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
