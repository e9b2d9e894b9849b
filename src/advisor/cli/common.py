"""Options shared by several commands."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
    "--gpu", help="Only this GPU or family (repeatable).")]

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


def one_gpu(cat: Catalog, name: str) -> str:
    """The catalog GPU id for ``--gpu`` of ``fit`` and ``perf``: an id, an alias or, as in
    ``recommend``, a family (``H100``, ``A100-80GB``). A family of several GPUs stands for its
    most modest member — the least memory, then the least memory bandwidth — so the answer
    holds for every member; a note on stderr says which one and what else matched."""
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
