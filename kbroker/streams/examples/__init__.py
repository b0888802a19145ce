"""Runnable kbroker.streams examples: Kafka's Streams demos written with the Python DSL.

    python -m kbroker.streams.examples.wordcount --bootstrap-server HOST:PORT       Kafka's WordCountDemo
    python -m kbroker.streams.examples.pipe --bootstrap-server HOST:PORT            Kafka's PipeDemo
    python -m kbroker.streams.examples.windowed_count --bootstrap-server HOST:PORT  tumbling-window word counts,
                                                                                    final results only (suppress)

Each runs until SIGINT/SIGTERM (Ctrl-C), then closes the application gracefully (commit, leave the group) and
exits 0; 1 when the application stopped with an error. What they share (options, the run loop, Java's split) is in
common.py.
"""
