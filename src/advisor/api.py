"""The SDK: every function advisor offers to scripts, and the one boundary where input is checked.

Each public function takes typed keyword arguments (the model, and for :func:`fit` and
:func:`estimate` the GPU, may also be given by position), rejects unknown ones (``TypeError``),
and returns typed models. Every validation failure — ours or pydantic's, a NaN, an infinity, a
port out of range — leaves as :class:`~advisor.errors.UserInputError` with a hint, so the CLI
and scripts share one set of checks. The functions here are thin: the work is in
:mod:`advisor.core` (pure), :mod:`advisor.render` and :mod:`advisor.provisioning`.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from advisor.catalog import Catalog
from advisor.catalog import load as load_catalog
from advisor.core.engine import DEFAULT_VLLM_VERSION, profile
from advisor.errors import NotFoundError, UserInputError

if TYPE_CHECKING:
    from advisor.catalog.schema import InstanceType
    from advisor.choices import CudagraphMode
    from advisor.core.fleets import FleetMiss, FleetOption
    from advisor.core.layouts import Plan
    from advisor.core.load import CostCurve
    from advisor.core.model import ModelSpec
    from advisor.core.perf import PerfEstimate
    from advisor.core.question import KvCacheDtype, Objective, Question
    from advisor.core.ranking import Constraints, Recommendation, Rejection, Request
    from advisor.core.sizing import MemoryFit
    from advisor.core.weights import Weights
    from advisor.host.topology import Topology
    from advisor.render.local import LaunchLine

P = ParamSpec("P")
R = TypeVar("R")


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(x) for x in loc if not isinstance(x, int)]
    return "-".join(parts).replace("_", "-") or "value"


def input_error(exc: ValidationError) -> UserInputError:
    """One line from pydantic's report: the first bad field, what it got, what it needs."""
    err = exc.errors(include_url=False)[0]
    got = err.get("input")
    shown = repr(got) if not isinstance(got, dict | list) else type(got).__name__
    msg = str(err.get("msg", "invalid")).replace("Input should be", "must be")
    if err.get("type") == "greater_than" and (err.get("ctx") or {}).get("gt") == 0:
        msg = "must be positive"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    # named as the CLI flag: the SDK keyword is the same name with '_' for '-'
    return UserInputError(f"--{_field(tuple(err.get('loc', ())))} {shown[:80]}: {msg}{more}",
                          hint="see the command's --help (the SDK function's docstring) for "
                          "the allowed values")


@functools.cache
def _question_field(name: str) -> TypeAdapter[Any] | None:
    """The check of :class:`~advisor.core.question.Question`'s field ``name`` (its type, value
    set and range), or None for a keyword that is no field."""
    from typing import Annotated

    from advisor.core.question import Question

    field = Question.model_fields.get(name)
    if field is None:
        return None
    tp: Any = (Annotated[field.annotation, *field.metadata] if field.metadata
               else field.annotation)
    return TypeAdapter(tp, config=ConfigDict(allow_inf_nan=False))


@functools.cache
def _question_range(name: str) -> tuple[float | None, float | None, bool] | None:
    """(low, high, low is strict) of a numeric Question field, from its one declaration."""
    import annotated_types as at

    from advisor.core.question import Question

    field = Question.model_fields.get(name)
    if field is None:
        return None
    low: float | None = None
    high: float | None = None
    strict = True
    for m in field.metadata:
        if isinstance(m, at.Gt):
            low, strict = float(m.gt), True  # type: ignore[arg-type]
        elif isinstance(m, at.Ge):
            low, strict = float(m.ge), False  # type: ignore[arg-type]
        elif isinstance(m, at.Le):
            high = float(m.le)  # type: ignore[arg-type]
    return (low, high, strict) if low is not None or high is not None else None


def check_fields(values: dict[str, Any]) -> None:
    """Every value whose name is a Question field, checked against that one declaration: a
    number in its range (worded as the CLI words ranges), then its type and value set."""
    for name, value in values.items():
        adapter = _question_field(name)
        if adapter is None:
            continue
        span = _question_range(name)
        if span is not None and value is not None and not isinstance(value, bool | str):
            finite(f"--{name.replace('_', '-')}", value, low=span[0], high=span[1],
                   strict_low=span[2])
        try:
            adapter.validate_python(value, strict=isinstance(value, bool))
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
            msg = str(err.get("msg", "invalid")).replace("Input should be", "must be")
            if err.get("type") == "greater_than" and (err.get("ctx") or {}).get("gt") == 0:
                msg = "must be positive"
            raise UserInputError(f"--{name.replace('_', '-')} {shown[:80]}: {msg}",
                                 hint="see the command's --help (the SDK function's docstring) "
                                 "for the allowed values") from exc


def boundary(func: Callable[P, R]) -> Callable[P, R]:
    """The SDK's one boundary: every keyword that is a field of
    :class:`~advisor.core.question.Question` is checked against it, and every pydantic
    ValidationError raised inside ``func`` leaves as a UserInputError."""
    sig = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return func(*args, **kwargs)  # let Python word the wrong call
        check_fields(bound.arguments)
        try:
            return func(*args, **kwargs)
        except ValidationError as exc:
            raise input_error(exc) from exc

    return wrapper


def finite(name: str, value: float | None, *, low: float | None = 0.0,
           high: float | None = None, strict_low: bool = True) -> None:
    """A number a user gave: finite and in its range, else UserInputError."""
    if value is None:
        return
    span = (f"{'above' if strict_low else 'at least'} {low:g}" if low is not None else "")
    span += (" and " if span and high is not None else "") + (
        f"at most {high:g}" if high is not None else "")
    hint = f"give a number {span}" if span else "give a finite number"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UserInputError(f"{name} must be a finite number, not {value!r}", hint=hint)
    if low is not None and (value <= low if strict_low else value < low):
        need = ("positive" if strict_low and low == 0 else
                f"{'above' if strict_low else 'at least'} {low:g}")
        raise UserInputError(f"{name} must be {need}, not {value:g}", hint=hint)
    if high is not None and value > high:
        raise UserInputError(f"{name} must be at most {high:g}, not {value:g}", hint=hint)


class RenderResult(BaseModel):
    """What :func:`render_files` laid out: the instance, its layout and the files by name."""

    model_config = ConfigDict(frozen=True)
    instance: InstanceType
    plan: Plan
    files: dict[str, str]
    #: ``target="local"``: each replica's command line as the launcher will run it on the
    #: probed host
    commands: list[LaunchLine] = []


def _render_result(**fields: Any) -> RenderResult:
    """A RenderResult; its field types are imported here, not when ``advisor.api`` loads (the
    start-up of ``recommend`` does not pay for the renderers)."""
    if not RenderResult.__pydantic_complete__:
        from advisor.catalog.schema import InstanceType
        from advisor.core.layouts import Plan
        from advisor.render.local import LaunchLine

        RenderResult.model_rebuild(_types_namespace={
            "InstanceType": InstanceType, "Plan": Plan, "LaunchLine": LaunchLine})
    return RenderResult(**fields)


_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
#: the longest model reference looked at (HF repo ids are at most 96 characters; paths 4096)
MAX_REF = 4096


@boundary
def model_config(ref: str, *, catalog: Catalog | None = None) -> tuple[str, dict[str, Any]]:
    """(name, config.json) for a catalog alias or HF repo id, a path, or a cached repo id."""
    from advisor.hfconfig import find_in_hf_cache, read_config_file

    if not isinstance(ref, str) or not ref or len(ref) > MAX_REF or "\0" in ref:
        raise UserInputError(f"model {str(ref)[:60]!r}... is not a model reference"
                             if isinstance(ref, str) and len(ref) > 60 else
                             f"model {ref!r} is not a model reference",
                             hint="give a catalog alias, a repo id or a config.json path")
    cat = catalog or load_catalog()
    if ref in cat.models or any(m.hf_id.lower() == ref.lower() for m in cat.models.values()):
        entry = cat.model(ref)
        return entry.alias, cat.model_configs[entry.alias]
    path = Path(ref).expanduser()
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long for the file system: not a file
        exists = False
    if ref.endswith(".json") or exists or "/" in ref and not _REPO_ID.match(ref):
        return path.stem if path.is_file() else path.name, read_config_file(path)
    if _REPO_ID.match(ref):
        cached = find_in_hf_cache(ref)
        if cached is not None:
            return ref, read_config_file(cached)
    raise NotFoundError("model", ref, cat.models,
                        hint="give a catalog alias ('advisor models list'), a path to a "
                        "config.json, or a repo id in the local Hugging Face cache")


@boundary
def model_spec(ref: str, *, catalog: Catalog | None = None,
               quantization: str | None = None) -> ModelSpec:
    """The :class:`~advisor.core.model.ModelSpec` (layers, heads, parameters) of a model."""
    from advisor.core.model import spec_from_config

    name, cfg = model_config(ref, catalog=catalog)
    return spec_from_config(cfg, name, quantization=quantization)


def gpu_memory_gib(catalog: Catalog, gpu: str,
                   override: float | None = None) -> tuple[str, float, str]:
    """(GPU id, total memory vLLM sees in GiB, where that number comes from)."""
    g = catalog.gpu(gpu)
    if override is not None:
        finite("--gpu-memory-gib", override, high=4096)
        return g.id, override, "--gpu-memory-gib"
    return g.id, g.cuda_memory_gib, ("driver-reported total (gpus.yaml)" if g.usable_memory_mib
                                     else "marketed size; the driver reports a little less")


@boundary
def fit(model: str, gpu: str, *, tp: int = 1, pp: int = 1, max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None, dtype: str = "auto",
        kv_cache_dtype: KvCacheDtype = "auto", max_num_batched_tokens: int | None = None,
        max_num_seqs: int | None = None, entrypoint: str = "server",
        enforce_eager: bool = False, catalog: Catalog | None = None,
        gpu_memory_gib_override: float | None = None, quantization: str | None = None,
        vllm_version: str | None = None, cpu_offload_gb: float = 0.0,
        expert_parallel: bool | None = None
        ) -> tuple[MemoryFit, ModelSpec, str]:
    """Fit ``model`` on ``gpu``: (:class:`~advisor.core.sizing.MemoryFit`, the model's spec,
    where the GPU's memory figure comes from). The keywords are vLLM's engine arguments;
    ``expert_parallel`` is --enable-expert-parallel (None: only where TP cannot split the
    experts, as advisor lays models out)."""
    from advisor.core.sizing import FitRequest, with_confidence
    from advisor.core.sizing import fit as _fit
    from advisor.core.weights import (
        architectures_for,
        capability,
        method_refusal,
        serving_refusal,
    )

    if isinstance(dtype, str) and dtype.lower() in ("fp8", "float8", "fp8_e4m3", "int8", "int4"):
        raise UserInputError(f"--dtype {dtype!r}: --dtype is the activation dtype (auto, "
                             "bfloat16, float16 or float32)",
                             hint="for fp8 weights give --quantization fp8; for an fp8 KV "
                             "cache --kv-cache-dtype fp8")
    if isinstance(quantization, str) and quantization.lower() == "auto":
        raise UserInputError("--quantization auto searches both weights (recommend, plan, "
                             "render, provision); fit and perf size one",
                             hint="give --quantization none or fp8 (or the method of a "
                             "checkpoint: awq, gptq, …)")
    cat = catalog or load_catalog()
    spec = model_spec(model, catalog=cat, quantization=quantization)
    gid, mem, mem_source = gpu_memory_gib(cat, gpu, gpu_memory_gib_override)
    method = spec.quantization.method if spec.quantization else None
    no = method_refusal(method, cat.gpus[gid].architecture)
    if no:
        raise UserInputError(f"{spec.name} on {gid}: {no}",
                             hint=f"pick an {', '.join(architectures_for(method))} GPU, or a "
                             "checkpoint quantized another way")
    eng = profile(vllm_version)
    refused = serving_refusal(spec, cat.gpus[gid], kv_cache_dtype, eng.version,
                              eng.checkpoint_kv_dtype)
    if refused:
        raise UserInputError(f"{spec.name} on {gid}: {refused.why}", hint=refused.hint)
    req = FitRequest(gpu_memory_gib=mem, gpu_name=cat.gpus[gid].name, tp=tp, pp=pp,
                     max_model_len=max_model_len,
                     gpu_memory_utilization=gpu_memory_utilization, dtype=dtype,
                     kv_cache_dtype=kv_cache_dtype, max_num_batched_tokens=max_num_batched_tokens,
                     max_num_seqs=max_num_seqs, entrypoint=entrypoint,
                     enforce_eager=enforce_eager, cpu_offload_gib=cpu_offload_gb,
                     gpu_architecture=cat.gpus[gid].architecture,
                     gpu_compute_capability=capability(cat.gpus[gid]),
                     expert_parallel=expert_parallel)
    result = with_confidence(_fit(spec, req, eng), cat.gpus[gid].architecture,
                             spec.model_type)
    return result, spec, mem_source


@boundary
def estimate(model: str, gpu: str, *, input_len: int, output_len: int, concurrency: int = 1,
             tp: int = 1, pp: int = 1, max_model_len: int | None = None,
             catalog: Catalog | None = None, gpu_memory_gib_override: float | None = None,
             vllm_version: str | None = None, kv_cache_dtype: KvCacheDtype = "auto",
             quantization: str | None = None, cpu_offload_gb: float = 0.0,
             max_cudagraph_capture_size: int | None = None,
             cudagraph_mode: CudagraphMode | None = None,
             expert_parallel: bool | None = None
             ) -> tuple[PerfEstimate, MemoryFit]:
    """TTFT, TPOT and throughput of ``model`` on ``gpu`` (one replica of TP x PP GPUs).

    ``max_cudagraph_capture_size`` and ``cudagraph_mode`` are the server's vLLM flags of those
    names (None: the release's defaults, min(2 x max_num_seqs, 512) tokens and
    FULL_AND_PIECEWISE, PIECEWISE before vLLM 0.11.0); they decide which steps pay host launch time
    (:func:`advisor.core.perf.host_s`)."""
    from advisor.core.perf import ServerFlags, Workload, check_context
    from advisor.core.perf import estimate as _estimate

    work = Workload(input_len=input_len, output_len=output_len, concurrency=concurrency)
    if max_model_len is not None:
        check_context(input_len, output_len, max_model_len)
    server = (ServerFlags(max_cudagraph_capture_size=max_cudagraph_capture_size,
                          cudagraph_mode=cudagraph_mode)
              if max_cudagraph_capture_size is not None or cudagraph_mode is not None else None)
    cat = catalog or load_catalog()
    g = cat.gpus[cat.gpu(gpu).id]
    # the all-reduce tables are one node's links (NVLink, PCIe): a TP group wider than the
    # largest instance of this GPU would all-reduce over the network, which is not timed
    most = max((i.gpu.count for i in cat.instances.values() if i.gpu.model == g.id),
               default=None)
    if most is not None and tp > most:
        raise UserInputError(
            f"TP {tp} spans instances: no instance type in the catalog has more than {most} x "
            f"{g.id}, and advisor times tensor-parallel all-reduces over one node's links only",
            hint=f"keep --tp at {most} or less and add pipeline stages for more GPUs (e.g. "
            f"--tp {most} --pp {-(-tp // most)}), as vLLM's multi-node docs advise")
    result, spec, _ = fit(model, gpu, catalog=cat, gpu_memory_gib_override=gpu_memory_gib_override,
                          quantization=quantization, vllm_version=vllm_version, tp=tp, pp=pp,
                          max_model_len=max_model_len or input_len + output_len,
                          kv_cache_dtype=kv_cache_dtype, cpu_offload_gb=cpu_offload_gb,
                          expert_parallel=expert_parallel)
    from advisor.core.weights import dtype_refusal

    no = dtype_refusal(spec.model_type, spec.torch_dtype, g.architecture)
    if no:
        raise UserInputError(f"{spec.name} on {g.id}: {no}",
                             hint="'advisor fit' sizes it in float32; for timings pick an "
                             "Ampere or newer GPU (bfloat16)")
    if not result.fits:
        raise UserInputError(f"{spec.name} does not fit on {tp * pp} x {gpu}: "
                             f"{result.notes[0] if result.notes else ''}",
                             hint="try more --tp, a shorter context or a bigger GPU "
                             "('advisor fit' shows the numbers)")
    # a replica runs at most as many sequences as its KV cache (and max_num_seqs) holds; the
    # rest wait in vLLM's queue, which core.perf.estimate adds to their TTFT (issue 15, 16)
    return _estimate(spec, g, result, work, server=server), result


def check_regions(cat: Catalog, regions: list[str], providers: list[str]) -> None:
    """Every asked region is one where the catalog prices an instance type of the asked
    providers (all of them when none is asked); else one line naming the region, whose it is
    if another cloud's, and the closest names — not a ranking that rejects everything."""
    import difflib

    if not regions:
        return
    by_provider: dict[str, set[str]] = {}
    for inst in cat.instances.values():
        by_provider.setdefault(inst.provider, set()).update(inst.prices)
    asked = providers or sorted(by_provider)
    mine = sorted(set().union(*(by_provider.get(p, set()) for p in asked)))
    for region in regions:
        if region in mine:
            continue
        owners = sorted(p for p, rs in by_provider.items() if region in rs)
        close = difflib.get_close_matches(region.strip().lower(), mine, n=3, cutoff=0.6)
        whose = (f"{region!r} is a region of {', '.join(owners)}, not of "
                 f"{', '.join(asked)}" if owners else
                 f"no instance type of {', '.join(asked)} is priced in region {region!r}")
        raise UserInputError(f"--region: {whose}",
                             hint=(f"did you mean {', '.join(close)}?" if close else
                                   f"{len(mine)} regions are priced, e.g. "
                                   f"{', '.join(mine[:4])}") + " ('advisor catalog list' "
                             "shows each type's regions)")


def default_lengths(ctx: int, input_len: int | None, output_len: int | None) -> tuple[int, int]:
    """A chat-like workload inside the context: 1024 in, 256 out, scaled down for short ctx."""
    i = input_len or max(1, min(1024, ctx // 2))
    o = output_len or max(1, min(256, ctx - i))
    return i, o


@overload
def recommend(model: str, ctx: int, *, input_len: int | None = ...,
              output_len: int | None = ..., concurrency: int | None = ...,
              rps: float | None = ..., batch: bool = ..., utilisation: float = ...,
              spare: int = ...,
              objective: Objective = ..., providers: list[str] | None = ...,
              regions: list[str] | None = ..., gpus: list[str] | None = ...,
              max_usd_per_hour: float | None = ..., max_tpot_ms: float | None = ...,
              max_ttft_ms: float | None = ..., spot: bool = ..., kv_cache_dtype: KvCacheDtype = ...,
              cpu_offload_gb: float = ..., allow_small_host: bool = ...,
              vllm_version: str | None = ..., catalog: Catalog | None = ...,
              top: int | None = ..., with_rejected: Literal[False] = ...,
              max_nodes: int = ..., instances: list[str] | None = ...,
              quantization: str | None = ..., expert_parallel: bool | None = ...
              ) -> list[Recommendation]: ...


@overload
def recommend(model: str, ctx: int, *, input_len: int | None = ...,
              output_len: int | None = ..., concurrency: int | None = ...,
              rps: float | None = ..., batch: bool = ..., utilisation: float = ...,
              spare: int = ...,
              objective: Objective = ..., providers: list[str] | None = ...,
              regions: list[str] | None = ..., gpus: list[str] | None = ...,
              max_usd_per_hour: float | None = ..., max_tpot_ms: float | None = ...,
              max_ttft_ms: float | None = ..., spot: bool = ..., kv_cache_dtype: KvCacheDtype = ...,
              cpu_offload_gb: float = ..., allow_small_host: bool = ...,
              vllm_version: str | None = ..., catalog: Catalog | None = ...,
              top: int | None = ..., with_rejected: Literal[True],
              max_nodes: int = ..., instances: list[str] | None = ...,
              quantization: str | None = ..., expert_parallel: bool | None = ...
              ) -> tuple[list[Recommendation], list[Rejection]]: ...


@boundary
def recommend(model: str, ctx: int, *, input_len: int | None = None,
              output_len: int | None = None, concurrency: int | None = None,
              rps: float | None = None, batch: bool = False, utilisation: float = 1.0,
              spare: int = 0,
              objective: Objective = "cost", providers: list[str] | None = None,
              regions: list[str] | None = None, gpus: list[str] | None = None,
              max_usd_per_hour: float | None = None, max_tpot_ms: float | None = None,
              max_ttft_ms: float | None = None, spot: bool = False,
              kv_cache_dtype: KvCacheDtype = "auto", cpu_offload_gb: float = 0.0,
              allow_small_host: bool = False, vllm_version: str | None = None,
              catalog: Catalog | None = None, top: int | None = None,
              with_rejected: bool = False, max_nodes: int = 4,
              instances: list[str] | None = None, quantization: str | None = None,
              expert_parallel: bool | None = None
              ) -> list[Recommendation] | tuple[list[Recommendation], list[Rejection]]:
    """Ranked :class:`~advisor.core.ranking.Recommendation` objects (best first).

    The question (:mod:`advisor.core.load`): with no load, the cheapest instance ($/h, one
    replica) that meets the latency targets — ``max_tpot_ms`` / ``max_ttft_ms``, by default
    TPOT <= 50 ms and TTFT <= 2 s at p50, none with ``batch``; with ``rps`` (requests/s) or
    ``concurrency`` (users in flight), the fleet for that load, cheapest monthly bill first; with
    ``batch`` and no load, $ per million output tokens at saturation. Each recommendation's
    ``basis`` says which assumptions produced its figures; ``deployable`` whether ``render`` /
    ``provision`` can bring it up (not an AMD GPU): deployable ones come first, the others after
    them with ``not_deployable_reason``. Instances below vLLM's CPU floor are
    rejected unless ``allow_small_host``. With ``with_rejected`` returns ``(recommendations,
    rejections)``; ``instances`` (PROVIDER:TYPE) ranks only those; ``expert_parallel``: vLLM's
    --enable-expert-parallel for a MoE model (None: only where TP cannot split its experts;
    True: every layout of TP > 1; False: never). Raises UserInputError when
    nothing can serve the request, naming the closest misses and the constraints that excluded
    the rest.
    """
    from advisor.core.question import Question

    if rps is not None and concurrency is not None:
        raise UserInputError("give the load as --rps or as --concurrency, not both",
                             hint="--rps: requests per second; --concurrency: users in flight")
    q = Question(model=model, ctx=ctx, input_len=input_len, output_len=output_len,
                 concurrency=concurrency, rps=rps, batch=batch, utilisation=utilisation,
                 spare=spare,
                 objective=objective, providers=providers, regions=regions, gpus=gpus,
                 instances=instances, max_usd_per_hour=max_usd_per_hour,
                 max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms, spot=spot,
                 kv_cache_dtype=kv_cache_dtype, cpu_offload_gb=cpu_offload_gb,
                 allow_small_host=allow_small_host, vllm_version=vllm_version,
                 max_nodes=max_nodes, quantization=quantization,
                 expert_parallel=expert_parallel)
    if with_rejected:
        return ask(q, catalog=catalog, top=top, with_rejected=True)
    return ask(q, catalog=catalog, top=top)


@overload
def ask(question: Question, *, catalog: Catalog | None = ..., top: int | None = ...,
        with_rejected: Literal[False] = ...) -> list[Recommendation]: ...


@overload
def ask(question: Question, *, catalog: Catalog | None = ..., top: int | None = ...,
        with_rejected: Literal[True]) -> tuple[list[Recommendation], list[Rejection]]: ...


@boundary
def ask(question: Question, *, catalog: Catalog | None = None, top: int | None = None,
        with_rejected: bool = False
        ) -> list[Recommendation] | tuple[list[Recommendation], list[Rejection]]:
    """:func:`recommend` for a :class:`~advisor.core.question.Question` built once (the form
    planning scripts keep and vary with ``question.model_copy(update=...)``)."""
    from advisor.core.load import targets
    from advisor.core.question import Question
    from advisor.core.ranking import Constraints, Request, explain_empty
    from advisor.core.weights import check_choice

    # validated again: model_copy(update=...) does not validate what it sets
    q = Question.model_validate(question.model_dump())
    if top is not None and top <= 0:
        raise UserInputError(f"--top must be positive, not {top}", hint="e.g. --top 5")
    if q.rps is not None and q.concurrency is not None:
        raise UserInputError("give the load as --rps or as --concurrency, not both",
                             hint="--rps: requests per second; --concurrency: users in flight")
    cat = catalog or load_catalog()
    choice = check_choice(q.quantization)
    spec = model_spec(q.model, catalog=cat)
    if q.expert_parallel and spec.moe is None:
        raise UserInputError(f"{spec.name} has no experts: expert parallelism does not apply",
                             hint="drop --expert-parallel")
    i, o = default_lengths(q.ctx, q.input_len, q.output_len)
    tg = targets(q.max_tpot_ms, q.max_ttft_ms, q.batch)
    req = Request(ctx=q.ctx, input_len=i, output_len=o, concurrency=q.concurrency, rps=q.rps,
                  batch=q.batch, utilisation=q.utilisation, spare=q.spare, objective=q.objective,
                  kv_cache_dtype=q.kv_cache_dtype, cpu_offload_gib=q.cpu_offload_gb,
                  expert_parallel=q.expert_parallel, targets=tg)
    cons = Constraints(providers=q.providers or [], regions=q.regions or [], gpus=q.gpus or [],
                       max_usd_per_hour=q.max_usd_per_hour, max_tpot_ms=tg.tpot_ms,
                       max_ttft_ms=tg.ttft_ms, spot=q.spot, max_nodes=q.max_nodes,
                       allow_small_host=q.allow_small_host)
    unknown = [p for p in cons.providers if p not in cat.providers()]
    if unknown:
        raise NotFoundError("provider", unknown[0], cat.providers())
    check_regions(cat, cons.regions, cons.providers)
    only = [cat.instance(k) for k in q.instances] if q.instances is not None else None
    recs, rejected = _rank_weights(cat, q, choice, spec, req, cons, only)
    if not recs and not with_rejected:
        raise explain_empty(rejected)
    if recs and q.rps is None and q.concurrency is None and not q.batch:
        recs = with_crossovers(recs)
    recs = recs[:top] if top else recs
    return (recs, rejected) if with_rejected else recs


def _rank_weights(cat: Catalog, q: Question, choice: str, spec: ModelSpec, req: Request,
                  cons: Constraints, only: list[InstanceType] | None
                  ) -> tuple[list[Recommendation], list[Rejection]]:
    """The ranking once per weight option ``choice`` asks for (advisor.core.weights), each
    offer tagged with the weights it assumes, merged in the ranking's own order; a GPU that
    cannot run an option is rejected for it, and an offer rejected for one option but
    recommended for another is not listed as rejected."""
    from advisor.core.engine import GIB
    from advisor.core.model import DTYPE_BYTES
    from advisor.core.ranking import Rejection, order, rank
    from advisor.core.sizing import weights_per_gpu
    from advisor.core.weights import (
        dtype_refusal,
        kernel_for,
        load_gib,
        options,
        refusal,
        serving_refusal,
    )

    # the model catalog's entry matters only for fp8 (its published checkpoints): the default
    # question does not read the config a second time
    alias = (cat.models.get(model_config(q.model, catalog=cat)[0]) if choice != "none"
             else None)
    opts = options(choice, spec, alias)
    eng = profile(q.vllm_version)
    pool = only if only is not None else list(cat.instances.values())
    recs: list[Recommendation] = []
    rejected: list[Rejection] = []
    for w, override in opts:
        s = spec if override is None else model_spec(q.model, catalog=cat,
                                                      quantization=override)
        ok = []
        for inst in pool:
            g = cat.gpus[inst.gpu.model]
            no = refusal(w, g.architecture, g.fp8_tflops,
                         s.quantization.method if s.quantization else None)
            upcast = None if no else dtype_refusal(s.model_type, s.torch_dtype, g.architecture)
            start = None if no or upcast else serving_refusal(
                s, g, req.kv_cache_dtype, eng.version, eng.checkpoint_kv_dtype)
            if no or upcast or start:
                rejected.append(Rejection(
                    provider=inst.provider, instance=inst.name,
                    reason=no or upcast or (start.why if start else ""),
                    by=("float32 only" if upcast else start.what if start
                        else "--quantization" if w.scheme == "fp8"
                        else f"its {w.source} weights")))
            else:
                ok.append(inst)
        own_gib = (sum(weights_per_gpu(spec, 1, 1, DTYPE_BYTES.get(spec.torch_dtype, 2))) / GIB
                   if w.source == "on-the-fly" else 0.0)  # only on-the-fly fp8 loads it whole
        r = req.model_copy(update={"load_weights_gib": load_gib(w, own_gib)})
        got, rej = rank(cat, s, r, cons, eng, instances=ok)
        tag = f"[{w.scheme}] " if len(opts) > 1 else ""
        recs += [x.model_copy(update={"weights": w.model_copy(update={
            "kernel": kernel_for(w, cat.gpus[x.gpu].fp8_tflops)})}) for x in got]
        rejected += [x.model_copy(update={"reason": tag + x.reason}) for x in rej]
    # one offer per instance and scheme: a published checkpoint's before on-the-fly fp8
    seen: set[tuple[str, str, str]] = set()
    kept: list[Recommendation] = []
    for y in sorted(recs, key=lambda r: r.weights is None or r.weights.checkpoint is None):
        key = (y.provider, y.instance, y.weights.scheme if y.weights else "")
        if key not in seen:
            seen.add(key)
            kept.append(y)
    recs = kept
    served = {(r.provider, r.instance) for r in recs}
    why: dict[tuple[str, str], Rejection] = {}
    for x in rejected:  # one line per instance left out, every option's reason on it
        k = (x.provider, x.instance)
        if k in served:
            continue
        why[k] = (x if k not in why else why[k].model_copy(
            update={"reason": f"{why[k].reason}; {x.reason}"}))
    rejected = list(why.values())
    recs.sort(key=order)
    return recs, rejected


def with_crossovers(recs: list[Recommendation]) -> list[Recommendation]:
    """The default question ranks by $/h of one replica; beside it, for every other deployable
    offer that is cheaper per request, the load from which its fleet is the cheaper buy
    (:func:`advisor.core.load.crossover`, whole instances, no headroom)."""
    from advisor.core.load import Crossover, crossover

    first = recs[0]

    def shape(r: Recommendation) -> tuple[float, int, int, float]:
        return (r.perf.requests_per_s, r.plan.replicas, r.plan.nodes, r.usd_per_hour)

    out = [first]
    for r in recs[1:]:
        x = crossover(shape(first), shape(r)) if r.deployable and first.deployable else None
        out.append(r if x is None else r.model_copy(update={"crossover": Crossover(
            versus=f"{first.provider}:{first.instance}", rps=x[0], usd_per_month=x[1],
            versus_usd_per_month=x[2])}))
    return out


@overload
def fleet(model: str, ctx: int, *, rps: float, input_len: int | None = ...,
          output_len: int | None = ..., max_instances: int = ...,
          utilisation: float = ..., spare: int = ...,
          max_tpot_ms: float | None = ..., max_ttft_ms: float | None = ...,
          providers: list[str] | None = ..., regions: list[str] | None = ...,
          gpus: list[str] | None = ..., spot: bool = ..., kv_cache_dtype: KvCacheDtype = ...,
          cpu_offload_gb: float = ...,
          vllm_version: str | None = ..., catalog: Catalog | None = ...,
          with_misses: Literal[False] = ..., max_nodes: int = ..., batch: bool = ...,
          allow_small_host: bool = ..., quantization: str | None = ...,
          expert_parallel: bool | None = ...
          ) -> list[FleetOption]: ...


@overload
def fleet(model: str, ctx: int, *, rps: float, input_len: int | None = ...,
          output_len: int | None = ..., max_instances: int = ...,
          utilisation: float = ..., spare: int = ...,
          max_tpot_ms: float | None = ..., max_ttft_ms: float | None = ...,
          providers: list[str] | None = ..., regions: list[str] | None = ...,
          gpus: list[str] | None = ..., spot: bool = ..., kv_cache_dtype: KvCacheDtype = ...,
          cpu_offload_gb: float = ...,
          vllm_version: str | None = ..., catalog: Catalog | None = ...,
          with_misses: Literal[True], max_nodes: int = ..., batch: bool = ...,
          allow_small_host: bool = ..., quantization: str | None = ...,
          expert_parallel: bool | None = ...
          ) -> tuple[list[FleetOption], list[FleetMiss]]: ...


@boundary
def fleet(model: str, ctx: int, *, rps: float, input_len: int | None = None,
          output_len: int | None = None, max_instances: int = 64,
          utilisation: float = 1.0, spare: int = 0,
          max_tpot_ms: float | None = None, max_ttft_ms: float | None = None,
          providers: list[str] | None = None, regions: list[str] | None = None,
          gpus: list[str] | None = None, spot: bool = False, kv_cache_dtype: KvCacheDtype = "auto",
          cpu_offload_gb: float = 0.0,
          vllm_version: str | None = None, catalog: Catalog | None = None,
          with_misses: bool = False, max_nodes: int = 4, batch: bool = False,
          allow_small_host: bool = False, quantization: str | None = None,
          expert_parallel: bool | None = None
          ) -> list[FleetOption] | tuple[list[FleetOption], list[FleetMiss]]:
    """Fleets that carry ``rps`` requests per second within the latency targets (those of
    :func:`recommend`: TPOT <= 50 ms and TTFT <= 2 s unless given, none with ``batch``), cheapest
    monthly bill first (:class:`~advisor.core.fleets.FleetOption`). Raises UserInputError,
    naming the closest misses, when no fleet of at most ``max_instances`` instances can.
    ``utilisation`` U sizes each fleet to load its replicas to at most U of what they carry
    within the targets (capacity >= rps / U); ``spare`` adds replicas beyond the load (N +
    spare). Defaults: 1.0 and 0, no headroom."""
    from advisor.core.fleets import explain_no_fleet, plan_fleet

    finite("--rps", rps, high=1e6)
    if not isinstance(max_instances, int) or not 0 < max_instances <= 10_000:
        raise UserInputError(f"--max-instances must be 1-10000, not {max_instances}",
                             hint="a fleet is at most 10000 instances")
    recs = recommend(model, ctx, input_len=input_len, output_len=output_len, rps=rps,
                     utilisation=utilisation, spare=spare,
                     providers=providers, regions=regions, gpus=gpus, spot=spot,
                     max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms, batch=batch,
                     allow_small_host=allow_small_host,
                     kv_cache_dtype=kv_cache_dtype, cpu_offload_gb=cpu_offload_gb,
                     vllm_version=vllm_version, catalog=catalog,
                     max_nodes=max_nodes, quantization=quantization,
                     expert_parallel=expert_parallel)
    options, misses = plan_fleet(recs, rps, max_instances, utilisation, spare)
    if not options and not with_misses:
        raise explain_no_fleet(misses, rps, max_instances)
    return (options, misses) if with_misses else options


@boundary
def fleet_curve(model: str, ctx: int, *, rps_from: float, rps_to: float,
                points: int = 16, lines: int = 4, input_len: int | None = None,
                output_len: int | None = None, max_instances: int = 64,
                utilisation: float = 1.0, spare: int = 0,
                max_tpot_ms: float | None = None, max_ttft_ms: float | None = None,
                providers: list[str] | None = None, regions: list[str] | None = None,
                gpus: list[str] | None = None, spot: bool = False,
                kv_cache_dtype: KvCacheDtype = "auto", cpu_offload_gb: float = 0.0,
                vllm_version: str | None = None,
                catalog: Catalog | None = None, max_nodes: int = 4, batch: bool = False,
                allow_small_host: bool = False, quantization: str | None = None,
                expert_parallel: bool | None = None) -> CostCurve:
    """The cheapest fleet across a range of loads (``plan --rps-range A:B``): :func:`fleet` at
    ``points`` loads from ``rps_from`` to ``rps_to`` (both included, log-spaced:
    :func:`advisor.core.load.curve_loads`), the cheapest and next fleet at each, the ``lines``
    offers worth drawing and the loads where one of their fleets becomes cheaper than another's
    (:class:`~advisor.core.load.CostCurve`). The other keywords are :func:`fleet`'s. Raises
    UserInputError for a range that is not 0 < from < to <= 1e6, and, as :func:`fleet` does,
    when no fleet of at most ``max_instances`` carries one of the loads."""
    from advisor.core.fleets import explain_no_fleet, plan_fleet
    from advisor.core.load import MAX_CURVE_LINES, MAX_CURVE_POINTS, cost_curve, curve_loads
    from advisor.core.load import targets as targets_for

    hint = "e.g. --rps-range 0.5:40 (requests/s, from:to)"
    finite("--rps-range start", rps_from, high=1e6)
    finite("--rps-range end", rps_to, high=1e6)
    if rps_to <= rps_from:
        raise UserInputError(f"--rps-range {rps_from:g}:{rps_to:g}: the end must be above the "
                             "start", hint=hint)
    for name, n, least, most in (("--points", points, 2, MAX_CURVE_POINTS),
                                 ("--lines", lines, 1, MAX_CURVE_LINES)):
        if isinstance(n, bool) or not isinstance(n, int) or not least <= n <= most:
            raise UserInputError(f"{name} must be a whole number from {least} to {most}, "
                                 f"not {n!r}", hint=f"give {name} from {least} to {most}")
    if not isinstance(max_instances, int) or not 0 < max_instances <= 10_000:
        raise UserInputError(f"--max-instances must be 1-10000, not {max_instances}",
                             hint="a fleet is at most 10000 instances")
    cat = catalog or load_catalog()
    loads = curve_loads(rps_from, rps_to, points)
    per_load, dates = [], {}
    for rps in loads:  # what `plan --rps` does at each load (fleet(), step by step)
        recs = recommend(model, ctx, input_len=input_len, output_len=output_len, rps=rps,
                         utilisation=utilisation, spare=spare, providers=providers,
                         regions=regions, gpus=gpus, spot=spot, max_tpot_ms=max_tpot_ms,
                         max_ttft_ms=max_ttft_ms, batch=batch,
                         allow_small_host=allow_small_host, kv_cache_dtype=kv_cache_dtype,
                         cpu_offload_gb=cpu_offload_gb,
                         vllm_version=vllm_version, catalog=cat, max_nodes=max_nodes,
                         quantization=quantization, expert_parallel=expert_parallel)
        options, misses = plan_fleet(recs, rps, max_instances, utilisation, spare)
        if not options:
            raise explain_no_fleet(misses, rps, max_instances)
        per_load.append(options)
        dates.update({f"{r.provider}:{r.instance}": r.price_as_of for r in recs})
    i, o = default_lengths(ctx, input_len, output_len)
    return cost_curve(model=model, ctx=ctx, input_len=i, output_len=o,
                      tg=targets_for(max_tpot_ms, max_ttft_ms, batch),
                      price_kind=per_load[0][0].price_kind, utilisation=utilisation,
                      spare=spare, max_instances=max_instances, loads=loads, options=per_load,
                      price_as_of=dates, lines=lines)


def recommend_named(model: str, ctx: int, inst: InstanceType, *, catalog: Catalog,
                    vllm_version: str | None = None, **question: Any) -> Recommendation:
    """What the ranking makes of one named instance for the same ``question`` as
    :func:`recommend` (targets, batch, allow_small_host): its recommendation, or a
    UserInputError with the reason it was excluded and the flag that allows it."""
    from advisor.core.ranking import hint_for

    recs, rejected = recommend(model, ctx, catalog=catalog, instances=[inst.key],
                               vllm_version=vllm_version, with_rejected=True, **question)
    if recs:
        return recs[0]
    why = rejected[0] if rejected else None
    raise UserInputError(f"{model} cannot be served on {inst.key} at ctx {ctx}"
                         + (f": {why.reason}" if why else ""), hint=hint_for(why.by if why else ""))


@boundary
def local_gpu(*, probe: str | Path | dict[str, Any] | Topology | None = None,
              sysfs_root: str | Path | None = None, catalog: Catalog | None = None
              ) -> tuple[str, str]:
    """(catalog GPU id, how it was told) of this host's GPUs — ``--gpu local`` — from a live
    probe of ``sysfs_root`` (default ``/``) or a saved ``advisor topology --json`` (``probe``),
    by their PCI device ids and the catalog's ``pci_device_ids``. Mixed, unknown or ambiguous
    ids are a UserInputError that asks for the model by name."""
    from advisor.host.local import local_gpu as _local_gpu

    return _local_gpu(catalog or load_catalog(), probe, sysfs_root)


def require_token(cat: Catalog, model: str, hf_token_ref: str | None,
                  local: bool = False) -> None:
    """A model the catalog marks as gated cannot be downloaded without a Hugging Face token:
    refuse before anything is rendered or launched, rather than fail at boot. ``local``: the
    server is this host (render --target local), which reads the token from a file."""
    from advisor.clouds.registry import token_ref_forms

    entry = cat.models.get(model) or next(
        (m for m in cat.models.values() if m.hf_id.lower() == model.lower()), None)
    if entry is None or not entry.gated or hf_token_ref is not None:
        return
    if local:
        raise UserInputError(f"{entry.hf_id} is a gated repository: the server needs a Hugging "
                             "Face token to download it",
                             hint="write a token with access to it to a file (root:vllm, "
                             "mode 0640, as install.sh checks) and pass --hf-token-ref "
                             "file:/etc/advisor/hf-token")
    raise UserInputError(f"{entry.hf_id} is a gated repository: the instance needs a "
                         "Hugging Face token to download it",
                         hint="store a token with access to it in the cloud's secret store "
                         f"and pass --hf-token-ref ({token_ref_forms()})")


def require_loadable(cat: Catalog, model: str, vllm_version: str) -> None:
    """Refuse, before anything is rendered or launched, a model whose architecture the vLLM
    release being deployed cannot load (:mod:`advisor.core.archs`): its server would stop at
    start-up on every replica, however the instance is sized."""
    from advisor.core.archs import support

    spec = model_spec(model, catalog=cat)
    kind, why = support(spec.architectures, vllm_version, spec.config_model_type)
    if kind == "refused":
        raise UserInputError(f"{why}; the server would stop at start-up",
                             hint=f"advisor deploys vLLM {vllm_version} (its lock): serve this "
                             "model with a release that has it yourself ('advisor fit' and "
                             "'recommend' still size it), or pick another model")


def _plan_for(model: str, ctx: int, cat: Catalog, instance: str | None, tp: int | None,
              vllm_version: str, gpu_memory_utilization: float,
              question: dict[str, Any] | None = None
              ) -> tuple[InstanceType, Plan, float, Weights | None]:
    """The instance and layout to render, and one replica's weights in GiB (all its GPUs):
    the top recommendation for ``question`` (recommend's targets, batch, allow_small_host), or
    the named instance with the layout the ranking gives it, or the named instance at the TP
    the user asked for."""
    from advisor.core.host import floor_shortfall
    from advisor.core.layouts import place, tp_sizes
    from advisor.core.ranking import hint_for

    q = question or {}
    plan = None
    weights = 0.0
    chosen: Weights | None = None
    if instance is None:
        best = recommend(model, ctx, catalog=cat, top=1, **q)[0]
        inst = cat.instance(f"{best.provider}:{best.instance}")
        if tp is None or tp == best.plan.tp:
            plan, weights = best.plan, best.fit.weights_gib * best.plan.tp * best.plan.pp
            chosen = best.weights
    else:
        inst = cat.instance(instance)
    if plan is None and tp is None:
        mine = recommend_named(model, ctx, inst, catalog=cat, **q)
        plan, weights = mine.plan, mine.fit.weights_gib * mine.plan.tp * mine.plan.pp
        chosen = mine.weights
    if plan is None:
        assert tp is not None
        if q.get("quantization") not in (None, "none"):
            raise UserInputError("--tp with --quantization: the layout at a TP of your own is "
                                 "sized for the checkpoint as published",
                                 hint="drop --tp (the ranking picks the layout for the "
                                 "weights), or drop --quantization")
        if tp <= 0 or inst.gpu.count % tp:
            # the TP sizes the ranking itself lays out on this instance
            sizes = tp_sizes(model_spec(model, catalog=cat), inst.gpu.count)
            raise UserInputError(f"--tp {tp} does not divide the {inst.gpu.count} GPUs of "
                                 f"{inst.key}",
                                 hint="give one of " + ", ".join(map(str, sizes))
                                 + " (replicas fill the rest), or drop --tp")
        short = floor_shortfall(inst)
        if short and not q.get("allow_small_host"):
            raise UserInputError(f"{inst.key}: {short}", hint=hint_for("host floor"))
        result, _, _ = fit(model, inst.gpu.model, catalog=cat, tp=tp, max_model_len=ctx,
                           gpu_memory_utilization=gpu_memory_utilization,
                           vllm_version=vllm_version,
                           kv_cache_dtype=q.get("kv_cache_dtype") or "auto",
                           cpu_offload_gb=q.get("cpu_offload_gb") or 0.0,
                           expert_parallel=q.get("expert_parallel"))
        if not result.fits:
            raise UserInputError(f"{model} does not fit on {inst.key} with TP {tp}: "
                                 f"{result.notes[0] if result.notes else ''}",
                                 hint="raise --tp or shorten --ctx")
        plan = place(inst, cat, tp, 1, result.expert_parallel)
        weights = result.weights_gib * tp
    return inst, plan, weights, chosen


@boundary
def render_files(model: str, ctx: int, *, instance: str | None = None, tp: int | None = None,
                 vllm_version: str | None = None, port: int = 8000,
                 host: str = "127.0.0.1", api_key_ref: str | None = None,
                 gpu_memory_utilization: float = 0.9, target: str = "cloud-init",
                 name: str | None = None, ray_head: str | None = None,
                 hf_token_ref: str | None = None, max_tpot_ms: float | None = None,
                 max_ttft_ms: float | None = None, batch: bool = False,
                 allow_small_host: bool = False,
                 catalog: Catalog | None = None,
                 probe: str | Path | dict[str, Any] | Topology | None = None,
                 sysfs_root: str | Path | None = None,
                 gpu: str | None = None, quantization: str | None = None,
                 kv_cache_dtype: KvCacheDtype = "auto",
                 cpu_offload_gb: float = 0.0,
                 expert_parallel: bool | None = None) -> RenderResult:
    """The files that bring ``model`` up on ``instance`` (default: the top recommendation for
    the same latency targets, ``batch`` and ``allow_small_host`` as :func:`recommend`):
    cloud-init user-data, unit, env files and launcher, or (``target="k8s"``) manifests.

    ``target="local"`` lays the same files out for a host you have, from its probe instead of
    a catalog entry: a saved ``advisor topology --json`` (``probe``: a path, its JSON or a
    Topology) or a live probe of ``sysfs_root`` (default ``/``); ``gpu`` names the GPU model
    where the PCI device ids do not. The layout is the one the ranking gives an identical
    catalog entry; ``install.sh`` replaces the user-data, the API key defaults to
    ``file:/etc/advisor/api-key``, and ``commands`` holds each replica's command line.

    An instance or host advisor cannot deploy (an AMD GPU: CUDA vLLM only,
    :mod:`advisor.core.deploy`) is refused with a UserInputError before anything is rendered."""
    from advisor.clouds.registry import CLOUDS, info, key_ref_for, secret_refs
    from advisor.render.cloudinit import RenderRequest, check_value, render, start_timeout_s

    vllm_version = vllm_version or DEFAULT_VLLM_VERSION  # None: the release advisor pins

    if target not in ("cloud-init", "k8s", "local"):
        raise UserInputError(f"--target {target!r} is not cloud-init, k8s or local",
                             hint="cloud-init (the default: user-data for a cloud VM), k8s "
                             "(manifests) or local (this host)")
    local = target == "local"
    if not local:
        given = [f for f, v in (("--probe", probe), ("--sysfs-root", sysfs_root), ("--gpu", gpu))
                 if v is not None]
        if given:
            raise UserInputError(f"{given[0]} is for --target local (a host laid out from its "
                                 "probe)", hint=f"add --target local, or drop {given[0]}")
    elif instance is not None:
        raise UserInputError("--instance names a catalog entry; --target local lays out this "
                             "host from its probe", hint="drop --instance (or --target local)")
    finite("--gpu-memory-utilization", gpu_memory_utilization, high=1.0)
    check_value("host", host)  # before any ranking: an address, or one clear line
    req = RenderRequest(model="placeholder/model", max_model_len=ctx, vllm_version=vllm_version,
                        port=port, host=host, api_key_ref="file:/placeholder",
                        gpu_memory_utilization=gpu_memory_utilization, ray_head=ray_head)
    cat = catalog or load_catalog()
    from advisor.core import deploy

    if instance is not None:  # an AMD instance named: refused before any ranking or file
        deploy.require(cat.instance(instance), cat)
    for ref in (api_key_ref, hf_token_ref):
        if ref is not None:
            check_value("api_key_ref", ref)
    if model in cat.models:
        repo = cat.models[model].hf_id
    else:
        repo = model
        model_spec(model, catalog=cat)  # a repo id must at least be sizeable (cached config)
    require_token(cat, model, hf_token_ref, local)
    require_loadable(cat, model, vllm_version)
    question: dict[str, Any] = {"max_tpot_ms": max_tpot_ms, "max_ttft_ms": max_ttft_ms,
                                "batch": batch, "allow_small_host": allow_small_host,
                                "quantization": quantization, "kv_cache_dtype": kv_cache_dtype,
                                "cpu_offload_gb": cpu_offload_gb,
                                "expert_parallel": expert_parallel}
    topo = None
    if local:
        from advisor.host.local import host_topology, local_instance, with_instance

        topo, seen, day = host_topology(probe, sysfs_root)
        deploy.require_probe(d.vendor for d in topo.gpus)  # an AMD host, even with --gpu H100
        mine = local_instance(topo, cat, gpu, source=seen, as_of=day)
        deploy.require(mine, cat, hint=deploy.PROBE_HINT)  # --gpu MI300X named
        # the same ranking path as a named catalog entry, on one host (no replica over several)
        cat, instance = with_instance(cat, mine), mine.key
        question["max_nodes"] = 1
        api_key_ref = api_key_ref or "file:/etc/advisor/api-key"
    inst, plan, weights, chosen = _plan_for(model, ctx, cat, instance, tp, vllm_version,
                                            gpu_memory_utilization, question)
    if chosen is not None and chosen.checkpoint:  # a published quantized checkpoint is served
        repo = chosen.checkpoint
    # the top pick is deployable whenever any offer is (the ranking puts those first)
    deploy.require(inst, cat)
    if api_key_ref is not None and inst.provider in CLOUDS and key_ref_for(
            inst.provider, api_key_ref) != api_key_ref:
        raise UserInputError(f"--api-key-ref {api_key_ref[:80]!r} is another cloud's secret "
                             f"store; {inst.key} cannot read it",
                             hint=f"e.g. --api-key-ref {info(inst.provider).key_scheme.example}")
    refs = secret_refs(inst.provider, api_key_ref, hf_token_ref)
    if refs is None:
        scheme = info(inst.provider).key_scheme if inst.provider in CLOUDS else None
        if key_ref_for(inst.provider, api_key_ref) is None:
            raise UserInputError(f"--api-key-ref is needed for {inst.provider}"
                                 + (f" ({api_key_ref} is another cloud's secret store)"
                                    if api_key_ref else ""),
                                 hint="e.g. --api-key-ref "
                                 + (scheme.example if scheme else "file:/etc/advisor/api-key"))
        raise UserInputError(f"--hf-token-ref {hf_token_ref!r} is another cloud's secret store; "
                             f"{inst.key} cannot read it",
                             hint="e.g. --hf-token-ref "
                             + (scheme.token_example if scheme else "file:/etc/advisor/hf-token"))
    key_ref, token_ref = refs
    req = req.model_copy(update={"model": repo, "api_key_ref": key_ref,
                                 "hf_token_ref": token_ref,
                                 "start_timeout_s": start_timeout_s(weights),
                                 "quantization": chosen.vllm_quantization if chosen else None,
                                 "kv_cache_dtype": None if kv_cache_dtype == "auto"
                                 else kv_cache_dtype, "cpu_offload_gib": cpu_offload_gb})
    if target == "k8s":
        from advisor.clouds.base import check_name, default_name
        from advisor.render import k8s

        workload = check_name(name or default_name(model, inst.name))
        files = k8s.files(inst, plan, req, workload)
    elif topo is not None:
        from advisor.render.local import launch_lines, render_local

        files = render_local(inst, plan, req)
        return _render_result(instance=inst, plan=plan, files=files,
                              commands=launch_lines(files, topo))
    else:
        if inst.provider in CLOUDS:
            from advisor.render.envlock import check_pairing, image_python

            # the default image's driver must run the lock's CUDA, and its Python have a lock
            check_pairing(inst.provider, None, vllm_version)
            req = req.model_copy(update={"python": image_python(inst.provider)})
        files = render(inst, plan, req)
    return _render_result(instance=inst, plan=plan, files=files)

