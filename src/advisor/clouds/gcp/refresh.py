"""GCP catalog refresh: machineTypes.aggregatedList and Cloud Billing Catalog SKUs, as
:class:`~advisor.clouds.refresh.ApiFacts` (``advisor catalog refresh gcp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.clouds.base import CloudError
from advisor.clouds.gcp.resources import _compute

if TYPE_CHECKING:
    from advisor.clouds.gcp.compute import GcpProvider

#: Compute Engine's service in the Cloud Billing Catalog API
BILLING_SERVICE = "services/6F81-5844-456A"
#: machine families with GPUs attached to the machine type
GPU_FAMILIES = "(a2|a3|a4|a4x|g2|g4)-.*"
#: accelerator type -> the start of its GPU SKU's description in the billing catalog
GPU_SKU = {"nvidia-l4": "Nvidia L4 GPU", "nvidia-tesla-a100": "Nvidia Tesla A100 GPU",
           "nvidia-a100-80gb": "Nvidia A100 80GB GPU", "nvidia-h100-80gb": "Nvidia H100 80GB GPU",
           "nvidia-h100-mega-80gb": "Nvidia H100 80GB Mega GPU",
           "nvidia-h200-141gb": "Nvidia H200 141GB GPU", "nvidia-b200": "Nvidia B200 GPU"}
SRC_MACHINES = ("GCP Compute Engine machineTypes.aggregatedList (guestCpus, memoryMb, "
                "accelerators, zones)")
SRC_BILLING = ("GCP Cloud Billing Catalog API, Compute Engine SKUs: vCPUs x '<FAMILY> Instance "
               "Core' + GiB x '<FAMILY> Instance Ram' + GPUs x the GPU SKU, OnDemand and "
               "Preemptible (spot), by serviceRegions")


def _usd(sku: dict[str, Any]) -> float | None:
    for info in sku.get("pricingInfo", []):
        rates = (info.get("pricingExpression") or {}).get("tieredRates") or []
        for rate in reversed(rates):  # the last tier is the price past any free tier
            unit = rate.get("unitPrice") or {}
            value = int(unit.get("units") or 0) + int(unit.get("nanos") or 0) / 1e9
            if value > 0:
                return value
    return None


def _component(skus: list[dict[str, Any]], prefix: str, region: str, usage: str
               ) -> float | None:
    for s in skus:
        cat = s.get("category") or {}
        if (str(s.get("description", "")).startswith(prefix)
                and region in (s.get("serviceRegions") or [])
                and cat.get("usageType") == usage):
            return _usd(s)
    return None


def machine_price(skus: list[dict[str, Any]], machine: str, vcpus: int, mem_gib: float,
                  accel: str | None, gpus: int, region: str, usage: str) -> float | None:
    """The machine's $/h in ``region`` from core, RAM and GPU SKUs; None unless all are found
    (a partial sum would be a wrong price)."""
    family = machine.split("-")[0].upper()
    spot = "Spot Preemptible " if usage == "Preemptible" else ""  # spot SKUs' descriptions
    core = _component(skus, f"{spot}{family} Instance Core running in", region, usage)
    ram = _component(skus, f"{spot}{family} Instance Ram running in", region, usage)
    if core is None or ram is None:
        return None
    total = vcpus * core + mem_gib * ram
    if gpus:
        gpu = _component(skus, f"{spot}{GPU_SKU.get(accel or '', '?')} running in", region,
                         usage)
        if gpu is None:
            return None
        total += gpus * gpu
    return round(total, 4)


def _billing_skus(self: GcpProvider) -> list[dict[str, Any]]:
    from google.auth.transport.requests import AuthorizedSession

    if self._credentials is None:
        self.project  # noqa: B018 - resolves the default credentials
    session = AuthorizedSession(self._credentials)
    base = self.billing_url.rstrip("/")
    out: list[dict[str, Any]] = []
    token = ""
    for _ in range(200):  # the catalog is paged; bounded
        params = {"currencyCode": "USD", "pageSize": "5000"}
        if token:
            params["pageToken"] = token
        from advisor.clouds.base import CONNECT_TIMEOUT_S, check_deadline, read_timeout_s

        check_deadline("gcp")
        r = session.get(f"{base}/v1/{BILLING_SERVICE}/skus", params=params,
                        timeout=(CONNECT_TIMEOUT_S, read_timeout_s()))
        if r.status_code != 200:
            raise CloudError("gcp", f"HTTP{r.status_code}", r.text[:200], "region", kind="error")
        doc = r.json()
        out += doc.get("skus", [])
        token = doc.get("nextPageToken") or ""
        if not token:
            break
    return out


def catalog_facts(self: GcpProvider, regions: list[str], doc: dict[str, Any]) -> list[Any]:
    from advisor.clouds.refresh import ApiFacts, ApiPrice

    compute = _compute()
    req = compute.AggregatedListMachineTypesRequest(project=self.project,
                                                    filter=f'name eq "{GPU_FAMILIES}"')
    found: dict[str, dict[str, Any]] = {}
    for scope, listed in self._do(self._client("MachineTypesClient").aggregated_list,
                                  request=req):
        zone = scope.split("/")[-1]
        region = zone.rsplit("-", 1)[0]
        if region not in regions:
            continue
        for mt in listed.machine_types:
            accels = list(mt.accelerators)
            if not accels:
                continue
            f = found.setdefault(mt.name, {"mt": mt, "regions": set()})
            f["regions"].add(region)
    self.notes = []
    try:
        skus = _billing_skus(self)
    except CloudError as err:
        if err.scope == "provider":
            raise
        skus = []
        self.notes.append(f"prices: the Cloud Billing Catalog answered {err.code}; the "
                          "catalog's prices are kept")
    current = {e.get("name"): e for e in doc.get("instances", [])}
    out = []
    for name, f in sorted(found.items()):
        mt = f["mt"]
        acc = mt.accelerators[0]
        key, count = str(acc.guest_accelerator_type), int(acc.guest_accelerator_count)
        mem = round(mt.memory_mb / 1024, 2)
        old = ((current.get(name) or {}).get("price") or {}).get("region")
        where = str(old) if old in f["regions"] else sorted(f["regions"])[0]
        on_demand = machine_price(skus, name, mt.guest_cpus, mem, key, count, where,
                                  "OnDemand") if skus else None
        spot = machine_price(skus, name, mt.guest_cpus, mem, key, count, where,
                             "Preemptible") if skus else None
        if skus and on_demand is None:
            self.notes.append(f"{name}: no complete set of core, RAM and GPU SKUs in {where}")
        out.append(ApiFacts(
            name=name, vcpus=mt.guest_cpus, memory_gib=mem, gpu_key=key, gpu_count=count,
            regions=sorted(f["regions"]),
            price=ApiPrice(region=where, on_demand_usd_per_hour=on_demand,
                           spot_usd_per_hour=spot, source=SRC_BILLING),
            sources={"default": SRC_MACHINES}))
    return out
