"""advisor: which cloud instance should serve this LLM, and how to run vLLM NUMA-local on it.

The SDK surface. Everything the CLI does is callable from here::

    import advisor
    cat = advisor.load_catalog()
    cat.instance("aws:p5.48xlarge")
    result, spec, _ = advisor.fit("llama-3-8b", "H100-SXM", max_model_len=8192)
    advisor.provision("qwen3-8b", 8192, provider="aws", dry_run=True).requests

Importing ``advisor`` builds nothing: each name is loaded from its module on first use
(PEP 562), so ``advisor --help`` and scripts pay only for what they touch. The functions live in
:mod:`advisor.api` (one validation boundary), the pure core in :mod:`advisor.core`.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any

from advisor._version import __version__

#: public name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "Catalog": ("advisor.catalog.catalog", "Catalog"),
    "Cpu": ("advisor.catalog.schema", "Cpu"),
    "Gpu": ("advisor.catalog.schema", "Gpu"),
    "InstanceType": ("advisor.catalog.schema", "InstanceType"),
    "ModelAlias": ("advisor.catalog.schema", "ModelAlias"),
    "Provenance": ("advisor.catalog.schema", "Provenance"),
    "Problem": ("advisor.catalog.loader", "Problem"),
    "load_catalog": ("advisor.catalog.loader", "load"),
    "validate_catalog": ("advisor.catalog.loader", "validate"),
    "DEFAULT_VLLM_VERSION": ("advisor.core.defaults", "DEFAULT_VLLM_VERSION"),
    "EngineProfile": ("advisor.core.engine", "EngineProfile"),
    "engine_profile": ("advisor.core.engine", "profile"),
    "AdvisorError": ("advisor.errors", "AdvisorError"),
    "CatalogError": ("advisor.errors", "CatalogError"),
    "ModelConfigError": ("advisor.errors", "ModelConfigError"),
    "NotFoundError": ("advisor.errors", "NotFoundError"),
    "OperationError": ("advisor.errors", "OperationError"),
    "UserInputError": ("advisor.errors", "UserInputError"),
    "estimate": ("advisor.api", "estimate"),
    "fit": ("advisor.api", "fit"),
    "fleet": ("advisor.api", "fleet"),
    "fleet_curve": ("advisor.api", "fleet_curve"),
    "CostCurve": ("advisor.core.load", "CostCurve"),
    "model_config": ("advisor.api", "model_config"),
    "model_spec": ("advisor.api", "model_spec"),
    "recommend": ("advisor.api", "recommend"),
    "render_files": ("advisor.api", "render_files"),
    "local_gpu": ("advisor.api", "local_gpu"),
    "load_probe": ("advisor.host.local", "load_probe"),
    "doctor": ("advisor.host.doctor", "diagnose"),
    "DoctorReport": ("advisor.host.doctor", "Report"),
    "Topology": ("advisor.host.topology", "Topology"),
    "RenderResult": ("advisor.api", "RenderResult"),
    "ModelSpec": ("advisor.core.model", "ModelSpec"),
    "spec_from_config": ("advisor.core.model", "spec_from_config"),
    "Constraints": ("advisor.core.ranking", "Constraints"),
    "Recommendation": ("advisor.core.ranking", "Recommendation"),
    "Rejection": ("advisor.core.ranking", "Rejection"),
    "Request": ("advisor.core.ranking", "Request"),
    "FitRequest": ("advisor.core.sizing", "FitRequest"),
    "MemoryFit": ("advisor.core.sizing", "MemoryFit"),
    "FleetOption": ("advisor.core.fleets", "FleetOption"),
    "FleetMiss": ("advisor.core.fleets", "FleetMiss"),
    "Plan": ("advisor.core.layouts", "Plan"),
    "Question": ("advisor.core.question", "Question"),
    "KvCacheDtype": ("advisor.core.question", "KvCacheDtype"),
    "CudagraphMode": ("advisor.choices", "CudagraphMode"),
    "Objective": ("advisor.core.question", "Objective"),
    "ask": ("advisor.api", "ask"),
    "Replica": ("advisor.core.layouts", "Replica"),
    "LaunchLine": ("advisor.render.local", "LaunchLine"),
    "Deployment": ("advisor.state", "Deployment"),
    "CloudError": ("advisor.clouds.base", "CloudError"),
    "PerfEstimate": ("advisor.core.perf", "PerfEstimate"),
    "Attempt": ("advisor.provisioning", "Attempt"),
    "DownResult": ("advisor.provisioning", "DownResult"),
    "ProvisionResult": ("advisor.provisioning", "ProvisionResult"),
    "down": ("advisor.provisioning", "down"),
    "boot_status": ("advisor.provisioning", "boot_status"),
    "PreflightRefused": ("advisor.provisioning", "PreflightRefused"),
    "provision": ("advisor.provisioning", "provision"),
    "status": ("advisor.provisioning", "status"),
    "Ticket": ("advisor.tickets", "Ticket"),
    "ticket": ("advisor.tickets", "make_ticket"),
}

__all__ = [
    "AdvisorError",
    "Attempt",
    "Catalog",
    "CatalogError",
    "CloudError",
    "Constraints",
    "CostCurve",
    "Cpu",
    "CudagraphMode",
    "DEFAULT_VLLM_VERSION",
    "Deployment",
    "DoctorReport",
    "DownResult",
    "EngineProfile",
    "FitRequest",
    "FleetMiss",
    "FleetOption",
    "Gpu",
    "InstanceType",
    "KvCacheDtype",
    "LaunchLine",
    "MemoryFit",
    "ModelAlias",
    "ModelConfigError",
    "ModelSpec",
    "NotFoundError",
    "Objective",
    "OperationError",
    "PerfEstimate",
    "Plan",
    "PreflightRefused",
    "Problem",
    "Provenance",
    "ProvisionResult",
    "Question",
    "Recommendation",
    "Rejection",
    "RenderResult",
    "Replica",
    "Request",
    "Ticket",
    "Topology",
    "UserInputError",
    "__version__",
    "ask",
    "boot_status",
    "doctor",
    "down",
    "engine_profile",
    "estimate",
    "fit",
    "fleet",
    "fleet_curve",
    "load_catalog",
    "load_probe",
    "local_gpu",
    "model_config",
    "model_spec",
    "provision",
    "recommend",
    "render_files",
    "spec_from_config",
    "status",
    "ticket",
    "validate_catalog",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        if inspect.isfunction(value):  # the SDK's door: wrong types are one clear error
            from advisor.errors import typed

            value = typed(value)
        globals()[name] = value  # once loaded, a plain attribute
        return value
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, eagerly
    from advisor.api import (
        RenderResult,
        ask,
        estimate,
        fit,
        fleet,
        fleet_curve,
        local_gpu,
        model_config,
        model_spec,
        recommend,
        render_files,
    )
    from advisor.catalog.catalog import Catalog
    from advisor.catalog.loader import Problem
    from advisor.catalog.loader import load as load_catalog
    from advisor.catalog.loader import validate as validate_catalog
    from advisor.catalog.schema import Cpu, Gpu, InstanceType, ModelAlias, Provenance
    from advisor.choices import CudagraphMode
    from advisor.clouds.base import CloudError
    from advisor.core.engine import DEFAULT_VLLM_VERSION, EngineProfile
    from advisor.core.engine import profile as engine_profile
    from advisor.core.fleets import FleetMiss, FleetOption
    from advisor.core.layouts import Plan, Replica
    from advisor.core.load import CostCurve
    from advisor.core.model import ModelSpec, spec_from_config
    from advisor.core.perf import PerfEstimate
    from advisor.core.question import KvCacheDtype, Objective, Question
    from advisor.core.ranking import Constraints, Recommendation, Rejection, Request
    from advisor.core.sizing import FitRequest, MemoryFit
    from advisor.errors import (
        AdvisorError,
        CatalogError,
        ModelConfigError,
        NotFoundError,
        OperationError,
        UserInputError,
    )
    from advisor.host.doctor import Report as DoctorReport
    from advisor.host.doctor import diagnose as doctor
    from advisor.host.local import load_probe
    from advisor.host.topology import Topology
    from advisor.provisioning import (
        Attempt,
        DownResult,
        PreflightRefused,
        ProvisionResult,
        boot_status,
        down,
        provision,
        status,
    )
    from advisor.render.local import LaunchLine
    from advisor.state import Deployment
    from advisor.tickets import Ticket
    from advisor.tickets import make_ticket as ticket
