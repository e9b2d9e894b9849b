"""Two terms of the step model that the kernel tables and vLLM's defaults fix (issue 28):

- the size term: a tensor-parallel slice of a layer is a smaller matrix, and the measured
  prefill GEMM and fused-MoE tables run a smaller matrix further from peak at the same tokens
  (kernel_curves.json efficiency_by_m_and_weight_mib, ..._and_expert_mib);
- the host term: a step that schedules more tokens than vLLM captures CUDA graphs for runs
  every kernel launched from the host, and its layers' host time adds to its kernels'
  (perf.host_s, perf.with_host; EAGER_LAYER_S and EAGER_OVERLAP_P fitted on the fit
  split's TTFT).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import advisor
from advisor.core import perf, stepmodel
from advisor.core.engine import profile
from advisor.core.model import Quantization
from advisor.core.perf import Workload, estimate
from advisor.core.sizing import FitRequest, fit

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = json.loads((ROOT / "src" / "advisor" / "core" / "kernel_curves.json").read_text())
CAT = advisor.load_catalog()
BIG = advisor.model_spec("llama-3.1-70b", catalog=CAT)
MIB = 1 << 20
#: run.py --fit-host's choice (benchmarks/perf/README.md, item 7; moved by item 12 from
#: 0.20 ms and 10 ms + 6 us a token, a near-tie along the per-request / per-token ridge; item
#: 15, the CUDA-graph flags, added the piecewise term and moved the front end back to
#: 10 ms + 6 us from no per-request term + 8 us)
EAGER_PINNED = 0.0003
PIECEWISE_PINNED = 0.0002
FRONTEND_PINNED = (0.010, 6e-6)


def _fit(spec, gpu: str, tp: int, ctx: int = 4096):
    g = CAT.gpus[gpu]
    return fit(spec, FitRequest(gpu_memory_gib=g.usable_memory_mib / 1024, gpu_name=g.name,
                                tp=tp, max_model_len=ctx), profile())


@pytest.mark.parametrize("gpu", ["H100-SXM", "H200", "B200", "B300"])
@pytest.mark.parametrize("dtype", ["bfloat16", "fp8"])
def test_the_shipped_2d_prefill_curve_is_slower_for_smaller_matrices(gpu, dtype):
    """At m = 1024 the smallest measured weight bin is further from peak than the largest, by
    a margin the m-only curve could not express."""
    grid = SHIPPED["gpus"][gpu]["prefill_gemm"][dtype]["efficiency_by_m_and_weight_mib"]
    row = {float(k): v for k, v in grid["1024"].items()}
    small, large = row[min(row)], row[max(row)]
    assert 0 < small < large <= 1.0
    assert small < 0.75 * large, (gpu, dtype, row)


def test_a_tp8_slice_runs_prefill_further_from_peak_than_the_whole_layer():
    """Llama-3.1-70B's qkv projection at m = 1024 on B200 in fp8: the TP 8 slice (10240/8 x
    8192) at the 2-D curve's efficiency, below TP 1's (10240 x 8192), and both unlike the m-only
    curve, which gives them the same number."""
    k = stepmodel.kernels(CAT.gpus["B200"])
    whole = k.pre_eff("fp8", 1024, 10240 * 8192 * 1.0)
    slice8 = k.pre_eff("fp8", 1024, 10240 / 8 * 8192 * 1.0)
    assert slice8 < 0.7 * whole
    assert k.pre_eff("fp8", 1024) == stepmodel.interp(k.prefill_gemm["fp8"], 1024)


def test_prefill_time_no_longer_scales_as_one_over_tp():
    """A 70B prompt's GEMMs on 8 B200s take more than 1/8 of one GPU's (the size term)."""
    spec = BIG.model_copy(update={"quantization": Quantization(method="modelopt",
                                                               bytes_per_weight=1.0)})
    k = stepmodel.kernels(CAT.gpus["B200"])
    one = stepmodel.step_cost(spec, k, 1, 1, "fp8", 1.0, 0, 0.0, 1024, 1024).gemm
    eight = stepmodel.step_cost(spec, k, 8, 1, "fp8", 1.0, 0, 0.0, 1024, 1024).gemm
    assert eight > 1.3 * one / 8


def test_fused_moe_prefill_at_moe_tp8_is_further_from_peak_than_at_tp1():
    """MiniMax-M2.5's experts (hidden 3072, inter 1536) in nvfp4 on B200: aiconfigurator's table
    gives 0.07 of fp4 peak at 1024 tokens and moe_tp 1, 0.03 at moe_tp 8; the 2-D curve keeps
    that order at the experts' per-GPU bytes."""
    k = stepmodel.kernels(CAT.gpus["B200"])
    per_expert = 3 * 3072 * 1536 * 0.5625
    tpe = 1024 * 8 / 256
    tp1 = k.moe_pre_eff("nvfp4", tpe, per_expert)
    tp8 = k.moe_pre_eff("nvfp4", tpe, per_expert / 8)
    assert tp8 < 0.7 * tp1


def test_interp2_is_each_rows_curve_then_linear_across_rows():
    c2 = stepmodel._curve2({"512": {"1": 0.1, "4": 0.3}, "2048": {"1": 0.3, "4": 0.5}})
    assert c2 is not None
    rows_x = c2[0]
    # on a row's centre: that row's value; between the rows' centres: their mean
    assert stepmodel.interp2(c2, 2 ** rows_x[0], 1.0 * 2 ** 0.5) == pytest.approx(0.1)
    mid = 2 ** ((rows_x[0] + rows_x[1]) / 2)
    assert stepmodel.interp2(c2, mid, 2 ** 0.5) == pytest.approx(0.2)
    # flat beyond the ends, both ways
    assert stepmodel.interp2(c2, 1.0, 1e-3) == pytest.approx(0.1)
    assert stepmodel.interp2(c2, 1e9, 1e9) == pytest.approx(0.5)
    assert stepmodel._curve2({}) is None


def test_eager_constants_are_pinned_and_the_form_is_aiconfigurators():
    """The fitted values (run.py --fit-host, fit split): 0.30 ms a layer, added in full
    (p = 1). aiconfigurator adds the same kind of per-layer host term to every vLLM prefill, in
    full, at 0.8 ms a layer on its own kernel composition (sdk/backends/vllm_backend.py,
    _prefill_dispatch_overhead_ms): same form, same order of magnitude."""
    assert perf.EAGER_LAYER_S == EAGER_PINNED
    # a piecewise step launches a subset of an eager step's kernels (run.py's grid keeps it
    # at most the eager value)
    assert perf.PIECEWISE_LAYER_S == PIECEWISE_PINNED <= perf.EAGER_LAYER_S
    # a PIECEWISE step of decodes alone: nothing the fit split can tell from its pooled
    # hopper/A constant (item 18)
    assert perf.PIECEWISE_DECODE_LAYER_S == 0.0
    assert perf.FULL_AND_PIECEWISE_SINCE == (0, 11, 0)
    assert perf.EAGER_OVERLAP_P == 1.0
    assert 0.1e-3 <= perf.EAGER_LAYER_S <= 0.8e-3
    assert perf.CUDA_GRAPH_MAX_TOKENS == 512


def test_front_end_terms_are_pinned_and_add_to_ttft_only():
    """run.py --fit-host's front end: 10 ms a request and 6 us a prompt token, on TTFT
    alone (the API server's work before the first token; TPOT and the steps are untouched)."""
    assert (perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S) == FRONTEND_PINNED
    # the same order as the published measurements it stands for: 10-21 us a token in a
    # serving front end's tokenizer, 8-12 ms of client-side TTFT at 512-token prompts
    assert 1e-6 <= perf.FRONTEND_PER_TOKEN_S <= 21e-6 and perf.FRONTEND_S <= 0.015
    f = _fit(BIG, "H100-SXM", 4)
    g = CAT.gpus["H100-SXM"]
    saved = (perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S)
    try:
        for isl in (1000, 8000):
            w = Workload(input_len=isl, output_len=200, concurrency=8)
            with_fe = estimate(BIG, g, f, w)
            perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S = 0.0, 0.0
            without = estimate(BIG, g, f, w)
            perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S = saved
            assert with_fe.ttft_ms - without.ttft_ms == pytest.approx(
                (saved[0] + saved[1] * isl) * 1000)
            assert with_fe.tpot_ms == without.tpot_ms
    finally:
        perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S = saved


@pytest.mark.parametrize(("p", "want"), [(1.0, 7.0), (2.0, 5.0), (math.inf, 4.0)])
def test_with_host_combines_kernels_and_host_time_by_the_overlap_exponent(p, want):
    saved = perf.EAGER_OVERLAP_P
    try:
        perf.EAGER_OVERLAP_P = p
        assert perf.with_host(3.0, 4.0) == pytest.approx(want)
        assert perf.with_host(3.0, 0.0) == 3.0  # a graphed step: its kernels alone
    finally:
        perf.EAGER_OVERLAP_P = saved


def test_a_step_above_the_graph_sizes_pays_its_layers_host_time():
    f = _fit(BIG, "B200", 8)
    layers = BIG.num_layers
    cap = min(2 * f.max_num_seqs, perf.CUDA_GRAPH_MAX_TOKENS)
    # at the capture size a prompt-carrying step replays piecewise graphs (attention launched
    # from the host), a decode-only one a full graph
    assert perf.host_s(BIG, f, cap) == pytest.approx(layers * perf.PIECEWISE_LAYER_S)
    assert perf.host_s(BIG, f, cap, prompt=False) == 0.0
    assert perf.host_s(BIG, f, cap + 1) == pytest.approx(layers * perf.EAGER_LAYER_S)
    # a whole 1k prompt on 8 B200s: its kernels plus its layers' host time, plus the step
    # constant (one chunk: 1024 tokens fit max_num_batched_tokens)
    g = CAT.gpus["B200"]
    kernels = perf._cost(BIG, g, f, 0, 0.0, 1024, 1024, perf.fusion(f, g))
    const = perf.step_overhead_s(f.vllm_version, g.architecture)
    assert perf.prefill_s(BIG, g, f, 1024) == pytest.approx(
        kernels + layers * perf.EAGER_LAYER_S + const)


def test_decode_steps_replay_graphs_and_pay_no_launch_floor():
    """TPOT at one sequence is unchanged by the launch term: its steps are one token (graphed);
    only the prompt's chunk exceeds the graph sizes, and on 8 B200s its launches outlast its
    kernels, so TTFT grows."""
    f = _fit(BIG, "B200", 8)
    g = CAT.gpus["B200"]
    w = Workload(input_len=1024, output_len=256, concurrency=1)
    saved = perf.EAGER_LAYER_S
    try:
        with_floor = estimate(BIG, g, f, w)
        perf.EAGER_LAYER_S = 0.0
        without = estimate(BIG, g, f, w)
    finally:
        perf.EAGER_LAYER_S = saved
    assert with_floor.tpot_ms == without.tpot_ms
    assert with_floor.ttft_ms > without.ttft_ms

