"""The accuracy the README claims, held as a regression test over benchmarks/accuracy/logs.yaml.

The issue's targets, for vLLM >= 0.10 on GPUs of 40 GB or more: weights within 1%, KV-cache
tokens median error <= 3% and worst <= 10%; issue 28's for the whole fit: KV tokens p90 <= 3%
and worst <= 6%, on every log and on the held-out ones. The logs are public; see their
sources there.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from advisor import load_catalog

ROOT = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy"
_spec = importlib.util.spec_from_file_location("accuracy_run", ROOT / "run.py")
assert _spec and _spec.loader
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

_CAT = load_catalog()  # once: evaluate() only reads it (a load per log cost 3 s at collection)
ROWS = [run.evaluate(e, _CAT) for e in yaml.safe_load((ROOT / "logs.yaml").read_text())["logs"]]
SUMMARY = run.summarize(ROWS)


def test_there_are_at_least_20_cited_logs():
    assert len(ROWS) >= 20
    assert all(r["source"] for r in ROWS)


#: logs advisor still misses, each with the cause found in its log; a fix must take the entry
#: out (the test below fails while a listed miss is within the target)
KNOWN_MISSES = {
    ("gpt-oss-20b-h100-tp2-v019", "weights_gib"):
        "MXFP4 experts at TP 2: 7.01 GiB logged vs 6.42 (TP 1 is within 0.4%); vLLM's MXFP4 "
        "kernels pad the split expert dimension, which advisor does not model",
}

#: logs a constant of the engine rules was read or fitted on (their ``fitted`` field in
#: logs.yaml; src/advisor/core/engine.py names them): their full-fit errors are in-sample, so
#: the targets are also held without them
FITTED = {r["id"] for r in ROWS if r["fitted"]}


def test_the_fitted_logs_are_the_ones_the_engine_rules_name():
    assert len(FITTED) == 14
    # every entry the rules were fitted on is named in the rules' sources, and the Scout log,
    # whose vision tower and rotary cache are derived from its config, is not among them
    assert "llama4-scout-h100-tp4-v019" not in FITTED
    assert {"llama31-8b-h100-tp2-v019", "qwen25-7b-h100-tp2-v019"} <= FITTED


def _errs(check: str, *, known: bool = False) -> list[float]:
    return [r["checks"][check][2] for r in ROWS if check in r["checks"]
            and ((r["id"], check) in KNOWN_MISSES) == known]


def test_weights_within_one_percent_except_the_known_misses():
    errs = [abs(e) for e in _errs("weights_gib")]
    assert len(errs) >= 15 and max(errs) <= 1.0


def test_kv_tokens_meet_the_targets():
    """Issue 16's and 28's targets for the full fit (KV tokens from the GPU's total memory):
    median <= 2%, no systematic over-prediction (signed median within +-1%), p90 (nearest
    rank) <= 3% and worst <= 6%, on every log and on the held-out ones. From the logged KV
    memory: within 0.1%."""
    import math
    import statistics

    signed = _errs("kv_tokens_full_fit")
    every = sorted(abs(e) for e in signed + _errs("kv_tokens_full_fit", known=True))
    assert len(every) >= 20
    assert statistics.median(every) <= 2.0
    assert abs(statistics.median(signed + _errs("kv_tokens_full_fit", known=True))) <= 1.0
    assert every[math.ceil(0.9 * len(every)) - 1] <= 3.0 and every[-1] <= 6.0
    # out of sample: the logs no activation figure was fitted on
    held = sorted(abs(r["checks"]["kv_tokens_full_fit"][2]) for r in ROWS
                  if "kv_tokens_full_fit" in r["checks"] and r["id"] not in FITTED
                  and (r["id"], "kv_tokens_full_fit") not in KNOWN_MISSES)
    assert len(held) >= 15 and statistics.median(held) <= 2.0
    assert held[math.ceil(0.9 * len(held)) - 1] <= 3.0 and held[-1] <= 6.0
    assert SUMMARY["held-out/kv_tokens_full_fit"]["p90_pct"] == round(
        held[math.ceil(0.9 * len(held)) - 1], 2)
    target = SUMMARY["target/kv_tokens_from_logged_memory"]
    assert target["median_pct"] <= 0.1 and target["worst_pct"] <= 0.1


def test_the_known_misses_are_still_misses():
    """When a fix brings one within its target, take it out of KNOWN_MISSES."""
    for (log, check), why in KNOWN_MISSES.items():
        row = next(r for r in ROWS if r["id"] == log)
        err = abs(row["checks"][check][2])
        assert err > (1.0 if check == "weights_gib" else 5.0), (log, check, err, why)


#: a fit verdict advisor gets wrong, with the cause
KNOWN_VERDICT_MISSES = {
    "qwen25-72b-tp4-a100-40gb":
        "vLLM 0.11 on 40 GB A100s at 256 sequences: the sampler model gives a 1.5 GiB peak and "
        "so room for KV blocks, the log found none: the peak was above the 3.0 GiB left; the "
        "0.11 logs it was fitted on all run 1024 sequences, where the sampler term and a "
        "width/token term cannot be told apart",
}


def test_concurrency_and_fit_verdicts_match():
    assert SUMMARY["all/concurrency"]["worst_pct"] <= 1.0
    verdicts = {r["id"]: r["checks"]["fits"] for r in ROWS if "fits" in r["checks"]}
    assert verdicts
    for log, (pred, real, _) in verdicts.items():
        assert (pred == real) != (log in KNOWN_VERDICT_MISSES), (log, pred, real)


def test_the_docs_quote_the_current_whole_fit_figures():
    """The memory-accuracy table of docs/size.md: the whole-fit rows (all logs, held out) are
    what run.py computes now (n, median to two decimals, p90 and worst to one)."""
    readme = (ROOT.parents[1] / "docs/size.md").read_text()
    for scope, label in (("all", "KV tokens, whole prediction from the GPU's total memory"),
                         ("held-out", "the same, on the ")):
        s = SUMMARY[f"{scope}/kv_tokens_full_fit"]
        row = next(line for line in readme.splitlines() if line.startswith(f"| {label}"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert int(cells[1]) == s["n"], row
        assert cells[2] == f"{s['median_pct']:.2f}%", row
        assert cells[3] == f"{s['p90_pct']:.1f}%" and cells[4] == f"{s['worst_pct']:.1f}%", row
