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


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: starts real broker processes")
    config.addinivalue_line("markers", "zk: needs a real ZooKeeper ensemble")
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
