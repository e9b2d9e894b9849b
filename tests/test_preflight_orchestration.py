"""Issue 27 item 6, the cloud-independent half: provision() runs a provider's preflight before
anything is made, and a failed check maps to what it blocks. The decisions are pinned here:
changing a scope, or which refusal exits 2, breaks a test."""

from __future__ import annotations

import pytest

from advisor.clouds.base import PreflightCheck
from advisor.errors import OperationError, UserInputError
from advisor.provisioning import (
    PREFLIGHT_SCOPES,
    PreflightRefused,
    preflight_scope,
    provision,
)
from advisor.state import Store
from tests.test_provisioning import Scripted, _cap

TOKEN = "aws-ssm:/advisor/hf-token"


class Checked(Scripted):
    """A scripted provider with a preflight: the failing checks per region."""

    def __init__(self, zones, script, failing: dict[str, list[PreflightCheck]]) -> None:
        super().__init__(zones, script)
        self.failing = failing
        self.asked: list[str] = []
        self.quota_asked: list[str] = []

    def check_quota(self, spec):
        self.quota_asked.append(spec.region)
        return super().check_quota(spec)

    def preflight(self, spec):
        self.asked.append(spec.region)
        return [PreflightCheck(name="credentials", ok=True, detail="fine"),
                PreflightCheck(name="quota", ok=None, detail="not readable"),
                *self.failing.get(spec.region, [])]

    def preflight_plan(self, spec):
        return [PreflightCheck(name="credentials", ok=None, detail="would ask STS")]


def _run(p, tmp_path, regions=("us-east-1", "us-west-2"), name="pre"):
    return provision("llama-3-8b", 8192, hf_token_ref=TOKEN, instance="aws:g6e.2xlarge",
                     name=name, regions=list(regions), backends={"aws": p},
                     store=Store(tmp_path / "s.db"))


def fail(name: str, scope=None) -> PreflightCheck:
    return PreflightCheck(name=name, ok=False, detail=f"{name} is wrong", fix=f"fix {name}",
                          scope=scope)


def test_the_scopes_of_failed_checks_are_pinned():
    assert PREFLIGHT_SCOPES == {
        "credentials": "provider", "secret": "provider", "secret-access": "provider",
        "quota": "region", "image": "region", "egress": "region", "driver": "region"}
    assert preflight_scope(fail("secret")) == "provider"
    assert preflight_scope(fail("secret", scope="region")) == "region"  # a cloud's own word
    assert preflight_scope(fail("something new")) == "fatal"  # unknown: stop, say it


@pytest.mark.parametrize("check", ["egress", "image", "quota"])
def test_a_region_refusal_moves_to_the_next_region_and_makes_nothing_there(tmp_path, check):
    p = Checked({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]}, {},
                {"us-east-1": [fail(check)]})
    res = _run(p, tmp_path)
    assert res.status == "launched" and res.region == "us-west-2"
    assert p.networks == {"us-west-2": 1}  # no firewall was made in the refused region
    assert p.launched == ["us-west-2a"]
    a = res.attempts[0]
    expected = ("quota", "QuotaCheck") if check == "quota" else ("refused", f"preflight:{check}")
    assert (a.region, a.outcome, a.code) == ("us-east-1", *expected)
    assert [c["region"] for c in res.preflight] == ["us-east-1", "us-west-2"]
    # the preflight read the quota (not readable here): the launch does not read it again
    assert p.quota_asked == []
    assert "aws us-west-2: quota not checked: not readable" in res.warnings


@pytest.mark.parametrize("check", ["credentials", "secret", "secret-access"])
def test_a_provider_refusal_skips_every_candidate_of_that_cloud(tmp_path, check):
    p = Checked({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]}, {},
                {"us-east-1": [fail(check)]})
    with pytest.raises(PreflightRefused) as err:
        _run(p, tmp_path)
    assert p.asked == ["us-east-1"] and p.networks == {} and p.launched == []
    assert err.value.exit_code == 2 and isinstance(err.value, UserInputError)
    assert [(w, c.name) for w, c in err.value.checks] == [("aws:g6e.2xlarge us-east-1", check)]
    assert err.value.hint == f"fix {check}"
    assert Store(tmp_path / "s.db").require("pre").status == "failed"


def test_an_unknown_check_stops_at_once(tmp_path):
    p = Checked({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]}, {},
                {"us-east-1": [fail("driver-of-the-future")]})
    with pytest.raises(PreflightRefused):
        _run(p, tmp_path)
    assert p.asked == ["us-east-1"] and p.networks == {}


def test_the_widest_scope_of_several_failures_wins(tmp_path):
    p = Checked({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]}, {},
                {"us-east-1": [fail("egress"), fail("credentials")]})
    with pytest.raises(PreflightRefused) as err:
        _run(p, tmp_path)
    assert p.asked == ["us-east-1"]  # credentials: the provider is done, us-west-2 not asked
    assert [c.name for _w, c in err.value.checks] == ["egress", "credentials"]


def test_refused_everywhere_is_exit_2_naming_each_check(tmp_path):
    p = Checked({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]}, {},
                {"us-east-1": [fail("egress")], "us-west-2": [fail("image")]})
    with pytest.raises(PreflightRefused) as err:
        _run(p, tmp_path)
    assert [(w, c.name) for w, c in err.value.checks] == [
        ("aws:g6e.2xlarge us-east-1", "egress"), ("aws:g6e.2xlarge us-west-2", "image")]
    assert "nothing was created" in err.value.message
    assert err.value.hint == "fix egress; fix image"
    assert p.networks == {} and p.launched == []


def test_a_refusal_besides_a_real_capacity_failure_stays_exit_1(tmp_path):
    """Only when every candidate was stopped by its preflight is it the user's to fix."""
    p = Checked({"us-east-1": ["us-east-1a"], "us-west-2": ["us-west-2a"]},
                {"us-west-2a": _cap("us-west-2a")}, {"us-east-1": [fail("egress")]})
    with pytest.raises(OperationError) as err:
        _run(p, tmp_path)
    assert not isinstance(err.value, PreflightRefused) and err.value.exit_code == 1
    assert "refused (preflight:egress)" in err.value.message


def test_a_passing_or_unknown_check_launches(tmp_path):
    p = Checked({"us-east-1": ["us-east-1a"]}, {}, {})
    res = _run(p, tmp_path, regions=("us-east-1",))
    assert res.status == "launched"
    [cand] = res.preflight
    assert [(c["name"], c["ok"]) for c in cand["checks"]] == [("credentials", True),
                                                              ("quota", None)]


def test_a_provider_without_preflight_is_launched_as_before(tmp_path):
    p = Scripted({"us-east-1": ["us-east-1a"]}, {})
    res = _run(p, tmp_path, regions=("us-east-1",))
    assert res.status == "launched" and res.preflight == []


def test_dry_run_lists_the_checks_per_candidate_and_calls_nothing(tmp_path):
    p = Checked({"us-east-1": ["us-east-1a"]}, {}, {})
    res = provision("llama-3-8b", 8192, hf_token_ref=TOKEN, instance="aws:g6e.2xlarge",
                    name="dry", regions=["us-east-1", "us-west-2"], backends={"aws": p},
                    dry_run=True)
    assert p.asked == [] and p.networks == {}
    assert [(c["region"], [x["name"] for x in c["checks"]]) for c in res.preflight] == [
        ("us-east-1", ["credentials"]), ("us-west-2", ["credentials"])]
