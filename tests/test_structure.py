"""The package's shape, checked from its source: every import (module level or inside a function,
not under ``if TYPE_CHECKING``) points to the same layer or a lower one, and no two modules
import each other, directly or round a loop. The layers, lowest first, are the order the data
flows in (the README's contributor map)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: lowest first; a module belongs to the longest prefix that names it
LAYERS: list[tuple[str, ...]] = [
    ("advisor._version", "advisor.errors", "advisor.inputs", "advisor.choices"),
    ("advisor.hfconfig", "advisor.state", "advisor.bootstatus", "advisor.clouds.info",
     "advisor.clouds.registry"),
    ("advisor.catalog",),
    ("advisor.core",),
    ("advisor.host",),
    ("advisor.clouds",),
    ("advisor.render",),
    ("advisor.api",),
    ("advisor.provisioning",),
    ("advisor.tickets",),
    ("advisor.cli",),
    ("advisor", "advisor.__main__"),
]


def modules(src: Path = SRC) -> dict[str, Path]:
    out = {}
    for f in (src / "advisor").rglob("*.py"):
        name = ".".join(f.relative_to(src).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def layer(mod: str) -> int:
    best, where = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, where = len(p), i
    assert where >= 0, f"{mod} is in no layer: add it to LAYERS"
    return where


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the advisor modules it imports at run time."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                typing_only |= {id(x) for b in node.body for x in ast.walk(b)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                    pkg = pkg[:len(pkg) - (node.level - 1)]
                    base = ".".join([*pkg, *([node.module] if node.module else [])])
                # `from pkg import sub`: the submodule when it is one, else the module itself
                names = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = names or [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t.startswith("advisor") and t != mod:
                    edges[mod].add(t)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_points_upward():
    edges = imports(modules())
    upward = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                    if layer(b) > layer(a))
    assert upward == []


def test_no_import_cycle():
    assert cycles(imports(modules())) == []


def test_the_checks_see_what_they_should(tmp_path):
    """The walker on a made-up package: a lazy upward import and a two-module loop are found,
    an import under TYPE_CHECKING is not."""
    pkg = tmp_path / "advisor"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from advisor.api import x\n")
    (pkg / "core" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from advisor.cli import y\nfrom . import c\n")
    (pkg / "core" / "c.py").write_text("from advisor.core import b\n")
    (pkg / "api.py").write_text("")
    (pkg / "cli.py").write_text("")
    edges = imports(modules(tmp_path))
    assert edges["advisor.core.a"] == {"advisor.api"}
    assert layer("advisor.api") > layer("advisor.core.a")
    assert "advisor.cli" not in edges["advisor.core.b"]
    assert cycles(edges) == [["advisor.core.b", "advisor.core.c"]]
