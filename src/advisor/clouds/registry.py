"""The only list of clouds advisor provisions on, and the one way to reach each.

Adding a cloud: a folder ``advisor/clouds/<name>/`` with the same files as the others
(``__init__.py`` with ``CLOUD``, ``compute.py``, ``quota.py``, ``refresh.py``, ``secrets.py``,
``options.py``, ``preflight.py``) and one line in :data:`CLOUDS`. Nothing else in ``src/``
names a cloud: a test checks it.

Importing this module imports no cloud SDK: :func:`info` loads a cloud's small descriptor,
:func:`get` its backend (and SDK) only when provisioning or refreshing.
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

from advisor.clouds.info import CloudInfo, CloudOption
from advisor.errors import NotFoundError, UserInputError

if TYPE_CHECKING:
    from advisor.clouds.base import Provider

#: every cloud, in the order candidates are tried when no provider is asked for
CLOUDS: tuple[str, ...] = ("aws", "gcp", "azure")
#: an instance key for examples in help texts and hints
EXAMPLE_INSTANCE = "aws:p5.48xlarge"

#: API-key references that work on any host (a file the operator placed)
#: a file on the instance: an absolute path of plain segments, none of them '.' or '..', and not
#: under /proc, /sys or /dev (pseudo-files: /dev/zero never ends, /proc/self/environ is not a
#: key); the launcher reads at most 4 KiB of it and only from a regular file
FILE_KEY_PATTERN = (r"file:(?!/(?:proc|sys|dev)(?:/|\Z))(?:/(?!\.{1,2}(?:/|\Z))"
                    r"[A-Za-z0-9_.-]{1,100}){1,20}")


def info(name: str) -> CloudInfo:
    """The descriptor of ``name``; NotFoundError (with the list) for anything else."""
    if name not in CLOUDS:
        raise NotFoundError("cloud provider", name, CLOUDS,
                            hint=f"advisor provisions on {', '.join(CLOUDS)}; other catalog "
                            "providers (private boxes) are rendered with 'advisor render'")
    cloud: CloudInfo = importlib.import_module(f"advisor.clouds.{name}").CLOUD
    return cloud


def all_info() -> list[CloudInfo]:
    return [info(n) for n in CLOUDS]


def get(name: str, **options: Any) -> Provider:
    """The backend of ``name`` with provider-specific ``options`` (its constructor keywords)."""
    cloud = info(name)
    module, _, cls = cloud.backend.partition(":")
    try:
        backend = getattr(importlib.import_module(module), cls)
        provider: Provider = backend(**options)
    except ModuleNotFoundError as exc:
        raise UserInputError(f"the {name} SDK is not installed ({exc.name})",
                             hint=f"pip install 'advisor[{cloud.extra}]' (it brings {cloud.sdk})"
                             ) from exc
    return provider


# -- API-key references --------------------------------------------------------------------
def key_ref_pattern() -> str:
    """One anchored pattern for every reference any cloud (or a file) can resolve."""
    alts = [info(n).key_scheme.pattern for n in CLOUDS] + [FILE_KEY_PATTERN]
    return "^(" + "|".join(alts) + r")\Z"


def key_ref_forms() -> str:
    """The accepted forms, for hints and help texts."""
    return ", ".join(info(n).key_scheme.example for n in CLOUDS) + " or file:/PATH"


def token_ref_forms() -> str:
    """Example references for a Hugging Face token, for hints and help texts."""
    return ", ".join(info(n).key_scheme.token_example for n in CLOUDS) + " or file:/PATH"


def key_ref_cloud(ref: str) -> str | None:
    """The cloud whose secret store ``ref`` names; None for a ``file:`` reference."""
    for n in CLOUDS:
        if ref.startswith(info(n).key_scheme.prefix):
            return n
    return None


def default_key_ref(provider: str) -> str | None:
    """The reference a deployment on ``provider`` uses when none is given (None: ask)."""
    return info(provider).key_scheme.default if provider in CLOUDS else None


def key_ref_for(provider: str, ref: str | None) -> str | None:
    """The reference an instance on ``provider`` reads its key from: ``ref`` when that cloud
    (or any host, for ``file:``) can resolve it, else the cloud's default; None when there is
    none. A reference of another cloud is never handed on (an instance cannot read it); a
    machine of no cloud (a catalog's private box) takes whatever it is given."""
    if ref is not None and (provider not in CLOUDS or key_ref_cloud(ref) in (None, provider)):
        return ref
    return default_key_ref(provider)


def secret_refs(provider: str, api_key_ref: str | None, hf_token_ref: str | None
                ) -> tuple[str, str | None] | None:
    """(API-key reference, Hugging Face token reference) an instance on ``provider`` reads, or
    None when it can read none of the key references given or not the token's. The key falls
    back to the cloud's default store; a token never does (it names one secret the user made)."""
    key = key_ref_for(provider, api_key_ref)
    token = key_ref_for(provider, hf_token_ref) if hf_token_ref is not None else None
    if key is None or token != hf_token_ref:
        return None
    return key, token


# -- provider options ------------------------------------------------------------------------
def options(command: str) -> list[tuple[str, CloudOption]]:
    """(cloud, option) for every option ``command`` offers, in registry order."""
    return [(c.name, o) for c in all_info() for o in c.options if command in o.commands]


def provider_options(values: dict[str, str | None]) -> dict[str, dict[str, str]]:
    """{cloud: {constructor keyword: value}} from flag values keyed by flag (``--project``)."""
    out: dict[str, dict[str, str]] = {n: {} for n in CLOUDS}
    for c in all_info():
        for opt in c.options:
            value = values.get(opt.flag)
            if value is not None:
                out[c.name][opt.key] = opt.check(value)
    return out


def check_image(image: str, provider: str | None) -> str:
    """``--image`` checked against ``provider``'s image pattern, or (no provider named) against
    every cloud's: a value no cloud could boot is refused before anything is called."""
    clouds = [info(provider)] if provider in CLOUDS else all_info()
    checks = [c.image for c in clouds if c.image is not None]
    if any(re.fullmatch(o.pattern, image) for o in checks):
        return image
    if len(checks) == 1:
        return checks[0].check(image)
    raise UserInputError(f"--image {image[:80]!r} is not an image any cloud names",
                         hint="; ".join(o.help for o in checks))


def credentials_error(provider: str, exc: BaseException) -> UserInputError | None:
    """A UserInputError (exit 2, with the cloud's hint) when ``exc`` says no credentials were
    found; None for any other failure."""
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    code = getattr(exc, "code", "")
    missing = {"NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError",
               "CredentialUnavailableError", "ClientAuthenticationError"}
    if code != "NoCredentials" and not names & missing:
        return None
    cloud = info(provider) if provider in CLOUDS else None
    detail = " ".join(str(getattr(exc, "detail", None) or exc).split())[:200]
    return UserInputError(f"{provider}: no credentials found ({detail})",
                          hint=(cloud.credentials_hint if cloud else None)
                          or "configure the cloud's credentials")


def user_data_payload(provider: str, text: str) -> bytes:
    """The user-data bytes a launch on ``provider`` sends (plain text for a provider advisor
    does not launch on)."""
    if provider not in CLOUDS:
        return text.encode()
    return info(provider).user_data_payload(text)


#: the line of templates/vllm-launch.sh that a cloud's secret fetch replaces
SECRET_FETCH_MARKER = "# @advisor-cloud-secret-fetch@"


def with_secret_fetch(launcher: str, provider: str) -> str:
    """The launcher with ``provider``'s secret-store reader (``clouds/<provider>/
    secret_fetch.sh``: a ``fetch_cloud_secret`` function and its helpers) put in at its marker
    line; for a provider advisor does not launch on, the launcher as it is (``file:`` only)."""
    if provider not in CLOUDS:
        return launcher
    from pathlib import Path

    module = importlib.import_module(f"advisor.clouds.{provider}")
    script = (Path(str(module.__file__)).parent / "secret_fetch.sh").read_text(encoding="utf-8")
    lines = launcher.split("\n")
    if lines.count(SECRET_FETCH_MARKER) != 1:
        raise RuntimeError("the launcher template has lost its secret-fetch marker line")
    return launcher.replace(SECRET_FETCH_MARKER, script.rstrip("\n"))
