"""AWS preflight (issue 27 item 6) against moto's server on 127.0.0.1: every check passes on a
ready account; a missing secret, no way out of the default VPC, a missing image or instance
profile each stop the provision before anything is made (moto shows no security group, role or
instance), each as one line with its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from advisor.clouds.aws.compute import AwsProvider, sg_name
from advisor.clouds.aws.preflight import _subnet_egress, plan
from advisor.clouds.base import LaunchSpec
from advisor.provisioning import PreflightRefused, provision
from advisor.state import Store
from tests.providers.test_aws import ADVISOR, TOKEN, by_tag, cli, ec2

REF = "aws-ssm:/advisor/hf-token"


def spec(**kw) -> LaunchSpec:
    base = dict(deployment="pf", provider="aws", instance_type="g6e.2xlarge",
                region="us-east-1", gpu_model="L40S", gpu_count=1, vcpus=8, user_data="#x",
                disk_gib=100, ports=[8000], api_key_ref="aws-ssm:/advisor/vllm-api-key",
                hf_token_ref=REF)
    return LaunchSpec(**{**base, **kw})


def nothing_made(name: str, region: str = "us-east-1", iam_too: bool = True) -> None:
    import boto3

    assert by_tag(ec2(region), name) == []
    assert ec2(region).describe_security_groups(Filters=[
        {"Name": "group-name", "Values": [sg_name(name)]}])["SecurityGroups"] == []
    if not iam_too:
        return
    iam = boto3.client("iam")
    assert f"advisor-{name}" not in {r["RoleName"] for r in iam.list_roles()["Roles"]}
    assert f"advisor-{name}" not in {p["InstanceProfileName"] for p in
                                     iam.list_instance_profiles()["InstanceProfiles"]}


def _provision(tmp_path, name, **kw):
    return provision("llama-3-8b", 8192, hf_token_ref=REF, instance="aws:g6e.2xlarge",
                     name=name, store=Store(tmp_path / "s.db"),
                     backends={"aws": AwsProvider(sleep=lambda _s: None)}, **kw)


def test_every_check_passes_on_a_ready_account(aws):
    checks = AwsProvider().preflight(spec())
    got = [(c.name, c.ok) for c in checks]
    assert got == [("credentials", True), ("secret", True), ("secret-access", True),
                   ("secret", True), ("secret-access", True),
                   ("quota", None),  # moto answers no Service Quotas: said, not a refusal
                   ("image", True), ("egress", True)]
    by = {c.name: c for c in checks}
    assert "account 123456789012" in by["credentials"].detail
    assert ("arn:aws:ssm:us-east-1:123456789012:parameter/advisor/hf-token"
            in checks[4].detail)
    assert by["image"].detail.startswith("ami-")
    # the plan names the same checks in the same order, without a call
    assert [c.name for c in plan(spec())] == [c.name for c in checks]
    assert all(c.ok is None for c in plan(spec()))


def test_a_missing_secret_stops_the_region_and_makes_nothing(aws, tmp_path):
    import boto3

    boto3.client("ssm", region_name="us-east-1").delete_parameter(Name="/advisor/hf-token")
    with pytest.raises(PreflightRefused) as err:
        _provision(tmp_path, "nosecret")
    [(where, check)] = err.value.checks
    assert where == "aws:g6e.2xlarge us-east-1" and check.name == "secret"
    assert check.detail == f"{REF}: no SSM parameter /advisor/hf-token in us-east-1"
    assert check.fix.startswith("aws ssm put-parameter --region us-east-1 --name "
                                "/advisor/hf-token --type SecureString")
    nothing_made("nosecret")


def test_ssm_parameters_are_regional_so_the_next_region_is_tried(aws, tmp_path):
    """An AWS secret check is region-scoped (its own ``scope``): the parameter may exist in
    the next region, where the instance would read its own region's parameter."""
    import boto3

    boto3.client("ssm", region_name="us-east-1").delete_parameter(Name="/advisor/hf-token")
    res = _provision(tmp_path, "regional", regions=["us-east-1", "us-west-2"])
    assert res.region == "us-west-2" and res.status == "launched"
    a = res.attempts[0]
    assert (a.region, a.outcome, a.code) == ("us-east-1", "refused", "preflight:secret")
    nothing_made("regional", "us-east-1", iam_too=False)  # IAM is global: us-west-2's role


def test_no_route_out_of_the_default_vpc_is_refused_with_the_fix(aws, tmp_path):
    client = ec2()
    vpc = client.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    main = client.describe_route_tables(Filters=[
        {"Name": "vpc-id", "Values": [vpc["VpcId"]]},
        {"Name": "association.main", "Values": ["true"]}])["RouteTables"][0]
    client.delete_route(RouteTableId=main["RouteTableId"], DestinationCidrBlock="0.0.0.0/0")
    with pytest.raises(PreflightRefused) as err:
        _provision(tmp_path, "closed")
    [(_w, check)] = err.value.checks
    assert check.name == "egress" and "no way out to the internet" in check.detail
    assert f"aws ec2 create-route --route-table-id {main['RouteTableId']}" in check.fix
    nothing_made("closed")


def test_no_public_address_behind_an_internet_gateway_is_refused(aws):
    client = ec2()
    subnets = client.describe_subnets(Filters=[{"Name": "default-for-az",
                                                "Values": ["true"]}])["Subnets"]
    for s in subnets:
        client.modify_subnet_attribute(SubnetId=s["SubnetId"],
                                       MapPublicIpOnLaunch={"Value": False})
    [egress] = [c for c in AwsProvider().preflight(spec()) if c.name == "egress"]
    assert egress.ok is False and "--map-public-ip-on-launch" in (egress.fix or "")
    # an EFA group asks for a public address itself: the same subnets then do
    [efa] = [c for c in AwsProvider().preflight(spec(nodes=2, fabric="efa"))
             if c.name == "egress"]
    assert efa.ok is True


@pytest.mark.parametrize(("route", "public", "want"), [
    ({"GatewayId": "igw-1"}, True, True),
    ({"GatewayId": "igw-1"}, False, False),
    ({"NatGatewayId": "nat-1"}, False, True),
    ({"TransitGatewayId": "tgw-1"}, False, None),  # another hop: could not be judged
    (None, True, False),
])
def test_egress_decisions_per_subnet(route, public, want):
    routes = [{"DestinationCidrBlock": "10.0.0.0/16", "GatewayId": "local"}]
    if route:
        routes.append({"DestinationCidrBlock": "0.0.0.0/0", "State": "active", **route})
    tables = [{"RouteTableId": "rtb-1", "Associations": [{"Main": True}], "Routes": routes}]
    ok, _fix = _subnet_egress({"SubnetId": "subnet-1", "MapPublicIpOnLaunch": public},
                              tables, "vpc-1", public_asked=False)
    assert ok is want


def test_a_subnet_with_its_own_route_table_is_judged_by_that_table():
    tables = [
        {"RouteTableId": "rtb-main", "Associations": [{"Main": True}], "Routes": [
            {"DestinationCidrBlock": "0.0.0.0/0", "GatewayId": "igw-1"}]},
        {"RouteTableId": "rtb-own", "Associations": [{"SubnetId": "subnet-1"}], "Routes": []}]
    ok, fix = _subnet_egress({"SubnetId": "subnet-1", "MapPublicIpOnLaunch": True}, tables,
                             "vpc-1", public_asked=False)
    assert ok is False and "rtb-own" in fix


def test_an_image_that_is_not_in_the_region_is_refused(aws, tmp_path):
    with pytest.raises(PreflightRefused) as err:
        _provision(tmp_path, "noimage", image="ami-0123456789abcdef0")
    [(_w, check)] = err.value.checks
    assert check.name == "image" and "pass --image" in (check.fix or "")
    nothing_made("noimage")


def test_an_instance_profile_of_ones_own(aws):
    """With --instance-profile advisor makes no role: the user's role is asked through
    SimulatePrincipalPolicy, which moto lacks: "could not be checked" (ok None), not a
    refusal; a profile that does not exist is a refusal."""
    import boto3

    iam = boto3.client("iam")
    role = iam.create_role(RoleName="mine", AssumeRolePolicyDocument="{}")["Role"]
    iam.create_instance_profile(InstanceProfileName="mine")
    iam.add_role_to_instance_profile(InstanceProfileName="mine", RoleName=role["RoleName"])
    checks = AwsProvider().preflight(spec(options={"instance_profile": "mine"}))
    access = [c for c in checks if c.name == "secret-access"]
    assert [c.ok for c in access] == [None, None]
    assert all("could not be checked" in c.detail for c in access)
    missing = AwsProvider().preflight(spec(options={"instance_profile": "nobody"}))
    access = [c for c in missing if c.name == "secret-access"]
    assert [c.ok for c in access] == [False, False]
    assert "instance profile nobody does not exist" in access[0].detail


class _Stub(AwsProvider):
    """Answers of SSM that moto cannot give: another account's ARN, a customer KMS key."""

    def __init__(self, answers):
        super().__init__()
        self.answers = answers

    def _client(self, service, region):
        return service

    def _call(self, client, op, **kw):
        return self.answers[f"{client}.{op}"]


def test_the_arn_the_role_names_must_be_the_parameter_found():
    p = _Stub({"sts.get_caller_identity": {"Account": "111111111111", "Arn": "x"},
               "ssm.get_parameter": {"Parameter": {
                   "Type": "SecureString",
                   "ARN": "arn:aws:ssm:us-east-1:222222222222:parameter/advisor/hf-token"}}})
    from advisor.clouds.aws.preflight import _secret

    _ok, access = _secret(p, spec(), REF, "111111111111")
    assert access.ok is False and access.scope == "region"
    assert "arn:aws:ssm:us-east-1:111111111111:parameter/advisor/hf-token" in access.detail


def test_a_customer_kms_key_is_said_not_refused():
    arn = "arn:aws:ssm:us-east-1:111111111111:parameter/advisor/hf-token"
    p = _Stub({"ssm.get_parameter": {"Parameter": {"Type": "SecureString", "ARN": arn}},
               "ssm.describe_parameters": {"Parameters": [
                   {"Name": "/advisor/hf-token", "KeyId": "alias/mine"}]}})
    from advisor.clouds.aws.preflight import _secret

    _ok, access = _secret(p, spec(), REF, "111111111111")
    assert access.ok is None and "alias/mine" in access.detail
    assert "--key-id alias/aws/ssm" in (access.fix or "")


def test_cli_prints_each_failed_check_with_its_fix_and_exits_2(aws):
    import boto3

    for name in ("/advisor/hf-token", "/advisor/vllm-api-key"):
        boto3.client("ssm", region_name="us-east-1").delete_parameter(Name=name)
    r = cli(aws, "provision", "--model", "llama-3-8b", *TOKEN, "--ctx", "8192",
            "--instance", "aws:g6e.2xlarge", "--name", "cli-pre", "--yes", "--json")
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("preflight failed:")]
    assert len(lines) == 2
    assert all(" — fix: aws ssm put-parameter --region us-east-1" in x for x in lines)
    assert "/advisor/vllm-api-key" in lines[0] and "/advisor/hf-token" in lines[1]
    assert r.stderr.strip().splitlines()[-1].startswith("error: preflight: 2 check(s) failed")
    assert r.stdout == "" and "Traceback" not in r.stderr
    nothing_made("cli-pre")


def test_dry_run_lists_the_checks_and_imports_no_sdk(tmp_path):
    assert ADVISOR
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ADVISOR_"))}
    env.update({"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "ADVISOR_HOME": str(tmp_path)})
    code = ("import sys, json; import advisor.provisioning as p; "
            "r = p.provision('llama-3-8b', 8192, hf_token_ref='aws-ssm:/advisor/hf-token', "
            "instance='aws:g6e.2xlarge', name='dry', dry_run=True); "
            "print(json.dumps(r.model_dump())); "
            "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    [cand] = json.loads(r.stdout)["preflight"]
    assert cand["region"] == "us-east-1" and cand["instance_type"] == "g6e.2xlarge"
    assert [c["name"] for c in cand["checks"]] == [
        "credentials", "secret", "secret-access", "secret", "secret-access", "quota", "image",
        "egress"]
    text = subprocess.run([ADVISOR, "provision", "--model", "llama-3-8b", *TOKEN, "--ctx",
                           "8192", "--instance", "aws:g6e.2xlarge", "--name", "dry",
                           "--dry-run"], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert text.returncode == 0, text.stderr
    assert ("# preflight of aws:g6e.2xlarge in us-east-1: checked before anything is created"
            in text.stdout)
    assert "#   credentials: sts.GetCallerIdentity" in text.stdout
