"""Console producer/consumer: line parsing, partitioning, batching, consumer options and Kafka's formatter layout."""
import os

import pytest

from kbroker.cli import console_consumer as cc
from kbroker.cli import console_producer as cp
from kbroker.client.partitioner import partition_for_key
from kbroker.client.simple import FetchedRecord, ProduceResult
from kbroker.record import iter_batches, iter_records

BS = ["--bootstrap-server", "h:1", "--topic", "t"]


# ---------------------------------------------------------------------------------------------- producer

def test_producer_args_defaults():
    a = cp.build_parser().parse_args(BS)
    assert (a.compression_codec, a.request_required_acks, a.batch_size, a.property) == ("none", -1, 16384, [])
    a = cp.build_parser().parse_args(["--broker-list", "h:1", "--topic", "t", "--compression-codec",
                                      "--request-required-acks", "1"])
    assert (a.bootstrap_server, a.compression_codec, a.request_required_acks) == ("h:1", "gzip", 1)
    assert cp.build_parser().parse_args(BS + ["--compression-codec", "zstd"]).compression_codec == "zstd"
    with pytest.raises(SystemExit):
        cp.build_parser().parse_args(BS + ["--compression-codec", "brotli"])


def test_line_parser_plain_and_keyed():
    plain = cp.LineParser({})
    assert plain(b"a:b\r") == (None, b"a:b")
    assert plain(b"") == (None, b"")
    keyed = cp.LineParser(cp.parse_properties(["parse.key=true", "key.separator=:"]))
    assert keyed(b"k:v:w") == (b"k", b"v:w")
    assert keyed(b":v") == (b"", b"v")
    with pytest.raises(cp.ProducerError) as ei:
        keyed(b"novalue")
    assert str(ei.value) == "No key separator found on line number 3: 'novalue'"
    tab = cp.LineParser({"parse.key": "true"})
    assert tab(b"k\tv") == (b"k", b"v")
    lenient = cp.LineParser({"parse.key": "true", "ignore.error": "true"})
    assert lenient(b"whole") == (None, b"whole")


def test_partitioner_keyed_and_round_robin():
    p = cp.Partitioner(3)
    assert [p(None) for _ in range(5)] == [0, 1, 2, 0, 1]
    # murmur2(b"a") = -1563381124 -> & 0x7fffffff = 584102524 -> % 3 = 1
    assert p(b"a") == partition_for_key(b"a", 3) == 1
    assert p(None) == 2  # keyed records do not advance the round robin


def test_chunk_records_respects_batch_size():
    recs = [(None, b"x" * 79)] * 5  # 79 + 21 overhead = 100 estimated bytes each
    assert [len(c) for c in cp.chunk_records(recs, 250)] == [2, 2, 1]
    assert [len(c) for c in cp.chunk_records([(b"k", b"y" * 1000)], 100)] == [1]  # oversize record goes alone


def test_read_lines_batches_available_input():
    r, w = os.pipe()
    os.write(w, b"a\nb\r\nc")
    os.close(w)
    got = []
    cp.read_lines(r, cp.LineParser({}), got.append)
    os.close(r)
    assert got == [[(None, b"a"), (None, b"b")], [(None, b"c")]] or got == [[(None, b"a"), (None, b"b"),
                                                                              (None, b"c")]]
    assert [v for batch in got for _k, v in batch] == [b"a", b"b", b"c"]


def test_read_lines_sends_lines_before_a_bad_one():
    r, w = os.pipe()
    os.write(w, b"k:1\nbad\nk:2\n")
    os.close(w)
    got = []
    with pytest.raises(cp.ProducerError, match="line number 2: 'bad'"):
        cp.read_lines(r, cp.LineParser({"parse.key": "true", "key.separator": ":"}), got.append)
    os.close(r)
    assert got == [[(b"k", b"1")]]


class FakeClient:
    def __init__(self, partitions=3, fail=None):
        self.partitions = list(range(partitions))
        self.sent = []
        self.fail = fail or {}

    def partitions_for(self, topic, refresh=False, allow_auto_topic_creation=False):
        return self.partitions

    def leader_for(self, topic, p, refresh=False):
        return 1

    def produce_batches(self, topic, batches, acks, timeout_ms):
        self.sent.append((topic, dict(batches), acks))
        return {p: ProduceResult(self.fail.get(p, 0), 0, None) for p in batches}


def test_console_producer_send_groups_by_partition():
    client = FakeClient(3)
    prod = cp.ConsoleProducer(client, "t", codec=0, acks=1, batch_size=16384)
    prod.send([(b"a", b"1"), (None, b"x"), (None, b"y"), (b"a", b"2")])
    assert prod.sent == 4 and prod.failed == 0
    (topic, batches, acks), = client.sent
    assert (topic, acks, sorted(batches)) == ("t", 1, [0, 1])
    values = {p: [(r[2], r[3]) for r in iter_records(b)] for p, b in batches.items()}
    assert values == {1: [(b"a", b"1"), (None, b"y"), (b"a", b"2")], 0: [(None, b"x")]}
    for b in batches.values():
        (_pos, h), = iter_batches(b)
        assert (h.magic, h.codec, h.base_offset) == (2, 0, 0)


def test_console_producer_one_batch_per_partition_per_request():
    client = FakeClient(1)
    prod = cp.ConsoleProducer(client, "t", batch_size=100)
    prod.send([(None, b"v" * 70)] * 3)
    assert len(client.sent) == 3
    assert all(list(b) == [0] for _t, b, _a in client.sent)


def test_console_producer_reports_errors(capsys):
    client = FakeClient(2, fail={1: 10})
    prod = cp.ConsoleProducer(client, "t", batch_size=16384)
    prod.send([(None, b"abc"), (None, b"defgh")])
    assert (prod.sent, prod.failed) == (1, 1)
    assert capsys.readouterr().err == ("ERROR Error when sending message to topic t with key: null, value: 5 bytes "
                                       "with error: MessageTooLarge: MESSAGE_TOO_LARGE\n")


def test_console_producer_compression():
    client = FakeClient(1)
    cp.ConsoleProducer(client, "t", codec=cp.CODECS["gzip"]).send([(None, b"z" * 100)])
    (_t, batches, _a), = client.sent
    (_pos, h), = iter_batches(batches[0])
    assert h.codec == 1
    assert [r[3] for r in iter_records(batches[0])] == [b"z" * 100]


# ---------------------------------------------------------------------------------------------- consumer

def test_consumer_start_positions():
    a = cc.parse_args(BS)
    assert (a.start, a.reset, a.max_messages, a.timeout_ms) == (cc.LATEST, cc.LATEST, None, None)
    a = cc.parse_args(BS + ["--from-beginning", "--max-messages", "5", "--timeout-ms", "100"])
    assert (a.start, a.reset, a.max_messages, a.timeout_ms) == (cc.EARLIEST, cc.EARLIEST, 5, 100)
    assert cc.parse_args(BS + ["--partition", "1", "--offset", "7"]).start == 7
    assert cc.parse_args(BS + ["--partition", "1", "--offset", "earliest"]).start == cc.EARLIEST
    assert cc.parse_args(BS + ["--partition", "1", "--offset", "latest"]).start == cc.LATEST


@pytest.mark.parametrize("argv,msg", [
    (["--offset", "3"], "The partition is required when offset is specified."),
    (["--partition", "0", "--offset", "3", "--from-beginning"],
     "Options from-beginning and offset cannot be specified together."),
    (["--partition", "0", "--offset", "-4"],
     "The provided offset value '-4' is incorrect. Valid values are 'earliest', 'latest', or a non-negative long."),
])
def test_consumer_arg_errors(argv, msg):
    with pytest.raises(cc.ConsumerError) as ei:
        cc.parse_args(BS + argv)
    assert str(ei.value) == msg


def _fmt(props, partition=2, rec=None):
    rec = rec or FetchedRecord(5, 1700000000000, b"k", b"v", [("h1", b"x"), ("h2", None)], 0)
    return cc.Formatter(cc.parse_properties(props)).format(partition, rec)


def test_formatter_layouts():
    assert _fmt([]) == b"v\n"
    assert _fmt(["print.key=true"]) == b"k\tv\n"
    assert _fmt(["print.key=true", "key.separator=:"]) == b"k:v\n"
    # Kafka's DefaultMessageFormatter: the key is the last field, so the line separator follows it directly
    assert _fmt(["print.key=true", "print.value=false", "key.separator=\\t"]) == b"k\n"
    assert _fmt(["print.value=false"]) == b""
    assert _fmt(["print.timestamp=true", "print.partition=true", "print.offset=true", "print.headers=true",
                 "print.key=true", "key.separator=|"]) == \
        b"CreateTime:1700000000000|Partition:2|Offset:5|h1:x,h2:null|k|v\n"
    assert _fmt(["print.timestamp=true"], rec=(0, 9, None, None, [], 1)) == b"LogAppendTime:9\tnull\n"
    assert _fmt(["print.timestamp=true", "print.headers=true", "print.key=true", "null.literal=-"],
                rec=(0, -1, None, b"v", [])) == b"NO_TIMESTAMP\tNO_HEADERS\t-\tv\n"
    assert _fmt(["line.separator=;"]) == b"v;"


class FakeConsumerClient:
    """Two partitions; partition 0 holds offsets 0-2, partition 1 offsets 0-1; every fetch returns one record."""

    def __init__(self):
        self.logs = {0: [b"a", b"b", b"c"], 1: [b"x", b"y"]}
        self.fetches = 0

    def partitions_for(self, topic, refresh=False, allow_auto_topic_creation=False):
        return [0, 1]

    def leader_for(self, topic, p, refresh=False):
        return 1

    def list_offsets(self, topic, ts):
        return {p: ((0 if t == cc.EARLIEST else len(self.logs[p])), -1) for p, t in ts.items()}

    def fetch_many(self, topic, positions, max_wait_ms=500):
        from kbroker.client.simple import FetchResult
        self.fetches += 1
        out = {}
        for p, off in positions.items():
            log = self.logs[p]
            recs = [FetchedRecord(off, 1, None, log[off], [], 0)] if off < len(log) else []
            out[p] = FetchResult(recs, off + len(recs), len(log), 0)
        return out


class Sink:
    def __init__(self):
        self.data = b""

    def write(self, b):
        self.data += b

    def flush(self):
        pass


def test_consumer_loop_max_messages_and_timeout():
    out = Sink()
    c = cc.ConsoleConsumer(FakeConsumerClient(), cc.parse_args(BS + ["--from-beginning", "--max-messages", "3"]), out)
    c.run()
    assert (c.count, out.data) == (3, b"a\nx\nb\n")
    out = Sink()
    client = FakeConsumerClient()
    c = cc.ConsoleConsumer(client, cc.parse_args(BS + ["--from-beginning", "--timeout-ms", "50"]), out)
    c.run()
    assert (c.count, out.data) == (5, b"a\nx\nb\ny\nc\n")
    out = Sink()
    c = cc.ConsoleConsumer(FakeConsumerClient(), cc.parse_args(BS + ["--timeout-ms", "30"]), out)
    c.run()  # from the log end: nothing
    assert (c.count, out.data) == (0, b"")
    out = Sink()
    c = cc.ConsoleConsumer(FakeConsumerClient(), cc.parse_args(BS + ["--partition", "0", "--offset", "1",
                                                                     "--timeout-ms", "30"]), out)
    c.run()
    assert out.data == b"b\nc\n"
