"""Issue 31: AMD Instinct GPUs (PCI class 0x1200, vendor 0x1002) are found by the probe and
mapped to their nodes; the catalog's PCI ids tell MI300X from MI325X; a GPU-vendor device of a
class advisor does not map is warned about, not skipped in silence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import advisor
from advisor.cli import app
from advisor.host.topology import probe

RUN = CliRunner()
#: an 8 x MI300X host laid out as the OAM platforms are: four GPUs per socket, one node each
BUSES = ["0000:05:00.0", "0000:15:00.0", "0000:65:00.0", "0000:75:00.0",
         "0000:85:00.0", "0000:95:00.0", "0000:e5:00.0", "0000:f5:00.0"]


def _tree(root: Path, device: str = "0x74a1", extra: list[tuple[str, str, str]] = ()) -> Path:
    for n, cpus in ((0, "0-47"), (1, "48-95")):
        d = root / "sys/devices/system/node" / f"node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
        (d / "meminfo").write_text(f"Node {n} MemTotal:       264000000 kB\n")
        (d / "distance").write_text("10 32\n" if n == 0 else "32 10\n")
    pci = root / "sys/bus/pci/devices"
    devices = [(b, "0x120000", "0x1002", device, 0 if i < 4 else 1)
               for i, b in enumerate(BUSES)]
    devices += [(b, cls, vendor, "0x0000", 0) for b, cls, vendor in extra]
    # what else an AMD GPU host shows: the GPU's PCIe bridge and the EPYC host bridge
    devices += [("0000:04:00.0", "0x060400", "0x1002", "0x14a0", 0),
                ("0000:00:00.0", "0x060000", "0x1022", "0x14a4", 0)]
    for bus, cls, vendor, dev, node in devices:
        d = pci / bus
        d.mkdir(parents=True)
        (d / "class").write_text(cls + "\n")
        (d / "vendor").write_text(vendor + "\n")
        (d / "device").write_text(dev + "\n")
        (d / "numa_node").write_text(f"{node}\n")
        (d / "local_cpulist").write_text(("0-47" if node == 0 else "48-95") + "\n")
    return root


def test_an_mi300x_host_shows_eight_gpus_on_their_nodes(tmp_path):
    topo = probe(_tree(tmp_path))
    assert [g.vendor for g in topo.gpus] == ["amd"] * 8
    assert [g.numa_node for g in topo.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [g.bus_id for g in topo.gpus] == BUSES  # the bridge and host bridge are not GPUs
    assert not topo.warnings
    assert advisor.local_gpu(sysfs_root=tmp_path)[0] == "MI300X"


def test_the_catalog_pci_ids_tell_mi325x_from_mi300x(tmp_path):
    assert advisor.local_gpu(sysfs_root=_tree(tmp_path, device="0x74a5"))[0] == "MI325X"


def test_a_gpu_like_device_of_an_unmapped_class_is_warned_about(tmp_path):
    root = _tree(tmp_path, extra=[("0000:c1:00.0", "0x0b4000", "0x10de")])
    topo = probe(root)
    assert len(topo.gpus) == 8
    assert any("0000:c1:00.0" in w and "0x0b40" in w and "not counted" in w
               for w in topo.warnings)
    out = RUN.invoke(app, ["topology", "--sysfs-root", str(root), "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert len(body["gpus"]) == 8 and any("looks like a GPU" in w for w in body["warnings"])


@pytest.mark.parametrize("target", ["local"])
def test_render_local_on_an_amd_host_is_refused_in_one_line(tmp_path, target):
    root = _tree(tmp_path / "host")
    res = RUN.invoke(app, ["render", "--model", "qwen3-8b", "--ctx", "4096", "--target", target,
                           "--sysfs-root", str(root), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "AMD" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists()
