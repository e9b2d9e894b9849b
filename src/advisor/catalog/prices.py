"""Prices per region: ``prices/<provider>.csv`` and ``prices/sources.yaml`` of a catalog
directory (format: ``catalogs/prices/README.md``).

:func:`read_dir` parses one directory's files into rows with every problem found (file, row,
field); :func:`anomalies` finds what the README says is refused rather than copied. The loader
puts the rows on their instance types (``InstanceType.prices``) and derives the reference
``price`` where the instance file gives none.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.errors import UserInputError
from advisor.inputs import read_text

#: a price file larger than this is refused unread (the three bundled files are ~100 KiB)
MAX_FILE_BYTES = 4 * 2**20
#: the dearest instance type sold by the hour is ~$120/h; a row above this is a typo
MAX_USD_PER_HOUR = 1000.0
#: columns of a price file, in this order
COLUMNS = ("instance", "region", "on_demand_usd_per_hour", "spot_usd_per_hour", "as_of",
           "source")
#: a per-GPU on-demand price this many times above or below the median per-GPU price of the
#: same GPU model on the same cloud and region is refused as an anomaly. Sizes of one family
#: differ by their CPU and memory share: the widest real spread in AWS's 2026-01-21 list is
#: g4dn.16xlarge, $4.35/h for its one T4 against a $0.98 median of the T4 sizes (4.45x); 5x
#: still catches a price with a lost or extra digit (10x) without refusing a real size.
SIBLING_FACTOR = 5.0
#: a type's price in one region this many times above or below the median of its own prices
#: in every region is refused. The dearest real region in the same list is sa-east-1 at 1.68x
#: us-east-1 for p5.48xlarge ($92.47 vs $55.04); 2x from the median catches a misplaced digit.
REGION_FACTOR = 2.0


@dataclass(frozen=True)
class Row:
    provider: str
    instance: str
    region: str
    on_demand: float | None
    spot: float | None
    as_of: dt.date
    source: str
    #: where it was read, for problems: "prices/aws.csv" and the line number
    file: str
    line: int


@dataclass(frozen=True)
class PriceProblem:
    file: str
    entry: str | None
    field: str | None
    message: str


def _number(text: str, what: str) -> float | None:
    if text.strip() == "":
        return None
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} {text!r} is not a finite, non-negative number")
    return value


def read_dir(root: Path, shown: Callable[[Path], str],
             load_yaml: Callable[[Path], Any],
             known: dict[str, dict[str, Any]] | None = None
             ) -> tuple[list[Row], dict[str, dict[str, Any]], list[PriceProblem]]:
    """(rows, sources, problems) of ``root/prices``; nothing when the folder is absent.
    ``known``: the sources of the layers below, which this layer's rows may name too."""
    folder = root / "prices"
    rows: list[Row] = []
    sources: dict[str, dict[str, Any]] = dict(known or {})
    problems: list[PriceProblem] = []
    if not folder.is_dir():
        return rows, sources, problems
    src_path = folder / "sources.yaml"
    if src_path.exists():
        doc = load_yaml(src_path)
        if doc is not None and not isinstance(doc, dict):
            problems.append(PriceProblem(shown(src_path), None, None,
                                         "expected a mapping of source keys"))
        else:
            for key, value in (doc or {}).items():
                if not isinstance(value, dict) or not value.get("source") or \
                        not isinstance(value.get("as_of"), dt.date):
                    problems.append(PriceProblem(shown(src_path), str(key), None,
                                                 "needs source and as_of (a date)"))
                    continue
                sources[str(key)] = value
    for path in sorted(folder.glob("*.csv")):
        provider = path.stem
        name = shown(path)
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                problems.append(PriceProblem(name, None, None,
                                             f"larger than {MAX_FILE_BYTES} bytes: refused "
                                             "unread"))
                continue
            text = read_text(path, limit=MAX_FILE_BYTES, what="")
        except OSError as exc:
            problems.append(PriceProblem(name, None, None, f"cannot read: {exc}"))
            continue
        except UserInputError as exc:  # not a regular file, too large, not UTF-8
            problems.append(PriceProblem(name, None, None, str(exc).split(": ", 1)[-1]))
            continue
        reader = csv.reader(io.StringIO(text))
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != COLUMNS:
            problems.append(PriceProblem(name, None, None,
                                         f"the header must be {','.join(COLUMNS)}"))
            continue
        for cells in reader:
            line = reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue
            where = f"line {line}"
            if len(cells) != len(COLUMNS):
                problems.append(PriceProblem(name, where, None,
                                             f"{len(cells)} columns, not {len(COLUMNS)}"))
                continue
            inst, region, od, spot, as_of, source = (c.strip() for c in cells)
            try:
                row = Row(provider, inst, region, _number(od, "on-demand price"),
                          _number(spot, "spot price"), dt.date.fromisoformat(as_of), source,
                          name, line)
            except ValueError as exc:
                problems.append(PriceProblem(name, where, None, str(exc)))
                continue
            if source not in sources:
                problems.append(PriceProblem(name, where, "source",
                                             f"{source!r} is not a key of prices/sources.yaml"))
                continue
            if row.on_demand is None and row.spot is None:
                problems.append(PriceProblem(name, where, None, "no price in the row"))
                continue
            if row.spot is not None and row.on_demand is not None and row.spot >= row.on_demand:
                problems.append(PriceProblem(
                    name, where, "spot_usd_per_hour",
                    f"spot ${row.spot}/h is not below on-demand ${row.on_demand}/h: an "
                    "anomaly of the source, not a price to rank on"))
                continue
            big = max(row.on_demand or 0, row.spot or 0)
            if big > MAX_USD_PER_HOUR:
                problems.append(PriceProblem(
                    name, where, None, f"${big}/h is more than any instance costs "
                    f"(limit ${MAX_USD_PER_HOUR:g}/h): a typo?"))
                continue
            rows.append(row)
    return rows, sources, problems


def anomalies(rows: list[Row], gpu_of: dict[tuple[str, str], tuple[str, int]]
              ) -> list[PriceProblem]:
    """Rows the README says are refused: duplicates, a price more than :data:`REGION_FACTOR`
    from the same type's median over its regions, and a per-GPU on-demand price more than
    :data:`SIBLING_FACTOR` from the median of the same GPU model, cloud and region.
    (Spot at or above on-demand is refused by the Price model itself.)"""
    out: list[PriceProblem] = []
    seen: dict[tuple[str, str, str, str], Row] = {}
    for r in rows:
        # twice in one file is a mistake; a later layer's row for the same type and region
        # (a negotiated price) replaces the bundled one instead
        k = (r.file, r.provider, r.instance, r.region)
        if k in seen:
            out.append(PriceProblem(r.file, f"line {r.line}", None,
                                    f"{r.instance} in {r.region} is priced twice (also line "
                                    f"{seen[k].line})"))
        seen[k] = r
    # the factor checks compare each file's rows with that file's own: they find anomalies of
    # a source, and a user's few rows of their own prices are not measured against ours
    by_type: dict[tuple[str, ...], list[tuple[float, Row]]] = defaultdict(list)
    by_gpu: dict[tuple[str, ...], list[tuple[float, Row]]] = defaultdict(list)
    for r in seen.values():
        if r.on_demand is None or r.on_demand <= 0:
            continue
        by_type[(r.file, r.provider, r.instance)].append((r.on_demand, r))
        g = gpu_of.get((r.provider, r.instance))
        if g is not None:
            by_gpu[(r.file, r.provider, g[0], r.region)].append((r.on_demand / g[1], r))
    for v, mid, n, r in _outliers(by_type, REGION_FACTOR):
        out.append(PriceProblem(
            r.file, f"line {r.line}", "on_demand_usd_per_hour",
            f"{r.instance} in {r.region}: ${v:g}/h is more than {REGION_FACTOR:g}x from the "
            f"median ${mid:g}/h of its {n} regions: an anomaly of the source, not copied"))
    for v, mid, n, r in _outliers(by_gpu, SIBLING_FACTOR):
        model = gpu_of[(r.provider, r.instance)][0]
        out.append(PriceProblem(
            r.file, f"line {r.line}", "on_demand_usd_per_hour",
            f"{r.instance} in {r.region}: ${v:.2f}/h per {model} is more than "
            f"{SIBLING_FACTOR:g}x from the median ${mid:.2f}/h of its {n} siblings: an "
            "anomaly of the source, not copied"))
    return out


def _outliers(groups: dict[tuple[str, ...], list[tuple[float, Row]]], factor: float
              ) -> list[tuple[float, float, int, Row]]:
    """(value, median, group size, row) of each value more than ``factor`` from its group's
    median; groups of fewer than three say nothing."""
    found = []
    for items in groups.values():
        if len(items) < 3:
            continue
        mid = statistics.median(v for v, _ in items)
        found += [(v, mid, len(items), r) for v, r in items
                  if v > mid * factor or v < mid / factor]
    return found


def as_price(row: Row, sources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The row as the raw data of a :class:`~advisor.catalog.schema.Price`."""
    src = sources.get(row.source, {})
    return {"on_demand_usd_per_hour": row.on_demand, "spot_usd_per_hour": row.spot,
            "region": row.region, "as_of": row.as_of,
            "source": str(src.get("source") or row.source)}


def _reference_region(provider: str) -> str | None:
    """The cloud's reference region (its CloudInfo); None for a private provider."""
    from advisor.clouds import registry

    if provider not in registry.CLOUDS:
        return None
    return registry.info(provider).reference_region


def reference(provider: str, prices: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The reference row among one type's region rows (raw data), or None without any: the
    cloud's reference region's row, else (a type not sold there, a private provider) the
    lowest on-demand row."""
    if not prices:
        return None
    ref = _reference_region(provider)
    if ref is not None and ref in prices:
        return prices[ref]
    priced = [p for p in prices.values() if p.get("on_demand_usd_per_hour") is not None]
    pool = priced or list(prices.values())
    return min(pool, key=lambda p: (p.get("on_demand_usd_per_hour") or math.inf, p["region"]))
