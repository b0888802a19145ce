"""All logs of a broker across its ``log.dirs`` (Kafka's LogManager).

Per log dir it owns:
* ``.lock`` -- ``fcntl.flock`` exclusive, non-blocking, held from construction to ``shutdown``; a held
  lock means another broker uses the directory and construction fails with LogDirLockedError.
* ``meta.properties`` -- Java properties text, ``version=0`` and ``broker.id=N`` (0.10.1 has no
  cluster.id).  A stored broker.id differing from the configured one fails construction with
  InconsistentBrokerIdError naming the file; a missing file is written after the check.
* ``.kafka_cleanshutdown`` -- present => logs load without scanning; deleted once the dir is loaded,
  written again by a clean ``shutdown``.
* ``recovery-point-offset-checkpoint`` -- see checkpoint.py; read at load, written by
  ``checkpoint_recovery_points`` (every log.flush.offset.checkpoint.interval.ms) and at shutdown.
* ``log-start-offset-checkpoint`` -- Kafka's (same format): each log whose start offset is above its first
  segment's base offset (moved by DeleteRecords, ``Log.maybe_increment_log_start_offset``); read at load, written
  with the recovery points (``checkpoint_recovery_points``) and at shutdown. Kafka writes it every
  log.flush.start.offset.checkpoint.interval.ms; the broker runs both on that key's and the recovery point key's
  intervals (the smaller wins).
* ``cleaner-offset-checkpoint`` -- first dirty offset per compacted log, owned by the LogCleaner
  (cleaner.py; ``self.cleaner``), whose ``clean_once`` this class exposes.
* ``<topic>-<partition>/`` -- one Log each (topic = text before the last '-').
* ``<topic>-<partition>.<32 hex uuid>-delete/`` -- a partition being deleted (``delete_dir_name``): renamed
  first, then removed, so a crash in between leaves a directory the next load removes, never half a log.
  The topic part is cut so the name fits the 255-byte file name limit of Linux file systems (a legal
  249-character topic would otherwise make the rename fail with ENAMETOOLONG), as Kafka's
  ``LocalLog.logDirNameWithSuffixCappedLength`` does.
* ``<topic>-<partition>.<32 hex uuid>-future/`` -- the future log of a replica moving to this dir (KIP-113,
  AlterReplicaLogDirs; the copy and the swap are kbroker/replica/log_dir_move.py's): ``make_future_log`` (any
  thread) -> ``add_future_log`` (owner); ``replace_current_with_future`` (owner) makes it the partition's log once
  the move renamed the old directory ``-delete`` and this one ``<topic>-<partition>``. At load a ``-future``
  directory whose partition has a current log is loaded as its future (the move resumes); one without (a crash
  between the swap's two renames: the old directory was already ``-delete``) is renamed to the current name and
  loaded as the partition's log. Kafka's ``-stray`` is not used. A future name is not cut to 255 bytes (its topic
  must be parsed back at load): a topic too long for it cannot move (OSError -> KAFKA_STORAGE_ERROR).

Periodic work is exposed as plain blocking methods the server's greenlets call (no gevent here):
``check_retention``, ``flush_dirty`` (fsync: run it in a thread pool), ``checkpoint_recovery_points``,
``clean_once`` (log compaction: run it in a thread pool).

Many logs at once (a LeaderAndIsr or StopReplica for a topic of up to 10,000 partitions): the file work is split
from the bookkeeping so a worker thread can do it while the owner's thread (the event loop) keeps serving.
Creating: ``place_new_logs`` (owner: which dir) -> ``create_logs`` (any thread: directories, segments, one fsync per
log dir) -> ``add_logs`` (owner: registered). Deleting: ``detach_log`` (owner: forgotten, closed) ->
``remove_log_dirs`` (any thread: renamed ``-delete``, one fsync per log dir, removed). ``get_or_create_log`` and
``delete_log`` are both steps in a row.
"""

import errno
import fcntl
import logging
import os
import shutil
import uuid

from kbroker import errors

from . import dir_failure
from .checkpoint import OffsetCheckpoint, fsync_dir, sync_filesystem
from .cleaner import LogCleaner
from .log import Log, parse_topic_partition
from .segment import now_ms

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
META_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
MAX_FILE_NAME = 255  # NAME_MAX of ext4/xfs/btrfs/tmpfs, in bytes (topic names are ASCII)
# A log that cannot be created takes its dir offline only for these (the disk's problem); EMFILE, EEXIST, ENOTDIR,
# EACCES, ENAMETOOLONG... are that one partition's (Kafka takes the dir offline on any IOException here).
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT, errno.ENODEV, errno.ENXIO, errno.EUCLEAN})


def delete_dir_name(topic, partition, unique_id=None):
    """``<topic>-<partition>.<uuid hex>-delete`` with the topic cut so the whole name is <= 255 bytes.

    Kafka's logDeleteDirName: ``topic[:min(len(topic), 255 - len(suffix))] + suffix`` where suffix is
    ``-<partition>.<32 hex>-delete``; a 249-character topic at partition 0 keeps 213 of its characters.
    """
    suffix = "-%d.%s%s" % (partition, unique_id or uuid.uuid4().hex, DELETE_DIR_SUFFIX)
    return topic[:max(0, min(len(topic), MAX_FILE_NAME - len(suffix)))] + suffix


def future_dir_name(topic, partition, unique_id=None):
    """``<topic>-<partition>.<uuid hex>-future`` (Kafka's logFutureDirName)."""
    return "%s-%d.%s%s" % (topic, partition, unique_id or uuid.uuid4().hex, FUTURE_DIR_SUFFIX)


def parse_future_dir_name(name):
    """(topic, partition) of a ``future_dir_name``; ValueError otherwise."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        raise ValueError("not a -future directory name: %r" % name)
    stem, dot, _uid = name[:-len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot:
        raise ValueError("not a -future directory name: %r" % name)
    return parse_topic_partition(stem)


class LogDirLockedError(RuntimeError):
    pass


class NewLogs:
    """What ``create_logs`` made: ``logs`` {tp: Log}, ``dirs`` {tp: log dir}, ``fresh`` (the tps whose partition
    directory this call created: nothing was in it before), ``failed`` {tp: OSError}."""
    __slots__ = ("logs", "dirs", "fresh", "failed")

    def __init__(self, dirs):
        self.logs, self.dirs, self.fresh, self.failed = {}, dirs, set(), {}


class InconsistentBrokerIdError(RuntimeError):
    pass


def read_properties(path):
    """Minimal java.util.Properties reader: ``key=value`` / ``key:value`` lines, ``#``/``!`` comments."""
    props = {}
    with open(path, "r", encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if cut < 0:
                props[line] = ""
            else:
                props[line[:cut].strip()] = line[cut + 1:].strip()
    return props


def write_properties(path, props):
    """Write ``key=value`` lines atomically (tmp + fsync + rename + dir fsync)."""
    text = "#\n#kbroker broker metadata\n" + "".join("%s=%s\n" % kv for kv in props.items())
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


class LogManager:
    def __init__(self, log_dirs, config, broker_id=0, topic_config=None, load_pool=None):
        """``config``: default LogConfig; ``topic_config(topic) -> LogConfig | None`` gives overrides.
        ``load_pool``: where the logs of a directory are opened at load (``_load_dir``): anything with a
        ``map(fn, items)`` returning the results in order that runs ``fn`` in native threads (the broker passes a
        gevent ThreadPool of ``num.recovery.threads.per.data.dir`` threads when that is above 1); None = one after
        another in this thread."""
        self._load_pool = load_pool
        if isinstance(log_dirs, str):
            log_dirs = [d for d in log_dirs.split(",") if d]
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log dir is required")
        self.default_config = config
        self.broker_id = broker_id
        self._topic_config = topic_config
        self._lock_files = {}
        self._logs = {}
        self._dir_of = {}
        self._dir_counts = {d: 0 for d in self.log_dirs}  # partitions per dir, for placing new logs
        self._futures = {}             # {tp: (future Log, its log dir)} (module docstring)
        self.preferred_dirs = {}       # {tp: log dir} asked by AlterReplicaLogDirs before the replica existed
        # Offline log dirs (KIP-112, dir_failure.py): a dir that fails at load starts offline; one that fails later
        # is detached by ``handle_dir_failure``. Their logs are not here, nothing is written in them again.
        self.failures = dir_failure.LogDirFailureChannel(self.log_dirs)
        found_futures = []
        try:
            for d in self.log_dirs:
                try:
                    os.makedirs(d, exist_ok=True)
                except OSError as exc:
                    self._fail_at_load(d, exc)
                    continue
                self._lock(d)
            self._check_meta()
            for d in self.log_dirs:
                if d not in self.failures.offline:
                    try:
                        self._load_dir(d, found_futures)
                    except OSError as exc:
                        self._fail_at_load(d, exc)
            if len(self.failures.offline) == len(self.log_dirs):
                raise errors.KafkaStorageError("every log dir failed to load: %s" % ", ".join(self.log_dirs))
            self._load_futures(found_futures)
            self.cleaner = LogCleaner(self)
        except BaseException:
            for log in self._logs.values():
                log.close()
            self._logs.clear()
            self._unlock_all()
            raise
        dir_failure.register(self.failures)

    def _fail_at_load(self, d, exc):
        """A log dir the broker cannot use at startup starts offline (Kafka's LogManager: the broker starts with the
        others; the controller learns it from the broker's log-dir event)."""
        logger.error("log dir %s failed at startup and stays offline: %s", d, exc)
        self.failures.offline.add(d)
        for tp in [tp for tp, dd in self._dir_of.items() if dd == d]:
            self._logs.pop(tp).close()
            del self._dir_of[tp]
            self._dir_counts[d] -= 1

    @property
    def offline_dirs(self):
        return [d for d in self.log_dirs if d in self.failures.offline]

    @property
    def online_dirs(self):
        return [d for d in self.log_dirs if d not in self.failures.offline]

    # -- startup -------------------------------------------------------------------------------
    def _lock(self, d):
        path = os.path.join(d, LOCK_FILE)
        f = open(path, "a+")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise LogDirLockedError("Failed to acquire lock on file %s: another broker process is using log dir %s"
                                    % (path, d)) from None
        self._lock_files[d] = f

    def _unlock_all(self):
        for f in self._lock_files.values():
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            finally:
                f.close()
        self._lock_files.clear()

    def _check_meta(self):
        missing = []
        for d in self.log_dirs:
            if d in self.failures.offline:
                continue
            path = os.path.join(d, META_FILE)
            if not os.path.exists(path):
                missing.append(path)
                continue
            props = read_properties(path)
            if props.get("version", "0") != "0":
                raise InconsistentBrokerIdError("unsupported meta.properties version %r in %s"
                                                % (props.get("version"), path))
            stored = props.get("broker.id")
            if stored is None:
                missing.append(path)
                continue
            stored = int(stored)
            if self.broker_id is None:
                self.broker_id = stored
            elif stored != self.broker_id:
                raise InconsistentBrokerIdError(
                    "Configured broker.id %d doesn't match stored broker.id %d in %s. If you moved your data, "
                    "make sure your configured broker.id matches. If you intend to create a new broker, remove "
                    "all data in log dir %s." % (self.broker_id, stored, path, d))
        if self.broker_id is not None:
            for path in missing:
                try:
                    write_properties(path, {"version": "0", "broker.id": str(self.broker_id)})
                except OSError as exc:
                    self._fail_at_load(os.path.dirname(path), exc)

    def _load_dir(self, d, found_futures):
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        points = OffsetCheckpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)).read()
        configs = {}    # {topic: LogConfig}: one lookup a topic, not a partition (10,000 partitions: 2.6 s -> 0.3 s)
        starts = OffsetCheckpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT)).read()
        jobs = []       # (tp, path, config, recovery point, log start offset), in name order
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                try:
                    found_futures.append((path, d, parse_future_dir_name(name)))
                except ValueError:
                    pass
                continue
            try:
                tp = parse_topic_partition(name)
            except ValueError:
                continue
            if tp in self._logs:
                raise RuntimeError("duplicate log directories for %s-%d: %s and %s"
                                   % (tp[0], tp[1], self._logs[tp].dir, path))
            config = configs.get(tp[0])
            if config is None:
                config = configs[tp[0]] = self.config_for(tp[0])
            jobs.append((tp, path, config, points.get(tp, 0), starts.get(tp, 0)))
        # Opening a log reads a few pages of each of its files (the first batch's magic, the indexes' last entries,
        # the tail batch, the epoch checkpoint): ~9 ms a partition from a cold page cache on this project's disk,
        # so ~90 s for 10,000 partitions one after another. Those waits overlap in threads: 2,000 cold partitions
        # 20.1 s -> 2.4 s with 8 (docs/performance.md). A Log's construction touches nothing shared.
        def open_log(job):
            tp, path, config, point, start = job
            try:
                return tp, Log(path, config, recovery_point=point, clean_shutdown=clean, log_start_offset=start)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the opened logs are registered
                return tp, exc
        if self._load_pool is not None and len(jobs) > 1:
            opened = self._load_pool.map(open_log, jobs)
        else:
            opened = []
            for job in jobs:      # one after another: stop at the first failure, as before the pool existed
                opened.append(open_log(job))
                if isinstance(opened[-1][1], BaseException):
                    break
        failed = None
        for tp, log in opened:
            if isinstance(log, BaseException):
                failed = failed or log
                continue
            # Registered even when another log of the directory failed: the failure path closes what is here.
            self._logs[tp] = log
            self._dir_of[tp] = d
            self._dir_counts[d] += 1
        if failed is not None:
            raise failed
        if clean:
            os.unlink(marker)
        logger.info("loaded %d log(s) from %s (clean shutdown: %s)",
                    sum(1 for v in self._dir_of.values() if v == d), d, clean)

    def _load_futures(self, found):
        """The ``-future`` directories found at load, once every current log is known (module docstring)."""
        for path, d, tp in found:
            if tp in self._futures or self._dir_of.get(tp) == d:
                logger.warning("removing %s: %s-%d already has a log or a future log in %s", path, tp[0], tp[1], d)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if tp in self._logs:
                log = Log(path, self.config_for(tp[0]))
                log.topic, log.partition = tp
                self._futures[tp] = (log, d)
                logger.info("%s-%d: future log %s loaded (its move to %s resumes)", tp[0], tp[1], path, d)
                continue
            final = os.path.join(d, "%s-%d" % tp)
            os.rename(path, final)
            fsync_dir(d)
            logger.warning("%s-%d: %s completed as the partition's log (a move was interrupted after the old "
                           "directory was renamed)", tp[0], tp[1], final)
            self._logs[tp] = Log(final, self.config_for(tp[0]))
            self._dir_of[tp] = d
            self._dir_counts[d] += 1

    # -- access --------------------------------------------------------------------------------
    def config_for(self, topic):
        if self._topic_config is not None:
            cfg = self._topic_config(topic)
            if cfg is not None:
                return cfg
        return self.default_config

    def set_topic_config(self, topic, config):
        """Apply changed topic configs to that topic's open logs (new segments/rolls/retention use them). The one
        writer of ``Log.config`` after a log is built (with ``config_for``: the ``topic_config`` it was given)."""
        for (t, _p), log in self._logs.items():
            if t == topic:
                log.config = config

    def set_topic_configs(self, configs):
        """``set_topic_config`` for many topics ({topic: LogConfig}) in one pass over the open logs (a dynamic
        broker default changes every topic's: one pass, not one per topic)."""
        for (t, _p), log in self._logs.items():
            config = configs.get(t)
            if config is not None:
                log.config = config

    def get_log(self, tp):
        return self._logs.get(tuple(tp))

    def all_logs(self):
        return dict(self._logs)

    def log_dir_of(self, tp):
        return self._dir_of.get(tuple(tp))

    def __contains__(self, tp):
        return tuple(tp) in self._logs

    def get_or_create_log(self, tp, topic_config=None):
        """The log of ``tp``, created in the log dir holding the fewest partitions (first dir on ties)."""
        tp = tuple(tp)
        log = self._logs.get(tp)
        if log is not None:
            return log
        new = self.create_logs(self.place_new_logs([tp]), {tp[0]: topic_config or self.config_for(tp[0])})
        if tp in new.failed:
            raise new.failed[tp]
        self.add_logs(new)
        return new.logs[tp]

    # -- creating many logs at once (a LeaderAndIsr of a new topic names up to max.topic.partitions) --------------
    def place_new_logs(self, tps):
        """{tp: log dir} for logs about to be created: each in the dir holding the fewest partitions, counting the
        ones placed before it (first dir on ties). Reads only; call it on the thread that owns the manager."""
        counts = dict(self._dir_counts)
        dirs = self.online_dirs if self.failures.offline else self.log_dirs
        if not dirs:
            raise errors.KafkaStorageError("every log dir is offline: %s" % ", ".join(self.log_dirs))
        placements = {}
        for tp in tps:
            d = self.preferred_dirs.pop(tuple(tp), None)
            if d is None or d in self.failures.offline:
                d = dirs[0] if len(dirs) == 1 else min(dirs, key=counts.__getitem__)
            counts[d] += 1
            placements[tuple(tp)] = d
        return placements

    def create_logs(self, placements, configs):
        """Create the logs of ``placements`` ({tp: log dir}, from ``place_new_logs``) with ``configs`` ({topic:
        LogConfig}); returns ``NewLogs``. Blocking file work that reads and writes none of the manager's state, so
        it may run in a worker thread while the owner goes on using the manager; ``add_logs`` then registers the
        result on the owner's thread.

        Durable before it returns: every new partition directory's entry in its log dir, through one fsync per log
        dir after all of them were made (the old path fsync'd the log dir once per partition: 10,000 fsyncs for one
        CreateTopics). A log dir whose fsync fails fails all of its new logs (closed, in ``failed``).
        """
        new = NewLogs(placements)
        for tp, d in placements.items():
            path = os.path.join(d, "%s-%d" % tp)
            try:
                try:
                    os.mkdir(path)
                    fresh = True
                except FileExistsError:
                    fresh = False            # left by an earlier attempt that failed: load what it holds
                new.logs[tp] = Log(path, configs[tp[0]])
                if fresh:
                    new.fresh.add(tp)
            except OSError as exc:           # ENOSPC, EMFILE, EACCES: this partition fails, the others go on
                new.failed[tp] = exc
                if exc.errno in DISK_ERRNOS:     # a full or failing disk: the dir goes offline (KIP-112)
                    self.failures.report(path, exc)
        for d in sorted({placements[tp] for tp in new.logs}):
            try:
                fsync_dir(d)
            except OSError as exc:
                self.failures.report(d, exc)
                for tp in [tp for tp in new.logs if placements[tp] == d]:
                    new.logs.pop(tp).close()
                    new.fresh.discard(tp)
                    new.failed[tp] = exc
        return new

    def add_logs(self, new):
        """Register the logs ``create_logs`` made (on the thread that owns the manager)."""
        for tp, log in new.logs.items():
            if tp in self._logs:
                raise RuntimeError("log of %s-%d created twice" % tp)
            d = new.dirs[tp]
            self._logs[tp] = log
            self._dir_of[tp] = d
            self._dir_counts[d] += 1

    def delete_log(self, tp):
        """Close and remove a partition's directory; returns True if it existed."""
        detached = self.detach_log(tp)
        if detached is None:
            return False
        self.remove_log_dirs([detached])
        return True

    def detach_log(self, tp):
        """Forget the log of ``tp`` and close it (on the owner's thread); returns ``(tp, log, log dir)`` for
        ``remove_log_dirs``, or None when there is no such log."""
        tp = tuple(tp)
        log = self._logs.pop(tp, None)
        if log is None:
            return None
        d = self._dir_of.pop(tp)
        self._dir_counts[d] -= 1
        self.cleaner.forget(tp)
        log.close()
        return tp, log, d

    def remove_log_dirs(self, detached):
        """Remove the directories of logs ``detach_log`` returned. Each is renamed to its ``-delete`` name first, so
        a crash mid-removal leaves a directory the next load removes, never half a log; one fsync per log dir makes
        the renames durable (a 10,000-partition topic: one fsync, not 10,000), then the directories go. Blocking;
        touches none of the manager's state, so it may run in a worker thread."""
        doomed, renamed_in = [], set()
        for tp, log, d in detached:
            target = os.path.join(d, delete_dir_name(tp[0], tp[1]))
            try:
                os.rename(log.dir, target)
            except FileNotFoundError:
                logger.warning("deleting %s-%d: its directory %s is already gone", tp[0], tp[1], log.dir)
                continue
            except OSError as exc:
                # The log is closed and forgotten already: remove it in place rather than leave it half-deleted
                # (a crash during this rmtree leaves a partial <topic>-<p> directory, which the loader recovers).
                logger.error("deleting %s-%d: cannot rename %s (%s); removing it in place", tp[0], tp[1], log.dir,
                             exc)
                shutil.rmtree(log.dir, ignore_errors=True)
                continue
            doomed.append(target)
            renamed_in.add(d)
        for d in sorted(renamed_in):
            fsync_dir(d)
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)

    # -- future logs (a replica moving to another log dir; module docstring) --------------------------------------
    def future_log(self, tp):
        """``(future Log, its log dir)`` of ``tp``, or None."""
        return self._futures.get(tuple(tp))

    def all_futures(self):
        return {tp: log for tp, (log, _d) in self._futures.items()}

    def make_future_log(self, tp, log_dir):
        """Create the empty future log of ``tp`` in ``log_dir`` (durable: the directory's entry fsync'd). Blocking,
        touches none of the manager's state (any thread); ``add_future_log`` registers it."""
        if log_dir not in self._dir_counts:
            raise ValueError("%s is not a log dir of this broker" % log_dir)
        path = os.path.join(log_dir, future_dir_name(tp[0], tp[1]))
        os.mkdir(path)
        log = Log(path, self.config_for(tp[0]))
        log.topic, log.partition = tp
        fsync_dir(log_dir)
        return log

    def add_future_log(self, tp, log, log_dir):
        tp = tuple(tp)
        if tp in self._futures:
            raise RuntimeError("future log of %s-%d created twice" % tp)
        self._futures[tp] = (log, log_dir)

    def detach_future(self, tp):
        """Forget and close the future log of ``tp``: ``(tp, log, dir)`` for ``remove_log_dirs``, or None."""
        got = self._futures.pop(tuple(tp), None)
        if got is None:
            return None
        log, d = got
        log.close()
        return tuple(tp), log, d

    def replace_current_with_future(self, tp):
        """The future log of ``tp`` becomes its log (owner thread; the move renamed the directories first).
        Returns ``(old Log, old log dir)``; the caller closes and removes the old one."""
        tp = tuple(tp)
        future, d = self._futures.pop(tp)
        old, old_dir = self._logs[tp], self._dir_of[tp]
        self._logs[tp] = future
        self._dir_of[tp] = d
        self._dir_counts[old_dir] -= 1
        self._dir_counts[d] += 1
        # The cleaner's progress (first dirty offset) stays: the new log holds the same offsets and bytes.
        return old, old_dir

    # -- failed log dirs (KIP-112, dir_failure.py) -----------------------------------------------------------------
    def handle_dir_failure(self, log_dir):
        """Stop using every log of the offline ``log_dir`` (owner thread): its logs and future logs are forgotten and
        closed without a flush (nothing more is written there), the cleaner forgets them. Returns their tps."""
        self.failures.offline.add(log_dir)        # (already there when it was reported)
        gone = [tp for tp, d in self._dir_of.items() if d == log_dir]
        for tp in gone:
            log = self._logs.pop(tp)
            del self._dir_of[tp]
            self._dir_counts[log_dir] -= 1
            self.cleaner.forget(tp)
            self._close_quietly(log)
        for tp, (log, d) in list(self._futures.items()):
            if d == log_dir or tp in gone:
                del self._futures[tp]
                self._close_quietly(log)
                if d != log_dir:
                    # A half-copied future whose current log is in the failed dir: a load without that dir would
                    # complete it as the partition's log (``_load_futures``), so it goes now.
                    shutil.rmtree(log.dir, ignore_errors=True)
        for tp, d in list(self.preferred_dirs.items()):
            if d == log_dir:
                del self.preferred_dirs[tp]
        return gone

    @staticmethod
    def _close_quietly(log):
        try:
            log.close()
        except OSError as exc:          # the disk that failed may fail the close (a trim) too
            logger.warning("closing %s in an offline log dir: %s", log.dir, exc)

    # -- periodic tasks ------------------------------------------------------------------------
    def check_retention(self, now=None):
        """Apply time/size retention to logs whose cleanup.policy includes delete; returns segments deleted."""
        now = now_ms() if now is None else now
        deleted = 0
        for tp, log in list(self._logs.items()):
            if tp == self.cleaner.in_progress:
                continue  # the cleaner is swapping its segments; retention waits for the next round
            cfg = log.config
            if cfg.deletes:
                deleted += log.delete_old_segments(cfg.retention_ms, cfg.retention_bytes, now)
            else:
                log.purge_deleted(now)
        return deleted

    def due_flushes(self, now=None):
        """``[(log, up_to)]`` that want an fsync: flush.messages / flush.ms reached (up_to None = log end),
        or a roll asked for its older segments to be flushed (up_to = the new segment's base)."""
        now = now_ms() if now is None else now
        due = []
        for log in list(self._logs.values()):
            cfg = log.config
            unflushed = log.unflushed_messages
            if unflushed > 0 and (unflushed >= cfg.flush_interval_messages
                                  or (cfg.flush_interval_ms is not None
                                      and now - log.last_flush_ms >= cfg.flush_interval_ms)):
                due.append((log, None))
            elif log.flush_pending_offset is not None:
                due.append((log, log.flush_pending_offset))
        return due

    def flush_dirty(self, now=None):
        """Blocking fsync of every due log (see ``due_flushes``); returns how many logs were flushed."""
        due = self.due_flushes(now)
        for log, up_to in due:
            try:
                log.flush(up_to, now=now)
            except errors.KafkaStorageError:
                pass                     # its dir went offline (reported by Log.flush); the other logs go on
        return len(due)

    def clean_once(self, now=None, dedupe_buffer_size=None):
        """Compact every due log once (cleaner.py); blocking, run it in a thread pool. Returns {tp: result}."""
        return self.cleaner.clean_once(now, dedupe_buffer_size)

    def checkpoint_recovery_points(self):
        # Runs in a worker thread while the owner adds and removes logs: iterate over copies (made in one C call
        # each, which no other thread can interleave with).
        logs, dir_of = list(self._logs.items()), dict(self._dir_of)
        for d in self.online_dirs:
            points = {tp: log.recovery_point for tp, log in logs if dir_of.get(tp) == d}
            self._write_checkpoint(d, RECOVERY_POINT_CHECKPOINT, points)
        self.checkpoint_log_start_offsets(logs, dir_of)

    def _write_checkpoint(self, d, name, offsets):
        """Write one checkpoint file of log dir ``d``; a failure takes the dir offline (dir_failure.py)."""
        path = os.path.join(d, name)
        try:
            if dir_failure.INJECTED:
                dir_failure.check_injected(path)
            OffsetCheckpoint(path).write(offsets)
        except OSError as exc:
            self.failures.report(path, exc)

    def checkpoint_log_start_offsets(self, logs=None, dir_of=None):
        """Write ``log-start-offset-checkpoint`` in every log dir: the logs whose start offset is above their first
        segment's base (Kafka's rule; the others' start is their first base, which the load finds anyway)."""
        if logs is None:
            logs, dir_of = list(self._logs.items()), dict(self._dir_of)
        for d in self.online_dirs:
            starts = {}
            for tp, log in logs:
                if dir_of.get(tp) == d:
                    segments = log.segments
                    start = log.log_start_offset
                    if segments and start > segments[0].base_offset:
                        starts[tp] = start
            self._write_checkpoint(d, LOG_START_OFFSET_CHECKPOINT, starts)

    # -- shutdown ------------------------------------------------------------------------------
    def shutdown(self):
        """Flush and close every log, checkpoint recovery points, write the clean-shutdown markers, unlock.

        Durability in bulk: one syncfs per log dir first (the per-log fsyncs that follow find nothing dirty), the
        producer snapshots written without fsync, one more syncfs, then the checkpoints and markers (fsync'd as
        ever) -- 2 syncs per dir instead of ~5 per partition (checkpoint.sync_filesystem)."""
        try:
            self._sync_dirs()
            for log, _d in self._futures.values():
                self._flush_at_shutdown(log)
                log.close()
            self._futures.clear()
            for log in self._logs.values():
                if self._flush_at_shutdown(log):
                    try:
                        log.snapshot_producer_state(durable=False)   # made durable by _sync_dirs below
                    except OSError as exc:
                        logger.warning("%s: no producer-state snapshot at shutdown: %s", log.dir, exc)
            self._sync_dirs()
            self.checkpoint_recovery_points()
            for log in self._logs.values():
                log.close()
            # No marker in an offline dir (nor one that failed during this shutdown): its next load re-scans
            # every log above its recovery point and cuts what a failed write left (KIP-112).
            for d in self.online_dirs:
                try:
                    with open(os.path.join(d, CLEAN_SHUTDOWN_FILE), "w"):
                        pass
                    fsync_dir(d)
                except OSError as exc:
                    logger.error("no clean-shutdown marker in %s: %s", d, exc)
        finally:
            dir_failure.unregister(self.failures)
            self._logs.clear()
            self._dir_of.clear()
            self._dir_counts = dict.fromkeys(self.log_dirs, 0)
            self._unlock_all()

    def _flush_at_shutdown(self, log):
        try:
            log.flush()
            return True
        except errors.KafkaStorageError:
            return False                 # its dir went offline now: reported, no marker there

    def _sync_dirs(self):
        for d in self.log_dirs:
            try:
                sync_filesystem(d)
            except OSError as exc:     # the per-file fsyncs still run and report a failing dir
                logger.warning("syncfs of %s failed: %s", d, exc)

    def close_without_marker(self):
        """Close files and release the locks without flushing or marking a clean shutdown (tests; fatal errors)."""
        dir_failure.unregister(self.failures)
        for log in self._logs.values():
            log.close()
        for log, _d in self._futures.values():
            log.close()
        self._futures.clear()
        self._logs.clear()
        self._dir_of.clear()
        self._dir_counts = dict.fromkeys(self.log_dirs, 0)
        self._unlock_all()
