"""Azure backend (azure-mgmt-compute, azure-mgmt-network, azure-mgmt-resource and
azure-identity's DefaultAzureCredential, all imported on first use).

One deployment is, in resource group ``advisor-<name>`` (or ``--resource-group``): a network
security group ``advisor-<name>-nsg`` with allow rules only for ``--allow-cidr`` (the vLLM
ports) and ``--ssh-cidr`` (22) — everything else inbound stays denied by Azure's default rules —
a virtual network whose subnet carries that NSG, a static Standard public IP (outbound access
for pip and the model download), a NIC, and the VM: the GPU size, Microsoft's Ubuntu HPC image
(NVIDIA driver preinstalled, from Azure/azhpc-images), a Premium SSD OS disk sized for the
weights, the rendered cloud-config as base64 ``customData``, a system-assigned identity for
reading the API key from Key Vault, tags on everything, and Spot with eviction = Delete as an
option. The NIC, public IP and OS disk are deleted with the VM (``deleteOption: Delete``).

Least privilege (as the AWS instance profile): once the VM exists, its identity's principal is
given the built-in role Key Vault Secrets User on the API key's secret alone (and the Hugging
Face token's), scoped to ``…/vaults/VAULT/secrets/NAME``; the vault's resource group is looked
up in the subscription, or given with ``--key-vault-resource-group``. Each role assignment has a
name derived from the deployment, the principal and the scope (a second run writes the same
one), and ``down`` deletes them with the VM. A vault that uses access policies instead of Azure
RBAC ignores role assignments: a note says so, and advisor changes no vault policy.

SSH: Azure requires a key for a Linux VM without a password. ``ssh_public_key`` supplies one;
without it advisor generates a key pair and throws the private half away, so nobody can log in
(and port 22 is closed unless ``--ssh-cidr`` opens it).

``transport``, ``credential`` and ``polling_interval`` are the seams the tests use.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from advisor.clouds.azure.secrets import KEY_SCHEME
from advisor.clouds.base import (
    TAG_DEPLOYMENT,
    CloudError,
    LaunchSpec,
    QuotaStatus,
)
from advisor.errors import UserInputError
from advisor.state import InstanceRow, ResourceRow

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
POWER = {"running": "running", "starting": "starting", "stopped": "stopped",
         "stopping": "stopping", "deallocated": "stopped", "deallocating": "stopping"}


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


class AzureProvider:
    name = "azure"

    def __init__(self, subscription_id: str | None = None, credential: Any = None,
                 resource_group: str | None = None, transport: Any = None,
                 polling_interval: float | None = None, ssh_public_key: str | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 prices_url: str = RETAIL_PRICES_URL, key_vault_resource_group: str | None = None,
                 **_: Any) -> None:
        self.prices_url = prices_url
        self._kv_rg = key_vault_resource_group
        #: vault name (lower case) -> {"id": resource id, "rbac": RBAC mode, None if unknown}
        self._vaults: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self._subscription = subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID")
        self._credential = credential
        self._rg = resource_group
        self._transport = transport
        self._poll = {} if polling_interval is None else {"polling_interval": polling_interval}
        self._ssh_key = ssh_public_key
        self.sleep = sleep
        self._clients: dict[str, Any] = {}

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def subscription(self) -> str:
        if not self._subscription:
            raise UserInputError("no Azure subscription given",
                                 hint="pass --subscription or set AZURE_SUBSCRIPTION_ID")
        return self._subscription

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            compute, network, resource = _sdk()
            if self._credential is None:
                from azure.identity import DefaultAzureCredential

                self._credential = DefaultAzureCredential()
            kw: dict[str, Any] = {"transport": self._transport} if self._transport else {}
            cls = {"compute": compute, "network": network, "resource": resource}[kind]
            self._clients[kind] = cls(self._credential, self.subscription, **kw)
        return self._clients[kind]

    def rg(self, deployment: str) -> str:
        return self._rg or names(deployment)["rg"]

    def classify(self, exc: BaseException) -> BaseException:
        from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

        if isinstance(exc, CloudError | UserInputError):
            return exc
        if isinstance(exc, ClientAuthenticationError):
            return CloudError("azure", "AuthenticationFailed", str(exc.message), "provider",
                              hint="run 'az login' or set AZURE_CLIENT_ID/AZURE_TENANT_ID/"
                              "AZURE_CLIENT_SECRET")
        if not isinstance(exc, HttpResponseError):
            try:
                from azure.identity import CredentialUnavailableError
            except ModuleNotFoundError:  # pragma: no cover
                return exc
            if isinstance(exc, CredentialUnavailableError):
                return CloudError("azure", "NoCredentials", str(exc), "provider",
                                  hint="run 'az login' or configure a service principal")
            return exc
        err = getattr(exc, "error", None)
        code = str(getattr(err, "code", None) or getattr(exc, "reason", None) or "HttpError")
        details = [str(getattr(d, "code", "")) for d in (getattr(err, "details", None) or [])]
        msg = str(getattr(err, "message", None) or exc.message or exc)
        codes = {code, *details}
        if codes & CAPACITY:
            return CloudError("azure", sorted(codes & CAPACITY)[0], msg, "zone")
        if codes & QUOTA and (code != "OperationNotAllowed" or "quota" in msg.lower()):
            return CloudError("azure", sorted(codes & QUOTA)[0], msg, "region",
                              hint="request more vCPU quota for this VM family and region "
                              "(Subscriptions > Usage + quotas)")
        if codes & AUTH or exc.status_code in (401, 403):
            return CloudError("azure", code, msg, "provider",
                              hint="check the Azure role assignments of these credentials")
        return CloudError("azure", code, msg, "fatal")

    def _do(self, fn: Callable[..., Any], *a: Any, **kw: Any) -> Any:
        try:
            return fn(*a, **kw)
        except Exception as exc:
            raise self.classify(exc) from exc

    def _put(self, ops: Any, *args: Any, body: dict[str, Any]) -> Any:
        """begin_create_or_update with the exact JSON body, waited for."""
        data = io.BytesIO(json.dumps(body).encode())
        poller = self._do(ops.begin_create_or_update, *args, data,
                          content_type="application/json", **self._poll)
        return self._do(poller.result)

    def _delete(self, ops: Any, *args: Any) -> bool:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            poller = ops.begin_delete(*args, **self._poll)
            poller.result()
            return True
        except ResourceNotFoundError:
            return False
        except Exception as exc:
            raise self.classify(exc) from exc

    def _arm(self, method: str, url: str, api_version: str, body: dict[str, Any] | None = None,
             params: dict[str, str] | None = None) -> Any:
        """One ARM call through the SDK's pipeline (credential, retries, transport) for what
        no installed SDK covers (role assignments, Key Vault's resource)."""
        from azure.core.rest import HttpRequest

        if not url.startswith("https://"):
            params = {"api-version": api_version, **(params or {})}
        req = HttpRequest(method, url, params=params, json=body)
        return self._do(self._client("resource").send_request, req)

    def _arm_error(self, resp: Any, hint: str | None = None) -> BaseException:
        from azure.core.exceptions import HttpResponseError
        from azure.mgmt.core.exceptions import ARMErrorFormat

        err = self.classify(HttpResponseError(response=resp, error_format=ARMErrorFormat))
        if hint and isinstance(err, CloudError) and err.scope == "provider":
            err.hint = hint
        return err

    # -- Key Vault access -------------------------------------------------------------------
    def _vault(self, vault: str) -> dict[str, Any]:
        """The vault's resource id and whether it uses Azure RBAC (found once)."""
        if vault.lower() in self._vaults:
            return self._vaults[vault.lower()]
        sub = self.subscription
        if self._kv_rg:
            vid = (f"/subscriptions/{sub}/resourceGroups/{self._kv_rg}/providers/"
                   f"Microsoft.KeyVault/vaults/{vault}")
        else:
            listed = self._do(self._client("resource").resources.list,
                              filter="resourceType eq 'Microsoft.KeyVault/vaults'")
            found = [r for r in self._do(list, listed) if str(r.name).lower() == vault.lower()]
            if not found:
                raise UserInputError(f"Azure Key Vault {vault!r} is not in subscription {sub}",
                                     hint="create it there, or pass --key-vault-resource-group "
                                     "if these credentials cannot list it")
            vid = str(found[0].id)
        resp = self._arm("GET", vid, KEYVAULT_API)
        if resp.status_code == 404:
            raise UserInputError(f"Azure Key Vault {vault!r} is not in resource group "
                                 f"{self._kv_rg}", hint="check --key-vault-resource-group")
        rbac = None  # not readable with these credentials: assume RBAC, say nothing
        if resp.status_code == 200:
            rbac = bool(((resp.json() or {}).get("properties") or {}).get(
                "enableRbacAuthorization"))
        self._vaults[vault.lower()] = {"id": vid, "rbac": rbac}
        return self._vaults[vault.lower()]

    def _secret_scope(self, vault: str, secret: str, resolve: bool = True) -> str:
        if resolve or vault.lower() in self._vaults:
            return f"{self._vault(vault)['id']}/secrets/{secret}"
        rg = self._kv_rg or f"<resource group of vault {vault}>"
        return (f"/subscriptions/{self._subscription or '<subscription>'}/resourceGroups/{rg}/"
                f"providers/Microsoft.KeyVault/vaults/{vault}/secrets/{secret}")

    def role_assignment_body(self, deployment: str, vm: str, vault: str, secret: str,
                             principal: str) -> dict[str, Any]:
        sub = self._subscription or "<subscription>"
        return {"properties": {
            "roleDefinitionId": f"/subscriptions/{sub}/providers/Microsoft.Authorization/"
                                f"roleDefinitions/{KV_SECRETS_USER}",
            "principalId": principal,
            # a new identity may not have replicated yet; with its type given ARM does not wait
            # to look it up (Azure RBAC docs, "Assign roles to a new service principal")
            "principalType": "ServicePrincipal",
            "description": f"advisor deployment {deployment}: {vm} reads {vault}/{secret}"}}

    def _grant(self, spec: LaunchSpec, principal: str) -> list[str]:
        """Key Vault Secrets User on each secret for ``principal`` (the VM's identity)."""
        made = []
        hint = ("a role assignment needs Microsoft.Authorization/roleAssignments/write on the "
                "vault (Owner, User Access Administrator or Role Based Access Control "
                "Administrator)")
        for vault, secret in kv_secrets(spec):
            scope = self._secret_scope(vault, secret)
            name = role_assignment_name(spec.deployment, principal, scope)
            body = self.role_assignment_body(spec.deployment, spec.vm_name, vault, secret,
                                             principal)
            url = f"{scope}/providers/Microsoft.Authorization/roleAssignments/{name}"
            for attempt in range(10):
                resp = self._arm("PUT", url, AUTHORIZATION_API, body)
                if resp.status_code in (200, 201):
                    break
                err = self._arm_error(resp, hint)
                code = getattr(err, "code", "")
                if code == "RoleAssignmentExists":
                    break  # the same grant under another name: there already
                if code == "PrincipalNotFound" and attempt < 9:
                    self.sleep(5.0)  # the identity is not yet known to Entra ID
                    continue
                raise err
            made.append(name)
            if self._vault(vault)["rbac"] is False:
                note = (f"Azure: Key Vault {vault} uses access policies, not Azure RBAC, so the "
                        f"Key Vault Secrets User assignment does not let {spec.vm_name} (principal "
                        f"{principal}) read {secret}: give that principal 'Get' on secrets in "
                        "the vault's access policies (advisor changes no vault policy)")
                if note not in self.notes:
                    self.notes.append(note)
        return made

    def _revoke(self, deployment: str, principals: list[str]) -> list[str]:
        """Delete the role assignments advisor made for ``principals`` (the VMs' identities)."""
        removed = []
        url = (f"/subscriptions/{self.subscription}/providers/Microsoft.Authorization/"
               "roleAssignments")
        for principal in principals:
            page: str | None = url
            params: dict[str, str] | None = {"$filter": f"principalId eq '{principal}'"}
            while page:
                resp = self._arm("GET", page, AUTHORIZATION_API, params=params)
                if resp.status_code != 200:
                    raise self._arm_error(resp)
                doc = resp.json() or {}
                for ra in doc.get("value", []):
                    props = ra.get("properties") or {}
                    if not (str(props.get("description", "")).startswith(
                            f"advisor deployment {deployment}:")
                            and str(props.get("roleDefinitionId", "")).lower().endswith(
                                KV_SECRETS_USER)):
                        continue  # not advisor's: left alone
                    gone = self._arm("DELETE", ra["id"], AUTHORIZATION_API)
                    if gone.status_code not in (200, 204, 404):
                        raise self._arm_error(gone)
                    removed.append(f"role-assignment:{ra['name']}")
                page, params = doc.get("nextLink"), None
        return removed

    # -- bodies -----------------------------------------------------------------------------
    def _ids(self, spec: LaunchSpec) -> dict[str, str]:
        n = names(spec.deployment, spec.vm_name)
        base = f"/subscriptions/{self._subscription or '<subscription>'}/resourceGroups/" \
               f"{self.rg(spec.deployment)}/providers/Microsoft.Network"
        return {"nsg": f"{base}/networkSecurityGroups/{n['nsg']}",
                "subnet": f"{base}/virtualNetworks/{n['vnet']}/subnets/default",
                "ip": f"{base}/publicIPAddresses/{n['ip']}",
                "nic": f"{base}/networkInterfaces/{n['nic']}"}

    def bodies(self, spec: LaunchSpec, zone: str | None, ssh_key: str) -> dict[str, Any]:
        tags = dict(spec.labels)
        ids = self._ids(spec)
        lo, hi = min(spec.ports), max(spec.ports)
        rules = []
        for prio, (label, cidrs, ports) in enumerate(
                (("vllm", spec.allow_cidrs, f"{lo}-{hi}" if hi > lo else str(lo)),
                 ("ssh", spec.ssh_cidrs, "22"))):
            # a rule cannot mix IPv4 and IPv6 prefixes (ResourceCannotContainAddressPrefixes
            # FromDifferentAddressFamilies): one rule per family, IPv6 one priority later
            for v6, ranges in enumerate(([c for c in cidrs if ":" not in c],
                                         [c for c in cidrs if ":" in c])):
                if ranges:
                    rules.append({"name": f"advisor-{label}" + ("-v6" if v6 else ""),
                                  "properties": {
                                      "priority": 100 + 10 * prio + v6, "direction": "Inbound",
                                      "access": "Allow", "protocol": "Tcp",
                                      "sourceAddressPrefixes": ranges, "sourcePortRange": "*",
                                      "destinationAddressPrefix": "*",
                                      "destinationPortRange": ports}})
        vm: dict[str, Any] = {
            "location": spec.region, "tags": tags, "identity": {"type": "SystemAssigned"},
            "properties": {
                "hardwareProfile": {"vmSize": spec.instance_type},
                "storageProfile": {
                    "imageReference": _image_ref(spec.image),
                    "osDisk": {"createOption": "FromImage", "diskSizeGB": spec.disk_gib,
                               "managedDisk": {"storageAccountType": "Premium_LRS"},
                               "deleteOption": "Delete"}},
                "osProfile": {
                    "computerName": spec.vm_name, "adminUsername": ADMIN,
                    "customData": base64.b64encode(spec.user_data.encode()).decode(),
                    "linuxConfiguration": {
                        "disablePasswordAuthentication": True,
                        "ssh": {"publicKeys": [{"path": f"/home/{ADMIN}/.ssh/authorized_keys",
                                                "keyData": ssh_key}]}}},
                "networkProfile": {"networkInterfaces": [
                    {"id": ids["nic"], "properties": {"primary": True,
                                                      "deleteOption": "Delete"}}]},
            }}
        if zone:
            vm["zones"] = [zone]
        if spec.spot:
            vm["properties"].update({"priority": "Spot", "evictionPolicy": "Delete",
                                     "billingProfile": {"maxPrice": -1}})
        return {
            "resourceGroup": {"location": spec.region, "tags": tags},
            "networkSecurityGroup": {"location": spec.region, "tags": tags,
                                     "properties": {"securityRules": rules}},
            "virtualNetwork": {"location": spec.region, "tags": tags, "properties": {
                "addressSpace": {"addressPrefixes": ["10.42.0.0/16"]},
                "subnets": [{"name": "default", "properties": {
                    "addressPrefix": "10.42.0.0/24",
                    "networkSecurityGroup": {"id": ids["nsg"]}}}]}},
            "publicIPAddress": {"location": spec.region, "tags": tags,
                                "sku": {"name": "Standard"},
                                "properties": {"publicIPAllocationMethod": "Static"}},
            "networkInterface": {"location": spec.region, "tags": tags, "properties": {
                "networkSecurityGroup": {"id": ids["nsg"]},
                "ipConfigurations": [{"name": "ipconfig1", "properties": {
                    "subnet": {"id": ids["subnet"]},
                    "publicIPAddress": {"id": ids["ip"],
                                        "properties": {"deleteOption": "Delete"}}}}]}},
            "virtualMachine": vm,
        }

    def request(self, spec: LaunchSpec, zone: str | None) -> dict[str, Any]:
        n = names(spec.deployment, spec.vm_name)
        rg = self.rg(spec.deployment)
        b = self.bodies(spec, zone, self._ssh_key or "<generated RSA public key; the private "
                        "half is discarded>")
        calls = [
            {"call": "resource.resource_groups.create_or_update", "name": rg,
             "body": b["resourceGroup"]},
            {"call": "network.network_security_groups.begin_create_or_update",
             "name": n["nsg"], "body": b["networkSecurityGroup"]},
            {"call": "network.virtual_networks.begin_create_or_update", "name": n["vnet"],
             "body": b["virtualNetwork"]},
            {"call": "network.public_ip_addresses.begin_create_or_update", "name": n["ip"],
             "body": b["publicIPAddress"]},
            {"call": "network.network_interfaces.begin_create_or_update", "name": n["nic"],
             "body": b["networkInterface"]},
            {"call": "compute.virtual_machines.begin_create_or_update", "name": n["vm"],
             "body": b["virtualMachine"]}]
        principal = f"<principalId of {n['vm']}'s system-assigned identity>"
        for vault, secret in kv_secrets(spec):
            scope = self._secret_scope(vault, secret, resolve=False)
            calls.append({"call": "authorization.role_assignments.create", "scope": scope,
                          "name": "<uuid5 of deployment, principalId and scope>",
                          "body": self.role_assignment_body(spec.deployment, spec.vm_name,
                                                            vault, secret, principal)})
        return {"provider": "azure", "subscription": self._subscription or "<subscription>",
                "resource_group": rg, "region": spec.region, "zone": zone, "calls": calls}

    # -- look-ups ---------------------------------------------------------------------------
    def _sku(self, spec: LaunchSpec) -> Any:
        skus = self._do(self._client("compute").resource_skus.list,
                        filter=f"location eq '{spec.region}'")
        for s in skus:
            if s.resource_type == "virtualMachines" and s.name == spec.instance_type:
                return s
        return None

    def zones(self, spec: LaunchSpec) -> list[str | None]:
        sku = self._sku(spec)
        if sku is None:
            return []
        blocked_zones: set[str] = set()
        for r in sku.restrictions or []:
            if str(r.type).lower().endswith("location"):
                return []  # NotAvailableForSubscription in this region
            for info in (r.restriction_info.zones or []) if r.restriction_info else []:
                blocked_zones.add(info)
        zones: list[str] = []
        for info in sku.location_info or []:
            if str(info.location).lower() == spec.region.lower():
                zones += [z for z in (info.zones or []) if z not in blocked_zones]
        return list(sorted(zones)) or [None]

    def check_quota(self, spec: LaunchSpec) -> QuotaStatus:
        from advisor.clouds.azure.quota import check_quota

        return check_quota(self, spec)

    def find(self, deployment: str, region: str) -> list[InstanceRow]:
        from azure.core.exceptions import ResourceNotFoundError

        compute = self._client("compute")
        rg = self.rg(deployment)
        try:
            vms = list(compute.virtual_machines.list(rg))
        except ResourceNotFoundError:
            return []  # no resource group: nothing was ever made
        except Exception as exc:
            raise self.classify(exc) from exc
        out = []
        for vm in vms:
            if (vm.tags or {}).get(TAG_DEPLOYMENT) != deployment:
                continue
            if str(vm.location).lower() != region.lower():
                continue
            out.append(self._row(vm, rg, region))
        return out

    def _row(self, vm: Any, rg: str, region: str) -> InstanceRow:
        state = str(getattr(vm.properties, "provisioning_state", None) or "unknown").lower()
        if state == "succeeded":
            view = self._do(self._client("compute").virtual_machines.instance_view, rg, vm.name)
            for s in view.statuses or []:
                if str(s.code).startswith("PowerState/"):
                    state = POWER.get(s.code.split("/", 1)[1], s.code.split("/", 1)[1])
        public = private = None
        n = names(str((vm.tags or {}).get(TAG_DEPLOYMENT, vm.name)), str(vm.name))
        try:
            ip = self._client("network").public_ip_addresses.get(rg, n["ip"])
            public = getattr(ip.properties, "ip_address", None)
        except Exception:  # no public IP (yet): not an error for a listing
            public = None
        try:
            nic = self._client("network").network_interfaces.get(rg, n["nic"])
            configs = getattr(nic.properties, "ip_configurations", None) or []
            private = getattr(configs[0].properties, "private_ip_address", None) \
                if configs else None
        except Exception:
            private = None
        zones = list(vm.zones or [])
        return InstanceRow(id=str(vm.name), provider="azure", region=region,
                           zone=zones[0] if zones else None,
                           instance_type=str(vm.properties.hardware_profile.vm_size),
                           state=state, public_ip=public, private_ip=private)

    # -- changes ----------------------------------------------------------------------------
    def ensure_network(self, spec: LaunchSpec) -> list[ResourceRow]:
        n = names(spec.deployment)
        rg = self.rg(spec.deployment)
        b = self.bodies(spec, None, "-")
        for vault, _ in kv_secrets(spec):  # an unknown vault stops before anything is made
            self._vault(vault)
        resource = self._client("resource")
        if self._rg is None:  # advisor's own group; a user's group is used as it is
            self._do(resource.resource_groups.create_or_update, rg,
                     io.BytesIO(json.dumps(b["resourceGroup"]).encode()),
                     content_type="application/json")
        else:
            from azure.core.exceptions import ResourceNotFoundError

            try:
                resource.resource_groups.get(rg)
            except ResourceNotFoundError as exc:
                raise UserInputError(f"Azure resource group {rg!r} does not exist",
                                     hint="create it, or leave --resource-group out to let "
                                     "advisor make advisor-NAME") from exc
            except Exception as exc:
                raise self.classify(exc) from exc
        network = self._client("network")
        self._put(network.network_security_groups, rg, n["nsg"], body=b["networkSecurityGroup"])
        self._put(network.virtual_networks, rg, n["vnet"], body=b["virtualNetwork"])
        made = [ResourceRow(kind="network-security-group", id=n["nsg"], region=spec.region),
                ResourceRow(kind="virtual-network", id=n["vnet"], region=spec.region)]
        if self._rg is None:
            made.append(ResourceRow(kind="resource-group", id=rg, region=spec.region))
        return made

    def launch(self, spec: LaunchSpec, zone: str | None) -> InstanceRow:
        n = names(spec.deployment, spec.vm_name)
        rg = self.rg(spec.deployment)
        key = self._ssh_key or throwaway_ssh_key()
        b = self.bodies(spec, zone, key)
        network = self._client("network")
        self._put(network.public_ip_addresses, rg, n["ip"], body=b["publicIPAddress"])
        self._put(network.network_interfaces, rg, n["nic"], body=b["networkInterface"])
        vms = self._client("compute").virtual_machines
        try:
            vm = self._put(vms, rg, n["vm"], body=b["virtualMachine"])
        except CloudError as err:
            if err.scope == "zone":
                # a failed allocation leaves the VM resource behind in state Failed, and its
                # zone cannot be changed: remove it so the next zone starts clean
                self._delete(vms, rg, n["vm"])
            raise
        if kv_secrets(spec):
            principal = getattr(getattr(vm, "identity", None), "principal_id", None)
            if not principal:
                raise CloudError("azure", "NoPrincipal", f"VM {n['vm']} came back without its "
                                 "system-assigned identity", "fatal")
            try:
                self._grant(spec, str(principal))
            except Exception:
                # a VM that cannot read its key would never serve: remove it and what was
                # granted so far, so that the region's cleanup finds nothing running
                with contextlib.suppress(Exception):
                    self._revoke(spec.deployment, [str(principal)])
                self._delete(vms, rg, n["vm"])
                raise
        return self._row(vm, rg, spec.region)

    def terminate(self, deployment: str, region: str) -> list[str]:
        n = names(deployment)
        rg = self.rg(deployment)
        compute, network = self._client("compute"), self._client("network")
        removed = []
        vms = [i.id for i in self.find(deployment, region)]
        principals = []
        for vm in vms:  # their identities' role assignments go first, while they are known
            ident = getattr(self._do(compute.virtual_machines.get, rg, vm), "identity", None)
            if principal := getattr(ident, "principal_id", None):
                principals.append(str(principal))
        revoked = self._revoke(deployment, principals)
        for vm in vms:
            if self._delete(compute.virtual_machines, rg, vm):
                removed.append(vm)
        removed += revoked
        per_vm = [(ops, names(deployment, vm)[key]) for vm in dict.fromkeys([deployment, *vms])
                  for ops, key in ((network.network_interfaces, "nic"),
                                   (network.public_ip_addresses, "ip"))]
        for ops, name in [*per_vm, (network.virtual_networks, n["vnet"]),
                          (network.network_security_groups, n["nsg"])]:
            if self._owned(ops, rg, name, deployment) and self._delete(ops, rg, name):
                removed.append(name)
        if self._rg is None:  # the resource group is advisor's own: remove it when empty
            resource = self._client("resource")
            try:
                group = resource.resource_groups.get(rg)
            except Exception:
                group = None
            if group is not None and (group.tags or {}).get(TAG_DEPLOYMENT) == deployment:
                left = list(resource.resources.list_by_resource_group(rg))
                if not left:
                    self._delete(resource.resource_groups, rg)
                    removed.append(f"resource-group:{rg}")
        return removed

    def catalog_facts(self, regions: list[str], doc: dict[str, Any]) -> list[Any]:
        """What the Resource SKUs and Retail Prices APIs state about every GPU VM size offered
        in ``regions`` (for ``advisor catalog refresh``)."""
        from advisor.clouds.azure.refresh import catalog_facts

        return catalog_facts(self, regions, doc)

    def _owned(self, ops: Any, rg: str, name: str, deployment: str) -> bool:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            res = ops.get(rg, name)
        except ResourceNotFoundError:
            return False
        except Exception as exc:
            raise self.classify(exc) from exc
        return bool((res.tags or {}).get(TAG_DEPLOYMENT) == deployment)
