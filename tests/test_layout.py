"""The package's structure, read from its own source: no import circle anywhere in ``traceprobe``.

The graph is built with :mod:`ast` from every ``import`` statement of every module (at module level,
inside functions and under ``TYPE_CHECKING`` alike: a circle hidden in a function or a type-only import is
still two modules that cannot be read, tested or moved apart). ``from pkg import name`` is an edge to
``pkg.name`` where that is a module, else to ``pkg`` (its ``__init__``). The implicit import of a module's
parent packages is not an edge (every module would otherwise sit in a circle with its package's
``__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "traceprobe"


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name (a package by its own name, for its ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """``{module: {imported module of the package: line of its first import}}``, from each module's source."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in node.names]
            else:
                continue
            for target in targets:
                if target in mods and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, {}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def cycle_in(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """One closed path through a circle's modules, each step ``a:line -> b`` (breadth-first back to its first module)."""
    members = set(component)
    first = component[0]
    came_from: dict[str, str] = {}
    frontier = [first]
    while frontier and first not in came_from:
        nxt = []
        for node in frontier:
            for child in graph[node]:
                if child in members and child not in came_from:
                    came_from[child] = node
                    nxt.append(child)
        frontier = nxt
    path = [first]
    while True:
        path.append(came_from[path[-1]])
        if path[-1] == first:
            break
    path.reverse()
    return [f"{a} (line {graph[a][b]}) -> {b}" for a, b in zip(path, path[1:])]


def test_no_import_circle():
    graph = import_graph(modules())
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(
        f"  {', '.join(c)}:\n" + "\n".join(f"    {step}" for step in cycle_in(graph, c)) for c in found
    )


# --- the checker itself, on synthetic packages written in a temporary folder ---


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, dict[str, int]]:
    for rel, text in files.items():
        path = tmp_path / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(modules(tmp_path / "pkg"))


def test_graph_reads_every_kind_of_import(tmp_path):
    """Synthetic package: relative, absolute, from-package-import-module, in a function, under TYPE_CHECKING."""
    graph = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from . import b\nfrom .sub import c\n",
            "b.py": "import pkg.sub.d\n",
            "sub/__init__.py": "from .c import X\n",
            "sub/c.py": "X = 1\ndef f():\n    from ..a import y\n",
            "sub/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import b\nimport os\n",
        },
    )
    assert {k: set(v) for k, v in graph.items()} == {
        "pkg": set(),
        "pkg.a": {"pkg.b", "pkg.sub.c"},
        "pkg.b": {"pkg.sub.d"},
        "pkg.sub": {"pkg.sub.c"},
        "pkg.sub.c": {"pkg.a"},
        "pkg.sub.d": {"pkg.b"},
    }
    found = circles(graph)
    assert sorted(found) == [["pkg.a", "pkg.sub.c"], ["pkg.b", "pkg.sub.d"]]
    assert cycle_in(graph, ["pkg.a", "pkg.sub.c"]) == ["pkg.a (line 2) -> pkg.sub.c", "pkg.sub.c (line 3) -> pkg.a"]


@pytest.mark.parametrize("n", [1, 2, 3, 50])
def test_circles_finds_a_ring_and_nothing_in_a_chain(n):
    """Synthetic graphs: a chain of n modules has no circle; closing it into a ring makes one of all n (n > 1)."""
    chain = {f"m{i}": ({f"m{i + 1}": 1} if i + 1 < n else {}) for i in range(n)}
    assert circles(chain) == []
    ring = {f"m{i}": {f"m{(i + 1) % n}": 1} for i in range(n)}
    assert circles(ring) == ([sorted(ring)] if n > 1 else [])


ANALYSIS = PACKAGE / "analysis"
MAX_LINES = 400
"""No module of the package is longer (issue: modules small and named for what they hold)."""


def test_analysis_is_in_rooms():
    """``traceprobe/analysis`` holds at most 8 modules at its top beside its rooms; each room's ``__init__`` says in its
    docstring what question it answers and which modules it holds, and names every module it holds."""
    top = sorted(p.name for p in ANALYSIS.glob("*.py"))
    assert len(top) <= 8, top
    rooms = [p for p in ANALYSIS.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert {p.name for p in rooms} >= {"device", "host", "job", "causal", "advice"}
    for room in rooms:
        doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text(encoding="utf-8"))) or ""
        held = sorted(p.stem for p in room.glob("*.py") if p.name != "__init__.py")
        assert doc and all(f"``{m}``" in doc for m in held), (room.name, held)


def test_no_module_over_the_limit():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_no_reach_into_a_private_module_of_another_room():
    """A module whose name starts with ``_`` (not ``__init__``) is its room's own: only modules of that room import it."""
    mods = modules()
    graph = import_graph(mods)
    bad = [(src, dst) for src, edges in graph.items() for dst in edges
           if dst.rpartition(".")[2].startswith("_") and src.rpartition(".")[0] != dst.rpartition(".")[0]]
    assert not bad, bad


def test_docs_layout_lists_every_module():
    """docs/layout.md's generated part (scripts/layout.py) names every package and module of the package."""
    text = (PACKAGE.parent / "docs" / "layout.md").read_text(encoding="utf-8")
    listed = text.split("<!-- LAYOUT: written by scripts/layout.py -->", 1)[1].split("<!-- /LAYOUT -->", 1)[0]
    names = {ln.strip().split(" ", 1)[0] for ln in listed.splitlines() if "(" in ln}
    for name, path in modules().items():
        assert (f"{path.parent.name}/" if path.name == "__init__.py" else path.stem) in names, name
