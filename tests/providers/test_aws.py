"""AWS provisioning against moto's server on 127.0.0.1: the installed CLI end to end, failover on
injected capacity and quota errors (real EC2 error bodies through a botocore event hook), the
quota pre-check, idempotency, and a crash between the launch call and the state write."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import yaml

from advisor.clouds.aws.compute import AwsProvider, sg_name
from advisor.provisioning import down, provision
from advisor.state import Store
from tests.providers.conftest import answer, ec2_error

ADVISOR = shutil.which("advisor", path=str(Path(sys.executable).parent)) or shutil.which("advisor")
#: every Llama alias is a gated repository: a provision names where the token is read
TOKEN = ("--hf-token-ref", "aws-ssm:/advisor/hf-token")
NAME = "llama-g6e"
CAPACITY_MSG = ("We currently do not have sufficient g6e.2xlarge capacity in the Availability "
                "Zone you requested (us-east-1a). Our system will be working on provisioning "
                "additional capacity. You can currently get g6e.2xlarge capacity by not "
                "specifying an Availability Zone in your request or choosing us-east-1b, "
                "us-east-1c, us-east-1d.")
VCPU_MSG = ("You have requested more vCPU capacity than your current vCPU limit of 0 allows for "
            "the instance bucket that the specified instance type belongs to. Please visit "
            "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this "
            "limit.")


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert ADVISOR, "the advisor console script is not installed"
    full = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    full.update(env)
    return subprocess.run([ADVISOR, *args], capture_output=True, text=True, timeout=180,
                          env=full, stdin=subprocess.DEVNULL, check=False)


def user_data_text(b64: str) -> str:
    """The user-data an instance holds, as text: the launch sends it gzip-compressed (AWS's
    16 KB limit counts the compressed bytes), cloud-init inflates it."""
    import gzip

    raw = base64.b64decode(b64)
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


def ec2(region: str = "us-east-1"):
    import boto3

    return boto3.client("ec2", region_name=region)


def by_tag(client, name: str, states=("pending", "running", "stopping", "stopped")):
    r = client.describe_instances(Filters=[
        {"Name": "tag:advisor-deployment", "Values": [name]},
        {"Name": "instance-state-name", "Values": list(states)}])
    return [i for res in r["Reservations"] for i in res["Instances"]]


def test_provision_status_down_end_to_end(aws):
    r = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN,
            "--ctx", "8192", "--instance",
            "aws:g6e.2xlarge", "--name", NAME, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "launched" and res["instance_type"] == "g6e.2xlarge"
    client = ec2()
    [inst] = by_tag(client, NAME)
    assert inst["InstanceId"] == res["instances"][0]["id"]
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags["advisor-deployment"] == NAME and tags["advisor-version"] == "0-1-0"
    assert inst["MetadataOptions"]["HttpTokens"] == "required"
    assert inst["IamInstanceProfile"]["Arn"].endswith(f"instance-profile/advisor-{NAME}")

    # the user-data on the instance is the cloud-config advisor rendered, byte for byte
    ud = client.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
    text = user_data_text(ud["UserData"]["Value"])
    dry = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name=NAME, dry_run=True)
    assert text == dry.user_data
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert doc["runcmd"] == [["/opt/advisor/bin/advisor-install.sh", "3.10", "vllm@0.service"]]
    env = next(f for f in doc["write_files"] if f["path"] == "/etc/advisor/vllm-0.env")
    assert "ADVISOR_HF_TOKEN_REF=aws-ssm:/advisor/hf-token" in env["content"]
    # the key is fetched at boot, never in user data (only the fetch and a dry-run placeholder)
    assert re.search(r'VLLM_API_KEY=(?!<from|"\$\(read_secret )', text) is None

    # the root volume is sized for the weights and the venv, and encrypted
    vols = client.describe_volumes(Filters=[{"Name": "attachment.instance-id",
                                             "Values": [inst["InstanceId"]]}])["Volumes"]
    assert vols and vols[0]["Size"] >= 100 and vols[0]["Encrypted"] is True

    # the security group opens nothing to the world (nothing at all, by default)
    [sg] = client.describe_security_groups(GroupNames=[sg_name(NAME)])["SecurityGroups"]
    assert sg["GroupId"] in {g["GroupId"] for g in inst["SecurityGroups"]}
    assert sg["IpPermissions"] == []

    # provision again with the same name: nothing new
    r2 = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN,
             "--ctx", "8192", "--instance",
             "aws:g6e.2xlarge", "--name", NAME, "--yes", "--json")
    assert r2.returncode == 0, r2.stderr
    assert json.loads(r2.stdout)["status"] == "exists"
    assert len(by_tag(client, NAME)) == 1

    st = cli(aws, "status", NAME, "--json")
    assert st.returncode == 0, st.stderr
    body = json.loads(st.stdout)
    assert body["status"] == "running" and body["instances"][0]["id"] == inst["InstanceId"]
    kinds = [e["kind"] for e in body["events"]]
    assert kinds.index("intent") < kinds.index("instance")  # intent written before the result

    d = cli(aws, "down", NAME, "--yes", "--json")
    assert d.returncode == 0, d.stderr
    assert inst["InstanceId"] in json.loads(d.stdout)["removed"]
    assert by_tag(client, NAME) == []
    assert [i["State"]["Name"] for i in by_tag(client, NAME, ("terminated",))] == ["terminated"]
    left = client.describe_security_groups(Filters=[{"Name": "group-name",
                                                     "Values": [sg_name(NAME)]}])
    assert left["SecurityGroups"] == []
    import boto3

    roles = boto3.client("iam").list_roles()["Roles"]
    assert f"advisor-{NAME}" not in {x["RoleName"] for x in roles}
    assert json.loads(cli(aws, "status", NAME, "--json").stdout)["status"] == "down"


def test_allow_cidr_opens_only_that_range(aws):
    r = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN,
            "--ctx", "8192", "--instance",
            "aws:g6e.2xlarge", "--name", "open-one", "--allow-cidr", "203.0.113.0/24", "--yes",
            "--json")
    assert r.returncode == 0, r.stderr
    [sg] = ec2().describe_security_groups(GroupNames=[sg_name("open-one")])["SecurityGroups"]
    ranges = [(p["FromPort"], p["ToPort"], x["CidrIp"]) for p in sg["IpPermissions"]
              for x in p["IpRanges"]]
    assert ranges == [(8000, 8000, "203.0.113.0/24")]
    assert cli(aws, "down", "open-one", "--yes").returncode == 0


def test_bad_input_launches_nothing(aws):
    for args, needle in (
        (["--name", "x; rm -rf ~"], "deployment name"),
        (["--allow-cidr", "the-world"], "not an IP range"),
        (["--provider", "ibm"], "unknown cloud provider"),
        (["--instance", "aws:g6e.xlargee"], "did you mean"),
    ):
        r = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN,
                "--ctx", "8192", "--yes", *args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr
    # no --yes and no terminal: asks nobody, launches nothing
    r = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN,
            "--ctx", "8192", "--instance",
            "aws:g6e.2xlarge", "--name", "unasked")
    assert r.returncode == 2 and "--yes" in r.stderr
    assert by_tag(ec2(), "unasked") == []
    assert ec2().describe_security_groups(Filters=[{"Name": "group-name", "Values": [
        sg_name("unasked")]}])["SecurityGroups"] == []


def test_dry_run_calls_nothing_and_imports_no_sdk(tmp_path):
    code = ("import sys, json; import advisor.provisioning as p; "
            "r = p.provision('llama-3-8b', 8192, hf_token_ref='aws-ssm:/advisor/hf-token', "
            "instance='aws:g6e.2xlarge', name='dry', "
            "dry_run=True); print(json.dumps(r.model_dump())); "
            "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ADVISOR_"))}
    env.update({"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "ADVISOR_HOME": str(tmp_path)})
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    calls = [c["call"] for c in res["requests"][0]["calls"]]
    assert calls[0] == "ec2.CreateSecurityGroup" and calls[-1] == "ec2.RunInstances"
    run = res["requests"][0]["calls"][-1]["body"]
    assert run["MetadataOptions"]["HttpTokens"] == "required"
    assert run["UserData"] == res["user_data"]
    assert not (tmp_path / "state.db").exists()  # not even the state file was touched


def _provider_with(region_hooks: dict[str, dict[str, object]]) -> AwsProvider:
    prov = AwsProvider(sleep=lambda _s: None, waiter_delay=0)
    for (region, service), hooks in ((k.split("/"), v) for k, v in region_hooks.items()):
        for event, handler in hooks.items():
            prov._client(service, region).meta.events.register(event, handler)
    return prov


def _zone_of(request) -> str | None:
    body = request.body.decode() if isinstance(request.body, bytes) else request.body or ""
    return parse_qs(body).get("Placement.AvailabilityZone", [None])[0]


def test_capacity_error_moves_to_the_next_zone(aws, tmp_path):
    calls: list[str | None] = []
    capacity = answer(500, ec2_error("InsufficientInstanceCapacity", CAPACITY_MSG, 500))

    def run_instances(request, **_):
        calls.append(_zone_of(request))
        return capacity(request) if _zone_of(request) == "us-east-1a" else None

    prov = _provider_with({"us-east-1/ec2": {"before-send.ec2.RunInstances": run_instances}})
    store = Store(tmp_path / "s.db")
    res = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name="fail-over",
                    backends={"aws": prov}, store=store)
    assert res.status == "launched" and res.zone == "us-east-1b"
    first = res.attempts[0]
    assert (first.zone, first.outcome, first.code) == ("us-east-1a", "capacity",
                                                       "InsufficientInstanceCapacity")
    assert "us-east-1a" in calls and calls[-1] == "us-east-1b"
    assert [i["Placement"]["AvailabilityZone"] for i in by_tag(ec2(), "fail-over")] == [
        "us-east-1b"]
    events = [e.kind for e in store.events("fail-over")]
    assert events.count("intent") == 2 and "attempt" in events


def test_quota_error_skips_the_region_and_cleans_it_up(aws, tmp_path):
    quota = answer(400, ec2_error("VcpuLimitExceeded", VCPU_MSG, 400))
    tried: list[str | None] = []

    def refuse(request, **_):
        tried.append(_zone_of(request))
        return quota(request)

    prov = _provider_with({"us-east-1/ec2": {"before-send.ec2.RunInstances": refuse}})
    res = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name="quota-skip",
                    regions=["us-east-1", "us-west-2"], backends={"aws": prov},
                    store=Store(tmp_path / "s.db"))
    assert res.region == "us-west-2" and res.status == "launched"
    assert tried == ["us-east-1a"]  # one refusal is enough to leave the region
    assert [(a.region, a.outcome, a.code) for a in res.attempts][0] == (
        "us-east-1", "quota", "VcpuLimitExceeded")
    assert by_tag(ec2("us-east-1"), "quota-skip") == []
    assert len(by_tag(ec2("us-west-2"), "quota-skip")) == 1
    # the security group made for us-east-1 did not stay behind
    assert ec2("us-east-1").describe_security_groups(Filters=[
        {"Name": "group-name", "Values": [sg_name("quota-skip")]}])["SecurityGroups"] == []


def test_quota_check_skips_a_region_before_launching(aws, tmp_path):
    launched: list[str] = []
    quota = {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA", "Value": 0.0,
                       "QuotaName": "Running On-Demand G and VT instances", "Unit": "None"}}
    prov = _provider_with({
        "us-east-1/service-quotas": {"before-send.service-quotas.GetServiceQuota": answer(
            200, json.dumps(quota).encode(), "application/x-amz-json-1.1")},
        "us-east-1/ec2": {"before-send.ec2.RunInstances": lambda request, **_: launched.append(
            "us-east-1")},
    })
    res = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:g6e.2xlarge", name="quota-check",
                    regions=["us-east-1", "us-west-2"], backends={"aws": prov},
                    store=Store(tmp_path / "s.db"))
    assert launched == [] and res.region == "us-west-2"
    a = res.attempts[0]
    assert (a.region, a.outcome, a.code) == ("us-east-1", "quota", "QuotaCheck")
    assert "allows 0 vCPUs" in a.detail


def test_every_zone_full_fails_cleanly(aws, tmp_path):
    capacity = answer(500, ec2_error("InsufficientInstanceCapacity", CAPACITY_MSG, 500))
    prov = _provider_with({"us-east-1/ec2": {"before-send.ec2.RunInstances": capacity}})
    store = Store(tmp_path / "s.db")
    from advisor.errors import OperationError

    with pytest.raises(OperationError, match="no candidate could be launched"):
        provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                  instance="aws:g6e.2xlarge", name="all-full",
                  backends={"aws": prov}, store=store)
    assert store.require("all-full").status == "failed"
    assert by_tag(ec2(), "all-full") == []
    assert ec2().describe_security_groups(Filters=[{"Name": "group-name", "Values": [
        sg_name("all-full")]}])["SecurityGroups"] == []


def test_crash_after_launch_is_found_by_reconcile(aws, monkeypatch):
    """The process dies after RunInstances answered and before the instance reached the state
    file; `status --reconcile` finds it by its tag."""
    store = Store()  # ADVISOR_HOME from the fixture: the same file the CLI will read

    class Killed(BaseException):
        pass

    def die(self, *a, **k):
        raise Killed()

    with monkeypatch.context() as m, pytest.raises(Killed):
        m.setattr(Store, "record_instance", die)
        provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                  instance="aws:g6e.2xlarge", name="crashed", store=store,
                  backends={"aws": AwsProvider(sleep=lambda _s: None)})
    dep = store.require("crashed")
    assert dep.status == "launching" and dep.instances == []
    assert len(by_tag(ec2(), "crashed")) == 1  # the instance exists, the state does not know

    r = cli(aws, "status", "crashed", "--reconcile", "--json")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["status"] == "running"
    assert [i["id"] for i in body["instances"]] == [by_tag(ec2(), "crashed")[0]["InstanceId"]]
    assert cli(aws, "down", "crashed", "--yes").returncode == 0
    assert by_tag(ec2(), "crashed") == []


def test_wait_until_running(aws):
    r = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN,
            "--ctx", "8192", "--instance",
            "aws:g6e.2xlarge", "--name", "waited", "--yes", "--wait", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["instances"][0]["state"] == "running"
    assert "127.0.0.1" in res["health"]  # closed to the outside: checked on the host itself
    assert cli(aws, "down", "waited", "--yes").returncode == 0


def test_no_credentials_is_one_line_and_launches_nothing(aws, tmp_path):
    env = {**aws, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
           "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    r = cli(env, "provision", "--model", "llama-3-8b", *TOKEN,
            "--ctx", "8192", "--instance",
            "aws:g6e.2xlarge", "--name", "nocreds", "--yes")
    # issue 27: the preflight stops it before anything is made; the user's to fix: exit 2
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    [check] = [x for x in lines if x.startswith("preflight failed:")]
    assert "credentials: no usable AWS credentials (NoCredentials)" in check
    assert "fix: configure AWS credentials" in check
    assert lines[-1].startswith("error: preflight: 1 check(s) failed, nothing was created")
    assert "Traceback" not in r.stderr
    assert by_tag(ec2(), "nocreds") == []


def test_hostile_region_is_refused(aws):
    r = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN,
            "--ctx", "8192", "--instance",
            "aws:g6e.2xlarge", "--region", "us-east-1; rm -rf /", "--yes")
    assert r.returncode == 2 and "is not a region name" in r.stderr


def test_a_foreign_role_of_the_same_name_is_not_taken_over(aws, tmp_path):
    import boto3

    iam = boto3.client("iam")
    iam.create_role(RoleName="advisor-taken", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": []}))
    from advisor.clouds.base import CloudError

    with pytest.raises(CloudError, match="did not create"):
        provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                  instance="aws:g6e.2xlarge", name="taken",
                  backends={"aws": AwsProvider(sleep=lambda _s: None)},
                  store=Store(tmp_path / "s.db"))
    assert iam.list_role_policies(RoleName="advisor-taken")["PolicyNames"] == []
    assert by_tag(ec2(), "taken") == []
    assert ec2().describe_security_groups(Filters=[{"Name": "group-name", "Values": [
        sg_name("taken")]}])["SecurityGroups"] == []


PG_XML = ('<?xml version="1.0" encoding="UTF-8"?><{op}Response xmlns="http://ec2.amazonaws.com/'
          'doc/2016-11-15/"><requestId>5c1e0a0e-advisor-test</requestId>{body}</{op}Response>')


def test_multi_node_group_in_one_placement_group_over_efa(aws, tmp_path):
    """405B over two p5.48xlarge: the head first, then the worker with the head's address, both
    in the deployment's cluster placement group on an EFA interface; down removes all of it.
    moto has no placement groups, so their three calls are answered in EC2's own XML."""
    made: list[dict] = []
    deleted: list[str] = []
    runs: list[dict] = []

    def create(request, **_):
        made.append(parse_qs(request.body.decode() if isinstance(request.body, bytes)
                             else request.body))
        return answer(200, PG_XML.format(op="CreatePlacementGroup", body=(
            "<placementGroup><groupName>advisor-big</groupName><strategy>cluster</strategy>"
            "<state>available</state></placementGroup>")).encode())(request)

    def describe(request, **_):
        groups = "".join(
            "<item><groupName>advisor-big</groupName><strategy>cluster</strategy><state>"
            "available</state><tagSet><item><key>advisor-deployment</key><value>big</value>"
            "</item></tagSet></item>" for _ in made if not deleted)
        return answer(200, PG_XML.format(op="DescribePlacementGroups", body=(
            f"<placementGroupSet>{groups}</placementGroupSet>")).encode())(request)

    def delete(request, **_):
        deleted.append("advisor-big")
        return answer(200, PG_XML.format(op="DeletePlacementGroup",
                                         body="<return>true</return>").encode())(request)

    def run(request, **_):
        runs.append(parse_qs(request.body.decode() if isinstance(request.body, bytes)
                             else request.body))

    prov = _provider_with({"us-east-1/ec2": {
        "before-send.ec2.CreatePlacementGroup": create,
        "before-send.ec2.DescribePlacementGroups": describe,
        "before-send.ec2.DeletePlacementGroup": delete,
        "before-send.ec2.RunInstances": run}})
    store = Store(tmp_path / "s.db")
    res = provision("llama-3.1-405b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                    instance="aws:p5.48xlarge", name="big",
                    backends={"aws": prov}, store=store)
    assert res.nodes == 2 and len(res.instances) == 2
    head, worker = res.instances
    assert head.zone == worker.zone and head.private_ip
    assert made and made[0]["Strategy"] == ["cluster"] and made[0]["GroupName"] == ["advisor-big"]
    for body in runs:
        assert body["Placement.GroupName"] == ["advisor-big"]
        assert body["NetworkInterface.1.InterfaceType"] == ["efa"]
        assert "SecurityGroupId.1" not in body  # the group sits on the EFA interface instead
    client = ec2()
    roles = {}
    for i in by_tag(client, "big"):
        tags = {t["Key"]: t["Value"] for t in i["Tags"]}
        ud = client.describe_instance_attribute(InstanceId=i["InstanceId"],
                                                Attribute="userData")["UserData"]["Value"]
        doc = yaml.safe_load(user_data_text(ud))
        files = {f["path"]: f["content"] for f in doc["write_files"]}
        roles[tags["advisor-role"]] = (tags["Name"], files)
    assert roles["head"][0] == "big" and roles["worker"][0] == "big-w1"
    assert roles["worker"][1]["/etc/advisor/ray-head"] == f"{head.private_ip}\n"
    assert "/etc/advisor/ray-head" not in roles["head"][1]
    assert "ADVISOR_ROLE=head" in roles["head"][1]["/etc/advisor/vllm-0.env"]
    [sg] = client.describe_security_groups(GroupNames=[sg_name("big")])["SecurityGroups"]
    self_rule = [p for p in sg["IpPermissions"] if p.get("UserIdGroupPairs")]
    assert self_rule and self_rule[0]["UserIdGroupPairs"][0]["GroupId"] == sg["GroupId"]
    assert all(not p.get("IpRanges") for p in sg["IpPermissions"])  # still nothing from outside

    gone = down("big", backends={"aws": prov}, store=store)
    assert {head.id, worker.id, "placement-group:advisor-big"} <= set(gone.removed)
    assert deleted == ["advisor-big"] and by_tag(client, "big") == []


def test_every_provider_shares_the_process_botocore_loader(aws):
    """A sweep or a retry makes new providers; each new boto3 session would parse the service
    models again (~40 ms a client for ec2), so every session takes the process's one loader."""
    from advisor.clouds.aws.compute import AwsProvider

    a, b = AwsProvider(), AwsProvider()
    a._client("ec2", "us-east-1")
    b._client("ec2", "us-west-2")
    assert a._session is not b._session
    assert (a._session._session.get_component("data_loader")
            is b._session._session.get_component("data_loader"))
