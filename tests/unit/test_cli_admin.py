"""kbroker-admin: argument rules, exact describe/list/config lines, alter-config merge -- against a fake AdminClient."""
import json

import pytest

from kbroker.cli import admin as cli
from kbroker.client.admin import ConfigEntry, ConfigSynonym
from kbroker.errors import TopicAlreadyExists, UnknownTopicOrPartition

B = ["--bootstrap-server", "127.0.0.1:9092"]


def _entry(name, value, source, sensitive=False, synonyms=()):
    return ConfigEntry(name, value, source, source == 5, False, sensitive, list(synonyms))


def _part(i, leader, replicas, isr):
    return {"error_code": 0, "partition_index": i, "leader_id": leader, "leader_epoch": 0,
            "replica_nodes": replicas, "isr_nodes": isr, "offline_replicas": []}


class FakeAdmin:
    def __init__(self):
        self.topics = {
            "orders": [_part(1, 2, [2, 3], [2]), _part(0, 1, [1, 2], [1, 2]), _part(2, -1, [3, 1], [])],
            "plain": [_part(0, 1, [1], [1])],
            "__consumer_offsets": [_part(0, 1, [1], [1])],
        }
        self.configs = {
            "orders": [_entry("cleanup.policy", "compact", 1), _entry("retention.ms", "604800000", 5),
                       _entry("segment.bytes", "1000", 1,
                              synonyms=[ConfigSynonym("segment.bytes", "1000", 1),
                                        ConfigSynonym("log.segment.bytes", "1073741824", 5)]),
                       _entry("sasl.thing", "secret", 1, sensitive=True)],
            "plain": [_entry("cleanup.policy", "delete", 5)],
            "__consumer_offsets": [_entry("cleanup.policy", "compact", 1)],
        }
        self.calls = []
        self.topic_ids = {"orders": bytes(range(16))}

    def list_topics(self, include_internal=True):
        return sorted(t for t in self.topics if include_internal or not t.startswith("__"))

    def metadata(self, names=None):
        return {"brokers": [{"node_id": n} for n in (1, 2)],
                "topics": [{"name": n, "error_code": 0, "topic_id": self.topic_ids.get(n, b"\x00" * 16),
                            "partitions": self.topics[n]} for n in names]}

    def describe_configs(self, resources, keys=None, include_synonyms=True):
        return {(t, n): self.configs[n] for t, n in resources}

    def create_topics(self, topics):
        self.calls.append(("create", topics))
        for t in topics:
            if t.name in self.topics:
                raise TopicAlreadyExists("Topic '%s' already exists." % t.name)
        return {t.name: {"num_partitions": t.num_partitions, "replication_factor": t.replication_factor}
                for t in topics}

    def delete_topics(self, names):
        self.calls.append(("delete", names))

    def create_partitions(self, spec):
        self.calls.append(("partitions", spec))

    def alter_configs(self, changes):
        self.calls.append(("alter", changes))


def run_topics(capsys, argv, admin=None):
    admin = admin or FakeAdmin()
    args = cli.parse_topics_args(B + argv)
    rc = cli._run(lambda a: cli._TOPIC_ACTIONS[a.action](admin, a), args, "topic")
    out, err = capsys.readouterr()
    return rc, out, err, admin


# ---------------------------------------------------------------------------------------------- argument rules

@pytest.mark.parametrize("argv,message", [
    (B + ["--list", "--describe"],
     "Command must include exactly one action: --list, --describe, --create, --alter or --delete"),
    (B, "Command must include exactly one action: --list, --describe, --create, --alter or --delete"),
    (["--list"], 'Missing required argument "[bootstrap-server]"'),
    (B + ["--create", "--partitions", "1"], 'Missing required argument "[topic]"'),
    (B + ["--alter", "--topic", "t"], 'Missing required argument "[partitions]"'),
    (B + ["--list", "--if-not-exists"], 'Option "[if-not-exists]" can\'t be used with option "[list]"'),
    (B + ["--create", "--topic", "t", "--if-exists"], 'Option "[if-exists]" can\'t be used with option "[create]"'),
    (B + ["--alter", "--topic", "t", "--partitions", "2", "--config", "a=b"],
     'Option "[config]" can\'t be used with option "[alter]"'),
    (B + ["--create", "--topic", "t", "--partitions", "2", "--replica-assignment", "0:1"],
     'Option "[replica-assignment]" can\'t be used with option "[partitions]" or "[replication-factor]"'),
    (B + ["--list", "--zookeeper", "zk:2181"], "Only one of --bootstrap-server or --zookeeper must be specified"),
])
def test_topics_usage_errors(argv, message):
    with pytest.raises(cli.UsageError) as ei:
        cli.parse_topics_args(argv)
    assert str(ei.value) == message


def test_usage_error_exit_code_and_stderr(capsys):
    assert cli.main(["topics", "--list"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith('Missing required argument "[bootstrap-server]"\nusage: kbroker-admin topics')


def test_main_without_subcommand_means_topics(capsys):
    assert cli.main(["--describe"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[bootstrap-server]"')
    assert cli.main([]) == 1
    assert capsys.readouterr().err.startswith("usage: kbroker-admin <command> [options]")


def test_parse_create_args():
    a = cli.parse_topics_args(B + ["--create", "--topic", "t", "--partitions", "3", "--replication-factor", "2",
                                   "--config", "segment.bytes=1000", "--config", "cleanup.policy = compact",
                                   "--if-not-exists"])
    assert (a.action, a.topic, a.partitions, a.replication_factor, a.if_not_exists) == ("create", "t", 3, 2, True)
    assert cli.parse_topic_configs(a.config) == {"segment.bytes": "1000", "cleanup.policy": "compact"}


def test_replica_assignment_parsing():
    assert cli.parse_replica_assignment("0:1,1:2, 2 : 0") == {0: [0, 1], 1: [1, 2], 2: [2, 0]}
    with pytest.raises(cli.CommandError, match="^Partition replica lists may not contain duplicate entries: 1$"):
        cli.parse_replica_assignment("1:1")
    with pytest.raises(cli.CommandError, match=r"^Partition 1 has different replication factor: \[1\]$"):
        cli.parse_replica_assignment("0:1,1")


def test_bad_topic_config():
    with pytest.raises(cli.CommandError, match="must be in the format"):
        cli.parse_topic_configs(["novalue"])


def test_topic_filter_is_kafka_include_list():
    f = cli.topic_filter("ord.*")
    assert f("orders") and not f("xorders")
    g = cli.topic_filter("'a,b'")
    assert g("a") and g("b") and not g("ab")
    assert cli.topic_filter("orders")("orders") and not cli.topic_filter("orders")("orders2")


# ---------------------------------------------------------------------------------------------- formatting

def test_format_lines_exact():
    assert cli.format_topic_line("t", None, 3, 1, [("segment.bytes", "1000")]) == \
        "Topic: t\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: segment.bytes=1000"
    assert cli.format_topic_line("t", b"\x00" * 16, 1, 1, []) == \
        "Topic: t\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: "
    assert cli.format_topic_line("t", bytes(range(16)), 1, 1, [("a", "1"), ("b", "2")]) == \
        "Topic: t\tTopicId: AAECAwQFBgcICQoLDA0ODw\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: a=1,b=2"
    assert cli.format_partition_line("t", 0, 1, [1, 2], [1, 2]) == \
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2"
    assert cli.format_partition_line("t", 4, -1, [3], []) == \
        "\tTopic: t\tPartition: 4\tLeader: none\tReplicas: 3\tIsr: "


def test_uuid_str_matches_kafka_base64():
    # Kafka's Uuid.toString is URL-safe base64 without padding: 22 characters.
    assert cli.uuid_str(b"\xff" * 16) == "_____________________w"


def test_describe_all_exact(capsys):
    rc, out, err, _ = run_topics(capsys, ["--describe", "--exclude-internal"])
    assert rc == 0 and err == ""
    assert out == (
        "Topic: orders\tTopicId: AAECAwQFBgcICQoLDA0ODw\tPartitionCount: 3\tReplicationFactor: 2\t"
        "Configs: cleanup.policy=compact,segment.bytes=1000,sasl.thing=secret\n"
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\n"
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\n"
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: \n"
        "Topic: plain\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n"
        "\tTopic: plain\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\n")


def test_describe_topics_with_overrides(capsys):
    rc, out, _, _ = run_topics(capsys, ["--describe", "--topics-with-overrides", "--exclude-internal"])
    assert rc == 0
    assert out == ("Topic: orders\tTopicId: AAECAwQFBgcICQoLDA0ODw\tPartitionCount: 3\tReplicationFactor: 2\t"
                   "Configs: cleanup.policy=compact,segment.bytes=1000,sasl.thing=secret\n")


def test_describe_under_replicated_and_unavailable(capsys):
    rc, out, _, _ = run_topics(capsys, ["--describe", "--under-replicated-partitions"])
    assert out == ("\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2\n"
                   "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: \n")
    rc, out, _, _ = run_topics(capsys, ["--describe", "--unavailable-partitions"])
    assert out == "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1\tIsr: \n"


def test_describe_json(capsys):
    rc, out, _, _ = run_topics(capsys, ["--describe", "--topic", "plain", "--output", "json"])
    assert rc == 0
    assert json.loads(out) == [{"topic": "plain", "topic_id": None, "partition_count": 1, "replication_factor": 1,
                                "configs": {}, "partitions": [{"partition": 0, "leader": 1, "replicas": [1],
                                                               "isr": [1]}]}]


def test_describe_missing_topic(capsys):
    rc, out, err, _ = run_topics(capsys, ["--describe", "--topic", "nope"])
    assert (rc, out, err) == (1, "", "Error while executing topic command : Topic 'nope' does not exist as expected\n")
    rc, out, err, _ = run_topics(capsys, ["--describe", "--topic", "nope", "--if-exists"])
    assert (rc, out, err) == (0, "", "")


def test_list(capsys):
    rc, out, _, _ = run_topics(capsys, ["--list"])
    assert out == "__consumer_offsets\norders\nplain\n"
    rc, out, _, _ = run_topics(capsys, ["--list", "--exclude-internal", "--topic", "o.*"])
    assert out == "orders\n"
    rc, out, _, _ = run_topics(capsys, ["--list", "--topic", "zzz"])
    assert out == "\n"  # Kafka prints the empty join
    rc, out, _, _ = run_topics(capsys, ["--list", "--output", "json", "--exclude-internal"])
    assert json.loads(out) == ["orders", "plain"]


def test_create(capsys):
    rc, out, err, admin = run_topics(capsys, ["--create", "--topic", "new", "--partitions", "3",
                                              "--replication-factor", "1", "--config", "retention.ms=5"])
    assert (rc, out, err) == (0, "Created topic new.\n", "")
    (_, [t]), = admin.calls
    assert (t.name, t.num_partitions, t.replication_factor, t.replica_assignment, t.configs) == \
        ("new", 3, 1, None, {"retention.ms": "5"})


def test_create_defaults_and_assignment(capsys):
    rc, out, _, admin = run_topics(capsys, ["--create", "--topic", "a", "--replica-assignment", "1:2,2:1"])
    (_, [t]), = admin.calls
    assert (t.num_partitions, t.replication_factor, t.replica_assignment) == (-1, -1, {0: [1, 2], 1: [2, 1]})
    rc, out, _, admin = run_topics(capsys, ["--create", "--topic", "b"])
    (_, [t]), = admin.calls
    assert (t.num_partitions, t.replication_factor) == (-1, -1)


def test_create_collision_warning(capsys):
    rc, out, _, _ = run_topics(capsys, ["--create", "--topic", "my.topic", "--partitions", "1"])
    assert out == ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                   "could collide. To avoid issues it is best to use either, but not both.\nCreated topic my.topic.\n")


def test_create_existing(capsys):
    rc, out, err, _ = run_topics(capsys, ["--create", "--topic", "orders", "--partitions", "1"])
    assert (rc, out, err) == (1, "", "Error while executing topic command : Topic 'orders' already exists.\n")
    rc, out, err, _ = run_topics(capsys, ["--create", "--topic", "orders", "--partitions", "1", "--if-not-exists"])
    assert (rc, out, err) == (0, "", "")


@pytest.mark.parametrize("argv,msg", [
    (["--create", "--topic", "x", "--partitions", "0"], "The partitions must be greater than 0"),
    (["--create", "--topic", "x", "--replication-factor", "0"],
     "The replication factor must be between 1 and 32767 inclusive"),
])
def test_create_checks(capsys, argv, msg):
    rc, out, err, admin = run_topics(capsys, argv)
    assert (rc, err) == (1, "Error while executing topic command : %s\n" % msg)
    assert admin.calls == []


def test_alter_and_delete(capsys):
    rc, out, err, admin = run_topics(capsys, ["--alter", "--topic", "orders", "--partitions", "6"])
    assert (rc, out, err) == (0, "", "")
    assert admin.calls == [("partitions", {"orders": 6})]
    rc, out, err, admin = run_topics(capsys, ["--delete", "--topic", "pla.*"])
    assert (rc, out, err) == (0, "", "")
    assert admin.calls == [("delete", ["plain"])]
    rc, out, err, admin = run_topics(capsys, ["--delete", "--topic", "gone"])
    assert err == "Error while executing topic command : Topic 'gone' does not exist as expected\n"
    rc, out, err, admin = run_topics(capsys, ["--delete", "--topic", "gone", "--if-exists"])
    assert (rc, admin.calls) == (0, [])


def test_broker_error_message_is_printed(capsys):
    class Failing(FakeAdmin):
        def delete_topics(self, names):
            raise UnknownTopicOrPartition("Topic 'plain' does not exist.")
    rc, out, err, _ = run_topics(capsys, ["--delete", "--topic", "plain"], Failing())
    assert (rc, err) == (1, "Error while executing topic command : Topic 'plain' does not exist.\n")


# ---------------------------------------------------------------------------------------------- configs

def run_configs(capsys, argv, admin=None):
    admin = admin or FakeAdmin()
    args = cli.parse_configs_args(B + argv)
    rc = cli._run(lambda a: (cli.configs_alter if a.alter else cli.configs_describe)(admin, a), args, "config")
    out, err = capsys.readouterr()
    return rc, out, err, admin


def test_add_config_parsing():
    assert cli.parse_add_config("a=1,b=[x,y],c = 3") == {"a": "1", "b": "x,y", "c": "3"}
    assert cli.parse_delete_config(["a,b", " c "]) == ["a", "b", "c"]
    with pytest.raises(cli.CommandError, match="Invalid entity config"):
        cli.parse_add_config("a")


@pytest.mark.parametrize("argv,message", [
    (["--entity-type", "topics", "--entity-name", "t"], "Command must include exactly one action: --describe, --alter"),
    (["--describe"], "At least one entity type must be specified"),
    (["--alter", "--entity-type", "topics", "--entity-name", "t"],
     "At least one of --add-config or --delete-config must be specified with --alter"),
    (["--describe", "--topic", "t", "--add-config", "a=1"],
     "--add-config and --delete-config are only valid with --alter"),
])
def test_configs_usage_errors(argv, message):
    with pytest.raises(cli.UsageError) as ei:
        cli.parse_configs_args(B + argv)
    assert str(ei.value) == message


def test_configs_describe_exact(capsys):
    rc, out, err, _ = run_configs(capsys, ["--describe", "--entity-type", "topics", "--entity-name", "orders"])
    assert (rc, err) == (0, "")
    assert out == ("Dynamic configs for topic orders are:\n"
                   "  cleanup.policy=compact sensitive=false synonyms={}\n"
                   "  sasl.thing=null sensitive=true synonyms={}\n"
                   "  segment.bytes=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=1000, "
                   "DEFAULT_CONFIG:log.segment.bytes=1073741824}\n")


def test_configs_describe_all(capsys):
    rc, out, _, _ = run_configs(capsys, ["--describe", "--topic", "plain", "--all"])
    assert out == "All configs for topic plain are:\n  cleanup.policy=delete sensitive=false synonyms={}\n"


def test_configs_alter_merges_full_set(capsys):
    rc, out, err, admin = run_configs(capsys, ["--alter", "--topic", "orders", "--add-config",
                                               "retention.ms=5,cleanup.policy=[compact,delete]",
                                               "--delete-config", "segment.bytes"])
    assert (rc, out, err) == (0, "Completed updating config for topic orders.\n", "")
    assert admin.calls == [("alter", {(2, "orders"): {"cleanup.policy": "compact,delete", "sasl.thing": "secret",
                                                      "retention.ms": "5"}})]


def test_configs_delete_unknown_key(capsys):
    rc, out, err, admin = run_configs(capsys, ["--alter", "--topic", "orders", "--delete-config", "nope,x"])
    assert (rc, out, err) == (1, "", "Error while executing config command : Invalid config(s): nope,x\n")
    assert admin.calls == []
