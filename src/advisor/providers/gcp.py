"""GCP backend (google-cloud-compute, imported on first use, REST transport).

One deployment is: an instance with the deployment's labels and a network tag
``advisor-<name>``, the rendered cloud-config as ``user-data`` metadata, the GPU base image
(Canonical's Ubuntu accelerator image with the NVIDIA driver), ``onHostMaintenance=TERMINATE``
(GPU VMs cannot live-migrate), ``guestAccelerators`` only for machine types that do not bundle
their GPUs (A2, A3, A4 and G2 do), spot as ``provisioningModel=SPOT``, and a ``requestId`` derived
from the deployment, zone and type so that a retried insert creates nothing twice. Firewall
rules are made only for ``--allow-cidr`` (the vLLM ports) and ``--ssh-cidr`` (22), each aimed
at the deployment's network tag.

``endpoint`` and ``credentials`` are the seams the tests use: a local HTTP endpoint and
anonymous credentials.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from advisor.errors import UserInputError
from advisor.providers.base import (
    TAG_DEPLOYMENT,
    CloudError,
    LaunchSpec,
    QuotaStatus,
    quota_status,
)
from advisor.state import InstanceRow, ResourceRow

#: Canonical's GPU image family on GCP (NVIDIA driver preinstalled; runs cloud-init)
IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
         "ubuntu-accelerator-2204-amd64-with-nvidia-580")
#: machine families whose GPUs come with the machine type (no guestAccelerators)
BUNDLED = ("a2-", "a3-", "a4-", "a4x-", "g2-", "g4-")
#: GPU accelerator type names for the families that attach GPUs explicitly (N1)
ACCELERATOR_TYPES = {"T4": "nvidia-tesla-t4", "L4": "nvidia-l4", "V100": "nvidia-tesla-v100",
                     "P100": "nvidia-tesla-p100", "A100-40GB-SXM": "nvidia-tesla-a100"}
#: regional quota metric per GPU (compute_v1.Quota.Metric); spot uses PREEMPTIBLE_<metric>
QUOTA_METRICS = {"A100-40GB-SXM": "NVIDIA_A100_GPUS", "A100-80GB-SXM": "NVIDIA_A100_80GB_GPUS",
                 "H100-SXM": "NVIDIA_H100_GPUS", "L4": "NVIDIA_L4_GPUS", "T4": "NVIDIA_T4_GPUS"}
CAPACITY = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            "RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "RESOURCE_NOT_FOUND_IN_ZONE"}
QUOTA = {"QUOTA_EXCEEDED", "QUOTAEXCEEDED", "QUOTA_LIMIT_EXCEEDED", "REGION_QUOTA_EXCEEDED"}
GONE = {"DELETED"}


def _compute() -> Any:
    try:
        from google.cloud import compute_v1
    except ModuleNotFoundError as exc:
        raise UserInputError("the gcp SDK is not installed (google-cloud-compute)",
                             hint="pip install 'advisor[gcp]'") from exc
    return compute_v1


def request_id(*parts: str) -> str:
    """A UUID (what GCP's requestId must be) that is the same for the same launch."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "advisor:" + ":".join(parts)))


def net_tag(deployment: str) -> str:
    return f"advisor-{deployment}"


def disk_type(machine_type: str) -> str:
    # A3 Ultra boots from Hyperdisk Balanced (Vertex AI DiskSpec: "for A3U machines, the
    # default value is hyperdisk-balanced", pd-ssd otherwise); A4 is taken to be the same
    if machine_type.startswith(("a3-ultragpu", "a4-", "a4x-")):
        return "hyperdisk-balanced"
    return "pd-ssd"


def firewall_bodies(spec: LaunchSpec) -> list[dict[str, Any]]:
    lo, hi = min(spec.ports), max(spec.ports)
    out = []
    if spec.nodes > 1:  # Ray and NCCL between the replica's own instances, nobody else
        out.append({"name": f"advisor-{spec.deployment}-internal",
                    "description": f"advisor deployment {spec.deployment}: multi-node members",
                    "network": spec.options.get("network", "global/networks/default"),
                    "direction": "INGRESS", "priority": 1000,
                    "sourceTags": [net_tag(spec.deployment)],
                    "targetTags": [net_tag(spec.deployment)],
                    "allowed": [{"IPProtocol": "tcp"}, {"IPProtocol": "udp"},
                                {"IPProtocol": "icmp"}]})
    for suffix, cidrs, ports in (("vllm", spec.allow_cidrs, f"{lo}-{hi}" if hi > lo else str(lo)),
                                 ("ssh", spec.ssh_cidrs, "22")):
        if cidrs:
            out.append({"name": f"advisor-{spec.deployment}-{suffix}",
                        "description": f"advisor deployment {spec.deployment}",
                        "network": spec.options.get("network", "global/networks/default"),
                        "direction": "INGRESS", "priority": 1000,
                        "sourceRanges": list(cidrs), "targetTags": [net_tag(spec.deployment)],
                        "allowed": [{"IPProtocol": "tcp", "ports": [ports]}]})
    return out


def instance_body(spec: LaunchSpec, zone: str) -> dict[str, Any]:
    dtype = spec.options.get("disk_type") or disk_type(spec.instance_type)
    body: dict[str, Any] = {
        "name": spec.vm_name,
        "machineType": f"zones/{zone}/machineTypes/{spec.instance_type}",
        "labels": dict(spec.labels),
        "tags": {"items": [net_tag(spec.deployment)]},
        "metadata": {"items": [{"key": "user-data", "value": spec.user_data},
                               {"key": "enable-oslogin", "value": "TRUE"}]},
        "disks": [{"boot": True, "autoDelete": True, "type": "PERSISTENT",
                   "initializeParams": {
                       "sourceImage": spec.image or IMAGE,
                       "diskSizeGb": str(spec.disk_gib),
                       "diskType": f"zones/{zone}/diskTypes/{dtype}",
                       "labels": dict(spec.labels)}}],
        "networkInterfaces": [{
            "network": spec.options.get("network", "global/networks/default"),
            "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}],
        "serviceAccounts": [{"email": spec.options.get("service_account", "default"),
                             "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
        "shieldedInstanceConfig": {"enableSecureBoot": False, "enableVtpm": True,
                                   "enableIntegrityMonitoring": True},
    }
    if spec.spot:
        body["scheduling"] = {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                              "onHostMaintenance": "TERMINATE", "automaticRestart": False}
    else:
        body["scheduling"] = {"onHostMaintenance": "TERMINATE", "automaticRestart": True}
    if not spec.instance_type.startswith(BUNDLED):
        acc = ACCELERATOR_TYPES.get(spec.gpu_model)
        if acc is None:
            raise UserInputError(f"no GCP accelerator type known for {spec.gpu_model} on "
                                 f"{spec.instance_type}",
                                 hint="use an A2/A3/A4/G2 machine type, which bundles its GPUs")
        body["guestAccelerators"] = [{"acceleratorType": f"zones/{zone}/acceleratorTypes/{acc}",
                                      "acceleratorCount": spec.gpu_count}]
    return body


class GcpProvider:
    name = "gcp"

    def __init__(self, project: str | None = None, credentials: Any = None,
                 endpoint: str | None = None, timeout_s: float = 600,
                 sleep: Callable[[float], None] = time.sleep, billing_url: str | None = None,
                 **_: Any) -> None:
        self.billing_url = billing_url or BILLING_URL
        self.notes: list[str] = []
        self._project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get(
            "CLOUDSDK_CORE_PROJECT")
        self._credentials = credentials
        self._endpoint = endpoint
        self.timeout_s = timeout_s
        self.sleep = sleep
        self._clients: dict[str, Any] = {}

    @property
    def project(self) -> str:
        if self._project is None:
            try:
                import google.auth

                creds, project = google.auth.default()
            except Exception as exc:
                raise CloudError("gcp", "NoCredentials", str(exc), "provider",
                                 hint="run 'gcloud auth application-default login' or set "
                                 "GOOGLE_APPLICATION_CREDENTIALS") from exc
            if not project:
                raise UserInputError("no GCP project given",
                                     hint="pass --project or set GOOGLE_CLOUD_PROJECT")
            self._credentials = self._credentials or creds
            self._project = project
        return self._project

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            compute = _compute()
            opts = {"api_endpoint": self._endpoint} if self._endpoint else None
            self._clients[kind] = getattr(compute, kind)(
                credentials=self._credentials, transport="rest", client_options=opts)
        return self._clients[kind]

    # -- errors -----------------------------------------------------------------------------
    def classify(self, exc: BaseException) -> BaseException:
        from google.api_core import exceptions as gexc

        if isinstance(exc, CloudError | UserInputError):
            return exc
        if not isinstance(exc, gexc.GoogleAPICallError):
            import google.auth.exceptions as aexc

            if isinstance(exc, aexc.GoogleAuthError):
                return CloudError("gcp", type(exc).__name__, str(exc), "provider",
                                  hint="check the GCP credentials")
            return exc
        codes: list[str] = []
        resp = getattr(exc, "response", None)
        for e in getattr(getattr(resp, "error", None), "errors", None) or []:
            codes.append(str(getattr(e, "code", "")))
        for e in getattr(exc, "errors", None) or []:
            if isinstance(e, dict):
                codes += [str(e.get("reason", "")), str(e.get("code", ""))]
            else:
                codes.append(str(getattr(e, "code", "") or getattr(e, "reason", "")))
        codes = [c for c in codes if c]
        upper = {c.upper() for c in codes}
        msg = exc.message or str(exc)
        code = codes[0] if codes else type(exc).__name__
        if upper & CAPACITY or "does not have enough resources" in msg:
            return CloudError("gcp", next(iter(sorted(upper & CAPACITY)), code), msg, "zone")
        if upper & QUOTA or "Quota '" in msg:
            return CloudError("gcp", next(iter(sorted(upper & QUOTA)), code), msg, "region",
                              hint="request more GPU quota for the region (IAM & Admin > "
                              "Quotas)")
        if exc.code in (401, 403):
            return CloudError("gcp", code, msg, "provider",
                              hint="check that the credentials may use Compute Engine in "
                              "this project")
        if exc.code == 404 and "machineType" in msg:
            return CloudError("gcp", code, msg, "zone")
        return CloudError("gcp", code, msg, "fatal")

    def _do(self, fn: Callable[..., Any], **kw: Any) -> Any:
        try:
            return fn(**kw)
        except Exception as exc:
            raise self.classify(exc) from exc

    def _wait(self, op: Any) -> None:
        try:
            op.result(timeout=self.timeout_s)
        except Exception as exc:
            raise self.classify(exc) from exc

    # -- requests ---------------------------------------------------------------------------
    def request(self, spec: LaunchSpec, zone: str | None) -> dict[str, Any]:
        z = zone or f"{spec.region}-<zone>"
        calls: list[dict[str, Any]] = [{"call": "compute.firewalls.insert", "body": b}
                                       for b in firewall_bodies(spec)]
        calls.append({"call": "compute.instances.insert", "zone": z,
                      "requestId": request_id(spec.vm_name, z, spec.instance_type),
                      "body": instance_body(spec, z)})
        return {"provider": "gcp", "project": self._project or "<project>",
                "region": spec.region, "zone": zone, "calls": calls}

    # -- look-ups ---------------------------------------------------------------------------
    def zones(self, spec: LaunchSpec) -> list[str | None]:
        compute = _compute()
        req = compute.AggregatedListMachineTypesRequest(
            project=self.project, filter=f'name = "{spec.instance_type}"')
        out = set()
        for scope, listed in self._do(self._client("MachineTypesClient").aggregated_list,
                                      request=req):
            zone = scope.split("/")[-1]
            if zone.startswith(spec.region + "-") and listed.machine_types:
                out.add(zone)
        return sorted(out)

    def check_quota(self, spec: LaunchSpec) -> QuotaStatus:
        metric = QUOTA_METRICS.get(spec.gpu_model)
        if metric is None:
            return QuotaStatus(checked=False, detail=f"no regional quota metric known for "
                               f"{spec.gpu_model}")
        if spec.spot:
            metric = "PREEMPTIBLE_" + metric
        try:
            region = self._client("RegionsClient").get(project=self.project, region=spec.region)
        except Exception as exc:
            return QuotaStatus(checked=False, detail=f"quota not readable: "
                               f"{' '.join(str(exc).split())[:200]}")
        for q in region.quotas:
            name = q.metric if isinstance(q.metric, str) else getattr(q.metric, "name", "")
            if name == metric:
                return quota_status(metric, spec.region, q.limit, q.usage, spec.gpu_count,
                                    "GPUs", spec.instance_type)
        return QuotaStatus(checked=False, detail=f"{metric} not listed for {spec.region}")

    def find(self, deployment: str, region: str) -> list[InstanceRow]:
        compute = _compute()
        req = compute.AggregatedListInstancesRequest(
            project=self.project, filter=f'labels.{TAG_DEPLOYMENT} = "{deployment}"')
        out = []
        for scope, listed in self._do(self._client("InstancesClient").aggregated_list,
                                      request=req):
            zone = scope.split("/")[-1]
            if not zone.startswith(region + "-"):
                continue
            for i in listed.instances:
                if i.labels.get(TAG_DEPLOYMENT) != deployment:
                    continue
                out.append(self._row(i, region, zone))
        return out

    @staticmethod
    def _row(i: Any, region: str, zone: str) -> InstanceRow:
        nic = i.network_interfaces[0] if i.network_interfaces else None
        public = None
        if nic is not None and nic.access_configs:
            public = nic.access_configs[0].nat_i_p or None
        status = str(i.status).lower()
        # GCP's TERMINATED is a stopped VM that still exists (and still holds its disk)
        state = "stopped" if status == "terminated" else status
        return InstanceRow(id=str(i.name), provider="gcp", region=region, zone=zone,
                           instance_type=str(i.machine_type).split("/")[-1], state=state,
                           private_ip=(nic.network_i_p or None) if nic else None,
                           public_ip=public)

    # -- changes ----------------------------------------------------------------------------
    def ensure_network(self, spec: LaunchSpec) -> list[ResourceRow]:
        compute = _compute()
        fw = self._client("FirewallsClient")
        out = []
        for body in firewall_bodies(spec):
            try:
                op = fw.insert(project=self.project,
                               firewall_resource=compute.Firewall.from_json(json.dumps(body)))
                self._wait(op)
            except Exception as exc:
                err = self.classify(exc)
                if not (isinstance(err, CloudError) and "alreadyExists" in (err.code + err.detail)
                        or "already exists" in str(err)):
                    raise err from exc
            out.append(ResourceRow(kind="firewall", id=body["name"], region=spec.region))
        return out

    def launch(self, spec: LaunchSpec, zone: str | None) -> InstanceRow:
        compute = _compute()
        assert zone is not None, "GCP instances live in a zone"
        call = self.request(spec, zone)["calls"][-1]
        req = compute.InsertInstanceRequest(
            project=self.project, zone=zone, request_id=call["requestId"],
            instance_resource=compute.Instance.from_json(json.dumps(call["body"])))
        op = self._do(self._client("InstancesClient").insert, request=req)
        self._wait(op)
        inst = self._do(self._client("InstancesClient").get, project=self.project, zone=zone,
                        instance=spec.vm_name)
        return self._row(inst, spec.region, zone)

    def catalog_facts(self, regions: list[str], doc: dict[str, Any]) -> list[Any]:
        """What the machine-type and Cloud Billing Catalog APIs state about every GPU machine
        type offered in ``regions`` (for ``advisor catalog refresh``)."""
        return _catalog_facts(self, regions, doc)

    def terminate(self, deployment: str, region: str) -> list[str]:
        removed = []
        client = self._client("InstancesClient")
        for i in self.find(deployment, region):
            self._wait(self._do(client.delete, project=self.project, zone=i.zone,
                                instance=i.id))
            removed.append(i.id)
        fw = self._client("FirewallsClient")
        compute = _compute()
        req = compute.ListFirewallsRequest(project=self.project,
                                           filter=f'name = "advisor-{deployment}-*"')
        for rule in self._do(fw.list, request=req):
            if not str(rule.name).startswith(f"advisor-{deployment}-"):
                continue
            self._wait(self._do(fw.delete, project=self.project, firewall=rule.name))
            removed.append(f"firewall:{rule.name}")
        return removed


# -- catalog refresh ---------------------------------------------------------------------------
#: Compute Engine's service in the Cloud Billing Catalog API
BILLING_SERVICE = "services/6F81-5844-456A"
BILLING_URL = "https://cloudbilling.googleapis.com"
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
        r = session.get(f"{base}/v1/{BILLING_SERVICE}/skus", params=params, timeout=60)
        if r.status_code != 200:
            raise CloudError("gcp", f"HTTP{r.status_code}", r.text[:200], "region", kind="error")
        doc = r.json()
        out += doc.get("skus", [])
        token = doc.get("nextPageToken") or ""
        if not token:
            break
    return out


def _catalog_facts(self: GcpProvider, regions: list[str], doc: dict[str, Any]) -> list[Any]:
    from advisor.refresh import ApiFacts, ApiPrice

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
