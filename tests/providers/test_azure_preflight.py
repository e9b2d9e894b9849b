"""Azure preflight (issue 27) against the fake ARM: which answer maps to which check, ``ok`` value
and fix. Each decision is pinned here, so changing one breaks a test:

* credentials: no token, subscription not visible (404), no right to read it (403), Disabled or
  Deleted -> False; Warned -> True; anything else odd (500, an unexpected 400) -> None, and the
  other checks are still asked; a False stops the rest (listed, not asked);
* secret: vault not found, secret missing, disabled or expired -> False; metadata unreadable
  (403) -> None;
* secret-access: no roleAssignments/write on the vault -> False; the vault on access policies
  -> False (the role advisor gives would not apply); permissions or vault properties
  unreadable -> None;
* quota: full -> False (az quota update), unreadable -> None;
* image: not offered in the region, version not listed, id missing, managed image elsewhere,
  gallery version not replicated -> False;
* egress: from the bodies: the VM's public IP -> True; no public IP and no NAT gateway, or an
  outbound deny -> False;
* an injected error on any preflight call is never a False (asking failed is not a refusal),
  and a dying process is never swallowed."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("azure.mgmt.compute")
pytest.importorskip("azure.mgmt.network")

from advisor.clouds.azure.compute import AzureProvider  # noqa: E402
from advisor.clouds.azure.options import CREDENTIALS_HINT  # noqa: E402
from advisor.clouds.azure.preflight import action_allowed  # noqa: E402
from advisor.clouds.base import LaunchSpec, Preflight  # noqa: E402
from tests.providers.fake_azure import FakeArm, FakeCredential, transport  # noqa: E402
from tests.providers.test_azure import FAMILY, KEY_REF, SIZE, SUB, sku, with_vaults  # noqa: E402

HF_REF = "azure-kv:myvault/hf-token"
ORDER = ["credentials", "secret", "secret", "secret-access", "secret-access", "quota", "image",
         "egress"]


def usage(limit: int = 100, used: int = 0) -> dict[str, list[dict[str, Any]]]:
    return {"eastus": [{"name": {"value": FAMILY, "localizedValue": "NCads H100 v5"},
                        "currentValue": used, "limit": limit, "unit": "Count"},
                       {"name": {"value": "lowPriorityCores"}, "currentValue": used,
                        "limit": limit, "unit": "Count"}]}


@pytest.fixture
def arm() -> FakeArm:
    return with_vaults(FakeArm(skus=[sku("eastus")], usages=usage()))


def azure(arm: FakeArm, **kw: Any) -> AzureProvider:
    kw.setdefault("credential", FakeCredential())
    return AzureProvider(subscription_id=kw.pop("subscription_id", SUB),
                         transport=transport(arm), polling_interval=0, sleep=lambda _s: None,
                         **kw)


def spec(**kw: Any) -> LaunchSpec:
    base: dict[str, Any] = dict(
        deployment="pre", provider="azure", instance_type=SIZE, region="eastus",
        gpu_model="H100", gpu_count=1, vcpus=40, user_data="#cloud-config\n", disk_gib=256,
        ports=[8000], api_key_ref=KEY_REF, hf_token_ref=HF_REF)
    return LaunchSpec(**{**base, **kw})


def by_name(checks: list[Any], name: str) -> list[Any]:
    return [c for c in checks if c.name == name]


def vault_key(name: str) -> str:
    return (f"/subscriptions/{SUB}/resourceGroups/kv-rg/providers/Microsoft.KeyVault/vaults/"
            f"{name}").lower()


def answer(arm: FakeArm, match: str, status: int, code: str, method: str = "GET") -> None:
    """Every request whose path contains ``match`` answers ``status`` with ARM's error body."""
    def before(n: int, request: Any) -> Any:
        from urllib.parse import urlparse

        path = urlparse(request.url).path.lower()
        if request.method == method and match.lower() in path:
            return arm._response(request, status, {"error": {"code": code, "message": code}})
        return None

    arm.before = before


# -- all well -----------------------------------------------------------------------------------
def test_everything_passes_and_nothing_is_made(arm):
    p = azure(arm)
    capable: Preflight = p  # the capability's shape (mypy)
    assert callable(capable.preflight) and callable(capable.preflight_plan)
    checks = p.preflight(spec())
    assert [c.name for c in checks] == ORDER
    assert [c.ok for c in checks] == [True] * len(ORDER), [(c.name, c.detail) for c in checks]
    assert all(c.fix is None for c in checks)
    assert "advisor tests" in checks[0].detail and "Enabled" in checks[0].detail
    assert [m for m, _, _ in arm.log if m != "GET"] == []  # preflight makes nothing
    assert arm.resources == {} and arm.role_assignments == {}
    [egress] = by_name(checks, "egress")
    assert "public IP" in egress.detail and "default outbound" in egress.detail


def test_the_plan_lists_the_same_checks_without_a_call(arm):
    p = azure(arm)
    plan = p.preflight_plan(spec())
    assert [c.name for c in plan] == ORDER
    assert all(c.ok is None and c.detail.startswith("would ") for c in plan)
    assert arm.calls == 0
    # without credentials or a subscription, and without touching the SDK
    bare = AzureProvider(subscription_id=None)
    assert [c.name for c in bare.preflight_plan(spec())] == ORDER
    assert "ubuntu-hpc" in by_name(plan, "image")[0].detail
    one = p.preflight_plan(spec(hf_token_ref=None))
    assert [c.name for c in one] == ["credentials", "secret", "secret-access", "quota", "image",
                                     "egress"]


# -- credentials --------------------------------------------------------------------------------
class NoLogin:
    def get_token(self, *scopes: str, **_: Any) -> Any:
        from azure.core.exceptions import ClientAuthenticationError

        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")


def test_no_token_stops_the_rest(arm):
    checks = azure(arm, credential=NoLogin()).preflight(spec())
    assert [c.name for c in checks] == ORDER
    assert checks[0].ok is False and checks[0].fix == CREDENTIALS_HINT
    assert all(c.ok is None and c.detail.startswith("not asked") for c in checks[1:])


@pytest.mark.parametrize(("status", "code", "ok", "fix"), [
    (404, "SubscriptionNotFound", False, "az account list --output table"),
    (403, "AuthorizationFailed", False, "--role Contributor --scope /subscriptions/" + SUB),
    (500, "InternalServerError", None, None),
    (400, "InjectedFault", None, None),
])
def test_subscription_answers(arm, status, code, ok, fix):
    arm.before = _only_exact(arm, f"/subscriptions/{SUB}", status, code)
    checks = azure(arm).preflight(spec())
    assert checks[0].ok is ok, checks[0]
    if fix:
        assert fix in (checks[0].fix or "")
        assert all(c.detail.startswith("not asked") for c in checks[1:])
    else:  # asking failed: said, and the other checks are still made
        assert checks[0].fix is None and all(c.ok is True for c in checks[1:])


def _only_exact(arm: FakeArm, path: str, status: int, code: str) -> Any:
    def before(n: int, request: Any) -> Any:
        from urllib.parse import urlparse

        if urlparse(request.url).path.rstrip("/").lower() == path.lower():
            return arm._response(request, status, {"error": {"code": code, "message": code}})
        return None
    return before


@pytest.mark.parametrize(("state", "ok"), [("Enabled", True), ("Warned", True),
                                           ("PastDue", True), ("Disabled", False),
                                           ("Deleted", False)])
def test_subscription_state(arm, state, ok):
    arm.subscription_state = state
    [creds] = azure(arm).preflight(spec())[:1]
    assert creds.ok is ok and state in creds.detail
    assert (creds.fix is not None) == (not ok)


def test_no_sdk(arm, monkeypatch):
    from advisor.clouds.azure import compute

    def missing() -> Any:
        from advisor.errors import UserInputError

        raise UserInputError("the azure SDK is not installed (azure.mgmt.compute)",
                             hint="pip install 'advisor[azure]'")

    monkeypatch.setattr(compute, "_sdk", missing)
    [creds, *rest] = azure(arm).preflight(spec())
    assert creds.ok is False and creds.fix == "pip install 'advisor[azure]'"
    assert all(c.ok is None for c in rest) and arm.calls == 0


def test_no_subscription_given(arm, monkeypatch):
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    [creds, *rest] = azure(arm, subscription_id=None).preflight(spec())
    assert creds.ok is False and "--subscription" in (creds.fix or "")
    assert arm.calls == 0


# -- secrets ------------------------------------------------------------------------------------
def test_a_missing_secret_says_how_to_set_it(arm):
    arm.secrets[vault_key("myvault")].pop("hf-token")
    checks = azure(arm).preflight(spec())
    api, hf = by_name(checks, "secret")
    assert api.ok is True and hf.ok is False
    assert "Hugging Face token" in hf.detail and "no secret hf-token" in hf.detail
    assert hf.fix == ("az keyvault secret set --vault-name myvault --name hf-token "
                      "--file <file holding the value>")


def test_a_disabled_or_expired_secret_is_refused(arm):
    arm.secrets[vault_key("advisor-vault")]["vllm-api-key"]["enabled"] = False
    arm.secrets[vault_key("myvault")]["hf-token"]["exp"] = int(time.time()) - 3600
    api, hf = by_name(azure(arm).preflight(spec()), "secret")
    assert api.ok is False and api.fix == ("az keyvault secret set-attributes --vault-name "
                                           "advisor-vault --name vllm-api-key --enabled true")
    assert hf.ok is False and "expired" in hf.detail and "--expires" in (hf.fix or "")


def test_a_missing_vault(arm):
    arm.vaults.pop(vault_key("myvault"))
    checks = azure(arm).preflight(spec())
    api, hf = by_name(checks, "secret")
    assert api.ok is True and hf.ok is False and "'myvault'" in hf.detail
    assert (hf.fix or "").startswith("az keyvault create --name myvault ")
    first, second = by_name(checks, "secret-access")
    assert first.ok is True and second.ok is None and "myvault" in second.detail


def test_unreadable_secret_metadata_is_not_a_refusal(arm):
    answer(arm, "/secrets/", 403, "AuthorizationFailed")
    api, hf = by_name(azure(arm).preflight(spec()), "secret")
    assert api.ok is None and hf.ok is None and "secrets/read" in api.detail


# -- the VM identity's access -------------------------------------------------------------------
def test_an_access_policy_vault_is_refused_with_both_ways_out(arm):
    arm.vaults[vault_key("myvault")]["properties"]["enableRbacAuthorization"] = False
    first, second = by_name(azure(arm).preflight(spec()), "secret-access")
    assert first.ok is True and "advisor-vault" in first.detail
    assert second.ok is False and "access policies" in second.detail
    # the fix works before launch; set-policy is why not (it needs the VM's identity)
    assert second.fix == ("az keyvault update --name myvault --enable-rbac-authorization true "
                          "(its access policies stop applying), or keep the secrets in a vault "
                          "that uses Azure RBAC")
    assert "az keyvault set-policy --name myvault" in second.detail


@pytest.mark.parametrize(("permissions", "ok"), [
    # Reader
    ([{"actions": ["*/read"], "notActions": []}], False),
    # Contributor: everything but Microsoft.Authorization writes
    ([{"actions": ["*"], "notActions": ["Microsoft.Authorization/*/Delete",
                                        "Microsoft.Authorization/*/Write"]}], False),
    # Contributor + User Access Administrator (two roles: either grants it)
    ([{"actions": ["*"], "notActions": ["Microsoft.Authorization/*/Write"]},
      {"actions": ["*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"],
       "notActions": []}], True),
    # Role Based Access Control Administrator
    ([{"actions": ["Microsoft.Authorization/roleAssignments/write",
                   "Microsoft.Authorization/roleAssignments/delete", "*/read"],
       "notActions": []}], True),
    ([], False),
])
def test_who_may_write_role_assignments(arm, permissions, ok):
    arm.permissions[vault_key("myvault")] = permissions
    first, second = by_name(azure(arm).preflight(spec()), "secret-access")
    assert first.ok is True and second.ok is ok
    if not ok:
        vid = arm.vaults[vault_key("myvault")]["id"]
        assert second.fix == ("ask an Owner of the vault: az role assignment create --assignee "
                              "<your object id> --role \"Role Based Access Control "
                              f"Administrator\" --scope {vid}")


def test_action_matching():
    allowed = [{"actions": ["microsoft.authorization/*"], "notActions": []}]
    assert action_allowed("Microsoft.Authorization/roleAssignments/write", allowed)
    assert not action_allowed("Microsoft.Compute/virtualMachines/write", allowed)
    wild = [{"actions": ["Microsoft.Authorization/*/write"], "notActions": []}]
    assert action_allowed("Microsoft.Authorization/roleAssignments/write", wild)
    assert not action_allowed("Microsoft.Authorization/roleAssignments/read", wild)
    dotted = [{"actions": ["Microsoft.Authorization/roleAssignments.write"], "notActions": []}]
    assert not action_allowed("Microsoft.Authorization/roleAssignments/write", dotted)


def test_unreadable_permissions_or_vault_properties_are_unknown(arm):
    answer(arm, "/providers/Microsoft.Authorization/permissions", 403, "AuthorizationFailed")
    first, second = by_name(azure(arm).preflight(spec()), "secret-access")
    assert first.ok is None and second.ok is None and "could not be read" in first.detail
    arm2 = with_vaults(FakeArm(skus=[sku("eastus")], usages=usage()))
    arm2.before = _only_exact(arm2, arm2.vaults[vault_key("myvault")]["id"], 403,
                              "AuthorizationFailed")
    first, second = by_name(azure(arm2).preflight(spec()), "secret-access")
    assert first.ok is True and second.ok is None and "Azure RBAC" in second.detail


def test_a_refused_role_assignment_write_is_also_what_the_fake_does(arm, tmp_path):
    """The fake's PUT follows ``permissions`` too: what preflight predicts is what launch meets."""
    from advisor.errors import OperationError
    from advisor.provisioning import provision
    from advisor.state import Store

    arm.permissions[vault_key("myvault")] = [{"actions": ["*/read"], "notActions": []}]
    p = azure(arm)
    [_, predicted] = by_name(p.preflight(spec()), "secret-access")
    assert predicted.ok is False
    p.preflight = None  # type: ignore[assignment]  # launch without it: the PUT is refused
    with pytest.raises(OperationError, match="denied"):
        provision("llama-3-8b", 8192, hf_token_ref=HF_REF, instance=f"azure:{SIZE}",
                  name="nowrite", api_key_ref=KEY_REF, backends={"azure": p},
                  store=Store(tmp_path / "s.db"))
    assert not [k for k in arm.resources if "/virtualmachines/" in k]
    assert arm.role_assignments == {}


# -- quota --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("spot", "name", "kind"), [(False, FAMILY, "dedicated"),
                                                    (True, "lowPriorityCores", "lowPriority")])
def test_full_quota_says_how_to_ask_for_more(spot, name, kind):
    arm = with_vaults(FakeArm(skus=[sku("eastus")], usages=usage(limit=48, used=24)))
    [quota] = by_name(azure(arm).preflight(spec(spot=spot)), "quota")
    assert quota.ok is False and "needs 40" in quota.detail
    assert quota.fix == (f"az quota update --resource-name {name} --scope /subscriptions/{SUB}/"
                         "providers/Microsoft.Compute/locations/eastus --limit-object "
                         f"value=<limit + 40> --resource-type {kind}")


def test_unreadable_quota_is_unknown():
    arm = with_vaults(FakeArm(skus=[sku("eastus")]))  # no usage listed for the family
    [quota] = by_name(azure(arm).preflight(spec()), "quota")
    assert quota.ok is None and quota.fix is None


# -- image --------------------------------------------------------------------------------------
def test_the_default_image_must_be_offered_in_the_region(arm):
    arm.images = {("westeurope", "microsoft-dsvm", "ubuntu-hpc", "2204"): ["1.0.0"]}
    [image] = by_name(azure(arm).preflight(spec()), "image")
    assert image.ok is False and "not offered in eastus" in image.detail
    assert image.fix == ("az vm image list --location eastus --publisher microsoft-dsvm "
                         "--offer ubuntu-hpc --sku 2204 --all --output table")
    arm.images[("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204")] = []
    assert by_name(azure(arm).preflight(spec()), "image")[0].ok is False


@pytest.mark.parametrize(("urn", "ok"), [
    ("microsoft-dsvm:ubuntu-hpc:2204:22.04.2025111201", True),
    ("microsoft-dsvm:ubuntu-hpc:2204:22.04.2020010101", False),
    ("microsoft-dsvm:ubuntu-hpc:2204:latest", True),
    ("nobody:nothing:none:latest", False),  # ARM's 404 NotFound
])
def test_an_image_urn(arm, urn, ok):
    [image] = by_name(azure(arm).preflight(spec(image=urn)), "image")
    assert image.ok is ok, image
    assert (image.fix or "").startswith("az vm image list") == (not ok)


IMAGE_ID = (f"/subscriptions/{SUB}/resourceGroups/img-rg/providers/Microsoft.Compute/images/"
            "my-image")
VERSION_ID = (f"/subscriptions/{SUB}/resourceGroups/img-rg/providers/Microsoft.Compute/"
              "galleries/gal/images/vllm/versions/1.0.0")


@pytest.mark.parametrize(("location", "ok"), [("eastus", True), ("westeurope", False),
                                              (None, False)])
def test_a_managed_image_id(arm, location, ok):
    if location:
        arm.resources[IMAGE_ID.lower()] = {"id": IMAGE_ID, "name": "my-image",
                                           "location": location, "properties": {}}
    [image] = by_name(azure(arm).preflight(spec(image=IMAGE_ID)), "image")
    assert image.ok is ok
    if location is None:
        assert "does not exist" in image.detail and "az image list" in (image.fix or "")
    elif not ok:
        assert "westeurope" in image.detail


def test_a_gallery_image_version_must_be_replicated_to_the_region(arm):
    arm.resources[VERSION_ID.lower()] = {"id": VERSION_ID, "name": "1.0.0", "location": "westus",
                                         "properties": {"publishingProfile": {"targetRegions": [
                                             {"name": "West US"}, {"name": "West Europe"}]}}}
    [image] = by_name(azure(arm).preflight(spec(image=VERSION_ID)), "image")
    assert image.ok is False
    assert image.fix == ("az sig image-version update --resource-group img-rg --gallery-name gal "
                         "--gallery-image-definition vllm --gallery-image-version 1.0.0 --add "
                         "publishingProfile.targetRegions name=eastus")
    arm.resources[VERSION_ID.lower()]["properties"]["publishingProfile"]["targetRegions"].append(
        {"name": "East US"})
    assert by_name(azure(arm).preflight(spec(image=VERSION_ID)), "image")[0].ok is True


# -- egress -------------------------------------------------------------------------------------
def _with_bodies(p: AzureProvider, change: Any) -> AzureProvider:
    real = p.bodies

    def bodies(*a: Any, **kw: Any) -> Any:
        b = real(*a, **kw)
        change(b)
        return b

    p.bodies = bodies  # type: ignore[method-assign]
    return p


def test_egress_follows_the_bodies(arm):
    def no_ip(b: Any) -> None:
        for c in b["networkInterface"]["properties"]["ipConfigurations"]:
            c["properties"].pop("publicIPAddress")

    [egress] = by_name(_with_bodies(azure(arm), no_ip).preflight(spec()), "egress")
    assert egress.ok is False and "private" in egress.detail
    assert "az network nat gateway create" in (egress.fix or "")

    def nat(b: Any) -> None:
        no_ip(b)
        b["virtualNetwork"]["properties"]["subnets"][0]["properties"]["natGateway"] = {"id": "n"}

    assert by_name(_with_bodies(azure(arm), nat).preflight(spec()), "egress")[0].ok is True

    def deny(b: Any) -> None:
        b["networkSecurityGroup"]["properties"]["securityRules"].append(
            {"name": "no-out", "properties": {"direction": "Outbound", "access": "Deny"}})

    [egress] = by_name(_with_bodies(azure(arm), deny).preflight(spec()), "egress")
    assert egress.ok is False and "no-out" in egress.detail


# -- faults -------------------------------------------------------------------------------------
def test_an_error_on_any_preflight_call_is_never_a_refusal(arm):
    """An injected 400 (nobody's answer) on call n: that check is None, never False, and nothing
    raises; every call index of a full preflight is tried."""
    seen: list[str] = []

    def count(n: int, request: Any) -> None:
        seen.append(f"{request.method} {request.url}")

    arm.before = count
    azure(arm).preflight(spec())
    total = len(seen)
    assert total >= 8
    for n in range(1, total + 1):
        fresh = with_vaults(FakeArm(skus=[sku("eastus")], usages=usage()))

        def fail(k: int, request: Any, n: int = n, fresh: FakeArm = fresh) -> Any:
            if k == n:
                return fresh._response(request, 400, {"error": {"code": "InjectedFault",
                                                                "message": "injected"}})
            return None

        fresh.before = fail
        checks = azure(fresh).preflight(spec())
        assert [c.name for c in checks] == ORDER, n
        assert all(c.ok is not False for c in checks), (n, seen[n - 1], checks)
        assert sum(c.ok is None for c in checks) >= 1, (n, seen[n - 1])


class Killed(BaseException):
    pass


def test_a_dying_process_is_not_swallowed(arm):
    def die(n: int, request: Any) -> Any:
        if n == 3:
            raise Killed
        return None

    arm.before = die
    with pytest.raises(Killed):
        azure(arm).preflight(spec())


# -- through provision (issue 27's wiring in advisor.provisioning) ------------------------------
def test_provision_dry_run_lists_the_plan_and_a_launch_records_the_checks(arm, tmp_path):
    from advisor.provisioning import provision
    from advisor.state import Store

    dry = provision("llama-3-8b", 8192, hf_token_ref=HF_REF, instance=f"azure:{SIZE}",
                    name="pre", api_key_ref=KEY_REF, dry_run=True,
                    backends={"azure": azure(arm)})
    [plan] = dry.preflight
    assert [c["name"] for c in plan["checks"]] == ORDER
    assert all(c["ok"] is None for c in plan["checks"]) and arm.calls == 0
    res = provision("llama-3-8b", 8192, hf_token_ref=HF_REF, instance=f"azure:{SIZE}",
                    name="pre", api_key_ref=KEY_REF, backends={"azure": azure(arm)},
                    store=Store(tmp_path / "s.db"))
    assert res.status == "launched"
    [made] = res.preflight
    assert [(c["name"], c["ok"]) for c in made["checks"]] == [(n, True) for n in ORDER]


def test_provision_stops_on_a_missing_secret_with_its_fix(arm, tmp_path):
    from advisor.provisioning import PreflightRefused, provision
    from advisor.state import Store

    arm.secrets[vault_key("myvault")].pop("hf-token")
    with pytest.raises(PreflightRefused) as info:
        provision("llama-3-8b", 8192, hf_token_ref=HF_REF, instance=f"azure:{SIZE}",
                  name="pre", api_key_ref=KEY_REF, backends={"azure": azure(arm)},
                  store=Store(tmp_path / "s.db"))
    assert "az keyvault secret set --vault-name myvault --name hf-token" in (
        info.value.hint or "")
    assert arm.resources == {} and [m for m, _, _ in arm.log if m != "GET"] == []
