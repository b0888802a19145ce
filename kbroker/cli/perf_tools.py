"""``kbroker-admin producer-perf-test`` and ``consumer-perf-test``: Kafka's kafka-producer-perf-test.sh
(ProducerPerformance) and kafka-consumer-perf-test.sh (ConsumerPerformance) on librdkafka (confluent-kafka), with
Kafka 3.x's flags and output lines.

producer-perf-test --topic T --num-records N --throughput R|-1 (--record-size B | --payload-file F
    [--payload-delimiter D]) [--producer-props k=v ...] [--producer.config FILE] [--bootstrap-server H:P]
    [--transactional-id ID] [--transaction-duration-ms MS] [--print-metrics] [--reporting-interval MS]

Records have a null key and a value of ``--record-size`` random upper-case letters (one payload made at start, as
Kafka does) or one of the payloads of ``--payload-file`` (split at ``--payload-delimiter``, default newline; picked
at random per record). ``--throughput`` caps records/s (-1: no cap). Latency is librdkafka's own measure from
``produce()`` to the acknowledgement (``Message.latency()``), in whole ms. Every ``--reporting-interval`` ms (5000,
Kafka's fixed value; the option is kbroker's) a progress line, then the total after the final flush:

    %d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.
    %d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.

MB is 1024*1024 bytes. Percentiles come from at most 500,000 sampled latencies (every N/500000-th record, Kafka's
sampling): ``sorted[int(p * size)]``. With ``--transactional-id`` or ``--transaction-duration-ms`` > 0 the records
go in transactions committed every duration (default 3000 ms). A failed record is reported on stderr and makes the
exit status 1 (Kafka prints the stack trace and exits 0).

consumer-perf-test --bootstrap-server H:P --topic T --messages N [--group G] [--fetch-size B] [--from-latest]
    [--socket-buffer-size B] [--consumer.config FILE] [--show-detailed-stats] [--hide-header]
    [--reporting-interval MS] [--date-format FMT] [--timeout MS] [--print-metrics]

Subscribes (group ``perf-consumer-<random>`` unless ``--group``), reads until N records or until ``--timeout`` ms
(default 10000) pass without a record. Header, then one summary line (``--hide-header`` drops the header):

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    %s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f

``--show-detailed-stats``: the header starts ``time, threadId,`` and instead of the summary a progress line every
``--reporting-interval`` ms (default 5000) while records arrive: ``time, 0, total MB, interval MB/s, total
records, interval records/s, rebalance ms in the interval, fetch ms, fetch MB/s, fetch records/s``. Bytes are key
+ value sizes. Times use ``--date-format`` (Java SimpleDateFormat letters y M d H m s S; default
``yyyy-MM-dd HH:mm:ss:SSS``). rebalance.time.ms is the time from subscribing until partitions were assigned.
"""
import argparse
import json
import random
import re
import sys
import time

from kbroker.client import rdkafka_props
from kbroker.cli.common import ArgParser, UsageError, usage_error

MB = 1024.0 * 1024.0
MAX_SAMPLES = 500000
DEFAULT_REPORTING_MS = 5000


# ---------------------------------------------------------------------------------------------- producer

class ProducerStats:
    """Kafka's ProducerPerformance.Stats: totals, a reporting window, sampled latencies (ms)."""

    def __init__(self, num_records, reporting_ms, out):
        self.start = self.window_start = time.monotonic()
        self.sampling = max(1, num_records // min(max(num_records, 1), MAX_SAMPLES))
        self.latencies = []
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.w_count = self.w_bytes = self.w_total_latency = self.w_max_latency = 0
        self.reporting_s = reporting_ms / 1000.0
        self.out = out

    def record(self, iteration, latency_ms, size):
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.w_count += 1
        self.w_bytes += size
        self.w_total_latency += latency_ms
        self.w_max_latency = max(self.w_max_latency, latency_ms)
        if iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        if time.monotonic() - self.window_start >= self.reporting_s:
            self.print_window()
            self.window_start = time.monotonic()
            self.w_count = self.w_bytes = self.w_total_latency = self.w_max_latency = 0

    def print_window(self):
        elapsed_ms = max((time.monotonic() - self.window_start) * 1000.0, 1e-3)
        print("%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency."
              % (self.w_count, 1000.0 * self.w_count / elapsed_ms, 1000.0 * self.w_bytes / elapsed_ms / MB,
                 self.w_total_latency / max(self.w_count, 1), float(self.w_max_latency)), file=self.out, flush=True)

    def print_total(self):
        elapsed_ms = max((time.monotonic() - self.start) * 1000.0, 1e-3)
        lat = sorted(self.latencies) or [0]
        percs = [lat[min(int(p * len(lat)), len(lat) - 1)] for p in (0.5, 0.95, 0.99, 0.999)]
        print("%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %d ms 50th, "
              "%d ms 95th, %d ms 99th, %d ms 99.9th."
              % (self.count, 1000.0 * self.count / elapsed_ms, 1000.0 * self.bytes / elapsed_ms / MB,
                 self.total_latency / max(self.count, 1), float(self.max_latency), *percs), file=self.out, flush=True)


def producer_parser():
    p = ArgParser(prog="kbroker-admin producer-perf-test", description="A tool to verify producer performance.")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--record-size", type=int)
    size.add_argument("--payload-file")
    p.add_argument("--payload-delimiter", default="\\n")
    p.add_argument("--throughput", type=float, required=True, help="records/s; -1 for no throttling")
    p.add_argument("--producer-props", nargs="+", default=[], metavar="PROP-NAME=PROP-VALUE")
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT")
    p.add_argument("--print-metrics", action="store_true")
    p.add_argument("--transactional-id")
    p.add_argument("--transaction-duration-ms", type=int, default=0)
    p.add_argument("--reporting-interval", type=int, default=DEFAULT_REPORTING_MS, metavar="MS",
                   help="progress line interval (kbroker; Kafka's is fixed at 5000)")
    return p


def _payloads(args):
    if args.payload_file is None:
        if args.record_size is None:
            raise UsageError("Either --record-size or --payload-file must be specified but not both.")
        if args.record_size < 0:
            raise UsageError("--record-size must not be negative")
        rnd = random.Random()
        return [bytes(rnd.randint(65, 90) for _ in range(args.record_size))]
    delimiter = args.payload_delimiter.encode().decode("unicode_escape")
    print("Reading payloads from: %s" % args.payload_file)
    try:
        with open(args.payload_file, encoding="utf-8") as f:
            payloads = [s.encode() for s in f.read().split(delimiter) if s]
    except OSError as e:
        raise rdkafka_props.RdkafkaConfigError("cannot read %s: %s" % (args.payload_file, e.strerror)) from None
    if not payloads:
        raise UsageError("File is empty")
    print("Number of messages read: %d" % len(payloads))
    return payloads


def _producer_conf(args):
    props = {}
    if args.producer_config:
        props.update(rdkafka_props.load(args.producer_config))
    props.update(rdkafka_props.parse_pairs(args.producer_props, "--producer-props"))
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    if "bootstrap.servers" not in props:
        raise UsageError("bootstrap.servers is required: --bootstrap-server, --producer-props or --producer.config")
    conf = rdkafka_props.translate(props, args.producer_config or "--producer-props")
    if args.transactional_id or args.transaction_duration_ms > 0:
        conf["transactional.id"] = args.transactional_id or "performance-producer-default-transactional-id"
    if args.print_metrics:
        conf["statistics.interval.ms"] = 1000
    return conf


def print_metrics(stats_json, out):
    """librdkafka's last statistics (the numeric top-level entries and per-broker request counts), in Kafka's
    ``Metric Name  Value`` table layout."""
    if not stats_json:
        return
    doc = json.loads(stats_json)
    rows = [("%s:%s" % (doc.get("type", "client"), k), v) for k, v in sorted(doc.items())
            if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for name, b in sorted(doc.get("brokers", {}).items()):
        rows += [("broker:%s:%s" % (name, k), b[k]) for k in ("tx", "txbytes", "rx", "rxbytes") if k in b]
    width = max(len(n) for n, _ in rows) if rows else 20
    print("\n%-*s : %s" % (width, "Metric Name", "Value"), file=out)
    for name, value in rows:
        print("%-*s : %s" % (width, name, value), file=out)


def producer_main(argv, out=None):
    from confluent_kafka import KafkaException, Producer
    out = out or sys.stdout
    try:
        args = producer_parser().parse_args(argv)
        if args.num_records < 0:
            raise UsageError("--num-records must not be negative")
        payloads = _payloads(args)
        conf = _producer_conf(args)
        last_stats = []
        if args.print_metrics:
            conf["stats_cb"] = last_stats.append
        producer = rdkafka_props.check(Producer, conf, "producer config")
    except UsageError as e:
        usage_error(producer_parser(), e)
        return 1
    except rdkafka_props.RdkafkaConfigError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1

    stats = ProducerStats(args.num_records, args.reporting_interval, out)
    failures = []
    transactional = "transactional.id" in conf
    txn_s = (args.transaction_duration_ms or 3000) / 1000.0
    rnd = random.Random()

    def callback(iteration, size):
        def done(err, msg):
            if err is not None:
                failures.append(err)
                if len(failures) <= 10:
                    print("ERROR: record %d: %s" % (iteration, err), file=sys.stderr)
                return
            stats.record(iteration, int((msg.latency() or 0.0) * 1000), size)
        return done

    try:
        if transactional:
            producer.init_transactions(30)
            producer.begin_transaction()
            txn_start = time.monotonic()
        start = time.monotonic()
        for i in range(args.num_records):
            if args.throughput > 0:
                due = start + i / args.throughput
                while time.monotonic() < due:
                    producer.poll(min(0.01, max(0.0, due - time.monotonic())))
            payload = payloads[0] if len(payloads) == 1 else payloads[rnd.randrange(len(payloads))]
            while True:
                try:
                    producer.produce(args.topic, payload, on_delivery=callback(i, len(payload)))
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if transactional and time.monotonic() - txn_start >= txn_s:
                producer.commit_transaction(60)
                producer.begin_transaction()
                txn_start = time.monotonic()
        if transactional:
            producer.commit_transaction(60)
        producer.flush()
    except KafkaException as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    stats.print_total()
    if args.print_metrics:
        producer.poll(1.1)   # one more statistics callback after the last acknowledgement
        print_metrics(last_stats[-1] if last_stats else None, out)
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------------- consumer

_JAVA_DATE = [("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S")]


def format_time(ms, java_format):
    """A java.text.SimpleDateFormat pattern (letters y M d H m s S) applied to epoch ``ms`` in local time."""
    t = time.localtime(ms / 1000.0)
    out = java_format
    out = re.sub("S+", lambda m: "%0*d" % (len(m.group()), ms % 1000) if len(m.group()) <= 3 else m.group(), out)
    for java, c in _JAVA_DATE:
        out = out.replace(java, time.strftime(c, t))
    return out


def consumer_parser():
    p = ArgParser(prog="kbroker-admin consumer-perf-test", description="A tool to verify consumer performance.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT")
    p.add_argument("--broker-list", help=argparse.SUPPRESS)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", default=None)
    p.add_argument("--fetch-size", type=int, default=1024 * 1024)
    p.add_argument("--from-latest", action="store_true")
    p.add_argument("--socket-buffer-size", type=int, default=2 * 1024 * 1024)
    p.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    p.add_argument("--num-fetch-threads", type=int, help=argparse.SUPPRESS)
    p.add_argument("--consumer.config", dest="consumer_config", metavar="CONFIG-FILE")
    p.add_argument("--print-metrics", action="store_true")
    p.add_argument("--show-detailed-stats", action="store_true")
    p.add_argument("--hide-header", action="store_true")
    p.add_argument("--messages", type=int, required=True)
    p.add_argument("--reporting-interval", type=int, default=DEFAULT_REPORTING_MS)
    p.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS")
    p.add_argument("--timeout", "--fetch-timeout", dest="timeout", type=int, default=10000)
    return p


def _header(detailed):
    extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    if detailed:
        return "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec" + extra
    return "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec" + extra


def progress_line(date, bytes_read, last_bytes, messages, last_messages, start_ms, end_ms, join_ms):
    """Kafka's printConsumerProgress (thread id 0) + printExtendedProgress."""
    elapsed = max(end_ms - start_ms, 1)
    interval_mb = (bytes_read - last_bytes) / MB
    fetch_ms = elapsed - join_ms
    fetch_mb = 1000.0 * interval_mb / fetch_ms if fetch_ms > 0 else 0.0
    fetch_msgs = 1000.0 * (messages - last_messages) / fetch_ms if fetch_ms > 0 else 0.0
    return "%s, %d, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f" % (
        date, 0, bytes_read / MB, 1000.0 * interval_mb / elapsed, messages,
        1000.0 * (messages - last_messages) / elapsed, join_ms, fetch_ms, fetch_mb, fetch_msgs)


def consumer_main(argv, out=None):
    from confluent_kafka import Consumer
    out = out or sys.stdout
    try:
        args = consumer_parser().parse_args(argv)
        bootstrap = args.bootstrap_server or args.broker_list
        if not bootstrap:
            raise UsageError("Missing required argument \"[bootstrap-server]\"")
        if args.messages < 0:
            raise UsageError("--messages must not be negative")
        props = rdkafka_props.load(args.consumer_config) if args.consumer_config else {}
        props.update({"bootstrap.servers": bootstrap,
                      "group.id": args.group or props.get("group.id") or "perf-consumer-%d" % random.randrange(100000),
                      "receive.buffer.bytes": str(args.socket_buffer_size),
                      "max.partition.fetch.bytes": str(args.fetch_size),
                      "auto.offset.reset": "latest" if args.from_latest else "earliest",
                      "check.crcs": "false"})
        props.setdefault("client.id", "perf-consumer-client")
        conf = rdkafka_props.translate(props, args.consumer_config or "consumer config")
        last_stats = []
        if args.print_metrics:
            conf.update({"statistics.interval.ms": 1000, "stats_cb": last_stats.append})
        consumer = rdkafka_props.check(Consumer, conf, "consumer config")
    except UsageError as e:
        usage_error(consumer_parser(), e)
        return 1
    except rdkafka_props.RdkafkaConfigError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    if args.threads is not None or args.num_fetch_threads is not None:
        print("WARNING: option [threads] and [num-fetch-threads] have been deprecated and will be ignored by the "
              "test", file=out)
    if not args.hide_header:
        print(_header(args.show_detailed_stats), file=out, flush=True)

    now_ms = lambda: int(time.time() * 1000)   # noqa: E731
    join = {"start": now_ms(), "total": 0, "round": 0}

    def assigned(c, partitions):
        spent = now_ms() - join["start"]
        join["total"] += spent
        join["round"] += spent

    def revoked(c, partitions):
        join["start"] = now_ms()

    start_ms = now_ms()
    consumer.subscribe([args.topic], on_assign=assigned, on_revoke=revoked)
    messages = bytes_read = last_messages = last_bytes = 0
    last_report = last_consumed = now_ms()
    while messages < args.messages and now_ms() - last_consumed <= args.timeout:
        batch = consumer.consume(min(10000, args.messages - messages), 0.1)
        if batch:
            last_consumed = now_ms()
        for m in batch:
            if m.error() is not None:
                continue
            messages += 1
            bytes_read += len(m.key() or b"") + len(m.value() or b"")
            if now_ms() - last_report >= args.reporting_interval:
                if args.show_detailed_stats:
                    t = now_ms()
                    print(progress_line(format_time(t, args.date_format), bytes_read, last_bytes, messages,
                                        last_messages, last_report, t, join["round"]), file=out, flush=True)
                join["round"] = 0
                last_report, last_messages, last_bytes = now_ms(), messages, bytes_read
    if messages < args.messages:
        print("WARNING: Exiting before consuming the expected number of messages: timeout (%d ms) exceeded. You can "
              "use the --timeout option to increase the timeout." % args.timeout, file=out)
    end_ms = now_ms()
    consumer.close()
    if not args.show_detailed_stats:
        elapsed_s = max(end_ms - start_ms, 1) / 1000.0
        fetch_ms = (end_ms - start_ms) - join["total"]
        total_mb = bytes_read / MB
        print("%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f" % (
            format_time(start_ms, args.date_format), format_time(end_ms, args.date_format), total_mb,
            total_mb / elapsed_s, messages, messages / elapsed_s, join["total"], fetch_ms,
            total_mb / (fetch_ms / 1000.0) if fetch_ms > 0 else 0.0,
            messages / (fetch_ms / 1000.0) if fetch_ms > 0 else 0.0), file=out, flush=True)
    if args.print_metrics:
        print_metrics(last_stats[-1] if last_stats else None, out)
    return 0
