"""advisor's sizing beside what real vLLM startup logs printed.

    python benchmarks/accuracy/run.py [--markdown] [--json]

For every log in logs.yaml it predicts, from the model's config.json and the launch settings:
  * weights per GPU                      vs "Model loading took X GiB"
  * KV tokens from the logged KV memory  vs "GPU KV cache size: N tokens"  (block arithmetic)
  * max concurrency from those blocks    vs "Maximum concurrency for L tokens per request"
  * the whole fit (KV tokens, or that nothing fits) where the log gives the GPU's total memory
and prints each beside the logged figure with the relative error, then the median and worst
errors, overall and for the issue's target set (vLLM >= 0.10, GPUs of 40 GB or more).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from advisor import load_catalog
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
)
from advisor.errors import UserInputError

HERE = Path(__file__).resolve().parent


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
    act_b = DTYPE_BYTES[resolve_dtype(spec, "auto")]
    gpu = cat.gpus.get(entry.get("gpu", "")) if entry.get("gpu") else None
    mem = entry.get("gpu_memory_gib")
    if mem is None and gpu is not None:
        mem = gpu.usable_memory_mib / 1024 if gpu.usable_memory_mib else gpu.memory_gib
    max_len = entry.get("max_model_len") or spec.max_position_embeddings or 4096
    batched, _ = engine.batch_defaults(mem or 80, gpu.name if gpu else "", "server")
    batched = entry.get("max_num_batched_tokens") or batched
    out: dict[str, Any] = {"id": entry["id"], "model": spec.name, "tp": tp, "vllm": version,
                           "gpu_gib": mem, "source": entry["source"], "checks": {}}
    checks = out["checks"]
    if "weights_gib" in logged:
        w = weights_per_gpu(spec, tp, pp, act_b)[0] / GIB
        checks["weights_gib"] = (round(w, 3), logged["weights_gib"], _err(w, logged["weights_gib"]))
    layers = list(stage_layers(spec.num_layers, pp)[0])
    per_layer = kv_bytes_per_token_per_layer(spec, tp, act_b)
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
                max_model_len=max_len, gpu_memory_utilization=entry["util"],
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


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for scope, keep in (("all", lambda r: True), ("target", lambda r: r["target_set"])):
        for check in ("weights_gib", "kv_tokens_from_logged_memory", "kv_tokens_full_fit",
                      "concurrency"):
            errs = [abs(r["checks"][check][2]) for r in rows if keep(r) and check in r["checks"]]
            if errs:
                summary[f"{scope}/{check}"] = {"n": len(errs),
                                               "median_pct": round(statistics.median(errs), 2),
                                               "worst_pct": round(max(errs), 2)}
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cat = load_catalog()
    entries = yaml.safe_load((HERE / "logs.yaml").read_text())["logs"]
    rows = [evaluate(e, cat) for e in entries]
    summary = summarize(rows)
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=2, default=str))
        return 0
    print("| log | model | TP | vLLM | check | advisor | logged | error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for check, (pred, real, err) in r["checks"].items():
            err_s = ("ok" if err == 0 else "WRONG") if check == "fits" else f"{err:+.2f}%"
            print(f"| {r['id']} | {r['model']} | {r['tp']} | {r['vllm']} | {check} | {pred} | "
                  f"{real} | {err_s} |")
    print()
    print("| scope / check | n | median abs error | worst |")
    print("|---|---|---|---|")
    for key, s in summary.items():
        print(f"| {key} | {s['n']} | {s['median_pct']}% | {s['worst_pct']}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
