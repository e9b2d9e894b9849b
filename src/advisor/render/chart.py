"""The cost curve as a picture (``advisor plan --rps-range A:B --plot FILE``): the monthly bill
against the load for the few offers worth drawing, each a staircase (fleets are whole
instances), the cheapest fleet at each sampled load as a dot, and the loads where the cheapest of
those offers changes marked and labelled.

matplotlib is an optional extra (``pip install 'advisor[plot]'``) and is imported here only,
inside the functions below, on the ``--plot`` path: importing advisor, or running any other
command, never loads it (``tests/test_plan_curve.py`` holds that). It draws on a bare
:class:`~matplotlib.figure.Figure` with the Agg canvas (no pyplot, no display, no global state).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.core.load import CostCurve, staircase
from advisor.errors import UserInputError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: what ``--plot`` writes, by the file's suffix
FORMATS = ("svg", "png")
MISSING = "--plot needs matplotlib: pip install 'advisor[plot]'"
#: SVG text stays text (searchable, selectable, smaller than glyph paths); fixed ids: the same
#: curve writes the same bytes
STYLE: dict[Any, Any] = {"svg.fonttype": "none", "svg.hashsalt": "advisor", "font.size": 9}


def chart_format(path: Path) -> str:
    """``svg`` or ``png`` from the file's suffix, else UserInputError."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise UserInputError(f"--plot {str(path)[:120]}: a chart is written as .svg or .png, "
                             f"not {path.suffix or 'a file without a suffix'}",
                             hint="give a file name ending in .svg or .png")
    return fmt


def check_plot(path: Path) -> str:
    """Everything ``--plot FILE`` needs, checked before any work: the format from the suffix,
    matplotlib, and a destination that can be written (a file in an existing, writable folder).
    Returns the format."""
    fmt = chart_format(path)
    try:
        import matplotlib  # noqa: F401  (the plot extra)
    except ImportError as exc:
        raise UserInputError(MISSING, hint="or leave out --plot for the table alone") from exc
    folder = path.parent
    why = ("it is a folder" if path.is_dir() else
           f"no folder {str(folder)[:120]}" if not folder.is_dir() else
           "the folder is not writable" if not os.access(folder, os.W_OK | os.X_OK) else None)
    if why:
        raise UserInputError(f"--plot {str(path)[:120]}: cannot write there: {why}",
                             hint="give a .svg or .png file in a writable folder")
    return fmt


def write_chart(curve: CostCurve, path: Path) -> Path:
    """Draws ``curve`` into ``path`` (.svg or .png), atomically: the chart is written to a
    temporary file in the same folder and renamed over ``path``, so an interrupted run leaves
    either the old file or the new one, never half of one."""
    import matplotlib

    fmt = check_plot(path)
    fig = figure(curve)
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f, matplotlib.rc_context(STYLE):
            # no date in the file: the same curve draws the same bytes (docs/img is committed)
            fig.savefig(f, format=fmt, dpi=110,
                        metadata={"Date": None} if fmt == "svg" else {"Software": None})
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise UserInputError(f"--plot {str(path)[:120]}: cannot write there: "
                                 f"{exc.strerror or exc}; nothing was written",
                                 hint="give a .svg or .png file in a writable folder") from exc
        raise
    return path


def _temp_beside(path: Path) -> tuple[int, str]:
    try:
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UserInputError(f"--plot {str(path)[:120]}: cannot write there: "
                             f"{exc.strerror or exc}",
                             hint="give a .svg or .png file in a writable folder") from exc


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def caption(curve: CostCurve) -> str:
    """What the chart assumes, in words: the targets, the prices and how fleets were sized."""
    tg = curve.targets
    if tg.tpot_ms is None and tg.ttft_ms is None:
        targets = "no latency targets (--batch)"
    else:
        parts = [f"{k} \u2264 {v:g} ms" for k, v in (("TPOT", tg.tpot_ms), ("TTFT", tg.ttft_ms))
                 if v is not None]
        given = "" if tg.source.startswith("default") else f", {tg.source}"
        targets = f"targets {', '.join(parts)} at p50{given}"
    dates = curve.price_dates
    when = ("no price date" if not dates else f"as of {dates[0]}" if len(dates) == 1
            else f"as of {dates[0]} to {dates[-1]}")
    sizing = ("no headroom" if curve.utilisation >= 1 else
              f"each replica loaded to at most {curve.utilisation:.0%}")
    sizing += f", plus {curve.spare} spare replica(s)" if curve.spare else ""
    return (f"{curve.model}, ctx {curve.ctx}, {curve.input_len} in / {curve.output_len} out; "
            f"{targets}; {curve.price_kind} prices {when} (catalog); whole instances, at most "
            f"{curve.max_instances} a fleet, 730 h/month, {sizing}. Dots: the cheapest fleet at "
            f"each of the {len(curve.points)} loads sampled (advisor plan --rps); dotted lines: "
            "where the cheapest of the offers drawn changes.")


def figure(curve: CostCurve) -> Figure:
    """The chart as a matplotlib Figure on the Agg canvas (not written anywhere)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lo, hi = curve.points[0].rps, curve.points[-1].rps
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9.0, 5.6))
        # constrained layout above a strip kept for the caption (left, bottom, width, height)
        fig.set_layout_engine("constrained", rect=(0, 0.08, 1, 0.92))
        FigureCanvasAgg(fig)  # Agg, explicitly: no display, whatever MPLBACKEND says
        ax = fig.add_subplot()
        colours = {line.option: f"C{i}" for i, line in enumerate(curve.lines)}
        cheapest = [p.cheapest.usd_per_month for p in curve.points]
        top = max(cheapest)
        for line in curve.lines:
            xs, ys = staircase(line, lo, hi, curve.utilisation, curve.spare)
            layout = f"TP{line.tp}" + (f" PP{line.pp}" if line.pp > 1 else "")
            ax.step(xs, ys, where="post", color=colours[line.option], linewidth=1.8,
                    label=_plain(f"{line.option}: {line.gpu_count}x {line.gpu}, {layout}, "
                                 f"${line.usd_per_hour:,.2f}/h, {line.rps_per_replica:.3g} "
                                 "req/s a replica"))
            top = max(top, *(y for x, y in zip(xs, ys, strict=True) if x <= lo * 1.01))
        ax.scatter([p.rps for p in curve.points], cheapest, s=16, color="black", zorder=5,
                   label="cheapest fleet at a sampled load")
        _crossovers(ax, curve, colours)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _ticks(ax)
        ax.set_xlim(lo, hi)
        # the offers drawn, from where they start to twice the cheapest bill at the top: above
        # that a line is out of the running and only squeezes the rest
        ax.set_ylim(min(cheapest) / 1.25, max(top, 2 * max(cheapest)))
        ax.set_xlabel("load (requests/s, log scale)")
        ax.set_ylabel("monthly cost of the fleet (US$/month, log scale)")
        ax.set_title(f"Cheapest fleet for {curve.model} at ctx {curve.ctx}, "
                     f"{lo:g} to {hi:g} req/s", fontsize=11)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
        fig.text(0.01, 0.012, _plain("\n".join(textwrap.wrap(caption(curve), 150))), fontsize=7.5,
                 va="bottom", ha="left")
    return fig


def _crossovers(ax: Axes, curve: CostCurve, colours: dict[str, str]) -> None:
    """Where the pick changes: a dotted vertical line, a diamond on the new pick's bill and a
    label; the other crossovers between drawn offers: a small open circle."""
    shown = 0
    for x in curve.crossovers:
        colour = colours.get(x.option, "grey")
        if not x.pick_changes:
            ax.plot([x.rps], [x.usd_per_month], marker="o", markersize=4, color=colour,
                    markerfacecolor="none", linestyle="none")
            continue
        ax.axvline(x.rps, color="grey", linestyle=":", linewidth=1)
        ax.plot([x.rps], [x.usd_per_month], marker="D", markersize=5, color=colour,
                linestyle="none", zorder=6)
        ax.annotate(_plain(f"{x.rps:.3g} req/s: {x.option}\n${x.usd_per_month:,.0f} vs "
                           f"${x.versus_usd_per_month:,.0f}/month"),
                    xy=(x.rps, x.usd_per_month), xytext=(6, -26 - 22 * (shown % 2)),
                    textcoords="offset points", fontsize=7, color=colour)
        shown += 1


def _ticks(ax: Axes) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis, text in ((ax.xaxis, lambda v, _: f"{v:g}"),
                       (ax.yaxis, lambda v, _: _plain(f"${v:,.0f}"))):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(text))
        axis.set_minor_formatter(NullFormatter())


def _plain(text: str) -> str:
    """Text as written: a dollar sign is not the start of a matplotlib math formula."""
    return text.replace("$", r"\$")
