"""Cold start of the CLI against the cost of its two big dependencies.

    python benchmarks/bench_startup.py [--runs 10] [--json]

Times, each in a new process (median of ``--runs``, the commands interleaved so that a busy
machine slows all of them alike, after one untimed run of each that fills the catalog cache):

* baseline:   ``python -c "import pydantic, typer"``
* recommend:  ``advisor recommend --model llama-3-8b --ctx 8192 --json``
* help:       ``advisor --help``
* typer floor: a bare typer app with one command of five options, parsing them and printing
  (no advisor code): what any typer command costs before it does anything
* pydantic-model floor: ``python -c`` defining and building one pydantic model of one field
  (no typer, no advisor code): what any process costs that defines a pydantic model at all

Prints a table (or ``--json``) and exits 1 when a ratio to the baseline misses its target:
recommend <= 1.5 x baseline, --help <= 1.2 x baseline.

The runs read bytecode from a temporary ``PYTHONPYCACHEPREFIX`` that the untimed run fills
(``PYTHONDONTWRITEBYTECODE`` is dropped for them): an installed package has its ``.pyc``
files, and a checkout run with bytecode writing off would time the compiler instead.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: name -> ratio to the baseline it must stay under (None: the baseline itself)
TARGETS: dict[str, float | None] = {"baseline": None, "recommend": 1.5, "help": 1.2,
                                    "typer-floor": None, "pydantic-model": None}

#: the floor: typer >= 0.29 converts option values through pydantic at invocation
BARE_TYPER = """
from typing import Annotated
import typer
app = typer.Typer()
@app.command()
def rec(model: Annotated[str, typer.Option()], ctx: Annotated[int, typer.Option()] = 1,
        a: Annotated[float | None, typer.Option()] = None,
        b: Annotated[list[str] | None, typer.Option()] = None, json: bool = False) -> None:
    print(model, ctx)
app()
"""

#: the other floor: the first pydantic model class a process defines imports pydantic's schema
#: machinery (fields, model construction, schema generation, pydantic-core's validators)
ONE_MODEL = "from pydantic import BaseModel\nclass A(BaseModel):\n    x: int = 1\nA()"
#: how the table names the two floors (their scripts are too long to print)
SHOWN = {"typer-floor": "python -c <bare typer app> --model x --ctx 3",
         "pydantic-model": "python -c <one pydantic model>"}


def _commands(exe: str) -> dict[str, list[str]]:
    return {
        "baseline": [sys.executable, "-c", "import pydantic, typer"],
        "recommend": [exe, "recommend", "--model", "llama-3-8b", "--ctx", "8192", "--json"],
        "help": [exe, "--help"],
        "typer-floor": [sys.executable, "-c", BARE_TYPER, "--model", "x", "--ctx", "3"],
        "pydantic-model": [sys.executable, "-c", ONE_MODEL],
    }


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    args = parser.parse_args()

    exe = (shutil.which("advisor", path=str(Path(sys.executable).parent))
           or shutil.which("advisor"))
    if not exe:
        print("the advisor console script is not installed in this environment",
              file=sys.stderr)
        return 2
    # the bundled catalog only, no debug output: what a fresh user runs
    env = {k: v for k, v in os.environ.items()
           if k not in ("ADVISOR_CATALOG_DIR", "ADVISOR_DEBUG", "ADVISOR_NO_CACHE",
                        "PYTHONDONTWRITEBYTECODE")}
    cmds = _commands(exe)
    wall: dict[str, list[float]] = {name: [] for name in cmds}
    cpu: dict[str, list[float]] = {name: [] for name in cmds}
    with tempfile.TemporaryDirectory(prefix="advisor-bench-pyc-") as pyc:
        env["PYTHONPYCACHEPREFIX"] = pyc
        for cmd in cmds.values():  # warm-up: bytecode, OS file cache, advisor's catalog cache
            _run(cmd, env)
        for _ in range(args.runs):
            for name, cmd in cmds.items():
                w, c = _run(cmd, env)
                wall[name].append(w)
                cpu[name].append(c)

    base, base_cpu = statistics.median(wall["baseline"]), statistics.median(cpu["baseline"])
    rows = []
    for name, target in TARGETS.items():
        med, med_cpu = statistics.median(wall[name]), statistics.median(cpu[name])
        ratio = med / base
        rows.append({"name": name,
                     "command": SHOWN.get(name) or " ".join([Path(cmds[name][0]).name,
                                                             *cmds[name][1:]]),
                     "median_s": round(med, 3), "min_s": round(min(wall[name]), 3),
                     "ratio": round(ratio, 2), "cpu_median_s": round(med_cpu, 3),
                     "cpu_ratio": round(med_cpu / base_cpu, 2), "target": target,
                     "ok": target is None or ratio <= target})
    ok = all(r["ok"] for r in rows)
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "runs": args.runs, "rows": rows,
                          "ok": ok}, indent=2))
    else:
        width = max(len(str(r["command"])) for r in rows)
        print(f"{'command':<{width}}  median s   min s  ratio   CPU s  CPU ratio  target")
        for r in rows:
            target = "-" if r["target"] is None else f"<= {r['target']}"
            flag = "" if r["ok"] else "  MISSED"
            print(f"{r['command']:<{width}}  {r['median_s']:8.3f} {r['min_s']:7.3f} "
                  f"{r['ratio']:6.2f} {r['cpu_median_s']:7.3f} {r['cpu_ratio']:10.2f}  "
                  f"{target}{flag}")
        print(f"median of {args.runs} cold runs each (wall time decides; CPU time, user + "
              f"system, is steadier on a busy machine), Python {sys.version.split()[0]}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
