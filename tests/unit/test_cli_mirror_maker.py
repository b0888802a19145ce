"""kbroker-mirror-maker's pieces without brokers: the commit invariant (a source offset is committed only after the
producer has acknowledged every record consumed before it; nothing after a failed send when
abort.on.send.failure is true) driven through fake confluent-kafka clients, the whitelist rules, the option
checks, the handler hook, and the Java-properties translation of kbroker/client/rdkafka_props.py. The perf and
verifiable tools' line formats are checked here too (format_time, progress_line). The real thing, with kill -9,
runs in tests/integration/test_mirror_maker.py.
"""
import types

import pytest

from kbroker.cli import mirror_maker as mm
from kbroker.cli import perf_tools
from kbroker.client import rdkafka_props


# ---------------------------------------------------------------------------------------------- fakes

class FakeMessage:
    def __init__(self, topic, partition, offset):
        self._t, self._p, self._o = topic, partition, offset

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def timestamp(self):
        return (1, 1000 + self._o)

    def key(self):
        return b"k%d" % self._o

    def value(self):
        return b"v%d" % self._o

    def headers(self):
        return None

    def error(self):
        return None


def _metadata(topics):
    return types.SimpleNamespace(topics={t: types.SimpleNamespace(error=None, partitions={0: None})
                                         for t in topics})


class World:
    """Shared state of the fake clients: the batches the consumer returns, the log of flushes and commits."""

    def __init__(self, batches, fail_offsets=()):
        self.batches = list(batches)
        self.fail_offsets = set(fail_offsets)
        self.log = []              # ("acked", offset) / ("failed", offset) / ("commit", offset) / ("close", None)
        self.mirror = None
        self.rebalance_when_left = None   # a rebalance in the poll that finds this many batches left

    def install(self, monkeypatch):
        import confluent_kafka
        import confluent_kafka.admin

        world = self

        class Producer:
            def __init__(self, conf):
                self.pending = []

            def produce(self, topic, value, key=None, on_delivery=None, **kw):
                self.pending.append((int(value[1:]), on_delivery))

            def poll(self, timeout=0):
                # the acknowledgements arrive only while someone waits for them (poll(0) finds none yet): a
                # commit that does not wait sees the records unacknowledged
                return self.flush() if timeout else 0

            def flush(self, timeout=None):
                pending, self.pending = self.pending, []
                for offset, cb in pending:
                    failed = offset in world.fail_offsets
                    world.log.append(("failed" if failed else "acked", offset))
                    cb("ERR" if failed else None, types.SimpleNamespace(topic=lambda: "t"))
                return 0

        class Consumer:
            def __init__(self, conf):
                self.conf = conf

            def list_topics(self, timeout=None):
                return _metadata(["t", "other"])

            def subscribe(self, topics, on_assign=None, on_revoke=None):
                world.subscribed = topics
                self.callbacks = (on_assign, on_revoke)
                self.assigned = False

            def consume(self, n, timeout):
                tp = [types.SimpleNamespace(topic="t", partition=0)]
                if not self.assigned:       # the first poll joins the group
                    self.assigned = True
                    self.callbacks[0](self, tp)
                elif len(world.batches) == world.rebalance_when_left:   # a rebalance inside this poll
                    world.rebalance_when_left = None
                    self.callbacks[1](self, tp)
                    self.callbacks[0](self, tp)
                if not world.batches:
                    world.mirror.stopping.set()
                    return []
                return [FakeMessage("t", 0, o) for o in world.batches.pop(0)]

            def commit(self, offsets, asynchronous=True):
                world.log.append(("commit", offsets[0].offset))

            def close(self):            # librdkafka revokes the assignment on close
                world.log.append(("close", None))
                self.callbacks[1](self, [types.SimpleNamespace(topic="t", partition=0)])

        class AdminClient:
            def __init__(self, conf):
                pass

            def list_topics(self, timeout=None):
                return _metadata(["t"])

        monkeypatch.setattr(confluent_kafka, "Producer", Producer)
        monkeypatch.setattr(confluent_kafka, "Consumer", Consumer)
        monkeypatch.setattr(confluent_kafka.admin, "AdminClient", AdminClient)
        return self

    def run(self, abort=True, interval_ms=0, listener=None):
        self.mirror = mm.Mirror({"bootstrap.servers": "x", "group.id": "g"}, {"bootstrap.servers": "y"},
                                mm.topic_filter("t"), 1, interval_ms, abort, mm.DefaultHandler(), listener,
                                log=lambda m: None)
        return self.mirror.run()


def _check_invariant(log):
    """Every commit of offset o comes after the acknowledgement of every offset < o."""
    acked = set()
    for kind, offset in log:
        if kind == "acked":
            acked.add(offset)
        elif kind == "commit":
            assert set(range(offset)) <= acked, (offset, sorted(set(range(offset)) - acked))


def test_commits_only_acknowledged_offsets(monkeypatch):
    world = World([[0, 1, 2], [3, 4], [5, 6, 7, 8]]).install(monkeypatch)
    assert world.run() == 0
    _check_invariant(world.log)
    assert [o for kind, o in world.log if kind == "commit"][-1] == 9
    assert world.subscribed == ["t"]
    assert (world.mirror.acked, world.mirror.dropped) == (9, 0)


def test_failed_send_stops_before_its_offset_is_committed(monkeypatch):
    world = World([[0, 1], [2, 3], [4, 5]], fail_offsets={3}).install(monkeypatch)
    assert world.run(abort=True) == 1
    _check_invariant(world.log)
    commits = [o for kind, o in world.log if kind == "commit"]
    assert commits == [2]              # the batch before the failure; never 4 or 6
    assert world.batches == [[4, 5]]   # stopped consuming


def test_failed_send_is_dropped_without_abort(monkeypatch):
    world = World([[0, 1], [2, 3], [4, 5]], fail_offsets={3}).install(monkeypatch)
    assert world.run(abort=False) == 0
    assert [o for kind, o in world.log if kind == "commit"][-1] == 6
    assert (world.mirror.acked, world.mirror.dropped) == (5, 1)


def test_commit_interval_batches_commits(monkeypatch):
    world = World([[0], [1], [2], [3]]).install(monkeypatch)
    assert world.run(interval_ms=3600 * 1000) == 0
    assert [o for kind, o in world.log if kind == "commit"] == [4]   # only the final one
    _check_invariant(world.log)


class Listener:
    def __init__(self, args=None):
        self.calls = []

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", partitions))

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", partitions))


def test_rebalance_listener_and_commit_on_revoke(monkeypatch):
    # the commit interval never comes: the revocation must commit what was consumed before it, after the acks
    world = World([[0, 1, 2], [3, 4]]).install(monkeypatch)
    world.rebalance_when_left = 1
    listener = mm.load_class(__name__ + ".Listener", None)
    assert world.run(interval_ms=3600 * 1000, listener=listener) == 0
    tp = [("t", 0)]
    assert listener.calls == [("assigned", tp), ("revoked", tp), ("assigned", tp), ("revoked", tp)]
    assert world.log == [("acked", 0), ("acked", 1), ("acked", 2), ("commit", 3),
                         ("acked", 3), ("acked", 4), ("commit", 5), ("close", None)]


# ---------------------------------------------------------------------------------------------- options

@pytest.mark.parametrize("whitelist, yes, no", [
    ("A|B", ["A", "B"], ["AB", "a", "C"]),
    ("A, B", ["A", "B"], ["A,B"]),
    ("'orders.*'", ["orders", "orders-eu"], ["my-orders"]),
    ("*", ["x", "__foo"], ["__consumer_offsets", "__transaction_state"]),
])
def test_whitelist(whitelist, yes, no):
    accept = mm.topic_filter(whitelist)
    assert [t for t in yes if accept(t)] == yes
    assert [t for t in no if accept(t)] == []


def test_blacklist_and_bad_regex():
    accept = mm.topic_filter(None, "secret.*")
    assert accept("public") and not accept("secret-1") and not accept("__consumer_offsets")
    with pytest.raises(mm.UsageError, match=r"\(\[ is an invalid regex"):
        mm.topic_filter("([")


def test_option_errors():
    base = ["--consumer.config", "c", "--producer.config", "p"]
    for argv, message in [(base, "Exactly one of whitelist or blacklist"),
                          (base + ["--whitelist", "a", "--blacklist", "b"], "Exactly one of whitelist or blacklist"),
                          (base + ["--whitelist", "a", "--num.streams", "0"], "--num.streams"),
                          (base + ["--whitelist", "a", "--abort.on.send.failure", "maybe"], "true or false"),
                          (base + ["--whitelist", "a", "--message.handler.args", "x"], "needs --message.handler")]:
        with pytest.raises(mm.UsageError, match=message):
            mm.parse_args(argv)
    args = mm.parse_args(base + ["--whitelist", "a"])
    assert (args.num_streams, args.commit_interval_ms, args.abort_on_send_failure) == (1, 60000, True)


def test_configs_defaults_and_requirements(tmp_path):
    c, p = tmp_path / "c.properties", tmp_path / "p.properties"
    c.write_text("bootstrap.servers=s:1\ngroup.id=g\nkey.deserializer=org.X\n")
    p.write_text("bootstrap.servers=t:1\nacks=1\nbuffer.memory=33554432\n")
    args = mm.parse_args(["--consumer.config", str(c), "--producer.config", str(p), "--whitelist", "a"])
    consumer, producer = mm.configs(args)
    assert consumer == {"bootstrap.servers": "s:1", "group.id": "g"}
    assert producer == {"bootstrap.servers": "t:1", "acks": "1", "queue.buffering.max.kbytes": "32768",
                        "max.in.flight.requests.per.connection": "1", "partitioner": "murmur2_random"}
    c.write_text("zookeeper.connect=z:2181\ngroup.id=g\n")
    with pytest.raises(mm.UsageError, match="old .ZooKeeper. consumer is not supported"):
        mm.configs(args)
    c.write_text("bootstrap.servers=s:1\n")
    with pytest.raises(mm.UsageError, match="group.id is required"):
        mm.configs(args)


class Renamer:
    def __init__(self, args=None):
        self.prefix = args or "copy-"

    def handle(self, record):
        return [] if record.offset % 2 else [mm.ProducerRecord(self.prefix + record.topic, record.key, record.value)]


def test_handler_loading():
    h = mm.load_class(__name__ + ".Renamer", "dr-")
    assert isinstance(h, Renamer) and h.prefix == "dr-"
    assert isinstance(mm.load_class(__name__ + ":Renamer", None), Renamer)
    with pytest.raises(mm.UsageError, match="cannot load"):
        mm.load_class(__name__ + ".Nope", None)
    rec = mm.SourceRecord("t", 0, 4, 17, b"k", b"v", [("h", b"1")])
    assert mm.DefaultHandler().handle(rec) == [mm.ProducerRecord("t", b"k", b"v", 17, [("h", b"1")], None)]


# ---------------------------------------------------------------------------------------------- properties

def test_translate_java_properties():
    warnings = []
    out = rdkafka_props.translate({
        "bootstrap.servers": "h:1", "receive.buffer.bytes": "-1", "send.buffer.bytes": "131072",
        "max.request.size": "2000000", "auto.offset.reset": "none", "value.serializer": "org.X",
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
        "ssl.endpoint.identification.algorithm": "", "ssl.truststore.location": "/ca.pem",
        "ssl.truststore.type": "PEM", "ssl.keystore.location": "/me.p12", "ssl.keystore.password": "pw",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" '
                            'password="b";'}, "f", warnings.append)
    assert out == {"bootstrap.servers": "h:1", "socket.receive.buffer.bytes": "0",
                   "socket.send.buffer.bytes": "131072", "message.max.bytes": "2000000",
                   "auto.offset.reset": "error", "partition.assignment.strategy": "roundrobin",
                   "ssl.endpoint.identification.algorithm": "none", "ssl.ca.location": "/ca.pem",
                   "ssl.keystore.location": "/me.p12", "ssl.keystore.password": "pw",
                   "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "a", "sasl.password": "b"}
    assert warnings == ["WARN The configuration 'value.serializer' in f is not used by librdkafka (Java client "
                        "only)."]


@pytest.mark.parametrize("props, message", [
    ({"ssl.truststore.location": "/t.jks"}, "JKS store"),
    ({"ssl.truststore.location": "/t.p12"}, "PEM truststore only"),
    ({"partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor"}, "no librdkafka"),
    ({"sasl.jaas.config": "com.example.Login required;"}, "not supported"),
])
def test_translate_refusals_name_the_key(props, message):
    with pytest.raises(rdkafka_props.RdkafkaConfigError, match=message):
        rdkafka_props.translate(props, "f", lambda m: None)


def test_unknown_key_refused_by_librdkafka():
    from confluent_kafka import Producer
    with pytest.raises(rdkafka_props.RdkafkaConfigError, match="f: .*no.such.key"):
        rdkafka_props.check(Producer, {"bootstrap.servers": "h:1", "no.such.key": "1"}, "f")


# ---------------------------------------------------------------------------------------------- perf formats

def test_perf_time_format_and_progress_line():
    import time
    ms = int(time.mktime((2024, 3, 5, 7, 8, 9, 0, 0, -1)) * 1000) + 42
    assert perf_tools.format_time(ms, "yyyy-MM-dd HH:mm:ss:SSS") == "2024-03-05 07:08:09:042"
    # 2 MiB and 1,000 records in a 2,000 ms interval of which 500 ms were a rebalance
    line = perf_tools.progress_line("T", 3 * 1048576, 1048576, 1500, 500, 10000, 12000, 500)
    assert line == "T, 0, 3.0000, 1.0000, 1500, 500.0000, 500, 1500, 1.3333, 666.6667"
