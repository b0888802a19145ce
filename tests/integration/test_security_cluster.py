"""Issue 10's two end-to-end cluster proofs ("What must show it", bullet 3): a fully secured 3-broker cluster, and
Kafka's section 7.5 rolling upgrade from PLAINTEXT to SASL_SSL with producers running.

``test_sasl_ssl_cluster_on_secure_zookeeper``
    A SASL 3-node ZooKeeper ensemble (harness.ZkEnsemble SASL mode, DIGEST-MD5 user ``kafka``) and 3 brokers with
    ``zookeeper.set.acl=true`` logging in to it from the JAAS ``Client`` section. The brokers have *no* PLAINTEXT
    listener: ``INTERNAL`` (SASL_SSL, ``inter.broker.listener.name``) and ``CLIENT`` (SASL_SSL), SCRAM-SHA-512 on
    both. As Kafka's docs prescribe, the brokers' own SCRAM credential (``User:broker``) and the clients' are
    created in ZooKeeper with ``kbroker-admin configs --zookeeper ... --entity-type users --add-config`` before any
    broker starts; ``User:broker`` is the ACL authorizer's only super user, and ``User:alice`` gets ACLs with
    ``kbroker-admin acls --authorizer-properties zookeeper.connect=...``. Why replication proves inter-broker
    SASL_SSL: the followers' Fetch needs ClusterAction, which only the super user ``User:broker`` holds, and the
    only listener the brokers may use between them serves nothing before a TLS handshake and a SASL exchange --
    so an ``acks=all`` produce completing with an ISR of 3 (``min.insync.replicas=2``, replicas falling out of
    the ISR after 6 s), and a killed broker coming back into every ISR, mean the replica fetchers did TLS, then
    SCRAM-SHA-512 as ``broker`` (checked by breaking it: with a wrong password in the brokers' JAAS entry the
    produce times out). The test client never touches INTERNAL, so its TLS connections (the broker log's "TLS
    connection from ... on listener INTERNAL" lines) are the brokers'.

``test_rolling_upgrade_plaintext_to_sasl_ssl``
    Section 7.5 on a plain ensemble: 3 PLAINTEXT brokers and an idempotent acks=all producer writing sequence-
    numbered values; bounce 1 adds a SASL_SSL listener (PLAIN users from the JAAS ``KafkaServer`` section), the
    clients move (a SASL_SSL producer takes over), bounce 2 sets ``security.inter.broker.protocol=SASL_SSL``,
    bounce 3 removes the PLAINTEXT listener. Every bounce is SIGTERM (controlled shutdown) of one broker, restart,
    and a bounded wait until every partition's ISR is full again before the next broker. At the end, consumed over
    SASL_SSL, each partition holds exactly the records the producers' delivery reports acknowledged, at the offsets
    they reported, in produce order, nothing twice and nothing else.

Timing (2 shared cores): ZooKeeper sessions 6 s; a broker restart is ~3-6 s; the rolling test does 9 restarts.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from kbroker.security import tls
from kbroker.security.client_channel import ChannelError, ChannelSecurity, secure
from kbroker.security.sasl.client import client_mechanism
from tests.integration import harness
from tests.integration.certs import pki  # noqa: F401 - session fixture
from tests.integration.harness import (BrokerProcess, HarnessError, ZkEnsemble, api_versions_request, free_port,
                                       read_response, wait_until)
from tests.integration.test_clients_common import confluent_consume, confluent_produce, expected, sample_records
from tests.integration.test_cluster_common import BROKER_OVERRIDES, CHROOT, FAILOVER_WAIT_S, require_zookeeper

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

HOST = "127.0.0.1"
ZK_USERS = {"kafka": "kafka-secret"}
SCRAM = "SCRAM-SHA-512"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
CLIENT_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
ADMIN = [sys.executable, "-m", "kbroker.cli.admin"]
# Znodes the brokers delete on their own while the ZooKeeper checks run: processed change notifications.
VANISHING = ("/isr_change_notification/", "/config/changes/", "/kafka-acl-changes/", "/kafka-acl-extended-changes/",
             "/log_dir_event_notification/")
# Kafka's TOPIC_AUTHORIZATION_FAILED.
TOPIC_AUTHORIZATION_FAILED = 29


# ------------------------------------------------------------------------------------------------ helpers

def sasl_security(pki, mechanism, user, password):
    """kbroker's own client channel settings for a SASL_SSL listener (stdlib ssl: the test is not gevent)."""
    context = tls.client_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca})
    return ChannelSecurity("SASL_SSL", context, lambda host: client_mechanism(mechanism, user, password))


def secure_api_versions(port, security, timeout=5.0):
    """ApiVersions v0 over a TLS + SASL channel to ``port``; returns the response body (error code first)."""
    with socket.create_connection((HOST, port), timeout=timeout) as raw:
        raw.settimeout(timeout)
        sock = secure(raw, HOST, security, timeout, client_id="security-cluster-probe")
        try:
            sock.sendall(api_versions_request(7))
            corr, body = read_response(sock)
        finally:
            sock.close()
    assert corr == 7
    return body


def plaintext_closes(port, timeout=10.0):
    """True when a plaintext ApiVersions to ``port`` is never answered: the connection closes (or a TLS alert)."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(api_versions_request(3))
        try:
            data = s.recv(4096)
        except (ConnectionResetError, socket.timeout):
            return True
    return data == b"" or data[:1] == b"\x15"   # EOF, or a TLS alert record


class SecuredBroker(BrokerProcess):
    """A BrokerProcess whose readiness probe goes over SASL_SSL when ``probe`` is set: (port, ChannelSecurity)
    (the harness's probe is plaintext ApiVersions, which a SASL_SSL-only broker never answers)."""

    probe = None

    def wait_ready(self, timeout: float = 30.0) -> bytes:
        if self.probe is None:
            return super().wait_ready(timeout)
        port, security = self.probe

        def answered():
            if self.proc.poll() is not None:
                raise HarnessError(self._describe(f"broker {self.broker_id} exited with code "
                                                  f"{self.proc.returncode}"))
            body = secure_api_versions(port, security, timeout=3.0)
            return body if body[:2] == b"\x00\x00" else None

        try:
            return wait_until(answered, timeout, 0.2, f"broker {self.broker_id} to answer ApiVersions over SASL_SSL "
                              f"on port {port}", ignore=(OSError, ConnectionError, ChannelError))
        except HarnessError as exc:
            if "exited with code" in str(exc):
                raise
            raise HarnessError(self._describe(str(exc))) from None


def kazoo_client(connect, user=None, password=None):
    """A started kazoo client on ``connect``: DIGEST-MD5 as ``user`` or anonymous."""
    from kazoo.client import KazooClient

    sasl = None if user is None else {"mechanism": "DIGEST-MD5", "username": user, "password": password}
    c = KazooClient(hosts=connect, timeout=20.0, sasl_options=sasl, connection_retry={"max_tries": -1},
                    command_retry={"max_tries": -1, "deadline": 60})
    c.start(timeout=30)
    c.exists("/")   # answered after the SASL exchange: a refused login fails here
    return c


def close_kazoo(c):
    try:
        c.stop()
    finally:
        c.close()


def walk(zk, root="/"):
    """Every znode path under ``root`` (itself included), parents first."""
    out, todo = [], [root]
    while todo:
        path = todo.pop()
        out.append(path)
        try:
            children = zk.get_children(path)
        except Exception:  # noqa: BLE001 - an ephemeral node gone meanwhile
            continue
        base = "" if path == "/" else path
        todo.extend(sorted((base + "/" + c for c in children), reverse=True))
    return out


def partition_state(zk, topic, p):
    import json

    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
    return json.loads(data)


def wait_isr_full(zk, topic, partitions, replicas=(0, 1, 2), timeout=60.0):
    """Bounded wait until every partition's ISR (its state znode) is all of ``replicas``."""
    want = sorted(replicas)

    def full():
        return all(sorted(partition_state(zk, topic, p)["isr"]) == want for p in range(partitions))

    wait_until(full, timeout, 0.1, f"the ISR of every partition of {topic} to be {want}",
               ignore=(Exception,))


def run_admin(args, env_extra, timeout=60):
    env = dict(os.environ)
    env.pop("KAFKA_OPTS", None)
    env.update(env_extra)
    env["PYTHONPATH"] = str(harness.REPO_ROOT)
    done = subprocess.run(ADMIN + list(args), capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=str(harness.REPO_ROOT))
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def consume_all(bootstrap, topic, partitions, timeout=60.0, **conf):
    """Every record of ``partitions`` up to the high watermark each had when the read began (assign-based,
    read_committed is irrelevant: no transactions) -> sorted [(partition, offset, value)]."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"consume-all-{topic}", "enable.auto.commit": False,
                  "auto.offset.reset": "error", "fetch.wait.max.ms": 100, **conf})
    out = []
    try:
        highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in partitions}
        c.assign([TopicPartition(topic, p, 0) for p in partitions if highs[p] > 0])
        left = {p for p in partitions if highs[p] > 0}
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            if m.offset() < highs[m.partition()]:
                out.append((m.partition(), m.offset(), m.value()))
            if m.offset() >= highs[m.partition()] - 1:
                left.discard(m.partition())
        assert not left, f"partitions {sorted(left)} not read to their high watermarks {highs} in {timeout}s"
    finally:
        c.close()
    return sorted(out)


def wait_brokers_known(bootstraps, conf, n=3, timeout=60.0):
    """Bounded wait until each broker (its own bootstrap address, asked alone) answers Metadata listing ``n``
    brokers: a CreateTopics sent earlier may be refused with INVALID_REPLICATION_FACTOR by a broker whose metadata
    cache has not heard of every registration yet."""
    from confluent_kafka.admin import AdminClient

    for bootstrap in bootstraps:
        admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == n, timeout, 0.2,
                   f"the broker at {bootstrap} to know {n} brokers", ignore=(Exception,))


def step(what):
    """A progress line (pytest shows the captured ones when a test fails: which phase it got to, and when)."""
    print(f"{time.strftime('%H:%M:%S')} {what}", flush=True)


def librdkafka_sasl(pki, mechanism, user, password):
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


# ------------------------------------------------------------------------------ 1. the fully secured cluster

SECURE_JAAS = """KafkaServer {
    org.apache.kafka.common.security.scram.ScramLoginModule required
    username="%s"
    password="%s";
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="%s";
};
""" % (BROKER_USER, BROKER_PASSWORD, ZK_USERS["kafka"])


@pytest.fixture(scope="module")
def sasl_ensemble(tmp_path_factory):
    require_zookeeper()
    zk = ZkEnsemble(tmp_path_factory.mktemp("secure_zk"), n=3, sasl_users=ZK_USERS)
    try:
        zk.start()
        yield zk
    finally:
        zk.close()


def test_sasl_ssl_cluster_on_secure_zookeeper(tmp_path, sasl_ensemble, pki):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kazoo.exceptions import NoAuthError, NoNodeError

    connect = sasl_ensemble.connect_string + CHROOT
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(SECURE_JAAS)
    opts = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"}

    # Before any broker runs: the SCRAM credentials (the brokers' own first, as Kafka's docs say) and alice's ACLs,
    # written to ZooKeeper by the tools logged in from the JAAS Client section.
    for user, password in [(BROKER_USER, BROKER_PASSWORD), *CLIENT_USERS.items()]:
        out = run_admin(["configs", "--zookeeper", connect, "--alter", "--entity-type", "users", "--entity-name",
                         user, "--add-config", f"{SCRAM}=[iterations=4096,password={password}]"], opts)
        assert out == f"Completed updating config for user {user}.\n"
    authz = ["acls", "--authorizer-properties", f"zookeeper.connect={connect}", "--add", "--allow-principal",
             "User:alice"]
    run_admin(authz + ["--operation", "All", "--topic", "secure-", "--resource-pattern-type", "prefixed"], opts)
    run_admin(authz + ["--operation", "Read", "--group", "*"], opts)

    brokers = []
    for i in range(3):
        internal, client = free_port(), free_port()
        listeners = f"INTERNAL://{HOST}:{internal},CLIENT://{HOST}:{client}"
        b = SecuredBroker(tmp_path / f"broker{i}", broker_id=i, port=client, zk=connect, env=opts, overrides={
            **BROKER_OVERRIDES, "num.partitions": 1,
            "listeners": listeners, "advertised.listeners": listeners,
            "listener.security.protocol.map": "INTERNAL:SASL_SSL,CLIENT:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": SCRAM, "sasl.mechanism.inter.broker.protocol": SCRAM,
            **pki.broker_ssl("PEM"),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{BROKER_USER}",
            "zookeeper.set.acl": "true",
            # a killed replica leaves the ISR after 6 s, so acks=all goes on with two
            "replica.lag.time.max.ms": 6000, "replica.fetch.wait.max.ms": 200,
        })
        b.internal_port = internal
        b.probe = (client, sasl_security(pki, SCRAM, "alice", CLIENT_USERS["alice"]))
        brokers.append(b)
    zk = kazoo_client(connect, "kafka", ZK_USERS["kafka"])
    alice = librdkafka_sasl(pki, SCRAM, "alice", CLIENT_USERS["alice"])
    try:
        for b in brokers:
            b.start(wait=False)
        for b in brokers:
            b.wait_ready(60)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        wait_until(lambda: sorted(zk.get_children("/brokers/ids")) == ["0", "1", "2"], 60, 0.2,
                   "three brokers registered")
        wait_brokers_known([b.bootstrap for b in brokers], alice)

        # The registrations: two SASL_SSL endpoints each, no PLAINTEXT anywhere.
        import json
        for b in brokers:
            reg = json.loads(zk.get(f"/brokers/ids/{b.broker_id}")[0])
            assert reg["endpoints"] == [f"INTERNAL://{HOST}:{b.internal_port}", f"CLIENT://{HOST}:{b.port}"]
            assert reg["listener_security_protocol_map"] == {"INTERNAL": "SASL_SSL", "CLIENT": "SASL_SSL"}

        # alice creates an RF 3 topic (her prefixed ACL grants Create) over SASL_SSL.
        topic = "secure-rf3"
        admin = AdminClient({"bootstrap.servers": bootstrap, **alice})
        fut = admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=30, request_timeout=35)
        assert fut[topic].result(40) is None
        # Every replica in the ISR: the followers fetched over INTERNAL as User:broker (module docstring).
        wait_isr_full(zk, topic, 3)
        md = admin.list_topics(topic, timeout=20).topics[topic]
        assert {p: (sorted(s.replicas), sorted(s.isrs)) for p, s in md.partitions.items()} == \
            {p: ([0, 1, 2], [0, 1, 2]) for p in range(3)}

        recs = sample_records("sec", partitions=3, per_partition=20)
        reports = confluent_produce(bootstrap, topic, recs, acks="all", **alice)
        assert len(reports) == len(recs)
        got = confluent_consume(bootstrap, topic, len(recs), partitions=(0, 1, 2), **alice)
        assert got == expected(recs)

        # The INTERNAL listener carried TLS connections on every broker (only brokers use it), and answers no
        # plaintext request.
        for b in brokers:
            assert re.search(r"TLS connection from \S+ on listener INTERNAL: TLSv1\.[23] ", b.log_text()), \
                f"broker {b.broker_id} saw no TLS connection on INTERNAL"
        assert plaintext_closes(brokers[0].internal_port)

        # The authorizer is on: bob (authenticated, no ACL) is refused with TOPIC_AUTHORIZATION_FAILED.
        refused = []
        p = Producer({"bootstrap.servers": bootstrap, **librdkafka_sasl(pki, SCRAM, "bob", CLIENT_USERS["bob"]),
                      "message.timeout.ms": 15000})
        p.produce(topic, b"bob", partition=0, on_delivery=lambda err, msg: refused.append(err))
        p.flush(30)
        assert len(refused) == 1 and refused[0] is not None
        assert refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        # Leader failover: kill -9 the leader of partition 0; a survivor takes over with every acknowledged record.
        before = partition_state(zk, topic, 0)
        victim = brokers[before["leader"]]
        victim.kill9()
        wait_until(lambda: partition_state(zk, topic, 0)["leader"] not in (-1, victim.broker_id),
                   FAILOVER_WAIT_S, 0.1, "partition 0 led by a survivor", ignore=(Exception,))
        assert partition_state(zk, topic, 0)["leader_epoch"] > before["leader_epoch"]
        survivors = ",".join(b.bootstrap for b in brokers if b is not victim)
        more = [r._replace(key=b"after-" + (r.key or b"")) for r in sample_records("aft", 3, 5)]
        confluent_produce(survivors, topic, more, acks="all", **alice)
        got = confluent_consume(survivors, topic, len(recs) + len(more), partitions=(0, 1, 2), **alice)
        assert got == expected(recs + more)
        # The killed broker comes back and catches up over SASL_SSL into every ISR.
        victim.start(wait=False)
        victim.wait_ready(60)
        wait_isr_full(zk, topic, 3, timeout=60)

        # ZooKeeper: a client without credentials reads what is world-readable but creates, changes and deletes
        # nothing under the brokers' chroot.
        anon = kazoo_client(connect)

        def refused(node, op, *args):
            """"noauth" when ZooKeeper refuses ``op(*args)`` for lack of rights; "gone" when the znode ``node`` it
            acts on vanished meanwhile (a processed ISR-change notification, a purged config change); anything else
            fails the test."""
            try:
                op(*args)
            except NoAuthError:
                return "noauth"
            except NoNodeError:
                if zk.exists(node) is None:
                    return "gone"
                raise
            return "done"

        try:
            paths = walk(zk)
            for must in ("/brokers/ids/0", "/controller", f"/brokers/topics/{topic}/partitions/0/state",
                         f"/config/users/{BROKER_USER}", "/kafka-acl/Group/*",
                         "/kafka-acl-extended/prefixed/Topic/secure-"):
                assert must in paths, (must, paths)
            outcomes = {}
            for path in paths:
                if path != "/consumers":   # the old consumers' root is world-writable, as in Kafka
                    outcomes[("create", path)] = refused(path, anon.create, path.rstrip("/") + "/intruder", b"x")
                    outcomes[("set", path)] = refused(path, anon.set, path, b"{}")
                if path != "/":
                    outcomes[("delete", path)] = refused(path, anon.delete, path)
            assert {k: v for k, v in outcomes.items() if v not in ("noauth", "gone")} == {}
            gone = sorted({path for (_, path), v in outcomes.items() if v == "gone"})
            assert [p for p in gone if not p.startswith(VANISHING)] == [], gone
            step(f"ZooKeeper: {sum(v == 'noauth' for v in outcomes.values())} changes refused on {len(paths)} znodes, "
                 f"{len(gone)} notifications processed meanwhile")
            assert {outcomes[(op, must)] for op in ("create", "set", "delete")
                    for must in ("/brokers/ids/0", "/controller", f"/brokers/topics/{topic}/partitions/0/state",
                                 f"/config/users/{BROKER_USER}")} == {"noauth"}
        finally:
            close_kazoo(anon)
        # Nothing changed: every broker still answers over SASL_SSL and the topic still reads back whole.
        assert confluent_consume(bootstrap, topic, len(recs) + len(more), partitions=(0, 1, 2), **alice) == \
            expected(recs + more)
    finally:
        close_kazoo(zk)
        for b in brokers:
            b.close()


# ------------------------------------------------------------------------------ 2. the rolling upgrade (7.5)

ROLLING_JAAS = """KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice-secret";
};
"""
ROLLING_TOPIC = "rolling"
PARTITIONS = 3


class SequenceProducer:
    """An idempotent acks=all confluent-kafka producer writing ``<tag>-<seq>`` values (keys spread them over the
    partitions) from its own thread until ``stop()``; ``acked`` gets (partition, offset, value) per delivery
    report, ``failed`` every delivery error."""

    def __init__(self, tag, conf, pause_s=0.004):
        from confluent_kafka import Producer

        self.tag = tag
        self.producer = Producer({"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 120000, "request.timeout.ms": 15000, **conf})
        self.acked, self.failed = [], []
        self.sent = 0
        self.pause_s = pause_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{tag}", daemon=True)

    def _report(self, err, msg):
        if err is not None:
            self.failed.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self):
        while not self._stop.is_set():
            value = b"%s-%07d" % (self.tag.encode(), self.sent)
            try:
                self.producer.produce(ROLLING_TOPIC, value=value, key=b"k%d" % (self.sent % 97),
                                      on_delivery=self._report)
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent += 1
            self.producer.poll(self.pause_s)

    def start(self):
        self._thread.start()
        return self

    def stop(self, timeout=90.0):
        self._stop.set()
        self._thread.join(30)
        left = self.producer.flush(timeout)
        assert left == 0, f"producer {self.tag}: {left} records undelivered after {timeout}s"

    def wait_acked(self, n, timeout=30.0):
        wait_until(lambda: len(self.acked) >= n, timeout, 0.05, f"producer {self.tag}: {n} acknowledged records")


def test_rolling_upgrade_plaintext_to_sasl_ssl(tmp_path, zk_ensemble, pki):
    from confluent_kafka.admin import AdminClient, NewTopic

    connect = zk_ensemble.connect_string + "/rolling"
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(ROLLING_JAAS)
    admin_sasl = sasl_security(pki, "PLAIN", "admin", "admin-secret")
    brokers = []
    for i in range(3):
        b = SecuredBroker(tmp_path / f"broker{i}", broker_id=i, zk=connect, overrides={
            **BROKER_OVERRIDES, "replica.fetch.wait.max.ms": 200, "group.initial.rebalance.delay.ms": 0})
        b.sasl_port = free_port()
        brokers.append(b)

    def stage(b, n):
        """Broker ``b``'s server.properties at stage ``n`` of section 7.5 (0: PLAINTEXT only)."""
        plain, sasl = f"PLAINTEXT://{HOST}:{b.port}", f"SASL_SSL://{HOST}:{b.sasl_port}"
        listeners = {0: plain, 1: f"{plain},{sasl}", 2: f"{plain},{sasl}", 3: sasl}[n]
        b.overrides.update({"listeners": listeners, "advertised.listeners": listeners})
        if n >= 1:
            b.overrides.update({"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                                **pki.broker_ssl("PEM")})
            b.extra_env["KAFKA_OPTS"] = f"-Djava.security.auth.login.config={jaas}"
        if n >= 2:
            b.overrides["security.inter.broker.protocol"] = "SASL_SSL"
        if n >= 3:
            b.probe = (b.sasl_port, admin_sasl)

    zk = None
    producers = []
    try:
        for b in brokers:
            stage(b, 0)
            b.start(wait=False)
        for b in brokers:
            b.wait_ready(60)
        zk = kazoo_client(connect)   # once the brokers made the chroot
        wait_brokers_known([b.bootstrap for b in brokers], {})
        plaintext = ",".join(b.bootstrap for b in brokers)
        sasl_bootstrap = ",".join(f"{HOST}:{b.sasl_port}" for b in brokers)
        admin = AdminClient({"bootstrap.servers": plaintext})
        fut = admin.create_topics([NewTopic(ROLLING_TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=30, request_timeout=35)
        assert fut[ROLLING_TOPIC].result(40) is None
        wait_isr_full(zk, ROLLING_TOPIC, PARTITIONS)

        old = SequenceProducer("plain", {"bootstrap.servers": plaintext}).start()
        producers.append(old)
        old.wait_acked(200)

        def bounce(n):
            for b in brokers:
                mark = len(old.acked) + sum(len(p.acked) for p in producers[1:])
                step(f"bounce {n}: broker {b.broker_id} ({mark} records acknowledged so far)")
                b.stop()
                stage(b, n)
                b.start(wait=True, timeout=60)
                step(f"bounce {n}: broker {b.broker_id} restarted")
                wait_isr_full(zk, ROLLING_TOPIC, PARTITIONS, timeout=60)
                # the producers kept going meanwhile (the running one acknowledged more records)
                wait_until(lambda: len(old.acked) + sum(len(p.acked) for p in producers[1:]) > mark + 20, 30, 0.05,
                           "records acknowledged after the bounce")

        # Bounce 1: a SASL_SSL listener next to PLAINTEXT; brokers still talk PLAINTEXT to each other.
        bounce(1)
        # Move the clients: a SASL_SSL producer takes over, the PLAINTEXT one finishes.
        new = SequenceProducer("sasl", {"bootstrap.servers": sasl_bootstrap,
                                        **librdkafka_sasl(pki, "PLAIN", "alice", "alice-secret")}).start()
        producers.append(new)
        new.wait_acked(200)
        old.stop()
        # Bounce 2: inter-broker traffic over SASL_SSL.
        bounce(2)
        # Bounce 3: the PLAINTEXT listener removed.
        bounce(3)
        new.wait_acked(len(new.acked) + 200)
        new.stop()

        # Registrations: only the SASL_SSL endpoint; plaintext is refused everywhere.
        import json
        for b in brokers:
            reg = json.loads(zk.get(f"/brokers/ids/{b.broker_id}")[0])
            assert reg["endpoints"] == [f"SASL_SSL://{HOST}:{b.sasl_port}"]
            with pytest.raises(OSError):
                socket.create_connection((HOST, b.port), timeout=5).close()
            assert plaintext_closes(b.sasl_port)

        # Nothing lost, nothing twice, nothing else: per partition exactly the acknowledged records, in order.
        assert old.failed == [] and new.failed == []
        acked = sorted(old.acked + new.acked)
        assert len(acked) == old.sent + new.sent
        got = consume_all(sasl_bootstrap, ROLLING_TOPIC, range(PARTITIONS),
                          **librdkafka_sasl(pki, "PLAIN", "alice", "alice-secret"))
        extra, missing = sorted(set(got) - set(acked)), sorted(set(acked) - set(got))
        assert (extra[:10], missing[:10]) == ([], []), f"{len(extra)} records not acknowledged, {len(missing)} lost"
        assert got == acked
        for p in range(PARTITIONS):
            for tag in ("plain", "sasl"):
                seqs = [int(v.rsplit(b"-", 1)[1]) for part, _, v in acked if part == p and v.startswith(tag.encode())]
                assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), (p, tag)
    finally:
        for p in producers:
            p._stop.set()
        if zk is not None:
            close_kazoo(zk)
        for b in brokers:
            b.close()
