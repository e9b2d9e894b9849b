"""The perf model on public_runs.yaml, per split, and a fit of its constants on the fit split.

    python benchmarks/perf/calibrate.py                 # the shipped model, per split
    python benchmarks/perf/calibrate.py --results benchmarks/perf/RESULTS-public.md
    python benchmarks/perf/calibrate.py --fit           # refit on split=fit, print the result

The refitted constants are printed, not written: the loss uses the fit split's fixed-concurrency
rows only (bursts are reported, not fitted), three rows today, which move nothing; when rows are
added, adopt a result by editing STEP_OVERHEAD_BY_RELEASE / MEMORY_EFFICIENCY_BY_FAMILY in
src/advisor/core/perf.py with this command as the source.

What is fitted (issue 16, item 2), by coordinate descent over fixed grids (deterministic, pure
Python), minimising the median absolute log error of TPOT (or ITL) and output tokens/s over the
``split: fit`` rows at a fixed concurrency only:

* the per-step overhead of the engine from vLLM 0.11 (the earliest release with public runs
  here; 0.7-0.10 keep the constant fitted on measurements.yaml), and the saving of
  ``--async-scheduling`` where a run used it;
* the achieved share of HBM bandwidth in a decode step, per GPU family with fit rows.

Rows modelled: a fixed client concurrency (``concurrency``), and a burst (``request_rate: .inf``,
``num_prompts`` N: the replica runs min(N, what fits) at once, and a request waits on average
(N / running - 1) / 2 of the running ones' end-to-end time before its prefill). Rows at a finite
Poisson rate, with ``enforce_eager`` or with multi-step scheduling are listed and skipped: the
model has no term for them. Nothing in ``split: report`` is read by ``--fit``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

import advisor
from advisor.catalog.schema import Gpu
from advisor.core import perf
from advisor.core.engine import parse_version, profile
from advisor.core.perf import Workload, estimate
from advisor.core.sizing import FitRequest, fit, max_len_limit

HERE = Path(__file__).resolve().parent
METRICS = ("tpot", "ttft", "output_tps")


def rows() -> list[dict[str, Any]]:
    return list(yaml.safe_load((HERE / "public_runs.yaml").read_text()))


def skipped(r: dict[str, Any]) -> str | None:
    if parse_version(r["vllm"]) < (0, 7, 0):
        return "vLLM < 0.7: the V0 engine, which advisor does not model (profile() refuses it)"
    if r.get("enforce_eager"):
        return "enforce_eager: no CUDA graphs, a step cost the model does not have"
    if r.get("num_scheduler_steps"):
        return "multi-step scheduling (vLLM 0.6): not modelled"
    if r.get("concurrency") is None and r.get("request_rate") not in (float("inf"),):
        return "a finite Poisson arrival rate: the model has no open-loop queue"
    if (r.get("pp") or 1) > 1:
        return "pipeline parallel: not in this set's model"
    return None


def _era(version: str) -> str:
    """The overhead era: "v1" (0.7-0.10, the constant fitted on measurements.yaml) and "v1.11"
    (0.11 and later, the earliest release with public runs here)."""
    return "v1" if parse_version(version) < (0, 11, 0) else "v1.11"


def predict(r: dict[str, Any], cat: Any, params: dict[str, Any]) -> dict[str, float]:
    """TPOT, TTFT and output tokens/s of one row under ``params`` (the constants to try)."""
    spec = advisor.spec_from_config(cat.model_configs[r["model"]], r["model"],
                                    quantization=r.get("quantization"))
    gpu: Gpu = cat.gpus[r["gpu"]]
    version = r["vllm"] if parse_version(r["vllm"]) >= (0, 7, 0) else "0.7.0"
    limit = max_len_limit(spec) or 32768
    ctx = min(limit, max(32768, r["input_len"] + r["output_len"]))
    f = fit(spec, FitRequest(gpu_memory_gib=gpu.cuda_memory_gib, gpu_name=gpu.name, tp=r["tp"],
                             max_model_len=ctx,
                             kv_cache_dtype="fp8" if r.get("kv_cache_dtype") == "fp8"
                             else "auto"), profile(version))
    n = r.get("num_prompts") or 1
    c = r["concurrency"] if r.get("concurrency") is not None else n
    overhead = params["step_overhead_s"][_era(r["vllm"])]
    if r.get("async_scheduling"):
        overhead *= 1 - params["async_saving"]
    eff = params["memory_efficiency"].get((gpu.architecture or "").lower(),
                                          params["memory_efficiency"]["default"])
    saved = (perf.step_overhead_s, perf.memory_efficiency)
    try:
        perf.step_overhead_s = lambda _v: overhead  # type: ignore[assignment]
        perf.memory_efficiency = lambda _g: eff  # type: ignore[assignment]
        held = max(1, min(f.max_num_seqs, f.kv_cache_tokens // (r["input_len"] + r["output_len"])))
        run = min(c, held)
        e = estimate(spec, gpu, f, Workload(input_len=max(1, r["input_len"]),
                                            output_len=max(1, r["output_len"]),
                                            concurrency=run))
    finally:
        perf.step_overhead_s, perf.memory_efficiency = saved  # type: ignore[assignment]
    ttft = e.ttft_ms
    if r.get("concurrency") is None and n > run:  # a burst: waves of `run` requests
        ttft += e.e2e_latency_ms * (n / run - 1) / 2
    return {"tpot": e.tpot_ms, "ttft": ttft, "output_tps": e.output_tokens_per_s}


def measured(r: dict[str, Any]) -> dict[str, float]:
    out = {}
    tpot = r.get("tpot_ms") if r.get("tpot_ms") is not None else r.get("itl_ms")
    if tpot:
        out["tpot"] = float(tpot)
    if r.get("ttft_ms"):
        out["ttft"] = float(r["ttft_ms"])
    if r.get("output_tps") and r.get("concurrency") is not None:
        out["output_tps"] = float(r["output_tps"])  # a burst's figure includes its drain
    return out


def errors(params: dict[str, Any], split: str | None, cat: Any) -> list[dict[str, Any]]:
    out = []
    for r in rows():
        if (split and r["split"] != split) or skipped(r):
            continue
        meas = measured(r)
        pred = predict(r, cat, params)
        for k, v in meas.items():
            out.append({"id": r["id"], "metric": k, "gpu": r["gpu"], "vllm": r["vllm"],
                        "split": r["split"], "pred": pred[k], "meas": v,
                        "err_pct": (pred[k] - v) / v * 100})
    return out


def steady(r: dict[str, Any]) -> bool:
    """A fixed client concurrency: what advisor's estimates are (a burst is reported, not
    fitted — the model has no term for the admission waves of hundreds of requests at once)."""
    return r.get("concurrency") is not None


def loss(params: dict[str, Any], cat: Any) -> float:
    keep = {r["id"] for r in rows() if steady(r)}
    errs = [abs(math.log(e["pred"] / e["meas"])) for e in errors(params, "fit", cat)
            if e["metric"] in ("tpot", "output_tps") and e["id"] in keep]
    return statistics.median(errs)


def initial() -> dict[str, Any]:
    """The shipped constants, in the form --fit varies them."""
    return {"step_overhead_s": {"v1": perf.step_overhead_s("0.7.0"),
                                "v1.11": perf.step_overhead_s("0.11.0")},
            "async_saving": 0.0,
            "memory_efficiency": {"default": perf.MEMORY_EFFICIENCY,
                                  **perf.MEMORY_EFFICIENCY_BY_FAMILY}}


def fit_params(cat: Any) -> dict[str, Any]:
    params = initial()
    fams = sorted({(cat.gpus[r["gpu"]].architecture or "").lower() for r in rows()
                   if r["split"] == "fit" and not skipped(r) and steady(r)})
    for fam in fams:
        params["memory_efficiency"][fam] = perf.MEMORY_EFFICIENCY
    grids: list[tuple[tuple[str, ...], list[float]]] = [
        (("step_overhead_s", "v1.11"), [x / 10000 for x in range(0, 41, 1)]),
        (("async_saving",), [x / 20 for x in range(0, 13)]),
        *[(("memory_efficiency", fam), [x / 100 for x in range(50, 101, 2)]) for fam in fams],
    ]
    best = loss(params, cat)
    for _ in range(3):  # coordinate descent, three sweeps
        for path, grid in grids:
            for v in grid:
                trial = json.loads(json.dumps(params))
                node = trial
                for k in path[:-1]:
                    node = node[k]
                node[path[-1]] = v
                value = loss(trial, cat)
                if value < best - 1e-12:
                    best, params = value, trial
    params["fit_loss_median_abs_log"] = round(best, 5)
    return params


def prefill_demand(r: dict[str, Any], cat: Any) -> float | None:
    """The share of the GPUs' *achievable* tensor throughput (datasheet peak in the row's
    precision x perf.COMPUTE_EFFICIENCY) that the row's closed loop must spend on prefill alone,
    from its own figures: requests finish at C / (TTFT + (output - 1) x TPOT) a second (Little's
    law), each brings input_len tokens of 2 x active-parameter FLOPs. Above 1.0 no closed loop
    on that hardware can show that TPOT with every prefill in-band (vLLM's chunked prefill puts
    each prompt into the running batch's steps), whatever the decode costs: the run measured
    something else (prefix-cache hits, one wave whose prefills all ran before decoding, TPOT
    taken apart from TTFT...) that the row's source does not state. None without both figures."""
    if r.get("concurrency") is None or not r.get("ttft_ms") or not r.get("tpot_ms"):
        return None
    spec = advisor.spec_from_config(cat.model_configs[r["model"]], r["model"],
                                    quantization=r.get("quantization"))
    gpu: Gpu = cat.gpus[r["gpu"]]
    fp8 = (r.get("quantization") or "").startswith("fp8")
    peak = (gpu.fp8_tflops if fp8 and gpu.fp8_tflops else gpu.bf16_tflops or 0) * 1e12
    life_s = (r["ttft_ms"] + (r["output_len"] - 1) * r["tpot_ms"]) / 1000
    per_s = r["concurrency"] / life_s
    need = per_s * r["input_len"] * 2 * spec.param_counts()["active"]
    return need / (peak * r["tp"] * perf.COMPUTE_EFFICIENCY)


def demand_table(cat: Any) -> str:
    lines = ["| row | split | prefill FLOP/s the figures imply, share of achievable |",
             "|---|---|---|"]
    for r in rows():
        d = None if skipped(r) else prefill_demand(r, cat)
        if d is not None and d > 1.0:
            lines.append(f"| {r['id']} | {r['split']} | {d * 100:.0f}% |")
    return "\n".join(lines)


def table(errs: list[dict[str, Any]]) -> str:
    lines = ["| split | metric | n | median abs | p90 abs | worst | signed median |",
             "|---|---|---|---|---|---|---|"]
    for split in ("fit", "report"):
        for m in METRICS:
            e = sorted(abs(x["err_pct"]) for x in errs if x["split"] == split and x["metric"] == m)
            if not e:
                continue
            signed = statistics.median(x["err_pct"] for x in errs
                                       if x["split"] == split and x["metric"] == m)
            p90 = e[max(0, math.ceil(0.9 * len(e)) - 1)]
            lines.append(f"| {split} | {m} | {len(e)} | {statistics.median(e):.1f}% | "
                         f"{p90:.1f}% | {e[-1]:.1f}% | {signed:+.1f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--results", type=Path, help="write the tables and every row to this file")
    args = ap.parse_args(argv)
    cat = advisor.load_catalog()
    params = fit_params(cat) if args.fit else initial()
    errs = errors(params, None, cat)
    print(json.dumps(params, indent=1, sort_keys=True))
    print(table(errs))
    for r in rows():
        why = skipped(r)
        if why:
            print(f"skipped {r['id']}: {why}")
    if args.results:
        body = ["# The perf model on public_runs.yaml", "",
                "Generated by `python benchmarks/perf/calibrate.py --results "
                "benchmarks/perf/RESULTS-public.md` (the shipped constants"
                + (", refitted with --fit" if args.fit else "") + ").", "",
                table(errs), "", "| row | split | metric | predicted | measured | error |",
                "|---|---|---|---|---|---|"]
        body += [f"| {e['id']} | {e['split']} | {e['metric']} | {e['pred']:.1f} | "
                 f"{e['meas']:.1f} | {e['err_pct']:+.1f}% |" for e in errs]
        body += ["", "## Rows no closed loop can produce", "",
                 "Fixed-concurrency rows whose own TTFT and TPOT imply more prefill FLOP/s than "
                 "the GPUs can deliver (datasheet peak x COMPUTE_EFFICIENCY) with every prompt "
                 "prefilled inside the running batch (`prefill_demand` in this script): their "
                 "TPOT is a decode-only figure measured some way the source does not state. They "
                 "stay in the report split and in the table above; no model constant is tuned "
                 "to them.", "", demand_table(cat)]
        body += ["", "Skipped:", ""] + [f"- {r['id']}: {skipped(r)}" for r in rows()
                                         if skipped(r)]
        args.results.write_text("\n".join(body) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
