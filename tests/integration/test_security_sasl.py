"""SASL PLAIN and SCRAM-SHA-256/512 end to end (issue 10 item 3): real clients against a broker process.

The broker has a PLAINTEXT listener (admin, the harness's readiness probe) and a SASL_PLAINTEXT listener enabling
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; PLAIN's users come from a JAAS file named by KAFKA_OPTS
(``-Djava.security.auth.login.config``), SCRAM credentials from ``/config/users``, created with ``kbroker-admin
configs --entity-type users`` (SCRAM-SHA-256, 8192 iterations) and with confluent-kafka's AdminClient
(AlterUserScramCredentials, SCRAM-SHA-512).

* confluent-kafka, kafka-python, aiokafka, kafkajs, kcat and the Java client produce and consume byte-exactly with
  each mechanism; a wrong password is an authentication error with Kafka's message, promptly.
* The wire rules, with raw sockets: a request before authentication closes the connection; the v0 handshake's
  raw-token flow (PLAIN answered by a zero-length frame, SCRAM by raw challenges); an unsupported mechanism gets
  UNSUPPORTED_SASL_MECHANISM with the enabled list; a frame above sasl.server.max.receive.size closes.
* KIP-554's errors and the CLI's output; a credential created through broker 1 authenticates on broker 2 (and stops
  when removed); a connection that never authenticates is dropped by connections.max.idle.ms.
* Inter-broker SASL_PLAINTEXT with SCRAM-SHA-256 (the brokers' credential bootstrapped with ``--zookeeper``):
  replication factor 2, both copies byte-identical.
* SASL_SSL (tests/integration/certs.py's PEM keystore, listener-prefixed sasl.jaas.config): every client again,
  and the CLI with ``--command-config``.
"""
import socket
import struct
import subprocess
import sys
import time

import pytest

from kbroker.protocol.apis import APIS
from kbroker.protocol.headers import encode_request_header
from kbroker.protocol.schema import Writer
from kbroker.security.sasl.client import authenticate, client_mechanism
from kbroker.security.sasl.scram import ScramClient
from tests.integration.harness import (REPO_ROOT, BrokerProcess, ZkEnsemble, free_port, recv_exact, run_kafkajs,
                                       wait_until)
from tests.integration.java_driver import got_of, java_driver, java_records, ok  # noqa: F401 - fixture
from tests.integration.test_clients_common import (aiokafka_consume, aiokafka_produce, confluent_consume,
                                                   confluent_produce, create_topic, expected, kafka_python_consume,
                                                   kafka_python_produce, kafkajs_records, kafkajs_spec_messages,
                                                   kcat_consume, kcat_produce, sample_records)

pytestmark = pytest.mark.timeout(300)

ADMIN = [sys.executable, "-m", "kbroker.cli.admin"]
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("sam", "sam-secret"),
         "SCRAM-SHA-512": ("sue", "sue-secret")}
MECHANISMS = list(USERS)
JAAS = """KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required;
};
"""
# librdkafka's and kafka-python's message for a wrong SCRAM password is Kafka's generic one.
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism %s"
PLAIN_FAILED = "Authentication failed: Invalid username or password"


def sasl_overrides(broker_port, sasl_port, extra=None):
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{broker_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
             "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
             "inter.broker.listener.name": "PLAINTEXT",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"}
    props.update(extra or {})
    return props


def admin_cli(*args, check=True):
    done = subprocess.run(ADMIN + list(args), capture_output=True, timeout=60, cwd=str(REPO_ROOT))
    if check:
        assert done.returncode == 0, (done.stdout, done.stderr)
    return done


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    base = tmp_path_factory.mktemp("sasl")
    jaas = base / "kafka_server_jaas.conf"
    jaas.write_text(JAAS)
    port, sasl_port = free_port(), free_port()
    b = BrokerProcess(base / "b0", port=port, overrides=sasl_overrides(port, sasl_port),
                      env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    b.sasl_port = sasl_port
    b.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    b.start()
    # SCRAM-SHA-256 through the CLI (AlterUserScramCredentials), SCRAM-SHA-512 through confluent's AdminClient.
    done = admin_cli("configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "users",
                     "--entity-name", "sam", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=sam-secret]")
    assert done.stdout.decode() == "Completed updating config for user sam.\n"
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "sue", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"sue-secret")])
    assert futures["sue"].result(30) is None
    yield b
    b.close()


def conf_for(mech, password=None):
    user, pw = USERS[mech]
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": password or pw}


def kp_conf(mech, password=None):
    user, pw = USERS[mech]
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech, "sasl_plain_username": user,
            "sasl_plain_password": password or pw}


def topic_for(broker, name, partitions=2):
    create_topic(broker.bootstrap, name, partitions)
    return name


# ------------------------------------------------------------------------------------------------- clients

@pytest.mark.parametrize("mech", MECHANISMS)
def test_confluent_kafka(sasl_broker, mech):
    topic = topic_for(sasl_broker, "ck-" + mech.lower())
    recs = sample_records("ck" + mech, partitions=2, per_partition=4)
    confluent_produce(sasl_broker.sasl_bootstrap, topic, recs, **conf_for(mech))
    got = confluent_consume(sasl_broker.sasl_bootstrap, topic, len(recs), partitions=(0, 1), **conf_for(mech))
    assert got == expected(recs)


@pytest.mark.parametrize("mech", MECHANISMS)
def test_kafka_python(sasl_broker, mech):
    topic = topic_for(sasl_broker, "kp-" + mech.lower())
    recs = sample_records("kp" + mech, partitions=2, per_partition=4)
    kafka_python_produce(sasl_broker.sasl_bootstrap, topic, recs, **kp_conf(mech))
    got = kafka_python_consume(sasl_broker.sasl_bootstrap, topic, len(recs), partitions=(0, 1), **kp_conf(mech))
    assert got == expected(recs)


@pytest.mark.parametrize("mech", MECHANISMS)
def test_aiokafka(sasl_broker, mech):
    topic = topic_for(sasl_broker, "aio-" + mech.lower())
    recs = sample_records("aio" + mech, partitions=2, per_partition=4)
    aiokafka_produce(sasl_broker.sasl_bootstrap, topic, recs, **kp_conf(mech))
    got = aiokafka_consume(sasl_broker.sasl_bootstrap, topic, len(recs), partitions=(0, 1), **kp_conf(mech))
    assert got == expected(recs)


@pytest.mark.parametrize("mech", MECHANISMS)
def test_kafkajs(sasl_broker, mech):
    topic = topic_for(sasl_broker, "js-" + mech.lower())
    recs = sample_records("js" + mech, partitions=2, per_partition=4, nulls=False)
    user, pw = USERS[mech]
    sasl = {"mechanism": mech.lower(), "username": user, "password": pw}
    run_kafkajs({"brokers": [sasl_broker.sasl_bootstrap], "topic": topic, "mode": "produce", "sasl": sasl,
                 "messages": kafkajs_spec_messages(recs)})
    result = run_kafkajs({"brokers": [sasl_broker.sasl_bootstrap], "topic": topic, "mode": "fetch", "sasl": sasl,
                          "count": len(recs)})
    assert kafkajs_records(result) == expected(recs)


@pytest.mark.parametrize("mech", MECHANISMS)
def test_kcat(sasl_broker, mech):
    topic = topic_for(sasl_broker, "kcat-" + mech.lower(), partitions=1)
    user, pw = USERS[mech]
    extra = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={mech}",
             "-X", f"sasl.username={user}", "-X", f"sasl.password={pw}"]
    pairs = [(b"k%d" % i, b"\x00\x01v-%d-" % i + bytes(range(200, 256))) for i in range(5)]
    kcat_produce(sasl_broker.sasl_bootstrap, topic, 0, pairs, extra=extra)
    got = kcat_consume(sasl_broker.sasl_bootstrap, topic, 0, len(pairs), extra=extra)
    assert [(g.offset, g.key, g.value) for g in got] == [(i, k, v) for i, (k, v) in enumerate(pairs)]


def test_java_client(sasl_broker, java_driver):  # noqa: F811 - the fixture
    steps = []
    recs = sample_records("java", partitions=1, per_partition=5)
    for mech in MECHANISMS:
        user, pw = USERS[mech]
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN" else
                  "org.apache.kafka.common.security.scram.ScramLoginModule")
        config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                  "sasl.jaas.config": f'{module} required username="{user}" password="{pw}";'}
        topic = topic_for(sasl_broker, "java-" + mech.lower(), partitions=1)
        steps += [{"op": "produce", "topic": topic, "records": java_records(recs), "config": config},
                  {"op": "consume", "topic": topic, "count": len(recs), "config": config}]
    results = java_driver(sasl_broker.sasl_bootstrap, steps, adminConfig={})
    for produce, consume in zip(results[::2], results[1::2]):
        assert [md["offset"] for md in ok(produce)["metadata"]] == list(range(len(recs)))
        assert got_of(ok(consume)) == expected(recs)


# ------------------------------------------------------------------------------------------ wrong credentials

@pytest.mark.parametrize("mech", MECHANISMS)
def test_wrong_password_confluent_prompt_exact_error(sasl_broker, mech):
    from confluent_kafka import KafkaError, Producer
    seen = []
    p = Producer({"bootstrap.servers": sasl_broker.sasl_bootstrap, **conf_for(mech, password="wrong"),
                  "error_cb": seen.append})
    started = time.monotonic()
    wait_until(lambda: (p.poll(0.1), seen)[1], 10, message="an authentication error")
    assert time.monotonic() - started < 10
    err = seen[0]
    assert err.code() == KafkaError._AUTHENTICATION
    want = PLAIN_FAILED if mech == "PLAIN" else SCRAM_FAILED % mech
    assert want in err.str()


@pytest.mark.parametrize("mech", MECHANISMS)
def test_wrong_password_kafka_python_fails_with_kafkas_message(sasl_broker, mech, caplog):
    """kafka-python 3 retries a failed bootstrap until bootstrap_timeout_ms; the SASL failure it logs carries the
    broker's message (SaslAuthenticationFailedError), and the producer gives up within that bound."""
    import logging

    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError
    caplog.set_level(logging.ERROR, logger="kafka")
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(bootstrap_servers=sasl_broker.sasl_bootstrap, bootstrap_timeout_ms=3000,
                      **kp_conf(mech, password="nope"))
    assert time.monotonic() - started < 10
    want = PLAIN_FAILED if mech == "PLAIN" else SCRAM_FAILED % mech
    failures = [r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()
                or want in r.getMessage()]
    assert failures and want in failures[0], "\n".join(r.getMessage() for r in caplog.records)


def test_unknown_user_is_refused_like_a_wrong_password(sasl_broker):
    for mech in ("SCRAM-SHA-256", "PLAIN"):
        with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
            with pytest.raises(SaslRefused) as e:
                authenticate(_roundtrip(s), client_mechanism(mech, "mallory", "x"))
            assert e.value.code == 58
            assert str(e.value) == (PLAIN_FAILED if mech == "PLAIN" else SCRAM_FAILED % mech)
            assert_closed(s)


# ---------------------------------------------------------------------------------------------- wire rules

class SaslRefused(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _request(api_key, version, body, corr=1):
    api = APIS[api_key]
    w = Writer()
    w.buf += encode_request_header(api.request_header_version(version), api_key, version, corr, "sasl-test")
    api.encode_request(version, body, w)
    data = w.getvalue()
    return struct.pack(">i", len(data)) + data


def _read_frame(s):
    (n,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, n)


def _response(s, api_key, version):
    from kbroker.protocol.headers import decode_response_header
    api = APIS[api_key]
    payload = _read_frame(s)
    _, pos = decode_response_header(payload, api.response_header_version(version))
    return api.decode_response(version, payload, pos)


def _roundtrip(s):
    """authenticate()'s transport over socket ``s``: one request, one response."""
    def call(api_key, version, body):
        s.sendall(_request(api_key, version, body))
        return _response(s, api_key, version)
    return _Raising(call)


class _Raising:
    """A roundtrip whose SaslError surfaces as SaslRefused (so the tests need not import the client's class)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, api_key, version, body):
        resp = self.fn(api_key, version, body)
        if api_key == 36 and resp["error_code"]:
            raise SaslRefused(resp["error_code"], resp["error_message"])
        return resp


def assert_closed(s, timeout=5.0):
    """The broker closed the connection: EOF (or a reset) within ``timeout``."""
    s.settimeout(timeout)
    try:
        data = s.recv(1)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the broker to close; got {data!r}"


def test_request_before_authentication_closes(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(3, 1, {"topics": None}))
        assert_closed(s)
    # after ApiVersions too
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(18, 0, {}))
        assert _response(s, 18, 0)["error_code"] == 0
        s.sendall(_request(3, 1, {"topics": None}))
        assert_closed(s)
    # SaslAuthenticate before any handshake
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(36, 1, {"auth_bytes": b"\0alice\0alice-secret"}))
        assert_closed(s)


def test_unsupported_mechanism_lists_enabled_then_closes(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(17, 1, {"mechanism": "GSSAPI"}))
        resp = _response(s, 17, 1)
        assert resp == {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}
        assert_closed(s)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_handshake_v1_authenticate_versions_then_requests_served(sasl_broker, version):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(17, 1, {"mechanism": "SCRAM-SHA-512"}))
        assert _response(s, 17, 1)["error_code"] == 0
        c = ScramClient("SCRAM-SHA-512", "sue", "sue-secret")
        token = c.first()
        while not c.complete:
            s.sendall(_request(36, version, {"auth_bytes": token}))
            resp = _response(s, 36, version)
            assert resp["error_code"] == 0, resp
            if version >= 1:
                assert resp["session_lifetime_ms"] == 0
            token = c.step(resp["auth_bytes"])
        s.sendall(_request(3, 1, {"topics": None}))
        assert _response(s, 3, 1)["brokers"][0]["port"] == sasl_broker.sasl_port
        # a second handshake after authentication: ILLEGAL_SASL_STATE, the connection stays
        s.sendall(_request(17, 1, {"mechanism": "PLAIN"}))
        assert _response(s, 17, 1)["error_code"] == 34


def test_v0_handshake_raw_tokens_plain(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(17, 0, {"mechanism": "PLAIN"}))
        assert _response(s, 17, 0) == {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}
        token = b"\0alice\0alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert recv_exact(s, 4) == b"\0\0\0\0"   # Kafka's empty answer to PLAIN: a zero-length frame
        s.sendall(_request(3, 1, {"topics": None}))
        assert _response(s, 3, 1)["controller_id"] == 0


def test_v0_handshake_raw_tokens_scram_and_wrong_password(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(17, 0, {"mechanism": "SCRAM-SHA-256"}))
        assert _response(s, 17, 0)["error_code"] == 0
        c = ScramClient("SCRAM-SHA-256", "sam", "sam-secret")
        token = c.first()
        while not c.complete:
            s.sendall(struct.pack(">i", len(token)) + token)
            token = c.step(_read_frame(s))
        s.sendall(_request(3, 1, {"topics": None}))
        assert _response(s, 3, 1)["controller_id"] == 0
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(17, 0, {"mechanism": "PLAIN"}))
        assert _response(s, 17, 0)["error_code"] == 0
        token = b"\0alice\0wrong"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert_closed(s)   # the v0 flow cannot carry an error: the broker just closes


def test_frame_above_sasl_max_receive_size_closes(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(struct.pack(">i", 524288 + 1) + b"\0" * 64)
        assert_closed(s)
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        s.sendall(_request(17, 0, {"mechanism": "PLAIN"}))
        assert _response(s, 17, 0)["error_code"] == 0
        s.sendall(struct.pack(">i", 600000) + b"\0" * 1024)   # a raw token frame over the limit
        assert_closed(s)


def test_plaintext_listener_answers_sasl_requests_illegal_state(sasl_broker):
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as s:
        s.sendall(_request(17, 1, {"mechanism": "PLAIN"}))
        assert _response(s, 17, 1)["error_code"] == 34
        s.sendall(_request(18, 0, {}))
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in _response(s, 18, 0)["api_keys"]}
        assert keys[17] == (0, 1) and keys[36] == (0, 2) and keys[50] == (0, 0) and keys[51] == (0, 0)


# --------------------------------------------------------------------------------------- KIP-554 and the CLI

def _admin_request(broker, api_key, body):
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(_request(api_key, 0, body))
        return _response(s, api_key, 0)


def _upsert(name, mech=1, iterations=4096, salt=b"salty", salted=b"x" * 32):
    return {"name": name, "mechanism": mech, "iterations": iterations, "salt": salt, "salted_password": salted}


def test_alter_user_scram_credentials_errors(sasl_broker):
    resp = _admin_request(sasl_broker, 51, {"deletions": [{"name": "ghost", "mechanism": 1}], "upsertions": [
        _upsert("few", iterations=4095), _upsert("many", iterations=16385), _upsert("weird", mech=3),
        _upsert(""), _upsert("twice"), _upsert("twice"), _upsert("fine", mech=2, iterations=16384)]})
    got = {r["user"]: (r["error_code"], r["error_message"]) for r in resp["results"]}
    assert got == {
        "ghost": (91, "Attempt to delete a user credential that does not exist"),
        "few": (93, "Too few iterations"),
        "many": (93, "Too many iterations"),
        "weird": (33, "Unknown SCRAM mechanism"),
        "": (93, "Username must not be empty"),
        "twice": (92, "A user credential cannot be altered twice in the same request"),
        "fine": (0, None),
    }
    resp = _admin_request(sasl_broker, 50, {"users": [{"name": "fine"}, {"name": "few"}, {"name": "ghost"},
                                                      {"name": "ghost"}]})
    got = {r["user"]: (r["error_code"], r["credential_infos"]) for r in resp["results"]}
    assert got == {"fine": (0, [{"mechanism": 2, "iterations": 16384}]), "few": (91, []), "ghost": (92, [])}
    everyone = _admin_request(sasl_broker, 50, {"users": None})
    assert {"sam", "sue", "fine"} <= {r["user"] for r in everyone["results"]}
    # the znode is Kafka's format
    resp = _admin_request(sasl_broker, 51, {"deletions": [{"name": "fine", "mechanism": 2}], "upsertions": []})
    assert resp["results"] == [{"user": "fine", "error_code": 0, "error_message": None}]
    assert _admin_request(sasl_broker, 50, {"users": [{"name": "fine"}]})["results"][0]["error_code"] == 91


def test_cli_describe_and_delete(sasl_broker):
    args = ["configs", "--bootstrap-server", sasl_broker.bootstrap, "--entity-type", "users"]
    done = admin_cli(*args, "--alter", "--entity-name", "carl", "--add-config",
                     "SCRAM-SHA-256=[password=c1],SCRAM-SHA-512=[iterations=5000,password=c2]")
    assert done.stdout == b"Completed updating config for user carl.\n"
    done = admin_cli(*args, "--describe", "--entity-name", "carl")
    assert done.stdout.decode() == ("SCRAM credential configs for user-principal 'carl' are "
                                    "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=5000\n")
    # carl can authenticate with the new SCRAM-SHA-512 credential at once (this broker refreshed its cache)
    with socket.create_connection(("127.0.0.1", sasl_broker.sasl_port), timeout=10) as s:
        authenticate(_roundtrip(s), client_mechanism("SCRAM-SHA-512", "carl", "c2"))
    admin_cli(*args, "--alter", "--entity-name", "carl", "--delete-config", "SCRAM-SHA-512")
    done = admin_cli(*args, "--describe", "--entity-name", "carl")
    assert done.stdout.decode() == ("SCRAM credential configs for user-principal 'carl' are "
                                    "SCRAM-SHA-256=iterations=4096\n")
    done = admin_cli(*args, "--describe", "--entity-name", "nobody")
    assert done.stdout.decode() == ("Error retrieving SCRAM credential configs for user-principal 'nobody': "
                                    "ResourceNotFoundException: Attempt to describe a user credential that does not "
                                    "exist: nobody\n")
    done = admin_cli(*args, "--alter", "--entity-name", "carl", "--add-config",
                     "SCRAM-SHA-256=[iterations=100,password=x]", check=False)
    assert done.returncode == 1 and b"must be 4096..16384" in done.stderr
    # Quotas share the user's znode (issue 12); the describe shows them first, as Kafka 3.x's tool does.
    done = admin_cli(*args, "--alter", "--entity-name", "carl", "--add-config", "consumer_byte_rate=100")
    assert done.stdout == b"Completed updating config for user carl.\n"
    done = admin_cli(*args, "--describe", "--entity-name", "carl")
    assert done.stdout.decode() == ("Quota configs for user-principal 'carl' are consumer_byte_rate=100.0\n"
                                    "SCRAM credential configs for user-principal 'carl' are "
                                    "SCRAM-SHA-256=iterations=4096\n")
    done = admin_cli(*args, "--alter", "--entity-name", "carl", "--add-config",
                     "SCRAM-SHA-256=[password=x],consumer_byte_rate=5", check=False)
    assert done.returncode == 1 and b"Cannot alter both quota and SCRAM credential configs" in done.stderr


# ---------------------------------------------------------------------------------------- two brokers, ZK

def test_credential_created_on_one_broker_works_on_another(tmp_path):
    ens = ZkEnsemble(tmp_path / "zk", n=1).start()
    brokers = []
    try:
        jaas = tmp_path / "jaas.conf"
        jaas.write_text(JAAS)
        for i in range(2):
            port, sasl_port = free_port(), free_port()
            b = BrokerProcess(tmp_path / f"b{i}", broker_id=i, port=port, zk=ens.connect_string + "/kb",
                              overrides=sasl_overrides(port, sasl_port),
                              env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
            b.sasl_port = sasl_port
            brokers.append(b.start(wait=False))
        for b in brokers:
            b.wait_ready(60)
        resp = _admin_request(brokers[0], 51, {"deletions": [], "upsertions": [_scram_upsert("zed", "zed-pw")]})
        assert resp["results"] == [{"user": "zed", "error_code": 0, "error_message": None}]

        def authenticates():
            with socket.create_connection(("127.0.0.1", brokers[1].sasl_port), timeout=10) as s:
                try:
                    authenticate(_roundtrip(s), client_mechanism("SCRAM-SHA-256", "zed", "zed-pw"))
                    return True
                except SaslRefused:
                    return False
        wait_until(authenticates, 15, message="broker 1 to learn zed's credential from the change notification")
        # and a removal reaches it too
        _admin_request(brokers[0], 51, {"deletions": [{"name": "zed", "mechanism": 1}], "upsertions": []})
        wait_until(lambda: not authenticates(), 15, message="broker 1 to forget zed's credential")
    finally:
        for b in brokers:
            b.close()
        ens.close()


def _scram_upsert(user, password, mech="SCRAM-SHA-256", iterations=4096):
    from kbroker.security.sasl.scram import MECHANISMS, salted_password
    salt = b"0123456789abcdef"
    return {"name": user, "mechanism": MECHANISMS[mech][1], "iterations": iterations, "salt": salt,
            "salted_password": salted_password(mech, password, salt, iterations)}


# ------------------------------------------------------------------------------- inter-broker SASL (SCRAM)

INTER_JAAS = """KafkaServer {
    org.apache.kafka.common.security.scram.ScramLoginModule required
    username="admin" password="admin-secret";
    org.apache.kafka.common.security.plain.PlainLoginModule required
    user_alice="alice-secret";
};
"""


def test_inter_broker_scram_replication(tmp_path):
    """Two brokers whose inter-broker listener is SASL_PLAINTEXT with SCRAM-SHA-256: the brokers' own credential
    is created with ``kbroker-admin configs --zookeeper`` before they start (Kafka's bootstrap procedure); a topic
    with replication factor 2 is led by one and copied by the other, byte-exactly, acks=all."""
    ens = ZkEnsemble(tmp_path / "zk", n=1).start()
    brokers = []
    try:
        connect = ens.connect_string + "/kb"
        done = admin_cli("configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name",
                         "admin", "--add-config", "SCRAM-SHA-256=[iterations=4096,password=admin-secret]")
        assert done.stdout == b"Completed updating config for user admin.\n"
        jaas = tmp_path / "jaas.conf"
        jaas.write_text(INTER_JAAS)
        for i in range(2):
            port, sasl_port = free_port(), free_port()
            b = BrokerProcess(tmp_path / f"b{i}", broker_id=i, port=port, zk=connect,
                              overrides=sasl_overrides(port, sasl_port, {
                                  "inter.broker.listener.name": "SASL_PLAINTEXT",
                                  "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
                                  "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}),
                              env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
            b.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
            brokers.append(b.start(wait=False))
        for b in brokers:
            b.wait_ready(60)
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        fut = admin.create_topics([NewTopic("replicated", 1, 2)], operation_timeout=30, request_timeout=30)
        assert fut["replicated"].result(30) is None
        recs = sample_records("ib", partitions=1, per_partition=8)
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                "sasl.password": "alice-secret", "acks": "all"}
        confluent_produce(brokers[1].sasl_bootstrap, "replicated", recs, **conf)
        conf.pop("acks")
        assert confluent_consume(brokers[0].sasl_bootstrap, "replicated", len(recs), **conf) == expected(recs)
        # both replicas hold the same bytes (the follower fetched them over SASL)
        segs = [b.log_dir / "replicated-0" / ("0" * 20 + ".log") for b in brokers]
        wait_until(lambda: all(p.exists() for p in segs) and segs[0].read_bytes() == segs[1].read_bytes()
                   and segs[0].stat().st_size > 0, 20, message="the follower's copy to match the leader's")
        logs = "".join(b.log_text() for b in brokers)
        assert "authentication failed" not in logs.lower()
    finally:
        for b in brokers:
            b.close()
        ens.close()


def test_inter_broker_sasl_config_refusals(tmp_path):
    """A SASL inter-broker listener without a usable mechanism or credentials stops startup naming why."""
    from kbroker.config.broker import BrokerConfig
    from kbroker.config.values import ConfigError
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)    # its ScramLoginModule has no username/password
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "log.dirs": str(tmp_path / "l"),
            "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}
    import os
    old = os.environ.get("KAFKA_OPTS")
    os.environ["KAFKA_OPTS"] = f"-Djava.security.auth.login.config={jaas}"
    try:
        with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol.*must be included"):
            BrokerConfig.from_dict(base)    # default GSSAPI, not enabled
        with pytest.raises(ConfigError, match="needs username and password"):
            BrokerConfig.from_dict({**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})
        cfg = BrokerConfig.from_dict({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
        assert cfg.inter_broker_listener == "SASL_PLAINTEXT"
    finally:
        if old is None:
            os.environ.pop("KAFKA_OPTS", None)
        else:
            os.environ["KAFKA_OPTS"] = old


# ------------------------------------------------------------------------------------------------ SASL_SSL

from tests.integration.certs import pki  # noqa: E402,F401 - session fixture


@pytest.fixture(scope="module")
def sasl_ssl_broker(tmp_path_factory, pki):  # noqa: F811 - the fixture
    """A broker with a SASL_SSL listener (PEM keystore, KIP-651) serving PLAIN and SCRAM-SHA-256/512, its JAAS entries
    given as listener-prefixed sasl.jaas.config keys this time; sam's SCRAM-SHA-256 credential from the CLI."""
    base = tmp_path_factory.mktemp("sasl-ssl")
    port, ssl_port = free_port(), free_port()
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";')
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{ssl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://localhost:{ssl_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
        **pki.broker_ssl("PEM", prefix="listener.name.sasl_ssl."),
    }
    b = BrokerProcess(base / "b0", port=port, overrides=overrides, env={"KAFKA_OPTS": ""})
    b.ssl_bootstrap = f"localhost:{ssl_port}"
    b.ssl_port = ssl_port
    b.start()
    for user, mech in (("sam", "SCRAM-SHA-256"), ("sue", "SCRAM-SHA-512")):
        admin_cli("configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "users", "--entity-name",
                  user, "--add-config", f"{mech}=[password={USERS[mech][1]}]")
    yield b
    b.close()


@pytest.mark.parametrize("mech", MECHANISMS)
def test_sasl_ssl_confluent_and_kcat(sasl_ssl_broker, pki, mech):  # noqa: F811
    topic = topic_for(sasl_ssl_broker, "ssl-ck-" + mech.lower(), partitions=1)
    conf = {**conf_for(mech), "security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca}
    recs = sample_records("sslck" + mech, partitions=1, per_partition=5)
    confluent_produce(sasl_ssl_broker.ssl_bootstrap, topic, recs, **conf)
    assert confluent_consume(sasl_ssl_broker.ssl_bootstrap, topic, len(recs), **conf) == expected(recs)
    extra = []
    for k, v in conf.items():
        extra += ["-X", f"{k}={v}"]
    got = kcat_consume(sasl_ssl_broker.ssl_bootstrap, topic, 0, len(recs), extra=extra)
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for r in recs]


@pytest.mark.parametrize("mech", MECHANISMS)
def test_sasl_ssl_kafka_python_aiokafka_kafkajs(sasl_ssl_broker, pki, mech):  # noqa: F811
    from aiokafka.helpers import create_ssl_context
    topic = topic_for(sasl_ssl_broker, "ssl-py-" + mech.lower(), partitions=1)
    recs = sample_records("sslpy" + mech, partitions=1, per_partition=4, nulls=False)
    kp = {**kp_conf(mech), "security_protocol": "SASL_SSL", "ssl_cafile": pki.ca}
    kafka_python_produce(sasl_ssl_broker.ssl_bootstrap, topic, recs, **kp)
    aio = {**kp_conf(mech), "security_protocol": "SASL_SSL", "ssl_context": create_ssl_context(cafile=pki.ca)}
    assert aiokafka_consume(sasl_ssl_broker.ssl_bootstrap, topic, len(recs), **aio) == expected(recs)
    user, pw = USERS[mech]
    result = run_kafkajs({"brokers": [sasl_ssl_broker.ssl_bootstrap], "topic": topic, "mode": "fetch",
                          "count": len(recs), "ssl": {"ca": pki.ca},
                          "sasl": {"mechanism": mech.lower(), "username": user, "password": pw}})
    assert kafkajs_records(result) == expected(recs)


def test_sasl_ssl_java_and_wrong_password(sasl_ssl_broker, pki, java_driver):  # noqa: F811
    topic = topic_for(sasl_ssl_broker, "ssl-java", partitions=1)
    recs = sample_records("ssljava", partitions=1, per_partition=4)
    config = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca,
              "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="sue" password="sue-secret";'}
    produce, consume = java_driver(sasl_ssl_broker.ssl_bootstrap, [
        {"op": "produce", "topic": topic, "records": java_records(recs), "config": config},
        {"op": "consume", "topic": topic, "count": len(recs), "config": config}])
    assert [md["offset"] for md in ok(produce)["metadata"]] == list(range(len(recs)))
    assert got_of(ok(consume)) == expected(recs)
    from confluent_kafka import KafkaError, Producer
    seen = []
    p = Producer({"bootstrap.servers": sasl_ssl_broker.ssl_bootstrap, **conf_for("SCRAM-SHA-512", "bad"),
                  "security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca, "error_cb": seen.append})
    wait_until(lambda: (p.poll(0.1), seen)[1], 10, message="an authentication error")
    assert seen[0].code() == KafkaError._AUTHENTICATION and SCRAM_FAILED % "SCRAM-SHA-512" in seen[0].str()


def test_sasl_ssl_plaintext_request_is_never_answered(sasl_ssl_broker):
    with socket.create_connection(("127.0.0.1", sasl_ssl_broker.ssl_port), timeout=10) as s:
        s.sendall(_request(17, 1, {"mechanism": "PLAIN"}))
        assert_closed(s)


def test_cli_over_sasl_ssl_with_command_config(sasl_ssl_broker, pki, tmp_path):  # noqa: F811
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n"
                     "sasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security.scram."
                     'ScramLoginModule required username="sam" password="sam-secret";\n' % pki.ca)
    args = ["configs", "--bootstrap-server", sasl_ssl_broker.ssl_bootstrap, "--command-config", str(props),
            "--entity-type", "users"]
    admin_cli(*args, "--alter", "--entity-name", "dora", "--add-config", "SCRAM-SHA-512=[password=d]")
    done = admin_cli(*args, "--describe", "--entity-name", "dora")
    assert done.stdout.decode() == ("SCRAM credential configs for user-principal 'dora' are "
                                    "SCRAM-SHA-512=iterations=4096\n")
    props.write_text(props.read_text().replace("sam-secret", "wrong"))
    done = admin_cli(*args, "--describe", "--entity-name", "dora", check=False)
    assert done.returncode == 1 and SCRAM_FAILED.encode() % b"SCRAM-SHA-256" in done.stderr, done.stderr


def test_client_that_never_authenticates_is_dropped(tmp_path):
    """No request at all, or a handshake and then silence: connections.max.idle.ms closes it (Kafka's only bound
    on an unauthenticated connection, and kbroker's)."""
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    port, sasl_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "b", port=port, overrides=sasl_overrides(port, sasl_port, {
        "connections.max.idle.ms": "1500"}), env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    b.start()
    try:
        with socket.create_connection(("127.0.0.1", sasl_port), timeout=10) as silent, \
                socket.create_connection(("127.0.0.1", sasl_port), timeout=10) as stalled:
            stalled.sendall(_request(17, 1, {"mechanism": "SCRAM-SHA-256"}))
            assert _response(stalled, 17, 1)["error_code"] == 0
            started = time.monotonic()
            assert_closed(silent, timeout=8)
            assert_closed(stalled, timeout=8)
            assert time.monotonic() - started < 6
    finally:
        b.close()


def test_after_authentication_requests_may_exceed_the_sasl_receive_limit(sasl_broker):
    """sasl.server.max.receive.size bounds frames before authentication only: a 900 KB record produces."""
    topic = topic_for(sasl_broker, "big-after-auth", partitions=1)
    value = bytes(range(256)) * 3600   # 921,600 bytes: one Produce frame well above 524,288
    from tests.integration.test_clients_common import Rec
    confluent_produce(sasl_broker.sasl_bootstrap, topic, [Rec(0, b"k", value, (), None)],
                      **conf_for("SCRAM-SHA-256"), **{"compression.type": "none", "message.max.bytes": 2000000})
    got = confluent_consume(sasl_broker.sasl_bootstrap, topic, 1, **conf_for("SCRAM-SHA-256"))
    assert got[0].value == value


@pytest.mark.parametrize("mech", MECHANISMS)
def test_kafka_python_as_a_0_10_client_uses_the_v0_raw_flow(sasl_broker, mech):
    """kafka-python pinned to api_version (0, 10, 1) sends SaslHandshake v0 and then bare tokens (Kafka 0.10's
    flow); it produces and consumes through it."""
    topic = topic_for(sasl_broker, "kp010-" + mech.lower(), partitions=1)
    recs = sample_records("kp010" + mech, partitions=1, per_partition=3, headers=False, nulls=False,
                          timestamps=False)
    kafka_python_produce(sasl_broker.sasl_bootstrap, topic, recs, api_version=(0, 10, 1), **kp_conf(mech))
    got = kafka_python_consume(sasl_broker.sasl_bootstrap, topic, len(recs), api_version=(0, 10, 1),
                               **kp_conf(mech))
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for r in recs]


def test_confluent_admin_describes_and_deletes_scram_credentials(sasl_broker):
    """librdkafka's AdminClient reads KIP-554's answers: mechanisms and iterations, RESOURCE_NOT_FOUND by name."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    futs = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("cfk", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000), b"pw1"),
        UserScramCredentialUpsertion("cfk", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw2")])
    assert futs["cfk"].result(30) is None
    desc = admin.describe_user_scram_credentials(["cfk"])["cfk"].result(30)
    assert sorted((i.mechanism, i.iterations) for i in desc.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 10000), (ScramMechanism.SCRAM_SHA_512, 4096)]
    futs = admin.alter_user_scram_credentials([UserScramCredentialDeletion("cfk", ScramMechanism.SCRAM_SHA_256)])
    assert futs["cfk"].result(30) is None
    desc = admin.describe_user_scram_credentials(["cfk"])["cfk"].result(30)
    infos = [(i.mechanism, i.iterations) for i in desc.scram_credential_infos]
    assert infos == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    with pytest.raises(KafkaException) as e:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    assert e.value.args[0].code() == 91   # RESOURCE_NOT_FOUND
