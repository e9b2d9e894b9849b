"""Crash Azure provisioning at every ARM call of the project's fake, then heal: ``status
--reconcile`` + ``down`` must leave nothing of the deployment — no VM, NIC, public IP, NSG,
VNet, resource group or role assignment — and, with the state file gone, ``down --all-regions
--provider azure`` must find it all by tag.

Two ways to die at call N (the fake's ``before`` hook sees every request, long-running
operation polls included):

* ``kill`` — call N and every call after it raise :class:`Killed` (a ``BaseException``, like the
  process dying): no cleanup of the attempt reaches the cloud;
* ``error`` — call N alone answers 400 ``InjectedFault`` (fatal): the attempt cleans up after
  itself (only what its attempt id tags), the rest of the run goes on.

The preflight's calls (issue 27: the subscription, each secret's metadata, the permissions on
each vault, quota, the image) come first and make nothing: killed there, nothing is left; an
error there is a check that could not be asked (``ok=None``), never a refusal: the run
launches."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("azure.mgmt.compute")
pytest.importorskip("azure.mgmt.network")

from advisor.clouds.azure.compute import AzureProvider  # noqa: E402
from advisor.clouds.base import TAG_ATTEMPT, TAG_DEPLOYMENT  # noqa: E402
from advisor.provisioning import down, provision, sold_regions, status  # noqa: E402
from advisor.state import Store  # noqa: E402
from tests.providers.fake_azure import FakeArm, FakeCredential, transport  # noqa: E402
from tests.providers.test_azure import KEY_REF, SIZE, SUB, sku, with_vaults  # noqa: E402

#: a kill inside azure-core's polling thread ends that thread (as a dying process would)
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")

NAME = "fault-az"
SSH = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC0 fault-suite"


class Killed(BaseException):
    """The process died here."""


class Plan:
    """The fake's ``before`` hook: records every call, kills from call ``at`` on or fails it."""

    def __init__(self, arm: FakeArm, at: int | None = None, mode: str = "kill") -> None:
        self.arm, self.at, self.mode = arm, at, mode
        self.calls: list[str] = []

    def __call__(self, n: int, request: Any) -> Any:
        from urllib.parse import urlparse

        self.calls.append(f"{request.method} {urlparse(request.url).path}")
        k = len(self.calls)
        if self.at is None:
            return None
        if self.mode == "kill" and k >= self.at:
            raise Killed(f"killed at call {k} ({self.calls[-1]})")
        if self.mode == "error" and k == self.at:
            return self.arm._response(request, 400, {"error": {
                "code": "InjectedFault", "message": f"injected at call {k}"}})
        return None


def fake() -> FakeArm:
    return with_vaults(FakeArm(skus=[sku("eastus")]))


def azure(arm: FakeArm) -> AzureProvider:
    return AzureProvider(subscription_id=SUB, credential=FakeCredential(),
                         transport=transport(arm), polling_interval=0, sleep=lambda _s: None,
                         ssh_public_key=SSH)


def run(arm: FakeArm, store: Store, plan: Plan | None = None) -> Any:
    arm.before = plan
    try:
        return provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                         instance=f"azure:{SIZE}", name=NAME, api_key_ref=KEY_REF,
                         regions=["eastus"], backends={"azure": azure(arm)}, store=store)
    finally:
        arm.before = None


def left(arm: FakeArm) -> list[str]:
    """Everything of the deployment in the fake: its resources (resource group included) and
    the role assignments made for it (the vaults are the user's, kept apart)."""
    out = [k for k, v in arm.resources.items()
           if (v.get("tags") or {}).get(TAG_DEPLOYMENT) == NAME or f"/advisor-{NAME}" in k]
    out += [k for k, ra in arm.role_assignments.items()
            if f"advisor deployment {NAME}:" in ra["properties"].get("description", "")]
    return out


def preflight_calls(calls: list[str]) -> range:
    """The call indices (1-based) of the preflight (issue 27): from the subscription's GET to
    the image's versions, every one before the first PUT (preflight makes nothing)."""
    first = next(i for i, c in enumerate(calls, 1) if c == f"GET /subscriptions/{SUB}")
    last = next(i for i, c in enumerate(calls, 1) if "/artifacttypes/vmimage/" in c)
    first_put = next(i for i, c in enumerate(calls, 1) if c.startswith("PUT"))
    assert first < last < first_put
    asked = calls[first - 1:last]
    for what in ("/secrets/vllm-api-key", "/secrets/hf-token", "/Microsoft.Authorization/"
                 "permissions", "/usages"):
        assert any(c.startswith("GET") and what in c for c in asked), what
    return range(first, last + 1)


def full_provision_calls(tmp_path: Any) -> list[str]:
    arm = fake()
    plan = Plan(arm)
    assert run(arm, Store(tmp_path / "count.db"), plan).status == "launched"
    return plan.calls


def test_everything_made_carries_the_deployment_and_the_attempt(tmp_path):
    arm = fake()
    st = Store(tmp_path / "s.db")
    assert run(arm, st).status == "launched"
    attempt = next(e.data["attempt"] for e in st.events(NAME) if e.kind == "intent-region")
    kinds = {k.split("/")[-2] for k in arm.resources}
    assert {"resourcegroups", "networksecuritygroups", "virtualnetworks", "publicipaddresses",
            "networkinterfaces", "virtualmachines"} <= kinds
    for k, res in arm.resources.items():
        assert res["tags"][TAG_DEPLOYMENT] == NAME, k
        assert res["tags"][TAG_ATTEMPT] == attempt, k
    [vm] = [v for k, v in arm.resources.items() if "/virtualmachines/" in k]
    assert vm["properties"]["storageProfile"]["osDisk"]["name"] == f"{NAME}-osdisk"
    assert len(arm.role_assignments) == 2  # role assignments take no tags: the description
    for ra in arm.role_assignments.values():
        assert ra["properties"]["description"].endswith(f"({TAG_ATTEMPT} {attempt})")
    p = azure(arm)
    assert p.leftovers(NAME, "eastus")  # all of it is seen
    gone = down(NAME, store=st, backends={"azure": azure(arm)})
    assert left(arm) == [] and arm.resources == {} and arm.role_assignments == {}
    assert "resource-group:advisor-fault-az" in gone.removed
    assert p.leftovers(NAME, "eastus") == []


@pytest.mark.parametrize("mode", ["kill", "error"])
def test_every_crash_point_heals_to_nothing(tmp_path, mode):
    calls = full_provision_calls(tmp_path)
    total = len(calls)
    assert total >= 20 and any(c.startswith("PUT") and "roleAssignments" in c for c in calls)
    pre = preflight_calls(calls)
    #: (call, outcome, resources left after reconcile + down)
    report: list[tuple[int, str, int]] = []
    for n in range(1, total + 1):
        arm = fake()
        st = Store(tmp_path / f"{mode}-{n}.db")
        outcome = "launched"
        try:
            run(arm, st, Plan(arm, n, mode))  # an error on a look-up with a fallback is survived
        except (Killed, Exception) as exc:
            outcome = type(exc).__name__
        # an ARM error reaches the orchestrator classified (never a raw HttpResponseError)
        assert outcome in (("Killed",) if mode == "kill" else ("launched", "CloudError")), (
            n, calls[n - 1], outcome)
        if mode == "error" and n in pre:  # a preflight call that failed is not a refusal
            assert outcome == "launched", (n, calls[n - 1], outcome)
        where = calls[n - 1]
        if outcome == "CloudError":  # the failed attempt cleaned up after itself
            assert left(arm) == [], (n, where, left(arm))
        made_before = [c for c in calls[:n - 1] if c.startswith("PUT")]
        dep = st.get(NAME)
        if made_before:  # the intent named the region before anything was made there
            assert dep is not None and any(e.data.get("region") == "eastus"
                                           for e in st.events(NAME)), (n, where)
        if dep is None:  # died before the state knew the name: nothing made
            assert left(arm) == [], (n, where)
            report.append((n, "before-state", 0))
            continue
        status(NAME, reconcile=True, store=st, backends={"azure": azure(arm)})
        down(NAME, store=st, backends={"azure": azure(arm)})
        remaining = left(arm)
        report.append((n, outcome, len(remaining)))
        assert remaining == [], (n, where, remaining)
        assert st.require(NAME).status == "down"
    from collections import Counter

    outcomes = Counter(r[1] for r in report)
    print(f"\nazure {mode}: {len(report)} crash points ({dict(outcomes)}), "
          f"{sum(r[2] for r in report)} resources left after down")


@pytest.mark.parametrize("at", ["networkSecurityGroups", "virtualNetworks", "networkInterfaces",
                                "virtualMachines", "roleAssignments"])
def test_state_lost_down_all_regions_finds_it_by_tag(tmp_path, at):
    """Killed at the first PUT of ``at``'s kind, then the state file is gone: ``down NAME
    --all-regions --provider azure`` searches every region the catalog sells Azure GPU types in
    and removes everything the tag (or the description of a role assignment) names."""
    calls = full_provision_calls(tmp_path)
    n = next(i for i, c in enumerate(calls, 1) if c.startswith("PUT") and f"/{at}/" in c)
    arm = fake()
    st = Store(tmp_path / "s.db")
    with pytest.raises(Killed):
        run(arm, st, Plan(arm, n + 1, "kill"))  # the PUT itself went through
    assert left(arm)
    st.close()
    fresh = Store(tmp_path / "other.db")
    res = down(NAME, store=fresh, backends={"azure": azure(arm)}, provider="azure",
               all_regions=True)
    assert left(arm) == [], left(arm)
    assert len(res.searched) == len(sold_regions("azure")) >= 10
    assert not res.not_searched
    assert "resource-group:advisor-fault-az" in res.removed


def test_a_failed_attempt_removes_only_its_own(tmp_path):
    """Attempt A made the group, NSG, VNet, IP and NIC and died before its VM; attempt B of the
    same name reuses them (its PUTs keep A's attempt tag) and fails at its VM: B's cleanup
    leaves A's things alone — the resource group too, since A's are in it."""
    calls = full_provision_calls(tmp_path)
    vm_put = next(i for i, c in enumerate(calls, 1)
                  if c.startswith("PUT") and "/virtualMachines/" in c)
    arm = fake()
    st = Store(tmp_path / "a.db")
    with pytest.raises(Killed):
        run(arm, st, Plan(arm, vm_put, "kill"))
    made = sorted(left(arm))
    assert len(made) == 5  # group, NSG, VNet, IP, NIC
    attempt_a = next(e.data["attempt"] for e in st.events(NAME) if e.kind == "intent-region")

    def fail_vm(n: int, request: Any) -> Any:
        if request.method == "PUT" and "/virtualMachines/" in request.url:
            return arm._response(request, 400, {"error": {"code": "InternalError",
                                                          "message": "no"}})
        return None

    st_b = Store(tmp_path / "b.db")
    arm.before = fail_vm
    try:
        with pytest.raises(Exception, match="InternalError"):
            provision("llama-3-8b", 8192, hf_token_ref="azure-kv:myvault/hf-token",
                      instance=f"azure:{SIZE}", name=NAME, api_key_ref=KEY_REF,
                      regions=["eastus"], backends={"azure": azure(arm)}, store=st_b)
    finally:
        arm.before = None
    attempt_b = next(e.data["attempt"] for e in st_b.events(NAME) if e.kind == "intent-region")
    assert attempt_b != attempt_a
    assert sorted(left(arm)) == made  # A's group, NSG, VNet, IP, NIC are still there
    assert {v["tags"][TAG_ATTEMPT] for v in arm.resources.values()} == {attempt_a}
    # the attempt filter itself: another id removes nothing, A's own id removes it all
    assert azure(arm).terminate_attempt(NAME, "eastus", "0" * 12) == []
    assert sorted(left(arm)) == made
    removed = azure(arm).terminate_attempt(NAME, "eastus", attempt_a)
    assert "resource-group:advisor-fault-az" in removed
    assert left(arm) == []


def test_an_attempts_cleanup_keeps_a_group_holding_another_attempts_vm(tmp_path):
    """A launched; B's attempt (of the same name, e.g. after a lost state) made nothing of its
    own survive: terminate_attempt(B) leaves A's VM, its role assignments and the group."""
    arm = fake()
    assert run(arm, Store(tmp_path / "a.db")).status == "launched"
    before = sorted(left(arm))
    assert azure(arm).terminate_attempt(NAME, "eastus", "b" * 12) == []
    assert sorted(left(arm)) == before
