"""Repository shape checks (issue 35): no import circle among the Python modules, and no source
file over 500 lines.

Import circles: python/stridewise (and any Python package under tools/) is parsed with ``ast``;
every import counts, at the top of a module or inside a function, class, ``if`` or ``try``, so a
circle closed through an import inside a function is still a circle (it only moves the failure
to whichever import runs first). A circle is broken by moving the shared pieces down into a
lower module.

How an import becomes an edge (to the modules of the scanned packages only):
  ``import a.b.c``              -> a.b.c (or its deepest prefix that is a module we scan)
  ``from a.b import c``         -> a.b.c when that is a module, else a.b (a name a.b defines)
  ``from . import c``, ``from ..x import y``: resolved against the importing module's package.
The parent packages Python also runs on ``import a.b.c`` are not edges: a package's
``__init__`` that imports its own submodules would otherwise be a circle with each of them.
"""
from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 500

# Files over MAX_LINES that are allowed for now, each with the reason. Keep it short: a file
# leaves the list when it is split.
ALLOWED_LONG: set = set()  # a file allowed past 500 lines names its reason here
# Not source: tests, data and text, images, recorded benchmark results.
_SKIP_PREFIXES = ("tests/", "core/tests/", "bench/results/")
_SKIP_SUFFIXES = (".md", ".json", ".txt", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp",
                  ".ico", ".pdf")


def package_roots() -> list:
    """(directory that holds the top-level package, package name): python/stridewise and every
    top-level package under tools/ (a directory with an __init__.py whose parent has none)."""
    roots = [(ROOT / "python", "stridewise")]
    tools = ROOT / "tools"
    for init in sorted(tools.rglob("__init__.py")) if tools.is_dir() else ():
        pkg = init.parent
        if not (pkg.parent / "__init__.py").exists():
            roots.append((pkg.parent, pkg.name))
    return roots


def modules(roots) -> dict:
    """{dotted module name: (path, is_package)} of every .py file in the packages."""
    out = {}
    for base, name in roots:
        for dirpath, dirnames, filenames in os.walk(base / name):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for f in filenames:
                if not f.endswith(".py"):
                    continue
                path = Path(dirpath) / f
                parts = list(path.relative_to(base).with_suffix("").parts)
                is_pkg = parts[-1] == "__init__"
                if is_pkg:
                    parts.pop()
                out[".".join(parts)] = (path, is_pkg)
    return out


def _known(name: str, mods: dict):
    """``name`` or its deepest prefix that is one of ``mods`` (None when outside them)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_targets(node, module: str, is_pkg: bool, mods: dict) -> list:
    """The modules of ``mods`` that one Import / ImportFrom node in ``module`` imports."""
    if isinstance(node, ast.Import):
        return [t for t in (_known(a.name, mods) for a in node.names) if t]
    if node.level:
        pkg = module.split(".") if is_pkg else module.split(".")[:-1]
        pkg = pkg[:len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    out, names_from_base = [], False
    for a in node.names:
        sub = f"{base}.{a.name}"
        if sub in mods:
            out.append(sub)
        else:
            names_from_base = True
    if names_from_base:
        t = _known(base, mods)
        if t:
            out.append(t)
    return out


def import_graph(mods: dict) -> dict:
    """{module: {imported module: [(line, 'top' | 'in-function'), ...]}}"""
    graph: dict = {m: {} for m in mods}
    for m, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            where = "top" if id(node) in top else "in-function"
            for t in import_targets(node, m, is_pkg, mods):
                if t != m:
                    graph[m].setdefault(t, []).append((node.lineno, where))
    return graph


def cycles(graph: dict) -> list:
    """(one cycle: modules, first == last; the whole component) per strongly connected
    component of more than one module (Tarjan, iterative)."""
    index, low, on, stack, comps, n = {}, {}, set(), [], [], 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    comps.append(comp)
    out = []
    for comp in comps:  # a shortest way from the first module back to itself, inside comp
        start = min(comp)
        prev, frontier = {}, [start]
        while start not in prev:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v]):
                    if w in comp and w not in prev:
                        prev[w] = v
                        nxt.append(w)
            frontier = nxt
        path, v = [start], prev[start]
        while v != start:
            path.append(v)
            v = prev[v]
        out.append(([start] + path[:0:-1] + [start], sorted(comp)))
    return sorted(out)


def describe(cycle: list, comp: list, graph: dict) -> str:
    hops = []
    for a, b in zip(cycle, cycle[1:]):
        where = ", ".join(f"line {ln} ({w})" for ln, w in graph[a][b])
        hops.append(f"  {a} -> {b}: {where}")
    more = [m for m in comp if m not in cycle]
    also = f"\n  (the same circle also holds: {', '.join(more)})" if more else ""
    return " -> ".join(cycle) + "\n" + "\n".join(hops) + also


def test_no_import_circles():
    roots = package_roots()
    mods = modules(roots)
    assert "stridewise.audit.runner" in mods, "the scan found no audit modules"
    graph = import_graph(mods)
    found = cycles(graph)
    assert not found, ("import circle(s) among the Python modules (every import counts, in a "
                       "function too; move the shared pieces into a lower module):\n"
                       + "\n".join(describe(c, comp, graph) for c, comp in found))


def test_the_graph_sees_relative_and_in_function_imports():
    """The scan itself: `from . import x` is the submodule x, a name from a package is the
    package, an import inside a function is an edge."""
    mods = {"p": (None, True), "p.a": (None, False), "p.b": (None, False), "p.q": (None, True),
            "p.q.c": (None, False)}
    tree = ast.parse("from . import b\nfrom .q import c, NAME\nimport p.q.c\n"
                     "def f():\n    from .q.c import X\n")
    got = [import_targets(n, "p.a", False, mods) for n in ast.walk(tree)
           if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert got == [["p.b"], ["p.q.c", "p.q"], ["p.q.c"], ["p.q.c"]]
    assert import_targets(ast.parse("from ..b import Y").body[0], "p.q.c", False, mods) == ["p.b"]
    # in a package's __init__, `from . import c` is its submodule; a name that is no submodule
    # comes from the package itself (an edge to itself, which is no circle: dropped later)
    assert import_targets(ast.parse("from . import c").body[0], "p.q", True, mods) == ["p.q.c"]
    assert import_targets(ast.parse("from . import NAME").body[0], "p.q", True, mods) == ["p.q"]
    g = {"x": {"y": [(1, "top")]}, "y": {"z": [(3, "in-function")]}, "z": {"x": [(2, "top")]},
         "w": {"x": [(1, "top")]}}
    assert cycles(g) == [(["x", "y", "z", "x"], ["x", "y", "z"])]


def test_no_source_file_over_500_lines():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert files, "git ls-files listed nothing"
    long = []
    for f in files:
        if f.startswith(_SKIP_PREFIXES) or f.lower().endswith(_SKIP_SUFFIXES):
            continue
        p = ROOT / f
        if not p.is_file():  # deleted in the work tree, not yet committed
            continue
        n = len(p.read_bytes().splitlines())
        if n > MAX_LINES and f not in ALLOWED_LONG:
            long.append(f"{f}: {n} lines")
    assert not long, (f"source files over {MAX_LINES} lines (split them along a real seam):\n  "
                      + "\n  ".join(long))
    stale = sorted(f for f in ALLOWED_LONG if not (ROOT / f).is_file()
                   or len((ROOT / f).read_bytes().splitlines()) <= MAX_LINES)
    assert not stale, f"ALLOWED_LONG names files that are gone or short now: drop {stale}"
