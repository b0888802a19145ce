"""Kafka's internal topics: their names, spelled once for the whole broker.

Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME`` / ``TRANSACTION_STATE_TOPIC_NAME``. Metadata reports them with
``is_internal`` true; no client may Produce to them (INVALID_TOPIC_EXCEPTION, 17); auto-creation never makes them;
the offsets topic's partition count cannot be changed and neither can be marked for deletion by the tools.
``__consumer_offsets`` is written in-process by the group coordinator (kbroker/coordinator/offsets_log.py);
``__transaction_state`` by the transaction coordinator (kbroker/transaction/state_manager.py).

A leaf module (layer 0 in tests/unit/test_architecture.py): it imports nothing, so the coordinator, the handlers,
the broker and the command-line tools can all name these topics without importing each other.
"""

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"

INTERNAL_TOPICS = frozenset([GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC])


def is_internal(name):
    """True for the names of Kafka's internal topics (exact match: ``__foo`` is an ordinary topic)."""
    return name in INTERNAL_TOPICS
