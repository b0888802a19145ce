"""kbroker.streams.examples (wordcount, pipe, windowed_count) through the TopologyTestDriver: exact outputs, and
the WordCount topology described exactly as Kafka's WordCountDemo's (the text Kafka Streams 4.4.0 prints for the same
DSL calls; tests/integration/test_streams_examples.py compares it with the live JVM's too). The examples on a broker:
tests/integration/test_streams_examples.py."""
import pytest

from kbroker.streams import Serdes, TopologyTestDriver
from kbroker.streams.examples import common, pipe, windowed_count, wordcount

LINES = ["all streams lead to kafka", "hello kafka streams", "join kafka summit"]
QUICKSTART = [("all", 1), ("streams", 1), ("lead", 1), ("to", 1), ("kafka", 1), ("hello", 1), ("kafka", 2),
              ("streams", 2), ("join", 1), ("kafka", 3), ("summit", 1)]
# What Kafka Streams 4.4.0's Topology.describe() prints for WordCountDemo's topology (output topic "out").
KAFKA_WORDCOUNT_DESCRIPTION = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> KSTREAM-FILTER-0000000006
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FILTER-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000005 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition)
      <-- KSTREAM-FILTER-0000000006

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000007 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition])
      --> KSTREAM-AGGREGATE-0000000004
    Processor: KSTREAM-AGGREGATE-0000000004 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000003])
      --> KTABLE-TOSTREAM-0000000008
      <-- KSTREAM-SOURCE-0000000007
    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])
      --> KSTREAM-SINK-0000000009
      <-- KSTREAM-AGGREGATE-0000000004
    Sink: KSTREAM-SINK-0000000009 (topic: out)
      <-- KTABLE-TOSTREAM-0000000008"""
DEMO = {"application.id": "streams-wordcount", "default.key.serde": wordcount.STRING_SERDE,
        "default.value.serde": wordcount.STRING_SERDE}


@pytest.mark.parametrize("text, words", [
    ("All streams, lead to KAFKA!", ["all", "streams", "lead", "to", "kafka"]),
    ("", [""]),                       # Java: no match -> the string itself
    ("!!", []),                       # Java drops trailing empty strings: nothing left
    ("  leading", ["", "leading"]),   # a leading positive-width match keeps a leading ""
    ("caf\u00e9 au lait", ["caf", "au", "lait"]),   # Java's \\W is ASCII-only: \u00e9 separates
    ("snake_case x1", ["snake_case", "x1"]),
])
def test_words_split_as_java(text, words):
    assert common.words(text) == words


def test_wordcount_topology_is_kafkas():
    assert str(wordcount.build_topology("streams-plaintext-input", "out").describe()).strip() == \
        KAFKA_WORDCOUNT_DESCRIPTION


def test_wordcount_quickstart_output_every_update():
    config = dict(DEMO, **{"cache.max.bytes.buffering": 0})
    with TopologyTestDriver(wordcount.build_topology(), config) as driver:
        lines = driver.create_input_topic(wordcount.INPUT_TOPIC, Serdes.String(), Serdes.String())
        out = driver.create_output_topic(wordcount.OUTPUT_TOPIC, Serdes.String(), Serdes.Long())
        lines.pipe_value_list(LINES)
        assert [tuple(kv) for kv in out.read_key_values_to_list()] == QUICKSTART
        lines.pipe_input(None, "Kafka, again")
        assert [tuple(kv) for kv in out.read_key_values_to_list()] == [("kafka", 4), ("again", 1)]
        store = driver.get_key_value_store("KSTREAM-AGGREGATE-STATE-STORE-0000000003")
        assert store.get("kafka") == 4 and store.get("streams") == 2 and store.get("nope") is None


def test_pipe_copies_keys_values_timestamps_headers():
    with TopologyTestDriver(pipe.build_topology(), DEMO) as driver:
        src = driver.create_input_topic(pipe.INPUT_TOPIC, Serdes.String(), Serdes.String())
        out = driver.create_output_topic(pipe.OUTPUT_TOPIC, Serdes.String(), Serdes.String())
        src.pipe_input("k", "v1", 5, [("h", b"x")])
        src.pipe_input(None, "v2", 7)
        got = [(r.key, r.value, r.timestamp, r.headers) for r in (out.read_record(), out.read_record())]
        assert got == [("k", "v1", 5, [("h", b"x")]), (None, "v2", 7, [])]
        assert out.is_empty()


def test_windowed_count_prints_final_counts_only():
    printed = []
    topology = windowed_count.build_topology(window_ms=10000, grace_ms=1000, out=printed.append)
    with TopologyTestDriver(topology, DEMO) as driver:
        src = driver.create_input_topic(windowed_count.INPUT_TOPIC, Serdes.String(), Serdes.String())
        out = driver.create_output_topic(windowed_count.OUTPUT_TOPIC, Serdes.String(), Serdes.Long())
        src.pipe_input(None, "a b a", 1000)
        src.pipe_input(None, "b", 9999)
        src.pipe_input(None, "a", 10500)       # window [10000, 20000); stream time 10500 < 10000 + grace 1000
        assert printed == [] and out.is_empty()
        src.pipe_input(None, "late b", 9000)   # out of order, within the grace of [0, 10000): counted
        assert printed == []
        src.pipe_input(None, "c", 11000)       # stream time 11000 = end 10000 + grace: [0, 10000) closes
        assert printed == ["a@0/10000 2", "b@0/10000 3", "late@0/10000 1"]
        assert [tuple(kv) for kv in out.read_key_values_to_list()] == [("a@0", 2), ("b@0", 3), ("late@0", 1)]
        src.pipe_input(None, "a", 500)         # late for the closed window: dropped, nothing printed
        src.pipe_input(None, "z", 21000)       # closes [10000, 20000)
        assert printed[3:] == ["a@10000/20000 1", "c@10000/20000 1"]
        assert [tuple(kv) for kv in out.read_key_values_to_list()] == [("a@10000", 1), ("c@10000", 1)]


def test_example_options():
    args = common.parser("p", "d", "streams-wordcount").parse_args(
        ["--bootstrap-server", "h:1", "--processing-guarantee", "exactly_once_v2", "--commit-interval-ms", "200",
         "--state-dir", "/s", "--config", "consumer.session.timeout.ms=10000"])
    assert wordcount.demo_config(args) == {
        "application.id": "streams-wordcount", "bootstrap.servers": "h:1", "processing.guarantee": "exactly_once_v2",
        "cache.max.bytes.buffering": 0, "default.key.serde": wordcount.STRING_SERDE,
        "default.value.serde": wordcount.STRING_SERDE, "auto.offset.reset": "earliest", "state.dir": "/s",
        "commit.interval.ms": 200, "consumer.session.timeout.ms": "10000"}
    with pytest.raises(SystemExit):
        common.streams_config(common.parser("p", "d", "x").parse_args(["--config", "novalue"]))
