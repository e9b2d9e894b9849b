"""All terminal output: rich tables for people, ``--json`` for programs. rich lives here only.

Tables fit the terminal: a table that is too wide drops its borders, then hides its
low-value columns (the caption says which), and as a last resort prints one block per row;
a cell never wraps inside a number or a word. Prose (:func:`line`) wraps between words."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich is imported on first use: --json output never pays for it
    from rich.console import Console

#: the width of output that goes to a pipe or a file and no COLUMNS says otherwise
PIPE_WIDTH = 200


def width() -> int:
    """The columns output may use: $COLUMNS, else the terminal's, else :data:`PIPE_WIDTH`."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):
        pass
    return PIPE_WIDTH


@cache
def _consoles() -> tuple[Console, Console]:
    from rich.console import Console

    out = Console(highlight=False, soft_wrap=False, width=PIPE_WIDTH, emoji=False)
    out.on_broken_pipe = _pipe_closed  # type: ignore[method-assign]
    return out, Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def _pipe_closed() -> None:
    """rich's own answer to a closed stdout is exit status 1; the CLI's entry point answers
    BrokenPipeError the way a shell tool does (quietly, 141)."""
    raise BrokenPipeError(32, "stdout was closed")


def _out() -> Console:
    """The stdout console, sized for this call (tests and pipes change the width)."""
    console = _consoles()[0]
    console.width = width()
    return console


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


def usd(value: float | None) -> str:
    """Dollars: to the cent from $1 up, else three significant digits (0.319, 0.0123)."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == 0 or abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.{2 - math.floor(math.log10(abs(value)))}f}"


def num(value: float | None, digits: int = 0) -> str:
    """A number with thousands separators and ``digits`` decimals (tokens/s: 0)."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.{digits}f}"


def ms(value: float | None) -> str:
    """Milliseconds: one decimal below 100, whole above."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


@dataclass(frozen=True)
class Col:
    """A table column and how it behaves when the terminal is narrow."""

    header: str
    #: a number: right-aligned
    num: bool = False
    #: prose: may wrap between words (never inside one); other columns never wrap
    wrap: bool = False
    #: 0: always shown; when the table is too wide, the highest ``drop`` is hidden first
    drop: int = 0


def _cell_widths(col: Col, cells: list[str]) -> tuple[int, int]:
    """(narrowest, natural) width of a column's text, without padding."""
    from rich.cells import cell_len

    natural = max([cell_len(col.header), *(cell_len(c) for c in cells)])
    if not col.wrap:
        return natural, natural
    words = [cell_len(w) for c in [col.header, *cells] for w in c.split()]
    return min(natural, max([12, *words])), natural


def _needed(cols: list[Col], body: list[list[str]], keep: list[int], compact: bool) -> int:
    """Columns a table of ``keep`` needs (bordered: │ x │; compact: x  y)."""
    texts = sum(_cell_widths(cols[i], [r[i] for r in body])[0] for i in keep)
    return texts + (2 * (len(keep) - 1) if compact else 3 * len(keep) + 1)


def table(columns: Sequence[str | Col], rows: Iterable[Sequence[Any]], title: str | None = None,
          caption: str | None = None) -> None:
    from rich import box
    from rich.table import Table

    cols = [c if isinstance(c, Col) else Col(c) for c in columns]
    body = [[str(x) for x in r] for r in rows]
    room = width()
    keep = list(range(len(cols)))
    compact = _needed(cols, body, keep, compact=False) > room
    # hide the lowest-value columns (highest drop, rightmost first) until the table fits
    for i in sorted((i for i, c in enumerate(cols) if c.drop > 0),
                    key=lambda i: (-cols[i].drop, -i)):
        if _needed(cols, body, keep, compact) <= room:
            break
        keep.remove(i)
    if _needed(cols, body, keep, compact) > room:
        _records(cols, body, title, caption)
        return
    hidden = [cols[i].header for i in range(len(cols)) if i not in keep]
    if hidden:
        caption = ((caption + "; ") if caption else "") + (
            f"not shown at {room} columns: {', '.join(hidden)} (--json has them)")
    t = Table(title=title, caption=caption, show_lines=False, header_style="bold",
              caption_justify="left",
              box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD, show_edge=not compact,
              pad_edge=not compact, padding=(0, 1, 0, 0) if compact else (0, 1))
    for i in keep:
        c = cols[i]
        t.add_column(c.header, justify="right" if c.num else "left", no_wrap=not c.wrap,
                     overflow="fold")
    for r in body:
        t.add_row(*(r[i] for i in keep))
    _out().print(t)


def _records(cols: list[Col], body: list[list[str]], title: str | None,
             caption: str | None) -> None:
    """The narrowest layout: one block of ``header  value`` lines per row."""
    if title:
        line(title, indent="")
    pad = max(len(c.header) for c in cols) + 2
    for n, r in enumerate(body):
        if n:
            line()
        for c, v in zip(cols, r, strict=True):
            line(f"{c.header:<{pad}}{v}", indent=" " * pad)
    if caption:
        line()
        line(caption, indent="")


def pairs(title: str, items: Iterable[tuple[str, Any]]) -> None:
    from rich.table import Table

    t = Table(title=title, show_header=False, box=None, pad_edge=False)
    t.add_column("field", style="bold", no_wrap=True)
    t.add_column("value", overflow="fold")
    for k, v in items:
        t.add_row(k, str(v))
    _out().print(t)


def line(text: str = "", *, wrap: bool = True, indent: str | None = None) -> None:
    """A line for people, wrapped between words to the terminal; ``wrap=False`` for text
    that must stay as it is (JSON, scripts). Continuations start at ``indent``, by default
    two columns in from the line's own indentation (under the text of a ``+ `` item)."""
    if wrap and text and "\n" not in text and len(text) > (room := width()):
        lead = text[:len(text) - len(text.lstrip())]
        if indent is None:
            indent = lead + "  "
        text = "\n".join(textwrap.wrap(text, room, subsequent_indent=indent,
                                       break_long_words=False, break_on_hyphens=False))
    _out().print(text, markup=False, soft_wrap=True)


#: C0/C1 control characters (ESC starts a terminal escape sequence) other than whitespace
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    """``text`` without control characters: an input echoed in a message (a region, a path)
    cannot move the cursor, clear the screen or retitle the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def error(message: str, hint: str | None = None) -> None:
    """One line on stderr: what is wrong, then how to fix it (control characters shown as
    escapes, never sent to the terminal)."""
    text = " ".join(_printable(f"error: {message}").split())  # a message never spans lines
    if hint:
        text += " — hint: " + " ".join(_printable(hint).split())
    _consoles()[1].print(text, markup=False, soft_wrap=True)


def progress(text: str) -> None:
    """A step of a long operation, on stderr (stdout stays for results and --json)."""
    _consoles()[1].print(text, markup=False, soft_wrap=True, style="dim")


def raw(text: str) -> None:
    """Text that is already formatted (a ticket, a document): written as it is."""
    sys.stdout.write(text)
