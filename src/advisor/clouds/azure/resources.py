"""What advisor makes on Azure, by name and request body, and the constants its calls use: no
API call here (:mod:`advisor.clouds.azure.compute` makes them; :mod:`~.preflight` and
:mod:`~.refresh` read the same names from here, so no module of this folder imports the provider
at run time)."""

from __future__ import annotations

import uuid
from typing import Any

from advisor.clouds.azure.secrets import KEY_SCHEME
from advisor.clouds.base import (
    LaunchSpec,
)
from advisor.errors import UserInputError

#: Azure/azhpc-images: Ubuntu 22.04 HPC image with the NVIDIA driver, CUDA and NCCL
IMAGE = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204",
         "version": "latest"}
ADMIN = "azureuser"
#: Azure's public Retail Prices API (no credentials needed)
RETAIL_PRICES_URL = "https://prices.azure.com/api/retail/prices"
SRC_SKUS = "Azure Compute Resource SKUs API (resource_skus.list: vCPUs, MemoryGB, GPUs, locations)"
SRC_PRICES = ("Azure Retail Prices API (serviceName 'Virtual Machines', type Consumption; Linux "
              "on-demand and Spot meters)")
CAPACITY = {"ZonalAllocationFailed", "AllocationFailed", "OverconstrainedAllocationRequest",
            "OverconstrainedZonalAllocationRequest", "SkuNotAvailable",
            "AllocationFailedVMSeriesNotAvailable", "SpotVMAllocationFailed"}
QUOTA = {"QuotaExceeded", "OperationNotAllowed", "SpotQuotaExceeded",
         "ResourceQuotaExceeded", "InsufficientQuota"}
AUTH = {"AuthorizationFailed", "InvalidAuthenticationToken", "AuthenticationFailed",
        "InvalidAuthenticationTokenTenant", "LinkedAuthorizationFailed", "SubscriptionNotFound"}
#: the built-in role "Key Vault Secrets User": read secret contents, nothing else
KV_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"
AUTHORIZATION_API = "2022-04-01"
KEYVAULT_API = "2023-07-01"
#: what advisor makes besides the VM, in the order ``remove_network`` deletes it (a NIC holds
#: its public IP, the VNet's subnet its NSG)
VM_TYPE = "microsoft.compute/virtualmachines"
NETWORK_ORDER = (("microsoft.network/networkinterfaces", "network", "network_interfaces"),
                 ("microsoft.network/publicipaddresses", "network", "public_ip_addresses"),
                 ("microsoft.compute/disks", "compute", "disks"),
                 ("microsoft.network/virtualnetworks", "network", "virtual_networks"),
                 ("microsoft.network/networksecuritygroups", "network",
                  "network_security_groups"))
POWER = {"running": "running", "starting": "starting", "stopped": "stopped",
         "stopping": "stopping", "deallocated": "stopped", "deallocating": "stopping"}
#: boot diagnostics' SAS URI only has to outlive one GET (Retrieve Boot Diagnostics Data: 1 to
#: 1440 minutes)
CONSOLE_SAS_MINUTES = 5
#: the newest part of the serial log is what counts (advisor.bootstatus: the newest line of each
#: kind wins; the clouds keep the last 64 KiB or so)
CONSOLE_MAX_CHARS = 256 * 1024


def _sdk() -> tuple[Any, Any, Any]:
    try:
        from azure.mgmt.compute import ComputeManagementClient
        from azure.mgmt.network import NetworkManagementClient
        try:  # azure-mgmt-resource >= 24 moved it into a sub-package
            from azure.mgmt.resource.resources import ResourceManagementClient
        except ImportError:
            from azure.mgmt.resource import ResourceManagementClient
    except ModuleNotFoundError as exc:
        raise UserInputError(f"the azure SDK is not installed ({exc.name})",
                             hint="pip install 'advisor[azure]'") from exc
    return ComputeManagementClient, NetworkManagementClient, ResourceManagementClient


def names(deployment: str, vm: str | None = None) -> dict[str, str]:
    """Resource names of a deployment; the NIC and public IP belong to one VM (the head's
    are named after the deployment, a worker's after itself)."""
    vm = vm or deployment
    return {"vm": vm, "nic": f"{vm}-nic", "ip": f"{vm}-ip",
            "nsg": f"advisor-{deployment}-nsg", "vnet": f"advisor-{deployment}-vnet",
            "rg": f"advisor-{deployment}"}


def throwaway_ssh_key() -> str:
    """An RSA public key whose private half is never kept."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH)
    return pub.decode() + " advisor-throwaway"


def kv_secrets(spec: LaunchSpec) -> list[tuple[str, str]]:
    """(vault, secret) of each Key Vault secret the VM reads (API key, Hugging Face token)."""
    out: list[tuple[str, str]] = []
    for ref in (spec.api_key_ref, spec.hf_token_ref):
        if ref and ref.startswith(KEY_SCHEME.prefix):
            vault, _, secret = ref.removeprefix(KEY_SCHEME.prefix).partition("/")
            if (vault, secret) not in out:
                out.append((vault, secret))
    return out


def role_assignment_name(deployment: str, principal: str, scope: str) -> str:
    """The same GUID for the same grant: a second run rewrites it instead of adding one."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL,
                          f"advisor:{deployment}:{principal}:{scope.lower()}"))


def _image_ref(image: str | None) -> dict[str, str]:
    if image is None:
        return dict(IMAGE)
    if image.startswith("/subscriptions/"):
        return {"id": image}
    parts = image.split(":")
    if len(parts) != 4:
        raise UserInputError(f"--image {image!r} is not an Azure image",
                             hint="give PUBLISHER:OFFER:SKU:VERSION or an image resource id")
    return dict(zip(("publisher", "offer", "sku", "version"), parts, strict=True))


def console_groups(resource_group: str | None, vm: str) -> list[str]:
    """The resource groups VM ``vm`` may be in: a given ``--resource-group``, else advisor's
    group of the deployment named like the VM, then (for a worker ``NAME-wN``) NAME's."""
    import re

    if resource_group:
        return [resource_group]
    out = [names(vm)["rg"]]
    if m := re.fullmatch(r"(.+)-w\d+", vm):
        out.append(names(m.group(1))["rg"])
    return out


def fetch_blob(transport: Any, uri: str) -> str | None:
    """GET one SAS URI, as the boot diagnostics API returned it, without credentials (a SAS
    URI is its own authorization; an ARM token is never sent to a storage host) and without
    following a redirect; only an ``https`` URI is fetched. Its last :data:`CONSOLE_MAX_CHARS`
    characters, or None."""
    from urllib.parse import urlparse

    u = urlparse(uri)
    if u.scheme != "https" or not u.hostname:
        return None
    from azure.core import PipelineClient
    from azure.core.pipeline.policies import RetryPolicy
    from azure.core.rest import HttpRequest

    # policies given: the default list's authentication and redirect policies are left out
    client: PipelineClient[Any, Any] = PipelineClient(
        base_url=f"https://{u.netloc}", transport=transport,
        policies=[RetryPolicy(retry_total=1, retry_backoff_factor=0)])
    resp = client.send_request(HttpRequest("GET", uri))
    if resp.status_code != 200:
        return None
    return resp.content.decode("utf-8", errors="replace")[-CONSOLE_MAX_CHARS:]
