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


def test_the_queue_starts_where_the_kv_cache_is_full():
    e, f = run(SPEC, "L4", 1)
    held = f.kv_cache_tokens // 1280
    at, _ = run(SPEC, "L4", held)
    over, _ = run(SPEC, "L4", 2 * held)
    assert over.concurrency == held and at.concurrency == held
    assert over.output_tokens_per_s == at.output_tokens_per_s  # saturated
    assert over.tpot_ms == at.tpot_ms
    # closed loop, Little's law: twice the clients, each waits one more e2e of the running ones
    e2e = at.e2e_latency_ms
    assert over.ttft_ms - at.ttft_ms == pytest.approx(e2e, rel=1e-3)
    assert any("wait in vLLM's queue" in n for n in over.notes)
    assert not any("queue" in n for n in at.notes)


#: vLLM's custom all-reduce on H100 (sgl-project/sglang PR #2904): TP -> [(bytes, µs)]
ALLREDUCE_H100 = {2: [(512, 9.5), (4096, 8.8), (32768, 8.7), (262144, 12.9), (524288, 17.7),
                      (1048576, 26.6)],
                  4: [(512, 9.1), (4096, 8.5), (32768, 9.2), (262144, 20.6), (524288, 26.9),
                      (1048576, 40.2)],
                  8: [(512, 10.1), (4096, 9.3), (32768, 11.8), (262144, 24.1), (524288, 30.4),
                      (1048576, 45.0)]}


def test_the_nvlink_all_reduce_reproduces_the_measurements_it_was_fitted_on():
    """In-sample by construction (the constants are a least-squares fit to these 18 points):
    this holds the fit, and the shape — latency grows with TP, bytes cost the same per TP."""
    from advisor.core.perf import _allreduce_s

    g = CAT.gpus["H100-SXM"]
    one_layer = SPEC.model_copy(update={"num_layers": 1})
    for tp, points in ALLREDUCE_H100.items():
        for size, us in points:
            tokens = size // (one_layer.hidden_size * 2)
            if tokens < 1:
                continue
            got = _allreduce_s(one_layer, g, tp, tokens, 2.0) / 2 * 1e6  # one all-reduce
            assert got == pytest.approx(us, rel=0.25), (tp, size, got, us)
    small = [_allreduce_s(one_layer, g, tp, 1, 2.0) for tp in (2, 4, 8)]
    assert small == sorted(small)
    # beyond the measured 1 MiB the extra bytes move at NVLink's per-direction peak
    big = _allreduce_s(one_layer, g, 8, 8192, 2.0) / 2
    assert big < 8192 * 4096 * 2 * 1.75 / 50.5e9
