"""The sysfs probe on fake trees, the printout parsers on real (cited) printouts, and compare()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor import UserInputError
from advisor.host.topology import (
    compare,
    gpu_nodes,
    parse_cpulist,
    parse_numactl,
    parse_nvidia_smi_topo,
    probe,
)

FIX = Path(__file__).parent / "fixtures" / "topology"
CAT = advisor.load_catalog()


def make_sysfs(root: Path, nodes: dict[int, str], gpus: list[tuple[str, int]],
               nics: list[tuple[str, int]] = (), mem_kb: int = 264_000_000) -> Path:
    for n, cpus in nodes.items():
        d = root / "sys/devices/system/node" / f"node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpus + "\n")
        (d / "meminfo").write_text(f"Node {n} MemTotal:       {mem_kb} kB\n"
                                   f"Node {n} MemFree: 1 kB\n")
        (d / "distance").write_text(" ".join("10" if m == n else "21" for m in nodes) + "\n")
    pci = root / "sys/bus/pci/devices"
    for bus, node, cls, vendor in ([(b, n, "0x030200", "0x10de") for b, n in gpus]
                                   + [(b, n, "0x020000", "0x15b3") for b, n in nics]):
        d = pci / bus
        d.mkdir(parents=True)
        (d / "class").write_text(cls + "\n")
        (d / "vendor").write_text(vendor + "\n")
        (d / "device").write_text("0x2330\n")
        (d / "numa_node").write_text(f"{node}\n")
        (d / "current_link_speed").write_text("32.0 GT/s PCIe\n")
        (d / "current_link_width").write_text("16\n")
        if node >= 0:
            (d / "local_cpulist").write_text(nodes.get(node, "") + "\n")
    # an unrelated device the probe must skip
    other = pci / "0000:00:1f.0"
    other.mkdir(parents=True, exist_ok=True)
    (other / "class").write_text("0x060100\n")
    (other / "vendor").write_text("0x8086\n")
    return root


EIGHT = [("0000:18:00.0", 0), ("0000:2a:00.0", 0), ("0000:3a:00.0", 0), ("0000:5d:00.0", 0),
         ("0000:9a:00.0", 1), ("0000:ab:00.0", 1), ("0000:ba:00.0", 1), ("0000:db:00.0", 1)]


def test_cpulist():
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == []


def test_probe_two_nodes_eight_gpus(tmp_path):
    root = make_sysfs(tmp_path, {0: "0-47,96-143", 1: "48-95,144-191"}, EIGHT,
                      nics=[("0000:19:00.0", 0)])
    t = probe(root)
    assert [n.id for n in t.nodes] == [0, 1] and len(t.nodes[1].cpus) == 96
    assert t.nodes[0].memory_gib == round(264_000_000 / 2**20, 2)
    assert t.nodes[0].distances == [10, 21]
    assert [g.index for g in t.gpus] == list(range(8))
    assert gpu_nodes(t) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert t.gpus[0].link_width == 16 and t.gpus[0].vendor == "nvidia"
    assert len(t.nics) == 1 and t.warnings == []


def test_hidden_numa_node_is_reported_as_hidden(tmp_path):
    root = make_sysfs(tmp_path, {0: "0-7"}, [("0000:00:1e.0", -1)])
    t = probe(root)
    g = t.gpus[0]
    assert g.numa_node is None and g.numa_hidden
    assert any("numa_node reads -1" in w for w in t.warnings)


def test_gpus_are_in_pci_bus_order(tmp_path):
    root = make_sysfs(tmp_path, {0: "0-3", 1: "4-7"}, [("0000:b0:00.0", 1), ("0000:10:00.0", 0)])
    assert [(g.index, g.bus_id) for g in probe(root).gpus] == [(0, "0000:10:00.0"),
                                                               (1, "0000:b0:00.0")]


def test_nvidia_smi_topo_printouts():
    eight = parse_nvidia_smi_topo((FIX / "nvidia-smi-topo-8gpu-2node.txt").read_text())
    assert [g.numa_node for g in eight] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert eight[0].cpu_affinity == [0, 2, 4, 6, 8, 10]
    assert eight[0].links["GPU1"] == "NODE" and eight[0].links["NIC0"] == "PIX"
    four = parse_nvidia_smi_topo((FIX / "nvidia-smi-topo-4gpu-4node.txt").read_text())
    assert [g.numa_node for g in four] == [0, 1, 2, 3] and four[0].links["GPU1"] == "NV12"
    one = parse_nvidia_smi_topo((FIX / "nvidia-smi-topo-1gpu.txt").read_text())
    assert len(one) == 1 and one[0].cpu_affinity == list(range(20))
    with pytest.raises(UserInputError, match="not an 'nvidia-smi topo -m' printout"):
        parse_nvidia_smi_topo("hello\nworld\n")


def test_numactl_printouts():
    cxl = parse_numactl((FIX / "numactl-2node-cxl.txt").read_text())
    assert [n.id for n in cxl] == [0, 1] and cxl[1].cpus == []  # a CPU-less memory node
    assert cxl[0].memory_gib == round(63678 / 1024, 2) and cxl[1].distances == [50, 10]
    inter = parse_numactl((FIX / "numactl-2node-interleaved.txt").read_text())
    assert inter[0].cpus[:3] == [0, 2, 4] and len(inter[1].cpus) == 32
    with pytest.raises(UserInputError):
        parse_numactl("no nodes here")


def test_compare_with_documented_azure_layout(tmp_path):
    nd = CAT.instance("azure:Standard_ND96isr_H100_v5")
    root = make_sysfs(tmp_path / "ok", {0: "0-47", 1: "48-95"}, EIGHT)
    assert compare(probe(root), nd) == []
    swapped = [(b, 1 - n) for b, n in EIGHT]
    bad = make_sysfs(tmp_path / "bad", {0: "0-47", 1: "48-95"}, swapped)
    diffs = compare(probe(bad), nd)
    assert len(diffs) == 8 and "GPU 0: the catalog says NUMA node 0, the machine shows 1" in diffs
    hidden = make_sysfs(tmp_path / "hid", {0: "0-95"}, [(b, -1) for b, _ in EIGHT])
    diffs = compare(probe(hidden), nd)
    assert "NUMA nodes: the catalog says 2, the machine shows 1" in diffs
    assert any("GPU 3: NUMA node hidden" in d and "catalog says 0" in d for d in diffs)


def test_compare_with_an_undocumented_instance(tmp_path):
    p5e = CAT.instance("aws:p5e.48xlarge")  # no public source states its map (issue 17)
    assert p5e.numa.nodes is None and p5e.numa.gpu_nodes is None
    diffs = compare(probe(make_sysfs(tmp_path, {0: "0-95", 1: "96-191"}, EIGHT)), p5e)
    assert "NUMA nodes: the catalog does not say; the machine shows 2" in diffs
    assert "GPU 4: the catalog does not say its NUMA node; the machine shows 1" in diffs


def test_cli_topology_json_and_expect(cli, tmp_path):
    root = make_sysfs(tmp_path, {0: "0-47", 1: "48-95"}, EIGHT)
    r = cli("topology", "--sysfs-root", str(root), "--json",
            "--expect", "azure:Standard_ND96isr_H100_v5")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)
    assert {"id", "cpus", "memory_gib"} <= set(v["nodes"][0])
    assert {"index", "bus_id", "numa_node"} <= set(v["gpus"][0])
    assert v["differences"] == [] and v["gpu_nodes"] == [0, 0, 0, 0, 1, 1, 1, 1]
    table = cli("topology", "--sysfs-root", str(root), "--expect", "aws:p5e.48xlarge")
    assert "the catalog does not say" in table.stdout


def test_cli_topology_from_printouts_only(cli, tmp_path):
    r = cli("topology", "--sysfs-root", str(tmp_path), "--json",
            "--nvidia-smi-topo", str(FIX / "nvidia-smi-topo-4gpu-4node.txt"),
            "--numactl", str(FIX / "numactl-2node-interleaved.txt"))
    v = json.loads(r.stdout)
    assert v["gpu_nodes"] == [0, 1, 2, 3] and len(v["nodes"]) == 2


@pytest.mark.parametrize("args,needle", [
    (["--sysfs-root", "/nonexistent/x"], "is not a directory"),
    (["--nvidia-smi-topo", "/nonexistent/topo.txt"], "cannot read"),
    (["--expect", "aws:p9.huge"], "unknown instance type"),
])
def test_cli_topology_bad_input(cli, tmp_path, args, needle):
    r = cli("topology", *args)
    assert r.exit_code == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_topology_rejects_a_file_that_is_not_a_printout(cli, tmp_path):
    f = tmp_path / "topo.txt"
    f.write_text("not a printout\n")
    r = cli("topology", "--sysfs-root", str(tmp_path), "--nvidia-smi-topo", str(f))
    assert r.exit_code == 2 and "nvidia-smi topo" in r.stderr
