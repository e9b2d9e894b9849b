"""The SDK call behind ``advisor fit``: resolve the model and GPU, pick the engine profile,
run the pure sizing. The only part of sizing that reads files (config.json) lives here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from advisor.catalog import Catalog
from advisor.catalog import load as load_catalog
from advisor.engine import profile
from advisor.errors import NotFoundError, UserInputError
from advisor.llm import ModelSpec, find_in_hf_cache, read_config_file, spec_from_config
from advisor.perf import PerfEstimate
from advisor.sizing import FitRequest, MemoryFit
from advisor.sizing import fit as _fit

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def model_config(ref: str, catalog: Catalog | None = None) -> tuple[str, dict[str, Any]]:
    """(name, config.json) for a catalog alias or HF repo id, a path, or a cached repo id."""
    cat = catalog or load_catalog()
    if ref in cat.models or any(m.hf_id.lower() == ref.lower() for m in cat.models.values()):
        entry = cat.model(ref)
        return entry.alias, cat.model_configs[entry.alias]
    path = Path(ref).expanduser()
    if ref.endswith(".json") or path.exists() or "/" in ref and not _REPO_ID.match(ref):
        return path.stem if path.is_file() else path.name, read_config_file(path)
    if _REPO_ID.match(ref):
        cached = find_in_hf_cache(ref)
        if cached is not None:
            return ref, read_config_file(cached)
    raise NotFoundError("model", ref, cat.models,
                        hint="give a catalog alias ('advisor models list'), a path to a "
                        "config.json, or a repo id in the local Hugging Face cache")


def model_spec(ref: str, catalog: Catalog | None = None,
               quantization: str | None = None) -> ModelSpec:
    name, cfg = model_config(ref, catalog)
    return spec_from_config(cfg, name, quantization=quantization)


def gpu_memory_gib(catalog: Catalog, gpu: str,
                   override: float | None = None) -> tuple[str, float, str]:
    """(GPU id, total memory vLLM sees in GiB, where that number comes from)."""
    g = catalog.gpu(gpu)
    if override is not None:
        return g.id, override, "--gpu-memory-gib"
    if g.usable_memory_mib:
        return g.id, g.usable_memory_mib / 1024, "driver-reported total (gpus.yaml)"
    return g.id, g.memory_gib, "marketed size; the driver reports a little less"


def fit(model: str, gpu: str, *, catalog: Catalog | None = None,
        gpu_memory_gib_override: float | None = None, quantization: str | None = None,
        vllm_version: str | None = None, **request: Any) -> tuple[MemoryFit, ModelSpec, str]:
    """Fit ``model`` on ``gpu`` (request: tp, pp, max_model_len, gpu_memory_utilization, …)."""
    cat = catalog or load_catalog()
    spec = model_spec(model, cat, quantization)
    gid, mem, mem_source = gpu_memory_gib(cat, gpu, gpu_memory_gib_override)
    req = FitRequest(gpu_memory_gib=mem, gpu_name=cat.gpus[gid].name, **request)
    return _fit(spec, req, profile(vllm_version)), spec, mem_source


def estimate(model: str, gpu: str, *, input_len: int, output_len: int, concurrency: int = 1,
             tp: int = 1, pp: int = 1, max_model_len: int | None = None,
             catalog: Catalog | None = None, gpu_memory_gib_override: float | None = None,
             vllm_version: str | None = None, kv_cache_dtype: str = "auto",
             quantization: str | None = None) -> tuple[PerfEstimate, MemoryFit]:
    """TTFT, TPOT and throughput of ``model`` on ``gpu`` (one replica of TP x PP GPUs)."""
    from advisor.perf import Workload
    from advisor.perf import estimate as _estimate

    cat = catalog or load_catalog()
    result, spec, _ = fit(model, gpu, catalog=cat, gpu_memory_gib_override=gpu_memory_gib_override,
                          quantization=quantization, vllm_version=vllm_version, tp=tp, pp=pp,
                          max_model_len=max_model_len or input_len + output_len,
                          kv_cache_dtype=kv_cache_dtype)
    if not result.fits:
        raise UserInputError(f"{spec.name} does not fit on {tp * pp} x {gpu}: "
                             f"{result.notes[0] if result.notes else ''}",
                             hint="try more --tp, a shorter context or a bigger GPU "
                             "('advisor fit' shows the numbers)")
    g = cat.gpus[cat.gpu(gpu).id]
    work = Workload(input_len=input_len, output_len=output_len, concurrency=concurrency)
    return _estimate(spec, g, result, work), result


def default_lengths(ctx: int, input_len: int | None, output_len: int | None) -> tuple[int, int]:
    """A chat-like workload inside the context: 1024 in, 256 out, scaled down for short ctx."""
    i = input_len or max(1, min(1024, ctx // 2))
    o = output_len or max(1, min(256, ctx - i))
    return i, o


def recommend(model: str, ctx: int, *, input_len: int | None = None,
              output_len: int | None = None, concurrency: int | None = None,
              objective: str = "cost", providers: list[str] | None = None,
              regions: list[str] | None = None, gpus: list[str] | None = None,
              max_usd_per_hour: float | None = None, max_tpot_ms: float | None = None,
              max_ttft_ms: float | None = None, spot: bool = False,
              kv_cache_dtype: str = "auto", vllm_version: str | None = None,
              catalog: Catalog | None = None, top: int | None = None,
              with_rejected: bool = False, max_nodes: int = 4) -> Any:
    """Ranked :class:`~advisor.ranking.Recommendation` objects (best first).

    With ``with_rejected`` returns ``(recommendations, rejections)``. Raises UserInputError when
    nothing can serve the request, naming the closest misses and the constraints that excluded
    the rest.
    """
    from advisor.ranking import Constraints, Request, explain_empty, rank

    cat = catalog or load_catalog()
    spec = model_spec(model, cat)
    i, o = default_lengths(ctx, input_len, output_len)
    req = Request(ctx=ctx, input_len=i, output_len=o, concurrency=concurrency,
                  objective=objective, kv_cache_dtype=kv_cache_dtype)
    cons = Constraints(providers=providers or [], regions=regions or [], gpus=gpus or [],
                       max_usd_per_hour=max_usd_per_hour, max_tpot_ms=max_tpot_ms,
                       max_ttft_ms=max_ttft_ms, spot=spot, max_nodes=max_nodes)
    unknown = [p for p in cons.providers if p not in cat.providers()]
    if unknown:
        raise NotFoundError("provider", unknown[0], cat.providers())
    recs, rejected = rank(cat, spec, req, cons, profile(vllm_version))
    if not recs and not with_rejected:
        raise explain_empty(rejected)
    recs = recs[:top] if top else recs
    return (recs, rejected) if with_rejected else recs


def fleet(model: str, ctx: int, *, rps: float, input_len: int | None = None,
          output_len: int | None = None, max_instances: int = 64,
          max_tpot_ms: float | None = None, max_ttft_ms: float | None = None,
          providers: list[str] | None = None, regions: list[str] | None = None,
          gpus: list[str] | None = None, spot: bool = False, kv_cache_dtype: str = "auto",
          vllm_version: str | None = None, catalog: Catalog | None = None,
          with_misses: bool = False, max_nodes: int = 4) -> Any:
    """Fleets that carry ``rps`` requests per second within the latency limits, cheapest
    monthly bill first (:class:`~advisor.fleets.FleetOption`). Raises UserInputError, naming
    the closest misses, when no fleet of at most ``max_instances`` instances can."""
    from advisor.fleets import explain_no_fleet, plan_fleet

    if max_instances <= 0:
        raise UserInputError(f"--max-instances must be positive, not {max_instances}")
    if rps <= 0:
        raise UserInputError(f"--rps must be positive, not {rps}")
    recs = recommend(model, ctx, input_len=input_len, output_len=output_len,
                     providers=providers, regions=regions, gpus=gpus, spot=spot,
                     max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms,
                     kv_cache_dtype=kv_cache_dtype, vllm_version=vllm_version, catalog=catalog,
                     max_nodes=max_nodes)
    options, misses = plan_fleet(recs, rps, max_instances)
    if not options and not with_misses:
        raise explain_no_fleet(misses, rps, max_instances)
    return (options, misses) if with_misses else options
