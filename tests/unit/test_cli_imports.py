"""The import picture of kbroker/cli, read from the source with ast (nothing is imported or run).

Rules (docs/architecture.md: ``kbroker/cli`` is the top layer, "entry points"; kbroker/cli/common.py describes
the layering inside it):

1. No cli module imports a name with a leading underscore from another kbroker module -- neither
   ``from kbroker.x import _name`` (relative forms too) nor ``module._name`` on an imported kbroker module.
   Dunder names (``__version__``) are public. A private *package* path (``import kbroker._native``) is a module,
   not a name, and is allowed: that package's public names are its interface.
2. The cli modules form no import cycle. Every import counts, including those inside functions: an import made
   on use still ties the two modules together.
3. No kbroker module outside kbroker/cli imports kbroker.cli (only entry points and tests may).
4. No cli module is over 600 lines.

Why it matters beyond tidiness: ``python -m kbroker.cli.admin`` runs admin.py as ``__main__``; while the tools
imported their error classes back from ``kbroker.cli.admin`` (a second copy of the module), the dispatcher's
``except UsageError`` did not catch the tools' UsageError and a usage mistake ended in a traceback
(test_usage_error_under_python_m).

Each checker takes {module name: source} so the tests at the bottom can show that it catches what it must.
"""
import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
KBROKER = os.path.join(ROOT, "kbroker")
CLI_PACKAGE = "kbroker.cli"
MAX_LINES = 600


def _sources(directory, package):
    """{dotted module name: source} of the .py files under ``directory`` (recursively)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel = os.path.relpath(dirpath, directory)
        prefix = package if rel == "." else package + "." + rel.replace(os.sep, ".")
        for f in filenames:
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    name = prefix if f == "__init__.py" else prefix + "." + f[:-3]
                    out[name] = fh.read()
    return out


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _base(module, is_package, node):
    """The absolute module an ImportFrom reads from (resolving ``from . import`` / ``from ..x import``)."""
    if not node.level:
        return node.module
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[:len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports(module, source, known_modules, is_package=False):
    """-> (modules this one imports, [(line, text)] of private kbroker names it takes from another module).

    ``known_modules``: every kbroker module name, to tell ``from kbroker.cli import admin`` (a module) from
    ``from kbroker.cli.admin import main`` (a name)."""
    tree = ast.parse(source)
    deps, private, aliases = set(), [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                deps.add(a.name)
                # "import a.b.c" binds "a" (the whole chain is reachable through it); "import a.b as m" binds m.
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, is_package, node)
            deps.add(base)
            for a in node.names:
                full = base + "." + a.name
                if full in known_modules:
                    deps.add(full)
                    aliases[a.asname or a.name] = full
                elif base.split(".")[0] == "kbroker" and _private(a.name) and base != module:
                    private.append((node.lineno, "from %s import %s" % (base, a.name)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if not isinstance(value, ast.Name) or value.id not in aliases:
                continue
            target = aliases[value.id]
            if target.split(".")[0] != "kbroker":
                continue
            # Walk down the dotted chain while it names modules; the first non-module part is the name used.
            for part in reversed(chain):
                if target + "." + part in known_modules:
                    target += "." + part
                    continue
                if _private(part) and target != module:
                    private.append((node.lineno, "%s.%s" % (target, part)))
                break
    return {d for d in deps if d}, private


def cycles(graph):
    """Every elementary cycle's first discovery in ``graph`` ({node: set(nodes)}), as [a, b, ..., a] lists."""
    found, state = [], {}

    def visit(n, path):
        state[n] = "open"
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                found.append(path[path.index(m):] + [m])
            elif m not in state:
                visit(m, path)
        path.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n, [])
    return found


def check(sources, packages=(), known=()):
    """{module: source} of the cli modules -> (private-name findings, cycles among them). ``packages``: the module
    names that are packages (``__init__``); ``known``: other module names that exist."""
    known = set(sources) | set(packages) | set(known)
    graph, findings = {}, []
    for module, source in sorted(sources.items()):
        deps, private = imports(module, source, known, is_package=module in packages)
        graph[module] = {d for d in deps if d in sources and d != module}
        findings += ["%s:%d: %s" % (module, line, text) for line, text in private]
    return findings, cycles(graph)


def _kbroker():
    sources = _sources(KBROKER, "kbroker")
    packages = {m for m in sources if os.path.exists(os.path.join(KBROKER, *m.split(".")[1:], "__init__.py"))}
    return sources, packages


# ---------------------------------------------------------------------------------------------- the real tree

def test_cli_takes_no_private_names_and_has_no_cycle():
    sources, packages = _kbroker()
    cli = {m: s for m, s in sources.items() if m == CLI_PACKAGE or m.startswith(CLI_PACKAGE + ".")}
    assert len(cli) >= 9  # __init__, admin, common, topics_common, topics_zk, consumer_groups, reassign, ...
    findings, loops = check(cli, packages, known=sources)
    assert findings == []
    assert loops == []


def test_nothing_outside_cli_imports_cli():
    sources, packages = _kbroker()
    known = set(sources)
    offenders = []
    for module, source in sorted(sources.items()):
        if module == CLI_PACKAGE or module.startswith(CLI_PACKAGE + "."):
            continue
        deps, _ = imports(module, source, known, is_package=module in packages)
        offenders += ["%s -> %s" % (module, d) for d in sorted(deps)
                      if d == CLI_PACKAGE or d.startswith(CLI_PACKAGE + ".")]
    assert offenders == []


def test_cli_modules_stay_under_600_lines():
    sources, _ = _kbroker()
    long = {m: s.count("\n") for m, s in sources.items()
            if m.startswith(CLI_PACKAGE + ".") and s.count("\n") > MAX_LINES}
    assert long == {}


def test_usage_error_under_python_m():
    """``topics --zookeeper`` without --partitions: check_args (topics_zk.py) raises the UsageError that admin.py
    (here ``__main__``) catches -- the message and the usage on stderr, exit 1, no traceback, nothing on stdout."""
    proc = subprocess.run([sys.executable, "-m", "kbroker.cli.admin", "topics", "--zookeeper", "unused:2181",
                           "--create", "--topic", "t"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.startswith('Missing required argument "[partitions]"\nusage: kbroker-admin topics [-h] ')
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------------- the checker itself

PKG = {"kbroker", "kbroker.cli"}


@pytest.mark.parametrize("source,expected", [
    ("from kbroker.cli.admin import _Parser\n", ["kbroker.cli.t:1: from kbroker.cli.admin import _Parser"]),
    ("from .admin import CommandError, _emit\n", ["kbroker.cli.t:1: from kbroker.cli.admin import _emit"]),
    ("def f():\n    from ..cli.reassign import _int\n", ["kbroker.cli.t:2: from kbroker.cli.reassign import _int"]),
    ("from kbroker.cli import admin\nadmin._run(1)\n", ["kbroker.cli.t:2: kbroker.cli.admin._run"]),
    ("import kbroker.cli.admin as a\nx = a._TOPIC_ACTIONS\n", ["kbroker.cli.t:2: kbroker.cli.admin._TOPIC_ACTIONS"]),
    ("import kbroker.cli.admin\nkbroker.cli.admin._emit(1)\n", ["kbroker.cli.t:2: kbroker.cli.admin._emit"]),
    # Allowed: public names, dunders, private package paths, private names of other libraries, one's own.
    ("from .admin import CommandError\nfrom kbroker import __name__ as n\n", []),
    ("import kbroker._native as native\nx = native.IMPL\n", []),
    ("from collections import _chain\nimport os\nos._exit(0)\n", []),
    ("def _own():\n    pass\n_own()\n", []),
])
def test_checker_finds_private_imports(source, expected):
    modules = {"kbroker.cli.t": source, "kbroker.cli.admin": "", "kbroker.cli.reassign": "",
               "kbroker._native": ""}
    findings, _ = check(modules, PKG | {"kbroker._native"})
    assert findings == expected


def test_checker_finds_cycles_through_on_use_imports():
    modules = {
        "kbroker.cli.admin": "def main():\n    from kbroker.cli.topics_zk import run_zk\n",
        "kbroker.cli.topics_zk": "from .admin import format_topic_line\n",
        "kbroker.cli.common": "import json\n",
    }
    assert check(modules, PKG)[1] == [["kbroker.cli.admin", "kbroker.cli.topics_zk", "kbroker.cli.admin"]]
    modules["kbroker.cli.topics_zk"] = "from .common import emit\n"
    assert check(modules, PKG)[1] == []
    modules["kbroker.cli.common"] = "from kbroker.cli import admin\n"  # a module imported from its package
    assert check(modules, PKG)[1] == [["kbroker.cli.admin", "kbroker.cli.topics_zk", "kbroker.cli.common",
                                       "kbroker.cli.admin"]]


def test_checker_sees_cli_imported_from_below():
    sources = {"kbroker.log.segment": "def f():\n    from kbroker.cli.common import emit\n"}
    deps, _ = imports("kbroker.log.segment", sources["kbroker.log.segment"], {"kbroker.cli.common"})
    assert "kbroker.cli.common" in deps
