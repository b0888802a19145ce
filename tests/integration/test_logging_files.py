"""Kafka's log files from a real broker process (issue 13 item 3; kbroker/cli/logging_config.py).

One broker (embedded backend, so it is its own controller) started by the harness with LOG_DIR=<dir>/server-logs
and a logging.properties beside its server.properties (the file kbroker-server picks up there): the shipped
config/logging.properties with the request log switched on (DEBUG) and its file rolled at 4 KiB with 2 backups;
state.change.logger as shipped (INFO, Kafka >= 2's level: partition state changes and applied LeaderAndIsr, not
the per-replica TRACE).
Checked: the files exist in LOG_DIR (and nowhere else); the startup report (version, kernels, "KafkaConfig values"
with every key) opens server.log; controller lines are in controller.log and not in server.log; a topic's creation
is in state-change.log as Kafka writes it (the controller's partition state changes, the broker's completed
become-leader transitions; exactly those lines at INFO); 300 requests roll kafka-request.log into exactly
kafka-request.log, .1 and .2, holding the newest requests with consecutive correlation ids and no file above the
limit; stderr (the harness's broker.log) still gets the console lines.
"""
from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest

from tests.integration.harness import REPO_ROOT, BrokerProcess, encode_request, read_response, wait_until

pytestmark = pytest.mark.timeout(120)

TOPIC = "logged"
ROLL_BYTES = 4096
REQUESTS = 300


def _logging_properties():
    text = (REPO_ROOT / "config" / "logging.properties").read_text()
    text = text.replace("log4j.logger.kafka.request.logger=WARN, requestAppender",
                        "log4j.logger.kafka.request.logger=DEBUG, requestAppender")
    text = text.replace("log4j.appender.requestAppender.MaxFileSize=100MB",
                        "log4j.appender.requestAppender.MaxFileSize=%d" % ROLL_BYTES)
    text = text.replace("log4j.appender.requestAppender.MaxBackupIndex=10",
                        "log4j.appender.requestAppender.MaxBackupIndex=2")
    assert "kafka.request.logger=DEBUG" in text and "MaxFileSize=%d" % ROLL_BYTES in text
    return text


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("logging") / "broker")
    (b.dir / "logging.properties").write_text(_logging_properties())
    b.start()
    try:
        subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "topics", "--create", "--topic", TOPIC,
                        "--partitions", "2", "--replication-factor", "1", "--bootstrap-server", b.bootstrap],
                       check=True, capture_output=True, timeout=60, cwd=str(REPO_ROOT))
        yield b
    finally:
        b.close()


def _read(broker, name):
    return (broker.server_log_dir / name).read_text()


def test_files_are_created_in_log_dir(broker):
    names = {p.name for p in broker.server_log_dir.iterdir()}
    assert {"server.log", "controller.log", "state-change.log", "kafka-request.log", "log-cleaner.log",
            "kafka-authorizer.log"} <= names, names
    assert not any(p.suffix == ".log" and p.is_file() for p in broker.log_dir.iterdir()), "a log file in log.dirs"


def test_server_log_opens_with_version_kernels_and_every_config_value(broker):
    text = _read(broker, "server.log")
    m = re.search(r"INFO KafkaConfig values \(kbroker (\S+), kernels: (cython|python)\): \n((?:\t.*\n)+)", text)
    assert m, text[:2000]
    block = m.group(3)
    assert block.endswith(" (kbroker.config)\n")          # the layout's "(%c)" closes the last line
    rows = dict(line[1:].partition(" = ")[::2] for line in block[:-len(" (kbroker.config)\n")].splitlines())
    assert rows["broker.id"] == "0"
    assert rows["listeners"] == f"PLAINTEXT://{broker.host}:{broker.port}"
    assert rows["advertised.host.name"] == "null"
    from kbroker.config.keys import CONFIG_KEYS
    assert set(CONFIG_KEYS) <= set(rows)
    assert re.search(r"INFO kbroker version: \S+ \(kernels: (cython|python)\) \(kbroker\.server\)", text)


def test_controller_lines_are_in_controller_log_only(broker):
    line = "INFO broker 0 is the controller, epoch 1 (kbroker.controller)"
    assert line in _read(broker, "controller.log")
    assert "is the controller" not in _read(broker, "server.log")
    assert "INFO kbroker.controller: broker 0 is the controller, epoch 1" in broker.log_text()  # stderr too


def test_topic_creation_is_in_state_change_log(broker):
    def lines():
        text = _read(broker, "state-change.log")
        return [l for l in text.splitlines() if f"[{TOPIC}," in l]
    expected = []
    for p in (0, 1):
        expected += [
            f"INFO Controller 0 epoch 1 changed partition [{TOPIC},{p}] state from NonExistentPartition to "
            "NewPartition (state.change.logger)",
            f"INFO Controller 0 epoch 1 changed partition [{TOPIC},{p}] state from NewPartition to "
            "OnlinePartition (state.change.logger)",
            f"INFO Broker 0 completed LeaderAndIsr request from controller 0 epoch 1 for the become-leader "
            f"transition for partition [{TOPIC},{p}] (Leader:0,ISR:0,LeaderEpoch:0): error 0 (state.change.logger)",
        ]
    got = wait_until(lambda: (l := lines()) and len(l) >= len(expected) and l, 10,
                     message="the topic's state changes in state-change.log")
    bodies = [l.split("] ", 1)[1] for l in got]
    assert sorted(bodies) == sorted(expected), "\n".join(bodies)   # at INFO (shipped): no TRACE line
    assert "state.change.logger" not in _read(broker, "server.log")


def test_request_log_rolls_at_its_size_keeping_two_backups(broker):
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        for corr in range(1, REQUESTS + 1):
            sock.sendall(encode_request(18, 0, corr, b"", "rolling-client"))
            assert read_response(sock)[0] == corr
    files = [broker.server_log_dir / n for n in ("kafka-request.log.2", "kafka-request.log.1", "kafka-request.log")]

    def ours():
        return [int(m) for f in files for m in re.findall(r"correlation_id=(\d+),client_id=rolling-client",
                                                         f.read_text())]
    # Lines are flushed once per event-loop turn (logging_config._LoopFlush): the last may trail its response.
    kept = wait_until(lambda: (k := ours()) and k[-1] == REQUESTS and k, 10, message="request 300 in the log")
    assert kept == list(range(kept[0], REQUESTS + 1)), "a gap or reorder across the rolled files"
    assert kept[0] > 1, "300 lines of ~250 bytes cannot fit 3 x 4 KiB: the oldest must have been dropped"
    assert not (broker.server_log_dir / "kafka-request.log.3").exists()
    for f in files:
        assert f.stat().st_size < ROLL_BYTES, (f, f.stat().st_size)
    line = next(l for l in files[-1].read_text().splitlines() if f"correlation_id={REQUESTS}," in l)
    assert re.fullmatch(
        r"\[\S+ \S+\] DEBUG Completed request:\{api_key=18,api_version=0,correlation_id=300,client_id=rolling-client\} "
        r"\(ApiVersions\) from connection 127\.0\.0\.1:\d+;totalTime:[\d.]+,localTime:[\d.]+,remoteTime:0\.000,"
        r"throttleTime:0,securityProtocol:PLAINTEXT,principal:User:ANONYMOUS \(kafka\.request\.logger\)", line), line
    assert "Completed request" not in broker.log_text()  # additivity=false: not on stderr
