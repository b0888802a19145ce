"""The broker side of a controlled shutdown (``Broker._controlled_shutdown``): attempts, backoffs, and when it
stops trying. Attempts that cannot succeed are not made: no backoff after the last one, and none at all once no
partition still led here has another replica on a live broker (the last broker of a cluster). A partition with a
live other replica (not in sync yet: it may catch up) is retried as in Kafka."""
import logging

import pytest

from kbroker import broker as broker_module
from kbroker.broker import Broker
from kbroker.protocol.apis import APIS
from kbroker.server.metadata_cache import MetadataCache

BACKOFF_MS = 5000


def _endpoint(bid):
    return {"id": bid, "endpoints": [{"port": 9000 + bid, "host": "b%d" % bid, "listener": "PLAINTEXT",
                                      "security_protocol": 0}], "rack": None}


def cache_with(live, partitions):
    """A MetadataCache fed one UpdateMetadata v6: ``live`` broker ids, ``partitions`` {(topic, p): replicas}
    (each led by broker 1, the stopping one)."""
    topics = {}
    for (t, p), replicas in sorted(partitions.items()):
        topics.setdefault(t, []).append({"partition_index": p, "controller_epoch": 3, "leader": 1, "leader_epoch": 4,
                                         "isr": [1], "zk_version": 7, "replicas": replicas, "offline_replicas": []})
    body = {"controller_id": 1, "controller_epoch": 3, "live_brokers": [_endpoint(b) for b in live],
            "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in topics.items()]}
    api = APIS[6]
    cache = MetadataCache()
    cache.update(api.decode_request(6, api.encode_request(6, body).getvalue()), 6)
    return cache


class StoppingBroker:
    """What ``_controlled_shutdown`` uses of a Broker: its config, backend, metadata and the request itself."""

    def __init__(self, cache, answers, retries=3):
        self.broker_id = 1
        self.config = {"controlled.shutdown.max.retries": retries, "controlled.shutdown.retry.backoff.ms": BACKOFF_MS}
        self.backend = type("Backend", (), {"connected": True})()
        self.metadata_cache = cache
        self.answers = list(answers)
        self.requests = 0

    def _request_controlled_shutdown(self):
        self.requests += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    _movable = Broker._movable


@pytest.fixture
def sleeps(monkeypatch):
    slept = []
    monkeypatch.setattr(broker_module.gevent, "sleep", lambda s: slept.append(s))
    return slept


def test_the_last_replica_of_what_it_leads_stops_after_one_attempt(sleeps, caplog):
    """Broker 2, the other replica, is gone: nothing can take the partitions over, so no retry and no backoff
    (3 attempts and 3 backoffs before: 15 s at the defaults)."""
    b = StoppingBroker(cache_with([1], {("t", 0): [1, 2], ("t", 1): [2, 1]}), [[("t", 0), ("t", 1)]] * 3)
    with caplog.at_level(logging.INFO, logger="kbroker.broker"):
        Broker._controlled_shutdown(b)
    assert b.requests == 1 and sleeps == []
    assert "controlled shutdown attempt 1: 2 partitions still led here" in caplog.text
    assert "no partition still led here has another replica on a live broker" in caplog.text


def test_a_partition_with_a_live_other_replica_is_retried_without_a_backoff_after_the_last(sleeps, caplog):
    """Broker 2 is alive but not in sync yet: it may catch up, so every attempt is made (as in Kafka), but the
    backoff after the last one is not slept."""
    b = StoppingBroker(cache_with([1, 2], {("t", 0): [1, 3], ("t", 1): [1, 2]}), [[("t", 0), ("t", 1)]] * 3)
    with caplog.at_level(logging.INFO, logger="kbroker.broker"):
        Broker._controlled_shutdown(b)
    assert b.requests == 3 and sleeps == [BACKOFF_MS / 1000.0] * 2
    assert "controlled shutdown did not complete; shutting down anyway" in caplog.text


def test_a_failed_attempt_is_retried_and_success_ends_it(sleeps, caplog):
    b = StoppingBroker(cache_with([1, 2], {("t", 0): [1, 2]}), [OSError("controller moving"), []])
    with caplog.at_level(logging.INFO, logger="kbroker.broker"):
        Broker._controlled_shutdown(b)
    assert b.requests == 2 and sleeps == [BACKOFF_MS / 1000.0]
    assert "controlled shutdown complete" in caplog.text


def test_a_partition_this_broker_does_not_know_counts_as_movable(sleeps):
    """The controller may know more than this broker's metadata: a partition missing from it keeps the retries."""
    b = StoppingBroker(cache_with([1], {("t", 0): [1, 2]}), [[("t", 0), ("u", 0)], [("t", 0), ("u", 0)], []])
    Broker._controlled_shutdown(b)
    assert b.requests == 3 and sleeps == [BACKOFF_MS / 1000.0] * 2


def test_without_zookeeper_the_attempts_are_skipped_with_the_backoffs_between_them(sleeps, caplog):
    b = StoppingBroker(cache_with([1], {}), [], retries=3)
    b.backend.connected = False
    with caplog.at_level(logging.INFO, logger="kbroker.broker"):
        Broker._controlled_shutdown(b)
    assert b.requests == 0 and sleeps == [BACKOFF_MS / 1000.0] * 2
    assert "controlled shutdown attempt 3 skipped: not connected to ZooKeeper" in caplog.text
