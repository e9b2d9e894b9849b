"""advisor reads a config.json's attention geometry, length and weights as the deployed release
does, for the families whose config.json is not Llama-shaped.

Every figure pinned here is what vLLM 0.11.0's ModelConfig (KV heads, head size, longest
--max-model-len) and transformers 4.57.6's model built on the meta device (parameters) gave
for the same file in the lock venv: tests/test_lock_install.py asserts advisor against those
runs whenever a lock venv is installed; these tests keep the figures pinned on any machine.
The files are in tests/fixtures/configs (README: which public family each is shaped like).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor import UserInputError
from advisor.core.engine import profile
from advisor.core.model import spec_from_config
from advisor.core.sizing import FitRequest, fit, kv_bytes_per_token_per_layer, max_len_limit

CONFIGS = Path(__file__).parent / "fixtures" / "configs"


def spec(name: str):
    return spec_from_config(json.loads((CONFIGS / f"{name}.json").read_text()), name)


# name: (total KV heads, head size, longest max_model_len or None: vLLM takes what it is
# given) — vLLM 0.11.0's get_total_num_kv_heads, get_head_size and _get_and_verify_max_len
VLLM = {
    "falcon-7b": (1, 64, 2048),          # multi_query; FalconConfig's max_position_embeddings
    "falcon-rw-7b-old": (1, 64, None),   # RefinedWebModel: RWConfig has no length default
    "falcon-40b": (8, 64, 2048),         # new_decoder_architecture: num_kv_heads, not 1
    "falcon-40b-old": (8, 64, None),     # RefinedWeb: n_head_kv
    "starcoder": (1, 128, 8192),         # GPTBigCode multi_query, n_positions
    "gpt-bigcode-defaults": (1, 128, 1024),  # neither stated: the class says MQA, 1024
    "gpt-bigcode-renamed": (16, 128, 8192),  # max_position_embeddings is n_positions there
    "mpt-7b": (32, 128, 2048),           # n_heads, max_seq_len
    "dbrx": (8, 128, 32768),             # attn_config.kv_n_heads
    "glm-4-9b-chat": (2, 128, 131072),   # multi_query_group_num, seq_length
    "chatglm-defaults": (1, 128, 2048),  # ChatGLMConfig: 1 group, seq_length 2048
    "bloom-7b1": (32, 128, None),        # no length key
    "jais-13b": (40, 128, 2048),         # n_positions
    "phi-2": (32, 80, 2048),
    "qwen3-no-head-dim": (8, 128, 40960),  # Qwen3Config's head_dim 128, not 2560 / 32
    "llama-no-length": (8, 128, 2048),   # LlamaConfig's max_position_embeddings
    "cohere-model-max-length": (64, 128, 131072),  # model_max_length wins over 8192
    "gemma-3-linear-rope": (4, 256, 131072),  # Gemma 3's length is not scaled by 8 again
    "starcoder2-3b": (2, 128, 16384),
    "ernie-4.5-21b-a3b": (4, 128, 131072),
    "nemotron-4-minitron": (8, 128, 4096),
    "mistral-small-3.1": (8, 128, 131072),  # text_config under a multimodal top level
    "qwen2.5-vl-7b": (4, 128, 128000),      # mrope: not a scaling of the length
    "phi-3-mini-128k": (32, 96, 131072),    # longrope states the extended length
    "llama-4-maverick-text": (8, 128, 1048576),  # llama3 rope: the stated length
}


@pytest.mark.parametrize("name", sorted(VLLM))
def test_kv_heads_head_size_and_length_are_vllms(name):
    s = spec(name)
    assert (s.num_kv_heads, s.head_dim, max_len_limit(s)) == VLLM[name]


# parameters of the model transformers 4.57.6 builds from the file (meta device)
TRANSFORMERS = {
    "falcon-7b": 6_921_720_704, "falcon-40b": 41_303_293_952, "starcoder": 15_517_456_384,
    "gpt-bigcode-defaults": 1_122_789_376, "mpt-7b": 6_649_286_656,
    "dbrx": 131_596_523_520, "bloom-7b1": 7_069_016_064, "phi-2": 2_779_683_840,
    "gpt-j-6b": 6_050_882_784, "gpt-neox-20b": 20_554_567_680, "gpt2": 124_439_808,
    "opt-13b": 12_853_473_280, "cohere-model-max-length": 34_980_831_232,
    # ERNIE 4.5's moe_num_experts / moe_k / moe_num_shared_experts / moe_layer_start_index:
    # before, it was sized as a dense 3.35 B model
    "ernie-4.5-21b-a3b": 21_825_437_888,
    "nemotron-4-minitron": 4_190_509_056,   # squared-ReLU MLP, no gate: it was +22%
    "glm-4.5-air": 106_852_245_504, "phi-3.5-moe": 41_873_121_280,
    "olmoe-1b-7b": 6_919_161_856, "granite-3.1-3b-a800m": 3_298_793_472,
    # Llama 4 Maverick: MoE every other layer (interleave_moe_layer_step 2, counted from 1), its
    # dense layers' MLP intermediate_size_mlp 16384: before, 784 B (every layer MoE)
    "llama-4-maverick-text": 400_711_848_960,
    # Hunyuan-A13B gives moe_intermediate_size, moe_topk and num_shared_expert per layer: it was
    # refused ("list is not an integer"); its shared MLP is intermediate_size x num_shared_expert
    "hunyuan-a13b": 80_393_183_232,
    "qwen1.5-moe-a2.7b": 14_315_784_192, "glm-4-9b-0414": 9_400_279_040,
    "exaone-4.0-32b": 32_003_216_384,
}


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_weights_are_the_models_own_within_a_tenth_of_a_percent(name):
    """Ungated MLPs, a head tied by the class's default (Falcon, BLOOM, GPT-2, Cohere), learned
    position tables: before these, Falcon-7B counted 9.86 B parameters (+42%)."""
    got = spec(name).param_counts()["total"]
    assert abs(got - TRANSFORMERS[name]) <= 0.001 * TRANSFORMERS[name], got


def test_a_multi_query_model_holds_one_kv_head_per_token_per_layer():
    """Falcon-7B: 32 layers x 1 KV head x 64 x (K and V) x 2 bytes = 8 KiB a token, where
    counting its 71 query heads as KV heads made it 71 times that."""
    s = spec("falcon-7b")
    assert s.num_layers * kv_bytes_per_token_per_layer(s, 1, 2.0) == 32 * 1 * 64 * 2 * 2


def test_a_context_beyond_the_derived_length_is_refused_before_vllm_refuses_it():
    """vLLM 0.11.0 stops with "User-specified max_model_len (8192) is greater than the derived
    max_model_len (max_position_embeddings=2048 ...)": fit says so first, naming the key."""
    engine = profile("0.11.0")
    stated_by_the_class = r"max_position_embeddings \(its config class's default; the file"
    with pytest.raises(UserInputError, match=stated_by_the_class + r" does not state it\) 2048"):
        fit(spec("falcon-7b"), FitRequest(gpu_memory_gib=24.0, max_model_len=8192), engine)
    with pytest.raises(UserInputError, match="max_seq_len 2048"):
        fit(spec("mpt-7b"), FitRequest(gpu_memory_gib=24.0, max_model_len=4096), engine)
    # no length key at all: vLLM takes --max-model-len as given (BLOOM is ALiBi)
    assert fit(spec("bloom-7b1"), FitRequest(gpu_memory_gib=80.0, max_model_len=8192),
               engine).max_model_len == 8192


# --- the attention backend vLLM 0.11.0 picks for them (tests/test_lock_install.py reads it) --

def _cli(*args: str):
    from typer.testing import CliRunner

    from advisor.cli import app

    return CliRunner().invoke(app, list(args))


def test_an_alibi_model_is_refused_on_hopper_and_below_ampere_and_ranked_elsewhere():
    """BLOOM passes ALiBi slopes: on Hopper vLLM 0.11.0's V1 FlashAttention is FA3, which
    asserts "Alibi is not supported in FA3" (the V0 fallback to FA2 is gone); below 8.0 it is
    FlexAttention, which has none. Ampere, Ada and Blackwell run FA2, which has ALiBi."""
    import advisor

    bloom = str(CONFIGS / "bloom-7b1.json")
    assert spec("bloom-7b1").attention_alibi and spec("mpt-7b").attention_alibi
    assert spec("jais-13b").attention_alibi and not spec("falcon-7b").attention_alibi
    r = _cli("fit", "--model", bloom, "--gpu", "H100-SXM", "--ctx", "2048")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Alibi is not supported in FA3" in r.stderr and "hint: pick an Ampere" in r.stderr
    r = _cli("fit", "--model", bloom, "--gpu", "T4", "--tp", "2", "--ctx", "2048")
    assert r.exit_code == 2 and "FlexAttention does not support alibi slopes" in r.stderr
    assert advisor.fit(bloom, "A100-80GB-SXM", max_model_len=2048)[0].fits
    recs, rej = advisor.recommend(bloom, 2048, top=500, with_rejected=True)
    gpus = {r.gpu for r in recs}
    assert gpus and not gpus & {"H100-SXM", "H200", "T4"}
    assert {"A100-80GB-SXM", "L40S"} <= gpus
    by = {f"{r.provider}:{r.instance}": r for r in rej}
    assert by["aws:p5.48xlarge"].by == "attention backend"


def test_a_head_size_flashattention_lacks_runs_on_flexattention():
    """Phi-2's head size 80 is not one of FlashAttention's (32-256 in steps of 32): vLLM
    0.11.0 runs it on FlexAttention — said in fit's notes — and on Hopper an fp8 KV cache
    stays there and is refused ("FlexAttention does not support quantized kv-cache"), while
    on Ada it goes to Triton, which takes it."""
    import advisor

    phi2 = str(CONFIGS / "phi-2.json")
    fit = advisor.fit(phi2, "H100-SXM", max_model_len=2048)[0]
    assert any("head size 80 with FlexAttention" in n for n in fit.notes)
    llama = advisor.fit("llama-3.1-8b", "H100-SXM", max_model_len=2048)[0]
    assert not any("FlexAttention" in n for n in llama.notes)
    r = _cli("fit", "--model", phi2, "--gpu", "H100-SXM", "--ctx", "2048",
             "--kv-cache-dtype", "fp8")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "FlexAttention does not support quantized kv-cache" in r.stderr
    assert "hint: --kv-cache-dtype auto" in r.stderr
    on_ada = advisor.fit(phi2, "L40S", max_model_len=2048, kv_cache_dtype="fp8")[0]
    assert on_ada.fits and not any("FlexAttention" in n for n in on_ada.notes)


def test_the_step_model_times_an_ungated_mlp_as_one_projection_up():
    """The decode step's dense MLP GEMMs: gate and up (2 x intermediate) for a gated MLP, up
    alone for Falcon's, GPT-2's or Nemotron's; a step of Falcon-7B is cheaper than the same
    model with a gate, by the third of its MLP weights it does not have."""
    from advisor.api import load_catalog
    from advisor.core.stepmodel import kernels, shape, step_cost

    falcon = spec("falcon-7b")
    gated = falcon.model_copy(update={"gated_mlp": True})
    assert shape(falcon, 1, 1, 2.0).up_n == falcon.intermediate_size
    assert shape(gated, 1, 1, 2.0).up_n == 2 * falcon.intermediate_size
    assert shape(spec("nemotron-4-minitron"), 2, 1, 2.0).up_n == 9216 / 2
    k = kernels(load_catalog().gpus["A100-80GB-SXM"])
    plain = step_cost(falcon, k, 1, 1, "auto", 2.0, 8, 1024).gemm
    with_gate = step_cost(gated, k, 1, 1, "auto", 2.0, 8, 1024).gemm
    assert plain < with_gate < 1.4 * plain


@pytest.mark.parametrize("keys,moe_layers", [
    # DeepSeek counts from 0 after its dense layers: i >= first_k_dense_replace, i % freq == 0
    ({"first_k_dense_replace": 1, "moe_layer_freq": 2}, [2, 4]),
    # Qwen-MoE and ERNIE count from 1: (i + 1) % step == 0 (vllm qwen2_moe.py, ernie45_moe.py)
    ({"decoder_sparse_step": 2}, [1, 3, 5]),
    ({"moe_layer_interval": 2, "moe_layer_start_index": 2, "moe_layer_end_index": 4}, [3]),
    ({"mlp_only_layers": [0, 5]}, [1, 2, 3, 4]),  # Qwen-MoE keeps these dense (qwen3_moe.py)
    ({"interleave_moe_layer_step": 2}, [1, 3, 5]),  # Llama 4 Maverick (llama4.py)
    ({}, [0, 1, 2, 3, 4, 5]),
])
def test_which_layers_are_moe_is_vllms_rule(keys, moe_layers):
    cfg = {"model_type": "x", "hidden_size": 256, "num_attention_heads": 4,
           "num_hidden_layers": 6, "intermediate_size": 512, "vocab_size": 1000,
           "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128, **keys}
    s = spec_from_config(cfg, "moe")
    assert [i for i in range(6) if s.is_moe_layer(i)] == moe_layers


def test_a_per_layer_list_that_varies_or_shared_kv_layers_are_refused_not_guessed():
    cfg = json.loads((CONFIGS / "hunyuan-a13b.json").read_text())
    assert spec_from_config(cfg, "h").moe.experts_per_token == 8
    with pytest.raises(Exception, match="varies from layer to layer"):
        spec_from_config({**cfg, "moe_topk": [8] * 31 + [4]}, "h")
    with pytest.raises(Exception, match="share KV caches"):
        spec_from_config({**cfg, "use_cla": True, "cla_share_factor": 2}, "h")
    # Gemma 3n: its last num_kv_shared_layers read earlier layers' caches
    with pytest.raises(Exception, match="share KV caches \\(num_kv_shared_layers 15\\)"):
        spec_from_config({**json.loads((CONFIGS / "llama-no-length.json").read_text()),
                          "model_type": "gemma3n_text", "num_kv_shared_layers": 15}, "g")


def test_an_alibi_model_of_a_head_size_flashattention_lacks_gets_a_hint_that_fits(tmp_path):
    """ALiBi at head size 80 runs on FlexAttention on every GPU from 8.0 on, which has no ALiBi:
    no other GPU and no KV dtype helps, and the hint says so."""
    cfg = {**json.loads((CONFIGS / "bloom-7b1.json").read_text()), "hidden_size": 2560}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    r = _cli("fit", "--model", str(f), "--gpu", "A100-80GB-SXM", "--ctx", "2048")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "head size 80 with FlexAttention" in r.stderr and "no ALiBi" in r.stderr
    assert "hint: no GPU runs head size 80 on another backend in vLLM 0.11.0" in r.stderr
