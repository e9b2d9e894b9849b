"""``advisor plan``: the fleet that carries a request rate within latency limits."""

from __future__ import annotations

from typing import Annotated

import typer

from advisor.cli import output as out
from advisor.cli.common import (
    CatalogDirs,
    GpuFilter,
    JsonFlag,
    ProviderFilter,
    RegionFilter,
    catalog_from,
)
from advisor.core.engine import DEFAULT_VLLM_VERSION


def plan_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="A model alias or config.json.")],
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.",
                                     min=1)],
    rps: Annotated[float, typer.Option(help="Requests per second the fleet must carry.")],
    input_len: Annotated[int | None, typer.Option(
        help="Prompt tokens per request (default min(1024, ctx/2)).", min=1)] = None,
    output_len: Annotated[int | None, typer.Option(
        help="Generated tokens per request (default min(256, ctx - input)).", min=1)] = None,
    max_tpot_ms: Annotated[float | None, typer.Option(help="Latency limit per output token.")]
    = None,
    max_ttft_ms: Annotated[float | None, typer.Option(help="Time-to-first-token limit.")] = None,
    max_instances: Annotated[int, typer.Option(help="The largest fleet to consider.", min=1)]
    = 64,
    provider: ProviderFilter = None,
    region: RegionFilter = None,
    gpu: GpuFilter = None,
    spot: Annotated[bool, typer.Option(help="Price with spot prices.")] = False,
    max_nodes: Annotated[int, typer.Option(
        help="Most instances one replica may span (PP across them).", min=1, max=64)] = 4,
    top: Annotated[int, typer.Option(help="How many fleets to show.", min=1)] = 5,
    vllm_version: Annotated[str, typer.Option(help="The vLLM release to model.")]
    = DEFAULT_VLLM_VERSION,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Size the fleet: replicas, instances, monthly cost and headroom for a request rate."""
    from advisor.api import default_lengths, fleet

    options = fleet(model, ctx, rps=rps, input_len=input_len, output_len=output_len,
                    max_instances=max_instances, max_tpot_ms=max_tpot_ms,
                    max_ttft_ms=max_ttft_ms, providers=provider, regions=region, gpus=gpu,
                    spot=spot, vllm_version=vllm_version, catalog=catalog_from(catalog),
                    max_nodes=max_nodes)
    picks = options[:top]
    if json:
        out.emit_json([o.model_dump() for o in picks])
        return
    i, o = default_lengths(ctx, input_len, output_len)
    out.table(["instance", "region", "layout", "req/s each", "instances", "$/month", "headroom",
               "TPOT", "TTFT", "NUMA"],
              ([f"{p.provider}:{p.instance}", out.fmt(p.region), _layout(p),
                f"{p.rps_per_replica:.2f}/replica", str(p.instances),
                f"{p.usd_per_month:,.0f}", f"{p.headroom:+.0%}", out.fmt(p.tpot_ms, " ms"),
                out.fmt(p.ttft_ms, " ms"), p.numa] for p in picks),
              title=f"{model}, ctx {ctx}, {i} in / {o} out, {rps:g} req/s",
              caption=f"{len(options)} fleets of at most {max_instances} instances; 730 h/month")


def _layout(p: object) -> str:
    plan = p.plan  # type: ignore[attr-defined]
    if plan.nodes > 1:
        return f"TP{plan.tp} x PP{plan.pp} over {plan.nodes} nodes"
    return f"{plan.replicas}x TP{plan.tp}" + (f" PP{plan.pp}" if plan.pp > 1 else "")
