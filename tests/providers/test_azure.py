"""Azure provisioning through a custom transport serving ARM's PUTs and their long-running
operation polls (polling_interval=0): the VM, NIC, NSG and VNet bodies (size, base64 custom
data, tags, narrow rules), failover on ZonalAllocationFailed and quota, idempotency, down; the
VM identity's Key Vault Secrets User role on exactly its secrets, and its removal."""

from __future__ import annotations

import base64
import uuid

import pytest

pytest.importorskip("azure.mgmt.compute")
pytest.importorskip("azure.mgmt.network")

from advisor.clouds.azure.compute import AzureProvider  # noqa: E402
from advisor.errors import OperationError, UserInputError  # noqa: E402
from advisor.provisioning import down, provision  # noqa: E402
from advisor.state import Store  # noqa: E402
from tests.providers.fake_azure import FakeArm, FakeCredential, transport  # noqa: E402

SUB = "00000000-0000-0000-0000-00000000abcd"
SIZE = "Standard_NC40ads_H100_v5"
FAMILY = "standardNCADSH100v5Family"
KEY_REF = "azure-kv:advisor-vault/vllm-api-key"
ZONAL = ("ZonalAllocationFailed", "Allocation failed. We do not have sufficient capacity for the "
         "requested VM size in this zone. Read more about improving likelihood of allocation "
         "success at http://aka.ms/allocation-guidance")


def sku(region: str, zones=("1", "2", "3")) -> dict:
    return {"resourceType": "virtualMachines", "name": SIZE, "tier": "Standard",
            "family": FAMILY, "locations": [region],
            "locationInfo": [{"location": region, "zones": list(zones)}], "restrictions": []}


KV_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"


def with_vaults(arm: FakeArm) -> FakeArm:
    """The two vaults the tests' references name, in a resource group of their own."""
    arm.add_vault(SUB, "kv-rg", "advisor-vault")
    arm.add_vault(SUB, "kv-rg", "myvault")
    return arm


@pytest.fixture
def arm():
    return with_vaults(FakeArm(skus=[sku("eastus"), sku("eastus2", ("1",))]))


def azure(arm, **kw) -> AzureProvider:
    return AzureProvider(subscription_id=SUB, credential=FakeCredential(),
                         transport=transport(arm), polling_interval=0, sleep=lambda _s: None,
                         **kw)


def launch(arm, tmp_path, name="h100-nvl", **kw):
    return provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                     instance=f"azure:{SIZE}", name=name,
                     api_key_ref=KEY_REF, backends={"azure": azure(arm)},
                     store=Store(tmp_path / "s.db"), **kw)


def test_vm_body_and_network(arm, tmp_path):
    res = launch(arm, tmp_path)
    assert res.status == "launched" and res.zone == "1"
    [vm] = arm.puts("virtualMachines")
    p = vm["properties"]
    assert p["hardwareProfile"]["vmSize"] == SIZE and vm["zones"] == ["1"]
    custom = base64.b64decode(p["osProfile"]["customData"]).decode()
    dry = provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                    instance=f"azure:{SIZE}", name="h100-nvl",
                    api_key_ref=KEY_REF, dry_run=True)
    assert custom == dry.user_data and custom.startswith("#cloud-config")
    assert "azure-kv:advisor-vault/vllm-api-key" in custom  # a reference, not the key
    assert vm["tags"]["advisor-deployment"] == "h100-nvl"
    assert vm["identity"] == {"type": "SystemAssigned"}
    lin = p["osProfile"]["linuxConfiguration"]
    assert lin["disablePasswordAuthentication"] is True
    assert lin["ssh"]["publicKeys"][0]["keyData"].startswith("ssh-rsa ")
    assert p["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    assert p["storageProfile"]["osDisk"]["diskSizeGB"] >= 100
    [nsg] = arm.puts("networkSecurityGroups")
    assert nsg["properties"]["securityRules"] == []  # Azure's defaults deny all inbound
    [vnet] = arm.puts("virtualNetworks")
    assert vnet["properties"]["subnets"][0]["properties"]["networkSecurityGroup"]["id"].endswith(
        "/networkSecurityGroups/advisor-h100-nvl-nsg")
    assert res.instances[0].public_ip == "203.0.113.50"
    assert res.instances[0].state == "running"

    again = launch(arm, tmp_path)
    assert again.status == "exists" and len(arm.puts("virtualMachines")) == 1

    gone = down("h100-nvl", backends={"azure": azure(arm)}, store=Store(tmp_path / "s.db"))
    assert gone.removed[0] == "h100-nvl"
    assert "advisor-h100-nvl-nsg" in gone.removed and "resource-group:advisor-h100-nvl" in \
        gone.removed
    assert arm.resources == {}


def test_allow_cidr_rule_and_spot(arm, tmp_path):
    launch(arm, tmp_path, name="open", allow_cidrs=["203.0.113.0/24"], spot=True)
    [nsg] = arm.puts("networkSecurityGroups")
    [rule] = nsg["properties"]["securityRules"]
    assert rule["properties"]["sourceAddressPrefixes"] == ["203.0.113.0/24"]
    assert rule["properties"]["destinationPortRange"] == "8000"
    assert rule["properties"]["access"] == "Allow" and rule["properties"]["direction"] == \
        "Inbound"
    [vm] = arm.puts("virtualMachines")
    assert vm["properties"]["priority"] == "Spot"
    assert vm["properties"]["evictionPolicy"] == "Delete"


def test_zonal_allocation_failure_moves_to_the_next_zone(arm, tmp_path):
    arm.fail_zones["1"] = ZONAL
    res = launch(arm, tmp_path, name="zonal")
    assert res.zone == "2"
    a = res.attempts[0]
    assert (a.zone, a.outcome, a.code) == ("1", "capacity", "ZonalAllocationFailed")
    # the failed VM was removed before zone 2 was tried: it cannot change zone in place
    deletes = [p for m, p, _ in arm.log if m == "DELETE" and "virtualMachines" in p]
    assert deletes and [vm["zones"] for vm in arm.puts("virtualMachines")] == [["1"], ["2"]]


def test_quota_check_skips_the_region(arm, tmp_path):
    arm.usages["eastus"] = [{"name": {"value": FAMILY, "localizedValue": "Standard NCADS H100 "
                                      "v5 Family vCPUs"}, "currentValue": 0, "limit": 0,
                             "unit": "Count"}]
    res = launch(arm, tmp_path, name="quota", regions=["eastus", "eastus2"])
    assert res.region == "eastus2" and res.zone == "1"
    assert res.attempts[0].code == "QuotaCheck" and FAMILY in res.attempts[0].detail
    assert all(vm["location"] == "eastus" or vm["location"] == "eastus2"
               for vm in arm.puts("virtualMachines"))
    assert [vm["location"] for vm in arm.puts("virtualMachines")] == ["eastus2"]


def test_everything_full_leaves_nothing_behind(arm, tmp_path):
    for z in ("1", "2", "3"):
        arm.fail_zones[z] = ZONAL
    with pytest.raises(OperationError, match="no candidate"):
        launch(arm, tmp_path, name="full")
    assert arm.resources == {}


def test_a_users_resource_group_is_used_not_rewritten(arm, tmp_path):
    from advisor.errors import UserInputError

    sub = "00000000-0000-0000-0000-00000000abcd"
    mine = AzureProvider(subscription_id=sub, credential=FakeCredential(),
                         transport=transport(arm), polling_interval=0, resource_group="team-rg")
    with pytest.raises(UserInputError, match="'team-rg' does not exist"):
        provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                  instance=f"azure:{SIZE}", name="in-team",
                  api_key_ref=KEY_REF, backends={"azure": mine}, store=Store(tmp_path / "s.db"))
    assert arm.puts("virtualMachines") == [] and arm.puts("networkSecurityGroups") == []
    key = f"/subscriptions/{sub}/resourcegroups/team-rg"
    arm.resources[key] = {"id": key, "name": "team-rg", "location": "eastus",
                          "tags": {"owner": "team"}, "properties": {}}
    res = provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                    instance=f"azure:{SIZE}", name="in-team",
                    api_key_ref=KEY_REF, backends={"azure": mine},
                    store=Store(tmp_path / "s.db"))
    assert res.status == "launched"
    assert not [p for m, p, _ in arm.log if m == "PUT" and p.lower().endswith("/team-rg")]
    down("in-team", backends={"azure": mine}, store=Store(tmp_path / "s.db"))
    assert list(arm.resources) == [key] and arm.resources[key]["tags"] == {"owner": "team"}


def test_multi_node_group(tmp_path):
    arm = with_vaults(FakeArm(skus=[{**sku("eastus"), "name": "Standard_ND96isr_H100_v5",
                                     "family": "standardNDSH100v5Family"}]))
    store = Store(tmp_path / "s.db")
    res = provision("llama-3.1-405b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                    instance="azure:Standard_ND96isr_H100_v5",
                    name="big", api_key_ref=KEY_REF, backends={"azure": azure(arm)},
                    store=store)
    assert res.nodes == 2 and [i.id for i in res.instances] == ["big", "big-w1"]
    head_ip = res.instances[0].private_ip
    assert head_ip and head_ip.startswith("10.42.0.")
    vms = {vm["properties"]["osProfile"]["computerName"]: vm for vm in arm.puts("virtualMachines")}
    assert set(vms) == {"big", "big-w1"} and vms["big"]["zones"] == vms["big-w1"]["zones"]
    worker_ud = base64.b64decode(vms["big-w1"]["properties"]["osProfile"]["customData"]).decode()
    assert f"content: |\n    {head_ip}\n" in worker_ud and "ADVISOR_ROLE=worker" in worker_ud
    nics = [b for b in arm.puts("networkInterfaces")]
    assert len(nics) == 2  # each VM its own NIC and public IP, one NSG and VNet for the group
    # each VM's own identity reads both secrets
    assert len({ra["properties"]["principalId"] for ra in arm.role_assignments.values()}) == 2
    assert len(arm.role_assignments) == 4
    down("big", backends={"azure": azure(arm)}, store=store)
    assert arm.resources == {} and arm.role_assignments == {}


# -- least privilege: Key Vault Secrets User on exactly the secrets named -----------------------
def scope(vault: str, secret: str) -> str:
    return (f"/subscriptions/{SUB}/resourceGroups/kv-rg/providers/Microsoft.KeyVault/vaults/"
            f"{vault}/secrets/{secret}")


def test_the_vm_identity_reads_exactly_its_secrets(arm, tmp_path):
    launch(arm, tmp_path, name="reader")
    [vm] = [r for k, r in arm.resources.items() if "/virtualmachines/" in k]
    principal = vm["identity"]["principalId"]
    puts = [(p, b) for m, p, b in arm.log if m == "PUT" and "roleAssignments" in p]
    assert len(puts) == 2
    scopes = {p.split("/providers/Microsoft.Authorization/")[0] for p, _ in puts}
    assert scopes == {scope("advisor-vault", "vllm-api-key"), scope("myvault", "hf-token")}
    for path, body in puts:
        props = body["properties"]
        assert props["principalId"] == principal and props["principalType"] == \
            "ServicePrincipal"
        assert props["roleDefinitionId"] == (f"/subscriptions/{SUB}/providers/Microsoft."
                                             f"Authorization/roleDefinitions/{KV_SECRETS_USER}")
        name = path.rsplit("/", 1)[1]
        assert str(uuid.UUID(name)) == name  # ARM's role-assignment names are GUIDs
    # granted after the VM exists (its principal is only known then), nothing before it
    order = [p for m, p, _ in arm.log if m == "PUT"]
    assert "virtualMachines" in order[-3] and all("roleAssignments" in p for p in order[-2:])

    # a second provision: found, nothing assigned twice
    again = launch(arm, tmp_path, name="reader")
    assert again.status == "exists" and len(arm.role_assignments) == 2
    # a second grant for the same VM (a retried launch) writes the same names again
    before = set(arm.role_assignments)
    spec = provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                     instance=f"azure:{SIZE}", name="reader", api_key_ref=KEY_REF,
                     dry_run=True, backends={"azure": Spec()}).requests[0]["spec"]
    azure(arm)._grant(spec, principal)
    assert set(arm.role_assignments) == before
    assert [p for m, p, _ in arm.log if m == "PUT" and "roleAssignments" in p][2:] == [
        p for p, _ in puts]  # the same names: the same PUTs

    gone = down("reader", backends={"azure": azure(arm)}, store=Store(tmp_path / "s.db"))
    assert sum(r.startswith("role-assignment:") for r in gone.removed) == 2
    assert arm.role_assignments == {} and arm.resources == {}


class Spec:
    """A backend whose dry run hands back the LaunchSpec itself."""

    def request(self, spec, zone):
        return {"spec": spec}


def test_down_leaves_other_role_assignments_alone(arm, tmp_path):
    res = provision("llama-3-8b", 8192, hf_token_ref="azure-kv:advisor-vault/hf-token",
                    instance=f"azure:{SIZE}", name="tidy", api_key_ref=KEY_REF,
                    backends={"azure": azure(arm)}, store=Store(tmp_path / "s.db"))
    assert res.status == "launched"
    [principal] = {ra["properties"]["principalId"] for ra in arm.role_assignments.values()}
    theirs = (f"{scope('advisor-vault', 'vllm-api-key')}/providers/Microsoft.Authorization/"
              "roleAssignments/11111111-2222-3333-4444-555555555555")
    arm.role_assignments[theirs.lower()] = {
        "id": theirs, "name": theirs.rsplit("/", 1)[1], "properties": {
            "scope": scope("advisor-vault", "vllm-api-key"), "principalId": principal,
            "roleDefinitionId": f"/subscriptions/{SUB}/providers/Microsoft.Authorization/"
                                f"roleDefinitions/{KV_SECRETS_USER}",
            "description": "granted by hand"}}
    down("tidy", backends={"azure": azure(arm)}, store=Store(tmp_path / "s.db"))
    assert list(arm.role_assignments) == [theirs.lower()]


def test_dry_run_shows_the_role_assignment(arm):
    res = provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                    instance=f"azure:{SIZE}", name="dry", api_key_ref=KEY_REF, dry_run=True,
                    backends={"azure": azure(arm)})
    calls = res.requests[0]["calls"]
    grants = [c for c in calls if c["call"] == "authorization.role_assignments.create"]
    assert [c["scope"] for c in grants] == [
        f"/subscriptions/{SUB}/resourceGroups/<resource group of vault advisor-vault>/providers/"
        "Microsoft.KeyVault/vaults/advisor-vault/secrets/vllm-api-key",
        f"/subscriptions/{SUB}/resourceGroups/<resource group of vault myvault>/providers/"
        "Microsoft.KeyVault/vaults/myvault/secrets/hf-token"]
    props = grants[0]["body"]["properties"]
    assert props["roleDefinitionId"].endswith(f"/roleDefinitions/{KV_SECRETS_USER}")
    assert "system-assigned identity" in props["principalId"]
    assert arm.log == []  # a dry run calls nothing

    given = provision("llama-3-8b", 8192, instance=f"azure:{SIZE}", name="dry",
                      api_key_ref=KEY_REF, hf_token_ref="azure-kv:myvault/hf-token",
                      dry_run=True, backends={"azure": azure(arm, key_vault_resource_group=
                                                              "kv-rg")})
    [first, _] = [c for c in given.requests[0]["calls"]
                  if c["call"] == "authorization.role_assignments.create"]
    assert first["scope"] == scope("advisor-vault", "vllm-api-key")


def test_an_unknown_vault_stops_before_anything_is_made(tmp_path):
    arm = FakeArm(skus=[sku("eastus")])
    arm.add_vault(SUB, "kv-rg", "advisor-vault")  # the token's vault "myvault" is missing
    with pytest.raises(UserInputError, match="'myvault'"):
        launch(arm, tmp_path, name="novault")
    assert arm.puts("virtualMachines") == [] and arm.resources == {}


def test_the_vaults_resource_group_can_be_given(arm, tmp_path):
    arm.vaults.clear()
    arm.add_vault(SUB, "secrets-rg", "advisor-vault")
    arm.add_vault(SUB, "secrets-rg", "myvault")
    from advisor.clouds import registry

    opts = registry.provider_options({"--key-vault-resource-group": "secrets-rg"})["azure"]
    assert opts == {"key_vault_resource_group": "secrets-rg"}
    res = provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                    instance=f"azure:{SIZE}", name="given", api_key_ref=KEY_REF,
                    backends={"azure": azure(arm, **opts)},
                    store=Store(tmp_path / "s.db"))
    assert res.status == "launched"
    assert not [p for m, p, _ in arm.log if m == "GET" and p.endswith("/resources")]  # no lookup
    assert all("/resourceGroups/secrets-rg/" in ra["properties"]["scope"]
               for ra in arm.role_assignments.values())
    with pytest.raises(UserInputError, match="not in resource group"):
        provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                  instance=f"azure:{SIZE}", name="wrong-rg", api_key_ref=KEY_REF,
                  backends={"azure": azure(arm, key_vault_resource_group="other-rg")},
                  store=Store(tmp_path / "s.db"))


def test_a_slow_principal(arm, tmp_path):
    arm.principal_unknown_for = 2  # Entra ID has not yet replicated the new identity
    res = launch(arm, tmp_path, name="policies")
    assert res.status == "launched" and len(arm.role_assignments) == 2


def test_an_access_policy_vault_stops_before_anything_is_made(arm, tmp_path):
    """The role advisor gives would not apply and an access policy can name the VM's identity
    only once it exists: preflight refuses (issue 27), with the fix that works before launch."""
    from advisor.provisioning import PreflightRefused

    arm.add_vault(SUB, "kv-rg", "myvault", rbac=False)
    with pytest.raises(PreflightRefused) as info:
        launch(arm, tmp_path, name="policies")
    [(where, check)] = info.value.checks
    assert where == f"azure:{SIZE} eastus" and check.name == "secret-access"
    assert "myvault" in check.detail and "advisor-vault" not in check.detail
    assert "az keyvault update --name myvault --enable-rbac-authorization true" in (
        info.value.hint or "")
    assert arm.resources == {} and arm.role_assignments == {}
    assert [m for m, _, _ in arm.log if m != "GET"] == []


def test_no_right_to_assign_roles_skips_azure_and_leaves_nothing(arm, tmp_path, monkeypatch):
    real = arm._role_assignment

    def refuse(request, m, path, key, q, body):
        if m == "PUT":
            return arm._response(request, 403, {"error": {
                "code": "AuthorizationFailed", "message": "The client does not have "
                "authorization to perform action 'Microsoft.Authorization/roleAssignments/"
                "write'"}})
        return real(request, m, path, key, q, body)

    monkeypatch.setattr(arm, "_role_assignment", refuse)
    with pytest.raises(OperationError, match="denied"):
        launch(arm, tmp_path, name="denied")
    assert arm.resources == {} and arm.role_assignments == {}
