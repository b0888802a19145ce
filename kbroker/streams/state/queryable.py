"""Interactive queries of local stores: Kafka's QueryableStoreTypes, StoreQueryParameters and the read-only composite
views over the same-named store of every local task (Kafka's CompositeReadOnly*Store).

KafkaStreams.store(params) (S5) collects the typed stores named ``params.store_name`` of its running active tasks
(standbys too with ``enable_stale_stores()``; one partition with ``with_partition(p)``) and calls
``build_composite(params, stores)``. Views are read-only (writes raise InvalidStateStoreException-like errors) and
check on every call that the stores are still open (a store closed by a rebalance raises
InvalidStateStoreException: the caller retries after the rebalance, as with Kafka).

Ordering of a composite ``range``/``all``: task by task (ascending partition), within a task the store's own order --
Kafka's composite iterators concatenate the same way (no global merge).
"""


class QueryableStoreType:
    """Which store kind a query wants; ``accepts(store)`` / ``create(stores)``."""
    kind = None

    def accepts(self, store) -> bool:
        raise NotImplementedError

    def create(self, stores: list, store_name: str):
        raise NotImplementedError


class QueryableStoreTypes:
    @staticmethod
    def key_value_store() -> QueryableStoreType:
        raise NotImplementedError

    @staticmethod
    def timestamped_key_value_store() -> QueryableStoreType:
        raise NotImplementedError

    @staticmethod
    def window_store() -> QueryableStoreType:
        raise NotImplementedError

    @staticmethod
    def timestamped_window_store() -> QueryableStoreType:
        raise NotImplementedError

    @staticmethod
    def session_store() -> QueryableStoreType:
        raise NotImplementedError


class StoreQueryParameters:
    """Kafka's StoreQueryParameters: from_name_and_type(name, type), with_partition(p), enable_stale_stores()."""

    def __init__(self, store_name, queryable_store_type, partition=None, stale_stores=False):
        self.store_name = store_name
        self.queryable_store_type = queryable_store_type
        self.partition = partition
        self.stale_stores = stale_stores

    @classmethod
    def from_name_and_type(cls, store_name, queryable_store_type) -> "StoreQueryParameters":
        return cls(store_name, queryable_store_type)

    def with_partition(self, partition) -> "StoreQueryParameters":
        return StoreQueryParameters(self.store_name, self.queryable_store_type, partition, self.stale_stores)

    def enable_stale_stores(self) -> "StoreQueryParameters":
        return StoreQueryParameters(self.store_name, self.queryable_store_type, self.partition, True)


def build_composite(params: StoreQueryParameters, stores: list):
    """A read-only view over ``stores`` (typed stores, ordered by task) of ``params.queryable_store_type``; raises
    InvalidStateStoreException when a store does not match the type."""
    raise NotImplementedError
