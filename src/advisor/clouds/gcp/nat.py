"""Egress for GCP instances without an external IP: Cloud NAT (issue 27, item 3).

An instance gets an external IP only when ``--allow-cidr`` or ``--ssh-cidr`` opens something
(:func:`advisor.clouds.gcp.compute.has_ingress`). Without one, apt, pip, the Hugging Face Hub
and Secret Manager are reachable only through Cloud NAT on the instance's network in its region
("Cloud NAT lets certain resources that don't have external IP addresses create outbound
connections to the internet", https://cloud.google.com/nat/docs/overview). Opening ingress is
never the answer to missing egress: advisor finds a NAT or makes one.

``--gcp-nat`` (:data:`MODES`):

* ``auto`` (default) — a NAT on the network in the region that serves the instance's subnet is
  used as found (never removed by advisor); without one advisor makes the deployment's own
  (router ``advisor-<deployment>-nat`` with one NAT config), which ``down`` removes;
* ``create`` — no look-up: advisor makes its own (a network that already has a NAT in the region
  refuses it, see :data:`EXCLUSIVE`);
* ``existing-only`` — a NAT must be there; without one ``provision`` stops with the gcloud
  commands that make one (:func:`fix_command`).

Shapes (Compute Engine REST v1, https://cloud.google.com/compute/docs/reference/rest/v1/routers):
a ``Router`` has ``name``, ``description``, ``network`` (a URL), ``region`` and ``nats[]``; each
``RouterNat`` has ``name``, ``natIpAllocateOption`` (``AUTO_ONLY`` | ``MANUAL_ONLY``),
``sourceSubnetworkIpRangesToNat`` and, for ``LIST_OF_SUBNETWORKS``, ``subnetworks[]`` of
``{name: <subnetwork URL>, sourceIpRangesToNat: [ALL_IP_RANGES | PRIMARY_IP_RANGE |
LIST_OF_SECONDARY_IP_RANGES]}``. Routers carry no labels: like the firewall rules, advisor's
router says its maker at the start of its ``description`` (:func:`owner_text`).

Known limit: a NAT advisor made for deployment A is what deployment B (same network and
region, later) finds, since a second NAT for all subnets may not sit beside it; it belongs to A
and goes with ``advisor down A`` (B is told so when it finds it).

Pure: no I/O; compute.py makes the calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from advisor.clouds.base import LaunchSpec
from advisor.errors import UserInputError

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


_NET = re.compile(r"(?:^|/)projects/([^/]+)/global/networks/([^/]+)$")


def network_key(network: str, project: str) -> tuple[str, str]:
    """(project, name) of a network given as a URL, ``projects/P/global/networks/N`` or
    ``global/networks/N`` (then in ``project``)."""
    m = _NET.search(network)
    if m:
        return m.group(1), m.group(2)
    return project, network.rstrip("/").rsplit("/", 1)[-1]


def last(url: str) -> str:
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
                       subnets=tuple(last(str(s.get("name", ""))) for s in subs
                                     if set(s.get("sourceIpRangesToNat") or ["ALL_IP_RANGES"])
                                     & set(PRIMARY)),
                       named=tuple(last(str(s.get("name", ""))) for s in subs),
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
