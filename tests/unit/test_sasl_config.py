"""The SASL broker keys (config/listener_sasl.py, config/keys.py): what is accepted, and every refusal naming its
key -- a SASL listener is never served without mechanisms and JAAS entries kbroker can honour."""
import pytest

from kbroker.config.broker import BrokerConfig
from kbroker.config.keys import CONFIG_KEYS, REFUSED_UNLESS_DEFAULT, effect_of
from kbroker.config.listener_sasl import listener_settings
from kbroker.config.values import ConfigError

PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";'
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
BASE = {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM}


@pytest.fixture(autouse=True)
def no_kafka_opts(monkeypatch):
    monkeypatch.delenv("KAFKA_OPTS", raising=False)


def test_listener_prefixed_keys_accepted_and_read(caplog):
    cfg = BrokerConfig.from_dict(BASE)
    mechanisms, jaas_values = listener_settings(cfg, "SASL_PLAINTEXT")
    assert mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert set(jaas_values) == {"listener.name.sasl_plaintext.plain.sasl.jaas.config",
                                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"}
    assert "isn't a known config" not in caplog.text
    cfg = BrokerConfig.from_dict({**BASE, "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN"})
    assert listener_settings(cfg, "SASL_PLAINTEXT")[0] == ["PLAIN"]


def test_jaas_file_from_kafka_opts(tmp_path, monkeypatch):
    f = tmp_path / "jaas.conf"
    f.write_text("KafkaServer { %s %s };" % (PLAIN, SCRAM))
    monkeypatch.setenv("KAFKA_OPTS", "-Xmx1G -Djava.security.auth.login.config=%s" % f)
    props = {k: v for k, v in BASE.items() if "jaas" not in k}
    BrokerConfig.from_dict(props)
    f.write_text("KafkaServer { org.example.Nope required; };")
    with pytest.raises(ConfigError, match="org.example.Nope is not supported") as e:
        BrokerConfig.from_dict(props)
    assert str(f) in str(e.value)


@pytest.mark.parametrize("extra, key, match", [
    ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"}, "sasl.enabled.mechanisms", "OAUTHBEARER is not a SASL"),
    ({"sasl.enabled.mechanisms": ""}, "sasl.enabled.mechanisms", "enables no mechanism"),
    ({"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256"},
     "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "no JAAS configuration for SCRAM-SHA-256"),
    ({"listener.name.SASL_PLAINTEXT.plain.sasl.jaas.config": PLAIN},
     "listener.name.SASL_PLAINTEXT.plain.sasl.jaas.config", "names no SASL listener"),
    ({"listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN"}, "listener.name.plaintext.sasl.enabled.mechanisms",
     "names no SASL listener"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": PLAIN},
     "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", "not a SASL mechanism kbroker serves"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required;"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config", "login module x is not supported"),
    ({"sasl.server.callback.handler.class": "com.example.Handler"}, "sasl.server.callback.handler.class",
     "built-in callbacks only"),
    ({"connections.max.reauth.ms": "60000"}, "connections.max.reauth.ms", "KIP-368"),
    ({"sasl.login.class": "com.example.Login"}, "sasl.login.class", "built-in mechanisms only"),
    ({"sasl.client.callback.handler.class": "com.example.H"}, "sasl.client.callback.handler.class", "built-in"),
    ({"listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": "com.example.H"},
     "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class", "applies only"),
    ({"listener.name.sasl_plaintext.sasl.login.class": "com.example.L"},
     "listener.name.sasl_plaintext.sasl.login.class", "applies only"),
])
def test_refusals_name_the_key(extra, key, match):
    with pytest.raises(ConfigError, match=match) as e:
        BrokerConfig.from_dict({**BASE, **extra})
    assert e.value.key == key


def test_refused_keys_classified():
    for name in ("sasl.server.callback.handler.class", "connections.max.reauth.ms", "sasl.login.class",
                 "sasl.login.callback.handler.class", "sasl.client.callback.handler.class"):
        assert effect_of(CONFIG_KEYS[name])[0] == REFUSED_UNLESS_DEFAULT
    for name in ("sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.server.max.receive.size",
                 "connection.failed.authentication.delay.ms"):
        assert effect_of(CONFIG_KEYS[name])[0] == "applied"


def test_sasl_ssl_listener_needs_both_keystore_and_jaas():
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_dict({"listeners": "SASL_SSL://127.0.0.1:9094", "sasl.enabled.mechanisms": "PLAIN"})
    assert e.value.key == "ssl.keystore.location"


def test_check_config_lists_listener_sasl_keys_with_jaas_hidden():
    rows = {name: (shown, source) for name, shown, source in BrokerConfig.from_dict(BASE).describe()}
    assert rows["listener.name.sasl_plaintext.plain.sasl.jaas.config"] == ("[hidden]", "override")
    assert rows["sasl.enabled.mechanisms"] == ("PLAIN,SCRAM-SHA-512", "override")
