"""The memory fit: hand-derived cases, properties, and the guards on bad input."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor import UserInputError, load_catalog
from advisor.core.engine import GIB, profile
from advisor.core.model import spec_from_config
from advisor.core.sizing import FitRequest, fit, kv_bytes_per_token_per_layer, weights_per_gpu

CAT = load_catalog()
SPECS = {a: spec_from_config(CAT.model_configs[a], a) for a in CAT.models}


def test_dense_fit_from_the_formula():
    s, eng = SPECS["llama-3.1-8b"], profile("0.11.0")
    total, util = 79.25, 0.92
    r = fit(s, FitRequest(gpu_memory_gib=total, gpu_name="NVIDIA H100", max_model_len=131072,
                          gpu_memory_utilization=util), eng)
    weights = (8_030_261_248 * 2 + 131072 * 128 * 2) / GIB  # params in bf16 + rotary cache
    assert r.weights_gib == pytest.approx(weights, abs=1e-3)
    kv_per_token = 32 * 2 * 8 * 128 * 2
    assert r.kv_bytes_per_token == kv_per_token == 131072
    free = total * util - r.weights_gib - r.activation_gib - r.non_torch_gib  # graphs not charged
    blocks = math.floor(free * GIB / (16 * kv_per_token))
    assert abs(r.num_blocks - blocks) <= 1
    assert r.kv_cache_tokens == r.num_blocks * 16
    assert r.max_concurrency == pytest.approx(r.num_blocks / (131072 / 16), abs=0.01)
    assert r.fits and (r.max_num_batched_tokens, r.max_num_seqs) == (8192, 1024)


def test_cuda_graphs_are_charged_from_0_21():
    s = SPECS["llama-3.1-8b"]
    req = FitRequest(gpu_memory_gib=79.25, gpu_name="H100", max_model_len=8192)
    old, new = fit(s, req, profile("0.11.0")), fit(s, req, profile("0.21.0"))
    assert not old.cuda_graph_charged and new.cuda_graph_charged
    # the graphs come out of the budget; the smaller 0.21 sampler peak gives some back, and
    # the TP 1 non-torch memory grew from 0.13 to 0.25 GiB in 0.18 (engine rules)
    gained = old.activation_gib - new.activation_gib
    assert gained > 0
    assert (old.non_torch_gib, new.non_torch_gib) == (0.13, 0.25)
    assert old.kv_cache_gib - new.kv_cache_gib == pytest.approx(
        new.cuda_graph_gib - gained + new.non_torch_gib - old.non_torch_gib, abs=1e-3)


def test_tp_splits_weights_and_replicates_kv_heads():
    s = SPECS["llama-3.1-70b"]
    w1 = weights_per_gpu(s, 1, 1, 2.0)[0]
    w4 = weights_per_gpu(s, 4, 1, 2.0)[0]
    assert w1 / 4 < w4 < w1 / 4 * 1.01  # norms and the rotary cache are replicated
    assert kv_bytes_per_token_per_layer(s, 8, 2.0) == 2 * 1 * 128 * 2
    assert kv_bytes_per_token_per_layer(s, 16, 2.0) == 2 * 1 * 128 * 2  # one replica each


def test_mla_keeps_one_latent_per_token():
    s = SPECS["deepseek-v2-lite"]
    for tp in (1, 2, 4):
        assert kv_bytes_per_token_per_layer(s, tp, 2.0) == (512 + 64) * 2


def test_fp8_kv_cache_doubles_the_tokens():
    s = SPECS["qwen3-8b"]
    base = dict(gpu_memory_gib=79.25, gpu_name="H100", max_model_len=32768)
    bf16 = fit(s, FitRequest(**base), profile())
    fp8 = fit(s, FitRequest(**base, kv_cache_dtype="fp8"), profile())
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert abs(fp8.num_blocks - 2 * bf16.num_blocks) <= 1


def test_hybrid_sliding_window_groups():
    s = SPECS["gemma-2-9b"]
    r = fit(s, FitRequest(gpu_memory_gib=44.5, gpu_name="L40S", max_model_len=8192), profile())
    assert any("hybrid KV cache: 2 groups" in n for n in r.notes)
    assert r.kv_cache_tokens == r.num_blocks // 2 * 16
    full_blocks = 8192 // 16
    sliding_blocks = math.ceil(min(4096 - 1 + r.max_num_batched_tokens, 8192) / 16) + 1
    assert r.max_concurrency == pytest.approx(r.num_blocks / (full_blocks + sliding_blocks),
                                              abs=0.01)


def test_not_fitting_is_an_answer_with_advice():
    s = SPECS["llama-3.1-70b"]
    r = fit(s, FitRequest(gpu_memory_gib=79.25, gpu_name="H100", max_model_len=8192), profile())
    assert not r.fits and r.kv_cache_tokens == 0
    assert "exceed the budget by" in r.notes[0]
    assert any("--tp 2" in n for n in r.notes)
    long = fit(SPECS["llama-3.1-8b"], FitRequest(gpu_memory_gib=22.0, gpu_name="L4",
                                                 max_model_len=131072), profile())
    assert not long.fits and any("would fit (--ctx" in n for n in long.notes)


@pytest.mark.parametrize("model,gpu_gib,ctx", [
    ("llama-3.1-8b", 22.0, 131072),   # full attention only: blocks x 16 tokens
    ("gemma-2-9b", 22.0, 8192),       # full + sliding groups: both hold the shorter request
    ("mistral-7b", 16.0, 32768),      # sliding only: the window plus one chunk
])
def test_the_suggested_max_model_len_is_the_longest_that_fits(model, gpu_gib, ctx):
    # vLLM refuses such a start with "the estimated maximum model length is N"; the note names
    # the N at which the same fit passes and N + 1 does not (it once said "about 0" for
    # gemma-2-9b on an L4, rounding 304 tokens down to a multiple of 1024 and ignoring the
    # sliding-window group's blocks)
    def at(n):
        return fit(SPECS[model], FitRequest(gpu_memory_gib=gpu_gib, gpu_name="L4",
                                            max_model_len=n), profile())
    r = at(ctx)
    assert not r.fits
    note = next(n for n in r.notes if "would fit" in n)
    longest = int(re.search(r"max_model_len of (\d+) would fit \(--ctx \1\)", note)[1])
    assert 0 < longest < ctx
    assert at(longest).fits and not at(longest + 1).fits


@pytest.mark.parametrize("req,match", [
    (dict(tp=3), "does not divide"),
    (dict(gpu_memory_utilization=0.0), r"outside \(0, 1\]"),
    (dict(gpu_memory_utilization=1.5), r"outside \(0, 1\]"),
    (dict(max_model_len=10**6), "exceeds"),
    (dict(pp=100), "exceeds the 32 layers"),
])
def test_bad_requests(req, match):
    base = dict(gpu_memory_gib=80.0, max_model_len=8192)
    with pytest.raises(UserInputError, match=match):
        fit(SPECS["llama-3.1-8b"], FitRequest(**{**base, **req}), profile())


def test_engine_profiles():
    assert profile("0.8.5").batch_defaults(80, "H100") == (2048, 256)
    assert profile("0.11.0").batch_defaults(79.2, "NVIDIA H100") == (8192, 1024)
    assert profile("0.11.0").batch_defaults(79.2, "NVIDIA A100-SXM4-80GB") == (2048, 256)
    assert profile("0.11.0").batch_defaults(22, "L4", "llm") == (8192, 256)
    with pytest.raises(UserInputError):
        profile("0.6.0")
    with pytest.raises(UserInputError):
        profile("latest")


models = st.sampled_from(sorted(SPECS))


@settings(max_examples=60, deadline=None)
@given(models, st.floats(16, 200), st.floats(0.5, 0.95), st.floats(0.01, 20))
def test_more_memory_never_gives_fewer_tokens(alias, mem, util, extra):
    s = SPECS[alias]
    ln = min(4096, s.max_position_embeddings or 4096)
    # at fixed batch settings: vLLM's own defaults jump at 70 GiB (8192 tokens and 1024
    # sequences, so a bigger profiling peak), and across that line more memory can give fewer
    # tokens (DeepSeek-V2-Lite at util 0.5: 64 GiB holds more than 70)
    batch = {"max_num_batched_tokens": 2048, "max_num_seqs": 256}
    a = fit(s, FitRequest(gpu_memory_gib=mem, max_model_len=ln, gpu_memory_utilization=util,
                          **batch), profile())
    b = fit(s, FitRequest(gpu_memory_gib=mem + extra, max_model_len=ln,
                          gpu_memory_utilization=util, **batch), profile())
    c = fit(s, FitRequest(gpu_memory_gib=mem, max_model_len=ln,
                          gpu_memory_utilization=min(1.0, util + 0.04), **batch), profile())
    assert b.kv_cache_tokens >= a.kv_cache_tokens and c.kv_cache_tokens >= a.kv_cache_tokens
    for r in (a, b, c):
        assert r.kv_cache_tokens >= 0 and r.kv_cache_gib >= 0 and r.max_concurrency >= 0
        assert r.weights_gib > 0 and r.activation_gib > 0


@settings(max_examples=40, deadline=None)
@given(models)
def test_kv_per_token_never_grows_with_tp(alias):
    s = SPECS[alias]
    sizes = [t for t in (1, 2, 4, 8, 16) if s.num_heads % t == 0]
    per = [kv_bytes_per_token_per_layer(s, t, 2.0) for t in sizes]
    assert all(b <= a for a, b in zip(per, per[1:], strict=False))


# -- multimodal towers and TP-dependent non-torch memory (issue 28) ----------------------------
SCOUT_CFG = __import__("json").loads(
    (__import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy"
     / "configs" / "llama-4-scout-17b-16e-instruct.json").read_text())


def test_llama4_scout_vision_tower_is_counted_from_its_vision_config():
    scout = spec_from_config(SCOUT_CFG, "scout")
    assert scout.vision is not None and scout.vision.model_type == "llama4_vision_model"
    # the vision rows of the published per-module table of Llama-4-Scout-17B-16E
    assert scout.vision.linear_params + scout.vision.replicated_params == 871_932_416
    text_only = spec_from_config({k: v for k, v in SCOUT_CFG.items() if k != "vision_config"},
                                 "scout-text")
    assert text_only.vision is None
    # the linear layers are split over TP, the norms, embeddings and row biases are not
    for tp in (1, 2, 4, 8):
        extra = weights_per_gpu(scout, tp, 1, 2.0)[0] - weights_per_gpu(text_only, tp, 1, 2.0)[0]
        assert extra == (scout.vision.linear_params / tp + scout.vision.replicated_params) * 2
    assert scout.vision.replicated_params == 1_106_688
    # derived, not a constant: a tower of half the layers is about half the size
    half = spec_from_config({**SCOUT_CFG, "vision_config": {
        **SCOUT_CFG["vision_config"], "num_hidden_layers": 17}}, "half")
    assert half.vision is not None
    assert half.vision.linear_params < 0.6 * scout.vision.linear_params
    # every PP stage builds the tower
    staged = weights_per_gpu(scout, 1, 2, 2.0)
    staged_text = weights_per_gpu(text_only, 1, 2, 2.0)
    assert all(a - b == pytest.approx(sum(scout.vision.model_dump(
        include={"linear_params", "replicated_params"}).values()) * 2)
        for a, b in zip(staged, staged_text, strict=True))


def test_llama4_scout_instruct_weights_match_the_log():
    """Model loading took 53.12 GiB per rank at TP 4 (llm-d-planner's vLLM 0.19 Scout log):
    the text weights, 1/4 of the vision tower, and the rotary cos/sin cache, which the
    Instruct config's max_position_embeddings of 10485760 makes 2.5 GiB."""
    scout = spec_from_config(SCOUT_CFG, "scout")
    assert scout.max_position_embeddings == 10485760
    w = weights_per_gpu(scout, 4, 1, 2.0)[0] / GIB
    assert w == pytest.approx(53.12, rel=0.002)
    base = spec_from_config({**SCOUT_CFG, "text_config": {
        **SCOUT_CFG["text_config"], "max_position_embeddings": 262144}}, "base")
    rotary = (10485760 - 262144) * 128 * 2 / GIB
    assert w - weights_per_gpu(base, 4, 1, 2.0)[0] / GIB == pytest.approx(rotary)


def test_non_torch_memory_grows_with_tp_as_aiconfigurator_records():
    """NCCL's buffers per rank: 342 MB at TP 2, 392 MB at TP 4 and 8 (aiconfigurator's
    systems/*.yaml misc.nccl_mem), on top of the release's TP 1 figure and its all-reduce
    extra; PP alone adds none."""
    from advisor.core.engine import NCCL_MEM_BYTES_BY_TP, nccl_gib
    assert NCCL_MEM_BYTES_BY_TP == {1: 0, 2: 358612992, 4: 411041792, 8: 411041792}
    eng = profile("0.19.0")
    nt = {tp: eng.non_torch(tp) for tp in (1, 2, 3, 4, 8, 16)}
    assert nt[1] == 0.25
    assert nt[2] == pytest.approx(0.25 + 358612992 / GIB + 1.48)
    assert nt[4] - nt[2] == pytest.approx((411041792 - 358612992) / GIB)
    assert nt[1] < nt[2] == nt[3] < nt[4] == nt[8] == nt[16]
    assert nccl_gib(1) == 0.0 and nccl_gib(16) == nccl_gib(8)
    # the fit charges it by TP, not by TP x PP
    s = SPECS["llama-3.1-8b"]
    req = dict(gpu_memory_gib=79.19, gpu_name="H100", max_model_len=8192)
    assert fit(s, FitRequest(**req, pp=2), eng).non_torch_gib == 0.25
    assert fit(s, FitRequest(**req, tp=4), eng).non_torch_gib == round(nt[4], 4)
    assert fit(s, FitRequest(**req, tp=2, pp=2), eng).non_torch_gib == round(nt[2], 4)
    # vLLM 0.11 printed 0.14 at TP 1 and 0.54 at TP 2 for Qwen3-32B
    assert round(profile("0.11.0").non_torch(2), 2) == 0.53


def test_gemma3_siglip_tower_and_local_rotary_cache():
    """Gemma-3: a SigLIP tower (vision_config, not a constant) and a second, unscaled cos/sin
    cache for the sliding layers' rope_local_base_freq, beside the global one that vLLM's
    linear scaling makes 8x as long."""
    cfg = __import__("json").loads(
        (__import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy"
         / "configs" / "gemma-3-4b-it.json").read_text())
    g3 = spec_from_config(cfg, "gemma-3-4b-it")
    assert g3.vision is not None and g3.vision.model_type == "siglip_vision_model"
    v = cfg["vision_config"]
    h, inter, n = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    per_layer = 4 * h * h + 2 * h * inter  # q/k/v/o and fc1/fc2 weights
    projector, patches = h * 2560, 14**2 * 3 * h
    assert n * per_layer < g3.vision.linear_params < n * per_layer * 1.01 + projector + patches
    assert 410e6 < g3.vision.linear_params + g3.vision.replicated_params < 430e6
    assert g3.local_rope
    no_local = g3.model_copy(update={"local_rope": False})
    extra = weights_per_gpu(g3, 1, 1, 2.0)[0] - weights_per_gpu(no_local, 1, 1, 2.0)[0]
    assert extra == 131072 * 256 * 2
    # the Gemma-3 log: "Model loading took 8.58 GiB"
    assert weights_per_gpu(g3, 1, 1, 2.0)[0] / GIB == pytest.approx(8.58, rel=0.002)
    # text-only Gemma-2 has one cache and no tower
    g2 = SPECS["gemma-2-9b"]
    assert not g2.local_rope and g2.vision is None


def test_pixtral_tower_is_split_over_tp_as_the_mistral_small_logs_show():
    """Mistral-Small-3.1-24B W8A8 (int8 language model, bf16 Pixtral tower): 24.07 GiB per
    rank at TP 1 and 12.11 at TP 2 in llm-d-planner's vLLM 0.19 logs; with the tower split over
    TP the model gives 12.04, with it whole on every rank 12.45."""
    cfg = __import__("json").loads(
        (__import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy"
         / "configs" / "mistral-small-3.1-24b-instruct-2503.json").read_text())
    ms = spec_from_config(cfg, "mistral-small", quantization="w8a8")
    assert ms.vision is not None and ms.vision.model_type == "pixtral"
    tp1, tp2 = (weights_per_gpu(ms, tp, 1, 2.0)[0] / GIB for tp in (1, 2))
    assert tp1 == pytest.approx(24.07, rel=0.003) and tp2 == pytest.approx(12.11, rel=0.01)
    whole = tp2 + ms.vision.linear_params / 2 * 2 / GIB
    assert abs(whole - 12.11) > 3 * abs(tp2 - 12.11)


def test_the_70_gib_batch_defaults_can_cost_tokens():
    """The counterexample test_more_memory_never_gives_fewer_tokens steps around, pinned:
    vLLM's batch defaults jump at 70 GiB, and the bigger profiling peak can cost tokens."""
    s = SPECS["deepseek-v2-lite"]
    small, big = (fit(s, FitRequest(gpu_memory_gib=g, max_model_len=4096,
                                    gpu_memory_utilization=0.5), profile()) for g in (64, 70))
    assert (small.max_num_seqs, big.max_num_seqs) == (256, 1024)
    assert big.kv_cache_tokens < small.kv_cache_tokens


def test_tp_must_split_the_kv_heads_as_vllm_splits_them():
    """phi-4 has 40 query heads and 10 KV heads: vLLM's QKVParallelLinear divides the KV heads
    by TP (or TP by them, above them), so TP 4 and 8 fail at load ("10 is not divisible by
    4") although 40 divides by both. fit accepted them, and the ranking laid them out."""
    from advisor.core.layouts import tp_sizes

    phi = SPECS["phi-4"]
    assert [t for t in (1, 2, 4, 8, 16) if phi.splits_over(t)] == [1, 2]
    assert tp_sizes(phi, 8) == [1, 2]
    with pytest.raises(UserInputError, match="does not divide the 10 KV heads") as e:
        fit(phi, FitRequest(gpu_memory_gib=22.0, gpu_name="L4", tp=4, max_model_len=8192),
            profile())
    assert "1, 2" in (e.value.hint or "")
    llama = SPECS["llama-3.1-8b"]  # 8 KV heads: TP 16 keeps two replicas of each
    assert llama.splits_over(16) and not llama.splits_over(3)


def test_tp_must_leave_whole_quantization_groups_per_gpu():
    """vLLM shards a row-parallel layer's input by TP and a group-quantized checkpoint needs
    whole groups per GPU: Qwen2-72B-AWQ's 29568-wide MLP at TP 8 is vllm-project/vllm #5675
    ("The input size is not aligned with the quantized weight shape"); the padded 29696 of
    Qwen's published AWQ export splits. Block-fp8 experts of 1536 (Qwen3-235B-A22B-FP8,
    MiniMax-M2.5) leave 192 per GPU at TP 8: InferenceX ran MiniMax-M2.5 at TP 8 only with
    --enable-expert-parallel (benchmarks/perf/README.md item 14), which advisor lays out there."""
    import json
    from pathlib import Path

    from advisor.core.layouts import tp_sizes

    base = dict(CAT.model_configs["qwen2.5-72b"])
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128}
    raw = spec_from_config({**base, "quantization_config": awq}, "awq")
    padded = spec_from_config({**base, "intermediate_size": 29696,
                               "quantization_config": awq}, "awq-padded")
    assert [t for t in (1, 2, 4, 8) if raw.tp_problem(t) is None] == [1]
    assert "3696 of the MLP intermediate size 29568" in raw.tp_problem(8)
    assert [t for t in (1, 2, 4, 8) if padded.tp_problem(t) is None] == [1, 2, 4, 8]
    assert SPECS["qwen2.5-72b"].tp_problem(8) is None  # bf16: no groups
    with pytest.raises(UserInputError, match="128-wide quantization groups"):
        fit(raw, FitRequest(gpu_memory_gib=44.0, gpu_name="L40S", tp=8, max_model_len=8192),
            profile())
    root = Path(__file__).resolve().parents[1] / "benchmarks" / "perf" / "configs"
    for name in ("Qwen--Qwen3-235B-A22B-FP8.json", "MiniMaxAI--MiniMax-M2.5.json"):
        s = spec_from_config(json.loads((root / name).read_text()), name)
        assert (s.quantization.group_size, s.quantization.block_n) == (128, 128)
        # TP alone cannot split them at 8; with expert parallelism (whole experts per GPU)
        # vLLM can, and the layouts use it there only (tests/test_expert_parallel.py)
        assert "192 of the expert intermediate size 1536" in s.tp_problem(8)
        assert [t for t in (2, 4, 8) if s.expert_parallel_at(t)] == [8]
        assert tp_sizes(s, 8) == [1, 2, 4, 8]


def test_the_large_moe_aliases_fit_where_they_are_served():
    """gpt-oss-120b: OpenAI's model card says it runs on one 80 GB GPU, and InferenceX ran it
    at TP 1 on B200 (benchmarks/perf/silicon_rows.json); it does not fit one 48 GB L40S.
    DeepSeek-R1/V3 (671B, block fp8): one 8 x H200 node at TP 8 (vLLM's own recipe), not
    8 x H100 (HabanaAI/vllm-fork #809 logs 79.41 GiB of weights per device at TP 8; ours is the
    CUDA layout, so only a loose check); the MLA cache keeps one latent per token and layer:
    (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes x 61 layers."""
    assert advisor.fit("gpt-oss-120b", "H100-SXM", tp=1, max_model_len=8192)[0].fits
    assert advisor.fit("gpt-oss-120b", "B200", tp=1, max_model_len=2048)[0].fits
    assert not advisor.fit("gpt-oss-120b", "L40S", tp=1, max_model_len=8192)[0].fits
    for alias in ("deepseek-r1", "deepseek-v3"):
        h200, _, _ = advisor.fit(alias, "H200", tp=8, max_model_len=32768)
        assert h200.fits and h200.kv_bytes_per_token == (512 + 64) * 2 * 61
        assert abs(h200.weights_gib / 79.41 - 1) < 0.02
        assert not advisor.fit(alias, "H100-SXM", tp=8, max_model_len=8192)[0].fits


def test_an_mla_models_kv_blocks_are_the_size_its_mla_kernel_pages_by():
    """vLLM 0.11.0 forces the block size of an MLA model: 64 for FlashMLA (9.x), 128 for
    CUTLASS MLA (exactly 10.0), the default 16 for Triton MLA elsewhere (the lock test reads
    check_and_update_config). The KV tokens are whole blocks; the 0.19.0 H100 log of
    DeepSeek-V2-Lite (benchmarks/accuracy) counts them in 16s, so the rule is 0.11's."""
    for gpu, block in (("H200", 64), ("H100-SXM", 64), ("B200", 128), ("B300", 16),
                       ("L40S", 16), ("RTX-PRO-6000", 16)):
        f, _, _ = advisor.fit("deepseek-v2-lite", gpu, max_model_len=8192)
        assert f.block_size == block and f.kv_cache_tokens % block == 0, gpu
    later, _, _ = advisor.fit("deepseek-v2-lite", "H100-SXM", max_model_len=8192,
                              vllm_version="0.19.0")
    assert later.block_size == 16
    dense, _, _ = advisor.fit("llama-3.1-8b", "H200", max_model_len=8192)
    assert dense.block_size == 16
