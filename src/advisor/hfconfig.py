"""Reading a model's ``config.json``: a path, or a repo id in the local Hugging Face cache.

The shell around :func:`advisor.core.model.spec_from_config`, which is pure. Nothing is
downloaded: advisor works offline.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from advisor.errors import ModelConfigError

#: the largest config.json read (the biggest public ones, with quantization tables, are ~100 KiB)
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def _hf_cache_dirs() -> list[Path]:
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return [Path(env["HF_HUB_CACHE"])]
    home = Path(env.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    return [home / "hub"]


def find_in_hf_cache(repo_id: str) -> Path | None:
    """``config.json`` of ``owner/name`` in the local Hugging Face cache, newest snapshot."""
    folder = "models--" + repo_id.replace("/", "--")
    if len(repo_id) > 200:  # Hugging Face repo ids are at most 96 characters a part
        return None
    for root in _hf_cache_dirs():
        snaps = root / folder / "snapshots"
        try:
            if snaps.is_dir():
                hits = sorted(snaps.glob("*/config.json"), key=lambda p: p.stat().st_mtime)
                if hits:
                    return hits[-1]
        except OSError:  # an unreadable cache is a cache without the repo
            continue
    return None


def read_config_file(path: Path) -> dict[str, Any]:
    """A config.json, bounded (:mod:`advisor.inputs`): a regular file of at most
    :data:`MAX_CONFIG_BYTES`, JSON nested at most 64 deep, holding an object."""
    from advisor.errors import UserInputError
    from advisor.inputs import read_json

    hint = "give a catalog alias or the config.json a Hugging Face repo ships"
    try:
        if path.is_dir():
            path = path / "config.json"
    except (OSError, ValueError) as exc:
        raise ModelConfigError(f"{str(path)[:120]}: cannot read: "
                               f"{getattr(exc, 'strerror', None) or exc}", hint=hint) from exc
    try:
        data = read_json(path, limit=MAX_CONFIG_BYTES, what="", hint=hint)
    except UserInputError as exc:
        raise ModelConfigError(exc.message, hint=exc.hint) from exc
    if not isinstance(data, dict):
        raise ModelConfigError(f"{str(path)[:120]}: not a JSON object", hint=hint)
    return data
