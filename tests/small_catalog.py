"""The small, frozen test catalog in tests/fixtures/catalog-small, loaded on its own.

``advisor.load_catalog(dirs)`` always lays user directories over the bundled catalog, so a
refresh of catalogs/ would still reach a test through it. The loader's ``_build`` takes the
list of layers itself: given only the fixture directory it builds a catalog of nothing else,
with the same validation (every problem is a test failure here).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from advisor.catalog import Catalog
from advisor.catalog.loader import _build

SMALL = Path(__file__).resolve().parent / "fixtures" / "catalog-small"


@lru_cache(maxsize=1)
def small_catalog() -> Catalog:
    cat, problems = _build([SMALL])
    assert problems == [], [str(p) for p in problems]
    return cat
