"""An in-memory Azure Resource Manager behind a custom transport: a ``requests`` adapter that
azure-core's RequestsTransport sends through, so the real SDK code runs and nothing leaves the
process. PUTs answer 201 with an ``Azure-AsyncOperation`` URL that the poller reads (Succeeded,
or Failed with the error ARM would give), DELETEs 202 with a ``Location`` to poll; resource
SKUs and usages answer in the shape ``resource_skus.list`` and ``usage.list`` read.

Key Vaults (``add_vault``) are listed by ``resources.list`` with a resourceType filter and read
by id; role assignments are PUT (synchronously, 201), listed with a principalId filter and
deleted the way Microsoft.Authorization does: a PUT names an existing VM identity and an
existing vault's scope, and one name cannot be moved to another principal.

``calls`` counts every request; ``before`` (fault injection) sees each one first and may raise
or answer in its place. ``resources.list`` also takes ARM's tagName/tagValue filter.

What preflight and the boot console read (issue 27), each in the shape of its ARM reference:

* the subscription (Subscriptions - Get: ``state``, https://learn.microsoft.com/en-us/rest/api/
  resources/subscriptions/get), ``subscription_state``;
* a vault's secrets' metadata through the management plane (Key Vault Secrets - Get, 2023-07-01:
  https://learn.microsoft.com/en-us/rest/api/keyvault/keyvault/secrets/get; never a value),
  ``secrets`` — every vault holds ``vllm-api-key`` and ``hf-token`` unless told otherwise;
* the caller's permissions on a vault (Permissions - List For Resource:
  https://learn.microsoft.com/en-us/rest/api/authorization/permissions/list-for-resource),
  ``permissions`` — Owner's ``*`` unless told otherwise; a role-assignment PUT without
  ``Microsoft.Authorization/roleAssignments/write`` there answers 403 AuthorizationFailed;
* the versions of a marketplace image in a location (Virtual Machine Images - List, a bare JSON
  array: https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-images/list),
  ``images`` — advisor's default image in every location unless told otherwise;
* boot diagnostics (Virtual Machines - Retrieve Boot Diagnostics Data:
  https://learn.microsoft.com/en-us/rest/api/compute/virtual-machines/
  retrieve-boot-diagnostics-data): SAS URIs on https://127.0.0.1 (never another host), whose
  serial log is what a test put in ``consoles`` (VM name -> text); ``blob_requests`` records
  each blob GET's URL and headers."""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests
from azure.core.credentials import AccessToken
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

HOST = "https://management.azure.com"
#: where the fake's boot-diagnostics blobs are served (loopback only: nothing leaves the process)
BLOB_HOST = "127.0.0.1"
#: advisor's default image (Azure/azhpc-images) as the marketplace lists it, in any location
DEFAULT_IMAGE = ("*", "microsoft-dsvm", "ubuntu-hpc", "2204")


class FakeCredential:
    def get_token(self, *scopes: str, **_: Any) -> AccessToken:
        return AccessToken("fake-token-for-tests", int(time.time()) + 3600)


class FakeArm(BaseAdapter):
    def __init__(self, skus: list[dict[str, Any]] | None = None,
                 usages: dict[str, list[dict[str, Any]]] | None = None) -> None:
        super().__init__()
        self.resources: dict[str, dict[str, Any]] = {}
        self.skus = skus or []
        self.usages = usages or {}
        #: zone -> (code, message) to fail VM creation in
        self.fail_zones: dict[str, tuple[str, str]] = {}
        #: what was sent: (method, path, json body)
        self.log: list[tuple[str, str, Any]] = []
        self._ops: dict[str, dict[str, Any]] = {}
        #: Key Vaults (lower-cased id -> resource), kept apart from what advisor makes
        self.vaults: dict[str, dict[str, Any]] = {}
        #: role assignments (lower-cased id -> resource)
        self.role_assignments: dict[str, dict[str, Any]] = {}
        #: how many role-assignment PUTs answer PrincipalNotFound (Entra ID replication)
        self.principal_unknown_for = 0
        #: requests received so far (every ARM call, long-running operation polls included)
        self.calls = 0
        #: fault injection: called as ``before(n, request)`` ahead of request n (1-based); it
        #: may raise (the process dies there) or return a response to answer instead
        self.before: Callable[[int, Any], requests.Response | None] | None = None
        #: Subscriptions - Get's ``state`` (Enabled, Warned, PastDue, Disabled, Deleted)
        self.subscription_state = "Enabled"
        #: lower-cased vault id -> secret name -> its ``attributes``
        self.secrets: dict[str, dict[str, dict[str, Any]]] = {}
        #: lower-cased vault id -> the caller's permissions there; absent: Owner's
        self.permissions: dict[str, list[dict[str, Any]]] = {}
        #: (location or "*", publisher, offer, sku), lower-cased -> version names
        self.images: dict[tuple[str, str, str, str], list[str]] = {
            DEFAULT_IMAGE: ["22.04.2025111201", "22.04.2025120301"]}
        #: VM name -> the serial console text its boot diagnostics blob holds
        self.consoles: dict[str, str] = {}
        #: (url, headers) of every blob GET
        self.blob_requests: list[tuple[str, dict[str, str]]] = []

    def add_vault(self, subscription: str, rg: str, name: str, rbac: bool = True,
                  secrets: tuple[str, ...] = ("vllm-api-key", "hf-token")) -> str:
        vid = (f"/subscriptions/{subscription}/resourceGroups/{rg}/providers/"
               f"Microsoft.KeyVault/vaults/{name}")
        self.vaults[vid.lower()] = {"id": vid, "name": name, "type": "Microsoft.KeyVault/vaults",
                                    "location": "eastus",
                                    "properties": {"enableRbacAuthorization": rbac}}
        now = int(time.time())
        self.secrets[vid.lower()] = {s: {"enabled": True, "created": now, "updated": now}
                                     for s in secrets}
        return vid

    def may_assign_roles(self, vault_key: str) -> bool:
        """The fake's own reading of ``permissions``: an exact or ``*`` action, no notAction."""
        needed = {"*", "microsoft.authorization/*",
                  "microsoft.authorization/roleassignments/write",
                  "microsoft.authorization/roleassignments/*"}
        perms = self.permissions.get(vault_key, [{"actions": ["*"], "notActions": []}])
        return any({a.lower() for a in p.get("actions", [])} & needed
                   and not {a.lower() for a in p.get("notActions", [])} & needed
                   for p in perms)

    def principals(self) -> dict[str, str]:
        """principalId -> VM id, for every VM with a system-assigned identity."""
        return {vm["identity"]["principalId"]: vm["id"] for vm in self.resources.values()
                if (vm.get("identity") or {}).get("principalId")}

    # -- helpers ----------------------------------------------------------------------------
    def puts(self, kind: str) -> list[dict[str, Any]]:
        return [b for m, p, b in self.log if m == "PUT" and f"/{kind.lower()}/" in p.lower()]

    def _op(self, body: dict[str, Any]) -> str:
        name = f"op{len(self._ops) + 1}"
        self._ops[name] = body
        return f"{HOST}/fake-operations/{name}?api-version=2024-01-01"

    @staticmethod
    def _response(req: Any, status: int, body: Any = None,
                  headers: dict[str, str] | None = None) -> requests.Response:
        r = requests.Response()
        r.status_code = status
        data = b"" if body is None else json.dumps(body).encode()
        r._content = data
        r.raw = io.BytesIO(data)
        r.headers = CaseInsensitiveDict({"Content-Type": "application/json",
                                         "Content-Length": str(len(data)), **(headers or {})})
        r.url = req.url
        r.request = req
        r.encoding = "utf-8"
        r.reason = {200: "OK", 201: "Created", 202: "Accepted", 404: "Not Found"}.get(status, "")
        return r

    def close(self) -> None:
        pass

    # -- ARM --------------------------------------------------------------------------------
    def send(self, request: Any, **_: Any) -> requests.Response:  # type: ignore[override]
        url = urlparse(request.url)
        assert url.hostname in ("management.azure.com", BLOB_HOST), request.url  # nowhere else
        path = url.path
        key = path.lower().rstrip("/")
        q = parse_qs(url.query)
        raw = request.body
        if hasattr(raw, "read"):  # the SDK streams an IO[bytes] body as it is
            pos = raw.tell()
            data = raw.read()
            raw.seek(pos)
            raw = data
        body = json.loads(raw) if raw else None
        self.calls += 1
        if self.before is not None:
            injected = self.before(self.calls, request)
            if injected is not None:
                return injected
        if url.hostname == BLOB_HOST:
            return self._blob(request, path)
        self.log.append((request.method, path, body))
        m = request.method
        if key.startswith("/fake-operations/"):
            op = self._ops[key.rsplit("/", 1)[1]]
            if op.get("delete"):
                self.resources.pop(op["delete"], None)
                return self._response(request, 200, {})
            return self._response(request, 200, op)
        if key.endswith("/providers/microsoft.compute/skus"):
            loc = re.search(r"location eq '([^']+)'", q.get("$filter", [""])[0])
            value = [s for s in self.skus if not loc or loc.group(1) in s["locations"]]
            return self._response(request, 200, {"value": value})
        if u := re.search(r"/locations/([^/]+)/usages$", key):
            return self._response(request, 200, {"value": self.usages.get(u.group(1), [])})
        if m == "GET" and re.fullmatch(r"/subscriptions/[^/]+/resources", key):
            rt = re.search(r"resourceType eq '([^']+)'", q.get("$filter", [""])[0])
            value = [v for v in [*self.vaults.values(), *self.resources.values()]
                     if not rt or str(v.get("type", "")).lower() == rt.group(1).lower()]
            tag = re.search(r"tagName eq '([^']+)' and tagValue eq '([^']*)'",
                            q.get("$filter", [""])[0])
            if tag:  # as ARM: resources (not resource groups) carrying that tag value
                value = [v for v in value if "/providers/" in str(v.get("id", "")).lower()
                         and (v.get("tags") or {}).get(tag.group(1)) == tag.group(2)]
            return self._response(request, 200, {"value": value})
        if key in self.vaults and m == "GET":
            return self._response(request, 200, self.vaults[key])
        if m == "GET" and re.fullmatch(r"/subscriptions/[^/]+", key):
            sub = path.rstrip("/").rsplit("/", 1)[1]
            return self._response(request, 200, {
                "id": f"/subscriptions/{sub}", "subscriptionId": sub,
                "tenantId": "00000000-0000-0000-0000-0000000000aa",
                "displayName": "advisor tests", "state": self.subscription_state,
                "subscriptionPolicies": {"locationPlacementId": "Public_2014-09-01",
                                         "quotaId": "PayAsYouGo_2014-09-01",
                                         "spendingLimit": "Off"},
                "authorizationSource": "RoleBased"})
        if key.endswith("/providers/microsoft.authorization/permissions") and m == "GET":
            scope = key.rsplit("/providers/microsoft.authorization/", 1)[0]
            if scope not in self.vaults:
                return self._not_found(request, scope)
            return self._response(request, 200, {"value": self.permissions.get(scope, [
                {"actions": ["*"], "notActions": [], "dataActions": [], "notDataActions": []}])})
        if m == "GET" and (sec := re.fullmatch(r"(.+/microsoft\.keyvault/vaults/[^/]+)/secrets/"
                                               r"([^/]+)", key)):
            return self._secret(request, sec.group(1), path.rstrip("/").rsplit("/", 1)[1])
        if m == "GET" and (img := re.search(
                r"/providers/microsoft\.compute/locations/([^/]+)/publishers/([^/]+)/"
                r"artifacttypes/vmimage/offers/([^/]+)/skus/([^/]+)/versions$", key)):
            loc, pub, offer, sku_ = img.groups()
            versions = self.images.get((loc, pub, offer, sku_),
                                       self.images.get(("*", pub, offer, sku_)))
            if versions is None:  # ARM's answer for an unknown publisher, offer or SKU
                return self._response(request, 404, {"error": {
                    "code": "NotFound", "message": "Artifact: VMImage was not found."}})
            base = path.rstrip("/")
            return self._response(request, 200, [
                {"location": loc, "name": v, "id": f"{base}/{v}"} for v in versions])
        if m == "POST" and key.endswith("/retrievebootdiagnosticsdata"):
            return self._boot_diagnostics(request, key.rsplit("/", 1)[0])
        if "/providers/microsoft.authorization/roleassignments" in key:
            return self._role_assignment(request, m, path, key, q, body)
        if key.endswith("/instanceview"):
            vm = self.resources.get(key.rsplit("/", 1)[0])
            if vm is None:
                return self._not_found(request, key)
            return self._response(request, 200, {"statuses": [
                {"code": "ProvisioningState/succeeded"}, {"code": "PowerState/running"}]})
        if m == "GET" and re.search(r"/resourcegroups/[^/]+/resources$", key):
            rg = key.rsplit("/resources", 1)[0] + "/"
            return self._response(request, 200, {"value": [
                v for k, v in self.resources.items() if k.startswith(rg + "providers/")]})
        if m == "GET" and re.search(r"/providers/microsoft\.[a-z]+/[a-z]+$", key) and \
                "/resourcegroups/" in key:
            prefix = key + "/"
            return self._response(request, 200, {"value": [
                v for k, v in self.resources.items()
                if k.startswith(prefix) and "/" not in k[len(prefix):]]})
        if m == "PUT":
            return self._put(request, path, key, body or {})
        if m == "GET":
            if key not in self.resources:
                return self._not_found(request, key)
            return self._response(request, 200, self.resources[key])
        if m == "DELETE":
            if key not in self.resources:
                return self._response(request, 204)
            return self._response(request, 202, None,
                                  {"Location": self._op({"delete": key}), "Retry-After": "0"})
        return self._response(request, 400, {"error": {"code": "BadRequest",
                                                       "message": f"no route {m} {path}"}})

    def _secret(self, request: Any, vault_key: str, name: str) -> requests.Response:
        attrs = self.secrets.get(vault_key, {}).get(name)
        if vault_key not in self.vaults or attrs is None:
            return self._not_found(request, f"{vault_key}/secrets/{name}")
        vault = self.vaults[vault_key]
        return self._response(request, 200, {
            "id": f"{vault['id']}/secrets/{name}", "name": name,
            "type": "Microsoft.KeyVault/vaults/secrets", "location": vault["location"],
            "properties": {"attributes": attrs,
                           "secretUri": f"https://{vault['name']}.vault.azure.net/secrets/{name}",
                           "secretUriWithVersion": f"https://{vault['name']}.vault.azure.net/"
                                                   f"secrets/{name}/0123456789abcdef"}})

    def _boot_diagnostics(self, request: Any, vm_key: str) -> requests.Response:
        vm = self.resources.get(vm_key)
        if vm is None:
            return self._not_found(request, vm_key)
        diag = ((vm.get("properties") or {}).get("diagnosticsProfile") or {}).get(
            "bootDiagnostics") or {}
        if not diag.get("enabled"):  # the error code ARM gives here is not documented
            return self._response(request, 409, {"error": {
                "code": "Conflict", "message": "boot diagnostics are not enabled on this VM"}})
        blob = f"https://{BLOB_HOST}/bootdiagnostics-fake/{vm['name']}"
        sas = "?sv=2022-11-02&sr=b&sp=r&se=2099-01-01T00%3A00%3A00Z&sig=fake"
        return self._response(request, 200, {
            "consoleScreenshotBlobUri": f"{blob}.screenshot.bmp{sas}",
            "serialConsoleLogBlobUri": f"{blob}.serialconsole.log{sas}"})

    def _blob(self, request: Any, path: str) -> requests.Response:
        """A boot-diagnostics blob (GET only), answered as Blob storage would: bytes."""
        self.blob_requests.append((request.url, dict(request.headers)))
        m = re.fullmatch(r"/bootdiagnostics-fake/(.+)\.serialconsole\.log", path)
        if request.method != "GET" or m is None or m.group(1) not in self.consoles:
            return self._response(request, 404, {"error": {"code": "BlobNotFound",
                                                           "message": path}})
        r = self._response(request, 200)
        data = self.consoles[m.group(1)].encode()
        r._content = data
        r.raw = io.BytesIO(data)
        r.headers["Content-Type"] = "text/plain"
        r.headers["Content-Length"] = str(len(data))
        return r

    def _not_found(self, request: Any, key: str) -> requests.Response:
        code = "ResourceGroupNotFound" if key.count("/") <= 4 else "ResourceNotFound"
        return self._response(request, 404, {"error": {"code": code,
                                                       "message": f"{key} was not found"}})

    def _put(self, request: Any, path: str, key: str, body: dict[str, Any]) -> requests.Response:
        name = path.rstrip("/").rsplit("/", 1)[1]
        stored = {**body, "id": path, "name": name}
        props = dict(stored.get("properties") or {})
        is_rg = re.fullmatch(r"/subscriptions/[^/]+/resourcegroups/[^/]+", key) is not None
        if is_rg:
            stored["properties"] = {"provisioningState": "Succeeded"}
            self.resources[key] = stored
            return self._response(request, 201, stored)
        zone = (body.get("zones") or [None])[0]
        failure = self.fail_zones.get(zone) if "/virtualmachines/" in key else None
        if "/publicipaddresses/" in key:
            props["ipAddress"] = "203.0.113.50"
        if "/networkinterfaces/" in key:
            n = sum(1 for k in self.resources if "/networkinterfaces/" in k) + 4
            for cfg in props.get("ipConfigurations", []):
                cfg.setdefault("properties", {})["privateIPAddress"] = f"10.42.0.{n}"
        if "/virtualmachines/" in key:
            props["vmId"] = "00000000-0000-0000-0000-000000000001"
            if (body.get("identity") or {}).get("type") == "SystemAssigned":
                stored["identity"] = {"type": "SystemAssigned", "tenantId": "t" * 8,
                                      "principalId": str(uuid.uuid5(uuid.NAMESPACE_URL, key))}
        props["provisioningState"] = "Failed" if failure else "Succeeded"
        stored["properties"] = props
        self.resources[key] = stored
        op: dict[str, Any] = {"status": "Succeeded"}
        if failure:
            op = {"status": "Failed", "error": {"code": failure[0], "message": failure[1]}}
        answer = {**stored, "properties": {**props, "provisioningState": "Creating"}}
        return self._response(request, 201, answer,
                              {"Azure-AsyncOperation": self._op(op), "Retry-After": "0"})


    def _role_assignment(self, request: Any, m: str, path: str, key: str,
                         q: dict[str, list[str]], body: Any) -> requests.Response:
        def error(status: int, code: str, message: str) -> requests.Response:
            return self._response(request, status, {"error": {"code": code, "message": message}})

        if m == "GET" and key.endswith("/roleassignments"):  # list, at the subscription
            pid = re.search(r"principalId eq '([^']+)'", q.get("$filter", [""])[0])
            return self._response(request, 200, {"value": [
                ra for ra in self.role_assignments.values()
                if not pid or ra["properties"]["principalId"] == pid.group(1)]})
        scope = path[:path.lower().index("/providers/microsoft.authorization/")]
        name = path.rstrip("/").rsplit("/", 1)[1]
        if m == "DELETE":
            gone = self.role_assignments.pop(key, None)
            return self._response(request, 200 if gone else 204, gone)
        if m == "GET":
            if key not in self.role_assignments:
                return error(404, "RoleAssignmentNotFound", f"{name} not found")
            return self._response(request, 200, self.role_assignments[key])
        props = (body or {}).get("properties") or {}
        vault_key = next((v for v in self.vaults
                          if scope.lower() == v or scope.lower().startswith(v + "/")), None)
        if vault_key is None:
            return error(404, "ResourceNotFound", f"scope {scope} was not found")
        if not self.may_assign_roles(vault_key):
            return error(403, "AuthorizationFailed", "The client does not have authorization "
                         "to perform action 'Microsoft.Authorization/roleAssignments/write' "
                         f"over scope '{scope}'")
        if not re.search(r"/providers/microsoft\.authorization/roledefinitions/[0-9a-f-]{36}$",
                         str(props.get("roleDefinitionId", "")).lower()):
            return error(400, "InvalidRoleDefinitionId", "the role definition id is malformed")
        if self.principal_unknown_for or props.get("principalId") not in self.principals():
            self.principal_unknown_for = max(0, self.principal_unknown_for - 1)
            return error(400, "PrincipalNotFound", f"Principal {props.get('principalId')} "
                         "does not exist in the directory.")
        old = self.role_assignments.get(key)
        if old and old["properties"]["principalId"] != props["principalId"]:
            return error(409, "RoleAssignmentUpdateNotPermitted", "Tenant ID, application ID, "
                         "principal ID, and scope are not allowed to be updated.")
        for other_key, ra in self.role_assignments.items():
            o = ra["properties"]
            if other_key != key and (o["scope"].lower(), o["principalId"],
                                     o["roleDefinitionId"].lower()) == (
                    scope.lower(), props["principalId"], props["roleDefinitionId"].lower()):
                return error(409, "RoleAssignmentExists", "The role assignment already exists.")
        ra = {"id": path, "name": name, "type": "Microsoft.Authorization/roleAssignments",
              "properties": {**props, "scope": scope}}
        self.role_assignments[key] = ra
        return self._response(request, 200 if old else 201, ra)


def transport(arm: FakeArm) -> Any:
    from azure.core.pipeline.transport import RequestsTransport

    session = requests.Session()
    session.mount("https://", arm)
    session.mount("http://", arm)
    return RequestsTransport(session=session, session_owner=False)
