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
    #: non-torch memory (CUDA context share, cuBLAS workspaces) and NCCL buffers when TP > 1
    non_torch_gib: float | None = None
    nccl_gib: float | None = None
    #: `vllm serve --numa-bind` binds each GPU worker to its GPU's NUMA node itself
    numa_bind_flag: bool | None = None


RULES: tuple[Rule, ...] = (
    Rule(since="0.7.0", source="V1 engine (opt-in with VLLM_USE_V1=1 in 0.7, the default from "
         "0.8): vllm/engine/arg_utils.py _set_default_args_v1; vllm/v1/worker/gpu_worker.py "
         "determine_available_memory",
         gpu_memory_utilization=0.9, block_size=16,
         batch_big=(8192, 2048, 256, 256), batch_other=(8192, 2048, 256, 256),
         cuda_graph_charged=False, hybrid_kv_allocator=False, numa_bind_flag=False,
         non_torch_gib=0.25, nccl_gib=0.3),
    Rule(since="0.7.0", source="profiling peak: 0.134 GiB + max_num_seqs x vocab x 38.2 bytes, "
         "the bytes fitted on two vLLM 0.11 H100 logs of llm-d/llm-d-benchmark "
         "(empirical-vllm-memory-results.md: Qwen3-32B 5.64 GiB, Llama-3.3-70B FP8 4.84 GiB at "
         "1024 sequences), the base on the 0.19 logs below; checked on logs it was not fitted "
         "on: Qwen3-8B on an L4 (0.10.2, 256 sequences) 1.52 vs 1.40 logged, Qwen3-14B (0.15) "
         "5.67 vs 5.64; the earliest V1 releases have no log and are assumed alike",
         activation_base_gib=0.134, sampler_bytes_per_seq_vocab=38.2),
    Rule(since="0.10.0", source="vllm/engine/arg_utils.py get_batch_defaults (device memory "
         ">= 70 GiB and not A100); vllm/v1/core/kv_cache_utils.py hybrid KV cache groups",
         batch_big=(16384, 8192, 1024, 1024), batch_other=(8192, 2048, 256, 256),
         hybrid_kv_allocator=True),
    Rule(since="0.19.0", source="vllm-project/vllm PR #38635 'NUMA binding support for GPU "
         "workers' (--numa-bind, --numa-bind-nodes, --numa-bind-cpus), merged 2026-03-31; the "
         "first release after it is inferred to be 0.19.0 (not read from a changelog)",
         numa_bind_flag=True),
    Rule(since="0.17.0", source="profiling peak 0.134 GiB + max_num_seqs x vocab x 14.39 bytes, "
         "least squares over four vLLM 0.19.0 H100 logs of llm-d-incubation/llm-d-planner PR "
         "#205 (Llama-3.1-8B 1.89, Qwen2.5-7B 2.21, Phi-4 1.52, Gemma-2-9B 3.65 GiB; the peak "
         "follows the vocabulary, not the width); checked on its logs not fitted on: "
         "Llama-3.3-70B 1.89 vs 1.96, Qwen2.5-72B 2.22 vs 2.29, Qwen3-8B 2.22 vs 2.21. The "
         "release it changed in is read off the same PR's version sweep (Qwen3-14B: 5.64 GiB "
         "on 0.11-0.16, 2.23 from 0.17)",
         sampler_bytes_per_seq_vocab=14.39),
    Rule(since="0.19.0", source="vLLM 0.19.0 start-up logs on H100 (llm-d-incubation/"
         "llm-d-planner PR #205, accuracy/results/v0.19.0/logs at d3121e05): 'non-torch forward "
         "increase memory' 0.24-0.27 GiB at TP 1, 2.06-2.11 GiB at TP 2, 2.13-2.21 GiB at TP 4 "
         "(0.07 GiB per PP stage); vLLM 0.11 logs of the same models show 0.54-0.55 GiB at TP "
         "2 (llm-d/llm-d-benchmark empirical-vllm-memory-results.md): the release in between "
         "where it grew is not known, so 0.12-0.18 keep the 0.11 figure",
         nccl_gib=1.85),
    Rule(since="0.21.0", source="vLLM 0.21 startup log: 'CUDA graph memory profiling is "
         "enabled (default since v0.21.0)'; its profiling peak (Llama-3.1-8B on H100, 1.44 GiB "
         "at 1024 sequences) gives 10.68 bytes per sequence x vocabulary entry — fitted on that "
         "one log, so it checks nothing",
         cuda_graph_charged=True, sampler_bytes_per_seq_vocab=10.68),
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
    nccl_gib: float
    numa_bind_flag: bool
    sources: tuple[str, ...]

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
