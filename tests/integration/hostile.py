"""Shared checks for the hostile-client test modules (``tests/integration/test_hostile_*.py``).

Issue 8's rule for every hostile case: afterwards the broker answers a Metadata request on a *fresh* connection
within 1 s; while the case runs, no other client is stalled for more than 1 s; the broker's resident memory stays
under ``RSS_LIMIT_MB`` (600 MB with default settings, the bound docs/limits.md states).

Usage::

    from tests.integration.hostile import StallWatch, assert_healthy

    with StallWatch(broker) as watch:      # a bystander client: ApiVersions every 50 ms on its own connection
        ...send the hostile request(s)...
    assert_healthy(broker, watch)          # fresh-connection Metadata < 1 s, worst bystander wait < 1 s, RSS bound

The bystander measures what an innocent client sees: the time from sending its request to receiving the answer.
A broker whose event loop is held by one request cannot answer it, so a stall of the loop shows up as a long
round trip. Peak memory is read from ``VmHWM`` (the high-water mark, so a transient spike counts) and current
memory from ``VmRSS`` in ``/proc/<pid>/status``.
"""
from __future__ import annotations

import socket
import struct
import threading
import time

from tests.integration.harness import encode_request, read_response

RSS_LIMIT_MB = 600          # docs/limits.md: the broker's resident memory bound under hostile input, defaults
STALL_LIMIT_S = 1.0         # no case may keep another client waiting longer than this
FRESH_METADATA_LIMIT_S = 1.0
BYSTANDER_INTERVAL_S = 0.05


def proc_status_kb(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def rss_mb(broker) -> float:
    return proc_status_kb(broker.pid, "VmRSS") / 1024.0


def peak_rss_mb(broker) -> float:
    return proc_status_kb(broker.pid, "VmHWM") / 1024.0


def metadata_v1_all_topics(correlation_id: int) -> bytes:
    """Metadata v1 with a null topic array (all topics): the cheapest "are you alive and serving" request."""
    return encode_request(3, 1, correlation_id, struct.pack(">i", -1), "hostile-probe")


def fresh_metadata_seconds(host: str, port: int, timeout: float = 5.0) -> float:
    """Round trip of Metadata v1 on a new connection (connect included); raises on failure."""
    t0 = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(metadata_v1_all_topics(7))
        cid, _ = read_response(sock)
    if cid != 7:
        raise AssertionError(f"Metadata answered with correlation id {cid}")
    return time.monotonic() - t0


class StallWatch:
    """A bystander client on its own connection: one ApiVersions v0 every 50 ms, each round trip timed.

    ``worst`` is the longest round trip seen, including one still outstanding at ``stop()`` (so a broker that
    never answers again counts as stalled for the whole time). A connection the broker drops is reopened and
    counted in ``reconnects`` (an innocent client should never be dropped: tests assert it is 0).
    """

    def __init__(self, broker, interval: float = BYSTANDER_INTERVAL_S):
        self.host, self.port = broker.host, broker.port
        self.interval = interval
        self.worst = 0.0
        self.rounds = 0
        self.reconnects = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._sent_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="hostile-bystander", daemon=True)

    def __enter__(self) -> "StallWatch":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()
        # the first round trip proves the bystander is connected before the hostile case begins
        deadline = time.monotonic() + 5.0
        while self.rounds == 0 and time.monotonic() < deadline and not self.errors:
            time.sleep(0.01)
        if self.rounds == 0:
            raise AssertionError(f"bystander could not complete one ApiVersions round trip: {self.errors}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=STALL_LIMIT_S * 5 + 10)
        sent = self._sent_at
        if sent is not None:  # an answer that never came counts for as long as it was awaited
            self.worst = max(self.worst, time.monotonic() - sent)

    def _run(self) -> None:
        sock = None
        cid = 0
        while not self._stop.is_set():
            try:
                if sock is None:
                    sock = socket.create_connection((self.host, self.port), timeout=30)
                    sock.settimeout(30)
                cid += 1
                self._sent_at = time.monotonic()
                sock.sendall(encode_request(18, 0, cid, b"", "hostile-bystander"))
                got, _ = read_response(sock)
                took = time.monotonic() - self._sent_at
                self._sent_at = None
                if got != cid:
                    raise ConnectionError(f"correlation id {got}, expected {cid}")
                self.worst = max(self.worst, took)
                self.rounds += 1
            except OSError as e:  # includes ConnectionError and socket.timeout
                if self._sent_at is not None:
                    self.worst = max(self.worst, time.monotonic() - self._sent_at)
                    self._sent_at = None
                self.errors.append(repr(e))
                self.reconnects += 1
                if sock is not None:
                    sock.close()
                sock = None
            self._stop.wait(self.interval)
        if sock is not None:
            sock.close()


def assert_healthy(broker, watch: StallWatch | None = None, rss_limit_mb: float = RSS_LIMIT_MB,
                   what: str = "") -> float:
    """The broker survived a hostile case: alive, answers Metadata on a fresh connection within 1 s, kept the
    bystander waiting < 1 s without dropping it, and its peak RSS stayed under ``rss_limit_mb``.
    Returns the fresh Metadata round trip in seconds."""
    label = f" after {what}" if what else ""
    assert broker.running, f"broker died{label}:\n{broker.log_tail()}"
    took = fresh_metadata_seconds(broker.host, broker.port)
    assert took < FRESH_METADATA_LIMIT_S, f"fresh-connection Metadata took {took:.2f} s{label}"
    if watch is not None:
        if watch._thread.is_alive():
            watch.stop()
        assert watch.reconnects == 0, f"the bystander was disconnected{label}: {watch.errors[:3]}"
        assert watch.worst < STALL_LIMIT_S, f"a bystander waited {watch.worst:.2f} s{label}"
    peak = peak_rss_mb(broker)
    assert peak < rss_limit_mb, f"broker peak RSS {peak:.0f} MB >= {rss_limit_mb} MB{label}"
    return took
