"""``advisor perf`` and ``advisor recommend``."""

from __future__ import annotations

from typing import Annotated, Any, cast

import typer

from advisor.choices import CudagraphMode, KvCacheDtype, Objective, choices
from advisor.cli import output as out
from advisor.cli.common import (
    KV_CHOICES,
    OBJECTIVE_CHOICES,
    AllowSmallHost,
    Batch,
    CatalogDirs,
    ExpertParallel,
    GpuFilter,
    JsonFlag,
    MaxTpot,
    MaxTtft,
    ProbeFile,
    ProviderFilter,
    Quantization,
    RegionFilter,
    Spare,
    SysfsRoot,
    Utilisation,
    catalog_from,
    layout_label,
    local_gpus,
    one_gpu,
    sizing_note,
)
from advisor.core.defaults import DEFAULT_VLLM_VERSION

Model = Annotated[str, typer.Option("--model", "-m", help="A model alias or a config.json path.")]
Version = Annotated[str, typer.Option(help="The vLLM release to model.")]


def perf_cmd(
    model: Model,
    gpu: Annotated[str, typer.Option(
        "--gpu", help="A catalog GPU (id, alias or family), e.g. H100-SXM; a family of several "
        "means its smallest; local: this host's GPU, from its probe.")],
    input_len: Annotated[int, typer.Option(help="Prompt tokens per request.")],
    output_len: Annotated[int, typer.Option(help="Generated tokens per request.")],
    concurrency: Annotated[int, typer.Option(help="Sequences in flight.")] = 1,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size.", min=1)] = 1,
    pp: Annotated[int, typer.Option(
        "--pp", help="Pipeline-parallel size (stages, e.g. one per node).", min=1)] = 1,
    max_model_len: Annotated[int | None, typer.Option(
        "--ctx", "--max-model-len", help="vLLM's max_model_len; default input + output.")]
    = None,
    gpu_memory_gib: Annotated[float | None, typer.Option(help="Total GPU memory, GiB.")] = None,
    kv_cache_dtype: Annotated[str, typer.Option(
        help=f"vLLM's --kv-cache-dtype: {KV_CHOICES}.")] = "auto",
    quantization: Annotated[str | None, typer.Option(
        help="Override the config's quantization (fp8, awq, gptq, …).")] = None,
    cpu_offload_gb: Annotated[float, typer.Option(
        help="vLLM's --cpu-offload-gb: GiB of weights per GPU kept in host memory.")] = 0.0,
    vllm_version: Version = DEFAULT_VLLM_VERSION,
    max_cudagraph_capture_size: Annotated[int | None, typer.Option(
        help="vLLM's --max-cudagraph-capture-size: the most tokens a step may schedule and "
        "still replay a CUDA graph; default min(2 x max_num_seqs, 512).")] = None,
    cudagraph_mode: Annotated[str | None, typer.Option(
        help=f"vLLM's compilation_config cudagraph_mode: {choices(CudagraphMode)}; default "
        "FULL_AND_PIECEWISE (PIECEWISE before vLLM 0.11.0).")] = None,
    expert_parallel: ExpertParallel = None,
    probe: ProbeFile = None,
    sysfs_root: SysfsRoot = None,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Estimate TTFT, TPOT and throughput of one replica."""
    from advisor.api import estimate

    cat = catalog_from(catalog)
    gpu = one_gpu(cat, gpu, probe, sysfs_root)
    est, fit = estimate(model, gpu, input_len=input_len, output_len=output_len,
                        concurrency=concurrency, tp=tp, pp=pp, max_model_len=max_model_len,
                        catalog=cat, gpu_memory_gib_override=gpu_memory_gib,
                        vllm_version=vllm_version,
                        kv_cache_dtype=cast(KvCacheDtype, kv_cache_dtype),
                        quantization=quantization, cpu_offload_gb=cpu_offload_gb,
                        max_cudagraph_capture_size=max_cudagraph_capture_size,
                        cudagraph_mode=cast(CudagraphMode | None, cudagraph_mode),
                        expert_parallel=expert_parallel)
    if json:
        out.emit_json({**est.model_dump(), "fit": fit.model_dump()})
        return
    ep = " EP" if fit.expert_parallel else ""
    layout = f"TP {tp}{ep} x PP {pp} = " if pp > 1 else (f"TP {tp}{ep} = " if ep else "")
    out.pairs(f"{model} on {layout}{tp * pp} x {cat.gpu(gpu).id}, {input_len} in / "
              f"{output_len} out, "
              f"{est.concurrency} concurrent", [
                  ("TTFT", out.ms(est.ttft_ms) + " ms"), ("TPOT", out.ms(est.tpot_ms) + " ms"),
                  # vLLM bench prints both: the mean step, and the step most tokens see
                  ("median ITL", out.ms(est.itl_median_ms or est.tpot_ms) + " ms"),
                  ("output tokens/s", out.num(est.output_tokens_per_s)),
                  ("requests/s", out.num(est.requests_per_s, 2)),
                  ("decode is", f"{est.decode_bound}-bound"),
                  ("KV cache", f"{fit.kv_cache_tokens:,} tokens ({fit.max_concurrency:.1f}x "
                               f"{fit.max_model_len})"),
                  ("accuracy", est.confidence.why if est.confidence else "—")])
    for n in est.notes:
        out.line(f"- {n}")


#: recommend's columns; at a narrow terminal the highest number is hidden first, and the
#: question's own figure never is
_COLUMNS = ("instance", "region", "$/h", "GPUs", "layout", "conc", "tok/s", "TPOT ms", "TTFT ms",
            "$/1M", "NUMA", "conf")
_HIDE = {"cost": {"region": 11, "TTFT ms": 10, "NUMA": 9, "conc": 8, "tok/s": 7, "conf": 6},
         "batch": {"TTFT ms": 11, "TPOT ms": 10, "region": 9, "conc": 8, "NUMA": 7, "conf": 6},
         "latency": {"region": 11, "conc": 10, "NUMA": 9, "TTFT ms": 8, "$/1M": 7, "tok/s": 6,
                     "conf": 5},
         "throughput": {"TTFT ms": 11, "TPOT ms": 10, "region": 9, "conc": 8, "NUMA": 7,
                        "$/1M": 6, "conf": 5}}
_FLEET = ("instance", "region", "layout", "per rep", "inst", "$/month", "spare", "TPOT ms",
          "TTFT ms", "$/1M", "NUMA", "conf")
_FLEET_HIDE = {"region": 11, "TTFT ms": 10, "NUMA": 9, "per rep": 8, "$/1M": 7, "conf": 6,
               "spare": 5}
_NUMERIC = {"$/h", "conc", "tok/s", "TPOT ms", "TTFT ms", "$/1M", "per rep", "inst", "$/month",
            "spare"}
_NUMA = {"aligned": "aligned", "spans-nodes": "spans", "unknown": "?"}


def _columns(names: tuple[str, ...], hide: dict[str, int]) -> list[out.Col]:
    return [out.Col(c, num=c in _NUMERIC, drop=hide.get(c, 0)) for c in names]


def _part(c: Any) -> str:
    if c is None:
        return "?"
    return f"±{c.within_pct:.0f}%" if c.basis == "calibrated" and c.within_pct is not None \
        else "ext"


def _conf(r: Any) -> str:
    """memory|perf: the worst error on public runs of this GPU family, or ext(rapolated)."""
    return f"{_part(r.fit.confidence)}|{_part(r.perf.confidence)}"


#: after the instance of a pick advisor cannot deploy (advisor.core.deploy); the footer says so
NOT_DEPLOYABLE = " *"


def _name(r: Any) -> str:
    return f"{r.provider}:{r.instance}" + ("" if r.deployable else NOT_DEPLOYABLE)


def _wlayout(r: Any, mixed: bool = False) -> str:
    """The layout, with the weights where they are not the checkpoint as published (and for
    every row of a table that mixes both)."""
    w = r.weights
    if w is None or (w.scheme == "as published" and not mixed):
        return layout_label(r.plan)
    return f"{layout_label(r.plan)} {w.short}"


def _row(r: Any, mixed: bool = False) -> list[str]:
    p = r.plan
    return [_name(r), out.fmt(r.region), out.usd(r.usd_per_hour * p.nodes),
            f"{r.gpu_count}x {r.gpu}" if p.nodes == 1 else f"{p.nodes}x{r.gpu_count} {r.gpu}",
            _wlayout(r, mixed), str(r.perf.concurrency), out.num(r.instance_output_tokens_per_s),
            out.ms(r.perf.tpot_ms), out.ms(r.perf.ttft_ms),
            out.usd(r.usd_per_million_output_tokens),
            _NUMA.get(r.numa.alignment, r.numa.alignment), _conf(r)]


def _fleet_row(r: Any, mixed: bool = False) -> list[str]:
    f = r.fleet
    return [_name(r), out.fmt(r.region), _wlayout(r, mixed),
            out.num(f.per_replica, 2 if f.load == "rps" else 0), str(f.instances),
            out.num(f.usd_per_month), f"{f.headroom:+.0%}", out.ms(r.perf.tpot_ms),
            out.ms(r.perf.ttft_ms), out.usd(r.usd_per_million_output_tokens),
            _NUMA.get(r.numa.alignment, r.numa.alignment), _conf(r)]


def ranking_note(objective: str, question: str, utilisation: float, spot: bool,
                 spare: int = 0) -> str:
    """The footer: what the order means and what $/1M assumes, in the question's own terms."""
    if objective == "latency":
        key = "TPOT, lowest first"
    elif objective == "throughput":
        key = "output tok/s per instance, highest first"
    else:
        key = {"cheapest-within-targets": "$/h of one replica, lowest first",
               "batch": "$/1M output tokens at saturation, lowest first"}.get(
            question, "monthly bill, lowest first")
    if question.startswith("fleet"):
        at = ("$/1M at the stated load; per rep: load one replica carries; 730 h/month; "
              + sizing_note(utilisation, spare))
    else:
        at = (f"$/1M at {utilisation:.0%} of the throughput at 'conc' sequences per replica "
              "(the most that meet the targets)" if question != "batch" else
              f"$/1M at {utilisation:.0%} of saturated throughput")
    return (f"ranked by {key}; {at}; conc: sequences per replica; conf: memory|perf accuracy, "
            "worst error on public runs of this GPU family, or ext(rapolated); unknown NUMA "
            "weighs only on host-heavy plans" + ("; spot prices" if spot else ""))


def recommend_cmd(
    model: Model,
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.")],
    input_len: Annotated[int | None, typer.Option(
        help="Prompt tokens per request (default min(1024, ctx/2)).")] = None,
    output_len: Annotated[int | None, typer.Option(
        help="Generated tokens per request (default min(256, ctx - input)).")] = None,
    rps: Annotated[float | None, typer.Option(
        help="The load in requests/s: size the fleet and rank by monthly bill.")] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="The load as users in flight (concurrent sequences): size the fleet for them.")]
    = None,
    max_tpot_ms: MaxTpot = None,
    max_ttft_ms: MaxTtft = None,
    batch: Batch = False,
    utilisation: Utilisation = 1.0,
    spare: Spare = 0,
    objective: Annotated[str, typer.Option(
        help=f"{OBJECTIVE_CHOICES} (cost: the question's $ figure).")] = "cost",
    provider: ProviderFilter = None,
    region: RegionFilter = None,
    gpu: GpuFilter = None,
    max_usd_per_hour: Annotated[float | None, typer.Option(help="Price ceiling, $/h.")] = None,
    spot: Annotated[bool, typer.Option(help="Rank by spot prices.")] = False,
    kv_cache_dtype: Annotated[str, typer.Option(
        help=f"vLLM's --kv-cache-dtype: {KV_CHOICES}.")] = "auto",
    cpu_offload_gb: Annotated[float, typer.Option(
        help="vLLM's --cpu-offload-gb: GiB of weights per GPU kept in host memory.")] = 0.0,
    quantization: Quantization = None,
    expert_parallel: ExpertParallel = None,
    allow_small_host: AllowSmallHost = False,
    max_nodes: Annotated[int, typer.Option(
        help="Most instances one replica may span (PP across them); 1: one machine.")] = 4,
    top: Annotated[int, typer.Option(help="How many picks to show.", min=1)] = 5,
    show_rejected: Annotated[bool, typer.Option(help="List excluded instances and why.")]
    = False,
    vllm_version: Version = DEFAULT_VLLM_VERSION,
    probe: ProbeFile = None,
    sysfs_root: SysfsRoot = None,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """The cheapest instance that serves a model within latency targets, or the fleet for a
    load: layout, latency, $/h, $ per million tokens, and why."""
    from advisor.api import default_lengths, recommend

    cat = catalog_from(catalog)
    gpu = local_gpus(cat, gpu, probe, sysfs_root)
    recs, rejected = recommend(
        model, ctx, input_len=input_len, output_len=output_len, concurrency=concurrency,
        rps=rps, batch=batch, utilisation=utilisation, spare=spare,
        objective=cast(Objective, objective), providers=provider, regions=region, gpus=gpu,
        max_usd_per_hour=max_usd_per_hour, max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms,
        spot=spot, kv_cache_dtype=cast(KvCacheDtype, kv_cache_dtype), cpu_offload_gb=cpu_offload_gb,
        allow_small_host=allow_small_host, vllm_version=vllm_version, catalog=cat,
        with_rejected=True, max_nodes=max_nodes, quantization=quantization,
        expert_parallel=expert_parallel)
    if not recs:
        from advisor.core.ranking import explain_empty

        if show_rejected and not json:
            _rejected_table(rejected)
        raise explain_empty(rejected)
    picks = recs[:top]
    if json:
        body: Any = [_json(r) for r in picks]
        if show_rejected:
            body = {"recommendations": body,
                    "rejected": [r.model_dump() for r in rejected]}
        out.emit_json(body)
        return
    i, o = default_lengths(ctx, input_len, output_len)
    best = picks[0]
    basis = best.basis
    load = (f", {rps:g} req/s" if rps is not None else
            f", {concurrency} users" if concurrency is not None else "")
    title = (f"{model}, ctx {ctx}, {i} in / {o} out{load}; targets: {basis.targets.source}")
    served = len({(r.provider, r.instance) for r in recs})
    mixed = len({r.weights.scheme for r in picks if r.weights is not None}) > 1
    caption = (f"{served} of {served + len(rejected)} instance types can serve it; "
               + ranking_note(objective, basis.question, utilisation, spot, spare)
               + ("; Nn: one replica over N instances" if any(
                   r.plan.nodes > 1 for r in picks) else "")
               + (f";{NOT_DEPLOYABLE}: not deployable by advisor (CUDA vLLM only), ranked after "
                  "the deployable ones" if any(not r.deployable for r in picks) else "")
               + _unshown(recs, picks))
    if best.fleet is not None:
        out.table(_columns(_FLEET, _FLEET_HIDE), (_fleet_row(r, mixed) for r in picks), title=title,
                  caption=caption)
    else:
        key = "batch" if basis.question == "batch" and objective == "cost" else objective
        out.table(_columns(_COLUMNS, _HIDE.get(key, _HIDE["cost"])),
                  (_row(r, mixed) for r in picks), title=title, caption=caption)
    crossing = [(r.crossover, r) for r in picks[1:] if r.crossover is not None]
    # an offer cheaper per request may rank below the list (its instance costs more per hour):
    # the planner still sees the first such to become the cheaper buy, with the --top that
    # lists it (plan --rps-range draws the whole picture)
    unlisted = [(r.crossover, r) for r in recs[len(picks):]
                if r.crossover is not None and r.deployable]
    below: dict[tuple[str, str], int] = {}
    first = min(unlisted, key=lambda xr: xr[0].rps, default=None)
    if first is not None:
        below[(first[1].provider, first[1].instance)] = recs.index(first[1]) + 1
        crossing.append(first)
    for x, r in sorted(crossing, key=lambda xr: xr[0].rps)[:5]:
        mark = f" ({r.weights.short})" if mixed and r.weights is not None else ""
        rank = below.get((r.provider, r.instance))
        mark += (f" (${r.usd_per_million_output_tokens:,.2f}/1M; ranked {rank}: --top {rank} "
                 "lists it)" if rank else "")
        out.line(f"Above {x.rps:.3g} req/s, {r.provider}:{r.instance}{mark} is the cheaper "
                 f"fleet: ${x.usd_per_month:,.0f}/month against ${x.versus_usd_per_month:,.0f} "
                 f"for {x.versus} (whole instances, no headroom; plan --rps sizes it)")
    out.line(f"Why {best.provider}:{best.instance}:")
    for reason in best.reasons:
        out.line(f"  + {reason}")
    if quantization is not None and best.weights is not None:
        w = best.weights
        out.line(f"  = weights: {w.label}" + (f", {w.kernel}" if w.kernel else "")
                 + (f" — vLLM --quantization {w.vllm_quantization}" if w.vllm_quantization
                    else "") + f"; accuracy: {w.accuracy}")
        own = next((r for r in recs if r.weights and r.weights.scheme != w.scheme), None)
        if own is not None and own.weights is not None:
            out.line(f"  = with the weights {own.weights.label} the first pick is "
                     f"{own.provider}:{own.instance} at ${own.usd_per_hour * own.plan.nodes:,.2f}"
                     f"/h ({layout_label(own.plan)}, ${own.usd_per_million_output_tokens:,.2f}/1M)")
    for risk in best.risks:
        out.line(f"  ! {risk}")
    for what, c in (("memory", best.fit.confidence), ("latency", best.perf.confidence)):
        if c is not None:
            out.line(f"  ~ {what}: {c.why}")
    for r in picks[1:]:
        if not r.deployable:  # the first pick's own reason is among its risks above
            out.line(f"! {r.provider}:{r.instance} is not deployable by advisor: "
                     f"{r.not_deployable_reason}")
    if show_rejected:
        _rejected_table(rejected)


def _unshown(recs: list[Any], picks: list[Any]) -> str:
    """The footer's note on offers advisor cannot deploy that rank below the picks shown: a
    capacity planner still learns they exist and where to see them."""
    below = [r for r in recs[len(picks):] if not r.deployable]
    if not below:
        return ""
    gpus = ", ".join(sorted({r.gpu for r in below}))
    last = recs.index(below[-1]) + 1
    return (f"; {len(below)} more not deployable by advisor ({gpus}: CUDA vLLM only) rank after "
            f"the deployable ones: --top {last} shows them")


def _rejected_table(rejected: list[Any]) -> None:
    out.table(["instance", out.Col("why not", wrap=True)],
              ([f"{r.provider}:{r.instance}", r.reason] for r in rejected), title="rejected")


def _json(r: Any) -> dict[str, Any]:
    d = r.model_dump()
    d["plan"]["replica_layout"] = d["plan"].pop("replica_layout")
    return d
