"""Azure quota pre-check: per-family vCPU usage of usage.list."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.clouds.base import LaunchSpec, QuotaStatus, quota_status

if TYPE_CHECKING:
    from advisor.clouds.azure.compute import AzureProvider


def check_quota(provider: AzureProvider, spec: LaunchSpec) -> QuotaStatus:
    """Whether the region's quota leaves room for one more ``spec``; unreadable quota is
    ``checked=False``, not a refusal (launching will tell)."""
    try:
        sku = provider._sku(spec)
        family = "lowPriorityCores" if spec.spot else (sku.family if sku else None)
        if family is None:
            return QuotaStatus(checked=False, detail="VM family unknown")
        usages = list(provider._client("compute").usage.list(spec.region))
    except Exception as exc:
        return QuotaStatus(checked=False, detail=f"quota not readable: "
                           f"{' '.join(str(exc).split())[:200]}")
    for u in usages:
        if u.name.value == family:
            return quota_status(family, spec.region, u.limit, u.current_value, spec.vcpus,
                                "vCPUs", spec.instance_type)
    return QuotaStatus(checked=False, detail=f"{family} not listed for {spec.region}")
