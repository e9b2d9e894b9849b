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

from advisor.clouds.base import (
    TAG_DEPLOYMENT,
    CloudError,
    LaunchSpec,
    QuotaStatus,
)
from advisor.errors import UserInputError
from advisor.state import InstanceRow, ResourceRow

#: Canonical's GPU image family on GCP (NVIDIA driver preinstalled; runs cloud-init)
IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
         "ubuntu-accelerator-2204-amd64-with-nvidia-580")
#: machine families whose GPUs come with the machine type (no guestAccelerators)
BUNDLED = ("a2-", "a3-", "a4-", "a4x-", "g2-", "g4-")
#: GPU accelerator type names for the families that attach GPUs explicitly (N1)
ACCELERATOR_TYPES = {"T4": "nvidia-tesla-t4", "L4": "nvidia-l4", "V100": "nvidia-tesla-v100",
                     "P100": "nvidia-tesla-p100", "A100-40GB-SXM": "nvidia-tesla-a100"}
CAPACITY = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            "RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "RESOURCE_NOT_FOUND_IN_ZONE"}
QUOTA = {"QUOTA_EXCEEDED", "QUOTAEXCEEDED", "QUOTA_LIMIT_EXCEEDED", "REGION_QUOTA_EXCEEDED"}
GONE = {"DELETED"}
#: the Cloud Billing Catalog API (catalog refresh reads prices there)
BILLING_URL = "https://cloudbilling.googleapis.com"


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
        # "A firewall rule can contain either IPv4 or IPv6 ranges, but not both": one per family
        for family, ranges in (("", [c for c in cidrs if ":" not in c]),
                               ("-v6", [c for c in cidrs if ":" in c])):
            if ranges:
                out.append({"name": f"advisor-{spec.deployment}-{suffix}{family}",
                            "description": f"advisor deployment {spec.deployment}",
                            "network": spec.options.get("network", "global/networks/default"),
                            "direction": "INGRESS", "priority": 1000,
                            "sourceRanges": ranges, "targetTags": [net_tag(spec.deployment)],
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
        from advisor.clouds.gcp.quota import check_quota

        return check_quota(self, spec)

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
        from advisor.clouds.gcp.refresh import catalog_facts

        return catalog_facts(self, regions, doc)

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
