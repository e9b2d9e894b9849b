"""`advisor catalog refresh --provider gcp`: machine types from a local Compute endpoint, prices
assembled from Cloud Billing Catalog SKUs (core + RAM + GPU) served by the same endpoint."""

from __future__ import annotations

import pytest
import yaml

pytest.importorskip("google.cloud.compute_v1")

from google.auth.credentials import AnonymousCredentials  # noqa: E402

import advisor  # noqa: E402
from advisor.clouds.gcp.compute import GcpProvider  # noqa: E402
from advisor.clouds.refresh import refresh  # noqa: E402
from tests.providers.fake_gcp import FakeCompute, serve  # noqa: E402


def sku(desc: str, group: str, usd: float, regions: list[str], usage: str = "OnDemand",
        unit: str = "h") -> dict:
    units, nanos = divmod(round(usd * 1e9), 10**9)
    return {"name": f"services/6F81-5844-456A/skus/{abs(hash(desc + usage)) % 10**8:08d}",
            "skuId": f"{abs(hash(desc + usage)) % 10**8:08d}", "description": desc,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                         "resourceGroup": group, "usageType": usage},
            "serviceRegions": regions,
            "pricingInfo": [{"summary": "", "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1,
                "tieredRates": [{"startUsageAmount": 0, "unitPrice": {
                    "currencyCode": "USD", "units": str(units), "nanos": nanos}}]},
                "currencyConversionRate": 1, "effectiveTime": "2026-11-01T00:00:00Z"}],
            "serviceProviderName": "Google"}


@pytest.fixture
def fake():
    f = FakeCompute(zones={"g2-standard-8": ["us-central1-a", "us-central1-b"],
                           "g2-standard-4": ["us-central1-a"],
                           "a2-ultragpu-1g": ["us-central1-a"],
                           "n2-standard-8": ["us-central1-a"]})
    f.machine_specs = {
        "g2-standard-8": {"guestCpus": 8, "memoryMb": 32768, "accelerators": [
            {"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}]},
        "g2-standard-4": {"guestCpus": 4, "memoryMb": 16384, "accelerators": [
            {"guestAcceleratorType": "nvidia-l4", "guestAcceleratorCount": 1}]},
        "a2-ultragpu-1g": {"guestCpus": 12, "memoryMb": 174080, "accelerators": [
            {"guestAcceleratorType": "nvidia-a100-80gb", "guestAcceleratorCount": 1}]},
    }
    r = ["us-central1", "us-east4"]
    f.skus = [
        sku("G2 Instance Core running in Americas", "CPU", 0.024988, r),
        sku("G2 Instance Ram running in Americas", "RAM", 0.002927, r, unit="GiBy.h"),
        sku("Nvidia L4 GPU running in Americas", "GPU", 0.56, r),
        sku("Spot Preemptible G2 Instance Core running in Americas", "CPU", 0.0075, r,
            "Preemptible"),
        sku("Spot Preemptible G2 Instance Ram running in Americas", "RAM", 0.00088, r,
            "Preemptible", "GiBy.h"),
        sku("Spot Preemptible Nvidia L4 GPU running in Americas", "GPU", 0.168, r,
            "Preemptible"),
        # A2: core and RAM but no A100 80GB SKU in this catalog page: no price is made up
        sku("A2 Instance Core running in Americas", "CPU", 0.031611, r),
        sku("A2 Instance Ram running in Americas", "RAM", 0.004237, r, unit="GiBy.h"),
    ]
    with serve(f) as url:
        f.url = url
        yield f


def test_refresh_gcp(fake, tmp_path):
    backend = GcpProvider(project="proj", credentials=AnonymousCredentials(),
                          endpoint=fake.url, billing_url=fake.url)
    out = tmp_path / "cat"
    report = refresh("gcp", backend, regions=["us-central1"], out=out)
    doc = yaml.safe_load((out / "instances" / "gcp.yaml").read_text())
    by = {e["name"]: e for e in doc["instances"]}
    g2 = by["g2-standard-8"]
    expected = round(8 * 0.024988 + 32 * 0.002927 + 0.56, 4)
    assert g2["price"]["on_demand_usd_per_hour"] == expected
    assert g2["price"]["spot_usd_per_hour"] == round(8 * 0.0075 + 32 * 0.00088 + 0.168, 4)
    assert "Cloud Billing Catalog" in g2["sources"]["price"]["source"]
    assert "us-central1" in g2["regions"] and g2["gpu"] == {"model": "L4", "count": 1}
    # no A100 80GB GPU SKU: the a2 price is kept as it was, and the report says why
    a2 = by["a2-ultragpu-1g"]
    bundled = advisor.load_catalog().instance("gcp:a2-ultragpu-1g")
    assert a2["price"]["on_demand_usd_per_hour"] == bundled.price.on_demand_usd_per_hour
    assert any("a2-ultragpu-1g" in s for s in report.skipped)
    assert "n2-standard-8" not in by  # no accelerators: not a GPU machine type
    # the machine-type listing asked for the GPU families only
    asked = [p for m, p, _ in fake.requests if "aggregated/machineTypes" in p]
    assert asked and "a2|a3|a4" in asked[0]
    assert advisor.validate_catalog(out) == []
