"""The roofline: formula cases, monotonic behaviour, and the published calibration points."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

import advisor
from advisor.core.perf import (
    MEMORY_EFFICIENCY,
    STEP_OVERHEAD_S,
    Workload,
    decode_step_s,
    estimate,
)
from advisor.core.sizing import FitRequest, fit

CAT = advisor.load_catalog()
ENG = advisor.engine_profile()


def _setup(alias, gpu, tp=1, ctx=8192):
    spec = advisor.spec_from_config(CAT.model_configs[alias], alias)
    g = CAT.gpus[gpu]
    f = fit(spec, FitRequest(gpu_memory_gib=g.memory_gib, gpu_name=g.name, tp=tp,
                             max_model_len=ctx), ENG)
    return spec, g, f


def test_single_sequence_decode_is_a_weight_read():
    spec, g, f = _setup("llama-3-8b", "H100-SXM")
    ctx = 1000
    expected = ((f.weights_gib * 2**30 + ctx * f.kv_bytes_per_token)
                / (g.memory_bandwidth_gb_s * 1e9 * MEMORY_EFFICIENCY) + STEP_OVERHEAD_S)
    assert decode_step_s(spec, g, f, 1, ctx) == pytest.approx(expected)


def test_more_sequences_more_throughput_and_slower_tokens():
    spec, g, f = _setup("llama-3-8b", "H100-SXM")
    prev = None
    for c in (1, 4, 16, 64):
        e = estimate(spec, g, f, Workload(input_len=512, output_len=256, concurrency=c))
        if prev:
            assert e.output_tokens_per_s > prev.output_tokens_per_s
            assert e.tpot_ms >= prev.tpot_ms
        prev = e
    assert prev.requests_per_s == pytest.approx(prev.output_tokens_per_s / 256, rel=1e-3)


def test_tp_adds_all_reduce_and_pcie_costs_more_than_nvlink():
    spec, sxm, f_sxm = _setup("llama-3.1-70b", "H100-SXM", tp=4)
    _, pcie, f_pcie = _setup("llama-3.1-70b", "H100-PCIe", tp=4)
    t_sxm = decode_step_s(spec, sxm, f_sxm, 8, 2000)
    weights_only = ((f_sxm.weights_gib * 2**30 + 8 * 2000 * f_sxm.kv_bytes_per_token)
                    / (sxm.memory_bandwidth_gb_s * 1e9 * MEMORY_EFFICIENCY) + STEP_OVERHEAD_S)
    assert t_sxm > weights_only
    # per byte of weights, PCIe's all-reduce adds more than NVLink's
    extra_pcie = decode_step_s(spec, pcie, f_pcie, 8, 2000) - (
        (f_pcie.weights_gib * 2**30 + 8 * 2000 * f_pcie.kv_bytes_per_token)
        / (pcie.memory_bandwidth_gb_s * 1e9 * MEMORY_EFFICIENCY) + STEP_OVERHEAD_S)
    assert extra_pcie > t_sxm - weights_only


def test_moe_decode_reads_only_touched_experts():
    spec, g, f = _setup("qwen3-30b-a3b", "H100-SXM")
    one = decode_step_s(spec, g, f, 1, 100)
    full_read = f.weights_gib * 2**30 / (g.memory_bandwidth_gb_s * 1e9 * MEMORY_EFFICIENCY)
    assert one < full_read / 2  # 8 of 128 experts


def test_long_prompts_cost_more_ttft():
    spec, g, f = _setup("qwen2.5-7b", "L40S", ctx=32768)
    short = estimate(spec, g, f, Workload(input_len=256, output_len=64))
    long = estimate(spec, g, f, Workload(input_len=16384, output_len=64))
    assert long.ttft_ms > 20 * short.ttft_ms


def test_published_measurements_stay_within_the_reported_error():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "perf" / "run.py"
    mod_spec = importlib.util.spec_from_file_location("perf_run", path)
    assert mod_spec and mod_spec.loader
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    rows = mod.evaluate()
    tpot = statistics.median(abs(r["err_tpot_ms"]) for r in rows)
    ttft = statistics.median(abs(r["err_ttft_ms"]) for r in rows)
    assert len(rows) >= 7 and tpot < 5 and ttft < 20
