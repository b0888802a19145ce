"""kbroker-console-consumer: print a topic's records to stdout, like Kafka's kafka-console-consumer.sh.

    kbroker-console-consumer --bootstrap-server HOST:PORT --topic T [--from-beginning] [--max-messages N]
        [--partition P [--offset O|earliest|latest]] [--timeout-ms MS] [--group G] [--consumer-property K=V]
        [--property print.key=true] [--property key.separator=SEP] [--property print.timestamp=true] ...

Without ``--group`` no consumer group: this tool assigns itself every partition of the topic (or just
``--partition``) and commits nothing. Start positions: the log end of each partition (ListOffsets -1), the log start
with ``--from-beginning`` (-2), or ``--offset`` (a number, ``earliest`` or ``latest``; needs ``--partition``, excludes
``--from-beginning``, as in Kafka). A partition whose position falls out of range (retention or DeleteRecords
removed it) restarts from the same end it started from, like ``auto.offset.reset``.

With ``--group G`` (Kafka's ``group.id``) the tool is a member of consumer group G (librdkafka's group consumer,
``GroupConsumer``): it subscribes to the topic (with ``--partition``, assigns that partition), starts from the
group's committed offsets (else the log start with ``--from-beginning``, else the log end: ``auto.offset.reset``),
commits what it printed (auto-commit every 5 s and at exit, Kafka's console consumer defaults), so a second run of
the same group resumes after the last record printed. ``--offset`` with ``--group`` overrides the committed offset
of ``--partition``. ``--consumer-property`` and ``--consumer.config`` take Kafka's consumer keys (translated for
librdkafka by rdkafka_props.py).

Loop: one Fetch per leader (Fetch v4-v12, 500 ms long poll, min_bytes 1), records printed in offset order per
partition, stdout flushed after every fetch. Exits after ``--max-messages`` records, after ``--timeout-ms`` without
any new record (Kafka's meaning of the option), on SIGINT/SIGTERM, or when stdout is closed; then prints
``Processed a total of N messages`` on stderr and exits 0.

Formatting follows Kafka's DefaultMessageFormatter: optional ``CreateTime:<ts>``/``LogAppendTime:<ts>``
(``print.timestamp``), ``Partition:<p>`` (``print.partition``), ``Offset:<o>`` (``print.offset``), headers as
``k:v`` joined by ``headers.separator`` or ``NO_HEADERS`` (``print.headers``), the key (``print.key``), the value
(``print.value``, default true), joined by ``key.separator`` (default TAB) and ended by ``line.separator`` (default
newline). Null keys/values print as ``null.literal`` (default ``null``). Bytes are written as they are.
"""
import argparse
import signal
import sys
import time

from kbroker import errors
from kbroker.client.simple import SimpleClient

LATEST = -1
EARLIEST = -2
POLL_MS = 500


class ConsumerError(Exception):
    pass


def parse_properties(items):
    out = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep:
            raise ConsumerError("Invalid property %r: expected key=value" % item)
        out[k.strip()] = v
    return out


def _unescape(s):
    # Kafka's formatter takes key.separator/line.separator literally; shells make "\t" and "\n" hard to type, so
    # the two common escapes are accepted as well.
    return s.replace("\\t", "\t").replace("\\n", "\n")


def _true(props, key, default=False):
    v = props.get(key)
    return default if v is None else v.strip().lower() == "true"


class Formatter:
    def __init__(self, props):
        self.print_key = _true(props, "print.key")
        self.print_value = _true(props, "print.value", True)
        self.print_timestamp = _true(props, "print.timestamp")
        self.print_partition = _true(props, "print.partition")
        self.print_offset = _true(props, "print.offset")
        self.print_headers = _true(props, "print.headers")
        self.key_separator = _unescape(props.get("key.separator", "\t")).encode("utf-8")
        self.line_separator = _unescape(props.get("line.separator", "\n")).encode("utf-8")
        self.headers_separator = _unescape(props.get("headers.separator", ",")).encode("utf-8")
        self.null_literal = props.get("null.literal", "null").encode("utf-8")

    def format(self, partition, rec):
        """One record (a FetchedRecord or a 5/6-tuple) -> bytes, line separator included."""
        offset, ts, key, value, headers = rec[0], rec[1], rec[2], rec[3], rec[4]
        ts_type = rec[5] if len(rec) > 5 else 0
        # Kafka's DefaultMessageFormatter: the printed fields joined by key.separator, the last one followed by
        # line.separator (print.value=false leaves no trailing key.separator); nothing printed -> nothing written.
        out = []
        if self.print_timestamp:
            if ts < 0:
                out.append(b"NO_TIMESTAMP")
            else:
                out.append(b"%s:%d" % (b"LogAppendTime" if ts_type == 1 else b"CreateTime", ts))
        if self.print_partition:
            out.append(b"Partition:%d" % partition)
        if self.print_offset:
            out.append(b"Offset:%d" % offset)
        if self.print_headers:
            if headers:
                out.append(self.headers_separator.join(
                    (k.encode("utf-8") if isinstance(k, str) else bytes(k)) + b":" +
                    (self.null_literal if v is None else bytes(v)) for k, v in headers))
            else:
                out.append(b"NO_HEADERS")
        if self.print_key:
            out.append(self.null_literal if key is None else bytes(key))
        if self.print_value:
            out.append(self.null_literal if value is None else bytes(value))
        if not out:
            return b""
        return self.key_separator.join(out) + self.line_separator


def build_parser():
    p = argparse.ArgumentParser(prog="kbroker-console-consumer",
                                description="Print the records of a topic (no consumer group).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--topic", required=True)
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--max-messages", type=int, default=None)
    p.add_argument("--partition", type=int, default=None)
    p.add_argument("--offset", default=None, help="a number, earliest or latest (needs --partition)")
    p.add_argument("--timeout-ms", type=int, default=None, help="exit after this long without a new record")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--group", default=None, help="the consumer group id (group.id) of the consumer")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a consumer property (Kafka's key names); only with --group")
    return p


def parse_args(argv):
    args = build_parser().parse_args(argv)
    if args.offset is not None:
        if args.partition is None:
            raise ConsumerError("The partition is required when offset is specified.")
        if args.from_beginning:
            raise ConsumerError("Options from-beginning and offset cannot be specified together.")
        o = args.offset.strip().lower()
        if o == "earliest":
            args.start = EARLIEST
        elif o == "latest":
            args.start = LATEST
        else:
            try:
                args.start = int(o)
            except ValueError:
                raise ConsumerError("The provided offset value '%s' is incorrect. Valid values are 'earliest', "
                                    "'latest', or a non-negative long." % args.offset)
            if args.start < 0:
                raise ConsumerError("The provided offset value '%s' is incorrect. Valid values are 'earliest', "
                                    "'latest', or a non-negative long." % args.offset)
        args.reset = EARLIEST if args.start == EARLIEST else LATEST
    else:
        args.start = args.reset = EARLIEST if args.from_beginning else LATEST
    args.formatter = Formatter(parse_properties(args.property))
    return args


class _Stop(Exception):
    pass


class ConsoleConsumer:
    def __init__(self, client, args, out):
        self.client = client
        self.args = args
        self.out = out
        self.count = 0

    def _partitions(self, deadline):
        delay = 0.05
        while True:
            try:
                parts = self.client.partitions_for(self.args.topic, refresh=True, allow_auto_topic_creation=True)
                for p in parts:
                    self.client.leader_for(self.args.topic, p)
                if self.args.partition is not None:
                    if self.args.partition not in parts:
                        raise ConsumerError("Partition %d of topic %s does not exist"
                                            % (self.args.partition, self.args.topic))
                    return [self.args.partition]
                return parts
            except (errors.LeaderNotAvailable, errors.UnknownTopicOrPartition):
                if deadline is not None and time.monotonic() >= deadline:
                    return []
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def run(self):
        args = self.args
        timeout_s = None if args.timeout_ms is None else args.timeout_ms / 1000.0
        last_record = time.monotonic()
        parts = self._partitions(None if timeout_s is None else last_record + timeout_s)
        if not parts:
            return
        if args.start >= 0:
            positions = {p: args.start for p in parts}
        else:
            positions = {p: o for p, (o, _ts) in self.client.list_offsets(args.topic, {
                p: args.start for p in parts}).items()}
        while True:
            if args.max_messages is not None and self.count >= args.max_messages:
                return
            wait_ms = POLL_MS
            if timeout_s is not None:
                left = last_record + timeout_s - time.monotonic()
                if left <= 0:
                    return
                wait_ms = max(1, min(POLL_MS, int(left * 1000)))
            results = self.client.fetch_many(args.topic, positions, max_wait_ms=wait_ms)
            got = False
            reset = []
            for p in sorted(results):
                r = results[p]
                if r.error_code == errors.OFFSET_OUT_OF_RANGE:
                    reset.append(p)
                    continue
                if r.error_code:
                    if errors.error_for_code(r.error_code).retriable:
                        continue
                    raise errors.error_for_code(r.error_code)(
                        "fetching %s-%d: %s" % (args.topic, p, errors.error_name(r.error_code)))
                for rec in r.records:
                    self.out.write(args.formatter.format(p, rec))
                    self.count += 1
                    got = True
                    if args.max_messages is not None and self.count >= args.max_messages:
                        self.out.flush()
                        return
                positions[p] = r.next_offset
            if reset:
                fresh = self.client.list_offsets(args.topic, {p: args.reset for p in reset})
                positions.update((p, o) for p, (o, _ts) in fresh.items())
            if got:
                self.out.flush()
                last_record = time.monotonic()
            elif any(r.error_code for r in results.values()):
                time.sleep(0.1)  # a retriable error answered at once: do not spin


class GroupConsumer:
    """``--group``: the same loop and output as ConsoleConsumer over librdkafka's group consumer (module
    docstring). ``conf``: the librdkafka configuration from ``--consumer.config`` / ``--consumer-property``."""

    def __init__(self, args, out, conf):
        self.args = args
        self.out = out
        self.count = 0
        self.conf = dict(conf)
        self.conf.update({"bootstrap.servers": args.bootstrap_server, "group.id": args.group,
                          "client.id": "console-consumer", "enable.auto.commit": True,
                          "auto.commit.interval.ms": 5000, "enable.partition.eof": False})
        self.conf.setdefault("auto.offset.reset", "earliest" if args.reset == EARLIEST else "latest")

    def run(self):
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, Consumer, TopicPartition

        from kbroker.client import rdkafka_props
        args = self.args
        consumer = rdkafka_props.check(Consumer, self.conf, "consumer config")
        try:
            if args.partition is not None:
                start = OFFSET_STORED if args.offset is None else \
                    {EARLIEST: OFFSET_BEGINNING, LATEST: OFFSET_END}.get(args.start, args.start)
                consumer.assign([TopicPartition(args.topic, args.partition, start)])
            else:
                consumer.subscribe([args.topic])
            self._loop(consumer)
        finally:
            consumer.close()            # commits what was printed (auto-commit on)

    def _loop(self, consumer):
        args = self.args
        timeout_s = None if args.timeout_ms is None else args.timeout_ms / 1000.0
        last_record = time.monotonic()
        while args.max_messages is None or self.count < args.max_messages:
            wait = POLL_MS / 1000.0
            if timeout_s is not None:
                left = last_record + timeout_s - time.monotonic()
                if left <= 0:
                    return
                wait = min(wait, left)
            msg = consumer.poll(wait)
            if msg is None:
                continue
            if msg.error():
                if msg.error().fatal():
                    raise errors.KafkaError(str(msg.error()))
                continue
            ts_type, ts = msg.timestamp()
            rec = (msg.offset(), ts if ts_type else -1, msg.key(), msg.value(), msg.headers() or (),
                   1 if ts_type == 2 else 0)       # librdkafka: 1 CreateTime, 2 LogAppendTime, 0 none
            self.out.write(args.formatter.format(msg.partition(), rec))
            self.out.flush()
            self.count += 1
            last_record = time.monotonic()


def _group_conf(args, config_path):
    """The librdkafka configuration of ``--consumer.config`` and ``--consumer-property`` (Kafka's keys)."""
    from kbroker.client import rdkafka_props
    try:
        conf = rdkafka_props.load_translated(config_path) if config_path else {}
        conf.update(rdkafka_props.translate(rdkafka_props.parse_pairs(args.consumer_property, "consumer property")))
    except rdkafka_props.RdkafkaConfigError as e:
        raise ConsumerError(str(e)) from None
    return conf


def _raise_stop(signum, frame):
    raise _Stop()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # --consumer.config / --command-config client.properties (kbroker/client/client_config.py)
        from kbroker.client import client_config
        argv, config_path = client_config.take(argv)
        if config_path is not None:
            client_config.install(config_path)
    except ValueError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    out = sys.stdout.buffer
    consumer = None
    status = 0
    old = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        args = parse_args(argv)
        if args.group is not None:
            consumer = GroupConsumer(args, out, _group_conf(args, config_path))
            consumer.run()
        else:
            if args.consumer_property:
                raise ConsumerError("--consumer-property needs --group (the group consumer)")
            with SimpleClient(args.bootstrap_server, client_id="console-consumer") as client:
                consumer = ConsoleConsumer(client, args, out)
                consumer.run()
    except (KeyboardInterrupt, _Stop):
        pass
    except BrokenPipeError:
        # stdout closed (e.g. piped into head): stop quietly; point stdout at devnull so the interpreter's final
        # flush does not raise again.
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except ConsumerError as e:
        print(str(e), file=sys.stderr)
        status = 1
    except (errors.KafkaError, OSError) as e:
        print("ERROR Error processing message, terminating consumer process: %s"
              % (getattr(e, "message", None) or e), file=sys.stderr)
        status = 1
    finally:
        signal.signal(signal.SIGTERM, old)
        try:
            out.flush()
        except (BrokenPipeError, ValueError):
            pass
    if consumer is not None:
        print("Processed a total of %d messages" % consumer.count, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
