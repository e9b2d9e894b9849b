"""GCP preflight and serial console (issue 27, items 6 and 4) against the local fake.

Pinned: which failure maps to which check, ``ok`` and fix (changing one breaks a row of
``test_each_failure_is_one_line_with_its_fix``); a refused credentials check ends the preflight
alone; the preflight changes nothing; the dry-run plan calls nothing and lists the same checks;
``console_output`` is serial port 1's text, in which :mod:`advisor.bootstatus` finds the
``advisor-boot:`` lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("google.cloud.compute_v1")


from advisor import bootstatus  # noqa: E402
from advisor.clouds.base import CloudError, LaunchSpec  # noqa: E402
from advisor.clouds.gcp.compute import GcpProvider  # noqa: E402
from advisor.state import InstanceRow  # noqa: E402
from tests.providers.fake_gcp import (  # noqa: E402
    BASE,
    FakeCompute,
    provider_for,
    serving_with_secrets,
)

FAMILY = ("ubuntu-os-accelerator-images", "family/ubuntu-accelerator-2204-amd64-with-nvidia-580")
NAMES = ["credentials", "secret", "secret-access", "secret", "secret-access", "quota", "image",
         "egress"]


@pytest.fixture
def fake():
    f = FakeCompute(zones={"g2-standard-8": ["us-central1-a"]})
    f.quotas["us-central1"] = [{"metric": "NVIDIA_L4_GPUS", "limit": 8.0, "usage": 0.0}]
    with serving_with_secrets(f):
        yield f


def gcp(fake: FakeCompute) -> GcpProvider:
    provider: GcpProvider = provider_for(fake)
    return provider


def spec(image: str | None = None, ingress: bool = False, **options: str) -> LaunchSpec:
    return LaunchSpec(deployment="pf", provider="gcp", instance_type="g2-standard-8",
                      region="us-central1", gpu_model="L4", gpu_count=1, vcpus=8,
                      user_data="#cloud-config\n", disk_gib=100, ports=[8000], image=image,
                      allow_cidrs=["203.0.113.0/24"] if ingress else [],
                      api_key_ref="gcp-secret:advisor-vllm-api-key",
                      hf_token_ref="gcp-secret:advisor-hf-token",
                      labels={"advisor-deployment": "pf", "advisor-attempt": "a1"},
                      options=options)


def error(code: int, status: str, message: str, reason: str = "forbidden"
          ) -> tuple[int, dict[str, Any]]:
    return code, {"error": {"code": code, "status": status, "message": message,
                            "errors": [{"reason": reason, "message": message}]}}


def on(path_part: str, answer: tuple[int, dict[str, Any]], method: str | None = None
       ) -> Callable[[int, str, str], tuple[int, dict[str, Any]] | None]:
    return lambda _n, m, p: answer if path_part in p and method in (None, m) else None


def test_all_pass_and_nothing_is_changed(fake):
    checks = gcp(fake).preflight(spec())
    assert [c.name for c in checks] == NAMES
    assert [c.ok for c in checks] == [True] * len(NAMES), checks
    assert checks[-1].detail.startswith("advisor will create Cloud NAT advisor-pf-nat")
    assert "advisor-pf@proj.iam.gserviceaccount.com" in checks[2].detail
    # reads only: the one POST is testIamPermissions
    assert {m for m, p, _b in fake.requests if not p.endswith(":testIamPermissions")} == {"GET"}
    assert not (fake.routers or fake.service_accounts or fake.firewalls or fake.instances)
    asked = [b for m, p, b in fake.requests if p.endswith(":testIamPermissions")]
    assert asked[0] == {"permissions": ["secretmanager.secrets.getIamPolicy",
                                        "secretmanager.secrets.setIamPolicy"]}


def _deny_set(fake: FakeCompute) -> None:
    fake.denied["advisor-hf-token"] = {"secretmanager.secrets.setIamPolicy"}


def _quota(fake: FakeCompute) -> None:
    fake.quotas["us-central1"] = [{"metric": "NVIDIA_L4_GPUS", "limit": 8.0, "usage": 8.0}]


def _no_family(fake: FakeCompute) -> None:
    del fake.images[FAMILY]


def _no_secret(fake: FakeCompute) -> None:
    del fake.secrets["advisor-hf-token"]


def _routers_denied(fake: FakeCompute) -> None:
    fake.fault = on("/routers", error(403, "PERMISSION_DENIED", "Required 'compute.routers.list' "
                                      "permission for 'projects/proj'"))


def _sm_off(fake: FakeCompute) -> None:
    fake.fault = on("/secrets/advisor-vllm-api-key", error(
        403, "PERMISSION_DENIED", "Secret Manager API has not been used in project proj before "
        "or it is disabled."), "GET")


# (what goes wrong, the spec's options, check name, ok, a piece of the fix)
CASES = [
    ("secret missing", _no_secret, {}, "secret", False,
     "gcloud secrets create advisor-hf-token --project proj --data-file=-"),
    ("may not set the secret's policy", _deny_set, {}, "secret-access", False,
     "gcloud secrets add-iam-policy-binding advisor-hf-token --project proj"),
    ("Secret Manager API off", _sm_off, {}, "secret", False,
     "gcloud services enable secretmanager.googleapis.com --project proj"),
    ("quota used up", _quota, {}, "quota", False,
     "https://console.cloud.google.com/iam-admin/quotas?project=proj"),
    ("image family gone", _no_family, {}, "image", False,
     "gcloud compute images list --project ubuntu-os-accelerator-images "
     "--filter=family:ubuntu-accelerator-2204-amd64-with-nvidia-580"),
    ("no NAT, existing-only", lambda f: None, {"nat": "existing-only"}, "egress", False,
     "gcloud compute routers create nat-default-us-central1 --project proj --network default "
     "--region us-central1 && gcloud compute routers nats create"),
    ("routers not readable", _routers_denied, {}, "egress", False,
     "roles/compute.networkAdmin"),
]


@pytest.mark.parametrize(("what", "setup", "options", "name", "ok", "fix"), CASES,
                         ids=[c[0] for c in CASES])
def test_each_failure_is_one_line_with_its_fix(fake, what, setup, options, name, ok, fix):
    setup(fake)
    checks = gcp(fake).preflight(spec(**options))
    failed = [c for c in checks if c.ok is False]
    assert [c.name for c in failed] == [name], checks
    assert fix in (failed[0].fix or ""), failed[0]
    assert "\n" not in failed[0].detail and "\n" not in (failed[0].fix or "")
    if what == "routers not readable":  # permissions are the account's: every region fails
        assert failed[0].scope == "provider"
    if what == "secret missing":  # no access check for a secret that is not there
        assert [c.name for c in checks].count("secret-access") == 1


@pytest.mark.parametrize(("answer", "fix"), [
    (error(403, "PERMISSION_DENIED", "Required 'compute.regions.get' permission"),
     "gcloud auth application-default login"),
    (error(403, "PERMISSION_DENIED", "Compute Engine API has not been used in project proj "
           "before or it is disabled.", "accessNotConfigured"),
     "gcloud services enable compute.googleapis.com --project proj"),
])
def test_a_refused_credentials_check_ends_the_preflight(fake, answer, fix):
    fake.fault = on("/regions/us-central1", answer)
    [check] = gcp(fake).preflight(spec())
    assert (check.name, check.ok) == ("credentials", False) and fix in (check.fix or "")
    assert not any("/secrets/" in p for _m, p, _b in fake.requests)


def test_no_credentials_at_all_is_the_one_check(monkeypatch):
    import google.auth

    def none(*_a: Any, **_k: Any) -> Any:
        raise google.auth.exceptions.DefaultCredentialsError("Your default credentials were "
                                                             "not found.")

    monkeypatch.setattr(google.auth, "default", none)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("CLOUDSDK_CORE_PROJECT", raising=False)
    [check] = GcpProvider(project=None).preflight(spec())
    assert (check.name, check.ok) == ("credentials", False)
    assert "gcloud auth application-default login" in (check.fix or "")


def test_what_cannot_be_asked_is_none_not_a_refusal(fake):
    fake.quotas.clear()  # the metric not listed: quota unknown
    fake.fault = on(":testIamPermissions", error(500, "INTERNAL", "backend error", "backendError"))
    checks = gcp(fake).preflight(spec())
    got = {(c.name, c.ok) for c in checks}
    assert ("quota", None) in got and ("secret-access", None) in got
    assert not any(c.ok is False for c in checks)


def test_image_get_for_an_image_and_found_or_external_egress(fake):
    fake.images[("my-proj", "my-image")] = {"name": "my-image", "status": "READY"}
    fake.routers[("us-central1", "corp")] = {
        "name": "corp", "network": BASE + "projects/proj/global/networks/default",
        "nats": [{"name": "corp-cfg", "sourceSubnetworkIpRangesToNat":
                  "ALL_SUBNETWORKS_ALL_IP_RANGES", "natIpAllocateOption": "AUTO_ONLY"}]}
    checks = {c.name: c for c in gcp(fake).preflight(spec(image="projects/my-proj/global/"
                                                              "images/my-image"))}
    assert checks["image"].ok and "image my-image in my-proj" in checks["image"].detail
    assert checks["egress"].ok and "corp/corp-cfg" in checks["egress"].detail
    missing = {c.name: c for c in gcp(fake).preflight(spec(image="projects/my-proj/global/"
                                                               "images/gone"))}
    assert missing["image"].ok is False
    opened = {c.name: c for c in gcp(fake).preflight(spec(ingress=True,
                                                          nat="existing-only"))}
    assert opened["egress"].ok and "external IP" in opened["egress"].detail


def test_the_plan_calls_nothing_and_lists_the_same_checks(fake, monkeypatch):
    p = gcp(fake)
    for options in ({}, {"nat": "create"}, {"nat": "existing-only"}):
        plan = p.preflight_plan(spec(**options))
        assert [c.name for c in plan] == NAMES
        assert all(c.ok is None for c in plan)
    assert fake.requests == []
    plan = p.preflight_plan(spec())
    assert "regions.get proj/us-central1" in plan[0].detail
    assert "NVIDIA_L4_GPUS" in plan[5].detail
    assert "images.getFromFamily" in plan[6].detail
    assert "else create advisor-pf-nat" in plan[7].detail
    assert "else refuse" in p.preflight_plan(spec(nat="existing-only"))[7].detail
    # without a project known yet, the plan still needs no call (nor credentials)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    monkeypatch.delenv("CLOUDSDK_CORE_PROJECT", raising=False)
    assert GcpProvider(project=None).preflight_plan(spec())[0].detail == (
        "would ask Compute Engine regions.get <project>/us-central1")


# -- serial console ------------------------------------------------------------------------------
BOOT = [{"v": 1, "step": "apt", "state": "running", "t": 1733330000},
        {"v": 1, "step": "pip install", "state": "running", "t": 1733330060},
        {"v": 1, "step": "pip install", "state": "failed", "exit": 1, "t": 1733330200,
         "tail": "ERROR: No matching distribution found for vllm==0.11.0"}]


def row(fake: FakeCompute, zone: str | None = "us-central1-a", name: str = "pf") -> InstanceRow:
    return InstanceRow(id=name, provider="gcp", region="us-central1", zone=zone,
                       instance_type="g2-standard-8", state="running")


def test_console_output_is_serial_port_1_and_its_boot_lines_are_found(fake):
    fake.instances[("us-central1-a", "pf")] = {"name": "pf", "status": "RUNNING"}
    p = gcp(fake)
    assert p.console_output(row(fake)) is None  # nothing printed yet
    console = "\n".join(["[    0.000000] Linux version 6.8.0-1015-gcp",
                         "cloud-init[812]: Cloud-init v. 24.1 running 'modules:final'"]
                        + [f"cloud-init[812]: advisor-boot: {json.dumps(e)}" for e in BOOT]
                        + ["pf login: "])
    fake.serial[("us-central1-a", "pf")] = console
    text = p.console_output(row(fake))
    assert text == console
    [(method, path, _b)] = [r for r in fake.requests if "serialPort" in r[1]][-1:]
    assert method == "GET" and path.endswith("/zones/us-central1-a/instances/pf/serialPort?port=1")
    status = bootstatus.parse(text or "")
    assert status.install is not None and status.install.exit == 1
    assert bootstatus.describe(status) == ("failed: pip install (exit 1): ERROR: No matching "
                                           "distribution found for vllm==0.11.0")


def test_console_output_none_when_it_cannot_be_read(fake):
    p = gcp(fake)
    assert p.console_output(row(fake, name="gone")) is None  # no such instance: 404
    assert p.console_output(row(fake, zone=None)) is None  # no zone: nothing to ask
    fake.instances[("us-central1-a", "pf")] = {"name": "pf", "status": "RUNNING"}
    fake.fault = on("serialPort", error(403, "PERMISSION_DENIED", "Required "
                                        "'compute.instances.getSerialPortOutput' permission"))
    assert p.console_output(row(fake)) is None
    fake.fault = on("serialPort", error(500, "INTERNAL", "backend error", "backendError"))
    with pytest.raises(CloudError):
        p.console_output(row(fake))
    # a "404" in the message (here an address; the fake's own random port did it once) is no
    # "not found": still an error
    fake.fault = on("serialPort", error(500, "INTERNAL", "backend 10.0.0.1:40455 error",
                                        "backendError"))
    with pytest.raises(CloudError):
        p.console_output(row(fake))
