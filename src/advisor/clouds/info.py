"""What the rest of advisor may know about a cloud, without importing its SDK.

Each cloud folder (``advisor/clouds/<name>/``) exposes one :class:`CloudInfo` as ``CLOUD`` in its
``__init__.py``, assembled from its ``secrets.py`` (the API-key reference scheme) and
``options.py`` (the provider options the CLI offers). :mod:`advisor.clouds.registry` is the only
list of clouds; everything else asks it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CloudOption:
    """A provider setting a user may give (GCP project, Azure resource group, …)."""

    #: keyword of the provider class's constructor
    key: str
    #: the CLI flag that sets it (several clouds may share a flag name; each reads its own)
    flag: str
    help: str
    #: what a valid value looks like (checked before any call reaches the cloud)
    pattern: str
    #: offered by these commands (provision/status/down, catalog refresh)
    commands: tuple[str, ...] = ("provision", "status", "down", "refresh")

    def check(self, value: str) -> str:
        from advisor.errors import UserInputError

        if not re.fullmatch(self.pattern, value):
            raise UserInputError(f"{self.flag} {value[:80]!r} is not valid",
                                 hint=f"{self.help} must match {self.pattern}")
        return value


@dataclass(frozen=True)
class KeyScheme:
    """How an instance of this cloud reads the vLLM API key at boot."""

    #: the reference's prefix, e.g. ``aws-ssm:``
    prefix: str
    #: the whole reference, prefix included (anchored when used)
    pattern: str
    #: the reference a deployment uses when none is given; None: the user must name one
    default: str | None
    example: str
    #: an example reference for the Hugging Face token, in the same store
    token_example: str = ""

    def matches(self, ref: str) -> bool:
        return re.fullmatch(self.pattern, ref) is not None


@dataclass(frozen=True)
class CloudInfo:
    name: str
    #: in a sentence to the provider's support ("AWS (Amazon EC2)")
    title: str
    #: the provider's word for an instance type ("machine type", "VM size")
    product_word: str
    #: ``module:Class`` of the provider backend (imported only when provisioning)
    backend: str
    #: the pip extra and the distribution that brings the SDK
    extra: str
    sdk: str
    key_scheme: KeyScheme
    options: tuple[CloudOption, ...] = field(default_factory=tuple)
    #: the region whose price is a type's reference price (catalogs/prices/README.md): the
    #: provider's first and largest region, where its public price lists start
    reference_region: str | None = None
    #: how to give advisor this cloud's credentials (the hint when a call finds none)
    credentials_hint: str = ""
    #: what ``--image`` may name on this cloud (checked before any call)
    image: CloudOption | None = None
    #: the most user-data this cloud takes, in bytes as it counts them (of
    #: :meth:`user_data_payload`, before any base64 the API wants); 0: no limit known
    user_data_limit: int = 0
    #: the launch sends the user-data gzip-compressed (cloud-init detects and inflates it)
    user_data_gzip: bool = False
    #: how the limit is counted, for the error that says it is passed
    user_data_counted: str = "bytes"

    def user_data_payload(self, text: str) -> bytes:
        """The user-data as the launch sends it: gzip where this cloud uses it (deterministic:
        no time stamp, so the same render gives the same bytes), else the UTF-8 text."""
        data = text.encode()
        if self.user_data_gzip:
            import gzip

            return gzip.compress(data, compresslevel=9, mtime=0)
        return data
