"""Qwen3-Next's Gated DeltaNet layers and Granite 4.0-H's Mamba-2 layers, sized as vLLM 0.11.0
sizes them.

tests/fixtures/configs/qwen3-next-80b-a3b.json is Qwen/Qwen3-Next-80B-A3B-Instruct's
config.json: 48 layers, every fourth full attention (16 query heads, 2 KV heads of 256, an output
gate), the other 36 Gated DeltaNet (16 key heads and 32 value heads of 128, a conv kernel of 4),
512 experts of 512 with top 10 and a shared expert of 512, bfloat16.

The numbers pinned here are computed by hand from vLLM's code (the comments give each step);
tests/test_lock_install.py runs vLLM's own code (HybridAttentionMambaModelConfig and
kv_cache_utils.get_kv_cache_configs) on the same file and compares, and its figures for the
case below are the ones this file pins as "vLLM logged".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor import UserInputError
from advisor.core import stepmodel
from advisor.core.engine import profile
from advisor.core.model import ModelConfigError, spec_from_config
from advisor.core.sizing import (
    FitRequest,
    fit,
    kv_bytes_per_token_per_layer,
    kv_capacity,
    kv_layout,
    linear_block_size,
    longest_fitting_len,
    weights_per_gpu,
)
from tests.small_catalog import small_catalog

CONFIG = json.loads((Path(__file__).parent / "fixtures" / "configs"
                     / "qwen3-next-80b-a3b.json").read_text())
Q3N = spec_from_config(CONFIG, "qwen3-next")
ENGINE = profile("0.11.0")
LAYERS = list(range(48))


def test_every_fourth_layer_is_attention_the_rest_gated_delta_net():
    assert Q3N.layer_kinds == ("linear", "linear", "linear", "full") * 12
    assert Q3N.attention_layers == 12 and Q3N.attn_output_gate
    la = Q3N.linear_attention
    assert (la.key_dim, la.value_dim, la.conv_dim) == (2048, 4096, 8192)
    # layer_types stated instead of the interval: the same layers
    stated = dict(CONFIG, layer_types=["linear_attention", "linear_attention",
                                       "linear_attention", "full_attention"] * 12)
    del stated["full_attention_interval"]
    assert spec_from_config(stated, "q").layer_kinds == Q3N.layer_kinds
    # neither: Qwen3NextConfig's default interval of 4
    neither = {k: v for k, v in CONFIG.items() if k != "full_attention_interval"}
    assert spec_from_config(neither, "q").layer_kinds == Q3N.layer_kinds


@pytest.mark.parametrize("tp,conv,temporal,state_bytes", [
    # conv: (kernel 4 - 1) x 8192 / TP channels; temporal: 32 / TP value heads x 128 x 128;
    # both bfloat16
    (1, 3 * 8192, 32 * 128 * 128, 2 * (3 * 8192 + 32 * 128 * 128)),   # 1,097,728
    (2, 3 * 4096, 16 * 128 * 128, 2 * (3 * 4096 + 16 * 128 * 128)),   # 548,864
    (4, 3 * 2048, 8 * 128 * 128, 2 * (3 * 2048 + 8 * 128 * 128)),     # 274,432
    (8, 3 * 1024, 4 * 128 * 128, 2 * (3 * 1024 + 4 * 128 * 128)),     # 137,216
])
def test_the_state_of_one_sequence_in_one_layer(tp, conv, temporal, state_bytes):
    la = Q3N.linear_attention
    assert la.state_elements(tp) == (conv, temporal)
    assert la.state_bytes(tp, 2.0) == state_bytes


@pytest.mark.parametrize("tp,kv_bytes,block", [
    # one token of one attention layer: 2 (K, V) x KV heads per GPU x 256 x bytes; 16 x
    # ceil(state / (16 x that)) (HybridAttentionMambaModelConfig)
    (1, 2.0, 16 * -(-1_097_728 // (16 * 2 * 2 * 256 * 2))),   # 16 x 34 = 544
    (2, 2.0, 16 * -(-548_864 // (16 * 2 * 1 * 256 * 2))),     # 544
    (4, 2.0, 16 * -(-274_432 // (16 * 2 * 1 * 256 * 2))),     # 272 (KV heads replicated)
    (8, 2.0, 16 * -(-137_216 // (16 * 2 * 1 * 256 * 2))),     # 144
    (4, 1.0, 16 * -(-274_432 // (16 * 2 * 1 * 256 * 1))),     # fp8 KV: 544
])
def test_the_attention_block_is_the_smallest_multiple_of_16_that_holds_a_state(
        tp, kv_bytes, block):
    assert block in (544, 272, 144)
    assert linear_block_size(Q3N, tp, kv_bytes, 2.0) == block


def test_the_kv_cache_is_what_vllm_logged_for_the_same_memory():
    """TP 4, max_model_len 32768, 20 GiB of KV memory: vLLM 0.11.0 logged "GPU KV cache size:
    436,832 tokens" and "Maximum concurrency for 32,768 tokens per request: 51.81x" with 6,425
    blocks (tests/test_lock_install.py). By hand: 4 groups of 12 layers (1 attention, 3
    DeltaNet); a block is 272 x 1,024 bytes in each of 12 layers; 20 GiB // (278,528 x 12) =
    6,425 blocks; 6,425 // 4 x 272 tokens; a 32k request needs ceil(32768 / 272) = 121 blocks
    of attention and one in each of the three state groups."""
    assert kv_layout(Q3N, LAYERS, ENGINE) == (12, ["full", "linear", "linear", "linear"])
    per_layer = kv_bytes_per_token_per_layer(Q3N, 4, 2.0)
    engine = ENGINE.model_copy(update={"block_size": 272})
    blocks, tokens, concurrency, per_request = kv_capacity(Q3N, 20.0, LAYERS, per_layer,
                                                           engine, 32768, 8192)
    assert (blocks, tokens, per_request) == (6425, 436_832, 124)
    assert round(concurrency, 2) == 51.81
    # a request shorter than one block: vLLM counts tokens at the state's block, max_model_len
    _, short_tokens, _, short_request = kv_capacity(Q3N, 20.0, LAYERS, per_layer, engine,
                                                    100, 8192)
    assert (short_tokens, short_request) == (6425 // 4 * 100, 4)


def _fit(tp=4, ctx=32768, kv="auto", gib=80.0, **kw):
    return fit(Q3N, FitRequest(gpu_memory_gib=gib, tp=tp, max_model_len=ctx,
                               kv_cache_dtype=kv, **kw), ENGINE)


def test_the_fit_counts_kv_only_on_attention_layers_and_says_why():
    r = _fit()
    assert r.block_size == 272 and r.kv_bytes_per_token == 12 * 2 * 1 * 256 * 2  # 12,288
    assert (r.kv_groups, r.state_groups) == (4, 3)
    note = next(n for n in r.notes if n.startswith("Gated DeltaNet"))
    assert "36 of 48 layers" in note and "272-token" in note and "prefix caching off" in note
    assert "0.26 MiB" in note  # 274,432 bytes
    assert any(n.startswith("risk: --gpu-memory-utilization 0.9") and "#26887" in n
               for n in r.notes)
    assert not any(n.startswith("risk:") for n in _fit(gpu_memory_utilization=0.85).notes)
    fp8 = _fit(kv="fp8")
    assert fp8.block_size == 544 and fp8.kv_bytes_per_token == 12 * 2 * 256


def test_sequences_held_are_counted_in_blocks_not_in_logged_tokens():
    """vLLM's "GPU KV cache size" counts every group at the attention block, so it quarters the
    blocks; a 1,152-token sequence takes ceil(1152 / 272) = 5 attention blocks and 3 state
    blocks, so the pool holds blocks // 8 of them, not tokens // 1152."""
    r = _fit()
    assert r.sequences_held(1152) == r.num_blocks // 8
    assert r.sequences_held(1152) > 2 * (r.kv_cache_tokens // 1152)
    # at max_model_len it is vLLM's own "Maximum concurrency", rounded down
    assert r.sequences_held(32768) == int(r.max_concurrency)
    # attention-only models keep the logged tokens' count
    llama = fit(spec_from_config(small_catalog().model_configs["llama-3-8b"], "llama-3-8b"),
                FitRequest(gpu_memory_gib=80.0, tp=4, max_model_len=4096), ENGINE)
    assert llama.state_groups == 0
    assert llama.sequences_held(1000) == llama.kv_cache_tokens // 1000


def test_a_context_too_long_for_the_blocks_gets_the_longest_that_fits():
    r = _fit(tp=8, ctx=262144, gib=40.0)
    assert r.fits  # 262,144 tokens need 1,821 attention blocks of 144, 3 state blocks
    engine = ENGINE.model_copy(update={"block_size": 144})
    longest = longest_fitting_len(Q3N, LAYERS, engine, 100, 262144, 8192)
    assert longest == (100 - 3) * 144  # the state groups take one block each


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_weights_per_gpu_split_the_delta_net_projections(tp):
    """Gated DeltaNet per layer: in_proj_qkvz 2048 x (2 x 2048 + 2 x 4096) + in_proj_ba
    2048 x 64 + out_proj 4096 x 2048 split by TP, conv1d 8192 x 4 and dt_bias 32 in bf16 and
    A_log 32 in fp32 split by TP, a 128-wide norm on every GPU."""
    la_layer = ((2048 * 12288 + 2048 * 64 + 4096 * 2048) * 2 + (8192 * 4 + 32) * 2 + 32 * 4) / tp \
        + 128 * 2
    one = weights_per_gpu(Q3N, tp, 1, 2.0)[0]
    # swapping one DeltaNet layer for an attention layer changes the total by the difference
    swapped = Q3N.model_copy(update={"layer_kinds": ("full",) + Q3N.layer_kinds[1:]})
    kvh = max(1, 2 // tp)
    attn_layer = (2048 * 16 * 256 * 2 + 16 * 256 * 2048) * 2 / tp + 2 * 2048 * kvh * 256 * 2
    assert weights_per_gpu(swapped, tp, 1, 2.0)[0] - one == pytest.approx(
        attn_layer - la_layer, rel=1e-9)


def test_parameters_are_those_transformers_builds():
    """transformers 4.57.6 builds 79,674,391,296 parameters from this config on the meta device
    (tests/test_lock_install.py); advisor counts 6,144 fewer: the q_norm and k_norm (256 each)
    of the 12 attention layers, which it leaves out for every model with them."""
    total = Q3N.param_counts()["total"]
    assert total == 79_674_391_296 - 12 * 2 * 256
    # active: 10 of 512 experts, the shared expert and its gate, attention and DeltaNet
    assert Q3N.param_counts()["active"] == 3_874_929_408 - 12 * 2 * 256


def test_tp_must_divide_the_linear_attention_heads():
    odd = spec_from_config({**CONFIG, "linear_num_key_heads": 6, "linear_num_value_heads": 12},
                           "odd")
    assert odd.tp_problem(2) is None
    assert odd.tp_problem(4) == "TP 4 does not divide the 6 linear-attention key heads"
    with pytest.raises(UserInputError, match="linear-attention key heads"):
        fit(odd, FitRequest(gpu_memory_gib=80.0, tp=4, max_model_len=4096), ENGINE)


def test_the_step_model_runs_attention_on_12_layers_and_delta_net_on_36():
    s = stepmodel.shape(Q3N, 4, 1, 2.0)
    assert (s.layers_full, s.layers_linear, s.layers_sliding) == (12, 36, 0)
    assert s.qkv_n == (16 * 2 / 4 + 2 * 1) * 256  # the output gate doubles the queries
    assert s.linear_proj == ((12288 / 4, 2048.0), (64 / 4, 2048.0), (2048.0, 4096 / 4))
    assert s.linear_state_bytes == 274_432
    k = stepmodel.kernels(advisor.load_catalog().gpus["H100-SXM"])
    alone = stepmodel.step_cost(Q3N, k, 4, 1, "auto", 2.0, 64, 4096.0)
    # the DeltaNet layers' own kernels are charged, more with more sequences to update
    assert stepmodel.linear_mixer_s(k, s, 64, 0) > 0
    assert stepmodel.linear_mixer_s(k, s, 256, 0) > stepmodel.linear_mixer_s(k, s, 64, 0)
    # as 48 attention layers the same step would read four times the KV cache
    as_attention = stepmodel.step_cost(
        Q3N.model_copy(update={"layer_kinds": ("full",) * 48, "linear_attention": None}),
        k, 4, 1, "auto", 2.0, 64, 4096.0)
    assert alone.attention < as_attention.attention


def test_the_cli_sizes_it(cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    r = cli("fit", "--model", str(path), "--gpu", "H100-SXM", "--tp", "4", "--ctx", "32768")
    assert r.exit_code == 0, r.stderr
    assert "blocks of 272" in r.stdout and "Gated DeltaNet" in r.stdout
    assert "12,288 bytes" in r.stdout


def test_perf_says_how_the_delta_net_is_timed_and_holds_sequences_by_blocks():
    from advisor.core.perf import Workload, estimate

    gpu = advisor.load_catalog().gpus["H100-SXM"]
    small = _fit(gib=gpu.memory_gib, ctx=8192, max_num_seqs=1024)
    # 600 sequences of 1024 + 128/2 tokens: the logged tokens hold fewer than the blocks do
    per_seq = 1024 + 128 * 0.5
    assert small.kv_cache_tokens // per_seq < 600 <= small.sequences_held(per_seq)
    est = estimate(Q3N, gpu, small, Workload(input_len=1024, output_len=128, concurrency=600))
    assert est.concurrency == 600  # none wait in the queue
    assert any(n.startswith("Gated DeltaNet layers") and "no kernel table" in n
               for n in est.notes)
    assert est.confidence is not None and "extrapolated" in str(est.confidence)


# -- Granite 4.0-H: Mamba-2 layers ------------------------------------------------------------
#: tests/fixtures/configs/granite-4.0-h-tiny.json: ibm-granite/granite-4.0-h-tiny's fields, 40
#: layers (attention at 5, 15, 25, 35), hidden 1536, 12 heads / 4 KV heads of 128, Mamba-2 with
#: 48 heads of 64, state 128, one group, expand 2, conv 4; 64 experts of 512 top 6 beside a
#: shared MLP of 1024; tied embeddings
GRANITE_CONFIG = json.loads((Path(__file__).parent / "fixtures" / "configs"
                             / "granite-4.0-h-tiny.json").read_text())
GH = spec_from_config(GRANITE_CONFIG, "granite-4.0-h-tiny")


def test_granite_hybrid_layers_and_mixer():
    assert GH.layer_kinds.count("linear") == 36 and GH.attention_layers == 4
    assert [i for i, k in enumerate(GH.layer_kinds) if k == "full"] == [5, 15, 25, 35]
    m = GH.linear_attention
    assert (m.intermediate, m.num_heads, m.head_dim, m.state_size) == (3072, 48, 64, 128)
    assert m.label == "Mamba-2" and not GH.attn_output_gate
    assert GH.moe.shared_intermediate_size == 1024 and GH.moe.num_experts == 64


@pytest.mark.parametrize("tp,conv,ssm", [
    # conv: 3 x (3072 + 2 x groups x 128) / TP, one group replicated to TP groups;
    # ssm: 48 / TP heads x 64 x 128 (MambaStateShapeCalculator.mamba2_state_shape)
    (1, 3 * (3072 + 2 * 1 * 128), 48 * 64 * 128),
    (2, 3 * (3072 + 2 * 2 * 128) // 2, 24 * 64 * 128),
    (4, 3 * (3072 + 2 * 4 * 128) // 4, 12 * 64 * 128),
])
def test_granite_state_replicates_its_one_group(tp, conv, ssm):
    assert GH.linear_attention.state_elements(tp) == (conv, ssm)


@pytest.mark.parametrize("tp,kv_bytes,block", [
    # attention: 2 x KV heads per GPU x 128 x bytes a token; 16 x ceil(state / (16 x that))
    (1, 2.0, 16 * -(-2 * (9984 + 393216) // (16 * 2 * 4 * 128 * 2))),  # 400
    (2, 2.0, 16 * -(-2 * (5376 + 196608) // (16 * 2 * 2 * 128 * 2))),  # 400
    (4, 1.0, 16 * -(-2 * (3072 + 98304) // (16 * 2 * 1 * 128 * 1))),  # 800
])
def test_granite_attention_block(tp, kv_bytes, block):
    assert block in (400, 800)
    assert linear_block_size(GH, tp, kv_bytes, 2.0) == block


def test_granite_parameters_are_those_transformers_builds():
    """transformers 4.57.6 builds 6,939,037,248 parameters from the fixture on the meta device
    (tests/test_lock_install.py): the Mamba-2 in_proj 1536 x 6448, conv1d 3328 x 4 with its
    bias, A_log, D and dt_bias of 48, the 3072-wide norm and out_proj, per layer."""
    assert GH.param_counts()["total"] == 6_939_037_248


def test_granite_groups_and_fit():
    assert kv_layout(GH, list(range(40)), ENGINE) == (4, ["full"] + ["linear"] * 9)
    r = fit(GH, FitRequest(gpu_memory_gib=24.0, tp=1, max_model_len=32768), ENGINE)
    assert r.block_size == 400 and r.kv_bytes_per_token == 4 * 2 * 4 * 128 * 2
    assert (r.kv_groups, r.state_groups) == (10, 9)
    assert any(n.startswith("Mamba-2: 36 of 40 layers") for n in r.notes)
    assert not any(n.startswith("risk:") for n in r.notes)  # the Triton OOM note is Qwen3-Next's


def test_a_granite_without_experts_runs_its_shared_mlp_and_one_without_mamba_is_still_hybrid():
    dense = spec_from_config({**GRANITE_CONFIG, "num_local_experts": 0, "num_experts_per_tok": 0,
                              "intermediate_size": 4096, "shared_intermediate_size": 8192}, "d")
    assert dense.moe is None and dense.intermediate_size == 8192
    # granite-4.0-micro: GraniteMoeHybridForCausalLM with attention on every layer; vLLM
    # 0.11.0's is_hybrid is the class's, so the block still holds one (unused) Mamba state
    micro = spec_from_config({**GRANITE_CONFIG, "layer_types": ["attention"] * 40}, "micro")
    r = fit(micro, FitRequest(gpu_memory_gib=24.0, tp=1, max_model_len=4096), ENGINE)
    assert r.block_size == 400 and r.state_groups == 0 and r.kv_groups == 1
    assert any(n.startswith("no Mamba-2 layer, but vLLM 0.11.0") for n in r.notes)


@pytest.mark.parametrize("change,tp,says", [
    ({"mamba_n_heads": 24, "mamba_d_head": 128}, 16, "does not divide the 12 attention heads"),
    ({"mamba_n_groups": 2}, 4, "TP 4 does not divide the 2 Mamba groups"),
    ({"mamba_n_heads": 96, "mamba_d_head": 32, "num_attention_heads": 24,
      "num_key_value_heads": 8}, 8, None),
])
def test_granite_tp_rules(change, tp, says):
    got = spec_from_config({**GRANITE_CONFIG, **change}, "g").tp_problem(tp)
    assert got is None if says is None else says in (got or "")


def test_the_step_model_runs_mamba_kernels():
    s = stepmodel.shape(GH, 2, 1, 2.0)
    assert (s.layers_full, s.layers_linear) == (4, 36)
    assert s.linear_kernels == (3, 7, 256)
    assert s.linear_proj == (((3072 + 3072 + 2 * 2 * 128 + 48) / 2, 1536.0), (1536.0, 1536.0))


# -- Bamba: Mamba-2 layers placed by attn_layer_indices ---------------------------------------
BAMBA_CONFIG = json.loads((Path(__file__).parent / "fixtures" / "configs"
                           / "bamba-9b.json").read_text())
BAMBA = spec_from_config(BAMBA_CONFIG, "bamba-9b")


def test_bamba_layers_and_padded_state_groups():
    """Attention at layers 9, 18 and 27 (attn_layer_indices), Mamba-2 elsewhere: vLLM groups
    by the 3 attention layers, so the 29 Mamba layers take ceil(29 / 3) = 10 groups, the last
    padded (tests/test_lock_install.py: vLLM's own get_kv_cache_configs agrees)."""
    assert [i for i, k in enumerate(BAMBA.layer_kinds) if k == "full"] == [9, 18, 27]
    assert kv_layout(BAMBA, list(range(32)), ENGINE) == (3, ["full"] + ["linear"] * 10)
    # one state: 3 x (8192 + 2 x 128) conv channels and 128 heads x 64 x 128, bf16
    assert BAMBA.linear_attention.state_bytes(1, 2.0) == 2 * (3 * 8448 + 128 * 64 * 128)
    # 16 x ceil(2,147,840 / (16 x 2 x 8 KV heads x 128 x 2 bytes))
    assert linear_block_size(BAMBA, 1, 2.0, 2.0) == 16 * 33
    # transformers 4.57.6 on the meta device (tests/test_lock_install.py)
    assert BAMBA.param_counts()["total"] == 9_780_235_392
    r = fit(BAMBA, FitRequest(gpu_memory_gib=80.0, tp=1, max_model_len=4096), ENGINE)
    assert (r.kv_groups, r.state_groups, r.block_size) == (11, 10, 528)
    # a request: ceil(4096 / 528) = 8 attention blocks and one per state group
    assert r.sequences_held(4096) == r.num_blocks // 18


# -- Jamba: Mamba (v1) layers, attention every 8th, experts every 2nd ---------------------------
JAMBA_CONFIG = json.loads((Path(__file__).parent / "fixtures" / "configs"
                           / "jamba-v0.1.json").read_text())
JAMBA = spec_from_config(JAMBA_CONFIG, "jamba-v0.1")


def test_jamba_layers_experts_and_state():
    """JambaConfig's patterns: attention where i % 8 == 4, experts where i % 2 == 1; the Mamba
    state is 3 x 8192 / TP conv channels and 8192 / TP x 16 SSM entries, bf16."""
    assert [i for i, k in enumerate(JAMBA.layer_kinds) if k == "full"] == [4, 12, 20, 28]
    assert [i for i in range(32) if JAMBA.is_moe_layer(i)] == list(range(1, 32, 2))
    m = JAMBA.linear_attention
    assert m.label == "Mamba" and m.state_elements(2) == (3 * 4096, 4096 * 16)
    assert m.state_bytes(1, 2.0) == 2 * (3 * 8192 + 8192 * 16)
    # 16 x ceil(311,296 / (16 x 2 x 8 KV heads x 128 x 2 bytes)) = 80 tokens
    assert linear_block_size(JAMBA, 1, 2.0, 2.0) == 80
    assert kv_layout(JAMBA, list(range(32)), ENGINE) == (4, ["full"] + ["linear"] * 7)
    # transformers 4.57.6 on the meta device: 51,570,323,328 (tests/test_lock_install.py)
    assert JAMBA.param_counts()["total"] == 51_570_323_328


def test_jamba_mamba_layers_are_not_quantized():
    """vLLM passes MambaMixer no quant_config: an fp8 Jamba keeps its Mamba projections in
    bf16, so swapping the checkpoint's dtype changes only attention, MLP and expert bytes."""
    bf16 = JAMBA.linear_attention.gpu_bytes(4096, 2, 2.0, 2.0)
    assert JAMBA.linear_attention.gpu_bytes(4096, 2, 1.0, 2.0) == bf16


@pytest.mark.parametrize("spec,tp,count,per_token", [
    (Q3N, 4, 0, 0.0),            # Gated DeltaNet's norm is per head: no collective
    (GH, 1, 0, 0.0),             # TP 1: none at all
    (GH, 2, 1, 4.0),             # one Mamba-2 group: its gated norm all-reduces an fp32 sum
    (JAMBA, 2, 1, (256 + 32) * 2.0),  # Mamba v1: x_proj is row-parallel, dt_rank + 2 x state
])
def test_linear_layers_add_their_tp_collectives(spec, tp, count, per_token):
    s = stepmodel.shape(spec, tp, 1, 2.0)
    assert s.linear_collectives == (count, per_token)
    k = stepmodel.kernels(advisor.load_catalog().gpus["H100-SXM"])
    got = stepmodel.step_cost(spec, k, tp, 1, "auto", 2.0, 8, 1000.0).allreduce
    layers = spec.num_layers
    # no fusion here: two all-reduces of 8 tokens x hidden x bf16 per layer, plus the mixer's
    want = (2 * layers * k.allreduce_s(tp, 8 * spec.hidden_size * 2)
            + s.layers_linear * count * k.allreduce_s(tp, 8 * per_token)) if tp > 1 else 0.0
    assert got == pytest.approx(want, rel=1e-12)
    if count:
        assert got > 2 * layers * k.allreduce_s(tp, 8 * spec.hidden_size * 2)


def test_jamba_mamba_projections_are_timed_in_bf16_whatever_the_checkpoint():
    """An fp8 Jamba: its attention, MLP and experts run fp8 GEMMs, its Mamba projections bf16
    (vLLM's MambaMixer takes no quant_config). Timing the same projections as fp8 (a mixer
    that claimed the checkpoint's quantization) would make the decode step faster."""
    from advisor.core.model import Mamba1Mixer

    class ClaimsQuantized(Mamba1Mixer):
        quantized = True

    k = stepmodel.kernels(advisor.load_catalog().gpus["H100-SXM"])
    fp8 = spec_from_config({**JAMBA_CONFIG, "quantization_config": {
        "quant_method": "fp8", "activation_scheme": "dynamic"}}, "jamba-fp8")
    assert not stepmodel.shape(fp8, 2, 1, 2.0).linear_quantized
    assert stepmodel.shape(GH, 2, 1, 2.0).linear_quantized  # Mamba-2 takes quant_config
    claims = fp8.model_copy(update={
        "linear_attention": ClaimsQuantized(**fp8.linear_attention.model_dump())})
    as_vllm = stepmodel.step_cost(fp8, k, 2, 1, "auto", 2.0, 16, 1000.0).gemm
    as_fp8 = stepmodel.step_cost(claims, k, 2, 1, "auto", 2.0, 16, 1000.0).gemm
    assert as_fp8 < as_vllm


@pytest.mark.parametrize("family,change,says", [
    ("qwen3-next", {"layer_types": ["linear_attention"] * 47}, "is not a list of 48"),
    ("qwen3-next", {"layer_types": ["mamba"] * 48}, "is not a list of 48"),
    ("qwen3-next", {"layer_types": ["linear_attention"] * 48}, "no attention layer"),
    ("qwen3-next", {"full_attention_interval": 49}, "no attention layer"),
    ("qwen3-next", {"full_attention_interval": 0}, "out of range"),
    ("qwen3-next", {"linear_num_value_heads": "32"}, "is not an integer"),
    ("qwen3-next", {"linear_conv_kernel_dim": 1}, "out of range"),
    ("granite", {"layer_types": None}, "is not a list of 40"),
    ("granite", {"layer_types": ["mamba"] * 40}, "no attention layer"),
    ("granite", {"mamba_n_heads": 50}, "does not divide mamba_expand x hidden_size"),
    ("bamba", {"attn_layer_indices": None}, "attn_layer_indices"),
    ("bamba", {"attn_layer_indices": [9, 32]}, "attn_layer_indices"),
    ("bamba", {"attn_layer_indices": [True]}, "attn_layer_indices"),
    ("bamba", {"attn_layer_indices": "9,18"}, "attn_layer_indices"),
    ("jamba", {"attn_layer_offset": 8}, "is not below attn_layer_period"),
    ("jamba", {"expert_layer_offset": 0}, "is not expert_layer_period - 1"),
    ("jamba", {"attn_layer_period": 64, "attn_layer_offset": 40}, "no attention layer"),
    ("jamba", {"attn_layer_offset": -1}, "out of range"),
])
def test_a_bad_hybrid_config_is_refused_with_the_key(family, change, says):
    config = {"qwen3-next": CONFIG, "granite": GRANITE_CONFIG, "bamba": BAMBA_CONFIG,
              "jamba": JAMBA_CONFIG}[family]
    with pytest.raises(ModelConfigError, match=says):
        spec_from_config({**config, **change}, "bad")
