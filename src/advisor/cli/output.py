"""All terminal output: rich tables for people, ``--json`` for programs. rich lives here only."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported on first use: --json output never pays for it
    from rich.console import Console


@cache
def _consoles() -> tuple[Console, Console]:
    from rich.console import Console

    # a terminal gets its own width; a pipe or file gets wide lines rather than folded cells
    out = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)
    return out, Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        text = f"{value:,.4f}" if abs(value) < 10 else f"{value:,.2f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
    elif isinstance(value, list):
        text = ",".join("?" if v is None else str(v) for v in value)
    else:
        text = str(value)
    return f"{text}{unit}"


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
          caption: str | None = None) -> None:
    from rich.table import Table

    t = Table(title=title, caption=caption, show_lines=False, header_style="bold")
    for i, c in enumerate(columns):
        t.add_column(c, overflow="fold", no_wrap=i == 0)
    for r in rows:
        t.add_row(*(str(x) for x in r))
    _consoles()[0].print(t)


def pairs(title: str, items: Iterable[tuple[str, Any]]) -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False, box=None, pad_edge=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    for k, v in items:
        t.add_row(k, str(v))
    _consoles()[0].print(t)


def line(text: str = "") -> None:
    _consoles()[0].print(text, markup=False, soft_wrap=True)


def error(message: str, hint: str | None = None) -> None:
    """One line on stderr: what is wrong, then how to fix it."""
    text = " ".join(f"error: {message}".split())  # a message never spans lines
    if hint:
        text += " — hint: " + " ".join(hint.split())
    _consoles()[1].print(text, markup=False, soft_wrap=True)


def progress(text: str) -> None:
    """A step of a long operation, on stderr (stdout stays for results and --json)."""
    _consoles()[1].print(text, markup=False, soft_wrap=True, style="dim")


def raw(text: str) -> None:
    """Text that is already formatted (a ticket, a document): written as it is."""
    sys.stdout.write(text)
