"""Orchestration pieces that need no cloud: names, ranges, disk size, candidates, the health
probe (against a local server), and failover decisions with a scripted provider."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import advisor
from advisor.clouds.base import CloudError, LaunchSpec, QuotaStatus, check_cidr, check_name
from advisor.errors import OperationError, UserInputError
from advisor.provisioning import _health, candidates, default_name, disk_gib, provision
from advisor.state import InstanceRow, ResourceRow, Store

CAT = advisor.load_catalog()


@pytest.mark.parametrize("name", ["a", "llama-3-8b-g6e", "x" * 40])
def test_good_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "8b", "-a", "a-", "A", "a_b", "a b", "x" * 41, "a;b",
                                  "a\nb", "$(id)"])
def test_bad_names(name):
    with pytest.raises(UserInputError):
        check_name(name)


def test_ranges_are_normalised_and_checked():
    assert check_cidr("203.0.113.7/24") == "203.0.113.0/24"
    assert check_cidr("2001:db8::1/64") == "2001:db8::/64"
    for bad in ("", "everyone", "300.1.1.1/8", "10.0.0.0/33"):
        with pytest.raises(UserInputError):
            check_cidr(bad)


def test_default_name_is_a_valid_name():
    for model, inst in (("llama-3-8b", "p5.48xlarge"), ("Qwen/Qwen3-8B", "a3-highgpu-8g"),
                        ("8b-model", "Standard_ND96isr_H100_v5"), ("m" * 60, "g6e.xlarge")):
        assert check_name(default_name(model, inst))


def test_disk_holds_weights_and_overhead():
    assert disk_gib(15) == 100  # the floor
    assert disk_gib(131.4) == 200  # 131.4 + 60 rounded up to tens
    assert disk_gib(810) == 870


def test_candidates_follow_the_ranking_and_regions():
    picks = candidates("llama-3-8b", 8192, catalog=CAT, provider="gcp", max_types=2)
    recs = advisor.recommend("llama-3-8b", 8192, providers=["gcp"], top=2)
    assert [(p[0].name, p[2]) for p in picks] == [(r.instance, r.region) for r in recs]
    two = candidates("llama-3-8b", 8192, catalog=CAT, instance="aws:g6e.2xlarge",
                     regions=["us-west-2", "eu-west-1"])
    assert [p[2] for p in two] == ["us-west-2", "eu-west-1"]
    with pytest.raises(UserInputError, match="not a region"):
        candidates("llama-3-8b", 8192, catalog=CAT, regions=["../etc"])


def test_world_open_range_is_allowed_but_warned(tmp_path):
    res = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name="w",
                    allow_cidrs=["0.0.0.0/0"], dry_run=True)
    assert any("whole internet" in w for w in res.warnings)
    rule = res.requests[0]["calls"][1]
    assert rule["call"] == "ec2.AuthorizeSecurityGroupIngress"
    assert rule["body"]["IpPermissions"][0]["IpRanges"][0]["CidrIp"] == "0.0.0.0/0"
    # and the replica listens on all interfaces only because a range was opened
    assert "ADVISOR_HOST=0.0.0.0" in res.user_data
    closed = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                       instance="aws:g6e.2xlarge", name="w", dry_run=True)
    assert "ADVISOR_HOST=127.0.0.1" in closed.user_data and closed.warnings == []


def test_provision_launches_the_kv_cache_dtype_it_ranked_with():
    from advisor.provisioning import Question

    fp8 = provision("qwen3-8b", 8192, instance="aws:g6e.2xlarge", name="kv", dry_run=True,
                    question=Question(kv_cache_dtype="fp8"))
    assert "ADVISOR_KV_CACHE_DTYPE=fp8" in fp8.user_data
    plain = provision("qwen3-8b", 8192, instance="aws:g6e.2xlarge", name="kv", dry_run=True)
    assert "ADVISOR_KV_CACHE_DTYPE=" not in plain.user_data  # the launcher names it, unset
    with pytest.raises(UserInputError, match="fp8 KV cache"):  # an A10G cannot store it
        provision("qwen3-8b", 8192, instance="aws:g5.2xlarge", name="kv", dry_run=True,
                  question=Question(kv_cache_dtype="fp8"))


def test_health_probe_against_a_local_server():
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_port}/health"
        assert _health(url, time.monotonic() + 5, time.monotonic) == f"{url} answers 200"
    finally:
        srv.shutdown()
        srv.server_close()
    dead = f"http://127.0.0.1:{srv.server_port}/health"
    assert "did not answer" in _health(dead, time.monotonic() + 0.2, time.monotonic)


class Scripted:
    """A provider whose answers are scripted per zone: what the orchestrator decides from."""

    name = "aws"

    def __init__(self, zones: dict[str, list[str]], script: dict[str, CloudError],
                 quota_ok: dict[str, bool] | None = None) -> None:
        self._zones, self.script, self.quota_ok = zones, script, quota_ok or {}
        self.launched: list[str] = []
        self.networks: dict[str, int] = {}
        self.terminated: list[str] = []

    def request(self, spec, zone):
        return {"zone": zone}

    def zones(self, spec: LaunchSpec):
        return self._zones.get(spec.region, [])

    def check_quota(self, spec):
        ok = self.quota_ok.get(spec.region, True)
        return QuotaStatus(checked=True, ok=ok, detail="scripted")

    def ensure_network(self, spec):
        self.networks[spec.region] = self.networks.get(spec.region, 0) + 1
        return [ResourceRow(kind="security-group", id=f"sg-{spec.region}", region=spec.region)]

    def launch(self, spec, zone):
        self.launched.append(zone)
        if zone in self.script:
            raise self.script[zone]
        return InstanceRow(id=f"i-{zone}", provider="aws", region=spec.region, zone=zone,
                           instance_type=spec.instance_type, state="pending")

    def find(self, deployment, region):
        return [InstanceRow(id=f"i-{z}", provider="aws", region=region, zone=z,
                            instance_type="g6e.2xlarge", state="running")
                for z in self.launched if z not in self.script and z.startswith(region)]

    def terminate(self, deployment, region):
        self.terminated.append(region)
        return [f"sg-{region}"]


def _cap(zone):
    return CloudError("aws", "InsufficientInstanceCapacity", f"none in {zone}", "zone")


def test_failover_order_zone_then_region(tmp_path):
    p = Scripted({"us-east-1": ["us-east-1a", "us-east-1b"], "us-west-2": ["us-west-2a"]},
                 {"us-east-1a": _cap("a"), "us-east-1b": _cap("b")})
    res = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name="order",
                    regions=["us-east-1", "us-west-2"], backends={"aws": p},
                    store=Store(tmp_path / "s.db"))
    assert p.launched == ["us-east-1a", "us-east-1b", "us-west-2a"]
    assert [a.outcome for a in res.attempts] == ["capacity", "capacity", "launched"]
    assert p.terminated == ["us-east-1"]  # the empty region's firewall was removed


def test_a_region_whose_cleanup_failed_stays_in_the_state_for_down(tmp_path):
    """Region A's attempt fails and so does removing its firewall; region B's attempt fails and
    its firewall is removed; C launches. The state must still list A's firewall (``down``
    deletes what the state lists) and no longer B's: forgetting is per region, not the whole
    deployment's."""

    class StickyEast(Scripted):
        def terminate(self, deployment, region):
            if region == "us-east-1":
                raise CloudError("aws", "DependencyViolation", "sg in use", "region")
            return super().terminate(deployment, region)

    p = StickyEast({"us-east-1": ["us-east-1a"], "us-east-2": ["us-east-2a"],
                    "us-west-2": ["us-west-2a"]},
                   {"us-east-1a": _cap("a"), "us-east-2a": _cap("b")})
    store = Store(tmp_path / "s.db")
    res = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name="sticky",
                    regions=["us-east-1", "us-east-2", "us-west-2"], backends={"aws": p},
                    store=store)
    assert [a.outcome for a in res.attempts] == ["capacity", "capacity", "launched"]
    assert p.terminated == ["us-east-2"]
    assert sorted(r.id for r in store.require("sticky").resources) == ["sg-us-east-1",
                                                                       "sg-us-west-2"]
    assert any(e.kind == "cleanup-failed" and "us-east-1" in e.message
               for e in store.events("sticky"))


def test_denied_provider_is_not_asked_again(tmp_path):
    denied = CloudError("aws", "UnauthorizedOperation", "no", "provider")
    p = Scripted({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]},
                 {"us-east-1a": denied})
    with pytest.raises(OperationError, match="denied"):
        provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                  instance="aws:g6e.2xlarge", name="denied",
                  regions=["us-east-1", "us-west-2"], backends={"aws": p},
                  store=Store(tmp_path / "s.db"))
    assert p.launched == ["us-east-1a"]


def test_malformed_request_stops_at_once(tmp_path):
    bad = CloudError("aws", "InvalidParameterCombination", "no", "fatal")
    p = Scripted({"us-east-1": ["us-east-1a", "us-east-1b"]}, {"us-east-1a": bad})
    store = Store(tmp_path / "s.db")
    with pytest.raises(CloudError, match="InvalidParameterCombination"):
        provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                  instance="aws:g6e.2xlarge", name="fatal",
                  backends={"aws": p}, store=store)
    assert p.launched == ["us-east-1a"] and p.terminated == ["us-east-1"]
    assert store.require("fatal").status == "failed"


def test_not_confirmed_launches_nothing(tmp_path):
    p = Scripted({"us-east-1": ["us-east-1a"]}, {})
    seen: list[str] = []

    def no(summary: str) -> bool:
        seen.append(summary)
        return False

    with pytest.raises(UserInputError, match="not confirmed"):
        provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                  instance="aws:g6e.2xlarge", name="asked", confirm=no,
                  backends={"aws": p}, store=Store(tmp_path / "s.db"))
    assert p.launched == [] and p.networks == {}
    assert "g6e.2xlarge" in seen[0] and "$" in seen[0]


def test_sdk_provision_checks_refs_image_and_options_before_anything():
    """The SDK path refuses what the CLI refuses (issue 18): another cloud's secret reference
    for a named instance, an image no cloud names, a provider option that is unknown or does
    not match its pattern — before any call (dry run or not)."""
    import pytest

    from advisor.errors import UserInputError
    from advisor.provisioning import provision

    base = {"instance": "aws:g6e.2xlarge", "dry_run": True,
            "hf_token_ref": "aws-ssm:/advisor/hf-token"}
    with pytest.raises(UserInputError, match="gcp's secret store, but the deployment goes to aws"):
        provision("llama-3-8b", 8192, **{**base, "api_key_ref": "gcp-secret:k"})
    with pytest.raises(UserInputError, match="--image"):
        provision("llama-3-8b", 8192, image="$(reboot)", **base)
    with pytest.raises(UserInputError, match="has no provider option 'colour'"):
        provision("llama-3-8b", 8192, provider_options={"aws": {"colour": "red"}}, **base)
    with pytest.raises(UserInputError, match="is not valid"):
        provision("llama-3-8b", 8192, provider_options={"gcp": {"project": "Bad Project!"}},
                  **base)


class _CtrlC(Scripted):
    """The launch call returns to a process the user just interrupted."""

    def launch(self, spec, zone):
        self.launched.append(zone)
        raise KeyboardInterrupt


def test_ctrl_c_during_the_launch_keeps_the_record_and_names_the_deployment(tmp_path):
    from advisor.provisioning import Interrupted

    p = _CtrlC({"us-east-1": ["us-east-1a"]}, {})
    store = Store(tmp_path / "s.db")
    with pytest.raises(Interrupted) as exc:
        provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                  instance="aws:g6e.2xlarge", name="ctrlc", regions=["us-east-1"],
                  backends={"aws": p}, store=store)
    assert exc.value.name == "ctrlc" and isinstance(exc.value, KeyboardInterrupt)
    dep = store.get("ctrlc")
    assert dep is not None  # status --reconcile and down find it from here
    assert any(e.kind == "interrupted" for e in store.events("ctrlc"))
    # the intent came first: the region the launch went to is on record for down
    assert any(e.data.get("region") == "us-east-1" for e in store.events("ctrlc"))


def test_the_cli_says_how_to_find_an_interrupted_launch(monkeypatch):
    from typer.testing import CliRunner

    import advisor.provisioning as prov
    from advisor.cli import app

    def interrupted(*a, **k):
        raise prov.Interrupted("ctrlc")

    monkeypatch.setattr(prov, "provision", interrupted)
    res = CliRunner().invoke(app, ["provision", "--model", "llama-3-8b", "--ctx", "8192",
                                   "--hf-token-ref", "aws-ssm:/advisor/hf-token", "--yes"])
    assert res.exit_code == 130
    assert "interrupted while launching ctrlc" in res.output
    assert "advisor down ctrlc" in res.output
