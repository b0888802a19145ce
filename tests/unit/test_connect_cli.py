"""kbroker/connect/cli.py: connector files in Kafka's three forms, usage and startup exit codes (no broker)."""
import json
import logging

import pytest

from kbroker.connect import cli


@pytest.fixture(autouse=True)
def _restore_logging():
    """cli.main configures the root logger (stdout, Kafka's layout) and signal handlers: put pytest's back."""
    import signal
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    signals = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for sig, handler in signals.items():   # run_standalone installs its own
        signal.signal(sig, handler)


def test_connector_file_forms(tmp_path):
    props = tmp_path / "c.properties"
    props.write_text("# comment\nname=local-file-source\nconnector.class=FileStreamSource\ntasks.max=1\n")
    assert cli.load_connector_file(str(props)) == (
        "local-file-source", {"name": "local-file-source", "connector.class": "FileStreamSource", "tasks.max": "1"},
        None)
    as_map = tmp_path / "c.json"
    as_map.write_text(json.dumps({"name": "m", "connector.class": "FileStreamSink", "topics": "t"}))
    assert cli.load_connector_file(str(as_map)) == ("m", {"name": "m", "connector.class": "FileStreamSink",
                                                          "topics": "t"}, None)
    request = tmp_path / "r.json"
    request.write_text(json.dumps({"name": "r", "config": {"connector.class": "FileStreamSink", "tasks.max": 2},
                                   "initial_state": "paused"}))
    assert cli.load_connector_file(str(request)) == (
        "r", {"connector.class": "FileStreamSink", "tasks.max": "2", "name": "r"}, "PAUSED")


@pytest.mark.parametrize("text, message", [
    ("connector.class=X\n", "is missing the mandatory 'name' configuration"),
    ('{"name": "a", "config": {"name": "b"}}', "doesn't match the one specified in 'name'"),
    ('{"name": "a", "config": {}, "initial_state": "SLEEPING"}', "Unknown initial state SLEEPING"),
])
def test_connector_file_errors(tmp_path, text, message):
    path = tmp_path / "bad"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        cli.load_connector_file(str(path))
    with pytest.raises(ValueError, match="cannot read connector configuration"):
        cli.load_connector_file(str(tmp_path / "missing"))


def test_usage_and_version(capsys):
    assert cli.main([]) == cli.EXIT_USAGE
    assert cli.main(["bogus"]) == cli.EXIT_USAGE
    assert cli.main(["standalone"]) == cli.EXIT_USAGE        # the worker file is required
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("kbroker-connect ")


def test_bad_worker_config_exits_2_naming_the_key(tmp_path, capsys):
    worker = tmp_path / "w.properties"
    converters = "key.converter=%s\nvalue.converter=%s\n" % (("org.apache.kafka.connect.json.JsonConverter",) * 2)
    worker.write_text(converters + "bootstrap.servers=127.0.0.1:1\noffset.storage.file.filename=/tmp/x\n"
                      "rest.extension.classes=com.example.Ext\n")
    assert cli.main(["standalone", str(worker)]) == cli.EXIT_START
    assert "rest.extension.classes" in capsys.readouterr().out
    missing = tmp_path / "w2.properties"
    missing.write_text(converters + "bootstrap.servers=127.0.0.1:1\n")   # no offset.storage.file.filename
    assert cli.main(["standalone", str(missing)]) == cli.EXIT_START
    assert "offset.storage.file.filename" in capsys.readouterr().out
    assert cli.main(["standalone", str(tmp_path / "nope.properties")]) == cli.EXIT_START
