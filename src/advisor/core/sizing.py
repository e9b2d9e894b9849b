"""Memory fit, the way vLLM's V1 engine accounts for it. Pure functions, no I/O.

Per GPU: weights under TP and PP, the profiling run's peak activation, non-torch memory, CUDA
graphs (charged to the KV budget only where the release does), what is left for the KV cache,
that memory in whole blocks, and how many ``max_model_len`` requests it holds at once. The
accounting rules and where they come from are in :mod:`advisor.core.engine`.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.core import archs
from advisor.core.confidence import Confidence, memory_confidence
from advisor.core.engine import GIB, EngineProfile
from advisor.core.model import DTYPE_BYTES, GatedDeltaNet, ModelSpec
from advisor.core.question import KvCacheDtype
from advisor.errors import UserInputError

Dtype = Literal["auto", "bfloat16", "float16", "float32"]


class FitRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    gpu_memory_gib: float = Field(gt=0)
    gpu_name: str = ""
    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    max_model_len: int | None = Field(default=None, gt=0)
    gpu_memory_utilization: float | None = None
    dtype: Dtype = "auto"
    kv_cache_dtype: KvCacheDtype = "auto"
    max_num_batched_tokens: int | None = Field(default=None, gt=0)
    max_num_seqs: int | None = Field(default=None, gt=0)
    entrypoint: Literal["server", "llm"] = "server"
    enforce_eager: bool = False
    #: vLLM's --cpu-offload-gb: GiB of each GPU's weights kept in host memory and streamed to
    #: the GPU over PCIe in every forward pass (vLLM's engine-args docs)
    cpu_offload_gib: float = Field(default=0.0, ge=0, le=4096)
    #: the GPU's architecture (catalog name, e.g. "Turing"): which dtypes vLLM has there
    gpu_architecture: str | None = None
    #: its compute capability x 10 (advisor.core.weights.capability): which kernels vLLM picks
    gpu_compute_capability: int | None = Field(default=None, ge=10, le=200)
    #: vLLM's --enable-expert-parallel: each GPU of the TP group holds whole experts instead of
    #: a TP slice of every expert. None: as advisor lays it out — only where TP cannot split
    #: the experts and whole experts can (:meth:`ModelSpec.expert_parallel_at`)
    expert_parallel: bool | None = None


class MemoryFit(BaseModel):
    """What vLLM will do on one GPU of the layout. Sizes in GiB unless named otherwise."""

    model_config = ConfigDict(frozen=True)
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    cuda_graph_charged: bool
    budget_gib: float
    kv_cache_gib: float
    kv_cache_tokens: int
    kv_bytes_per_token: int
    num_blocks: int
    block_size: int
    max_concurrency: float
    max_model_len: int
    fits: bool
    notes: list[str]
    tp: int
    pp: int
    dtype: str
    kv_cache_dtype: str
    max_num_batched_tokens: int
    max_num_seqs: int
    vllm_version: str
    params_total: int
    params_active: int
    #: weights per GPU held in host memory (--cpu-offload-gb); ``weights_gib`` is the rest
    cpu_offload_gib: float = 0.0
    #: served with --enable-expert-parallel (whole experts per GPU)
    expert_parallel: bool = False
    #: how far to trust these figures: the accuracy benchmarks' error on this GPU family, model
    #: family and vLLM release, or "extrapolated" (set by callers that know the GPU)
    confidence: Confidence | None = None
    #: KV cache groups sharing the ``num_blocks`` pool, and how many of them hold a
    #: linear-attention state (one block per sequence, whatever its length)
    kv_groups: int = Field(default=1, ge=1)
    state_groups: int = Field(default=0, ge=0)

    def sequences_held(self, tokens: float) -> int:
        """Sequences of ``tokens`` tokens the KV cache holds at once. Attention only: "GPU KV
        cache size" // tokens. With linear-attention groups the blocks decide: each sequence
        takes ceil(tokens / block) blocks in every attention group and one in every state
        group (vLLM's "GPU KV cache size" counts every group at the attention's block size,
        which for Qwen3-Next understates the sequences it holds by 2x at 1k tokens)."""
        if not self.state_groups:
            return int(self.kv_cache_tokens // max(1.0, tokens))
        per = ((self.kv_groups - self.state_groups) * math.ceil(tokens / self.block_size)
               + self.state_groups)
        return self.num_blocks // per


# -- the pieces ---------------------------------------------------------------------------
def max_len_limit(spec: ModelSpec) -> int | None:
    """The longest max_model_len vLLM accepts without VLLM_ALLOW_LONG_MAX_MODEL_LEN.

    vLLM's ``_get_and_verify_max_len`` (vllm/config/model.py): the length it derives from the
    config (:attr:`ModelSpec.max_len_base`: the smallest of its length keys, class defaults
    included), times the rope scaling factor unless the rope type is su, longrope or llama3
    (their configs state the extended length) or the model is a Gemma 3 (its length is already
    scaled); for yarn the factor multiplies ``original_max_position_embeddings`` instead. A rope
    block without a factor scales by 1. None: the config has no length key, and vLLM takes
    --max-model-len as given.
    """
    if spec.max_len_base is None:
        return None
    if "gemma3" in spec.model_type:
        return spec.max_len_base
    return _rope_scaled(spec, spec.max_len_base)


def _rope_scaled(spec: ModelSpec, length: int) -> int:
    """``length`` times the rope scaling factor, for the scalings that extend it (not su,
    longrope or llama3, whose configs state the extended length); yarn's factor multiplies
    original_max_position_embeddings (transformers' default for it: the length itself)."""
    kind = spec.rope_scaling_type
    if kind is None or kind in ("su", "longrope", "llama3", "default"):
        return length
    base = (spec.rope_original_max_position_embeddings or length) if kind == "yarn" else length
    return int(base * (spec.rope_scaling_factor or 1.0))


def rope_cache_positions(spec: ModelSpec) -> int:
    """Positions of the global cos/sin cache vLLM builds (model_executor/layers/rotary_embedding
    get_rope): max_position_embeddings, times the factor of a scaling that extends the cache
    (linear, dynamic; yarn on its original length) — Gemma 3's linear 8 included, which makes
    its cache 8 x 131072 long (its start-up log's 8.58 GiB of weights); 4096 where the config
    has no max_position_embeddings."""
    if spec.max_position_embeddings is None:
        return 4096
    return _rope_scaled(spec, spec.max_position_embeddings)


def resolve_dtype(spec: ModelSpec, dtype: str, architecture: str | None = None) -> str:
    """The dtype vLLM serves ``spec`` in on a GPU of ``architecture`` (None: one with bfloat16):
    "auto" is the checkpoint's dtype where the GPU runs it, float32 checkpoints in bfloat16
    (float16 below compute capability 8.0) — :func:`advisor.core.weights.served_dtype`."""
    from advisor.core.weights import served_dtype

    return served_dtype(spec.model_type, spec.torch_dtype, architecture, dtype)


def kv_heads_per_gpu(spec: ModelSpec, tp: int) -> int:
    """KV heads one rank holds: split by TP, replicated once TP exceeds them.

    (vLLM QKVParallelLinear: num_kv_head_replicas = tp // num_kv_heads.)
    """
    return max(1, spec.num_kv_heads // tp)


def kv_bytes_per_token_per_layer(spec: ModelSpec, tp: int, kv_bytes: float) -> float:
    if spec.mla is not None:  # one latent per token, the same on every rank
        return (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * kv_bytes
    return 2 * kv_heads_per_gpu(spec, tp) * spec.head_dim * kv_bytes


def stage_layers(num_layers: int, pp: int) -> list[range]:
    """Layers of each PP stage: an even split, the remainder to the last stages."""
    base, extra = divmod(num_layers, pp)
    out, start = [], 0
    for i in range(pp):
        n = base + (1 if i >= pp - extra else 0)
        out.append(range(start, start + n))
        start += n
    return out


def _layer_weight_bytes(spec: ModelSpec, i: int, tp: int, act_bytes: float,
                       expert_parallel: bool = False) -> float:
    q = spec.quantization
    lin_b = q.bytes_per_weight if q is not None and q.scope == "linear" else act_bytes
    exp_b = q.bytes_per_weight if q is not None else act_bytes
    h, d = spec.hidden_size, spec.head_dim
    la = spec.linear_attention
    if la is not None and spec.layer_kinds[i] == "linear":
        # the linear-attention mixer (model.GatedDeltaNet, Mamba2Mixer, Mamba1Mixer)
        attn = la.gpu_bytes(h, tp, lin_b, act_bytes)
    elif spec.mla is not None:
        m = spec.mla
        kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        attn = (spec.attention_params() - kv_a) / tp * lin_b + kv_a * lin_b
    else:
        kvh = kv_heads_per_gpu(spec, tp)
        q_width = spec.num_heads * d * (2 if spec.attn_output_gate else 1)
        qo = (h * q_width + h * spec.num_heads * d) / tp
        kv = 2 * h * kvh * d
        core = h * q_width + h * spec.num_heads * d + 2 * h * spec.num_kv_heads * d
        extras = spec.attention_params() - core
        attn = (qo + kv) * lin_b + extras / tp * act_bytes
    norms = 2 * h * act_bytes
    if spec.is_moe_layer(i):
        experts, other = spec.moe_layer_params(active=False)
        router = h * spec.moe.num_experts if spec.moe else 0
        # expert parallel: whole experts; the fullest GPU is the one that decides
        share = (spec.experts_per_gpu(tp) / spec.moe.num_experts
                 if expert_parallel and spec.moe else 1 / tp)
        mlp = experts * share * exp_b + (other - router) / tp * lin_b + router * act_bytes
    else:
        mlp = spec.dense_mlp_params() / tp * lin_b
    return attn + mlp + norms


def weights_per_gpu(spec: ModelSpec, tp: int, pp: int, act_bytes: float,
                    expert_parallel: bool = False) -> list[float]:
    """Bytes of weights on one GPU of each PP stage (``expert_parallel``: whole experts per
    GPU, on the GPU that holds the most)."""
    stages = stage_layers(spec.num_layers, pp)
    emb = spec.padded_vocab * spec.hidden_size / tp * act_bytes
    rotary_dim = spec.mla.qk_rope_head_dim if spec.mla else spec.head_dim
    rotary = rope_cache_positions(spec) * rotary_dim * act_bytes  # cos/sin cache
    if spec.local_rope:  # the sliding layers' own, unscaled cache (Gemma 3)
        rotary += (spec.max_position_embeddings or 4096) * rotary_dim * act_bytes
    # a multimodal model's vision tower is built on every rank, whatever its PP stage
    # (vllm/model_executor/models/mllama4.py creates vision_model outside the PP-split
    # language model), in the activation dtype (checkpoints leave it unquantized)
    vision = spec.vision.bytes_per_gpu(tp, act_bytes) if spec.vision is not None else 0.0
    out = []
    for s, layers in enumerate(stages):
        b = sum(_layer_weight_bytes(spec, i, tp, act_bytes, expert_parallel)
                for i in layers) + rotary + vision
        if s == 0:
            b += emb
        if s == pp - 1:
            b += spec.hidden_size * act_bytes  # final norm
            if not spec.tie_word_embeddings or pp > 1:
                b += emb  # lm_head (a tied one is its own copy on another stage)
        out.append(b)
    return out


def activation_gib(spec: ModelSpec, engine: EngineProfile, tokens: int, tp: int,
                   act_bytes: float, seqs: int) -> float:
    """Peak of the profiling run above the weights, GiB (a model calibrated on public logs).

    vLLM's profile_run (vllm/v1/worker/gpu_model_runner.py) runs the model on ``tokens``
    (max_num_batched_tokens) dummy tokens, keeps the hidden states it returns, and then runs
    the dummy sampler: so the peak holds ``tokens x hidden`` activations in the model dtype
    (the width term: 8192 x 8192 x 2 bytes = 0.125 GiB for a 70B, 0.0625 for an 8B, the
    0.07 GiB the vLLM 0.19 logs show between Llama-3.1-8B/Llama-3.3-70B and Qwen2.5-7B/72B)
    beside the sampler's fp32 logits of ``seqs`` (max_num_seqs) requests over the whole
    vocabulary and their copies, ``seqs x vocab x engine.sampler_bytes_per_seq_vocab``, on top
    of a small base. The bytes changed between releases (38 to 0.16, 14.5 from 0.17, 10.8
    from 0.21: the engine's rules say where each was read). MoE adds the fused-MoE kernel's
    intermediate caches.
    """
    dense = engine.activation_base_gib + tokens * spec.hidden_size * act_bytes / GIB + (
        seqs * spec.vocab_size * engine.sampler_bytes_per_seq_vocab / GIB)
    moe = 0.0
    if spec.moe is not None:
        # the fused-MoE kernel's intermediate caches: tokens x top-k x (gate_up + down + out)
        m = spec.moe
        moe = tokens * m.experts_per_token * (3 * m.expert_intermediate_size / tp
                                              + spec.hidden_size) * act_bytes / GIB
    return dense + moe


def cuda_graph_gib(layers: int, enforce_eager: bool) -> float:
    """Memory the captured CUDA graphs keep (logs show 0.2-0.6 GiB for 32-layer models)."""
    return 0.0 if enforce_eager else round(0.1 + 0.01 * layers, 3)


def _blocks_for_request(spec: ModelSpec, kind: str, max_len: int, block: int, tokens: int) -> int:
    if kind == "linear":  # MambaSpec: one block (the state) per request in vLLM 0.11.0
        return 1
    if kind == "sliding" and spec.sliding_window:
        span = min(spec.sliding_window - 1 + tokens, max_len)
        return math.ceil(span / block) + 1
    return math.ceil(max_len / block)


def kv_layout(spec: ModelSpec, layers: list[int], engine: EngineProfile) -> tuple[int, list[str]]:
    """(layers sharing one block id, the attention kind of each KV cache group)."""
    kinds = [spec.layer_kinds[i] for i in layers]
    counts = {k: kinds.count(k) for k in ("full", "sliding", "linear") if kinds.count(k)}
    # a linear-attention model is always grouped: vLLM cannot fold its state into one block
    # table of full attention (unify_hybrid_kv_cache_specs raises)
    if len(counts) == 1 or not (engine.hybrid_kv_allocator or "linear" in counts):
        kind = next(iter(counts)) if len(counts) == 1 else "full"
        return len(kinds), [kind]
    # vllm/v1/core/kv_cache_utils.py: groups of the smallest type's size, one per slice
    size = min(counts.values())
    groups: list[str] = []
    for k, n in counts.items():
        groups += [k] * math.ceil(n / size)
    return size, groups


def kv_capacity(spec: ModelSpec, kv_gib: float, layers: list[int], per_layer_bytes: float,
                engine: EngineProfile, max_len: int, batched_tokens: int
                ) -> tuple[int, int, float, int]:
    """(blocks, "GPU KV cache size" tokens, max concurrency, blocks per max_len request)."""
    block = engine.block_size
    group_size, groups = kv_layout(spec, layers, engine)
    page = block * per_layer_bytes
    num_blocks = max(0, int((kv_gib * GIB) // (page * group_size))) if kv_gib > 0 else 0
    # "GPU KV cache size": blocks per group times the smallest block size of any group; a
    # linear-attention group's block is max_model_len long (MambaSpec(block_size=max_model_len))
    tokens = num_blocks // len(groups) * (min(block, max_len) if "linear" in groups else block)
    per_request = sum(_blocks_for_request(spec, g, max_len, block, batched_tokens)
                      for g in groups)
    return num_blocks, tokens, (num_blocks / per_request if per_request else 0.0), per_request


# -- the fit ------------------------------------------------------------------------------
#: vLLM 0.11.0 forces an MLA model's KV block size to what its MLA kernel pages by
#: (platforms/cuda.py check_and_update_config): FlashMLA 64 on compute capability 9.x,
#: CUTLASS MLA 128 on exactly 10.0; elsewhere (Triton MLA) the default 16 stays. Read in
#: 0.11.0 as installed; held for that minor (the 0.19.0 DeepSeek-V2-Lite log on an H100 counts
#: its KV tokens in multiples of 16 only, so a later release changed it)
FLASHMLA_BLOCK, CUTLASS_MLA_BLOCK = 64, 128


#: the --gpu-memory-utilization vLLM's contributors served Qwen3-Next-80B-A3B-FP8 at on
#: 2 x H100 with vLLM 0.11.0, "needed to avoid triton ooms" (vllm-project/vllm #26887): the
#: Gated DeltaNet's Triton kernels allocate outside the profiled peak. advisor keeps the
#: release's default and says so above it
LINEAR_SAFE_UTILIZATION = 0.85
#: vLLM rounds a linear-attention model's attention block up to a multiple of this
#: (HybridAttentionMambaModelConfig: "some attention backends (e.g. FA) only support setting
#: block size to multiple of 16")
LINEAR_BLOCK_MULTIPLE = 16


def linear_block_size(spec: ModelSpec, tp: int, kv_bytes: float, act_bytes: float) -> int:
    """The attention block size vLLM 0.11.0 sets for a linear-attention model, in tokens:
    the smallest multiple of 16 whose attention page (block x KV bytes of one token in one
    layer) holds one sequence's state of one linear layer; the state's page is then padded
    to the attention page (vllm/model_executor/models/config.py
    HybridAttentionMambaModelConfig.verify_and_update_config, run before the platform's
    default of 16). Qwen3-Next-80B-A3B in bf16: 544 tokens at TP 1 and 2, 272 at TP 4."""
    assert spec.linear_attention is not None
    state = spec.linear_attention.state_bytes(tp, act_bytes)
    token = kv_bytes_per_token_per_layer(spec, tp, kv_bytes)
    step = LINEAR_BLOCK_MULTIPLE * token
    return LINEAR_BLOCK_MULTIPLE * int(-(-state // step))


def with_linear_block(spec: ModelSpec, engine: EngineProfile, tp: int, kv_bytes: float,
                      act_bytes: float) -> EngineProfile:
    """``engine`` with the block size vLLM uses for ``spec``: :func:`linear_block_size` for a
    model with state layers, the release's otherwise."""
    if spec.linear_attention is None:
        return engine
    return engine.model_copy(update={
        "block_size": linear_block_size(spec, tp, kv_bytes, act_bytes)})


def mla_block_size(spec: ModelSpec, cc: int | None, engine: EngineProfile) -> int:
    """The KV block size vLLM ``engine.version`` uses for ``spec`` on a GPU of compute
    capability ``cc`` x 10 (:data:`FLASHMLA_BLOCK` on 9.x, :data:`CUTLASS_MLA_BLOCK` on 10.0)."""
    from advisor.core.weights import read_in

    if spec.mla is None or cc is None or not read_in(engine.version):
        return engine.block_size
    if cc // 10 == 9:
        return FLASHMLA_BLOCK
    return CUTLASS_MLA_BLOCK if cc == 100 else engine.block_size


def fit(spec: ModelSpec, req: FitRequest, engine: EngineProfile) -> MemoryFit:
    """How the model fits on one GPU of a TP x PP layout (raises UserInputError on bad input)."""
    block = mla_block_size(spec, req.gpu_compute_capability, engine)
    if block != engine.block_size:
        engine = engine.model_copy(update={"block_size": block})
    util = req.gpu_memory_utilization if req.gpu_memory_utilization is not None \
        else engine.gpu_memory_utilization
    if not 0 < util <= 1:
        raise UserInputError(f"gpu_memory_utilization {util} is outside (0, 1]",
                             hint="vLLM's default is 0.9")
    ep = (spec.expert_parallel_at(req.tp) if req.expert_parallel is None
          else req.expert_parallel)
    if ep and spec.moe is None:
        raise UserInputError(f"{spec.name} has no experts: expert parallelism does not apply",
                             hint="drop --expert-parallel")
    # vLLM turns it on only over more than one GPU (FusedMoEParallelConfig: use_ep needs
    # tp x dp > 1); at TP 1 the flag changes nothing
    ep = ep and req.tp > 1
    if ep:
        from advisor.core.weights import expert_parallel_refusal

        no = expert_parallel_refusal(spec.quantization.method if spec.quantization else None,
                                     req.gpu_architecture, engine.version)
        if no:
            ok = [str(t) for t in (1, 2, 4, 8, 16) if spec.tp_problem(t) is None]
            raise UserInputError(f"{spec.name}: {no}",
                                 hint="a TP size TP alone can shard it over: " + ", ".join(ok)
                                 + (", without --expert-parallel" if req.expert_parallel
                                    else ""))
    why = spec.tp_problem(req.tp, expert_parallel=ep)
    if why:
        ok = [str(t) for t in (1, 2, 4, 8, 16) if spec.tp_problem(t) is None]
        with_ep = [str(t) for t in (2, 4, 8, 16) if spec.expert_parallel_at(t)]
        hint = "use a TP size vLLM can shard it over: " + ", ".join(ok)
        if with_ep and not ep:
            hint += " (" + ", ".join(with_ep) + " with expert parallelism)"
        raise UserInputError(f"{spec.name}: {why}", hint=hint)
    if req.pp > spec.num_layers:
        raise UserInputError(f"PP {req.pp} exceeds the {spec.num_layers} layers of {spec.name}")
    limit = max_len_limit(spec)
    max_len = req.max_model_len or limit or 4096
    if limit is not None and max_len > limit:
        raise UserInputError(
            f"max_model_len {max_len} exceeds {spec.name}'s {spec.max_len_key or 'length'} "
            f"{limit}"
            + (" and its config has no rope scaling" if spec.rope_scaling_factor is None else ""),
            hint=f"use --ctx {limit} or less")

    dtype = resolve_dtype(spec, req.dtype, req.gpu_architecture)
    act_b = DTYPE_BYTES[dtype]
    kv_b = 1.0 if req.kv_cache_dtype.startswith("fp8") else act_b
    # "auto" is the checkpoint's own KV dtype where the release reads it (engine.Rule)
    kv_from_checkpoint = (req.kv_cache_dtype == "auto" and engine.checkpoint_kv_dtype
                          and spec.quantization is not None
                          and spec.quantization.kv_cache_dtype == "fp8")
    if kv_from_checkpoint:
        kv_b = 1.0
    engine = with_linear_block(spec, engine, req.tp, kv_b, act_b)
    tokens, seqs = engine.batch_defaults(req.gpu_memory_gib, req.gpu_name, req.entrypoint)
    tokens = req.max_num_batched_tokens or tokens
    seqs = req.max_num_seqs or seqs

    stages = stage_layers(spec.num_layers, req.pp)
    weights = weights_per_gpu(spec, req.tp, req.pp, act_b, ep)
    # the stage that leaves the least room decides (vLLM takes the minimum over workers)
    worst = max(range(req.pp), key=lambda s: (weights[s], len(stages[s])))
    layers = list(stages[worst])
    w_gib = weights[worst] / GIB
    # --cpu-offload-gb moves up to that much of each GPU's weights to host memory
    offload = min(req.cpu_offload_gib, w_gib)
    w_gib -= offload
    act = activation_gib(spec, engine, tokens, req.tp, act_b, seqs)
    non_torch = engine.non_torch(req.tp)
    graphs = cuda_graph_gib(len(layers), req.enforce_eager)
    budget = req.gpu_memory_gib * util
    charged = graphs if engine.cuda_graph_charged else 0.0
    kv_gib = budget - w_gib - act - non_torch - charged

    per_layer = kv_bytes_per_token_per_layer(spec, req.tp, kv_b)
    kv_per_token = int(round(per_layer * sum(1 for i in layers
                                             if spec.layer_kinds[i] != "linear")))
    block = engine.block_size
    cap = kv_capacity(spec, kv_gib, layers, per_layer, engine, max_len, tokens)
    num_blocks, kv_tokens, concurrency, per_request = cap
    groups = kv_layout(spec, layers, engine)[1]

    notes: list[str] = []
    if req.dtype == "auto" and dtype != spec.torch_dtype and spec.torch_dtype != "float32":
        notes.append(f"vLLM serves this {spec.torch_dtype} checkpoint in {dtype} on "
                     f"{req.gpu_architecture} GPUs (no bfloat16 below compute capability 8.0"
                     + (f"; float16 refused for {spec.model_type})" if dtype == "float32"
                        else ")"))
    kind, why = archs.support(spec.architectures, engine.version, spec.config_model_type)
    if why:
        notes.append(f"{why}: advisor's render and provision refuse it" if kind == "refused"
                     else why)
    if kv_from_checkpoint:
        notes.append(f"KV cache in fp8: the checkpoint's kv_cache_quant_algo, which vLLM "
                     f"{engine.version} uses for --kv-cache-dtype auto")
    from advisor.core.weights import attention_note, kv_note

    if e5m2 := kv_note(req.kv_cache_dtype, req.gpu_architecture, engine.version):
        notes.append(e5m2)
    if flex := attention_note(spec, req.gpu_compute_capability, kv_b == 1.0, engine.version):
        notes.append(flex)
    fits = kv_gib > 0 and concurrency >= 1
    if not fits:
        longest = longest_fitting_len(spec, layers, engine, num_blocks, max_len, tokens)
        from advisor.core.weights import kv_refusal

        fp8_kv_ok = kv_refusal("fp8", None, req.gpu_architecture, engine.version,
                               False) is None
        notes += _why_not(spec, req, kv_gib, max_len, kv_b, per_request, num_blocks,
                          groups, longest, fp8_kv_ok)
    else:
        notes.append(f"{concurrency:.2f} requests of {max_len} tokens fit at once")
    if spec.is_hybrid and engine.hybrid_kv_allocator:
        notes.append(f"hybrid KV cache: {len(groups)} groups "
                     f"({', '.join(groups)}), sliding window {spec.sliding_window}")
    if spec.linear_attention is not None:
        n_lin = sum(1 for i in layers if spec.layer_kinds[i] == "linear")
        state = spec.linear_attention.state_bytes(req.tp, act_b)
        label = spec.linear_attention.label
        if n_lin:
            notes.append(f"{label}: {n_lin} of {len(layers)} layers keep a "
                         f"{state / 2**20:.2f} MiB state per sequence on each GPU instead of a "
                         f"KV cache, one {block}-token block each; KV cache groups: "
                         + ", ".join(f"{groups.count(k)} {k}" for k in dict.fromkeys(groups))
                         + f" (vLLM sets the attention block size to {block} tokens so that "
                         "one attention page holds one state, and turns prefix caching off "
                         "for this model)")
        else:  # vLLM 0.11.0 treats the class as hybrid whatever its layers (is_hybrid)
            notes.append(f"no {label} layer, but vLLM 0.11.0 sizes this architecture as a "
                         f"hybrid: attention blocks of {block} tokens (one {label} state of "
                         f"{state / 2**20:.2f} MiB), prefix caching off")
        if util > LINEAR_SAFE_UTILIZATION and isinstance(spec.linear_attention, GatedDeltaNet):
            notes.append(f"risk: --gpu-memory-utilization {util:g} leaves the Gated DeltaNet's "
                         "Triton kernels little room outside the budget: vLLM's own Qwen3-Next "
                         f"benchmark on 2 x H100 ran {LINEAR_SAFE_UTILIZATION:g}, 'needed to "
                         "avoid triton ooms' (vllm-project/vllm #26887)")
    if ep and spec.moe is not None:
        per = spec.experts_per_gpu(req.tp)
        notes.append(f"expert parallel (--enable-expert-parallel): {per} of the "
                     f"{spec.moe.num_experts} experts whole on each GPU"
                     + ("" if req.expert_parallel else
                        f", as vLLM needs at TP {req.tp}: {spec.tp_problem(req.tp)}"))
    if req.tp > spec.num_kv_heads and spec.mla is None:
        notes.append(f"TP {req.tp} > {spec.num_kv_heads} KV heads: each GPU keeps a replica")
    if not engine.cuda_graph_charged and graphs:
        notes.append(f"CUDA graphs (~{graphs:.2f} GiB) are captured after the KV cache is "
                     f"allocated in vLLM {engine.version}: they come out of the "
                     f"{(1 - util) * req.gpu_memory_gib:.2f} GiB outside the budget")
    params = spec.param_counts()
    return MemoryFit(
        weights_gib=round(w_gib, 4), activation_gib=round(act, 4),
        non_torch_gib=round(non_torch, 4), cuda_graph_gib=graphs,
        cuda_graph_charged=engine.cuda_graph_charged, budget_gib=round(budget, 4),
        kv_cache_gib=round(max(kv_gib, 0.0), 4), kv_cache_tokens=kv_tokens,
        kv_bytes_per_token=kv_per_token, num_blocks=num_blocks, block_size=block,
        max_concurrency=round(concurrency, 2), max_model_len=max_len, fits=fits, notes=notes,
        tp=req.tp, pp=req.pp, dtype=dtype, kv_cache_dtype="fp8" if kv_b == 1.0 else dtype,
        max_num_batched_tokens=tokens, max_num_seqs=seqs, vllm_version=engine.version,
        params_total=params["total"], params_active=params["active"],
        cpu_offload_gib=round(offload, 4), expert_parallel=ep,
        kv_groups=len(groups), state_groups=groups.count("linear"))


def longest_fitting_len(spec: ModelSpec, layers: list[int], engine: EngineProfile,
                        num_blocks: int, max_len: int, batched_tokens: int) -> int:
    """The longest max_model_len below ``max_len`` whose one request fits ``num_blocks``.

    vLLM answers a KV cache too small for one max_model_len request with "the estimated maximum
    model length is N" (vllm/v1/core/kv_cache_utils.py estimate_max_model_len, a binary search
    over max_model_len against the KV memory); this is the same search over the blocks one
    request needs in every KV cache group (full: the whole sequence; sliding: the window plus
    one chunk), so a sliding-window model is not told a length its full-attention layers alone
    would allow. 0 when not even one token fits.
    """
    block = engine.block_size
    groups = kv_layout(spec, layers, engine)[1]

    def need(n: int) -> int:
        return sum(_blocks_for_request(spec, g, n, block, batched_tokens) for g in groups)

    lo, hi = 0, max_len - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if need(mid) <= num_blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _why_not(spec: ModelSpec, req: FitRequest, kv_gib: float, max_len: int, kv_b: float,
             per_request: int, num_blocks: int, groups: list[str], longest: int,
             fp8_kv_ok: bool = True) -> list[str]:
    notes = []
    if kv_gib <= 0:
        notes.append(f"does not fit: weights and working memory exceed the budget by "
                     f"{-kv_gib:.2f} GiB per GPU")
    else:
        notes.append(f"does not fit: one {max_len}-token request needs {per_request} KV "
                     f"blocks, {num_blocks} fit"
                     + (f" ({max_len - longest} token{'s' * (max_len - longest > 1)} short)"
                        if groups == ["full"] else
                        " (KV cache groups: " + ", ".join(
                            f"{groups.count(k)} {k}" for k in dict.fromkeys(groups)) + ")"))
        if longest > 0:
            notes.append(f"a max_model_len of {longest} would fit (--ctx {longest})")
        else:
            notes.append("not even a one-token request fits the KV cache")
    bigger = [t for t in (2, 4, 8) if t > req.tp
              and (spec.tp_problem(t) is None or spec.expert_parallel_at(t))]
    if bigger:
        notes.append(f"more TP (--tp {bigger[0]}) splits weights and KV cache over more GPUs"
                     + (" (with expert parallelism)" if spec.expert_parallel_at(bigger[0])
                        else ""))
    if kv_b > 1 and spec.mla is None and fp8_kv_ok:  # not where vLLM cannot store fp8 KV
        notes.append("--kv-cache-dtype fp8 halves the KV cache per token")
    notes.append("or a GPU with more memory")
    return notes


def with_confidence(result: MemoryFit, gpu_architecture: str | None, model_type: str
                    ) -> MemoryFit:
    """``result`` with its confidence from the memory accuracy benchmark."""
    return result.model_copy(update={"confidence": memory_confidence(
        gpu_architecture, model_type, result.vllm_version)})
