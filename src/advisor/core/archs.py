"""Whether the vLLM release advisor deploys can load a model's architecture.

vLLM resolves ``config.json``'s ``architectures`` against its model registry at start-up
(vllm/model_executor/models/registry.py, ``_ModelRegistry.inspect_model_cls``): a native
implementation first; with ``--model-impl auto`` (the default) a class the installed
transformers defines itself and marks backend-compatible runs through vLLM's Transformers
backend; anything else stops the server with "Model architectures [...] are not supported for
now" (custom code in a config's ``auto_map`` needs --trust-remote-code, which advisor never
passes). Which names each set holds is read off the installed release by
``tools/vllm_architectures.py`` into ``locks/vllm-<version>-architectures.json`` (a lock test
checks the file against the installed vLLM): for vLLM 0.11.0, 213 native names and 260
through the Transformers backend. MiniMax-M2.5 (MiniMaxM2ForCausalLM) and Kimi-K2.5
(KimiK25ForConditionalGeneration) are in neither, so a server of the pinned release dies on
them however the instance is sized. Pure: reads one file shipped with advisor, no vLLM import.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from advisor.inputs import read_text

#: the shipped file is ~60 KB (the config-class defaults are most of it)
ARCHITECTURES_LIMIT = 256 * 1024

Support = Literal["native", "transformers", "refused", "unknown"]


def locks_dir() -> Path:
    """The locks shipped in the wheel (advisor/_data/locks), else the repository's locks/
    (advisor.render.envlock reads its locks from here too)."""
    packaged = Path(__file__).resolve().parents[1] / "_data" / "locks"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "locks"


@dataclass(frozen=True)
class Table:
    """One release's sets, read once per process (the ranking asks for every fit)."""

    native: frozenset[str]
    transformers_backend: frozenset[str]
    previously_supported: dict[str, str]
    model_types: frozenset[str]
    transformers: str
    #: model_type -> {key: the config class's default} for the geometry keys
    config_defaults: dict[str, dict[str, int | bool]]
    #: model_type -> {key: the name the config class stores it under} (attribute_map)
    config_aliases: dict[str, dict[str, str]]


@functools.lru_cache(maxsize=8)
def table(vllm_version: str) -> Table | None:
    """The architecture sets of vLLM ``vllm_version`` (None: advisor has no file for it)."""
    if not all(p.isdigit() for p in vllm_version.split(".")) or vllm_version.count(".") != 2:
        return None
    path = locks_dir() / f"vllm-{vllm_version}-architectures.json"
    if not path.is_file():
        return None
    data = json.loads(read_text(path, limit=ARCHITECTURES_LIMIT, what="architecture list"))
    if not isinstance(data, dict):
        return None
    return Table(native=frozenset(data.get("native") or ()),
                 transformers_backend=frozenset(data.get("transformers_backend") or ()),
                 previously_supported=dict(data.get("previously_supported") or {}),
                 model_types=frozenset(data.get("model_types") or ()),
                 transformers=str(data.get("transformers", "?")),
                 config_defaults=_nested(data.get("config_defaults"), (int, bool)),
                 config_aliases=_nested(data.get("config_aliases"), (str,)))


def _nested(value: object, kinds: tuple[type, ...]) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict):
        return {}
    return {str(t): {str(k): v for k, v in d.items() if isinstance(v, kinds)}
            for t, d in value.items() if isinstance(d, dict)}


def config_geometry(model_type: str) -> tuple[dict[str, int | bool], dict[str, str]]:
    """(defaults, renames) of the config class the deployed release reads a ``model_type``
    config with (the default vLLM's file; the class defaults are its transformers' and its own
    config classes'): empty where advisor has no file or no entry."""
    from advisor.core.defaults import DEFAULT_VLLM_VERSION

    t = table(DEFAULT_VLLM_VERSION)
    if t is None or not model_type:
        return {}, {}
    return t.config_defaults.get(model_type, {}), t.config_aliases.get(model_type, {})


def support(architectures: Sequence[str], vllm_version: str,
            model_type: str = "") -> tuple[Support, str | None]:
    """How vLLM ``vllm_version`` loads a model whose config names ``architectures`` and
    ``model_type``: "native"; "transformers" (its Transformers backend, with a note why that
    matters); "refused" (with why); "unknown" (no architectures given, or no file for that
    release). A config of a model type neither vLLM nor transformers has a class for is
    refused whatever its architecture: vLLM reads it without --trust-remote-code, which advisor
    never passes, and stops with "Failed to load the model config" (Kimi-K2's kimi_k2)."""
    t = table(vllm_version)
    if t is None or not architectures:
        return "unknown", None
    kind, why = _by_architecture(t, architectures, vllm_version)
    if kind != "refused" and model_type and t.model_types and model_type not in t.model_types:
        return "refused", (
            f"vLLM {vllm_version} cannot read a {model_type} config: neither vLLM nor "
            f"transformers {t.transformers} has its config class, and advisor never passes "
            "--trust-remote-code (\"Failed to load the model config\")")
    return kind, why


def _by_architecture(t: Table, architectures: Sequence[str],
                     vllm_version: str) -> tuple[Support, str | None]:
    if any(a in t.native for a in architectures):
        return "native", None
    names = ", ".join(architectures)
    # vLLM tries the Transformers backend for the first architecture only
    if architectures[0] in t.transformers_backend:
        return "transformers", (
            f"vLLM {vllm_version} has no implementation of {names}: it runs it through its "
            f"Transformers backend (transformers {t.transformers}), slower than the native "
            "kernels these figures assume")
    last = next((t.previously_supported[a] for a in architectures
                 if a in t.previously_supported), None)
    if last is not None:
        return "refused", (f"vLLM {vllm_version} no longer loads {names} (\"supported in "
                           f"vLLM until v{last}\")")
    return "refused", (f"vLLM {vllm_version} cannot load {names}: not in its model registry, "
                       "nor a transformers class its Transformers backend runs (\"Model "
                       "architectures [...] are not supported for now\")")


def model_risk(architectures: Sequence[str], vllm_version: str,
               model_type: str = "") -> str | None:
    """The line every offer of such a model carries (recommend's risks, plan's footer): None
    where the release loads it natively or advisor has no rule."""
    kind, why = support(architectures, vllm_version, model_type)
    return f"not deployable by advisor: {why}" if kind == "refused" else why
