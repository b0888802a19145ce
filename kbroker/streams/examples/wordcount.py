"""Kafka's WordCountDemo with kbroker.streams (the quickstart's step 8).

    python -m kbroker.streams.examples.wordcount --bootstrap-server HOST:PORT
        [--input-topic streams-plaintext-input] [--output-topic streams-wordcount-output]
        [--application-id streams-wordcount] [--processing-guarantee at_least_once|exactly_once_v2] ...

Reads text lines (String values) from the input topic, splits each into lower-case words on ``\\W+`` (Java's
split: ASCII non-word characters), re-keys every word by itself (a repartition topic
``<application.id>-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition``), counts per word in a state store
(changelog ``...-changelog``) and writes every count update to the output topic: String key, Long value (8-byte
big-endian), as Kafka's demo. The record cache is off (``cache.max.bytes.buffering=0``, the demo's
``statestore.cache.max.bytes=0``): every update is written, so the quickstart's three lines give
``all 1, streams 1, lead 1, to 1, kafka 1, hello 1, kafka 2, streams 2, join 1, kafka 3, summit 1``.
``--input-topic streams-file-input`` is the 0.10.1 quickstart's name. Other options: examples/common.py.
"""
import sys

from kbroker.streams.dsl.builder import StreamsBuilder
from kbroker.streams.dsl.options import Produced
from kbroker.streams.examples import common
from kbroker.streams.serdes import Serdes

INPUT_TOPIC = "streams-plaintext-input"
OUTPUT_TOPIC = "streams-wordcount-output"
STRING_SERDE = "org.apache.kafka.common.serialization.Serdes$StringSerde"


def build_topology(input_topic=INPUT_TOPIC, output_topic=OUTPUT_TOPIC):
    """WordCountDemo's topology: the same processors, names and internal topics as Kafka's."""
    builder = StreamsBuilder()
    counts = (builder.stream(input_topic)
              .flat_map_values(common.words)
              .group_by(lambda key, word: word)
              .count())
    counts.to_stream().to(output_topic, Produced.with_(Serdes.String(), Serdes.Long()))
    return builder.build()


def demo_config(args):
    return common.streams_config(args, **{"cache.max.bytes.buffering": 0, "default.key.serde": STRING_SERDE,
                                          "default.value.serde": STRING_SERDE, "auto.offset.reset": "earliest"})


def main(argv=None):
    p = common.parser("python -m kbroker.streams.examples.wordcount", __doc__.splitlines()[0], "streams-wordcount")
    p.add_argument("--input-topic", default=INPUT_TOPIC, help="streams-file-input in the 0.10.1 quickstart")
    p.add_argument("--output-topic", default=OUTPUT_TOPIC)
    args = p.parse_args(argv)
    return common.run(build_topology(args.input_topic, args.output_topic), demo_config(args))


if __name__ == "__main__":
    sys.exit(main())
