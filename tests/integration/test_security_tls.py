"""TLS end to end (issue 10): real clients over SSL and mutual TLS, what a TLS listener refuses, and a 3-broker
cluster whose inter-broker traffic is mutual TLS.

One broker (module fixture ``tls_broker``) has three listeners: PLAINTEXT (the harness's readiness probe and the
tests' topic admin), ``SSL`` (server certificate only, PEM keystore with an encrypted key) and ``MTLS`` (mapped to
SSL, with listener-prefixed keys: a PKCS12 keystore and ``ssl.client.auth=required``), and
``socket.request.receive.timeout.ms=3000`` so a stalled handshake is dropped quickly. The certificates come from
tests/integration/certs.py (a throwaway CA; the broker's has SAN localhost and 127.0.0.1, so every client verifies
the host name it connects to).

Principals: the broker logs one line per TLS connection ("TLS connection from <peer> on listener <name>: <version>
<cipher>, principal <principal>"); the tests read the principal of alice's certificate there (Java's RFC 2253 form:
``User:CN=alice,OU=eng,O=acme,C=US``), and ``User:ANONYMOUS`` on the SSL listener.
"""
from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import sys
import time

import pytest

from kbroker.client.admin import AdminClient, NewTopic
from kbroker.security import tls
from tests.integration import harness
from tests.integration.certs import pki  # noqa: F401 - session fixture
from tests.integration.harness import BrokerProcess, api_versions_request, free_port, wait_until
from tests.integration.java_driver import got_of, java_driver, java_records, ok  # noqa: F401 - fixture
from tests.integration.test_clients_common import (aiokafka_consume, aiokafka_produce, confluent_consume,
                                                   confluent_produce, expected, kafka_python_consume,
                                                   kafka_python_produce, kafkajs_records, kafkajs_spec_messages,
                                                   kcat_consume, kcat_produce, sample_records)

pytestmark = pytest.mark.timeout(300)

RECEIVE_TIMEOUT_MS = 3000
ALICE_DN = "CN=alice,OU=eng,O=acme,C=US"


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, pki):
    b = BrokerProcess(tmp_path_factory.mktemp("tls_broker"))
    b.ssl_port, b.mtls_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{b.ssl_port},MTLS://127.0.0.1:{b.mtls_port}"
    b.overrides.update({
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "socket.request.receive.timeout.ms": RECEIVE_TIMEOUT_MS,
        **pki.broker_ssl("PEM"),
        **pki.broker_ssl("PKCS12", prefix="listener.name.mtls."),
        "listener.name.mtls.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": 0,
    })
    try:
        b.start()
        yield b
    finally:
        b.close()


def ssl_bootstrap(b):
    return f"127.0.0.1:{b.ssl_port}"


def mtls_bootstrap(b):
    return f"127.0.0.1:{b.mtls_port}"


def make_topic(b, name, partitions=3):
    with AdminClient(b.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def tls_lines(b, listener):
    return re.findall(r"TLS connection from \S+ on listener %s: (\S+) (\S+), principal (.+)" % listener,
                      b.log_text())


# ------------------------------------------------------------------------------------------ client settings

def confluent_conf(pki, mutual):
    conf = {"security.protocol": "SSL", "ssl.ca.location": pki.ca}
    if mutual:  # librdkafka with the encrypted PKCS#8 key and its password
        alice = pki.clients["alice"]
        conf.update({"ssl.certificate.location": alice.cert, "ssl.key.location": alice.key_encrypted,
                     "ssl.key.password": alice.password})
    return conf


def kafka_python_conf(pki, mutual):
    conf = {"security_protocol": "SSL", "ssl_cafile": pki.ca, "ssl_check_hostname": True}
    if mutual:
        alice = pki.clients["alice"]
        conf.update({"ssl_certfile": alice.cert, "ssl_keyfile": alice.key_encrypted, "ssl_password": alice.password})
    return conf


def aiokafka_conf(pki, mutual):
    from aiokafka.helpers import create_ssl_context

    alice = pki.clients["alice"]
    ctx = create_ssl_context(cafile=pki.ca, certfile=alice.cert if mutual else None,
                             keyfile=alice.key if mutual else None)
    return {"security_protocol": "SSL", "ssl_context": ctx}


def kcat_args(pki, mutual):
    out = []
    for k, v in pki.client_ssl("alice" if mutual else None).items():
        out += ["-X", f"{k}={v}"]
    return out


def kafkajs_ssl(pki, mutual):
    alice = pki.clients["alice"]
    return {"ca": pki.ca, **({"cert": alice.cert, "key": alice.key} if mutual else {})}


def java_conf(pki, mutual):
    conf = {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca}
    if mutual:
        alice = pki.clients["alice"]
        conf.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": alice.p12,
                     "ssl.keystore.password": alice.password})
    return conf


# ------------------------------------------------------------------------------------------ round trips

LISTENERS = [("SSL", False), ("MTLS", True)]


@pytest.mark.parametrize("listener, mutual", LISTENERS)
def test_confluent_kafka(tls_broker, pki, listener, mutual):
    topic = f"tls-confluent-{listener.lower()}"
    make_topic(tls_broker, topic)
    recs = sample_records("cf", partitions=3, per_partition=5)
    boot = mtls_bootstrap(tls_broker) if mutual else ssl_bootstrap(tls_broker)
    conf = confluent_conf(pki, mutual)
    confluent_produce(boot, topic, recs, **conf)
    assert confluent_consume(boot, topic, len(recs), partitions=(0, 1, 2), **conf) == expected(recs)


@pytest.mark.parametrize("listener, mutual", LISTENERS)
def test_kafka_python(tls_broker, pki, listener, mutual):
    topic = f"tls-kp-{listener.lower()}"
    make_topic(tls_broker, topic)
    recs = sample_records("kp", partitions=3, per_partition=5)
    boot = mtls_bootstrap(tls_broker) if mutual else ssl_bootstrap(tls_broker)
    conf = kafka_python_conf(pki, mutual)
    kafka_python_produce(boot, topic, recs, **conf)
    assert kafka_python_consume(boot, topic, len(recs), partitions=(0, 1, 2), **conf) == expected(recs)


@pytest.mark.parametrize("listener, mutual", LISTENERS)
def test_aiokafka(tls_broker, pki, listener, mutual):
    topic = f"tls-aio-{listener.lower()}"
    make_topic(tls_broker, topic)
    recs = sample_records("ai", partitions=3, per_partition=5)
    boot = mtls_bootstrap(tls_broker) if mutual else ssl_bootstrap(tls_broker)
    aiokafka_produce(boot, topic, recs, **aiokafka_conf(pki, mutual))
    got = aiokafka_consume(boot, topic, len(recs), partitions=(0, 1, 2), **aiokafka_conf(pki, mutual))
    assert got == expected(recs)


@pytest.mark.parametrize("listener, mutual", LISTENERS)
def test_kcat(tls_broker, pki, listener, mutual, kcat):
    topic = f"tls-kcat-{listener.lower()}"
    make_topic(tls_broker, topic, partitions=1)
    boot = mtls_bootstrap(tls_broker) if mutual else ssl_bootstrap(tls_broker)
    pairs = [(b"k%d" % i, bytes(range(32, 32 + 10 + i)) + b"\x00\xff" * i) for i in range(20)]
    kcat_produce(boot, topic, 0, pairs, extra=kcat_args(pki, mutual))
    got = kcat_consume(boot, topic, 0, len(pairs), extra=kcat_args(pki, mutual))
    assert [(g.offset, g.key, g.value) for g in got] == [(i, k, v) for i, (k, v) in enumerate(pairs)]


@pytest.mark.parametrize("listener, mutual", LISTENERS)
def test_kafkajs(tls_broker, pki, listener, mutual, kafkajs):
    topic = f"tls-js-{listener.lower()}"
    make_topic(tls_broker, topic)
    recs = sample_records("js", partitions=3, per_partition=4)
    boot = mtls_bootstrap(tls_broker) if mutual else ssl_bootstrap(tls_broker)
    sslspec = kafkajs_ssl(pki, mutual)
    produced = kafkajs({"brokers": [boot], "topic": topic, "mode": "produce", "ssl": sslspec,
                        "messages": kafkajs_spec_messages(recs)})
    assert "error" not in produced, produced
    fetched = kafkajs({"brokers": [boot], "topic": topic, "mode": "fetch", "ssl": sslspec, "count": len(recs)})
    assert "error" not in fetched, fetched
    assert kafkajs_records(fetched) == expected(recs)


@pytest.mark.parametrize("listener, mutual", LISTENERS)
def test_java_client(tls_broker, pki, listener, mutual, java_driver):
    topic = f"tls-java-{listener.lower()}"
    make_topic(tls_broker, topic)
    recs = sample_records("jv", partitions=3, per_partition=5)
    boot = mtls_bootstrap(tls_broker) if mutual else ssl_bootstrap(tls_broker)
    conf = java_conf(pki, mutual)
    produce, consume = java_driver(boot, [
        {"op": "produce", "topic": topic, "records": java_records(recs), "config": conf},
        {"op": "consume", "topic": topic, "count": len(recs), "config": conf},
    ], adminConfig=conf)
    assert all("error" not in m for m in ok(produce)["metadata"]), produce["metadata"]
    assert got_of(ok(consume)) == expected(recs) and consume["timedOut"] is False


def test_principals_of_tls_connections(tls_broker, pki):
    """The MTLS connections of the tests above carry alice's DN; the SSL ones are anonymous (run alone, this test
    makes one connection of each)."""
    topic = "tls-principal"
    make_topic(tls_broker, topic, partitions=1)
    recs = sample_records("pr", partitions=1, per_partition=2)
    confluent_produce(mtls_bootstrap(tls_broker), topic, recs, **confluent_conf(pki, True))
    confluent_produce(ssl_bootstrap(tls_broker), topic, recs, **confluent_conf(pki, False))
    mtls = {p for _, _, p in tls_lines(tls_broker, "MTLS")}
    plain = {p for _, _, p in tls_lines(tls_broker, "SSL")}
    assert mtls == {"User:" + ALICE_DN}, mtls
    assert plain == {"User:ANONYMOUS"}, plain
    versions = {v for v, _, _ in tls_lines(tls_broker, "MTLS") + tls_lines(tls_broker, "SSL")}
    assert versions <= {"TLSv1.3", "TLSv1.2"} and versions, versions


def test_large_fetch_through_tls_is_byte_exact(tls_broker, pki):
    """Fetch responses of several MiB through TLS: file regions go out in 256 KiB pieces (no sendfile)."""
    topic = "tls-large"
    make_topic(tls_broker, topic, partitions=1)
    payloads = [os.urandom(64 * 1024 + i) for i in range(80)]   # ~5 MiB, records straddle every piece boundary
    from tests.integration.test_clients_common import Rec
    recs = [Rec(0, b"%d" % i, v, (), None) for i, v in enumerate(payloads)]
    conf = confluent_conf(pki, True)
    confluent_produce(mtls_bootstrap(tls_broker), topic, recs, **{**conf, "message.max.bytes": 2_000_000})
    got = confluent_consume(mtls_bootstrap(tls_broker), topic, len(recs),
                            **{**conf, "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 8 << 20})
    assert [(g.offset, g.key, g.value) for g in got] == [(i, r.key, r.value) for i, r in enumerate(recs)]


# ------------------------------------------------------------------------------------------ refusals

def read_until_closed(sock, timeout):
    """Everything the peer sends until it closes (b"" included), or None when it is still open at ``timeout``."""
    sock.settimeout(0.5)
    data, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk
    return None


@pytest.mark.parametrize("which", ["SSL", "MTLS"])
def test_plaintext_request_to_a_tls_listener_gets_no_kafka_response(tls_broker, which):
    port = tls_broker.ssl_port if which == "SSL" else tls_broker.mtls_port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(api_versions_request(7))
        t0 = time.monotonic()
        data = read_until_closed(s, 10)
    assert data is not None, "the broker kept a plaintext connection open"
    assert time.monotonic() - t0 < 5
    # At most a TLS alert record (content type 21), never a Kafka response (size, then correlation id 7).
    assert data == b"" or data[0] == 0x15, data[:32]
    assert b"\x00\x00\x00\x07" not in data[4:8]
    # the plaintext listener answers the same bytes
    assert harness.probe_api_versions("127.0.0.1", tls_broker.port, correlation_id=7)


def test_stalled_handshake_is_dropped(tls_broker):
    with socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=5) as s:
        t0 = time.monotonic()
        data = read_until_closed(s, RECEIVE_TIMEOUT_MS / 1000 + 10)
        waited = time.monotonic() - t0
    assert data == b"", data
    assert RECEIVE_TIMEOUT_MS / 1000 - 0.5 <= waited <= RECEIVE_TIMEOUT_MS / 1000 + 6, waited
    wait_until(lambda: "no TLS handshake within 3 s" in tls_broker.log_text(), 5)


def raw_tls(port, settings, timeout=10):
    """A TLS connection made with kbroker's own client context; returns the first read's bytes or raises."""
    ctx = tls.client_context(settings)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            t.sendall(api_versions_request(9))
            return t.recv(4)


def test_client_without_certificate_fails_promptly(tls_broker, pki, java_driver):
    t0 = time.monotonic()
    before = tls_broker.log_text().count("PEER_DID_NOT_RETURN_A_CERTIFICATE")
    # TLS 1.3: the client's handshake completes first; the broker's alert (or its close, when the client's request
    # crossed it) ends the connection on the first read.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        raw_tls(tls_broker.mtls_port, {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca})
    assert time.monotonic() - t0 < 5
    wait_until(lambda: tls_broker.log_text().count("PEER_DID_NOT_RETURN_A_CERTIFICATE") == before + 1, 5)
    # The same client with alice's certificate is answered.
    alice = pki.clients["alice"]
    assert len(raw_tls(tls_broker.mtls_port, {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
                                              "ssl.keystore.type": "PKCS12", "ssl.keystore.location": alice.p12,
                                              "ssl.keystore.password": alice.password})) == 4
    # Kafka's Java producer: an SslAuthenticationException, well before its 20 s deadline.
    t0 = time.monotonic()
    (produce,) = java_driver(mtls_bootstrap(tls_broker), [
        {"op": "produce", "topic": "tls-nocert", "records": java_records(sample_records("nc", 1, 1)),
         "config": java_conf(pki, False)}], timeoutMs=20000)
    elapsed = time.monotonic() - t0
    errors = [m.get("error") for m in produce.get("metadata", [])] + [produce.get("error")]
    assert any(e and "SslAuthenticationException" in e["type"] for e in errors), produce
    assert elapsed < 20, elapsed
    # librdkafka gives up at its metadata timeout with the TLS alert in its error.
    t0 = time.monotonic()
    done = harness.run_kcat(["-b", mtls_bootstrap(tls_broker), *kcat_args(pki, False), "-L", "-m", "5"],
                            check=False)
    assert done.returncode != 0 and time.monotonic() - t0 < 15
    assert b"certificate required" in done.stderr, done.stderr[-500:]


def test_client_not_trusting_the_ca_fails(tls_broker, pki):
    with pytest.raises(ssl.SSLCertVerificationError):
        raw_tls(tls_broker.ssl_port, {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.rogue_ca})
    from kafka.errors import KafkaTimeoutError
    t0 = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        kafka_python_produce(ssl_bootstrap(tls_broker), "tls-untrusted", sample_records("ut", 1, 1), timeout=5,
                             security_protocol="SSL", ssl_cafile=pki.rogue_ca, bootstrap_timeout_ms=5000)
    assert time.monotonic() - t0 < 20   # kafka-python's bootstrap deadline (bootstrap_timeout_ms; 30 s by default)


def test_certificate_of_an_unknown_ca_is_refused(tls_broker, pki):
    rogue = pki.rogue_client
    with pytest.raises((ssl.SSLError, ConnectionError)):
        raw_tls(tls_broker.mtls_port, {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
                                       "ssl.keystore.type": "PKCS12", "ssl.keystore.location": rogue.p12,
                                       "ssl.keystore.password": rogue.password})
    assert "principal User:CN=mallory" not in tls_broker.log_text()


def test_hostname_verification_is_on_for_clients(tls_broker, pki):
    """The broker's certificate names localhost and 127.0.0.1; a client connecting by another name refuses it."""
    ctx = tls.client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca})
    with socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=10) as s:
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch|doesn't match"):
            ctx.wrap_socket(s, server_hostname="broker.example")


# ------------------------------------------------------------------------------------------ kbroker's tools

def run_tool(args, timeout=60):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, timeout=timeout,
                          cwd=str(harness.REPO_ROOT), env={**os.environ, "PYTHONPATH": str(harness.REPO_ROOT)})


def test_tools_with_command_config(tls_broker, pki, tmp_path):
    alice = pki.clients["alice"]
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n"
                     "ssl.keystore.type=PKCS12\nssl.keystore.location=%s\nssl.keystore.password=%s\n"
                     % (pki.ca, alice.p12, alice.password))
    boot = mtls_bootstrap(tls_broker)
    done = run_tool(["kbroker.cli.admin", "topics", "--create", "--topic", "tls-tool", "--partitions", "2",
                     "--bootstrap-server", boot, "--command-config", str(props)])
    assert done.returncode == 0, done.stderr
    done = run_tool(["kbroker.cli.admin", "topics", "--list", "--bootstrap-server", boot,
                     "--command-config", str(props)])
    assert done.returncode == 0 and b"tls-tool" in done.stdout.split(), done.stderr
    lines = b"".join(b"line-%d\n" % i for i in range(50))
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.console_producer", "--bootstrap-server", boot,
                           "--topic", "tls-tool", "--producer.config", str(props)], input=lines,
                          capture_output=True, timeout=60, cwd=str(harness.REPO_ROOT))
    assert done.returncode == 0, done.stderr
    done = run_tool(["kbroker.cli.console_consumer", "--bootstrap-server", boot, "--topic", "tls-tool",
                     "--from-beginning", "--max-messages", "50", "--consumer.config", str(props)])
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == sorted(lines.splitlines())
    # Without the client properties the tool cannot talk to the TLS listener: it says so and exits 1.
    done = run_tool(["kbroker.cli.admin", "topics", "--list", "--bootstrap-server", boot], timeout=90)
    assert done.returncode == 1
    # A JKS truststore in the client properties is refused naming the key and the conversion.
    bad = tmp_path / "jks.properties"
    bad.write_text("security.protocol=SSL\nssl.truststore.location=%s\nssl.truststore.password=x\n" % pki.jks())
    done = run_tool(["kbroker.cli.admin", "topics", "--list", "--bootstrap-server", boot,
                     "--command-config", str(bad)])
    assert done.returncode == 1 and b"ssl.truststore.type" in done.stderr and b"keytool -importkeystore" in \
        done.stderr, done.stderr


# ------------------------------------------------------------------------------------------ startup refusals

def test_startup_refusals_name_the_key(tmp_path, pki):
    def start(extra):
        port = free_port()
        b = BrokerProcess(tmp_path / f"b{port}", port=port, overrides={
            "listeners": f"SSL://127.0.0.1:{port}", "advertised.listeners": f"SSL://127.0.0.1:{port}", **extra})
        b.write_config()
        return subprocess.run([sys.executable, "-m", "kbroker.cli.server", str(b.config_path)], capture_output=True,
                              timeout=60, cwd=str(harness.REPO_ROOT),
                              env={**os.environ, "PYTHONPATH": str(harness.REPO_ROOT)})

    done = start({"ssl.keystore.type": "JKS", "ssl.keystore.location": pki.jks(), "ssl.keystore.password": "x"})
    assert done.returncode == 1
    assert b"ssl.keystore.type" in done.stderr and b"keytool -importkeystore -srckeystore" in done.stderr
    done = start({**pki.broker_ssl("PKCS12"), "ssl.keystore.password": "wrong"})
    assert done.returncode == 1 and b"configuration ssl.keystore.password" in done.stderr
    assert b"wrong" not in done.stderr.replace(b"wrong password", b"")   # the secret is never printed
    done = start({**pki.broker_ssl("PEM"), "ssl.keystore.location": "/nonexistent/keystore.pem"})
    assert done.returncode == 1 and b"ssl.keystore.location" in done.stderr and b"/nonexistent" in done.stderr
    done = start({**pki.broker_ssl("PEM"), "listener.name.ssl.ssl.provider": "SunJSSE"})
    assert done.returncode == 1 and b"listener.name.ssl.ssl.provider" in done.stderr


# ------------------------------------------------------------------------------------------ a TLS cluster

@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, zk_ensemble, pki):
    """Three brokers on ZooKeeper: PLAINTEXT for clients, REPL (SSL, mutual TLS required) between brokers."""
    from tests.integration.test_cluster_common import Cluster
    cluster = Cluster(tmp_path_factory.mktemp("tls_cluster"), zk_ensemble)
    for b in cluster.brokers:
        b.repl_port = free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{b.port},REPL://127.0.0.1:{b.repl_port}"
        b.overrides.update({
            "listeners": listeners, "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPL:SSL",
            "inter.broker.listener.name": "REPL",
            **pki.broker_ssl("PEM", prefix="listener.name.repl."),
            "listener.name.repl.ssl.client.auth": "required",
            "replica.fetch.wait.max.ms": 200,
        })
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def test_cluster_replicates_over_mutual_tls_and_fails_over(tls_cluster):
    import json

    from tests.integration.test_cluster_common import FAILOVER_WAIT_S, metadata
    cluster = tls_cluster
    # Registrations carry both endpoints and the REPL listener's protocol.
    for b in cluster.brokers:
        reg = cluster.get_json(f"/brokers/ids/{b.broker_id}")
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b.port}", f"REPL://127.0.0.1:{b.repl_port}"]
        assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "REPL": "SSL"}
        assert (reg["host"], reg["port"]) == ("127.0.0.1", b.port)
    topic = "tls-rf3"
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, configs={"min.insync.replicas": "2"})])
    cluster.wait_topic_everywhere(topic, 1)
    recs = sample_records("rf", partitions=1, per_partition=30)
    confluent_produce(cluster.bootstrap, topic, recs, acks="all")
    # Every replica in the ISR: the followers fetched over REPL.
    wait_until(lambda: sorted(cluster.state(topic, 0)[0]["isr"]) == [0, 1, 2], 30, 0.2, "ISR of 3")
    # Inter-broker connections are TLS with the brokers' certificate as principal, on REPL only: the leader was
    # connected to by both followers' fetchers, every other broker by the controller (its own broker: in-process).
    leader = cluster.state(topic, 0)[0]["leader"]
    controller = cluster.controller_id()
    for b in cluster.brokers:
        lines = tls_lines(b, "REPL")
        assert {p for _, _, p in lines} <= {"User:CN=localhost,OU=kbroker,O=test"}, lines
        if b.broker_id == leader:
            assert len(lines) >= 2, f"leader {leader}: {lines}"
        if b.broker_id != controller:
            assert lines, f"broker {b.broker_id} saw no TLS connection on REPL"
        assert not tls_lines(b, "PLAINTEXT")
    # The REPL port never answers plaintext.
    with socket.create_connection(("127.0.0.1", cluster.brokers[0].repl_port), timeout=5) as s:
        s.sendall(api_versions_request(3))
        data = read_until_closed(s, 10)
    assert data is not None and (data == b"" or data[0] == 0x15)
    # Failover: kill the leader; a follower (caught up over TLS) takes over with every record.
    old_epoch = cluster.state(topic, 0)[0]["leader_epoch"]
    cluster.broker(leader).kill9()
    # A 1-tuple: broker 0 as the new leader is falsy, and wait_until would keep waiting for it.
    (new_leader,) = wait_until(lambda: (lambda s: (s["leader"],) if s["leader"] not in (-1, leader) else None)(
        cluster.state(topic, 0)[0]), FAILOVER_WAIT_S, 0.2, "a new leader")
    assert cluster.state(topic, 0)[0]["leader_epoch"] > old_epoch
    survivors = ",".join(b.bootstrap for b in cluster.running())
    more = [r._replace(key=b"after-" + (r.key or b"")) for r in sample_records("af", 1, 10)]
    confluent_produce(survivors, topic, more, acks="all")
    got = confluent_consume(survivors, topic, len(recs) + len(more))
    assert [(g.key, g.value, g.headers) for g in got] == [(r.key, r.value, tuple(r.headers)) for r in recs + more]
    # The killed broker comes back and catches up over TLS into the ISR.
    cluster.broker(leader).start(wait=False)
    cluster.broker(leader).wait_ready(60)
    wait_until(lambda: sorted(cluster.state(topic, 0)[0]["isr"]) == [0, 1, 2], 60, 0.2, "ISR of 3 again")
    md = metadata(cluster.broker(new_leader), [topic])
    assert md["topics"][topic]["partitions"][0]["leader"] == new_leader
    json.dumps(md)  # (metadata is plain data)
