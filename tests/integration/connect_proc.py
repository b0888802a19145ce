"""A ``kbroker-connect`` process for integration tests (the console script of the project's .venv, as a user runs
it) and a small JSON REST client for it.

``ConnectProcess(workdir, args)``: ``start()`` runs ``kbroker-connect <args>`` with ``workdir`` as its cwd (so a
connector file's relative ``file=test.txt`` resolves there, as in the quickstart), stdout+stderr appended to
``workdir/connect.log``; ``wait_rest(url)`` waits for ``GET /`` to answer 200; ``stop()`` sends SIGTERM and returns
the exit code (0 after a graceful stop); every process is killed at interpreter exit if a test left it running.
"""
from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.parse
from pathlib import Path

from tests.integration.harness import REPO_ROOT, HarnessError, _spawn, _terminate, tail, wait_until

CONNECT_SCRIPT = Path(sys.executable).parent / "kbroker-connect"
CONSOLE_CONSUMER = Path(sys.executable).parent / "kbroker-console-consumer"


def connect_command():
    """The console script when installed (scripts/setup.sh), else the module (a tree never pip-installed)."""
    if CONNECT_SCRIPT.exists():
        return [str(CONNECT_SCRIPT)]
    return [sys.executable, "-m", "kbroker.connect.cli"]


class ConnectProcess:
    def __init__(self, workdir, args):
        self.dir = Path(workdir)
        self.args = [str(a) for a in args]
        self.log_path = self.dir / "connect.log"
        self.proc = None
        self.starts = 0

    def start(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        self.starts += 1
        self.proc = _spawn(connect_command() + self.args, self.log_path, env, self.dir,
                           "start #%d of kbroker-connect" % self.starts)
        return self

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_rest(self, url, timeout=30.0):
        def up():
            if not self.running:
                raise HarnessError("kbroker-connect exited with %s:\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                return rest(url, "GET", "/")[0] == 200
            except OSError:
                return False
        wait_until(up, timeout, 0.1, "kbroker-connect's REST server at %s" % url)

    def stop(self, timeout=30.0):
        if self.proc is None:
            return None
        return _terminate(self.proc, timeout)

    def log_tail(self, lines=40):
        return tail(self.log_path, lines)


def rest(url, method, path, body=None, timeout=30.0):
    """``(status, JSON body or None, headers)`` of one request to a Connect REST server at ``url``."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json",
                                                       "Accept": "application/json"})
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, (json.loads(payload) if payload else None), dict(resp.getheaders())
    finally:
        conn.close()


def worker_properties(source_text, overrides):
    """A worker .properties text: ``source_text`` (e.g. config/connect-standalone.properties as Kafka ships it)
    with the value of each key in ``overrides`` replaced (appended when the file has no such key)."""
    lines, seen = [], set()
    for line in source_text.splitlines():
        key = line.split("=", 1)[0].strip()
        if not line.lstrip().startswith(("#", "!")) and "=" in line and key in overrides:
            lines.append("%s=%s" % (key, overrides[key]))
            seen.add(key)
        else:
            lines.append(line)
    lines += ["%s=%s" % (k, v) for k, v in overrides.items() if k not in seen]
    return "\n".join(lines) + "\n"
