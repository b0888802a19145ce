"""Per-log configuration (Kafka's LogConfig): one frozen value per topic, built by the broker from its defaults
and the topic's overrides (``kbroker.config.log_config_for``).

The field defaults are the one source of the per-log defaults: the broker key table (``kbroker/config/keys.py``)
takes its ``log.*`` / ``message.max.bytes`` / ``min.insync.replicas`` ... defaults from them, so a default lives
in exactly one place. They are Kafka's topic-level defaults, modern where kbroker follows modern Kafka:
``max_message_bytes`` 1048588 (1 MiB + the 12-byte log overhead: kbroker stores v2 batches and the limit applies
to a whole batch; 0.10.1 had 1000012) and ``unclean_leader_election_enable`` False (Kafka >= 0.11).
``flush_interval_ms=None`` means "never by time" (Kafka's Long.MAX); ``cleanup_policy`` is the comma string
(``"compact,delete"`` is legal).
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
    unclean_leader_election_enable: bool = False
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
