"""Is this interpreter the project's isolated environment, holding exactly the pinned packages?

    .venv/bin/python scripts/venv_check.py [--fix] [--quiet]

Checks, for the running interpreter (exit status 0 when all hold, 1 otherwise, each problem on one stderr line):

1. it runs from ``<repo>/.venv`` (``sys.prefix``), a virtualenv (``sys.prefix != sys.base_prefix``) made without
   system site-packages: ``pyvenv.cfg`` says ``include-system-site-packages = false`` and no ``site-packages`` /
   ``dist-packages`` directory outside ``.venv`` is on ``sys.path`` (the user site, ``PYTHONPATH``);
2. the installed distributions are exactly requirements/lock.txt's pins that apply to this interpreter (their
   environment markers evaluated), each at the pinned version, plus kbroker itself installed from this checkout;
   requirements/bench.txt's pins may be present too (``setup.sh --bench``), at their pinned versions.

``--fix`` uninstalls the distributions that no lock file lists (``pip uninstall -y``) before checking; a missing
or mismatched pin is not fixed here (scripts/setup.sh installs the lock). tests/conftest.py imports this module
and fails the test session on any problem, so an undeclared dependency fails on every machine alike.
Lock format: pip requirement lines ``name==version [; marker] \\`` followed by ``--hash`` lines (scripts/lock.sh).
"""
import os
import re
import subprocess
import sys
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(REPO, ".venv")
LOCK = os.path.join(REPO, "requirements", "lock.txt")
BENCH_LOCK = os.path.join(REPO, "requirements", "bench.txt")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;([^\\]*))?")


def normalize(name):
    """PEP 503 name normalisation: `Zope.Interface` and `zope-interface` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path):
    """{normalized name: version} of the pins in `path` whose environment marker holds for this interpreter."""
    from packaging.markers import Marker  # pinned in the lock (pytest's dependency)

    pins = {}
    with open(path) as f:
        for line in f:
            m = PIN.match(line)
            if not m:
                continue
            name, version, marker = m.group(1), m.group(2), (m.group(3) or "").strip()
            if marker and not Marker(marker).evaluate():
                continue
            pins[normalize(name)] = version
    return pins


def installed():
    """{normalized name: (version, dist)} of every distribution this interpreter sees."""
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(normalize(name), (dist.version, dist))
    return out


def _real(path):
    return os.path.realpath(path)


def isolation_problems():
    problems = []
    if _real(sys.prefix) != _real(VENV):
        problems.append("the interpreter is %s (sys.prefix %s), not the project's %s"
                        % (sys.executable, sys.prefix, VENV))
        return problems
    if sys.prefix == sys.base_prefix:
        problems.append("%s is not a virtualenv" % sys.prefix)
    cfg = os.path.join(VENV, "pyvenv.cfg")
    try:
        with open(cfg) as f:
            text = f.read()
    except OSError as e:
        problems.append("cannot read %s: %s" % (cfg, e))
    else:
        if not re.search(r"^include-system-site-packages\s*=\s*false\s*$", text, re.M | re.I):
            problems.append("%s lets system site-packages in" % cfg)
    venv = _real(VENV) + os.sep
    for entry in sys.path:
        if not entry or not re.search(r"(site|dist)-packages", entry):
            continue
        if not (_real(entry) + os.sep).startswith(venv):
            problems.append("sys.path has %s, outside %s (PYTHONPATH or the user site?)" % (entry, VENV))
    return problems


def package_problems(pins, optional, have):
    problems = []
    for name, want in sorted(pins.items()):
        if name not in have:
            problems.append("%s==%s (requirements/lock.txt) is not installed" % (name, want))
        elif have[name][0] != want:
            problems.append("%s is %s, requirements/lock.txt pins %s" % (name, have[name][0], want))
    for name, (version, dist) in sorted(have.items()):
        if name in pins:
            continue
        if name == "kbroker":
            where = _kbroker_source()
            if where != REPO:
                problems.append("kbroker is imported from %s, not this checkout %s" % (where, REPO))
            continue
        if name in optional:
            if version != optional[name]:
                problems.append("%s is %s, requirements/bench.txt pins %s" % (name, version, optional[name]))
            continue
        problems.append("%s %s is installed but no lock file lists it (undeclared dependency?)" % (name, version))
    return problems


def _kbroker_source():
    try:
        import kbroker
    except ImportError:
        return None
    return os.path.dirname(os.path.dirname(os.path.abspath(kbroker.__file__)))


def strays(pins, optional, have):
    return sorted(n for n in have if n not in pins and n not in optional and n != "kbroker")


def problems(fix=False, log=None):
    """Every problem found (empty list: the environment is the isolated, locked one)."""
    found = isolation_problems()
    if found:  # another interpreter: its packages say nothing about the project's environment
        return found
    pins = read_pins(LOCK)
    optional = read_pins(BENCH_LOCK) if os.path.exists(BENCH_LOCK) else {}
    have = installed()
    if fix:
        extra = strays(pins, optional, have)
        if extra:
            if log:
                log("uninstalling what no lock file lists: %s" % " ".join(extra))
            subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "--disable-pip-version-check"] + extra,
                           check=True, stdout=sys.stderr)
            have = installed()
    return package_problems(pins, optional, have)


def summary():
    """One line for reports: where the environment is and what it holds."""
    pins = read_pins(LOCK)
    return "%s (isolated, %d packages pinned by %s)" % (VENV, len(pins), os.path.relpath(LOCK, REPO))


def main(argv):
    fix = "--fix" in argv
    quiet = "--quiet" in argv

    def log(msg):
        print("[venv_check] " + msg, file=sys.stderr)

    found = problems(fix=fix, log=log)
    for p in found:
        log(p)
    if not found and not quiet:
        log("ok: " + summary())
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
