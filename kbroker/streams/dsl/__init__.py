"""kbroker.streams' high-level DSL (Kafka's org.apache.kafka.streams.kstream): StreamsBuilder, KStream, KTable,
KGroupedStream, KGroupedTable and their option objects. Windows, joins and suppression live in windows.py,
windowed.py, joins.py and suppress.py."""

from kbroker.streams.dsl.builder import StreamsBuilder
from kbroker.streams.dsl.grouped import KGroupedStream, KGroupedTable
from kbroker.streams.dsl.kstream import BranchedKStream, KStream
from kbroker.streams.dsl.ktable import KTable
from kbroker.streams.dsl.nodes import Change
from kbroker.streams.dsl.options import (Branched, Consumed, Grouped, Materialized, Named, Printed, Produced,
                                         Repartitioned, StoreType)

__all__ = ["StreamsBuilder", "KStream", "BranchedKStream", "KTable", "KGroupedStream", "KGroupedTable", "Change",
           "Branched", "Consumed", "Grouped", "Materialized", "Named", "Printed", "Produced", "Repartitioned",
           "StoreType"]
