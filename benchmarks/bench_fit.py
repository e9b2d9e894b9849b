"""How long sizing takes: every catalog model on every catalog GPU, at three context lengths.

    python benchmarks/bench_fit.py [--repeat N]

Prints one JSON object: fits per second of the pure core, and the cold start of `advisor fit`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import advisor
    from advisor.core.sizing import FitRequest, fit

    cat = advisor.load_catalog()
    specs = [advisor.spec_from_config(cat.model_configs[a], a) for a in sorted(cat.models)]
    eng = advisor.engine_profile()
    cases = []
    for s in specs:
        for g in cat.gpus.values():
            for ctx in (2048, 8192, 32768):
                if ctx <= (s.max_position_embeddings or ctx):
                    cases.append((s, FitRequest(gpu_memory_gib=g.memory_gib, gpu_name=g.name,
                                                max_model_len=ctx)))
    runs = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for s, req in cases:
            fit(s, req, eng)
        runs.append(time.perf_counter() - t0)
    best = statistics.median(runs)
    result = {"fits": len(cases), "median_s": round(best, 4),
              "us_per_fit": round(best / len(cases) * 1e6, 1)}
    exe = shutil.which("advisor")
    if exe:
        t = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([exe, "fit", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--ctx", "8192",
                            "--json"], check=True, capture_output=True)
            t.append((time.perf_counter() - t0) * 1000)
        result["cli_cold_start_fit_ms"] = round(statistics.median(t), 1)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
