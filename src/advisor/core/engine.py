"""vLLM version profiles: the defaults and accounting rules that changed between releases.

Each :class:`Rule` says from which release it holds and where that was read; a profile for a
version is every rule up to it, later rules overriding earlier ones. Nothing else in advisor
compares version numbers.

Sources read (vLLM's own code and logs, quoted in public repositories):

* V1 worker memory budget, ``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``
  (vllm-project/vllm at 0012cf69): available KV memory = total GPU memory x
  gpu_memory_utilization - (peak torch allocation during the profiling run + non-torch
  allocations); the peak includes the weights. Later releases print the same split as
  "Total non KV cache memory: …; torch peak memory increase: …; non-torch forward increase
  memory: …; weights memory: …" (vllm/utils MemoryProfilingResult).
* Batch defaults, ``vllm/engine/arg_utils.py`` (``_set_default_args_v1`` in 0.8.x: LLM class
  8192 / API server 2048 tokens, 256 sequences; ``get_batch_defaults`` later: on GPUs with
  >= 70 GiB that are not A100, 16384 / 8192 tokens and 1024 sequences, else 8192 / 2048 and 256).
* CUDA-graph memory charged to the KV budget: the 0.21 log line "CUDA graph memory profiling is
  enabled (default since v0.21.0) … To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0".
* KV blocks, ``vllm/v1/core/kv_cache_utils.py``: num_blocks = available // (page size x layers
  sharing a block), page size = block_size x 2 x kv_heads x head_size x dtype bytes (MLA: one
  latent of kv_lora_rank + qk_rope_head_dim); "GPU KV cache size" = num_blocks // groups x
  block_size; max concurrency = num_blocks / blocks one max_model_len request needs.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# re-exported: the constant lives in a module the CLI reads without importing pydantic
from advisor.core.defaults import DEFAULT_VLLM_VERSION as DEFAULT_VLLM_VERSION
from advisor.errors import UserInputError

GIB = 2**30

#: NCCL's own buffers per rank by TP size, bytes: aiconfigurator's system files, ``misc.nccl_mem``
#: (ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce,
#: aic-core/src/aiconfigurator_core/systems/h100_sxm.yaml, the same table in every system file:
#: 342 MB at TP 2, 392 MB at TP 4 and 8, "based on observations", NCCL 2.27.3). A TP size
#: between two rows takes the lower row; above 8, the TP 8 row.
NCCL_MEM_BYTES_BY_TP: dict[int, int] = {1: 0, 2: 358612992, 4: 411041792, 8: 411041792}


def nccl_gib(tp: int) -> float:
    """NCCL buffer memory per rank at this TP size, GiB (:data:`NCCL_MEM_BYTES_BY_TP`)."""
    row = max(k for k in NCCL_MEM_BYTES_BY_TP if k <= max(tp, 1))
    return NCCL_MEM_BYTES_BY_TP[row] / GIB


def parse_version(text: str) -> tuple[int, int, int]:
    parts = text.strip().lstrip("v").split("+")[0].split(".")
    try:
        nums = [int("".join(ch for ch in p if ch.isdigit()) or 0) for p in parts[:3]]
    except ValueError as exc:  # pragma: no cover - digits only by construction
        raise UserInputError(f"{text!r} is not a vLLM version") from exc
    if not parts or not parts[0].strip().isdigit():
        raise UserInputError(f"{text!r} is not a vLLM version", hint="write e.g. 0.11.0")
    while len(nums) < 3:
        nums.append(0)
    return nums[0], nums[1], nums[2]


class AllreduceFusion(BaseModel):
    """What a release's fused all-reduce + RMSNorm pass does (FlashInfer's
    ``trtllm_allreduce_fusion``: the tensor-parallel all-reduce, the residual add and the
    RMSNorm after it, and a static fp8 quant after that, in one kernel)."""

    model_config = ConfigDict(frozen=True)
    #: compute capabilities (x10: 90 Hopper, 100 B200, 103 B300) on which -O2, vLLM's
    #: default optimization level, turns the pass on at TP > 1; elsewhere it runs only when
    #: the server asks for it
    default_on: tuple[int, ...] = ()
    #: the largest all-reduce (MB of bf16 activations) the fused kernel takes, by compute
    #: capability and TP size (vLLM's FI_ALLREDUCE_FUSION_MAX_SIZE_MB; the environment variable
    #: VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB overrides it by TP size); a capability
    #: or TP size not listed runs no fused kernel
    max_mb: tuple[tuple[int, tuple[tuple[int, float], ...]], ...] = ()
    #: the MoE layers' all-reduce can be fused too: it sits outside the fused-MoE custom op
    moe: bool = False

    def max_bytes(self, capability: int | None, tp: int) -> float:
        """The largest fused all-reduce at this capability and TP size, bytes; 0 = none."""
        sizes = dict(dict(self.max_mb).get(capability or 0, ()))
        return float(sizes.get(tp, 0.0)) * 2**20


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True)
    since: str
    source: str
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    #: (LLM class, API server) max_num_batched_tokens and max_num_seqs on big GPUs / others
    batch_big: tuple[int, int, int, int] | None = None
    batch_other: tuple[int, int, int, int] | None = None
    cuda_graph_charged: bool | None = None
    hybrid_kv_allocator: bool | None = None
    #: peak torch memory of the profiling run above the weights: a base, plus the dummy sampler
    #: run's fp32 logits and their copies, max_num_seqs x vocabulary x this many bytes
    #: (vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run samples max_num_seqs requests)
    activation_base_gib: float | None = None
    sampler_bytes_per_seq_vocab: float | None = None
    #: "non-torch forward increase memory" at TP 1: memory outside torch's allocator that the
    #: profiling run adds after the worker's init snapshot (lazily loaded kernels, library
    #: workspaces); the CUDA context and NCCL's init come before the snapshot and out of the
    #: (1 - util) margin
    non_torch_gib: float | None = None
    #: at TP > 1, what the release's all-reduce backends add on top of NCCL's own buffers
    #: (:data:`NCCL_MEM_BYTES_BY_TP`); PP alone adds nothing (send/recv only)
    tp_extra_gib: float | None = None
    #: `vllm serve --numa-bind` binds each GPU worker to its GPU's NUMA node itself
    numa_bind_flag: bool | None = None
    #: ``--kv-cache-dtype auto`` takes the KV cache dtype a ModelOpt checkpoint states
    #: (``kv_cache_quant_algo``, :attr:`advisor.core.model.Quantization.kv_cache_dtype`)
    #: instead of the model's dtype
    checkpoint_kv_dtype: bool | None = None
    #: the fused all-reduce + RMSNorm compile pass (``pass_config.fuse_allreduce_rms``, named
    #: ``enable_fi_allreduce_fusion`` before 0.12), one release fact in three parts
    #: (:class:`AllreduceFusion`)
    allreduce_fusion: AllreduceFusion | None = None


RULES: tuple[Rule, ...] = (
    Rule(since="0.7.0", source="V1 engine (opt-in with VLLM_USE_V1=1 in 0.7, the default from "
         "0.8): vllm/engine/arg_utils.py _set_default_args_v1; vllm/v1/worker/gpu_worker.py "
         "determine_available_memory",
         gpu_memory_utilization=0.9, block_size=16,
         batch_big=(8192, 2048, 256, 256), batch_other=(8192, 2048, 256, 256),
         cuda_graph_charged=False, hybrid_kv_allocator=False, numa_bind_flag=False),
    Rule(since="0.7.0", source="non-torch memory: 0.25 GiB at TP 1, kept from the first model "
         "(vLLM 0.9.0 on an A10G, benchmarks/accuracy/logs.yaml mistral-7b-a10g: requested "
         "20.30 GiB - 13.50 weights - 6.16 KV leaves 0.63 for the peak and non-torch memory, "
         "0.2 of it non-torch beside the modelled 0.43 peak); at TP > 1, 0.07 GiB above NCCL's "
         "buffers: the vLLM 0.11 Qwen3-32B pair of llm-d/llm-d-benchmark "
         "empirical-vllm-memory-results.md prints 0.14 GiB at TP 1 and 0.54 at TP 2, and "
         "0.54 - 0.14 - 0.334 (NCCL at TP 2) = 0.07; the releases before 0.11 have no TP log "
         "and are assumed alike",
         non_torch_gib=0.25, tp_extra_gib=0.07),
    Rule(since="0.7.0", source="profiling peak: 0.0525 GiB + max_num_batched_tokens x hidden x "
         "dtype bytes + max_num_seqs x vocab x 38.06 bytes, the bytes fitted (least squares, "
         "base held) on two vLLM 0.11 H100 logs of llm-d/llm-d-benchmark "
         "(empirical-vllm-memory-results.md: Qwen3-32B 5.64 GiB, Llama-3.3-70B FP8 4.84 GiB at "
         "1024 sequences and 8192 tokens; each alone gives 38.02 and 38.12), the base on the "
         "0.19 logs below; checked on logs it was not fitted on: Qwen3-14B (0.15) 5.65 vs "
         "5.64, Qwen3-8B on an L4 (0.10.2, 256 sequences) 1.45 vs 1.40 logged; not Llama-3.2-1B "
         "on an L40S (0.10.0) 1.22 vs 0.45, a miss with no cause found; the earliest V1 "
         "releases have no log and are assumed alike",
         activation_base_gib=0.0525, sampler_bytes_per_seq_vocab=38.06),
    Rule(since="0.10.0", source="vllm/engine/arg_utils.py get_batch_defaults (device memory "
         ">= 70 GiB and not A100); vllm/v1/core/kv_cache_utils.py hybrid KV cache groups",
         batch_big=(16384, 8192, 1024, 1024), batch_other=(8192, 2048, 256, 256),
         hybrid_kv_allocator=True),
    Rule(since="0.10.0", source="non-torch memory at TP 1 from the two vLLM 0.10 debug logs in "
         "benchmarks/accuracy/logs.yaml, as requested memory - weights - torch peak - KV "
         "memory, all four printed: Qwen3-8B-FP8 on an L4 (0.10.2) 18.82 - 8.80 - 1.40 - 8.60 "
         "= 0.02 GiB, Llama-3.2-1B on an L40S (0.10.0) 39.88 - 2.32 - 0.45 - 37.10 = 0.01; "
         "read on the logs the benchmark then checks, so in-sample",
         non_torch_gib=0.02),
    Rule(since="0.11.0", source="non-torch memory at TP 1, printed as 'non-torch forward "
         "increase memory': 0.14 GiB in vLLM 0.11 (Qwen3-32B, llm-d/llm-d-benchmark "
         "empirical-vllm-memory-results.md), 0.13 in 0.15, 0.16 and 0.17 (Qwen3-14B, "
         "llm-d-incubation/llm-d-planner accuracy/results/version-sweep/runs at d3121e05)",
         non_torch_gib=0.13),
    Rule(since="0.18.0", source="non-torch memory at TP 1: 0.25 GiB from vLLM 0.18 (Qwen3-14B "
         "version sweep, llm-d-incubation/llm-d-planner at d3121e05: 0.13 on 0.17, 0.25 on "
         "0.18), 0.24-0.27 in the vLLM 0.19.0 TP 1 logs of the same PR",
         non_torch_gib=0.25),
    Rule(since="0.19.0", source="vllm-project/vllm PR #38635 'NUMA binding support for GPU "
         "workers' (--numa-bind, --numa-bind-nodes, --numa-bind-cpus), merged 2026-03-31; the "
         "first release after it is inferred to be 0.19.0 (not read from a changelog)",
         numa_bind_flag=True),
    Rule(since="0.14.0", source="vllm-project/vllm PR #30785 '[Fix]Load kv-cache dtype from "
         "hf_quant_config.json automatically (fix for reverted PR)', merged 2025-12-16: with "
         "--kv-cache-dtype auto, resolve_kv_cache_dtype_string (vllm/utils/torch_utils.py) "
         "returns a modelopt quantization_config's kv_cache_quant_algo ('FP8' -> fp8_e4m3), so "
         "an NVIDIA ModelOpt export with an FP8 KV cache runs one without the flag. The first "
         "release after the merge is inferred to be 0.14.0 (not read from a changelog; 0.13.0 "
         "is not assumed to carry it)",
         checkpoint_kv_dtype=True),
    Rule(since="0.17.0", source="profiling peak 0.0525 GiB + max_num_batched_tokens x hidden x "
         "dtype bytes + max_num_seqs x vocab x 14.51 bytes, base and bytes by least squares "
         "over four vLLM 0.19.0 H100 TP 1 logs of llm-d-incubation/llm-d-planner PR #205 "
         "(Llama-3.1-8B 1.89, Qwen2.5-7B 2.21, Phi-4 1.52, Gemma-2-9B 3.65 GiB, all at 8192 "
         "tokens and 1024 sequences); checked on its logs not fitted on: Llama-3.3-70B 1.95 vs "
         "1.96, Qwen2.5-72B 2.28 vs 2.29, Qwen3-8B 2.22 vs 2.21, Gemma-2-2B 3.63 vs 3.62, "
         "Gemma-2-27B 3.67 vs 3.66, Qwen3-14B (0.18) 2.23 vs 2.23. The release it changed in is "
         "read off the same PR's version sweep (Qwen3-14B: 5.64 GiB on 0.11-0.16, 2.23 from "
         "0.17)",
         sampler_bytes_per_seq_vocab=14.51),
    Rule(since="0.19.0", source="vLLM 0.19.0 start-up logs on H100 (llm-d-incubation/"
         "llm-d-planner PR #205, accuracy/results/v0.19.0/logs at d3121e05): 'non-torch forward "
         "increase memory' 0.24-0.27 GiB at TP 1, 2.06-2.11 at TP 2, 2.13-2.21 at TP 4, 0.07 "
         "on PP stage 0 of a PP 2 run (PP adds nothing). 1.48 GiB above the TP 1 figure and "
         "NCCL's buffers, fitted on the two TP 2 logs of Llama-3.1-8B (2.07) and Qwen2.5-7B "
         "(2.06); with NCCL's TP 4 row (+0.05 GiB) it gives 2.11 at TP 4 against 2.13-2.21 "
         "logged. These runs compile the allreduce+RMSNorm fusion (FlashInfer workspace) and "
         "use symmetric-memory all-reduce (VLLM_ALLREDUCE_USE_SYMM_MEM=True in the logs); vLLM "
         "0.11 printed 0.54-0.55 at TP 2, and the release in between where it grew is not "
         "known, so 0.12-0.18 keep the 0.11 figure",
         tp_extra_gib=1.48),
    Rule(since="0.10.1", source="fused all-reduce + RMSNorm (FlashInfer, PR #20691 for SM100, "
         "#21069 with fp8/fp4 quant): off unless pass_config.enable_fi_allreduce_fusion is "
         "set; sizes from the v0.10.1.1 API docs of vllm.compilation.collective_fusion "
         "(_FI_MAX_SIZES {2: 64 MiB, 4: 1 MiB, 8: 0.5 MiB}, one table for every GPU, and "
         "vllm/envs.py's VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB: 'Unspecified world "
         "sizes will fall back to { 2: 64, 4: 1, <everything else>: 0.5 }'); a fused-MoE "
         "layer's all-reduce is inside the moe_forward custom op, out of the pass's reach",
         allreduce_fusion=AllreduceFusion(
             max_mb=((90, ((2, 64.0), (4, 1.0), (8, 0.5))),
                     (100, ((2, 64.0), (4, 1.0), (8, 0.5)))))),
    Rule(since="0.15.0", source="fused all-reduce sizes by compute capability, "
         "FI_ALLREDUCE_FUSION_MAX_SIZE_MB {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, "
         "8: 1}} in the v0.15.0 and v0.16.0 API docs (vllm.compilation.collective_fusion, "
         "...passes.fusion.allreduce_rms_fusion); the same PR (#24248, 'Moves allreduce out of "
         "moe_forward custom op in order to be able to match for fusion for moe models') "
         "lets MoE layers fuse. It was still in review on 2025-10-30, after 0.11.0; the "
         "release between 0.12 and 0.15 that first shipped it was not read, so 0.12-0.14 "
         "keep the 0.10.1 rule",
         allreduce_fusion=AllreduceFusion(
             max_mb=((90, ((2, 64.0), (4, 2.0), (8, 0.5))),
                     (100, ((2, 64.0), (4, 32.0), (8, 1.0)))), moe=True)),
    Rule(since="0.16.0", source="fused all-reduce + RMSNorm on by default at -O2 on Hopper "
         "and Blackwell (SM90, SM100) at TP > 1: vllm-project/vllm PR #34299 '[torch.compile] "
         "Enable AR+rms fusion by default available for -O2', merged 2026-02-11 "
         "(enable_allreduce_rms_fusion: TP > 1, CUDA, flashinfer, is_device_capability(100) or "
         "(90)); the v0.14.1 API docs still set fuse_allreduce_rms False at O2, the v0.18.2 "
         "fusions doc lists it 'O2 (Hopper/Blackwell + TP > 1)'. The first release after "
         "the merge is inferred to be 0.16.0 (0.15.1 came out 2026-02-04; not read from a "
         "changelog)",
         allreduce_fusion=AllreduceFusion(
             default_on=(90, 100),
             max_mb=((90, ((2, 64.0), (4, 2.0), (8, 0.5))),
                     (100, ((2, 64.0), (4, 32.0), (8, 1.0)))), moe=True)),
    Rule(since="0.19.0", source="vLLM v0.19.0 release notes: 'B300/GB300 (SM 10.3): Allreduce "
         "fusion enabled by default (#37755), tuned all-reduce communicator (#37756)'; "
         "#37756 adds FI_ALLREDUCE_FUSION_MAX_SIZE_MB 103: {2: 64, 4: 64, 8: 2}. Before it "
         "SM 10.3 had no entry, so the pass disabled itself there even when asked for",
         allreduce_fusion=AllreduceFusion(
             default_on=(90, 100, 103),
             max_mb=((90, ((2, 64.0), (4, 2.0), (8, 0.5))),
                     (100, ((2, 64.0), (4, 32.0), (8, 1.0))),
                     (103, ((2, 64.0), (4, 64.0), (8, 2.0)))), moe=True)),
    Rule(since="0.21.0", source="vLLM 0.21 startup log: 'CUDA graph memory profiling is "
         "enabled (default since v0.21.0)'; its profiling peak (Llama-3.1-8B on H100, 1.44 GiB "
         "at 8192 tokens and 1024 sequences) gives, with the 0.0525 GiB base and the width "
         "term, 10.83 bytes per sequence x vocabulary entry — fitted on that one log, so it "
         "checks nothing",
         cuda_graph_charged=True, sampler_bytes_per_seq_vocab=10.83),
)


class EngineProfile(BaseModel):
    """What one vLLM release does by default, and how it accounts for memory."""

    model_config = ConfigDict(frozen=True)
    version: str
    gpu_memory_utilization: float
    block_size: int
    batch_big: tuple[int, int, int, int]
    batch_other: tuple[int, int, int, int]
    cuda_graph_charged: bool
    hybrid_kv_allocator: bool
    activation_base_gib: float
    sampler_bytes_per_seq_vocab: float
    non_torch_gib: float
    tp_extra_gib: float
    numa_bind_flag: bool
    checkpoint_kv_dtype: bool = False
    allreduce_fusion: AllreduceFusion = AllreduceFusion()
    sources: tuple[str, ...]

    def non_torch(self, tp: int) -> float:
        """Non-torch memory one rank charges to the budget, GiB: the release's TP 1 figure and,
        at TP > 1, NCCL's buffers for that TP size (:func:`nccl_gib`) and what the release's
        all-reduce backends add; the same at any PP size."""
        if tp <= 1:
            return self.non_torch_gib
        return self.non_torch_gib + nccl_gib(tp) + self.tp_extra_gib

    def batch_defaults(self, gpu_memory_gib: float, gpu_name: str,
                       entrypoint: str = "server") -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) for this GPU and entrypoint."""
        big = gpu_memory_gib >= 70 and "a100" not in gpu_name.lower()
        llm_t, srv_t, llm_s, srv_s = self.batch_big if big else self.batch_other
        return (llm_t, llm_s) if entrypoint == "llm" else (srv_t, srv_s)


def profile(version: str | None = None) -> EngineProfile:
    """The profile of ``version`` (default: the pinned one)."""
    version = version or DEFAULT_VLLM_VERSION
    wanted = parse_version(version)
    if wanted < parse_version(RULES[0].since):
        raise UserInputError(
            f"vLLM {version} predates the V1 engine advisor models",
            hint=f"use {RULES[0].since} or later (default {DEFAULT_VLLM_VERSION})")
    merged: dict[str, object] = {}
    sources: list[str] = []
    for rule in RULES:
        if parse_version(rule.since) <= wanted:
            merged.update({k: v for k, v in rule.model_dump().items()
                           if v is not None and k not in ("since", "source")})
            sources.append(f">= {rule.since}: {rule.source}")
    return EngineProfile.model_validate({"version": version, "sources": tuple(sources), **merged})
