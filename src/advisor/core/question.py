"""The question advisor answers, declared once: every parameter a user can set on ``recommend``,
``plan``/``fleet``, ``fit``, ``perf``/``estimate``, ``render`` and ``provision`` — its type, its
value set, its range and its default — is a field of :class:`Question`.

The SDK's boundary (:func:`advisor.api.boundary`) checks every keyword that shares a field's name
against that field, so a value one function refuses no other accepts
(``tests/sdk/test_question_fields.py`` holds the SDK signatures and the CLI options to the
fields). :func:`advisor.ask` takes a Question whole.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.choices import KvCacheDtype, Objective

__all__ = ["KvCacheDtype", "Objective", "Question"]

#: the largest context any catalog model declares is 10,485,760 positions (Llama-4-Scout)
MAX_TOKENS = 16_777_216


class Question(BaseModel):
    """A model, a context, a workload, latency targets, constraints, quantization and the vLLM
    release: what :func:`advisor.ask` ranks the catalog for."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    #: a catalog alias, a config.json path, or a repo id in the local Hugging Face cache
    model: str = Field(min_length=1, max_length=1024)
    #: max_model_len: the longest sequence (prompt + output) a replica must hold
    ctx: int = Field(gt=0, le=MAX_TOKENS)
    #: prompt tokens of a typical request (default: a quarter of ctx, at most 1024)
    input_len: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    #: output tokens of a typical request (default: 256)
    output_len: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    #: the load as users in flight (concurrent sequences) over the whole deployment
    concurrency: int | None = Field(default=None, gt=0, le=10_000_000)
    #: the load as requests per second
    rps: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
    #: offline work: no latency targets unless given, ranked by $ per million tokens
    batch: bool = False
    #: share of the in-target capacity used on average: $/1M is stated at it
    utilisation: float = Field(default=1.0, gt=0, le=1, allow_inf_nan=False)
    objective: Objective = "cost"
    providers: list[str] | None = None
    regions: list[str] | None = None
    gpus: list[str] | None = None
    #: PROVIDER:TYPE: rank only these
    instances: list[str] | None = None
    max_usd_per_hour: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
    #: time per output token at p50, ms (default 50 ms unless ``batch``)
    max_tpot_ms: float | None = Field(default=None, gt=0, le=1e7, allow_inf_nan=False)
    #: time to first token at p50, ms (default 2 s unless ``batch``)
    max_ttft_ms: float | None = Field(default=None, gt=0, le=1e8, allow_inf_nan=False)
    spot: bool = False
    kv_cache_dtype: KvCacheDtype = "auto"
    #: vLLM's --cpu-offload-gb: GiB of each GPU's weights held in host memory
    cpu_offload_gb: float = Field(default=0.0, ge=0, le=4096, allow_inf_nan=False)
    #: vLLM's --enable-expert-parallel for a MoE model: None — only where TP cannot split its
    #: experts (:meth:`~advisor.core.model.ModelSpec.expert_parallel_at`); True — every layout
    #: of TP > 1; False — never (TP sizes that need it are not laid out)
    expert_parallel: bool | None = None
    #: keep instances below vLLM's CPU floor (2 + N physical cores), with a risk
    allow_small_host: bool = False
    #: the vLLM release to model (default: the one advisor pins)
    vllm_version: str | None = Field(default=None, min_length=1, max_length=64)
    #: the weights to size (advisor.core.weights): none — the checkpoint as published; fp8 —
    #: a published fp8 checkpoint, else vLLM's on-the-fly fp8; auto — both side by side. fit
    #: and perf also take a method the sizer knows (awq, gptq, …) as the config's override
    quantization: str | None = Field(default=None, min_length=1, max_length=40,
                                     pattern=r"^[A-Za-z0-9_-]+$")
    #: replicas a fleet keeps beyond the load, for failures (N + spare)
    spare: int = Field(default=0, ge=0, le=1000)
    #: the most identical instances one replica may span (PP across them)
    max_nodes: int = Field(default=4, ge=1, le=64)
