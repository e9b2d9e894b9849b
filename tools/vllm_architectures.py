#!/usr/bin/env python3
"""Write which model architectures the pinned vLLM can load (locks/vllm-<v>-architectures.json).

Why: render and provision deploy the vLLM release of a lock. A model whose config.json names an
architecture that release does not know (MiniMax-M2.5's MiniMaxM2ForCausalLM, Kimi-K2.5's
KimiK25ForConditionalGeneration in vLLM 0.11.0) is refused at start-up ("Model architectures
[...] are not supported for now": vllm/model_executor/models/registry.py,
_ModelRegistry._raise_for_unsupported), so every replica would crash-loop. advisor reads this
file instead of importing vLLM.

How: run it with the Python of a venv the lock was installed into (tools/prove_lock.sh builds
one); it imports the installed vLLM's registry and the installed transformers, on the CPU, with
no network. Three sets:
- ``native``: vLLM's own implementations (registry._VLLM_MODELS, the keys ModelRegistry
  resolves first);
- ``transformers_backend``: classes the installed transformers defines itself whose
  ``is_backend_compatible()`` is true — vLLM 0.11.0 falls back to its Transformers backend for
  them (_ModelRegistry._try_resolve_transformers with model_impl "auto"; slower than native);
- ``previously_supported``: architectures the release names as removed, with the last release
  that had them (registry._PREVIOUSLY_SUPPORTED_MODELS);
- ``model_types``: the config.json model types the server reads without --trust-remote-code
  (vLLM's own config classes and transformers' AutoConfig): another one stops it with "Failed
  to load the model config" (Kimi-K2's kimi_k2, whose architecture vLLM has).
- ``config_defaults`` and ``config_aliases``: per model type, what the config class the server
  reads the config with supplies when config.json leaves a geometry key out (its __init__
  defaults: Falcon and GPTBigCode are multi-query unless told otherwise, LlamaConfig's
  max_position_embeddings is 2048) and which keys it renames (attribute_map: GPTBigCode's
  max_position_embeddings is n_positions); whether an unstated tie_word_embeddings ties the
  output head (PretrainedConfig says yes, LlamaConfig no). vLLM reads KV heads, head size and
  the longest max_model_len off that object (vllm/config/model.py get_total_num_kv_heads,
  get_head_size, _get_and_verify_max_len), so advisor's sizer reads config.json through the
  same table.
Custom code (a config's ``auto_map``) needs --trust-remote-code, which advisor never passes.

Usage:
    /var/tmp/advisor-lock/venv-<key>/bin/python tools/vllm_architectures.py --write
    /var/tmp/advisor-lock/venv-<key>/bin/python tools/vllm_architectures.py --check
(tests/test_lock_install.py runs --print in both lock venvs and compares.)
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


#: the config keys vLLM 0.11.0 reads the KV geometry and the longest context from
#: (vllm/config/model.py: _get_and_verify_max_len's possible_keys, get_total_num_kv_heads,
#: get_head_size); advisor.core.model reads the same ones
GEOMETRY_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length",
                 "max_seq_length", "seq_len", "multi_query", "new_decoder_architecture",
                 "n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                 "head_dim", "hidden_size_per_head", "num_attention_heads", "hidden_size",
                 "num_hidden_layers",
                 # Qwen3-Next's Gated DeltaNet layers: their recurrent state per sequence
                 # (qwen3_next.py get_mamba_state_shape_from_config) and their weights
                 "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                 "linear_value_head_dim", "linear_conv_kernel_dim",
                 # Granite 4.0-H's Mamba-2 layers (granitemoehybrid.py
                 # get_mamba_state_shape_from_config, MambaMixer2) and its shared MLP
                 "mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_conv",
                 "mamba_expand", "mamba_conv_bias", "mamba_proj_bias",
                 "shared_intermediate_size",
                 # Jamba's layer pattern and Mamba state (jamba.py, MambaMixer)
                 "attn_layer_period", "attn_layer_offset", "expert_layer_period",
                 "expert_layer_offset")


def config_classes() -> dict[str, type]:
    """model_type -> the class the server parses that config.json with: vLLM's own first
    (transformers_utils/config.py _CONFIG_REGISTRY, names of vllm.transformers_utils.configs),
    then transformers' AutoConfig mapping (HFConfigParser.parse)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.transformers_utils import configs
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    out: dict[str, type] = {}
    for model_type in sorted(set(CONFIG_MAPPING.keys()) | set(_CONFIG_REGISTRY)):
        cls = _CONFIG_REGISTRY.get(model_type)
        if isinstance(cls, str):
            cls = getattr(configs, cls, None)
        if cls is None:
            try:
                cls = CONFIG_MAPPING[model_type]
            except Exception:  # noqa: BLE001 - a class whose module needs an optional extra
                continue
        if isinstance(cls, type):
            out[model_type] = cls
    return out


def geometry_defaults() -> tuple[dict[str, dict[str, object]], dict[str, dict[str, str]]]:
    """Per model type: the geometry keys' __init__ defaults (int or bool, not None), and the
    attribute_map renames that touch a geometry key."""
    defaults: dict[str, dict[str, object]] = {}
    aliases: dict[str, dict[str, str]] = {}
    for model_type, cls in config_classes().items():
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            continue
        found = {k: p.default for k in GEOMETRY_KEYS if (p := params.get(k)) is not None
                 and isinstance(p.default, (int, bool)) and not isinstance(p.default, float)}
        # only the keys that decide KV heads, head size and length; the dimensions a config
        # always states (heads, hidden, layers) are kept out unless they are renamed
        found = {k: v for k, v in found.items()
                 if k not in ("num_attention_heads", "hidden_size", "num_hidden_layers")}
        tie = _tie_default(cls, params)
        if tie is not None:
            found["tie_word_embeddings"] = tie
        if found:
            defaults[model_type] = dict(sorted(found.items()))
        amap = getattr(cls, "attribute_map", None) or {}
        renamed = {str(a): str(t) for a, t in amap.items()
                   if a in GEOMETRY_KEYS or t in GEOMETRY_KEYS}
        if renamed:
            aliases[model_type] = dict(sorted(renamed.items()))
    return defaults, aliases


def _tie_default(cls: type, params: Mapping[str, inspect.Parameter]) -> bool | None:
    """Whether a config of this class that does not say ties its output head to the input
    embedding: the value a default instance holds (PretrainedConfig's default is True; many
    classes pass False), else the __init__ default; None where neither can be read."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            value = cls().tie_word_embeddings
    except Exception:  # noqa: BLE001 - classes that need arguments or optional extras
        p = params.get("tie_word_embeddings")
        value = p.default if p is not None else None
    return value if isinstance(value, bool) else None


def collect() -> dict[str, object]:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    import transformers
    import vllm
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.model_executor.models import registry
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    native = sorted(registry._VLLM_MODELS)
    defaults, aliases = geometry_defaults()
    names: set[str] = set()
    for attr in dir(modeling_auto):
        table = getattr(modeling_auto, attr)
        named = attr.startswith("MODEL_") and attr.endswith("_MAPPING_NAMES")
        if named and isinstance(table, dict):
            for value in table.values():
                names.update([value] if isinstance(value, str) else value)
    backend = []
    for name in sorted(names - set(native)):
        try:
            cls = getattr(transformers, name, None)
        except Exception:  # noqa: BLE001 - a class whose module needs an optional extra
            cls = None
        check = getattr(cls, "is_backend_compatible", None)
        if check is not None and check():
            backend.append(name)
    return {
        "vllm": vllm.__version__,
        "transformers": transformers.__version__,
        "source": ("vllm/model_executor/models/registry.py (_VLLM_MODELS, "
                   "_PREVIOUSLY_SUPPORTED_MODELS, _try_resolve_transformers) and "
                   "transformers' modeling_auto *_MAPPING_NAMES, as installed from the lock"),
        "generated_by": "python tools/vllm_architectures.py --write (in a lock venv)",
        "native": native,
        "transformers_backend": backend,
        "previously_supported": dict(sorted(registry._PREVIOUSLY_SUPPORTED_MODELS.items())),
        # the config.json model types the server can read without --trust-remote-code:
        # vLLM's own config classes first (transformers_utils/config.py _CONFIG_REGISTRY), then
        # transformers' AutoConfig (HFConfigParser.parse)
        "model_types": sorted(set(CONFIG_MAPPING_NAMES) | set(_CONFIG_REGISTRY)),
        "config_defaults": defaults,
        "config_aliases": aliases,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the file")
    mode.add_argument("--check", action="store_true", help="exit 1 when the file differs")
    mode.add_argument("--print", action="store_true", help="print the JSON, write nothing")
    args = ap.parse_args()
    with contextlib.redirect_stdout(sys.stderr):  # transformers prints while importing
        data = collect()
    text = json.dumps(data, indent=1) + "\n"
    path = REPO / "locks" / f"vllm-{data['vllm']}-architectures.json"
    if args.print:
        sys.stdout.write(text)
        return 0
    if args.check:
        same = path.is_file() and path.read_text() == text
        print(f"{path.name}: {'up to date' if same else 'STALE: rerun with --write'}")
        return 0 if same else 1
    path.write_text(text)
    print(f"wrote {path} ({len(data['native'])} native, "  # type: ignore[arg-type]
          f"{len(data['transformers_backend'])} through the Transformers backend)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
