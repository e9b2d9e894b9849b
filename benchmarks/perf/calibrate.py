"""The shipped perf model on public_runs.yaml, per split (issue 16's report set; issue 28 keeps it
as a second report set beside benchmarks/perf/run.py's silicon rows).

    python benchmarks/perf/calibrate.py                 # the shipped model, per split
    python benchmarks/perf/calibrate.py --results benchmarks/perf/RESULTS-public.md

Nothing is fitted here any more: since issue 28 the model's one fitted number, the per-step
constant per GPU family x release band, is fitted by ``benchmarks/perf/run.py --fit`` on the
silicon fit split, and none of these rows is used to fit anything.

Rows modelled: a fixed client concurrency (``concurrency``), and a burst (``request_rate: .inf``,
``num_prompts`` N: the replica runs min(N, what fits) at once, and a request waits on average
(N / running - 1) / 2 of the running ones' end-to-end time before its prefill). Rows at a finite
Poisson rate, with ``enforce_eager`` or with multi-step scheduling are listed and skipped: the
model has no term for them.
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
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 10x faster on this file
    return list(yaml.load((HERE / "public_runs.yaml").read_text(), Loader=loader))  # noqa: S506


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


def predict(r: dict[str, Any], cat: Any, params: dict[str, Any]) -> dict[str, float]:
    """TPOT, TTFT and output tokens/s of one row with the shipped model (``params`` is only
    recorded: see the module's docstring)."""
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
    held = max(1, min(f.max_num_seqs, f.kv_cache_tokens // (r["input_len"] + r["output_len"])))
    run = min(c, held)
    e = estimate(spec, gpu, f, Workload(input_len=max(1, r["input_len"]),
                                        output_len=max(1, r["output_len"]), concurrency=run))
    ttft = e.ttft_ms
    if r.get("concurrency") is None and n > run:  # a burst: waves of `run` requests
        ttft += e.e2e_latency_ms * (n / run - 1) / 2
    return {"tpot": e.itl_median_ms if median_itl(r) and e.itl_median_ms else e.tpot_ms,
            "ttft": ttft, "output_tps": e.output_tokens_per_s}


def median_itl(r: dict[str, Any]) -> bool:
    """The row's per-token figure is a median inter-token latency (no TPOT given), compared
    with the model's median ITL (the step most tokens see), not its mean TPOT: under a 20k-token
    prompt every 2k output tokens the steps that carry a prompt chunk are ~4% of all steps and
    fall outside a median, while the mean counts them (dstack's MI300X rows in this file print
    both: median TPOT 418 ms, median ITL 221 ms)."""
    return r.get("tpot_ms") is None and r.get("itl_ms") is not None and r.get("stat") == "median"


def measured(r: dict[str, Any]) -> dict[str, float]:
    out = {}
    # a median ITL where no TPOT is given (predicted as one: see median_itl)
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


def initial() -> dict[str, Any]:
    """The shipped per-step constants (printed with the table)."""
    return {"step_constant_s": {f"{fam}/{band}": v
                                for (fam, band), v in perf.STEP_CONSTANT_S.items()}}


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
    fp8 = (r.get("quantization") or "").startswith("fp8") or r.get("quantization") == "modelopt"
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
    ap.add_argument("--results", type=Path, help="write the tables and every row to this file")
    args = ap.parse_args(argv)
    cat = advisor.load_catalog()
    params = initial()
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
                "benchmarks/perf/RESULTS-public.md` (the shipped model; nothing here is "
                "fitted).", "",
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
