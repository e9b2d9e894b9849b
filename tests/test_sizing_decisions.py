"""Pinned numbers of the memory fit, each computed here by hand from vLLM's accounting (see
core/engine.py for the sources) and the model's config.json in the small test catalog:

* KV heads when TP exceeds them: each rank keeps one (vLLM: num_kv_head_replicas =
  tp // num_kv_heads), so KV bytes per token stop shrinking and the K/V projection is replicated;
* hybrid sliding-window models: KV cache groups of the smallest attention kind's layer count
  (vllm/v1/core/kv_cache_utils.py), one block table per group, a sliding group needing only
  ceil(min(window - 1 + batched tokens, max_len) / block) + 1 blocks per request;
* the rest of the fit: weights per stage, activation peak, budget, blocks and concurrency.

fixture-gemma3-1b: 26 layers, hidden 1152, 4 heads, 1 KV head, head_dim 256, intermediate 6912,
vocab 262144 (already a multiple of 64), 32768 positions, no rope scaling, window 512 with one
global layer in six (layers 5, 11, 17, 23), tied embeddings (Gemma's default), bfloat16.
"""

from __future__ import annotations

import math

import pytest

from advisor import UserInputError
from advisor.core.engine import GIB, profile
from advisor.core.model import spec_from_config
from advisor.core.sizing import (
    FitRequest,
    activation_gib,
    cuda_graph_gib,
    fit,
    kv_capacity,
    kv_heads_per_gpu,
    kv_layout,
    max_len_limit,
    resolve_dtype,
    stage_layers,
    weights_per_gpu,
)
from tests.small_catalog import small_catalog

CAT = small_catalog()
G3 = spec_from_config(CAT.model_configs["fixture-gemma3-1b"], "fixture-gemma3-1b")
LLAMA = spec_from_config(CAT.model_configs["llama-3-8b"], "llama-3-8b")  # 32/8 heads, d 128
GEMMA2 = spec_from_config(CAT.model_configs["gemma-2-9b"], "gemma-2-9b")  # 42 layers, 1:1
NEW, OLD = profile("0.11.0"), profile("0.9.0")  # with and without the hybrid KV allocator


def spec(**cfg):
    base = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512,
            "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 1000}
    return spec_from_config({**base, **cfg}, "hand")


# -- KV heads and TP ------------------------------------------------------------------------------
@pytest.mark.parametrize("tp,heads,per_token", [
    # 2 (K and V) x KV heads on one rank x head_dim 128 x 2 bytes x 32 layers
    (1, 8, 2 * 8 * 128 * 2 * 32),    # 131072
    (2, 4, 2 * 4 * 128 * 2 * 32),    # 65536
    (4, 2, 2 * 2 * 128 * 2 * 32),    # 32768
    (8, 1, 2 * 1 * 128 * 2 * 32),    # 16384
    (16, 1, 2 * 1 * 128 * 2 * 32),   # TP 16 > 8 KV heads: one replicated head per rank, 16384
    (32, 1, 2 * 1 * 128 * 2 * 32),
])
def test_llama_kv_bytes_per_token_by_tp(tp, heads, per_token):
    assert kv_heads_per_gpu(LLAMA, tp) == heads
    r = fit(LLAMA, FitRequest(gpu_memory_gib=80, gpu_name="H100", tp=tp, max_model_len=8192),
            NEW)
    assert r.kv_bytes_per_token == per_token
    replica_note = f"TP {tp} > 8 KV heads: each GPU keeps a replica"
    assert (replica_note in r.notes) == (tp > 8)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_single_kv_head_is_kept_whole_on_every_rank(tp):
    # 2 x 1 head x 256 x 2 bytes x 26 layers = 26624 at every TP; fp8: 1 byte, 13312
    assert kv_heads_per_gpu(G3, tp) == 1
    r = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="L4", tp=tp, max_model_len=8192), NEW)
    assert r.kv_bytes_per_token == 2 * 1 * 256 * 2 * 26 == 26624
    fp8 = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="L4", tp=tp, max_model_len=8192,
                             kv_cache_dtype="fp8"), NEW)
    assert fp8.kv_bytes_per_token == 13312 and fp8.kv_cache_dtype == "fp8"
    assert any("KV heads: each GPU keeps a replica" in n for n in r.notes) == (tp > 1)


def test_weights_keep_the_kv_projection_whole_when_tp_exceeds_kv_heads():
    h, heads, d, inter, layers = 1152, 4, 256, 6912, 26
    for tp in (1, 2, 4):
        q_o = 2 * h * heads * d / tp   # q_proj and o_proj, split
        kv = 2 * h * 1 * d             # k_proj and v_proj: the single head on every rank
        mlp = 3 * h * inter / tp       # gate, up, down
        norms = 2 * h
        per_layer = (q_o + kv + mlp) * 2 + norms * 2
        rotary = 32768 * d * 2         # cos/sin cache over max_position_embeddings
        embed = 262144 * h / tp * 2    # vocab-parallel embedding; tied: no lm_head at PP 1
        final_norm = h * 2
        expected = per_layer * layers + rotary + embed + final_norm
        assert weights_per_gpu(G3, tp, 1, 2.0) == [expected], tp
    assert weights_per_gpu(G3, 2, 1, 2.0) == [1_031_986_432]


def test_pipeline_stages_split_layers_and_place_embeddings():
    assert stage_layers(26, 4) == [range(0, 6), range(6, 12), range(12, 19), range(19, 26)]
    assert stage_layers(32, 3) == [range(0, 10), range(10, 21), range(21, 32)]
    assert stage_layers(32, 1) == [range(0, 32)]
    # llama-3-8b at PP 2, bf16: per layer q,o 2 x 4096 x 32 x 128, k,v 2 x 4096 x 8 x 128,
    # MLP 3 x 4096 x 14336, two norms of 4096 -> 436,224,000 bytes
    layer = (2 * 4096 * 32 * 128 + 2 * 4096 * 8 * 128 + 3 * 4096 * 14336 + 2 * 4096) * 2
    assert layer == 436_224_000
    rotary = 8192 * 128 * 2
    embed = 128256 * 4096 * 2
    first = 16 * layer + rotary + embed                 # embedding on the first stage
    last = 16 * layer + rotary + 4096 * 2 + embed       # final norm and lm_head on the last
    assert weights_per_gpu(LLAMA, 1, 2, 2.0) == [first, last]
    # a tied lm_head is the embedding itself at PP 1, its own copy on the last stage at PP 2
    g1 = weights_per_gpu(G3, 1, 1, 2.0)[0]
    g2 = weights_per_gpu(G3, 1, 2, 2.0)
    assert g2[0] + g2[1] == g1 + 32768 * 256 * 2 + 262144 * 1152 * 2
    assert g2[1] - g2[0] == 1152 * 2  # 13 layers each; the last adds the final norm


# -- hybrid sliding window ---------------------------------------------------------------------
def test_one_global_layer_in_six():
    assert [i for i, k in enumerate(G3.layer_kinds) if k == "full"] == [5, 11, 17, 23]
    assert G3.is_hybrid and G3.sliding_window == 512
    # 4 full and 22 sliding layers: groups of 4, one full group and ceil(22 / 4) = 6 sliding
    assert kv_layout(G3, list(range(26)), NEW) == (4, ["full"] + ["sliding"] * 6)
    # before the hybrid allocator every layer shares one block table of full attention
    assert kv_layout(G3, list(range(26)), OLD) == (26, ["full"])
    # gemma-2: alternating, 21 and 21: two groups of 21
    assert kv_layout(GEMMA2, list(range(42)), NEW) == (21, ["full", "sliding"])
    # a PP stage of the sliding layers only is one group whatever the engine
    assert kv_layout(G3, [0, 1, 2, 3, 4], NEW) == (5, ["sliding"])
    assert kv_layout(G3, [0, 1, 2, 3, 4], OLD) == (5, ["sliding"])
    assert kv_layout(LLAMA, list(range(32)), NEW) == (32, ["full"])


@pytest.mark.parametrize("max_len,batched,per_request", [
    # full group: ceil(8192 / 16) = 512; each sliding group: ceil(min(511 + 2048, 8192) / 16)
    # + 1 = ceil(2559 / 16) + 1 = 161; 512 + 6 x 161 = 1478
    (8192, 2048, 512 + 6 * 161),
    # 511 + 2049 = 2560 -> exactly 160 blocks, + 1 = 161
    (8192, 2049, 512 + 6 * 161),
    # 511 + 2050 = 2561 -> ceil 161, + 1 = 162
    (8192, 2050, 512 + 6 * 162),
    # the window never needs more than max_len: min(2559, 1024) = 1024 -> 64 + 1
    (1024, 2048, 64 + 6 * 65),
])
def test_hybrid_blocks_per_request_and_capacity(max_len, batched, per_request):
    per_layer = 2 * 1 * 256 * 2  # bytes per token per layer
    # 1 GiB: blocks of 16 tokens x 1024 B shared by the 4 layers of a group
    blocks = GIB // (16 * per_layer * 4)
    assert blocks == 16384
    got = kv_capacity(G3, 1.0, list(range(26)), per_layer, NEW, max_len, batched)
    # "GPU KV cache size": the blocks shared out over the 7 groups, in tokens
    assert got == (16384, 16384 // 7 * 16, 16384 / per_request, per_request)
    # without the hybrid allocator: 26 layers per block, full attention everywhere
    old = kv_capacity(G3, 1.0, list(range(26)), per_layer, OLD, max_len, batched)
    old_blocks = GIB // (16 * per_layer * 26)
    assert old_blocks == 2520
    assert old == (2520, 2520 * 16, 2520 / math.ceil(max_len / 16), math.ceil(max_len / 16))


def test_all_sliding_model_needs_only_the_window():
    # Mistral v0.1 style: every layer slides (window 4096); one group of 4 layers
    s = spec(sliding_window=4096, max_position_embeddings=32768)
    assert set(s.layer_kinds) == {"sliding"} and not s.is_hybrid
    per_layer = 2 * 8 * 64 * 2
    # ceil(min(4095 + 2048, 8192) / 16) + 1 = ceil(6143 / 16) + 1 = 385
    assert kv_capacity(s, 1.0, [0, 1, 2, 3], per_layer, NEW, 8192, 2048)[3] == 385
    assert kv_capacity(s, 1.0, [0, 1, 2, 3], per_layer, OLD, 8192, 2048)[3] == 385
    # less than one block of memory is no block at all
    assert kv_capacity(s, 1e-6, [0, 1, 2, 3], per_layer, NEW, 8192, 2048)[:2] == (0, 0)
    assert kv_capacity(s, -1.0, [0, 1, 2, 3], per_layer, NEW, 8192, 2048)[:3] == (0, 0, 0.0)


def expected_gemma3_fit(engine, max_len: int, gpu_gib: float = 24, util: float = 0.9):
    """(num_blocks, kv GiB) of fixture-gemma3-1b on one GPU, by hand."""
    weights = weights_per_gpu(G3, 1, 1, 2.0)[0]  # pinned by hand above
    assert weights == 2_016_402_688
    # the profiling peak: 0.0525 GiB + the dummy run's 2048 tokens (an L4) x 1152 wide x 2
    # bytes + 256 sequences x 262144 vocab x 38.06 bytes
    act = (engine.activation_base_gib + 2048 * 1152 * 2 / GIB
           + 256 * 262144 * engine.sampler_bytes_per_seq_vocab / GIB)
    assert (engine.activation_base_gib, engine.sampler_bytes_per_seq_vocab) == (0.0525, 38.06)
    # non-torch memory at TP 1, no NCCL: 0.13 GiB from 0.11, 0.25 before 0.10 (engine rules)
    nt = {"0.11.0": 0.13, "0.9.0": 0.25}[engine.version]
    kv_gib = gpu_gib * util - weights / GIB - act - nt
    group = 4 if engine.hybrid_kv_allocator else 26
    return int((kv_gib * GIB) // (16 * 1024 * group)), kv_gib, act


@pytest.mark.parametrize("engine", [NEW, OLD], ids=["hybrid", "no-hybrid"])
def test_hybrid_fit_on_an_l4(engine):
    r = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="NVIDIA L4", max_model_len=8192), engine)
    blocks, kv_gib, act = expected_gemma3_fit(engine, 8192)
    assert r.activation_gib == round(act, 4)
    assert r.budget_gib == 21.6 and r.non_torch_gib == engine.non_torch_gib
    assert r.cuda_graph_gib == 0.36 and not r.cuda_graph_charged  # 0.1 + 0.01 x 26 layers
    assert r.kv_cache_gib == round(kv_gib, 4)
    assert (r.max_num_batched_tokens, r.max_num_seqs) == (2048, 256)  # a GPU under 70 GiB
    assert r.num_blocks == blocks
    if engine.hybrid_kv_allocator:
        assert r.kv_cache_tokens == blocks // 7 * 16
        assert r.max_concurrency == round(blocks / 1478, 2)
        assert (f"hybrid KV cache: 7 groups (full, {', '.join(['sliding'] * 6)}), sliding "
                "window 512") in r.notes
    else:
        assert r.kv_cache_tokens == blocks * 16
        assert r.max_concurrency == round(blocks / 512, 2)
        assert not any("hybrid" in n for n in r.notes)
    assert r.fits


def test_fits_exactly_at_one_request():
    # memory for exactly one 8192-token request (1478 blocks of 4 layers x 16 tokens x 1024 B)
    # plus half a block: fits at concurrency 1.00; one block less does not
    _, kv_gib, _ = expected_gemma3_fit(NEW, 8192)
    base = 24 * 0.9 - kv_gib  # weights, activation and non-torch memory
    block = 16 * 1024 * 4 / GIB
    at_one = fit(G3, FitRequest(gpu_memory_gib=base + (1478 + 0.5) * block,
                                gpu_memory_utilization=1.0, gpu_name="L4",
                                max_model_len=8192), NEW)
    assert (at_one.num_blocks, at_one.max_concurrency, at_one.fits) == (1478, 1.0, True)
    short = fit(G3, FitRequest(gpu_memory_gib=base + (1477 + 0.5) * block,
                               gpu_memory_utilization=1.0, gpu_name="L4",
                               max_model_len=8192), NEW)
    assert (short.num_blocks, short.fits) == (1477, False)
    # a block holds 16 tokens of each of the 7 KV cache groups: not "16 tokens short"
    assert short.notes[0] == ("does not fit: one 8192-token request needs 1478 KV blocks, 1477 "
                              "fit (KV cache groups: 1 full, 6 sliding)")
    longest = int(short.notes[1].split("max_model_len of ")[1].split()[0])
    assert fit(G3, FitRequest(gpu_memory_gib=base + (1477 + 0.5) * block,
                              gpu_memory_utilization=1.0, gpu_name="L4",
                              max_model_len=longest), NEW).fits


def test_more_gpus_add_nccl_and_cuda_graphs_from_0_21():
    r = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="L4", tp=2, max_model_len=8192), NEW)
    # 0.13 at TP 1 + NCCL's 342 MB at TP 2 (aiconfigurator's nccl_mem) + 0.07 of vLLM 0.11
    assert r.non_torch_gib == round(0.13 + 358612992 / GIB + 0.07, 4) == 0.534
    # PP alone adds no all-reduce buffers: the TP 1 figure
    staged = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="L4", pp=2, max_model_len=8192),
                 NEW)
    assert staged.non_torch_gib == 0.13
    assert staged.cuda_graph_gib == 0.23  # 13 layers on the stage: 0.1 + 0.13
    new = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="L4", max_model_len=8192),
              profile("0.21.0"))
    _, kv_gib, act = expected_gemma3_fit(NEW, 8192)
    # 0.21 charges the graphs, its sampler peak is 10.83 bytes per sequence x vocab entry, and
    # its TP 1 non-torch memory is 0.25 GiB (0.13 in 0.11)
    act21 = 0.0525 + 2048 * 1152 * 2 / GIB + 256 * 262144 * 10.83 / GIB
    assert new.activation_gib == round(act21, 4)
    assert new.cuda_graph_charged and new.kv_cache_gib == round(
        kv_gib + act - act21 - 0.36 - (0.25 - 0.13), 4)
    # big GPUs that are not A100s get the bigger batch defaults from 0.10
    big = fit(G3, FitRequest(gpu_memory_gib=80, gpu_name="H100", max_model_len=8192), NEW)
    assert (big.max_num_batched_tokens, big.max_num_seqs) == (8192, 1024)
    a100 = fit(G3, FitRequest(gpu_memory_gib=80, gpu_name="NVIDIA A100", max_model_len=8192),
               NEW)
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    llm = fit(G3, FitRequest(gpu_memory_gib=80, gpu_name="H100", max_model_len=8192,
                             entrypoint="llm"), NEW)
    assert (llm.max_num_batched_tokens, llm.max_num_seqs) == (16384, 1024)


def test_the_worst_stage_decides():
    # llama-3-8b at PP 2: the last stage carries the lm_head besides its 16 layers
    r = fit(LLAMA, FitRequest(gpu_memory_gib=80, gpu_name="H100", pp=2, max_model_len=8192),
            NEW)
    assert r.weights_gib == round(weights_per_gpu(LLAMA, 1, 2, 2.0)[1] / GIB, 4)
    assert r.kv_bytes_per_token == 2 * 8 * 128 * 2 * 16
    # 26 layers over 4 stages: 6, 6, 7, 7; tied gemma: the stages' extras decide the rest
    r4 = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="L4", pp=4, max_model_len=8192), NEW)
    assert r4.weights_gib == round(max(weights_per_gpu(G3, 1, 4, 2.0)) / GIB, 4)


# -- the other formulas -------------------------------------------------------------------------
def test_activation_peak_formula():
    """base + the dummy run's hidden states (tokens x hidden x dtype bytes) + max_num_seqs x
    vocab x the release's sampler bytes (engine rules), MoE on top."""
    # vLLM 0.11: 0.0525 GiB + 2048 x 4096 x 2 B + 256 x 128256 x 38.06 B
    width = 2048 * 4096 * 2 / GIB
    assert activation_gib(LLAMA, NEW, 2048, 1, 2.0, 256) == pytest.approx(
        0.0525 + width + 256 * 128256 * 38.06 / GIB, abs=1e-12)
    # the logits are fp32 whatever the model's dtype: only the hidden states double in fp32
    assert activation_gib(LLAMA, NEW, 2048, 1, 4.0, 256) - activation_gib(
        LLAMA, NEW, 2048, 1, 2.0, 256) == pytest.approx(width)
    # four times the sequences, four times the sampler's share
    four = activation_gib(LLAMA, NEW, 2048, 1, 2.0, 1024) - 0.0525 - width
    assert four == pytest.approx(
        4 * (activation_gib(LLAMA, NEW, 2048, 1, 2.0, 256) - 0.0525 - width))
    # the releases' sampler bytes: 38.06 to 0.16, 14.51 from 0.17, 10.83 from 0.21
    for version, per in (("0.16.0", 38.06), ("0.17.0", 14.51), ("0.19.0", 14.51),
                         ("0.21.0", 10.83)):
        assert profile(version).sampler_bytes_per_seq_vocab == per, version
    # width enters through the dummy run's hidden states: at vLLM 0.19's 8192 tokens a 70B
    # (8192 wide) peaks 8192 x 4096 x 2 B = 0.0625 GiB above an 8B of the same vocabulary,
    # the 0.07 GiB the 0.19 logs show (Llama-3.3-70B 1.96 vs Llama-3.1-8B 1.89)
    wide = spec(hidden_size=8192, num_attention_heads=64, vocab_size=128256)
    v19 = profile("0.19.0")
    assert activation_gib(wide, v19, 8192, 1, 2.0, 1024) - activation_gib(
        LLAMA, v19, 8192, 1, 2.0, 1024) == pytest.approx(0.0625)
    assert round(activation_gib(LLAMA, v19, 8192, 1, 2.0, 1024), 2) == 1.89
    assert round(activation_gib(wide, v19, 8192, 1, 2.0, 1024), 2) == 1.95
    # MoE: tokens x top-k x (3 x expert width / TP + hidden) x bytes, on top of the dense part
    moe = spec(num_local_experts=8, num_experts_per_tok=2, moe_intermediate_size=1024,
               hidden_size=4096, vocab_size=32000)
    dense = 0.0525 + width + 256 * 32000 * 38.06 / GIB
    extra = 2048 * 2 * (3 * 1024 / 2 + 4096) * 2 / GIB
    assert activation_gib(moe, NEW, 2048, 2, 2.0, 256) == pytest.approx(dense + extra,
                                                                        abs=1e-12)


def test_cuda_graph_memory():
    assert cuda_graph_gib(32, False) == 0.42
    assert cuda_graph_gib(26, False) == 0.36
    assert cuda_graph_gib(26, True) == 0.0


@pytest.mark.parametrize("cfg,limit", [
    # vLLM's _get_and_verify_max_len: max_position_embeddings x factor, yarn from its original
    ({"max_position_embeddings": 32768}, 32768),
    # yarn without original_max_position_embeddings: transformers takes max_position_embeddings
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 32.0}},
     131072),
    # DeepSeek-V2 stores the extended length and the original: 4096 x 40
    ({"max_position_embeddings": 163840, "rope_scaling": {
        "type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}}, 163840),
    # Qwen2.5 / Qwen3 with YaRN switched on: 32768 x 4, not 4 x 4096 (issue 16)
    ({"max_position_embeddings": 32768, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
     131072),
    ({"max_position_embeddings": 40960, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
     131072),
    ({"max_position_embeddings": 2048, "rope_scaling": {"type": "linear", "factor": 2.0}},
     4096),    # 2048 x 2
    ({"max_position_embeddings": 2048, "rope_scaling": {"type": "dynamic", "factor": 0.5}},
     1024),    # 2048 x 0.5, as vLLM computes it
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3",
                                                          "factor": 8.0}}, 131072),
    # llama3 scaling does not extend the limit: the config states it
    ({"max_position_embeddings": 8192, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
     8192),
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "longrope",
                                                        "factor": 32.0}}, 4096),
    # a yarn block without a factor extends nothing
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn"}}, 4096),
    # none stated: LlamaConfig's default max_position_embeddings, as vLLM reads the file
    ({}, 2048),
    ({"n_positions": 8192, "max_position_embeddings": 4096}, 4096),  # the smallest key wins
    ({"model_max_length": 65536, "max_position_embeddings": 4096}, 65536),  # Command-R's
    # a tokenizer-style 1e30 model_max_length wins too, and bounds nothing
    ({"model_max_length": 10**30, "max_position_embeddings": 4096}, None),
    ({"max_seq_len": 2048, "model_type": "mpt"}, 2048),
    # no key and no class to default from: vLLM takes --max-model-len as given
    ({"model_type": ""}, None),
])
def test_longest_context(cfg, limit):
    assert max_len_limit(spec(**cfg)) == limit


def test_dtype_and_guards():
    assert resolve_dtype(spec(torch_dtype="float32"), "auto") == "bfloat16"
    assert resolve_dtype(spec(torch_dtype="float16"), "auto") == "float16"
    assert resolve_dtype(spec(torch_dtype="float32"), "float32") == "float32"
    half = FitRequest(gpu_memory_gib=24, gpu_name="L4", max_model_len=4096)
    f32 = fit(spec(torch_dtype="float32", max_position_embeddings=4096), half, NEW)
    assert f32.dtype == "bfloat16" and f32.kv_bytes_per_token == 2 * 8 * 64 * 2 * 4
    ok = {"gpu_memory_gib": 24.0, "gpu_name": "L4"}
    for util in (0.0, -0.5, 1.01):
        with pytest.raises(UserInputError, match="outside"):
            fit(G3, FitRequest(**ok, gpu_memory_utilization=util, max_model_len=4096), NEW)
    assert fit(G3, FitRequest(**ok, gpu_memory_utilization=1.0, max_model_len=4096), NEW).fits
    with pytest.raises(UserInputError, match="does not divide"):
        fit(G3, FitRequest(**ok, tp=8, max_model_len=4096), NEW)
    with pytest.raises(UserInputError, match="exceeds the 26 layers"):
        fit(G3, FitRequest(**ok, pp=27, max_model_len=4096), NEW)
    assert fit(G3, FitRequest(**ok, pp=26, max_model_len=4096), NEW).pp == 26
    with pytest.raises(UserInputError, match="exceeds"):
        fit(G3, FitRequest(**ok, max_model_len=32769), NEW)
    assert fit(G3, FitRequest(**ok, max_model_len=32768), NEW).max_model_len == 32768
    assert fit(G3, FitRequest(**ok), NEW).max_model_len == 32768  # the model's own limit


# -- weights of the other layer shapes, by hand (one layer, TP 2, bf16 unless said) ---------------
def _one_layer_cfg(**cfg):
    return {"num_hidden_layers": 1, "hidden_size": 512, "num_attention_heads": 8,
            "intermediate_size": 1024, "vocab_size": 1000, "max_position_embeddings": 4096,
            **cfg}


def one_layer(**cfg):
    return spec(**_one_layer_cfg(**cfg))


# shared by every case below: rotary 4096 x head_dim 64 x 2, embedding and an untied lm_head of
# the padded vocabulary 1024 x 512 / TP 2 x 2 bytes, the final norm 512 x 2
ROTARY, EMBED, FINAL = 4096 * 64 * 2, 1024 * 512 // 2 * 2, 512 * 2


def test_attention_bias_is_split_with_the_heads():
    s = one_layer(model_type="qwen2", num_key_value_heads=2)  # Qwen2: q/k/v biases
    q_o = 2 * 512 * 8 * 64 / 2           # q_proj and o_proj over 2 ranks
    kv = 2 * 512 * 1 * 64                # k_proj and v_proj: 2 KV heads / TP 2 = 1 per rank
    bias = (8 + 2 * 2) * 64 / 2          # q, k and v biases: 768 over 2 ranks
    mlp = 3 * 512 * 1024 / 2
    layer = (q_o + kv + bias + mlp) * 2 + 2 * 512 * 2
    assert weights_per_gpu(s, 2, 1, 2.0) == [layer + ROTARY + EMBED + FINAL + EMBED]
    assert weights_per_gpu(s, 2, 1, 2.0) == [3_804_928]


def test_mixture_of_experts_weights():
    s = one_layer(model_type="mixtral", num_key_value_heads=8, num_local_experts=4,
                  num_experts_per_tok=2)
    attn = (2 * 512 * 8 * 64 / 2 + 2 * 512 * 4 * 64) * 2
    experts = 4 * 3 * 512 * 1024             # every expert, split over the ranks
    router = 512 * 4                          # replicated, kept in 16 bits
    moe = experts / 2 * 2 + router * 2
    layer = attn + moe + 2 * 512 * 2
    assert weights_per_gpu(s, 2, 1, 2.0) == [layer + ROTARY + EMBED + FINAL + EMBED]
    assert weights_per_gpu(s, 2, 1, 2.0) == [8_920_064]
    # fp8 covers every linear layer: attention and experts at 1 byte, the router at 16 bits
    fp8 = spec_from_config({**_one_layer_cfg(model_type="mixtral", num_key_value_heads=8,
                                             num_local_experts=4, num_experts_per_tok=2)},
                           "hand", quantization="fp8")
    layer8 = attn / 2 + experts / 2 * 1 + router * 2 + 2 * 512 * 2
    assert weights_per_gpu(fp8, 2, 1, 2.0) == [layer8 + ROTARY + EMBED + FINAL + EMBED]
    # mxfp4 covers the experts only (4.25 bits a weight): attention stays at 16 bits
    mx = spec_from_config({**_one_layer_cfg(model_type="mixtral", num_key_value_heads=8,
                                            num_local_experts=4, num_experts_per_tok=2),
                           "quantization_config": {"quant_method": "mxfp4"}}, "hand")
    layer4 = attn + experts / 2 * (4.25 / 8) + router * 2 + 2 * 512 * 2
    assert weights_per_gpu(mx, 2, 1, 2.0) == [layer4 + ROTARY + EMBED + FINAL + EMBED]


def test_shared_experts_are_split_like_the_dense_layers():
    s = one_layer(model_type="qwen2_moe", num_key_value_heads=8, num_experts=4,
                  num_experts_per_tok=2, moe_intermediate_size=256,
                  shared_expert_intermediate_size=512)
    attn = (2 * 512 * 8 * 64 / 2 + 2 * 512 * 4 * 64) * 2 + (8 + 16) * 64 / 2 * 2  # + biases
    experts = 4 * 3 * 512 * 256
    router = 512 * 4
    shared = 3 * 512 * 512 + 512          # the shared expert and its sigmoid gate (Qwen2-MoE)
    layer = attn + experts / 2 * 2 + shared / 2 * 2 + router * 2 + 2 * 512 * 2
    assert weights_per_gpu(s, 2, 1, 2.0) == [layer + ROTARY + EMBED + FINAL + EMBED]


def test_mla_keeps_the_latent_projection_whole():
    s = one_layer(model_type="deepseek_v2", kv_lora_rank=64, qk_rope_head_dim=16,
                  qk_nope_head_dim=32, v_head_dim=32)
    q = 512 * 8 * (32 + 16)
    kv_a = 512 * (64 + 16)                 # kv_a_proj_with_mqa: replicated on every rank
    kv_b = 64 + 64 * 8 * (32 + 32)         # its norm and kv_b_proj: split
    o = 8 * 32 * 512
    attn = (q + kv_b + o) / 2 * 2 + kv_a * 2
    layer = attn + 3 * 512 * 1024 / 2 * 2 + 2 * 512 * 2
    rotary = 4096 * 16 * 2                 # the cos/sin cache of the rope part only
    assert weights_per_gpu(s, 2, 1, 2.0) == [layer + rotary + EMBED + FINAL + EMBED]
    assert weights_per_gpu(s, 2, 1, 2.0) == [3_198_016]
    r = fit(s, FitRequest(gpu_memory_gib=24, gpu_name="L4", tp=2, max_model_len=4096), NEW)
    assert r.kv_bytes_per_token == (64 + 16) * 2  # one latent per token, at any TP
    assert not any("KV heads" in n for n in r.notes)  # TP 2 > ... never said for MLA


def test_defaults_without_a_position_limit():
    s = spec(model_type="")  # no length key, and no config class to take a default from
    r = fit(s, FitRequest(gpu_memory_gib=24, gpu_name="L4"), NEW)
    assert r.max_model_len == 4096
    layer = (2 * 512 * 8 * 64 + 2 * 512 * 8 * 64 + 3 * 512 * 2048) * 2 + 2 * 512 * 2
    rotary = 4096 * 64 * 2                 # the cache is sized for 4096 positions then
    assert weights_per_gpu(s, 1, 1, 2.0) == [4 * layer + rotary + 2 * 1024 * 512 * 2 + 1024]


def test_reported_figures():
    # the budget to 4 decimals: 22589 MiB (an A10G as CUDA reports it) x 0.9 = 19.8536...
    r = fit(G3, FitRequest(gpu_memory_gib=22589 / 1024, gpu_name="A10G", max_model_len=8192),
            NEW)
    assert r.budget_gib == 19.8536
    # no room at all: the KV cache is 0, not negative
    big = spec_from_config(CAT.model_configs["qwen3-32b"], "qwen3-32b")
    miss = fit(big, FitRequest(gpu_memory_gib=24, gpu_name="L4", max_model_len=8192), NEW)
    assert (miss.kv_cache_gib, miss.num_blocks, miss.fits) == (0.0, 0, False)
    assert miss.notes[0].startswith("does not fit: weights and working memory exceed the budget")


@pytest.mark.parametrize("version,eager,noted", [
    ("0.11.0", False, True), ("0.11.0", True, False), ("0.21.0", False, False)])
def test_the_cuda_graph_note(version, eager, noted):
    r = fit(G3, FitRequest(gpu_memory_gib=24, gpu_name="L4", max_model_len=8192,
                           enforce_eager=eager), profile(version))
    note = (f"CUDA graphs (~0.36 GiB) are captured after the KV cache is allocated in vLLM "
            f"{version}: they come out of the 2.40 GiB outside the budget")
    assert (note in r.notes) == noted
    assert r.cuda_graph_gib == (0.0 if eager else 0.36)


def test_the_fit_reports_its_peak_and_offload_to_four_decimals():
    qwen_vocab = spec(vocab_size=151936, max_position_embeddings=8192)
    r = fit(qwen_vocab, FitRequest(gpu_memory_gib=24, gpu_name="NVIDIA L4", max_model_len=8192,
                                   cpu_offload_gib=1 / 30), NEW)
    act = 0.0525 + 2048 * 512 * 2 / GIB + 256 * 151936 * 38.06 / GIB  # 1.43315... GiB
    assert r.activation_gib == round(act, 4) != round(act, 5)
    assert r.cpu_offload_gib == 0.0333  # of 0.32 GiB of weights
