"""docker/entrypoint.py outside a container (no Docker engine runs here): from a cp-kafka style environment it writes
the properties, execs a real kbroker-server (same pid), and that broker serves a produce/consume with the mapped
settings in effect; its healthcheck turns ready, and SIGTERM ends it cleanly (exit 0). The refusals (a deprecated
variable, ZooKeeper that never serves) exit 1 before any broker starts.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.harness import free_ports, tail, wait_until

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = str(REPO / "docker" / "entrypoint.py")
TOPIC = "docker-entrypoint-t"
N = 20


def _base_env(tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "KBROKER_"))}
    env["KBROKER_CONFIG"] = str(tmp / "etc" / "server.properties")
    env["KBROKER_SECRETS_DIR"] = str(tmp / "secrets")
    return env


def _healthcheck(env):
    return subprocess.run([sys.executable, ENTRYPOINT, "healthcheck"], env=env, capture_output=True,
                          timeout=20).returncode


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docker-entrypoint")
    port, metrics_port = free_ports(2)
    env = _base_env(tmp)
    env.update({
        "KAFKA_BROKER_ID": "7",
        "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:%d" % port,
        "KAFKA_LOG_DIRS": str(tmp / "data"),
        "KAFKA_NUM_PARTITIONS": "3",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_METRICS_HTTP_PORT": str(metrics_port),
        "KAFKA_HEAP_OPTS": "-Xmx1G -Xms1G",
        "KAFKA_LOG4J_ROOT_LOGLEVEL": "INFO",
        "KAFKA_LOG4J_LOGGERS": "kbroker.controller=WARN",
        "LOG_DIR": str(tmp / "logs"),
    })
    assert _healthcheck(env) == 1  # no config written yet
    log = open(tmp / "entrypoint.log", "wb")
    proc = subprocess.Popen([sys.executable, ENTRYPOINT], env=env, stdout=log, stderr=subprocess.STDOUT,
                            cwd=str(tmp))
    try:
        wait_until(lambda: proc.poll() is not None or _healthcheck(env) == 0, timeout=60, interval=0.3,
                   message="the entrypoint's broker to be ready")
        assert proc.poll() is None, tail(tmp / "entrypoint.log")
        yield {"proc": proc, "env": env, "tmp": tmp, "port": port, "log": tmp / "entrypoint.log"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


def test_the_entrypoint_execs_kbroker_server_with_the_mapped_file(started):
    proc, tmp = started["proc"], started["tmp"]
    # execv: the process the runtime started is the broker itself (signals reach it directly)
    cmdline = Path("/proc/%d/cmdline" % proc.pid).read_bytes().split(b"\0")
    assert cmdline[1:5] == [b"-m", b"kbroker.cli.server", str(tmp / "etc" / "server.properties").encode(),
                            b"--log-level"]
    written = (tmp / "etc" / "server.properties").read_text().splitlines()
    assert "broker.id=7" in written and "num.partitions=3" in written
    assert "listeners=PLAINTEXT://0.0.0.0:%d" % started["port"] in written
    log = started["log"].read_text(errors="replace")
    assert "===> KAFKA_HEAP_OPTS: a JVM/log4j launcher setting; kbroker has no JVM (ignored)" in log
    # KAFKA_LOG4J_LOGGERS: logging.properties beside the properties, read by kbroker-server; files under LOG_DIR
    logging_lines = (tmp / "etc" / "logging.properties").read_text().splitlines()
    assert "log4j.logger.kbroker.controller=WARN, controllerAppender, stderr" in logging_lines
    assert " INFO " in (tmp / "logs" / "server.log").read_text()
    # at the default INFO, controller.log starts with "INFO broker 7 is the controller, epoch 1"; at WARN it has none
    controller_log = tmp / "logs" / "controller.log"
    assert not controller_log.exists() or " INFO " not in controller_log.read_text()
    assert "is the controller" not in log


def test_the_broker_serves_produce_and_consume_with_the_mapped_settings(started):
    bootstrap = "127.0.0.1:%d" % started["port"]
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered = []
    for i in range(N):
        p.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % 3,
                  on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert p.flush(30) == 0
    assert [e for e, _, _ in delivered] == [None] * N
    # auto-created with KAFKA_NUM_PARTITIONS=3; broker id 7 and the advertised address from the environment
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    assert sorted(md.topics[TOPIC].partitions) == [0, 1, 2]
    assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [(7, "127.0.0.1", started["port"])]
    assert sorted(o for _, part, o in delivered if part == 0) == list(range(7))

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "docker-g", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, i, 0) for i in range(3)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.key(), m.value(), m.partition()))
    c.close()
    assert sorted(got) == sorted((b"k%d" % i, b"v%d" % i, i % 3) for i in range(N))


def test_sigterm_ends_the_broker_cleanly(started):
    proc, env = started["proc"], started["env"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(45) == 0, tail(started["log"])
    assert _healthcheck(env) == 1


def test_a_deprecated_variable_exits_1_before_starting(tmp_path):
    env = _base_env(tmp_path)
    env["KAFKA_ADVERTISED_PORT"] = "9092"
    r = subprocess.run([sys.executable, ENTRYPOINT], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr.strip() == ("kbroker entrypoint: advertised.port is deprecated. Please use "
                                "KAFKA_ADVERTISED_LISTENERS instead.")
    assert not (tmp_path / "etc").exists()


def test_zookeeper_that_never_serves_exits_1(tmp_path):
    (zk_port,) = free_ports(1)
    env = _base_env(tmp_path)
    env.update({"KAFKA_ZOOKEEPER_CONNECT": "127.0.0.1:%d/kb" % zk_port, "KAFKA_CUB_ZK_TIMEOUT": "1",
                "KAFKA_LOG_DIRS": str(tmp_path / "data")})
    started_at = time.monotonic()
    r = subprocess.run([sys.executable, ENTRYPOINT], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        "kbroker entrypoint: ZooKeeper 127.0.0.1:%d/kb not serving after 1s (KAFKA_CUB_ZK_TIMEOUT)" % zk_port)
    assert time.monotonic() - started_at < 10
