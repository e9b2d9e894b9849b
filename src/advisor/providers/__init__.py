"""Cloud backends, one module per cloud, each importing its SDK only when it is first used.

``get("aws", **options)`` returns a provider object (see :mod:`advisor.providers.base`).
Importing this package imports no cloud SDK: ``advisor recommend`` never pays for boto3,
google-cloud-compute or azure-mgmt-compute.
"""

from __future__ import annotations

from typing import Any

from advisor.errors import NotFoundError, UserInputError
from advisor.providers.base import CloudError, LaunchSpec, Provider, QuotaStatus

PROVIDERS = ("aws", "gcp", "azure")
EXTRAS = {"aws": "boto3", "gcp": "google-cloud-compute", "azure": "azure-mgmt-compute"}

__all__ = ["PROVIDERS", "CloudError", "LaunchSpec", "Provider", "QuotaStatus", "get"]


def get(name: str, **options: Any) -> Provider:
    """The backend of ``name`` (aws, gcp, azure) with provider-specific ``options``."""
    if name not in PROVIDERS:
        raise NotFoundError("cloud provider", name, PROVIDERS,
                            hint="advisor provisions on aws, gcp and azure; other catalog "
                            "providers (private boxes) are rendered with 'advisor render'")
    try:
        if name == "aws":
            from advisor.providers.aws import AwsProvider

            return AwsProvider(**options)
        if name == "gcp":
            from advisor.providers.gcp import GcpProvider

            return GcpProvider(**options)
        from advisor.providers.azure import AzureProvider

        return AzureProvider(**options)
    except ModuleNotFoundError as exc:
        raise UserInputError(f"the {name} SDK is not installed ({exc.name})",
                             hint=f"pip install 'advisor[{name}]' (it brings {EXTRAS[name]})"
                             ) from exc
