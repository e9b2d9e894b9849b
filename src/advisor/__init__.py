"""advisor: which cloud instance should serve this LLM, and how to run vLLM NUMA-local on it.

The SDK surface. Everything the CLI does is callable from here::

    import advisor
    cat = advisor.load_catalog()
    cat.instance("aws:p5.48xlarge")
    result, spec, _ = advisor.fit("llama-3-8b", "H100-SXM", max_model_len=8192)
    advisor.provision("llama-3-8b", 8192, provider="aws", dry_run=True).requests
"""

from advisor.catalog import (
    Catalog,
    Cpu,
    Gpu,
    InstanceType,
    ModelAlias,
    Problem,
    Provenance,
)
from advisor.catalog import load as load_catalog
from advisor.catalog import validate as validate_catalog
from advisor.engine import DEFAULT_VLLM_VERSION, EngineProfile
from advisor.engine import profile as engine_profile
from advisor.errors import (
    AdvisorError,
    CatalogError,
    ModelConfigError,
    NotFoundError,
    OperationError,
    UserInputError,
)
from advisor.fitting import estimate, fit, fleet, model_config, model_spec, recommend
from advisor.llm import ModelSpec, spec_from_config
from advisor.ranking import Constraints, Recommendation, Rejection, Request
from advisor.sizing import FitRequest, MemoryFit

__version__ = "0.1.0"

#: provisioning (state file, provider protocol) loads on first use: ``advisor recommend`` and
#: the catalog commands never pay for it
_LAZY = {"Attempt": "provisioning", "DownResult": "provisioning",
         "ProvisionResult": "provisioning", "down": "provisioning", "provision": "provisioning",
         "status": "provisioning", "Ticket": "tickets", "ticket": "tickets"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f"advisor.{_LAZY[name]}")
        return getattr(module, "make_ticket" if name == "ticket" else name)
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")


__all__ = [
    "DEFAULT_VLLM_VERSION",
    "AdvisorError",
    "Attempt",
    "Catalog",
    "CatalogError",
    "Constraints",
    "Cpu",
    "DownResult",
    "EngineProfile",
    "FitRequest",
    "Gpu",
    "InstanceType",
    "MemoryFit",
    "ModelAlias",
    "ModelConfigError",
    "ModelSpec",
    "NotFoundError",
    "OperationError",
    "Problem",
    "Provenance",
    "ProvisionResult",
    "Recommendation",
    "Rejection",
    "Request",
    "Ticket",
    "UserInputError",
    "__version__",
    "down",
    "engine_profile",
    "estimate",
    "fit",
    "fleet",
    "load_catalog",
    "model_config",
    "model_spec",
    "provision",
    "recommend",
    "spec_from_config",
    "status",
    "ticket",
    "validate_catalog",
]
