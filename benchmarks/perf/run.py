"""advisor's perf model beside published serving measurements.

    python benchmarks/perf/run.py

Prints each measurement beside the prediction with the relative error, then median and worst.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

import advisor
from advisor.core.perf import Workload, estimate
from advisor.core.sizing import FitRequest, fit

HERE = Path(__file__).resolve().parent


def evaluate() -> list[dict[str, Any]]:
    cat = advisor.load_catalog()
    rows = []
    for m in yaml.safe_load((HERE / "measurements.yaml").read_text())["measurements"]:
        spec = advisor.spec_from_config(cat.model_configs[m["model"]], m["model"])
        gpu = cat.gpus[m["gpu"]]
        f = fit(spec, FitRequest(gpu_memory_gib=gpu.memory_gib, gpu_name=gpu.name, tp=m["tp"],
                                 max_model_len=min(32768, spec.max_position_embeddings or 32768)),
                advisor.engine_profile())
        e = estimate(spec, gpu, f, Workload(input_len=m["input_len"], output_len=m["output_len"],
                                            concurrency=m["concurrency"]))
        row = {**m, "pred_ttft_ms": e.ttft_ms, "pred_tpot_ms": e.tpot_ms}
        for k in ("ttft_ms", "tpot_ms"):
            if k in m:
                row[f"err_{k}"] = (row[f"pred_{k}"] - m[k]) / m[k] * 100
        rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, tuple[int, float, float]]:
    out = {}
    for k in ("ttft_ms", "tpot_ms"):
        errs = [abs(r[f"err_{k}"]) for r in rows if f"err_{k}" in r]
        out[k] = (len(errs), round(statistics.median(errs), 1), round(max(errs), 1))
    return out


def main() -> int:
    rows = evaluate()
    print("| model | GPU | TP | in/out | conc | TTFT ms (pred / meas) | TPOT ms (pred / meas) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['gpu']} | {r['tp']} | {r['input_len']}/{r['output_len']} | "
              f"{r['concurrency']} | {r['pred_ttft_ms']:.1f} / {r['ttft_ms']} "
              f"({r['err_ttft_ms']:+.1f}%) | {r['pred_tpot_ms']:.1f} / {r['tpot_ms']} "
              f"({r['err_tpot_ms']:+.1f}%) |")
    print()
    for k, (n, med, worst) in summary(rows).items():
        print(f"{k}: n={n} median abs error {med}% worst {worst}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
