"""``advisor perf`` and ``advisor recommend``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from advisor.cli import output as out
from advisor.cli.common import (
    CatalogDirs,
    GpuFilter,
    JsonFlag,
    ProviderFilter,
    RegionFilter,
    catalog_from,
    one_gpu,
)
from advisor.core.defaults import DEFAULT_VLLM_VERSION

Model = Annotated[str, typer.Option("--model", "-m", help="A model alias or a config.json path.")]
Version = Annotated[str, typer.Option(help="The vLLM release to model.")]


def perf_cmd(
    model: Model,
    gpu: Annotated[str, typer.Option(
        "--gpu", help="A catalog GPU (id, alias or family), e.g. H100-SXM; a family of several "
        "means its smallest.")],
    input_len: Annotated[int, typer.Option(help="Prompt tokens per request.")],
    output_len: Annotated[int, typer.Option(help="Generated tokens per request.")],
    concurrency: Annotated[int, typer.Option(help="Sequences in flight.")] = 1,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size.")] = 1,
    max_model_len: Annotated[int | None, typer.Option(
        "--ctx", "--max-model-len", help="vLLM's max_model_len; default input + output.")]
    = None,
    gpu_memory_gib: Annotated[float | None, typer.Option(help="Total GPU memory, GiB.")] = None,
    kv_cache_dtype: Annotated[str, typer.Option(help="auto or fp8.")] = "auto",
    vllm_version: Version = DEFAULT_VLLM_VERSION,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Estimate TTFT, TPOT and throughput of one replica."""
    from advisor.api import estimate

    cat = catalog_from(catalog)
    gpu = one_gpu(cat, gpu)
    est, fit = estimate(model, gpu, input_len=input_len, output_len=output_len,
                        concurrency=concurrency, tp=tp, max_model_len=max_model_len,
                        catalog=cat, gpu_memory_gib_override=gpu_memory_gib,
                        vllm_version=vllm_version, kv_cache_dtype=kv_cache_dtype)
    if json:
        out.emit_json({**est.model_dump(), "fit": fit.model_dump()})
        return
    out.pairs(f"{model} on {tp} x {cat.gpu(gpu).id}, {input_len} in / {output_len} out, "
              f"{est.concurrency} concurrent", [
                  ("TTFT", out.ms(est.ttft_ms) + " ms"), ("TPOT", out.ms(est.tpot_ms) + " ms"),
                  ("output tokens/s", out.num(est.output_tokens_per_s)),
                  ("requests/s", out.num(est.requests_per_s, 2)),
                  ("decode is", f"{est.decode_bound}-bound"),
                  ("KV cache", f"{fit.kv_cache_tokens:,} tokens ({fit.max_concurrency:.1f}x "
                               f"{fit.max_model_len})")])
    for n in est.notes:
        out.line(f"- {n}")


#: recommend's columns; at a narrow terminal the highest number is hidden first, and the
#: objective's own figure never is
_COLUMNS = ("instance", "region", "$/h", "GPUs", "layout", "conc", "tok/s", "TPOT ms", "$/1M",
            "NUMA")
_HIDE = {"cost": {"TPOT ms": 9, "region": 8, "conc": 7, "NUMA": 6},
         "latency": {"region": 8, "conc": 7, "NUMA": 6, "$/1M": 5, "tok/s": 4},
         "throughput": {"TPOT ms": 9, "region": 8, "conc": 7, "NUMA": 6, "$/1M": 5}}
_NUMERIC = {"$/h", "conc", "tok/s", "TPOT ms", "$/1M"}
_NUMA = {"aligned": "aligned", "spans-nodes": "spans", "unknown": "?"}


def _columns(objective: str) -> list[out.Col]:
    hide = _HIDE.get(objective, _HIDE["cost"])
    return [out.Col(c, num=c in _NUMERIC, drop=hide.get(c, 0)) for c in _COLUMNS]


def _row(r: Any) -> list[str]:
    p = r.plan
    layout = (f"{p.nodes}n TP{p.tp} PP{p.pp}" if p.nodes > 1 else
              f"{p.replicas}x TP{p.tp}" + (f" PP{p.pp}" if p.pp > 1 else ""))
    return [f"{r.provider}:{r.instance}", out.fmt(r.region), out.usd(r.usd_per_hour * p.nodes),
            f"{r.gpu_count}x {r.gpu}" if p.nodes == 1 else f"{p.nodes}x{r.gpu_count} {r.gpu}",
            layout, out.num(r.fit.max_concurrency, 1), out.num(r.instance_output_tokens_per_s),
            out.ms(r.perf.tpot_ms), out.usd(r.usd_per_million_output_tokens),
            _NUMA.get(r.numa.alignment, r.numa.alignment)]


def ranking_note(objective: str, concurrency: int | None, spot: bool) -> str:
    """The footer: what the order means, in the objective's own terms."""
    key, best = {"latency": ("TPOT (ms per output token), lowest first", "its fastest"),
                 "throughput": ("output tok/s per instance, highest first", "its best")}.get(
        objective, ("$/1M output tokens, lowest first", "its cheapest"))
    at = f"{concurrency} sequences per instance" if concurrency else f"{best} concurrency"
    return (f"ranked by {key}, each at {at}; host risks (NUMA, memory bandwidth, CPU age) add "
            "1-10%" + ("; spot prices" if spot else ""))


def recommend_cmd(
    model: Model,
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.")],
    input_len: Annotated[int | None, typer.Option(
        help="Prompt tokens per request (default min(1024, ctx/2)).")] = None,
    output_len: Annotated[int | None, typer.Option(
        help="Generated tokens per request (default min(256, ctx - input)).")] = None,
    concurrency: Annotated[int | None, typer.Option(
        help="Target sequences per instance (default: as many as fit).")] = None,
    objective: Annotated[str, typer.Option(help="cost, latency or throughput.")] = "cost",
    provider: ProviderFilter = None,
    region: RegionFilter = None,
    gpu: GpuFilter = None,
    max_usd_per_hour: Annotated[float | None, typer.Option(help="Price ceiling, $/h.")] = None,
    max_tpot_ms: Annotated[float | None, typer.Option(help="Latency limit per output token.")]
    = None,
    max_ttft_ms: Annotated[float | None, typer.Option(help="Time-to-first-token limit.")] = None,
    spot: Annotated[bool, typer.Option(help="Rank by spot prices.")] = False,
    kv_cache_dtype: Annotated[str, typer.Option(help="auto or fp8.")] = "auto",
    max_nodes: Annotated[int, typer.Option(
        help="Most instances one replica may span (PP across them); 1: one machine.")] = 4,
    top: Annotated[int, typer.Option(help="How many picks to show.")] = 5,
    show_rejected: Annotated[bool, typer.Option(help="List excluded instances and why.")]
    = False,
    vllm_version: Version = DEFAULT_VLLM_VERSION,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Rank instances for a model and context: layout, throughput, $ per million tokens."""
    from advisor.api import default_lengths, recommend

    cat = catalog_from(catalog)
    recs, rejected = recommend(
        model, ctx, input_len=input_len, output_len=output_len, concurrency=concurrency,
        objective=objective, providers=provider, regions=region, gpus=gpu,
        max_usd_per_hour=max_usd_per_hour, max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms,
        spot=spot, kv_cache_dtype=kv_cache_dtype, vllm_version=vllm_version, catalog=cat,
        with_rejected=True, max_nodes=max_nodes)
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
    out.table(_columns(objective), (_row(r) for r in picks),
              title=f"{model}, ctx {ctx}, {i} in / {o} out, objective {objective}",
              caption=f"{len(recs)} of {len(recs) + len(rejected)} instance types can serve it; "
                      + ranking_note(objective, concurrency, spot)
                      + ("; Nn: one replica over N instances" if any(
                          r.plan.nodes > 1 for r in picks) else ""))
    best = picks[0]
    out.line(f"Why {best.provider}:{best.instance}:")
    for reason in best.reasons:
        out.line(f"  + {reason}")
    for risk in best.risks:
        out.line(f"  ! {risk}")
    if show_rejected:
        _rejected_table(rejected)


def _rejected_table(rejected: list[Any]) -> None:
    out.table(["instance", out.Col("why not", wrap=True)],
              ([f"{r.provider}:{r.instance}", r.reason] for r in rejected), title="rejected")


def _json(r: Any) -> dict[str, Any]:
    d = r.model_dump()
    d["plan"]["replica_layout"] = d["plan"].pop("replica_layout")
    return d
