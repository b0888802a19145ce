"""Disk faults (issue 16 items 4-6, helper F3): full and failing log dirs, a slow follower disk, power loss.

Mechanisms (all as root on this machine; no device-mapper here, so I/O errors are injected):
- **disk full**: a broker's second log dir is a size-capped tmpfs (`mount_tmpfs`); `fill` writes a ballast file
  until the file system answers ENOSPC, so the broker's next write there fails for real (a segment append, an
  index page -- kbroker/log/index.py backs index pages with posix_fallocate, so that is an ENOSPC too, not a
  SIGBUS -- or a checkpoint). Repair = the ballast removed, then a restart.
- **I/O errors**: kbroker's test-only switch (kbroker/log/dir_failure.py; brokers started with
  KBROKER_TEST_IO_FAULTS=1): while `<log dir>/.kbroker-inject-eio` exists, every append, roll, flush and checkpoint
  in that dir raises OSError(EIO). Repair = the file removed, then a restart.
- **slow follower**: the same switch's `<log dir>/.kbroker-inject-slow` (seconds): the follower's fetcher waits that
  long before each append of replicated records to a log in that dir (5 s: longer than replica.lag.time.max.ms).
- **power loss**: `lose_page_cache` -- after kill -9, every partition directory of the broker is cut back to the
  last recovery-point checkpoint of its log dir (`recovery-point-offset-checkpoint`, written after the fsync it
  records): every batch at or above that offset is gone, later segment files are removed. That is at most what a
  real power loss can take (the page cache may have been written back further, never less).

The cluster (faults.py): `brokers`; `tmpfs_dirs` {broker id: Path} for the disk-full fault ("tmpfs" capability);
`extra_dirs` {broker id: Path} a second log dir per broker ("io-injection" capability: brokers run with the switch).
"""
from __future__ import annotations

import errno
import os
import struct
import subprocess
from pathlib import Path

from tests.integration import faults

BALLAST = "ballast.fill"
INJECT_EIO = ".kbroker-inject-eio"
INJECT_SLOW = ".kbroker-inject-slow"
INJECT_ENV = {"KBROKER_TEST_IO_FAULTS": "1"}


# ------------------------------------------------------------------------------------------------ file systems

def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True,
                   capture_output=True)


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def tmpfs_available() -> bool:
    """True when this process may mount a tmpfs (root in a container that allows it)."""
    if os.geteuid() != 0:
        return False
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="kb-tmpfs-probe-"))
    try:
        mount_tmpfs(d, "64k")
    except (subprocess.CalledProcessError, OSError):
        d.rmdir()
        return False
    umount(d)
    d.rmdir()
    return True


def fill(path: Path) -> int:
    """Write a ballast file in `path` until its file system is full (ENOSPC); returns the bytes written."""
    written = 0
    chunk = b"\xff" * 4096
    fd = os.open(path / BALLAST, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                n = os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
            written += n
            if n < len(chunk):
                chunk = chunk[:max(1, len(chunk) - n)]
    finally:
        os.close(fd)
    return written


def unfill(path: Path) -> None:
    (path / BALLAST).unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------------ power loss

def read_checkpoint(path: Path) -> dict:
    """Kafka's offset checkpoint file (`0`, count, `topic partition offset` lines) -> {(topic, p): offset}."""
    if not path.exists():
        return {}
    lines = path.read_text().split("\n")
    n = int(lines[1])
    out = {}
    for line in lines[2:2 + n]:
        topic, p, off = line.rsplit(" ", 2)
        out[(topic, int(p))] = int(off)
    return out


def _cut_position(data: bytes, offset: int) -> int:
    """Byte position of the first v2 batch whose last offset is >= `offset` (or the end of the whole batches)."""
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        last_delta = struct.unpack_from(">i", data, pos + 23)[0]
        if base + last_delta >= offset:
            return pos
        pos += 12 + length
    return pos


def lose_page_cache(log_dir: Path) -> dict:
    """Cut every partition of a (killed) broker's `log_dir` back to its recovery point (module docstring).
    Returns {(topic, p): (recovery point, bytes dropped)}."""
    points = read_checkpoint(log_dir / "recovery-point-offset-checkpoint")
    out = {}
    for pdir in sorted(log_dir.iterdir()):
        if not pdir.is_dir() or "-" not in pdir.name or pdir.name.endswith(("-delete", "-future")):
            continue
        topic, _, p = pdir.name.rpartition("-")
        if not p.isdigit():
            continue
        rp = points.get((topic, int(p)), 0)
        dropped = 0
        for seg in sorted(pdir.glob("*.log")):
            base = int(seg.stem)
            size = seg.stat().st_size
            if base >= rp and base > 0:
                # written after the last fsync: the file's contents (and its indexes) never reached the disk
                for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                    (pdir / f"{seg.stem}{suffix}").unlink(missing_ok=True)
                dropped += size
                continue
            cut = _cut_position(seg.read_bytes(), rp)
            if cut < size:
                os.truncate(seg, cut)
                dropped += size - cut
        out[(topic, int(p))] = (rp, dropped)
    return out


# ------------------------------------------------------------------------------------------------ faults

def _restart(broker) -> None:
    if broker.running:
        broker.stop()
    broker.start(wait=True, timeout=60)


@faults.register
class DiskFull(faults.Fault):
    name = "disk-full"
    description = "a broker's tmpfs log dir fills up (ENOSPC); repaired (ballast removed) and the broker restarted"
    requires = frozenset({"tmpfs"})

    def inject(self, cluster) -> None:
        bid = self.rng.choice(sorted(cluster.tmpfs_dirs))
        self.victim = bid
        fill(cluster.tmpfs_dirs[bid])

    def heal(self, cluster) -> None:
        if self.victim is None:
            return
        unfill(cluster.tmpfs_dirs[self.victim])
        _restart(cluster.brokers[self.victim])


@faults.register
class DiskIoErrors(faults.Fault):
    name = "disk-eio"
    description = "every write in one log dir of a broker fails with EIO (injected); repaired and restarted"
    requires = frozenset({"io-injection"})

    def inject(self, cluster) -> None:
        bid = self.rng.choice(sorted(cluster.extra_dirs))
        self.victim = bid
        (cluster.extra_dirs[bid] / INJECT_EIO).touch()

    def heal(self, cluster) -> None:
        if self.victim is None:
            return
        (cluster.extra_dirs[self.victim] / INJECT_EIO).unlink(missing_ok=True)
        _restart(cluster.brokers[self.victim])


@faults.register
class SlowFollowerDisk(faults.Fault):
    name = "slow-follower"
    description = "a broker's replicated appends wait 5 s each (slow disk) in every log dir; then fast again"
    requires = frozenset({"io-injection"})
    # Longer than replica.lag.time.max.ms: a follower that fetches every 3 s with lag 2 s may still count as caught up
    # (Kafka's rule: it reached the LEO of its previous fetch, and acks=all backpressure keeps that LEO still), so
    # it would slow the producers down without ever leaving the ISR -- which is Kafka's behaviour too.
    delay_s = 5.0

    def _dirs(self, cluster, bid):
        b = cluster.brokers[bid]
        return [b.log_dir] + ([cluster.extra_dirs[bid]] if bid in getattr(cluster, "extra_dirs", {}) else [])

    def inject(self, cluster) -> None:
        bid = self.rng.choice([b.broker_id for b in cluster.brokers if b.running])
        self.victim = bid
        for d in self._dirs(cluster, bid):
            (d / INJECT_SLOW).write_text(str(self.delay_s))

    def heal(self, cluster) -> None:
        if self.victim is None:
            return
        for d in self._dirs(cluster, self.victim):
            (d / INJECT_SLOW).unlink(missing_ok=True)


@faults.register
class PowerLoss(faults.Fault):
    name = "power-loss"
    description = "kill -9 of a broker and its log dirs cut back to their last fsync (page cache lost); restarted"

    def inject(self, cluster) -> None:
        b = self.rng.choice([b for b in cluster.brokers if b.running])
        self.victim = b.broker_id
        b.kill9()
        for d in [b.log_dir] + ([cluster.extra_dirs[b.broker_id]]
                                if b.broker_id in getattr(cluster, "extra_dirs", {}) else []):
            lose_page_cache(Path(d))

    def heal(self, cluster) -> None:
        if self.victim is None:
            return
        b = cluster.brokers[self.victim]
        if not b.running:
            b.start(wait=True, timeout=60)
