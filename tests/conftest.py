"""Suite-wide pytest configuration.

Markers (also declared in pyproject.toml): `integration` (starts real broker processes; every test under
tests/integration gets it automatically) and `zk` (needs Debian's ZooKeeper). Select with `-m`, e.g.
`-m "not integration"` for the fast unit suite. Per-test timeout: pyproject's `timeout` (pytest-timeout).

When a test fails while harness-managed brokers or ZooKeeper nodes are open, the tails of their logs are attached
to the failure report as extra sections, so a CI log alone explains what the broker was doing.
"""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: starts real broker processes")
    config.addinivalue_line("markers", "zk: needs a real ZooKeeper ensemble")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    import sys

    harness = sys.modules.get("tests.integration.harness")
    if harness is None:  # nothing started a process: no logs to show
        return
    for broker in list(harness.LIVE_BROKERS):
        report.sections.append((f"broker {broker.broker_id} log tail ({broker.log_path})", broker.log_tail(80)))
    for ensemble in list(harness.LIVE_ENSEMBLES):
        report.sections.append((f"zookeeper log tails ({ensemble.dir})", ensemble.log_tails(20)))
