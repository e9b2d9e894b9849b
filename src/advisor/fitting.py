"""The SDK call behind ``advisor fit``: resolve the model and GPU, pick the engine profile,
run the pure sizing. The only part of sizing that reads files (config.json) lives here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from advisor.catalog import Catalog
from advisor.catalog import load as load_catalog
from advisor.engine import profile
from advisor.errors import NotFoundError
from advisor.llm import ModelSpec, find_in_hf_cache, read_config_file, spec_from_config
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
