"""ZooKeeper authentication without a ZooKeeper: Kafka's ACL choice per path (coord/zk_security.py), the JAAS Client
section and KAFKA_OPTS system properties (security/zk_client.py), the zookeeper.* security keys, and the
migration tool's refusals. The ensemble-backed half is tests/integration/test_zk_security.py."""
import pytest

from kbroker.config import BrokerConfig, ConfigError
from kbroker.coord.errors import CoordinationError
from kbroker.coord.zk import ZooKeeperBackend
from kbroker.coord.zk_security import (
    ALL, READ, SECURE_ROOT_PATHS, Acl, ZkSaslCredentials, default_acls, expected_acls, sasl_options, sensitive_path)
from kbroker.security.zk_client import ZkClientSecurityError, system_properties, zk_sasl_credentials, zk_tls_context

CREATOR = Acl(ALL, "auth", "")
WORLD_READ = Acl(READ, "world", "anyone")
WORLD_ALL = Acl(ALL, "world", "anyone")


# ---------------------------------------------------------------------------------------------- ACL per path

@pytest.mark.parametrize("path", [
    "/", "/brokers", "/brokers/ids/1", "/brokers/topics/t", "/brokers/topics/t/partitions/0/state", "/controller",
    "/controller_epoch", "/config", "/config/topics/t", "/config/changes/config_change_0000000001", "/cluster/id",
    "/admin/delete_topics/t", "/isr_change_notification/isr_change_0000000000", "/kafka-acl/Topic/t",
    "/latest_producer_id_block", "/consumers/g/offsets/t/0", "/config/clients/c", "/delegation_token"])
def test_secure_paths_are_creator_all_and_world_read(path):
    assert default_acls(True, path) == (CREATOR, WORLD_READ)


@pytest.mark.parametrize("path", [
    "/config/users", "/config/users/alice", "/config/brokers", "/config/brokers/0", "/config/brokers/<default>",
    "/delegation_token/tokens", "/delegation_token/tokens/t1",
    "/config/users2"])  # Kafka's plain startsWith: a prefix match, not a path-component match
def test_sensitive_paths_are_creator_only(path):
    assert sensitive_path(path)
    assert default_acls(True, path) == (CREATOR,)


def test_consumers_root_stays_open_and_everything_is_open_when_not_secure():
    assert default_acls(True, "/consumers") == (WORLD_ALL,)
    for path in ("/", "/brokers/ids/1", "/config/users/alice", "/consumers"):
        assert default_acls(False, path) == (WORLD_ALL,)
    assert not sensitive_path(None) and not sensitive_path("/config/topics/users")


def test_expected_acls_replace_the_auth_scheme_by_the_session_identities():
    assert expected_acls(True, "/brokers/ids/1", [("sasl", "kafka")]) == sorted(
        [Acl(ALL, "sasl", "kafka"), WORLD_READ])
    assert expected_acls(True, "/config/users/a", [("sasl", "kafka")]) == [Acl(ALL, "sasl", "kafka")]
    assert expected_acls(False, "/config/users/a", [("sasl", "kafka")]) == [WORLD_ALL]


def test_secure_root_paths_are_kafkas():
    assert SECURE_ROOT_PATHS == (
        "/admin", "/brokers", "/cluster", "/config", "/controller", "/controller_epoch", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification", "/delegation_token", "/kafka-acl-extended",
        "/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended/prefixed", "/kafka-acl-extended-changes")


def test_credentials_hide_the_password_and_become_kazoo_options():
    c = ZkSaslCredentials("kafka", "s3cret", source="JAAS file f, section Client")
    assert "s3cret" not in repr(c)
    assert sasl_options(c) == {"mechanism": "DIGEST-MD5", "username": "kafka", "password": "s3cret",
                               "service": "zookeeper"}
    assert sasl_options(None) is None


# ---------------------------------------------------------------------------------------------- JAAS, KAFKA_OPTS

CLIENT = """// brokers
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret" user_admin="admin-secret";
};
/* the ZooKeeper login */
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="kafka \\"secret\\"";
};
"""


DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


def test_kafka_login_modules_with_username_and_password_also_log_in(tmp_path):
    # Java's ZooKeeper client logs in with any subject holding a username and password (DIGEST-MD5).
    for module in ("org.apache.kafka.common.security.plain.PlainLoginModule",
                   "org.apache.kafka.common.security.scram.ScramLoginModule"):
        path = _jaas(tmp_path, 'Client { %s required username="u" password="p"; };' % module)
        c = zk_sasl_credentials({"java.security.auth.login.config": path})
        assert (c.username, c.password, c.mechanism) == ("u", "p", "DIGEST-MD5")


def _jaas(tmp_path, text=CLIENT):
    f = tmp_path / "jaas.conf"
    f.write_text(text)
    return str(f)


def test_system_properties_from_kafka_opts():
    props = system_properties('-Xmx1g -Djava.security.auth.login.config="/etc/my jaas.conf" -Dzookeeper.sasl.client'
                              ' -Da=b=c -D')
    assert props == {"java.security.auth.login.config": "/etc/my jaas.conf", "zookeeper.sasl.client": "",
                     "a": "b=c"}
    with pytest.raises(ZkClientSecurityError, match="KAFKA_OPTS"):
        system_properties('-Dx="unclosed')


def test_no_login_config_or_no_client_section_means_no_sasl(tmp_path):
    assert zk_sasl_credentials({}) is None
    path = _jaas(tmp_path, CLIENT[:CLIENT.index("/*")])
    assert zk_sasl_credentials({"java.security.auth.login.config": path}) is None


def test_client_section_gives_digest_credentials(tmp_path):
    path = _jaas(tmp_path)
    c = zk_sasl_credentials({"java.security.auth.login.config": path})
    assert (c.username, c.password, c.mechanism, c.service) == ("kafka", 'kafka "secret"', "DIGEST-MD5", "zookeeper")
    assert c.source == "JAAS file %s, section Client" % path
    # zookeeper.sasl.clientconfig picks another section; zookeeper.sasl.client.username the service name
    path2 = _jaas(tmp_path, CLIENT.replace("Client {", "ZkLogin {"))
    props = {"java.security.auth.login.config": path2, "zookeeper.sasl.clientconfig": "ZkLogin",
             "zookeeper.sasl.client.username": "zk"}
    c = zk_sasl_credentials(props)
    assert (c.username, c.service) == ("kafka", "zk")
    assert zk_sasl_credentials({"java.security.auth.login.config": path2}) is None


def test_kafka_opts_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_OPTS", "-Djava.security.auth.login.config=%s" % _jaas(tmp_path))
    assert zk_sasl_credentials().username == "kafka"
    monkeypatch.delenv("KAFKA_OPTS")
    assert zk_sasl_credentials() is None


@pytest.mark.parametrize("text, extra, match", [
    (CLIENT, {"zookeeper.sasl.client": "false"},
     "JAAS configuration is present, but system property zookeeper.sasl.client is set to false"),
    ('Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };', {},
     "login module com.sun.security.auth.module.Krb5LoginModule: kbroker logs in to ZooKeeper with SASL DIGEST-MD5"
     ".*Kerberos to ZooKeeper is not supported"),
    ('Client { %s required username="k"; };' % DIGEST, {},
     "needs the option\\(s\\) password"),
    (CLIENT, {"zookeeper.client.secure": "true"}, "zookeeper.client.secure=true: kbroker takes ZooKeeper TLS from the"),
    (CLIENT, {"zookeeper.ssl.keyStore.location": "/k"}, "zookeeper.ssl.keyStore.location"),
    (CLIENT, {"zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty"},
     "zookeeper.clientCnxnSocket"),
    ("Client { oops", {}, "JAAS file .*: expected"),
    ('Client { org.example.MyModule required; };', {}, "org.example.MyModule is not supported"),
    ('Client { %s required username="a" password="b"; %s required username="c" password="d"; };'
     % (DIGEST, DIGEST), {}, "2 login modules"),
])
def test_refusals_name_the_problem(tmp_path, text, extra, match):
    props = {"java.security.auth.login.config": _jaas(tmp_path, text), **extra}
    with pytest.raises(ZkClientSecurityError, match=match):
        zk_sasl_credentials(props)


def test_missing_jaas_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(ZkClientSecurityError, match="JAAS file .*nope.conf"):
        zk_sasl_credentials({"java.security.auth.login.config": str(tmp_path / "nope.conf")})


def test_zookeeper_client_secure_false_is_the_default_and_accepted(tmp_path):
    props = {"java.security.auth.login.config": _jaas(tmp_path), "zookeeper.client.secure": "false"}
    assert zk_sasl_credentials(props).username == "kafka"


# ---------------------------------------------------------------------------------------------- config and backend

def test_set_acl_needs_zookeeper_connect():
    with pytest.raises(ConfigError, match="zookeeper.set.acl.*needs zookeeper.connect") as ei:
        BrokerConfig.from_sources(None, ["zookeeper.set.acl=true"])
    assert ei.value.key == "zookeeper.set.acl"
    cfg = BrokerConfig.from_sources(None, ["zookeeper.set.acl=true", "zookeeper.connect=127.0.0.1:1/k"])
    assert cfg["zookeeper.set.acl"] is True


@pytest.mark.parametrize("key", ["zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable"])
def test_zookeeper_tls_revocation_checks_are_refused(key):
    with pytest.raises(ConfigError, match="does not check certificate revocation") as ei:
        BrokerConfig.from_sources(None, ["zookeeper.connect=127.0.0.1:1", "%s=true" % key])
    assert ei.value.key == key


NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from tests.integration.certs import make_pki
    return make_pki(tmp_path_factory.mktemp("pki"), clients=())


def _tls(pki, **extra):
    values = {"zookeeper.ssl.client.enable": True, "zookeeper.clientCnxnSocket": NETTY,
              "zookeeper.ssl.truststore.location": pki.ca}
    values.update(extra)
    return values


def test_zookeeper_tls_off_means_no_context_and_stray_keys_are_refused(pki):
    assert zk_tls_context({}) == (None, False)
    assert zk_tls_context({"zookeeper.ssl.client.enable": False, "zookeeper.ssl.protocol": "TLSv1.2"}) == (None, False)
    for key, value in (("zookeeper.ssl.keystore.location", pki.broker.p12), ("zookeeper.ssl.truststore.type", "PEM"),
                       ("zookeeper.clientCnxnSocket", "org.apache.zookeeper.ClientCnxnSocketNIO")):
        with pytest.raises(ZkClientSecurityError, match="%s: set while zookeeper.ssl.client.enable is false" % key):
            zk_tls_context({key: value})


def test_zookeeper_tls_contexts_from_pkcs12_and_pem_keystores(pki):
    import ssl
    ctx, client_auth = zk_tls_context(_tls(pki, **{
        "zookeeper.ssl.keystore.location": pki.broker.p12, "zookeeper.ssl.keystore.password": pki.broker.password}),
        context_class=ssl.SSLContext)
    assert client_auth and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname   # HTTPS by default
    ctx, client_auth = zk_tls_context(_tls(pki, **{
        "zookeeper.ssl.keystore.location": pki.broker.keystore_pem,
        "zookeeper.ssl.keystore.password": pki.broker.password,
        "zookeeper.ssl.endpoint.identification.algorithm": ""}), context_class=ssl.SSLContext)
    assert client_auth and not ctx.check_hostname
    ctx, client_auth = zk_tls_context(_tls(pki), context_class=ssl.SSLContext)
    assert ctx is not None and not client_auth   # server verified, no client certificate: no x509 identity


@pytest.mark.parametrize("extra, match", [
    ({"zookeeper.clientCnxnSocket": None}, "zookeeper.clientCnxnSocket: must be org.apache.zookeeper"),
    ({"zookeeper.ssl.keystore.location": "/x/store.bin"}, "zookeeper.ssl.keystore.type: unset, and the file name"),
    ({"zookeeper.ssl.keystore.location": "/x/store.jks"}, "zookeeper.ssl.keystore.type: .*keytool -importkeystore"),
    ({"zookeeper.ssl.keystore.type": "PKCS12", "zookeeper.ssl.keystore.location": "/nonexistent.p12",
      "zookeeper.ssl.keystore.password": "x"}, "zookeeper.ssl.keystore.location"),
    ({"zookeeper.ssl.keystore.location": "/x/s.p12"}, "zookeeper.ssl.keystore.password: .* password is not"),
    ({"zookeeper.ssl.protocol": "SSLv3"}, "zookeeper.ssl.protocol"),
])
def test_zookeeper_tls_refusals_name_the_zookeeper_key(pki, extra, match):
    with pytest.raises(ZkClientSecurityError, match=match):
        zk_tls_context(_tls(pki, **extra))


def test_secure_acls_with_tls_client_auth_need_no_sasl():
    import ssl
    b = ZooKeeperBackend("127.0.0.1:1/kafka", 4000, 1000, secure_acls=True, ssl_context=ssl.create_default_context(),
                         tls_client_auth=False)
    with pytest.raises(CoordinationError, match="zookeeper.set.acl is true"):
        b.start()   # a server-verified TLS session without a client certificate authenticates nobody


def test_make_backend_passes_set_acl(tmp_path):
    from kbroker.coord import make_backend
    cfg = BrokerConfig.from_sources(None, ["zookeeper.set.acl=true", "zookeeper.connect=127.0.0.1:1/k",
                                           "log.dirs=%s" % tmp_path])
    b = make_backend(cfg)
    assert b.secure_acls is True and b.sasl is None


def test_secure_acls_without_sasl_stop_the_backend_before_connecting():
    # Port 1: nothing listens; the refusal must come first, naming Kafka's reason, without any wait.
    b = ZooKeeperBackend("127.0.0.1:1/kafka", 4000, 60000, secure_acls=True)
    with pytest.raises(CoordinationError, match="zookeeper.set.acl is true, but .* the verification of the JAAS login "
                                                "file failed"):
        b.start()


# ---------------------------------------------------------------------------------------------- migration tool

def test_migration_tool_refusals(tmp_path, monkeypatch, capsys):
    from kbroker.cli.admin import main
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    assert main(["zookeeper-security-migration", "--zookeeper.connect", "127.0.0.1:1"]) == 1
    assert "--zookeeper.acl must be 'secure' or 'unsecure'" in capsys.readouterr().err
    assert main(["zookeeper-security-migration", "--zookeeper.acl=open", "--zookeeper.connect=127.0.0.1:1"]) == 1
    assert "not 'open'" in capsys.readouterr().err
    assert main(["zookeeper-security-migration", "--zookeeper.acl", "secure", "--zookeeper.connect",
                 "127.0.0.1:1"]) == 1
    assert "No JAAS configuration file has been specified" in capsys.readouterr().err
    path = _jaas(tmp_path, CLIENT[:CLIENT.index("/*")])
    monkeypatch.setenv("KAFKA_OPTS", "-Djava.security.auth.login.config=" + path)
    assert main(["zookeeper-security-migration", "--zookeeper.acl", "unsecure", "--zookeeper.connect",
                 "127.0.0.1:1"]) == 1
    assert "Security isn't enabled, most likely the file isn't set properly: " + path in capsys.readouterr().err
    missing = str(tmp_path / "nope.properties")
    assert main(["zookeeper-security-migration", "--zookeeper.acl", "secure", "--zk-tls-config-file", missing]) == 1
    assert "ERROR: --zk-tls-config-file %s: No such file" % missing in capsys.readouterr().err
    tls_file = tmp_path / "zk-tls.properties"
    tls_file.write_text("zookeeper.ssl.client.enable=true\nzookeeper.ssl.crl.enable=true\n")
    assert main(["zookeeper-security-migration", "--zookeeper.acl", "secure", "--zk-tls-config-file",
                 str(tls_file)]) == 1
    assert "zookeeper.ssl.crl.enable" in capsys.readouterr().err
    tls_file.write_text("zookeeper.ssl.client.enable=true\nlisteners=ignored\n")
    assert main(["zookeeper-security-migration", "--zookeeper.acl", "secure", "--zk-tls-config-file",
                 str(tls_file)]) == 1
    assert "zookeeper.clientCnxnSocket: must be org.apache.zookeeper.ClientCnxnSocketNetty" in capsys.readouterr().err
