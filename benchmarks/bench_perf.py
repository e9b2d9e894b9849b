"""How long one perf estimate takes: every catalog model on every catalog GPU, three workloads.

    python benchmarks/bench_perf.py [--repeat N]

Prints one JSON object: estimates per second of the pure core (the step model of issue 28, with
its kernel curves already loaded), the microseconds per estimate (median of the repeats and the
slowest single estimate), and the one-off cost of reading kernel_curves.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import advisor
    from advisor.core import stepmodel
    from advisor.core.perf import Workload, estimate
    from advisor.core.sizing import FitRequest, fit

    t0 = time.perf_counter()
    stepmodel.curves()
    load_ms = (time.perf_counter() - t0) * 1000
    cat = advisor.load_catalog()
    eng = advisor.engine_profile()
    loads = [Workload(input_len=1024, output_len=256, concurrency=1),
             Workload(input_len=1024, output_len=1024, concurrency=32),
             Workload(input_len=8192, output_len=1024, concurrency=128, num_prompts=1280)]
    cases = []
    for alias in sorted(cat.models):
        spec = advisor.spec_from_config(cat.model_configs[alias], alias)
        for g in cat.gpus.values():
            f = fit(spec, FitRequest(gpu_memory_gib=g.memory_gib, gpu_name=g.name,
                                     max_model_len=min(16384, spec.max_position_embeddings
                                                       or 16384)), eng)
            if f.fits:
                cases += [(spec, g, f, w) for w in loads]
    for spec, g, f, w in cases:  # warm: per-GPU curves and per-spec shapes are cached
        estimate(spec, g, f, w)
    runs, slowest = [], 0.0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for spec, g, f, w in cases:
            t1 = time.perf_counter()
            estimate(spec, g, f, w)
            slowest = max(slowest, time.perf_counter() - t1)
        runs.append(time.perf_counter() - t0)
    best = statistics.median(runs)
    print(json.dumps({"estimates": len(cases), "median_s": round(best, 4),
                      "us_per_estimate": round(best / len(cases) * 1e6, 1),
                      "slowest_estimate_us": round(slowest * 1e6, 1),
                      "kernel_curves_load_ms": round(load_ms, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
