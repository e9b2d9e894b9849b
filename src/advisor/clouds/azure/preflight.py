"""Azure preflight (issue 27, item 6): what ``provision`` checks before it makes anything.
``AzureProvider.preflight`` asks ARM, in this order; ``preflight_plan`` lists the same checks
without a call (``provision --dry-run``).

``credentials``
    GET ``/subscriptions/{id}`` (Subscriptions - Get, api-version 2022-12-01:
    https://learn.microsoft.com/en-us/rest/api/resources/subscriptions/get): the cheapest ARM
    call that proves the token and the subscription. ``state`` Disabled or Deleted is a refusal
    (Warned and PastDue subscriptions still run resources:
    https://learn.microsoft.com/en-us/azure/cost-management-billing/manage/subscription-states).
    When it fails, nothing else is asked.
``secret`` (one per ``azure-kv:VAULT/NAME`` reference)
    the vault found in the subscription (``AzureProvider._vault``: ARM's resource list, or the
    vault's id in ``--key-vault-resource-group``), then the secret's metadata through ARM's
    management plane, GET ``{vault id}/secrets/{name}`` (Secrets - Get, api-version 2023-07-01:
    https://learn.microsoft.com/en-us/rest/api/keyvault/keyvault/secrets/get): it needs
    ``Microsoft.KeyVault/vaults/secrets/read`` (Reader has it), not a data-plane right, and it
    never returns the value. ``properties.attributes.enabled`` false or ``exp`` in the past is a
    refusal: the instance would read nothing.
``secret-access`` (one per vault)
    advisor gives the VM's system-assigned identity "Key Vault Secrets User" on each secret once
    the VM exists (``AzureProvider._grant``). Two things decide whether that works:
    the caller may write role assignments there — GET ``{vault id}/providers/
    Microsoft.Authorization/permissions`` (Permissions - List For Resource, api-version
    2022-04-01: https://learn.microsoft.com/en-us/rest/api/authorization/permissions/
    list-for-resource) lists ``actions``/``notActions`` per role the caller holds; an action is
    granted by a role whose ``actions`` match it and whose ``notActions`` do not, ``*`` matching
    any text (https://learn.microsoft.com/en-us/azure/role-based-access-control/
    role-definitions#actions). Deny assignments and ABAC conditions are not in that list, so a
    True here can still meet a refusal at launch (which then removes the VM);
    and the vault uses Azure RBAC (``properties.enableRbacAuthorization``, read with the vault):
    a vault on access policies ignores role assignments (https://learn.microsoft.com/en-us/
    azure/key-vault/general/rbac-guide), so the VM could not read its key until someone adds an
    access policy (``az keyvault set-policy``) for an identity that exists only after launch: a
    refusal before any money is spent, whose fix works before launch (switch the vault to Azure
    RBAC, or use one that is).
    A vault whose properties these credentials cannot read is ``ok=None``.
``quota``
    ``check_quota`` (usage.list of the VM family); unreadable quota is ``ok=None``.
``image``
    advisor's default image or a ``--image`` URN: the versions of PUBLISHER/OFFER/SKU in the
    region, GET ``…/locations/{region}/publishers/{p}/artifacttypes/vmimage/offers/{o}/skus/{s}/
    versions`` (Virtual Machine Images - List: https://learn.microsoft.com/en-us/rest/api/
    compute/virtual-machine-images/list; a JSON array); VERSION ``latest`` needs one, another
    VERSION must be listed. An image resource id is read (Images - Get, 2024-07-01:
    https://learn.microsoft.com/en-us/rest/api/compute/images/get: a managed image serves its own
    region only; Gallery Image Versions - Get, 2023-07-03: https://learn.microsoft.com/en-us/
    rest/api/compute/gallery-image-versions/get: the region must be one of
    ``publishingProfile.targetRegions``).
``egress``
    no call: the bodies advisor sends. Each VM gets its own Standard public IP, which is its
    outbound path (pip, the model download). advisor's VNet has no NAT gateway and relies on no
    default outbound access: Azure retired that for new virtual networks — with network API
    versions released after 2026-03-31 (2025-07-01 on) a new VNet's subnets are private
    (``defaultOutboundAccess: false``) and a VM without a public IP, NAT gateway or load
    balancer outbound rule reaches nothing outside
    (https://learn.microsoft.com/en-us/azure/virtual-network/ip-services/default-outbound-access;
    announcement: https://azure.microsoft.com/updates/default-outbound-access-for-vms-in-azure-
    will-be-retired-transition-to-a-new-method-of-internet-access/). The check fails if a body
    ever loses the public IP without a NAT gateway on the subnet, or an NSG rule denies
    outbound traffic.

Errors: a refusal that a user can act on is ``ok=False`` with one ``fix`` line (an ``az`` command
where there is one); a call that could not be made or answered oddly (a 5xx, a 400 nobody
expects, no right to read) is ``ok=None``: said, never a refusal. A dying process
(``BaseException``) is never caught.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from advisor.clouds.azure.options import CREDENTIALS_HINT
from advisor.clouds.base import CloudError, LaunchSpec, PreflightCheck
from advisor.errors import UserInputError

if TYPE_CHECKING:
    from advisor.clouds.azure.compute import AzureProvider

#: Subscriptions - Get (see the module docstring)
SUBSCRIPTION_API = "2022-12-01"
#: subscription states that run nothing (Subscription states, see the module docstring)
DEAD_STATES = {"disabled", "deleted"}
#: Images - Get / Gallery Image Versions - Get (see the module docstring)
IMAGES_API = "2024-07-01"
GALLERY_API = "2023-07-03"
#: the action a role assignment PUT needs (Azure built-in roles: Owner, User Access
#: Administrator and Role Based Access Control Administrator carry it)
WRITE_ROLE_ASSIGNMENTS = "Microsoft.Authorization/roleAssignments/write"
#: the secret references of a spec, in the words a user knows them by
WHAT = {"api_key_ref": "the API key", "hf_token_ref": "the Hugging Face token"}


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def action_allowed(action: str, permissions: list[dict[str, Any]]) -> bool:
    """Whether one of the caller's permissions (Permissions - List For Resource's ``value``)
    grants ``action``: its ``actions`` match and its ``notActions`` do not; ``*`` matches any
    text, case-insensitively (Azure role definitions, "Actions"/"NotActions")."""
    def match(patterns: Any) -> bool:
        for p in patterns or []:
            rx = ".*".join(re.escape(part) for part in str(p).split("*"))
            if re.fullmatch(rx, action, flags=re.IGNORECASE):
                return True
        return False

    return any(match(p.get("actions")) and not match(p.get("notActions"))
               for p in permissions)


def refs(spec: LaunchSpec) -> list[tuple[str, str, str]]:
    """(what, vault, secret) of each Key Vault reference (the API key, the token)."""
    from advisor.clouds.azure.secrets import KEY_SCHEME

    out: list[tuple[str, str, str]] = []
    for field, what in WHAT.items():
        ref = getattr(spec, field)
        if ref and ref.startswith(KEY_SCHEME.prefix):
            vault, _, secret = ref.removeprefix(KEY_SCHEME.prefix).partition("/")
            if (vault, secret) not in [(v, s) for _, v, s in out]:
                out.append((what, vault, secret))
    return out


def image_urn(image: dict[str, str]) -> str:
    return ":".join(image[k] for k in ("publisher", "offer", "sku", "version"))


# -- the checks ---------------------------------------------------------------------------------
def check_credentials(p: AzureProvider) -> PreflightCheck:
    try:
        sub = p.subscription
    except UserInputError as exc:
        return PreflightCheck(name="credentials", ok=False, detail=str(exc),
                              fix="pass --subscription ID or set AZURE_SUBSCRIPTION_ID "
                              "(az account list --output table lists yours)")
    try:
        resp = p._arm("GET", f"/subscriptions/{sub}", SUBSCRIPTION_API)
    except UserInputError as exc:  # the azure SDK is not installed
        return PreflightCheck(name="credentials", ok=False, detail=str(exc), fix=exc.hint)
    except CloudError as exc:
        if exc.scope == "provider":  # no token: expired login, no service principal
            return PreflightCheck(name="credentials", ok=False,
                                  detail=f"no Azure token: {exc.detail[:200]}",
                                  fix=CREDENTIALS_HINT)
        return PreflightCheck(name="credentials", ok=None,
                              detail=f"subscription {sub} could not be read: {_short(exc)}")
    doc = _json(resp)
    if resp.status_code == 404:
        return PreflightCheck(
            name="credentials", ok=False,
            detail=f"subscription {sub} is not visible to these credentials",
            fix="az account list --output table (then pass --subscription ID or set "
                "AZURE_SUBSCRIPTION_ID)")
    if resp.status_code in (401, 403):
        return PreflightCheck(
            name="credentials", ok=False,
            detail=f"these credentials may not read subscription {sub} ({resp.status_code} "
                   f"{_code(doc)})",
            fix=f"ask an Owner of the subscription: az role assignment create --assignee "
                f"<your object id> --role Contributor --scope /subscriptions/{sub}")
    if resp.status_code != 200:
        return PreflightCheck(name="credentials", ok=None,
                              detail=f"subscription {sub} could not be read "
                                     f"({resp.status_code} {_code(doc)})")
    state = str(doc.get("state") or "unknown")
    name = str(doc.get("displayName") or sub)
    if state.lower() in DEAD_STATES:
        return PreflightCheck(
            name="credentials", ok=False,
            detail=f"subscription {name} ({sub}) is {state}: it runs no resources",
            fix=f"reactivate it (az account show --subscription {sub} --query state; the "
                "Azure portal's Subscriptions page), or pass another --subscription")
    return PreflightCheck(name="credentials", ok=True,
                          detail=f"subscription {name} ({sub}) is {state}")


def check_secret(p: AzureProvider, what: str, vault: str, secret: str) -> PreflightCheck:
    ref = f"azure-kv:{vault}/{secret}"
    create = (f"az keyvault create --name {vault} --resource-group <group> "
              "--enable-rbac-authorization true (or pass --key-vault-resource-group if it is "
              "in a group these credentials cannot list)")
    try:
        vid = p._vault(vault)["id"]
    except UserInputError as exc:
        return PreflightCheck(name="secret", ok=False, detail=f"{what} ({ref}): {exc}",
                              fix=create)
    except CloudError as exc:
        return PreflightCheck(name="secret", ok=None,
                              detail=f"{what} ({ref}): Key Vault {vault} could not be looked "
                                     f"up: {_short(exc)}")
    from advisor.clouds.azure.resources import KEYVAULT_API

    try:
        resp = p._arm("GET", f"{vid}/secrets/{secret}", KEYVAULT_API)
    except CloudError as exc:
        return PreflightCheck(name="secret", ok=None,
                              detail=f"{what} ({ref}) could not be read: {_short(exc)}")
    doc = _json(resp)
    put = (f"az keyvault secret set --vault-name {vault} --name {secret} "
           "--file <file holding the value>")
    if resp.status_code == 404:
        return PreflightCheck(name="secret", ok=False,
                              detail=f"{what}: Key Vault {vault} has no secret {secret}",
                              fix=put)
    if resp.status_code != 200:
        return PreflightCheck(name="secret", ok=None,
                              detail=f"{what} ({ref}): its metadata could not be read "
                                     f"({resp.status_code} {_code(doc)}; it needs "
                                     "Microsoft.KeyVault/vaults/secrets/read)")
    attrs = ((doc.get("properties") or {}).get("attributes") or {})
    if attrs.get("enabled") is False:
        return PreflightCheck(
            name="secret", ok=False, detail=f"{what} ({ref}) is disabled: the VM would read "
            "nothing", fix=f"az keyvault secret set-attributes --vault-name {vault} "
            f"--name {secret} --enabled true")
    exp = attrs.get("exp")
    if isinstance(exp, (int, float)) and exp <= time.time():
        return PreflightCheck(
            name="secret", ok=False, detail=f"{what} ({ref}) expired at "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(exp))}: the VM would read "
            "nothing", fix=f"{put} (a new version), or az keyvault secret set-attributes "
            f"--vault-name {vault} --name {secret} --expires <date>")
    return PreflightCheck(name="secret", ok=True, detail=f"{what}: {ref} exists")


def check_secret_access(p: AzureProvider, vault: str, secrets: list[str]) -> PreflightCheck:
    names = ", ".join(secrets)
    known = p._vaults.get(vault.lower())
    if known is None:  # the vault was not found or not looked up: said under 'secret'
        return PreflightCheck(name="secret-access", ok=None,
                              detail=f"Key Vault {vault}: not asked (the vault was not found)")
    vid, rbac = known["id"], known["rbac"]
    from advisor.clouds.azure.resources import AUTHORIZATION_API

    may_write: bool | None
    why = ""
    try:
        perms: list[dict[str, Any]] = []
        page: str | None = f"{vid}/providers/Microsoft.Authorization/permissions"
        while page:
            resp = p._arm("GET", page, AUTHORIZATION_API)
            if resp.status_code != 200:
                raise LookupError(f"{resp.status_code} {_code(_json(resp))}")
            doc = _json(resp)
            perms += [x for x in doc.get("value") or [] if isinstance(x, dict)]
            page = doc.get("nextLink")
        may_write = action_allowed(WRITE_ROLE_ASSIGNMENTS, perms)
    except (CloudError, LookupError) as exc:
        may_write, why = None, _short(exc)
    if may_write is False:
        return PreflightCheck(
            name="secret-access", ok=False,
            detail=f"these credentials may not write role assignments on Key Vault {vault} "
                   f"({WRITE_ROLE_ASSIGNMENTS}): the VM's identity could not be given Key "
                   f"Vault Secrets User on {names}",
            fix=f"ask an Owner of the vault: az role assignment create --assignee <your object "
                f"id> --role \"Role Based Access Control Administrator\" --scope {vid}")
    if rbac is False:
        return PreflightCheck(
            name="secret-access", ok=False,
            detail=f"Key Vault {vault} uses access policies, not Azure RBAC: the Key Vault "
                   f"Secrets User role advisor gives the VM's identity does not apply there, so "
                   f"the VM could not read {names}; an access policy (az keyvault set-policy "
                   f"--name {vault} --object-id <principalId> --secret-permissions get) can "
                   "name the VM's identity only once the VM exists",
            fix=f"az keyvault update --name {vault} --enable-rbac-authorization true (its "
                "access policies stop applying), or keep the secrets in a vault that uses "
                "Azure RBAC")
    if may_write is None:
        return PreflightCheck(name="secret-access", ok=None,
                              detail=f"Key Vault {vault}: whether these credentials may write "
                                     f"role assignments there could not be read: {why}")
    if rbac is None:
        return PreflightCheck(name="secret-access", ok=None,
                              detail=f"Key Vault {vault}: its properties are not readable, so "
                                     "whether it uses Azure RBAC (which the role advisor gives "
                                     "needs) is unknown")
    return PreflightCheck(name="secret-access", ok=True,
                          detail=f"Key Vault {vault} uses Azure RBAC and these credentials may "
                                 f"write role assignments on it: the VM's identity will get "
                                 f"Key Vault Secrets User on {names}")


def quota_check(p: AzureProvider, spec: LaunchSpec) -> PreflightCheck:
    st = p.check_quota(spec)
    if not st.checked:
        return PreflightCheck(name="quota", ok=None, detail=st.detail)
    if st.ok:
        return PreflightCheck(name="quota", ok=True, detail=st.detail)
    # quota_status's words: "quota FAMILY in REGION allows …"
    m = re.match(r"quota (\S+) in ", st.detail)
    family = m.group(1) if m else "<VM family>"
    kind = "lowPriority" if spec.spot else "dedicated"
    return PreflightCheck(
        name="quota", ok=False, detail=st.detail,
        # az quota (the quota CLI extension): https://learn.microsoft.com/en-us/cli/azure/quota
        fix=f"az quota update --resource-name {family} --scope /subscriptions/"
            f"{p._subscription}/providers/Microsoft.Compute/locations/{spec.region} "
            f"--limit-object value=<limit + {spec.vcpus}> --resource-type {kind}")


def check_image(p: AzureProvider, spec: LaunchSpec) -> PreflightCheck:
    from advisor.clouds.azure.resources import _image_ref

    try:
        image = _image_ref(spec.image)
    except UserInputError as exc:
        return PreflightCheck(name="image", ok=False, detail=str(exc), fix=exc.hint)
    if "id" in image:
        return _check_image_id(p, image["id"], spec.region)
    urn = image_urn(image)
    listing = (f"az vm image list --location {spec.region} --publisher {image['publisher']} "
               f"--offer {image['offer']} --sku {image['sku']} --all --output table")
    from azure.core.exceptions import ResourceNotFoundError

    try:
        found = list(p._client("compute").virtual_machine_images.list(
            spec.region, image["publisher"], image["offer"], image["sku"]))
    except ResourceNotFoundError:
        found = []
    except Exception as exc:
        return PreflightCheck(name="image", ok=None,
                              detail=f"image {urn} could not be listed in {spec.region}: "
                                     f"{_short(p.classify(exc))}")
    versions = [str(v.name) for v in found]
    if image["version"].lower() == "latest":
        if versions:
            return PreflightCheck(name="image", ok=True,
                                  detail=f"image {urn} is offered in {spec.region} "
                                         f"({len(versions)} versions)")
        return PreflightCheck(name="image", ok=False,
                              detail=f"image {urn} is not offered in {spec.region}", fix=listing)
    if image["version"] in versions:
        return PreflightCheck(name="image", ok=True,
                              detail=f"image {urn} is offered in {spec.region}")
    return PreflightCheck(name="image", ok=False,
                          detail=f"image {urn}: version {image['version']} is not offered in "
                                 f"{spec.region}", fix=listing)


def _region(name: str) -> str:
    """'East US' and 'eastus' alike (gallery target regions are display names)."""
    return name.replace(" ", "").lower()


def _check_image_id(p: AzureProvider, image_id: str, region: str) -> PreflightCheck:
    gallery = "/galleries/" in image_id.lower()
    try:
        resp = p._arm("GET", image_id, GALLERY_API if gallery else IMAGES_API)
    except CloudError as exc:
        return PreflightCheck(name="image", ok=None,
                              detail=f"image {image_id} could not be read: {_short(exc)}")
    doc = _json(resp)
    if resp.status_code == 404:
        return PreflightCheck(
            name="image", ok=False, detail=f"image {image_id} does not exist",
            fix="az image list --output table, or az sig image-version list --resource-group "
                "<group> --gallery-name <gallery> --gallery-image-definition <image>")
    if resp.status_code != 200:
        return PreflightCheck(name="image", ok=None,
                              detail=f"image {image_id} could not be read "
                                     f"({resp.status_code} {_code(doc)})")
    parts = image_id.strip("/").split("/")
    if gallery and "/versions/" in image_id.lower():
        targets = [_region(str(t.get("name", ""))) for t in
                   ((doc.get("properties") or {}).get("publishingProfile") or {}).get(
                       "targetRegions") or []]
        if targets and _region(region) not in targets:
            return PreflightCheck(
                name="image", ok=False,
                detail=f"image version {parts[-1]} is not replicated to {region}",
                fix=f"az sig image-version update --resource-group {parts[3]} --gallery-name "
                    f"{parts[7]} --gallery-image-definition {parts[9]} --gallery-image-version "
                    f"{parts[11]} --add publishingProfile.targetRegions name={region}")
    elif not gallery and _region(str(doc.get("location", region))) != _region(region):
        return PreflightCheck(
            name="image", ok=False,
            detail=f"managed image {parts[-1]} is in {doc.get('location')}, not {region} (a "
                   "managed image serves its own region only)",
            fix=f"use an image in {region}, or publish it to a gallery replicated there "
                "(az sig image-version create … --target-regions "
                f"{region})")
    return PreflightCheck(name="image", ok=True, detail=f"image {image_id} is usable in {region}")


def check_egress(bodies: dict[str, Any]) -> PreflightCheck:
    nic = bodies["networkInterface"]["properties"]["ipConfigurations"]
    subnets = bodies["virtualNetwork"]["properties"]["subnets"]
    deny = [r["name"] for r in bodies["networkSecurityGroup"]["properties"]["securityRules"]
            if r["properties"].get("direction") == "Outbound"
            and r["properties"].get("access") == "Deny"]
    if deny:
        return PreflightCheck(name="egress", ok=False,
                              detail=f"the NSG denies outbound traffic ({', '.join(deny)}): pip "
                                     "and the model download would fail",
                              fix="remove the outbound deny rule from advisor's NSG body")
    if all((c.get("properties") or {}).get("publicIPAddress") for c in nic):
        return PreflightCheck(
            name="egress", ok=True,
            detail="each VM gets its own Standard public IP, its outbound path (advisor's VNet "
                   "has no NAT gateway and relies on no default outbound access, which new "
                   "VNets no longer get)")
    if all((s.get("properties") or {}).get("natGateway") for s in subnets):
        return PreflightCheck(name="egress", ok=True,
                              detail="the subnet's NAT gateway is the VMs' outbound path")
    return PreflightCheck(
        name="egress", ok=False,
        detail="a VM would have no public IP and its subnet no NAT gateway: new VNets' subnets "
               "are private (no default outbound access), so pip and the model download fail",
        fix="az network nat gateway create --resource-group <group> --name <nat> "
            "--public-ip-addresses <ip>, then az network vnet subnet update --nat-gateway <nat>")


# -- the two entry points -----------------------------------------------------------------------
def preflight(p: AzureProvider, spec: LaunchSpec) -> list[PreflightCheck]:
    plan = preflight_plan(p, spec)
    creds = check_credentials(p)
    if creds.ok is False:
        return [creds] + [c.model_copy(update={"detail": "not asked: the credentials check "
                                               "failed"}) for c in plan[1:]]
    out = [creds]
    found = refs(spec)
    for what, vault, secret in found:
        out.append(check_secret(p, what, vault, secret))
    for vault in dict.fromkeys(v for _, v, _ in found):
        out.append(check_secret_access(p, vault, [s for _, v, s in found if v == vault]))
    out.append(quota_check(p, spec))
    out.append(check_image(p, spec))
    try:
        out.append(check_egress(p.bodies(spec, None, "-")))
    except UserInputError as exc:  # a body advisor cannot build: said under 'image' too
        out.append(PreflightCheck(name="egress", ok=None, detail=f"not checked: {exc}"))
    return out


def preflight_plan(p: AzureProvider, spec: LaunchSpec) -> list[PreflightCheck]:
    """What ``preflight`` asks, in its order, without a call (and without the SDK)."""
    sub = p._subscription or "<subscription>"
    out = [PreflightCheck(name="credentials", ok=None,
                          detail=f"would GET /subscriptions/{sub} (the token, and the "
                                 "subscription's state)")]
    found = refs(spec)
    for what, vault, secret in found:
        out.append(PreflightCheck(name="secret", ok=None,
                                  detail=f"would find Key Vault {vault} and read the metadata "
                                         f"of its secret {secret} ({what}; never the value)"))
    for vault in dict.fromkeys(v for _, v, _ in found):
        out.append(PreflightCheck(
            name="secret-access", ok=None,
            detail=f"would check that Key Vault {vault} uses Azure RBAC and that these "
                   f"credentials may write role assignments on it ({WRITE_ROLE_ASSIGNMENTS}), "
                   "so that the VM's identity gets Key Vault Secrets User"))
    out.append(PreflightCheck(name="quota", ok=None,
                              detail=f"would read the VM family's vCPU usage in {spec.region} "
                                     f"({spec.vcpus} vCPUs needed)"))
    from advisor.clouds.azure.resources import _image_ref

    try:
        image = _image_ref(spec.image)
        what = image["id"] if "id" in image else image_urn(image)
    except UserInputError:
        what = str(spec.image)
    out.append(PreflightCheck(name="image", ok=None,
                              detail=f"would check that image {what} is offered in "
                                     f"{spec.region}"))
    out.append(PreflightCheck(name="egress", ok=None,
                              detail="would check the outbound path in the request bodies (each "
                                     "VM's public IP; new VNets get no default outbound "
                                     "access)"))
    return out


def _json(resp: Any) -> dict[str, Any]:
    try:
        doc = resp.json()
    except Exception:  # an empty or non-JSON body
        return {}
    return doc if isinstance(doc, dict) else {}


def _code(doc: dict[str, Any]) -> str:
    return str((doc.get("error") or {}).get("code") or "")
