"""``advisor doctor``'s GPU-side findings (issue 32): PCIe links trained below their
capability, tensor-parallel groups across sockets without NVLink, and the NIC's node for
multi-node / KV-transfer serving — on sysfs trees and public ``nvidia-smi topo`` printouts
(tests/fixtures/topology/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from advisor.host.doctor import diagnose
from tests.doctor_trees import FakeProc, add_nvswitch, make_host, make_proc, set_links
from tests.test_doctor import BUSES, GPUS, KEYED, NODES, SERVE, _tp4, by_code, codes, host, tp1

FIXTURES = Path(__file__).parent / "fixtures" / "topology"


# -- PCIe links -------------------------------------------------------------------------------

def test_pcie_link_narrower_than_its_capability_is_a_warning(tmp_path):
    root = host(tmp_path, tp1("0-7", [("bind:0", {0: 5})]))
    set_links(root, BUSES[0], width=8, max_width=16)
    report = diagnose(proc_root=root, sysfs_root=root)
    f = by_code(report, "pcie-width-below-max")
    assert f.severity == "warning" and "x8 of x16" in f.text and "GPU 0" in f.text
    assert {e.path for e in f.evidence} == {
        f"/sys/bus/pci/devices/{BUSES[0]}/current_link_width",
        f"/sys/bus/pci/devices/{BUSES[0]}/max_link_width"}
    assert report.exit_code == 1
    # a GPU this server does not use is not its finding
    root2 = host(tmp_path / "b", tp1("0-7", [("bind:0", {0: 5})]))
    set_links(root2, BUSES[3], width=8, max_width=16)
    assert "pcie-width-below-max" not in codes(diagnose(proc_root=root2, sysfs_root=root2))


def test_pcie_speed_below_max_is_a_note(tmp_path):
    """NVIDIA: the current link generation 'may be reduced when the GPU is not in use'."""
    root = host(tmp_path, tp1("0-7", [("bind:0", {0: 5})]))
    set_links(root, BUSES[0], speed="2.5 GT/s PCIe", max_speed="32.0 GT/s PCIe")
    report = diagnose(proc_root=root, sysfs_root=root)
    f = by_code(report, "pcie-speed-below-max")
    assert f.severity == "info" and "2.5 GT/s PCIe of 32.0 GT/s PCIe" in f.text
    assert report.ok
    # at full speed and width: nothing
    root2 = host(tmp_path / "b", tp1("0-7", [("bind:0", {0: 5})]))
    set_links(root2, BUSES[0])
    assert not {"pcie-speed-below-max", "pcie-width-below-max"} & set(
        codes(diagnose(proc_root=root2, sysfs_root=root2)))


# -- TP groups across sockets -----------------------------------------------------------------

def test_tp_group_across_sockets_over_pcie_in_nvidia_smi_topo(tmp_path):
    """The public 8-GPU, 2-node printout (nvidia-smi topo -mp): GPUs 0-3 on node 0, 4-7 on
    node 1, SYS between them. TP 4 on GPUs 2-5 crosses the socket link over PCIe."""
    topo = (FIXTURES / "nvidia-smi-topo-8gpu-2node.txt").read_text()
    root = host(tmp_path, _tp4("0-15"))
    report = diagnose(proc_root=root, sysfs_root=root, nvidia_smi_topo=topo)
    s = report.servers[0]
    assert s.tp_groups == [[2, 3, 4, 5]]
    f = by_code(report, "tp-over-pcie")
    assert f.severity == "warning"
    assert "GPU2-GPU4 (SYS)" in f.text and "GPU2-GPU3" not in f.text
    # node 0 has 4 GPUs: the fix names them
    assert f.fixes[0].text.startswith("CUDA_VISIBLE_DEVICES=0,1,2,3")
    # a TP group inside one node is not flagged
    procs = _tp4("0-7")
    for p in procs:
        p.env = {**p.env, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    for r, p in enumerate(procs[2:]):
        p.nvidia_minors = [r]
    root2 = host(tmp_path / "b", procs)
    r2 = diagnose(proc_root=root2, sysfs_root=root2, nvidia_smi_topo=topo)
    assert r2.servers[0].tp_groups == [[0, 1, 2, 3]]
    assert "tp-over-pcie" not in codes(r2)


def test_tp_group_across_sockets_over_nvlink_is_fine(tmp_path):
    """The public AWS 4-GPU printout: one GPU per NUMA node, NV12 between pairs. TP 2 on
    GPUs 0 and 1 spans nodes 0 and 1 but NVLink joins them."""
    topo = (FIXTURES / "nvidia-smi-topo-4gpu-4node.txt").read_text()
    nodes = {0: "0-3", 1: "4-7", 2: "8-11", 3: "12-15"}
    gpus = [("0000:10:00.0", 0), ("0000:20:00.0", 1), ("0000:30:00.0", 2), ("0000:40:00.0", 3)]
    argv = [*SERVE, "--tensor-parallel-size", "2", "--numa-bind"]
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": "0,1"}
    procs = [FakeProc(pid=100, argv=argv, env=env, cpus="0-15"),
             FakeProc(pid=101, ppid=100, argv=["VLLM::EngineCore"], env=env, cpus="0-15")]
    procs += [FakeProc(pid=110 + r, ppid=101, argv=[f"VLLM::Worker_TP{r}"], env=env,
                       cpus=nodes[r], mems=str(r), maps=[(f"bind:{r}", {r: 5})],
                       nvidia_minors=[r]) for r in range(2)]
    root = host(tmp_path, procs, nodes=nodes, gpus=gpus)
    smi_links = diagnose(proc_root=root, sysfs_root=root, nvidia_smi_topo=topo)
    assert smi_links.servers[0].tp_groups == [[0, 1]]
    assert not {"tp-over-pcie", "tp-across-sockets"} & set(codes(smi_links))
    # without the printout, sysfs cannot tell: a note that says how to find out
    blind = diagnose(proc_root=root, sysfs_root=root)
    f = by_code(blind, "tp-across-sockets")
    assert f.severity == "info" and "--nvidia-smi-topo" in f.fixes[0].text
    # an NVSwitch in sysfs (HGX boards) means an NVLink fabric: nothing to say
    add_nvswitch(root)
    assert "tp-across-sockets" not in codes(diagnose(proc_root=root, sysfs_root=root))


def test_nvidia_smi_topo_file_on_the_command_line(tmp_path, cli):
    root = host(tmp_path, _tp4("0-15"))
    topo = FIXTURES / "nvidia-smi-topo-8gpu-2node.txt"
    r = cli("doctor", "--proc-root", str(root), "--sysfs-root", str(root),
            "--nvidia-smi-topo", str(topo))
    assert "WARN  tp-over-pcie" in r.stdout
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    r = cli("doctor", "--proc-root", str(root), "--sysfs-root", str(root),
            "--nvidia-smi-topo", str(empty))
    assert r.exit_code == 2 and "is empty" in r.stderr


# -- the NIC's node ---------------------------------------------------------------------------

def _nic_host(tmp: Path, argv: list[str], nics: list[tuple[str, int]]) -> Path:
    make_host(tmp, NODES, GPUS, nics=nics)
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": "4"}
    procs = [FakeProc(pid=7, argv=argv, env=env, cpus="8-15"),
             FakeProc(pid=8, ppid=7, argv=["VLLM::EngineCore"], env=env, cpus="8-15",
                      mems="1", maps=[("bind:1", {1: 5})], nvidia_minors=[4])]
    make_proc(tmp, procs, BUSES)
    return tmp


def test_kv_transfer_with_no_nic_on_the_gpus_node(tmp_path):
    """A prefill/decode server (--kv-transfer-config) on GPU 4 (node 1) while the only NIC
    hangs off node 0: its KV traffic crosses the socket link (NVIDIA GPUDirect RDMA guide)."""
    kv = [*SERVE, "--kv-transfer-config", '{"kv_connector":"NixlConnector"}']
    root = _nic_host(tmp_path / "a", kv, [("0000:19:00.0", 0)])
    f = by_code(diagnose(proc_root=root, sysfs_root=root), "nic-remote")
    assert f.severity == "warning" and "GPU(s) 4 on node 1" in f.text
    assert "0000:19:00.0 (node 0)" in f.text and "--kv-transfer-config" in f.text
    # a NIC on node 1 too: fine
    root2 = _nic_host(tmp_path / "b", kv, [("0000:19:00.0", 0), ("0000:9b:00.0", 1)])
    assert "nic-remote" not in codes(diagnose(proc_root=root2, sysfs_root=root2))
    # a server whose traffic stays on the host: not asked
    root3 = _nic_host(tmp_path / "c", SERVE, [("0000:19:00.0", 0)])
    assert "nic-remote" not in codes(diagnose(proc_root=root3, sysfs_root=root3))
    # multi-node data parallel says so too
    dp = [*SERVE, "--data-parallel-size", "4", "--data-parallel-size-local", "1"]
    root4 = _nic_host(tmp_path / "d", dp, [("0000:19:00.0", 0)])
    assert "--data-parallel-size-local 1 of 4" in by_code(
        diagnose(proc_root=root4, sysfs_root=root4), "nic-remote").text
