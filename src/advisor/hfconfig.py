"""Reading a model's ``config.json``: a path, or a repo id in the local Hugging Face cache.

The shell around :func:`advisor.core.model.spec_from_config`, which is pure. Nothing is
downloaded: advisor works offline.
"""

from __future__ import annotations

import json
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
    for root in _hf_cache_dirs():
        snaps = root / folder / "snapshots"
        if snaps.is_dir():
            hits = sorted(snaps.glob("*/config.json"), key=lambda p: p.stat().st_mtime)
            if hits:
                return hits[-1]
    return None


def read_config_file(path: Path) -> dict[str, Any]:
    if path.is_dir():
        path = path / "config.json"
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES or not path.is_file():
            raise ModelConfigError(f"{path}: not a config.json ("
                                   + (f"{size:,} bytes, more than {MAX_CONFIG_BYTES:,})"
                                      if path.is_file() else "not a regular file)"),
                                   hint="give the config.json a Hugging Face repo ships")
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelConfigError(f"{path}: no such file",
                               hint="give a catalog alias or the path of a config.json") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelConfigError(f"{path}: cannot read: {exc}") from exc
    except RecursionError as exc:
        raise ModelConfigError(f"{path}: nested too deeply to be a config.json") from exc
    except ValueError as exc:
        raise ModelConfigError(f"{path}: not valid JSON: {exc}",
                               hint="config.json must be the JSON file a Hugging Face repo ships"
                               ) from exc
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: not a JSON object")
    return data
