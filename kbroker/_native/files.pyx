# cython: language_level=3
"""Compiled twin of files_py.py (the contract is there): many small files written with the GIL released once.

The paths and datas are checked and their buffers pinned (the lists hold the ``bytes`` objects, which cannot change)
before the GIL is released; every system call of every file then runs without it, so a worker thread writing
3,500 checkpoints no longer waits for the event loop's thread between calls.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.errno cimport errno, EINTR
from libc.stdlib cimport malloc, free
from posix.fcntl cimport open as c_open, O_WRONLY, O_CREAT, O_EXCL
from posix.stat cimport struct_stat, fstat
from posix.types cimport off_t
from posix.unistd cimport pwrite, ftruncate, close

cdef extern from "fcntl.h":
    int O_CLOEXEC


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


cdef int _write_one(const char *path, const char *data, Py_ssize_t size, int flags, bint exclusive,
                    unsigned long long *dev) noexcept nogil:
    """0 or the errno of the first failing call; ``dev`` set on success."""
    cdef int fd = c_open(path, flags, 0o644)
    cdef Py_ssize_t at = 0, w
    cdef int err = 0
    cdef struct_stat st
    if fd < 0:
        return errno
    while at < size:
        w = pwrite(fd, data + at, <size_t>(size - at), <off_t>at)
        if w < 0:
            if errno == EINTR:
                continue
            err = errno
            break
        at += w
    if err == 0 and not exclusive and ftruncate(fd, <off_t>size) != 0:
        err = errno
    if err == 0:
        if fstat(fd, &st) != 0:
            err = errno
        else:
            dev[0] = <unsigned long long>st.st_dev
    close(fd)
    return err


def write_files(paths, datas, exclusive=False):
    _check(paths, datas)
    # Own references: another thread may change the caller's lists while the GIL is released.
    paths = tuple(paths)
    datas = tuple(datas)
    cdef Py_ssize_t n = len(paths), i
    cdef bint excl = bool(exclusive)
    cdef int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (O_EXCL if excl else 0)
    cdef const char **cpaths = <const char **>malloc(max(n, 1) * sizeof(char *))
    cdef const char **cdatas = <const char **>malloc(max(n, 1) * sizeof(char *))
    cdef Py_ssize_t *sizes = <Py_ssize_t *>malloc(max(n, 1) * sizeof(Py_ssize_t))
    cdef int *errs = <int *>malloc(max(n, 1) * sizeof(int))
    cdef unsigned long long *devs = <unsigned long long *>malloc(max(n, 1) * sizeof(unsigned long long))
    if not cpaths or not cdatas or not sizes or not errs or not devs:
        free(cpaths); free(cdatas); free(sizes); free(errs); free(devs)
        raise MemoryError()
    try:
        for i in range(n):
            cpaths[i] = PyBytes_AS_STRING(paths[i])
            cdatas[i] = PyBytes_AS_STRING(datas[i])
            sizes[i] = PyBytes_GET_SIZE(datas[i])
            devs[i] = 0
        with nogil:
            for i in range(n):
                errs[i] = _write_one(cpaths[i], cdatas[i], sizes[i], flags, excl, &devs[i])
        return [(errs[i], devs[i] if errs[i] == 0 else 0) for i in range(n)]
    finally:
        free(cpaths); free(cdatas); free(sizes); free(errs); free(devs)
