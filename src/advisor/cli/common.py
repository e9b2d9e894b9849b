"""Options shared by several commands."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from advisor.choices import KvCacheDtype, Objective, choices

#: the help of the enum-like options, from their one declaration
KV_CHOICES = choices(KvCacheDtype)
OBJECTIVE_CHOICES = choices(Objective)

if TYPE_CHECKING:  # the catalog (pydantic, yaml) loads when a command runs, not for --help
    from advisor.catalog import Catalog

CatalogDirs = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog",
        help="A catalog directory to add on top of the bundled one (repeatable); "
        "default: $ADVISOR_CATALOG_DIR.",
        file_okay=False,
        show_default=False,
    ),
]

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

#: the ranking's filters, shared by recommend and plan
ProviderFilter = Annotated[list[str] | None, typer.Option(
    "--provider", help="Only this provider (repeatable).")]
RegionFilter = Annotated[list[str] | None, typer.Option(
    "--region", help="Only this region (repeatable).")]
GpuFilter = Annotated[list[str] | None, typer.Option(
    "--gpu", help="Only this GPU or family (repeatable); local: this host's GPU, from its "
    "probe.")]

#: --gpu local: where this host's GPUs are read (fit, perf, recommend)
ProbeFile = Annotated[Path | None, typer.Option(
    "--probe", help="With --gpu local: a saved 'advisor topology --json' instead of probing "
    "this host.", dir_okay=False, show_default=False)]
SysfsRoot = Annotated[Path | None, typer.Option(
    "--sysfs-root", help="With --gpu local: the sysfs tree to probe (default /).",
    show_default=False)]

#: the question's inputs, shared by recommend, plan, render and provision (issue 15: provision
#: launches what recommend puts first for the same inputs)
MaxTpot = Annotated[float | None, typer.Option(
    help="TPOT target, p50 (default 50 ms; none with --batch).")]
MaxTtft = Annotated[float | None, typer.Option(
    help="TTFT target, p50 (default 2000 ms; none with --batch).")]
Batch = Annotated[bool, typer.Option(
    help="Offline work: no latency targets; rank by $/1M tokens at saturation.")]
AllowSmallHost = Annotated[bool, typer.Option(
    help="Keep instances below vLLM's CPU floor (2 + N cores for N GPUs), as a risk.")]


def catalog_from(dirs: list[Path] | None) -> Catalog:
    from advisor.catalog.loader import load

    return load(dirs or None)


def with_cloud_options(command: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Adds every provider option the registry's clouds offer for ``command`` (``--project``,
    ``--resource-group``, …) to a command, and hands the command ``cloud_options``:
    ``{cloud: {constructor keyword: value}}``, each value checked against its cloud's pattern.

    The options are declared by each cloud's ``options.py``; no command lists them, so a new
    cloud's options appear on its own."""
    from advisor.clouds.registry import options

    def deco(func: Callable[..., None]) -> Callable[..., None]:
        sig = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)
        own = [p.replace(annotation=hints.get(p.name, p.annotation))
               for p in sig.parameters.values() if p.name != "cloud_options"]
        by_flag: dict[str, list[str]] = {}
        for _cloud, opt in options(command):
            by_flag.setdefault(opt.flag, []).append(opt.help)
        extra = {flag: "_cloud_" + flag.lstrip("-").replace("-", "_") for flag in by_flag}
        params = own + [inspect.Parameter(
            extra[flag], inspect.Parameter.KEYWORD_ONLY, default=None,
            annotation=Annotated[str | None, typer.Option(flag, help="; ".join(helps) + ".",
                                                          show_default=False)])
            for flag, helps in by_flag.items()]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            from advisor.clouds.registry import provider_options

            values = {flag: kwargs.pop(param) for flag, param in extra.items()}
            func(*args, cloud_options=provider_options(values), **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return deco


def local_gpu(cat: Catalog, probe: Path | None, sysfs_root: Path | None) -> str:
    """``--gpu local``: the catalog GPU of this host (or of the saved ``--probe``), told by its
    PCI device ids; a note on stderr says how."""
    from advisor.api import local_gpu as identify
    from advisor.cli import output as out

    gid, told = identify(probe=probe, sysfs_root=sysfs_root, catalog=cat)
    out.progress(f"note: --gpu local is {gid}: {told}")
    return gid


def _only_with_local(probe: Path | None, sysfs_root: Path | None) -> None:
    if probe is not None or sysfs_root is not None:
        from advisor.errors import UserInputError

        flag = "--probe" if probe is not None else "--sysfs-root"
        raise UserInputError(f"{flag} goes with --gpu local (this host's GPU)",
                             hint=f"add --gpu local, or drop {flag}")


def local_gpus(cat: Catalog, names: list[str] | None, probe: Path | None,
               sysfs_root: Path | None) -> list[str] | None:
    """``recommend --gpu``'s list with ``local`` told as this host's GPU."""
    if not names or "local" not in [n.lower() for n in names]:
        _only_with_local(probe, sysfs_root)
        return names
    gid = local_gpu(cat, probe, sysfs_root)
    return [gid if n.lower() == "local" else n for n in names]


def one_gpu(cat: Catalog, name: str, probe: Path | None = None,
            sysfs_root: Path | None = None) -> str:
    """The catalog GPU id for ``--gpu`` of ``fit`` and ``perf``: an id, an alias or, as in
    ``recommend``, a family (``H100``, ``A100-80GB``). A family of several GPUs stands for its
    most modest member — the least memory, then the least memory bandwidth — so the answer
    holds for every member; a note on stderr says which one and what else matched. ``local``
    is this host's GPU, from a live probe of ``sysfs_root`` or a saved ``probe``."""
    if name.lower() == "local":
        return local_gpu(cat, probe, sysfs_root)
    _only_with_local(probe, sysfs_root)
    ids = cat.match_gpu_ids(name)
    if not ids:
        return cat.gpu(name).id  # NotFoundError with the close names
    if len(ids) == 1:
        return ids[0]
    pick = min(ids, key=lambda g: (cat.gpus[g].memory_gib,
                                   cat.gpus[g].memory_bandwidth_gb_s or 0.0, g))
    from advisor.cli import output as out

    out.progress(f"note: --gpu {name} matches {', '.join(ids)}; using {pick}, the "
                 "smallest (name one to choose)")
    return pick


#: a fleet's headroom, shared by recommend (with a load) and plan
Utilisation = Annotated[float, typer.Option(
    help="Share of the in-target capacity used: $/1M is stated at it, and a fleet for a load "
    "loads each replica to at most this share (capacity >= load / U). Default 1: no headroom.")]
Quantization = Annotated[str | None, typer.Option(
    help="Weights to size: none (the checkpoint as published; the default), fp8 (a published "
    "fp8 checkpoint where the model catalog knows one, else vLLM's on-the-fly fp8) or auto "
    "(both, side by side).", show_default=False)]
#: render and provision: the KV cache dtype and offload they rank with and pass to the server
DeployKvCacheDtype = Annotated[str, typer.Option(
    "--kv-cache-dtype",
    help=f"vLLM's --kv-cache-dtype, passed to the server and sized for: {KV_CHOICES}.")]
DeployCpuOffload = Annotated[float, typer.Option(
    "--cpu-offload-gb",
    help="vLLM's --cpu-offload-gb (GiB of weights per GPU in host memory), passed to the "
    "server and sized for.")]
ExpertParallel = Annotated[bool | None, typer.Option(
    "--expert-parallel/--no-expert-parallel",
    help="vLLM's --enable-expert-parallel (whole experts per GPU): on for every MoE layout of "
    "TP > 1, or never; default: only where TP cannot split a MoE model's experts.",
    show_default=False)]
Spare = Annotated[int, typer.Option(
    help="Replicas a fleet keeps beyond the load, for failures (N + spare).", min=0, max=1000)]


def sizing_note(utilisation: float, spare: int) -> str:
    """How a fleet was sized, in the caption's words."""
    head = (f"sized to load each replica to at most {utilisation:.0%} of what it carries within "
            "the targets" if utilisation < 1 else "sized with no headroom (--utilisation 1)")
    return head + (f", plus {spare} spare replica(s)" if spare else "")


def layout_label(plan: Any) -> str:
    """A plan as recommend's and plan's tables show it: replicas x TP (EP, PP), or Nn for a
    replica over N instances."""
    ep = " EP" if plan.expert_parallel else ""
    if plan.nodes > 1:
        return f"{plan.nodes}n TP{plan.tp}{ep} PP{plan.pp}"
    return f"{plan.replicas}x TP{plan.tp}{ep}" + (f" PP{plan.pp}" if plan.pp > 1 else "")
