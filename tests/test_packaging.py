"""The wheel carries the catalog and templates, and a non-editable install finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, timeout=300)
    (whl,) = out.glob("advisor-*.whl")
    return whl


def test_wheel_holds_every_catalog_file_and_template(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((ROOT / "catalogs").rglob("*")) + sorted((ROOT / "templates").rglob("*")):
        if path.is_file():
            rel = path.relative_to(ROOT)
            assert f"advisor/_data/{rel.as_posix()}" in names, rel
    # each cloud's boot-time secret reader, which the rendered launcher carries
    for sh in sorted((ROOT / "src/advisor/clouds").glob("*/secret_fetch.sh")):
        assert sh.relative_to(ROOT / "src").as_posix() in names, sh
    assert len(list((ROOT / "src/advisor/clouds").glob("*/secret_fetch.sh"))) == 3


def _run_unpacked(code: str, root: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run by this Python with only the unpacked wheel at ``root`` importable."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=120)


def test_unpacked_wheel_loads_its_own_catalog(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path)
    code = ("import advisor, advisor.catalog.loader as l; c = advisor.load_catalog(); "
            "print(advisor.__file__); print(l.bundled_dir()); "
            "print(len(c.instances), len(c.models))")
    r = _run_unpacked(code, tmp_path)
    module_file, bundled, counts = r.stdout.strip().splitlines()
    assert module_file.startswith(str(tmp_path))
    assert bundled == str(tmp_path / "advisor" / "_data" / "catalogs")
    assert counts.split()[0] == str(len(list(_instance_names())))


def _instance_names():
    import yaml

    for f in (ROOT / "catalogs" / "instances").glob("*.yaml"):
        yield from (i["name"] for i in yaml.load(f.read_text(),  # noqa: S506
                                                  Loader=yaml.CSafeLoader)["instances"])


def test_wheel_holds_the_accuracy_summary(wheel, tmp_path):
    """advisor.core.confidence reads accuracy.json from the installed package."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    assert (tmp_path / "advisor" / "core" / "accuracy.json").is_file()
    code = ("from advisor.core.confidence import load, memory_confidence; "
            "print(sorted(load())); print(memory_confidence('Turing', 'llama', '0.11.0').short)")
    r = _run_unpacked(code, tmp_path)
    assert r.stdout.splitlines() == [
        "['expert_parallel', 'memory', 'schema_version', 'tpot', 'ttft']", "extrap."]


def test_wheel_holds_the_pinned_releases_architecture_list(wheel, tmp_path):
    """advisor.core.archs reads locks/vllm-<v>-architectures.json from the installed package:
    without it every model would be 'unknown' and render would deploy what vLLM cannot load."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    assert (tmp_path / "advisor" / "_data" / "locks" / "vllm-0.11.0-architectures.json").is_file()
    code = ("from advisor.core.archs import support; "
            "print(support(('MiniMaxM2ForCausalLM',), '0.11.0')[0]); "
            "print(support(('LlamaForCausalLM',), '0.11.0')[0])")
    r = _run_unpacked(code, tmp_path)
    assert r.stdout.splitlines() == ["refused", "native"]
