"""advisor: which cloud instance should serve this LLM, and how to run vLLM NUMA-local on it.

The SDK surface. Everything the CLI does is callable from here::

    import advisor
    cat = advisor.load_catalog()
    cat.instance("aws:p5.48xlarge")
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
from advisor.errors import (
    AdvisorError,
    CatalogError,
    ModelConfigError,
    NotFoundError,
    OperationError,
    UserInputError,
)

__version__ = "0.1.0"

__all__ = [
    "AdvisorError",
    "Catalog",
    "CatalogError",
    "Cpu",
    "Gpu",
    "InstanceType",
    "ModelAlias",
    "ModelConfigError",
    "NotFoundError",
    "OperationError",
    "Problem",
    "Provenance",
    "UserInputError",
    "__version__",
    "load_catalog",
    "validate_catalog",
]
