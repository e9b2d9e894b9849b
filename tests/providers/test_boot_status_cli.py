"""Issue 27 item 4 (status part) against moto's server on 127.0.0.1: ``advisor status`` reads
each running instance's boot report from its serial console, never fails for it, and exits 1
when a boot failed; ``advisor down`` tells "searched, nothing there" from "could not ask".

moto's own console is a canned kernel log without a report; the real console path is answered
at the HTTP level with EC2's own GetConsoleOutput XML (base64, as EC2 sends it)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from advisor.state import Store
from tests.test_boot_status import CONSOLES


def _cli(*args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from advisor.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _launch(name: str) -> str:
    from advisor.clouds.aws.compute import AwsProvider
    from advisor.provisioning import provision

    res = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name=name,
                    backends={"aws": AwsProvider(sleep=lambda _s: None)})
    return res.instances[0].id


def test_status_of_a_fresh_instance_says_no_report_yet(aws, capsys):
    """moto's GetConsoleOutput answers a canned kernel log without any advisor-boot line."""
    iid = _launch("fresh")
    code, out, err = _cli("status", "fresh", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["status"] == "running" and body["instances"][0]["id"] == iid
    assert body["boot"] == "booting: no report yet"
    code, out, _err = _cli("status", "--no-boot", "--json")
    assert code == 0 and json.loads(out)[0]["boot"] is None


GET_CONSOLE = ('<?xml version="1.0" encoding="UTF-8"?><GetConsoleOutputResponse xmlns="http://'
               'ec2.amazonaws.com/doc/2016-11-15/"><requestId>6f1e0a0e-advisor-test</requestId>'
               '<instanceId>{iid}</instanceId><timestamp>2026-12-04T18:00:00.000Z</timestamp>'
               '<output>{b64}</output></GetConsoleOutputResponse>')


def _console_answers(monkeypatch, text: str, asked: list[dict[str, Any]]) -> None:
    """Every EC2 client the AWS provider makes answers GetConsoleOutput with ``text``, in
    EC2's XML and base64, as EC2 would: the provider's decoding path runs for real."""
    from urllib.parse import parse_qs

    from advisor.clouds.aws.compute import AwsProvider
    from tests.providers.conftest import answer

    real = AwsProvider._client

    def client(self: AwsProvider, service: str, region: str) -> Any:
        fresh = (service, region) not in self._clients
        c = real(self, service, region)
        if fresh and service == "ec2":
            def reply(request: Any, **_: Any) -> Any:
                body = request.body.decode() if isinstance(request.body, bytes) else request.body
                q = parse_qs(body)
                asked.append(q)
                b64 = base64.b64encode(text.encode()).decode()
                return answer(200, GET_CONSOLE.format(iid=q["InstanceId"][0], b64=b64)
                              .encode())(request)

            c.meta.events.register("before-send.ec2.GetConsoleOutput", reply)
        return c

    monkeypatch.setattr(AwsProvider, "_client", client)


def test_status_reads_a_failed_boot_from_the_console_and_exits_1(aws, monkeypatch):
    iid = _launch("broken")
    asked: list[dict[str, Any]] = []
    _console_answers(monkeypatch, "kernel: hello\n" + CONSOLES["failed"] + "\n", asked)
    code, out, err = _cli("status", "broken", "--json")
    assert code == 1, err
    body = json.loads(out)
    assert body["status"] == "running"  # the cloud's view: the instance is up (and billed)
    assert body["boot"].startswith("failed: install vllm (exit 1): ERROR: No matching")
    assert asked and asked[0]["InstanceId"] == [iid] and asked[0]["Latest"] == ["true"]
    code, out, err = _cli("status")
    assert code == 1
    assert "failed: install vllm" in out
    assert err.strip().splitlines()[-1].startswith("error: the boot failed on broken")


def test_status_of_a_serving_instance_exits_0(aws, monkeypatch):
    _launch("good")
    _console_answers(monkeypatch, CONSOLES["serving"], [])
    code, out, err = _cli("status", "good", "--json")
    assert code == 0, err
    assert json.loads(out)["boot"] == "serving"


def test_console_errors_make_status_say_unknown_not_fail(aws, monkeypatch):
    _launch("hidden")
    from advisor.clouds.aws.compute import AwsProvider
    from tests.providers.conftest import answer, ec2_error

    real = AwsProvider._client

    def client(self: AwsProvider, service: str, region: str) -> Any:
        c = real(self, service, region)
        c.meta.events.register("before-send.ec2.GetConsoleOutput", answer(
            403, ec2_error("UnauthorizedOperation", "You are not authorized", 403)))
        return c

    monkeypatch.setattr(AwsProvider, "_client", client)
    code, out, err = _cli("status", "hidden", "--json")
    assert code == 0, err
    assert json.loads(out)["boot"] == (
        "unknown (aws: UnauthorizedOperation: You are not authorized)")


# -- down: could not ask is not "none left" ----------------------------------------------------
def test_down_without_credentials_and_without_state_exits_1_naming_the_cloud(aws, tmp_path,
                                                                            monkeypatch):
    iid = _launch("orphan")
    for f in Path(aws["ADVISOR_HOME"]).glob("state.db*"):  # the state file is lost
        f.unlink()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "")
    code, out, err = _cli("down", "orphan", "--yes", "--provider", "aws")
    assert code == 1, (out, err)
    assert "none left" not in out
    [line] = [x for x in err.splitlines() if x.startswith("not searched:")]
    assert line.startswith("not searched: aws: ") and "region(s) not searched" in line
    assert "NoCredentials" in line
    assert err.strip().splitlines()[-1].startswith("error: orphan: could not search 1 place(s)")
    # the instance still runs, and down with credentials finds it by tag
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code, out, err = _cli("down", "orphan", "--yes", "--provider", "aws", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert iid in body["removed"] and body["complete"] is True and body["not_searched"] == []


def test_down_that_searched_and_found_nothing_exits_0(aws):
    code, out, err = _cli("down", "never-made", "--yes", "--provider", "aws")
    assert code == 0, err
    assert "never-made: down; removed nothing (none left)" in out


def test_down_result_says_whether_it_could_search_everywhere(aws, tmp_path, monkeypatch):
    from advisor.provisioning import down

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "")
    res = down("ghost", store=Store(tmp_path / "g.db"), provider="aws")
    assert res.complete is False and res.searched == []
    [miss] = res.not_searched
    assert miss.startswith("aws: ") and "NoCredentials" in miss
    assert res.model_dump()["complete"] is False


REGIONS_XML = ('<?xml version="1.0" encoding="UTF-8"?><DescribeRegionsResponse xmlns="http://'
               'ec2.amazonaws.com/doc/2016-11-15/"><requestId>7a1e0a0e-advisor-test</requestId>'
               '<regionInfo><item><regionName>af-south-1</regionName><regionEndpoint>'
               'ec2.af-south-1.amazonaws.com</regionEndpoint><optInStatus>{status}</optInStatus>'
               '</item></regionInfo></DescribeRegionsResponse>')


@pytest.mark.parametrize("opt_in", ["not-opted-in", "opted-in"])
def test_an_auth_failure_in_one_swept_region_does_not_stop_the_sweep(aws, tmp_path, opt_in):
    """EC2 answers AuthFailure in an opt-in region the account has not enabled, as it does to
    bad credentials. DescribeRegions tells them apart: a region that is off runs nothing
    (searched); an enabled one that refuses is named as not searched. Either way the sweep
    goes on: af-south-1 sorts first, and the instance runs in us-east-1."""
    from advisor.provisioning import down
    from tests.providers.conftest import answer, ec2_error
    from tests.providers.test_aws import _provider_with

    iid = _launch("swept")
    prov = _provider_with({
        "af-south-1/ec2": {"before-send.ec2.DescribeInstances": answer(401, ec2_error(
            "AuthFailure", "AWS was not able to validate the provided access credentials",
            401))},
        "us-east-1/ec2": {"before-send.ec2.DescribeRegions": answer(
            200, REGIONS_XML.format(status=opt_in).encode())}})
    res = down("swept", store=Store(tmp_path / "lost.db"), backends={"aws": prov},
               provider="aws")
    assert iid in res.removed and "aws:us-east-1" in res.searched
    if opt_in == "not-opted-in":
        assert res.complete and "aws:af-south-1" in res.searched
    else:
        assert not res.complete and "aws:af-south-1" not in res.searched
        [miss] = res.not_searched
        assert miss.startswith("aws:af-south-1: aws: AuthFailure")
