"""Fake /proc and sysfs trees for ``advisor doctor``: processes as the kernel shows them (the
file formats of proc(5): NUL-separated cmdline and environ, status lines, numa_maps lines,
fd symlinks, cgroup lines) and the sysfs of a host with NUMA nodes, cores and GPUs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tests.test_topology import make_sysfs


@dataclass
class FakeProc:
    pid: int
    argv: list[str]
    ppid: int = 1
    env: dict[str, str] = field(default_factory=dict)
    cpus: str = "0-15"
    mems: str = "0-1"
    #: numa_maps lines: (policy, {node: pages})
    maps: list[tuple[str, dict[int, int]]] = field(default_factory=list)
    #: GPU device files held open (/dev/nvidia<minor>)
    nvidia_minors: list[int] = field(default_factory=list)
    cgroup: str = "0::/system.slice/vllm.service"
    uid: int = 998


def make_proc(root: Path, procs: list[FakeProc], gpu_buses: list[str] = (),
              numa_balancing: int = 0) -> Path:
    proc = root / "proc"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "sys/kernel").mkdir(parents=True, exist_ok=True)
    (proc / "sys/kernel/numa_balancing").write_text(f"{numa_balancing}\n")
    # the driver numbers device files in its own order: minor i is the i-th bus id here
    for minor, bus in enumerate(gpu_buses):
        d = proc / "driver/nvidia/gpus" / bus
        d.mkdir(parents=True, exist_ok=True)
        (d / "information").write_text(
            f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 100\nGPU UUID: \t GPU-{minor:08x}\n"
            f"Video BIOS: \t 96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
            f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
            "GPU Firmware: \t 535.104.05\nGPU Excluded:\t No\n")
    for p in procs:
        d = proc / str(p.pid)
        (d / "fd").mkdir(parents=True)
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in p.argv) + b"\0")
        (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in p.env.items()))
        (d / "status").write_text(
            f"Name:\t{os.path.basename(p.argv[0])[:15]}\nState:\tS (sleeping)\nTgid:\t{p.pid}\n"
            f"Pid:\t{p.pid}\nPPid:\t{p.ppid}\nUid:\t{p.uid}\t{p.uid}\t{p.uid}\t{p.uid}\n"
            f"Cpus_allowed_list:\t{p.cpus}\nMems_allowed_list:\t{p.mems}\n")
        lines = []
        for i, (policy, pages) in enumerate(p.maps):
            counts = " ".join(f"N{n}={c}" for n, c in sorted(pages.items()))
            lines.append(f"7f{i:010x} {policy} anon={sum(pages.values())} "
                         f"dirty={sum(pages.values())} {counts} kernelpagesize_kB=4")
        (d / "numa_maps").write_text("\n".join(lines) + "\n")
        (d / "cgroup").write_text(p.cgroup + "\n")
        for i, minor in enumerate(["ctl", *p.nvidia_minors, "-uvm"]):
            os.symlink(f"/dev/nvidia{minor}", d / "fd" / str(20 + i))
        os.symlink("/dev/null", d / "fd" / "0")
    return root


def make_host(root: Path, nodes: dict[int, str], gpus: list[tuple[str, int]],
              smt: bool = False) -> Path:
    """sysfs of a host: nodes, GPUs (H100 SXM, 0x2330) and each CPU's core siblings."""
    make_sysfs(root, nodes, gpus)
    cpus = sorted(c for spec in nodes.values() for c in _cpus(spec))
    half = len(cpus) // 2
    for c in cpus:
        t = root / "sys/devices/system/cpu" / f"cpu{c}" / "topology"
        t.mkdir(parents=True, exist_ok=True)
        sib = [c] if not smt else sorted({c, c + half if c < half else c - half})
        (t / "thread_siblings_list").write_text(",".join(map(str, sib)) + "\n")
        node = next(n for n, spec in nodes.items() if c in _cpus(spec))
        (t / "physical_package_id").write_text(f"{node}\n")
    return root


def _cpus(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out
