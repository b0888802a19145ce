"""kbroker-console-producer: stdin lines -> records, like Kafka's kafka-console-producer.sh.

    kbroker-console-producer --bootstrap-server HOST:PORT --topic T [--property parse.key=true]
        [--property key.separator=:] [--property ignore.error=true] [--property parse.headers=true]
        [--property null.marker=NULL] [--compression-codec [gzip|snappy|lz4|zstd|none]]
        [--request-required-acks -1|0|1] [--batch-size BYTES] [--request-timeout-ms MS]

One record per line (``\\n``; a trailing ``\\r`` is dropped and a last line without newline still counts, as Java's
``BufferedReader.readLine`` does; an empty line is an empty value). Kafka 3.x's LineMessageReader: with
``parse.headers=true`` the line starts with the headers up to the first ``headers.delimiter`` (default TAB), split at
``headers.separator`` (default ``,``) into ``key<headers.key.separator>value`` (default ``:``; no separator: a null
value); then, with ``parse.key=true``, the key up to the first ``key.separator`` (default TAB); the rest is the value.
A line without a delimiter it needs is an error ("No key separator found on line number N: '...'", "No headers
delimiter found ...", exit 1) unless ``ignore.error=true``, which then takes no key (no headers) from it. A key, value
or header value equal to ``null.marker`` (unset by default) is null; a header key equal to it is an error.

Batching: whatever lines are *already readable* on stdin are gathered (``select`` with a zero timeout) up to
``MAX_PENDING`` lines, then sent; an interactive user gets each line sent as typed, a pipe gets big batches. Lines
are grouped per partition into v2 batches of at most ``--batch-size`` bytes (Kafka's batch.size default, 16384) and
sent with one Produce per leader carrying at most one batch per partition (Produce v3+ allows no more).

Partitioning: keyed records go to ``(murmur2(key) & 0x7fffffff) % partitions`` (Kafka's DefaultPartitioner, so a
key lands where a Java/librdkafka-murmur2 producer would put it); unkeyed ones round robin over all partitions.

The topic's partitions come from Metadata with auto-creation allowed (a broker with auto.create.topics.enable
creates it, answering LEADER_NOT_AVAILABLE until leaders exist; retried for up to 10 s). ``--request-required-acks``
defaults to -1 (all), the Kafka 3.x console default. A failed record is reported on stderr like Kafka's
ErrorLoggingCallback ("Error when sending message to topic T with key: null, value: 5 bytes with error: ...") and
the tool carries on; the exit status is then 1 (Kafka exits 0 -- scripts need to notice lost lines).
"""
import argparse
import os
import select
import sys
import time

from kbroker import errors
from kbroker.client.partitioner import partition_for_key
from kbroker.client.simple import SimpleClient, make_batch

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MAX_PENDING = 10000
READ_SIZE = 1 << 16
# Per-record overhead in a v2 batch, for sizing batches before encoding: length, attributes, timestamp/offset
# deltas, key/value lengths, header count -- 5 to 21 bytes; 21 keeps batches under --batch-size.
RECORD_OVERHEAD = 21


class ProducerError(Exception):
    pass


def parse_properties(items):
    out = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep:
            raise ProducerError("Invalid property %r: expected key=value" % item)
        out[k.strip()] = v
    return out


def build_parser():
    p = argparse.ArgumentParser(prog="kbroker-console-producer",
                                description="Read lines from stdin and produce them to a topic.")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", required=True,
                   metavar="HOST:PORT")
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="parse.key, key.separator, parse.headers, headers.delimiter, headers.separator, "
                        "headers.key.separator, null.marker, ignore.error")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default="none", choices=sorted(CODECS),
                   help="compression codec (gzip when given without a value)")
    p.add_argument("--request-required-acks", type=int, default=-1, choices=(-1, 0, 1))
    p.add_argument("--batch-size", type=int, default=16384, help="max bytes of one record batch")
    p.add_argument("--request-timeout-ms", type=int, default=1500,
                   help="how long the broker may wait for acks (Kafka's default: 1500)")
    return p


class LineParser:
    """Turns raw lines into (key, value) -- (key, value, headers) with parse.headers -- following Kafka's
    LineMessageReader properties (module docstring)."""

    def __init__(self, props):
        def flag(name):
            return props.get(name, "false").strip().lower() == "true"

        def text(name, default):
            return props.get(name, default).encode("utf-8")
        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.separator = text("key.separator", "\t")
        self.headers_delimiter = text("headers.delimiter", "\t")
        self.headers_separator = text("headers.separator", ",")
        self.headers_key_separator = text("headers.key.separator", ":")
        marker = props.get("null.marker")
        self.null_marker = None if marker is None else marker.encode("utf-8")
        for on, name, value in ((self.parse_key, "key.separator", self.separator),
                                (self.parse_headers, "headers.delimiter", self.headers_delimiter),
                                (self.parse_headers, "headers.separator", self.headers_separator),
                                (self.parse_headers, "headers.key.separator", self.headers_key_separator)):
            if on and not value:
                raise ProducerError("%s must not be empty" % name)
        self.line_number = 0

    def _part(self, enabled, line, start, demarcation, name):
        """Kafka's LineMessageReader.parse: the text from ``start`` to ``demarcation``, or None."""
        if not enabled:
            return None
        i = line.find(demarcation, start)
        if i < 0:
            if self.ignore_error:
                return None
            raise ProducerError("No %s found on line number %d: '%s'"
                                % (name, self.line_number, line.decode("utf-8", "replace")))
        return line[start:i]

    def _null(self, value):
        return None if value is not None and value == self.null_marker else value

    def _headers(self, text):
        out = []
        for h in text.split(self.headers_separator):
            k, sep, v = h.partition(self.headers_key_separator)
            if self.null_marker is not None and k == self.null_marker:
                raise ProducerError("Header keys should not be equal to the null marker '%s' as they can't be null"
                                    % self.null_marker.decode("utf-8", "replace"))
            out.append((k.decode("utf-8", "replace"), self._null(v) if sep else None))
        return out

    def __call__(self, line):
        self.line_number += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        headers = self._part(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        start = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(self.parse_key, line, start, self.separator, "key separator")
        start += 0 if key is None else len(key) + len(self.separator)
        if not self.parse_headers:
            return self._null(key), self._null(line[start:])
        out_headers = self._headers(headers) if headers is not None and headers != self.null_marker else ()
        return self._null(key), self._null(line[start:]), out_headers


class Partitioner:
    def __init__(self, num_partitions):
        self.n = num_partitions
        self.next = 0

    def __call__(self, key):
        if key is not None:
            return partition_for_key(key, self.n)
        p = self.next
        self.next = (p + 1) % self.n
        return p


def chunk_records(records, batch_size):
    """Split [(key, value[, headers])] into lists whose estimated encoded size stays <= batch_size (at least one
    each)."""
    chunks, cur, size = [], [], 0
    for rec in records:
        key, value = rec[0], rec[1]
        n = RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
        for hk, hv in (rec[2] if len(rec) > 2 else ()):
            n += 10 + len(hk.encode("utf-8")) + (len(hv) if hv else 0)     # two varint lengths, 5 bytes each
        if cur and size + n > batch_size:
            chunks.append(cur)
            cur, size = [], 0
        cur.append(rec)
        size += n
    if cur:
        chunks.append(cur)
    return chunks


class ConsoleProducer:
    def __init__(self, client, topic, codec=0, acks=-1, batch_size=16384, timeout_ms=30000, err=None):
        self.client = client
        self.topic = topic
        self.codec = codec
        self.acks = acks
        self.batch_size = batch_size
        self.timeout_ms = timeout_ms
        self.err = err or sys.stderr
        self.sent = 0
        self.failed = 0
        self.partitioner = Partitioner(len(self._partitions()))

    def _partitions(self, deadline_s=10.0):
        deadline = time.monotonic() + deadline_s
        delay = 0.05
        while True:
            try:
                parts = self.client.partitions_for(self.topic, refresh=True, allow_auto_topic_creation=True)
                for p in parts:
                    self.client.leader_for(self.topic, p)
                return parts
            except (errors.LeaderNotAvailable, errors.UnknownTopicOrPartition):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def send(self, records):
        """Send [(key, value[, headers])]: partition, batch, one Produce per leader per round."""
        by_partition = {}
        for rec in records:
            by_partition.setdefault(self.partitioner(rec[0]), []).append(rec)
        queues = {p: chunk_records(recs, self.batch_size) for p, recs in by_partition.items()}
        while queues:
            round_ = {p: q.pop(0) for p, q in queues.items()}
            queues = {p: q for p, q in queues.items() if q}
            batches = {p: make_batch(recs, self.codec) for p, recs in round_.items()}
            results = self.client.produce_batches(self.topic, batches, self.acks, self.timeout_ms)
            for p, recs in round_.items():
                r = results.get(p)
                if r is not None and r.error_code == 0:
                    self.sent += len(recs)
                    continue
                code = r.error_code if r is not None else -1
                msg = (r.error_message if r is not None else None) or errors.error_name(code)
                for rec in recs:
                    key, value = rec[0], rec[1]
                    self.failed += 1
                    print("ERROR Error when sending message to topic %s with key: %s, value: %s with error: %s: %s"
                          % (self.topic, "null" if key is None else "%d bytes" % len(key),
                             "null" if value is None else "%d bytes" % len(value),
                             errors.error_for_code(code).__name__, msg), file=self.err)


def read_lines(fd, parse, sink, max_pending=MAX_PENDING):
    """Read ``fd`` to EOF, calling ``sink([(key, value)...])`` whenever no more input is immediately available."""
    buf = b""
    pending = []

    def take(lines):
        for line in lines:
            try:
                pending.append(parse(line))
            except ProducerError:
                if pending:
                    sink(pending)  # the lines before the bad one are sent, as Kafka sends them line by line
                raise

    while True:
        chunk = os.read(fd, READ_SIZE)
        if not chunk:
            break
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        take(lines)
        if pending and (len(pending) >= max_pending or not select.select([fd], [], [], 0)[0]):
            sink(pending)
            pending = []
    if buf:
        take([buf])
    if pending:
        sink(pending)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # --producer.config / --command-config client.properties (kbroker/client/client_config.py)
        from kbroker.client import client_config
        argv = client_config.apply(argv)
    except ValueError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    args = build_parser().parse_args(argv)
    producer = None
    try:
        props = parse_properties(args.property)
        parse = LineParser(props)
        codec = CODECS[args.compression_codec]
        with SimpleClient(args.bootstrap_server, client_id="console-producer") as client:
            producer = ConsoleProducer(client, args.topic, codec, args.request_required_acks, args.batch_size,
                                       args.request_timeout_ms)
            read_lines(sys.stdin.buffer.fileno(), parse, producer.send)
    except KeyboardInterrupt:
        return 130 if producer is None else (1 if producer.failed else 0)
    except ProducerError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    except (errors.KafkaError, OSError, ValueError) as e:
        print("ERROR %s" % (getattr(e, "message", None) or e), file=sys.stderr)
        return 1
    return 1 if producer.failed else 0


if __name__ == "__main__":
    sys.exit(main())
