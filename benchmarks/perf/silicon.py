"""aiconfigurator's silicon_sample.csv -> benchmarks/perf/silicon_rows.json (issue 28, item 3).

    python benchmarks/perf/silicon.py --aic /var/tmp/aic            # write silicon_rows.json
    python benchmarks/perf/silicon.py --aic /var/tmp/aic --check    # exit 1 when it is stale

Reads the vLLM rows of ``aic-core/src/aiconfigurator_core/systems/silicon_sample.csv`` (standard
library csv: no pyarrow), classes them (stated protocol / NVIDIA-internal / other), assigns the
fit/report split and release band that ``benchmarks/perf/README.md`` fixed before any error was
looked at, groups repeats (median; a metric whose repeats disagree by more than 15% is dropped),
and writes the groups with the measured figures only: derived numbers with their source, never
the CSV. ``run.py`` predicts them with the shipped model (no CSV needed), so the published table
and accuracy.json can be checked in the normal test suite.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "silicon_rows.json"
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
CSV_PATH = "aic-core/src/aiconfigurator_core/systems/silicon_sample.csv"

#: aiconfigurator system -> catalog GPU id (gb200 is not in the catalog)
GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200", "b300_sxm": "B300"}
#: (model_path, precision) -> (config file under configs/, weight quantization the step model
#: uses). The configs are the models' own HF config.json files as aiconfigurator ships them
#: (model_configs/ at the same commit). fp8 MiniMax-M2.5 / Qwen3-235B-FP8 are block-scaled
#: (weight_block_size [128, 128] in their configs); the Llama fp8 checkpoints per-tensor
#: (nvidia/Llama-3.1-70B-Instruct-FP8's hf_quant_config: FP8, per-tensor); fp4 rows are NVFP4.
MODELS = {
    "meta-llama/Llama-3.1-70B": "meta-llama--Meta-Llama-3.1-70B",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama--Meta-Llama-3.1-8B",
    "openai/gpt-oss-120b": "openai--gpt-oss-120b",
    "MiniMaxAI/MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5",
    "moonshotai/Kimi-K2.5": "moonshotai--Kimi-K2.5",
    "Qwen/Qwen3-32B": "Qwen--Qwen3-32B",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen--Qwen3-235B-A22B-FP8",
}
BLOCK_FP8 = {"MiniMaxAI/MiniMax-M2.5", "Qwen/Qwen3-235B-A22B-FP8"}
FAMILY = {"meta-llama/Llama-3.1-70B": "llama-70b", "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-8b",
          "openai/gpt-oss-120b": "gpt-oss", "MiniMaxAI/MiniMax-M2.5": "minimax",
          "moonshotai/Kimi-K2.5": "kimi", "Qwen/Qwen3-32B": "qwen3-32b",
          "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b"}
#: the split of benchmarks/perf/README.md: (model family, GPU) pairs in fit; all else report
FIT = {("gpt-oss", "H100-SXM"), ("gpt-oss", "H200"), ("gpt-oss", "B200"),
       ("minimax", "B300")}
DISAGREE = 0.15
#: InferenceX's per-GPU server flags (the stated protocol), read off its launch scripts in
#: github.com/SemiAnalysisAI/InferenceX *as they stood on each row's run date* (the CSV's
#: ``measured=``): benchmarks/70b_fp8_{h100,h200}_slurm.sh and 70b_{fp8,fp4}_b200_docker.sh as
#: last present (parent of 2582bce4, 2025-10-29), benchmarks/gptoss_fp4_*.sh (2025-11-02,
#: 2025-12-08) and benchmarks/single_node/{gptoss_fp4,minimaxm2.5_*,kimik2.5_*}_*.sh (2026).
#: (family, GPU, precision) -> ((first run date a script version holds for, (kv-cache-dtype,
#: max-num-batched-tokens; -1 = 2 x ISL, None = not set: vLLM's default)), ...), oldest first.
#: Every script passes --max-num-seqs (the concurrency, or 512): no cap below the concurrency.
#: Until item 14 (benchmarks/perf/README.md) the 2026 flags were read off the newest scripts
#: (843c6254) for every date; where a script changed between the rows' dates:
#: - minimaxm2.5_fp8_h200.sh sets neither flag from a36346339 (2026-03-01) until 8014ee637
#:   (2026-05-26, after every row): fp8 KV and 32768 were the later recipe's;
#: - minimaxm2.5_fp8_b200.sh sets neither until bddbf4031 (2026-04-03, "B200 Minimax FP8 vllm
#:   upgrade", the v0.19.0 image's first run), fp8 KV and 2 x ISL from then;
#: - kimik2.5_fp4_b200.sh sets neither until 6c3acebfa (2026-04-20), fp8 KV and 2 x ISL from
#:   then; kimik2.5_fp4_b300.sh (f34a83b25, 2026-04-20, the only version at the rows' dates)
#:   sets neither.
_LLAMA = (("", ("fp8", 8192)),)
_NONE = (("", ("auto", None)),)
SERVER_FLAGS: dict[tuple[str, str, str], tuple[tuple[str, tuple[str, int | None]], ...]] = {
    ("llama-70b", "H100-SXM", "fp8"): _LLAMA,
    ("llama-70b", "H200", "fp8"): _LLAMA,
    ("llama-70b", "B200", "fp8"): _LLAMA,
    ("llama-70b", "B200", "fp4"): _LLAMA,
    ("gpt-oss", "H100-SXM", "fp4"): (("", ("auto", 8192)),),
    ("gpt-oss", "H200", "fp4"): (("", ("auto", 8192)),),
    ("gpt-oss", "B200", "fp4"): (("", ("fp8", 8192)),),
    ("minimax", "H100-SXM", "fp8"): _NONE,
    ("minimax", "H200", "fp8"): _NONE,
    ("minimax", "B200", "fp8"): (("", ("auto", None)), ("2026-04-03", ("fp8", -1))),
    ("minimax", "B200", "fp4"): (("", ("fp8", -1)),),
    ("minimax", "B300", "fp8"): (("", ("fp8", -1)),),
    ("minimax", "B300", "fp4"): (("", ("fp8", -1)),),
    ("kimi", "B200", "fp4"): (("", ("auto", None)), ("2026-04-20", ("fp8", -1))),
    ("kimi", "B300", "fp4"): _NONE,
    ("kimi", "B200", "int4"): _NONE,
    ("kimi", "H200", "int4"): _NONE,
}


def server_flags(family: str, gpu: str, precision: str,
                 measured: str | None) -> tuple[str, int | None]:
    """The (kv-cache-dtype, max-num-batched-tokens) of the script version in force on the
    row's run date (``measured``, YYYY-MM-DD...); a row without a date takes the newest."""
    flags: tuple[str, int | None] = _dated(SERVER_FLAGS, (family, gpu, precision), measured,
                                           ("auto", None))
    return flags


#: InferenceX's CUDA-graph flags, read off the same scripts at each row's run date: (family,
#: GPU, precision) -> ((first run date, (max_cudagraph_capture_size or None, cudagraph_mode or
#: None)), ...); not listed: neither flag (vLLM's defaults). Item 15 (benchmarks/perf/README.md):
#: - gpt-oss, every GPU and date: ``cuda-graph-sizes: 2048`` in the 2025-11-02 config.yaml
#:   (gptoss_fp4_{h100,h200,b200}_*.sh), ``max-cudagraph-capture-size: 2048`` from 2025-12;
#:   B200 also ``"cudagraph_mode":"FULL_AND_PIECEWISE"`` in its compilation-config from
#:   27f29acbe (2025-09-21) until 25506e87c (2025-12-05, the v0.11.2 image, whose default it is;
#:   item 18: the 2025 image v0.10.2 defaulted to PIECEWISE, so it matters there);
#: - llama-70b B200 (70b_fp{8,4}_b200_docker.sh, parent of 2582bce4): ``"cudagraph_mode":
#:   "FULL_DECODE_ONLY"``; the H100/H200 scripts set neither;
#: - minimax B200 fp8 from bddbf4031 (2026-04-03), B200 fp4 (79bd988e9), B300 fp8/fp4
#:   (340d7854c, 22d0f12f7): ``--max-cudagraph-capture-size 2048``; H200 0.16.0: neither;
#: - kimi B200 fp4 from 6c3acebfa (2026-04-20): 2048; B300 fp4, int4 B200/H200: neither.
_CAPTURE_2048 = (("", (2048, None)),)
GRAPH_FLAGS: dict[tuple[str, str, str], tuple[tuple[str, tuple[int | None, str | None]], ...]] = {
    ("gpt-oss", "H100-SXM", "fp4"): _CAPTURE_2048,
    ("gpt-oss", "H200", "fp4"): _CAPTURE_2048,
    ("gpt-oss", "B200", "fp4"): (("", (2048, "FULL_AND_PIECEWISE")), ("2025-12-05", (2048, None))),
    ("llama-70b", "B200", "fp8"): (("", (None, "FULL_DECODE_ONLY")),),
    ("llama-70b", "B200", "fp4"): (("", (None, "FULL_DECODE_ONLY")),),
    ("minimax", "B200", "fp8"): (("", (None, None)), ("2026-04-03", (2048, None))),
    ("minimax", "B200", "fp4"): _CAPTURE_2048,
    ("minimax", "B300", "fp8"): _CAPTURE_2048,
    ("minimax", "B300", "fp4"): _CAPTURE_2048,
    ("kimi", "B200", "fp4"): (("", (None, None)), ("2026-04-20", (2048, None))),
}


def _dated(table: dict[Any, tuple[tuple[str, Any], ...]],
           key: Any, measured: str | None, default: Any) -> Any:
    """The entry of the script version in force on ``measured`` (YYYY-MM-DD...); a row
    without a date takes the newest."""
    out = default
    for since, f in table.get(key, ()):
        if measured is None or measured[:10] >= since:
            out = f
    return out


def graph_flags(family: str, gpu: str, precision: str,
                measured: str | None) -> tuple[int | None, str | None]:
    """(max_cudagraph_capture_size, cudagraph_mode) of the script on the row's run date."""
    out: tuple[int | None, str | None] = _dated(GRAPH_FLAGS, (family, gpu, precision),
                                                 measured, (None, None))
    return out


#: rows whose launch script passed --enable-expert-parallel although the CSV records EP 1:
#: minimaxm2.5_fp8_{h200,b200}.sh tested ``[ "$EP_SIZE" -ge 1 ]``, which holds for the
#: workflow's default EP_SIZE 1 (utils/matrix_logic/generate_sweep_configs.py: "ep: 1 #
#: Default"), so every TP run was an EP run: h200 from 5e2c705d3 (2026-03-13) until 8014ee637
#: (2026-05-26) made it ``-gt 1``, b200 from its first version f342df18e (2026-03-11) until
#: bddbf4031 (2026-04-03). (family, GPU, precision) -> [first run date, first date without)
EXPERT_PARALLEL_BY_SCRIPT: dict[tuple[str, str, str], tuple[str, str]] = {
    ("minimax", "H200", "fp8"): ("2026-03-13", "2026-05-26"),
    ("minimax", "B200", "fp8"): ("2026-03-11", "2026-04-03"),
}

#: InferenceX's fused all-reduce + RMSNorm flags (stated protocol), read off the same scripts at
#: each run's date: (family, GPU family) -> (fuse_allreduce_rms, VLLM_FLASHINFER_ALLREDUCE_
#: FUSION_THRESHOLDS_MB by TP or None) for runs with an unrecorded 2025 release, then for runs
#: with a recorded one. Not listed: the script sets neither, the release's default applies.
#: - llama-70b B200 (70b_fp{8,4}_b200_docker.sh, parent of 2582bce4, image vllm v0.10.2):
#:   pass_config enable_fi_allreduce_fusion true and the thresholds {"2":32,"4":32,"8":8};
#: - gpt-oss B200: 2025 runs benchmarks/gptoss_fp4_b200_docker.sh at 12d601c4 (2025-11-20,
#:   image vllm v0.11.0): the same two; 2026 runs benchmarks/single_node/gptoss_fp4_b200.sh at
#:   67f51232 (2026-02-20): pass_config fuse_allreduce_rms true, no thresholds;
#: - kimi (kimik2.5_{int4,fp4}_{b200,b300,h200}.sh at 2026-03-10, 03-31, 04-20):
#:   --compilation_config.pass_config.fuse_allreduce_rms true.
_INFX_THRESHOLDS = {2: 32.0, 4: 32.0, 8: 8.0}
FUSION_FLAGS: dict[tuple[str, str], tuple[tuple[bool, dict[int, float] | None],
                                          tuple[bool, dict[int, float] | None]]] = {
    ("llama-70b", "blackwell"): ((True, _INFX_THRESHOLDS), (True, _INFX_THRESHOLDS)),
    ("gpt-oss", "blackwell"): ((True, _INFX_THRESHOLDS), (True, None)),
    ("kimi", "blackwell"): ((True, None), (True, None)),
    ("kimi", "hopper"): ((True, None), (True, None)),
}


#: the vLLM release of InferenceX's image for rows whose CSV records none (``backend_version``
#: empty), read off the workflows as they stood on the row's run date (``measured=``), like the
#: flags above: family -> ((first run date, release or None), ...), oldest first; None where the
#: date does not decide it. Used for the engine profile (``run._version``: memory and the
#: release's default cudagraph_mode, PIECEWISE before 0.11.0); the tables' release column and
#: the confidence labels keep the CSV's own (unrecorded). benchmarks/perf/README.md item 18:
#: - llama-70b (every row 2025-10-29): .github/workflows/70b-tmpl.yml at the parent of
#:   2582bce40 (2025-10-29, "remove llama 70b"): ``image: 'vllm/vllm-openai:v0.10.2'`` for the
#:   h100, h200 and b200 vLLM jobs (a157a043c "upgrade to vllm 0.10.2", 2025-09-15);
#: - gpt-oss 2025-11-02: .github/workflows/gptoss-tmpl.yml at e06929c70 (the last commit of that
#:   day): v0.10.2 for h100, h200 and b200; 7103d6608 (2025-11-04) "update vllm to 11.0";
#:   25506e87c (2025-12-05) "Upgrade vLLM to v0.11.2" landed on the day of the 2025-12-05 rows,
#:   which the date therefore does not place.
IMAGE_RELEASE: dict[str, tuple[tuple[str, str | None], ...]] = {
    "llama-70b": (("", "0.10.2"),),
    "gpt-oss": (("", "0.10.2"), ("2025-11-04", "0.11.0"), ("2025-12-05", None),
                ("2025-12-06", "0.11.2")),
}


def image_release(family: str, measured: str | None) -> str | None:
    """The image's vLLM release on ``measured`` (IMAGE_RELEASE); None: not known (no date, or
    a date the table does not place)."""
    out: str | None = None if measured is None else _dated(IMAGE_RELEASE, family, measured, None)
    return out


def row_class(source: str) -> str:
    if source.startswith("db-dump") or "source_file=2026-04-06.csv" in source \
            or "source_file=2026-03-25.csv" in source:
        return "stated"
    if source.startswith("source_file=/Users/"):
        return "internal"
    return "other"


def _field(source: str, key: str) -> str | None:
    for part in source.split(";"):
        k, _, v = part.strip().partition("=")
        if k == key:
            return v
    return None


def quantization(model: str, precision: str, gemm: str) -> str | None:
    if model == "openai/gpt-oss-120b":
        return None  # the checkpoint's own MXFP4 experts, bf16 attention (its config)
    if precision == "fp4" or gemm == "nvfp4":
        return "nvfp4"
    if precision == "fp8" or gemm in ("fp8", "fp8_block"):
        return "fp8_block" if model in BLOCK_FP8 or gemm == "fp8_block" else "fp8"
    return None  # bf16, or the checkpoint's own (Kimi int4, gpt-oss mxfp4)


def release(version: str, measured: str | None) -> tuple[str | None, str]:
    """(release or None, band). Unrecorded releases go by their measured date (README)."""
    if version.startswith("nightly"):
        return version, "B"
    if version:
        minor = int(version.split(".")[1])
        return version, "B" if minor >= 16 else "A"
    return None, "A" if (measured or "9999") < "2026-01-01" else "B"


def expert_parallel(r: dict[str, str]) -> bool:
    """The row ran vLLM's --enable-expert-parallel over its TP group, without data parallel:
    recorded so (moe_ep_size = tp_size > 1, attention_dp_size 1), or recorded EP 1 by a launch
    script that passed the flag anyway (EXPERT_PARALLEL_BY_SCRIPT)."""
    if (r["attention_dp_size"] or "1") not in ("1", "0"):
        return False
    if (r["moe_ep_size"] or "1") not in ("1", "0"):
        return r["moe_ep_size"] == r["tp_size"]
    window = EXPERT_PARALLEL_BY_SCRIPT.get((FAMILY.get(r["model_path"], ""),
                                            GPUS.get(r["system"], ""), r["precision"]))
    measured = _field(r["silicon_data_source"], "measured")
    return bool(window and measured and window[0] <= measured[:10] < window[1])


def skip_reason(r: dict[str, str]) -> str | None:
    if r["mode"] != "agg":
        return "disaggregated prefill/decode"
    if r["system"] not in GPUS:
        return f"{r['system']}: not in the catalog"
    if ((r["attention_dp_size"] or "1") not in ("1", "0")
            or (r["moe_ep_size"] or "1") not in ("1", "0")) and not expert_parallel(r):
        return ("attention data parallel, or expert parallel over more GPUs than the TP group "
                "(the step model has TP, and EP over the TP group)")
    if (r["pp_size"] or "1") != "1":
        return "pipeline parallel"
    if r["model_path"] not in MODELS:
        return "model without a config here"
    return None


def extract(aic: Path) -> dict[str, Any]:
    rows = [r for r in csv.DictReader((aic / CSV_PATH).open()) if r["backend"] == "vllm"]
    skipped: dict[str, int] = {}
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for r in rows:
        why = skip_reason(r)
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        src = r["silicon_data_source"]
        # repeats under two script versions ran two servers: they are two groups
        when = _field(src, "measured")
        fam, gpu_id = FAMILY[r["model_path"]], GPUS[r["system"]]
        flags = (server_flags(fam, gpu_id, r["precision"], when),
                 graph_flags(fam, gpu_id, r["precision"], when)) \
            if row_class(src) == "stated" else None
        key = (row_class(src), r["model_path"], r["system"], r["backend_version"],
               r["precision"], r["gemm_quant_mode"], r["tp_size"], r["batch_size"], r["isl"],
               r["osl"], repr(flags), str(expert_parallel(r)))
        groups.setdefault(key, []).append(r)
    out = []
    dropped = {"tpot": 0, "ttft": 0}
    for key, members in sorted(groups.items()):
        cls, model, system, version, precision, gemm, tp, conc, isl, osl, _, ep = key
        gpu = GPUS[system]
        dates = sorted(d for d in (_field(m["silicon_data_source"], "measured") for m in members)
                       if d)
        rel, band = release(version, dates[0] if dates else None)
        rec: dict[str, Any] = {
            "class": cls, "model": model, "config": MODELS[model], "family": FAMILY[model],
            "gpu": gpu, "vllm": rel, "band": band, "precision": precision or "bf16",
            "quantization": quantization(model, precision, gemm), "tp": int(tp),
            "concurrency": int(conc), "isl": int(isl), "osl": int(osl), "repeats": len(members),
            # expert-parallel rows: a set of their own, never fitted on (README, item 24)
            "split": "ep" if ep == "True" else "fit" if (FAMILY[model], gpu) in FIT
            else "report",
            "ids": sorted(m["id"] for m in members)[:3],
        }
        if ep == "True":
            rec["expert_parallel"] = True
        if cls == "stated":
            kind = "hopper" if gpu.startswith("H") else "blackwell"
            first = dates[0] if dates else None
            image = image_release(FAMILY[model], first) if rel is None else None
            if image is not None:
                rec["image_release"] = image
            kv, mnbt = server_flags(FAMILY[model], gpu, precision, first)
            capture, mode = graph_flags(FAMILY[model], gpu, precision, first)
            if capture is not None:
                rec["max_cudagraph_capture_size"] = capture
            if mode is not None:
                rec["cudagraph_mode"] = mode
            rec["kv_cache_dtype"] = kv
            rec["max_num_batched_tokens"] = 2 * int(isl) if mnbt == -1 else mnbt
            flags = FUSION_FLAGS.get((FAMILY[model], kind))
            if flags:
                fuse, thresholds = flags[0 if rel is None else 1]
                rec["fuse_allreduce_rms"] = fuse
                if thresholds:
                    rec["fusion_thresholds_mb"] = {str(k): v for k, v in thresholds.items()}
        for metric, col in (("tpot", "silicon_tpot_ms"), ("ttft", "silicon_ttft_ms")):
            vals = [float(m[col]) for m in members if m[col]]
            if not vals:
                continue
            med = statistics.median(vals)
            if len(vals) > 1 and (max(vals) - min(vals)) / med > DISAGREE:
                dropped[metric] += 1
                rec[f"{metric}_dropped"] = f"{len(vals)} repeats disagree by " \
                    f"{(max(vals) - min(vals)) / med * 100:.0f}%"
                continue
            rec[f"{metric}_ms"] = round(med, 4)
        out.append(rec)
    return {"source": {"repo": "https://github.com/ai-dynamo/aiconfigurator", "commit": COMMIT,
                       "path": CSV_PATH, "license": "Apache-2.0",
                       "regenerate": "python benchmarks/perf/silicon.py --aic /var/tmp/aic"},
            "vllm_rows": len(rows), "skipped": dict(sorted(skipped.items())),
            "rows_by_class": {c: sum(1 for r in rows if row_class(r["silicon_data_source"]) == c)
                              for c in ("stated", "internal", "other")},
            "modelled_by_class": {c: sum(1 for r in rows if not skip_reason(r)
                                         and row_class(r["silicon_data_source"]) == c)
                                  for c in ("stated", "internal", "other")},
            "repeat_groups_dropped": dropped, "groups": out}


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aic", type=Path, default=Path("/var/tmp/aic"))
    ap.add_argument("--check", action="store_true", help="exit 1 when silicon_rows.json is stale")
    args = ap.parse_args(argv)
    text = dumps(extract(args.aic))
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run {Path(__file__).name} --aic {args.aic}")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
