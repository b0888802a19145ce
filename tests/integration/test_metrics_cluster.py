"""/metrics of a 3-broker ZooKeeper cluster checked against what the test did (issue 13).

One ensemble and one cluster for the module, each broker with its own metrics port. The topic ``m`` has 3
partitions, RF 3; ``__consumer_offsets`` has 3 partitions (RF 3) so the expected counts stay small and exact:

* messages and bytes: summed over the brokers, ``messagesin{topic="m"}`` is the number of records produced and
  ``bytesin{topic="m"}`` the bytes of the batches appended (a leader stores a produced v2 batch as sent, so it is the
  size of the partition's .log files); after one full read, ``bytesout{topic="m"}`` (consumers) is the same bytes;
* a group that read 100 of the 300 records and committed what it read shows, on its coordinator, a lag per
  partition equal to the records of that partition it did not read (from the background ListOffsets cache for
  partitions led by another broker);
* active controller count summed over the brokers is 1, before and after a broker dies;
* under-replicated partitions: 0, then after kill -9 of a broker exactly the partitions that had a replica on it
  (counted by their leaders), 0 again once it is back and caught up; the leaders' ISR expansions grow by exactly
  that number; the controller's broker-change timer (LeaderElectionRateAndTimeMs) counted the failure.
"""
from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration import harness
from tests.integration.harness import wait_until
from tests.integration.test_cluster_common import FAILOVER_WAIT_S, Cluster, create_topics, metadata, produce

pytestmark = [pytest.mark.zk, pytest.mark.timeout(240)]

TOPIC = "m"
PER_PARTITION = {0: 120, 1: 100, 2: 80}                # 300 records
READ = 100
GROUP = "lag-group"
OVERRIDES = {"offsets.topic.num.partitions": 3, "auto.leader.rebalance.enable": "false"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble):   # zk_ensemble: tests/integration/conftest.py
    c = Cluster(tmp_path_factory.mktemp("metrics_cluster"), zk_ensemble, overrides=OVERRIDES)
    for b in c.brokers:
        b.overrides["metrics.http.port"] = harness.free_port()
        b.overrides["metrics.http.host"] = "127.0.0.1"
    try:
        c.start()
        yield c
    finally:
        c.close()


def scrape(broker) -> dict:
    """{(sample name, frozenset(labels)): value} of the broker's /metrics."""
    port = int(broker.overrides["metrics.http.port"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(brokers, name: str, **labels) -> float:
    return sum(value(scrape(b), name, **labels) for b in brokers)


def log_bytes(broker, topic: str) -> int:
    """Bytes of the topic's .log segments in the broker's log dir (every replica holds the same batches)."""
    return sum(f.stat().st_size for f in Path(broker.log_dir).glob(f"{topic}-*/*.log"))


def test_messages_bytes_and_group_lag_exact(cluster):
    create_topics(cluster.bootstrap, [(TOPIC, 3, 3)])
    cluster.wait_topic_everywhere(TOPIC, 3)
    produce(cluster.bootstrap, TOPIC, {p: [b"v%d-%d" % (p, i) for i in range(n)] for p, n in PER_PARTITION.items()})
    stored = log_bytes(cluster.brokers[0], TOPIC)
    wait_until(lambda: all(log_bytes(b, TOPIC) == stored for b in cluster.brokers), 20,
               message="every replica holds the produced batches")
    assert total(cluster.brokers, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 300
    assert total(cluster.brokers, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == stored

    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    read = {p: 0 for p in PER_PARTITION}
    everything = {p: 0 for p in PER_PARTITION}
    try:
        # The group's members read everything once (bytes out), but commit only the first READ records seen.
        c.assign([TopicPartition(TOPIC, p, 0) for p in PER_PARTITION])
        n = 0
        deadline = time.monotonic() + 30
        while n < 300 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            everything[m.partition()] += 1
            if n < READ:
                read[m.partition()] = m.offset() + 1
            n += 1
        assert everything == PER_PARTITION
        c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in read.items()], asynchronous=False)
    finally:
        c.close()
    assert sum(read.values()) == READ
    wait_until(lambda: total(cluster.brokers, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC)
               == stored, 10, message="bytes out to consumers == the batches stored")

    expected = {p: PER_PARTITION[p] - read[p] for p in PER_PARTITION}

    def lags():
        got = {}
        for b in cluster.brokers:
            for (name, labels), v in scrape(b).items():
                lb = dict(labels)
                if name == "kbroker_consumergroup_lag" and lb["group"] == GROUP:
                    assert lb["topic"] == TOPIC and int(lb["partition"]) not in got, (b.broker_id, lb)
                    got[int(lb["partition"])] = v
        return got
    # The coordinator alone exports the group (each partition once); partitions led elsewhere appear once its
    # background ListOffsets answered (the first scrape asks for them).
    wait_until(lambda: lags() == expected, 20, message=f"group lag {expected}")


def test_controller_count_and_under_replicated_around_a_broker_kill(cluster):
    brokers = cluster.brokers
    wait_until(lambda: total(brokers, "kafka_server_replicamanager_underreplicatedpartitions") == 0, 20,
               message="no under-replicated partition")
    assert total(brokers, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    controller = cluster.controller_id()
    victim = next(b for b in brokers if b.broker_id != controller)
    survivors = [b for b in brokers if b is not victim]
    md = metadata(survivors[0], None)
    partitions = [(t, p, pd["replicas"]) for t, td in md["topics"].items() for p, pd in td["partitions"].items()]
    assert total(brokers, "kafka_server_replicamanager_partitioncount") == sum(len(r) for _, _, r in partitions)
    assert total(brokers, "kafka_server_replicamanager_leadercount") == len(partitions)
    hosted = [(t, p) for t, p, replicas in partitions if victim.broker_id in replicas]
    assert len(hosted) >= 3                              # m's 3 partitions (and __consumer_offsets' when made)
    ctl = brokers[controller]
    changes = value(scrape(ctl), "kafka_controller_controllerstats_leaderelectionrateandtimems_count")
    expands = total(survivors, "kafka_server_replicamanager_isrexpands_total")

    victim.kill9()
    wait_until(lambda: total(survivors, "kafka_server_replicamanager_underreplicatedpartitions") == len(hosted),
               FAILOVER_WAIT_S, message=f"{len(hosted)} under-replicated partitions after the kill")
    s = scrape(ctl)
    assert value(s, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") >= changes + 1
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert total(survivors, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert total(survivors, "kafka_server_replicamanager_leadercount") == len(partitions)

    victim.start()
    wait_until(lambda: total(brokers, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
               FAILOVER_WAIT_S + 20, message="the restarted broker back in every ISR")
    assert total(survivors, "kafka_server_replicamanager_isrexpands_total") == expands + len(hosted)
    assert total(brokers, "kafka_controller_kafkacontroller_activecontrollercount") == 1
