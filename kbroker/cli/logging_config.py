"""kbroker-server's logging: Kafka's log files, configured from a log4j.properties-style file.

Files (the shipped ``config/logging.properties``, also built in as ``DEFAULT_PROPERTIES``), each under the log
directory and rotated:

    server.log          everything not routed elsewhere (root logger)
    controller.log      the controller (logger ``kbroker.controller`` and below), also on stderr
    state-change.log    ``state.change.logger``: partition state changes to New/Online (controller) and LeaderAndIsr
                        applied (replica manager) at INFO; partitions going Offline/NonExistent, replica state
                        changes, LeaderAndIsr sent and StopReplica at TRACE
    kafka-request.log   ``kafka.request.logger``: one line per completed request, off (WARN) by default
    log-cleaner.log     ``kbroker.log.cleaner``
    kafka-authorizer.log ``kbroker.authorizer`` (ACL decisions), also on stderr

Log directory: ``--log-dir``, else the ``LOG_DIR`` environment variable (Kafka's bin/kafka-run-class.sh reads the
same one), else ``./logs``. It is substituted for ``${kafka.logs.dir}`` / ``${kbroker.logs.dir}`` in the file.

The file's syntax is java.util.Properties (kbroker/config/files.py) with log4j 1.x's keys, a subset:

    log4j.rootLogger=LEVEL, appender...            log4j.logger.<name>=LEVEL[, appender...]
    log4j.additivity.<name>=true|false             log4j.appender.<A>=<class>
    log4j.appender.<A>.File / .MaxFileSize / .MaxBackupIndex / .DatePattern / .Target / .Threshold / .Append
    log4j.appender.<A>.layout=org.apache.log4j.PatternLayout, log4j.appender.<A>.layout.ConversionPattern=...

Classes: ConsoleAppender, RollingFileAppender (size: rolls to <file>.1 ... .<MaxBackupIndex>, log4j's defaults
10MB x 1), DailyRollingFileAppender (time: DatePattern '.'yyyy-MM-dd-HH hourly, '.'yyyy-MM-dd daily,
'.'yyyy-MM-dd-HH-mm each minute; old files kept unless MaxBackupIndex is given, as in log4j). Levels: TRACE (5),
DEBUG, INFO, WARN, ERROR, FATAL, OFF. Pattern conversions: %d (log4j's ISO8601, which is Python's default
asctime: ``2026-12-01 23:59:59,123``), %p (Python's level name: WARNING, CRITICAL), %c, %m, %n (end of line; one
is always written), %t, %F, %L, %M, %%, with widths (%-5p). Anything else is an error naming the key: a logging
setting the broker cannot honour stops startup instead of being dropped.

Startup order (kbroker/cli/server.py): ``bootstrap()`` logs to stderr only and keeps the records, the broker
config is validated (a configuration error touches no disk), then ``install()`` opens the files and writes the
kept records (config warnings) to them too, so server.log starts with the whole story.
"""
import logging
import os
import re
import sys
from collections import namedtuple
from logging.handlers import TimedRotatingFileHandler

from kbroker.cli.logging_records import record_only_what_is_printed
from kbroker.config.files import parse_properties

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
OFF = 100                                   # above CRITICAL (50): nothing passes
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": OFF,
          "ALL": 1}

# Kafka's special loggers keep Kafka's names.
STATE_CHANGE_LOGGER = "state.change.logger"
REQUEST_LOGGER = "kafka.request.logger"

CONSOLE_PATTERN = "[%d] %p %c: %m%n"         # the stderr layout before install() (and the shipped file's)
_BOOTSTRAP_KEEP = 10000                      # records kept for the files until install(): config warnings only

_DEFAULT_FILE = "logging.properties"


class LoggingConfigError(ValueError):
    """A logging configuration the broker cannot honour (the message names the key or the file)."""


def log_dir_from(flag=None, environ=None):
    """The log directory: ``--log-dir``, else $LOG_DIR, else ./logs (absolute)."""
    environ = os.environ if environ is None else environ
    return os.path.abspath(flag or environ.get("LOG_DIR") or "logs")


def config_path_for(flag, server_config):
    """The logging config file: ``--log-config``, else logging.properties next to the server config file (as
    Kafka's config/log4j.properties sits next to config/server.properties), else None: the built-in default."""
    if flag:
        return flag
    if server_config:
        beside = os.path.join(os.path.dirname(os.path.abspath(server_config)), _DEFAULT_FILE)
        if os.path.isfile(beside):
            return beside
    return None


# ------------------------------------------------------------------------------------------------ handlers

class ConsoleHandler(logging.StreamHandler):
    """A ConsoleAppender. The stream is looked up at each record (sys.stderr may be replaced, e.g. by pytest)."""

    def __init__(self, target="System.err"):
        super().__init__()
        self.target = target

    @property
    def stream(self):
        return sys.stdout if self.target == "System.out" else sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


class _LoopFlush:
    """Flushes file handlers once per turn of the gevent event loop instead of once per record.

    A burst of lines written by one greenlet without yielding (the controller creating 10,000 partitions writes
    ~4 state-change lines each) costs one write(2) when the greenlet yields -- at most one time slice (20 ms)
    later -- instead of one per line; a flush was half the cost of a line (measured: ~30 of 60 us under load).
    Records from other OS threads (the offload pool) and records logged before the loop runs are flushed at once:
    the loop's callbacks may only be scheduled from its own thread. A kill -9 can lose the lines of the current
    turn; logging.shutdown() at exit flushes the rest.
    """

    def __init__(self):
        self.pending = []
        self.loop = self.owner = self.ident = None
        try:
            from gevent import get_hub, monkey
            if monkey.is_module_patched("socket"):
                self.ident = monkey.get_original("_thread", "get_ident")
                self.owner = self.ident()
                self.loop = get_hub().loop
        except ImportError:  # pragma: no cover - gevent is a dependency; without it every record is flushed
            pass

    def defer(self, handler):
        """True when ``handler`` will be flushed at the end of this loop turn (else the caller flushes now)."""
        if self.loop is None or self.ident() != self.owner:
            return False
        if not self.pending:
            self.loop.run_callback(self.run)
        self.pending.append(handler)
        return True

    def run(self):
        handlers, self.pending = self.pending, []
        for h in handlers:
            h.flush_now()


class SizeRotatingHandler(logging.Handler):
    """A RollingFileAppender: appends to ``path``; a record that would take the file to ``max_bytes`` or beyond
    first rolls it: path.(n-1) -> path.n ... path -> path.1, the oldest (path.<backups>) dropped; backups = 0
    truncates instead. The size is counted here (characters written since open + the size found at open), so a
    record costs one format and one buffered write, no stat; the flush is once per loop turn (``_LoopFlush``) when
    ``flusher`` is given, else per record.
    """

    def __init__(self, path, max_bytes, backups, append=True, flusher=None):
        super().__init__()
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self.stream = open(path, "a" if append else "w", encoding="utf-8")
        self.size = self.stream.tell()
        self.flusher = flusher
        self.unflushed = False

    def emit(self, record):
        try:
            msg = self.format(record) + "\n"
            if self.max_bytes > 0 and self.size and self.size + len(msg) >= self.max_bytes:
                self.roll()
            self.stream.write(msg)
            self.size += len(msg)
            if not self.unflushed:
                if self.flusher is not None and self.flusher.defer(self):
                    self.unflushed = True
                else:
                    self.stream.flush()
        except Exception:  # noqa: BLE001 - logging must never take the broker down (logging's own rule)
            self.handleError(record)

    def flush_now(self):
        # No handler lock: this runs in the hub (which must never block on a lock), and no greenlet holds the lock
        # across a switch (emit does not yield); the buffered writer has its own lock against the offload threads.
        self.unflushed = False
        stream = self.stream
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):  # a full disk (the next record reports it), or closed meanwhile
                pass

    def flush(self):
        self.flush_now()

    def roll(self):
        self.stream.close()
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                src = "%s.%d" % (self.path, i)
                if os.path.exists(src):
                    os.replace(src, "%s.%d" % (self.path, i + 1))
            os.replace(self.path, self.path + ".1")
        self.stream = open(self.path, "w", encoding="utf-8")
        self.size = 0

    def close(self):
        with self.lock:
            if self.stream is not None:
                self.stream.close()
                self.stream = None
        super().close()


_DATE_FIELDS = (("yyyy", "%Y", r"\d{4}"), ("MM", "%m", r"\d{2}"), ("dd", "%d", r"\d{2}"), ("HH", "%H", r"\d{2}"),
                ("mm", "%M", r"\d{2}"))


def _date_pattern(key, pattern):
    """log4j DatePattern ``'.'yyyy-MM-dd-HH`` -> (when, strftime suffix, regex of a suffix). The roll period is
    the finest field present (mm: each minute, HH: hourly, else daily)."""
    p = pattern.strip()
    if not p.startswith("'.'"):
        raise LoggingConfigError("%s=%s: a DatePattern must start with '.' (e.g. '.'yyyy-MM-dd-HH)" % (key, pattern))
    rest, suffix, regex = p[3:], "", ""
    while rest:
        for field, fmt, rx in _DATE_FIELDS:
            if rest.startswith(field):
                suffix, regex, rest = suffix + fmt, regex + rx, rest[len(field):]
                break
        else:
            if rest[0] in "-_.":
                suffix, regex, rest = suffix + rest[0], regex + re.escape(rest[0]), rest[1:]
            else:
                raise LoggingConfigError("%s=%s: only yyyy MM dd HH mm and - _ . are supported" % (key, pattern))
    when = "M" if "%M" in suffix else "H" if "%H" in suffix else "MIDNIGHT"
    return when, suffix, regex


def _time_rotating(path, date_pattern_key, date_pattern, backups):
    when, suffix, regex = _date_pattern(date_pattern_key, date_pattern)
    h = TimedRotatingFileHandler(path, when=when, backupCount=backups, encoding="utf-8")
    h.suffix = suffix
    h.extMatch = re.compile(r"^%s$" % regex, re.ASCII)
    return h


# ------------------------------------------------------------------------------------------------ layout

_CONVERSION = re.compile(r"%(-?\d+)?([a-zA-Z%])(\{[^}]*\})?")
_FIELDS = {"d": "asctime", "p": "levelname", "c": "name", "m": "message", "t": "threadName", "F": "filename",
           "L": "lineno", "M": "funcName"}


def python_format(key, pattern):
    """A log4j ConversionPattern as a ``logging.Formatter`` format string (%n dropped: one newline per record)."""
    out, pos = [], 0
    for m in _CONVERSION.finditer(pattern):
        out.append(pattern[pos:m.start()].replace("%", "%%"))
        pos = m.end()
        width, conv, braces = m.group(1) or "", m.group(2), m.group(3)
        if conv == "n":
            continue
        if conv == "%":
            out.append("%%")
            continue
        if conv not in _FIELDS or (braces and not (conv == "d" and braces == "{ISO8601}")):
            raise LoggingConfigError("%s=%s: conversion %s is not supported (%%d %%p %%c %%m %%n %%t %%F %%L %%M)"
                                     % (key, pattern, m.group(0)))
        out.append("%%(%s)%s%s" % (_FIELDS[conv], width, "d" if conv == "L" else "s"))
    out.append(pattern[pos:].replace("%", "%%"))
    return "".join(out)


# ------------------------------------------------------------------------------------------------ the file

Appender = namedtuple("Appender", "name cls props")
LoggerSpec = namedtuple("LoggerSpec", "level appenders additivity")

_CLASSES = {"ConsoleAppender", "RollingFileAppender", "DailyRollingFileAppender", "FileAppender"}
_APPENDER_PROPS = {"File", "MaxFileSize", "MaxBackupIndex", "DatePattern", "Target", "Threshold", "Append",
                   "layout", "layout.ConversionPattern", "Encoding", "ImmediateFlush"}
_VARIABLE = re.compile(r"\$\{([^}]*)\}")


def _size(key, text):
    m = re.fullmatch(r"\s*(\d+)\s*(KB|MB|GB)?\s*", text, re.IGNORECASE)
    if not m:
        raise LoggingConfigError("%s=%s: expected a size such as 10485760, 100KB, 100MB or 1GB" % (key, text))
    return int(m.group(1)) * {None: 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}[(m.group(2) or "").upper()
                                                                                    or None]


def _level(key, text):
    name = text.strip().upper()
    if name not in LEVELS:
        raise LoggingConfigError("%s=%s: unknown level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)" % (key, text))
    return LEVELS[name]


def parse(text, log_dir):
    """Parse a logging.properties text -> (root LoggerSpec, {logger name: LoggerSpec}, {name: Appender}).
    LoggingConfigError names the first key it cannot honour."""
    props = parse_properties(text)

    def subst(key, value):
        def one(m):
            if m.group(1) in ("kafka.logs.dir", "kbroker.logs.dir"):
                return log_dir
            raise LoggingConfigError("%s=%s: unknown variable ${%s} (only ${kafka.logs.dir})"
                                     % (key, value, m.group(1)))
        return _VARIABLE.sub(one, value).strip()

    root, loggers, classes, appender_props = None, {}, {}, {}
    additivity = {}
    for key, raw in props.items():
        value = subst(key, raw)
        if key == "log4j.rootLogger":
            root = value
        elif key.startswith("log4j.logger."):
            loggers[key[len("log4j.logger."):]] = (key, value)
        elif key.startswith("log4j.additivity."):
            if value.lower() not in ("true", "false"):
                raise LoggingConfigError("%s=%s: expected true or false" % (key, raw))
            additivity[key[len("log4j.additivity."):]] = value.lower() == "true"
        elif key.startswith("log4j.appender."):
            name, _, prop = key[len("log4j.appender."):].partition(".")
            if not prop:
                cls = value.rsplit(".", 1)[-1]
                if cls not in _CLASSES:
                    raise LoggingConfigError("%s=%s: unsupported appender class (%s)"
                                             % (key, raw, ", ".join(sorted(_CLASSES))))
                classes[name] = cls
            elif prop not in _APPENDER_PROPS:
                raise LoggingConfigError("%s: unknown appender property %s (%s)"
                                         % (key, prop, ", ".join(sorted(_APPENDER_PROPS))))
            else:
                appender_props.setdefault(name, {})[prop] = (key, value)
        elif key in ("log4j.threshold", "log4j.debug"):
            continue                                    # log4j's own diagnostics: nothing to configure here
        else:
            raise LoggingConfigError("%s: unknown logging setting (log4j.rootLogger, log4j.logger.<name>, "
                                     "log4j.additivity.<name>, log4j.appender.<name>[.<property>])" % key)
    for name in appender_props:
        if name not in classes:
            raise LoggingConfigError("log4j.appender.%s.*: appender %s has no class (log4j.appender.%s=...)"
                                     % (name, name, name))
    appenders = {n: Appender(n, c, appender_props.get(n, {})) for n, c in classes.items()}

    def spec(key, value, name):
        parts = [p.strip() for p in value.split(",")]
        level = _level(key, parts[0]) if parts[0] else None
        names = [p for p in parts[1:] if p]
        for a in names:
            if a not in appenders:
                raise LoggingConfigError("%s=%s: appender %s is not defined" % (key, value, a))
        return LoggerSpec(level, names, additivity.get(name, True))

    root_spec = spec("log4j.rootLogger", root or "INFO", "")
    return root_spec, {n: spec(k, v, n) for n, (k, v) in loggers.items()}, appenders


def build_handler(appender, flusher=None):
    """A logging.Handler for ``appender`` (files opened, so created, here); ``flusher``: a _LoopFlush for the
    size-rolled files (None: flushed per record)."""
    p = {k: v for k, (_key, v) in appender.props.items()}
    keyname = "log4j.appender.%s." % appender.name
    if appender.cls == "ConsoleAppender":
        target = p.get("Target", "System.out")
        if target not in ("System.out", "System.err"):
            raise LoggingConfigError("%sTarget=%s: System.out or System.err" % (keyname, target))
        h = ConsoleHandler(target)
    else:
        path = p.get("File")
        if not path:
            raise LoggingConfigError("%sFile: a file appender needs a File" % keyname)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        backups_raw = p.get("MaxBackupIndex")
        if backups_raw is not None and not re.fullmatch(r"\d+", backups_raw):
            raise LoggingConfigError("%sMaxBackupIndex=%s: expected a count >= 0" % (keyname, backups_raw))
        append = p.get("Append", "true").lower() != "false"
        if appender.cls == "RollingFileAppender":
            h = SizeRotatingHandler(path, _size(keyname + "MaxFileSize", p.get("MaxFileSize", "10MB")),
                                    int(backups_raw) if backups_raw is not None else 1, append, flusher)
        elif appender.cls == "DailyRollingFileAppender":
            h = _time_rotating(path, keyname + "DatePattern", p.get("DatePattern", "'.'yyyy-MM-dd"),
                               int(backups_raw) if backups_raw is not None else 0)
        else:                                                   # FileAppender: never rolled
            h = SizeRotatingHandler(path, 0, 0, append, flusher)
    pattern = p.get("layout.ConversionPattern", "%m%n")
    h.setFormatter(logging.Formatter(python_format(keyname + "layout.ConversionPattern", pattern)))
    if "Threshold" in p:
        h.setLevel(_level(keyname + "Threshold", p["Threshold"]))
    h.appender_name = appender.name
    return h


# ------------------------------------------------------------------------------------------------ install

class _Keep(logging.Handler):
    """Keeps the records logged before install() (bounded) so the files get them too."""

    def __init__(self):
        super().__init__(1)
        self.records = []

    def emit(self, record):
        if len(self.records) < _BOOTSTRAP_KEEP:
            self.records.append(record)


_state = {"keep": None, "installed": []}


def bootstrap(level=logging.INFO):
    """Before the configuration is read: records at ``level`` and above go to stderr in the console layout, and
    are kept for install()."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    console = ConsoleHandler("System.err")
    console.setFormatter(logging.Formatter(python_format("console", CONSOLE_PATTERN)))
    keep = _Keep()
    root.addHandler(console)
    root.addHandler(keep)
    root.setLevel(level)
    _state["keep"] = keep
    return console


def load(path, log_dir):
    """Read and parse the logging config (``path`` None = the built-in default); LoggingConfigError on a problem
    (the file named)."""
    if path is None:
        return parse(DEFAULT_PROPERTIES, log_dir)
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
    except OSError as e:
        raise LoggingConfigError("cannot read logging config %s: %s" % (path, e)) from None
    try:
        return parse(text, log_dir)
    except LoggingConfigError as e:
        raise LoggingConfigError("%s: %s" % (path, e)) from None


def install(parsed, root_level=None):
    """Replace the bootstrap handlers with the configuration ``parsed`` (from ``load``): handlers built (files
    created), levels and additivity set, then the records kept since bootstrap() written to every non-console
    handler they reach. ``root_level`` (--log-level) overrides the root logger's level."""
    root_spec, loggers, appenders = parsed
    handlers = {}
    flusher = _LoopFlush()
    try:
        for name in sorted({a for s in [root_spec] + list(loggers.values()) for a in s.appenders}):
            handlers[name] = build_handler(appenders[name], flusher)
    except OSError as e:
        for h in handlers.values():
            h.close()
        raise LoggingConfigError("cannot open a log file: %s" % e) from None
    root = logging.getLogger()
    keep = _state["keep"]
    for h in list(root.handlers):
        root.removeHandler(h)
    for name in _state["installed"]:              # a second install (tests): forget the first one's loggers
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            lg.removeHandler(h)
            h.close()
        lg.setLevel(logging.NOTSET)
        lg.propagate = True
    root.setLevel(root_spec.level if root_level is None else root_level)
    for a in root_spec.appenders:
        root.addHandler(handlers[a])
    for name, s in loggers.items():
        lg = logging.getLogger(name)
        if s.level is not None:
            lg.setLevel(s.level)
        lg.propagate = s.additivity
        for a in s.appenders:
            lg.addHandler(handlers[a])
    _state["installed"] = list(loggers)
    if keep is not None:
        _replay(keep.records)
        _state["keep"] = None
    record_only_what_is_printed(handlers.values())
    return handlers


def _replay(records):
    """Each kept record to the non-console handlers its logger reaches now (the console printed it already)."""
    for rec in records:
        lg = logging.getLogger(rec.name)
        if not lg.isEnabledFor(rec.levelno):
            continue
        while lg is not None:
            for h in lg.handlers:
                if not isinstance(h, ConsoleHandler) and rec.levelno >= h.level:
                    h.handle(rec)
            if not lg.propagate:
                break
            lg = lg.parent


# ------------------------------------------------------------------------------------------------ the startup report

def config_values_block(cfg, version, kernels):
    """Kafka's "KafkaConfig values:" block (KafkaConfig logs it at startup): one tab-indented ``key = value`` line
    per key, sorted, null for unset, passwords [hidden]; kbroker adds its version and kernels to the title."""
    lines = ["KafkaConfig values (kbroker %s, kernels: %s): " % (version, kernels)]
    for name, shown, _source in cfg.describe():
        lines.append("\t%s = %s" % (name, "null" if shown is None else shown))
    return "\n".join(lines)


# The built-in configuration: config/logging.properties, word for word (tests/unit/test_logging_config.py checks).
DEFAULT_PROPERTIES = """\
# kbroker logging -- the model is Kafka's config/log4j.properties: same syntax, same files, same appender names.
# kbroker-server reads this file when it sits next to the server.properties it is started with, or the one
# given with --log-config; without either it uses the same settings built in (kbroker/cli/logging_config.py).
#
# ${kafka.logs.dir} (also ${kbroker.logs.dir}) is the log directory: --log-dir, else the LOG_DIR environment
# variable (as in Kafka's bin/kafka-run-class.sh), else ./logs.
#
# Levels: TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF. Appenders: ConsoleAppender (Target=System.err or
# System.out), RollingFileAppender (MaxFileSize, MaxBackupIndex: rotated by size, server.log.1 ... .N) and
# DailyRollingFileAppender (DatePattern '.'yyyy-MM-dd-HH rolls hourly, '.'yyyy-MM-dd daily; MaxBackupIndex, when
# set, keeps that many). Layout: PatternLayout with %d %p %c %m %n %t and widths such as %-5p.
# Logger names are kbroker's modules (kbroker.controller, kbroker.server.connection, ...), plus Kafka's own
# state.change.logger and kafka.request.logger. kbroker's files roll by size, 100 MB x 10, so the disk they take
# is bounded (Kafka's hourly files are never deleted).

log4j.rootLogger=INFO, stderr, kafkaAppender

# Everything also goes to stderr (a supervisor's or container's log; the test harness reads it).
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %c: %m%n

log4j.appender.kafkaAppender=org.apache.log4j.RollingFileAppender
log4j.appender.kafkaAppender.File=${kafka.logs.dir}/server.log
log4j.appender.kafkaAppender.MaxFileSize=100MB
log4j.appender.kafkaAppender.MaxBackupIndex=10
log4j.appender.kafkaAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.kafkaAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.stateChangeAppender=org.apache.log4j.RollingFileAppender
log4j.appender.stateChangeAppender.File=${kafka.logs.dir}/state-change.log
log4j.appender.stateChangeAppender.MaxFileSize=100MB
log4j.appender.stateChangeAppender.MaxBackupIndex=10
log4j.appender.stateChangeAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.stateChangeAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.requestAppender=org.apache.log4j.RollingFileAppender
log4j.appender.requestAppender.File=${kafka.logs.dir}/kafka-request.log
log4j.appender.requestAppender.MaxFileSize=100MB
log4j.appender.requestAppender.MaxBackupIndex=10
log4j.appender.requestAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.requestAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.cleanerAppender=org.apache.log4j.RollingFileAppender
log4j.appender.cleanerAppender.File=${kafka.logs.dir}/log-cleaner.log
log4j.appender.cleanerAppender.MaxFileSize=100MB
log4j.appender.cleanerAppender.MaxBackupIndex=10
log4j.appender.cleanerAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.cleanerAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.controllerAppender=org.apache.log4j.RollingFileAppender
log4j.appender.controllerAppender.File=${kafka.logs.dir}/controller.log
log4j.appender.controllerAppender.MaxFileSize=100MB
log4j.appender.controllerAppender.MaxBackupIndex=10
log4j.appender.controllerAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.controllerAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

log4j.appender.authorizerAppender=org.apache.log4j.RollingFileAppender
log4j.appender.authorizerAppender.File=${kafka.logs.dir}/kafka-authorizer.log
log4j.appender.authorizerAppender.MaxFileSize=100MB
log4j.appender.authorizerAppender.MaxBackupIndex=10
log4j.appender.authorizerAppender.layout=org.apache.log4j.PatternLayout
log4j.appender.authorizerAppender.layout.ConversionPattern=[%d] %p %m (%c)%n

# One line per completed request ("Completed request:{api_key=...} ... totalTime:...") at DEBUG: set this logger
# to DEBUG to switch the request log on. At WARN (the default) the connection skips it at the cost of one level
# check per request.
log4j.logger.kafka.request.logger=WARN, requestAppender
log4j.additivity.kafka.request.logger=false

# The controller: controller.log (and stderr), not server.log.
log4j.logger.kbroker.controller=INFO, controllerAppender, stderr
log4j.additivity.kbroker.controller=false

# Partition state changes, written by the controller (partitions becoming New or Online at INFO; partitions going
# Offline or NonExistent, replica state changes and each LeaderAndIsr sent at TRACE) and by every broker's replica
# manager (LeaderAndIsr applied at INFO, StopReplica at TRACE). INFO as in Kafka >= 2 (0.10.1 shipped TRACE): set
# TRACE for every line.
log4j.logger.state.change.logger=INFO, stateChangeAppender
log4j.additivity.state.change.logger=false

log4j.logger.kbroker.log.cleaner=INFO, cleanerAppender
log4j.additivity.kbroker.log.cleaner=false

# ACL decisions: denials at INFO, allowed operations at DEBUG (Kafka's kafka.authorizer.logger); also on stderr.
log4j.logger.kbroker.authorizer=INFO, authorizerAppender, stderr
log4j.additivity.kbroker.authorizer=false
"""
