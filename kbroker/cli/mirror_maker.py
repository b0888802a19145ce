"""kbroker-mirror-maker: Kafka 0.10's MirrorMaker (kafka-mirror-maker.sh) on librdkafka (confluent-kafka).

    kbroker-mirror-maker --consumer.config source.properties --producer.config target.properties
        --whitelist 'A|B' [--num.streams 1] [--offset.commit.interval.ms 60000] [--abort.on.send.failure true]
        [--message.handler module.Class [--message.handler.args ARGS]]
        [--consumer.rebalance.listener module.Class [--rebalance.listener.args ARGS]]

What it does (Kafka 0.10.1 docs 6.1 "Mirroring data between clusters"): ``--num.streams`` consumers in one group
(``group.id`` of the consumer config, required; ``client.id`` gets ``-<stream>`` appended) read the topics of the
source cluster whose names match ``--whitelist`` and one shared producer writes every record to the topic of the
same name on the target cluster, with the same key, value, timestamp and headers. The key picks the target
partition (Kafka's murmur2, so order per key is kept); source and target offsets differ.

No loss (the invariant): a stream commits a source offset only after the producer has acknowledged every record
consumed before it. Every ``--offset.commit.interval.ms`` (default 60000), when its partitions are revoked and when
it stops, a stream waits until every record it has produced is acknowledged (its own count of outstanding records:
Java's ``producer.flush()`` semantics; librdkafka's ``flush()`` would also wait for the other streams' later
records) and only then commits, for each partition, the offset after the last record it handed to the producer. A
record the producer refuses at once (e.g. larger than ``message.max.bytes``) is a failed send too. A ``kill -9`` at
any moment therefore loses nothing: the records after the last commit are consumed and sent again (duplicates, at
most one commit interval's worth). With ``--abort.on.send.failure true`` (the default) a failed send stops the
mirror before its offset is committed (exit status 1); with ``false`` the record is dropped, counted and reported on
stderr, and offsets move past it (Kafka's behaviour).

Defaults set unless the files say otherwise (Kafka 0.10's MirrorMaker's, for the same reasons): consumer
``enable.auto.commit=false`` (with ``true``, librdkafka commits in the background, but only the offsets the mirror
has stored after a flush, so the invariant holds; Kafka 0.10 warned of data loss there); producer
``acks=all``, ``max.in.flight.requests.per.connection=1`` (retries keep order), ``partitioner=murmur2_random``
(the Java client's placement of keyed records). A full producer queue blocks the stream (Kafka's
``max.block.ms=Long.MaxValue``).

Topics: ``--whitelist`` is a regular expression matched against the whole topic name (Java's ``matches``); commas
mean '|', spaces and surrounding quotes are dropped (Kafka 0.10's TopicFilter), and a lone ``*`` means every
topic. ``--blacklist`` mirrors every topic that does not match (Kafka 0.10 allowed it only with the old consumer).
Internal topics are never mirrored. The source's topic list is read at start and again every
``metadata.max.age.ms`` of the consumer config (default 300000, Java's), so new matching topics are picked up; a
source that cannot be read is tried again every second (the mirror keeps running).

Auto-creation on the target: before a topic is subscribed (with a message handler, which may rename topics: before
the first record goes to a topic), the target gets it with the source topic's partition count and its topic-level
config overrides (DescribeConfigs entries of source DYNAMIC_TOPIC_CONFIG), and the target's default replication
factor; a target topic with fewer partitions than the source gets more (CreatePartitions), checked again at every
topic-list refresh so partitions added to a source topic reach the target. A topic that exists on the target keeps
its configs. Both through librdkafka's AdminClient on the connection settings (bootstrap, security) of the consumer
and producer configs.

Message handler (``--message.handler``): a Python class ``package.module.Class`` (or ``module:Class``),
constructed with the ``--message.handler.args`` string when given; its ``handle(record)`` gets a ``SourceRecord``
and returns an iterable of ``ProducerRecord`` (empty: the record is skipped, its offset still committed).
``--consumer.rebalance.listener``: a class with ``on_partitions_revoked(partitions)`` /
``on_partitions_assigned(partitions)`` (lists of (topic, partition)), called after the mirror's own handling.

Stopping: SIGTERM or SIGINT stops consuming, flushes, commits and leaves the group (exit 0). A summary line goes to
stderr: ``MirrorMaker: N records mirrored, M dropped``. Properties files use Kafka's Java client keys, translated
for librdkafka by kbroker/client/rdkafka_props.py.
"""
import argparse
import importlib
import re
import signal
import sys
import threading
import time
from collections import namedtuple

from kbroker.client import rdkafka_props
from kbroker.internal_topics import is_internal

# The record a message handler receives (Kafka's BaseConsumerRecord) and returns (Kafka's ProducerRecord).
# timestamp: ms or None; headers: [(str, bytes)] or None; partition None lets the key choose.
SourceRecord = namedtuple("SourceRecord", "topic partition offset timestamp key value headers")
ProducerRecord = namedtuple("ProducerRecord", "topic key value timestamp headers partition")
ProducerRecord.__new__.__defaults__ = (None, None, None)

DEFAULT_COMMIT_INTERVAL_MS = 60000
DEFAULT_METADATA_MAX_AGE_MS = 300000
CONSUME_BATCH = 500
POLL_S = 0.2


class UsageError(Exception):
    pass


class DefaultHandler:
    """Same topic, key, value, timestamp and headers; the target's partitioner places it."""

    def handle(self, record):
        return [ProducerRecord(record.topic, record.key, record.value, record.timestamp, record.headers)]


def topic_filter(whitelist=None, blacklist=None):
    """A predicate on topic names (module docstring: Kafka 0.10's TopicFilter clean-up, whole-name match)."""
    raw = whitelist if whitelist is not None else blacklist
    regex = re.sub(r"""["']+$""", "", re.sub(r"""^["']+""", "", raw.strip().replace(",", "|").replace(" ", "")))
    if regex == "*":
        regex = ".*"
    try:
        pattern = re.compile(regex)
    except re.error:
        raise UsageError("%s is an invalid regex." % regex) from None
    if whitelist is not None:
        return lambda t: not is_internal(t) and pattern.fullmatch(t) is not None
    return lambda t: not is_internal(t) and pattern.fullmatch(t) is None


def load_class(spec, args):
    """``package.module.Class`` or ``module:Class`` -> an instance (built with ``args`` when given)."""
    module, sep, name = spec.partition(":") if ":" in spec else spec.rpartition(".")
    if not module or not name:
        raise UsageError("%s: expected package.module.Class" % spec)
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise UsageError("cannot load %s: %s" % (spec, e)) from None
    return cls(args) if args is not None else cls()


class TargetTopics:
    """Creates (or grows) target topics from the source's partition counts and topic configs (module docstring).
    Shared by the streams; ``ensure`` is idempotent and remembers what it has done."""

    def __init__(self, source_admin_conf, target_admin_conf, log):
        from confluent_kafka.admin import AdminClient
        self.source = rdkafka_props.check(AdminClient, source_admin_conf, "--consumer.config")
        self.target = rdkafka_props.check(AdminClient, target_admin_conf, "--producer.config")
        self.log = log
        self.done = set()
        self.lock = threading.Lock()

    def ensure(self, topic, source_topic=None, timeout=30.0):
        """Create or grow ``topic`` on the target from ``source_topic`` (default: the same name), once."""
        if topic not in self.done:
            self.sync([(topic, source_topic or topic)], timeout)

    def sync(self, pairs, timeout=30.0):
        """Create or grow each (target topic, source topic) of ``pairs``: one metadata read of each cluster.
        list_topics() of every topic: naming one would have a broker with auto.create.topics.enable create it."""
        with self.lock:
            src = self.source.list_topics(timeout=timeout).topics
            tgt = self.target.list_topics(timeout=timeout).topics
            for topic, source_topic in pairs:
                self._sync_one(topic, source_topic, src.get(source_topic), tgt.get(topic), timeout)
                self.done.add(topic)

    def _sync_one(self, topic, source_topic, src, tgt, timeout):
        from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic
        if src is None or src.error is not None or not src.partitions:
            return   # the source does not have it (a handler's new name): the producer's broker decides
        count = len(src.partitions)
        if tgt is not None and tgt.error is None and tgt.partitions:
            if len(tgt.partitions) < count:
                self.target.create_partitions([NewPartitions(topic, count)],
                                              request_timeout=timeout)[topic].result(timeout)
                self.log("added partitions to target topic %s: %d -> %d" % (topic, len(tgt.partitions), count))
            return
        res = ConfigResource(ConfigResource.Type.TOPIC, source_topic)
        entries = self.source.describe_configs([res], request_timeout=timeout)[res].result(timeout)
        configs = {e.name: e.value for e in entries.values()
                   if e.source == 1 and e.value is not None and not e.is_sensitive}   # DYNAMIC_TOPIC_CONFIG
        future = self.target.create_topics([NewTopic(topic, count, -1, config=configs)],
                                           operation_timeout=timeout, request_timeout=timeout)[topic]
        try:
            future.result(timeout + 5)
        except Exception as e:   # a KafkaException carrying the wire error
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise
        self.log("created target topic %s: %d partitions, configs %s" % (topic, count, configs))


class Mirror:
    """The streams, the shared producer and the counters. ``run()`` returns the exit status."""

    def __init__(self, consumer_conf, producer_conf, accept, num_streams, commit_interval_ms, abort_on_failure,
                 handler, listener=None, log=None):
        from confluent_kafka import Producer
        self.log = log or (lambda m: print("[MirrorMaker] %s" % m, file=sys.stderr, flush=True))
        self.consumer_conf = consumer_conf
        self.accept = accept
        self.num_streams = num_streams
        self.commit_interval_s = commit_interval_ms / 1000.0
        self.refresh_s = int(consumer_conf.get("metadata.max.age.ms", DEFAULT_METADATA_MAX_AGE_MS)) / 1000.0
        self.abort_on_failure = abort_on_failure
        self.handler = handler
        self.listener = listener
        self.auto_commit = consumer_conf.get("enable.auto.commit", "false").lower() == "true"
        self.producer = rdkafka_props.check(Producer, producer_conf, "--producer.config")
        self.topics = TargetTopics(rdkafka_props.connection_only(consumer_conf),
                                   rdkafka_props.connection_only(producer_conf), self.log)
        self.stopping = threading.Event()
        self.failed = threading.Event()      # a send failed and abort.on.send.failure is set
        self.counts_lock = threading.Lock()
        self.lock = threading.Lock()
        self.acked = 0
        self.dropped = 0
        self.first_error = None

    # -- producer side (delivery callbacks run in whichever stream thread polls or flushes)
    def _delivered(self, err, msg):
        with self.lock:
            if err is None:
                self.acked += 1
                return
            self.dropped += 1
            if self.first_error is None:
                self.first_error = "%s (topic %s)" % (err, msg.topic())
        if self.abort_on_failure:
            self.failed.set()
        else:
            self.log("dropped a record to %s: %s" % (msg.topic(), err))

    def _send(self, rec, source_topic, on_delivery):
        """Hand ``rec`` to the producer; True once it is queued (``on_delivery`` will be called for it)."""
        from confluent_kafka import KafkaException
        if rec.topic not in self.topics.done:
            self.topics.ensure(rec.topic, source_topic)
        kwargs = {"key": rec.key, "on_delivery": on_delivery}
        if rec.timestamp:
            kwargs["timestamp"] = rec.timestamp
        if rec.headers:
            kwargs["headers"] = rec.headers
        if rec.partition is not None:
            kwargs["partition"] = rec.partition
        while True:
            try:
                self.producer.produce(rec.topic, rec.value, **kwargs)
                return True
            except BufferError:          # queue full: block like Java's max.block.ms=Long.MaxValue
                self.producer.poll(0.1)
                if self.failed.is_set():
                    return False
            except KafkaException as e:  # refused before sending (e.g. too large): a failed send, as in Java
                self._delivered(e.args[0], _Failed(rec.topic))
                return False

    # -- streams
    def run(self):
        threads = [threading.Thread(target=self._stream, args=(i,), name="mirrormaker-thread-%d" % i, daemon=True)
                   for i in range(self.num_streams)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.2)
            if self.failed.is_set():
                self.stopping.set()
        if self.failed.is_set():
            self.log("shutting down: a send to the target cluster failed: %s (abort.on.send.failure=true; "
                     "offsets after it were not committed)" % self.first_error)
        print("MirrorMaker: %d records mirrored, %d dropped" % (self.acked, self.dropped), file=sys.stderr,
              flush=True)
        return 1 if self.failed.is_set() or getattr(self, "stream_error", None) else 0

    def _stream(self, index):
        try:
            Stream(self, index).run()
        except Exception as e:   # a stream that dies stops the mirror (Kafka's MirrorMakerThread does)
            self.stream_error = e
            self.log("stream %d failed: %s: %s" % (index, type(e).__name__, e))
            self.stopping.set()


class _Failed:
    """Stands for the message of a record produce() refused (what the delivery callback reads of it)."""

    def __init__(self, topic):
        self._topic = topic

    def topic(self):
        return self._topic


class Stream:
    """One consumer of the group: consume -> handler -> producer; commit after a flush (module docstring)."""

    def __init__(self, mirror, index):
        from confluent_kafka import Consumer
        self.m = mirror
        conf = dict(mirror.consumer_conf)
        conf["client.id"] = "%s-%d" % (conf.get("client.id") or conf["group.id"], index)
        conf.setdefault("enable.auto.commit", "false")
        if mirror.auto_commit:
            conf["enable.auto.offset.store"] = "false"   # stored below, after the handler has sent the record
        self.consumer = rdkafka_props.check(Consumer, conf, "--consumer.config")
        self.pending = {}        # (topic, partition) -> next offset, all sent to the producer
        self.outstanding = 0     # records this stream produced that are not acknowledged (or failed) yet
        self.index = index
        self.subscribed = None
        self.last_commit = time.monotonic()

    def run(self):
        from confluent_kafka import KafkaError
        next_refresh = 0.0
        try:
            while not self.m.stopping.is_set() and not self.m.failed.is_set():
                if time.monotonic() >= next_refresh:
                    # a source that cannot be listed now is tried again in a second
                    next_refresh = time.monotonic() + (self.m.refresh_s if self._subscribe() else 1.0)
                if not self.subscribed:
                    self.m.stopping.wait(min(1.0, self.m.refresh_s))
                    continue
                for msg in self.consumer.consume(CONSUME_BATCH, POLL_S):
                    if msg.error() is not None:
                        if msg.error().fatal():
                            raise RuntimeError("consumer: %s" % msg.error())
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            self.m.log("consumer: %s" % msg.error())
                        continue
                    self._mirror(msg)
                    if self.m.failed.is_set():
                        return
                self.m.producer.poll(0)
                if time.monotonic() - self.last_commit >= self.m.commit_interval_s:
                    self.commit()
            self.commit()
        finally:
            try:
                self.consumer.close()   # leaves the group (its partitions go to the other streams at once)
            except Exception:
                pass

    def _subscribe(self):
        """(Re)subscribe to the matching source topics, creating or growing them on the target first (stream 0
        does that at every refresh, so a source topic's new partitions reach the target too). False when a
        cluster could not be read."""
        from confluent_kafka import KafkaException
        try:
            md = self.consumer.list_topics(timeout=30)
            topics = sorted(t for t, meta in md.topics.items() if meta.error is None and self.m.accept(t))
            # with a message handler, which may rename topics, the first send creates the target topic
            if isinstance(self.m.handler, DefaultHandler) and (self.index == 0 or topics != self.subscribed):
                self.m.topics.sync([(t, t) for t in topics])
        except KafkaException as e:
            self.m.log("cannot read the topics: %s (again in 1 s)" % e)
            return False
        if topics != self.subscribed:
            self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked)
            self.m.log("subscribed to %d topic(s): %s" % (len(topics), ",".join(topics)))
            self.subscribed = topics
        return True

    def _mirror(self, msg):
        ts_type, ts = msg.timestamp()
        rec = SourceRecord(msg.topic(), msg.partition(), msg.offset(), ts if ts_type else None, msg.key(),
                           msg.value(), msg.headers())
        for out in self.m.handler.handle(rec) or ():
            with self.m.counts_lock:
                self.outstanding += 1
            if not self.m._send(out, rec.topic, self._delivered):
                with self.m.counts_lock:
                    self.outstanding -= 1
        self.pending[(rec.topic, rec.partition)] = rec.offset + 1

    def _delivered(self, err, msg):
        with self.m.counts_lock:
            self.outstanding -= 1
        self.m._delivered(err, msg)

    def flush(self):
        """Wait until every record this stream produced is acknowledged (Java's producer.flush() waits for the
        records sent before it; librdkafka's flush() would also wait for the other streams' later ones). True when
        none failed: the offsets consumed so far may then be committed."""
        while self.outstanding > 0 and not self.m.failed.is_set():
            self.m.producer.poll(0.1)    # serves delivery callbacks (any stream's)
        return not self.m.failed.is_set()

    def commit(self):
        """Flush, then commit what was sent -- never before the producer has acknowledged it."""
        from confluent_kafka import KafkaException, TopicPartition
        if not self.flush() or not self.pending:
            self.last_commit = time.monotonic()
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(self.pending.items())]
        try:
            if self.m.auto_commit:
                self.consumer.store_offsets(offsets=offsets)
            else:
                self.consumer.commit(offsets=offsets, asynchronous=False)
            self.pending.clear()
        except KafkaException as e:
            # Kept for the next commit; if a rebalance took the partitions, their records are mirrored again by
            # the new owner (duplicates, never loss).
            self.m.log("offset commit failed: %s" % e)
        self.last_commit = time.monotonic()

    def _assigned(self, consumer, partitions):
        if self.m.listener is not None and hasattr(self.m.listener, "on_partitions_assigned"):
            self.m.listener.on_partitions_assigned([(p.topic, p.partition) for p in partitions])

    def _revoked(self, consumer, partitions):
        self.commit()      # Kafka's InternalRebalanceListenerForNewConsumer: flush, commit, then let go
        self.pending.clear()
        if self.m.listener is not None and hasattr(self.m.listener, "on_partitions_revoked"):
            self.m.listener.on_partitions_revoked([(p.topic, p.partition) for p in partitions])


# ---------------------------------------------------------------------------------------------- command line

def _bool(s):
    v = str(s).strip().lower()
    if v not in ("true", "false"):
        raise argparse.ArgumentTypeError("expected true or false, got %r" % s)
    return v == "true"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser():
    p = _Parser(prog="kbroker-mirror-maker", description="Continuously copy topics from one cluster to another.")
    p.add_argument("--consumer.config", dest="consumer_config", required=True, metavar="FILE",
                   help="the source cluster's consumer properties (bootstrap.servers, group.id required)")
    p.add_argument("--producer.config", dest="producer_config", required=True, metavar="FILE",
                   help="the target cluster's producer properties (bootstrap.servers required)")
    p.add_argument("--whitelist", metavar="REGEX", help="topics to mirror ('A|B', 'A,B', '.*')")
    p.add_argument("--blacklist", metavar="REGEX", help="mirror every topic but these")
    p.add_argument("--num.streams", dest="num_streams", type=int, default=1, metavar="N",
                   help="consumer threads (default 1)")
    p.add_argument("--offset.commit.interval.ms", dest="commit_interval_ms", type=int,
                   default=DEFAULT_COMMIT_INTERVAL_MS, metavar="MS", help="default 60000")
    p.add_argument("--abort.on.send.failure", dest="abort_on_send_failure", type=_bool, default=True,
                   metavar="true|false", help="stop on a failed send (default true)")
    p.add_argument("--message.handler", dest="message_handler", metavar="module.Class")
    p.add_argument("--message.handler.args", dest="message_handler_args", metavar="ARGS")
    p.add_argument("--consumer.rebalance.listener", dest="rebalance_listener", metavar="module.Class")
    p.add_argument("--rebalance.listener.args", dest="rebalance_listener_args", metavar="ARGS")
    p.add_argument("--new.consumer", action="store_true", help="accepted; the consumer is always the new one")
    return p


def parse_args(argv):
    args = build_parser().parse_args(argv)
    if (args.whitelist is None) == (args.blacklist is None):
        raise UsageError("Exactly one of whitelist or blacklist is required.")
    if args.num_streams < 1:
        raise UsageError("--num.streams must be at least 1")
    if args.commit_interval_ms < 0:
        raise UsageError("--offset.commit.interval.ms must not be negative")
    if args.message_handler_args is not None and args.message_handler is None:
        raise UsageError("--message.handler.args needs --message.handler")
    if args.rebalance_listener_args is not None and args.rebalance_listener is None:
        raise UsageError("--rebalance.listener.args needs --consumer.rebalance.listener")
    return args


def configs(args):
    """(consumer conf, producer conf) from the two files, with MirrorMaker's defaults (module docstring)."""
    cprops = rdkafka_props.load(args.consumer_config)
    if "bootstrap.servers" not in cprops:
        if "zookeeper.connect" in cprops:
            raise UsageError("%s: the old (ZooKeeper) consumer is not supported: set bootstrap.servers"
                             % args.consumer_config)
        raise UsageError("%s: bootstrap.servers is required" % args.consumer_config)
    cprops.pop("zookeeper.connect", None)
    if not cprops.get("group.id"):
        raise UsageError("%s: group.id is required" % args.consumer_config)
    consumer = rdkafka_props.translate(cprops, args.consumer_config)
    producer = rdkafka_props.load_translated(args.producer_config)
    if "bootstrap.servers" not in producer:
        raise UsageError("%s: bootstrap.servers is required" % args.producer_config)
    for key, value in (("acks", "all"), ("max.in.flight.requests.per.connection", "1"),
                       ("partitioner", "murmur2_random")):
        producer.setdefault(key, value)
    return consumer, producer


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)
        consumer_conf, producer_conf = configs(args)
        accept = topic_filter(args.whitelist, args.blacklist)
        handler = load_class(args.message_handler, args.message_handler_args) if args.message_handler \
            else DefaultHandler()
        listener = load_class(args.rebalance_listener, args.rebalance_listener_args) \
            if args.rebalance_listener else None
        mirror = Mirror(consumer_conf, producer_conf, accept, args.num_streams, args.commit_interval_ms,
                        args.abort_on_send_failure, handler, listener)
    except UsageError as e:
        print(str(e), file=sys.stderr)
        build_parser().print_usage(sys.stderr)
        return 1
    except rdkafka_props.RdkafkaConfigError as e:
        print("ERROR %s" % e, file=sys.stderr)
        return 1

    def stop(signum, frame):
        mirror.stopping.set()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return mirror.run()


if __name__ == "__main__":
    sys.exit(main())
