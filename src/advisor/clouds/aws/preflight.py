"""AWS preflight (issue 27, item 6): what ``provision`` checks before it makes anything.

Each check is one :class:`~advisor.clouds.base.PreflightCheck`; a failure is one line with its
fix (an ``aws`` command where there is one). ``ok`` None: could not be asked (no permission to
read it, an API moto or a partition lacks): said, not a refusal. The calls, in order:

* ``credentials`` — STS ``GetCallerIdentity`` (needs no permission at all). A refusal ends the
  preflight there: every later call would fail the same way.
* ``secret`` — per ``aws-ssm:`` reference, SSM ``GetParameter`` *without* decryption (the
  parameter's metadata and ARN, never its value). SSM parameters are regional: a missing one
  blocks this region only (``scope="region"``), another region may hold it.
* ``secret-access`` — the role advisor makes names exactly
  ``arn:aws:ssm:<region>:<account>:parameter<name>`` (:func:`compute.role_policy`): that ARN
  must be the parameter found. A SecureString under a customer-managed KMS key also needs
  ``kms:Decrypt``, which that role does not grant: said (``ok`` None). With
  ``--instance-profile`` the user's own role is asked through IAM ``SimulatePrincipalPolicy``
  where the caller may (``ok`` None where not).
* ``quota`` — :func:`advisor.clouds.aws.quota.check_quota` (unreadable: ``ok`` None).
* ``image`` — the launch's own look-up (``--image`` or the DLAMI's public SSM parameter, else
  ``DescribeImages``).
* ``egress`` — the default VPC's default subnets (of the zones that offer the type) route
  ``0.0.0.0/0`` to an internet gateway with a public address on launch, or to a NAT gateway:
  the instance must reach PyPI and Hugging Face on its first boot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.clouds.aws.options import CREDENTIALS_HINT
from advisor.clouds.aws.secrets import ssm_parameter
from advisor.clouds.base import CloudError, LaunchSpec, PreflightCheck

if TYPE_CHECKING:
    from advisor.clouds.aws.compute import AwsProvider

#: the key SSM uses for a SecureString when none is named: any principal of the account that may
#: GetParameter may decrypt through it (its key policy allows kms:ViaService ssm)
AWS_MANAGED_KEY = "alias/aws/ssm"


def _short(exc: BaseException) -> str:
    return " ".join(str(getattr(exc, "detail", None) or exc).split())[:200]


def _code(exc: BaseException) -> str:
    return str(getattr(exc, "code", "") or type(exc).__name__)


def plan(spec: LaunchSpec) -> list[PreflightCheck]:
    """The checks :func:`preflight` makes, described without any call (``--dry-run``)."""
    out = [PreflightCheck(name="credentials", ok=None,
                          detail="sts.GetCallerIdentity: the credentials are valid")]
    for ref in _refs(spec):
        param = ssm_parameter(ref)
        out.append(PreflightCheck(name="secret", ok=None, scope="region",
                                  detail=f"ssm.GetParameter {param} in {spec.region} (no "
                                  "decryption): the parameter exists"))
        profile = spec.options.get("instance_profile")
        out.append(PreflightCheck(
            name="secret-access", ok=None,
            detail=(f"iam.SimulatePrincipalPolicy: instance profile {profile}'s role may "
                    f"ssm:GetParameter {param}") if profile else
            (f"the role advisor-{spec.deployment} will name arn:aws:ssm:{spec.region}:"
             f"<account>:parameter{param}: that ARN is the parameter found")))
    out += [
        PreflightCheck(name="quota", ok=None, detail="service-quotas.GetServiceQuota and "
                       f"ec2.DescribeInstances: vCPUs free for {spec.instance_type} in "
                       f"{spec.region}"),
        PreflightCheck(name="image", ok=None, detail=(
            f"ec2.DescribeImages {spec.image} in {spec.region}" if spec.image else
            f"the NVIDIA GPU base image (DLAMI) in {spec.region}: ssm.GetParameter, else "
            "ec2.DescribeImages")),
        PreflightCheck(name="egress", ok=None, detail=(
            f"ec2.DescribeVpcs/DescribeSubnets/DescribeRouteTables: the default subnets of "
            f"{spec.region} route 0.0.0.0/0 to an internet gateway (with a public IP) or a "
            "NAT gateway")),
    ]
    return out


def _refs(spec: LaunchSpec) -> list[str]:
    return [r for r in dict.fromkeys((spec.api_key_ref, spec.hf_token_ref))
            if r and ssm_parameter(r)]


def preflight(p: AwsProvider, spec: LaunchSpec) -> list[PreflightCheck]:
    """The checks, made; read-only calls only."""
    cred, account = _credentials(p, spec)
    if cred.ok is False:
        return [cred]
    out = [cred]
    for ref in _refs(spec):
        out += _secret(p, spec, ref, account)
    out.append(_quota(p, spec))
    out.append(_image(p, spec))
    out.append(_egress(p, spec))
    return out


def _credentials(p: AwsProvider, spec: LaunchSpec) -> tuple[PreflightCheck, str | None]:
    try:
        who = p._call(p._client("sts", spec.region), "get_caller_identity")
    except CloudError as exc:
        if exc.code in ("ReadTimeoutError", "ConnectTimeoutError"):
            return PreflightCheck(name="credentials", ok=False,
                                  detail=f"AWS did not answer ({exc.code}): {_short(exc)}",
                                  fix=exc.hint), None
        if exc.scope == "provider":
            return PreflightCheck(name="credentials", ok=False,
                                  detail=f"no usable AWS credentials ({exc.code}): "
                                  f"{_short(exc)}", fix=CREDENTIALS_HINT), None
        return PreflightCheck(name="credentials", ok=None,
                              detail=f"could not ask STS ({exc.code}): {_short(exc)}"), None
    except Exception as exc:  # an SDK that is missing is the user's to fix, like credentials
        from advisor.errors import UserInputError

        if isinstance(exc, UserInputError):
            return PreflightCheck(name="credentials", ok=False, detail=exc.message,
                                  fix=exc.hint), None
        raise
    account = str(who.get("Account", "")) or None
    return PreflightCheck(name="credentials", ok=True,
                          detail=f"account {account} as {who.get('Arn', '?')}"), account


def _secret(p: AwsProvider, spec: LaunchSpec, ref: str,
            account: str | None) -> list[PreflightCheck]:
    param = ssm_parameter(ref)
    assert param is not None
    ssm = p._client("ssm", spec.region)
    try:
        found = p._call(ssm, "get_parameter", Name=param, WithDecryption=False)["Parameter"]
    except CloudError as exc:
        if exc.code in ("ParameterNotFound", "ParameterVersionNotFound"):
            return [PreflightCheck(
                name="secret", ok=False, scope="region",
                detail=f"{ref}: no SSM parameter {param} in {spec.region}",
                fix=f"aws ssm put-parameter --region {spec.region} --name {param} --type "
                "SecureString --value '…'")]
        return [PreflightCheck(name="secret", ok=None, scope="region",
                               detail=f"{ref}: could not ask SSM ({exc.code}): {_short(exc)}")]
    out = [PreflightCheck(name="secret", ok=True, scope="region",
                          detail=f"{ref}: {found.get('Type', 'parameter')} {param} in "
                          f"{spec.region}")]
    arn = str(found.get("ARN") or "")
    profile = spec.options.get("instance_profile")
    if profile:
        out.append(_simulate(p, spec, profile, param, arn))
        return out
    if account is None:
        out.append(PreflightCheck(name="secret-access", ok=None, detail=(
            f"{ref}: the account is unknown (STS did not answer), so the ARN the role will "
            "name could not be compared")))
        return out
    named = f"arn:aws:ssm:{spec.region}:{account}:parameter{param}"
    if arn and arn != named:
        return [*out, PreflightCheck(
            name="secret-access", ok=False, scope="region",
            detail=f"{ref}: the role advisor makes may read {named}, but the parameter is "
            f"{arn}", fix="keep the parameter in the deployment's own account and region, or "
            "pass --instance-profile with a role that may read it")]
    if found.get("Type") == "SecureString":
        key = _key_of(p, ssm, param)
        if key not in (None, AWS_MANAGED_KEY):
            return [*out, PreflightCheck(
                name="secret-access", ok=None,
                detail=f"{ref}: encrypted with KMS key {key}; the role advisor makes grants "
                "no kms:Decrypt, so the instance reads it only if the key's policy allows "
                "the account's principals through SSM",
                fix=f"aws ssm put-parameter --overwrite --region {spec.region} --name {param} "
                f"--type SecureString --key-id {AWS_MANAGED_KEY} --value '…', or pass "
                "--instance-profile with kms:Decrypt on the key")]
    return [*out, PreflightCheck(name="secret-access", ok=True,
                                 detail=f"the role advisor-{spec.deployment} will be allowed "
                                 f"ssm:GetParameter on {named}")]


def _key_of(p: AwsProvider, ssm: Any, param: str) -> str | None:
    """The KMS key of a SecureString (DescribeParameters), None where not readable."""
    try:
        r = p._call(ssm, "describe_parameters", ParameterFilters=[
            {"Key": "Name", "Option": "Equals", "Values": [param]}])
    except CloudError:
        return None
    for d in r.get("Parameters", []):
        if d.get("Name") == param:
            return str(d.get("KeyId") or AWS_MANAGED_KEY)
    return None


def _simulate(p: AwsProvider, spec: LaunchSpec, profile: str, param: str,
              arn: str) -> PreflightCheck:
    iam = p._client("iam", spec.region)
    try:
        roles = p._call(iam, "get_instance_profile", InstanceProfileName=profile
                        )["InstanceProfile"].get("Roles", [])
    except CloudError as exc:
        if exc.code == "NoSuchEntity":
            return PreflightCheck(name="secret-access", ok=False,
                                  detail=f"instance profile {profile} does not exist",
                                  fix="aws iam list-instance-profiles; or drop "
                                  "--instance-profile and let advisor make one")
        return PreflightCheck(name="secret-access", ok=None, detail=(
            f"instance profile {profile}: could not be checked ({exc.code}): {_short(exc)}"))
    if not roles:
        return PreflightCheck(name="secret-access", ok=False,
                              detail=f"instance profile {profile} holds no role",
                              fix=f"aws iam add-role-to-instance-profile "
                              f"--instance-profile-name {profile} --role-name ROLE")
    role = roles[0]
    try:
        r = p._call(iam, "simulate_principal_policy", PolicySourceArn=role["Arn"],
                    ActionNames=["ssm:GetParameter"], ResourceArns=[arn or param])
    except Exception as exc:  # no iam:SimulatePrincipalPolicy, or an endpoint without it
        return PreflightCheck(name="secret-access", ok=None, detail=(
            f"could not be checked: role {role.get('RoleName')} of {profile} "
            f"(iam.SimulatePrincipalPolicy: {_code(exc)})"))
    decisions = [e.get("EvalDecision") for e in r.get("EvaluationResults", [])]
    if decisions and all(d == "allowed" for d in decisions):
        return PreflightCheck(name="secret-access", ok=True, detail=(
            f"role {role.get('RoleName')} of {profile} may ssm:GetParameter {param}"))
    return PreflightCheck(
        name="secret-access", ok=False,
        detail=f"role {role.get('RoleName')} of {profile} may not ssm:GetParameter {param} "
        f"({', '.join(str(d) for d in decisions) or 'no decision'})",
        fix=f"allow ssm:GetParameter on {arn or param} in the role's policy, or drop "
        "--instance-profile")


def _quota(p: AwsProvider, spec: LaunchSpec) -> PreflightCheck:
    q = p.check_quota(spec)
    if not q.checked:
        return PreflightCheck(name="quota", ok=None, detail=q.detail or "not readable")
    if not q.ok:
        return PreflightCheck(name="quota", ok=False, detail=q.detail, fix=(
            "ask AWS for more vCPU quota in this region: Service Quotas, EC2 'Running "
            "On-Demand P/G instances' (or 'All P/G Spot Instance Requests')"))
    return PreflightCheck(name="quota", ok=True, detail=q.detail)


def _image(p: AwsProvider, spec: LaunchSpec) -> PreflightCheck:
    try:
        img = p._image(spec)
    except CloudError as exc:
        if exc.code in ("NoGpuImage", "InvalidAMIID.NotFound", "InvalidAMIID.Malformed",
                        "InvalidAMIID.Unavailable"):
            return PreflightCheck(name="image", ok=False, detail=f"{exc.detail} ({exc.code})",
                                  fix=f"pass --image with an AMI id of {spec.region} (the "
                                  "NVIDIA driver installed)")
        return PreflightCheck(name="image", ok=None,
                              detail=f"could not look the image up ({exc.code}): {_short(exc)}")
    return PreflightCheck(name="image", ok=True, detail=f"{img['image_id']} in {spec.region}")


def _egress(p: AwsProvider, spec: LaunchSpec) -> PreflightCheck:
    ec2 = p._client("ec2", spec.region)
    try:
        vpcs = p._call(ec2, "describe_vpcs",
                       Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
        if not vpcs:
            return PreflightCheck(name="egress", ok=False,
                                  detail=f"{spec.region} has no default VPC to launch in",
                                  fix=f"aws ec2 create-default-vpc --region {spec.region}")
        vpc = vpcs[0]["VpcId"]
        subnets = p._call(ec2, "describe_subnets", Filters=[
            {"Name": "vpc-id", "Values": [vpc]},
            {"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
        tables = p._call(ec2, "describe_route_tables", Filters=[
            {"Name": "vpc-id", "Values": [vpc]}])["RouteTables"]
    except CloudError as exc:
        return PreflightCheck(name="egress", ok=None,
                              detail=f"could not read the default VPC ({exc.code}): "
                              f"{_short(exc)}")
    try:  # only the zones that offer the type matter (the launch tries those)
        offered = {z for z in p.zones(spec) if z}
    except CloudError:
        offered = set()
    used = [s for s in subnets if not offered or s.get("AvailabilityZone") in offered]
    if not used:
        return PreflightCheck(name="egress", ok=False,
                              detail=f"the default VPC {vpc} of {spec.region} has no default "
                              "subnet" + (f" in {', '.join(sorted(offered))}" if offered else ""),
                              fix=f"aws ec2 create-default-subnet --region {spec.region} "
                              "--availability-zone ZONE")
    # an EFA launch asks for a public address itself; otherwise the subnet's setting decides
    public_asked = spec.nodes > 1 and spec.fabric == "efa"
    bad: list[str] = []
    fixes: list[str] = []
    unknown: list[str] = []
    for s in used:
        verdict, fix = _subnet_egress(s, tables, vpc, public_asked)
        if verdict is None:
            unknown.append(f"{s['SubnetId']} ({s.get('AvailabilityZone')}): {fix}")
        elif verdict is False:
            bad.append(f"{s['SubnetId']} ({s.get('AvailabilityZone')})")
            if fix not in fixes:
                fixes.append(fix)
    if bad:
        return PreflightCheck(name="egress", ok=False,
                              detail=f"no way out to the internet (PyPI, Hugging Face) from "
                              f"default subnet(s) {', '.join(bad)} of {vpc}",
                              fix="; ".join(fixes))
    if unknown:
        return PreflightCheck(name="egress", ok=None, detail="egress could not be judged: "
                              + "; ".join(unknown))
    return PreflightCheck(name="egress", ok=True, detail=(
        f"{len(used)} default subnet(s) of {vpc} route 0.0.0.0/0 out"))


def _subnet_egress(subnet: dict[str, Any], tables: list[dict[str, Any]], vpc: str,
                   public_asked: bool) -> tuple[bool | None, str]:
    """(True, "") when the subnet's route table leads out; (False, fix); (None, why)."""
    sid = subnet["SubnetId"]
    table = next((t for t in tables for a in t.get("Associations", [])
                  if a.get("SubnetId") == sid), None)
    if table is None:
        table = next((t for t in tables for a in t.get("Associations", []) if a.get("Main")),
                     None)
    if table is None:
        return False, (f"aws ec2 describe-route-tables --filters Name=vpc-id,Values={vpc}: "
                       "no route table for the subnet")
    out = [r for r in table.get("Routes", []) if r.get("DestinationCidrBlock") == "0.0.0.0/0"
           and r.get("State", "active") == "active"]
    rtb = table["RouteTableId"]
    if not out:
        return False, (f"aws ec2 create-route --route-table-id {rtb} --destination-cidr-block "
                       "0.0.0.0/0 --gateway-id <igw-… attached to the VPC> (or a NAT gateway)")
    route = out[0]
    if route.get("NatGatewayId"):
        return True, ""
    if str(route.get("GatewayId", "")).startswith("igw-"):
        if public_asked or subnet.get("MapPublicIpOnLaunch"):
            return True, ""
        return False, (f"aws ec2 modify-subnet-attribute --subnet-id {sid} "
                       "--map-public-ip-on-launch (the route goes to an internet gateway, "
                       "which needs a public address)")
    via = next((f"{k} {v}" for k, v in route.items() if k.endswith("Id") and v), "another hop")
    return None, f"0.0.0.0/0 goes through {via}"
