"""The quickstart's step 7 (kafka-0.10.1-docs/quickstart.html) run with kbroker's commands, against a real broker:

    echo -e "foo\\nbar" > test.txt
    kbroker-connect standalone config/connect-standalone.properties config/connect-file-source.properties \\
        config/connect-file-sink.properties
    cat test.sink.txt                       -> foo, bar
    kbroker-console-consumer --bootstrap-server ... --topic connect-test --from-beginning
        -> {"schema":{"type":"string","optional":false},"payload":"foo"} and the same for bar
    echo "Another line" >> test.txt         -> in the sink file and the topic

The three config files are the repository's config/ files as Kafka ships them; the connector files are used as
they are. In the worker file only ``bootstrap.servers`` names the test's broker; ``offset.storage.file.filename``
(Kafka's /tmp/connect.offsets would be shared by every run on the machine) and ``listeners`` (8083 may be taken by
another test's worker) are moved into the test's directory / a free port, nothing else.

Then a standalone restart: SIGTERM (exit 0, offsets committed), a line appended while the worker is down, the same
command again -> the source resumes from the offsets file (the topic holds each line once) and the sink from its
group's committed offsets (the file holds each line once).
"""
import base64
import json
import subprocess
import sys

import pytest

from tests.integration.connect_proc import CONSOLE_CONSUMER, ConnectProcess, worker_properties
from tests.integration.harness import REPO_ROOT, BrokerProcess, HarnessError, free_port, wait_until

pytest.importorskip("confluent_kafka")

BROKER_OVERRIDES = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
                    "group.initial.rebalance.delay.ms": 0}
CONFIG_FILES = ("connect-standalone.properties", "connect-file-source.properties", "connect-file-sink.properties")


def envelope(text):
    return '{"schema":{"type":"string","optional":false},"payload":%s}' % json.dumps(text)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("connect-quickstart-broker"), overrides=BROKER_OVERRIDES)
    b.start()
    yield b
    b.close()


def console_consume(broker, extra):
    """kbroker-console-consumer's stdout lines for the quickstart's topic."""
    argv = [str(CONSOLE_CONSUMER) if CONSOLE_CONSUMER.exists() else sys.executable] + \
        ([] if CONSOLE_CONSUMER.exists() else ["-m", "kbroker.cli.console_consumer"]) + \
        ["--bootstrap-server", broker.bootstrap, "--topic", "connect-test", "--from-beginning"] + extra
    out = subprocess.run(argv, capture_output=True, timeout=60, check=True, cwd=str(REPO_ROOT))
    return out.stdout.decode("utf-8").splitlines()


def wait(worker, predicate, timeout, what):
    try:
        wait_until(predicate, timeout, 0.1, what)
    except HarnessError as e:
        raise HarnessError("%s\nkbroker-connect's log:\n%s" % (e, worker.log_tail())) from None


def read(path):
    return path.read_bytes().decode("utf-8") if path.exists() else ""


def test_quickstart_step7(broker, tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    for name in CONFIG_FILES:
        text = (REPO_ROOT / "config" / name).read_text()
        if name == "connect-standalone.properties":
            assert "bootstrap.servers=localhost:9092\n" in text   # Kafka's value, before the test's override
            text = worker_properties(text, {"bootstrap.servers": broker.bootstrap,
                                            "offset.storage.file.filename": tmp_path / "connect.offsets",
                                            "listeners": "http://127.0.0.1:%d" % free_port()})
        (config / name).write_text(text)
    (tmp_path / "test.txt").write_bytes(b"foo\nbar\n")          # echo -e "foo\nbar" > test.txt
    sink = tmp_path / "test.sink.txt"
    worker = ConnectProcess(tmp_path, ["standalone"] + ["config/" + n for n in CONFIG_FILES])
    worker.start()
    try:
        wait(worker, lambda: read(sink) == "foo\nbar\n", 30, "test.sink.txt == foo, bar")
        assert console_consume(broker, ["--max-messages", "2"]) == [envelope("foo"), envelope("bar")]

        with open(tmp_path / "test.txt", "ab") as f:             # echo "Another line" >> test.txt
            f.write(b"Another line\n")
        wait(worker, lambda: read(sink) == "foo\nbar\nAnother line\n", 20, "the appended line in the sink")

        assert worker.stop() == 0, worker.log_tail()
        # the source's offset, as Kafka stores it: ["local-file-source",{"filename":"test.txt"}] -> {"position":N}
        stored = json.loads((tmp_path / "connect.offsets").read_text())["offsets"]
        assert [(base64.b64decode(k), base64.b64decode(v)) for k, v in stored] == \
            [(b'["local-file-source",{"filename":"test.txt"}]', b'{"position":21}')]

        with open(tmp_path / "test.txt", "ab") as f:
            f.write(b"after restart\n")
        worker.start()
        wait(worker, lambda: read(sink).endswith("after restart\n"), 30, "the line appended while stopped")
        # each line once in the file (sink offsets resumed) and once in the topic (source offsets resumed)
        assert read(sink) == "foo\nbar\nAnother line\nafter restart\n"
        assert console_consume(broker, ["--timeout-ms", "1500"]) == \
            [envelope("foo"), envelope("bar"), envelope("Another line"), envelope("after restart")]
    finally:
        code = worker.stop()
    assert code == 0, worker.log_tail()


def test_invalid_connector_file_exits_3(broker, tmp_path):
    """Kafka's ConnectStandalone: a connector that cannot be created stops the worker with exit code 3."""
    text = worker_properties((REPO_ROOT / "config" / "connect-standalone.properties").read_text(),
                             {"bootstrap.servers": broker.bootstrap,
                              "offset.storage.file.filename": tmp_path / "connect.offsets",
                              "listeners": "http://127.0.0.1:%d" % free_port()})
    (tmp_path / "worker.properties").write_text(text)
    (tmp_path / "sink.properties").write_text("name=s\nconnector.class=FileStreamSink\nfile=out.txt\n")  # no topics
    worker = ConnectProcess(tmp_path, ["standalone", "worker.properties", "sink.properties"]).start()
    try:
        code = worker.proc.wait(30)
    finally:
        worker.stop()
    log = worker.log_tail(60)
    assert code == 3, log
    assert "Connector configuration is invalid and contains the following 2 error(s)" in log
    assert "Stopping after connector error" in log
