"""AWS catalog refresh: EC2 DescribeInstanceTypes / offerings, the Price List API and spot
history, as :class:`~advisor.clouds.refresh.ApiFacts` (``advisor catalog refresh aws``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from advisor.clouds.base import CloudError

if TYPE_CHECKING:
    from advisor.clouds.aws.compute import AwsProvider

PRICING_REGION = "us-east-1"  # the Price List API's endpoint region
SRC_TYPES = "AWS EC2 DescribeInstanceTypes (GpuInfo, VCpuInfo, MemoryInfo, NetworkInfo)"
SRC_OFFERINGS = "AWS EC2 DescribeInstanceTypeOfferings (LocationType=region)"
SRC_PRICE = ("AWS Price List API GetProducts (AmazonEC2, Linux, Shared tenancy, no pre-installed "
             "software, OnDemand) and EC2 DescribeSpotPriceHistory (Linux/UNIX, lowest zone)")


def _gbps(perf: str | None) -> float | None:
    import re

    m = re.match(r"^(?:(\d+)x )?(\d+) Gigabit\Z", perf or "")
    return float(int(m.group(1) or 1) * int(m.group(2))) if m else None


def _on_demand_usd(price_list: list[str]) -> float | None:
    for item in price_list:
        doc = json.loads(item)
        for term in (doc.get("terms") or {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = dim.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    return float(usd)
    return None


def catalog_facts(self: AwsProvider, regions: list[str], doc: dict[str, Any]) -> list[Any]:
    import datetime as dt

    from advisor.clouds.refresh import ApiFacts, ApiPrice

    home = regions[0]
    ec2 = self._client("ec2", home)
    types: list[dict[str, Any]] = []
    for page in ec2.get_paginator("describe_instance_types").paginate(
            Filters=[{"Name": "instance-type", "Values": ["p*", "g*"]}]):
        types += [t for t in page["InstanceTypes"] if (t.get("GpuInfo") or {}).get("Gpus")]
    names = sorted(t["InstanceType"] for t in types)
    offered: dict[str, list[str]] = {n: [] for n in names}
    for region in regions:
        client = self._client("ec2", region)
        for i in range(0, len(names), 100):
            r = self._call(client, "describe_instance_type_offerings", LocationType="region",
                           Filters=[{"Name": "instance-type", "Values": names[i:i + 100]}])
            for o in r.get("InstanceTypeOfferings", []):
                offered.setdefault(o["InstanceType"], []).append(region)
    current = {e.get("name"): e for e in doc.get("instances", [])}
    pricing = self._client("pricing", PRICING_REGION)
    self.notes = []
    priced = True
    out = []
    for t in types:
        name = t["InstanceType"]
        gpus = t["GpuInfo"]["Gpus"][0]
        where = offered.get(name) or []
        if not where:
            continue  # not offered in any region asked about
        old_region = ((current.get(name) or {}).get("price") or {}).get("region")
        region = old_region if old_region in where else where[0]
        on_demand = None
        if priced:
            try:
                r = self._call(pricing, "get_products", ServiceCode="AmazonEC2", Filters=[
                    {"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
                        ("instanceType", name), ("regionCode", region),
                        ("operatingSystem", "Linux"), ("tenancy", "Shared"),
                        ("preInstalledSw", "NA"), ("capacitystatus", "Used"))])
                on_demand = _on_demand_usd(r.get("PriceList", []))
            except CloudError as err:
                if err.scope == "provider":
                    raise
                priced = False  # one refusal is enough: the Price List API is not reachable
                self.notes.append(f"prices: the Price List API answered {err.code} "
                                  f"({err.detail[:120]}); prices are kept as they were")
        spot_hist = self._call(self._client("ec2", region), "describe_spot_price_history",
                               InstanceTypes=[name], ProductDescriptions=["Linux/UNIX"],
                               StartTime=dt.datetime.now(dt.UTC))
        spots = [float(s["SpotPrice"]) for s in spot_hist.get("SpotPriceHistory", [])]
        net = t.get("NetworkInfo") or {}
        cpu = t.get("ProcessorInfo") or {}
        out.append(ApiFacts(
            name=name, vcpus=t["VCpuInfo"]["DefaultVCpus"],
            memory_gib=round(t["MemoryInfo"]["SizeInMiB"] / 1024, 2),
            gpu_key=f"{gpus['Name']}/{gpus['MemoryInfo']['SizeInMiB']}",
            gpu_count=gpus["Count"], regions=sorted(where),
            price=ApiPrice(region=region, on_demand_usd_per_hour=on_demand,
                           spot_usd_per_hour=min(spots) if spots else None, source=SRC_PRICE),
            network_gbps=_gbps(net.get("NetworkPerformance")),
            fabric={"kind": "efa" if net.get("EfaSupported") else "ethernet",
                    **({"gbps": g} if (g := _gbps(net.get("NetworkPerformance"))) else {})},
            cpu_vendor=cpu.get("Manufacturer"),
            threads_per_core=(t.get("VCpuInfo") or {}).get("DefaultThreadsPerCore"),
            sources={"default": SRC_TYPES, "regions": SRC_OFFERINGS}))
    return out

