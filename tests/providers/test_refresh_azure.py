"""`advisor catalog refresh --provider azure`: Resource SKUs through the ARM transport, the
Retail Prices API from a local HTTP server, both in their real response shapes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

pytest.importorskip("azure.mgmt.compute")

import advisor  # noqa: E402
from advisor.clouds.azure.compute import AzureProvider  # noqa: E402
from advisor.clouds.refresh import refresh  # noqa: E402
from tests.providers.fake_azure import FakeArm, FakeCredential, transport  # noqa: E402


def vm_sku(name: str, family: str, vcpus: int, mem: int, gpus: int, region: str = "eastus",
           restricted: bool = False) -> dict:
    caps = [{"name": "vCPUs", "value": str(vcpus)}, {"name": "MemoryGB", "value": str(mem)},
            {"name": "GPUs", "value": str(gpus)}, {"name": "vCPUsPerCore", "value": "1"}]
    return {"resourceType": "virtualMachines", "name": name, "tier": "Standard",
            "family": family, "locations": [region], "capabilities": caps,
            "locationInfo": [{"location": region, "zones": ["1", "2"]}],
            "restrictions": [{"type": "Location", "values": [region],
                              "reasonCode": "NotAvailableForSubscription"}] if restricted
            else []}


def price(size: str, meter: str, usd: float, product: str) -> dict:
    return {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": usd, "unitPrice": usd,
            "armRegionName": "eastus", "location": "US East",
            "effectiveStartDate": "2026-10-01T00:00:00Z", "meterId": f"m-{meter}",
            "meterName": meter, "productId": "DZH318Z0TEST", "skuId": "DZH318Z0TEST/0001",
            "productName": product, "skuName": meter, "serviceName": "Virtual Machines",
            "serviceId": "DZH313Z7MMC8", "serviceFamily": "Compute", "unitOfMeasure": "1 Hour",
            "type": "Consumption", "isPrimaryMeterRegion": True, "armSkuName": size}


PRICES = {
    "Standard_NC40ads_H100_v5": [
        price("Standard_NC40ads_H100_v5", "NC40ads H100 v5", 6.98, "NCadsH100v5 Series"),
        price("Standard_NC40ads_H100_v5", "NC40ads H100 v5", 8.10,
              "NCadsH100v5 Series Windows"),
        price("Standard_NC40ads_H100_v5", "NC40ads H100 v5 Spot", 2.51, "NCadsH100v5 Series")],
    "Standard_NC80adis_H100_v5": [
        price("Standard_NC80adis_H100_v5", "NC80adis H100 v5", 13.96, "NCadsH100v5 Series")],
}


@pytest.fixture
def prices():
    seen: list[str] = []

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            flt = parse_qs(urlparse(self.path).query)["$filter"][0]
            seen.append(flt)
            size = flt.split("armSkuName eq '")[1].split("'")[0]
            items = PRICES.get(size, [])
            # the real API pages its answers: the first page carries one item and a link
            page = parse_qs(urlparse(self.path).query).get("page", ["0"])[0]
            body = {"BillingCurrency": "USD", "CustomerEntityId": "Default",
                    "CustomerEntityType": "Retail", "Items": items[:1] if page == "0" else
                    items[1:], "NextPageLink": None, "Count": len(items)}
            if page == "0" and len(items) > 1:
                body["NextPageLink"] = (f"http://127.0.0.1:{self.server.server_port}/api/retail"
                                        f"/prices?page=1&%24filter={flt.replace(' ', '%20')}")
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}/api/retail/prices", seen
    srv.shutdown()
    srv.server_close()


def test_refresh_azure(tmp_path, prices):
    url, seen = prices
    arm = FakeArm(skus=[
        vm_sku("Standard_NC40ads_H100_v5", "standardNCADSH100v5Family", 40, 320, 1),
        vm_sku("Standard_NC80adis_H100_v5", "standardNCADSH100v5Family", 80, 640, 2),
        # a new size of a known family: arrives with its GPU mapped, curated fields empty
        vm_sku("Standard_NC160adis_H100_v5", "standardNCADSH100v5Family", 160, 1280, 4),
        # a family no catalog entry has: skipped, not guessed
        vm_sku("Standard_NX8_Z9_v1", "standardNXZ9Family", 8, 64, 1),
        vm_sku("Standard_ND96isr_H100_v5", "standardNDSH100v5Family", 96, 1900, 8,
               restricted=True),
        vm_sku("Standard_D4s_v5", "standardDSv5Family", 4, 16, 0),  # no GPU: not ours
    ])
    backend = AzureProvider(subscription_id="sub", credential=FakeCredential(),
                            transport=transport(arm), prices_url=url)
    out = tmp_path / "cat"
    report = refresh("azure", backend, regions=["eastus"], out=out)
    doc = yaml.safe_load((out / "instances" / "azure.yaml").read_text())
    by = {e["name"]: e for e in doc["instances"]}
    nc40 = by["Standard_NC40ads_H100_v5"]
    assert nc40["price"]["on_demand_usd_per_hour"] == 6.98  # Linux, not the Windows meter
    assert nc40["price"]["spot_usd_per_hour"] == 2.51  # from the second page
    assert "Retail Prices API" in nc40["sources"]["price"]["source"]
    assert by["Standard_NC160adis_H100_v5"]["gpu"] == {"model": "H100-NVL", "count": 4}
    assert "Standard_NC160adis_H100_v5" in report.added
    assert any("standardNXZ9Family" in s for s in report.skipped)
    assert "Standard_NX8_Z9_v1" not in by and "Standard_D4s_v5" not in by
    # a size the subscription cannot use in the region is not listed there; its entry stays
    assert "Standard_ND96isr_H100_v5" in report.unlisted
    nd = by["Standard_ND96isr_H100_v5"]
    assert nd["numa"]["gpu_nodes"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert any("armSkuName eq 'Standard_NC40ads_H100_v5'" in f for f in seen)
    assert advisor.validate_catalog(out) == []
