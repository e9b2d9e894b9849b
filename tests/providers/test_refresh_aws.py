"""`advisor catalog refresh --provider aws` against moto's server (EC2: instance types,
offerings) with the Price List API and spot history answered in their real response shapes
through botocore hooks; curated facts survive, contradictions are flagged, writes are atomic."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

import advisor
from advisor.clouds.aws.compute import AwsProvider
from advisor.clouds.refresh import refresh
from advisor.errors import CatalogError
from tests.providers.conftest import answer
from tests.providers.test_aws import cli


#: one GetProducts PriceList item, in the Price List API's shape (values are test data)
def price_item(instance: str, region: str, usd: str) -> str:
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": "TESTSKU1",
                    "attributes": {"instanceType": instance, "regionCode": region,
                                   "location": "US East (N. Virginia)",
                                   "operatingSystem": "Linux", "tenancy": "Shared",
                                   "preInstalledSw": "NA", "capacitystatus": "Used"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"TESTSKU1.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": "TESTSKU1",
            "effectiveDate": "2026-11-01T00:00:00Z",
            "priceDimensions": {"TESTSKU1.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": usd},
                "description": f"${usd} per On Demand Linux {instance} Instance Hour",
                "rateCode": "TESTSKU1.JRTCKXETXF.6YS6EN2CT7", "beginRange": "0",
                "endRange": "Inf", "appliesTo": []}}}}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"})


PRICES = {"p5.48xlarge": "55.0400000000", "g6e.xlarge": "1.8610000000"}


def spot_xml(instance: str, prices: list[str]) -> bytes:
    items = "".join(
        f"<item><availabilityZone>us-east-1{z}</availabilityZone><instanceType>{instance}"
        f"</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>{p}"
        "</spotPrice><timestamp>2026-12-03T07:00:00.000Z</timestamp></item>"
        for z, p in zip("abc", prices, strict=False))
    return ('<?xml version="1.0" encoding="UTF-8"?><DescribeSpotPriceHistoryResponse xmlns='
            '"http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>spot-test</requestId>'
            f"<spotPriceHistorySet>{items}</spotPriceHistorySet><nextToken/>"
            "</DescribeSpotPriceHistoryResponse>").encode()


def backend() -> AwsProvider:
    prov = AwsProvider()

    def products(request, **_):
        body = json.loads(request.body)
        f = {x["Field"]: x["Value"] for x in body["Filters"]}
        usd = PRICES.get(f["instanceType"])
        items = [price_item(f["instanceType"], f["regionCode"], usd)] if usd else []
        return answer(200, json.dumps({"FormatVersion": "aws_v1", "PriceList": items}).encode(),
                      "application/x-amz-json-1.1")(request)

    def spots(request, **_):
        from urllib.parse import parse_qs

        q = parse_qs(request.body.decode() if isinstance(request.body, bytes) else request.body)
        t = q["InstanceType.1"][0]
        return answer(200, spot_xml(t, ["0.7400", "0.6900"] if t == "g6e.xlarge" else []))(
            request)

    prov._client("pricing", "us-east-1").meta.events.register(
        "before-send.pricing.GetProducts", products)
    prov._client("ec2", "us-east-1").meta.events.register(
        "before-send.ec2.DescribeSpotPriceHistory", spots)
    return prov


CURATED = """
    schema_version: 1
    provider: aws
    instances:
      - name: p5.48xlarge
        vcpus: 100
        gpu: {model: H100-SXM, count: 8}
        cpu: {model: Intel Xeon Platinum 8488C, sockets: 2}
        numa: {nodes: 2, gpu_nodes: [0, 0, 0, 0, 1, 1, 1, 1]}
        host: {smt_siblings_exposed: false, topology_stable: true}
        price: {on_demand_usd_per_hour: 99.0, region: us-east-1, as_of: 2026-01-01}
        regions: [us-east-1, eu-north-1]
        sources:
          default: {source: "our own measurements", as_of: 2026-11-30, confidence: measured}
"""


def test_refresh_updates_api_facts_and_keeps_curated(aws, tmp_path):
    out = tmp_path / "cat"
    (out / "instances").mkdir(parents=True)
    (out / "instances" / "aws.yaml").write_text(textwrap.dedent(CURATED).lstrip())
    report = refresh("aws", backend(), regions=["us-east-1"], out=out)
    assert report.written == str(out / "instances" / "aws.yaml")
    doc = yaml.safe_load((out / "instances" / "aws.yaml").read_text())
    p5 = next(e for e in doc["instances"] if e["name"] == "p5.48xlarge")
    # API facts: vCPUs from DescribeInstanceTypes, price from the Price List API, today's date
    assert p5["vcpus"] == 192 and p5["memory_gib"] == 2048
    assert p5["price"]["on_demand_usd_per_hour"] == 55.04
    assert p5["price"]["as_of"] == report.as_of and "Price List API" in p5["sources"]["price"][
        "source"]
    assert p5["fabric"] == {"kind": "efa", "gbps": 3200.0}
    # regions: us-east-1 asked and offered; eu-north-1 not asked, so kept as it was
    assert p5["regions"] == ["eu-north-1", "us-east-1"]
    # curated facts survive untouched
    assert p5["numa"] == {"nodes": 2, "gpu_nodes": [0, 0, 0, 0, 1, 1, 1, 1]}
    assert p5["cpu"] == {"model": "Intel Xeon Platinum 8488C", "sockets": 2}
    assert p5["host"]["smt_siblings_exposed"] is False
    assert p5["sources"]["default"]["source"] == "our own measurements"
    # ...and where the API disagrees with them, it is flagged, not taken
    flags = {(f.instance, f.field): f for f in report.flagged}
    assert flags[("p5.48xlarge", "cpu")].api == "amd"  # EC2 says AMD, the entry says Intel
    assert flags[("p5.48xlarge", "host.smt_siblings_exposed")].api == 2
    changed = {(c.instance, c.field) for c in report.updated}
    assert ("p5.48xlarge", "vcpus") in changed and ("p5.48xlarge", "price") in changed
    # new GPU types arrive with curated fields empty, GPU mapped from the entries both know
    g6e = next(e for e in doc["instances"] if e["name"] == "g6e.xlarge")
    assert "g6e.xlarge" in report.added and g6e["gpu"] == {"model": "L40S", "count": 1}
    assert g6e["price"]["spot_usd_per_hour"] == 0.69  # the lowest zone
    assert "cpu" not in g6e and "numa" not in g6e and "host" not in g6e
    # the written layer loads and validates on top of the bundled catalog
    assert advisor.validate_catalog(out) == []
    cat = advisor.load_catalog([out])
    assert cat.instance("aws:p5.48xlarge").numa.gpu_nodes == [0, 0, 0, 0, 1, 1, 1, 1]


def test_dry_run_writes_nothing(aws, tmp_path):
    out = tmp_path / "cat"
    report = refresh("aws", backend(), regions=["us-east-1"], out=out, dry_run=True)
    assert report.dry_run and report.written is None and not out.exists()
    assert report.updated  # the bundled catalog differs from what this fake API says


def test_a_refresh_that_would_not_validate_writes_nothing(aws, tmp_path, monkeypatch):
    out = tmp_path / "cat"
    (out / "instances").mkdir(parents=True)
    before = textwrap.dedent(CURATED).lstrip()
    (out / "instances" / "aws.yaml").write_text(before)
    import advisor.clouds.refresh as r

    real = r.dump

    def broken(doc, provider, as_of):  # a merge bug that produces an invalid entry
        doc["instances"][0]["vcpus"] = -1
        return real(doc, provider, as_of)

    monkeypatch.setattr(r, "dump", broken)
    with pytest.raises(CatalogError, match="does not validate"):
        refresh("aws", backend(), regions=["us-east-1"], out=out)
    assert (out / "instances" / "aws.yaml").read_text() == before
    assert [p.name for p in (out / "instances").iterdir()] == ["aws.yaml"]  # no temp left


def test_cli_refresh_against_moto(aws, tmp_path):
    """The installed CLI, no hooks: moto has no Price List API, so prices are kept and said so."""
    out = tmp_path / "cli-cat"
    r = cli(aws, "catalog", "refresh", "--provider", "aws", "--region", "us-east-1", "--out",
            str(out), "--json")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["written"].endswith("instances/aws.yaml") and body["regions"] == ["us-east-1"]
    assert any("Price List API" in s for s in body["skipped"])
    doc = yaml.safe_load(Path(body["written"]).read_text())
    p4d = next(e for e in doc["instances"] if e["name"] == "p4d.24xlarge")
    assert p4d["price"]["on_demand_usd_per_hour"] == advisor.load_catalog().instance(
        "aws:p4d.24xlarge").price.on_demand_usd_per_hour  # kept
    bad = cli(aws, "catalog", "refresh", "--provider", "ibm")
    assert bad.returncode == 2 and "unknown cloud provider" in bad.stderr
    hostile = cli(aws, "catalog", "refresh", "--provider", "aws", "--region", "x;y", "--out",
                  str(tmp_path / "h"))
    assert hostile.returncode == 2 and not (tmp_path / "h").exists()


def test_an_instances_file_with_a_key_twice_is_refused_not_rewritten(tmp_path):
    """refresh reads the file it rewrites with the catalog loader's YAML reader: PyYAML's own
    keeps the last of two keys silently, and the rewrite would drop the other fact."""
    from advisor.clouds.refresh import provider_file

    (tmp_path / "instances").mkdir()
    path = tmp_path / "instances" / "aws.yaml"
    path.write_text("schema_version: 1\nprovider: aws\ninstances:\n"
                    "  - {name: p5.48xlarge, vcpus: 192, vcpus: 96}\n")
    with pytest.raises(CatalogError, match="duplicate key 'vcpus'"):
        provider_file(tmp_path, "aws")
    path.write_text("schema_version: 1\nprovider: aws\ninstances:\n  - {name: p5.48xlarge}\n")
    assert provider_file(tmp_path, "aws")[1]["instances"] == [{"name": "p5.48xlarge"}]
