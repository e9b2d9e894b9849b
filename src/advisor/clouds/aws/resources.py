"""What advisor makes on AWS, by name and request body, and how it classifies what EC2 says: no
API call here (:mod:`advisor.clouds.aws.compute` makes them; :mod:`~.preflight`, :mod:`~.quota`
and :mod:`~.refresh` read the same names from here, so no module of this folder imports the
provider at run time)."""

from __future__ import annotations

import hashlib
from typing import Any

from advisor.clouds.aws.secrets import ssm_parameter
from advisor.clouds.base import (
    LaunchSpec,
)
from advisor.errors import UserInputError

#: the DLAMI's public parameter (AWS DLAMI release notes list it per AMI flavour)
DLAMI_PARAMETER = ("/aws/service/deeplearning/ami/x86_64/"
                   "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id")
#: name patterns of Amazon-owned GPU images, best first, for when the parameter is unreadable
DLAMI_NAMES = ["Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*",
               "Deep Learning*Ubuntu*"]

CAPACITY = {"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
            "InsufficientCapacityOnHost", "InsufficientReservedInstanceCapacity", "Unsupported",
            "SpotMaxPriceTooLow"}
QUOTA = {"VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded",
         "OptInRequired", "PendingVerification"}
AUTH = {"AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch",
        "ExpiredToken", "AccessDenied", "AccessDeniedException", "UnrecognizedClientException"}

ALIVE_STATES = ["pending", "running", "stopping", "stopped"]


def _boto3() -> Any:
    try:
        import boto3
    except ModuleNotFoundError as exc:
        raise UserInputError("the aws SDK is not installed (boto3)",
                             hint="pip install 'advisor[aws]'") from exc
    return boto3


def token(*parts: str) -> str:
    """A ClientToken (<= 64 ASCII) that is the same for the same launch."""
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:48]


def tags(spec: LaunchSpec) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(spec.labels.items())] + [
        {"Key": "Name", "Value": spec.vm_name}]


def sg_name(deployment: str) -> str:
    return f"advisor-{deployment}"


def ingress(spec: LaunchSpec, sg_id: str | None = None) -> list[dict[str, Any]]:
    """Ingress permissions: the vLLM ports to --allow-cidr, SSH to --ssh-cidr, and — for a
    multi-node replica — everything between the group's own members (Ray, NCCL, EFA), nothing
    else."""
    perms: list[dict[str, Any]] = []
    if spec.nodes > 1:
        perms.append({"IpProtocol": "-1", "UserIdGroupPairs": [
            {"GroupId": sg_id or f"<id of security group {sg_name(spec.deployment)}>",
             "Description": "advisor multi-node: members of this deployment only"}]})
    lo, hi = min(spec.ports), max(spec.ports)
    for cidrs, frm, to, what in ((spec.allow_cidrs, lo, hi, "vLLM"),
                                 (spec.ssh_cidrs, 22, 22, "SSH")):
        if cidrs:
            perms.append({"IpProtocol": "tcp", "FromPort": frm, "ToPort": to,
                          "IpRanges": [{"CidrIp": c, "Description": f"advisor {what}"}
                                       for c in cidrs if ":" not in c],
                          "Ipv6Ranges": [{"CidrIpv6": c, "Description": f"advisor {what}"}
                                         for c in cidrs if ":" in c]})
    return perms


def role_policy(spec: LaunchSpec, account: str) -> dict[str, Any]:
    """Read the API key's parameter (and the Hugging Face token's), nothing else."""
    params = [p for ref in (spec.api_key_ref, spec.hf_token_ref) if ref
              and (p := ssm_parameter(ref))]
    statements: list[dict[str, Any]] = []
    if params:
        statements.append({"Effect": "Allow", "Action": ["ssm:GetParameter"],
                           "Resource": [f"arn:aws:ssm:{spec.region}:{account}:parameter{p}"
                                        for p in params]})
    return {"Version": "2012-10-17", "Statement": statements or [
        {"Effect": "Deny", "Action": "*", "Resource": "*"}]}


TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
     "Action": "sts:AssumeRole"}]}
