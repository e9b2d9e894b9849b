"""advisor's perf model beside published serving measurements.

    python benchmarks/perf/run.py [--write]

Prints each measurement beside the prediction with the relative error, then median and worst.
``--write`` rewrites RESULTS.md and the ``ttft`` and ``tpot`` sections of
src/advisor/core/accuracy.json, the summary per GPU family that advisor quotes as the
confidence of a latency estimate (advisor.core.confidence); the other sections are kept.
A measurement may give the vLLM release it ran (``vllm: "0.8.2"``); runs without one calibrate
no release.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

import advisor
from advisor.core import confidence
from advisor.core.perf import Workload, estimate
from advisor.core.sizing import FitRequest, fit

HERE = Path(__file__).resolve().parent
ACCURACY_JSON = HERE.parents[1] / "src" / "advisor" / "core" / confidence.ACCURACY_FILE


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
        row = {**m, "pred_ttft_ms": e.ttft_ms, "pred_tpot_ms": e.tpot_ms,
               "model_type": spec.model_type, "architecture": gpu.architecture}
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


def confidence_sections(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``ttft`` and ``tpot`` sections of accuracy.json: per GPU family, the measurements
    with that figure, their median and worst absolute error, models and vLLM releases."""
    out = {}
    for k, section in (("ttft_ms", "ttft"), ("tpot_ms", "tpot")):
        runs = [{"error_pct": r[f"err_{k}"], "model_type": r["model_type"],
                 "vllm": r.get("vllm"), "gpu": r["gpu"], "architecture": r["architecture"]}
                for r in rows if f"err_{k}" in r]
        out[section] = {"regenerate": "python benchmarks/perf/run.py --write",
                        "data": "benchmarks/perf/measurements.yaml",
                        "headline": f"per measurement, the absolute % error of mean {section}",
                        **confidence.summarize_runs(runs)}
    return out


def _cell(r: dict[str, Any], k: str) -> str:
    if k not in r:
        return "-"
    return f"{r[f'pred_{k}']:.1f} / {r[k]} ({r[f'err_{k}']:+.1f}%)"


def markdown(rows: list[dict[str, Any]], sections: dict[str, Any]) -> str:
    lines = ["| model | GPU | TP | in/out | conc | TTFT ms (pred / meas) | TPOT ms (pred / meas) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['gpu']} | {r['tp']} | {r['input_len']}/"
                     f"{r['output_len']} | {r['concurrency']} | {_cell(r, 'ttft_ms')} | "
                     f"{_cell(r, 'tpot_ms')} |")
    lines.append("")
    for k, (n, med, worst) in summary(rows).items():
        lines.append(f"{k}: n={n} median abs error {med}% worst {worst}%")
    lines += ["", "Per GPU family (the confidence `advisor` quotes for TTFT and TPOT):", "",
              "| metric | GPU family | GPUs | runs | median abs error | worst | model families "
              "| vLLM |", "|---|---|---|---|---|---|---|---|"]
    for section in ("ttft", "tpot"):
        sec = sections[section]
        groups = [*sec["families"].items(), ("unattributed", sec["unattributed"])]
        for fam, g in groups:
            if g:
                span = "-".join(dict.fromkeys(v for v in (g["vllm_min"], g["vllm_max"]) if v))
                if g["vllm_unrecorded"]:
                    span = f"{span + '; ' if span else ''}{g['vllm_unrecorded']} not recorded"
                lines.append(f"| {section} | {fam} | {', '.join(g['gpus'])} | {g['n']} | "
                             f"{g['median_pct']}% | {g['worst_pct']}% | "
                             f"{', '.join(g['model_types'])} | {span} |")
    return "\n".join(lines) + "\n"


HEADER = """# Accuracy of advisor perf against published serving runs

Generated by `python benchmarks/perf/run.py --write` from `measurements.yaml` (sources there);
the same command rewrites the `ttft` and `tpot` sections of `src/advisor/core/accuracy.json`,
which advisor quotes as the confidence of a latency estimate (`tests/test_confidence.py` fails
when it is stale).

"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite RESULTS.md and the ttft/tpot sections of accuracy.json")
    args = parser.parse_args(argv)
    rows = evaluate()
    sections = confidence_sections(rows)
    text = markdown(rows, sections)
    if args.write:
        existing = json.loads(ACCURACY_JSON.read_text()) if ACCURACY_JSON.exists() else None
        ACCURACY_JSON.write_text(confidence.dumps(confidence.merged(existing, sections)))
        (HERE / "RESULTS.md").write_text(HEADER + text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
