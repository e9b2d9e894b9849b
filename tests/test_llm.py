"""ModelSpec from config.json: parameter counts derived by hand from the config's numbers."""

from __future__ import annotations

import json

import pytest

from advisor import ModelConfigError, load_catalog
from advisor.core.model import spec_from_config

CAT = load_catalog()


def spec(alias, **kw):
    return spec_from_config(CAT.model_configs[alias], alias, **kw)


def test_llama3_8b_dense_gqa_params():
    h, inter, layers, vocab, kv_dim = 4096, 14336, 32, 128256, 8 * 128
    per_layer = 2 * h * h + 2 * h * kv_dim + 3 * h * inter + 2 * h
    expected = layers * per_layer + 2 * vocab * h + h
    p = spec("llama-3-8b").param_counts()
    assert p["total"] == p["active"] == expected == 8_030_261_248  # the 8.03B Meta publishes


def test_mixtral_active_params_count_two_of_eight_experts():
    s = spec("mixtral-8x7b")
    p = s.param_counts()
    one_expert_all_layers = 32 * 3 * 4096 * 14336
    assert p["total"] - p["active"] == 6 * one_expert_all_layers
    assert 46.6e9 < p["total"] < 46.8e9 and 12.8e9 < p["active"] < 13.0e9


def test_tied_embeddings_are_counted_once():
    s = spec("gemma-2-9b")
    assert s.tie_word_embeddings  # gemma ties unless the config says otherwise
    assert s.embedding_params() == 256000 * 3584


def test_qwen2_has_qkv_bias_and_qwen3_not():
    q2, q3 = spec("qwen2.5-7b"), spec("qwen3-8b")
    assert q2.attention_bias and not q3.attention_bias
    assert q2.attention_params() - (2 * 3584 * 3584 + 2 * 3584 * 512) == 3584 + 2 * 512


def test_mla_and_moe_of_deepseek_v2_lite():
    s = spec("deepseek-v2-lite")
    assert s.mla is not None and s.mla.kv_lora_rank == 512 and s.mla.q_lora_rank is None
    assert s.moe is not None and s.moe.first_dense == 1 and not s.is_moe_layer(0)
    assert s.is_moe_layer(1) and s.moe.num_shared_experts == 2


def test_layer_patterns():
    gemma = spec("gemma-2-9b")
    assert gemma.layer_kinds[:2] == ("sliding", "full") and gemma.sliding_window == 4096
    oss = spec("gpt-oss-20b")
    assert oss.layer_kinds.count("sliding") == 12 and oss.sliding_window == 128
    assert set(spec("qwen2.5-7b").layer_kinds) == {"full"}  # use_sliding_window is false
    assert set(spec("mistral-7b").layer_kinds) == {"sliding"}


def test_nested_text_config_is_read():
    cfg = {"architectures": ["Foo"], "model_type": "foo_vl", "tie_word_embeddings": False,
           "text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                           "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 128}}
    s = spec_from_config(cfg)
    assert (s.num_layers, s.hidden_size, s.head_dim, s.num_kv_heads) == (2, 64, 16, 2)


@pytest.mark.parametrize("qcfg,method,bpw", [
    ({"quant_method": "fp8"}, "fp8", 1.0),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq", 0.5 + 2.5 / 128),
    ({"quant_method": "gptq", "bits": 8, "group_size": 64}, "gptq", 1.0 + 3 / 64),
    ({"quant_method": "compressed-tensors",
      "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 128}}}},
     "compressed-tensors-w4", 0.5 + 2 / 128),
    # NVFP4 through compressed-tensors: 4-bit floats, one fp8 scale per 16 (not an fp16 one)
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
      "config_groups": {"g": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}}},
     "compressed-tensors-fp4", 0.5 + 1 / 16),
    ({"quant_method": "compressed-tensors", "format": "float-quantized",
      "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                              "input_activations": {"num_bits": 8, "type": "float"}}}},
     "compressed-tensors-fp8", 1.0),
    ({"quant_method": "mxfp4"}, "mxfp4", 4.25 / 8),
    # a ModelOpt NVFP4 export (config.json form, and hf_quant_config's nested form)
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4", 4.5 / 8),
    ({"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4"}}, "nvfp4", 4.5 / 8),
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, "modelopt", 1.0),
])
def test_quantization_bytes_per_weight(qcfg, method, bpw):
    cfg = {**CAT.model_configs["llama-3-8b"], "quantization_config": qcfg}
    q = spec_from_config(cfg).quantization
    assert q is not None and q.method == method and q.bytes_per_weight == pytest.approx(bpw)


def test_moe_checkpoints_that_leave_attention_unquantized_quantize_the_experts_only():
    """Kimi-K2.5's int4 (compressed-tensors ignore: self_attn, shared experts, dense MLP) and
    NVIDIA's NVFP4 MoE exports (exclude_modules: self_attn) quantize the experts alone: the
    attention's weights are sized at bf16. A dense model's MLP is quantized whatever its
    attention is, and a list without the attention keeps every linear layer quantized."""
    moe = CAT.model_configs["mixtral-8x7b"]
    dense = CAT.model_configs["llama-3-8b"]
    ct = {"quant_method": "compressed-tensors",
          "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 32}}},
          "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"]}
    fp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4",
           "exclude_modules": ["lm_head", "model.layers.0.self_attn*"]}
    for q in (ct, fp4):
        assert spec_from_config({**moe, "quantization_config": q}).quantization.scope == "experts"
        assert spec_from_config({**dense, "quantization_config": q}).quantization.scope == "linear"
        only_head = {**q, "ignore": ["lm_head"], "exclude_modules": ["lm_head"]}
        assert spec_from_config({**moe, "quantization_config": only_head}
                                ).quantization.scope == "linear"
    # experts-only keeps the attention's bytes: more weights than every layer at 4 bits
    from advisor.core.engine import profile
    from advisor.core.sizing import FitRequest, fit
    req = FitRequest(gpu_memory_gib=80, gpu_name="H100", tp=2, max_model_len=4096)
    exp = fit(spec_from_config({**moe, "quantization_config": fp4}), req, profile())
    lin = fit(spec_from_config({**moe, "quantization_config": {**fp4, "exclude_modules": []}}),
              req, profile())
    assert exp.weights_gib > lin.weights_gib
    # and --quantization nvfp4 is a method advisor sizes
    assert spec_from_config(dense, quantization="nvfp4").quantization.bytes_per_weight == 0.5625


def test_a_modelopt_checkpoints_fp8_kv_cache_is_what_auto_runs_from_vllm_0_14():
    """A ModelOpt export that states kv_cache_quant_algo FP8 (NVIDIA's NVFP4 exports) runs an
    fp8 KV cache under --kv-cache-dtype auto from vLLM 0.14 (PR #30785, engine.Rule): its KV
    bytes per token are half the bf16 ones and a note says why; before 0.14, or without the
    key, or with an explicit dtype, auto is the model's dtype as before."""
    from advisor.core.engine import profile
    from advisor.core.sizing import FitRequest, fit
    base = CAT.model_configs["llama-3-8b"]
    fp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    with_kv = spec_from_config({**base, "quantization_config": {**fp4,
                                                                 "kv_cache_quant_algo": "FP8"}})
    nested = spec_from_config({**base, "quantization_config": {
        "quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4",
                                                     "kv_cache_quant_algo": "FP8"}}})
    without = spec_from_config({**base, "quantization_config": fp4})
    not_modelopt = spec_from_config({**base, "quantization_config": {
        "quant_method": "fp8", "kv_cache_quant_algo": "FP8"}})
    assert with_kv.quantization.kv_cache_dtype == nested.quantization.kv_cache_dtype == "fp8"
    assert without.quantization.kv_cache_dtype is None
    assert not_modelopt.quantization.kv_cache_dtype is None
    req = FitRequest(gpu_memory_gib=80, gpu_name="H100", tp=1, max_model_len=4096)
    new, old = profile("0.19.0"), profile("0.13.0")
    f = fit(with_kv, req, new)
    assert f.kv_cache_dtype == "fp8" and any("kv_cache_quant_algo" in n for n in f.notes)
    assert f.kv_bytes_per_token * 2 == fit(without, req, new).kv_bytes_per_token
    assert fit(with_kv, req, old).kv_cache_dtype == "bfloat16"
    assert fit(with_kv, req.model_copy(update={"kv_cache_dtype": "bfloat16"}),
               new).kv_cache_dtype == "bfloat16"


def test_unknown_quantization_and_missing_fields_are_named():
    cfg = {**CAT.model_configs["llama-3-8b"], "quantization_config": {"quant_method": "zz"}}
    with pytest.raises(ModelConfigError, match="'zz'"):
        spec_from_config(cfg)
    broken = {k: v for k, v in CAT.model_configs["llama-3-8b"].items() if k != "hidden_size"}
    with pytest.raises(ModelConfigError, match="hidden_size"):
        spec_from_config(broken, "x")
    with pytest.raises(ModelConfigError, match="does not divide"):
        spec_from_config({**CAT.model_configs["llama-3-8b"], "num_key_value_heads": 5})


_BASE = {"num_hidden_layers": 8, "hidden_size": 512, "num_attention_heads": 8,
         "num_key_value_heads": 2, "vocab_size": 1000, "intermediate_size": 1024,
         "max_position_embeddings": 4096}


@pytest.mark.parametrize("extra,says", [
    # Qwen3-Next's Gated DeltaNet is sized (tests/test_linear_attention.py); Qwen3.5's model
    # type is one vLLM 0.11.0 does not know, so its layers stay refused; a layer_types list
    # with "mamba" in a model type advisor does not size
    ({"model_type": "qwen3_5_text",
      "layer_types": ["linear_attention"] * 3 * 2 + ["full_attention"] * 2}, "linear_attention"),
    ({"model_type": "x_hybrid", "layer_types": ["mamba"] * 7 + ["attention"]}, "mamba"),
    ({"model_type": "nemotron_h", "hybrid_override_pattern": "M-M-M*-M"},
     "hybrid_override_pattern"),
    # Granite 4.0-H's and Bamba's Mamba-2 layers and Jamba's Mamba layers are sized
    # (tests/test_linear_attention.py); Zamba's and PLaMo 2's stay refused
    ({"model_type": "plamo2", "mamba_d_state": 64}, "mamba_d_state"),
    ({"model_type": "zamba2", "layers_block_type": ["mamba"] * 7 + ["hybrid"]},
     "layers_block_type"),
    ({"model_type": "falcon_h1", "mamba_d_ssm": 1024}, "mamba_d_ssm"),
    ({"model_type": "mamba"}, "no attention layers"),
])
def test_state_space_and_linear_attention_models_are_refused_not_mis_sized(extra, says):
    """Sized as attention on every layer, Qwen3-Next-80B-A3B got 98,304 KV bytes a token
    (48 layers) where vLLM keeps 24,576 (its 12 attention layers) beside a per-sequence
    DeltaNet state: a quarter of its KV tokens. advisor sizes Qwen3-Next's layers now and
    refuses the other state-space and linear-attention configs in one line."""
    with pytest.raises(ModelConfigError, match="state-space or linear-attention") as e:
        spec_from_config({**_BASE, **extra})
    assert says in e.value.message and "vLLM itself" in (e.value.hint or "")


def test_sliding_and_full_attention_layer_types_are_still_attention():
    s = spec_from_config({**_BASE, "model_type": "gpt_oss", "sliding_window": 128,
                          "layer_types": ["sliding_attention", "full_attention"] * 4})
    assert s.layer_kinds == ("sliding", "full") * 4
    assert spec_from_config({**_BASE, "model_type": "x", "full_attention_interval": None})


def test_cli_refuses_a_hybrid_config_in_one_line(cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_BASE, "model_type": "nemotron_h",
                                "hybrid_override_pattern": "M-M-M*-M"}))
    r = cli("fit", "--model", str(path), "--gpu", "H100-SXM", "--ctx", "4096")
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "linear-attention" in lines[0] and "hint:" in lines[0]
