"""TLS to ZooKeeper (Kafka >= 2.5's zookeeper.ssl.* keys, KIP-515) on a real 3-node ensemble serving TLS with
client certificates required (harness.ZkEnsemble TLS mode).

Two brokers connect over TLS only, one with the broker identity's PKCS12 keystore and one with the same identity as
a PEM keystore (encrypted key + chain, KIP-651's layout), and ``zookeeper.set.acl=true`` *without* SASL: the client
certificate authenticates them (ZooKeeper's ``x509`` scheme), so their znodes' ACLs name the certificate's subject,
as in Kafka. Another certificate of the same CA reads but changes nothing; a broker whose truststore does not hold
the ensemble's CA stops at startup within zookeeper.connection.timeout.ms.
"""
from __future__ import annotations

import pytest

from kbroker.coord.zk_security import expected_acls
from tests.integration import harness
from tests.integration.certs import BROKER_DN, make_pki
from tests.integration.harness import BrokerProcess, ZkEnsemble, wait_until
from tests.integration.test_cluster_common import consume, create_topics, produce, records_for, require_zookeeper
from tests.integration.test_zk_security import acls_of, walk

pytestmark = [pytest.mark.zk, pytest.mark.timeout(300)]

NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"
BROKERS_ID = [("x509", BROKER_DN)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("alice",))


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory, pki):
    require_zookeeper()
    if not all(harness.os.path.exists(j) for j in harness.ZK_TLS_JARS):
        harness.skip_or_fail("Debian's libnetty-java jars %s are missing" % (harness.ZK_TLS_JARS,))
    zk = ZkEnsemble(tmp_path_factory.mktemp("tls_zk"), n=3, tls={
        "keystore": pki.broker.p12, "password": pki.broker.password, "type": "PKCS12", "truststore": pki.ca})
    try:
        zk.start()
        yield zk
    finally:
        zk.close()


def tls_overrides(pki, kind="PKCS12", truststore=None):
    store = pki.broker.p12 if kind == "PKCS12" else pki.broker.keystore_pem
    return {"zookeeper.ssl.client.enable": "true", "zookeeper.clientCnxnSocket": NETTY,
            "zookeeper.ssl.keystore.location": store, "zookeeper.ssl.keystore.password": pki.broker.password,
            "zookeeper.ssl.truststore.location": truststore or pki.ca, "zookeeper.set.acl": "true",
            "zookeeper.session.timeout.ms": 6000, "zookeeper.connection.timeout.ms": 8000,
            "offsets.topic.replication.factor": 2}


def kazoo_tls(pki, connect, identity=None):
    """A started kazoo client over TLS (kazoo's own file-based TLS), with ``identity``'s certificate or none."""
    from kazoo.client import KazooClient

    cert = {} if identity is None else {"certfile": identity.chain, "keyfile": identity.key}
    c = KazooClient(hosts=connect, timeout=20.0, use_ssl=True, ca=pki.ca, verify_certs=True,
                    connection_retry={"max_tries": 3}, **cert)
    c.start(timeout=20)
    return c


def test_brokers_over_tls_with_certificate_acls(tmp_path, tls_zk, pki):
    from kazoo.exceptions import NoAuthError

    connect = tls_zk.secure_connect_string + "/tls"
    brokers = [BrokerProcess(tmp_path / f"b{i}", broker_id=i, zk=connect, env={"KAFKA_OPTS": ""},
                             overrides=tls_overrides(pki, kind)) for i, kind in enumerate(("PKCS12", "PEM"))]
    admin = other = None
    try:
        for b in brokers:
            b.start(wait=False)
        for b in brokers:
            b.wait_ready(60)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        create_topics(bootstrap, [("over-tls", 2, 2)])
        records = records_for("over-tls", range(2), per_partition=5)
        produce(bootstrap, "over-tls", records)
        assert consume(bootstrap, "over-tls", [0, 1], expected=10) == records

        admin = kazoo_tls(pki, connect, pki.broker)
        wait_until(lambda: sorted(admin.get_children("/brokers/ids")) == ["0", "1"], 30, 0.2, "both registered")
        paths = walk(admin)
        for must in ("/brokers/ids/0", "/brokers/ids/1", "/controller", "/brokers/topics/over-tls",
                     "/brokers/topics/over-tls/partitions/1/state", "/config/users", "/config/topics/over-tls"):
            assert must in paths, must
        wrong = {p: acls_of(admin, p) for p in paths if acls_of(admin, p) != expected_acls(True, p, BROKERS_ID)}
        assert wrong == {}
        # The chroot, seen from the root: the first broker created it with the secure ACL of its path.
        root = kazoo_tls(pki, tls_zk.secure_connect_string, pki.broker)
        try:
            assert acls_of(root, "/tls") == expected_acls(True, "/tls", BROKERS_ID)
        finally:
            root.stop()
            root.close()

        other = kazoo_tls(pki, connect, pki.clients["alice"])   # a valid certificate, not the brokers'
        data, _ = other.get("/brokers/topics/over-tls")
        with pytest.raises(NoAuthError):
            other.set("/brokers/topics/over-tls", data)
        with pytest.raises(NoAuthError):
            other.create("/admin/delete_topics/over-tls", b"")
        with pytest.raises(NoAuthError):
            other.get("/config/users")
    finally:
        for c in (admin, other):
            if c is not None:
                c.stop()
                c.close()
        for b in brokers:
            b.close()


def test_no_client_certificate_is_refused_by_the_ensemble(tls_zk, pki):
    from kazoo.client import KazooClient

    c = KazooClient(hosts=tls_zk.secure_connect_string, timeout=5.0, use_ssl=True, ca=pki.ca, verify_certs=True,
                    connection_retry={"max_tries": 2})
    try:
        with pytest.raises(Exception):   # ssl.clientAuth=need: the handshake fails, no session
            c.start(timeout=8)
        assert not c.connected
    finally:
        c.stop()
        c.close()


def test_untrusted_ensemble_stops_the_broker(tmp_path, tls_zk, pki):
    b = BrokerProcess(tmp_path / "b", broker_id=5, zk=tls_zk.secure_connect_string + "/rogue", env={"KAFKA_OPTS": ""},
                      overrides=tls_overrides(pki, "PKCS12", truststore=pki.rogue_ca))
    try:
        b.start(wait=False)
        wait_until(lambda: b.proc.poll() is not None, 45, 0.2, "the broker to stop")
        log = b.log_text()
    finally:
        b.close()
    assert b.proc.returncode == 1
    assert "could not connect to ZooKeeper at %s/rogue within 8000 ms" % tls_zk.secure_connect_string in log, \
        log[-3000:]
    assert "CERTIFICATE_VERIFY_FAILED" in log


def test_tls_without_the_netty_socket_stops_the_broker(tmp_path, tls_zk, pki):
    overrides = tls_overrides(pki)
    overrides["zookeeper.clientCnxnSocket"] = None
    b = BrokerProcess(tmp_path / "b", broker_id=6, zk=tls_zk.secure_connect_string + "/nonetty",
                      env={"KAFKA_OPTS": ""}, overrides=overrides)
    try:
        b.start(wait=False)
        wait_until(lambda: b.proc.poll() is not None, 45, 0.2, "the broker to stop")
        log = b.log_text()
    finally:
        b.close()
    assert b.proc.returncode == 1
    assert "zookeeper.clientCnxnSocket: must be org.apache.zookeeper.ClientCnxnSocketNetty" in log, log[-3000:]


def test_migration_over_tls_authenticated_by_the_certificate(tmp_path, tls_zk, pki):
    """zookeeper-security-migration --zk-tls-config-file: no JAAS file, the brokers' certificate is the identity the
    secure ACLs name; unsecure opens the tree again."""
    import os
    import subprocess
    import sys
    from kazoo.security import OPEN_ACL_UNSAFE

    from kbroker.coord.zk_security import Acl

    connect = tls_zk.secure_connect_string + "/mig"
    admin = kazoo_tls(pki, tls_zk.secure_connect_string, pki.broker)
    try:
        for path in ("/mig/brokers/topics/t/partitions/0/state", "/mig/config/users/alice", "/mig/consumers"):
            admin.create(path, b"{}", acl=OPEN_ACL_UNSAFE, makepath=True)
    finally:
        admin.stop()
        admin.close()
    props = tmp_path / "zk-tls.properties"
    props.write_text("\n".join("%s=%s" % kv for kv in tls_overrides(pki).items()
                               if kv[0].startswith(("zookeeper.ssl.", "zookeeper.clientCnxnSocket"))) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"}
    env["PYTHONPATH"] = str(harness.REPO_ROOT)

    def migrate(mode):
        return subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "zookeeper-security-migration",
                               "--zookeeper.acl", mode, "--zookeeper.connect", connect, "--zk-tls-config-file",
                               str(props)], capture_output=True, text=True, env=env, timeout=60)

    r = migrate("secure")
    assert r.returncode == 0, r.stderr
    c = kazoo_tls(pki, connect, pki.broker)
    try:
        paths = walk(c)
        assert "/config/users/alice" in paths and "/brokers/topics/t/partitions/0/state" in paths
        assert {p: acls_of(c, p) for p in paths} == {p: expected_acls(True, p, BROKERS_ID) for p in paths}
        r = migrate("unsecure")
        assert r.returncode == 0, r.stderr
        assert {p: acls_of(c, p) for p in walk(c)} == {p: [Acl(31, "world", "anyone")] for p in walk(c)}
    finally:
        c.stop()
        c.close()
