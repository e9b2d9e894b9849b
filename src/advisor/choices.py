"""The value sets of the question's enum-like parameters, declared once (no pydantic here: the
CLI's help reads them without paying for it). :mod:`advisor.core.question` types its fields with
them, the SDK signatures and the core models use the same names, and the CLI's help lists them."""

from __future__ import annotations

from typing import Literal, get_args

#: vLLM's ``--kv-cache-dtype`` values (vLLM's engine arguments; ``fp8`` is e4m3 on CUDA)
KvCacheDtype = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]
#: vLLM's ``compilation_config.cudagraph_mode`` values (vllm/config/compilation.py,
#: CUDAGraphMode; FULL_AND_PIECEWISE is the default from 0.11.0, PR #25444, PIECEWISE before);
#: ``core/perf.py`` host_s says which steps each one launches from the host
CudagraphMode = Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
#: what ``recommend`` ranks by when no load is given (``core/ranking.py``)
Objective = Literal["cost", "latency", "throughput"]


def choices(values: object) -> str:
    """``a, b or c``: a value set as the CLI's help writes it."""
    names = [str(v) for v in get_args(values)]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)
