"""Shared helpers: a throw-away catalog directory and a CLI runner that keeps stderr apart."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from advisor.cli import app

#: the slow tier, by path (relative to tests/): whole folders or files whose tests take
#: minutes together (moto fault sweeps, lease races, booted containers, the hostile corpus's
#: hundreds of CLI runs, the real lock install). `pytest -m "not slow"` leaves them out.
SLOW = ("faults/", "boot/", "hostile/", "test_name_lock.py", "test_lock_install.py")


#: suites that share something outside tmp_path (the booted containers: fixed ports on the host
#: network, one cached root and install layer): under ``-n`` (pytest-xdist, ``--dist loadgroup``)
#: each runs whole in one worker, one test after the other
SERIAL_GROUPS = {"boot/": "boot"}


def _command_built_once() -> None:
    """typer's CliRunner turns the app into its click command on every ``invoke`` (37 ms here:
    every command's signature is read again), which a real ``advisor`` process does once. The
    suite makes hundreds of in-process runs, so the advisor app's command is built once per
    worker and reused; click builds a fresh context for each run, and nothing in advisor's
    commands is decided when the command is built (the cloud options are added at import)."""
    import typer.main
    import typer.testing

    build = typer.main.get_command
    command = build(app)
    typer.testing._get_command = (
        lambda typer_instance: command if typer_instance is app else build(typer_instance))


_command_built_once()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        rel = Path(str(item.path)).relative_to(here).as_posix()
        if rel.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        for prefix, group in SERIAL_GROUPS.items():
            if rel.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def _warm_catalog_cache(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The bundled catalog's cache file (advisor.catalog.cache), written once per worker: the
    cache is keyed by every catalog file's bytes and the loader's code, so a copy of it is
    what each test's own first load would write."""
    import advisor

    home = tmp_path_factory.mktemp("warm-catalog-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADVISOR_HOME", str(home))
        advisor.load_catalog()
    return sorted((home / "cache").glob("*.pickle"))


@pytest.fixture(autouse=True)
def _own_advisor_home(tmp_path_factory: pytest.TempPathFactory,
                      monkeypatch: pytest.MonkeyPatch,
                      _warm_catalog_cache: list[Path]) -> None:
    """Each test's state file and catalog cache in its own ADVISOR_HOME, never the user's: tests
    run in parallel workers, and none may read what another (or the user) left behind. Tests
    that are about ADVISOR_HOME itself set or unset it again. The home's cache starts with a
    link to this worker's cache file of the bundled catalog (every command's first step; a
    cold cache re-parsed the catalog's YAML in each test, half the hostile corpus's time); the
    cache replaces a file by renaming, never writes into one, so the shared file stays as it
    was written."""
    import os

    home = tmp_path_factory.mktemp("advisor-home")
    (home / "cache").mkdir()
    for f in _warm_catalog_cache:
        try:
            os.link(f, home / "cache" / f.name)
        except OSError:  # another filesystem: a copy
            (home / "cache" / f.name).write_bytes(f.read_bytes())
    monkeypatch.setenv("ADVISOR_HOME", str(home))
    # pytest-xdist's workers export COLUMNS=80 (a serial run has none): the CLI's tables and
    # one-line errors would wrap differently in the two; a test that means a width sets it
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)

#: a minimal, valid user catalog entry: one private box with a GPU of the bundled catalog
PRIVATE_BOX = """
    schema_version: 1
    provider: onprem
    instances:
      - name: lab-box-1
        vcpus: 64
        memory_gib: 512
        gpu: {model: L40S, count: 2}
        cpu: {model: AMD EPYC 9R14, sockets: 1}
        numa: {nodes: 1, gpu_nodes: [0, 0]}
        price: {on_demand_usd_per_hour: 1.5, region: lab, as_of: 2026-11-30}
        sources:
          default:
            source: "our own lscpu and nvidia-smi topo -m"
            as_of: 2026-11-30
            confidence: measured
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


@pytest.fixture
def make_catalog(tmp_path: Path) -> Callable[..., Path]:
    """``make_catalog({"instances/x.yaml": "...", ...})`` -> a user catalog directory."""
    counter = iter(range(1000))

    def make(files: dict[str, str], name: str | None = None) -> Path:
        root = tmp_path / (name or f"cat{next(counter)}")
        root.mkdir()
        return _write(root, files)

    return make


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Run the CLI in-process with a clean environment; stdout and stderr stay apart."""
    monkeypatch.delenv("ADVISOR_CATALOG_DIR", raising=False)
    monkeypatch.delenv("ADVISOR_DEBUG", raising=False)
    runner = CliRunner()

    def run(*args: str, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(app, list(args), env=env)

    return run
