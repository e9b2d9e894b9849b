"""AWS quota pre-check: Service Quotas (EC2 vCPU buckets, on-demand and spot)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.clouds.base import LaunchSpec, QuotaStatus, quota_status

if TYPE_CHECKING:
    from advisor.clouds.aws.compute import AwsProvider

#: Service Quotas codes (vCPUs) of the EC2 buckets GPU instances fall in: (on-demand, spot)
QUOTA_CODES = {"p": ("L-417A185B", "L-7212CCBC"), "g": ("L-DB2E81BA", "L-3819A6DF")}



def check_quota(provider: AwsProvider, spec: LaunchSpec) -> QuotaStatus:
    """Whether the region's quota leaves room for one more ``spec``; unreadable quota is
    ``checked=False``, not a refusal (launching will tell)."""
    codes = QUOTA_CODES.get(spec.instance_type[:1])
    if codes is None:
        return QuotaStatus(checked=False, detail="no GPU quota bucket known for this family")
    code = codes[1 if spec.spot else 0]
    try:
        sq = provider._client("service-quotas", spec.region)
        limit = float(sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)
                      ["Quota"]["Value"])
    except Exception as exc:  # no permission, no endpoint: launching will tell
        return QuotaStatus(checked=False, detail=f"quota {code} not readable: "
                           f"{' '.join(str(exc).split())[:200]}")
    used = provider._vcpus_in_use(spec, spec.instance_type[:1])
    return quota_status(code, spec.region, limit, used, spec.vcpus, "vCPUs",
                        spec.instance_type)
