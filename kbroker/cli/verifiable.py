"""``kbroker-admin verifiable-producer`` and ``verifiable-consumer``: Kafka's kafka-verifiable-producer.sh and
kafka-verifiable-consumer.sh on librdkafka (confluent-kafka): one JSON object per line on stdout, the events
Kafka's system tests (kafkatest's VerifiableProducer / VerifiableConsumer services) read.

Every event is compact JSON (Jackson's layout, no spaces) starting with ``"timestamp"`` (epoch ms) and ``"name"``:

verifiable-producer --topic T --bootstrap-server H:P [--max-messages N] [--throughput R] [--acks A]
    [--producer.config FILE] [--message-create-time MS] [--value-prefix P] [--repeating-keys N]

    {"timestamp":..,"name":"startup_complete"}
    {"timestamp":..,"name":"producer_send_success","key":null,"value":"0","partition":0,"offset":4,"topic":"T"}
    {"timestamp":..,"name":"producer_send_error","exception":"<error class>","message":"..","topic":"T","key":null,"value":"5"}
    {"timestamp":..,"name":"shutdown_complete"}
    {"timestamp":..,"name":"tool_data","sent":N,"acked":N,"target_throughput":R,"avg_throughput":X}

Values are the sequence numbers "0", "1", ... (``P.0``, ``P.1`` with ``--value-prefix P``); keys are null, or
``str(i % N)`` with ``--repeating-keys N``. ``--max-messages`` -1 (default) sends until SIGTERM/SIGINT;
``--throughput`` caps records/s (-1: none); ``--acks`` defaults to -1 (all). ``--message-create-time MS`` gives
record i the timestamp MS + ms elapsed since start. avg_throughput = 1000 * acked / elapsed ms. The exception of a
failed send is librdkafka's error name (e.g. ``KafkaError._MSG_TIMED_OUT``), not a Java class.

verifiable-consumer --topic T --group-id G --bootstrap-server H:P [--group-instance-id ID] [--max-messages N]
    [--session-timeout MS] [--verbose] [--enable-autocommit] [--reset-policy earliest|latest|none]
    [--assignment-strategy CLASS] [--consumer.config FILE]

    {"timestamp":..,"name":"startup_complete"}
    {"timestamp":..,"name":"partitions_assigned","partitions":[{"topic":"T","partition":0}]}
    {"timestamp":..,"name":"records_consumed","count":10,"partitions":[{"topic":"T","partition":0,"count":10,"minOffset":0,"maxOffset":9}]}
    {"timestamp":..,"name":"record_data","key":null,"value":"0","topic":"T","partition":0,"offset":0}   (--verbose)
    {"timestamp":..,"name":"offsets_committed","offsets":[{"topic":"T","partition":0,"offset":10}],"success":true}
    {"timestamp":..,"name":"partitions_revoked","partitions":[...]}
    {"timestamp":..,"name":"shutdown_complete"}

Without ``--enable-autocommit`` each polled batch is committed synchronously (the offsets after the last record
of each partition) and reported; a failed commit has ``"success":false`` and ``"error"``. With it, librdkafka's
background commits are reported (its commit callback). ``--max-messages`` stops after that many records (the batch
that reaches it is cut there, as Kafka does). ``--session-timeout`` defaults to 30000, ``--reset-policy`` to
earliest. Diagnostics go to stderr; stdout carries only events.
"""
import json
import signal
import sys
import threading
import time

from kbroker.client import rdkafka_props
from kbroker.cli.common import ArgParser, UsageError, usage_error


class Events:
    """Prints one event per line; thread-safe (delivery callbacks and the main loop both print)."""

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.lock = threading.Lock()

    def emit(self, name, **fields):
        line = json.dumps(dict({"timestamp": int(time.time() * 1000), "name": name}, **fields),
                          separators=(",", ":"))
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()


def _text(b):
    return None if b is None else b.decode("utf-8", "replace")


def _stop_on_signals(event):
    def stop(signum, frame):
        event.set()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _base_props(args, config_path):
    props = rdkafka_props.load(config_path) if config_path else {}
    bootstrap = args.bootstrap_server or args.broker_list
    if bootstrap:
        props["bootstrap.servers"] = bootstrap
    if "bootstrap.servers" not in props:
        raise UsageError("Missing required argument \"[bootstrap-server]\"")
    return props


# ---------------------------------------------------------------------------------------------- producer

def producer_parser():
    p = ArgParser(prog="kbroker-admin verifiable-producer",
                  description="Produces increasing integers to the topic and prints JSON events to stdout.")
    p.add_argument("--topic", required=True)
    p.add_argument("--bootstrap-server", metavar="HOST:PORT")
    p.add_argument("--broker-list", metavar="HOST:PORT")
    p.add_argument("--max-messages", type=int, default=-1)
    p.add_argument("--throughput", type=int, default=-1)
    p.add_argument("--acks", type=int, default=-1)
    p.add_argument("--producer.config", dest="producer_config", metavar="CONFIG_FILE")
    p.add_argument("--message-create-time", type=int, default=-1)
    p.add_argument("--value-prefix", type=int, default=None)
    p.add_argument("--repeating-keys", type=int, default=None)
    return p


def producer_main(argv, out=None):
    from confluent_kafka import KafkaException, Producer
    events = Events(out)
    try:
        args = producer_parser().parse_args(argv)
        props = _base_props(args, args.producer_config)
        props["acks"] = str(args.acks)
        conf = rdkafka_props.translate(props, args.producer_config or "producer config")
        producer = rdkafka_props.check(Producer, conf, "producer config")
    except UsageError as e:
        usage_error(producer_parser(), e)
        return 1
    except rdkafka_props.RdkafkaConfigError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    stopping = threading.Event()
    _stop_on_signals(stopping)
    counts = {"sent": 0, "acked": 0}

    def report(key, value):
        def done(err, msg):
            if err is None:
                counts["acked"] += 1
                events.emit("producer_send_success", key=key, value=value, partition=msg.partition(),
                            offset=msg.offset(), topic=msg.topic())
            else:
                events.emit("producer_send_error", exception="KafkaError.%s" % err.name(), message=err.str(),
                            topic=args.topic, key=key, value=value)
        return done

    events.emit("startup_complete")
    start = time.monotonic()
    i = 0
    try:
        while not stopping.is_set() and (args.max_messages < 0 or i < args.max_messages):
            if args.throughput > 0:
                due = start + i / args.throughput
                while time.monotonic() < due and not stopping.is_set():
                    producer.poll(min(0.01, max(0.0, due - time.monotonic())))
            value = "%d.%d" % (args.value_prefix, i) if args.value_prefix is not None else str(i)
            key = str(i % args.repeating_keys) if args.repeating_keys else None
            kwargs = {"key": key, "on_delivery": report(key, value)}
            if args.message_create_time >= 0:
                kwargs["timestamp"] = args.message_create_time + int((time.monotonic() - start) * 1000)
            while True:
                try:
                    producer.produce(args.topic, value, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            counts["sent"] += 1
            i += 1
            producer.poll(0)
        while producer.flush(0.5) > 0 and not stopping.is_set():
            pass
        producer.flush(30)
    except KafkaException as e:
        print("ERROR %s" % e, file=sys.stderr)
    elapsed_ms = max((time.monotonic() - start) * 1000.0, 1.0)
    events.emit("shutdown_complete")
    events.emit("tool_data", sent=counts["sent"], acked=counts["acked"], target_throughput=args.throughput,
                avg_throughput=1000.0 * counts["acked"] / elapsed_ms)
    return 0


# ---------------------------------------------------------------------------------------------- consumer

def consumer_parser():
    p = ArgParser(prog="kbroker-admin verifiable-consumer",
                  description="Consumes a topic in a group and prints JSON events to stdout.")
    p.add_argument("--topic", required=True)
    p.add_argument("--group-id", required=True)
    p.add_argument("--group-instance-id")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT")
    p.add_argument("--broker-list", metavar="HOST:PORT")
    p.add_argument("--max-messages", type=int, default=-1)
    p.add_argument("--session-timeout", type=int, default=30000)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--enable-autocommit", action="store_true")
    p.add_argument("--reset-policy", default="earliest", choices=("earliest", "latest", "none"))
    p.add_argument("--assignment-strategy", default="org.apache.kafka.clients.consumer.RangeAssignor")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="CONFIG_FILE")
    return p


def _partitions(tps):
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


def _committed_event(events, err, tps):
    fields = {"offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset} for tp in tps],
              "success": err is None}
    if err is not None:
        fields["error"] = str(err)
    events.emit("offsets_committed", **fields)


def consumer_main(argv, out=None):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    events = Events(out)
    try:
        args = consumer_parser().parse_args(argv)
        props = _base_props(args, args.consumer_config)
        props.update({"group.id": args.group_id, "session.timeout.ms": str(args.session_timeout),
                      "enable.auto.commit": "true" if args.enable_autocommit else "false",
                      "auto.offset.reset": args.reset_policy,
                      "partition.assignment.strategy": args.assignment_strategy})
        if args.group_instance_id:
            props["group.instance.id"] = args.group_instance_id
        conf = rdkafka_props.translate(props, args.consumer_config or "consumer config")
        if args.enable_autocommit:
            conf["on_commit"] = lambda err, tps: _committed_event(events, err, tps)
        consumer = rdkafka_props.check(Consumer, conf, "consumer config")
    except UsageError as e:
        usage_error(consumer_parser(), e)
        return 1
    except rdkafka_props.RdkafkaConfigError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1
    stopping = threading.Event()
    _stop_on_signals(stopping)
    events.emit("startup_complete")
    consumer.subscribe([args.topic], on_assign=lambda c, tps: events.emit("partitions_assigned",
                                                                            partitions=_partitions(tps)),
                       on_revoke=lambda c, tps: events.emit("partitions_revoked", partitions=_partitions(tps)))
    consumed = 0
    try:
        while not stopping.is_set() and (args.max_messages < 0 or consumed < args.max_messages):
            batch = [m for m in consumer.consume(500, 0.2) if m.error() is None]
            if args.max_messages >= 0:
                batch = batch[:args.max_messages - consumed]
            if not batch:
                continue
            consumed += len(batch)
            summary = {}
            for m in batch:
                s = summary.setdefault((m.topic(), m.partition()), {"topic": m.topic(), "partition": m.partition(),
                                                                    "count": 0, "minOffset": m.offset(),
                                                                    "maxOffset": m.offset()})
                s["count"] += 1
                s["maxOffset"] = max(s["maxOffset"], m.offset())
                s["minOffset"] = min(s["minOffset"], m.offset())
                if args.verbose:
                    events.emit("record_data", key=_text(m.key()), value=_text(m.value()), topic=m.topic(),
                                partition=m.partition(), offset=m.offset())
            events.emit("records_consumed", count=len(batch), partitions=list(summary.values()))
            if not args.enable_autocommit:
                offsets = [TopicPartition(s["topic"], s["partition"], s["maxOffset"] + 1) for s in summary.values()]
                try:
                    consumer.commit(offsets=offsets, asynchronous=False)
                    _committed_event(events, None, offsets)
                except KafkaException as e:
                    _committed_event(events, e.args[0] if e.args else e, offsets)
    finally:
        consumer.close()
        events.emit("shutdown_complete")
    return 0
