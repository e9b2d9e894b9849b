"""The installed ``advisor`` as a user runs it: a real process, a real console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ADVISOR = shutil.which("advisor", path=str(Path(sys.executable).parent)) or shutil.which("advisor")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    assert ADVISOR, "the advisor console script is not installed in this environment"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    full_env.update(env or {})
    return subprocess.run([ADVISOR, *args], capture_output=True, text=True, timeout=120,
                          env=full_env, check=False)


def test_console_script_shows_an_instance_as_json():
    r = _run("catalog", "show", "aws:p4d.24xlarge", "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert (v["gpu"]["model"], v["gpu"]["count"]) == ("A100-40GB-SXM", 8)


def test_console_script_bad_input_is_one_line_and_exit_2():
    r = _run("catalog", "show", "aws:p9.huge")
    assert r.returncode == 2
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_python_dash_m_advisor_works():
    r = subprocess.run([sys.executable, "-m", "advisor", "catalog", "validate"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stderr


@pytest.mark.parametrize("module", ["advisor", "advisor.cli"])
def test_no_cloud_sdk_is_imported(module):
    code = (f"import sys, {module}; from advisor.cli import main; main(['catalog', 'list', "
            "'--json']); bad = [m for m in sys.modules if m.split('.')[0] in "
            "('boto3', 'botocore', 'azure', 'googleapiclient') or m.startswith('google.cloud')];"
            "print(bad, file=sys.stderr); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
