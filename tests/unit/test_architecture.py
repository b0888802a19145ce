"""The import picture of kbroker: no import cycles, no import from a lower layer to a higher one (issue 9).

The graph comes from scripts/import_picture.py: every ``import`` / ``from ... import`` of every ``kbroker/**/*.py``,
read with ``ast``, at module level *and inside functions* -- a lazy import inside a function is still a dependency,
and it is how import cycles hide (the cycle only bites when that function runs first). A unit is a package directly
under ``kbroker/`` or a top-level module (``broker.py``).

Checks:

* every unit has a layer in ``LAYERS`` (a new package or top-level module must be placed before it can land);
* no unit imports a unit of a *higher* layer (same-layer imports between units are allowed; cycles are not);
* no import cycle between units, and none between modules;
* docs/imports.md is what ``python scripts/import_picture.py`` writes from today's source (checked rather than
  generated here: the picture is part of the docs a reader trusts, so a stale one is a failure, and the fix is one
  command named in the message).

Today's violations are listed one by one in ``KNOWN_UPWARD_IMPORTS`` / ``KNOWN_UNIT_CYCLES`` /
``KNOWN_MODULE_CYCLES``: anything not listed fails (with file, line and whether the import is lazy), so nothing new
can slip in while the listed ones are fixed; an entry that no longer occurs is reported as a warning so the list can
be emptied as the fixes land (issue 9 items 1-7).
"""
import importlib.util
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _picture():
    """scripts/import_picture.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("kbroker_import_picture", REPO / "scripts" / "import_picture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ip = _picture()

# The layers, bottom up (issue 9's order; docs/architecture.md says what each package owns). A unit may import units
# of its own layer or lower ones; docs/imports.md shows them (scripts/import_picture.py reads this table).
#   0  leaves usable by everyone: the byte kernels, the error types, frozen partition-state values, the internal
#      topics' names, the event loop's time slices (timeslice.py), the GC policy (gcpolicy.py), the package root
#   1  wire schemas and codec; record formats; the coordination backend (znode tree)
#   2  the on-disk log; the network server (connections, router, metadata cache); security; client quotas
#   3  API handlers; replication; configuration (BrokerConfig, topic configs, built on log.LogConfig)
#   4  the group coordinator; the transaction coordinator; the controller
#   5  the composition root (broker.py) and the top-level services it wires (topic admin, producer-id blocks); the
#      blocking client (used by the CLI, the tests, and broker.py's controlled shutdown)
#   6  the command-line entry points (the only place that monkey-patches); Kafka Connect (kbroker/connect, issue 17: a
#      client of any Kafka cluster, threads and confluent-kafka, no monkey-patching)
LAYERS = {
    "_native": 0, "errors.py": 0, "cluster_state.py": 0, "internal_topics.py": 0, "timeslice.py": 0, "gcpolicy.py": 0,
    "__init__.py": 0,
    "protocol": 1, "record": 1, "coord": 1,
    "log": 2, "server": 2, "security": 2, "quota": 2,
    "handlers": 3, "replica": 3, "config": 3,
    "coordinator": 4, "controller": 4, "transaction": 4,
    "broker.py": 5, "topic_admin.py": 5, "producer_ids.py": 5, "client": 5, "metrics": 5,
    "cli": 6, "connect": 6, "streams": 6,
}

# Imports from a lower layer to a higher one found on 2026-12-01, "importer -> imported" modules (issue 9 is fixing
# them; empty the list as they go).
KNOWN_UPWARD_IMPORTS = [
]

# Import cycles found on the same day, each as its sorted members. A cycle found today passes when its members are
# all inside one known cycle (a cycle that shrank is progress, reported as a warning until the entry is updated).
KNOWN_UNIT_CYCLES = [
]
KNOWN_MODULE_CYCLES = [
]


@pytest.fixture(scope="module")
def edges():
    return ip.import_edges()


@pytest.fixture(scope="module")
def unit():
    return ip.unit_map()


def _where(e):
    return "%s:%d%s" % (e.src.replace(".", "/") + ("/__init__.py" if _is_pkg(e.src) else ".py"), e.line,
                        " (lazy: inside a function)" if e.lazy else "")


def _is_pkg(module):
    return (REPO / module.replace(".", "/") / "__init__.py").is_file()


def _stale(kind, entries):
    if entries:
        warnings.warn("%s no longer found, remove from tests/unit/test_architecture.py: %s" % (kind, entries))


def upward_imports(edges, unit, layers):
    """{"a -> b": [edges]} for every import whose unit sits in a higher layer than the importer's."""
    out = defaultdict(list)
    for e in edges:
        a, b = layers.get(unit[e.src]), layers.get(unit[e.dst])
        if a is not None and b is not None and a < b:   # a unit without a layer fails test_every_unit_has_a_layer
            out["%s -> %s" % (e.src, e.dst)].append(e)
    return dict(out)


def module_graph(edges):
    graph = defaultdict(set)
    for e in edges:
        graph[e.src].add(e.dst)
    return graph


def cycle_edges(cycle, edges, key):
    """The imports that make one cycle (both ends inside it), for the failure message."""
    members = set(cycle)
    return ["%s -> %s at %s" % (e.src, e.dst, _where(e)) for e in edges
            if key(e.src) in members and key(e.dst) in members and key(e.src) != key(e.dst)]


# ------------------------------------------------------------------------------------------------------ checks

def test_every_unit_has_a_layer():
    missing = sorted(set(ip.unit_map().values()) - set(LAYERS))
    assert not missing, "place these in LAYERS (tests/unit/test_architecture.py): %s" % missing


def test_no_import_from_a_lower_layer_to_a_higher_one(edges, unit):
    found = upward_imports(edges, unit, LAYERS)
    new = sorted(set(found) - set(KNOWN_UPWARD_IMPORTS))
    _stale("upward imports", sorted(set(KNOWN_UPWARD_IMPORTS) - set(found)))
    assert not new, "imports from a lower layer to a higher one (layer numbers in LAYERS):\n  " + "\n  ".join(
        "%s  [%s %d -> %s %d]  at %s" % (k, unit[found[k][0].src], LAYERS[unit[found[k][0].src]],
                                          unit[found[k][0].dst], LAYERS[unit[found[k][0].dst]],
                                          ", ".join(_where(e) for e in found[k])) for k in new)


def _new_and_stale(cycles, known):
    new = [c for c in cycles if not any(set(c) <= set(k) for k in known)]
    return new, [k for k in known if tuple(k) not in cycles]


def test_no_import_cycle_between_units(edges, unit):
    cycles = ip.strongly_connected(ip.unit_graph(edges))
    new, stale = _new_and_stale(cycles, KNOWN_UNIT_CYCLES)
    _stale("unit cycles (gone or smaller now)", stale)
    assert not new, "import cycles between units:\n" + "\n".join(
        "  %s, made by:\n    %s" % (" <-> ".join(c), "\n    ".join(cycle_edges(c, edges, unit.get))) for c in new)


def test_no_import_cycle_between_modules(edges):
    cycles = ip.strongly_connected(module_graph(edges))
    new, stale = _new_and_stale(cycles, KNOWN_MODULE_CYCLES)
    _stale("module cycles (gone or smaller now)", stale)
    assert not new, "import cycles between modules:\n" + "\n".join(
        "  %s, made by:\n    %s" % (" <-> ".join(c), "\n    ".join(cycle_edges(c, edges, lambda m: m)))
        for c in new)


def test_known_lists_name_real_units_and_modules():
    # an entry with a typo would silently allow nothing and hide nothing; keep every name a real one
    modules = set(ip.module_files())
    for entry in KNOWN_UPWARD_IMPORTS:
        a, b = entry.split(" -> ")
        assert a in modules and b in modules, entry
    for c in KNOWN_UNIT_CYCLES:
        assert set(c) <= set(LAYERS) and list(c) == sorted(c), c
    for c in KNOWN_MODULE_CYCLES:
        assert set(c) <= modules and list(c) == sorted(c), c


def test_import_picture_is_current():
    assert ip.layers_from_test() == LAYERS
    assert (REPO / "docs" / "imports.md").read_text(encoding="utf-8") == ip.render(layers=LAYERS), \
        "docs/imports.md is stale: run .venv/bin/python scripts/import_picture.py"


def test_architecture_doc_links_the_picture():
    assert "(imports.md)" in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------------- the graph sees what the checks need

def _tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / "pkg" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_graph_sees_lazy_relative_and_submodule_imports(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "top.py": "from pkg.low import util\n",                      # `from package import submodule`
        "low/__init__.py": "from .util import f\n",                  # relative, package __init__
        "low/util.py": "def f():\n    from ..high import mod\n",     # lazy and relative, two levels up
        "high/__init__.py": "",
        "high/mod.py": "import pkg.low.util as u\nclass C:\n    import pkg.top\n",   # class body: import time
        "other.py": "import os\nimport importlib\nimportlib.import_module('pkg.top')\n",
    })
    edges = ip.import_edges(root, "pkg")
    assert sorted(edges) == sorted([
        ip.Edge("pkg.top", "pkg.low.util", 1, False),
        ip.Edge("pkg.low", "pkg.low.util", 1, False),
        ip.Edge("pkg.low.util", "pkg.high.mod", 2, True),
        ip.Edge("pkg.high.mod", "pkg.low.util", 1, False),
        ip.Edge("pkg.high.mod", "pkg.top", 3, False),
        ip.Edge("pkg.other", "pkg.top", 3, False),
    ])
    assert ip.unit_map(root, "pkg") == {"pkg": "__init__.py", "pkg.top": "top.py", "pkg.other": "other.py",
                                        "pkg.low": "low", "pkg.low.util": "low", "pkg.high": "high",
                                        "pkg.high.mod": "high"}
    graph = ip.unit_graph(edges, root, "pkg")
    # high -> low at module level; low -> high only lazily: the lazy import closes the cycle
    assert graph["high"] == {"low": False, "top.py": False} and graph["low"] == {"high": True}
    assert ip.strongly_connected(graph) == [("high", "low", "top.py")]
    assert ip.strongly_connected(module_graph(edges)) == [("pkg.high.mod", "pkg.low.util", "pkg.top")]
    layers = {"__init__.py": 0, "low": 0, "high": 1, "top.py": 2, "other.py": 2}
    assert sorted(upward_imports(edges, ip.unit_map(root, "pkg"), layers)) == [
        "pkg.high.mod -> pkg.top", "pkg.low.util -> pkg.high.mod"]


def test_bottom_up_order_and_picture(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "", "a.py": "import pkg.b\n", "b.py": "def f():\n    import pkg.c\n", "c.py": "",
    })
    graph = ip.unit_graph(ip.import_edges(root, "pkg"), root, "pkg")
    assert ip.bottom_up(graph) == ["__init__.py", "c.py", "b.py", "a.py"]
    # b imports c lazily; a sits below b and imports it: an upward import, flagged on both rows
    text = ip.render(root, "pkg", layers={"__init__.py": 0, "a.py": 1, "b.py": 2, "c.py": 2})
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`" in line]
    assert rows == ["| 0 | `__init__.py` | -- | -- |", "| 1 | `a.py` | `b.py`! | -- |",
                    "| 2 | `c.py` | -- | `b.py`* |", "| 2 | `b.py` | `c.py`* | `a.py`! |"]
    assert text.endswith("Import cycles between units: none.\n")
