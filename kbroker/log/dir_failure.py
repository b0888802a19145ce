"""Failed log directories (KIP-112; Kafka's LogDirFailureChannel).

A log dir whose file system fails a write, an fsync or a file creation (ENOSPC, EIO, EROFS, ...) goes offline as a
whole: every log in it stops being used on this broker, its partitions answer KAFKA_STORAGE_ERROR (56), the
controller moves their leadership to other replicas, and the broker keeps serving its other dirs. Nothing in the
dir is written again until the broker restarts (after the disk is repaired): a restart loads it like any dir after
a crash (no clean-shutdown marker is written in an offline dir, so the loader re-scans everything above its
recovery point and cuts a torn tail).

``LogDirFailureChannel`` (one per LogManager) is where the log layer reports: ``report(path, exc)`` with any path
inside a log dir (a partition directory, a checkpoint file) -- from the event loop or a worker thread (fsync). The
first report of a dir adds it to ``offline`` and calls ``on_failure(log_dir)`` (the broker installs a thread-safe
callback that hands the dir to the event loop: ReplicaManager.handle_log_dir_failure, then the
``/log_dir_event_notification`` znode the controller watches). Later reports of the same dir are only logged.

``storage_error(path, exc)`` reports and returns the ``KafkaStorageError`` a caller raises instead of the OSError,
so every layer above sees Kafka's error, never a raw OSError, for a failed dir. The channel of a path is found
through the registry of the LogManagers' dirs (``register`` / ``unregister``), so a Log needs no reference to it.

Test-only I/O error injection (``INJECTED``): with ``KBROKER_TEST_IO_FAULTS=1`` in its environment the broker
polls every 100 ms, for each log dir, whether a file named ``INJECT_FILE`` exists in it (``poll_injection``);
while it does, every Log append, roll and flush in that dir raises ``OSError(EIO)`` before touching a file
(``check_injected``). Without the variable nothing polls and ``INJECTED`` stays empty: the append path pays one
truthiness test of an empty set. This is how the tests make a disk "start failing I/O" (no device-mapper here);
ENOSPC is real (a size-capped tmpfs). Likewise a file ``SLOW_FILE`` holding a number of seconds makes the disk
"slow" for replication (``SLOW``): the follower's fetcher waits that long before appending each answer's records for
a partition whose log is in that dir (kbroker/replica/fetcher.py) -- a follower throttled to a crawl, as a slow disk
holds Kafka's fetcher thread -- without blocking the event loop.
"""
import errno
import logging
import os
import threading

from kbroker import errors

logger = logging.getLogger(__name__)

INJECT_FILE = ".kbroker-inject-eio"
INJECT_ENV = "KBROKER_TEST_IO_FAULTS"
SLOW_FILE = ".kbroker-inject-slow"

INJECTED = set()          # log dirs (absolute) whose I/O fails by injection (tests only; module docstring)
SLOW = {}                 # log dir (absolute) -> seconds each replicated append waits (tests only)
_CHANNELS = {}            # log dir (absolute) -> LogDirFailureChannel
_registry_lock = threading.Lock()


class LogDirFailureChannel:
    """The offline log dirs of one LogManager and the callback told about each new one (module docstring)."""

    def __init__(self, log_dirs):
        self.log_dirs = list(log_dirs)
        self.offline = set()
        self.on_failure = None          # fn(log_dir), any thread; installed by the broker
        self._lock = threading.Lock()

    def log_dir_of(self, path):
        """The log dir holding ``path`` (a partition directory or a file in a log dir), or None."""
        path = os.path.abspath(path)
        for d in self.log_dirs:
            if path == d or path.startswith(d + os.sep):
                return d
        return None

    def report(self, path, exc):
        """``exc`` happened on ``path``: its log dir goes offline (first report) and ``on_failure`` is called.
        Returns the log dir, or None when ``path`` is in none of them."""
        d = self.log_dir_of(path)
        if d is None:
            logger.error("I/O error outside every log dir (%s): %s", path, exc)
            return None
        with self._lock:
            new = d not in self.offline
            self.offline.add(d)
        if not new:
            logger.debug("log dir %s (offline) failed again on %s: %s", d, path, exc)
            return d
        logger.error("Error while writing to %s in log dir %s: %s -- the log dir goes offline (KIP-112): its "
                     "partitions answer KAFKA_STORAGE_ERROR and their leadership moves to other replicas", path, d,
                     exc)
        cb = self.on_failure
        if cb is not None:
            cb(d)
        return d

    def is_offline(self, log_dir):
        return log_dir in self.offline


def register(channel):
    with _registry_lock:
        for d in channel.log_dirs:
            _CHANNELS[d] = channel


def unregister(channel):
    with _registry_lock:
        for d in channel.log_dirs:
            if _CHANNELS.get(d) is channel:
                del _CHANNELS[d]


def channel_for(path):
    """The registered channel whose log dirs hold ``path``, or None (a Log built outside a LogManager: tools)."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    for d in (parent, os.path.dirname(parent)):   # a partition dir or a file in it
        ch = _CHANNELS.get(d)
        if ch is not None:
            return ch
    return None


def storage_error(path, exc):
    """Report ``exc`` (an OSError on ``path``) to its log dir's channel; returns the KafkaStorageError to raise."""
    ch = channel_for(path)
    if ch is not None:
        ch.report(path, exc)
    return errors.KafkaStorageError("I/O error on %s: %s" % (path, exc))


def check_injected(path):
    """Raise OSError(EIO) when ``path`` lies in a log dir whose failure is injected (call only when INJECTED)."""
    path = os.path.abspath(path)
    for d in tuple(INJECTED):
        if path == d or path.startswith(d + os.sep):
            raise OSError(errno.EIO, "injected I/O error (%s in %s)" % (INJECT_FILE, d), path)


def slow_delay(path):
    """Seconds a replicated append to ``path`` waits (0.0 unless a SLOW_FILE is in its log dir; tests only)."""
    path = os.path.abspath(path)
    for d, seconds in tuple(SLOW.items()):
        if path.startswith(d + os.sep):
            return seconds
    return 0.0


def poll_injection(log_dirs):
    """Set ``INJECTED`` and ``SLOW`` from the ``INJECT_FILE`` / ``SLOW_FILE`` markers of ``log_dirs`` (tests;
    module docstring)."""
    for d in log_dirs:
        d = os.path.abspath(d)
        try:
            with open(os.path.join(d, SLOW_FILE)) as f:
                seconds = float(f.read().strip() or 0)
        except (OSError, ValueError):
            seconds = 0.0
        if seconds > 0:
            SLOW[d] = seconds
        else:
            SLOW.pop(d, None)
        if os.path.exists(os.path.join(d, INJECT_FILE)):
            if d not in INJECTED:
                logger.warning("test I/O error injection on for %s", d)
            INJECTED.add(d)
        elif d in INJECTED:
            logger.warning("test I/O error injection off for %s", d)
            INJECTED.discard(d)
