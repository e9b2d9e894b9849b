"""What start-up loads: ``import advisor`` and every ``--help`` stay clear of the catalog, the
models, yaml, jinja2, rich and the cloud SDKs; a command loads its own module only.

Each check runs in a new interpreter and looks at ``sys.modules``: no timing, so it holds on a
slow machine too (``benchmarks/bench_startup.py`` measures the time).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: never loaded by ``import advisor`` or any ``--help``
HEAVY = ("yaml", "jinja2", "rich", "boto3", "botocore", "azure", "googleapiclient",
         "google.cloud")
#: advisor modules --help has no use for: the catalog, the pydantic models, what they drive
MODEL_MODULES = ("advisor.catalog", "advisor.api", "advisor.state", "advisor.provisioning",
                 "advisor.render", "advisor.host", "advisor.hfconfig", "advisor.clouds.base",
                 "advisor.clouds.refresh")
#: of advisor.core, --help reads only the constants of advisor.core.defaults
CORE_ALLOWED = ("advisor.core", "advisor.core.defaults")

COMMANDS = ["fit", "perf", "recommend", "plan", "topology", "render", "provision", "status",
            "down", "ticket", "catalog", "models"]
SUBCOMMANDS = [["catalog", "list"], ["catalog", "show"], ["catalog", "validate"],
               ["catalog", "refresh"], ["catalog", "topology"], ["models", "list"],
               ["models", "show"]]


def _modules_after(code: str, env: dict[str, str] | None = None) -> list[str]:
    """The modules a new interpreter holds after running ``code`` (stdout goes nowhere)."""
    script = ("import contextlib, io, json, sys\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              + "".join(f"    {line}\n" for line in code.splitlines())
              + "print(json.dumps(sorted(sys.modules)))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, check=False, env=env)
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout.strip().splitlines()[-1]))


def _matches(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def _too_heavy(modules: list[str]) -> list[str]:
    core = [m for m in _matches(modules, ("advisor.core",)) if m not in CORE_ALLOWED]
    return _matches(modules, HEAVY) + _matches(modules, MODEL_MODULES) + core


def test_import_advisor_loads_nothing_heavy():
    mods = _modules_after("import advisor")
    assert _too_heavy(mods) == []
    assert _matches(mods, ("pydantic", "typer", "advisor.cli")) == []


def test_import_advisor_cli_loads_no_command():
    mods = _modules_after("import advisor.cli")
    assert _too_heavy(mods) == []
    assert _matches(mods, ("advisor.cli",)) == ["advisor.cli"]


def test_root_help_loads_no_model_module_and_no_rich():
    mods = _modules_after("from advisor.cli import main\nassert main(['--help']) == 0")
    assert _too_heavy(mods) == []
    assert "advisor.cli.recommend" in mods  # help lists every command


def test_every_command_help_loads_no_model_module():
    calls = [[c, "--help"] for c in COMMANDS] + [[*s, "--help"] for s in SUBCOMMANDS]
    code = "from advisor.cli import main\n" + "".join(
        f"assert main({c!r}) == 0, {c!r}\n" for c in calls)
    assert _too_heavy(_modules_after(code)) == []


def test_a_command_loads_only_its_own_module():
    mods = _modules_after("from advisor.cli import main\nmain(['models', '--help'])")
    assert _matches(mods, ("advisor.cli",)) == [
        "advisor.cli", "advisor.cli.common", "advisor.cli.models", "advisor.cli.output"]


def test_recommend_json_with_a_warm_cache_reads_no_yaml_and_no_rich(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("ADVISOR_CATALOG_DIR", "ADVISOR_NO_CACHE")}
    env["ADVISOR_HOME"] = str(tmp_path)
    code = ("from advisor.cli import main\n"
            "assert main(['recommend', '--model', 'llama-3-8b', '--ctx', '8192', '--json']) == 0")
    cold = _modules_after(code, env)
    assert "yaml" in cold  # the first run parses the catalog and stores it
    warm = _modules_after(code, env)
    assert _matches(warm, ("yaml", "rich", "jinja2")) == []
    assert _matches(warm, HEAVY) == []


@pytest.mark.parametrize("argv,expected", [
    (["recommend", "--model", "x"], "recommend"),
    (["--debug", "catalog", "list"], "catalog"),
    (["--help"], None),
    (["--version"], None),
    ([], None),
    (["recomend"], None),  # a typo: the whole CLI answers, with its suggestions
    (["-h", "recommend"], None),
])
def test_which_command_a_run_loads(argv, expected):
    from advisor.cli import _command_of

    assert _command_of(argv) == expected


@pytest.mark.parametrize("argv", [[c, "--help"] for c in COMMANDS]
                         + [[*s, "--help"] for s in SUBCOMMANDS])
def test_help_of_one_command_is_what_the_whole_cli_prints(argv):
    from typer.testing import CliRunner

    from advisor.cli import _make_app

    runner = CliRunner()
    alone = runner.invoke(_make_app([argv[0]]), argv, prog_name="advisor")
    whole = runner.invoke(_make_app(), argv, prog_name="advisor")
    assert alone.exit_code == whole.exit_code == 0
    assert alone.stdout == whole.stdout


@pytest.mark.parametrize("argv", [[], ["catalog"], ["models"]])
def test_a_group_without_a_command_prints_its_help(argv, capsys):
    from advisor.cli import main

    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("Usage: advisor") and "Commands:" in captured.out
    assert captured.err == ""


@pytest.mark.parametrize("argv", [["--help"], ["-h"], [], ["--version"], ["recomend"],
                                  ["--debug"], ["--nope"]])
def test_a_run_without_a_command_answers_as_the_whole_cli(argv):
    from typer.testing import CliRunner

    from advisor.cli import _make_app

    runner = CliRunner()
    summary = runner.invoke(_make_app(summary=True), argv, prog_name="advisor")
    whole = runner.invoke(_make_app(), argv, prog_name="advisor")
    assert (summary.exit_code, summary.stdout, summary.stderr) == \
        (whole.exit_code, whole.stdout, whole.stderr)
