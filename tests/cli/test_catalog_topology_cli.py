"""``advisor catalog topology``: print the NUMA fragment of an NCCL topology file, or write it
into a catalog's instances file in place (on a copy of tests/fixtures/catalog-small)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "catalog-small"

#: two L40S on two NUMA nodes, each behind its own switch with a NIC (hand-written)
TWO_GPUS = """<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD" familyid="25" modelid="17">
    <pci busid="ffff:ff:01.0" class="0x060400">
      <pci busid="0000:41:00.0" class="0x030200"/>
      <pci busid="0000:42:00.0" class="0x020000"/>
    </pci>
  </cpu>
  <cpu numaid="1" arch="x86_64" vendor="AuthenticAMD" familyid="25" modelid="17">
    <pci busid="ffff:ff:02.0" class="0x060400">
      <pci busid="0000:c1:00.0" class="0x030200"/>
      <pci busid="0000:c2:00.0" class="0x020000"/>
    </pci>
  </cpu>
</system>
"""
SRC = "https://example.org/topo/two-gpus.xml"


@pytest.fixture
def topo_file(tmp_path: Path) -> Path:
    p = tmp_path / "two-gpus.xml"
    p.write_text(TWO_GPUS, encoding="utf-8")
    return p


@pytest.fixture
def small_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "catalog-small"
    shutil.copytree(FIXTURE, dst)
    return dst


def _args(file: Path, instance: str, *more: str) -> list[str]:
    return ["catalog", "topology", str(file), "--instance", instance, "--source", SRC,
            "--as-of", "2024-05-06", *more]


def test_prints_a_fragment_that_loads(cli, topo_file):
    r = cli(*_args(topo_file, "lab:unknown", "--catalog", str(FIXTURE)))
    assert r.exit_code == 0, r.output
    body = yaml.safe_load(r.stdout)
    assert body["numa"] == {"nodes": 2, "gpu_nodes": [0, 1]}
    assert body["host"]["pcie_switches"] == [{"gpus": [0], "nics": ["0000:42:00.0"]},
                                             {"gpus": [1], "nics": ["0000:c2:00.0"]}]
    prov = body["sources"]["numa"]
    assert prov["source"] == SRC and prov["as_of"] == "2024-05-06"
    assert prov["confidence"] == "documented" and "amd CPU family 25 model 17" in prov["note"]
    assert r.stdout.startswith("# lab:unknown")


def test_write_updates_one_entry_and_keeps_the_rest_byte_identical(cli, topo_file, small_copy):
    path = small_copy / "instances" / "lab.yaml"
    before = path.read_text(encoding="utf-8")
    r = cli(*_args(topo_file, "lab:unknown", "--confidence", "measured", "--write",
                   "--catalog", str(small_copy)))
    assert r.exit_code == 0, r.output
    after = path.read_text(encoding="utf-8")
    start = before.index("  - name: unknown\n")
    end = before.index("  - name: partial\n")
    assert after.startswith(before[:start]) and after.endswith(before[end:])
    assert after != before
    entry = next(e for e in yaml.safe_load(after)["instances"] if e["name"] == "unknown")
    assert entry["numa"] == {"nodes": 2, "gpu_nodes": [0, 1]}
    assert entry["sources"]["numa"]["confidence"] == "measured"
    assert entry["sources"]["default"] == {"source": "test fixture",
                                           "as_of": yaml.safe_load("d: 2026-12-03")["d"]}
    # the written entry validates, with the map and the switches
    from advisor.catalog.schema import InstanceType

    inst = InstanceType.model_validate({"provider": "lab", **entry})
    assert inst.numa.gpu_nodes == [0, 1] and inst.host.pcie_switches is not None
    assert inst.host.pcie_switches[1].gpus == [1]
    # running it again changes nothing
    r = cli(*_args(topo_file, "lab:unknown", "--confidence", "measured", "--write",
                   "--catalog", str(small_copy)))
    assert r.exit_code == 0 and path.read_text(encoding="utf-8") == after


def test_a_gpu_count_that_differs_is_refused_and_nothing_written(cli, topo_file, small_copy):
    path = small_copy / "instances" / "lab.yaml"
    before = path.read_text(encoding="utf-8")
    r = cli(*_args(topo_file, "lab:eight", "--write", "--catalog", str(small_copy)))
    assert r.exit_code == 2
    assert "has 2 GPUs" in r.stderr and "has 8" in r.stderr
    assert path.read_text(encoding="utf-8") == before


@pytest.mark.parametrize("extra, words", [
    (["--as-of", "yesterday"], "not a date"),
    (["--write"], "exactly one --catalog"),  # none given: nothing to write into
    (["--infer-gpus", "--catalog", str(FIXTURE)], "names its GPUs"),
    (["--instance", "lab", "--catalog", str(FIXTURE)], "not PROVIDER:TYPE"),
])
def test_bad_options_are_one_line_errors(cli, topo_file, extra, words):
    r = cli(*_args(topo_file, "lab:unknown"), *extra)
    assert r.exit_code == 2
    assert words in r.stderr and "Traceback" not in r.stderr


def test_a_doctype_file_is_refused(cli, tmp_path):
    p = tmp_path / "evil.xml"
    p.write_text('<!DOCTYPE x [<!ENTITY a "b">]><system>&a;</system>', encoding="utf-8")
    r = cli(*_args(p, "lab:unknown", "--catalog", str(FIXTURE)))
    assert r.exit_code == 2 and "DOCTYPE" in r.stderr
