"""A config key that is accepted takes effect, or stops startup naming it (kbroker/config/keys.py ``effect``).

- A listener whose security protocol is SSL / SASL_* would be served as PLAINTEXT: the broker refuses to start,
  exit code 1, and the message names the key, its value and that TLS/SASL are not supported yet; it exits before
  touching the disk (the log dir is never created).
- A SASL key set to a non-default value: the same.
- socket.receive.buffer.bytes / socket.send.buffer.bytes set explicitly are on the broker's accepted socket, read
  from outside with ``ss -tm`` (skmem rb / tb: Linux reports twice the setsockopt value).
- ``kbroker-server --check-config`` on Kafka's shipped server.properties: exit 0, one WARNING line per key that
  has no effect in kbroker, every key reported with its status and source (tests/unit/test_check_config.py has
  the exact reports).
"""
from __future__ import annotations

import re
import shutil
import socket
import subprocess

import pytest

from tests.integration.harness import BrokerProcess, api_versions_request, free_port, read_response, wait_until
from tests.integration.test_config_cli import FAIL_FAST_SECONDS, base_overrides, run_server
from tests.unit.test_config import KAFKA_MODERN_SERVER_PROPERTIES

pytestmark = pytest.mark.timeout(90)


def _refused(tmp_path, overrides):
    """Start a real broker (harness layout) with ``overrides``; it must exit by itself. Returns (code, log)."""
    b = BrokerProcess(tmp_path / "broker", overrides=overrides)
    try:
        b.start(wait=False)
        code = b.proc.wait(FAIL_FAST_SECONDS)
        return code, b.log_text(), b
    finally:
        b.close()


def test_ssl_listener_without_keystore_stops_startup_naming_the_key(tmp_path):
    """An SSL listener is served with TLS (issue 10): without a keystore it never opens, and the error names
    the key to set (tests/integration/test_security_tls.py has the TLS listeners that start)."""
    port = free_port()
    value = f"SSL://127.0.0.1:{port}"
    code, log, b = _refused(tmp_path, {"listeners": value, "advertised.listeners": value})
    assert code == 1, log
    line = next(l for l in log.splitlines() if "configuration error" in l)
    assert "configuration ssl.keystore.location" in line and "needs a keystore" in line, line
    assert "TLS of listener SSL" in line, line
    assert not b.log_dir.exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_security_key_without_effect_stops_startup_naming_the_key(tmp_path):
    cls = "org.example.CustomPrincipalBuilder"
    code, log, b = _refused(tmp_path, {"principal.builder.class": cls})
    assert code == 1, log
    line = next(l for l in log.splitlines() if "configuration error" in l)
    assert "configuration principal.builder.class" in line and "'%s'" % cls in line, line
    assert "a Java principal builder class cannot be loaded" in line, line
    assert not b.log_dir.exists()


def test_bad_quota_value_stops_startup_naming_the_key(tmp_path):
    """The quota keys take effect now (issue 12, tests/integration/test_quotas.py); a value out of range still stops
    startup with the key's name, before anything is written."""
    rc, out, took = run_server(base_overrides(tmp_path) + ["--override", "quota.consumer.default=0"], tmp_path)
    assert rc == 1, out
    assert "quota.consumer.default" in out and "'0'" in out, out
    assert took < FAIL_FAST_SECONDS
    assert not (tmp_path / "logs").exists()


def _skmem(port):
    """{"rb": bytes, "tb": bytes} of the established socket whose local port is ``port`` (the broker's side)."""
    out = subprocess.run(["ss", "-tmnH", "state", "established", f"( sport = :{port} )"], capture_output=True,
                         text=True, timeout=10, check=True).stdout
    found = re.findall(r"skmem:\(([^)]*)\)", out)
    if len(found) != 1:
        return None
    return {k: int(v) for k, v in re.findall(r"\b(rb|tb)(\d+)", found[0])}


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to read the broker's socket buffers")
def test_explicit_socket_buffers_reach_the_brokers_connections(tmp_path):
    with BrokerProcess(tmp_path / "broker", overrides={"socket.receive.buffer.bytes": 50000,
                                                        "socket.send.buffer.bytes": 40000}) as b:
        client = socket.create_connection((b.host, b.port), timeout=5)
        try:
            # One ApiVersions v0 round trip first: the broker sets the buffers when it accepts, before it reads a
            # request, and the kernel lists the connection as established before that (a CI run read rb 131072,
            # tb 4194304 once, not the configured values).
            client.sendall(api_versions_request(1))
            assert read_response(client)[0] == 1
            mem = wait_until(lambda: _skmem(b.port), timeout=10, message="the broker's side of the connection in ss")
        finally:
            client.close()
    # Autotuning would start at tcp_rmem[1] / tcp_wmem[1] (131072 / 16384 on stock kernels), not at these.
    assert mem == {"rb": 100000, "tb": 80000}


def test_check_config_on_kafkas_shipped_file_warns_and_exits_0(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(KAFKA_MODERN_SERVER_PROPERTIES)
    rc, out, took = run_server([cfg, "--check-config"], tmp_path)
    assert rc == 0, out
    warned = sorted(re.findall(r"WARNING kbroker\.config: The configuration '([^']+)' has no effect in kbroker: ",
                               out))
    assert warned == sorted(["num.network.threads", "num.io.threads"]), out
    assert "used       socket.send.buffer.bytes=102400  (file)" in out.splitlines()   # kbroker/cli/check_config.py
    assert "defaulted  log.cleaner.threads=1" in out.splitlines()
    assert "kbroker started" not in out
    assert not (tmp_path / "tmp").exists()
