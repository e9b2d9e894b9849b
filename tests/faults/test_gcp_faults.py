"""Crash GCP provisioning at every call it makes to the local Compute Engine / IAM / Secret
Manager fake, then heal: ``status --reconcile`` + ``down`` must leave nothing of the deployment
in the fake — no instance with its label, no firewall rule of its name, no service account, no
binding of that account on a secret, no NAT router of its name — and, with the state file gone,
``down --all-regions --provider gcp`` must find it all by label, name and description.

Three ways to die at call N:

* ``fail-from`` — the fake answers call N and every call after it with a 500 (the fake's fault
  hook): the attempt's own cleanup cannot reach the cloud either;
* ``fail-at`` — the fake answers call N alone with a 500: the attempt cleans up after itself
  (only what its attempt id names) and the run stops or goes on;
* ``kill`` — call N and every call after it raise :class:`Killed` in the client (a
  ``BaseException``, like the process dying): nothing after it reaches the fake.

Each sweep runs twice: with ingress (an external IP: no NAT call) and without (issue 27: the
routers look-up and the insert of the deployment's Cloud NAT router are cut too). A NAT the
deployment found (someone else's) is never removed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("google.cloud.compute_v1")

from google.auth.credentials import AnonymousCredentials  # noqa: E402

from advisor.clouds.gcp.compute import GcpProvider  # noqa: E402
from advisor.provisioning import Question, down, provision, sold_regions, status  # noqa: E402
from advisor.state import Store  # noqa: E402
from tests.providers.conftest import loopback_only  # noqa: E402,F401
from tests.providers.fake_gcp import FakeCompute, serve  # noqa: E402

NAME = "fault-gcp"
TYPE = "gcp:g2-standard-8"
TOKEN = "gcp-secret:advisor-hf-token"
OWNER = {"role": "roles/secretmanager.admin", "members": ["user:owner@example.com"]}
INJECTED = (500, {"error": {"code": 500, "status": "INTERNAL", "message": "injected fault",
                            "errors": [{"reason": "backendError",
                                        "message": "injected fault"}]}})


class Killed(BaseException):
    """The process died here."""


@pytest.fixture
def fake() -> Iterator[FakeCompute]:
    f = FakeCompute(zones={"g2-standard-8": ["us-central1-a", "us-central1-b"]})
    for secret in ("advisor-vllm-api-key", "advisor-hf-token"):
        f.secrets[secret] = {"version": 1, "etag": "BwA", "bindings": [dict(OWNER)]}
    with serve(f) as url:
        f.url = url  # type: ignore[attr-defined]
        yield f


@pytest.fixture
def killer(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Client side: every HTTP request of the provider (compute_v1's REST transport and the
    IAM / Secret Manager session both go through AuthorizedSession) is counted; from call
    ``at`` on it raises :class:`Killed` instead of being sent."""
    from google.auth.transport.requests import AuthorizedSession

    box: dict[str, Any] = {"at": None, "n": 0}
    real = AuthorizedSession.request

    def request(self: Any, method: str, url: str, *a: Any, **kw: Any) -> Any:
        box["n"] += 1
        if box["at"] is not None and box["n"] >= box["at"]:
            raise Killed(f"killed at call {box['n']} ({method} {url})")
        return real(self, method, url, *a, **kw)

    monkeypatch.setattr(AuthorizedSession, "request", request)
    return box


def gcp(fake: FakeCompute) -> GcpProvider:
    url = fake.url  # type: ignore[attr-defined]
    return GcpProvider(project="proj", credentials=AnonymousCredentials(), endpoint=url,
                       iam_url=url, secretmanager_url=url, sleep=lambda _s: None)


def run(fake: FakeCompute, store: Store, ingress: bool = True) -> Any:
    """A full provision; ``ingress`` False: no external IP, so a Cloud NAT is made."""
    opened: dict[str, Any] = ({"allow_cidrs": ["203.0.113.0/24"],
                               "ssh_cidrs": ["198.51.100.7/32"]} if ingress else {})
    return provision("llama-3-8b", 8192, hf_token_ref=TOKEN, instance=TYPE,
                     question=Question(batch=True), name=NAME, regions=["us-central1"],
                     backends={"gcp": gcp(fake)}, store=store, **opened)


def left(fake: FakeCompute, name: str = NAME) -> list[str]:
    """Everything of the deployment the fake holds, counted from the fake's own tables."""
    email = f"advisor-{name}@"
    out = [f"instance:{z}/{n}" for (z, n), i in fake.instances.items()
           if i.get("labels", {}).get("advisor-deployment") == name]
    out += [f"firewall:{n}" for n in fake.firewalls if n.startswith(f"advisor-{name}-")]
    out += [f"service-account:{e}" for e in fake.service_accounts if e.startswith(email)]
    out += [f"binding:{s}:{m}" for s, p in fake.secrets.items() for b in p.get("bindings", [])
            for m in b.get("members", []) if email in m]
    out += [f"nat:{r}/{n}" for r, n in fake.routers if n == f"advisor-{name}-nat"]
    return sorted(out)


def clear(fake: FakeCompute) -> None:
    fake.instances.clear()
    fake.firewalls.clear()
    fake.service_accounts.clear()
    fake.routers.clear()
    fake.seen_request_ids.clear()
    for secret in fake.secrets:
        fake.secrets[secret] = {"version": 1, "etag": "BwA", "bindings": [dict(OWNER)]}
    fake.fault = None


def full_provision_calls(fake: FakeCompute, tmp_path: Any, ingress: bool = True) -> list[str]:
    before = len(fake.requests)
    start = fake.calls
    res = run(fake, Store(tmp_path / f"count-{ingress}.db"), ingress)
    assert res.status == "launched"
    calls = [f"{m} {p.split('?')[0]}" for m, p, _b in fake.requests[before:]]
    assert len(calls) == fake.calls - start
    clear(fake)
    return calls


def test_a_full_provision_makes_the_calls_the_suite_cuts(fake, tmp_path):
    calls = full_provision_calls(fake, tmp_path)
    assert len(calls) >= 10
    assert any("serviceAccounts" in c and c.startswith("POST") for c in calls)
    assert sum(c.startswith("POST") and c.endswith("global/firewalls") for c in calls) == 2
    assert calls[-2].startswith("POST") and calls[-2].endswith("/instances")
    run(fake, Store(tmp_path / "s.db"))
    made = left(fake)
    # an instance, two firewall rules, the account and its two bindings
    assert len(made) == 6, made
    attempt = fake.instances[("us-central1-a", NAME)]["labels"]["advisor-attempt"]
    assert all(f"attempt {attempt}" in r["description"] for r in fake.firewalls.values())
    [sa] = fake.service_accounts.values()
    assert sa["description"].startswith(f"advisor deployment {NAME} attempt {attempt} reads:")
    assert sorted(gcp(fake).leftovers(NAME, "us-central1")) == sorted(
        [f"us-central1:{NAME}", f"firewall:advisor-{NAME}-vllm", f"firewall:advisor-{NAME}-ssh",
         f"service-account:{sa['email']}", f"binding:advisor-hf-token:{sa['email']}",
         f"binding:advisor-vllm-api-key:{sa['email']}"])


def test_without_ingress_the_nat_calls_are_in_the_sweep(fake, tmp_path):
    """No external IP: the routers look-up comes before anything is made, the router insert
    after the firewall step; down removes the router advisor made."""
    calls = full_provision_calls(fake, tmp_path, ingress=False)
    nat = [i for i, c in enumerate(calls) if "/routers" in c]
    # the look-up (the preflight's, then ensure_network's), then the one insert
    assert [calls[i].split()[0] for i in nat][-2:] == ["GET", "POST"]
    assert {calls[i].split()[0] for i in nat[:-1]} == {"GET"}
    made = next(i for i, c in enumerate(calls) if c.startswith("POST") and
                not c.endswith(":testIamPermissions"))
    assert nat[0] < made and nat[-1] < len(calls) - 2
    st = Store(tmp_path / "s.db")
    run(fake, st, ingress=False)
    assert "nat:us-central1/advisor-fault-gcp-nat" in left(fake)
    assert "nat:us-central1/advisor-fault-gcp-nat" in gcp(fake).leftovers(NAME, "us-central1")
    res = down(NAME, store=st, backends={"gcp": gcp(fake)})
    assert "nat:us-central1/advisor-fault-gcp-nat" in res.removed and left(fake) == []


def test_down_never_removes_a_nat_it_found(fake, tmp_path):
    theirs = {"name": "corp-nat", "description": "the platform team's",
              "network": "https://www.googleapis.com/compute/v1/projects/proj/global/networks/"
              "default", "nats": [{"name": "corp", "natIpAllocateOption": "AUTO_ONLY",
                                   "sourceSubnetworkIpRangesToNat":
                                   "ALL_SUBNETWORKS_ALL_IP_RANGES"}]}
    fake.routers[("us-central1", "corp-nat")] = theirs
    st = Store(tmp_path / "s.db")
    assert run(fake, st, ingress=False).status == "launched"
    assert not any(m == "POST" and "/routers" in p for m, p, _b in fake.requests)
    down(NAME, store=st, backends={"gcp": gcp(fake)})
    fresh = Store(tmp_path / "fresh.db")
    down(NAME, store=fresh, backends={"gcp": gcp(fake)}, provider="gcp", all_regions=True)
    assert left(fake) == [] and fake.routers == {("us-central1", "corp-nat"): theirs}


@pytest.mark.parametrize("ingress", [True, False], ids=["external-ip", "cloud-nat"])
@pytest.mark.parametrize("mode", ["fail-from", "fail-at", "kill"])
def test_every_crash_point_heals_to_nothing(fake, killer, tmp_path, mode, ingress):
    calls = full_provision_calls(fake, tmp_path, ingress)
    total = len(calls)
    report: list[tuple[int, str, str, int]] = []
    for n in range(1, total + 1):
        clear(fake)
        st = Store(tmp_path / f"{mode}-{n}.db")
        base = fake.calls
        if mode == "fail-from":
            fake.fault = lambda k, _m, _p, at=base + n: INJECTED if k >= at else None
        elif mode == "fail-at":
            fake.fault = lambda k, _m, _p, at=base + n: INJECTED if k == at else None
        else:
            killer["n"], killer["at"] = 0, n
        outcome = "launched"
        try:
            run(fake, st, ingress)
        except (Killed, Exception) as exc:
            outcome = type(exc).__name__
        fake.fault, killer["at"] = None, None
        if mode == "kill":
            assert outcome == "Killed", (n, outcome)
        if mode == "fail-at" and outcome != "launched" and not any(
                x.startswith("instance:") for x in left(fake)):
            # the failed attempt cleaned up after itself (an instance made before the failed
            # call — the insert answered, its get did not — is kept for status --reconcile)
            assert left(fake) == [], (n, calls[n - 1], outcome)
        dep = st.get(NAME)
        if dep is None:  # died before the state knew the name: nothing made
            assert left(fake) == [], (n, calls[n - 1])
            report.append((n, calls[n - 1], outcome, 0))
            continue
        if any(c.startswith("POST") and not c.endswith(":testIamPermissions")
               for c in calls[:n]):  # a change (testIamPermissions, the preflight's, reads)
            # the intent named the region before anything was made there
            assert any(e.kind == "intent-region" and e.data.get("region") == "us-central1"
                       for e in st.events(NAME)), (n, calls[n - 1])
        status(NAME, reconcile=True, store=st, backends={"gcp": gcp(fake)})
        down(NAME, store=st, backends={"gcp": gcp(fake)})
        remaining = left(fake)
        report.append((n, calls[n - 1], outcome, len(remaining)))
        assert remaining == [], (n, calls[n - 1], outcome, remaining)
        assert st.require(NAME).status == "down"
    print(f"\n{mode}: {len(report)} crash points, "
          f"{sum(r[3] for r in report)} resources left after down: {report}")


@pytest.mark.parametrize(("n", "ingress"), [(4, True), (6, True), (8, True), (10, True),
                                             (12, True), (10, False), (12, False), (99, False)])
def test_state_lost_down_all_regions_finds_it_by_label(fake, killer, tmp_path, n, ingress):
    """Killed at call n (99: the last call), then the state file is gone: ``down NAME
    --all-regions --provider gcp`` searches every region the catalog sells GCP GPU types in
    and removes what carries the deployment's label, name or description."""
    total = len(full_provision_calls(fake, tmp_path, ingress))
    st = Store(tmp_path / "s.db")
    killer["n"], killer["at"] = 0, min(n, total)
    with pytest.raises(Killed):
        run(fake, st, ingress)
    killer["at"] = None
    made = left(fake)
    st.close()
    (tmp_path / "s.db").unlink()
    fresh = Store(tmp_path / "other.db")
    res = down(NAME, store=fresh, backends={"gcp": gcp(fake)}, provider="gcp",
               all_regions=True)
    assert left(fake) == []
    assert len(res.searched) == len(sold_regions("gcp")) >= 10
    assert not res.not_searched
    removed = {r.removeprefix("firewall:").removeprefix("service-account:") for r in res.removed}
    for thing in made:
        kind, _, what = thing.partition(":")
        if kind == "instance":
            assert what.split("/")[1] in removed
        elif kind in ("firewall", "service-account"):
            assert what in removed
        elif kind == "nat":
            assert thing in res.removed


def test_a_failed_attempt_removes_only_its_own(fake, killer, tmp_path):
    """Attempt A made the account, its bindings and the firewall rules and died before its
    instance; attempt B of the same name reuses them and fails at its launch: B's cleanup
    leaves A's things alone. A's attempt id removes them."""
    calls = full_provision_calls(fake, tmp_path)
    insert = next(i for i, c in enumerate(calls, 1)
                  if c.startswith("POST") and c.endswith("/instances"))
    st = Store(tmp_path / "a.db")
    killer["n"], killer["at"] = 0, insert
    with pytest.raises(Killed):
        run(fake, st)
    killer["at"] = None
    made = left(fake)
    assert len(made) == 5, made  # two rules, the account, two bindings

    def no_instances(_n: int, method: str, path: str) -> Any:
        return INJECTED if method == "POST" and path.endswith("/instances") else None

    fake.fault = no_instances
    with pytest.raises(Exception, match="injected"):
        run(fake, Store(tmp_path / "b.db"))
    fake.fault = None
    assert left(fake) == made  # A's rules, account and bindings are still there
    p = gcp(fake)
    assert p.terminate_attempt(NAME, "us-central1", "0" * 12) == []
    attempt_a = next(e.data["attempt"] for e in st.events(NAME) if e.kind == "intent-region")
    assert p.terminate_attempt(NAME, "us-central1", attempt_a)
    assert left(fake) == []


def test_a_second_attempts_instance_is_not_taken_by_the_firsts_cleanup(fake, tmp_path):
    """terminate_attempt removes instances by their attempt label only; the global firewall
    rules and account stay while any instance of the deployment runs."""
    run(fake, Store(tmp_path / "s.db"))
    made = left(fake)
    p = gcp(fake)
    assert p.terminate_attempt(NAME, "us-central1", "f" * 12) == []
    # no attempt filter on the network while an instance runs: nothing global goes
    assert p.remove_network(NAME, "us-central1") == []
    assert left(fake) == made
    assert p.terminate_instances(NAME, "us-central1") == [NAME]
    assert len(p.remove_network(NAME, "us-central1")) == 3  # two rules and the account
    assert left(fake) == [] and p.leftovers(NAME, "us-central1") == []


def test_a_similar_name_is_never_touched(fake, tmp_path):
    """``advisor-a-`` is not a prefix search: deployment ``fault-gcp`` leaves
    ``fault-gcp-vllm``'s rules alone."""
    run(fake, Store(tmp_path / "s.db"))
    fake.firewalls["advisor-fault-gcp-vllm-vllm"] = {
        "name": "advisor-fault-gcp-vllm-vllm", "description": "advisor deployment fault-gcp-vllm"}
    down(NAME, store=Store(tmp_path / "s.db"), backends={"gcp": gcp(fake)})
    assert left(fake) == ["firewall:advisor-fault-gcp-vllm-vllm"]
