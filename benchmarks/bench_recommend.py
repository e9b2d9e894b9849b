"""Speed and memory of `advisor recommend`.

    python benchmarks/bench_recommend.py [--sizes 1000,10000,100000]

1. Cold start: `advisor recommend --model llama-3-8b --ctx 8192 --json` in a new process, against
   `python -c "import pydantic, typer"` on the same machine (median of 5 each).
2. Scaling: rank() over synthetic catalogs of N instance offers (the bundled instances copied with
   new names and jittered prices), time and peak traced memory per size.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
import tracemalloc


def _median_run(cmd: list[str], n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()

    import advisor
    from advisor.core.ranking import Constraints, Request, rank

    result: dict[str, object] = {}
    exe = shutil.which("advisor")
    if exe:
        base = _median_run([sys.executable, "-c", "import pydantic, typer"])
        rec = _median_run([exe, "recommend", "--model", "llama-3-8b", "--ctx", "8192", "--json"])
        result["cold_start"] = {"import_pydantic_typer_s": round(base, 3),
                                "advisor_recommend_s": round(rec, 3),
                                "ratio": round(rec / base, 2)}
    cat = advisor.load_catalog()
    spec = advisor.model_spec("llama-3-8b", catalog=cat)
    req = Request(ctx=8192, input_len=1024, output_len=256)
    cons = Constraints()
    eng = advisor.engine_profile()
    base_instances = list(cat.instances.values())
    rng = random.Random(7)
    scaling = []
    for n in (int(x) for x in args.sizes.split(",")):
        offers = []
        for i in range(n):
            src = base_instances[i % len(base_instances)]
            price = src.price
            if price.on_demand_usd_per_hour is not None:
                price = price.model_copy(update={
                    "on_demand_usd_per_hour": price.on_demand_usd_per_hour
                    * rng.uniform(0.8, 1.2)})
            offers.append(src.model_copy(update={"name": f"{src.name}-{i}", "price": price}))
        # time without tracemalloc (it slows pydantic's allocations several-fold), then the
        # memory in a second, traced run
        t0 = time.perf_counter()
        recs, rejected = rank(cat, spec, req, cons, eng, instances=offers)
        elapsed = time.perf_counter() - t0
        tracemalloc.start()
        rank(cat, spec, req, cons, eng, instances=offers)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        scaling.append({"offers": n, "seconds": round(elapsed, 3),
                        "us_per_offer": round(elapsed / n * 1e6, 1),
                        "peak_traced_mib": round(peak / 2**20, 1), "ranked": len(recs)})
    result["scaling"] = scaling
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
