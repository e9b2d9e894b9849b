"""The catalog: sourced facts about GPUs, CPUs, cloud instance types and model aliases."""

from advisor.catalog.catalog import Catalog, numa_known
from advisor.catalog.loader import ENV_VAR, Problem, bundled_dir, load, validate
from advisor.catalog.schema import (
    Cpu,
    Gpu,
    InstanceType,
    ModelAlias,
    Provenance,
    provenance_of,
)

__all__ = [
    "ENV_VAR",
    "Catalog",
    "Cpu",
    "Gpu",
    "InstanceType",
    "ModelAlias",
    "Problem",
    "Provenance",
    "bundled_dir",
    "load",
    "numa_known",
    "provenance_of",
    "validate",
]
