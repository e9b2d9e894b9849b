"""advisor's sizing beside what real vLLM startup logs printed.

    python benchmarks/accuracy/run.py [--json | --write]

For every log in logs.yaml it predicts, from the model's config.json and the launch settings:
  * weights per GPU                      vs "Model loading took X GiB"
  * KV tokens from the logged KV memory  vs "GPU KV cache size: N tokens"  (block arithmetic)
  * max concurrency from those blocks    vs "Maximum concurrency for L tokens per request"
  * the whole fit (KV tokens, or that nothing fits) where the log gives the GPU's total memory
and prints each beside the logged figure with the relative error, then the median, p90
(nearest rank) and worst errors, overall, for the issue's target set (vLLM >= 0.10, GPUs of
40 GB or more) and held out (the logs no constant was read or fitted on: an entry's
``fitted`` says what was taken from it).

``--write`` rewrites RESULTS.md and the ``memory`` section of src/advisor/core/accuracy.json,
the summary per GPU family that advisor quotes as the confidence of a fit
(advisor.core.confidence); the other sections of that file are kept.
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

from advisor import load_catalog
from advisor.core import confidence
from advisor.core.engine import GIB, parse_version, profile
from advisor.core.model import DTYPE_BYTES, spec_from_config
from advisor.core.sizing import (
    FitRequest,
    fit,
    kv_bytes_per_token_per_layer,
    kv_capacity,
    resolve_dtype,
    stage_layers,
    weights_per_gpu,
    with_linear_block,
)
from advisor.errors import UserInputError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ACCURACY_JSON = ROOT / "src" / "advisor" / "core" / confidence.ACCURACY_FILE
#: the checks whose error is a fit's headline (per log: the worst of those it has)
KV_CHECKS = ("kv_tokens_full_fit", "kv_tokens_from_logged_memory", "concurrency")


def _spec(entry: dict[str, Any], cat: Any) -> Any:
    ref = entry["model"]
    if ref.startswith("configs/"):
        cfg = json.loads((HERE / ref).read_text())
    else:
        cfg = dict(cat.model_configs[ref])
    if entry.get("max_position_embeddings"):
        cfg["max_position_embeddings"] = entry["max_position_embeddings"]
    name = Path(ref).stem if ref.startswith("configs/") else ref
    return spec_from_config(cfg, name, quantization=entry.get("quantization"))


def _err(pred: float, real: float) -> float:
    return (pred - real) / real * 100


def evaluate(entry: dict[str, Any], cat: Any) -> dict[str, Any]:
    spec = _spec(entry, cat)
    logged = entry["logged"]
    tp, pp = entry.get("tp", 1), entry.get("pp", 1)
    version = entry.get("vllm", "0.11.0")
    engine = profile(version if parse_version(version) >= (0, 7, 0) else "0.8.0")
    dtype = entry.get("dtype", "auto")
    kv_dtype = entry.get("kv_cache_dtype", "auto")
    act_b = DTYPE_BYTES[resolve_dtype(spec, dtype)]
    kv_b = 1.0 if kv_dtype.startswith("fp8") else act_b
    gpu = cat.gpus.get(entry.get("gpu", "")) if entry.get("gpu") else None
    mem = entry.get("gpu_memory_gib")
    if mem is None and gpu is not None:
        mem = gpu.cuda_memory_gib
    max_len = entry.get("max_model_len") or spec.max_position_embeddings or 4096
    batched, _ = engine.batch_defaults(mem or 80, gpu.name if gpu else "", "server")
    batched = entry.get("max_num_batched_tokens") or batched
    out: dict[str, Any] = {"id": entry["id"], "model": spec.name, "tp": tp, "vllm": version,
                           "gpu_gib": mem, "source": entry["source"], "checks": {},
                           "model_type": spec.model_type, "gpu": gpu.id if gpu else None,
                           "architecture": gpu.architecture if gpu else None,
                           "fitted": bool(entry.get("fitted"))}
    checks = out["checks"]
    if "weights_gib" in logged:
        w = weights_per_gpu(spec, tp, pp, act_b)[0] / GIB
        checks["weights_gib"] = (round(w, 3), logged["weights_gib"], _err(w, logged["weights_gib"]))
    layers = list(stage_layers(spec.num_layers, pp)[0])
    per_layer = kv_bytes_per_token_per_layer(spec, tp, kv_b)
    engine = with_linear_block(spec, engine, tp, kv_b, act_b)  # as sizing.fit does
    if "kv_cache_gib" in logged:
        blocks, tokens, conc, _ = kv_capacity(spec, logged["kv_cache_gib"], layers, per_layer,
                                              engine, max_len, batched)
        if "kv_cache_tokens" in logged:
            checks["kv_tokens_from_logged_memory"] = (
                tokens, logged["kv_cache_tokens"], _err(tokens, logged["kv_cache_tokens"]))
        if "max_concurrency" in logged:
            checks["concurrency"] = (round(conc, 2), logged["max_concurrency"],
                                     _err(conc, logged["max_concurrency"]))
    elif "num_blocks" in logged and "max_concurrency" in logged:
        per_req = -(-max_len // engine.block_size)
        conc = logged["num_blocks"] / per_req
        checks["concurrency"] = (round(conc, 2), logged["max_concurrency"],
                                 _err(conc, logged["max_concurrency"]))
    if mem and entry.get("util"):
        try:
            res = fit(spec, FitRequest(
                gpu_memory_gib=mem, gpu_name=gpu.name if gpu else "", tp=tp, pp=pp,
                max_model_len=max_len, gpu_memory_utilization=entry["util"], dtype=dtype,
                kv_cache_dtype=kv_dtype,
                max_num_batched_tokens=entry.get("max_num_batched_tokens")), engine)
        except UserInputError as exc:  # pragma: no cover - a broken entry
            out["error"] = exc.message
            return out
        if "kv_cache_tokens" in logged:
            checks["kv_tokens_full_fit"] = (res.kv_cache_tokens, logged["kv_cache_tokens"],
                                            _err(res.kv_cache_tokens, logged["kv_cache_tokens"]))
        if "fits" in logged:
            wrong = 0.0 if res.fits == logged["fits"] else 100.0
            checks["fits"] = (res.fits, logged["fits"], wrong)
        out["predicted_activation_gib"] = res.activation_gib
    out["target_set"] = parse_version(version) >= (0, 10, 0) and (mem is None or mem >= 39)
    return out


def p90(errs: list[float]) -> float:
    """The 90th percentile by nearest rank: the ceil(0.9 n)-th smallest."""
    ranked = sorted(errs)
    return ranked[math.ceil(0.9 * len(ranked)) - 1]


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for scope, keep in (("all", lambda r: True), ("target", lambda r: r["target_set"]),
                        ("held-out", lambda r: not r["fitted"])):
        for check in ("weights_gib", "kv_tokens_from_logged_memory", "kv_tokens_full_fit",
                      "concurrency"):
            errs = [abs(r["checks"][check][2]) for r in rows if keep(r) and check in r["checks"]]
            if errs:
                summary[f"{scope}/{check}"] = {"n": len(errs),
                                               "median_pct": round(statistics.median(errs), 2),
                                               "p90_pct": round(p90(errs), 2),
                                               "worst_pct": round(max(errs), 2)}
    return summary


def confidence_sections(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``memory`` section of accuracy.json: per GPU family (the log's catalog GPU), the logs
    with a KV-token or concurrency check, each counted once at the worst of those checks; the
    weights check and the fit verdicts beside them. Logs that name no GPU are unattributed."""

    def runs(checks: tuple[str, ...]) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            errs = [abs(r["checks"][c][2]) for c in checks if c in r["checks"]]
            if errs:
                out.append({"error_pct": max(errs), "model_type": r["model_type"],
                            "vllm": r["vllm"], "gpu": r["gpu"],
                            "architecture": r["architecture"]})
        return out

    verdicts = [r["checks"]["fits"] for r in rows if "fits" in r["checks"]]
    return {"memory": {
        "regenerate": "python benchmarks/accuracy/run.py --write",
        "data": "benchmarks/accuracy/logs.yaml",
        "headline": "per log, the worst absolute % error of its " + ", ".join(KV_CHECKS)
                    + " checks",
        **confidence.summarize_runs(runs(KV_CHECKS)),
        "weights": confidence.summarize_runs(runs(("weights_gib",))),
        "fit_verdicts": {"n": len(verdicts),
                         "wrong": sum(1 for pred, real, _ in verdicts if pred != real)},
    }}


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any],
             sections: dict[str, Any]) -> str:
    lines = ["| log | model | TP | vLLM | check | advisor | logged | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for check, (pred, real, err) in r["checks"].items():
            err_s = ("ok" if err == 0 else "WRONG") if check == "fits" else f"{err:+.2f}%"
            lines.append(f"| {r['id']} | {r['model']} | {r['tp']} | {r['vllm']} | {check} | "
                         f"{pred} | {real} | {err_s} |")
    fitted = [r["id"] for r in rows if r["fitted"]]
    lines += ["", "Scopes: all logs; target (vLLM >= 0.10, GPUs of 40 GB or more); held-out: "
              f"without the {len(fitted)} logs a constant of the engine rules was read or fitted "
              "on (their `fitted` field in logs.yaml says which): " + ", ".join(fitted) + ". "
              "p90 is the nearest-rank 90th percentile.", "",
              "| scope / check | n | median abs error | p90 | worst |", "|---|---|---|---|---|"]
    for key, s in summary.items():
        lines.append(f"| {key} | {s['n']} | {s['median_pct']}% | {s['p90_pct']}% | "
                     f"{s['worst_pct']}% |")
    mem = sections["memory"]
    lines += ["", "Per GPU family (the confidence `advisor` quotes for a fit; "
              f"{mem['headline']}):", "",
              "| GPU family | GPUs | logs | median abs error | worst | model families | vLLM |",
              "|---|---|---|---|---|---|---|"]
    groups = [*mem["families"].items(), ("unattributed (GPU not named)", mem["unattributed"])]
    for fam, g in groups:
        if g:
            span = "-".join(dict.fromkeys([g["vllm_min"], g["vllm_max"]]))
            lines.append(f"| {fam} | {', '.join(g['gpus']) or '-'} | {g['n']} | "
                         f"{g['median_pct']}% | {g['worst_pct']}% | "
                         f"{', '.join(g['model_types'])} | {span} |")
    return "\n".join(lines) + "\n"


HEADER = """# Accuracy of advisor fit against public vLLM logs

Generated by `python benchmarks/accuracy/run.py --write` from `logs.yaml` (sources there); the
same command rewrites the `memory` section of `src/advisor/core/accuracy.json`, which advisor
quotes as the confidence of a fit (`tests/test_confidence.py` fails when it is stale).

What the memory model takes from where (each constant is in `src/advisor/core/engine.py` with its
source):

* derived from the model's config.json, nothing fitted: weights (vision towers from
  `vision_config`, rotary cos/sin caches from max_position_embeddings and rope scaling), KV bytes
  per token and block arithmetic, the profiling peak's width term (max_num_batched_tokens x
  hidden x dtype bytes);
* read off printed figures, nothing fitted: NCCL's buffers per TP size (aiconfigurator's
  `systems/*.yaml` `nccl_mem`: 342 MB at TP 2, 392 MB at TP 4/8), the TP 1 non-torch memory of
  each release (0.02 GiB in 0.10, 0.13 in 0.11-0.17, 0.25 from 0.18);
* fitted: the profiling peak's base (0.0525 GiB) and sampler bytes per sequence x vocabulary
  entry, 14.51 for vLLM 0.17+ (least squares on four 0.19 TP 1 logs), 38.06 for 0.7-0.16 (two
  0.11 logs), 10.83 for 0.21+ (one log); the all-reduce memory above NCCL's at TP > 1, 1.48 GiB
  for 0.19+ (two TP 2 logs) and 0.07 for earlier releases (one TP 1/TP 2 pair).

The logs any of these were read or fitted on carry a `fitted` field in logs.yaml and are left
out of the held-out scope below.

"""


def write(sections: dict[str, Any], results_md: str) -> None:
    existing = json.loads(ACCURACY_JSON.read_text()) if ACCURACY_JSON.exists() else None
    ACCURACY_JSON.write_text(confidence.dumps(confidence.merged(existing, sections)))
    (HERE / "RESULTS.md").write_text(HEADER + results_md)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", action="store_true",
                        help="rewrite RESULTS.md and the memory section of accuracy.json")
    args = parser.parse_args(argv)
    cat = load_catalog()
    entries = yaml.safe_load((HERE / "logs.yaml").read_text())["logs"]
    rows = [evaluate(e, cat) for e in entries]
    summary = summarize(rows)
    sections = confidence_sections(rows)
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary, **sections}, indent=2, default=str))
        return 0
    text = markdown(rows, summary, sections)
    if args.write:
        write(sections, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
