"""How long loading and validating the bundled catalog takes, and how much memory it needs.

    python benchmarks/bench_catalog.py [--repeat N]

Prints one JSON object. Cold start of the CLI (a new interpreter running
``advisor catalog list --json``) is measured too, since that is what a user waits for.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
import tracemalloc


def _timed(fn, repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(runs), 2), "min_ms": round(min(runs), 2),
            "max_ms": round(max(runs), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    import advisor

    tracemalloc.start()
    cat = advisor.load_catalog()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    result = {
        "python": sys.version.split()[0],
        "instances": len(cat.instances), "gpus": len(cat.gpus), "cpus": len(cat.cpus),
        "models": len(cat.models),
        "load_catalog": _timed(advisor.load_catalog, args.repeat),
        "validate_catalog": _timed(advisor.validate_catalog, args.repeat),
        "describe_all_instances": _timed(
            lambda: [cat.describe(i) for i in cat.instances.values()], args.repeat),
        "load_peak_traced_mib": round(peak / 2**20, 2),
    }
    exe = shutil.which("advisor")
    if exe:
        result["cli_cold_start_list_json"] = _timed(
            lambda: subprocess.run([exe, "catalog", "list", "--json"], check=True,
                                   capture_output=True), max(3, args.repeat // 4))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
