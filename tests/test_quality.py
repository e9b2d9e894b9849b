"""The code base stays lint-clean and type-checks; CI runs these with the rest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)


def test_ruff_is_clean():
    r = _tool("ruff", "check", "src", "tests", "benchmarks", "examples")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean():
    r = _tool("mypy")
    assert r.returncode == 0, r.stdout + r.stderr
