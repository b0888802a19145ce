"""Kafka's PipeDemo with kbroker.streams: every record of the input topic copied to the output topic.

    python -m kbroker.streams.examples.pipe --bootstrap-server HOST:PORT
        [--input-topic streams-plaintext-input] [--output-topic streams-pipe-output] [--application-id streams-pipe]

Keys and values are copied as they are (String serdes, as the demo's defaults: any UTF-8 passes through unchanged),
with their timestamps and headers; one task per input partition. A keyed record goes to partition
murmur2(key) % partitions of the output (Java's default partitioner), a null-keyed one where the producer's
partitioner puts it. Other options: examples/common.py.
"""
import sys

from kbroker.streams.dsl.builder import StreamsBuilder
from kbroker.streams.examples import common

INPUT_TOPIC = "streams-plaintext-input"
OUTPUT_TOPIC = "streams-pipe-output"
STRING_SERDE = "org.apache.kafka.common.serialization.Serdes$StringSerde"


def build_topology(input_topic=INPUT_TOPIC, output_topic=OUTPUT_TOPIC):
    builder = StreamsBuilder()
    builder.stream(input_topic).to(output_topic)
    return builder.build()


def main(argv=None):
    p = common.parser("python -m kbroker.streams.examples.pipe", __doc__.splitlines()[0], "streams-pipe")
    p.add_argument("--input-topic", default=INPUT_TOPIC)
    p.add_argument("--output-topic", default=OUTPUT_TOPIC)
    args = p.parse_args(argv)
    config = common.streams_config(args, **{"default.key.serde": STRING_SERDE, "default.value.serde": STRING_SERDE,
                                            "auto.offset.reset": "earliest"})
    return common.run(build_topology(args.input_topic, args.output_topic), config)


if __name__ == "__main__":
    sys.exit(main())
