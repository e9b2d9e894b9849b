"""A model as the sizer needs it: :class:`ModelSpec` from a Hugging Face ``config.json``.

Pure: :func:`spec_from_config` takes the parsed JSON. :func:`load_config` is the one place that
reads files (a catalog alias, a path to a ``config.json`` or its directory, or a repo id found
in the local Hugging Face cache).

Parameter counts follow the module layout vLLM builds for each architecture family: per layer
attention (q/k/v/o, or MLA's low-rank projections), the MLP (gated: gate+up+down; MoE: router,
experts, shared experts), two norms; plus embeddings, the final norm and an untied lm_head.
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import ModelConfigError

DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}
#: vLLM pads embedding / lm_head rows to a multiple of this (vocab_parallel_embedding.py,
#: DEFAULT_VOCAB_PADDING_SIZE = 64)
VOCAB_PADDING = 64
#: a config.json names one architecture, a few at most; longer lists and names are cut here
#: (the names only select vLLM's implementation: advisor.core.archs)
MAX_ARCHITECTURES = 8
MAX_ARCH_NAME = 120

#: "linear": a Gated DeltaNet layer (Qwen3-Next), which keeps a recurrent state per sequence
#: instead of a KV cache (:class:`GatedDeltaNet`)
LayerKind = Literal["full", "sliding", "linear"]


class MoE(BaseModel):
    model_config = ConfigDict(frozen=True)
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0
    #: layers [0, first_dense) use a dense MLP (DeepSeek's first_k_dense_replace)
    first_dense: int = 0
    #: every n-th layer is MoE: DeepSeek's moe_layer_freq counts layer i from 0 (i % n == 0,
    #: vllm models/deepseek_v2.py), Qwen-MoE's decoder_sparse_step, ERNIE's moe_layer_interval
    #: and Llama 4's interleave_moe_layer_step from 1 ((i + 1) % n == 0: qwen2_moe.py,
    #: qwen3_moe.py, ernie45_moe.py, llama4.py)
    every: int = 1
    every_from_one: bool = False
    #: layers kept dense whatever the rule says (Qwen-MoE's mlp_only_layers)
    dense_layers: tuple[int, ...] = ()
    #: the last MoE layer (ERNIE 4.5's moe_layer_end_index; None: every layer after first_dense)
    last: int | None = None
    expert_bias: bool = False


class MLA(BaseModel):
    model_config = ConfigDict(frozen=True)
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None


class StateMixer(BaseModel):
    """What sizing and the step model ask of a layer that keeps a fixed state per sequence
    instead of a KV cache (:class:`GatedDeltaNet`, :class:`Mamba2Mixer`,
    :class:`Mamba1Mixer`): its state, its weights per GPU, its projections and own kernels."""

    model_config = ConfigDict(frozen=True)
    #: the kernels vLLM launches per layer besides the projections, in decode and in prefill,
    #: and the tokens per chunk of its scan (the state is read and written once per chunk)
    decode_kernels: ClassVar[int]
    prefill_kernels: ClassVar[int]
    chunk: ClassVar[int]
    label: ClassVar[str]
    #: whether its projections take the checkpoint's quantization (vLLM passes quant_config)
    quantized: ClassVar[bool] = True

    def state_elements(self, tp: int) -> tuple[int, int]:
        """(conv state, temporal state) elements of one sequence on one GPU of TP ``tp``."""
        raise NotImplementedError

    def state_bytes(self, tp: int, dtype_bytes: float) -> int:
        """Bytes of one sequence's state in one layer on one GPU (vLLM's MambaSpec page)."""
        return int(sum(self.state_elements(tp)) * dtype_bytes)

    def tp_collectives(self, tp: int) -> tuple[int, float]:
        """All-reduces the mixer adds at TP > 1 beyond out_proj's, and bytes per token each."""
        return 0, 0.0


class GatedDeltaNet(StateMixer):
    """Qwen3-Next's linear-attention layer as vLLM 0.11.0 builds it
    (vllm/model_executor/models/qwen3_next.py, Qwen3NextGatedDeltaNet): a column-parallel
    in_proj_qkvz (hidden -> 2 x key_dim + 2 x value_dim) and in_proj_ba (hidden -> 2 x value
    heads), a depthwise causal conv1d over the conv_dim = 2 x key_dim + value_dim channels
    (column-parallel, never quantized), per value head dt_bias and A_log (fp32), a gated
    RMSNorm of head_v_dim, and a row-parallel out_proj (value_dim -> hidden).

    Its state per sequence (MambaStateShapeCalculator.gated_delta_net_state_shape, vllm
    model_executor/layers/mamba/mamba_utils.py): a conv state of (kernel - 1) x conv_dim / TP
    and a temporal state of value_heads / TP x head_k_dim x head_v_dim, both in the model's
    dtype (gated_delta_net_state_dtype with --mamba-cache-dtype auto)."""

    num_k_heads: int = Field(gt=0)
    num_v_heads: int = Field(gt=0)
    head_k_dim: int = Field(gt=0)
    head_v_dim: int = Field(gt=0)
    conv_kernel: int = Field(gt=1)

    @property
    def key_dim(self) -> int:
        return self.num_k_heads * self.head_k_dim

    @property
    def value_dim(self) -> int:
        return self.num_v_heads * self.head_v_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim

    def linear_params(self, hidden: int) -> int:
        """The quantizable projections: in_proj_qkvz, in_proj_ba, out_proj."""
        return hidden * (2 * self.key_dim + 2 * self.value_dim + 2 * self.num_v_heads
                         + self.value_dim)

    def params(self, hidden: int) -> int:
        """The whole layer's mixer (conv1d weight, dt_bias, A_log and the gated norm with it)."""
        return (self.linear_params(hidden) + self.conv_dim * self.conv_kernel
                + 2 * self.num_v_heads + self.head_v_dim)

    def state_elements(self, tp: int) -> tuple[int, int]:
        return ((self.conv_kernel - 1) * (self.conv_dim // tp),
                self.num_v_heads // tp * self.head_k_dim * self.head_v_dim)

    #: the kernels vLLM 0.11.0 launches per layer besides the projections: in decode
    #: causal_conv1d_update, fused_gdn_gating, fused_recurrent_gated_delta_rule and the gated
    #: RMSNorm; in prefill causal_conv1d_fn, the gating, chunk_gated_delta_rule's six Triton
    #: kernels (fla/ops/chunk.py: chunk_local_cumsum, chunk_scaled_dot_kkt_fwd, solve_tril,
    #: recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h, chunk_fwd_o) and the norm; the delta
    #: rule reads and writes the state once per chunk of 64 tokens (chunk.py chunk_size)
    decode_kernels: ClassVar[int] = 4
    prefill_kernels: ClassVar[int] = 9
    chunk: ClassVar[int] = 64
    label: ClassVar[str] = "Gated DeltaNet"  # no collective of its own: its norm is per head

    def tp_problem(self, tp: int) -> str | None:
        """qwen3_next.py: divide(num_v_heads, tp); the conv and projections by head."""
        for what, n in (("key", self.num_k_heads), ("value", self.num_v_heads)):
            if n % tp:
                return f"TP {tp} does not divide the {n} linear-attention {what} heads"
        return None

    def gpu_bytes(self, hidden: int, tp: int, linear_bytes: float, act_bytes: float) -> float:
        """One layer's mixer on one GPU: the projections column/row-parallel and quantized
        with the checkpoint; conv1d and dt_bias split by TP in the model dtype (conv1d is
        built without quant_config); A_log fp32 split by TP; the norm on every GPU."""
        return (self.linear_params(hidden) * linear_bytes
                + (self.conv_dim * self.conv_kernel + self.num_v_heads) * act_bytes
                + self.num_v_heads * 4.0) / tp + self.head_v_dim * act_bytes

    def projections(self, hidden: int, tp: int) -> tuple[tuple[float, float], ...]:
        """(n, k) of the GEMMs on one GPU: in_proj_qkvz, in_proj_ba, out_proj."""
        return (((2 * self.key_dim + 2 * self.value_dim) / tp, float(hidden)),
                (2 * self.num_v_heads / tp, float(hidden)), (float(hidden), self.value_dim / tp))

    def token_bytes(self, tp: int) -> float:
        """bf16 bytes a token's activations take through the mixer's own kernels on one GPU:
        the conv's channels in and out, the gate and the output of the value heads."""
        return (2 * self.conv_dim + 2 * self.value_dim) / tp * 2.0


class Mamba2Mixer(StateMixer):
    """A Mamba-2 mixer as vLLM 0.11.0 builds it (vllm/model_executor/layers/mamba/
    mamba_mixer2.py, MambaMixer2; Granite 4.0-H's mamba layers): a column-parallel in_proj
    (hidden -> 2 x intermediate + 2 x groups x state + heads), a depthwise conv1d over
    conv_dim = intermediate + 2 x groups x state channels (never quantized, a bias with
    mamba_conv_bias), per head A (fp32), D and dt_bias, a gated RMSNorm over the intermediate
    (split by TP) and a row-parallel out_proj. Groups TP does not divide are replicated: one
    group becomes TP (MambaStateShapeCalculator.extra_groups_for_head_shards).

    Its state per sequence (MambaStateShapeCalculator.mamba2_state_shape): a conv state of
    (kernel - 1) x conv_dim / TP and an SSM state of heads / TP x head_dim x state, both in
    the model's dtype (--mamba-cache-dtype and --mamba-ssm-cache-dtype auto)."""

    intermediate: int = Field(gt=0)
    n_groups: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    state_size: int = Field(gt=0)
    conv_kernel: int = Field(gt=1)
    conv_bias: bool = True
    proj_bias: bool = False

    def groups_at(self, tp: int) -> int:
        return self.n_groups + (0 if self.n_groups % tp == 0 else tp - self.n_groups)

    def conv_dim_at(self, tp: int) -> int:
        return self.intermediate + 2 * self.groups_at(tp) * self.state_size

    def linear_params(self, hidden: int) -> int:
        """The quantizable projections at TP 1: in_proj and out_proj."""
        return hidden * (self.intermediate + self.conv_dim_at(1) + self.num_heads) \
            + self.intermediate * hidden

    def params(self, hidden: int) -> int:
        bias = ((self.intermediate + self.conv_dim_at(1) + self.num_heads + hidden)
                if self.proj_bias else 0)
        conv = self.conv_dim_at(1) * (self.conv_kernel + (1 if self.conv_bias else 0))
        return self.linear_params(hidden) + bias + conv + 3 * self.num_heads + self.intermediate

    def state_elements(self, tp: int) -> tuple[int, int]:
        return ((self.conv_kernel - 1) * (self.conv_dim_at(tp) // tp),
                self.num_heads // tp * self.head_dim * self.state_size)

    #: vLLM 0.11.0's kernels per layer besides the projections: in decode
    #: causal_conv1d_update, selective_state_update and the gated RMSNorm; in prefill
    #: causal_conv1d_fn, mamba_chunk_scan_combined's five Triton kernels (ssd_combined.py:
    #: chunk_cumsum, chunk_state, state_passing, bmm_chunk, chunk_scan) and the norm; the scan
    #: passes the state once per chunk (the config's mamba_chunk_size, 256 for Granite 4.0)
    decode_kernels: ClassVar[int] = 3
    prefill_kernels: ClassVar[int] = 7
    chunk: ClassVar[int] = 256
    label: ClassVar[str] = "Mamba-2"

    def tp_collectives(self, tp: int) -> tuple[int, float]:
        """All-reduces the mixer adds at TP > 1 beyond out_proj's, and bytes per token each:
        with one group its gated RMSNorm all-reduces each token's fp32 sum of squares
        (Mixer2RMSNormGated.forward_native, case 1); groups TP divides need none."""
        return (1, 4.0) if tp > 1 and self.n_groups == 1 else (0, 0.0)

    def tp_problem(self, tp: int) -> str | None:
        """mamba_mixer2.py: num_heads % tp == 0; groups divided by TP or a single group."""
        if self.num_heads % tp:
            return f"TP {tp} does not divide the {self.num_heads} Mamba heads"
        if self.n_groups % tp and self.n_groups != 1:
            return f"TP {tp} does not divide the {self.n_groups} Mamba groups"
        if self.intermediate % tp:
            return f"TP {tp} does not divide the Mamba intermediate size {self.intermediate}"
        return None

    def gpu_bytes(self, hidden: int, tp: int, linear_bytes: float, act_bytes: float) -> float:
        conv_dim = self.conv_dim_at(tp)
        in_proj = hidden * (self.intermediate + conv_dim + self.num_heads) / tp
        out_proj = self.intermediate * hidden / tp
        bias = ((self.intermediate + conv_dim + self.num_heads) / tp + hidden
                if self.proj_bias else 0.0)
        conv = conv_dim * (self.conv_kernel + (1 if self.conv_bias else 0)) / tp
        return ((in_proj + out_proj) * linear_bytes
                + (bias + conv + 2 * self.num_heads / tp + self.intermediate / tp) * act_bytes
                + self.num_heads / tp * 4.0)

    def projections(self, hidden: int, tp: int) -> tuple[tuple[float, float], ...]:
        """(n, k) of the GEMMs on one GPU: in_proj, out_proj."""
        return (((self.intermediate + self.conv_dim_at(tp) + self.num_heads) / tp,
                 float(hidden)), (float(hidden), self.intermediate / tp))

    def token_bytes(self, tp: int) -> float:
        """bf16 bytes a token's activations take through the mixer's own kernels on one GPU:
        the conv's channels in and out, the gate and the output."""
        return (2 * self.conv_dim_at(tp) + 2 * self.intermediate) / tp * 2.0


class Mamba1Mixer(StateMixer):
    """A Mamba (v1) mixer as vLLM 0.11.0 builds it for Jamba (vllm/model_executor/layers/mamba/
    mamba_mixer.py, MambaMixer with use_rms_norm): in_proj (hidden -> 2 x intermediate,
    column-parallel), a depthwise conv1d over the intermediate (a bias with mamba_conv_bias),
    x_proj (intermediate -> dt_rank + 2 x state, row-parallel), dt_proj (dt_rank ->
    intermediate, column-parallel, with a bias), A (intermediate x state, fp32) and D split by
    TP, RMSNorms of dt_rank and state (twice) on every GPU, and out_proj (row-parallel). vLLM
    passes these layers no quant_config, so they stay in the model's dtype whatever the
    checkpoint's quantization.

    Its state per sequence (MambaStateShapeCalculator.mamba1_state_shape): a conv state of
    (kernel - 1) x intermediate / TP and an SSM state of intermediate / TP x state."""

    intermediate: int = Field(gt=0)
    state_size: int = Field(gt=0)
    conv_kernel: int = Field(gt=1)
    dt_rank: int = Field(gt=0)
    conv_bias: bool = True
    proj_bias: bool = False

    def linear_params(self, hidden: int) -> int:
        """Its projections (all in the model dtype: vLLM does not quantize them)."""
        d = self.intermediate
        return (hidden * 2 * d + d * (self.dt_rank + 2 * self.state_size) + self.dt_rank * d
                + d * hidden)

    def params(self, hidden: int) -> int:
        d = self.intermediate
        bias = (2 * d + hidden) if self.proj_bias else 0
        conv = d * (self.conv_kernel + (1 if self.conv_bias else 0))
        return (self.linear_params(hidden) + bias + conv + d  # dt_proj's bias
                + d * self.state_size + d  # A, D
                + self.dt_rank + 2 * self.state_size)  # the three RMSNorms

    def state_elements(self, tp: int) -> tuple[int, int]:
        return ((self.conv_kernel - 1) * (self.intermediate // tp),
                self.intermediate // tp * self.state_size)

    #: vLLM 0.11.0's kernels per layer besides the projections: in decode
    #: causal_conv1d_update, the three RMSNorms and selective_state_update; in prefill
    #: causal_conv1d_fn, the norms and selective_scan_fn, which keeps the state on chip
    #: across the prompt (read and written once per chunk of 2048 tokens, as Mamba's
    #: selective-scan kernel chunks it)
    decode_kernels: ClassVar[int] = 5
    prefill_kernels: ClassVar[int] = 5
    chunk: ClassVar[int] = 2048
    label: ClassVar[str] = "Mamba"
    #: vLLM 0.11.0's MambaMixer builds its linear layers without quant_config
    quantized: ClassVar[bool] = False

    def tp_collectives(self, tp: int) -> tuple[int, float]:
        """All-reduces the mixer adds at TP > 1 beyond out_proj's, and bytes per token each:
        x_proj is row-parallel, so its dt_rank + 2 x state outputs are all-reduced (bf16)."""
        return (1, (self.dt_rank + 2 * self.state_size) * 2.0) if tp > 1 else (0, 0.0)

    def tp_problem(self, tp: int) -> str | None:
        if self.intermediate % tp:
            return f"TP {tp} does not divide the Mamba intermediate size {self.intermediate}"
        return None

    def gpu_bytes(self, hidden: int, tp: int, linear_bytes: float, act_bytes: float) -> float:
        d = self.intermediate
        sharded = (self.linear_params(hidden) + d * (self.conv_kernel + (1 if self.conv_bias
                                                                         else 0))
                   + d + d + (2 * d if self.proj_bias else 0)) / tp
        replicated = self.dt_rank + 2 * self.state_size + (hidden if self.proj_bias else 0)
        return (sharded + replicated) * act_bytes + d / tp * self.state_size * 4.0

    def projections(self, hidden: int, tp: int) -> tuple[tuple[float, float], ...]:
        """(n, k) of the GEMMs on one GPU: in_proj, x_proj, dt_proj, out_proj."""
        d = self.intermediate / tp
        return ((2 * d, float(hidden)), (float(self.dt_rank + 2 * self.state_size), d),
                (d, float(self.dt_rank)), (float(hidden), d))

    def token_bytes(self, tp: int) -> float:
        """bf16 bytes a token's activations take through the mixer's own kernels on one GPU:
        the conv's channels in and out, the gate and the scan's output."""
        return 4 * self.intermediate / tp * 2.0


class Quantization(BaseModel):
    model_config = ConfigDict(frozen=True)
    method: str
    #: bytes per weight of the quantized linear layers, including scales
    bytes_per_weight: float
    #: which linear layers it covers: all, or only the MoE experts (gpt-oss mxfp4)
    scope: Literal["linear", "experts"] = "linear"
    #: the KV cache dtype the checkpoint states: a ModelOpt export's ``kv_cache_quant_algo``
    #: "FP8" (a quantization_config's own key, or its nested "quantization" block as
    #: hf_quant_config.json writes it); vLLM from 0.14 runs it for ``--kv-cache-dtype auto``
    #: (engine.Rule checkpoint_kv_dtype). None: the model's dtype
    kv_cache_dtype: Literal["fp8"] | None = None
    #: the input-dimension (K) granularity of its scales: AWQ/GPTQ/compressed-tensors
    #: group_size, block fp8's block_k; None: per channel or per tensor (no constraint)
    group_size: int | None = Field(default=None, gt=0)
    #: block fp8's block_n, the output-dimension granularity (weight_block_size [n, k])
    block_n: int | None = Field(default=None, gt=0)


class VisionTower(BaseModel):
    """A multimodal model's vision encoder and projector, as vLLM loads them beside the
    language model (their weights count in "Model loading took"). Counted from the
    config.json's ``vision_config``; see :func:`vision_tower`."""

    model_config = ConfigDict(frozen=True)
    model_type: str
    #: weights of the tower's linear layers (q/k/v/o, MLP, adapter, projector): vLLM builds
    #: them as Column/Row/QKVParallelLinear, so each TP rank holds 1/TP of them (the default
    #: ``mm_encoder_tp_mode="weights"``; vllm/model_executor/models/mllama4.py, siglip.py,
    #: pixtral.py)
    linear_params: int = Field(ge=0)
    #: embeddings, norms and the biases of row-parallel layers: every rank holds a copy
    replicated_params: int = Field(ge=0)

    def bytes_per_gpu(self, tp: int, act_bytes: float) -> float:
        return (self.linear_params / tp + self.replicated_params) * act_bytes


class ModelSpec(BaseModel):
    """The architecture facts that decide memory and compute."""

    model_config = ConfigDict(frozen=True)

    name: str
    model_type: str
    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate_size: int = Field(ge=0)
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int | None = None
    #: the length vLLM derives before rope scaling (``_get_and_verify_max_len``: the smallest of
    #: its length keys, model_max_length over them; :func:`max_len_base`) and the key it came
    #: from; None where the config (and its class's defaults) has none of them
    max_len_base: int | None = None
    max_len_key: str | None = None
    #: rope scaling factor (None: no scaling): a context above max_position_embeddings needs it
    rope_scaling_factor: float | None = None
    rope_scaling_type: str | None = None
    #: yarn's original_max_position_embeddings (the trained length the factor extends)
    rope_original_max_position_embeddings: int | None = None
    tie_word_embeddings: bool = False
    #: rows of a learned position-embedding table (GPT-2, GPTBigCode, OPT), 0 for rotary/ALiBi
    position_embeddings: int = Field(default=0, ge=0)
    torch_dtype: str = "bfloat16"
    attention_bias: bool = False
    gated_mlp: bool = True
    moe: MoE | None = None
    mla: MLA | None = None
    #: attention kind of each layer; "sliding" layers keep only the last ``sliding_window``,
    #: "linear" layers are :attr:`linear_attention`'s
    layer_kinds: tuple[LayerKind, ...]
    #: the linear-attention layers' mixer (Qwen3-Next's Gated DeltaNet, Granite 4.0-H's
    #: Mamba-2; None: none)
    linear_attention: GatedDeltaNet | Mamba2Mixer | Mamba1Mixer | None = None
    #: a sigmoid output gate on the attention (Qwen3-Next's attn_output_gate: q_proj is twice
    #: as wide, vllm qwen3_next.py Qwen3NextAttention)
    attn_output_gate: bool = False
    sliding_window: int | None = None
    quantization: Quantization | None = None
    attention_sinks: bool = False
    #: tanh soft-capping of the attention logits (Gemma 2's ``attn_logit_softcapping``), which
    #: not every vLLM attention backend implements (:func:`advisor.core.weights.attention_refusal`)
    attention_softcap: bool = False
    #: ALiBi attention biases instead of rotary positions (BLOOM, MPT, Jais, a Falcon with
    #: ``alibi``, Baichuan 13B: the models vLLM passes alibi_slopes for), which FlashAttention 3
    #: and FlexAttention do not take (:func:`advisor.core.weights.attention_refusal`)
    attention_alibi: bool = False
    #: sliding layers rotate with their own unscaled base (Gemma 3's rope_local_base_freq), so
    #: vLLM builds a second cos/sin cache of max_position_embeddings positions
    #: (vllm/model_executor/models/gemma3.py: get_rope per layer kind, cached by its arguments)
    local_rope: bool = False
    #: the vision encoder of a multimodal checkpoint (None: text only); not in param_counts,
    #: which count the language model that decodes
    vision: VisionTower | None = None
    #: config.json's ``architectures`` (the classes vLLM looks up in its model registry:
    #: :mod:`advisor.core.archs`); at most :data:`MAX_ARCHITECTURES` names kept
    architectures: tuple[str, ...] = ()
    #: config.json's own ``model_type`` (a multimodal checkpoint's, not its text model's): the
    #: config class vLLM must find without --trust-remote-code (:mod:`advisor.core.archs`)
    config_model_type: str = ""

    # -- derived ------------------------------------------------------------------------
    @property
    def padded_vocab(self) -> int:
        return math.ceil(self.vocab_size / VOCAB_PADDING) * VOCAB_PADDING

    @property
    def is_hybrid(self) -> bool:
        return "sliding" in self.layer_kinds and "full" in self.layer_kinds

    @property
    def attention_layers(self) -> int:
        """Layers that keep a KV cache (all but the linear-attention ones)."""
        return sum(1 for k in self.layer_kinds if k != "linear")

    def tp_problem(self, tp: int, expert_parallel: bool = False) -> str | None:
        """Why vLLM cannot shard this model over ``tp`` GPUs (None: it can), in its words.

        Beyond the heads (:meth:`splits_over`): every column- and row-parallel layer divides its
        sharded dimension by TP (``divide`` asserts "is not divisible by") — the MLP's
        intermediate size, each expert's (FusedMoE shards it by TP when expert parallelism is
        off; with ``expert_parallel`` — vLLM's --enable-expert-parallel — each GPU holds whole
        experts instead, so their width is not split); and a group-quantized checkpoint needs
        each rank's input slice of a row-parallel layer to hold whole groups ("The input size
        is not aligned with the quantized weight shape. This can be caused by too large tensor
        parallel size.":
        vllm awq.py/gptq.py, vllm-project/vllm #5675 for Qwen2-72B-AWQ at TP 8; Qwen's
        maintainers, QwenLM/Qwen3 #698: TP must divide the intermediate size, the heads and,
        quantized, intermediate size / group size), block fp8 whole blocks both ways
        ("Weight input_size_per_partition = … is not divisible by weight quantization block_k",
        vllm fp8.py validate_fp8_block_shape)."""
        if tp < 1 or self.num_heads % tp:
            return f"TP {tp} does not divide the {self.num_heads} attention heads"
        if not self.splits_over(tp):
            return f"TP {tp} does not divide the {self.num_kv_heads} KV heads"
        if self.linear_attention is not None:
            why = self.linear_attention.tp_problem(tp)
            if why:
                return why
        dense = self.moe is None or not all(self.is_moe_layer(i)
                                            for i in range(self.num_layers))
        dims: list[tuple[str, int, bool]] = []  # (what, size, quantized)
        q = self.quantization
        linear_q = q is not None and q.scope == "linear"
        if dense:
            dims.append(("MLP intermediate size", self.intermediate_size, linear_q))
        if self.moe is not None:
            if not expert_parallel:
                dims.append(("expert intermediate size", self.moe.expert_intermediate_size,
                             q is not None))
            # the shared expert is a TP-sharded MLP either way (DeepseekV2MLP, Qwen2MoeMLP:
            # column/row-parallel; only data-parallel attention turns their TP off)
            if self.moe.shared_intermediate_size:
                dims.append(("shared expert intermediate size",
                             self.moe.shared_intermediate_size, linear_q))
        for what, size, quantized in dims:
            if size % tp:
                return f"TP {tp} does not divide the {what} {size}"
            part = size // tp
            if quantized and q is not None:
                for name, g in (("group", q.group_size), ("block", q.block_n)):
                    if g and part % g:
                        return (f"TP {tp} leaves {part} of the {what} {size} per GPU, not a "
                                f"whole number of the checkpoint's {g}-wide quantization "
                                f"{name}s")
        return None

    def expert_parallel_at(self, tp: int) -> bool:
        """Whether vLLM serves this model over ``tp`` GPUs only with --enable-expert-parallel:
        TP cannot split its experts (a 1536-wide block-fp8 expert leaves 192 columns per GPU at
        TP 8: "The output_size of gate's and up's weight = 192 is not divisible by weight
        quantization block_n = 128", vllm-project/vllm #17569, Qwen3-235B-A22B-FP8) but whole
        experts per GPU can. advisor lays a model out with expert parallelism only then: vLLM's
        default is TP for the experts too, and InferenceX ran MiniMax-M2.5 (1536-wide block-fp8
        experts) at TP 8 only with the flag (benchmarks/perf/README.md item 14). TP 8 with the
        flag is vLLM's own recipe for a large MoE on one 8-GPU node (docs.vllm.ai/projects/
        recipes, Qwen3-Coder-480B-A35B on 8 x H200: --enable-expert-parallel
        --tensor-parallel-size 8); where TP alone works advisor keeps TP, since its step model
        times the two alike (item 24)."""
        return self.expert_parallel_for(tp, None) is True

    def expert_parallel_for(self, tp: int, asked: bool | None) -> bool | None:
        """Whether a layout of TP ``tp`` runs --enable-expert-parallel when the user ``asked``
        for it (None: only where TP alone cannot shard the model and whole experts can; True:
        wherever a MoE model can at TP > 1; False: never), or None when vLLM cannot serve it at
        ``tp`` that way."""
        by_tp = self.tp_problem(tp) is None
        wants = (not by_tp) if asked is None else asked
        if wants and self.moe is not None and tp > 1 and self.tp_problem(
                tp, expert_parallel=True) is None:
            return True
        return False if by_tp else None

    def experts_per_gpu(self, tp: int) -> int:
        """Experts on the fullest GPU under expert parallelism over ``tp`` GPUs: vLLM's
        determine_expert_map gives each rank E // TP and the first E mod TP ranks one more."""
        return -(-self.moe.num_experts // tp) if self.moe is not None else 0

    def splits_over(self, tp: int) -> bool:
        """Whether vLLM can split the attention over ``tp`` GPUs: the query heads divide by it
        (ModelConfig.verify_with_parallel_config) and the KV heads divide by it or, at a TP
        above them, it divides by them (QKVParallelLinear: ``divide(total_num_kv_heads,
        tp_size)``, else ``divide(tp_size, total_num_kv_heads)`` replicas; ``divide`` asserts
        "is not divisible by"). phi-4's 10 KV heads split over 2 GPUs, not 4 or 8. MLA models
        keep one latent per token on every rank: only their query heads count."""
        if tp < 1 or self.num_heads % tp:
            return False
        if self.mla is not None:
            return True
        kv = self.num_kv_heads
        return (kv % tp == 0) if tp < kv else (tp % kv == 0)

    def is_moe_layer(self, i: int) -> bool:
        m = self.moe
        return (m is not None and i >= m.first_dense and i not in m.dense_layers
                and (i + (1 if m.every_from_one else 0)) % m.every == 0
                and (m.last is None or i <= m.last))

    def attention_params(self) -> int:
        h, d = self.hidden_size, self.head_dim
        if self.mla is not None:
            m = self.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank:
                q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * self.num_heads * qk
            else:
                q = h * self.num_heads * qk
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv += m.kv_lora_rank * self.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
            o = self.num_heads * m.v_head_dim * h
            return q + kv + o
        q = h * self.num_heads * d * (2 if self.attn_output_gate else 1)
        kv = 2 * h * self.num_kv_heads * d
        o = self.num_heads * d * h
        bias = (self.num_heads + 2 * self.num_kv_heads) * d if self.attention_bias else 0
        if self.attention_bias and self.model_type == "gpt_oss":
            bias += h  # o_proj bias too
        sinks = self.num_heads if self.attention_sinks else 0
        return q + kv + o + bias + sinks

    def dense_mlp_params(self) -> int:
        mats = 3 if self.gated_mlp else 2
        return mats * self.hidden_size * self.intermediate_size

    def expert_params(self) -> int:
        """One routed expert."""
        assert self.moe is not None
        m = self.moe
        p = 3 * self.hidden_size * m.expert_intermediate_size
        if m.expert_bias:
            p += 2 * m.expert_intermediate_size + self.hidden_size
        return p

    def moe_layer_params(self, active: bool) -> tuple[int, int]:
        """(expert params, other params) of one MoE layer; ``active`` counts the routed top-k."""
        assert self.moe is not None
        m = self.moe
        n = m.experts_per_token if active else m.num_experts
        experts = n * self.expert_params()
        router = self.hidden_size * m.num_experts + (m.num_experts if m.expert_bias else 0)
        shared_size = (m.shared_intermediate_size
                       or m.num_shared_experts * m.expert_intermediate_size)
        shared = 3 * self.hidden_size * shared_size
        if self.model_type in ("qwen2_moe", "qwen3_next") and shared_size:
            shared += self.hidden_size  # the shared expert's sigmoid gate
        return experts, router + shared

    def embedding_params(self) -> int:
        return (self.padded_vocab * self.hidden_size * (1 if self.tie_word_embeddings else 2)
                + self.position_embeddings * self.hidden_size)

    def param_counts(self) -> dict[str, int]:
        """Total and active-per-token parameters, and how many sit in MoE experts."""
        return dict(_param_counts(self))

    def _count(self) -> tuple[tuple[str, int], ...]:
        total = active = experts_total = 0
        norms = 2 * self.hidden_size
        for i in range(self.num_layers):
            attn = (self.linear_attention.params(self.hidden_size)
                    if self.layer_kinds[i] == "linear" and self.linear_attention is not None
                    else self.attention_params())
            if self.is_moe_layer(i):
                e_all, other = self.moe_layer_params(active=False)
                e_act, _ = self.moe_layer_params(active=True)
                total += attn + e_all + other + norms
                active += attn + e_act + other + norms
                experts_total += e_all
            else:
                layer = attn + self.dense_mlp_params() + norms
                total += layer
                active += layer
        emb = self.embedding_params() + self.hidden_size
        return (("total", total + emb), ("active", active + emb), ("experts", experts_total),
                ("embeddings", emb))


@functools.lru_cache(maxsize=256)
def _param_counts(spec: ModelSpec) -> tuple[tuple[str, int], ...]:
    """Parameter counts are asked for in every perf estimate; a spec is frozen, so cache them."""
    return spec._count()


def _get(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


#: the range each integer field of a config.json may take: far beyond any released model,
#: small enough that a hostile value (``num_hidden_layers: 1e9``) is refused, not looped over
LIMITS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 4096),
    "vision_layers": (0, 4096),
    "hidden_size": (1, 1 << 18),
    "num_attention_heads": (1, 1 << 14),
    "num_key_value_heads": (1, 1 << 14),
    "head_dim": (1, 1 << 14),
    "intermediate_size": (0, 1 << 22),
    "vocab_size": (1, 1 << 24),
    "num_experts": (0, 1 << 14),
    "num_experts_per_tok": (1, 1 << 14),
    "moe_intermediate_size": (0, 1 << 22),
    "n_shared_experts": (0, 1 << 10),
    "shared_expert_intermediate_size": (0, 1 << 22),
    "first_k_dense_replace": (0, 4096),
    "moe_layer_freq": (1, 4096),
    "kv_lora_rank": (1, 1 << 16),
    "qk_rope_head_dim": (0, 1 << 14),
    "qk_nope_head_dim": (0, 1 << 14),
    "v_head_dim": (1, 1 << 14),
    "q_lora_rank": (1, 1 << 16),
    "max_position_embeddings": (1, 1 << 27),
    "original_max_position_embeddings": (1, 1 << 27),
    "sliding_window": (1, 1 << 27),
    "sliding_window_pattern": (1, 4096),
    "full_attention_interval": (1, 4096),
    "linear_num_key_heads": (1, 1 << 14),
    "linear_num_value_heads": (1, 1 << 14),
    "linear_key_head_dim": (1, 1 << 14),
    "linear_value_head_dim": (1, 1 << 14),
    "linear_conv_kernel_dim": (2, 64),
    "mamba_n_heads": (1, 1 << 14),
    "mamba_n_groups": (1, 1 << 14),
    "mamba_d_state": (1, 1 << 14),
    "mamba_d_head": (1, 1 << 14),
    "mamba_d_conv": (2, 64),
    "mamba_expand": (1, 64),
    "bits": (1, 32),
    "group_size": (-1, 1 << 20),
}
#: the checkpoint dtypes a config.json may name (aliases torch accepts), and their bytes
DTYPE_ALIASES = {"float32": "float32", "float": "float32", "fp32": "float32",
                 "float16": "float16", "half": "float16", "fp16": "float16",
                 "bfloat16": "bfloat16", "bf16": "bfloat16"}
_CONFIG_HINT = "pass the model's full config.json (the one next to its weights)"


def _bad(name: str, key: str, value: Any, need: str) -> ModelConfigError:
    shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return ModelConfigError(f"{name}: config.json {key} {shown[:60]} {need}", hint=_CONFIG_HINT)


def _int(cfg: dict[str, Any], name: str, *keys: str, default: int | None = None,
         limit: str | None = None) -> int:
    """An integer field (the first of ``keys`` present), within :data:`LIMITS`: a whole
    number (``8.0`` is 8; ``8.5``, ``"8"``, ``true``, NaN and 1e309 are refused)."""
    key = next((k for k in keys if cfg.get(k) is not None), None)
    if key is None:
        if default is None:
            raise ModelConfigError(f"{name}: config.json lacks a positive integer {keys[0]!r}",
                                   hint=_CONFIG_HINT)
        return default
    value = cfg[key]
    lo, hi = LIMITS.get(limit or keys[0], (0, 1 << 30))
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(name, key, cfg[key], "is not an integer")
    if not lo <= value <= hi:
        raise _bad(name, key, value, f"is out of range ({lo}..{hi})")
    return value


def _require(cfg: dict[str, Any], name: str, *keys: str) -> int:
    return _int(cfg, name, *keys)


def _dtype(cfg: dict[str, Any], name: str) -> str:
    raw = _get(cfg, "torch_dtype", "dtype", default="bfloat16")
    if isinstance(raw, str) and raw.replace("torch.", "").lower() == "auto":
        return "bfloat16"
    dtype = DTYPE_ALIASES.get(raw.replace("torch.", "").lower()) if isinstance(raw, str) else None
    if dtype is None:
        raise ModelConfigError(
            f"{name}: config.json torch_dtype {str(raw)[:40]!r} is not a dtype advisor can "
            "size", hint="known: " + ", ".join(DTYPE_ALIASES))
    return dtype


def _quantization(cfg: dict[str, Any], override: str | None) -> Quantization | None:
    raw = cfg.get("quantization_config")
    q: dict[str, Any] = raw if isinstance(raw, dict) else {}
    method = str(override or q.get("quant_method") or "").lower()
    if not method or method in ("none", "auto"):
        return None
    raw_nested = q.get("quantization")
    nested: dict[str, Any] = raw_nested if isinstance(raw_nested, dict) else {}
    algo = str(q.get("quant_algo") or nested.get("quant_algo") or "").upper()
    kv_algo = str(q.get("kv_cache_quant_algo") or nested.get("kv_cache_quant_algo") or "")
    kv: Literal["fp8"] | None = (
        "fp8" if method.startswith("modelopt") and kv_algo.upper() == "FP8" else None)
    if method in ("nvfp4", "modelopt_fp4") or (method == "modelopt" and "FP4" in algo):
        # NVFP4: 4-bit E2M1 values and one FP8 scale per 16 (4.5 bits a weight; the
        # per-tensor FP32 scale is negligible). A ModelOpt export says so in quant_algo; read
        # as "modelopt" alone it was sized as FP8, 1.78x its weights
        return Quantization(method="nvfp4", bytes_per_weight=4.5 / 8, scope=_scope(cfg, q),
                            kv_cache_dtype=kv)
    if method in ("fp8", "fbgemm_fp8", "modelopt"):
        block = q.get("weight_block_size")
        bn = bk = None
        if isinstance(block, list) and len(block) == 2:
            bn = _int({"n": block[0]}, "quantization_config", "n", limit="group_size") or None
            bk = _int({"k": block[1]}, "quantization_config", "k", limit="group_size") or None
        return Quantization(method=method, bytes_per_weight=1.0, kv_cache_dtype=kv,
                            group_size=bk, block_n=bn)
    if method == "mxfp4":
        # 4-bit values plus one 8-bit scale per 32 (OCP MX), on the experts only
        return Quantization(method=method, bytes_per_weight=4.25 / 8, scope="experts")
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "bitsandbytes"):
        bits = _int(q, "quantization_config", "bits", "w_bit", default=4, limit="bits")
        group = _int(q, "quantization_config", "group_size", "q_group_size", default=128,
                     limit="group_size") or 128
        per_channel = group <= 0
        group = group if group > 0 else 4096
        # packed weights + one fp16 scale and one packed zero point per group
        return Quantization(method=method, bytes_per_weight=bits / 8 + (2 + bits / 8) / group,
                            # bitsandbytes' blocks are its own, not vLLM's TP constraint
                            group_size=None if per_channel or method == "bitsandbytes"
                            else group)
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        bits = 8
        for g in groups.values() if isinstance(groups, dict) else []:
            w = (g.get("weights") if isinstance(g, dict) else None) or {}
            if not isinstance(w, dict):
                raise _bad("quantization_config", "weights", w, "is not an object")
            bits = _int(w, "quantization_config", "num_bits", default=bits, limit="bits")
            gsize = _int(w, "quantization_config", "group_size", default=0,
                         limit="group_size") or None
            gsize = gsize if gsize and gsize > 0 else None
            # "type": "int" (W4A16/W8A16 on Marlin, W8A8 int8) or "float" (FP8, NVFP4): the
            # kernels and the least GPU differ (advisor.core.weights.METHOD_MIN_CAPABILITY).
            # A 4-bit float group carries one 1-byte scale (NVFP4: fp8 per 16 values), an int
            # group one fp16 scale
            floating = str(w.get("type") or "int").lower() == "float"
            extra = ((1 if floating and bits == 4 else 2) / gsize) if gsize else 0.0
            kind = f"fp{bits}" if floating else f"w{bits}"
            return Quantization(method=f"{method}-{kind}", bytes_per_weight=bits / 8 + extra,
                                scope=_scope(cfg, q), group_size=gsize)
        return Quantization(method=method, bytes_per_weight=bits / 8)
    if method in ("int8", "w8a8"):
        return Quantization(method=method, bytes_per_weight=1.0)
    raise ModelConfigError(
        f"quantization {method!r} is not one advisor can size",
        hint="known: fp8, nvfp4 (ModelOpt), awq, gptq, compressed-tensors (w8a8, w4a16), mxfp4, "
             "bitsandbytes")


def _scope(cfg: dict[str, Any], q: dict[str, Any]) -> Literal["linear", "experts"]:
    """Which linear layers a checkpoint quantizes: an MoE model whose quantization leaves the
    attention out (compressed-tensors ``ignore``, ModelOpt ``exclude_modules``) quantizes its
    experts only. moonshotai/Kimi-K2.5 ignores lm_head, self_attn, shared_experts and the
    dense layers' MLP (int4 on the routed experts); nvidia/MiniMax-M2.5-NVFP4 excludes
    self_attn and the router (huggingface.co/nvidia/MiniMax-M2.5-NVFP4, hf_quant_config.json).
    A dense model keeps "linear": its MLP is quantized whatever the attention is."""
    raw_nested = q.get("quantization")
    nested: dict[str, Any] = raw_nested if isinstance(raw_nested, dict) else {}
    raw = q.get("ignore") or q.get("exclude_modules") or nested.get("exclude_modules")
    names = [str(x) for x in raw[:100_000]] if isinstance(raw, list) else []
    moe = any(isinstance(cfg.get(k), int) and cfg[k] > 1
              for k in ("num_local_experts", "num_experts", "n_routed_experts"))
    return "experts" if moe and any("self_attn" in n for n in names) else "linear"


def _factor(rope: dict[str, Any] | None, name: str) -> float | None:
    """rope_scaling's factor: a finite number in (0, 1024], or None."""
    if not rope or not rope.get("factor"):
        return None
    raw = rope["factor"]
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not (
            math.isfinite(raw) and 0 < raw <= 1024):
        raise _bad(name, "rope_scaling.factor", raw, "is not a number in (0, 1024]")
    return float(raw)


def vision_tower(vcfg: dict[str, Any], text_hidden: int, name: str) -> VisionTower | None:
    """The vision tower a ``vision_config`` describes, counted the way vLLM builds it.

    A ViT: ``num_hidden_layers`` encoder layers of q/k/v/o (``hidden_size``^2 each) and an MLP
    (fc1/fc2, or gate/up/down where the family gates it), two norms per layer, a patch
    embedding (channels x patch^2 x hidden), then the family's adapter and projector into the
    language model's ``text_hidden``:

    * ``llama4_vision_model`` (vllm/model_executor/models/mllama4.py; transformers
      modeling_llama4): biased attention and fc1/fc2, a class embedding and
      (image/patch)^2 + 1 learned positions, pre/post LayerNorms, the pixel-shuffle adapter
      (intermediate_size x projector_input_dim, then projector_input_dim x
      projector_output_dim) and the projector (vision_output_dim x text hidden). For
      Llama-4-Scout this is 871,932,416 parameters, the sum of the vision rows of the
      published per-module table of meta-llama/Llama-4-Scout-17B-16E (109,676,279,296 in
      all); tests/test_sizing.py pins it.
    * ``siglip_vision_model`` (Gemma 3; vllm siglip.py, gemma3_mm.py): biased attention and
      fc1/fc2, learned positions, a post LayerNorm; projector hidden x text hidden.
    * ``pixtral`` (Mistral 3; vllm pixtral.py): unbiased attention, gated MLP, RoPE (no
      learned positions); patch merger (hidden x 4 -> hidden) and a two-layer projector.
    * any other: the generic ViT (biased attention, fc1/fc2, learned positions) and a
      hidden x text hidden projector.
    """
    vt = str(vcfg.get("model_type") or "")
    layers = _int(vcfg, name, "num_hidden_layers", "depth", default=0, limit="vision_layers")
    if layers <= 0:
        return None
    h = _int(vcfg, name, "hidden_size", "embed_dim", default=0, limit="hidden_size")
    if h <= 0:
        return None
    inter = _int(vcfg, name, "intermediate_size", default=4 * h)
    channels = _int(vcfg, name, "num_channels", "in_channels", default=3, limit="head_dim")
    patch = _int(vcfg, name, "patch_size", default=14, limit="head_dim")
    image = _int(vcfg, name, "image_size", default=224, limit="max_position_embeddings")
    positions = (image // patch) ** 2
    gated = vt == "pixtral"
    biased = vt != "pixtral"
    attn_w = 4 * h * h
    mlp_w = (3 if gated else 2) * h * inter
    # column-parallel biases are split with their weights; row-parallel ones (o_proj, fc2)
    # and the norms are whole on every rank
    col_bias = (3 * h + (0 if gated else inter)) if biased else 0
    row_bias = 2 * h if biased else 0
    norms = 2 * (2 * h if vt != "pixtral" else h)  # LayerNorm weight+bias; Pixtral RMSNorm
    linear = layers * (attn_w + mlp_w + col_bias)
    replicated = layers * (row_bias + norms)
    patch_w = channels * patch * patch * h
    if vt == "llama4_vision_model":
        adapter_in = _int(vcfg, name, "projector_input_dim", default=4096, limit="hidden_size")
        adapter_out = _int(vcfg, name, "projector_output_dim", default=4096, limit="hidden_size")
        out_dim = _int(vcfg, name, "vision_output_dim", default=adapter_out, limit="hidden_size")
        linear += patch_w + inter * adapter_in + adapter_in * adapter_out + out_dim * text_hidden
        replicated += h + (positions + 1) * h + 2 * 2 * h  # class emb, positions, pre/post LN
    elif vt == "pixtral":
        linear += patch_w + (4 * h) * h + h * text_hidden + text_hidden * text_hidden
        replicated += h + h  # ln_pre and the projector's norm (its linears have no bias)
    else:
        linear += patch_w + h * text_hidden
        replicated += h + positions * h + 2 * h + h  # patch bias, positions, post-LN, mm norm
    return VisionTower(model_type=vt or "vit", linear_params=linear, replicated_params=replicated)


#: config keys that only state-space or linear-attention hybrids carry: Qwen3-Next
#: (full_attention_interval: one attention layer in four, the rest Gated DeltaNet), Nemotron-H
#: (hybrid_override_pattern), Jamba (attn_layer_period), Mamba/Mamba-2/Falcon-H1/Bamba/Granite
#: 4.0 hybrids (mamba_d_state, mamba_d_ssm, ssm_state_size, mamba_expand), MiniMax-M1/Text-01
#: (attn_type_list: lightning attention), Kimi-Linear (linear_attn_config), Zamba/Granite
#: (layers_block_type)
HYBRID_KEYS = ("full_attention_interval", "hybrid_override_pattern", "attn_layer_period",
               "mamba_d_state", "mamba_d_ssm", "ssm_state_size", "mamba_expand",
               "attn_type_list", "linear_attn_config", "layers_block_type")
#: layer_types entries that are not softmax attention (Qwen3.5's "linear_attention", Granite's
#: and Falcon-H1's "mamba", LFM2's "conv")
HYBRID_LAYER_WORDS = ("linear", "mamba", "ssm", "conv", "deltanet", "rwkv")


#: model types whose linear-attention layers advisor sizes (:class:`GatedDeltaNet`); the
#: other hybrids of :func:`hybrid_layers` are refused
LINEAR_ATTENTION_MODEL_TYPES = ("qwen3_next", "granitemoehybrid", "bamba", "jamba")
#: Qwen3NextConfig's default when config.json leaves it out: one attention layer in four
#: (transformers 4.57.6 configuration_qwen3_next.py: kwargs.get("full_attention_interval", 4))
FULL_ATTENTION_INTERVAL = 4


#: the config keys that place each hybrid family's attention layers
ATTENTION_PLACED_BY = {"qwen3_next": "layer_types / full_attention_interval",
                       "granitemoehybrid": "layer_types", "bamba": "attn_layer_indices",
                       "jamba": "attn_layer_period / attn_layer_offset"}


def _linear_mixer(cfg: dict[str, Any], name: str, model_type: str, layers: int
                  ) -> tuple[GatedDeltaNet | Mamba2Mixer | Mamba1Mixer, list[LayerKind]]:
    """The state mixer of a hybrid of :data:`LINEAR_ATTENTION_MODEL_TYPES` and the kind of each
    layer; one without an attention layer is refused (vLLM would run it attention-free)."""
    mixer: GatedDeltaNet | Mamba2Mixer | Mamba1Mixer
    if model_type in ("granitemoehybrid", "bamba"):
        mixer, kinds = _mamba2(cfg, name, layers, model_type)
    elif model_type == "jamba":
        mixer, kinds = _mamba1(cfg, name, layers)
    else:
        mixer, kinds = _gated_delta_net(cfg, name, layers)
    if "full" not in kinds:
        raise ModelConfigError(
            f"{name}: no attention layer among its {layers} layers; advisor sizes a "
            f"{mixer.label} hybrid beside the KV cache of its attention layers",
            hint=f"check {ATTENTION_PLACED_BY[model_type]} against the checkpoint's")
    return mixer, kinds


def _mamba1(cfg: dict[str, Any], name: str, layers: int) -> tuple[Mamba1Mixer, list[LayerKind]]:
    """Jamba's layers (JambaConfig.layers_block_type: attention where i % attn_layer_period
    == attn_layer_offset, Mamba elsewhere; the class's defaults 8 and 4) and its Mamba mixer
    (intermediate = mamba_expand x hidden_size; mamba_dt_rank "auto" = ceil(hidden / 16))."""
    period = _int(cfg, name, "attn_layer_period", default=8, limit="num_hidden_layers")
    offset = _int(cfg, name, "attn_layer_offset", default=4, limit="first_k_dense_replace")
    if offset >= period:
        raise _bad(name, "attn_layer_offset", offset, f"is not below attn_layer_period {period}")
    kinds: list[LayerKind] = ["full" if i % period == offset else "linear"
                              for i in range(layers)]
    hidden = _require(cfg, name, "hidden_size")
    rank = cfg.get("mamba_dt_rank")
    mixer = Mamba1Mixer(
        intermediate=_require(cfg, name, "mamba_expand") * hidden,
        state_size=_require(cfg, name, "mamba_d_state"),
        conv_kernel=_require(cfg, name, "mamba_d_conv"),
        dt_rank=(-(-hidden // 16) if rank in (None, "auto")
                 else _int(cfg, name, "mamba_dt_rank", limit="hidden_size")),
        conv_bias=cfg.get("mamba_conv_bias") is not False,
        proj_bias=cfg.get("mamba_proj_bias") is True)
    return mixer, kinds


def _mamba2(cfg: dict[str, Any], name: str, layers: int, model_type: str
            ) -> tuple[Mamba2Mixer, list[LayerKind]]:
    """Granite 4.0-H's and Bamba's layers and their Mamba-2 mixer's shape. Granite states
    ``layer_types`` ("mamba" / "attention", which vLLM's GraniteMoeHybridModel reads layer by
    layer), Bamba ``attn_layer_indices`` (BambaConfig.layers_block_type: attention there,
    mamba elsewhere). Both configs' mamba_* keys: intermediate = mamba_expand x hidden_size,
    mamba_d_head "auto" = intermediate / mamba_n_heads."""
    if model_type == "bamba":
        where = cfg.get("attn_layer_indices")
        if not isinstance(where, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                for i in where):
            raise _bad(name, "attn_layer_indices", str(where)[:80],
                       f"is not a list of layer indices below {layers}")
        types: Any = ["attention" if i in where else "mamba" for i in range(layers)]
    else:
        types = cfg.get("layer_types")
    if not isinstance(types, list) or len(types) != layers or not all(
            t in ("mamba", "attention") for t in types):
        raise _bad(name, "layer_types", str(types)[:80],
                   f"is not a list of {layers} 'mamba' / 'attention'")
    kinds: list[LayerKind] = ["linear" if t == "mamba" else "full" for t in types]
    hidden = _require(cfg, name, "hidden_size")
    inter = _require(cfg, name, "mamba_expand") * hidden
    heads = _require(cfg, name, "mamba_n_heads")
    if inter % heads:
        raise _bad(name, "mamba_n_heads", heads, f"does not divide mamba_expand x hidden_size "
                   f"{inter}")
    head_dim = (inter // heads if cfg.get("mamba_d_head") in (None, "auto")
                else _int(cfg, name, "mamba_d_head"))
    mixer = Mamba2Mixer(
        intermediate=inter, n_groups=_require(cfg, name, "mamba_n_groups"), num_heads=heads,
        head_dim=head_dim, state_size=_require(cfg, name, "mamba_d_state"),
        conv_kernel=_require(cfg, name, "mamba_d_conv"),
        conv_bias=cfg.get("mamba_conv_bias") is not False,
        proj_bias=cfg.get("mamba_proj_bias") is True)
    return mixer, kinds


def _gated_delta_net(cfg: dict[str, Any], name: str, layers: int
                     ) -> tuple[GatedDeltaNet, list[LayerKind]]:
    """Qwen3-Next's linear-attention shape and the kind of each layer: ``layer_types``
    ("linear_attention" / "full_attention", as vLLM's Qwen3NextDecoderLayer reads it), else
    every ``full_attention_interval``-th layer attention (Qwen3NextConfig derives the same
    list). The linear_* keys the file leaves out are the class's defaults
    (:func:`with_class_defaults`)."""
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or not all(
                t in ("linear_attention", "full_attention") for t in types):
            raise _bad(name, "layer_types", str(types)[:80],
                       f"is not a list of {layers} 'linear_attention' / 'full_attention'")
        kinds: list[LayerKind] = ["linear" if t == "linear_attention" else "full"
                                  for t in types]
    else:
        every = _int(cfg, name, "full_attention_interval", default=FULL_ATTENTION_INTERVAL)
        kinds = ["full" if (i + 1) % every == 0 else "linear" for i in range(layers)]
    gdn = GatedDeltaNet(
        num_k_heads=_require(cfg, name, "linear_num_key_heads"),
        num_v_heads=_require(cfg, name, "linear_num_value_heads"),
        head_k_dim=_require(cfg, name, "linear_key_head_dim"),
        head_v_dim=_require(cfg, name, "linear_value_head_dim"),
        conv_kernel=_require(cfg, name, "linear_conv_kernel_dim"))
    return gdn, kinds


def hybrid_layers(cfg: dict[str, Any]) -> str | None:
    """What marks ``cfg`` as a state-space or linear-attention model (None: attention only).

    vLLM serves these with a per-sequence recurrent state beside the KV cache of their few
    attention layers and sizes its blocks to fit that state (vllm/v1 hybrid KV cache manager,
    MambaSpec). advisor sizes Qwen3-Next's Gated DeltaNet, Granite 4.0-H's and Bamba's Mamba-2
    and Jamba's Mamba that way (:data:`LINEAR_ATTENTION_MODEL_TYPES`); the others (Mamba alone,
    Nemotron-H, Zamba, Falcon-H1, PLaMo 2, lightning attention, short convolutions: other layer
    layouts, state shapes and kernels) it refuses rather than size as attention on every
    layer."""
    for key in HYBRID_KEYS:
        if cfg.get(key) not in (None, False, "", [], {}):
            return f"its config has {key}"
    types = cfg.get("layer_types")
    if isinstance(types, list):
        odd = sorted({str(t) for t in types
                      if any(w in str(t).lower() for w in HYBRID_LAYER_WORDS)})
        if odd:
            return f"its layer_types include {', '.join(odd)[:60]}"
    if str(cfg.get("model_type") or "").lower() in ("mamba", "mamba2", "falcon_mamba", "rwkv",
                                                      "rwkv6", "rwkv7"):
        return f"model_type {cfg.get('model_type')} has no attention layers"
    return None


def _architectures(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(str(a)[:MAX_ARCH_NAME] for a in value[:MAX_ARCHITECTURES] if isinstance(a, str))


#: the model types vLLM 0.11.0 treats as Falcon when it counts KV heads: with
#: new_decoder_architecture the multi_query flag is ignored (get_total_num_kv_heads)
FALCON_MODEL_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")
#: the keys vLLM 0.11.0 takes the model's length from, smallest wins (``_get_and_verify_max_len``
#: possible_keys, vllm/config/model.py); a model_max_length overrides them all
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "model_max_length", "max_target_positions", "max_sequence_length",
                "max_seq_length", "seq_len")
#: model types whose MLP is one up and one down projection (no gate): transformers' modeling_
#: gpt2, opt, gpt_bigcode, falcon (RefinedWeb), bloom, mpt, gptj, gpt_neox, phi, starcoder2 and
#: nemotron (squared ReLU);
#: their parameter counts are checked against transformers' own models in a lock test
UNGATED_MLP_MODEL_TYPES = ("gpt2", "opt", "gpt_bigcode", "falcon", "RefinedWeb",
                           "RefinedWebModel", "bloom", "mpt", "gptj", "gpt_neox", "phi",
                           "starcoder2", "nemotron")
#: the attributes it reads KV heads from, first present wins (get_total_num_kv_heads)
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")


#: the architectures vLLM 0.11.0 always builds with ALiBi slopes (model_executor/models:
#: bloom.py, mpt.py — which asserts attn_config.alibi —, jais.py)
ALIBI_ARCHITECTURES = ("BloomForCausalLM", "MPTForCausalLM", "MptForCausalLM", "JAISLMHeadModel")


def uses_alibi(architectures: tuple[str, ...], cfg: dict[str, Any], hidden: int) -> bool:
    """Whether vLLM 0.11.0 builds this model's attention with ALiBi slopes: the architectures of
    :data:`ALIBI_ARCHITECTURES`; Falcon when its config says ``alibi`` (falcon.py); Baichuan's
    BaichuanForCausalLM unless it is the 7B (hidden_size 4096: rotary; baichuan.py)."""
    if any(a in ALIBI_ARCHITECTURES for a in architectures):
        return True
    if any(a in ("FalconForCausalLM", "RWForCausalLM") for a in architectures):
        return bool(cfg.get("alibi"))
    return "BaichuanForCausalLM" in architectures and hidden != 4096


def learned_positions(cfg: dict[str, Any], name: str, model_type: str) -> int:
    """Rows of the learned position table: GPT-2 and GPTBigCode hold n_positions (wpe), OPT
    max_position_embeddings + 2 (OPTLearnedPositionalEmbedding's offset; transformers' and
    vLLM's modeling files)."""
    if model_type in ("gpt2", "gpt_bigcode"):
        return _int(cfg, name, "n_positions", "max_position_embeddings", default=0,
                    limit="max_position_embeddings")
    if model_type == "opt":
        return _int(cfg, name, "max_position_embeddings", default=0) + 2
    return 0


def with_class_defaults(cfg: dict[str, Any], model_type: str) -> dict[str, Any]:
    """``cfg`` as the config object vLLM reads it through: the keys config.json leaves out take
    their class's defaults (GPTBigCode and Falcon are multi-query unless told otherwise,
    LlamaConfig's max_position_embeddings is 2048), and a renamed key is also there under the
    name the class stores it as (GPTBigCode's max_position_embeddings is n_positions). The
    table is the deployed release's transformers and vLLM config classes
    (:func:`advisor.core.archs.config_geometry`, read off the lock by
    tools/vllm_architectures.py)."""
    from advisor.core.archs import config_geometry

    defaults, aliases = config_geometry(model_type)
    if not defaults and not aliases:
        return cfg
    out = dict(cfg)
    for alias, target in aliases.items():
        if out.get(alias) is not None and out.get(target) is None:
            out[target] = out[alias]
    for key, value in defaults.items():
        if out.get(key) is None:
            out[key] = value
    return out


def _layer_list(cfg: dict[str, Any], name: str, key: str, layers: int) -> tuple[int, ...]:
    """A list of layer indices (Qwen-MoE's mlp_only_layers), each within the model's layers."""
    value = cfg.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > layers:
        raise _bad(name, key, value, f"is not a list of at most {layers} layer indices")
    out = []
    for v in value:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < layers:
            raise _bad(name, key, value, f"holds {v!r}, not a layer index below {layers}")
        out.append(v)
    return tuple(sorted(set(out)))


#: keys Hunyuan's MoE configs give per layer (vllm models/hunyuan_v1.py indexes them by layer)
PER_LAYER_KEYS = ("moe_intermediate_size", "moe_topk", "num_shared_expert")


def _per_layer_uniform(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """``cfg`` with a per-layer list of :data:`PER_LAYER_KEYS` whose values are all the same as
    that one value (Hunyuan-A13B's); a list that varies is refused (not sized)."""
    lists = {k: v for k in PER_LAYER_KEYS if isinstance(v := cfg.get(k), list)}
    if not lists:
        return cfg
    out = dict(cfg)
    for key, value in lists.items():
        if not value or any(x != value[0] for x in value):
            raise _bad(name, key, value, "varies from layer to layer, which advisor does not "
                       "size")
        out[key] = value[0]
    return out


def _section(cfg: dict[str, Any], key: str) -> dict[str, Any]:
    """A nested block of the config (MPT's and DBRX's attn_config, DBRX's ffn_config), else {}."""
    value = cfg.get(key)
    return value if isinstance(value, dict) else {}


def total_kv_heads(cfg: dict[str, Any], name: str, model_type: str, heads: int) -> int:
    """The KV heads vLLM 0.11.0 counts (vllm/config/model.py get_total_num_kv_heads): one for a
    multi-query model (GPTBigCode, Falcon-7B) unless it is a Falcon of the new decoder
    architecture; MPT and DBRX from attn_config.kv_n_heads; else n_head_kv, num_kv_heads,
    num_key_value_heads or multi_query_group_num (ChatGLM), else one per attention head."""
    new_falcon = model_type in FALCON_MODEL_TYPES and cfg.get("new_decoder_architecture")
    if not new_falcon and cfg.get("multi_query"):
        return 1
    if model_type in ("mpt", "dbrx"):
        attn = _section(cfg, "attn_config")
        return _int(attn, name, "kv_n_heads", default=heads, limit="num_key_value_heads")
    return _int(cfg, name, *KV_HEAD_KEYS, default=heads, limit="num_key_value_heads")


def max_len_base(cfg: dict[str, Any], name: str) -> tuple[str | None, int | None]:
    """(key, length) vLLM 0.11.0 derives before rope scaling (``_get_and_verify_max_len``):
    the smallest of :data:`MAX_LEN_KEYS` present, except that a model_max_length wins outright
    (Command-R); (None, None) where none is present — vLLM then takes --max-model-len as given."""
    # a length beyond any context (tokenizers' VERY_LARGE_INTEGER, 1e30, in a model_max_length)
    # bounds nothing: it is left out rather than refused
    if cfg.get("model_max_length"):
        if _beyond_any_context(cfg["model_max_length"]):
            return None, None
        return "model_max_length", _int(cfg, name, "model_max_length",
                                        limit="max_position_embeddings")
    found = [(k, _int(cfg, name, k, limit="max_position_embeddings"))
             for k in MAX_LEN_KEYS
             if cfg.get(k) is not None and not _beyond_any_context(cfg[k])]
    if not found:
        return None, None
    return min(found, key=lambda kv: kv[1])


def _beyond_any_context(value: Any) -> bool:
    hi = LIMITS["max_position_embeddings"][1]
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > hi)


def spec_from_config(cfg: dict[str, Any], name: str = "model",
                     quantization: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a parsed ``config.json`` (raises ModelConfigError)."""
    if not isinstance(cfg, dict):
        raise ModelConfigError(f"{name}: config.json is not a JSON object")
    top = cfg
    vcfg = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), dict) else None
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else None
    if text is not None:  # multimodal: the language model's config is nested
        cfg = {**{k: v for k, v in top.items() if k != "text_config"}, **text}
    model_type = str(_get(cfg, "model_type", default="") or "")
    hybrid = hybrid_layers(cfg)
    if hybrid and model_type not in LINEAR_ATTENTION_MODEL_TYPES:
        raise ModelConfigError(
            f"{name}: a state-space or linear-attention model ({hybrid}); advisor sizes "
            "attention models and the hybrids of Qwen3-Next, Granite 4.0-H, Bamba and Jamba, "
            "and a KV cache on every layer would be wrong for it",
            hint="size it with vLLM itself: its start-up log prints 'GPU KV cache size' and "
            "'Maximum concurrency'")
    stated = cfg
    cfg = with_class_defaults(_per_layer_uniform(cfg, name), model_type)
    # layers that read another layer's KV cache: Hunyuan's cross-layer attention (use_cla,
    # hunyuan_v1.py), Gemma 3n's last num_kv_shared_layers (gemma3n.py kv_sharing_target)
    shared = ("use_cla" if cfg.get("use_cla") else
              "num_kv_shared_layers" if cfg.get("num_kv_shared_layers") else None)
    if shared:
        raise ModelConfigError(
            f"{name}: its layers share KV caches ({shared} {cfg.get(shared)}); advisor sizes "
            "one KV cache per attention layer",
            hint="size it with vLLM itself: its start-up log prints 'GPU KV cache size'")
    layers = _require(cfg, name, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    hidden = _require(cfg, name, "hidden_size", "n_embd", "d_model")
    heads = _require(cfg, name, "num_attention_heads", "n_head", "n_heads")
    kv_heads = total_kv_heads(cfg, name, model_type, heads)
    if kv_heads <= 0 or heads % kv_heads:
        raise ModelConfigError(f"{name}: num_key_value_heads {kv_heads} does not divide "
                               f"num_attention_heads {heads}")
    # vllm/config/model.py get_head_size: head_dim, else hidden_size_per_head (PLaMo), else
    # hidden // heads (ChatGLM's kv_channels is not read)
    head_dim = _int(cfg, name, "head_dim", "hidden_size_per_head", default=0,
                    limit="head_dim") or max(1, hidden // heads)
    # ChatGLM's embedding and head are padded_vocab_size rows (vllm models/chatglm.py)
    vocab = _require(cfg, name, "padded_vocab_size", "vocab_size")
    ffn = _section(cfg, "ffn_config")
    inter = _int(cfg, name, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size",
                 default=0) or _int(ffn, name, "ffn_hidden_size", default=0,
                                    limit="intermediate_size")
    if not inter and cfg.get("expansion_ratio") is not None:  # MPT: d_model x expansion_ratio
        inter = hidden * _int(cfg, name, "expansion_ratio", limit="head_dim")
    inter = inter or 4 * hidden
    expert_inter_default = inter
    if model_type.startswith("llama4") and cfg.get("intermediate_size_mlp") is not None:
        # Llama 4: intermediate_size is each expert's (and the shared expert's), the dense
        # layers' MLP is intermediate_size_mlp (vllm models/llama4.py Llama4DecoderLayer)
        inter = _int(cfg, name, "intermediate_size_mlp", limit="intermediate_size")
    granite_shared = (_int(cfg, name, "shared_intermediate_size", default=0,
                           limit="intermediate_size")
                      if model_type == "granitemoehybrid" else 0)
    if granite_shared and not _int(cfg, name, "num_local_experts", default=0,
                                   limit="num_experts"):
        # Granite 4.0-H without experts: each layer's MLP is its shared_mlp
        # (vllm models/granitemoehybrid.py: block_sparse_moe only with num_local_experts > 0)
        inter = granite_shared

    moe = None
    # ERNIE 4.5 names them moe_num_experts, moe_k, moe_num_shared_experts and
    # moe_layer_start/end_index (vllm models/ernie45_moe.py); DBRX nests them in ffn_config
    n_experts = _int(cfg, name, "num_local_experts", "num_experts", "n_routed_experts",
                     "moe_num_experts", default=0, limit="num_experts") or _int(
        ffn, name, "moe_num_experts", default=0, limit="num_experts")
    jamba_every = 0
    if n_experts > 1 and model_type == "jamba":
        # JambaConfig.layers_num_experts: experts where i % expert_layer_period ==
        # expert_layer_offset (the class's 2 and 1): every period-th layer counted from one
        jamba_every = _int(cfg, name, "expert_layer_period", default=2, limit="moe_layer_freq")
        offset = _int(cfg, name, "expert_layer_offset", default=1, limit="first_k_dense_replace")
        if offset != jamba_every - 1:
            raise _bad(name, "expert_layer_offset", offset,
                       f"is not expert_layer_period - 1 ({jamba_every - 1}); advisor places "
                       "Jamba's experts on every period-th layer only")
    if n_experts > 1:
        per_token = _int(cfg, name, "num_experts_per_tok", "experts_per_token", "moe_k",
                         "moe_topk", default=0, limit="num_experts_per_tok") or _int(
            ffn, name, "moe_top_k", default=2, limit="num_experts_per_tok")
        if per_token > n_experts:
            raise _bad(name, "num_experts_per_tok", per_token,
                       f"is more than the {n_experts} experts")
        moe = MoE(
            num_experts=n_experts,
            experts_per_token=per_token,
            expert_intermediate_size=_int(cfg, name, "moe_intermediate_size",
                                          default=expert_inter_default),
            # Llama 4's MoE layers always add one shared expert of intermediate_size
            # (transformers modeling_llama4 Llama4TextMoe.shared_expert); its config has no key
            num_shared_experts=_int(cfg, name, "n_shared_experts", "moe_num_shared_experts",
                                    default=0, limit="n_shared_experts")
            or (1 if model_type.startswith("llama4") else 0),
            # Hunyuan's shared MLP is intermediate_size x num_shared_expert wide (hunyuan_v1.py)
            # Granite 4.0-H: shared_mlp of shared_intermediate_size beside the experts
            shared_intermediate_size=_int(cfg, name, "shared_expert_intermediate_size",
                                          default=0) or granite_shared or (
                inter * _int(cfg, name, "num_shared_expert", default=0,
                             limit="n_shared_experts") if cfg.get("use_mixed_mlp_moe") else 0),
            first_dense=_int(cfg, name, "first_k_dense_replace", "moe_layer_start_index",
                             default=0, limit="first_k_dense_replace"),
            last=(_int(cfg, name, "moe_layer_end_index", limit="first_k_dense_replace")
                  if cfg.get("moe_layer_end_index") is not None else None),
            # Llama 4's interleave_moe_layer_step counts from 1 too (llama4.py): Maverick's 2
            every=jamba_every or (_int(cfg, name, "moe_layer_freq", "decoder_sparse_step",
                                       "moe_layer_interval", "interleave_moe_layer_step",
                                       default=1, limit="moe_layer_freq")
                                  if _get(cfg, "moe_layer_freq", "decoder_sparse_step",
                                          "moe_layer_interval", "interleave_moe_layer_step")
                                  else 1),
            every_from_one=_get(cfg, "moe_layer_freq") is None,
            dense_layers=_layer_list(cfg, name, "mlp_only_layers", layers),
            expert_bias=model_type == "gpt_oss",
        )

    mla = None
    if cfg.get("kv_lora_rank") is not None:
        mla = MLA(kv_lora_rank=_int(cfg, name, "kv_lora_rank"),
                  qk_rope_head_dim=_int(cfg, name, "qk_rope_head_dim", default=64),
                  qk_nope_head_dim=_int(cfg, name, "qk_nope_head_dim", default=128),
                  v_head_dim=_int(cfg, name, "v_head_dim", default=128),
                  q_lora_rank=(_int(cfg, name, "q_lora_rank") if cfg.get("q_lora_rank")
                               else None))

    window = (_int(cfg, name, "sliding_window")
              if cfg.get("sliding_window") not in (None, False, 0) else None)
    if cfg.get("use_sliding_window") is False and model_type.startswith("qwen"):
        window = None  # Qwen configs carry a window they do not use
    kinds: list[LayerKind]
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        kinds = ["sliding" if "sliding" in str(t) else "full" for t in layer_types]
    elif window and model_type in ("gemma2", "gemma3", "gemma3_text", "cohere2"):
        # gemma-2 alternates sliding and global layers, starting with sliding (modeling_gemma2)
        pattern = _int(cfg, name, "sliding_window_pattern", default=2)
        kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers)]
    elif window:
        kinds = ["sliding"] * layers  # Mistral v0.1: every layer slides
    else:
        kinds = ["full"] * layers
    if window is None:
        kinds = ["full"] * layers
    linear = None
    if model_type in LINEAR_ATTENTION_MODEL_TYPES:
        linear, kinds = _linear_mixer(cfg, name, model_type, layers)

    rope = cfg.get("rope_scaling") if isinstance(cfg.get("rope_scaling"), dict) else None
    factor = _factor(rope, name)
    dtype = _dtype(cfg, name)
    max_pos = (_int(cfg, name, "max_position_embeddings")
               if cfg.get("max_position_embeddings") is not None else None)
    base_key, base_len = max_len_base(cfg, name)
    # the top level's: vLLM resolves the checkpoint's class, not its text model's
    architectures = _architectures(top.get("architectures"))
    if base_key is not None and stated.get(base_key) is None:
        base_key += " (its config class's default; the file does not state it)"
    archs = cfg.get("architectures")
    arch = " ".join(str(a) for a in archs) if isinstance(archs, list) else str(archs or "")
    bias = bool(cfg.get("attention_bias")) or model_type in ("qwen2", "qwen2_moe") or (
        "Qwen2" in arch)
    return ModelSpec(
        name=name, model_type=model_type, num_layers=layers, hidden_size=hidden,
        num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, intermediate_size=inter,
        vocab_size=vocab, max_position_embeddings=max_pos,
        max_len_base=base_len, max_len_key=base_key,
        rope_scaling_factor=factor,
        rope_scaling_type=(rope.get("rope_type") or rope.get("type")) if rope else None,
        rope_original_max_position_embeddings=(
            _int(rope, name, "original_max_position_embeddings")
            if rope and rope.get("original_max_position_embeddings") is not None else None),
        # the class's default where config.json does not say (with_class_defaults): True for
        # the many classes that keep PretrainedConfig's, False for LlamaConfig and its kin
        tie_word_embeddings=bool(_get(cfg, "tie_word_embeddings",
                                      default=model_type.startswith("gemma"))),
        torch_dtype=dtype,
        attention_bias=bias, gated_mlp=model_type not in UNGATED_MLP_MODEL_TYPES,
        position_embeddings=learned_positions(cfg, name, model_type),
        moe=moe, mla=mla, layer_kinds=tuple(kinds), sliding_window=window,
        linear_attention=linear,
        # vLLM reads getattr(config, "attn_output_gate", True) (qwen3_next.py)
        attn_output_gate=(model_type == "qwen3_next"
                          and cfg.get("attn_output_gate") is not False),
        quantization=_quantization(cfg, quantization),
        attention_sinks=model_type == "gpt_oss",
        attention_softcap=bool(cfg.get("attn_logit_softcapping")),
        attention_alibi=uses_alibi(architectures, cfg, hidden),
        local_rope=cfg.get("rope_local_base_freq") is not None and "sliding" in kinds,
        vision=vision_tower(vcfg, hidden, name) if vcfg is not None else None,
        architectures=architectures,
        config_model_type=str(top.get("model_type") or "")[:MAX_ARCH_NAME],
    )
