#!/usr/bin/env python3
"""The import picture of kbroker: which package imports which, read from the source with ``ast``.

    python scripts/import_picture.py            # rewrite docs/imports.md
    python scripts/import_picture.py --check    # exit 1 when docs/imports.md is not what the source gives

Every ``import`` / ``from ... import`` statement of every ``kbroker/**/*.py`` counts, wherever it stands: at module
level (including class bodies, ``try`` and ``if`` blocks, which run at import time) and inside functions ("lazy"
imports, which run later and are how import cycles hide). Relative imports are resolved against the importing
module; ``from kbroker.log import segment`` is an import of the module ``kbroker.log.segment`` when that module
exists, else of the package ``kbroker.log``. An import names the deepest kbroker module it reaches, not the packages
around it (importing ``kbroker.log.segment`` runs ``kbroker/log/__init__.py`` first, but a package's ``__init__``
re-exporting its own submodules is not a cycle). ``importlib.import_module`` with a constant ``"kbroker...."``
string counts too. Imports by computed name are invisible: ``protocol/apis`` and ``_native`` import their own
submodules that way (no edge leaves the unit), and ``server/router.load_handlers`` imports every handler module
after ``import kbroker.handlers``, which is the edge (``server`` -> ``handlers``) the picture shows for it.

Units: each package directly under ``kbroker/`` (``log``, ``server``, ...) and each top-level module
(``broker.py``, ``errors.py``, ...; ``__init__.py`` for ``kbroker/__init__.py``). The layer of each unit is the
``LAYERS`` table of tests/unit/test_architecture.py (read here with ``ast``, so it is written once); that test uses
these functions for its cycle and layer checks and fails when docs/imports.md is stale.
"""
import argparse
import ast
import sys
from collections import namedtuple
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "kbroker"
DOC = REPO / "docs" / "imports.md"

Edge = namedtuple("Edge", "src dst line lazy")  # src/dst: dotted module names; line: 1-based; lazy: inside a def


def module_files(root=REPO, package=PACKAGE):
    """{dotted module name: path} of every .py file under ``root/package`` (``__init__`` names its package)."""
    out = {}
    for path in sorted((Path(root) / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


class _Collector(ast.NodeVisitor):
    """Import statements of one module with their line and whether a function body holds them."""

    def __init__(self):
        self.found = []          # (dotted base or None, [names] or None, level, line, lazy)
        self.depth = 0

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node):
        for alias in node.names:
            self.found.append((alias.name, None, 0, node.lineno, self.depth > 0))

    def visit_ImportFrom(self, node):
        self.found.append((node.module, [a.name for a in node.names], node.level, node.lineno, self.depth > 0))

    def visit_Call(self, node):
        # importlib.import_module("kbroker.x") / import_module("kbroker.x") with a constant name
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
        if name == "import_module" and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            self.found.append((node.args[0].value, None, 0, node.lineno, self.depth > 0))
        self.generic_visit(node)


def _resolve(module, is_package, base, level):
    if not level:
        return base
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts + ([base] if base else []))


def _deepest(name, modules):
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in modules else None


def import_edges(root=REPO, package=PACKAGE):
    """Every import of a kbroker module by a kbroker module, as ``Edge``s in file/line order (self-imports left
    out)."""
    modules = module_files(root, package)
    edges = []
    for module, path in modules.items():
        collector = _Collector()
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        is_package = path.name == "__init__.py"
        for base, names, level, line, lazy in collector.found:
            base = _resolve(module, is_package, base, level)
            if not base or base.split(".")[0] != package:
                continue
            targets = [base] if names is None else [
                base + "." + n if base + "." + n in modules else base for n in names]
            for target in dict.fromkeys(targets):
                dst = _deepest(target, modules)
                if dst is not None and dst != module:
                    edges.append(Edge(module, dst, line, lazy))
    return edges


def unit_map(root=REPO, package=PACKAGE):
    """{module: unit}: ``kbroker.log.segment`` -> ``log``, ``kbroker.broker`` -> ``broker.py``, ``kbroker`` ->
    ``__init__.py``."""
    out = {}
    for module, path in module_files(root, package).items():
        parts = module.split(".")
        if len(parts) == 1:
            out[module] = "__init__.py"
        elif len(parts) == 2 and path.name != "__init__.py":
            out[module] = parts[1] + ".py"
        else:
            out[module] = parts[1]
    return out


def unit_graph(edges, root=REPO, package=PACKAGE):
    """{unit: {imported unit: True when every import behind the arrow is lazy}} (imports within a unit left out)."""
    unit = unit_map(root, package)
    graph = {u: {} for u in unit.values()}
    for e in edges:
        a, b = unit[e.src], unit[e.dst]
        if a != b:
            graph[a][b] = graph[a].get(b, True) and e.lazy
    return graph


def strongly_connected(graph):
    """Tarjan's SCCs of ``{node: iterable of nodes}`` with more than one member (the cycles), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        # iterative DFS, so a long import chain cannot hit Python's recursion limit
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def bottom_up(graph):
    """Units ordered so that each comes after what it imports (members of a cycle together, alphabetically)."""
    comp_of = {}
    for comp in strongly_connected(graph):
        for u in comp:
            comp_of[u] = comp
    done, order = set(), []
    remaining = sorted(graph)
    while remaining:
        for u in remaining:
            group = comp_of.get(u, (u,))
            deps = {d for g in group for d in graph[g]} - set(group)
            if deps <= done:
                break
        else:  # unreachable: SCCs are collapsed, so some group has all its imports placed
            raise AssertionError("no placeable unit among %s" % remaining)
        order.extend(group)
        done.update(group)
        remaining = [r for r in remaining if r not in done]
    return order


HEADER = """\
# Import picture

Generated by `python scripts/import_picture.py` from the source of `kbroker/` (`ast`: imports at module level and
inside functions); `tests/unit/test_architecture.py` fails when this file is not what the source gives. The layers
are that test's `LAYERS` table (0 = bottom), where its known violations are listed too; the module contracts are in
[architecture.md](architecture.md).

Rows by layer, and within a layer each after the units it imports (except inside an import cycle). `x*`: only
imports inside functions (lazy) make this arrow; `x!`: the arrow goes up, from a lower layer to a higher one.

| layer | unit | imports | imported by |
|---|---|---|---|
"""
LAYERS_SOURCE = REPO / "tests" / "unit" / "test_architecture.py"


def layers_from_test(path=LAYERS_SOURCE):
    """The ``LAYERS = {...}`` literal of tests/unit/test_architecture.py (read, not imported: no pytest needed)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "LAYERS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError("no LAYERS table in %s" % path)


def render(root=REPO, package=PACKAGE, layers=None):
    """docs/imports.md as text; ``layers`` ({unit: int}, default: the test's table) orders the rows. A unit
    missing from it shows layer ``?`` and sorts last."""
    layers = layers_from_test() if layers is None else layers
    graph = unit_graph(import_edges(root, package), root, package)
    importers = {u: sorted(a for a in graph if u in graph[a]) for u in graph}
    rank = {u: i for i, u in enumerate(bottom_up(graph))}
    level = {u: layers.get(u, float("inf")) for u in graph}

    def cell(pairs):
        return ", ".join("`%s`%s%s" % (t, "*" if lazy else "", "!" if up else "") for t, lazy, up in pairs) or "--"

    lines = HEADER.splitlines()
    for u in sorted(graph, key=lambda u: (level[u], rank[u])):
        imports = [(t, graph[u][t], level[t] > level[u]) for t in sorted(graph[u])]
        imported_by = [(a, graph[a][u], level[u] > level[a]) for a in importers[u]]
        lines.append("| %s | `%s` | %s | %s |" % (layers.get(u, "?"), u, cell(imports), cell(imported_by)))
    cycles = strongly_connected(graph)
    lines += ["", "Import cycles between units: %s." % ("; ".join(" <-> ".join("`%s`" % u for u in c)
                                                                    for c in cycles) or "none")]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/imports.md is stale; write nothing")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if current != text:
            print("%s is stale: run python scripts/import_picture.py" % DOC.relative_to(REPO), file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    print("wrote %s" % DOC.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
