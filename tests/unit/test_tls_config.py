"""TLS in the broker config (kbroker/config/listener_ssl.py + BrokerConfig): listener-prefixed ssl.* keys resolved
as Kafka resolves them, checked as strictly as plain ones, and every TLS problem stopping startup with a
ConfigError naming the key (the prefixed one when that is the one in force), secrets never printed."""
import logging

import pytest

from kbroker.config import BrokerConfig, ConfigError
from kbroker.config import listener_ssl
from tests.integration.certs import make_pki

TWO = {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", "log.dirs": "/tmp/kbroker-unused"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def refused(props, key, *words):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_dict(props)
    assert e.value.key == key, str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


def test_ssl_listener_starts_with_each_keystore_kind(pki):
    for kind in ("PEM", "PKCS12", "PEM_INLINE"):
        cfg = BrokerConfig.from_dict({**TWO, **pki.broker_ssl(kind)})
        assert listener_ssl.tls_listeners(cfg) == ["SSL"]
        assert cfg.no_effect == []


def test_prefixed_keys_override_plain_ones_for_their_listener_only(pki):
    props = {**TWO, "listeners": TWO["listeners"] + ",INTERNAL://127.0.0.1:9094",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
             **pki.broker_ssl("PEM"), **pki.broker_ssl("PKCS12", prefix="listener.name.internal."),
             "listener.name.internal.ssl.client.auth": "required"}
    cfg = BrokerConfig.from_dict(props)
    internal, ssl_ = listener_ssl.settings(cfg, "INTERNAL"), listener_ssl.settings(cfg, "SSL")
    assert internal["ssl.keystore.type"] == "PKCS12" and internal["ssl.client.auth"] == "required"
    assert internal["ssl.keystore.password"] == pki.broker.password   # a plain string for security/tls.py
    assert ssl_["ssl.keystore.type"] == "PEM" and ssl_["ssl.client.auth"] == "none"
    assert ssl_["ssl.endpoint.identification.algorithm"] == "https"
    rows = {name: shown for name, shown, _ in cfg.describe()}
    assert rows["listener.name.internal.ssl.keystore.password"] == "[hidden]"
    assert rows["listener.name.internal.ssl.client.auth"] == "required"


def test_prefixed_errors_name_the_prefixed_key(pki):
    props = {**TWO, **pki.broker_ssl("PKCS12", prefix="listener.name.ssl.")}
    msg = refused({**props, "listener.name.ssl.ssl.keystore.password": "s3cret"},
                  "listener.name.ssl.ssl.keystore.password", "wrong password", "listener SSL")
    assert "s3cret" not in msg and "[hidden]" in msg
    # the plain key is named when it is the one in force
    refused({**TWO, **pki.broker_ssl("PEM"), "ssl.key.password": "s3cret"}, "ssl.key.password", "wrong password")


def test_prefix_must_name_a_listener_in_lower_case(pki):
    base = {**TWO, **pki.broker_ssl("PEM")}
    refused({**base, "listener.name.SSL.ssl.client.auth": "required"}, "listener.name.SSL.ssl.client.auth",
            "lower case")
    refused({**base, "listener.name.other.ssl.client.auth": "required"}, "listener.name.other.ssl.client.auth",
            "no listener is named 'other'")


def test_prefixed_keys_are_checked_like_plain_ones(pki):
    base = {**TWO, **pki.broker_ssl("PEM")}
    refused({**base, "listener.name.ssl.ssl.bogus": "x"}, "listener.name.ssl.ssl.bogus", "ssl.bogus")
    refused({**base, "listener.name.ssl.ssl.client.auth": "sometimes"}, "listener.name.ssl.ssl.client.auth")
    refused({**base, "listener.name.ssl.ssl.provider": "SunJSSE"}, "listener.name.ssl.ssl.provider", "OpenSSL")


def test_prefixed_key_for_a_plaintext_listener_is_warned(pki, caplog):
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        cfg = BrokerConfig.from_dict({**TWO, **pki.broker_ssl("PEM"),
                                      "listener.name.plaintext.ssl.client.auth": "required"})
    assert [k for k, _ in cfg.no_effect] == ["listener.name.plaintext.ssl.client.auth"]
    assert "PLAINTEXT, which uses no TLS" in caplog.text


def test_ssl_keys_without_a_tls_listener_are_warned(pki):
    cfg = BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:9092", **pki.broker_ssl("PEM")})
    assert sorted(k for k, _ in cfg.no_effect) == sorted(pki.broker_ssl("PEM"))
    assert all("no listener uses TLS" in why for _, why in cfg.no_effect)


def test_tls_refusals_name_their_key(pki):
    pem = pki.broker_ssl("PEM")
    refused({**TWO}, "ssl.keystore.location", "needs a keystore")
    refused({**TWO, **pem, "ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location",
            "/nonexistent.pem")
    refused({**TWO, "ssl.keystore.location": pki.jks(), "ssl.keystore.password": "x"}, "ssl.keystore.type",
            "keytool -importkeystore -srckeystore %s" % pki.jks(), "-deststoretype PKCS12")
    refused({**TWO, **pem, "ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols", "TLSv1.1")
    refused({**TWO, **pem, "ssl.cipher.suites": "TLS_NOPE"}, "ssl.cipher.suites", "TLS_NOPE")
    refused({**TWO, **pem, "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=x.*$/$1"},
            "ssl.principal.mapping.rules", "Invalid rule")
    refused({**TWO, **pem, "ssl.endpoint.identification.algorithm": "ldaps"},
            "ssl.endpoint.identification.algorithm")
    for key in ("ssl.provider", "ssl.secure.random.implementation", "ssl.engine.factory.class"):
        refused({**TWO, **pem, key: "x.Y"}, key, "OpenSSL")
    refused({**TWO, **pem, "ssl.keymanager.algorithm": "PKIX"}, "ssl.keymanager.algorithm", "OpenSSL")
    refused({**TWO, **pem, "ssl.trustmanager.algorithm": "SunX509"}, "ssl.trustmanager.algorithm", "OpenSSL")


def test_inter_broker_listener_selection(pki):
    pem = pki.broker_ssl("PEM")
    cfg = BrokerConfig.from_dict({**TWO, **pem, "security.inter.broker.protocol": "SSL"})
    assert cfg.inter_broker_listener == "SSL"
    cfg = BrokerConfig.from_dict({**TWO, **pem, "inter.broker.listener.name": "ssl"})
    assert cfg.inter_broker_listener == "SSL"
    refused({**TWO, **pem, "inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
            "security.inter.broker.protocol", "set only one")
    refused({"listeners": "PLAINTEXT://127.0.0.1:9092", "security.inter.broker.protocol": "SSL"},
            "security.inter.broker.protocol", "no listener has security protocol SSL")


def test_sasl_ssl_client_auth_only_listener_prefixed():
    """KIP-684: on a SASL_SSL listener the unprefixed ssl.client.auth does not apply (a stand-in config: which
    SASL_SSL listeners start is the SASL part's business)."""
    class Cfg(dict):
        listener_ssl_values = {}
        listener_security_protocol_map = {"SASL_SSL": "SASL_SSL", "SSL": "SSL"}

    cfg = Cfg({k: None for k in listener_ssl.SSL_KEYS})
    cfg["ssl.client.auth"] = "required"
    assert listener_ssl.settings(cfg, "SSL")["ssl.client.auth"] == "required"
    assert listener_ssl.settings(cfg, "SASL_SSL")["ssl.client.auth"] == "none"
    cfg.listener_ssl_values = {"listener.name.sasl_ssl.ssl.client.auth": "requested"}
    assert listener_ssl.settings(cfg, "SASL_SSL")["ssl.client.auth"] == "requested"
