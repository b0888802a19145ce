"""kbroker-server raises its soft open-files limit to the hard one at startup (kbroker/cli/server.py), as the JVM
does for Kafka: log.open.segment.files.max's automatic value is half the soft limit."""
import logging
import resource

import pytest

from kbroker.cli import server

INF = resource.RLIM_INFINITY


@pytest.fixture
def limits(monkeypatch):
    calls = []
    state = {}

    def getrlimit(which):
        assert which == resource.RLIMIT_NOFILE
        return state["now"]

    def setrlimit(which, value):
        calls.append(value)
        if state.get("refuse"):
            raise ValueError("not allowed")
        state["now"] = value
    monkeypatch.setattr(resource, "getrlimit", getrlimit)
    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    return state, calls


@pytest.mark.parametrize("now, expected", [
    ((1024, 20000), [(20000, 20000)]),
    ((20000, 20000), []),
    ((1024, INF), [(1 << 20, INF)]),
    ((INF, INF), []),
])
def test_the_soft_limit_goes_up_to_the_hard_one(limits, now, expected, caplog):
    state, calls = limits
    state["now"] = now
    with caplog.at_level(logging.INFO, logger="kbroker.server"):
        server.raise_open_files_limit()
    assert calls == expected
    assert any("open files limit raised from 1024" in r.getMessage() for r in caplog.records) == bool(expected)


def test_a_refused_raise_is_a_warning_and_startup_goes_on(limits, caplog):
    state, calls = limits
    state.update(now=(1024, 20000), refuse=True)
    with caplog.at_level(logging.INFO, logger="kbroker.server"):
        server.raise_open_files_limit()
    assert calls == [(20000, 20000)] and state["now"] == (1024, 20000)
    assert [r.levelno for r in caplog.records if "open files limit" in r.getMessage()] == [logging.WARNING]
