"""GCP egress without ingress (issue 27, item 3): an instance without an external IP reaches
apt, pip and the Hub through a Cloud NAT that advisor finds (and never removes) or makes (and
``down`` removes), or ``--gcp-nat existing-only`` refuses with the gcloud commands that fix it.

Pinned decisions (changing one breaks a test here):

* external IP (``--allow-cidr``/``--ssh-cidr``): no router call at all, whatever ``--gcp-nat``;
* ``auto``: a NAT on the network in the region serving all subnets, or listing every subnet of
  the network there with its primary range, is used as found; else advisor makes
  ``advisor-<name>-nat``; NAT configs on the network that serve other subnets are a refusal
  (a NAT for all subnets may not sit beside them), scope ``region``, with ``nats update``;
* ``create``: no look-up, the router is made (a network with a NAT there refuses it: fatal);
* ``existing-only``: none found is a ``region`` refusal (code ``NoCloudNAT``) before anything is
  made, its hint the ``routers create && routers nats create`` commands;
* a network of another project (shared VPC): found there is used, advisor makes nothing there;
* removal: only a router whose description names the deployment (and the attempt, for
  ``terminate_attempt``), once no instance of the deployment is left in its region.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("google.cloud.compute_v1")


from advisor.clouds import registry  # noqa: E402
from advisor.clouds.base import CloudError, LaunchSpec  # noqa: E402
from advisor.clouds.gcp.compute import GcpProvider, fix_command  # noqa: E402
from advisor.errors import UserInputError  # noqa: E402
from advisor.provisioning import Question, down, provision  # noqa: E402
from advisor.state import Store  # noqa: E402
from tests.providers.fake_gcp import (  # noqa: E402
    BASE,
    FakeCompute,
    provider_for,
    serving_with_secrets,
)

DEFAULT_NET = BASE + "projects/proj/global/networks/default"
SUBNET = BASE + "projects/proj/regions/us-central1/subnetworks/default"
REGION = "us-central1"
TOKEN = "gcp-secret:advisor-hf-token"


@pytest.fixture
def fake():
    f = FakeCompute(zones={"g2-standard-8": ["us-central1-a", "us-east4-c"]})
    with serving_with_secrets(f):
        yield f


def gcp(fake: FakeCompute) -> GcpProvider:
    provider: GcpProvider = provider_for(fake)
    return provider


def spec(name: str = "eg", attempt: str = "a1", region: str = REGION, ingress: bool = False,
         **options: str) -> LaunchSpec:
    return LaunchSpec(deployment=name, provider="gcp", instance_type="g2-standard-8",
                      region=region, gpu_model="L4", gpu_count=1, vcpus=8,
                      user_data="#cloud-config\n", disk_gib=100, ports=[8000],
                      allow_cidrs=["203.0.113.0/24"] if ingress else [],
                      api_key_ref="gcp-secret:advisor-vllm-api-key",
                      labels={"advisor-deployment": name, "advisor-attempt": attempt},
                      options=options)


def router(name: str, ranges: str = "ALL_SUBNETWORKS_ALL_IP_RANGES", network: str = DEFAULT_NET,
           region: str = REGION, description: str = "the platform team's NAT",
           subnets: list[dict] | None = None) -> dict:
    nat = {"name": f"{name}-cfg", "natIpAllocateOption": "AUTO_ONLY",
           "sourceSubnetworkIpRangesToNat": ranges}
    if subnets is not None:
        nat["subnetworks"] = subnets
    return {"kind": "compute#router", "name": name, "description": description,
            "network": network, "region": BASE + f"projects/proj/regions/{region}",
            "nats": [nat]}


def calls(fake: FakeCompute, start: int = 0) -> list[str]:
    return [f"{m} {p.split('?')[0].split('/projects/proj/')[-1]}"
            for m, p, _b in fake.requests[start:]]


def launch(fake: FakeCompute, store: Store, **kw: object) -> object:
    return provision("llama-3-8b", 8192, hf_token_ref=TOKEN, instance="gcp:g2-standard-8",
                     question=Question(batch=True), name="eg", regions=[REGION],
                     backends={"gcp": gcp(fake)}, store=store, **kw)  # type: ignore[arg-type]


def instance(fake: FakeCompute, zone: str, name: str = "eg") -> None:
    fake.instances[(zone, name)] = {
        "name": name, "status": "RUNNING", "labels": {"advisor-deployment": name},
        "machineType": BASE + f"projects/proj/zones/{zone}/machineTypes/g2-standard-8",
        "networkInterfaces": [{"network": DEFAULT_NET, "networkIP": "10.128.0.9"}]}


# -- made, found, refused ------------------------------------------------------------------------
def test_none_found_advisor_makes_the_deployments_nat_first_looked_up(fake):
    p = gcp(fake)
    rows = p.ensure_network(spec())
    seen = calls(fake)
    # the look-up comes before anything is made; the router is made last
    assert seen[0] == f"GET regions/{REGION}/routers"
    assert seen[-1] == f"POST regions/{REGION}/routers"
    made = fake.routers[(REGION, "advisor-eg-nat")]
    assert made["description"] == ("advisor deployment eg attempt a1: Cloud NAT for instances "
                                   "without an external IP")
    assert made["network"] == DEFAULT_NET
    assert made["nats"] == [{"name": "advisor-eg-nat", "natIpAllocateOption": "AUTO_ONLY",
                             "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}]
    assert [(r.kind, r.id) for r in rows if r.kind == "nat-router"] == [
        ("nat-router", "advisor-eg-nat")]
    assert any("advisor-eg-nat, which advisor made on network 'default'" in n for n in p.notes)
    # a second run finds its own NAT: nothing inserted twice, still its row
    before = len(fake.requests)
    rows = gcp(fake).ensure_network(spec())
    assert "nat-router" in [r.kind for r in rows]
    assert f"POST regions/{REGION}/routers" not in calls(fake, before)
    assert len(fake.routers) == 1


def test_a_found_nat_is_used_and_never_removed(fake, tmp_path):
    fake.routers[(REGION, "corp")] = router("corp", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES")
    store = Store(tmp_path / "s.db")
    res = launch(fake, store)
    assert res.status == "launched"
    assert not any(m == "POST" and p.split("?")[0].endswith("/routers")
                   for m, p, _ in fake.requests)
    assert any("corp/corp-cfg, found on network 'default'" in w and "never removed" in w
               for w in res.warnings)
    gone = down("eg", store=store, backends={"gcp": gcp(fake)})
    assert not any(r.startswith("nat:") for r in gone.removed)
    assert list(fake.routers) == [(REGION, "corp")]


def test_another_deployments_nat_is_used_and_goes_with_it(fake):
    """Pinned limit: deployment b finds the NAT advisor made for a (a second NAT for all
    subnets may not sit beside it); b is told that 'advisor down a' takes it away."""
    gcp(fake).ensure_network(spec(name="a"))
    p = gcp(fake)
    rows = p.ensure_network(spec(name="b"))
    assert "nat-router" not in [r.kind for r in rows] and list(fake.routers) == [
        (REGION, "advisor-a-nat")]
    assert any("made it for deployment a, and 'advisor down a' removes it" in n
               for n in p.notes)
    assert p.remove_network("b", REGION) and list(fake.routers) == [(REGION, "advisor-a-nat")]
    assert p.remove_network("a", REGION)[0] == "nat:us-central1/advisor-a-nat"


def test_a_nat_of_another_network_or_region_does_not_count(fake):
    fake.routers[(REGION, "other-net")] = router(
        "other-net", network=BASE + "projects/proj/global/networks/other")
    fake.routers[("us-east4", "east")] = router("east", region="us-east4")
    gcp(fake).ensure_network(spec())
    assert (REGION, "advisor-eg-nat") in fake.routers


def test_a_listed_subnet_counts_only_with_its_primary_range(fake):
    fake.subnetworks[(REGION, "default")] = {"name": "default", "network": DEFAULT_NET,
                                             "region": BASE + "projects/proj/regions/" + REGION}
    fake.routers[(REGION, "listed")] = router("listed", "LIST_OF_SUBNETWORKS", subnets=[
        {"name": SUBNET, "sourceIpRangesToNat": ["PRIMARY_IP_RANGE"]}])
    p = gcp(fake)
    p.ensure_network(spec())
    assert list(fake.routers) == [(REGION, "listed")]  # found: nothing made
    assert f"GET regions/{REGION}/subnetworks" in calls(fake)  # asked only for a listed NAT

    fake.routers[(REGION, "listed")] = router("listed", "LIST_OF_SUBNETWORKS", subnets=[
        {"name": SUBNET, "sourceIpRangesToNat": ["LIST_OF_SECONDARY_IP_RANGES"],
         "secondaryIpRangeNames": ["pods"]}])
    fake.service_accounts.clear()
    with pytest.raises(CloudError) as err:
        gcp(fake).ensure_network(spec(attempt="a2"))
    assert err.value.scope == "region" and err.value.code == "NoCloudNAT"
    assert err.value.hint == ("gcloud compute routers nats update listed-cfg --project proj "
                              "--router listed --region us-central1 "
                              "--nat-custom-subnet-ip-ranges=default")
    assert fake.service_accounts == {}  # refused before anything was made


def test_existing_only_refuses_before_anything_is_made_with_the_fix(fake, tmp_path):
    with pytest.raises(CloudError) as err:
        gcp(fake).ensure_network(spec(nat="existing-only"))
    assert (err.value.scope, err.value.code, err.value.kind) == ("region", "NoCloudNAT", "error")
    assert err.value.hint == fix_command("proj", "default", REGION) == (
        "gcloud compute routers create nat-default-us-central1 --project proj --network default "
        "--region us-central1 && gcloud compute routers nats create nat-default-us-central1 "
        "--project proj --router nat-default-us-central1 --region us-central1 "
        "--auto-allocate-nat-external-ips --nat-all-subnet-ip-ranges")
    assert calls(fake) == [f"GET regions/{REGION}/routers"]
    # through provision: the preflight's egress check refuses the region, with the same fix,
    # and nothing is made
    store = Store(tmp_path / "s.db")
    with pytest.raises(UserInputError) as refused:
        launch(fake, store, provider_options={"gcp": {"nat": "existing-only"}})
    assert err.value.hint in (refused.value.hint or "")
    [attempt] = [e.data for e in store.events("eg") if e.kind == "attempt"]
    assert (attempt["outcome"], attempt["code"]) == ("refused", "preflight:egress")
    assert fake.routers == {} and fake.service_accounts == {} and fake.instances == {}
    # ... and a NAT that is there is enough
    fake.routers[(REGION, "corp")] = router("corp")
    gcp(fake).ensure_network(spec(nat="existing-only"))
    assert list(fake.routers) == [(REGION, "corp")]


def test_create_does_not_look_and_a_network_with_a_nat_refuses_it(fake):
    gcp(fake).ensure_network(spec(nat="create"))
    assert f"GET regions/{REGION}/routers" not in calls(fake)
    assert (REGION, "advisor-eg-nat") in fake.routers
    fake.routers.clear()
    fake.routers[(REGION, "corp")] = router("corp")
    with pytest.raises(CloudError) as err:
        gcp(fake).ensure_network(spec(name="eg2", nat="create"))
    assert err.value.scope == "fatal" and "Router.Nat" in err.value.detail
    assert list(fake.routers) == [(REGION, "corp")]


def test_an_external_ip_needs_no_nat_whatever_the_mode(fake):
    for mode in ("auto", "create", "existing-only"):
        p = gcp(fake)
        rows = p.ensure_network(spec(ingress=True, nat=mode))
        assert "nat-router" not in [r.kind for r in rows]
        assert p.notes == []
    assert not any("routers" in c for c in calls(fake))


def test_shared_vpc_uses_a_nat_found_there_and_makes_none(fake):
    shared = "projects/host-proj/global/networks/shared"
    with pytest.raises(CloudError) as err:
        gcp(fake).ensure_network(spec(network=shared))
    assert err.value.code == "NoCloudNAT" and "another project (host-proj)" in err.value.detail
    assert "--project host-proj --network shared" in (err.value.hint or "")
    assert fake.routers == {}
    fake.routers[(REGION, "host")] = router("host", network=BASE + shared)
    gcp(fake).ensure_network(spec(network=shared))
    assert list(fake.routers) == [(REGION, "host")]
    assert any("/projects/host-proj/regions/us-central1/routers" in p
               for _m, p, _b in fake.requests)


def test_a_foreign_router_of_advisors_name_is_refused_and_left_alone(fake):
    fake.routers[(REGION, "advisor-eg-nat")] = router(
        "advisor-eg-nat", network=BASE + "projects/proj/global/networks/other",
        description="made by hand")
    with pytest.raises(CloudError) as err:
        gcp(fake).ensure_network(spec())
    assert err.value.scope == "fatal" and "did not create" in err.value.detail
    p = gcp(fake)
    assert not any(r.startswith("nat:") for r in p.remove_network("eg", REGION))
    assert p.leftovers("eg", REGION) == []
    assert (REGION, "advisor-eg-nat") in fake.routers


# -- removal -------------------------------------------------------------------------------------
def test_terminate_attempt_removes_only_its_own_nat(fake):
    p = gcp(fake)
    p.ensure_network(spec(attempt="a1"))
    assert p.terminate_attempt("eg", REGION, "a2") == []
    assert (REGION, "advisor-eg-nat") in fake.routers
    sa = "advisor-eg@proj.iam.gserviceaccount.com"
    assert p.leftovers("eg", REGION) == ["nat:us-central1/advisor-eg-nat", f"service-account:{sa}",
                                         f"binding:advisor-vllm-api-key:{sa}"]
    assert "nat:us-central1/advisor-eg-nat" in p.terminate_attempt("eg", REGION, "a1")
    assert fake.routers == {} and p.leftovers("eg", REGION) == []


def test_an_attempt_that_removed_its_nat_makes_it_again(fake):
    """A multi-node group that moves zones: the attempt's cleanup removes its NAT and prepares
    again; the second insert is a new request, not the first one's answer."""
    p = gcp(fake)
    p.ensure_network(spec(attempt="a1"))
    p.terminate_attempt("eg", REGION, "a1")
    assert fake.routers == {}
    p.ensure_network(spec(attempt="a1"))
    assert (REGION, "advisor-eg-nat") in fake.routers
    ids = [path.split("requestId=")[1] for m, path, _b in fake.requests
           if m == "POST" and path.split("?")[0].endswith("/routers")]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_the_nat_goes_once_its_region_has_no_instance_of_the_deployment(fake):
    p = gcp(fake)
    p.ensure_network(spec())
    instance(fake, "us-central1-a")
    instance(fake, "us-east4-c")
    assert p.remove_network("eg", REGION) == []  # an instance still runs in us-central1
    del fake.instances[("us-central1-a", "eg")]
    # us-central1's NAT goes; the global account stays for the instance in us-east4
    assert p.remove_network("eg", REGION) == ["nat:us-central1/advisor-eg-nat"]
    assert fake.routers == {} and fake.service_accounts


def test_down_with_the_state_lost_finds_the_nat_by_name(fake, tmp_path):
    store = Store(tmp_path / "s.db")
    launch(fake, store)
    fake.routers[(REGION, "corp-other-net")] = router(
        "corp-other-net", network=BASE + "projects/proj/global/networks/other")
    assert (REGION, "advisor-eg-nat") in fake.routers
    res = down("eg", store=Store(tmp_path / "fresh.db"), backends={"gcp": gcp(fake)},
               provider="gcp", all_regions=True)
    assert "nat:us-central1/advisor-eg-nat" in res.removed
    assert list(fake.routers) == [(REGION, "corp-other-net")]


# -- the option, the fake's shapes ---------------------------------------------------------------
def test_the_gcp_nat_option():
    [opt] = [o for c, o in registry.options("provision") if c == "gcp" and o.key == "nat"]
    assert opt.flag == "--gcp-nat"
    for good in ("auto", "create", "existing-only"):
        assert opt.check(good) == good
    with pytest.raises(UserInputError):
        opt.check("sometimes")
    with pytest.raises(UserInputError):
        GcpProvider(project="proj").request(spec(nat="sometimes"), None)


def test_the_dry_run_shows_the_nat_step_per_mode():
    p = GcpProvider(project="proj")
    steps = {m: [c["call"] for c in p.request(spec(nat=m), "us-central1-a")["calls"]
                 if "routers" in c["call"]] for m in ("auto", "create", "existing-only")}
    assert steps == {"auto": ["compute.routers.list", "compute.routers.insert"],
                     "create": ["compute.routers.insert"],
                     "existing-only": ["compute.routers.list"]}
    notes = p.request(spec(nat="existing-only"), None)["notes"]
    assert "existing-only" in notes[0] and "Cloud NAT on network 'default'" in notes[0]


def test_the_fake_routers_answer_as_the_rest_reference_shapes_them(fake):
    from google.cloud import compute_v1

    p = gcp(fake)
    client = p._client("RoutersClient")
    body = {"name": "r1", "network": "global/networks/default",
            "nats": [{"name": "n1", "natIpAllocateOption": "AUTO_ONLY",
                      "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}]}
    req = compute_v1.InsertRouterRequest(project="proj", region=REGION, request_id="r-1",
                                         router_resource=compute_v1.Router.from_json(
                                             json.dumps(body)))
    client.insert(request=req).result()
    client.insert(request=req).result()  # the same requestId: nothing made twice
    assert len(fake.routers) == 1
    got = client.get(project="proj", region=REGION, router="r1")
    assert got.network == DEFAULT_NET and got.nats[0].nat_ip_allocate_option == "AUTO_ONLY"
    assert [r.name for r in client.list(project="proj", region=REGION)] == ["r1"]
    agg = dict(client.aggregated_list(project="proj"))
    assert [r.name for r in agg[f"regions/{REGION}"].routers] == ["r1"]
    client.delete(project="proj", region=REGION, router="r1").result()
    with pytest.raises(Exception, match="not found"):
        client.get(project="proj", region=REGION, router="r1")


def test_the_cli_checks_gcp_nat_and_the_dry_run_shows_it(cli):
    bad = cli("provision", "-m", "llama-3-8b", "--ctx", "8192", "--instance", "gcp:g2-standard-8",
              "--batch", "--dry-run", "--gcp-nat", "sometimes")
    assert bad.exit_code == 2 and "--gcp-nat 'sometimes' is not valid" in bad.stderr
    ok = cli("provision", "-m", "llama-3-8b", "--ctx", "8192", "--instance", "gcp:g2-standard-8",
             "--batch", "--dry-run", "--gcp-nat", "existing-only", "--project", "my-proj-1",
             "--hf-token-ref", TOKEN, "--json")
    assert ok.exit_code == 0, ok.stderr
    [req] = json.loads(ok.stdout)["requests"]
    assert [c["call"] for c in req["calls"] if "routers" in c["call"]] == [
        "compute.routers.list"]
