"""`kbroker-server` command line: configuration errors fail fast and name the culprit; unknown keys only warn.

The command is the installed console script next to the running interpreter (`pip install -e .` puts it there),
else `python -m kbroker.cli.server` -- the same `main()`. Exit codes (kbroker/cli/server.py): 0 after a clean
shutdown, 1 for a configuration error. A configuration error must be reported before anything touches the disk:
the log dir is not even created.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.harness import REPO_ROOT, free_port, probe_api_versions, wait_until

pytestmark = pytest.mark.timeout(60)

_SCRIPT = os.path.join(os.path.dirname(sys.executable), "kbroker-server")
SERVER = [_SCRIPT] if os.access(_SCRIPT, os.X_OK) else [sys.executable, "-m", "kbroker.cli.server"]
# Interpreter start + gevent + config parsing takes ~2 s on a loaded 2-core box; "quickly" = well before any
# network or disk work could have been attempted.
FAIL_FAST_SECONDS = 15.0


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_server(args, cwd, timeout=FAIL_FAST_SECONDS):
    """Run kbroker-server expecting it to exit by itself; returns (exit code, stdout+stderr text, seconds)."""
    started = time.monotonic()
    done = subprocess.run(SERVER + [str(a) for a in args], cwd=str(cwd), env=_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return done.returncode, done.stdout.decode(errors="replace"), time.monotonic() - started


def base_overrides(tmp_path, port=None):
    port = port or free_port()
    return ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp_path / 'logs'}",
            "--override", "broker.id=0"]


def test_unknown_key_warns_by_name_and_starts(tmp_path):
    port = free_port()
    out_path = tmp_path / "server.out"
    args = base_overrides(tmp_path, port) + ["--override", "no.such.setting=42"]
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(SERVER + args, cwd=str(tmp_path), env=_env(), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        def serving():
            assert proc.poll() is None, f"exited {proc.returncode}:\n{out_path.read_text(errors='replace')}"
            return probe_api_versions("127.0.0.1", port, timeout=1.0)

        body = wait_until(serving, timeout=30, ignore=(OSError, ConnectionError), message="ApiVersions answer")
        assert body[:2] == b"\x00\x00"  # error_code 0
        text = out_path.read_text(errors="replace")
        warnings = [line for line in text.splitlines() if "WARNING" in line and "no.such.setting" in line]
        assert len(warnings) == 1, text
        assert "isn't a known config" in warnings[0]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("key,value", [
    ("num.partitions", "0"),
    ("log.segment.bytes", "abc"),
    ("broker.id", "one"),
    ("log.retention.hours", "1.5"),
    ("listeners", "PLAINTEXT:/nohost"),
])
def test_invalid_override_exits_1_naming_the_key(tmp_path, key, value):
    # The bad override comes last, so it replaces the good defaults given by base_overrides for the same key.
    rc, out, took = run_server(base_overrides(tmp_path) + ["--override", f"{key}={value}"], tmp_path)
    assert rc == 1, out
    assert "configuration error" in out and key in out and repr(value) in out, out
    assert took < FAIL_FAST_SECONDS
    assert not (tmp_path / "logs").exists()


def test_invalid_value_in_config_file_exits_1_naming_the_key(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"broker.id=0\nlog.dirs={tmp_path / 'logs'}\nlisteners=PLAINTEXT://127.0.0.1:{free_port()}\n"
                   "log.segment.bytes=12\n")  # below Kafka's minimum of 14
    rc, out, _ = run_server([cfg], tmp_path)
    assert rc == 1, out
    assert "log.segment.bytes" in out and "'12'" in out, out
    assert not (tmp_path / "logs").exists()


def test_missing_config_file_exits_1_naming_it(tmp_path):
    missing = tmp_path / "nowhere" / "server.properties"
    rc, out, took = run_server([missing], tmp_path)
    assert rc == 1, out
    assert str(missing) in out, out
    assert took < FAIL_FAST_SECONDS


def test_malformed_override_exits_1(tmp_path):
    rc, out, _ = run_server(base_overrides(tmp_path) + ["--override", "num.partitions"], tmp_path)
    assert rc == 1, out
    assert "num.partitions" in out and "key=value" in out, out
    assert not (tmp_path / "logs").exists()
