"""kbroker.streams.state: Kafka Streams' state stores (see base.py for the layer stack, stores.py for the factory,
state_manager.py for a task's stores, restore and checkpoints, queryable.py for interactive queries)."""

from kbroker.streams.state.base import (FlushListener, KeyValueIterator, StateStore, StateStoreContext,
                                        ValueAndTimestamp)
from kbroker.streams.state.keyvalue_store import KeyValueStore
from kbroker.streams.state.queryable import QueryableStoreType, QueryableStoreTypes, StoreQueryParameters
from kbroker.streams.state.session_store import SessionStore
from kbroker.streams.state.state_manager import (ChangelogRecord, MemoryRestoreConsumer, ProcessorStateManager,
                                                 RestoreResult, StateRestoreListener)
from kbroker.streams.state.stores import StoreBuilder, Stores
from kbroker.streams.state.window_store import WindowStore

__all__ = ["ChangelogRecord", "FlushListener", "KeyValueIterator", "KeyValueStore", "MemoryRestoreConsumer",
           "ProcessorStateManager", "QueryableStoreType", "QueryableStoreTypes", "RestoreResult", "SessionStore",
           "StateRestoreListener", "StateStore", "StateStoreContext", "StoreBuilder", "StoreQueryParameters", "Stores",
           "ValueAndTimestamp", "WindowStore"]
