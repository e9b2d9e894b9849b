"""The physics the perf model must keep whatever its calibration (issue 16): monotone in load,
TP and PP scale the right way, and the queue starts where the KV cache is full."""

from __future__ import annotations

import pytest

import advisor
from advisor.core.engine import profile
from advisor.core.perf import Workload, estimate
from advisor.core.sizing import FitRequest, fit

CAT = advisor.load_catalog()
SPEC = advisor.model_spec("llama-3-8b", catalog=CAT)
BIG = advisor.model_spec("llama-3.1-70b", catalog=CAT)


def run(spec, gpu: str, c: int, tp: int = 1, pp: int = 1, i: int = 1024, o: int = 256,
        ctx: int = 8192):
    g = CAT.gpus[gpu]
    f = fit(spec, FitRequest(gpu_memory_gib=g.usable_memory_mib / 1024, gpu_name=g.name, tp=tp,
                             pp=pp, max_model_len=ctx), profile())
    return estimate(spec, g, f, Workload(input_len=i, output_len=o, concurrency=c)), f


def test_more_sequences_never_decode_faster_and_never_lower_throughput_until_full():
    held = run(SPEC, "H100-SXM", 1)[1].kv_cache_tokens // 1280
    cs = [1, 2, 4, 8, 16, 32, 64, 128, min(held, 256)]
    ests = [run(SPEC, "H100-SXM", c)[0] for c in cs]
    tpot = [e.tpot_ms for e in ests]
    tps = [e.output_tokens_per_s for e in ests]
    assert tpot == sorted(tpot) and tps == sorted(tps)
    assert all(e.concurrency == c for e, c in zip(ests, cs, strict=True))


def test_longer_prompts_take_longer_to_first_token():
    ttft = [run(BIG, "H100-SXM", 1, tp=4, i=i, ctx=16384)[0].ttft_ms
            for i in (128, 1024, 4096, 8192)]
    assert ttft == sorted(ttft) and ttft[-1] > 8 * ttft[0]


def test_tp_splits_the_weights_read_per_step():
    one = run(BIG, "H100-SXM", 1, tp=4)[0].tpot_ms
    two = run(BIG, "H100-SXM", 1, tp=8)[0].tpot_ms
    assert two < one < 2 * two  # faster, but not twice: all-reduces and overhead stay


def test_pipeline_stages_do_not_speed_up_one_sequence():
    flat = run(BIG, "H100-SXM", 1, tp=4)[0].tpot_ms
    staged = run(BIG, "H100-SXM", 1, tp=2, pp=2)[0].tpot_ms
    assert staged >= flat * 0.95  # PP moves weights, not time: one token passes every stage


def test_each_stage_does_its_share_of_the_layers():
    """PP 2 on the same TP: each stage runs half the layers, so one sequence's token costs about
    what it costs on one stage of all layers (two half-steps plus a hop), not twice that. A
    stage charged for every layer (decode work not divided by PP) would double it."""
    flat = run(BIG, "H100-SXM", 1, tp=4)[0].tpot_ms
    staged = run(BIG, "H100-SXM", 1, tp=4, pp=2)[0].tpot_ms
    assert flat * 0.95 <= staged <= flat * 1.25


def test_the_queue_starts_where_the_kv_cache_is_full():
    """Full at the tokens running sequences hold on average: the prompt and half the output
    (vLLM allocates KV blocks as tokens are scheduled and preempts the newest sequence when
    none is free; it reserves nothing for output to come: item 19). At full length the queue
    would start at 1,024 + 256 tokens a sequence."""
    from advisor.core import perf

    assert perf.KV_LIVE_SHARE == 0.5
    e, f = run(SPEC, "L4", 1)
    held = int(f.kv_cache_tokens // (1024 + 128))
    assert held > f.kv_cache_tokens // 1280
    at, _ = run(SPEC, "L4", held)
    over, _ = run(SPEC, "L4", 2 * held)
    assert over.concurrency == held and at.concurrency == held
    assert over.output_tokens_per_s == at.output_tokens_per_s  # saturated
    assert over.tpot_ms == at.tpot_ms
    # closed loop, Little's law: twice the clients, each waits one more e2e of the running ones
    e2e = at.e2e_latency_ms
    assert over.ttft_ms - at.ttft_ms == pytest.approx(e2e, rel=1e-3)
    assert any("wait in vLLM's queue" in n for n in over.notes)
    assert not any("wait in vLLM's queue" in n for n in at.notes)
    # a long output: more sequences run than full-length reservations would hold
    _, f8 = run(SPEC, "L4", 1, o=7168)
    full, live = f8.kv_cache_tokens // 8192, int(f8.kv_cache_tokens // (1024 + 3584))
    assert live > full + 1
    mid, _ = run(SPEC, "L4", full + 1, o=7168)
    assert mid.concurrency == full + 1
    assert not any("wait in vLLM's queue" in n for n in mid.notes)
    # ...and the estimate says that it does not charge the preemptions that follow
    assert any(f"only {full} at full length" in n for n in mid.notes)
    fits, _ = run(SPEC, "L4", full, o=7168)
    assert not any("at full length" in n for n in fits.notes)
    past, _ = run(SPEC, "L4", live + 1, o=7168)
    assert past.concurrency == live and any("wait in vLLM's queue" in n for n in past.notes)


def test_the_all_reduce_is_the_measured_graph_table():
    """TP all-reduces read the CUDA-graph custom all-reduce table (kernel_curves.json, H100):
    exact at its points, log-log between them, never faster for more bytes; up to 64 KiB (the
    latency-bound sizes) no point above a larger one's time (one slow smallest point is noise,
    not the floor)."""
    from advisor.core import stepmodel

    k = stepmodel.kernels(CAT.gpus["H100-SXM"])
    table = stepmodel.curves()["gpus"]["H100-SXM"]["allreduce_graph"][
        "latency_us_by_gpus_and_bytes"]
    for tp, points in table.items():
        prev = 0.0
        sizes = sorted(points, key=int)
        for size in sizes:
            us = points[size]
            if int(size) <= 65536:
                us = min(points[s] for s in sizes if int(size) <= int(s) <= 65536)
            got = k.allreduce_s(int(tp), int(size)) * 1e6
            assert got == pytest.approx(max(us, prev), rel=1e-6), (tp, size)
            prev = got
        mid = k.allreduce_s(int(tp), 2**21) * 1e6  # between the 1 MiB and 4 MiB points
        assert points["1048576"] <= mid <= points["4194304"]
    assert k.allreduce_s(1, 2**20) == 0.0
    # A100 TP 8 measures 14.9 us at 4 KiB, 6.5 and 8.4 at 16 and 64 KiB: the slow smallest point
    # lifts nothing; B200 TP 8's 1 MiB point (17.2 us) stays at its 256 KiB one's 25.8
    a100 = stepmodel.kernels(CAT.gpus["A100-80GB-SXM"])
    a100_tp8 = stepmodel.curves()["gpus"]["A100-80GB-SXM"]["allreduce_graph"][
        "latency_us_by_gpus_and_bytes"]["8"]
    assert a100_tp8["4096"] > 2 * a100_tp8["16384"]
    for size in ("4096", "16384"):
        assert a100.allreduce_s(8, int(size)) * 1e6 == pytest.approx(a100_tp8["16384"])
    b200_tp8 = stepmodel.curves()["gpus"]["B200"]["allreduce_graph"][
        "latency_us_by_gpus_and_bytes"]["8"]
    b200 = stepmodel.kernels(CAT.gpus["B200"])
    assert b200.allreduce_s(8, 2**20) * 1e6 == pytest.approx(b200_tp8["262144"])
    # L40S over PCIe Gen4 at TP 4, 64 MiB: the table's 27 ms, 6.7x what the old rule charged
    pcie = stepmodel.kernels(CAT.gpus["L40S"])
    assert pcie.allreduce_s(4, 2**26) > 6 * (25e-6 + 2**26 * 1.5 / 25e9)


@pytest.mark.parametrize("gpu", ["B200", "H200", "H100-SXM", "L40S", "A100-80GB-SXM"])
def test_a_small_kernel_costs_at_least_the_smallest_measured_one(gpu):
    """Below the decode tables' smallest bin (0.25-0.5 MiB) the time is launch-bound: an
    element-wise kernel of a few KiB costs what vLLM's static fp8 quant kernel was measured to
    cost at 1 KiB (1.5-2.0 us; aiconfigurator's quantize tables), or, on a GPU without that
    table, its decode-GEMM table's smallest bin. The curve's flat efficiency below its first
    bin would give ~0.2 us at 24 KiB and take the element-wise work of a 62-layer step at
    batch 4 to ~0. Above the floor the cost grows with the bytes."""
    from advisor.core import stepmodel

    k = stepmodel.kernels(CAT.gpus[gpu])
    floor = k.launch_floor_s()
    quant = (k.fp8_quant or {}).get("static_quant")
    if quant is not None:
        assert floor == pytest.approx(2 ** quant[1][0] * 1e-6)
        assert 1.4e-6 < floor < 2.2e-6
    else:  # A100: no quantize table, the smallest GEMM bin
        xs, ys = k.decode_gemm["bfloat16"]
        assert floor == pytest.approx(2 ** xs[0] * 2**20 / (k.bw * ys[0]))
    assert stepmodel._transfer_s(k, 24 * 1024) == floor
    assert stepmodel._transfer_s(k, 1024) == floor
    assert stepmodel._transfer_s(k, 64 * 2**20) > 4 * floor
    # the step's element-wise part at one sequence: every layer's kernels at least at the floor
    spec = advisor.model_spec("llama-3-8b", catalog=CAT)
    parts = stepmodel.step_cost(spec, k, 1, 1, "auto", 2.0, 1, 512)
    assert parts.other >= spec.num_layers * (stepmodel.ELEMENTWISE_PER_LAYER - 1) * floor


@pytest.mark.parametrize("source", ["deepseek-v2-lite", "Kimi-K2.5"])
@pytest.mark.parametrize("tp", [1, 4])
def test_mla_projections_read_the_checkpoints_weights_as_vllm_shards_them(source, tp):
    """vLLM's DeepseekV2MLAAttention replicates the down-projections from the hidden state
    (fused_qkv_a_proj with disable_tp=True, or kv_a_proj_with_mqa) and splits q_b / q_proj,
    kv_b and o_proj over heads. The step model's per-GPU projection weights must add up to the
    checkpoint's attention weights (ModelSpec.attention_params, less the two latent RMSNorms)
    split that way: the q path once, from the q LoRA rank (it had been charged from the hidden
    size as well, 39% too many bytes a Kimi-K2.5 layer at TP 4)."""
    import json
    from pathlib import Path

    from advisor.core import stepmodel

    if source == "Kimi-K2.5":
        cfg = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "perf"
                          / "configs" / "moonshotai--Kimi-K2.5.json").read_text())
        spec = advisor.spec_from_config(cfg, "kimi")
    else:
        spec = advisor.model_spec(source, catalog=CAT)
    m, h = spec.mla, spec.hidden_size
    assert m is not None and bool(m.q_lora_rank) == (source == "Kimi-K2.5")
    s = stepmodel.shape(spec, tp, 1, 1.0)
    per_gpu = s.qkv_n * h + s.o_k * h + sum(n * k for n, k in s.attn_up)
    replicated = h * ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim)
    norms = (m.q_lora_rank or 0) + m.kv_lora_rank
    assert per_gpu == pytest.approx(replicated + (spec.attention_params() - norms - replicated)
                                    / tp)
