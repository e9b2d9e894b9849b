"""Price coverage of the bundled catalog (issue 31): which types have no dated on-demand price,
that each of them is named in docs/catalog.md with what was searched, and that every price row's
source is a sources.yaml key with a commit-pinned URL and a date equal to the row's `as_of`."""

from __future__ import annotations

import csv
import datetime as dt
import re
from pathlib import Path

import pytest
import yaml

import advisor.api as api

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "catalogs" / "prices"
DOC = ROOT / "docs" / "catalog.md"

# Issue 31's target is at most 3 unpriced types. It is not reached: no dated public source read
# prices the 13 below (docs/catalog.md, "Unpriced types, and what was searched"). The ceiling
# keeps the count from growing; lower it when a dated source prices one of them.
MAX_UNPRICED = 13


@pytest.fixture(scope="module")
def unpriced() -> list[str]:
    cat = api.load_catalog()
    return sorted(i.key for i in cat.instances.values() if i.price.on_demand_usd_per_hour is None)


def test_unpriced_count_does_not_grow(unpriced):
    assert len(unpriced) <= MAX_UNPRICED, unpriced


def test_every_unpriced_type_is_named_in_the_docs_with_what_was_searched(unpriced):
    text = DOC.read_text()
    start = text.index("**Unpriced types, and what was searched.**")
    section = text[start : text.index("\n**", start + 1)]
    missing = [key for key in unpriced if key not in section]
    assert not missing, f"unpriced but not named in docs/catalog.md: {missing}"


def test_the_unpriced_count_in_the_docs_matches(unpriced):
    cat = api.load_catalog()
    assert (
        f"{len(unpriced)} of {len(cat.instances)} types have no dated on-demand price"
        in " ".join(DOC.read_text().split())
    )


def _rows():
    for path in sorted(PRICES.glob("*.csv")):
        with path.open() as fh:
            for row in csv.DictReader(fh):
                yield path.name, row


def test_every_row_source_is_pinned_and_dated():
    sources = yaml.safe_load((PRICES / "sources.yaml").read_text())
    used = {}
    for name, row in _rows():
        used.setdefault(row["source"], set()).add(row["as_of"])
        assert row["source"] in sources, f"{name}: {row['instance']} cites unknown {row['source']}"
    for key, dates in used.items():
        entry = sources[key]
        assert re.search(r"/(blob|tree|raw)/[0-9a-f]{40}/", entry["source"]), (
            f"{key}: URL not pinned"
        )
        as_of = entry["as_of"]
        assert isinstance(as_of, dt.date), f"{key}: no date"
        assert dates == {as_of.isoformat()}, f"{key}: rows dated {dates}, source {as_of}"
        assert entry.get("note"), f"{key}: says not what it is"
