"""Kafka's on-disk log: segments (``.log``/``.index``/``.timeindex``), Log, loader (recovery),
checkpoints and the LogManager.  Every ``.log`` file holds v2 record batches only."""

from .checkpoint import OffsetCheckpoint
from .config import LogConfig
from .file_region import FileRegion
from .log import FetchSlice, Log, parse_topic_partition
from .manager import InconsistentBrokerIdError, LogDirLockedError, LogManager
from .segment import LogSegment

__all__ = ["OffsetCheckpoint", "LogConfig", "FileRegion", "FetchSlice", "Log", "parse_topic_partition",
           "InconsistentBrokerIdError", "LogDirLockedError", "LogManager", "LogSegment"]
