"""Per-log configuration (Kafka's LogConfig), built by the server from broker defaults + topic overrides.

Field defaults are Kafka 0.10.1's topic-level defaults except ``max_message_bytes``, which follows the
v2-batch era value 1048588 (1 MiB + the 12-byte log overhead) because kbroker stores v2 batches and the
limit applies to a whole batch.  ``flush_interval_ms=None`` means "never by time" (Kafka's Long.MAX).

``TOPIC_KEYS`` maps Kafka's topic-level config names to fields and ``BROKER_KEYS`` maps the
broker-level ``log.*`` names, so ``from_props`` can apply either kind of ``{name: str}`` mapping.
"""

import dataclasses
from dataclasses import dataclass

LONG_MAX = 2 ** 63 - 1


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int | None = None
    file_delete_delay_ms: int = 60000
    max_message_bytes: int = 1048588
    cleanup_policy: str = "delete"
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    unclean_leader_election_enable: bool = True
    preallocate: bool = False

    @property
    def policies(self):
        """cleanup.policy is a comma list (``compact,delete`` is legal)."""
        return {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}

    @property
    def deletes(self):
        return "delete" in self.policies

    @property
    def compacts(self):
        return "compact" in self.policies

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def from_props(self, props):
        """A copy with Kafka-named string properties applied (topic names or broker ``log.*`` names).

        Unknown names are ignored (the admin layer validates names); ``flush.ms`` of Long.MAX maps
        back to None.  Raises ValueError on a value that does not parse.
        """
        changes = {}
        for name, raw in props.items():
            field = TOPIC_KEYS.get(name) or BROKER_KEYS.get(name)
            if field is None:
                continue
            changes[field] = _parse(field, raw)
        if changes.get("flush_interval_ms") == LONG_MAX:
            changes["flush_interval_ms"] = None
        return dataclasses.replace(self, **changes)


TOPIC_KEYS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "max.message.bytes": "max_message_bytes",
    "cleanup.policy": "cleanup_policy",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "min.insync.replicas": "min_insync_replicas",
    "compression.type": "compression_type",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "preallocate": "preallocate",
}

BROKER_KEYS = {
    "log.segment.bytes": "segment_bytes",
    "log.roll.ms": "segment_ms",
    "log.roll.jitter.ms": "segment_jitter_ms",
    "log.index.size.max.bytes": "segment_index_bytes",
    "log.index.interval.bytes": "index_interval_bytes",
    "log.retention.ms": "retention_ms",
    "log.retention.bytes": "retention_bytes",
    "log.flush.interval.messages": "flush_interval_messages",
    "log.flush.interval.ms": "flush_interval_ms",
    "log.segment.delete.delay.ms": "file_delete_delay_ms",
    "message.max.bytes": "max_message_bytes",
    "log.cleanup.policy": "cleanup_policy",
    "log.message.timestamp.type": "message_timestamp_type",
    "log.message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "log.cleaner.delete.retention.ms": "delete_retention_ms",
    "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
    "log.cleaner.min.cleanable.ratio": "min_cleanable_dirty_ratio",
    "log.preallocate": "preallocate",
}

# Parse by the default's type; flush_interval_ms defaults to None but holds an int.
_FIELD_TYPES = {f.name: type(f.default) if f.default is not None else int for f in dataclasses.fields(LogConfig)}


def _parse(field, raw):
    if not isinstance(raw, str):
        return raw
    kind = _FIELD_TYPES[field]
    if kind is str:
        return raw.strip()
    if kind is bool:
        low = raw.strip().lower()
        if low not in ("true", "false"):
            raise ValueError("%s: expected true/false, got %r" % (field, raw))
        return low == "true"
    if kind is float:
        return float(raw)
    return int(raw)
