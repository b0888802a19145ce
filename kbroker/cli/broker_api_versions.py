"""``kbroker-admin broker-api-versions``: Kafka's kafka-broker-api-versions.sh (``BrokerApiVersionsCommand``): the
ApiVersions (18) answer of every broker in the cluster.

    kbroker-admin broker-api-versions --bootstrap-server H:P [--command-config FILE]

Output (stdout), Kafka 3.9's text (``Node.toString`` and ``NodeApiVersions.toString(true)``), brokers by id::

    localhost:9092 (id: 0 rack: null) -> (
    <TAB>Produce(0): 0 to 11 [usable: 11],
    <TAB>Fetch(1): 0 to 12 [usable: 12],
    ...
    <TAB>CreateDelegationToken(38): UNSUPPORTED,
    ...
    )

One line per API key, ascending: ``<name>(<key>): <min> to <max> [usable: <v>]`` (``<v>`` alone when min == max)
for each API the broker advertises, ``usable`` being min(the broker's max, the newest version Kafka 3.9's client
knows: ``CLIENT_LATEST``), ``[unusable: node too new]`` / ``[unusable: node too old]`` when the ranges do not meet,
``UNKNOWN(<key>): ...`` for a key Kafka 3.9 does not know, and ``<name>(<key>): UNSUPPORTED`` for every API of Kafka
3.9's ZooKeeper-mode broker set (``ApiKeys.zkBrokerApis()``) the broker does not advertise. A broker that cannot be
reached prints ``<node> -> ERROR: <reason>``. The table is Kafka 3.9's so the output is what Kafka's own tool prints
against the same broker.
"""
import sys

from kbroker import errors
from kbroker.client.cluster import Cluster

from .common import ArgParser, parse_command_line

# Kafka 3.9's ApiKeys with the zkBroker listener: key -> (name, newest version), from its message specs.
CLIENT_LATEST = {
    0: ("Produce", 11), 1: ("Fetch", 17), 2: ("ListOffsets", 9), 3: ("Metadata", 12), 4: ("LeaderAndIsr", 7),
    5: ("StopReplica", 4), 6: ("UpdateMetadata", 8), 7: ("ControlledShutdown", 3), 8: ("OffsetCommit", 9),
    9: ("OffsetFetch", 9), 10: ("FindCoordinator", 6), 11: ("JoinGroup", 9), 12: ("Heartbeat", 4),
    13: ("LeaveGroup", 5), 14: ("SyncGroup", 5), 15: ("DescribeGroups", 5), 16: ("ListGroups", 5),
    17: ("SaslHandshake", 1), 18: ("ApiVersions", 4), 19: ("CreateTopics", 7), 20: ("DeleteTopics", 6),
    21: ("DeleteRecords", 2), 22: ("InitProducerId", 5), 23: ("OffsetForLeaderEpoch", 4),
    24: ("AddPartitionsToTxn", 5), 25: ("AddOffsetsToTxn", 4), 26: ("EndTxn", 4), 27: ("WriteTxnMarkers", 1),
    28: ("TxnOffsetCommit", 4), 29: ("DescribeAcls", 3), 30: ("CreateAcls", 3), 31: ("DeleteAcls", 3),
    32: ("DescribeConfigs", 4), 33: ("AlterConfigs", 2), 34: ("AlterReplicaLogDirs", 2), 35: ("DescribeLogDirs", 4),
    36: ("SaslAuthenticate", 2), 37: ("CreatePartitions", 3), 38: ("CreateDelegationToken", 3),
    39: ("RenewDelegationToken", 2), 40: ("ExpireDelegationToken", 2), 41: ("DescribeDelegationToken", 3),
    42: ("DeleteGroups", 2), 43: ("ElectLeaders", 2), 44: ("IncrementalAlterConfigs", 1),
    45: ("AlterPartitionReassignments", 0), 46: ("ListPartitionReassignments", 0), 47: ("OffsetDelete", 0),
    48: ("DescribeClientQuotas", 1), 49: ("AlterClientQuotas", 1), 50: ("DescribeUserScramCredentials", 0),
    51: ("AlterUserScramCredentials", 0), 56: ("AlterPartition", 3), 57: ("UpdateFeatures", 1), 58: ("Envelope", 0),
    60: ("DescribeCluster", 1), 61: ("DescribeProducers", 0), 65: ("DescribeTransactions", 0),
    66: ("ListTransactions", 1), 67: ("AllocateProducerIds", 0), 68: ("ConsumerGroupHeartbeat", 0),
    69: ("ConsumerGroupDescribe", 0),
}


def parser():
    p = ArgParser(prog="kbroker-admin broker-api-versions",
                  description="Print the API versions every broker supports (kafka-broker-api-versions.sh).")
    p.add_argument("--bootstrap-server", required=True, help="REQUIRED: the server to connect to")
    return p


def node_text(node_id, host, port, rack=None):
    """Kafka's Node.toString."""
    return "%s:%d (id: %d rack: %s)" % (host, port, node_id, "null" if rack is None else rack)


def api_line(key, lo, hi):
    known = CLIENT_LATEST.get(key)
    text = "%s(%d): " % (known[0], key) if known else "UNKNOWN(%d): " % key
    text += str(lo) if lo == hi else "%d to %d" % (lo, hi)
    if known:
        latest = known[1]
        if latest < lo:
            text += " [unusable: node too new]"
        elif hi < 0:
            text += " [unusable: node too old]"
        else:
            text += " [usable: %d]" % min(latest, hi)
    return text


def versions_text(ranges):
    """``{api key: (min, max)}`` -> NodeApiVersions.toString(true)."""
    lines = {key: api_line(key, lo, hi) for key, (lo, hi) in ranges.items()}
    for key, (name, _latest) in CLIENT_LATEST.items():
        lines.setdefault(key, "%s(%d): UNSUPPORTED" % (name, key))
    return "(\n\t" + ",\n\t".join(lines[k] for k in sorted(lines)) + "\n)"


def run(bootstrap, out):
    with Cluster(bootstrap) as cluster:
        md = cluster.metadata([])
        racks = {b["node_id"]: b.get("rack") for b in md["brokers"]}
        for node_id in sorted(cluster.brokers):
            host, port = cluster.brokers[node_id]
            node = node_text(node_id, host, port, racks.get(node_id))
            try:
                ranges = cluster.connection(node_id).api_ranges
            except (errors.KafkaError, OSError) as e:
                print("%s -> ERROR: %s" % (node, getattr(e, "message", None) or e), file=out)
                continue
            print("%s -> %s" % (node, versions_text(ranges)), file=out)
    return 0


def main(argv):
    opts, code = parse_command_line(parser(), argv)
    if opts is None:
        return code
    try:
        return run(opts.bootstrap_server, sys.stdout)
    except (errors.KafkaError, OSError, ValueError) as e:
        print("Error: %s" % (getattr(e, "message", None) or e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
