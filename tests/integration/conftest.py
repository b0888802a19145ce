"""Fixtures for integration tests: real broker processes (tests/integration/harness.py) and ZooKeeper.

- `broker`: a fresh, started broker (embedded coordination backend) in the test's tmp_path; stopped afterwards.
- `broker_factory`: `broker_factory(broker_id=0, overrides=None, zk=None, start=True, **kw) -> BrokerProcess`,
  each in tmp_path/broker<N>; all stopped afterwards.
- `shared_broker`: one started broker per test module (topics created by one test are visible to the next:
  use unique topic names).
- `zk_ensemble`: a 3-node ZooKeeper ensemble per test module (skips if ZooKeeper is missing, fails under CI=true).
- `kcat`, `kafkajs`: paths/runners for the external clients, skipping cleanly when absent (failing under CI=true).

Every test collected under this directory is marked `integration` (and `serial` when its module is in
tests/conftest.py's ``SERIAL_MODULES``).
"""
from pathlib import Path

import pytest

from tests.integration import harness
from tests.integration.harness import BrokerProcess, ZkEnsemble

_HERE = Path(__file__).resolve().parent




def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)


class _Factory:
    def __init__(self, base):
        self.base = Path(base)
        self.made: list[BrokerProcess] = []

    def __call__(self, broker_id: int = 0, overrides: dict | None = None, zk=None, start: bool = True,
                 timeout: float = 30.0, **kw) -> BrokerProcess:
        b = BrokerProcess(self.base / f"broker{len(self.made)}", broker_id=broker_id, overrides=overrides, zk=zk,
                          **kw)
        self.made.append(b)
        if start:
            b.start(timeout=timeout)
        return b

    def close(self):
        for b in self.made:
            b.close()


@pytest.fixture
def broker_factory(tmp_path):
    factory = _Factory(tmp_path)
    yield factory
    factory.close()


@pytest.fixture
def broker(broker_factory):
    return broker_factory()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("shared_broker"))
    try:
        b.start()
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def zk_ensemble(tmp_path_factory):
    if harness.zookeeper_classpath() is None or not harness.shutil.which("java"):
        harness.skip_or_fail("Debian's zookeeper package / java not installed (run scripts/setup.sh)")
    zk = ZkEnsemble(tmp_path_factory.mktemp("zk"), n=3)
    try:
        zk.start()
        yield zk
    finally:
        zk.close()


@pytest.fixture(scope="session")
def kcat():
    return harness.require_binary("kcat")


@pytest.fixture(scope="session")
def kafkajs():
    """`kafkajs(spec: dict, timeout=60) -> dict`: runs tests/js/kafkajs_roundtrip.js."""
    node = harness.require_kafkajs()

    def run(spec, timeout=60.0):
        return harness.run_kafkajs(spec, timeout=timeout, node=node)

    return run
