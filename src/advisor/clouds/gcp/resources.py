"""What advisor makes on GCP, by name and request body, and how it reads what it finds: pure
functions and constants, no API call (:mod:`advisor.clouds.gcp.compute` makes the calls;
:mod:`~advisor.clouds.gcp.preflight` and :mod:`~advisor.clouds.gcp.refresh` read the same names
from here, so no module of this folder imports the provider at run time)."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from advisor.clouds.base import (
    TAG_ATTEMPT,
    CloudError,
    LaunchSpec,
)
from advisor.clouds.gcp.secrets import KEY_SCHEME
from advisor.errors import UserInputError

#: Canonical's GPU image family on GCP (NVIDIA driver preinstalled; runs cloud-init)
IMAGE = ("projects/ubuntu-os-accelerator-images/global/images/family/"
         "ubuntu-accelerator-2204-amd64-with-nvidia-580")
#: machine families whose GPUs come with the machine type (no guestAccelerators)
BUNDLED = ("a2-", "a3-", "a4-", "a4x-", "g2-", "g4-")
#: catalog GPU id (catalogs/gpus.yaml) -> GCP accelerator type, for the machine types that
#: attach their GPUs explicitly (N1). GCP's V100 is the 16 GB SXM2 part; P100 and P4 are left
#: out (compute capability 6.x, below vLLM's 7.0). L4 and A100 40GB come bundled with G2 and A2
#: and are named here only so that a catalog entry of an unbundled type could resolve them.
ACCELERATOR_TYPES = {"T4": "nvidia-tesla-t4", "V100-SXM2-16GB": "nvidia-tesla-v100",
                     "L4": "nvidia-l4", "A100-40GB-SXM": "nvidia-tesla-a100"}
CAPACITY = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
            "RESOURCE_POOL_EXHAUSTED", "STOCKOUT", "RESOURCE_NOT_FOUND_IN_ZONE"}
QUOTA = {"QUOTA_EXCEEDED", "QUOTAEXCEEDED", "QUOTA_LIMIT_EXCEEDED", "REGION_QUOTA_EXCEEDED"}
GONE = {"DELETED"}
#: the Cloud Billing Catalog API (catalog refresh reads prices there)
BILLING_URL = "https://cloudbilling.googleapis.com"
#: the IAM API (the deployment's service account) and Secret Manager (its one binding)
IAM_URL = "https://iam.googleapis.com"
SECRETMANAGER_URL = "https://secretmanager.googleapis.com"
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"
#: Google's advice for instances with a service account (Compute Engine docs, "Service accounts
#: > Access scopes"): set the broad cloud-platform scope and limit what the account may do with
#: IAM roles; here IAM allows exactly one role on one or two secrets
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
DEFAULT_NETWORK = "global/networks/default"


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


def _not_found(err: CloudError) -> bool:
    """The resource asked for does not exist (a delete that found nothing: gone meanwhile,
    another down, a crash after the delete). Read off the error's code (google-api-core's
    reason ``notFound`` or its ``NotFound`` class, REST's ``NOT_FOUND`` or ``HTTP404``) and
    the words "not found" in its message, never off a bare "404" in the message: the message
    quotes URLs and resource names, and a port (127.0.0.1:40455) or a deployment called
    llama-404 would make any error, a failed delete included, look like "already gone"."""
    code = err.code.lower().replace("_", "")
    return "notfound" in code or code in ("404", "http404") or "not found" in err.detail.lower()


def network_path(value: str | None) -> str:
    """``--network``: a network's name or its ``projects/P/global/networks/N`` path, as the
    partial URL that instances and firewall rules take."""
    if not value:
        return DEFAULT_NETWORK
    return value if "/" in value else f"global/networks/{value}"


def with_network(spec: LaunchSpec) -> LaunchSpec:
    """``spec`` with its ``network`` option written as a path (the firewall rules read it)."""
    net = spec.options.get("network")
    if not net or network_path(net) == net:
        return spec
    return spec.model_copy(update={"options": {**spec.options, "network": network_path(net)}})


def has_ingress(spec: LaunchSpec) -> bool:
    """Whether anything outside may reach the instance: only then does it get an external IP."""
    return bool(spec.allow_cidrs or spec.ssh_cidrs)


def sa_id(deployment: str) -> str:
    """The account id of the deployment's service account, ``advisor-NAME``; ids hold 6-30
    characters, so a longer one is cut and ends in a hash of the name (never shared)."""
    base = f"advisor-{deployment}"
    if len(base) <= 30:
        return base
    digest = hashlib.sha256(deployment.encode()).hexdigest()[:6]
    return f"{base[:23].rstrip('-')}-{digest}"


def sa_email(deployment: str, project: str) -> str:
    domain, _, pid = project.rpartition(":")  # a domain-scoped project: example.com:proj
    return f"{sa_id(deployment)}@{pid}{'.' + domain if domain else ''}.iam.gserviceaccount.com"


def sa_display_name(deployment: str) -> str:
    return f"advisor: deployment {deployment}"


def owner_text(spec: LaunchSpec) -> str:
    """What a resource without labels (firewall rule, service account) says about its maker, at
    the start of its description: ``advisor deployment NAME[ attempt ID]``."""
    attempt = spec.labels.get(TAG_ATTEMPT)
    return f"advisor deployment {spec.deployment}" + (f" attempt {attempt}" if attempt else "")


_OWNER = re.compile(r"^advisor deployment ([a-z0-9-]+)(?: attempt ([a-z0-9_-]+))?(?=$|[:\s])")


def described_owner(description: str) -> tuple[str | None, str | None]:
    """(deployment, attempt) that a description written by :func:`owner_text` names."""
    m = _OWNER.match(description or "")
    return (m.group(1), m.group(2)) if m else (None, None)


def firewall_names(deployment: str) -> set[str]:
    """Every firewall rule name :func:`firewall_bodies` can give the deployment (exact names:
    ``advisor-a-`` is not a prefix search, which would also find ``advisor-a-b-vllm``)."""
    return {f"advisor-{deployment}-{s}" for s in ("internal", "vllm", "vllm-v6", "ssh",
                                                  "ssh-v6")}


def secret_names(spec: LaunchSpec) -> list[str]:
    """The Secret Manager secrets the instance reads (API key, Hugging Face token)."""
    out: list[str] = []
    for ref in (spec.api_key_ref, spec.hf_token_ref):
        if ref and ref.startswith(KEY_SCHEME.prefix):
            name = ref.removeprefix(KEY_SCHEME.prefix)
            if name not in out:
                out.append(name)
    return out


def service_account_body(spec: LaunchSpec) -> dict[str, Any]:
    """``projects.serviceAccounts.create``; the description names the secrets, so that ``down``
    (which has no spec) knows which bindings to take out."""
    secrets = secret_names(spec)
    return {"accountId": sa_id(spec.deployment), "serviceAccount": {
        "displayName": sa_display_name(spec.deployment),
        "description": (f"{owner_text(spec)} reads: "
                        f"{' '.join(secrets) or '-'}")[:256]}}


def described_secrets(description: str) -> list[str]:
    _, sep, names = description.partition(" reads: ")
    return [n for n in names.split() if n != "-"] if sep else []


def firewall_bodies(spec: LaunchSpec) -> list[dict[str, Any]]:
    lo, hi = min(spec.ports), max(spec.ports)
    out = []
    if spec.nodes > 1:  # Ray and NCCL between the replica's own instances, nobody else
        out.append({"name": f"advisor-{spec.deployment}-internal",
                    "description": f"{owner_text(spec)}: multi-node members",
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
                            "description": owner_text(spec),
                            "network": spec.options.get("network", "global/networks/default"),
                            "direction": "INGRESS", "priority": 1000,
                            "sourceRanges": ranges, "targetTags": [net_tag(spec.deployment)],
                            "allowed": [{"IPProtocol": "tcp", "ports": [ports]}]})
    return out


def instance_body(spec: LaunchSpec, zone: str, service_account: str) -> dict[str, Any]:
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
        "networkInterfaces": [{"network": network_path(spec.options.get("network"))}],
        # the deployment's own account (never the default one, which holds Editor); the broad
        # scope is Google's advice, IAM decides (see CLOUD_PLATFORM)
        "serviceAccounts": [{"email": service_account, "scopes": [CLOUD_PLATFORM]}],
        "shieldedInstanceConfig": {"enableSecureBoot": False, "enableVtpm": True,
                                   "enableIntegrityMonitoring": True},
    }
    if has_ingress(spec):  # an external IP only when something outside may reach it
        body["networkInterfaces"][0]["accessConfigs"] = [{"name": "External NAT",
                                                          "type": "ONE_TO_ONE_NAT"}]
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


# -- egress (Cloud NAT), issue 27 item 3 -----------------------------------------------------
# An instance gets an external IP only when ``--allow-cidr`` or ``--ssh-cidr`` opens something
# (:func:`has_ingress`). Without one, apt, pip, the Hugging Face Hub
# and Secret Manager are reachable only through Cloud NAT on the instance's network in its region
# ("Cloud NAT lets certain resources that don't have external IP addresses create outbound
# connections to the internet", https://cloud.google.com/nat/docs/overview). Opening ingress is
# never the answer to missing egress: advisor finds a NAT or makes one.
#
# ``--gcp-nat`` (:data:`MODES`):
#
# * ``auto`` (default) — a NAT on the network in the region that serves the instance's subnet is
#   used as found (never removed by advisor); without one advisor makes the deployment's own
#   (router ``advisor-<deployment>-nat`` with one NAT config), which ``down`` removes;
# * ``create`` — no look-up: advisor makes its own (a network that already has a NAT in the region
#   refuses it, see :data:`EXCLUSIVE`);
# * ``existing-only`` — a NAT must be there; without one ``provision`` stops with the gcloud
#   commands that make one (:func:`fix_command`).
#
# Shapes (Compute Engine REST v1, https://cloud.google.com/compute/docs/reference/rest/v1/routers):
# a ``Router`` has ``name``, ``description``, ``network`` (a URL), ``region`` and ``nats[]``; each
# ``RouterNat`` has ``name``, ``natIpAllocateOption`` (``AUTO_ONLY`` | ``MANUAL_ONLY``),
# ``sourceSubnetworkIpRangesToNat`` and, for ``LIST_OF_SUBNETWORKS``, ``subnetworks[]`` of
# ``{name: <subnetwork URL>, sourceIpRangesToNat: [ALL_IP_RANGES | PRIMARY_IP_RANGE |
# LIST_OF_SECONDARY_IP_RANGES]}``. Routers carry no labels: like the firewall rules, advisor's
# router says its maker at the start of its ``description`` (:func:`owner_text`).
#
# Known limit: a NAT advisor made for deployment A is what deployment B (same network and
# region, later) finds, since a second NAT for all subnets may not sit beside it; it belongs to A
# and goes with ``advisor down A`` (B is told so when it finds it).
#
# The helpers below are pure; GcpProvider makes the calls.

#: ``--gcp-nat`` values (options.py offers them; the first is the default)
MODES = ("auto", "create", "existing-only")
NatMode = Literal["auto", "create", "existing-only"]
#: RouterNat.sourceSubnetworkIpRangesToNat values that serve every subnet's primary range (an
#: instance's address is in its subnet's primary range). RouterNat reference: "if this field
#: contains ALL_SUBNETWORKS_ALL_IP_RANGES or ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES, then there
#: should not be any other Router.Nat section in any Router for this network in this region"
EXCLUSIVE = ("ALL_SUBNETWORKS_ALL_IP_RANGES", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES")
LIST_OF_SUBNETWORKS = "LIST_OF_SUBNETWORKS"
#: RouterNatSubnetworkToNat.sourceIpRangesToNat values that include the primary range
PRIMARY = ("ALL_IP_RANGES", "PRIMARY_IP_RANGE")
#: what advisor's own NAT config asks for (the same routers reference): Google allocates the
#: external addresses, every subnet of the network in the region is served
OWN_NAT = {"natIpAllocateOption": "AUTO_ONLY",
           "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}


def nat_mode(spec: LaunchSpec) -> NatMode:
    value = spec.options.get("nat") or "auto"
    if value not in MODES:
        raise UserInputError(f"--gcp-nat {value!r} is not one of {', '.join(MODES)}",
                             hint="auto finds or makes a Cloud NAT, create always makes one, "
                             "existing-only only uses one that is there")
    return value  # type: ignore[return-value]


def router_name(deployment: str) -> str:
    """The router advisor makes for a deployment (its one NAT config has the same name);
    names are RFC 1035, 1-63 characters: a deployment name holds at most 40."""
    return f"advisor-{deployment}-nat"


_NET = re.compile(r"(?:^|/)projects/([^/]+)/global/networks/([^/]+)\Z")


def network_key(network: str, project: str) -> tuple[str, str]:
    """(project, name) of a network given as a URL, ``projects/P/global/networks/N`` or
    ``global/networks/N`` (then in ``project``)."""
    m = _NET.search(network)
    if m:
        return m.group(1), m.group(2)
    return project, network.rstrip("/").rsplit("/", 1)[-1]


def _last_part(url: str) -> str:
    """The name at the end of a resource URL."""
    return url.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Nat:
    """One NAT config of one router, as far as egress needs it."""

    router: str
    name: str
    region: str
    #: (project, name) of the router's network
    network: tuple[str, str]
    #: sourceSubnetworkIpRangesToNat
    ranges: str
    #: for LIST_OF_SUBNETWORKS: names of the subnets whose primary range it serves
    subnets: tuple[str, ...] = ()
    #: every subnet it names, whichever range
    named: tuple[str, ...] = ()
    description: str = ""

    @property
    def serves_all(self) -> bool:
        return self.ranges in EXCLUSIVE


def nats_of(router: dict[str, Any], region: str, project: str) -> list[Nat]:
    """The NAT configs of a router given as its REST JSON (camelCase, as the routers reference
    shows it)."""
    out = []
    net = network_key(str(router.get("network", "")), project)
    for n in router.get("nats") or []:
        subs = n.get("subnetworks") or []
        out.append(Nat(router=str(router.get("name", "")), name=str(n.get("name", "")),
                       region=region, network=net,
                       ranges=str(n.get("sourceSubnetworkIpRangesToNat", "")),
                       subnets=tuple(_last_part(str(s.get("name", ""))) for s in subs
                                     if set(s.get("sourceIpRangesToNat") or ["ALL_IP_RANGES"])
                                     & set(PRIMARY)),
                       named=tuple(_last_part(str(s.get("name", ""))) for s in subs),
                       description=str(router.get("description", ""))))
    return out


@dataclass(frozen=True)
class Egress:
    """What the look-up found, for ensure_network, preflight and the dry run.

    ``kind``: ``external-ip`` (ingress asked: no NAT needed), ``found`` (``nat`` serves the
    subnet), ``make`` (advisor makes its own), ``missing`` (none, and existing-only),
    ``conflict`` (the network has NAT configs in the region that do not serve the subnet: a
    NAT for all subnets would be refused, see :data:`EXCLUSIVE`), ``shared-vpc`` (none, and
    the network lives in another project, where advisor makes nothing)."""

    kind: Literal["external-ip", "found", "make", "missing", "conflict", "shared-vpc"]
    nat: Nat | None = None
    others: tuple[Nat, ...] = ()
    #: the subnets of the network in the region (only looked up for LIST_OF_SUBNETWORKS)
    subnets: tuple[str, ...] = ()


def serving(nats: list[Nat], network: tuple[str, str], subnets: list[str] | None
            ) -> Nat | None:
    """The first NAT on ``network`` that serves the instance's subnet. ``subnets``: the
    network's subnets in the region (None: not looked up). Advisor names no subnet in the
    instance body, so Compute Engine picks the network's subnet in the region; with several,
    a listed NAT counts only when it serves every one of them (the one picked is among them)."""
    mine = [n for n in nats if n.network == network]
    for n in mine:
        if n.serves_all:
            return n
    if subnets:
        for n in mine:
            if n.ranges == LIST_OF_SUBNETWORKS and set(subnets) <= set(n.subnets):
                return n
    return None


def router_body(spec: LaunchSpec, network: str, owner: str) -> dict[str, Any]:
    """routers.insert body of the deployment's own router with one NAT config."""
    name = router_name(spec.deployment)
    return {"name": name,
            "description": f"{owner}: Cloud NAT for instances without an external IP",
            "network": network,
            "nats": [{"name": name, **OWN_NAT}]}


def fix_command(project: str, network: str, region: str) -> str:
    """The gcloud commands that give ``network`` a Cloud NAT in ``region`` for every subnet
    (https://cloud.google.com/nat/docs/set-up-manage-network-address-translation; flags from
    ``gcloud compute routers nats create --help``). The router is named for the network, not
    advisor: advisor never removes a NAT it did not make."""
    router = f"nat-{network}-{region}"[:63].rstrip("-")
    return (f"gcloud compute routers create {router} --project {project} --network {network} "
            f"--region {region} && gcloud compute routers nats create {router} --project "
            f"{project} --router {router} --region {region} --auto-allocate-nat-external-ips "
            "--nat-all-subnet-ip-ranges")


def update_command(nat: Nat, project: str, add: list[str]) -> str:
    """gcloud that adds ``add`` to a LIST_OF_SUBNETWORKS NAT (the flag replaces the list: the
    subnets it names already are kept)."""
    subnets = list(dict.fromkeys([*nat.named, *add]))
    return (f"gcloud compute routers nats update {nat.name} --project {project} --router "
            f"{nat.router} --region {nat.region} --nat-custom-subnet-ip-ranges="
            + ",".join(subnets))
