"""``kbroker-server --check-config`` reports (kbroker/cli/check_config.py), exact.

Three files: the shipped config/server.properties; a real Kafka 0.10.1 server.properties setting every broker key
to the default its documentation gives (tests/data/kafka-0.10.1-defaults.properties, written by
scripts/kafka_0101_defaults.py from the 0.10.1 docs' kafka_config.html); and broken files (bad values, a refused
key, an unknown key, a cross-key error). The lines of every key that was set are compared whole; the defaulted
ones are checked against the key table (one line per key not set, with its default), so a key added to the table
tomorrow does not make these tests stale.
"""
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbroker.cli import check_config
from kbroker.config.keys import CONFIG_KEYS
from kbroker.config.values import format_value

REPO = Path(__file__).resolve().parents[2]
KAFKA_0101_DEFAULTS = REPO / "tests" / "data" / "kafka-0.10.1-defaults.properties"


def report(path, overrides=()):
    out = io.StringIO()
    code = check_config.run(str(path), overrides, out)
    return code, out.getvalue().splitlines()


def split(lines):
    """(lines of set keys, {defaulted key: shown value}, summary line)."""
    assert lines[-1].startswith("summary: ")
    set_lines = [l for l in lines[:-1] if not l.startswith("defaulted ")]
    defaulted = {}
    for l in lines[:-1]:
        if l.startswith("defaulted "):
            name, _, value = l[len("defaulted  "):].partition("=")
            defaulted[name] = value
    return set_lines, defaulted, lines[-1]


def check_defaulted(defaulted, set_keys):
    """Every table key not set is reported defaulted with its default, once."""
    assert set(defaulted) == set(CONFIG_KEYS) - set(set_keys)
    for name, shown in defaulted.items():
        d = CONFIG_KEYS[name].default
        want = "null" if d is None else format_value(d)
        assert shown == want, (name, shown, want)


def summary(errors, unknown, ignored, used, set_known):
    defaulted = len(CONFIG_KEYS) - set_known
    return "summary: errors=%d unknown=%d ignored=%d used=%d defaulted=%d" % (errors, unknown, ignored, used,
                                                                              defaulted)


def test_shipped_server_properties():
    code, lines = report(REPO / "config" / "server.properties")
    set_lines, defaulted, last = split(lines)
    assert set_lines == [
        "used       broker.id=0  (file)",
        "used       group.initial.rebalance.delay.ms=0  (file)",
        "used       listeners=PLAINTEXT://127.0.0.1:9092  (file)",
        "used       log.dirs=/tmp/kbroker-logs  (file)",
        "used       log.retention.check.interval.ms=300000  (file)",
        "used       log.retention.hours=168  (file)",
        "used       log.segment.bytes=1073741824  (file)",
        "used       metrics.http.port=9404  (file)",
        "used       num.partitions=1  (file)",
        "used       offsets.topic.replication.factor=1  (file)",
        "used       socket.request.max.bytes=104857600  (file)",
        "used       zookeeper.connect=  (file)",
        "used       zookeeper.connection.timeout.ms=18000  (file)",
    ]
    check_defaulted(defaulted, [l.split()[1].split("=")[0] for l in set_lines])
    assert last == summary(0, 0, 0, 13, 13)
    assert code == 0


_THREADS = ("no effect: kbroker serves every connection in a greenlet of one event loop; it has no %s thread pool "
            "to size")
_PURGATORY = ("no effect: kbroker has no purgatory to purge: a parked Fetch or acks=all Produce waits on its partition "
              "and is woken by the append or high-watermark advance that completes it")
_KRB = ("no effect: kbroker has no Java Kerberos login thread to tune: a GSSAPI listener accepts tickets with its "
        "keytab and needs no ticket of its own, and MIT Kerberos fetches fresh client tickets from the keytab itself")
_NO_TLS = "no effect: no listener uses TLS (listener.security.protocol.map maps none to SSL or SASL_SSL)"


def test_kafka_0101_server_properties_with_every_documented_default():
    """Kafka 0.10.1's documentation defaults, every key: the file passes (exit 0). 21 keys do nothing here and are
    reported ignored with the reason -- thread pools, purgatory, Kerberos login thread, format versions, and the
    ssl.* settings, as no listener uses TLS (found when the whole configuration is built) -- the rest are used,
    principal.builder.class included: it names Kafka's own default class, which kbroker behaves as
    (keys.DEFAULT_EQUIVALENTS; it was refused until this test showed it)."""
    code, lines = report(KAFKA_0101_DEFAULTS)
    set_lines, defaulted, last = split(lines)
    errors = [l for l in set_lines if l.startswith("error ")]
    ignored = [l for l in set_lines if l.startswith("ignored ")]
    used = [l for l in set_lines if l.startswith("used ")]
    assert errors == []
    assert [l for l in set_lines if l.startswith("unknown ")] == []
    assert ignored == [
        "ignored    background.threads=10  (file) " + _THREADS % "background",
        "ignored    fetch.purgatory.purge.interval.requests=1000  (file) " + _PURGATORY,
        "ignored    inter.broker.protocol.version=0.10.1-IV2  (file) no effect: a kbroker cluster runs one broker "
        "version; there is no rolling-upgrade protocol switch",
        "ignored    log.cleaner.io.buffer.size=524288  (file) no effect: the cleaner reads and writes one batch at a "
        "time (bounded by max.message.bytes); it has no I/O buffer to size",
        "ignored    log.message.format.version=0.10.1-IV2  (file) no effect: kbroker stores record batches v2 and "
        "down-converts per Fetch version, as Kafka >= 3.0 does (which ignores this key too)",
        "ignored    num.io.threads=8  (file) " + _THREADS % "request handler",
        "ignored    num.network.threads=3  (file) " + _THREADS % "network",
        "ignored    num.replica.fetchers=1  (file) no effect: a follower fetches from each leader broker in one "
        "greenlet; the value is a parallelism knob only",
        "ignored    producer.purgatory.purge.interval.requests=1000  (file) " + _PURGATORY,
        "ignored    queued.max.requests=500  (file) no effect: there is no shared request queue: a connection reads "
        "its next request after answering the last (TCP backpressure), and queued.max.request.bytes bounds request "
        "memory",
        "ignored    sasl.kerberos.kinit.cmd=/usr/bin/kinit  (file) " + _KRB,
        "ignored    sasl.kerberos.min.time.before.relogin=60000  (file) " + _KRB,
        "ignored    sasl.kerberos.ticket.renew.jitter=0.05  (file) " + _KRB,
        "ignored    sasl.kerberos.ticket.renew.window.factor=0.8  (file) " + _KRB,
        "ignored    ssl.client.auth=none  (file) " + _NO_TLS,
        "ignored    ssl.enabled.protocols=TLSv1.2,TLSv1.1,TLSv1  (file) " + _NO_TLS,
        "ignored    ssl.keystore.type=JKS  (file) " + _NO_TLS,
        "ignored    ssl.protocol=TLS  (file) " + _NO_TLS,
        "ignored    ssl.truststore.type=JKS  (file) " + _NO_TLS,
        "ignored    zookeeper.sync.time.ms=2000  (file) no effect: it tunes ZooKeeper followers, not a ZooKeeper "
        "client",
    ]
    # Every other key of the file is used, with the file's value in Kafka's string form.
    from kbroker.config.files import load_file
    props = load_file(str(KAFKA_0101_DEFAULTS))
    assert len(props) == 115
    named = {l.split()[1].split("=", 1)[0] for l in ignored}
    assert {l.split()[1].split("=", 1)[0] for l in used} == set(props) - named
    assert "used       unclean.leader.election.enable=true  (file)" in used      # 0.10.1's default, not ours
    assert "used       delete.topic.enable=false  (file)" in used
    assert "used       message.max.bytes=1000012  (file)" in used
    assert "used       log.cleanup.policy=delete  (file)" in used               # the list [delete]
    assert ("used       principal.builder.class=org.apache.kafka.common.security.auth.DefaultPrincipalBuilder  "
            "(file)") in used
    assert "used       zookeeper.connect=localhost:2181  (file)" in used
    check_defaulted(defaulted, props)
    assert last == summary(0, 0, 20, 95, 115)
    assert code == 0


def test_broken_file_lists_every_bad_key(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=one\nlog.segment.bytes=12\nnum.partitions=0\nprincipal.builder.class=org.example.B\n"
                    "num.io.threads=8\nno.such.key=1\nssl.keystore.password=secret\n"
                    "listeners=PLAINTEXT://127.0.0.1:9092\n")
    code, lines = report(path)
    set_lines, defaulted, last = split(lines)
    assert set_lines == [
        "error      broker.id=one  (file) Invalid value 'one' for configuration broker.id: not a number of type int",
        "error      log.segment.bytes=12  (file) Invalid value '12' for configuration log.segment.bytes: must be "
        "[14,...]",
        "error      num.partitions=0  (file) Invalid value '0' for configuration num.partitions: must be [1,...]",
        "error      principal.builder.class=org.example.B  (file) only the default (unset) is accepted: kbroker "
        "builds principals as Kafka's DefaultKafkaPrincipalBuilder does (ssl.principal.mapping.rules, "
        "sasl.kerberos.principal.to.local.rules): a Java principal builder class cannot be loaded",
        "unknown    no.such.key=1  (file)",
        "ignored    num.io.threads=8  (file) " + _THREADS % "request handler",
        "used       listeners=PLAINTEXT://127.0.0.1:9092  (file)",
        "used       ssl.keystore.password=[hidden]  (file)",
    ]
    check_defaulted(defaulted, ["broker.id", "log.segment.bytes", "num.partitions", "principal.builder.class",
                                "num.io.threads", "ssl.keystore.password", "listeners"])
    assert last == summary(4, 1, 1, 2, 7)
    assert code == 1


@pytest.mark.parametrize("value, accepted", [
    ("org.apache.kafka.common.security.auth.DefaultPrincipalBuilder", True),
    ("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", True),
    ("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilderX", False),
])
def test_kafkas_default_principal_builders_are_the_default(value, accepted):
    from kbroker.config import BrokerConfig, ConfigError
    if accepted:
        assert BrokerConfig.from_dict({"principal.builder.class": value})["principal.builder.class"] == value
    else:
        with pytest.raises(ConfigError, match="principal.builder.class"):
            BrokerConfig.from_dict({"principal.builder.class": value})


def test_cross_key_error_is_reported_on_the_key_it_names(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("listeners=PLAINTEXT://127.0.0.1:9092\nadvertised.listeners=SSL://h:9093\n")
    code, lines = report(path, ["broker.id=3"])
    set_lines, _defaulted, last = split(lines)
    assert set_lines == [
        "error      advertised.listeners=SSL://h:9093  (file) Invalid value 'SSL://h:9093' for configuration "
        "advertised.listeners: listener name SSL is not one of listeners (PLAINTEXT)",
        "used       broker.id=3  (override)",
        "used       listeners=PLAINTEXT://127.0.0.1:9092  (file)",
    ]
    assert last == summary(1, 0, 0, 2, 3)
    assert code == 1


def test_missing_file():
    code, lines = report("/nonexistent/server.properties")
    assert lines == ["error      Config file /nonexistent/server.properties does not exist",
                     "summary: errors=1 unknown=0 ignored=0 used=0 defaulted=0"]
    assert code == 1


def test_generated_kafka_file_is_current():
    """tests/data/kafka-0.10.1-defaults.properties is what the script makes of the reference docs."""
    html = Path("/work/shared/reference/kafka-0.10.1-docs/generated/kafka_config.html")
    if not html.exists():
        pytest.skip("the Kafka 0.10.1 reference docs are not on this machine")
    import importlib.util
    spec = importlib.util.spec_from_file_location("kafka_0101_defaults", REPO / "scripts" / "kafka_0101_defaults.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert KAFKA_0101_DEFAULTS.read_text() == mod.properties(html.read_text())


@pytest.mark.parametrize("name, code", [("broken", 1), ("shipped", 0)])
def test_command_exit_code_and_no_side_effects(tmp_path, name, code):
    """The real command: exit code, the report on stdout, nothing started or written (no log dir, no LOG_DIR)."""
    if name == "broken":
        path = tmp_path / "server.properties"
        path.write_text("num.partitions=0\nlog.dirs=%s\n" % (tmp_path / "data"))
    else:
        path = REPO / "config" / "server.properties"
    env = dict(os.environ, LOG_DIR=str(tmp_path / "server-logs"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.server", str(path), "--check-config"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("summary: errors=%d " % code)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["server.properties"] if name == "broken" else [])
