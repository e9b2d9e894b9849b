"""Azure catalog refresh: Resource SKUs and the Retail Prices API, as
:class:`~advisor.clouds.refresh.ApiFacts` (``advisor catalog refresh azure``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.clouds.azure.resources import SRC_PRICES, SRC_SKUS

if TYPE_CHECKING:
    from advisor.clouds.azure.compute import AzureProvider


def _retail_prices(url: str, size: str, region: str) -> tuple[float | None, float | None]:
    """(Linux on-demand, Linux spot) $/h from the Retail Prices API, following its pages."""
    import json as _json
    import urllib.parse
    import urllib.request

    flt = (f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and "
           f"armSkuName eq '{size}' and priceType eq 'Consumption'")
    nxt: str | None = url + "?" + urllib.parse.urlencode({"$filter": flt})
    on_demand = spot = None
    pages = 0
    from advisor.clouds.base import check_deadline, read_timeout_s

    while nxt and pages < 20:
        check_deadline("azure")
        with urllib.request.urlopen(nxt, timeout=read_timeout_s()) as r:  # noqa: S310
            doc = _json.loads(r.read())
        pages += 1
        for item in doc.get("Items", []):
            if item.get("unitOfMeasure") != "1 Hour" or "Windows" in item.get("productName", ""):
                continue
            sku = f"{item.get('skuName', '')} {item.get('meterName', '')}"
            price = float(item.get("retailPrice") or 0)
            if price <= 0 or "Low Priority" in sku:
                continue
            if "Spot" in sku:
                spot = price if spot is None else min(spot, price)
            else:
                on_demand = price if on_demand is None else min(on_demand, price)
        link = doc.get("NextPageLink")
        nxt = str(link) if link else None
    return on_demand, spot


def catalog_facts(self: AzureProvider, regions: list[str], doc: dict[str, Any]) -> list[Any]:
    from advisor.clouds.refresh import ApiFacts, ApiPrice

    compute = self._client("compute")
    current = {e.get("name"): e for e in doc.get("instances", [])}
    found: dict[str, dict[str, Any]] = {}
    for region in regions:
        for s in self._do(compute.resource_skus.list, filter=f"location eq '{region}'"):
            if s.resource_type != "virtualMachines":
                continue
            caps = {c.name: c.value for c in (s.capabilities or [])}
            if int(float(caps.get("GPUs") or 0)) <= 0:
                continue
            if any(str(r.type).lower().endswith("location") for r in s.restrictions or []):
                continue  # not offered to this subscription there
            f = found.setdefault(s.name, {"sku": s, "caps": caps, "regions": []})
            f["regions"].append(region)
    self.notes = []
    out = []
    for name, f in sorted(found.items()):
        caps, sku = f["caps"], f["sku"]
        old_region = ((current.get(name) or {}).get("price") or {}).get("region")
        where = str(old_region) if old_region in f["regions"] else str(f["regions"][0])
        try:
            on_demand, spot = _retail_prices(self.prices_url, name, where)
        except OSError as exc:
            self.notes.append(f"prices for {name}: the Retail Prices API is not reachable "
                              f"({exc}); the catalog's price is kept")
            on_demand = spot = None
        per_core = caps.get("vCPUsPerCore")
        out.append(ApiFacts(
            name=name, vcpus=int(float(caps["vCPUs"])),
            memory_gib=float(caps.get("MemoryGB") or 0),
            gpu_key=f"family:{sku.family}", gpu_count=int(float(caps["GPUs"])),
            regions=sorted(f["regions"]),
            price=ApiPrice(region=where, on_demand_usd_per_hour=on_demand,
                           spot_usd_per_hour=spot, source=SRC_PRICES),
            threads_per_core=int(float(per_core)) if per_core else None,
            sources={"default": SRC_SKUS}))
    return out
