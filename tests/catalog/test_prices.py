"""Prices per region (issue 17): catalogs/prices/<provider>.csv + sources.yaml, what the loader
refuses, and that --region ranks on the asked region's own price.

Built on a copy of the small frozen catalog (tests/fixtures/catalog-small) loaded on its own, so
the bundled price files can change without moving these numbers."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from advisor.catalog.loader import _build
from advisor.core.ranking import Constraints
from tests.small_catalog import SMALL

SOURCES = """\
test-2026-01-21: {source: "https://example.invalid/prices.json", as_of: 2026-01-21,
                  note: "a dated dump"}
"""
HEADER = "instance,region,on_demand_usd_per_hour,spot_usd_per_hour,as_of,source\n"


def _catalog(tmp_path: Path, files: dict[str, str]):
    root = tmp_path / "cat"
    shutil.copytree(SMALL, root)
    (root / "prices").mkdir()
    (root / "prices" / "sources.yaml").write_text(SOURCES)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return _build([root])


def _msgs(problems):
    return [f"{p.entry}|{p.field}|{p.message}" for p in problems]


def test_region_rows_attach_and_the_reference_row_is_the_default(tmp_path):
    cat, problems = _catalog(tmp_path, {"prices/aws.csv": HEADER + (
        "g6e.xlarge,us-east-1,1.861,0.9,2026-01-21,test-2026-01-21\n"
        "g6e.xlarge,us-west-2,2.05,,2026-01-21,test-2026-01-21\n")})
    assert problems == []
    inst = cat.instance("aws:g6e.xlarge")
    assert set(inst.prices) == {"us-east-1", "us-west-2"}
    west = inst.prices["us-west-2"]
    assert (west.on_demand_usd_per_hour, west.spot_usd_per_hour, str(west.as_of)) == \
        (2.05, None, "2026-01-21")
    assert west.source == "https://example.invalid/prices.json"
    # the instance file's own price (us-east-1) wins for its region; price_in picks by region
    assert inst.price_in(None).region == "us-east-1"
    assert inst.price_in(["us-west-2"]).on_demand_usd_per_hour == 2.05
    assert inst.price_in(["us-east-1", "us-west-2"]).region == "us-east-1"  # the cheaper one
    assert inst.price_in(["us-west-2"], spot=True) is None  # no spot there: never borrowed
    assert inst.price_in(["eu-west-1"]) is None


def test_a_type_without_a_price_in_its_file_takes_the_reference_region_row(tmp_path):
    yaml_without_price = (SMALL / "instances" / "gcp.yaml").read_text().replace(
        "    price: {on_demand_usd_per_hour: 0.85, region: us-central1, as_of: 2026-12-03}\n",
        "")
    cat, problems = _catalog(tmp_path, {
        "instances/gcp.yaml": yaml_without_price,
        "prices/gcp.csv": HEADER + ("g2-standard-8,us-east4,0.95,,2026-01-21,test-2026-01-21\n"
                                    "g2-standard-8,us-central1,0.85,0.3,2026-01-21,"
                                    "test-2026-01-21\n")})
    assert problems == []
    p = cat.instance("gcp:g2-standard-8").price
    assert (p.region, p.on_demand_usd_per_hour, str(p.as_of)) == ("us-central1", 0.85,
                                                                  "2026-01-21")
    # not sold in the reference region: the lowest on-demand row
    cat, problems = _catalog(tmp_path / "b", {
        "instances/gcp.yaml": yaml_without_price,
        "prices/gcp.csv": HEADER + "g2-standard-8,us-east4,0.95,,2026-01-21,test-2026-01-21\n"})
    assert problems == [] and cat.instance("gcp:g2-standard-8").price.region == "us-east4"


@pytest.mark.parametrize("row, fragment", [
    ("g6e.xlarge,us-west-2,2.05,2.05,2026-01-21,test-2026-01-21",
     "spot $2.05/h is not below on-demand"),
    ("g6e.xlarge,us-west-2,inf,,2026-01-21,test-2026-01-21", "not a finite"),
    ("g6e.xlarge,us-west-2,nan,,2026-01-21,test-2026-01-21", "not a finite"),
    ("g6e.xlarge,us-west-2,-1,,2026-01-21,test-2026-01-21", "not a finite, non-negative"),
    ("g6e.xlarge,us-west-2,1e309,,2026-01-21,test-2026-01-21", "not a finite"),
    ("g6e.xlarge,us-west-2,5000,,2026-01-21,test-2026-01-21", "more than any instance costs"),
    ("g6e.xlarge,us-west-2,2.05,,2026-13-01,test-2026-01-21", "month must be in 1..12"),
    ("g6e.xlarge,us-west-2,2.05,,2026-01-21,nowhere", "'nowhere' is not a key"),
    ("g6e.xlarge,eu-west-1,2.05,,2026-01-21,test-2026-01-21", "is not sold in eu-west-1"),
    ("p9.huge,us-east-1,2.05,,2026-01-21,test-2026-01-21", "aws:p9.huge is not in the catalog"),
    ("g6e.xlarge,us-west-2,,,2026-01-21,test-2026-01-21", "no price in the row"),
    ("g6e.xlarge,us-west-2,2.05,2026-01-21,test-2026-01-21", "5 columns, not 6"),
])
def test_a_bad_row_is_refused_with_where_and_why(tmp_path, row, fragment):
    _, problems = _catalog(tmp_path, {"prices/aws.csv": HEADER + row + "\n"})
    assert len(problems) == 1 and fragment in problems[0].message, _msgs(problems)
    assert problems[0].file.endswith("prices/aws.csv")


def test_a_duplicate_row_and_a_bad_header_are_refused(tmp_path):
    row = "g6e.xlarge,us-west-2,2.05,,2026-01-21,test-2026-01-21\n"
    _, problems = _catalog(tmp_path, {"prices/aws.csv": HEADER + row + row})
    assert [p.message for p in problems] == [
        "g6e.xlarge in us-west-2 is priced twice (also line 2)"]
    _, problems = _catalog(tmp_path / "b", {"prices/aws.csv": "type,region,price\n" + row})
    assert len(problems) == 1 and "the header must be" in problems[0].message


def test_a_per_gpu_price_far_off_its_siblings_is_an_anomaly_not_a_price(tmp_path):
    """Three lab types of 2 x L40S at $2/h ($1 per GPU) and one at $11/h: 5.5x the median
    per-GPU price is refused; $9.9/h (4.95x) is kept — the factor is SIBLING_FACTOR = 5."""
    rows = [f"{n},lab,2.0,,2026-01-21,test-2026-01-21" for n in ("aligned", "spans", "unknown")]
    _, problems = _catalog(tmp_path, {"prices/lab.csv": HEADER + "\n".join(
        [*rows, "partial,lab,11.0,,2026-01-21,test-2026-01-21"]) + "\n"})
    assert len(problems) == 1 and "partial in lab: $5.50/h per L40S is more than 5x" in \
        problems[0].message
    _, problems = _catalog(tmp_path / "b", {"prices/lab.csv": HEADER + "\n".join(
        [*rows, "partial,lab,9.9,,2026-01-21,test-2026-01-21"]) + "\n"})
    assert problems == []


def test_a_region_far_off_the_types_other_regions_is_an_anomaly(tmp_path):
    """g6e.xlarge at $1.861 and $2.0: a third region at 2.1x their median is refused, at 1.9x
    kept — REGION_FACTOR = 2 (the dearest real region, sa-east-1, is 1.68x us-east-1 for p5)."""
    base = ("g6e.xlarge,us-east-1,1.861,,2026-01-21,test-2026-01-21\n"
            "g6e.xlarge,us-west-2,2.0,,2026-01-21,test-2026-01-21\n")
    more = "\n".join(f"g6e.xlarge,{r},2.0,,2026-01-21,test-2026-01-21"
                     for r in ("eu-west-1", "eu-west-2"))
    regions = "[us-east-1, us-west-2, eu-west-1, eu-west-2, sa-east-1]"
    yaml = (SMALL / "instances" / "aws.yaml").read_text().replace(
        "regions: [us-east-1, us-west-2]", f"regions: {regions}")
    _, problems = _catalog(tmp_path, {"instances/aws.yaml": yaml, "prices/aws.csv": HEADER + base
                                      + more + "\ng6e.xlarge,sa-east-1,4.2,,2026-01-21,"
                                      "test-2026-01-21\n"})
    assert len(problems) == 1 and "g6e.xlarge in sa-east-1: $4.2/h is more than 2x" in \
        problems[0].message, _msgs(problems)
    _, problems = _catalog(tmp_path / "b", {"instances/aws.yaml": yaml,
                                            "prices/aws.csv": HEADER + base + more
                                            + "\ng6e.xlarge,sa-east-1,3.8,,2026-01-21,"
                                            "test-2026-01-21\n"})
    assert problems == []


def test_a_price_file_over_the_size_limit_is_refused_unread(tmp_path, monkeypatch):
    from advisor.catalog import prices

    monkeypatch.setattr(prices, "MAX_FILE_BYTES", 100)
    _, problems = _catalog(tmp_path, {"prices/aws.csv": HEADER + "x" * 200 + "\n"})
    assert [p.message for p in problems] == ["larger than 100 bytes: refused unread"]


def test_region_ranks_on_that_regions_own_price(tmp_path):
    from advisor.api import recommend

    cat, problems = _catalog(tmp_path, {"prices/aws.csv": HEADER + (
        "g6e.xlarge,us-east-1,1.861,0.9,2026-01-21,test-2026-01-21\n"
        "g6e.xlarge,us-west-2,2.5,,2026-01-21,test-2026-01-21\n")})
    assert problems == []
    east = recommend("llama-3-8b", 4096, catalog=cat, instances=["aws:g6e.xlarge"],
                     allow_small_host=True)
    west = recommend("llama-3-8b", 4096, catalog=cat, instances=["aws:g6e.xlarge"],
                     regions=["us-west-2"], allow_small_host=True)
    assert (east[0].region, east[0].usd_per_hour) == ("us-east-1", 1.861)
    assert (west[0].region, west[0].usd_per_hour, west[0].price_as_of) == \
        ("us-west-2", 2.5, "2026-01-21")
    # $/1M follows the region's price exactly
    assert west[0].usd_per_million_output_tokens == pytest.approx(
        east[0].usd_per_million_output_tokens * 2.5 / 1.861, rel=1e-3)
    # spot asked where the region has no spot price: rejected with the regions it has one in
    recs, rejected = recommend("llama-3-8b", 4096, catalog=cat, instances=["aws:g6e.xlarge"],
                               regions=["us-west-2"], spot=True, allow_small_host=True,
                               with_rejected=True)
    assert recs == [] and rejected[0].by == "--region"
    assert "no spot price in us-west-2" in rejected[0].reason


def test_constraints_default_to_the_reference_price():
    assert Constraints().regions == []


@pytest.mark.parametrize("text, fragment", [
    # PyYAML keeps the last of two equal keys silently: the loader refuses it
    ("""
     provider: aws
     instances:
       - name: g6e.xlarge
         vcpus: 4
         vcpus: 8
     """, "duplicate key 'vcpus'"),
    ("""
     provider: aws
     instances:
       - name: g6e.xlarge
         price: {on_demand_usd_per_hour: 1e309, region: us-east-1, as_of: 2026-01-21}
     """, "finite number"),
    ("""
     provider: aws
     instances:
       - name: g6e.xlarge
         price: {on_demand_usd_per_hour: .nan, region: us-east-1, as_of: 2026-01-21}
     """, "finite number"),
    ("""
     provider: aws
     instances:
       - name: g6e.xlarge
         vcpus: 1000000000
     """, "less than or equal to 4096"),
])
def test_duplicate_keys_non_finite_and_absurd_values_are_refused(make_catalog, text, fragment):
    from advisor import validate_catalog

    problems = validate_catalog(make_catalog({"instances/aws.yaml": text}))
    assert any(fragment in p.message for p in problems), _msgs(problems)


def test_absurd_gpu_memory_is_refused(make_catalog):
    from advisor import validate_catalog

    problems = validate_catalog(make_catalog({"gpus.yaml": """
        gpus:
          - id: L4
            memory_gib: 1e300
        """}))
    assert [(p.entry, p.field) for p in problems] == [("L4", "memory_gib")], _msgs(problems)
    assert "less than or equal to 2048" in problems[0].message


def test_bundled_price_rows_all_reach_their_types_and_agree_with_the_reference_price():
    """Every row of catalogs/prices/*.csv is attached (none set aside as unsold), every price
    the catalog ranks on carries the date of its source, and an instance file's own reference
    price says what its region's row says."""
    import csv

    from advisor import load_catalog
    from advisor.catalog.loader import bundled_dir

    cat = load_catalog()
    rows = 0
    for path in sorted((bundled_dir() / "prices").glob("*.csv")):
        for r in csv.DictReader(path.open()):
            rows += 1
            inst = cat.instance(f"{path.stem}:{r['instance']}")
            p = inst.prices[r["region"]]
            assert str(p.as_of) == r["as_of"], (inst.key, r["region"])
            if inst.price.region == r["region"]:
                assert inst.price.on_demand_usd_per_hour == (
                    float(r["on_demand_usd_per_hour"]) if r["on_demand_usd_per_hour"] else None
                ), inst.key
    assert rows > 1000
    for inst in cat.instances.values():
        for p in [inst.price, *inst.prices.values()]:
            if p.usd(False) is not None or p.usd(True) is not None:
                assert p.as_of is not None and p.region in inst.regions, inst.key


def test_a_users_price_rows_replace_ours_for_their_region(make_catalog):
    """A user layer's prices/aws.csv (a negotiated price) may name our sources and replaces our
    row for that type and region; it is neither a duplicate nor measured against our rows."""
    from advisor import load_catalog, validate_catalog

    d = make_catalog({"prices/aws.csv": HEADER.replace("\n", "") + "\n"
                      "p5.48xlarge,us-west-2,20.0,,2026-11-01,aws-vantage-2026-01-21\n"})
    assert validate_catalog(d) == []
    ours = load_catalog().instance("aws:p5.48xlarge").prices["us-west-2"]
    mine = load_catalog([d]).instance("aws:p5.48xlarge").prices["us-west-2"]
    assert ours.on_demand_usd_per_hour != 20.0
    assert (mine.on_demand_usd_per_hour, str(mine.as_of)) == (20.0, "2026-11-01")


def test_the_later_layer_wins_between_a_price_block_and_a_price_row(make_catalog):
    """Our instance file's reference price (us-east-1) gives way to a user's us-east-1 row;
    a user's price block gives way to nothing below it."""
    from advisor import load_catalog

    row = make_catalog({"prices/aws.csv": HEADER.replace("\n", "") + "\n"
                        "p5.48xlarge,us-east-1,30.0,,2026-11-01,aws-vantage-2026-01-21\n"})
    p5 = load_catalog([row]).instance("aws:p5.48xlarge")
    assert p5.price.on_demand_usd_per_hour == 30.0 and p5.prices["us-east-1"].as_of.year == 2026
    assert str(p5.price.as_of) == "2026-11-01"
    block = make_catalog({"instances/aws.yaml": """
        provider: aws
        instances:
          - name: p5.48xlarge
            price: {on_demand_usd_per_hour: 31.5, region: us-west-2, as_of: 2026-11-02}
    """})
    p5 = load_catalog([block]).instance("aws:p5.48xlarge")
    assert (p5.price.region, p5.price.on_demand_usd_per_hour) == ("us-west-2", 31.5)
    assert p5.prices["us-west-2"].on_demand_usd_per_hour == 31.5
    assert p5.price_in(["us-west-2"]).on_demand_usd_per_hour == 31.5
