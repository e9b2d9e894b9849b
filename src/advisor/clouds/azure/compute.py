"""Azure backend (azure-mgmt-compute, azure-mgmt-network, azure-mgmt-resource and
azure-identity's DefaultAzureCredential, all imported on first use).

One deployment is, in resource group ``advisor-<name>`` (or ``--resource-group``): a network
security group ``advisor-<name>-nsg`` with allow rules only for ``--allow-cidr`` (the vLLM
ports) and ``--ssh-cidr`` (22) — everything else inbound stays denied by Azure's default rules —
a virtual network whose subnet carries that NSG, a static Standard public IP (outbound access
for pip and the model download), a NIC, and the VM: the GPU size, Microsoft's Ubuntu HPC image
(NVIDIA driver preinstalled, from Azure/azhpc-images), a Premium SSD OS disk sized for the
weights, the rendered cloud-config as base64 ``customData``, boot diagnostics on managed storage
(the serial log ``console_output`` reads), a system-assigned identity for
reading the API key from Key Vault, tags on everything, and Spot with eviction = Delete as an
option. The NIC, public IP and OS disk are deleted with the VM (``deleteOption: Delete``).

Least privilege (as the AWS instance profile): once the VM exists, its identity's principal is
given the built-in role Key Vault Secrets User on the API key's secret alone (and the Hugging
Face token's), scoped to ``…/vaults/VAULT/secrets/NAME``; the vault's resource group is looked
up in the subscription, or given with ``--key-vault-resource-group``. Each role assignment has a
name derived from the deployment, the principal and the scope (a second run writes the same
one), and ``down`` deletes them with the VM. A vault that uses access policies instead of Azure
RBAC ignores role assignments: a note says so, and advisor changes no vault policy.

Found again by tag: everything advisor makes (its own resource group, NSG, VNet, public IP,
NIC, VM) carries ``advisor-deployment`` and ``advisor-attempt`` (a role assignment, which takes
no tags, names both in its description; the OS disk, which does not inherit the VM's tags, is
named ``VM-osdisk``). ``down`` finds them with ARM's tag filter in any resource group, removes
the VMs first (``terminate_instances``), then the rest (``remove_network``), and the resource
group only when nothing is left in it; ``terminate_attempt`` removes one attempt's own (a
resource PUT again by a later attempt keeps the first attempt's id); ``leftovers`` lists what
remains.

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
from collections.abc import Callable
from typing import Any

from advisor.clouds.azure.resources import (
    ADMIN,
    AUTH,
    AUTHORIZATION_API,
    CAPACITY,
    CONSOLE_SAS_MINUTES,
    KEYVAULT_API,
    KV_SECRETS_USER,
    NETWORK_ORDER,
    POWER,
    QUOTA,
    RETAIL_PRICES_URL,
    VM_TYPE,
    _image_ref,
    _sdk,
    console_groups,
    fetch_blob,
    kv_secrets,
    names,
    role_assignment_name,
    throwaway_ssh_key,
)
from advisor.clouds.base import (
    TAG_ATTEMPT,
    TAG_DEPLOYMENT,
    CloudError,
    LaunchSpec,
    PreflightCheck,
    QuotaStatus,
)
from advisor.errors import UserInputError
from advisor.state import InstanceRow, ResourceRow


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
            from advisor.clouds.base import (
                CALL_ATTEMPTS,
                CONNECT_TIMEOUT_S,
                check_deadline,
                read_timeout_s,
            )

            kw: dict[str, Any] = {"transport": self._transport} if self._transport else {}
            # azure-core's defaults: 300 s to connect, 300 s to read, 3 retries
            kw.update(connection_timeout=CONNECT_TIMEOUT_S, read_timeout=read_timeout_s(),
                      retry_total=CALL_ATTEMPTS - 1,
                      # the command's overall deadline, checked before every request
                      raw_request_hook=lambda _request: check_deadline("azure"))
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
                             principal: str, attempt: str | None = None) -> dict[str, Any]:
        """Role assignments take no tags: the description names the deployment (and the
        attempt), which is how ``down`` and an attempt's cleanup know advisor's own."""
        sub = self._subscription or "<subscription>"
        made_by = f" ({TAG_ATTEMPT} {attempt})" if attempt else ""
        return {"properties": {
            "roleDefinitionId": f"/subscriptions/{sub}/providers/Microsoft.Authorization/"
                                f"roleDefinitions/{KV_SECRETS_USER}",
            "principalId": principal,
            # a new identity may not have replicated yet; with its type given ARM does not wait
            # to look it up (Azure RBAC docs, "Assign roles to a new service principal")
            "principalType": "ServicePrincipal",
            "description": f"advisor deployment {deployment}: {vm} reads {vault}/{secret}"
                           f"{made_by}"}}

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
                                             principal, spec.labels.get(TAG_ATTEMPT))
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

    def _assignments(self, deployment: str, principals: list[str] | None = None,
                     attempt: str | None = None) -> list[dict[str, Any]]:
        """advisor's role assignments for ``deployment`` (of ``principals`` only, when given;
        of one attempt only, when given): found by their description, never by name alone."""
        out: list[dict[str, Any]] = []
        url = (f"/subscriptions/{self.subscription}/providers/Microsoft.Authorization/"
               "roleAssignments")
        filters: list[str | None] = (
            [f"principalId eq '{p}'" for p in principals] if principals is not None else [None])
        for flt in filters:
            page: str | None = url
            params: dict[str, str] | None = {"$filter": flt} if flt else None
            while page:
                resp = self._arm("GET", page, AUTHORIZATION_API, params=params)
                if resp.status_code != 200:
                    raise self._arm_error(resp)
                doc = resp.json() or {}
                for ra in doc.get("value", []):
                    props = ra.get("properties") or {}
                    desc = str(props.get("description", ""))
                    if not (desc.startswith(f"advisor deployment {deployment}:")
                            and str(props.get("roleDefinitionId", "")).lower().endswith(
                                KV_SECRETS_USER)):
                        continue  # not advisor's: left alone
                    if attempt and not desc.endswith(f"({TAG_ATTEMPT} {attempt})"):
                        continue  # another attempt's
                    if ra["id"] not in [x["id"] for x in out]:
                        out.append(ra)
                page, params = doc.get("nextLink"), None
        return out

    def _revoke(self, deployment: str, principals: list[str] | None,
                attempt: str | None = None, keep: set[str] | None = None) -> list[str]:
        """Delete the role assignments advisor made for ``principals`` (the VMs' identities;
        None: every one of the deployment, or of ``attempt``), except those of ``keep``."""
        removed = []
        for ra in self._assignments(deployment, principals, attempt):
            if keep and str((ra.get("properties") or {}).get("principalId")) in keep:
                continue  # a VM that still exists reads with it
            gone = self._arm("DELETE", ra["id"], AUTHORIZATION_API)
            if gone.status_code not in (200, 204, 404):
                raise self._arm_error(gone)
            removed.append(f"role-assignment:{ra['name']}")
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
                    "osDisk": {"name": f"{spec.vm_name}-osdisk", "createOption": "FromImage",
                               "diskSizeGB": spec.disk_gib,
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
                # the serial log that ``console_output`` reads (advisor-boot: lines); no
                # storageUri: "managed storage will be used" (BootDiagnostics, Virtual Machines
                # - Create Or Update: https://learn.microsoft.com/en-us/rest/api/compute/
                # virtual-machines/create-or-update#bootdiagnostics)
                "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}},
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
                          "body": self.role_assignment_body(
                              spec.deployment, spec.vm_name, vault, secret, principal,
                              spec.labels.get(TAG_ATTEMPT))})
        return {"provider": "azure", "subscription": self._subscription or "<subscription>",
                "resource_group": rg, "region": spec.region, "zone": zone, "calls": calls}

    # -- look-ups ---------------------------------------------------------------------------
    def _sku(self, spec: LaunchSpec) -> Any:
        skus = self._do(self._client("compute").resource_skus.list,
                        filter=f"location eq '{spec.region}'")
        for s in self._do(list, skus):  # paged lazily: a page's error is classified too
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

    def preflight(self, spec: LaunchSpec) -> list[PreflightCheck]:
        """Credentials, each Key Vault secret and the VM identity's access to it, quota, the
        image in the region, egress: asked before anything is made (see preflight.py)."""
        from advisor.clouds.azure.preflight import preflight

        return preflight(self, spec)

    def preflight_plan(self, spec: LaunchSpec) -> list[PreflightCheck]:
        """The same checks, listed without a call (``provision --dry-run``)."""
        from advisor.clouds.azure.preflight import preflight_plan

        return preflight_plan(self, spec)

    def console_output(self, instance: InstanceRow) -> str | None:
        """The VM's serial log from boot diagnostics, where ``advisor.bootstatus`` finds the
        ``advisor-boot:`` lines; None when there is none or it cannot be read (``status``
        never fails because of it).

        advisor's VMs have boot diagnostics on managed storage (``bodies``). Reading the log
        takes two steps: POST ``…/virtualMachines/{vm}/retrieveBootDiagnosticsData?
        sasUriExpirationTimeInMinutes=N`` (Virtual Machines - Retrieve Boot Diagnostics Data:
        https://learn.microsoft.com/en-us/rest/api/compute/virtual-machines/retrieve-boot-diagnostics-data)
        answers ``{"consoleScreenshotBlobUri": …, "serialConsoleLogBlobUri": …}``, read-only SAS
        URIs of the managed storage blobs (N: 1 to 1440 minutes, 120 when not given); then a
        GET of the serial log's SAS URI gives plain text (:func:`fetch_blob`)."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            vms = self._client("compute").virtual_machines
            for rg in console_groups(self._rg, instance.id):
                try:
                    res = vms.retrieve_boot_diagnostics_data(
                        rg, instance.id, sas_uri_expiration_time_in_minutes=CONSOLE_SAS_MINUTES)
                except ResourceNotFoundError:
                    continue  # not in this group (or gone)
                uri = getattr(res, "serial_console_log_blob_uri", None)
                return fetch_blob(self._transport, str(uri)) if uri else None
        except Exception:  # never a failed status because of the console
            return None
        return None

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
            try:
                view = self._client("compute").virtual_machines.instance_view(rg, vm.name)
            except Exception:  # the power state unread: the VM exists, that is what counts
                view = None
            for s in (getattr(view, "statuses", None) or []):
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
            self._keep_owner(resource.resource_groups.get, rg, body=b["resourceGroup"])
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
        for ops, name, body in ((network.network_security_groups, n["nsg"],
                                 b["networkSecurityGroup"]),
                                (network.virtual_networks, n["vnet"], b["virtualNetwork"])):
            self._keep_owner(ops.get, rg, name, body=body)
            self._put(ops, rg, name, body=body)
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
        for ops, name, body in ((network.public_ip_addresses, n["ip"], b["publicIPAddress"]),
                                (network.network_interfaces, n["nic"], b["networkInterface"])):
            self._keep_owner(ops.get, rg, name, body=body)
            self._put(ops, rg, name, body=body)
        vms = self._client("compute").virtual_machines
        try:
            vm = self._put(vms, rg, n["vm"], body=b["virtualMachine"])
        except CloudError as err:
            if err.scope == "zone":
                # a failed allocation leaves the VM resource behind in state Failed, and its
                # zone cannot be changed: remove it so the next zone starts clean
                self._delete(vms, rg, n["vm"])
            else:
                # any other failure (a lost poll, an ARM error after the PUT was taken) may
                # leave a VM that runs: this attempt's own is removed, the error stays
                with contextlib.suppress(Exception):
                    vm_now = self._get(vms, rg, n["vm"])
                    attempt = spec.labels.get(TAG_ATTEMPT)
                    if vm_now is not None and attempt and \
                            (vm_now.tags or {}).get(TAG_ATTEMPT) == attempt:
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

    def _keep_owner(self, get: Callable[..., Any], *args: Any, body: dict[str, Any]) -> None:
        """A PUT replaces a resource's tags: one that an earlier attempt of this deployment made
        keeps that attempt's id, so that this attempt's cleanup leaves it alone."""
        from azure.core.exceptions import ResourceNotFoundError

        try:
            old = get(*args)
        except ResourceNotFoundError:
            return
        except Exception as exc:
            raise self.classify(exc) from exc
        tags = getattr(old, "tags", None) or {}
        mine = body.get("tags") or {}
        if tags.get(TAG_DEPLOYMENT) == mine.get(TAG_DEPLOYMENT) and tags.get(TAG_ATTEMPT):
            body["tags"] = {**mine, TAG_ATTEMPT: tags[TAG_ATTEMPT]}

    def _tagged(self, deployment: str, region: str | None = None,
                attempt: str | None = None) -> list[dict[str, str]]:
        """Every resource in the subscription tagged with the deployment (in ``region``; of
        ``attempt``), in any resource group: found by ARM's tag filter, not by name."""
        listed = self._do(self._client("resource").resources.list,
                          filter=f"tagName eq '{TAG_DEPLOYMENT}' and tagValue eq '{deployment}'")
        out: list[dict[str, str]] = []
        for r in self._do(list, listed):
            tags = r.tags or {}
            if tags.get(TAG_DEPLOYMENT) != deployment:
                continue
            if attempt and tags.get(TAG_ATTEMPT) != attempt:
                continue
            if region and str(r.location).lower() != region.lower():
                continue
            # /subscriptions/S/resourceGroups/RG/providers/NAMESPACE/TYPE/NAME
            parts = str(r.id).split("/")
            if len(parts) != 9 or parts[5].lower() != "providers":
                continue
            out.append({"id": str(r.id), "rg": parts[4], "name": parts[8],
                        "type": f"{parts[6]}/{parts[7]}".lower(),
                        "location": str(r.location)})
        return out

    def _get(self, ops: Any, *args: Any) -> Any:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return ops.get(*args)
        except ResourceNotFoundError:
            return None
        except Exception as exc:
            raise self.classify(exc) from exc

    def _principals(self, vms: list[dict[str, str]]) -> list[str]:
        compute = self._client("compute")
        out = []
        for r in vms:
            vm = self._get(compute.virtual_machines, r["rg"], r["name"])
            if principal := getattr(getattr(vm, "identity", None), "principal_id", None):
                out.append(str(principal))
        return out

    def terminate(self, deployment: str, region: str) -> list[str]:
        return (self.terminate_instances(deployment, region)
                + self.remove_network(deployment, region))

    def terminate_attempt(self, deployment: str, region: str, attempt: str) -> list[str]:
        """Only what one provision attempt made (its ``advisor-attempt`` tag, or the attempt in
        a role assignment's description); advisor's resource group goes only when empty."""
        return (self.terminate_instances(deployment, region, attempt)
                + self.remove_network(deployment, region, attempt))

    def terminate_instances(self, deployment: str, region: str,
                            attempt: str | None = None) -> list[str]:
        """The deployment's VMs in ``region`` (of ``attempt``), their identities' role
        assignments first, while the principals are known."""
        vms = [r for r in self._tagged(deployment, region, attempt) if r["type"] == VM_TYPE]
        removed = self._revoke(deployment, self._principals(vms)) if vms else []
        ops = self._client("compute").virtual_machines
        gone = [r["name"] for r in vms if self._delete(ops, r["rg"], r["name"])]
        return gone + removed

    def remove_network(self, deployment: str, region: str,
                       attempt: str | None = None) -> list[str]:
        """NICs, public IPs, OS disks, the VNet and the NSG tagged with the deployment (and
        ``attempt``) in ``region``, role assignments whose VM is gone, and advisor's own
        resource group once nothing is left in it — after the VMs are gone."""
        removed: list[str] = []
        tagged = self._tagged(deployment, None, attempt)
        here = [r for r in tagged if r["location"].lower() == region.lower()]
        if not attempt:
            here += [r for r in self._os_disks(deployment, region, tagged)
                     if r["id"].lower() not in {x["id"].lower() for x in here}]
        for kind, client, attr in NETWORK_ORDER:
            ops = getattr(self._client(client), attr)
            for r in here:
                if r["type"] == kind and self._delete(ops, r["rg"], r["name"]):
                    removed.append(r["name"])
        # role assignments of VMs that are gone (a crash between a VM's end and its revoke)
        live = [r for r in self._tagged(deployment) if r["type"] == VM_TYPE]
        removed += self._revoke(deployment, None, attempt, keep=set(self._principals(live)))
        for rg in self._groups(deployment, tagged):
            resource = self._client("resource")
            group = self._get(resource.resource_groups, rg)
            if group is None or (group.tags or {}).get(TAG_DEPLOYMENT) != deployment:
                continue  # gone, or not advisor's (a user's --resource-group is never removed)
            # deleting a group deletes all it holds: only an empty one (nothing of another
            # attempt, nothing of anyone else) is removed
            held = self._do(list, self._do(resource.resources.list_by_resource_group, rg))
            if not held and self._delete(resource.resource_groups, rg):
                removed.append(f"resource-group:{rg}")
        return removed

    def _groups(self, deployment: str, tagged: list[dict[str, str]]) -> list[str]:
        """Resource groups that may hold the deployment: advisor's own name (unless a group
        was given) and every group a tagged resource sits in."""
        own = [] if self._rg is not None else [names(deployment)["rg"]]
        return list(dict.fromkeys([*own, *(r["rg"] for r in tagged)]))

    def _os_disks(self, deployment: str, region: str,
                  tagged: list[dict[str, str]]) -> list[dict[str, str]]:
        """OS disks named ``VM-osdisk`` in the deployment's groups: Azure does not copy the VM's
        tags onto the disk it makes, so they are found by name (deleted with their VM, unless a
        failed creation left one behind)."""
        import re

        disks = self._client("compute").disks
        pattern = re.compile(rf"^{re.escape(deployment)}(-w\d+)?-osdisk$")
        out = []
        for rg in [*self._groups(deployment, tagged), *([self._rg] if self._rg else [])]:
            try:
                listed = self._do(list, self._do(disks.list_by_resource_group, rg))
            except CloudError as err:
                if err.code in ("ResourceGroupNotFound", "ResourceNotFound"):
                    continue
                raise
            for d in listed:
                if pattern.match(str(d.name)) and str(d.location).lower() == region.lower():
                    out.append({"id": str(d.id), "rg": rg, "name": str(d.name),
                                "type": "microsoft.compute/disks", "location": region})
        return out

    def leftovers(self, deployment: str, region: str) -> list[str]:
        """What still carries the deployment's tag here (VMs, NICs, IPs, disks, NSG, VNet),
        advisor's own resource group and the role assignments made for it (both global)."""
        tagged = self._tagged(deployment)
        here = [r for r in tagged if r["location"].lower() == region.lower()]
        here += [r for r in self._os_disks(deployment, region, tagged)
                 if r["id"].lower() not in {x["id"].lower() for x in here}]
        left = [f"{region}:{r['type'].split('/')[-1]}/{r['name']}" for r in here]
        resource = self._client("resource")
        for rg in self._groups(deployment, tagged):
            group = self._get(resource.resource_groups, rg)
            if group is not None and (group.tags or {}).get(TAG_DEPLOYMENT) == deployment:
                left.append(f"resource-group:{rg}")
        left += [f"role-assignment:{ra['name']}" for ra in self._assignments(deployment)]
        return left

    def catalog_facts(self, regions: list[str], doc: dict[str, Any]) -> list[Any]:
        """What the Resource SKUs and Retail Prices APIs state about every GPU VM size offered
        in ``regions`` (for ``advisor catalog refresh``)."""
        from advisor.clouds.azure.refresh import catalog_facts

        return catalog_facts(self, regions, doc)
