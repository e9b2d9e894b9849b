"""benchmarks/perf/public_runs.yaml: the rows are sourced and split as stated, and the published
table (RESULTS-public.md) is what the shipped model computes on them now (issue 16)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import advisor

ROOT = Path(__file__).resolve().parents[1] / "benchmarks" / "perf"
_spec = importlib.util.spec_from_file_location("calibrate", ROOT / "calibrate.py")
assert _spec and _spec.loader
cal = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cal)

GPU_FAMILY = {"H100-SXM": "hopper", "H100-PCIe": "hopper", "H200": "hopper",
              "A100-80GB-SXM": "ampere", "A100-40GB-SXM": "ampere", "A100-80GB-PCIe": "ampere",
              "A10G": "ampere", "MI300X": "cdna3", "B200": "blackwell", "L4": "ada",
              "L40S": "ada"}


def test_every_row_is_sourced_and_in_the_catalog():
    cat = advisor.load_catalog()
    rows = cal.rows()
    assert len(rows) >= 50 and len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["source"].startswith("https://"), r["id"]
        assert r["model"] in cat.model_configs and r["gpu"] in cat.gpus, r["id"]
        assert r["split"] in ("fit", "report") and r["vllm"], r["id"]


def test_the_split_holds_out_model_family_by_gpu_family():
    """No (model family, GPU family) pair of the report split appears in the fit split."""
    cat = advisor.load_catalog()

    def pair(r):
        spec = advisor.spec_from_config(cat.model_configs[r["model"]], r["model"])
        return spec.model_type, GPU_FAMILY[r["gpu"]]

    fit = {pair(r) for r in cal.rows() if r["split"] == "fit"}
    report = {pair(r) for r in cal.rows() if r["split"] == "report"}
    assert report and fit and not fit & report


def test_the_published_table_is_current(tmp_path):
    out = tmp_path / "r.md"
    cal.main(["--results", str(out)])
    assert out.read_text() == (ROOT / "RESULTS-public.md").read_text()


def test_prefill_demand_is_littles_law_over_achievable_compute():
    """The consistency check: a hand-computed row. 8 clients, TTFT 100 ms, TPOT 10 ms, 101
    output tokens -> each request lives 1.1 s, 8 / 1.1 requests a second, each 1000 prompt tokens
    of 2 x active parameters; over H200's dense FP8 peak x COMPUTE_EFFICIENCY."""
    cat = advisor.load_catalog()
    row = {"model": "llama-3.1-8b", "gpu": "H200", "tp": 1, "quantization": "fp8",
           "concurrency": 8, "input_len": 1000, "output_len": 101, "ttft_ms": 100.0,
           "tpot_ms": 10.0}
    active = advisor.spec_from_config(cat.model_configs["llama-3.1-8b"], "llama-3.1-8b",
                                      quantization="fp8").param_counts()["active"]
    want = (8 / 1.1) * 1000 * 2 * active / (cat.gpus["H200"].fp8_tflops * 1e12
                                              * cal.perf.COMPUTE_EFFICIENCY)
    assert abs(cal.prefill_demand(row, cat) - want) < 1e-9 * want
    # twice the GPUs: half the share; no fixed concurrency or no TPOT: no figure
    assert abs(cal.prefill_demand({**row, "tp": 2}, cat) - want / 2) < 1e-9 * want
    assert cal.prefill_demand({**row, "concurrency": None}, cat) is None
    assert cal.prefill_demand({**row, "tpot_ms": None}, cat) is None
    # the flagged rows are exactly those above 1.0 (the table names them)
    flagged = {r["id"] for r in cal.rows()
               if not cal.skipped(r) and (cal.prefill_demand(r, cat) or 0) > 1.0}
    assert flagged and all(i in cal.demand_table(cat) for i in flagged)


def test_a_median_itl_row_is_compared_with_the_median_itl():
    """Rows that give only a median ITL are predicted by the model's median ITL, rows with a
    TPOT by its mean TPOT (vLLM's two figures differ under prompt-chunk steps)."""
    cat = advisor.load_catalog()
    rows = {r["id"]: r for r in cal.rows()}
    itl_rows = [i for i, r in rows.items() if cal.median_itl(r)]
    assert "vllmblog-fp8kv-llama31-8b-h100-c8-bf16kv" in itl_rows
    assert all(rows[i]["tpot_ms"] is None and rows[i]["stat"] == "median" for i in itl_rows)
    r = rows["vllmblog-fp8kv-llama31-8b-h100-c8-bf16kv"]
    as_itl = cal.predict(r, cat, {})["tpot"]
    as_tpot = cal.predict({**r, "tpot_ms": 15.18}, cat, {})["tpot"]
    assert not cal.median_itl({**r, "tpot_ms": 15.18})
    # a 20k prompt every 2k tokens from 7 others: the mean carries their chunks, the median not
    assert as_itl < as_tpot * 0.95
