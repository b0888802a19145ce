"""Many small files written in one call: the pure-Python twin of files.pyx.

``write_files(paths, datas, exclusive)`` -> ``[(errno, st_dev), ...]``, one per path, in order.

``paths``: a list of ``bytes`` file names (absolute or relative to the working directory; no NUL byte: ValueError
before anything is written); ``datas``: a list of ``bytes`` of the same length (else ValueError). Each file is
opened write-only (``O_CREAT``, mode 0644, close-on-exec), written from byte 0 with ``pwrite`` until all of its
data is in, cut to the data's length (``ftruncate``), ``fstat``-ed for its device and closed. With ``exclusive``
the open adds ``O_EXCL`` (a file that exists answers EEXIST and is left as it is) and no truncate is needed: the
file is new. No fsync: the caller makes the files durable with one syncfs per device (``st_dev``).

A file that fails answers ``(errno, 0)`` and the others are still written: the caller decides what a failure
means (``epoch_cache.write_together`` treats any as "nothing is durable"). Success is ``(0, st_dev)``.

Why a kernel: the caller runs in a worker thread beside the event loop. In Python each of the ~5 system calls a
file costs gives up the GIL and waits to take it back; while the loop thread is busy, every take-back waits up to
the switch interval (5 ms). ``bench/worker_files.py``: 3,500 new files take this twin 0.05 s beside an idle main
thread and 20.9 s beside one running Python (the compiled twin: 0.046 and 0.049 s), and a failover's 3,566
leader-epoch checkpoints took 4.2 s in the broker. The compiled twin releases the GIL once for all the files.
"""
import os

_FLAGS = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def _check(paths, datas):
    if not isinstance(paths, list) or not isinstance(datas, list):
        raise TypeError("paths and datas must be lists")
    if len(paths) != len(datas):
        raise ValueError("%d paths but %d datas" % (len(paths), len(datas)))
    for p, d in zip(paths, datas):
        if not isinstance(p, bytes) or not isinstance(d, bytes):
            raise TypeError("paths and datas must hold bytes")
        if b"\0" in p:
            raise ValueError("a path holds a NUL byte: %r" % p[:200])


def write_files(paths, datas, exclusive=False):
    _check(paths, datas)
    flags = _FLAGS | (os.O_EXCL if exclusive else 0)
    out = []
    for path, data in zip(paths, datas):
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            out.append((e.errno, 0))
            continue
        try:
            view = memoryview(data)
            at = 0
            while at < len(data):
                at += os.pwrite(fd, view[at:], at)
            if not exclusive:
                os.ftruncate(fd, len(data))
            dev = os.fstat(fd).st_dev
            res = (0, dev)
        except OSError as e:
            res = (e.errno, 0)
        finally:
            os.close(fd)
        out.append(res)
    return out
