"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor.catalog import Catalog, load

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


def catalog_from(dirs: list[Path] | None) -> Catalog:
    return load(dirs or None)
