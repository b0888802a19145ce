"""kbroker.streams.runtime without a broker: StreamsConfig (Kafka's keys, defaults, refusals, client
configurations translated for librdkafka), the internal-topic plan (partition counts, configs, co-partitioning),
the member identity in client ids and the standby ring."""
import pytest

from kbroker.streams.errors import StreamsException
from kbroker.streams.processor import Processor
from kbroker.streams.runtime import internal_topics as it
from kbroker.streams.runtime.config import StreamsConfig, StreamsConfigError
from kbroker.streams.runtime.metadata import HostInfo, member_client_id, parse_member_client_id, standby_owners
from kbroker.streams.state.stores import Stores
from kbroker.streams.topology import Topology

BASE = {"application.id": "app", "bootstrap.servers": "h:1"}


def cfg(**extra):
    conf = dict(BASE)
    conf.update({k.replace("__", "."): v for k, v in extra.items()})
    return StreamsConfig(conf)


def test_defaults_are_kafkas():
    c = cfg()
    assert c["num.stream.threads"] == 1 and c["commit.interval.ms"] == 30000
    assert c["statestore.cache.max.bytes"] == 10485760 and c["cache.max.bytes.buffering"] == 10485760
    assert c["processing.guarantee"] == "at_least_once" and c["num.standby.replicas"] == 0
    assert c["replication.factor"] == -1 and c["state.dir"].endswith("kafka-streams")
    assert c["poll.ms"] == 100 and c["max.task.idle.ms"] == 0 and c["acceptable.recovery.lag"] == 10000
    assert c["default.deserialization.exception.handler"].endswith("LogAndFailExceptionHandler")
    # exactly_once_v2 commits every 100 ms unless set
    assert cfg(processing__guarantee="exactly_once_v2")["commit.interval.ms"] == 100
    assert cfg(processing__guarantee="exactly_once_v2", commit__interval__ms="250")["commit.interval.ms"] == 250
    # the deprecated cache name feeds the new one; strings are parsed
    assert cfg(cache__max__bytes__buffering="0")["statestore.cache.max.bytes"] == 0


def test_refusals_name_the_key():
    with pytest.raises(StreamsConfigError, match='Missing required configuration "application.id" which has no '
                                                 'default value.'):
        StreamsConfig({"bootstrap.servers": "h:1"})
    for old in ("exactly_once", "exactly_once_beta"):
        with pytest.raises(StreamsConfigError, match="Invalid value %s for configuration processing.guarantee: "
                                                     "String must be one of: at_least_once, exactly_once_v2" % old):
            cfg(processing__guarantee=old)
    with pytest.raises(StreamsConfigError, match="Unknown configuration key\\(s\\): aplication.id, zzz"):
        StreamsConfig(dict(BASE, **{"aplication.id": "x", "zzz": 1}))
    with pytest.raises(StreamsConfigError, match="max.warmup.replicas"):
        cfg(max__warmup__replicas=3)
    assert cfg(max__warmup__replicas=2)["max.warmup.replicas"] == 2          # the default is accepted
    with pytest.raises(StreamsConfigError, match="num.stream.threads: Value must be at least 0"):
        cfg(num__stream__threads=-1)
    with pytest.raises(StreamsConfigError, match="commit.interval.ms: Not a number"):
        cfg(commit__interval__ms="soon")
    with pytest.raises(StreamsConfigError, match="application.server: expected host:port"):
        cfg(application__server="nohost")
    with pytest.raises(StreamsConfigError, match="producer.transactional.id"):
        StreamsConfig(dict(BASE, **{"producer.transactional.id": "t"}))


def test_client_configs_layer_prefixes_and_translate():
    c = StreamsConfig(dict(BASE, **{
        "processing.guarantee": "exactly_once_v2", "request.timeout.ms": 7000, "session.timeout.ms": 9000,
        "consumer.fetch.max.wait.ms": 50, "main.consumer.session.timeout.ms": 8000,
        "restore.consumer.fetch.min.bytes": 5, "producer.linger.ms": 7, "admin.retries": 3,
        "consumer.max.poll.records": 77, "consumer.group.id": "ignored", "delivery.timeout.ms": 60000}))
    main = c.main_consumer_config("cid")
    assert main["group.id"] == "app" and main["client.id"] == "cid"
    assert main["enable.auto.commit"] == "false" and main["partition.assignment.strategy"] == "range"
    assert main["isolation.level"] == "read_committed" and main["auto.offset.reset"] == "earliest"
    assert main["fetch.wait.max.ms"] == "50" and main["session.timeout.ms"] == "8000"
    assert "max.poll.records" not in main and c.max_poll_records() == 77
    restore = c.restore_consumer_config("rid")
    assert restore["fetch.min.bytes"] == "5" and restore["session.timeout.ms"] == "9000"
    assert restore["isolation.level"] == "read_committed" and restore["group.id"] != "app"
    prod = c.producer_config("pid", "app-uuid-1")
    assert prod["transactional.id"] == "app-uuid-1" and prod["linger.ms"] == "7"
    assert prod["enable.idempotence"] == "true" and prod["acks"] == "all" and prod["partitioner"] == "murmur2_random"
    assert prod["transaction.timeout.ms"] == "10000"
    # librdkafka's message timeout may not exceed the transaction timeout; delivery.timeout.ms is its Java name
    assert prod["message.timeout.ms"] == "10000"
    assert c.admin_config("aid")["retries"] == "3"
    assert cfg().producer_config("p")["linger.ms"] == "100"           # Streams' producer default
    assert "transactional.id" not in cfg().producer_config("p")
    assert cfg().main_consumer_config("c").get("isolation.level") is None


def test_validate_clients_names_a_key_librdkafka_refuses():
    cfg(consumer__fetch__wait__max__ms=10).validate_clients()
    c = StreamsConfig(dict(BASE, **{"consumer.no.such.property": 1}))
    with pytest.raises(StreamsConfigError, match='main consumer configuration refused by librdkafka: .*'
                                                 'No such configuration property: "no.such.property"'):
        c.validate_clients()


def test_topic_prefix_reaches_internal_topic_configs():
    assert cfg(topic__min__insync__replicas=2).topic_configs() == {"min.insync.replicas": "2"}


# ---------------------------------------------------------------------------------------- internal topics

class Nop(Processor):
    def process(self, record):
        pass


def _topology():
    """sub-topology 0: in-a -> p0 -> sink x-repartition; sub-topology 1: x-repartition -> agg (store "s",
    logged) ; sub-topology 2: win-in -> w (windowed store "w")."""
    t = Topology()
    t.add_internal_topic("x-repartition")
    t.add_source("src-a", "in-a").add_processor("p0", Nop, "src-a").add_sink("sink-x", "x-repartition", "p0")
    t.add_source("src-x", "x-repartition").add_processor("agg", Nop, "src-x")
    t.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("s")), "agg")
    t.add_source("src-w", "win-in").add_processor("w", Nop, "src-w")
    t.add_state_store(Stores.window_store_builder(Stores.persistent_window_store("ws", 3_600_000, 60_000))
                      .with_logging_enabled({"min.cleanable.dirty.ratio": "0.1"}), "w")
    return t


def test_plan_partition_counts_and_configs():
    plan = it.plan(_topology(), "app", {"in-a": 4, "win-in": 2}, cfg(topic__segment__ms=1000))
    assert plan.task_counts == {0: 4, 1: 4, 2: 2}
    parts, conf = plan.topics["app-x-repartition"]
    assert parts == 4 and conf == {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                                   "message.timestamp.type": "CreateTime", "segment.ms": "1000"}
    parts, conf = plan.topics["app-s-changelog"]
    assert parts == 4 and conf["cleanup.policy"] == "compact" and "retention.ms" not in conf
    parts, conf = plan.topics["app-ws-changelog"]
    # windowed: compact,delete; retention = store retention + windowstore.changelog.additional.retention.ms
    assert parts == 2 and conf["cleanup.policy"] == "compact,delete"
    assert conf["retention.ms"] == str(3_600_000 + 86_400_000) and conf["min.cleanable.dirty.ratio"] == "0.1"


def test_plan_refuses_missing_sources_and_uncopartitioned_topics():
    with pytest.raises(it.MissingSourceTopicException, match="Missing source topic\\(s\\) in-a"):
        it.plan(_topology(), "app", {"win-in": 2}, cfg())
    t = Topology()
    t.add_source("a", "left").add_source("b", "right").add_processor("j", Nop, "a", "b")
    t.copartition("left", "right")
    with pytest.raises(StreamsException, match="Topics not co-partitioned: \\[left: 3 partitions, right: 2"):
        it.plan(t, "app", {"left": 3, "right": 2}, cfg())
    assert it.plan(t, "app", {"left": 3, "right": 3}, cfg()).task_counts == {0: 3}


def test_fixed_repartition_count_wins():
    t = Topology()
    t.add_internal_topic("r-repartition", partitions=7)
    t.add_source("s", "in").add_sink("k", "r-repartition", "s")
    t.add_source("r", "r-repartition").add_processor("p", Nop, "r")
    plan = it.plan(t, "app", {"in": 2}, cfg())
    assert plan.topics["app-r-repartition"][0] == 7 and plan.task_counts == {0: 2, 1: 7}


# ------------------------------------------------------------------------------------- identity, standbys

def test_member_client_id_round_trip():
    uid = "0b5e4f7a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
    cid = member_client_id("my-app", uid, 2, "node-1.example:8080")
    assert cid == "my-app-%s-StreamThread-2-consumer@node-1.example%%3A8080" % uid
    assert parse_member_client_id(cid) == (uid, 2, "node-1.example:8080")
    assert parse_member_client_id(member_client_id("a-b", uid, 1)) == (uid, 1, None)
    assert parse_member_client_id("rdkafka") is None
    assert HostInfo.parse("h:9") == HostInfo("h", 9) and str(HostInfo("h", 9)) == "h:9"


def test_standby_ring():
    procs = ["a", "b", "c"]
    assert standby_owners(procs, "a", 1) == ["b"] and standby_owners(procs, "c", 1) == ["a"]
    assert standby_owners(procs, "b", 2) == ["c", "a"]
    assert standby_owners(procs, "b", 5) == ["c", "a"]        # never the active itself
    assert standby_owners(["a"], "a", 1) == [] and standby_owners(procs, None, 1) == []
