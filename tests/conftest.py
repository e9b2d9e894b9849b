"""Shared helpers: a throw-away catalog directory and a CLI runner that keeps stderr apart."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
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

#: where the serial groups are handed out: after the tests under these folders (the fault
#: sweeps, the hostile corpus, the providers' moto runs: about 60% of the suite's time). xdist's
#: load scheduling by default hands the largest group out first, and the boot group's first
#: test waits for the root .ci/run builds in the background (53 s here on 2026-12-08, 1-3 min
#: on a slow mirror, while the venv installs): that worker sat idle and the other ran the suite
#: alone. Handed out later, the root is there when the group starts, and the other worker still
#: has tests to run beside it.
SERIAL_AFTER = ("providers/",)


def serial_groups_placed(rels: list[str]) -> list[int]:
    """The run order (indices into ``rels``, test paths relative to tests/, in collection
    order): the serial groups' tests moved, in their own order, to just after the last test
    under SERIAL_AFTER (to the end where there is none); the rest keeps its order."""
    serial = [i for i, r in enumerate(rels) if r.startswith(tuple(SERIAL_GROUPS))]
    rest = [i for i, r in enumerate(rels) if not r.startswith(tuple(SERIAL_GROUPS))]
    after = [n for n, i in enumerate(rest) if rels[i].startswith(SERIAL_AFTER)]
    at = after[-1] + 1 if after else len(rest)
    return rest[:at] + serial + rest[at:]


@pytest.hookimpl(optionalhook=True)  # xdist's hook: no error where xdist is not installed
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the CPUs this process may run on. Many tests wait
    rather than compute (for a moto server, an advisor subprocess, a container's boot, a
    stalled endpoint's timeout); measured on this 2-CPU machine on 2026-12-08, the whole suite
    took 4 min 37 s with 2 workers, 3 min 52 s with 3 and 4 min 0 s with 4."""
    import os

    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return cpus + 1


def pytest_configure(config: pytest.Config) -> None:
    # in collection order (as serial_groups_placed leaves it), not largest group first
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


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




# tryfirst: before xdist's own hook, which names each test's group from the marks it finds
# then. Called after it, as until 2026-12-08, no test had a group and the boot tests ran on any
# worker at once (found with tests/test_boot_root_wait.py; pytest 9.2 broke the grouping as
# well, hence pyproject's pin)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    rels = [Path(str(item.path)).relative_to(here).as_posix() for item in items]
    for item, rel in zip(items, rels, strict=True):
        if rel.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        for prefix, group in SERIAL_GROUPS.items():
            if rel.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))
    items[:] = [items[i] for i in serial_groups_placed(rels)]


def _client_classes_built_once() -> None:
    """botocore builds a client's class anew for every client it makes (a method for each of
    the service's operations: ~20 ms for EC2's ~700), and a real advisor process makes a few.
    The suite makes ~1,800 in-process against moto (a fresh provider per crash point of the
    fault sweeps, per test): counted on 2026-12-08, their classes took 37 of the 51 s those
    clients cost. The class depends only on the service's model (its methods call the
    instance's own _make_api_call; the session, region, endpoint and event hooks are the
    instance's), so each worker builds it once per service and API version; every client is
    still made, configured and hooked as advisor makes it. Called once per worker, by the
    moto_url fixture."""
    from botocore.client import ClientCreator

    build = ClientCreator._create_client_class
    built: dict[tuple[str, str], type] = {}

    def once(self: ClientCreator, service_name: str, service_model: object) -> type:
        key = (service_name, str(getattr(service_model, "api_version", "")))
        if key not in built:
            built[key] = build(self, service_name, service_model)
        return built[key]

    ClientCreator._create_client_class = once  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """One moto server on 127.0.0.1 per worker for every test that talks to AWS (tests/providers,
    tests/faults, the lease races): each was its own session fixture, so a worker that ran all
    three started three servers (~2.5 s of CPU each). Tests in a worker run one after another,
    and each resets the server before it uses it (the ``aws`` fixture, the fault sweeps)."""
    from tests.providers.conftest import moto_server  # skips where boto3 or moto is missing

    _client_classes_built_once()  # only the processes that talk to moto import botocore
    with moto_server() as url:
        yield url


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
