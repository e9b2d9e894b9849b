"""Whether advisor can deploy an instance it ranks: the one place that decides it. Pure.

advisor's deployment path is CUDA vLLM only: the launcher maps GPUs with ``nvidia-smi``
(templates/vllm-launch.sh), the install pins vLLM's CUDA wheel (templates/advisor-install.sh),
the machine images are NVIDIA-driver images and the k8s manifests request ``nvidia.com/gpu``.
An AMD GPU (the catalog's ``Gpu.vendor``, from the vendor's datasheet) would boot into a
service that cannot start. advisor does not build a ROCm path in this release, deliberately:

- a ROCm path is not a flag on the CUDA one: a different vLLM build (ROCm wheels or AMD's
  image), different device mapping (``amd-smi`` / ``rocm-smi``, ``HIP_VISIBLE_DEVICES``),
  different images per cloud, RCCL instead of NCCL tuning, ``amd.com/gpu`` in k8s — each one
  untested by us, and a half-built path fails at boot, on a bill, where a refusal fails at once;
- the perf and memory model has no public measurement on CDNA 3 (its confidence says
  "extrapolated"), so the figures that would justify the pick are the weakest ones we show.

So an AMD pick stays in ``recommend`` (a capacity planner should see its price and figures),
marked not deployable and ranked after every deployable one, and ``render`` (every target) and
``provision`` (dry run included) refuse it with :data:`HINT` before writing or calling anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from advisor.catalog.catalog import Catalog
from advisor.catalog.schema import Gpu, InstanceType
from advisor.errors import UserInputError

#: GPU vendors advisor's deployment path serves (catalog ``Gpu.vendor``)
DEPLOYABLE_VENDORS = frozenset({"nvidia"})

#: what to do about a pick advisor will not deploy
HINT = ("pick an NVIDIA instance: 'advisor recommend' lists the deployable ones first, and "
        "render / provision without --instance take the first")
#: what to do about a type its provider has retired (``available_until`` in the catalog)
RETIRED_HINT = "pick a current type: 'advisor recommend' ranks only those"
#: the same for a probed host (render --target local)
PROBE_HINT = ("render --target local on an NVIDIA host; on this one, start vLLM's ROCm image "
              "yourself ('advisor topology' still shows its layout)")


def vendor_reason(vendor: str, what: str) -> str | None:
    """Why advisor cannot deploy onto a GPU of ``vendor`` (``what`` names it), or None."""
    if vendor in DEPLOYABLE_VENDORS:
        return None
    name = {"amd": "AMD"}.get(vendor, vendor[:20])
    stack = " (no ROCm path yet)" if vendor == "amd" else ""
    return (f"{name} {what}: advisor deploys CUDA vLLM only{stack}; serve it with vLLM's "
            f"{'ROCm' if vendor == 'amd' else 'own'} image by hand")


def gpu_deployable(gpu: Gpu) -> tuple[bool, str | None]:
    """(can advisor deploy onto this GPU, why not)."""
    why = vendor_reason(gpu.vendor, gpu.id)
    return why is None, why


def deployable(inst: InstanceType, catalog: Catalog) -> tuple[bool, str | None]:
    """(can ``advisor render`` / ``provision`` bring vLLM up on ``inst``, why not): decided by
    its GPU's vendor in the catalog. A GPU the catalog does not hold is not deployable (its
    vendor is unknown)."""
    gpu = catalog.gpus.get(inst.gpu.model)
    if gpu is None:
        return False, (f"GPU {inst.gpu.model} is unknown to the catalog, so advisor cannot tell "
                       "which vLLM build it needs")
    return gpu_deployable(gpu)


def probe_reason(vendors: Iterable[str]) -> str | None:
    """Why a probed host whose GPUs report ``vendors`` (the probe's PCI vendor names:
    ``nvidia``, ``amd``, or a raw id) cannot take advisor's CUDA deployment, or None."""
    for v in sorted(set(vendors)):
        why = vendor_reason(v, "GPUs on this host")
        if why is not None:
            return why
    return None


def refusal(inst: InstanceType, catalog: Catalog) -> str | None:
    """The one-line refusal for rendering or provisioning ``inst``, or None when it can be."""
    gone = inst.retired()
    if gone:
        return gone
    ok, why = deployable(inst, catalog)
    return None if ok else f"{inst.key} is not deployable by advisor: {why}"


def require(inst: InstanceType, catalog: Catalog, hint: str = HINT) -> None:
    """Refuse (UserInputError, exit 2, with ``hint``) to render or provision ``inst`` where
    advisor cannot deploy it: called before any file is written or any cloud is called."""
    why = refusal(inst, catalog)
    if why is not None:
        raise UserInputError(why, hint=RETIRED_HINT if inst.retired() else hint)


def require_probe(vendors: Iterable[str]) -> None:
    """The same refusal for a probed host (``render --target local``) by its GPUs' vendors."""
    why = probe_reason(vendors)
    if why is not None:
        raise UserInputError(f"this host is not deployable by advisor: {why}", hint=PROBE_HINT)
