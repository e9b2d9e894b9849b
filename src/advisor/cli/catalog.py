"""``advisor catalog list|show|validate|refresh``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from advisor.cli import output as out
from advisor.cli.catalog_topology import topology_cmd
from advisor.cli.common import CatalogDirs, JsonFlag, catalog_from, with_cloud_options
from advisor.clouds.registry import CLOUDS, EXAMPLE_INSTANCE

app = typer.Typer(help="Browse and check the instance catalog.", no_args_is_help=True)


#: catalog list --sort keys
SORTS = ("name", "price", "gpu-memory")


@app.command("list")
def list_(
    provider: Annotated[list[str] | None, typer.Option(
        help="Only this provider (repeatable): " + ", ".join(CLOUDS) + " or a private "
        "catalog's.")] = None,
    gpu: Annotated[str | None, typer.Option(
        help="Only instances with this GPU (id, alias or family).")] = None,
    region: Annotated[str | None, typer.Option(
        help="Prices of this region; types not sold or not priced there are left out.")]
    = None,
    sort: Annotated[str, typer.Option(
        help="name (provider, then type), price (cheapest first, unpriced last) or "
        "gpu-memory (most first).")] = "name",
    spot: Annotated[bool, typer.Option(
        help="Spot prices (only where a dated source states one).")] = False,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """List instance types, with GPUs, CPU family, NUMA layout and price (with its date)."""
    from advisor.api import check_regions
    from advisor.errors import UserInputError

    if sort not in SORTS:
        raise UserInputError(f"--sort {sort[:40]!r} is not a sort key",
                             hint="use " + ", ".join(SORTS))
    cat = catalog_from(catalog)
    if region is not None:
        check_regions(cat, [region], sorted(set(provider)) if provider else [])
    # filter() sorts by provider first, so the providers in order give the sorted union
    rows = ([i for p in sorted(set(provider)) for i in cat.filter(provider=p, gpu=gpu)]
            if provider else cat.filter(gpu=gpu))
    listed = [(i, i.price_in([region] if region else None, spot)) for i in rows]
    left = len([1 for _, p in listed if p is None]) if region else 0
    if region:
        listed = [(i, p) for i, p in listed if p is not None]
    if sort == "price":
        listed.sort(key=lambda ip: (ip[1] is None, ip[1].usd(spot) if ip[1] else 0.0,
                                    ip[0].key))
    elif sort == "gpu-memory":
        def memory(i: Any) -> float:
            g = cat.gpus.get(i.gpu.model)
            return -(g.memory_gib * i.gpu.count) if g else 0.0
        listed.sort(key=lambda ip: (memory(ip[0]), ip[0].key))
    if json:
        out.emit_json([{**cat.describe(i), "listed_price": p.model_dump(mode="json")
                        if p else None} for i, p in listed])
        return

    def numa(v: dict[str, Any]) -> str:
        n = v["numa"]
        if n["nodes"] is None:
            return "?"
        return f"{n['nodes']}" + ("" if n["known"] else "?")

    retired = sum(1 for i, _ in listed if i.retired())
    # at a narrow terminal the highest drop is hidden first
    out.table(
        [out.Col("instance"), out.Col("GPUs"), out.Col("vCPU", num=True, drop=6),
         out.Col("GiB", num=True, drop=7), out.Col("CPU", drop=9), out.Col("gen", drop=8),
         out.Col("NUMA", drop=5), out.Col("spot $/h" if spot else "$/h", num=True),
         out.Col("as of", drop=4)],
        (
            [
                f"{v['provider']}:{v['name']}" + (" (retired)" if i.retired() else ""),
                f"{v['gpu']['count']}x {v['gpu']['model']}",
                v["vcpus"],
                out.fmt(v["memory_gib"]),
                out.fmt(v["cpu"]["model"]),
                out.fmt(v["cpu"]["codename"]),
                numa(v),
                out.usd(p.usd(spot) if p else None),
                out.fmt(p.as_of.isoformat() if p and p.as_of else None),
            ]
            for i, p in listed for v in [cat.describe(i)]
        ),
        caption=f"{len(listed)} instance types"
                + (f" priced in {region} ({left} more are not)" if region else "")
                + "; '?'/'—' = not stated by any public source; NUMA: nodes, '?' after it: GPU "
                "placement unknown; "
                + ("spot" if spot else "on-demand") + " $/h "
                + (f"in {region}" if region else "in the region `catalog show` names")
                + ", 'as of' the price source's own date"
                + (f"; {retired} retired type(s) are kept for reference and never ranked"
                   if retired else ""),
    )


@app.command("show")
def show(
    instance: Annotated[str, typer.Argument(
        help="PROVIDER:TYPE, e.g. " + EXAMPLE_INSTANCE + ".")],
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Show one instance type with every fact and its source."""
    cat = catalog_from(catalog)
    inst = cat.instance(instance)
    view = cat.describe(inst)
    if json:
        out.emit_json(view)
        return
    g, c, n, p = view["gpu"], view["cpu"], view["numa"], view["price"]
    out.pairs(inst.key, [
        ("family", out.fmt(view["family"])),
        ("vCPUs", view["vcpus"]),
        ("memory", out.fmt(view["memory_gib"], " GiB")),
        ("GPUs", f"{g['count']} x {g['name'] or g['model']} ({out.fmt(g['memory_gib'], ' GiB')})"),
        ("CPU", f"{c['model'] or 'model not stated'} — {out.fmt(c['family'])}, "
                f"{out.fmt(c['sockets'])} socket(s)"),
        ("memory bandwidth", out.fmt(c["memory_bandwidth_gb_s_per_socket"], " GB/s per socket")),
        ("NUMA nodes", out.fmt(n["nodes"])),
        ("GPU NUMA nodes", out.fmt(n["gpu_nodes"])),
        ("PCIe", out.fmt(view["pcie_gen"] and f"Gen{view['pcie_gen']}")),
        ("network", out.fmt(view["network_gbps"], " Gbps")),
        ("fabric", _fabric(view["fabric"])),
        ("PCIe switches", _switches(view["host"].get("pcie_switches"))),
        ("on-demand", out.fmt(p["on_demand_usd_per_hour"], " $/h")
            + f" ({out.fmt(p['region'])}, {out.fmt(p['as_of'])})"),
        ("spot", out.fmt(p["spot_usd_per_hour"], " $/h")),
        ("regions", ", ".join(view["regions"]) or "—"),
        *([("retired", f"{view['retired']} — kept for reference, never ranked, rendered or "
                       "provisioned")] if view["retired"] else
          [("available until", view["available_until"])] if view["available_until"] else []),
    ])
    if view["prices"]:
        out.line()
        out.table(["region", out.Col("on-demand $/h", num=True),
                   out.Col("spot $/h", num=True), "as of"],
                  ([r, out.fmt(q["on_demand_usd_per_hour"]), out.fmt(q["spot_usd_per_hour"]),
                    out.fmt(q["as_of"])] for r, q in sorted(view["prices"].items())),
                  title="prices per region (dates are the price sources' own)")
    if view["conflicts"]:
        out.line()
        out.table(["fact", "here", "other source says", out.Col("other source", wrap=True),
                   "as of", out.Col("why this value is kept", wrap=True)],
                  ([c["fact"], str(inst.fact(c["fact"])), str(c["other"]), c["source"]["source"],
                    c["source"]["as_of"], c["why"]] for c in view["conflicts"]),
                  title="sources that disagree")
    out.line()
    out.table(["fact", out.Col("source", wrap=True), "as of", "confidence",
               out.Col("note", wrap=True)],
              ([k, s["source"], s["as_of"], s["confidence"], s.get("note") or ""]
               for k, s in view["sources"].items()),
              title="sources")


def _fabric(fabric: dict[str, object] | None) -> str:
    if not fabric:
        return "not stated"
    gbps = fabric.get("gbps")
    return f"{fabric['kind']}" + (f", {out.fmt(gbps, ' Gbps')}" if gbps else "")


def _switches(switches: list[dict[str, object]] | None) -> str:
    if not switches:
        return "not stated"
    return "; ".join(f"GPUs {sw.get('gpus')}" + (f" + NICs {sw.get('nics')}" if sw.get("nics")
                                                 else "") for sw in switches)


@app.command("validate")
def validate_cmd(
    directory: Annotated[Path | None, typer.Argument(
        help="A catalog directory to check on top of the bundled one; default: the bundled one.",
        show_default=False)] = None,
    json: JsonFlag = False,
) -> None:
    """Check a catalog and report every problem with file, entry and field."""
    from advisor.catalog.loader import validate

    problems = validate(directory)
    if json:
        out.emit_json({"ok": not problems, "problems": [p.as_dict() for p in problems]})
    elif problems:
        for p in problems:
            out.line(str(p))
        out.line(f"{len(problems)} problem(s)")
    else:
        cat = catalog_from([directory] if directory else None)
        counts = cat.numa_counts()
        out.line(f"ok: {len(cat.instances)} instance types, {len(cat.gpus)} GPUs, "
                 f"{len(cat.cpus)} CPUs, {len(cat.models)} models; GPU NUMA nodes known for "
                 f"{counts['gpu_nodes_known']} of "
                 f"{counts['gpu_nodes_known'] + counts['gpu_nodes_null']} GPUs")
    if problems:
        raise typer.Exit(2)


@app.command("refresh")
@with_cloud_options("refresh")
def refresh_cmd(
    provider: Annotated[str, typer.Option(help="The cloud: " + ", ".join(CLOUDS) + ".")],
    region: Annotated[list[str] | None, typer.Option(
        help="Region to ask about (repeatable); default: the regions the catalog prices in.")]
    = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="Catalog folder to write instances/PROVIDER.yaml into (default: the "
        "repository's catalogs/ when running from a checkout).", file_okay=False)] = None,
    dry_run: Annotated[bool, typer.Option(help="Report what would change; write nothing.")]
    = False,
    cloud_options: dict[str, dict[str, str]] | None = None,
    json: JsonFlag = False,
) -> None:
    """Update prices, regions and sizes from the cloud's own APIs; curated facts are kept."""
    from advisor.catalog.loader import bundled_dir
    from advisor.catalog.schema import REGION
    from advisor.clouds.refresh import refresh
    from advisor.clouds.registry import get, info
    from advisor.errors import UserInputError

    info(provider)  # NotFoundError naming the clouds
    for r in region or []:
        if not REGION.match(r):
            raise UserInputError(f"--region {r!r} is not a region name")
    if out_dir is None and not dry_run:
        bundled = bundled_dir()
        if "_data" in bundled.parts:
            raise UserInputError("the bundled catalog is inside the installed package",
                                 hint="pass --out DIR, then use it with --catalog DIR")
    opts = (cloud_options or {}).get(provider, {})
    report = refresh(provider, get(provider, **opts), regions=region, out=out_dir,
                     dry_run=dry_run)
    if json:
        out.emit_json(report.model_dump())
        return
    out.line(f"{provider}: {len(report.added)} new, {len(report.updated)} change(s), "
             f"{len(report.flagged)} flagged, {len(report.unlisted)} not listed by the API, "
             f"{len(report.skipped)} skipped; regions {', '.join(report.regions)}"
             + (" (dry run: nothing written)" if dry_run else f"; wrote {report.written}"))
    for name in report.added:
        out.line(f"  + {name} (curated fields empty)")
    for c in report.updated:
        out.line(f"  ~ {c.instance} {c.field}: {out.fmt(c.old)} -> {out.fmt(c.new)}")
    for f in report.flagged:
        out.line(f"  ! {f.instance} {f.field}: curated {f.curated!r}, API {f.api!r} — {f.note}")
    for name in report.unlisted:
        out.line(f"  ? {name} not listed by the API in these regions (kept)")
    for s in report.skipped:
        out.line(f"  - {s}")


app.command("topology")(topology_cmd)
