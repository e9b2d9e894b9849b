"""The step model's composed kernel times against the measured rows they were composed from.

    pip install pyarrow   # calibration-time only, never on advisor's runtime path
    python benchmarks/perf/composition.py --aic /var/tmp/aic [--write]

``kernel_curves.json`` reduces aiconfigurator's kernel tables to bins; ``stepmodel`` composes
a kernel's time from those bins (a GEMM: the longer of its bytes over the decode curve and its
FLOPs over the prefill curve; a fused MoE: its touched experts' bytes and routed FLOPs). This
script runs those same functions (``stepmodel.gemm_s``, ``fused_moe_s``, ``decode_attention_s``,
``context_attention_s``, ``Kernels.allreduce_s``) at the exact
shape of every row of the tables each curve names, and reports the error per GPU, dtype and
token band (median signed and median |error| of log(composed / measured)). It checks the
composition, not the end-to-end model: a bug of the kind issue 28's item 8 fixed (a prefill
GEMM charged 3-11x its measured time) shows here at once, while ``run.py`` only sees it blurred
through whole serving runs. MoE rows: balanced routing (every touched expert distinct, EP 1),
the distribution the decode_moe curve is built from.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from kernel_curves import KV_BYTES, MIB, MOE_WEIGHT_BYTES, WEIGHT_BYTES, _read, moe_source_kept

from advisor.catalog import load
from advisor.core import stepmodel

HERE = Path(__file__).resolve().parent
SYSTEMS_REL = "aic-core/src/aiconfigurator_core/systems/"
#: the dense curve a MoE table dtype's experts run on (stepmodel.dtypes: weight-only int4 on
#: the bf16 curve)
EXPERT_CURVE = {"bfloat16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8_block",
                "nvfp4": "nvfp4", "int4_wo": "bfloat16", "w4a16_mxfp4": "bfloat16"}
#: the size bands of each kernel's report lines: (label, upper bound), in report order
M_BANDS = (("m <= 16", 16), ("m 32-256", 256), ("m >= 512", math.inf))
KV_BANDS = (("KV < 16 MiB", 16 * MIB - 1), ("KV 16-256 MiB", 256 * MIB - 1),
            ("KV >= 256 MiB", math.inf))
PROMPT_BANDS = (("prompt 512-2k", 2047), ("prompt 2k-8k", 8191), ("prompt >= 8k", math.inf))
AR_BANDS = (("< 1 MiB", MIB - 1), ("1-16 MiB", 16 * MIB - 1), (">= 16 MiB", math.inf))
BAND_ORDER = [label for bands in (M_BANDS, KV_BANDS, PROMPT_BANDS, AR_BANDS)
              for label, _ in bands]


def _band(value: float, bands: tuple[tuple[str, float], ...]) -> str:
    return next(label for label, top in bands if value <= top)


def _rows(aic: Path, rel: str, columns: list[str]) -> list[dict[str, Any]]:
    """The table's rows with a measured latency, as dicts (kernel_curves._read: older
    attention tables get window_size 0)."""
    data = _read(aic / rel, columns)
    rows = [dict(zip(columns, vals, strict=True)) for vals in zip(*(data[c] for c in columns),
                                                                  strict=True)]
    return [r for r in rows if r["latency"] and r["latency"] > 0]


def _paths(entry: dict[str, Any]) -> list[str]:
    return [t["path"] for t in entry.get("tables", [])]


def check(aic: Path) -> dict[tuple[str, str, str, str], list[float]]:
    """(GPU, kernel, dtype, band) -> log(composed / measured) of every row."""
    cat = load()
    curves = stepmodel.curves()["gpus"]
    errs: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)

    def add(key: tuple[str, str, str, str], composed_s: float, latency_ms: float) -> None:
        errs[key].append(math.log(composed_s / (latency_ms * 1e-3)))

    for gpu_id, data in sorted(curves.items()):
        if gpu_id not in cat.gpus or stepmodel.curve_source(cat.gpus[gpu_id]) != gpu_id:
            continue
        k = stepmodel.kernels(cat.gpus[gpu_id])
        for dt, entry in sorted(data.get("prefill_gemm", {}).items()):
            if dt not in WEIGHT_BYTES or dt not in k.peaks:
                continue
            for rel in _paths(entry):
                for r in _rows(aic, rel, ["gemm_dtype", "m", "n", "k", "latency"]):
                    if r["gemm_dtype"] == dt and min(r["n"], r["k"]) >= 256:
                        add((gpu_id, "GEMM", dt, _band(r["m"], M_BANDS)),
                            stepmodel.gemm_s(k, dt, WEIGHT_BYTES[dt], r["n"], r["k"], r["m"]),
                            r["latency"])
        for dt, entry in sorted((data.get("decode_moe") or {}).items()):
            if dt not in EXPERT_CURVE or dt not in stepmodel.MOE_MEASURED:
                continue
            if dt == "w4a16_mxfp4" and "nvfp4" in k.decode_gemm:
                continue  # FP4 tensor cores: stepmodel.dtypes keeps gpt-oss on the dense rule
            cols = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk",
                    "num_experts", "moe_tp_size", "moe_ep_size", "distribution", "latency",
                    "kernel_source"]
            wb = MOE_WEIGHT_BYTES[dt]
            dts = stepmodel.Dtypes(EXPERT_CURVE[dt], wb, EXPERT_CURVE[dt], wb, dt)
            for rel in _paths(entry):
                for r in _rows(aic, rel, cols):
                    if (r["moe_dtype"] != dt or r["distribution"] != "balanced"
                            or r["moe_ep_size"] != 1
                            or not moe_source_kept(dt, r["kernel_source"])):
                        continue
                    m, e = r["num_tokens"], r["num_experts"]
                    add((gpu_id, "fused MoE", dt, _band(m, M_BANDS)),
                        stepmodel.fused_moe_s(k, dts, e, r["topk"],
                                              r["inter_size"] / r["moe_tp_size"],
                                              r["hidden_size"], m, min(e, m * r["topk"])),
                        r["latency"])
        for kd, entry in sorted(data.get("decode_attention", {}).items()):
            cols = ["batch_size", "num_key_value_heads", "head_dim", "kv_cache_dtype", "step",
                    "window_size", "latency"]
            for rel in _paths(entry):
                for r in _rows(aic, rel, cols):
                    if r["kv_cache_dtype"] != kd or r["window_size"]:
                        continue
                    hist = r["step"] + 1
                    nbytes = (r["batch_size"] * hist * r["num_key_value_heads"] * r["head_dim"]
                              * 2 * KV_BYTES[kd])
                    add((gpu_id, "decode attention", kd, _band(nbytes, KV_BANDS)),
                        stepmodel.decode_attention_s(k, kd, hist, nbytes), r["latency"])
        for kd, entry in sorted(data.get("context_attention", {}).items()):
            cols = ["batch_size", "isl", "num_heads", "head_dim", "kv_cache_dtype",
                    "window_size", "latency"]
            for rel in _paths(entry):
                for r in _rows(aic, rel, cols):
                    if r["kv_cache_dtype"] != kd or r["window_size"] or r["isl"] < 512:
                        continue
                    isl = r["isl"]
                    add((gpu_id, "context attention", kd, _band(isl, PROMPT_BANDS)),
                        stepmodel.context_attention_s(k, kd, r["num_heads"] * r["head_dim"],
                                                      isl, r["batch_size"] * isl),
                        r["latency"])
        for rel in _paths(data.get("allreduce_graph") or {}):
            for r in _rows(aic, rel, ["num_gpus", "message_size", "latency", "backend"]):
                if r["backend"] == "vllm_graph":
                    nbytes = 2 * r["message_size"]  # the table counts bf16 elements
                    add((gpu_id, f"all-reduce TP {r['num_gpus']}", "bfloat16",
                         _band(nbytes, AR_BANDS)),
                        k.allreduce_s(r["num_gpus"], nbytes), r["latency"])
    return errs


def markdown(errs: dict[tuple[str, str, str, str], list[float]]) -> str:
    def pct(x: float) -> str:
        return f"{(math.exp(x) - 1) * 100:+.1f}%"

    lines = ["| GPU | kernel | dtype | tokens | rows | signed median | median abs |",
             "|---|---|---|---|---|---|---|"]
    order = {name: i for i, name in enumerate(BAND_ORDER)}
    for key in sorted(errs, key=lambda x: (x[0], x[1], x[2], order[x[3]])):
        xs = errs[key]
        mid = statistics.median(xs)
        size = statistics.median(abs(x) for x in xs)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {len(xs)} | {pct(mid)} | "
                     f"{(math.exp(size) - 1) * 100:.1f}% |")
    return "\n".join(lines) + "\n"


HEADER = """# Composed kernel times against the tables they come from

Generated by `python benchmarks/perf/composition.py --aic /var/tmp/aic --write` (pyarrow
needed at calibration time only; the tables as in `KERNELS.md`, aiconfigurator @ 095f58a5).
Each row of the tables a curve names in `kernel_curves.json`, at its exact shape, through the
step model's own functions (`gemm_s`, `fused_moe_s`, `decode_attention_s`,
`context_attention_s`, `Kernels.allreduce_s`): error = composed / measured - 1. This checks the
composition against the data it was built from (not a held-out check: `RESULTS.md` is that).
Block-scaled fp8 GEMMs are charged no worse than per-tensor fp8 by choice (`KERNELS.md`,
the fp8_block tables disagree by release), so their large negative errors are that choice.

"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic", type=Path, required=True,
                        help="the extracted aiconfigurator tree (KERNELS.md, Regenerate)")
    parser.add_argument("--write", action="store_true", help="rewrite COMPOSITION.md")
    args = parser.parse_args(argv)
    if not (args.aic / SYSTEMS_REL).is_dir():
        print(f"error: {args.aic / SYSTEMS_REL} is not a directory (see KERNELS.md, "
              "Regenerate)", file=sys.stderr)
        return 2
    text = markdown(check(args.aic))
    if args.write:
        (HERE / "COMPOSITION.md").write_text(HEADER + text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
