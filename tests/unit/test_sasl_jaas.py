"""JAAS files and sasl.jaas.config values (kbroker/security/jaas.py): syntax, Kafka's precedence, refusals."""
import pytest

from kbroker.security import jaas
from kbroker.security.jaas import JaasError, PLAIN_MODULE, SCRAM_MODULE, KRB5_MODULE

FILE = r'''
// the brokers
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"   /* the broker's own */
    user_admin="admin-secret"
    user_alice="al\"ice";
    org.apache.kafka.common.security.scram.ScramLoginModule required username=admin password="s;c{r}am";
};
sasl_ssl.KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";
};
Client {
    com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true
    keyTab="/etc/kafka/zk.keytab" principal="kafka/host@EXAMPLE.COM";
};
'''


def test_parse_file_sections_options_and_escapes():
    cfg = jaas.parse(FILE, "test")
    server = cfg.section("KafkaServer")
    assert [e.class_name for e in server] == [PLAIN_MODULE, SCRAM_MODULE]
    assert server[0].options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                                 "user_alice": 'al"ice'}
    assert server[1].options == {"username": "admin", "password": "s;c{r}am"}
    assert server[0].flag == "required"
    client = cfg.section("Client")
    assert client[0].class_name == KRB5_MODULE and client[0].options["useKeyTab"] == "true"
    assert cfg.section("Nope") is None
    assert "admin-secret" not in repr(server[0])


def test_load_from_file_and_client_section(tmp_path):
    p = tmp_path / "kafka_server_jaas.conf"
    p.write_text(FILE)
    assert jaas.load(str(p)).section("Client")[0].options["principal"] == "kafka/host@EXAMPLE.COM"
    with pytest.raises(JaasError, match="missing.conf"):
        jaas.load(str(tmp_path / "missing.conf"))


@pytest.mark.parametrize("text,match", [
    ("KafkaServer { org.example.MyLoginModule required; };", "org.example.MyLoginModule is not supported"),
    ("KafkaServer { %s mandatory; };" % PLAIN_MODULE, "control flag 'mandatory'"),
    ("KafkaServer { %s required user_a=\"x\" };" % PLAIN_MODULE, "expected"),
    ("KafkaServer { %s required user_a=; };" % PLAIN_MODULE, "has no value"),
    ('KafkaServer { %s required user_a="x; };' % PLAIN_MODULE, "cannot parse"),
    ("KafkaServer { %s required; }" % PLAIN_MODULE, "';' after section"),
    ("KafkaServer { }; KafkaServer { };", "appears twice"),
    ("/* unterminated", "cannot parse"),
])
def test_malformed_files_name_their_source(text, match):
    with pytest.raises(JaasError, match=match) as e:
        jaas.parse(text, "JAAS file /etc/x.conf")
    assert "/etc/x.conf" in str(e.value)


def test_sasl_jaas_config_value_holds_exactly_one_module():
    e = jaas.parse_entry('%s required username="a" password="b";' % SCRAM_MODULE, "k")
    assert e.options == {"username": "a", "password": "b"} and e.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    for bad in ("", "%s required; %s required;" % (PLAIN_MODULE, PLAIN_MODULE)):
        with pytest.raises(JaasError, match="exactly one login module") as err:
            jaas.parse_entry(bad, "listener.name.sasl_plaintext.plain.sasl.jaas.config")
        assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in str(err.value)


def test_path_from_kafka_opts_and_broker_key():
    env = {"KAFKA_OPTS": '-Xmx1g -Djava.security.auth.login.config=/a.conf "-Dfoo=bar baz"'}
    assert jaas.path_from_env(env) == "/a.conf"
    assert jaas.path_from_env({}) is None
    assert jaas.resolve_path(None, env) == "/a.conf"
    assert jaas.resolve_path("/b.conf", env) == "/b.conf"


def test_server_entry_precedence():
    cfg = jaas.parse(FILE, "f")
    key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    value = '%s required user_carol="c";' % PLAIN_MODULE
    # 1. the listener+mechanism key
    assert jaas.server_entry("SASL_PLAINTEXT", "PLAIN", {key: value}, cfg).options == {"user_carol": "c"}
    # 2. the <listener>.KafkaServer section
    assert jaas.server_entry("SASL_SSL", "PLAIN", {}, cfg).options == {"user_bob": "bob-secret"}
    # 3. KafkaServer
    assert jaas.server_entry("SASL_PLAINTEXT", "PLAIN", {}, cfg).options["user_admin"] == "admin-secret"
    assert jaas.server_entry("SASL_PLAINTEXT", "SCRAM-SHA-512", {}, cfg).class_name == SCRAM_MODULE
    # the listener's own section has no SCRAM module: an error, not a silent fall back to KafkaServer (Kafka's)
    with pytest.raises(JaasError, match="sasl_ssl.KafkaServer has no login module for SCRAM-SHA-256"):
        jaas.server_entry("SASL_SSL", "SCRAM-SHA-256", {}, cfg)
    with pytest.raises(JaasError, match="no JAAS configuration for PLAIN on listener SASL_PLAINTEXT"):
        jaas.server_entry("SASL_PLAINTEXT", "PLAIN", {}, None)
    with pytest.raises(JaasError, match="does not serve PLAIN"):
        jaas.server_entry("SASL_PLAINTEXT", "PLAIN", {key: '%s required;' % SCRAM_MODULE}, cfg)
