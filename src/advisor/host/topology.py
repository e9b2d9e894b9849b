"""The host's real GPU-to-NUMA layout: a sysfs probe and parsers for the tools' printouts.

* :func:`probe` reads a sysfs tree (``/`` on the host, any copied or fake tree in tests):
  NUMA nodes from ``/sys/devices/system/node/node*/{cpulist,meminfo,distance}``, GPUs (PCI
  display / 3D controllers of NVIDIA 0x10de and AMD 0x1002) and NICs from
  ``/sys/bus/pci/devices/*/{class,vendor,device,numa_node,local_cpulist,current_link_*}``.
  ``numa_node`` = -1 means the firmware or hypervisor hides the GPU's node: it is reported as
  hidden, never as node 0.
* :func:`parse_nvidia_smi_topo` reads ``nvidia-smi topo -m``; :func:`parse_numactl` reads
  ``numactl --hardware``.
* :func:`compare` lists every difference between what the catalog claims for an instance
  type and what the machine shows.

GPU indices follow PCI bus order, which is nvidia-smi's order.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.catalog.schema import InstanceType
from advisor.errors import UserInputError

GPU_VENDORS = {"0x10de": "nvidia", "0x1002": "amd"}
#: PCI class codes: display controllers (VGA 0x0300, 3D 0x0302), network (0x0200, IB 0x0207)
GPU_CLASSES = ("0x0300", "0x0302", "0x0380")
NIC_CLASSES = ("0x0200", "0x0207")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Node(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: int
    cpus: list[int]
    memory_gib: float | None
    distances: list[int] | None = None


class PciDevice(BaseModel):
    model_config = ConfigDict(frozen=True)
    index: int
    bus_id: str
    vendor: str
    device_id: str | None = None
    #: None when sysfs says -1 (hidden) or has no numa_node file
    numa_node: int | None
    numa_hidden: bool
    local_cpus: list[int] | None = None
    link_speed: str | None = None
    link_width: int | None = None


class TopoGpu(BaseModel):
    """One GPU row of ``nvidia-smi topo -m``."""

    model_config = ConfigDict(frozen=True)
    index: int
    cpu_affinity: list[int] | None
    numa_node: int | None
    links: dict[str, str]


class Topology(BaseModel):
    model_config = ConfigDict(frozen=True)
    nodes: list[Node]
    gpus: list[PciDevice]
    nics: list[PciDevice]
    nvidia_smi: list[TopoGpu] | None = None
    warnings: list[str] = []


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8,10-11`` -> [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format)."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _nodes(root: Path) -> list[Node]:
    base = root / "sys" / "devices" / "system" / "node"
    nodes = []
    for d in sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        cpus = parse_cpulist(_read(d / "cpulist") or "")
        mem = None
        meminfo = _read(d / "meminfo") or ""
        m = re.search(r"MemTotal:\s+(\d+)\s*kB", meminfo)
        if m:
            mem = round(int(m.group(1)) / 2**20, 2)
        dist = _read(d / "distance")
        nodes.append(Node(id=int(d.name[4:]), cpus=cpus, memory_gib=mem,
                          distances=[int(x) for x in dist.split()] if dist else None))
    return nodes


def _pci(root: Path, classes: tuple[str, ...], vendors: dict[str, str] | None) -> list[PciDevice]:
    base = root / "sys" / "bus" / "pci" / "devices"
    found = []
    for d in sorted(base.glob("*")):
        cls = (_read(d / "class") or "")[:6]
        vendor = _read(d / "vendor") or ""
        if cls not in classes or (vendors is not None and vendor not in vendors):
            continue
        raw = _read(d / "numa_node")
        node = int(raw) if raw is not None and re.fullmatch(r"-?\d+", raw) else None
        width = _read(d / "current_link_width")
        local = _read(d / "local_cpulist")
        found.append((d.name, vendor, _read(d / "device"), node, local,
                      _read(d / "current_link_speed"), width))
    out = []
    for i, (bus, vendor, dev, node, local, speed, width) in enumerate(sorted(found)):
        out.append(PciDevice(index=i, bus_id=bus, vendor=(vendors or {}).get(vendor, vendor),
                             device_id=dev, numa_node=node if node is not None and node >= 0
                             else None, numa_hidden=node is not None and node < 0,
                             local_cpus=parse_cpulist(local) if local else None,
                             link_speed=speed,
                             link_width=int(width) if width and width.isdigit() else None))
    return out


def probe(root: str | Path = "/", nvidia_smi_topo: str | None = None) -> Topology:
    """Read the layout from a sysfs tree (and an ``nvidia-smi topo -m`` printout if given)."""
    root = Path(root)
    if not root.is_dir():
        raise UserInputError(f"--sysfs-root {root} is not a directory",
                             hint="point it at / or at a copied tree holding sys/")
    nodes = _nodes(root)
    gpus = _pci(root, GPU_CLASSES, GPU_VENDORS)
    nics = _pci(root, NIC_CLASSES, None)
    warnings = []
    if not nodes:
        warnings.append(f"no NUMA nodes under {root}/sys/devices/system/node")
    for g in gpus:
        if g.numa_hidden:
            warnings.append(f"GPU {g.index} ({g.bus_id}): /sys/bus/pci/devices/{g.bus_id}/"
                            "numa_node reads -1: its NUMA node is hidden from the guest")
    smi = parse_nvidia_smi_topo(nvidia_smi_topo) if nvidia_smi_topo else None
    if smi is not None and gpus and len(smi) != len(gpus):
        warnings.append(f"nvidia-smi lists {len(smi)} GPUs, sysfs {len(gpus)}")
    return Topology(nodes=nodes, gpus=gpus, nics=nics, nvidia_smi=smi, warnings=warnings)


def parse_nvidia_smi_topo(text: str) -> list[TopoGpu]:
    """GPU rows of ``nvidia-smi topo -m``: links, CPU affinity and NUMA affinity."""
    lines = [_ANSI.sub("", ln).rstrip("\n") for ln in text.splitlines()]
    header_i = next((i for i, ln in enumerate(lines)
                     if "GPU0" in ln and "Affinity" in ln), None)
    if header_i is None:
        raise UserInputError("not an 'nvidia-smi topo -m' printout: no header with GPU0 and "
                             "CPU Affinity", hint="save the output of 'nvidia-smi topo -m'")
    header = [h.strip() for h in lines[header_i].strip().split("\t") if h.strip()]
    out: list[TopoGpu] = []
    for ln in lines[header_i + 1:]:
        cells = [c.strip() for c in ln.split("\t")]
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            if out and not ln.strip():
                break
            continue
        values = cells[1:]
        row = dict(zip(header, values, strict=False))
        links = {k: v for k, v in row.items() if re.fullmatch(r"(GPU|NIC)\d+", k)}
        aff = row.get("CPU Affinity", "")
        numa = row.get("NUMA Affinity", "")
        out.append(TopoGpu(
            index=int(cells[0][3:]),
            cpu_affinity=parse_cpulist(aff) if re.fullmatch(r"[\d,\-]+", aff or "") else None,
            numa_node=int(numa) if numa.isdigit() else None, links=links))
    if not out:
        raise UserInputError("the 'nvidia-smi topo -m' printout has no GPU rows")
    return out


def parse_numactl(text: str) -> list[Node]:
    """Nodes of ``numactl --hardware``: CPUs, size and distances."""
    cpus: dict[int, list[int]] = {}
    size: dict[int, float] = {}
    dist: dict[int, list[int]] = {}
    in_dist = False
    for ln in text.splitlines():
        s = ln.strip().lstrip(">").strip()
        for m in re.finditer(r"node (\d+) cpus:([\d ]*?)(?=node \d+ |$)", s):
            cpus[int(m.group(1))] = [int(x) for x in m.group(2).split()]
        for m in re.finditer(r"node (\d+) size: (\d+) MB", s):
            size[int(m.group(1))] = round(int(m.group(2)) / 1024, 2)
        if s.startswith("node distances"):
            in_dist = True
            continue
        row = re.fullmatch(r"(\d+):\s+([\d\s]+)", s)
        if in_dist and row:
            dist[int(row.group(1))] = [int(x) for x in row.group(2).split()]
    if not cpus:
        raise UserInputError("not a 'numactl --hardware' printout: no 'node N cpus:' line")
    return [Node(id=i, cpus=cpus[i], memory_gib=size.get(i), distances=dist.get(i))
            for i in sorted(cpus)]


def gpu_nodes(topo: Topology) -> list[int | None]:
    """Each GPU's NUMA node, from sysfs, else from nvidia-smi's NUMA Affinity."""
    smi = {g.index: g.numa_node for g in topo.nvidia_smi or []}
    if topo.gpus:
        return [g.numa_node if g.numa_node is not None else smi.get(g.index)
                for g in topo.gpus]
    return [smi[i] for i in sorted(smi)]


class Difference(BaseModel):
    """One way the machine differs from the catalog's claim (what a support ticket asks about)."""

    model_config = ConfigDict(frozen=True)
    kind: str  # gpu-count | node-count | gpu-node-unknown | gpu-node-hidden | gpu-node-mismatch
    #          | fewer-nodes-than-sockets
    text: str
    gpu: int | None = None
    bus_id: str | None = None
    claimed: int | None = None
    observed: int | None = None


def differences(topo: Topology, inst: InstanceType) -> list[Difference]:
    """Every difference between the catalog's claim for ``inst`` and the machine."""
    diffs = []
    seen = gpu_nodes(topo)
    bus = {g.index: g.bus_id for g in topo.gpus}
    if len(seen) != inst.gpu.count:
        diffs.append(Difference(kind="gpu-count", claimed=inst.gpu.count, observed=len(seen),
                                text=f"GPUs: the catalog says {inst.gpu.count}, the machine "
                                f"shows {len(seen)}"))
    if inst.numa.nodes is None:
        diffs.append(Difference(kind="node-count", observed=len(topo.nodes),
                                text=f"NUMA nodes: the catalog does not say; the machine shows "
                                f"{len(topo.nodes)}"))
    elif inst.numa.nodes != len(topo.nodes):
        diffs.append(Difference(kind="node-count", claimed=inst.numa.nodes,
                                observed=len(topo.nodes),
                                text=f"NUMA nodes: the catalog says {inst.numa.nodes}, the "
                                f"machine shows {len(topo.nodes)}"))
    claimed = inst.numa.gpu_nodes
    for i, node in enumerate(seen):
        want = claimed[i] if claimed and i < len(claimed) else None
        common = {"gpu": i, "bus_id": bus.get(i), "claimed": want, "observed": node}
        if node is None:
            diffs.append(Difference(kind="gpu-node-hidden", **common, text=(
                f"GPU {i}: NUMA node hidden on the machine (numa_node -1)"
                + (f"; the catalog says {want}" if want is not None else ""))))
        elif want is None:
            diffs.append(Difference(kind="gpu-node-unknown", **common, text=(
                f"GPU {i}: the catalog does not say its NUMA node; the machine shows {node}")))
        elif want != node:
            diffs.append(Difference(kind="gpu-node-mismatch", **common, text=(
                f"GPU {i}: the catalog says NUMA node {want}, the machine shows {node}")))
    if inst.cpu.sockets and topo.nodes and len(topo.nodes) < inst.cpu.sockets:
        diffs.append(Difference(kind="fewer-nodes-than-sockets", claimed=inst.cpu.sockets,
                                observed=len(topo.nodes),
                                text=f"fewer NUMA nodes ({len(topo.nodes)}) than sockets "
                                f"({inst.cpu.sockets})"))
    return diffs


def compare(topo: Topology, inst: InstanceType) -> list[str]:
    """Every difference between the catalog's claim for ``inst`` and the machine, in words."""
    return [d.text for d in differences(topo, inst)]
