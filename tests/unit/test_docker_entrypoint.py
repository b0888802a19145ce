"""docker/entrypoint.py: the KAFKA_* -> key mapping (cp-kafka's rules, exact), the checks around it, the properties it
writes (read back by kbroker's own parser), the healthcheck's answers; docker/lock_subset.py's runtime set.

No Docker engine is needed: the entrypoint and the lock filter are plain modules, loaded from their files.
"""
import importlib.util
import os
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from kbroker.config.files import parse_properties

REPO = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location("docker_" + name, REPO / "docker" / (name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ep = _load("entrypoint")
lock_subset = _load("lock_subset")


# ----------------------------------------------------------------------------------------------------- mapping

@pytest.mark.parametrize("var,key", [
    ("KAFKA_BROKER_ID", "broker.id"),
    ("KAFKA_ZOOKEEPER_CONNECT", "zookeeper.connect"),
    ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
    ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "offsets.topic.replication.factor"),
    ("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
    # confluent-docker-utils' own test cases (test_env_to_props)
    ("KAFKA_FOO", "foo"),
    ("KAFKA_FOO_BAR", "foo.bar"),
    ("KAFKA_WITH__UNDERSCORE", "with_underscore"),
    ("KAFKA_WITH__UNDERSCORE_AND_MORE", "with_underscore.and.more"),
    ("KAFKA_WITH___DASH", "with-dash"),
    ("KAFKA_WITH___DASH_AND_MORE", "with-dash.and.more"),
    # a listener-prefixed key whose listener name has an underscore
    ("KAFKA_LISTENER_NAME_SASL__PLAINTEXT_PLAIN_SASL_JAAS_CONFIG",
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    # runs dub's regular expression leaves alone: four underscores are "___" then "_"; edges are not split
    ("KAFKA_A____B", "a-_b"),
    ("KAFKA__LEAD", "_lead"),
    ("KAFKA_TRAIL_", "trail_"),
])
def test_env_to_key_follows_cp_kafka(var, key):
    assert ep.env_to_key(var) == key


def test_build_config_maps_a_cp_kafka_environment_exactly():
    env = {
        "KAFKA_BROKER_ID": "2",
        "KAFKA_ZOOKEEPER_CONNECT": "zk1:2181,zk2:2181/kafka",
        "KAFKA_ADVERTISED_LISTENERS": "INTERNAL://kafka2:29092,EXTERNAL://localhost:19093",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3",
        "KAFKA_HEAP_OPTS": "-Xmx1G -Xms1G",
        "KAFKA_JMX_PORT": "9999",
        "KAFKA_OPTS": "-Djava.security.auth.login.config=/etc/kafka/jaas.conf",
        "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
        "KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "KAFKA_": "an empty name is no key",
        "ZOOKEEPER_CLIENT_PORT": "2181",
        "PATH": "/usr/bin",
    }
    props, notes, level = ep.build_config(env)
    assert props == {
        "log.dirs": "/var/lib/kafka/data",
        "metrics.http.port": "9404",
        "metrics.http.host": "0.0.0.0",
        "broker.id": "2",
        "zookeeper.connect": "zk1:2181,zk2:2181/kafka",
        "advertised.listeners": "INTERNAL://kafka2:29092,EXTERNAL://localhost:19093",
        "listeners": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:19093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "offsets.topic.replication.factor": "3",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
    }
    assert level == "WARN"
    assert [n.split(":")[0] for n in notes] == [
        "KAFKA_HEAP_OPTS", "KAFKA_JMX_PORT", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_OPTS",
        "KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET"]


def test_explicit_listeners_and_overridden_defaults_win():
    props, notes, level = ep.build_config({
        "KAFKA_LISTENERS": "PLAINTEXT://:9092",
        "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://broker.example:9092",
        "KAFKA_LOG_DIRS": "/data/a,/data/b",
        "KAFKA_METRICS_HTTP_PORT": "-1",
    })
    assert props["listeners"] == "PLAINTEXT://:9092"
    assert props["log.dirs"] == "/data/a,/data/b"
    assert props["metrics.http.port"] == "-1"
    assert notes == [] and level is None


def test_nothing_set_leaves_kbroker_defaults():
    """No ZooKeeper: the embedded coordination store; no listeners: kbroker's default (all interfaces, 9092)."""
    props, notes, level = ep.build_config({})
    assert props == ep.DEFAULTS


def test_listeners_from_advertised_replaces_every_host():
    assert ep.listeners_from_advertised("PLAINTEXT://a:1, SSL://10.0.4.5:7888,X://[::1]:3,Y://:4") == \
        "PLAINTEXT://0.0.0.0:1,SSL://0.0.0.0:7888,X://[::]:3,Y://0.0.0.0:4"
    with pytest.raises(ep.EntrypointError, match="'nonsense' is not NAME://host:port"):
        ep.listeners_from_advertised("PLAINTEXT://a:1,nonsense")


@pytest.mark.parametrize("var,message", [
    ("KAFKA_PORT", "port is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead."),
    ("KAFKA_HOST", "host is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead."),
    ("KAFKA_ADVERTISED_PORT", "advertised.port is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead."),
    ("KAFKA_ADVERTISED_HOST", "advertised.host is deprecated. Please use KAFKA_ADVERTISED_LISTENERS instead."),
])
def test_deprecated_listener_variables_stop_the_start_as_in_cp_kafka(var, message):
    with pytest.raises(ep.EntrypointError) as info:
        ep.build_config({var: "9092"})
    assert str(info.value) == message


def test_a_kubernetes_service_link_named_kafka_gets_a_hint():
    with pytest.raises(ep.EntrypointError) as info:
        ep.build_config({"KAFKA_PORT": "tcp://10.0.0.7:9092"})
    assert str(info.value).startswith("port is deprecated.")
    assert "enableServiceLinks: false" in str(info.value)


def test_ssl_files_and_credentials_come_from_the_secrets_directory(tmp_path):
    (tmp_path / "ks_creds").write_text("ks-secret\n")
    (tmp_path / "key_creds").write_text("key-secret")
    (tmp_path / "ts_creds").write_text("ts-secret\n")
    props, notes, _ = ep.build_config({
        "KAFKA_SSL_KEYSTORE_FILENAME": "broker1.keystore.p12",
        "KAFKA_SSL_KEYSTORE_CREDENTIALS": "ks_creds",
        "KAFKA_SSL_KEY_CREDENTIALS": "key_creds",
        "KAFKA_SSL_TRUSTSTORE_FILENAME": "truststore.pem",
        "KAFKA_SSL_TRUSTSTORE_CREDENTIALS": "ts_creds",
        "KAFKA_SSL_KEYSTORE_TYPE": "PKCS12",
    }, secrets_dir=str(tmp_path))
    assert {k: v for k, v in props.items() if k.startswith("ssl.")} == {
        "ssl.keystore.location": str(tmp_path / "broker1.keystore.p12"),
        "ssl.truststore.location": str(tmp_path / "truststore.pem"),
        "ssl.keystore.password": "ks-secret",
        "ssl.key.password": "key-secret",
        "ssl.truststore.password": "ts-secret",
        "ssl.keystore.type": "PKCS12",
    }
    assert len(notes) == 5


def test_a_missing_credentials_file_stops_the_start(tmp_path):
    with pytest.raises(ep.EntrypointError) as info:
        ep.build_config({"KAFKA_SSL_KEY_CREDENTIALS": "nope"}, secrets_dir=str(tmp_path))
    assert str(info.value) == "KAFKA_SSL_KEY_CREDENTIALS: cannot read %s: No such file or directory" % (
        tmp_path / "nope")


# -------------------------------------------------------------------------------------------- properties file

def test_rendered_properties_read_back_identically_with_kbroker_parser():
    props = {
        "broker.id": "1",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="p\\w";',
        "weird": " leading space, tab\tand\nnewline # not a comment",
        "ssl.keystore.location": "C:\\keys\\ks.p12",
        "empty": "",
    }
    text = ep.render_properties(props)
    assert text.splitlines()[0].startswith("# Written by")
    assert parse_properties(text) == props


def test_configure_writes_the_file_and_returns_the_server_arguments(tmp_path):
    logs = tmp_path / "data" / "logs"
    lines = []
    args = ep.configure({"KAFKA_BROKER_ID": "5", "KAFKA_LOG_DIRS": str(logs), "KAFKA_LOG4J_ROOT_LOGLEVEL": "DEBUG",
                         "KAFKA_SASL_JAAS_CONFIG": "secret stuff", "KAFKA_SSL_KEY_PASSWORD": "pw"},
                        str(tmp_path / "etc" / "server.properties"), str(tmp_path), log=lines.append)
    assert args == [str(tmp_path / "etc" / "server.properties"), "--log-level", "DEBUG"]
    assert logs.is_dir()
    written = parse_properties((tmp_path / "etc" / "server.properties").read_text())
    assert written["broker.id"] == "5" and written["log.dirs"] == str(logs)
    assert written["sasl.jaas.config"] == "secret stuff"
    assert "  sasl.jaas.config=[hidden]" in lines and "  ssl.key.password=[hidden]" in lines
    assert not any("secret stuff" in l for l in lines)


def test_an_unwritable_log_dir_stops_the_start(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: every directory is writable")
        with pytest.raises(ep.EntrypointError, match="log.dirs: %s is not writable by uid" % ro):
            ep.check_log_dirs("%s, " % ro)
    finally:
        ro.chmod(0o700)


def test_a_log_dir_that_cannot_be_created_stops_the_start(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ep.EntrypointError) as info:
        ep.check_log_dirs("%s,%s" % (tmp_path / "ok", tmp_path / "file" / "sub"))
    assert str(info.value) == "log.dirs: cannot create %s: Not a directory (uid %d)" % (
        tmp_path / "file" / "sub", os.getuid())
    assert (tmp_path / "ok").is_dir()


def test_print_config_and_cp_style_assignment_arguments(tmp_path, capsys):
    assert ep.main(["print-config"], environ={"KAFKA_BROKER_ID": "3"}) == 0
    out = capsys.readouterr().out
    assert "broker.id=3\n" in out and "metrics.http.port=9404\n" in out
    assert ep.main(["print-config"], environ={"KAFKA_PORT": "1"}) == 1


# --------------------------------------------------------------------------------------------------- logging

def test_parse_loggers_as_cp_kafka_but_strict():
    assert ep.parse_loggers("kbroker.controller=debug, state.change.logger=TRACE,") == [
        ("kbroker.controller", "DEBUG"), ("state.change.logger", "TRACE")]
    for bad in ("kbroker.controller", "=INFO", "x=LOUD"):
        with pytest.raises(ep.EntrypointError, match="KAFKA_LOG4J_LOGGERS: .* is not logger=LEVEL"):
            ep.parse_loggers(bad)


def test_render_logging_keeps_appenders_and_appends_new_loggers():
    from kbroker.cli.logging_config import DEFAULT_PROPERTIES, parse

    text = ep.render_logging([("kbroker.controller", "DEBUG"), ("kbroker.server.connection", "WARN")],
                             DEFAULT_PROPERTIES)
    lines = text.splitlines()
    assert lines[0] == ep.LOGGING_MARKER
    assert "log4j.logger.kbroker.controller=DEBUG, controllerAppender, stderr" in lines
    assert "log4j.logger.kbroker.controller=INFO, controllerAppender, stderr" not in lines
    assert lines[-2:] == ["# KAFKA_LOG4J_LOGGERS", "log4j.logger.kbroker.server.connection=WARN"]
    # everything else is the built-in configuration, line for line
    assert [l for l in lines[1:-3] if "kbroker.controller=" not in l] == \
        [l for l in DEFAULT_PROPERTIES.rstrip("\n").split("\n") if "kbroker.controller=" not in l]
    parse(text, "/tmp/kb-logs")  # kbroker's own parser accepts it


def test_write_logging_never_overwrites_a_mounted_file(tmp_path):
    cfg = str(tmp_path / "server.properties")
    path = tmp_path / "logging.properties"
    assert ep.write_logging({}, cfg) is None and not path.exists()
    assert ep.write_logging({"KAFKA_LOG4J_LOGGERS": "kbroker.log=DEBUG"}, cfg) == str(path)
    assert path.read_text().splitlines()[-1] == "log4j.logger.kbroker.log=DEBUG"
    assert ep.write_logging({}, cfg) is None and not path.exists()  # ours, and the variable is gone
    path.write_text("log4j.rootLogger=WARN, stderr\n")  # the operator's own file
    with pytest.raises(ep.EntrypointError, match="was not written by the entrypoint"):
        ep.write_logging({"KAFKA_LOG4J_LOGGERS": "kbroker.log=DEBUG"}, cfg)
    assert ep.write_logging({}, cfg) is None
    assert path.read_text() == "log4j.rootLogger=WARN, stderr\n"


# ------------------------------------------------------------------------------------------------- ZooKeeper

def test_zk_servers_parses_connect_strings():
    assert ep.zk_servers("zk1:2181,zk2:2182/kafka/x") == [("zk1", 2181), ("zk2", 2182)]
    assert ep.zk_servers("zk1,[::1]:2183") == [("zk1", 2181), ("::1", 2183)]


def _one_shot_server(reply):
    """A TCP server answering every connection with `reply` after reading 4 bytes; returns (port, stop)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def run():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                data = b""
                while len(data) < 4:
                    chunk = conn.recv(4 - len(data))
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(reply(data))
        srv.close()

    threading.Thread(target=run, daemon=True).start()
    return srv.getsockname()[1], stop.set


def test_wait_for_zookeeper_needs_a_serving_mode():
    port_ok, stop_ok = _one_shot_server(lambda d: b"Zookeeper version: 3.8.0\nMode: follower\n" if d == b"srvr" else b"")
    port_bad, stop_bad = _one_shot_server(lambda d: b"This ZooKeeper instance is not currently serving requests\n")
    try:
        assert ep.zk_serving("127.0.0.1", port_ok) is True
        assert ep.zk_serving("127.0.0.1", port_bad) is False
        now = [0.0]
        assert ep.wait_for_zookeeper("127.0.0.1:%d/x" % port_bad, 3, log=lambda m: None,
                                     clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)) is False
        assert now[0] == 3.0  # polled once a second until the deadline
        assert ep.wait_for_zookeeper("127.0.0.1:%d,127.0.0.1:%d" % (port_bad, port_ok), 3, log=lambda m: None)
    finally:
        stop_ok()
        stop_bad()


# ------------------------------------------------------------------------------------------------ healthcheck

class _Readyz(BaseHTTPRequestHandler):
    status = 503

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(self.status if self.path == "/readyz" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_healthcheck_asks_readyz_on_the_metrics_port(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), _Readyz)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = tmp_path / "server.properties"
    cfg.write_text(ep.render_properties({"metrics.http.port": str(server.server_address[1]),
                                         "metrics.http.host": "0.0.0.0"}))
    try:
        _Readyz.status = 503
        assert ep.healthcheck(str(cfg)) == 1
        _Readyz.status = 200
        assert ep.healthcheck(str(cfg)) == 0
    finally:
        server.shutdown()
        server.server_close()
    assert ep.healthcheck(str(cfg), timeout=1) == 1  # nothing listens any more
    assert ep.healthcheck(str(tmp_path / "missing.properties")) == 1


def test_healthcheck_without_metrics_port_asks_api_versions(tmp_path):
    def answer(head):
        # head = the request's int32 size; the rest (api key 18, version 0, correlation id) follows
        return struct.pack(">ii", 6, 0x6B62) + b"\x00\x00"

    port, stop = _one_shot_server(answer)
    cfg = tmp_path / "server.properties"
    try:
        cfg.write_text(ep.render_properties({"metrics.http.port": "-1", "listeners": "PLAINTEXT://0.0.0.0:%d" % port}))
        assert ep.healthcheck(str(cfg)) == 0
    finally:
        stop()
    wrong, stop2 = _one_shot_server(lambda head: struct.pack(">ii", 4, 1))
    try:
        cfg.write_text(ep.render_properties({"listeners": "PLAINTEXT://127.0.0.1:%d" % wrong}))
        assert ep.healthcheck(str(cfg)) == 1
    finally:
        stop2()


# ------------------------------------------------------------------------------------------------ lock subset

def test_lock_subset_runtime_closure_on_a_small_lock():
    lock = (
        "# header\n"
        "alpha==1.0 \\\n    --hash=sha256:aa\n    # via kbroker (pyproject.toml)\n"
        "beta==2.0 ; python_full_version >= '3.11' \\\n    --hash=sha256:bb \\\n    --hash=sha256:bc\n"
        "    # via\n    #   alpha\n    #   pytest\n"
        "gamma==3.0 \\\n    --hash=sha256:cc\n    # via beta\n"
        "pytest==9.0 \\\n    --hash=sha256:dd\n    # via kbroker (pyproject.toml)\n"
        "cython==3.0 \\\n    --hash=sha256:ee\n    # via -r requirements/build.in\n"
    )
    entries = lock_subset.parse_lock(lock)
    assert [(n, p) for n, _, p in entries] == [
        ("alpha", ["kbroker (pyproject.toml)"]), ("beta", ["alpha", "pytest"]), ("gamma", ["beta"]),
        ("pytest", ["kbroker (pyproject.toml)"]), ("cython", ["-r requirements/build.in"])]
    names = lock_subset.closure(entries, {"alpha"})
    assert names == {"alpha", "beta", "gamma"}
    assert lock_subset.subset(lock, names) == (
        "alpha==1.0 \\\n    --hash=sha256:aa\n"
        "beta==2.0 ; python_full_version >= '3.11' \\\n    --hash=sha256:bb \\\n    --hash=sha256:bc\n"
        "gamma==3.0 \\\n    --hash=sha256:cc\n")


def test_lock_subset_of_the_real_lock(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert lock_subset.main(["--runtime"]) == 0
    runtime = capsys.readouterr().out
    pins = {lock_subset.canonical(l.split("==")[0]) for l in runtime.splitlines() if l and not l[0].isspace()}
    roots = lock_subset.project_dependencies((REPO / "pyproject.toml").read_text())
    assert roots <= pins and {"gevent", "greenlet", "kazoo", "cffi"} <= pins
    assert not pins & {"pytest", "hypothesis", "kafka-python", "aiokafka", "gssapi", "cython", "setuptools"}
    # every pin carries hashes (pip --require-hashes refuses a pin without one)
    blocks = re.split(r"\n(?=\S)", runtime.strip())
    assert len(blocks) == len([l for l in runtime.splitlines() if l and not l[0].isspace()])
    assert all(re.search(r"^    --hash=sha256:[0-9a-f]{64}$", b, re.M) for b in blocks)
    assert not any("# via" in b for b in blocks) and not runtime.rstrip().endswith("\\")
    assert lock_subset.main(["--build"]) == 0
    build = {lock_subset.canonical(l.split("==")[0]) for l in capsys.readouterr().out.splitlines()
             if l and not l[0].isspace()}
    assert build == {"pip", "setuptools", "wheel", "cython"}
