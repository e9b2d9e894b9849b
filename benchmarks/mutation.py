"""A small mutation tester for advisor's decisions and formulas (the standard library and pytest,
nothing else).

For each target — a source file under src/advisor and the functions or module-level names in it
— every mutation site is found with :mod:`ast`. A mutant is one change:

* a comparison flipped: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <->
  ``not in``, ``is`` <-> ``is not``;
* ``and`` <-> ``or``; a ``not`` dropped;
* arithmetic: ``+`` <-> ``-``, ``*`` <-> ``/``;
* a number: ``c`` -> ``c + 1`` (integers; ``1`` also -> ``0``), ``c`` -> ``c * 1.1`` (floats,
  ``0.0`` -> ``1.0``);
* a string of an error-code set (CAPACITY / QUOTA / AUTH) moved to each other set of the file,
  or dropped; of a single set (GONE, OLD_CPU_CODENAMES) dropped.

Text is left alone (f-strings, ``raise`` statements, annotations). Each mutant is written into a
copy of src/ in a temporary directory and the target's tests run against it
(``PYTHONPATH=<copy>/src python -m pytest -x -q -p no:cacheprovider ...``) from a copy of the
tests taken at the start (others editing the checkout meanwhile do not disturb a run), with a
timeout. Failing tests (or a timeout) kill the mutant; passing tests let it survive.
Before the mutants, the target's tests run once against the unmutated copy (as ``ast.unparse``
writes it): they must pass, and their time sets the default timeout.

Survivors that are known to be equivalent (no input the code accepts tells them apart) are listed
in ``EQUIVALENT`` with the reason, and reported apart from the real survivors.

Usage::

    python benchmarks/mutation.py --list                 # targets and their mutant counts
    python benchmarks/mutation.py                         # every target, every mutant
    python benchmarks/mutation.py --target sizing --target layouts
    python benchmarks/mutation.py --limit 40 --seed 1     # at most 40 mutants per target
    python benchmarks/mutation.py --jobs 2 --json out.json

Exit status: 0 when no mutant survives except the documented equivalent ones, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "advisor"


@dataclass(frozen=True)
class Target:
    file: str  # relative to src/advisor
    #: functions ("name", "Class.method") and module-level assignments; None: every function
    names: tuple[str, ...] | None
    tests: tuple[str, ...]
    #: module-level sets of strings whose elements are moved between each other (or dropped)
    sets: tuple[str, ...] = ()


TARGETS: dict[str, Target] = {
    "sizing": Target(
        "core/sizing.py",
        ("max_len_limit", "resolve_dtype", "kv_heads_per_gpu", "kv_bytes_per_token_per_layer",
         "stage_layers", "_layer_weight_bytes", "weights_per_gpu", "activation_gib",
         "cuda_graph_gib", "_blocks_for_request", "kv_layout", "kv_capacity", "fit"),
        ("tests/test_sizing_decisions.py", "tests/test_sizing.py")),
    "ranking": Target(
        "core/ranking.py",
        ("OLD_CPU_CODENAMES", "_Ranker.figure", "_Ranker.concurrency_options",
         "_Ranker._codename"),
        ("tests/test_ranking_decisions.py", "tests/test_question.py"),
        sets=("OLD_CPU_CODENAMES",)),
    "host": Target("core/host.py", ("NUMA_WEIGHT", "physical_cores", "cpu_floor",
                                    "floor_shortfall", "regime", "view"),
                   ("tests/test_ranking_decisions.py",)),
    "load": Target("core/load.py", ("DEFAULT_TPOT_MS", "DEFAULT_TTFT_MS", "HOURS_PER_MONTH",
                                    "targets", "question", "size_fleet"),
                   ("tests/test_question.py",)),
    "layouts": Target("core/layouts.py", None, ("tests/test_ranking_decisions.py",)),
    "classify-aws": Target(
        "clouds/aws/compute.py", ("CAPACITY", "QUOTA", "AUTH", "AwsProvider.classify"),
        ("tests/providers/test_classify.py", "-k", "aws or scope"),
        sets=("CAPACITY", "QUOTA", "AUTH")),
    "classify-gcp": Target(
        "clouds/gcp/compute.py", ("CAPACITY", "QUOTA", "GcpProvider.classify"),
        ("tests/providers/test_classify.py", "-k", "gcp"), sets=("CAPACITY", "QUOTA")),
    "classify-azure": Target(
        "clouds/azure/compute.py", ("CAPACITY", "QUOTA", "AUTH", "AzureProvider.classify"),
        ("tests/providers/test_classify.py", "-k", "azure"),
        sets=("CAPACITY", "QUOTA", "AUTH")),
    "classify-base": Target("clouds/base.py", ("CloudError.__init__", "GONE", "alive"),
                            ("tests/providers/test_classify.py", "tests/test_state_transitions.py"),
                            sets=("GONE",)),
    "ingress-aws": Target("clouds/aws/compute.py", ("ingress",), ("tests/test_ingress.py",)),
    "ingress-gcp": Target("clouds/gcp/compute.py", ("firewall_bodies",),
                          ("tests/test_ingress.py",)),
    "ingress-azure": Target("clouds/azure/compute.py", ("AzureProvider.bodies",),
                            ("tests/test_ingress.py", "tests/providers/test_azure.py")),
    "state": Target("provisioning.py", ("status", "_regions", "down", "_outcome"),
                    ("tests/test_state_transitions.py", "tests/providers/test_classify.py",
                     "-k", "not aws and not gcp and not azure")),
}

#: (file, qualified name, "original -> mutated") -> why no accepted input tells them apart
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("core/sizing.py", "kv_capacity",
     "max(0, int(kv_gib * GIB // (page * group_size))) if kv_gib > 0 else 0 -> "
     "max(0, int(kv_gib * GIB // (page * group_size))) if kv_gib >= 0 else 0"):
        "at kv_gib == 0 both branches give 0 blocks",
    ("core/sizing.py", "kv_capacity",
     "num_blocks / per_request if per_request else 0.0 -> "
     "num_blocks / per_request if per_request else 1.0"):
        "per_request is never 0: a request needs at least one block (max_len >= 1)",
    ("core/sizing.py", "fit", "kv_gib > 0 and concurrency >= 1 -> "
     "kv_gib >= 0 and concurrency >= 1"):
        "at kv_gib == 0 there are 0 blocks, so concurrency 0 < 1 decides alone",
    ("core/sizing.py", "kv_layout", "len(counts) == 1 or not engine.hybrid_kv_allocator -> "
     "len(counts) == 0 or not engine.hybrid_kv_allocator"):
        "with one attention kind the grouping path makes the same single group of all layers",
    ("core/sizing.py", "fit", "round(non_torch, 4) -> round(non_torch, 5)"):
        "the engine profiles' non-torch memory is 0.25 or 0.25 + 0.3 GiB: two decimals",
    ("core/sizing.py", "cuda_graph_gib", "round(0.1 + 0.01 * layers, 3) -> "
     "round(0.1 + 0.01 * layers, 4)"):
        "0.1 + 0.01 x a whole number of layers has two decimals: both roundings agree",
    ("core/sizing.py", "_layer_weight_bytes",
     "h * spec.moe.num_experts if spec.moe else 0 -> h * spec.moe.num_experts if spec.moe "
     "else 1"):
        "reached only for an MoE layer, where spec.moe is always set",
    ("clouds/gcp/compute.py", "GcpProvider.classify",
     "getattr(e, 'code', '') or getattr(e, 'reason', '') -> "
     "getattr(e, 'code', '') and getattr(e, 'reason', '')"):
        "the Operation errors on exc.errors are also read from exc.response.error.errors, "
        "which api-core always sets for an operation (HTTP errors carry dicts, not objects)",
    ("core/layouts.py", "tp_sizes", "gpus + 1 -> gpus + 2"):
        "t = gpus + 1 never divides gpus: the extra candidate is always dropped",
    ("core/layouts.py", "layouts", "with_pp and tp * 2 <= n -> with_pp and tp / 2 <= n"):
        "a weaker guard changes nothing: every PP size kept needs tp * p <= n with p >= 2",
    ("core/layouts.py", "layouts",
     "tp * p <= n and n % (tp * p) == 0 and (p <= spec.num_layers) -> "
     "tp / p <= n and n % (tp * p) == 0 and (p <= spec.num_layers)"):
        "n % (tp * p) == 0 (the next test) already implies tp * p <= n",
    ("core/load.py", "size_fleet", "demand / per - 1e-09 -> demand / per - 1.1e-09"):
        "both tolerances absorb the float error of a load that is a whole number of replicas; "
        "no load the CLI accepts falls between them",
    ("core/ranking.py", "_Ranker.concurrency_options", "max(1, per_seq) -> max(2, per_seq)"):
        "input_len and output_len are at least 1 each (Request), so per_seq >= 2",
    ("core/ranking.py", "_Ranker.concurrency_options", "max(1, per_seq) -> max(0, per_seq)"):
        "input_len and output_len are at least 1 each (Request), so per_seq >= 2",
}


# -- finding and making mutants -----------------------------------------------------------------
CMP_SWAP: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
                              ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn,
                              ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BIN_SWAP: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div,
                              ast.Div: ast.Mult}


@dataclass(frozen=True)
class Mutant:
    target: str
    file: str
    scope: str  # the qualified name the site is in
    index: int  # the node's position in the scope's walk
    kind: str
    change: Any  # what the node becomes (an op class, a value, a set move)
    line: int
    before: str
    after: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.file, self.scope, f"{self.before} -> {self.after}")

    def describe(self) -> str:
        def cut(text: str) -> str:
            return text if len(text) <= 110 else text[:107] + "..."

        return f"{self.file}:{self.line} {self.scope}: {cut(self.before)}  ->  {cut(self.after)}"


def _scopes(tree: ast.Module, names: tuple[str, ...] | None) -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of each function / method / module-level assignment asked for."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    found[f"{node.name}.{sub.name}"] = sub
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    found[t.id] = node
    if names is None:
        yield from ((n, v) for n, v in found.items() if isinstance(v, ast.FunctionDef))
        return
    for name in names:
        if name not in found:
            raise SystemExit(f"mutation: {name} not found")
        yield name, found[name]


def _walk(scope: ast.AST) -> list[ast.AST]:
    """The scope's nodes in a fixed order, without text and annotations."""
    skip: set[int] = set()
    for node in ast.walk(scope):
        parts: list[ast.AST] = []
        if isinstance(node, ast.JoinedStr | ast.Raise):
            parts.append(node)
        if isinstance(node, ast.FunctionDef):
            parts += node.decorator_list + ([node.returns] if node.returns else [])
            for a in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                if a.annotation is not None:
                    parts.append(a.annotation)
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value,
                                                                     ast.Constant):
                parts.append(body[0])  # the docstring
        if isinstance(node, ast.AnnAssign):
            parts.append(node.annotation)
        for p in parts:
            skip.update(id(n) for n in ast.walk(p))
    return [n for n in ast.walk(scope) if id(n) not in skip]


def _is_text(node: ast.AST) -> bool:
    """A string expression: ``+`` there is concatenation, and ``-`` would only raise."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant)
                                           and isinstance(node.value, str)):
        return True
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    if isinstance(node, ast.IfExp):
        return _is_text(node.body) or _is_text(node.orelse)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join" and _is_text(node.func.value))


def _sites(node: ast.AST) -> Iterator[tuple[str, Any]]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in CMP_SWAP:
                yield "compare", (i, CMP_SWAP[type(op)])
    elif isinstance(node, ast.BoolOp):
        yield "boolean", ast.Or if isinstance(node.op, ast.And) else ast.And
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", None
    elif isinstance(node, ast.BinOp) and type(node.op) in BIN_SWAP:
        if not (_is_text(node.left) or _is_text(node.right)):
            yield "arithmetic", BIN_SWAP[type(node.op)]
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        v = node.value
        if isinstance(v, int):
            yield "number", v + 1
            if v == 1:
                yield "number", 0
        else:
            yield "number", round(v * 1.1, 12) if v else 1.0


def _set_nodes(tree: ast.Module, names: tuple[str, ...]) -> dict[str, ast.Set]:
    out: dict[str, ast.Set] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Set):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id in names:
                    out[t.id] = node.value
    return out


def _shown(sub: ast.AST, kind: str, change: Any, parents: dict[int, ast.AST]) -> tuple[str, str]:
    """The mutated node in its expression, before and after (a number or a dropped ``not``
    alone would say little)."""
    ctx = sub
    while isinstance(ctx, ast.Constant | ast.UnaryOp) and id(ctx) in parents and \
            isinstance(parents[id(ctx)], ast.expr):
        ctx = parents[id(ctx)]
    # arithmetic inside a comparison or more arithmetic, a comparison inside a condition: show
    # the enclosing expression (tells equal-looking mutants apart)
    if isinstance(ctx, ast.BinOp) and isinstance(parents.get(id(ctx)), ast.Compare | ast.BinOp):
        ctx = parents[id(ctx)]
    if isinstance(ctx, ast.Compare) and isinstance(parents.get(id(ctx)), ast.BoolOp | ast.IfExp):
        ctx = parents[id(ctx)]
    position = next(i for i, n in enumerate(ast.walk(ctx)) if n is sub)
    twin = copy.deepcopy(ctx)
    victim = list(ast.walk(twin))[position]
    if victim is twin:
        twin = _apply_node(twin, kind, change)
    else:
        twin = _Swap(victim, kind, change).visit(twin)
    return ast.unparse(ctx), ast.unparse(twin)


class _Swap(ast.NodeTransformer):
    """Replaces one node (by identity) with its mutation."""

    def __init__(self, victim: ast.AST, kind: str, change: Any) -> None:
        self.victim, self.kind, self.change = victim, kind, change

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if node is self.victim:
            return _apply_node(node, self.kind, self.change)
        return super().generic_visit(node)


def find_mutants(name: str, target: Target) -> list[Mutant]:
    source = (PACKAGE / target.file).read_text(encoding="utf-8")
    tree = ast.parse(source)
    out: list[Mutant] = []
    set_names = set(target.sets)
    for scope, node in _scopes(tree, target.names):
        if scope in set_names:
            continue  # its strings are moved below, not edited
        parents = {id(c): p for p in ast.walk(node) for c in ast.iter_child_nodes(p)}
        for index, sub in enumerate(_walk(node)):
            for kind, change in _sites(sub):
                before, after = _shown(sub, kind, change, parents)
                out.append(Mutant(name, target.file, scope, index, kind, change,
                                  getattr(sub, "lineno", 0), before, after))
    sets = _set_nodes(tree, target.sets)
    for src_name, node in sets.items():
        for elt in node.elts:
            assert isinstance(elt, ast.Constant) and isinstance(elt.value, str)
            for dest in [*(n for n in sets if n != src_name), None]:
                out.append(Mutant(name, target.file, src_name, 0, "set", (elt.value, src_name,
                                                                          dest),
                                  elt.lineno, f"{elt.value!r} in {src_name}",
                                  f"{elt.value!r} in {dest}" if dest else "dropped"))
    return out


def _apply_node(node: ast.AST, kind: str, change: Any) -> ast.AST:
    if kind == "compare":
        assert isinstance(node, ast.Compare)
        i, op = change
        node.ops[i] = op()
    elif kind == "boolean":
        assert isinstance(node, ast.BoolOp)
        node.op = change()
    elif kind == "not":
        assert isinstance(node, ast.UnaryOp)
        return node.operand
    elif kind == "arithmetic":
        assert isinstance(node, ast.BinOp)
        node.op = change()
    elif kind == "number":
        assert isinstance(node, ast.Constant)
        node.value = change
    return node


def mutated_source(m: Mutant, target: Target) -> str:
    tree = ast.parse((PACKAGE / m.file).read_text(encoding="utf-8"))
    if m.kind == "set":
        value, src_name, dest = m.change
        sets = _set_nodes(tree, target.sets)
        elt = next(e for e in sets[src_name].elts
                   if isinstance(e, ast.Constant) and e.value == value)
        sets[src_name].elts.remove(elt)
        if dest is not None:
            sets[dest].elts.append(elt)
        if not sets[src_name].elts:  # {} would be a dict
            tree = _replace_empty_set(tree, sets[src_name])
        return ast.unparse(tree)
    scope = dict(_scopes(tree, (m.scope,)))[m.scope]
    victim = _walk(scope)[m.index]
    return ast.unparse(ast.fix_missing_locations(_Swap(victim, m.kind, m.change).visit(tree)))


def _replace_empty_set(tree: ast.Module, empty: ast.Set) -> ast.Module:
    class Empty(ast.NodeTransformer):
        def visit_Set(self, node: ast.Set) -> ast.AST:
            if node is empty:
                return ast.Call(func=ast.Name(id="set", ctx=ast.Load()), args=[], keywords=[])
            return node

    return ast.fix_missing_locations(Empty().visit(tree))


# -- running ------------------------------------------------------------------------------------
@dataclass
class Result:
    mutant: Mutant
    outcome: str  # killed, timeout, survived, error
    seconds: float


@dataclass
class Workspace:
    """A snapshot of src/ (to mutate) and tests/ (to run), taken once: edits made to the
    checkout meanwhile reach neither. The catalogs and templates are found relative to it."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="advisor-mut-")))

    def __post_init__(self) -> None:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(SRC, self.root / "src", ignore=ignore)
        shutil.copytree(ROOT / "tests", self.root / "tests", ignore=ignore)
        shutil.copyfile(ROOT / "pyproject.toml", self.root / "pyproject.toml")
        for data in ("catalogs", "templates"):
            (self.root / data).symlink_to(ROOT / data)

    def write(self, rel: str, text: str) -> None:
        (self.root / "src" / "advisor" / rel).write_text(text, encoding="utf-8")

    def restore(self, rel: str) -> None:
        shutil.copyfile(PACKAGE / rel, self.root / "src" / "advisor" / rel)

    def run(self, tests: tuple[str, ...], timeout: float) -> tuple[str, float, str]:
        env = {**os.environ, "PYTHONPATH": str(self.root / "src"),
               "PYTHONDONTWRITEBYTECODE": "1", "ADVISOR_NO_CACHE": "1",
               "ADVISOR_HOME": str(self.root / "home")}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return "timeout", time.monotonic() - start, ""
        took = time.monotonic() - start
        if proc.returncode == 0:
            return "survived", took, proc.stdout[-2000:]
        if proc.returncode == 5:  # no tests collected: the target's test selection is wrong
            return "error", took, proc.stdout[-2000:] + proc.stderr[-2000:]
        # a test failed, or the mutant broke an import (conftest included)
        return "killed", took, proc.stdout[-2000:] + proc.stderr[-2000:]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def check_baseline(ws: Workspace, name: str, target: Target) -> float:
    """The target's tests against the unparsed, unmutated file: they must pass."""
    ws.write(target.file, ast.unparse(ast.parse((PACKAGE / target.file).read_text())))
    outcome, took, out = ws.run(target.tests, timeout=600)
    ws.restore(target.file)
    if outcome != "survived":
        raise SystemExit(f"mutation: the tests of {name} fail without a mutant:\n{out}")
    return took


def run_target(name: str, target: Target, mutants: list[Mutant], jobs: int,
               timeout: float | None, say: Any) -> list[Result]:
    spaces = [Workspace() for _ in range(max(1, jobs))]
    try:
        base = check_baseline(spaces[0], name, target)
        limit = timeout or max(30.0, 4 * base)
        say(f"{name}: {len(mutants)} mutants, tests take {base:.1f} s (timeout {limit:.0f} s)")
        free = list(spaces)

        def one(m: Mutant) -> Result:
            ws = free.pop()
            try:
                ws.write(m.file, mutated_source(m, target))
                outcome, took, _ = ws.run(target.tests, limit)
                return Result(m, "killed" if outcome == "timeout" else outcome, took)
            finally:
                ws.restore(m.file)
                free.append(ws)

        results: list[Result] = []
        with ThreadPoolExecutor(max_workers=len(spaces)) as pool:
            for r in pool.map(one, mutants):
                results.append(r)
                if r.outcome != "killed":
                    say(f"  {r.outcome}: {r.mutant.describe()}")
        return results
    finally:
        for ws in spaces:
            ws.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", action="append", choices=sorted(TARGETS),
                    help="a target to mutate (repeatable; default: all)")
    ap.add_argument("--limit", type=int, default=None,
                    help="at most this many mutants per target, sampled with --seed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per mutant (default: 4 x the baseline run, at least 30)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    ap.add_argument("--list", action="store_true", help="list targets and mutants, run nothing")
    ap.add_argument("--json", type=Path, default=None, help="write every result here")
    args = ap.parse_args(argv)

    names = args.target or list(TARGETS)
    rng = random.Random(args.seed)
    plan: dict[str, list[Mutant]] = {}
    for name in names:
        found = find_mutants(name, TARGETS[name])
        if args.limit is not None and len(found) > args.limit:
            found = sorted(rng.sample(found, args.limit), key=lambda m: (m.line, m.index))
        plan[name] = found
    if args.list:
        for name, ms in plan.items():
            t = TARGETS[name]
            print(f"{name}: {len(ms)} mutants in {t.file} ({', '.join(t.names or ['all'])}); "
                  f"tests: {' '.join(t.tests)}")
            for m in ms:
                print(f"  {m.describe()}")
        return 0

    def say(line: str) -> None:
        print(line, flush=True)

    started = time.monotonic()
    results: list[Result] = []
    for name, ms in plan.items():
        results += run_target(name, TARGETS[name], ms, args.jobs, args.timeout, say)
    killed = [r for r in results if r.outcome == "killed"]
    alive = [r for r in results if r.outcome != "killed"]
    equivalent = [r for r in alive if r.mutant.key in EQUIVALENT]
    survived = [r for r in alive if r.mutant.key not in EQUIVALENT]
    print()
    print(f"{'target':<16}{'mutants':>8}{'killed':>8}{'equiv':>7}{'survived':>9}")
    for name in plan:
        rs = [r for r in results if r.mutant.target == name]
        k = sum(r.outcome == "killed" for r in rs)
        e = sum(r.outcome != "killed" and r.mutant.key in EQUIVALENT for r in rs)
        print(f"{name:<16}{len(rs):>8}{k:>8}{e:>7}{len(rs) - k - e:>9}")
    print(f"{'total':<16}{len(results):>8}{len(killed):>8}{len(equivalent):>7}"
          f"{len(survived):>9}   ({time.monotonic() - started:.0f} s)")
    if equivalent:
        print("\nequivalent (documented in EQUIVALENT):")
        for r in equivalent:
            print(f"  {r.mutant.describe()}\n      {EQUIVALENT[r.mutant.key]}")
    if survived:
        print("\nsurvived:")
        for r in survived:
            print(f"  [{r.outcome}] {r.mutant.describe()}")
    if args.json:
        args.json.write_text(json.dumps([{
            "target": r.mutant.target, "file": r.mutant.file, "line": r.mutant.line,
            "scope": r.mutant.scope, "kind": r.mutant.kind, "before": r.mutant.before,
            "after": r.mutant.after, "outcome": r.outcome, "seconds": round(r.seconds, 2),
            "equivalent": EQUIVALENT.get(r.mutant.key)} for r in results], indent=1))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
