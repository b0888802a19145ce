"""Suite-wide pytest configuration.

The suite runs only in the project's isolated environment, ``<repo>/.venv`` (made by scripts/setup.sh from
requirements/lock.txt without system site-packages; scripts/test.sh uses it): at startup scripts/venv_check.py
checks the interpreter and the installed packages (exactly the lock's pins), and any problem ends the session before
collection with exit status 4 and a message naming it, so a dependency the project does not declare fails here as it
would on a fresh machine. KBROKER_ALLOW_FOREIGN_ENV=1 runs the suite anyway under another interpreter (results then
depend on what that interpreter happens to have installed); the header and the summary say so. Both name the
environment in use ("kbroker env: ...").

Markers (also declared in pyproject.toml): `integration` (starts real broker processes; every test under
tests/integration gets it automatically), `zk` (needs Debian's ZooKeeper) and `soak` (a long fault or scale run;
scripts/test.sh leaves these out unless given a `-m`: `bash scripts/test.sh -m soak`). Select with `-m`, e.g.
`-m "not integration"` for the fast unit suite. Per-test timeout: pyproject's `timeout` (pytest-timeout).

When a test fails while harness-managed brokers or ZooKeeper nodes are open, the tails of their logs are attached
to the failure report as extra sections, so a CI log alone explains what the broker was doing.
"""
import importlib.util
import os
import platform
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOREIGN_ENV_VAR = "KBROKER_ALLOW_FOREIGN_ENV"


def _venv_check():
    """scripts/venv_check.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("kbroker_venv_check", REPO / "scripts" / "venv_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env_line(check, problems):
    import kbroker._native as native

    tail = "Python %s, kernels: %s" % (platform.python_version(), native.IMPL)
    if not problems:
        return "kbroker env: %s; %s" % (check.summary(), tail)
    return "kbroker env: FOREIGN (%s=1): %s; %s" % (FOREIGN_ENV_VAR, "; ".join(problems), tail)


_ENV_LINE = pytest.StashKey[str]()


# Parallel runs (scripts/test.sh): the suite runs in two pytest-xdist workers, a whole module per worker at a time
# (--dist loadfile, so module-scoped brokers and ensembles stay with their tests), then the `serial` tests alone.
# A module belongs here when it asserts a wall-clock bound that another module's processes competing for the 2
# cores could break: a loop-stall or latency ceiling, a throughput held within +-10 %, the longest gap between
# acknowledgements. CPU-bound checks use time.process_time() instead and stay parallel. Tests in parallel modules
# must name anything machine-wide they create (network namespaces, mounts) uniquely per process.
SERIAL_MODULES = frozenset({
    # unit tests timing a wait (wall clock) against a tight bound
    "test_coord_zk", "test_harness", "test_replica", "test_handler_fetch", "test_handler_fetch_txn",
    "test_handler_authorization", "test_replica_hosting", "test_quota_enforcement", "test_metrics_stats",
    "test_coord",
    # integration
    "test_cluster_failover",          # failover within FAILOVER_WAIT_S, controlled shutdown < 30 s
    "test_config_cli",                # a bad config fails within FAIL_FAST_SECONDS
    "test_config_effects",            # same
    "test_controller_stalls",         # longest acks=all stall <= session timeout + 1 s
    "test_durability",                # SIGTERM exits within 5 s
    "test_hostile_connections",       # loop answers others within 1 s while hostile connections hold it
    "test_hostile_fetch",
    "test_hostile_handlers",          # loop-stall ceilings
    "test_hostile_interbroker",
    "test_hostile_storage",           # corrupt-input handling within QUICK_S
    "test_metrics_requests",          # measured request times between bounds
    "test_quota_mute",                # throughput held within +-10 % of a quota
    "test_quotas",                    # same, and an unthrottled client at >= 90 % of its rate
    "test_quotas_cluster",
    "test_replication_availability",  # longest acknowledgement gap < MAX_GAP_S
    "test_replication_quota",         # copy rate within the throttle
    "test_security_gssapi",           # longest gap < 0.4 s through re-login
    "test_faults_partition",          # isolated-leader timings
    "test_faults_pause",              # SIGSTOP beyond the session timeout
    "test_faults_zookeeper",          # outage timings
    "test_faults_zk_partition",       # a broker cut from ZooKeeper: expiry and election timings
    "test_faults_disk",               # slow follower leaves the ISR within replica.lag.time.max.ms
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).stem in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: starts real broker processes")
    config.addinivalue_line("markers", "zk: needs a real ZooKeeper ensemble")
    config.addinivalue_line("markers", "serial: asserts a wall-clock bound; run alone after the parallel part")
    check = _venv_check()
    problems = check.problems()
    if problems and os.environ.get(FOREIGN_ENV_VAR, "") in ("", "0"):
        pytest.exit(
            "kbroker: the suite runs only in the project's isolated environment %s:\n  - %s\n"
            "Run it with `bash scripts/test.sh [pytest args]` (sets up .venv from requirements/lock.txt first), or\n"
            "`.venv/bin/python -m pytest ...` after `bash scripts/setup.sh`. To run under this interpreter anyway\n"
            "(results then depend on what it happens to have installed): %s=1."
            % (check.VENV, "\n  - ".join(problems), FOREIGN_ENV_VAR),
            returncode=pytest.ExitCode.USAGE_ERROR)
    config.stash[_ENV_LINE] = _env_line(check, problems)


def _write_env_line(config):
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    line = config.stash.get(_ENV_LINE, None)
    if reporter is not None and line:
        reporter.write_line(line)


def pytest_report_header(config):
    """The environment line in pytest's header ..."""
    return config.stash.get(_ENV_LINE, None)


def pytest_sessionstart(session):
    """... or, when the header is hidden (-q), as the first line ..."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and (not reporter.showheader or reporter.no_header):
        _write_env_line(session.config)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """... and again at the end, next to the counts."""
    _write_env_line(config)


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
