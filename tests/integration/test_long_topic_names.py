"""Topics with the longest legal name, 249 characters: create, use, delete, restart, create again (issue 8, §2).

A partition directory is ``<topic>-<p>`` (251 bytes here). Deleting renames it to ``<topic>-<p>.<32 hex>-delete``
first, which would be 291 bytes, past the 255-byte file-name limit (ENAMETOOLONG), so the deletion used to stay
stuck with the directory in place. Kafka (LocalLog.logDirNameWithSuffixCappedLength) cuts the topic part so the
name fits 255 bytes; kbroker does the same, and removes such directories when it loads its log dirs.

Checked end to end with real clients (confluent-kafka's AdminClient, producer and consumer; kafka-python's admin):
the deletion completes, no directory of the topic is left, a leftover ``-delete`` directory from a crash is
removed at startup, and in a two-broker cluster (ZooKeeper) a deletion that waited for a stopped replica broker
completes when that broker comes back -- then the same name can be created again and starts empty.
"""
from __future__ import annotations

import os
import shutil

import pytest

from kbroker.log.manager import delete_dir_name
from tests.integration.harness import wait_until
from tests.integration.test_clients_common import Rec, confluent_consume, confluent_produce, create_topic
from tests.integration.test_fetch_limits import wait_for_controller

pytestmark = pytest.mark.timeout(300)

TOPIC = ("long-" * 50)[:248] + "x"          # 249 characters: Kafka's maximum
assert len(TOPIC) == 249


def topic_dirs(broker) -> list[str]:
    """Every entry of the broker's log dir that belongs to TOPIC (live or being deleted)."""
    prefix = TOPIC[:200]
    return sorted(n for n in os.listdir(broker.log_dir) if n.startswith(prefix))


def start(broker) -> None:
    broker.start()
    wait_for_controller(broker)


def listed(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return TOPIC in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def delete_topic(bootstrap: str, timeout: float = 30.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer came
    futures = admin.delete_topics([TOPIC], operation_timeout=timeout, request_timeout=timeout + 5)
    assert futures[TOPIC].result(timeout + 10) is None


def produce_and_read(bootstrap: str, partitions: int, n: int, tag: bytes) -> None:
    recs = [Rec(p, None, b"%s-%d-%d" % (tag, p, i), (), None) for i in range(n) for p in range(partitions)]
    confluent_produce(bootstrap, TOPIC, recs)
    got = confluent_consume(bootstrap, TOPIC, n * partitions, partitions=tuple(range(partitions)))
    assert [(g.partition, g.offset, g.value) for g in got] == [
        (p, i, b"%s-%d-%d" % (tag, p, i)) for p in range(partitions) for i in range(n)]


def test_create_delete_and_create_again(broker):
    wait_for_controller(broker)
    create_topic(broker.bootstrap, TOPIC, 2)
    assert topic_dirs(broker) == [TOPIC + "-0", TOPIC + "-1"]
    produce_and_read(broker.bootstrap, 2, 3, b"first")
    delete_topic(broker.bootstrap)
    wait_until(lambda: not listed(broker.bootstrap), 30, message="topic gone from Metadata")
    assert topic_dirs(broker) == []
    assert "ENAMETOOLONG" not in broker.log_text() and "File name too long" not in broker.log_text()
    # The same name again: empty partitions, offsets from 0.
    create_topic(broker.bootstrap, TOPIC, 2)
    produce_and_read(broker.bootstrap, 2, 1, b"second")
    # ... and it survives a restart.
    broker.stop()
    start(broker)
    got = confluent_consume(broker.bootstrap, TOPIC, 2, partitions=(0, 1))
    assert [(g.partition, g.offset, g.value) for g in got] == [(0, 0, b"second-0-0"), (1, 0, b"second-1-0")]


def test_kafka_python_admin_deletes_it_too(broker):
    wait_for_controller(broker)
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)], timeout_ms=30_000)
        produce_and_read(broker.bootstrap, 1, 2, b"kp")
        admin.delete_topics([TOPIC], timeout_ms=30_000)
        wait_until(lambda: TOPIC not in admin.list_topics(), 30, message="topic gone")
    finally:
        admin.close()
    assert topic_dirs(broker) == []


def test_interrupted_deletion_is_finished_at_startup(broker):
    """A crash between the rename and the removal leaves ``<topic cut>-<p>.<id>-delete`` with the whole log in it:
    the next start removes it and nothing of the old topic comes back."""
    wait_for_controller(broker)
    create_topic(broker.bootstrap, TOPIC, 1)
    produce_and_read(broker.bootstrap, 1, 3, b"old")
    broker.stop()
    live = broker.log_dir / (TOPIC + "-0")
    saved = broker.dir / "saved-partition"
    shutil.copytree(live, saved)                  # the log as it was before the deletion began
    start(broker)
    delete_topic(broker.bootstrap)
    wait_until(lambda: not listed(broker.bootstrap), 30, message="topic gone from Metadata")
    broker.stop()
    doomed = broker.log_dir / delete_dir_name(TOPIC, 0)
    shutil.copytree(saved, doomed)                # the state a crash mid-deletion leaves
    assert len(doomed.name) == 255 and any(n.endswith(".log") for n in os.listdir(doomed))
    start(broker)
    assert topic_dirs(broker) == []
    assert not listed(broker.bootstrap)
    create_topic(broker.bootstrap, TOPIC, 1)
    produce_and_read(broker.bootstrap, 1, 1, b"new")


@pytest.mark.zk
def test_cluster_deletion_resumes_when_the_replica_broker_restarts(tmp_path, zk_ensemble):
    from tests.integration.test_cluster_common import Cluster

    cluster = Cluster(tmp_path, zk_ensemble, n=2)
    try:
        cluster.start()
        _create_rf2(cluster.bootstrap)
        cluster.wait_topic_everywhere(TOPIC, 1)
        recs = [Rec(0, None, b"v%d" % i, (), None) for i in range(3)]
        confluent_produce(cluster.bootstrap, TOPIC, recs, acks="all")
        b0, b1 = cluster.brokers
        wait_until(lambda: topic_dirs(b1) == [TOPIC + "-0"] and topic_dirs(b0) == [TOPIC + "-0"], 30,
                   message="both replicas on disk")
        b1.stop()
        # Deletion starts; the replica on the stopped broker cannot be deleted, so it stays pending.
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": b0.bootstrap})
        futures = admin.delete_topics([TOPIC], operation_timeout=3, request_timeout=10)
        with pytest.raises(Exception):
            futures[TOPIC].result(20)
        # kbroker's controller starts a topic's deletion once every replica broker is up (Kafka deletes the live
        # replicas at once and the others later): both replicas are still there, the topic marked for deletion.
        assert cluster.zk.exists(f"/admin/delete_topics/{TOPIC}") is not None
        assert topic_dirs(b1) == [TOPIC + "-0"]
        # The broker comes back in the middle of the deletion: the controller finishes it on both brokers.
        b1.start()
        wait_until(lambda: topic_dirs(b1) == [] and topic_dirs(b0) == [], 60,
                   message="both replicas deleted after broker 1's restart")
        wait_until(lambda: cluster.zk.exists(f"/admin/delete_topics/{TOPIC}") is None
                   and cluster.zk.exists(f"/brokers/topics/{TOPIC}") is None, 60, message="deletion completed")
        assert "File name too long" not in b1.log_text()
        _create_rf2(cluster.bootstrap)
        cluster.wait_topic_everywhere(TOPIC, 1)
        confluent_produce(cluster.bootstrap, TOPIC, [Rec(0, None, b"again", (), None)], acks="all")
        got = confluent_consume(cluster.bootstrap, TOPIC, 1)
        assert [(g.offset, g.value) for g in got] == [(0, b"again")]
    finally:
        cluster.close()


def _create_rf2(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, 1, 2)], operation_timeout=30, request_timeout=30)
    assert futures[TOPIC].result(40) is None
