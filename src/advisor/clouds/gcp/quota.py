"""GCP quota pre-check: regional GPU quota metrics of regions.get."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.clouds.base import LaunchSpec, QuotaStatus, quota_status

if TYPE_CHECKING:
    from advisor.clouds.gcp.compute import GcpProvider

#: regional quota metric per GPU (compute_v1.Quota.Metric); spot uses PREEMPTIBLE_<metric>
QUOTA_METRICS = {"A100-40GB-SXM": "NVIDIA_A100_GPUS", "A100-80GB-SXM": "NVIDIA_A100_80GB_GPUS",
                 "H100-SXM": "NVIDIA_H100_GPUS", "L4": "NVIDIA_L4_GPUS", "T4": "NVIDIA_T4_GPUS"}


def check_quota(provider: GcpProvider, spec: LaunchSpec) -> QuotaStatus:
    """Whether the region's quota leaves room for one more ``spec``; unreadable quota is
    ``checked=False``, not a refusal (launching will tell)."""
    metric = QUOTA_METRICS.get(spec.gpu_model)
    if metric is None:
        return QuotaStatus(checked=False, detail=f"no regional quota metric known for "
                           f"{spec.gpu_model}")
    if spec.spot:
        metric = "PREEMPTIBLE_" + metric
    try:
        region = provider._client("RegionsClient").get(project=provider.project, region=spec.region)
    except Exception as exc:
        return QuotaStatus(checked=False, detail=f"quota not readable: "
                           f"{' '.join(str(exc).split())[:200]}")
    for q in region.quotas:
        name = q.metric if isinstance(q.metric, str) else getattr(q.metric, "name", "")
        if name == metric:
            return quota_status(metric, spec.region, q.limit, q.usage, spec.gpu_count,
                                "GPUs", spec.instance_type)
    return QuotaStatus(checked=False, detail=f"{metric} not listed for {spec.region}")
