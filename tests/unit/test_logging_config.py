"""kbroker/cli/logging_config.py: the log4j.properties subset, rotation, the bootstrap -> install hand-over.

The real broker's files are tested in tests/integration/test_logging_files.py; here the parts one by one, exact:
the shipped file's routing, layouts, every refusal (naming the key), size rotation (files, sizes, what is dropped),
time rotation (the DatePattern's file name), the records logged before install() reaching server.log once and
stderr once, the request logger off by default, and the startup block.
"""
import logging
import re
import time
from pathlib import Path

import pytest

from kbroker.cli import logging_config as lc
from kbroker.cli.logging_records import SRCFILE, record_only_what_is_printed

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_logging():
    """Give the root logger and the configured loggers back as they were (pytest's own handlers included)."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    names = ["kbroker.controller", "state.change.logger", "kafka.request.logger", "kbroker.log.cleaner",
             "kbroker.authorizer", "t.a", "t.b"]
    saved_loggers = {n: (list(logging.getLogger(n).handlers), logging.getLogger(n).level,
                         logging.getLogger(n).propagate) for n in names}
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
        if h not in saved[0]:
            h.close()
    for h in saved[0]:
        root.addHandler(h)
    root.setLevel(saved[1])
    for n, (handlers, level, propagate) in saved_loggers.items():
        lg = logging.getLogger(n)
        for h in list(lg.handlers):
            lg.removeHandler(h)
            h.close()
        for h in handlers:
            lg.addHandler(h)
        lg.setLevel(level)
        lg.propagate = propagate
    lc._state.update(keep=None, installed=[])
    record_only_what_is_printed([logging.Handler()])     # pytest's process records everything again
    logging._srcfile = SRCFILE
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = True


def test_shipped_file_is_the_built_in_default():
    assert (REPO / "config" / "logging.properties").read_text() == lc.DEFAULT_PROPERTIES


def test_shipped_routing(tmp_path):
    root, loggers, appenders = lc.parse(lc.DEFAULT_PROPERTIES, str(tmp_path))
    assert root == lc.LoggerSpec(logging.INFO, ["stderr", "kafkaAppender"], True)
    assert loggers == {
        "kafka.request.logger": lc.LoggerSpec(logging.WARNING, ["requestAppender"], False),
        "kbroker.controller": lc.LoggerSpec(logging.INFO, ["controllerAppender", "stderr"], False),
        "state.change.logger": lc.LoggerSpec(logging.INFO, ["stateChangeAppender"], False),
        "kbroker.log.cleaner": lc.LoggerSpec(logging.INFO, ["cleanerAppender"], False),
        "kbroker.authorizer": lc.LoggerSpec(logging.INFO, ["authorizerAppender", "stderr"], False),
    }
    files = {n: a.props["File"][1] for n, a in appenders.items() if a.cls != "ConsoleAppender"}
    assert files == {n: str(tmp_path / f) for n, f in [
        ("kafkaAppender", "server.log"), ("stateChangeAppender", "state-change.log"),
        ("requestAppender", "kafka-request.log"), ("cleanerAppender", "log-cleaner.log"),
        ("controllerAppender", "controller.log"), ("authorizerAppender", "kafka-authorizer.log")]}
    assert {a.props["MaxFileSize"][1] for a in appenders.values() if a.cls == "RollingFileAppender"} == {"100MB"}


@pytest.mark.parametrize("pattern, fmt", [
    ("[%d] %p %m (%c)%n", "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"),
    ("[%d] %p %c: %m%n", "[%(asctime)s] %(levelname)s %(name)s: %(message)s"),
    ("%d{ISO8601} %-5p [%t] %F:%L %M - %m 100%%%n",
     "%(asctime)s %(levelname)-5s [%(threadName)s] %(filename)s:%(lineno)d %(funcName)s - %(message)s 100%%"),
])
def test_conversion_patterns(pattern, fmt):
    assert lc.python_format("k", pattern) == fmt


@pytest.mark.parametrize("text, message", [
    ("log4j.rootLogger=INFO, nowhere\n", "log4j.rootLogger=INFO, nowhere: appender nowhere is not defined"),
    ("log4j.rootLogger=LOUD\n", "log4j.rootLogger=LOUD: unknown level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)"),
    ("log4j.appender.a=org.apache.log4j.net.SyslogAppender\n",
     "log4j.appender.a=org.apache.log4j.net.SyslogAppender: unsupported appender class (ConsoleAppender, "
     "DailyRollingFileAppender, FileAppender, RollingFileAppender)"),
    ("log4j.appender.a=org.apache.log4j.RollingFileAppender\nlog4j.appender.a.MaxFileSize=big\n"
     "log4j.appender.a.File=/tmp/x\nlog4j.rootLogger=INFO, a\n",
     "log4j.appender.a.MaxFileSize=big: expected a size such as 10485760, 100KB, 100MB or 1GB"),
    ("log4j.appender.a=org.apache.log4j.ConsoleAppender\nlog4j.appender.a.layout.ConversionPattern=%X{user} %m\n"
     "log4j.rootLogger=INFO, a\n",
     "log4j.appender.a.layout.ConversionPattern=%X{user} %m: conversion %X{user} is not supported "
     "(%d %p %c %m %n %t %F %L %M)"),
    ("log4j.appender.a=org.apache.log4j.FileAppender\nlog4j.appender.a.File=${user.home}/x.log\n",
     "log4j.appender.a.File=${user.home}/x.log: unknown variable ${user.home} (only ${kafka.logs.dir})"),
    ("log4j.appender.a.File=x.log\n", "log4j.appender.a.*: appender a has no class (log4j.appender.a=...)"),
    ("log4j.appender.a=org.apache.log4j.FileAppender\nlog4j.appender.a.Colour=red\n",
     "log4j.appender.a.Colour: unknown appender property Colour"),
    ("log4j.category.kafka=INFO\n", "log4j.category.kafka: unknown logging setting"),
    ("log4j.additivity.x=maybe\n", "log4j.additivity.x=maybe: expected true or false"),
    ("log4j.appender.a=org.apache.log4j.DailyRollingFileAppender\nlog4j.appender.a.File=/tmp/kb-x.log\n"
     "log4j.appender.a.DatePattern=yyyy-ww\nlog4j.rootLogger=INFO, a\n",
     "log4j.appender.a.DatePattern=yyyy-ww: a DatePattern must start with '.'"),
])
def test_refusals_name_the_key(text, message):
    with pytest.raises(lc.LoggingConfigError) as e:
        parsed = lc.parse(text, "/tmp/unused")
        for a in parsed[2].values():         # appender-level checks happen when the handler is built
            lc.build_handler(a).close()
    assert str(e.value).startswith(message), str(e.value)


def _record(msg, name="t"):
    return logging.LogRecord(name, logging.INFO, __file__, 1, msg, None, None)


def test_size_rotation_keeps_backups_and_drops_the_oldest(tmp_path):
    path = tmp_path / "r.log"
    h = lc.SizeRotatingHandler(str(path), 100, 2)
    h.setFormatter(logging.Formatter("%(message)s"))
    for i in range(20):
        h.handle(_record("line %02d %s" % (i, "x" * 21)))      # 30 chars + newline = 31 bytes: 3 lines a file
    h.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.log", "r.log.1", "r.log.2"]
    got = [path.with_name(n).read_text().splitlines() for n in ("r.log.2", "r.log.1", "r.log")]
    assert [[l[5:7] for l in f] for f in got] == [["12", "13", "14"], ["15", "16", "17"], ["18", "19"]]
    assert all(path.with_name(n).stat().st_size < 100 for n in ("r.log.2", "r.log.1", "r.log"))


def test_loop_flush_writes_a_burst_once_per_loop_turn(tmp_path):
    """The broker's handlers flush when the event loop turns (one write(2) per burst); records from another OS
    thread are flushed at once (the loop's callbacks belong to its own thread)."""
    class Loop:
        def __init__(self):
            self.callbacks = []

        def run_callback(self, fn):
            self.callbacks.append(fn)

    f = lc._LoopFlush()
    f.loop, f.owner, thread = Loop(), 1, [1]
    f.ident = lambda: thread[0]
    path = tmp_path / "s.log"
    h = lc.SizeRotatingHandler(str(path), 0, 0, True, f)
    h.setFormatter(logging.Formatter("%(message)s"))
    for i in range(3):
        h.handle(_record("burst %d" % i))
    assert path.read_text() == "" and len(f.loop.callbacks) == 1          # buffered, one flush scheduled
    f.loop.callbacks.pop()()
    assert path.read_text() == "burst 0\nburst 1\nburst 2\n" and not h.unflushed
    thread[0] = 2                                                         # an offload thread
    h.handle(_record("from a thread"))
    assert path.read_text().endswith("from a thread\n") and f.loop.callbacks == []
    h.close()


def test_size_rotation_counts_an_existing_file(tmp_path):
    path = tmp_path / "r.log"
    path.write_text("y" * 90 + "\n")
    h = lc.SizeRotatingHandler(str(path), 100, 1)
    h.setFormatter(logging.Formatter("%(message)s"))
    h.handle(_record("z" * 20))
    h.close()
    assert (tmp_path / "r.log.1").read_text() == "y" * 90 + "\n" and path.read_text() == "z" * 20 + "\n"


def test_daily_rolling_appender_rolls_to_the_date_pattern_name(tmp_path, monkeypatch):
    text = ("log4j.rootLogger=INFO, d\nlog4j.appender.d=org.apache.log4j.DailyRollingFileAppender\n"
            "log4j.appender.d.File=${kafka.logs.dir}/server.log\nlog4j.appender.d.DatePattern='.'yyyy-MM-dd-HH\n"
            "log4j.appender.d.layout.ConversionPattern=%m%n\n")
    _root, _loggers, appenders = lc.parse(text, str(tmp_path))
    h = lc.build_handler(appenders["d"])
    assert (h.when, h.interval) == ("H", 3600)
    h.handle(_record("first hour"))
    rolled_at = h.rolloverAt
    monkeypatch.setattr(time, "time", lambda: rolled_at + 1)
    h.handle(_record("next hour"))
    h.close()
    name = "server.log." + time.strftime("%Y-%m-%d-%H", time.localtime(rolled_at - 3600))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["server.log", name])
    assert (tmp_path / name).read_text() == "first hour\n"
    assert (tmp_path / "server.log").read_text() == "next hour\n"
    assert h.extMatch.match(name[len("server.log."):])


def test_records_before_install_reach_the_files_once(tmp_path, capsys, clean_logging):
    lc.bootstrap(logging.INFO)
    logging.getLogger("kbroker.config").warning("The configuration 'x' was supplied but isn't a known config.")
    logging.getLogger("kbroker.controller").info("early controller line")
    logging.getLogger("kbroker.config").debug("below the level: kept nowhere")
    lc.install(lc.load(None, str(tmp_path)))
    logging.getLogger("kbroker.controller").info("late controller line")
    logging.getLogger("state.change.logger").info("Controller 0 epoch 1 changed partition [t,0] state")
    logging.getLogger("state.change.logger").log(lc.TRACE, "a replica's change: TRACE is off by default")
    logging.getLogger("kafka.request.logger").debug("Completed request: must not be written")
    err = capsys.readouterr().err.splitlines()
    server = (tmp_path / "server.log").read_text().splitlines()
    controller = (tmp_path / "controller.log").read_text().splitlines()
    assert [l.split("] ", 1)[1] for l in server] == [
        "WARNING The configuration 'x' was supplied but isn't a known config. (kbroker.config)"]
    assert [l.split("] ", 1)[1] for l in controller] == [
        "INFO early controller line (kbroker.controller)", "INFO late controller line (kbroker.controller)"]
    assert [l.split("] ", 1)[1] for l in err] == [
        "WARNING kbroker.config: The configuration 'x' was supplied but isn't a known config.",
        "INFO kbroker.controller: early controller line", "INFO kbroker.controller: late controller line"]
    assert [l.split("] ", 1)[1] for l in (tmp_path / "state-change.log").read_text().splitlines()] == [
        "INFO Controller 0 epoch 1 changed partition [t,0] state (state.change.logger)"]
    assert (tmp_path / "kafka-request.log").read_text() == ""
    assert not logging.getLogger("kafka.request.logger").isEnabledFor(logging.DEBUG)


def test_log_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert lc.log_dir_from("/a/b", {"LOG_DIR": "/c"}) == "/a/b"
    assert lc.log_dir_from(None, {"LOG_DIR": "/c"}) == "/c"
    assert lc.log_dir_from(None, {}) == str(tmp_path / "logs")


def test_logging_config_beside_the_server_config(tmp_path):
    server = tmp_path / "server.properties"
    assert lc.config_path_for(None, str(server)) is None
    (tmp_path / "logging.properties").write_text("")
    assert lc.config_path_for(None, str(server)) == str(tmp_path / "logging.properties")
    assert lc.config_path_for("/x/l.properties", str(server)) == "/x/l.properties"


def test_config_values_block():
    from kbroker.config import BrokerConfig
    cfg = BrokerConfig.from_dict({"broker.id": "7", "ssl.keystore.password": "secret"})
    block = lc.config_values_block(cfg, "0.1.0", "cython").splitlines()
    assert block[0] == "KafkaConfig values (kbroker 0.1.0, kernels: cython): "
    rows = dict(l[1:].split(" = ", 1) for l in block[1:])
    assert rows["broker.id"] == "7" and rows["ssl.keystore.password"] == "[hidden]"
    assert rows["advertised.listeners"] == "null" and rows["num.partitions"] == "1"
    assert all(re.fullmatch(r"\t\S+ = .*", l) for l in block[1:])
    assert [l.split(" = ")[0] for l in block[1:]] == sorted(l.split(" = ")[0] for l in block[1:])


def test_unusable_log_dir_is_a_logging_config_error(tmp_path, clean_logging):
    blocker = tmp_path / "file"
    blocker.write_text("")
    lc.bootstrap(logging.INFO)
    with pytest.raises(lc.LoggingConfigError) as e:
        lc.install(lc.load(None, str(blocker / "logs")))
    assert str(e.value).startswith("cannot open a log file: [Errno 20] Not a directory: '%s" % blocker)


def test_server_exits_1_on_a_logging_config_error_before_touching_the_data_dir(tmp_path):
    """kbroker-server: a logging config it cannot honour stops it (exit 1, the key named) before the broker starts."""
    import os
    import subprocess
    import sys
    (tmp_path / "server.properties").write_text("log.dirs=%s\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                                                % (tmp_path / "data"))
    (tmp_path / "logging.properties").write_text("log4j.rootLogger=LOUD, nowhere\n")
    env = dict(os.environ, LOG_DIR=str(tmp_path / "server-logs"),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run([sys.executable, "-m", "kbroker.cli.server", str(tmp_path / "server.properties")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("kbroker-server: logging configuration error: %s: log4j.rootLogger=LOUD: unknown level"
            % (tmp_path / "logging.properties")) in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logging.properties", "server.properties"]


def test_records_carry_only_what_a_layout_prints(tmp_path, clean_logging):
    """The shipped layouts print no caller, thread or process: those lookups are skipped (~4 of ~11 us a line); a
    layout that prints one (%t, %L) gets it back."""
    lc.install(lc.load(None, str(tmp_path)))
    assert logging._srcfile is None and not logging.logThreads and not logging.logProcesses
    rec = logging.getLogger("t.a").makeRecord("t.a", logging.INFO, "f", 1, "m", (), None)
    assert rec.threadName is None and rec.process is None
    cfg = tmp_path / "log4j.properties"
    cfg.write_text("log4j.rootLogger=INFO, f\nlog4j.appender.f=org.apache.log4j.FileAppender\n"
                   "log4j.appender.f.File=%s\nlog4j.appender.f.layout=org.apache.log4j.PatternLayout\n"
                   "log4j.appender.f.layout.ConversionPattern=[%%d] %%t %%F:%%L %%m%%n\n" % (tmp_path / "x.log"))
    lc.install(lc.load(str(cfg), str(tmp_path)))
    assert logging._srcfile == SRCFILE and logging.logThreads
    logging.getLogger("t.b").warning("where")
    for h in logging.getLogger().handlers:
        h.flush()
    line = (tmp_path / "x.log").read_text().strip().splitlines()[-1]
    assert re.search(r"\] MainThread test_logging_config.py:\d+ where$", line), line
