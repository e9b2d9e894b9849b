"""Fake /proc and sysfs trees for ``advisor doctor``: processes as the kernel shows them (the
file formats of proc(5): NUL-separated cmdline and environ, status lines, numa_maps lines,
fd symlinks, cgroup lines) and the sysfs of a host with NUMA nodes, cores and GPUs."""

from __future__ import annotations

import os
import subprocess
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
              smt: bool = False, nics: list[tuple[str, int]] = ()) -> Path:
    """sysfs of a host: nodes, GPUs (H100 SXM, 0x2330), NICs (Mellanox 0x15b3) and each CPU's
    core siblings."""
    make_sysfs(root, nodes, gpus, nics=nics)
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


def set_links(root: Path, bus: str, speed: str = "32.0 GT/s PCIe", width: int = 16,
              max_speed: str = "32.0 GT/s PCIe", max_width: int = 16) -> None:
    """A GPU's PCIe link as sysfs shows it: current_link_* and max_link_*."""
    d = root / "sys/bus/pci/devices" / bus
    (d / "current_link_speed").write_text(speed + "\n")
    (d / "current_link_width").write_text(f"{width}\n")
    (d / "max_link_speed").write_text(max_speed + "\n")
    (d / "max_link_width").write_text(f"{max_width}\n")


def add_nvswitch(root: Path, bus: str = "0000:05:00.0") -> None:
    """An NVIDIA NVSwitch (bridge class 0x0680) as on HGX boards."""
    d = root / "sys/bus/pci/devices" / bus
    d.mkdir(parents=True)
    (d / "class").write_text("0x068000\n")
    (d / "vendor").write_text("0x10de\n")
    (d / "device").write_text("0x22a3\n")


def add_drm(root: Path, render: dict[int, str]) -> None:
    """/sys/class/drm/renderD<n>/device -> the GPU's PCI device (its basename is the bus id)."""
    for n, bus in render.items():
        d = root / "sys/class/drm" / f"renderD{n}"
        d.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../devices/pci0000:00/{bus}", d / "device")


# -- real processes shaped like vLLM's --------------------------------------------------------

#: the stand-in process tree: each process sets what vLLM (or a wrapper) would show in /proc —
#: its command line rewritten in place the way setproctitle does (the argv area, NUL-padded),
#: CUDA_VISIBLE_DEVICES narrowed in-process (os.environ: /proc/PID/environ keeps the value at
#: exec), its CPU affinity, device files held open — then forks (or spawns) its children and
#: sleeps.
TREE = r'''
import ctypes, json, os, subprocess, sys, time


def set_cmdline(args):
    """What setproctitle does on Linux: overwrite the argv area, pad it with NULs."""
    stat = open("/proc/self/stat").read()
    fields = stat[stat.rindex(")") + 2:].split()
    start, end = int(fields[45]), int(fields[46])  # proc(5): arg_start (48), arg_end (49)
    data = b"\0".join(a.encode() for a in args) + b"\0"
    size = end - start
    if len(data) > size:
        raise SystemExit(f"cmdline {args!r} longer than the argv area ({size} bytes)")
    ctypes.memmove(start, data + b"\0" * (size - len(data)), size)


def run(node):
    if node.get("cmdline"):
        set_cmdline(node["cmdline"])
    for k, v in node.get("setenv", {}).items():
        os.environ[k] = v
    if node.get("cpus") is not None:
        os.sched_setaffinity(0, node["cpus"])
    held = [open(p, "rb") for p in node.get("fds", [])]
    for child in node.get("children", []):
        if child.get("spawn"):
            subprocess.Popen([sys.executable, "-c", "import vllm._tree as t; t.spawned()",
                              "--multiprocessing-fork"],
                             env={**os.environ, "FAKE_VLLM_NODE": json.dumps(child)})
            continue
        if os.fork() == 0:
            run(child)
            os._exit(0)
    with open(os.path.join(os.environ["FAKE_VLLM_READY"], str(os.getpid())), "w") as f:
        f.write(node["id"])
    time.sleep(300)
    del held


def spawned():
    run(json.loads(os.environ.pop("FAKE_VLLM_NODE")))


def main():
    with open(os.environ["FAKE_VLLM_TREE"]) as f:
        run(json.load(f))
'''


def fake_vllm(tmp: Path) -> Path:
    """A package named vllm whose entry points run the stand-in tree (PYTHONPATH root)."""
    base = tmp / "pkgs"
    pkg = base / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True, exist_ok=True)
    for d in (base / "vllm", base / "vllm/entrypoints", pkg):
        (d / "__init__.py").write_text("")
    (base / "vllm" / "_tree.py").write_text(TREE)
    (pkg / "api_server.py").write_text("import vllm._tree\nvllm._tree.main()\n")
    return base


def count(node: dict) -> int:
    return 1 + sum(count(c) for c in node.get("children", []))


@dataclass
class Tree:
    """A running stand-in tree: ``pids`` maps each node id to its pid."""

    proc: subprocess.Popen
    pids: dict[str, int]

    def stop(self) -> None:
        import contextlib
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the session this test started
        self.proc.wait()


def start_tree(tmp: Path, argv: list[str], tree: dict, env: dict[str, str] | None = None,
               devices: list[str] = (), timeout: float = 30) -> Tree:
    """Start ``argv`` (``python -m vllm.entrypoints.openai.api_server …``, or any command
    line: the root's ``cmdline`` may rewrite it) running the stand-in ``tree``. ``devices``:
    files created in a private tmpfs /dev (a mount namespace: needs unshare and root) that
    the tree's processes may hold open, so /proc/PID/fd shows /dev/... paths."""
    import json
    import time

    ready = tmp / f"ready-{len(list(tmp.glob('ready-*')))}"
    ready.mkdir()
    spec = ready / "tree.json"
    spec.write_text(json.dumps(tree))
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "VLLM_API_KEY",
                             "VLLM_PROCESS_NAME_PREFIX", "OMP_NUM_THREADS")}
    full_env.update({"PYTHONPATH": str(fake_vllm(tmp)), "FAKE_VLLM_TREE": str(spec),
                     "FAKE_VLLM_READY": str(ready), **(env or {})})
    cmd = list(argv)
    if tree.get("cmdline"):  # room in the argv area for the command line it will show
        cmd.append("x" * 256)
    if devices:
        made = " && ".join(f"mkdir -p $(dirname {d}) && : > {d}" for d in devices)
        cmd = ["unshare", "-m", "sh", "-c", "mount -t tmpfs none /dev && mknod -m 666 "
               f"/dev/null c 1 3 && {made} && exec \"$@\"", "sh", *cmd]
    proc = subprocess.Popen(cmd, env=full_env, start_new_session=True)
    end = time.monotonic() + timeout
    want = count(tree)
    # a marker counts once its id is written: it is created first and filled after, so a
    # marker read in between gave an empty id (seen once under load: KeyError 'ray1')
    while len([p for p in ready.iterdir() if p.name.isdigit() and p.read_text()]) < want:
        if proc.poll() is not None or time.monotonic() > end:
            t = Tree(proc, {})
            t.stop()
            raise AssertionError(f"stand-in tree did not come up: {cmd}")
        time.sleep(0.05)
    pids = {p.read_text(): int(p.name) for p in ready.iterdir() if p.name.isdigit()}
    return Tree(proc, pids)


def unshare_works() -> bool:
    """Whether this user may mount a private /dev (unshare -m): device files for tests."""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /dev"],
                       capture_output=True, timeout=30, check=False)
    return r.returncode == 0
