"""``advisor plan``: the fleet that carries a request rate within latency limits."""

from __future__ import annotations

from typing import Annotated

import typer

from advisor.cli import output as out
from advisor.cli.common import (
    AllowSmallHost,
    Batch,
    CatalogDirs,
    GpuFilter,
    JsonFlag,
    MaxTpot,
    MaxTtft,
    ProviderFilter,
    RegionFilter,
    Spare,
    Utilisation,
    catalog_from,
    sizing_note,
)
from advisor.core.defaults import DEFAULT_VLLM_VERSION


def plan_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="A model alias or config.json.")],
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.",
                                     min=1)],
    rps: Annotated[float, typer.Option(help="Requests per second the fleet must carry.")],
    input_len: Annotated[int | None, typer.Option(
        help="Prompt tokens per request (default min(1024, ctx/2)).", min=1)] = None,
    output_len: Annotated[int | None, typer.Option(
        help="Generated tokens per request (default min(256, ctx - input)).", min=1)] = None,
    max_tpot_ms: MaxTpot = None,
    max_ttft_ms: MaxTtft = None,
    batch: Batch = False,
    allow_small_host: AllowSmallHost = False,
    max_instances: Annotated[int, typer.Option(help="The largest fleet to consider.", min=1)]
    = 64,
    utilisation: Utilisation = 1.0,
    spare: Spare = 0,
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
                    max_nodes=max_nodes, batch=batch, allow_small_host=allow_small_host,
                    utilisation=utilisation, spare=spare)
    picks = options[:top]
    if json:
        out.emit_json([o.model_dump() for o in picks])
        return
    i, o = default_lengths(ctx, input_len, output_len)
    # at a narrow terminal the highest drop is hidden first; $/month, the order, never is
    cols = [out.Col("instance"), out.Col("region", drop=9), out.Col("layout", drop=3),
            out.Col("rps/rep", num=True, drop=6), out.Col("inst", num=True),
            out.Col("$/month", num=True), out.Col("spare", num=True, drop=2),
            out.Col("TPOT ms", num=True, drop=5), out.Col("TTFT ms", num=True, drop=7),
            out.Col("NUMA", drop=8)]
    out.table(cols,
              ([f"{p.provider}:{p.instance}", out.fmt(p.region), _layout(p),
                out.num(p.rps_per_replica, 2), str(p.instances), out.num(p.usd_per_month),
                f"{p.headroom:+.0%}", out.ms(p.tpot_ms), out.ms(p.ttft_ms),
                {"spans-nodes": "spans", "unknown": "?"}.get(p.numa, p.numa)] for p in picks),
              title=f"{model}, ctx {ctx}, {i} in / {o} out, {rps:g} req/s",
              caption=f"{len(options)} fleets of at most {max_instances} instances, cheapest "
              "first; rps/rep: req/s one replica carries; inst: instances; spare: capacity "
              "over the rate; 730 h/month; " + sizing_note(utilisation, spare)
              + ("; Nn: one replica over N instances" if any(
                  p.plan.nodes > 1 for p in picks) else ""))


def _layout(p: object) -> str:
    plan = p.plan  # type: ignore[attr-defined]
    if plan.nodes > 1:
        return f"{plan.nodes}n TP{plan.tp} PP{plan.pp}"
    return f"{plan.replicas}x TP{plan.tp}" + (f" PP{plan.pp}" if plan.pp > 1 else "")
