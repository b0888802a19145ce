"""scripts/venv_check.py (the isolated-environment gate of tests/conftest.py) and requirements/lock.txt's coverage.

The lock must pin every requirement pyproject.toml declares (runtime, the `test` extra, the packages the clients'
codec extras pull in -- python-snappy for kafka-python's snappy -- and the build tools), and the checker must
report each way an environment can differ from it.
"""
import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("venv_check_under_test", REPO / "scripts" / "venv_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


vc = _load()

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own dependency, pinned for < 3.11
    import tomli as tomllib


def test_read_pins_keeps_only_entries_whose_marker_holds(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text(
        "# comment\n"
        "Foo.Bar==1.2.3 \\\n"
        "    --hash=sha256:00\n"
        "old==1.0 ; python_full_version < '3.0' \\\n"
        "    --hash=sha256:11\n"
        "new==2.0 ; python_full_version >= '3.0' \\\n"
        "    --hash=sha256:22\n"
        "winonly==3.0 ; sys_platform == 'win32-never' \\\n"
        "    # via something\n")
    assert vc.read_pins(str(lock)) == {"foo-bar": "1.2.3", "new": "2.0"}


def test_package_problems_names_missing_mismatched_and_undeclared():
    pins = {"a": "1.0", "b": "2.0", "c": "3.0"}
    optional = {"bench-only": "0.5"}
    have = {"a": ("1.0", None), "b": ("2.1", None), "stray": ("9", None), "bench-only": ("0.4", None)}
    found = vc.package_problems(pins, optional, have)
    assert found == [
        "b is 2.1, requirements/lock.txt pins 2.0",
        "c==3.0 (requirements/lock.txt) is not installed",
        "bench-only is 0.4, requirements/bench.txt pins 0.5",
        "stray 9 is installed but no lock file lists it (undeclared dependency?)",
    ]
    assert vc.strays(pins, optional, have) == ["stray"]


def test_package_problems_accepts_exactly_the_lock_plus_optional_pins():
    pins = {"a": "1.0"}
    assert vc.package_problems(pins, {"o": "2"}, {"a": ("1.0", None), "o": ("2", None)}) == []
    assert vc.package_problems(pins, {"o": "2"}, {"a": ("1.0", None)}) == []


def _lock_names(path):
    names = set()
    for line in path.read_text().splitlines():
        m = vc.PIN.match(line)
        if m:
            names.add(vc.normalize(m.group(1)))
    return names


def test_lock_pins_every_declared_requirement_and_what_its_extras_pull_in():
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    locked = _lock_names(REPO / "requirements" / "lock.txt")
    declared = project["dependencies"] + project["optional-dependencies"]["test"]
    for text in declared:
        req = Requirement(text)
        assert vc.normalize(req.name) in locked, text
        if not req.extras:
            continue
        # The extras' own requirements (kafka-python[snappy] -> python-snappy) must be pinned as well.
        for dep in metadata.requires(req.name) or ():
            dep_req = Requirement(dep)
            if dep_req.marker and any(dep_req.marker.evaluate({"extra": e}) for e in req.extras):
                assert vc.normalize(dep_req.name) in locked, "%s needs %s" % (text, dep)
    assert {"python-snappy", "cramjam", "lz4", "zstandard"} <= locked
    assert {"pip", "setuptools", "wheel", "cython"} <= locked  # build tools pinned too


def test_lock_pins_are_exact_and_hashed():
    text = (REPO / "requirements" / "lock.txt").read_text()
    entries = re.findall(r"^([A-Za-z0-9][^\s]*)[^\n]*\\\n((?:\s+--hash=sha256:[0-9a-f]{64}[^\n]*\n)+)", text, re.M)
    pinned = [line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    assert len(entries) == len(pinned) > 20
    assert all("==" in line for line in pinned)


def test_this_session_runs_in_the_isolated_environment():
    if vc.isolation_problems():
        pytest.skip("running outside .venv (KBROKER_ALLOW_FOREIGN_ENV=1)")
    assert vc.problems() == []
    assert Path(sys.prefix).resolve() == (REPO / ".venv").resolve()
    # The point of it all: kafka-python's snappy codec is there because the lock says so.
    import kafka.codec

    assert kafka.codec.has_snappy()
