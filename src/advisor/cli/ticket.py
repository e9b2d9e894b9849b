"""``advisor ticket``: questions for a cloud provider about an instance's NUMA topology."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor.cli import output as out
from advisor.cli.common import CatalogDirs, JsonFlag, catalog_from
from advisor.clouds.registry import EXAMPLE_INSTANCE
from advisor.errors import UserInputError


def ticket_cmd(
    instance: Annotated[str, typer.Option(
        help="PROVIDER:TYPE, e.g. " + EXAMPLE_INSTANCE + ".")],
    region: Annotated[str | None, typer.Option(
        help="The region to ask about: one the catalog prices the instance in (default: its "
        "reference price's region).")] = None,
    probe: Annotated[Path | None, typer.Option(
        help="The JSON of 'advisor topology --json' from the instance (its GPU count and "
        "model must be the instance's): every difference from the catalog becomes a "
        "question.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m",
                                              help="The model to describe (with --ctx).")]
    = None,
    ctx: Annotated[int | None, typer.Option("--ctx", help="Its context length.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="markdown, text or json.")] = "markdown",
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Write a support ticket about an instance's GPU-to-NUMA topology."""
    from advisor.tickets import make_ticket

    if fmt not in ("markdown", "text", "json"):
        raise UserInputError(f"--format {fmt!r} is not markdown, text or json")
    t = make_ticket(instance, region=region, probe=probe, model=model, ctx=ctx,
                    catalog=catalog_from(catalog))
    out.raw(t.render("json" if json else fmt))  # type: ignore[arg-type]
