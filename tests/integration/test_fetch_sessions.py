"""Incremental fetch sessions (KIP-227) on a real broker: raw Fetch v7 and v12 requests (full -> incremental with
only the changed partitions, forgotten partitions, INVALID_FETCH_SESSION_EPOCH 71, FETCH_SESSION_ID_NOT_FOUND 70,
closing, a full cache), real clients consuming 200 partitions (kafka-python and the Java client use sessions, which
the broker's /metrics counters show; librdkafka fetches sessionless and must still read everything), and a 3-broker
ZooKeeper cluster whose followers replicate through sessions (byte-identical logs).
The rules are in kbroker/server/fetch_sessions.py; the cache's unit tests in tests/unit/test_fetch_sessions.py."""
from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration import harness
from tests.integration.harness import BrokerProcess, wait_until
from tests.integration.java_driver import got_of, java_driver, ok  # noqa: F401 - fixture
from tests.integration.test_clients_common import (Rec, confluent_consume, confluent_produce, create_topic,
                                                   kafka_python_consume)
from tests.integration.test_durability import RawClient
from tests.integration.test_fetch_limits import wait_for_controller

pytestmark = pytest.mark.timeout(300)

FETCH = 1
SLOTS = 12
RAW = "fs-raw"
CLIENTS = "fs-clients"
N_CLIENT_PARTITIONS = 200
PER_PARTITION = 2
LAG_MS = 3000


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("fetch_sessions"),
                      overrides={"max.incremental.fetch.session.cache.slots": SLOTS,
                                 "metrics.http.port": harness.free_port(), "metrics.http.host": "127.0.0.1"})
    try:
        b.start()
        wait_for_controller(b)
        create_topic(b.bootstrap, RAW, 4)
        create_topic(b.bootstrap, CLIENTS, N_CLIENT_PARTITIONS)
        yield b
    finally:
        b.close()


def metric(broker, name: str) -> float:
    port = int(broker.overrides["metrics.http.port"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                return s.value
    raise AssertionError(f"{name} not exported")


INCREMENTAL = "kbroker_fetch_session_incremental_fetches_total"
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"


def fetch(c: RawClient, version: int, session_id: int, epoch: int, parts=(), forgotten=(), max_wait=0,
          min_bytes=0, replica_id=-1) -> dict:
    """One Fetch; ``parts`` [(partition, fetch_offset)] of RAW, ``forgotten`` [partition]."""
    body = {"replica_id": replica_id, "max_wait_ms": max_wait, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "topics": [{"topic": RAW, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for p, o in parts]}] if parts else [],
            "forgotten_topics_data": [{"topic": RAW, "partitions": list(forgotten)}] if forgotten else []}
    c.send(FETCH, version, body)
    return c.recv()[1]


def answered(resp) -> dict:
    """{partition: (error, high watermark, record bytes)} of an answer about RAW."""
    out = {}
    for t in resp["responses"]:
        assert t["topic"] == RAW
        for p in t["partitions"]:
            r = p["records"]
            out[p["partition_index"]] = (p["error_code"], p["high_watermark"], len(bytes(r)) if r else 0)
    return out


def produce(broker, partition: int, n: int) -> None:
    confluent_produce(broker.bootstrap, RAW, [Rec(partition, None, b"v%d" % i, (), None) for i in range(n)])


@pytest.mark.parametrize("version", [7, 12])
def test_full_then_incremental_answers_only_what_changed(sbroker, version):
    with RawClient(sbroker) as c:
        base = {p: answered(fetch(c, version, 0, -1, [(p, 0)]))[p][1] for p in range(4)}   # sessionless: the HWs
        full = fetch(c, version, 0, 0, [(p, base[p]) for p in range(4)])
        sid = full["session_id"]
        assert sid > 0 and full["error_code"] == 0
        assert answered(full) == {p: (0, base[p], 0) for p in range(4)}       # full: every partition
        idle = fetch(c, version, sid, 1)
        assert (idle["error_code"], idle["session_id"], idle["responses"]) == (0, sid, [])
        before = metric(sbroker, INCREMENTAL)
        produce(sbroker, 2, 3)
        got = fetch(c, version, sid, 2, max_wait=5000, min_bytes=1)
        assert list(answered(got)) == [2] and answered(got)[2][:2] == (0, base[2] + 3) and answered(got)[2][2] > 0
        got = fetch(c, version, sid, 3, [(2, base[2] + 3)])                     # moved: nothing new anywhere
        assert got["responses"] == []
        # forget partition 0: its new data is never sent again; partition 3 is added back with an update
        got = fetch(c, version, sid, 4, forgotten=[0])
        assert got["responses"] == []
        produce(sbroker, 0, 2)
        assert fetch(c, version, sid, 5, max_wait=300, min_bytes=1)["responses"] == []
        assert metric(sbroker, INCREMENTAL) - before == 4
        # the errors: a wrong epoch (71) and an unknown id (70) answer no partitions and change nothing
        for bad_epoch in (5, 7, 1):
            r = fetch(c, version, sid, bad_epoch)
            assert (r["error_code"], r["session_id"], r["responses"]) == (71, 0, [])
        r = fetch(c, version, sid ^ 0x5A5A5A, 1)
        assert (r["error_code"], r["session_id"], r["responses"]) == (70, 0, [])
        assert fetch(c, version, sid, 6)["error_code"] == 0                    # still at its epoch
        # FINAL epoch closes it; answered sessionless with every partition named
        closed = fetch(c, version, sid, -1, [(0, base[0])])
        assert closed["session_id"] == 0 and answered(closed) == {0: (0, base[0] + 2, answered(closed)[0][2])}
        assert fetch(c, version, sid, 7)["error_code"] == 70


def test_a_session_moves_across_connections(sbroker):
    """The id is broker-wide, not the connection's (as in Kafka)."""
    with RawClient(sbroker) as a:
        sid = fetch(a, 12, 0, 0, [(1, 0)])["session_id"]
    with RawClient(sbroker) as b:
        r = fetch(b, 12, sid, 1)
        assert (r["error_code"], r["session_id"]) == (0, sid)
        fetch(b, 12, sid, -1, [(1, 0)])


def test_full_cache_gives_consumers_no_session_and_a_follower_evicts_the_smallest(sbroker):
    with RawClient(sbroker) as c:
        free = SLOTS - int(metric(sbroker, SESSIONS))
        assert free > 1
        ids = [fetch(c, 12, 0, 0, [(1, 0)])["session_id"] for _ in range(free)]
        assert all(ids) and len(set(ids)) == free and metric(sbroker, SESSIONS) == SLOTS
        evictions = metric(sbroker, EVICTIONS)
        # every slot taken by sessions younger than 120 s: a consumer's full fetch is answered sessionless
        r = fetch(c, 12, 0, 0, [(1, 0), (2, 0)])
        assert r["session_id"] == 0 and set(answered(r)) == {1, 2} and metric(sbroker, EVICTIONS) == evictions
        # a follower's session is privileged: it evicts the smallest consumer session (1 partition, lowest id)
        f = fetch(c, 12, 0, 0, [(1, 0)], replica_id=7)["session_id"]
        assert f > 0 and metric(sbroker, EVICTIONS) == evictions + 1 and metric(sbroker, SESSIONS) == SLOTS
        victim = min(ids)
        assert fetch(c, 12, victim, 1)["error_code"] == 70
        assert all(fetch(c, 12, sid, 1)["error_code"] == 0 for sid in ids if sid != victim)
        for sid, epoch in [(s, 2) for s in ids if s != victim] + [(f, 1)]:
            assert fetch(c, 12, sid, -1, [(1, 0)], replica_id=7 if sid == f else -1)["session_id"] == 0
        assert metric(sbroker, SESSIONS) == SLOTS - free


# --------------------------------------------------------------------------------------------- real clients

@pytest.fixture(scope="module")
def client_data(sbroker):
    recs = [Rec(p, None, b"c-%03d-%d" % (p, i), (), None) for p in range(N_CLIENT_PARTITIONS)
            for i in range(PER_PARTITION)]
    confluent_produce(sbroker.bootstrap, CLIENTS, recs)
    return sorted((r.partition, i % PER_PARTITION, r.value) for i, r in enumerate(recs))


def essentials(got) -> list:
    return sorted((g.partition, g.offset, g.value) for g in got)


# A 4 KiB response budget: 400 records over 200 partitions take many Fetch requests, so a session is continued.
SMALL = 4096


def test_kafka_python_consumes_200_partitions_through_a_session(sbroker, client_data):
    before = metric(sbroker, INCREMENTAL)
    got = kafka_python_consume(sbroker.bootstrap, CLIENTS, len(client_data), partitions=range(N_CLIENT_PARTITIONS),
                               fetch_max_bytes=SMALL, max_partition_fetch_bytes=SMALL)
    assert essentials(got) == client_data
    assert metric(sbroker, INCREMENTAL) - before > 0      # incremental epochs: the client used a session


def test_java_client_consumes_200_partitions_through_a_session(sbroker, client_data, java_driver):
    before = metric(sbroker, INCREMENTAL)
    (consume,) = java_driver(sbroker.bootstrap, [
        {"op": "consume", "topic": CLIENTS, "count": len(client_data),
         "config": {"fetch.max.bytes": SMALL, "max.partition.fetch.bytes": SMALL}}])
    got = got_of(ok(consume))
    assert sorted((g.partition, g.offset, g.value) for g in got) == client_data and consume["timedOut"] is False
    assert metric(sbroker, INCREMENTAL) - before > 0      # incremental epochs: the client used a session


@pytest.mark.soak
def test_librdkafka_consumes_200_partitions(sbroker, client_data):
    """.venv/bin/python -m pytest -m soak tests/integration/test_fetch_sessions.py (librdkafka's assign of 200
    partitions takes ~17 s here, sessions or not). librdkafka (2.16) sends every Fetch sessionless (session_id 0,
    epoch -1): answered in full each time, no session created."""
    before, sessions = metric(sbroker, INCREMENTAL), metric(sbroker, SESSIONS)
    got = confluent_consume(sbroker.bootstrap, CLIENTS, len(client_data), partitions=range(N_CLIENT_PARTITIONS))
    assert essentials(got) == client_data
    assert metric(sbroker, INCREMENTAL) == before and metric(sbroker, SESSIONS) == sessions


# ------------------------------------------------------------------------------------- followers (cluster)

@pytest.mark.soak
def test_zookeeper_cluster_followers_replicate_through_sessions(tmp_path_factory, zk_ensemble):
    """.venv/bin/python -m pytest -m soak tests/integration/test_fetch_sessions.py (~45 s: a ZooKeeper ensemble and
    3 brokers). Its in-suite twin, the same assertions over the wire in process: tests/unit/
    test_fetch_session_client.py::test_followers_replicate_through_incremental_sessions."""
    from tests.integration.test_cluster_common import Cluster, create_topics, produce

    c = Cluster(tmp_path_factory.mktemp("fs_cluster"), zk_ensemble,
                overrides={"offsets.topic.num.partitions": 1, "auto.leader.rebalance.enable": "false",
                           "replica.lag.time.max.ms": LAG_MS})
    for b in c.brokers:
        b.overrides["metrics.http.port"] = harness.free_port()
        b.overrides["metrics.http.host"] = "127.0.0.1"
    try:
        c.start()
        create_topics(c.bootstrap, [("fs-repl", 12, 3)])
        values = {p: [b"r-%d-%d" % (p, i) for i in range(5)] for p in (0, 5, 11)}
        produce(c.bootstrap, "fs-repl", values)

        def logs(p):
            return [b"".join(f.read_bytes() for f in sorted((b.log_dir / f"fs-repl-{p}").glob("*.log")))
                    for b in c.brokers]

        def replicated():
            return all(len(set(logs(p))) == 1 and len(logs(p)[0]) > 0 for p in values) and \
                all(set(logs(p)) == {b""} for p in range(12) if p not in values)
        wait_until(replicated, 30, message="every replica's log identical")
        for p, vs in values.items():
            data = logs(p)[0]
            assert all(data.count(v) == 2 for v in vs) and data.count(b"r-%d-" % p) == 10   # key and value
        # every broker leads some partitions and serves both others through incremental sessions
        wait_until(lambda: all(metric(b, SESSIONS) == 2 for b in c.brokers), 20, message="2 follower sessions each")
        wait_until(lambda: all(metric(b, INCREMENTAL) > 0 for b in c.brokers), 20, message="incremental fetches")
        # Idle partitions are never resent by the followers, yet stay in the ISR: the leader refreshes their caught-up
        # time from the session every LAG_MS / 4. An idle window of 2.5 x LAG_MS is the observation (no sync).
        time.sleep(2.5 * LAG_MS / 1000)
        assert [metric(b, "kafka_server_replicamanager_isrshrinks_total") for b in c.brokers] == [0, 0, 0]
        assert [metric(b, "kafka_server_replicamanager_underreplicatedpartitions") for b in c.brokers] == [0, 0, 0]
    finally:
        c.close()
