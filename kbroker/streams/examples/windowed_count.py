"""Tumbling-window word counts with kbroker.streams, final results only (suppression until the window closes).

    python -m kbroker.streams.examples.windowed_count --bootstrap-server HOST:PORT
        [--input-topic streams-plaintext-input] [--output-topic streams-windowed-wordcount-output]
        [--window-ms 60000] [--grace-ms 0] [--application-id streams-windowed-wordcount] ...

Lines are split into words as in WordCountDemo and counted per word in tumbling windows of ``--window-ms``
(aligned to the epoch: [k*size, (k+1)*size)) with ``--grace-ms`` of grace for out-of-order records.
``suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))`` holds every count back until stream time
(the largest record timestamp seen by the task) passes window end + grace, then emits each window's final count
once. Each final count is printed on stdout as ``<word>@<window start>/<window end> <count>`` (Kafka's Windowed
string without brackets) and written to the output topic with a String key ``<word>@<window start>`` and a Long
value (8-byte big-endian). A window closes only when a later record arrives: the last window of an idle input is
printed when newer records come. Other options: examples/common.py.
"""
import sys

from kbroker.streams.dsl.builder import StreamsBuilder
from kbroker.streams.dsl.options import Produced
from kbroker.streams.dsl.windows import BufferConfig, Suppressed, TimeWindows
from kbroker.streams.examples import common
from kbroker.streams.keyvalue import KeyValue
from kbroker.streams.serdes import Serdes

INPUT_TOPIC = "streams-plaintext-input"
OUTPUT_TOPIC = "streams-windowed-wordcount-output"
STRING_SERDE = "org.apache.kafka.common.serialization.Serdes$StringSerde"


def final_line(windowed, count):
    return "%s@%d/%d %d" % (windowed.key, windowed.window.start, windowed.window.end, count)


def build_topology(input_topic=INPUT_TOPIC, output_topic=OUTPUT_TOPIC, window_ms=60000, grace_ms=0, out=None):
    """The topology; every final count is also passed to ``out(line)`` (print by default)."""
    out = out or (lambda line: print(line, flush=True))
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(window_ms, grace_ms)
    (builder.stream(input_topic)
     .flat_map_values(common.words)
     .group_by(lambda key, word: word)
     .windowed_by(windows)
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .peek(lambda windowed, count: out(final_line(windowed, count)))
     .map(lambda windowed, count: KeyValue("%s@%d" % (windowed.key, windowed.window.start), count))
     .to(output_topic, Produced.with_(Serdes.String(), Serdes.Long())))
    return builder.build()


def main(argv=None):
    p = common.parser("python -m kbroker.streams.examples.windowed_count", __doc__.splitlines()[0],
                      "streams-windowed-wordcount")
    p.add_argument("--input-topic", default=INPUT_TOPIC)
    p.add_argument("--output-topic", default=OUTPUT_TOPIC)
    p.add_argument("--window-ms", type=int, default=60000)
    p.add_argument("--grace-ms", type=int, default=0)
    args = p.parse_args(argv)
    config = common.streams_config(args, **{"default.key.serde": STRING_SERDE, "default.value.serde": STRING_SERDE,
                                            "auto.offset.reset": "earliest"})
    return common.run(build_topology(args.input_topic, args.output_topic, args.window_ms, args.grace_ms), config)


if __name__ == "__main__":
    sys.exit(main())
