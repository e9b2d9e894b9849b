"""``advisor plan``: the fleet that carries a request rate within latency limits."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer

from advisor.choices import KvCacheDtype
from advisor.cli import output as out
from advisor.cli.common import (
    KV_CHOICES,
    AllowSmallHost,
    Batch,
    CatalogDirs,
    ExpertParallel,
    GpuFilter,
    JsonFlag,
    MaxTpot,
    MaxTtft,
    ProviderFilter,
    Quantization,
    RegionFilter,
    Spare,
    Utilisation,
    catalog_from,
    layout_label,
    sizing_note,
)
from advisor.core.defaults import DEFAULT_VLLM_VERSION
from advisor.errors import UserInputError

#: plan --rps-range's defaults (advisor.core.load has them; kept here so --help loads no core)
DEFAULT_CURVE_POINTS = 16
MAX_CURVE_POINTS = 200


def plan_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="A model alias or config.json.")],
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.",
                                     min=1)],
    rps: Annotated[float | None, typer.Option(
        help="Requests per second the fleet must carry (or --rps-range).")] = None,
    rps_range: Annotated[str | None, typer.Option(
        "--rps-range", metavar="A:B", show_default=False,
        help="Instead of --rps: the cheapest fleet at --points loads from A to B req/s, "
        "log-spaced, both ends included, and where the cheapest offer changes.")] = None,
    points: Annotated[int | None, typer.Option(
        help=f"With --rps-range: how many loads (default {DEFAULT_CURVE_POINTS}, "
        f"2-{MAX_CURVE_POINTS}).", show_default=False)] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", metavar="FILE", show_default=False,
        help="With --rps-range: draw the monthly cost against the load into FILE (.svg or "
        ".png; needs matplotlib: pip install 'advisor[plot]').")] = None,
    input_len: Annotated[int | None, typer.Option(
        help="Prompt tokens per request (default min(1024, ctx/2)).", min=1)] = None,
    output_len: Annotated[int | None, typer.Option(
        help="Generated tokens per request (default min(256, ctx - input)).", min=1)] = None,
    max_tpot_ms: MaxTpot = None,
    max_ttft_ms: MaxTtft = None,
    batch: Batch = False,
    allow_small_host: AllowSmallHost = False,
    quantization: Quantization = None,
    expert_parallel: ExpertParallel = None,
    kv_cache_dtype: Annotated[str, typer.Option(
        help=f"vLLM's --kv-cache-dtype: {KV_CHOICES}.")] = "auto",
    cpu_offload_gb: Annotated[float, typer.Option(
        help="vLLM's --cpu-offload-gb: GiB of weights per GPU kept in host memory.")] = 0.0,
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
    """Size the fleet: replicas, instances, monthly cost and headroom for a request rate, or
    the cheapest fleet across a range of rates (--rps-range A:B [--plot FILE])."""
    from advisor.api import default_lengths, fleet

    if (rps is None) == (rps_range is None):
        raise UserInputError(
            "give the load as --rps or as --rps-range, not both" if rps_range is not None
            else "plan needs a load: --rps R or --rps-range A:B",
            hint="--rps 5: the fleets for one rate; --rps-range 0.5:40: the cheapest across a "
            "range")
    if rps_range is not None:
        curve_cmd(model, ctx, rps_range, points, plot, json, max_instances=max_instances,
                  input_len=input_len, output_len=output_len, max_tpot_ms=max_tpot_ms,
                  max_ttft_ms=max_ttft_ms, providers=provider, regions=region, gpus=gpu,
                  spot=spot, vllm_version=vllm_version, catalog=catalog_from(catalog),
                  max_nodes=max_nodes, batch=batch, allow_small_host=allow_small_host,
                  utilisation=utilisation, spare=spare, quantization=quantization,
                  expert_parallel=expert_parallel,
                  kv_cache_dtype=cast(KvCacheDtype, kv_cache_dtype), cpu_offload_gb=cpu_offload_gb)
        return
    given = [f for f, v in (("--points", points), ("--plot", plot)) if v is not None]
    if given:
        raise UserInputError(f"{given[0]} goes with --rps-range, not --rps",
                             hint=f"e.g. --rps-range 0.5:40 {given[0]} "
                             + ("16" if given[0] == "--points" else "curve.svg"))
    assert rps is not None
    options = fleet(model, ctx, rps=rps, input_len=input_len, output_len=output_len,
                    max_instances=max_instances, max_tpot_ms=max_tpot_ms,
                    max_ttft_ms=max_ttft_ms, providers=provider, regions=region, gpus=gpu,
                    spot=spot, vllm_version=vllm_version, catalog=catalog_from(catalog),
                    max_nodes=max_nodes, batch=batch, allow_small_host=allow_small_host,
                    utilisation=utilisation, spare=spare, quantization=quantization,
                    expert_parallel=expert_parallel,
                    kv_cache_dtype=cast(KvCacheDtype, kv_cache_dtype),
                    cpu_offload_gb=cpu_offload_gb)
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
              ([f"{p.provider}:{p.instance}", out.fmt(p.region),
                layout_label(p.plan)
                + (f" {p.weights.short}" if p.weights and quantization else ""),
                out.num(p.rps_per_replica, 2), str(p.instances), out.num(p.usd_per_month),
                f"{p.headroom:+.0%}", out.ms(p.tpot_ms), out.ms(p.ttft_ms),
                {"spans-nodes": "spans", "unknown": "?"}.get(p.numa, p.numa)] for p in picks),
              title=f"{model}, ctx {ctx}, {i} in / {o} out, {rps:g} req/s",
              caption=f"{len(options)} fleets of at most {max_instances} instances, cheapest "
              "first; rps/rep: req/s one replica carries; inst: instances; spare: capacity "
              "over the rate; 730 h/month; " + sizing_note(utilisation, spare)
              + ("; Nn: one replica over N instances" if any(
                  p.plan.nodes > 1 for p in picks) else ""))
    model_risk(model, vllm_version, catalog_from(catalog))


def model_risk(model: str, vllm_version: str, catalog: Any) -> None:
    """The risk every fleet shares, said once under the table: the deployed vLLM cannot load
    the model, or loads it through its Transformers backend (advisor.core.archs)."""
    from advisor.api import model_spec
    from advisor.core.archs import model_risk as risk

    spec = model_spec(model, catalog=catalog)
    if line := risk(spec.architectures, vllm_version, spec.config_model_type):
        out.line(f"! {line}")


def _range(text: str) -> tuple[float, float]:
    """``A:B`` as two numbers (their ranges are the SDK's to check)."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError(text)
        return float(parts[0]), float(parts[1])
    except ValueError:
        raise UserInputError(f"--rps-range {text[:40]!r} is not A:B",
                             hint="e.g. --rps-range 0.5:40 (requests/s, from:to)") from None


def curve_cmd(model: str, ctx: int, rps_range: str, points: int | None, plot: Path | None,
              json: bool, **fleet_args: Any) -> None:
    """``plan --rps-range A:B``: the table (or --json) of the cheapest fleet at each load, and
    the chart with --plot (matplotlib is imported on that path only)."""
    from advisor.api import fleet_curve

    rps_from, rps_to = _range(rps_range)
    if plot is not None:
        from advisor.render.chart import check_plot

        check_plot(plot)  # before the work: format, matplotlib, a writable destination
    curve = fleet_curve(model, ctx, rps_from=rps_from, rps_to=rps_to,
                        points=DEFAULT_CURVE_POINTS if points is None else points, **fleet_args)
    if plot is not None:
        from advisor.render.chart import write_chart

        write_chart(curve, plot)
    if json:
        out.emit_json(curve.model_dump())
        return
    cols = [out.Col("req/s", num=True), out.Col("cheapest"), out.Col("inst", num=True),
            out.Col("$/month", num=True), out.Col("next best", drop=2),
            out.Col("next $/month", num=True, drop=1)]
    out.table(cols,
              ([f"{p.rps:.4g}", p.cheapest.option, str(p.cheapest.instances),
                out.num(p.cheapest.usd_per_month),
                p.next_best.option if p.next_best else "—",
                out.num(p.next_best.usd_per_month) if p.next_best else "—"]
               for p in curve.points),
              title=f"{model}, ctx {ctx}, {curve.input_len} in / {curve.output_len} out, "
              f"{rps_from:g} to {rps_to:g} req/s",
              caption=f"the cheapest fleet of at most {curve.max_instances} instances at "
              f"{len(curve.points)} loads spaced evenly on a log scale (plan --rps X lists "
              f"each); targets: {curve.targets.source}; {curve.price_kind} prices as of "
              f"{', '.join(curve.price_dates) or '—'}; 730 h/month; "
              + sizing_note(curve.utilisation, curve.spare))
    for x in (c for c in curve.crossovers if c.pick_changes):
        out.line(f"Above {x.rps:.3g} req/s, {x.option} is the cheaper fleet: "
                 f"${x.usd_per_month:,.0f}/month against ${x.versus_usd_per_month:,.0f} for "
                 f"{x.versus}")
    model_risk(model, fleet_args["vllm_version"], fleet_args["catalog"])
    if plot is not None:
        out.line(f"Chart: {plot}")
