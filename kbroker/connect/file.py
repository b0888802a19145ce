"""FileStreamSource and FileStreamSink (Kafka's connect/file), the quickstart's connectors.

FileStreamSourceConnector -- keys ``file`` (standard input when absent or empty), ``topic`` (required, non-empty,
one topic: no comma), ``batch.size`` (INT, default 2000, >= 1: at most that many records per ``poll``). One task.
Each line becomes a record with a null key and the line (str, schema STRING, without its line terminator) as value;
lines end at "\n", "\r\n" or a lone "\r" (Kafka's extractLine); a last line without a terminator waits for one.
Source partition ``{"filename": <file>}``, offset ``{"position": <byte position after the line terminator>}``; a
restarted task seeks to the stored position, so lines already committed are not read again. Standard input has no
offsets (partition and offset None, as Kafka's). When nothing is ready ``poll`` waits up to 1 s and returns None.
Bytes that are not UTF-8 are replaced by U+FFFD (Java's decoder does the same).

FileStreamSinkConnector -- keys ``file`` (standard output when absent or empty) plus the sink keys every connector
has (``topics`` / ``topics.regex``). ``put`` appends ``value`` + "\n" per record (a str as it is, None as "null",
bytes decoded as UTF-8, anything else ``str()``: Java's println of the value); ``flush`` flushes and fsyncs, so the
worker commits the consumer's offsets only after the lines are on disk.
"""
import os
import select
import sys
import threading

from kbroker.connect.api import SinkConnector, SinkTask, SourceConnector, SourceTask
from kbroker.connect.exceptions import ConfigError, ConnectError
from kbroker.connect.records import SourceRecord

FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
DEFAULT_BATCH_SIZE = 2000
_READ_CHUNK = 64 * 1024   # bytes read per os.read: a batch of 2000 short lines fits in one or two


def _version():
    from importlib import metadata
    try:
        return metadata.version("kbroker")
    except metadata.PackageNotFoundError:
        return "unknown"


def _string_schema():
    try:
        from kbroker.connect.data import Schema
        return Schema.STRING_SCHEMA
    except (ImportError, AttributeError):   # K1's data model not present: schemaless strings
        return None


class FileStreamSourceConnector(SourceConnector):
    def version(self):
        return _version()

    def config_def(self):
        from kbroker.connect.configdef import ConfigDef, NonEmptyString, Range
        return (ConfigDef()
                .define("file", "STRING", None, importance="HIGH",
                        documentation="Source filename. If not specified, the standard input will be used")
                .define("topic", "STRING", validator=NonEmptyString(), importance="HIGH",
                        documentation="The topic to publish data to")
                .define("batch.size", "INT", DEFAULT_BATCH_SIZE, validator=Range.at_least(1), importance="LOW",
                        documentation="The maximum number of records the source task can read from the file each "
                                      "time it is polled"))

    def start(self, props):
        parsed = self.config_def().parse(props)
        topic = parsed["topic"]
        if "," in topic:
            raise ConfigError("topic", topic, "'topic' in FileStreamSourceConnector configuration requires "
                                              "definition of a single topic")
        # The task gets the connector's own keys (name, connector.class, tasks.max, file, topic, ...), as Kafka 4's
        # FileStreamSourceConnector.taskConfigs returns them; the task reads file, topic and batch.size from them.
        self._config = dict(props)

    def task_class(self):
        return FileStreamSourceTask

    def task_configs(self, max_tasks):
        return [dict(self._config)]   # one file, one reader

    def stop(self):
        pass


class FileStreamSourceTask(SourceTask):
    def version(self):
        return _version()

    def start(self, props):
        self.filename = props.get("file") or None
        self.topic = props["topic"]
        self.batch_size = int(props.get("batch.size", DEFAULT_BATCH_SIZE))
        if self.batch_size < 1:
            raise ConfigError("batch.size", self.batch_size, "Value must be at least 1")
        self._fd = None
        self._position = 0          # byte position of the first byte of self._buffer in the file
        self._buffer = b""
        self._stop = threading.Event()
        self._lock = threading.Lock()   # stop() may come from another thread while poll() reads
        self._schema = _string_schema()

    def _partition(self):
        return None if self.filename is None else {FILENAME_FIELD: self.filename}

    def _open(self):
        if self.filename is None:
            self._fd = sys.stdin.fileno()
            return True
        try:
            fd = os.open(self.filename, os.O_RDONLY)
        except FileNotFoundError:
            return False
        stored = self.context.offset_storage_reader().offset(self._partition()) if self.context else None
        position = 0
        if stored is not None:
            value = stored.get(POSITION_FIELD)
            if not isinstance(value, int) or isinstance(value, bool):
                os.close(fd)
                raise ConnectError("Offset position is the incorrect type: %r" % (value,))
            position = value
        os.lseek(fd, position, os.SEEK_SET)
        self._fd = fd
        self._position = position
        self._buffer = b""
        return True

    def poll(self):
        with self._lock:
            if self._stop.is_set():
                return None
            opened = self._fd is not None or self._open()
            chunk = self._read() if opened else b""
            if chunk:
                self._buffer += chunk
            records = self._extract() if opened else []
        if not opened:
            self._stop.wait(1.0)   # Kafka waits a second and retries when the file does not exist yet
            return None
        if records:
            return records
        if not chunk:
            self._stop.wait(1.0)
        return None

    def _read(self):
        if self.filename is None:
            ready, _, _ = select.select([self._fd], [], [], 1.0)
            if not ready:
                return b""
        try:
            return os.read(self._fd, _READ_CHUNK)
        except OSError as e:
            raise ConnectError("Error while reading from %s: %s" % (self.filename or "stdin", e)) from None

    def _extract(self):
        records = []
        buf = self._buffer
        start = 0
        n = len(buf)
        while len(records) < self.batch_size:
            i = start
            while i < n and buf[i] not in (0x0A, 0x0D):
                i += 1
            if i >= n:
                break
            if buf[i] == 0x0D:
                if i + 1 >= n:
                    break          # "\r" at the end of what we have: maybe "\r\n", wait for the next byte
                end = i + 2 if buf[i + 1] == 0x0A else i + 1
            else:
                end = i + 1
            line = buf[start:i].decode("utf-8", errors="replace")
            position = self._position + end
            offset = None if self.filename is None else {POSITION_FIELD: position}
            records.append(SourceRecord(self.topic, None, value_schema=self._schema, value=line,
                                        source_partition=self._partition(), source_offset=offset))
            start = end
        self._buffer = buf[start:]
        self._position += start
        return records

    def stop(self):
        self._stop.set()
        with self._lock:
            fd, self._fd = getattr(self, "_fd", None), None
            if fd is not None and self.filename is not None:
                os.close(fd)


class FileStreamSinkConnector(SinkConnector):
    def version(self):
        return _version()

    def config_def(self):
        from kbroker.connect.configdef import ConfigDef
        return ConfigDef().define("file", "STRING", None, importance="HIGH",
                                  documentation="Destination filename. If not specified, the standard output will "
                                                "be used")

    def start(self, props):
        self.config_def().parse(props)
        self._config = dict(props)          # every task gets the connector's own keys, as Kafka 4's

    def task_class(self):
        return FileStreamSinkTask

    def task_configs(self, max_tasks):
        return [dict(self._config) for _ in range(max_tasks)]

    def stop(self):
        pass


def _render(value):
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class FileStreamSinkTask(SinkTask):
    def version(self):
        return _version()

    def start(self, props):
        self.filename = props.get("file") or None
        self._lock = threading.Lock()
        if self.filename is None:
            self._out = sys.stdout.buffer
        else:
            try:
                self._out = open(self.filename, "ab")
            except OSError as e:
                raise ConnectError("Couldn't find or create file '%s' for FileStreamSinkTask: %s"
                                   % (self.filename, e)) from None

    def put(self, records):
        data = b"".join((_render(r.value) + "\n").encode("utf-8") for r in records)
        if data:
            with self._lock:
                self._out.write(data)
                # Kafka's PrintStream hands each line to the file at once (readers see it now); fsync waits
                # for flush() (every offset.flush.interval.ms, 10 s in the quickstart).
                self._out.flush()

    def flush(self, offsets):
        with self._lock:
            self._out.flush()
            if self.filename is not None:
                os.fsync(self._out.fileno())

    def stop(self):
        out = getattr(self, "_out", None)
        if out is not None and self.filename is not None:
            with self._lock:
                out.close()
