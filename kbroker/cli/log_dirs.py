"""``kbroker-admin log-dirs``: Kafka's kafka-log-dirs.sh (``org.apache.kafka.tools.LogDirsCommand``) over kbroker's
blocking client: DescribeLogDirs (35) to every broker asked.

    kbroker-admin log-dirs --bootstrap-server H:P --describe [--broker-list 0,1] [--topic-list t1,t2]
                           [--command-config FILE]

Output (stdout), Kafka 4.4's lines:

    Querying brokers for log directories information
    Received log directory information from brokers 0,1
    {"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":"t-0","size":458,"offsetLag":0,
     "isFuture":false}],"error":null,"logDir":"/data/a"}]}],"version":1}

The JSON is one line (wrapped above), its keys in the order Kafka 4.4 printed them in our runs (Kafka builds it from
Java maps, so its own order is the maps'); brokers in the order asked (``--broker-list``) or in id order, log dirs in
the broker's log.dirs order, partitions sorted by topic then partition (Kafka: its hash map's order). ``--topic-list``
filters the partitions printed (every log dir is still listed), as Kafka does. A log dir's ``error`` is the Java
exception class Kafka names for its code (``org.apache.kafka.common.errors.KafkaStorageException`` for 56), else null.
Errors (stderr, exit 1): ``ERROR: The given brokers do not exist from --broker-list: 5. Current existent brokers:
0``; a broker that refuses (CLUSTER_AUTHORIZATION_FAILED, v3+) -> ``ERROR: <error name>`` naming the broker.
"""
import json
import sys

from kbroker import errors
from kbroker.client.cluster import Cluster

from .common import ArgParser, UsageError, usage_error

ERROR_CLASSES = {
    errors.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
    errors.UNKNOWN_SERVER_ERROR: "org.apache.kafka.common.errors.UnknownServerException",
}


def parser():
    p = ArgParser(prog="kbroker-admin log-dirs", description="Query the log directories of brokers "
                                                             "(kafka-log-dirs.sh).")
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: the server(s) to use for bootstrapping")
    p.add_argument("--describe", action="store_true", help="describe the specified log directories on the "
                                                           "specified brokers")
    p.add_argument("--broker-list", default="", help="the list of brokers to be queried in the form "
                                                     "\"0,1,2\"; all brokers in the cluster if not specified")
    p.add_argument("--topic-list", default="", help="the list of topics to be queried in the form \"topic1,"
                                                    "topic2\"; all topics if not specified")
    return p


def _log_dir_doc(result, topics):
    parts = []
    for t in result["topics"]:
        if topics and t["name"] not in topics:
            continue
        for pr in t["partitions"]:
            parts.append(((t["name"], pr["partition_index"]), {
                "partition": "%s-%d" % (t["name"], pr["partition_index"]), "size": pr["partition_size"],
                "offsetLag": pr["offset_lag"], "isFuture": bool(pr["is_future_key"])}))
    code = result["error_code"]
    return {"partitions": [doc for _tp, doc in sorted(parts, key=lambda x: x[0])],
            "error": None if code == 0 else ERROR_CLASSES.get(code, errors.error_name(code)),
            "logDir": result["log_dir"]}


def describe(cluster, brokers, topics, out):
    """Print the three lines; returns the exit status."""
    cluster.metadata([])
    existing = sorted(cluster.brokers)
    if brokers:
        missing = [b for b in brokers if b not in cluster.brokers]
        if missing:
            print("ERROR: The given brokers do not exist from --broker-list: %s. Current existent brokers: %s"
                  % (",".join(map(str, missing)), ",".join(map(str, existing))), file=sys.stderr)
            return 1
    else:
        brokers = existing
    print("Querying brokers for log directories information", file=out)
    docs = []
    for b in brokers:
        resp = cluster.connection(b).request("DescribeLogDirs", {"topics": None})
        if resp.get("error_code"):
            print("ERROR: broker %d: %s" % (b, errors.error_name(resp["error_code"])), file=sys.stderr)
            return 1
        docs.append({"broker": b, "logDirs": [_log_dir_doc(r, topics) for r in resp["results"]]})
    print("Received log directory information from brokers %s" % ",".join(map(str, brokers)), file=out)
    print(json.dumps({"brokers": docs, "version": 1}, separators=(",", ":")), file=out)
    return 0


def _int_list(text, what):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError("%s must be a comma separated list of integers: %r" % (what, text)) from None


def main(argv):
    p = parser()
    try:
        opts = p.parse_args(argv)
        if not opts.describe:
            raise UsageError("Command must include exactly one action: --describe")
        brokers = _int_list(opts.broker_list, "--broker-list")
    except UsageError as e:
        usage_error(p, e)
        return 1
    except SystemExit as e:            # --help
        return e.code or 0
    topics = {t for t in opts.topic_list.split(",") if t}
    try:
        with Cluster(opts.bootstrap_server) as cluster:
            return describe(cluster, brokers, topics, sys.stdout)
    except errors.KafkaError as e:
        print("ERROR: %s" % (e.message or e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
