"""The host's real GPU-to-NUMA layout: a sysfs probe and parsers for the tools' printouts.

* :func:`probe` reads a sysfs tree (``/`` on the host, any copied or fake tree in tests):
  NUMA nodes from ``/sys/devices/system/node/node*/{cpulist,meminfo,distance}``, GPUs (PCI
  display / 3D controllers and processing accelerators — AMD Instinct is class 0x1200 — of
  NVIDIA 0x10de and AMD 0x1002) and NICs from
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
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from advisor.catalog.schema import InstanceType
from advisor.errors import UserInputError

GPU_VENDORS = {"0x10de": "nvidia", "0x1002": "amd"}
#: PCI class codes: display controllers (VGA 0x0300, 3D 0x0302, other 0x0380) and processing
#: accelerators (0x1200: AMD Instinct MI300-series GPUs enumerate so — lspci prints
#: "Processing accelerators [1200]: ... [Instinct MI325X] [1002:74a5]" on such a host);
#: network (0x0200, IB 0x0207)
GPU_CLASSES = ("0x0300", "0x0302", "0x0380", "0x1200")
#: class prefixes of a device that may be a GPU or accelerator (display 0x03, processing
#: accelerator 0x12, co-processor 0x0b40): one from a GPU vendor that GPU_CLASSES does not
#: list is warned about, never silently skipped
GPU_LIKE = ("0x03", "0x12", "0x0b40")
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


class CpuTopology(BaseModel):
    """The host's CPUs as ``/sys/devices/system/cpu/cpu*/topology`` shows them (online CPUs)."""

    model_config = ConfigDict(frozen=True)
    #: logical CPUs (what ``nproc`` counts)
    cpus: int
    #: distinct thread-sibling sets: the physical cores behind those CPUs
    cores: int
    #: distinct ``physical_package_id`` values
    sockets: int
    #: SMT siblings exposed: more than one CPU per core (``/sys/devices/system/cpu/smt/active``
    #: where the kernel has it)
    smt: bool
    #: CPU -> the CPUs sharing its core (itself included)
    siblings: dict[int, list[int]] = {}


class Topology(BaseModel):
    model_config = ConfigDict(frozen=True)
    #: what wrote this shape (``advisor topology --json`` files carry it; render --probe
    #: checks it)
    kind: str = "advisor-topology"
    nodes: list[Node]
    gpus: list[PciDevice]
    nics: list[PciDevice]
    nvidia_smi: list[TopoGpu] | None = None
    cpu: CpuTopology | None = None
    warnings: list[str] = []


#: the most CPUs a cpulist may name (Linux's NR_CPUS is at most 8192 today)
MAX_CPUS = 65536
#: the largest sysfs file read (sysfs attributes are at most a page)
MAX_SYSFS_BYTES = 64 * 1024
#: the largest tool printout read (nvidia-smi topo -m, numactl --hardware)
MAX_PRINTOUT_BYTES = 1024 * 1024
#: the most sysfs entries looked at under one folder
MAX_ENTRIES = 65536


def parse_cpulist(text: str, where: str = "cpulist") -> list[int]:
    """``0-3,8,10-11`` -> [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format); at most
    :data:`MAX_CPUS` CPUs, each below it. Anything else is a UserInputError."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d{1,6})(?:-(\d{1,6}))?", part)
        if not m:
            raise UserInputError(f"{where}: {part[:40]!r} is not a CPU list entry (N or N-M)",
                                 hint="a cpulist reads like 0-3,8,10-11")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo or hi >= MAX_CPUS or len(out) + hi - lo + 1 > MAX_CPUS:
            raise UserInputError(f"{where}: {part[:40]!r} names CPUs beyond the {MAX_CPUS} "
                                 "a host can have" if hi >= lo else
                                 f"{where}: {part[:40]!r} is a range that runs backwards",
                                 hint="a cpulist reads like 0-3,8,10-11")
        out.extend(range(lo, hi + 1))
    return out


def format_cpulist(values: Iterable[int]) -> str:
    """[0, 1, 2, 3, 8, 10, 11] -> ``0-3,8,10-11`` (the inverse of :func:`parse_cpulist`);
    ``none`` for no CPU."""
    v = sorted(set(values))
    if not v:
        return "none"
    parts, start, prev = [], v[0], v[0]
    for c in [*v[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev != start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(parts)


def _read(path: Path) -> str | None:
    """A sysfs attribute, stripped; None when absent or unreadable. A file that is not a
    regular file or larger than a sysfs attribute is refused (UserInputError)."""
    from advisor.inputs import read_bytes

    try:
        if not path.exists():
            return None
    except OSError:
        return None
    try:
        data = read_bytes(path, limit=MAX_SYSFS_BYTES, what="sysfs file")
    except UserInputError as exc:
        if "cannot read" in exc.message:
            return None
        raise
    return data.decode("utf-8", errors="replace").strip()


def _ints(text: str, where: str, high: int = 1 << 16) -> list[int]:
    """Whitespace-separated small non-negative integers (a node's distance row)."""
    parts = text.split()
    if len(parts) > MAX_CPUS or not all(re.fullmatch(r"\d{1,6}", p) for p in parts):
        raise UserInputError(f"{where}: {text[:40]!r} is not a list of numbers",
                             hint="point --sysfs-root at a copy of a real sysfs tree")
    values = [int(p) for p in parts]
    if any(v > high for v in values):
        raise UserInputError(f"{where}: a value above {high}",
                             hint="point --sysfs-root at a copy of a real sysfs tree")
    return values


def _nodes(root: Path) -> list[Node]:
    base = root / "sys" / "devices" / "system" / "node"
    nodes = []
    found = [d for d in _entries(base, "node[0-9]*") if re.fullmatch(r"node\d{1,5}", d.name)]
    for d in sorted(found, key=lambda p: int(p.name[4:])):
        cpus = parse_cpulist(_read(d / "cpulist") or "", where=str(d / "cpulist"))
        mem = None
        meminfo = _read(d / "meminfo") or ""
        m = re.search(r"MemTotal:\s+(\d{1,15})\s*kB", meminfo)
        if m:
            mem = round(int(m.group(1)) / 2**20, 2)
        dist = _read(d / "distance")
        nodes.append(Node(id=int(d.name[4:]), cpus=cpus, memory_gib=mem,
                          distances=_ints(dist, str(d / "distance")) if dist else None))
    return nodes


def _entries(base: Path, pattern: str) -> list[Path]:
    """The entries of a sysfs folder matching ``pattern``, at most :data:`MAX_ENTRIES`."""
    out: list[Path] = []
    try:
        for p in base.glob(pattern):
            out.append(p)
            if len(out) > MAX_ENTRIES:
                raise UserInputError(f"{base}: more than {MAX_ENTRIES} entries",
                                     hint="point --sysfs-root at a copy of a real sysfs tree")
    except OSError:
        return out
    return out


def _pci(root: Path, classes: tuple[str, ...], vendors: dict[str, str] | None) -> list[PciDevice]:
    base = root / "sys" / "bus" / "pci" / "devices"
    found = []
    for d in sorted(_entries(base, "*")):
        cls = (_read(d / "class") or "")[:6]
        vendor = _read(d / "vendor") or ""
        if cls not in classes or (vendors is not None and vendor not in vendors):
            continue
        raw = _read(d / "numa_node")
        node = int(raw) if raw is not None and re.fullmatch(r"-?\d{1,5}", raw) else None
        width = _read(d / "current_link_width")
        local = _read(d / "local_cpulist")
        found.append((d.name, vendor, _read(d / "device"), node, local,
                      _read(d / "current_link_speed"), width))
    out = []
    for i, (bus, vendor, dev, node, local, speed, width) in enumerate(sorted(found)):
        out.append(PciDevice(index=i, bus_id=bus, vendor=(vendors or {}).get(vendor, vendor),
                             device_id=dev, numa_node=node if node is not None and node >= 0
                             else None, numa_hidden=node is not None and node < 0,
                             local_cpus=parse_cpulist(local, where=f"{bus}/local_cpulist")
                             if local else None,
                             link_speed=speed,
                             link_width=int(width) if width and re.fullmatch(r"\d{1,4}", width)
                             else None))
    return out


def _gpu_like(root: Path) -> list[tuple[str, str, str]]:
    """(bus id, vendor id, class) of each device of a GPU vendor whose class looks like a GPU's
    or an accelerator's but is not in GPU_CLASSES."""
    out = []
    for d in sorted(_entries(root / "sys" / "bus" / "pci" / "devices", "*")):
        cls = (_read(d / "class") or "")[:6]
        vendor = _read(d / "vendor") or ""
        if vendor in GPU_VENDORS and cls.startswith(GPU_LIKE) and cls not in GPU_CLASSES:
            out.append((d.name, vendor, cls))
    return out


def _cpu_topology(root: Path) -> CpuTopology | None:
    """Cores, sockets and SMT from ``sys/devices/system/cpu/cpu*/topology`` (None: absent)."""
    base = root / "sys" / "devices" / "system" / "cpu"
    siblings: dict[int, list[int]] = {}
    packages: set[str] = set()
    for d in _entries(base, "cpu[0-9]*"):
        if not re.fullmatch(r"cpu\d{1,6}", d.name):
            continue
        sib = _read(d / "topology" / "thread_siblings_list")
        if sib is None:  # an offline CPU has no topology folder
            continue
        cpu = int(d.name[3:])
        siblings[cpu] = parse_cpulist(sib, where=str(d / "topology/thread_siblings_list"))
        pkg = _read(d / "topology" / "physical_package_id")
        if pkg is not None and re.fullmatch(r"-?\d{1,6}", pkg):
            packages.add(pkg)
    if not siblings:
        return None
    cores = {tuple(v) for v in siblings.values()}
    active = _read(base / "smt" / "active")
    smt = active == "1" if active in ("0", "1") else any(len(c) > 1 for c in cores)
    return CpuTopology(cpus=len(siblings), cores=len(cores), sockets=max(1, len(packages)),
                       smt=smt, siblings=dict(sorted(siblings.items())))


def probe(root: str | Path = "/", nvidia_smi_topo: str | None = None) -> Topology:
    """Read the layout from a sysfs tree (and an ``nvidia-smi topo -m`` printout if given)."""
    root = Path(root)
    if not root.is_dir():
        raise UserInputError(f"--sysfs-root {root} is not a directory",
                             hint="point it at / or at a copied tree holding sys/")
    nodes = _nodes(root)
    gpus = _pci(root, GPU_CLASSES, GPU_VENDORS)
    nics = _pci(root, NIC_CLASSES, None)
    warnings = [f"PCI device {bus} ({GPU_VENDORS[vendor]}, class {cls}) looks like a GPU but "
                "its class is not one advisor maps: it is not counted"
                for bus, vendor, cls in _gpu_like(root)]
    if not nodes:
        warnings.append(f"no NUMA nodes under {root}/sys/devices/system/node")
    for g in gpus:
        if g.numa_hidden:
            warnings.append(f"GPU {g.index} ({g.bus_id}): /sys/bus/pci/devices/{g.bus_id}/"
                            "numa_node reads -1: its NUMA node is hidden from the guest")
    smi = parse_nvidia_smi_topo(nvidia_smi_topo) if nvidia_smi_topo else None
    if smi is not None and gpus and len(smi) != len(gpus):
        warnings.append(f"nvidia-smi lists {len(smi)} GPUs, sysfs {len(gpus)}")
    return Topology(nodes=nodes, gpus=gpus, nics=nics, nvidia_smi=smi,
                    cpu=_cpu_topology(root), warnings=warnings)


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
        if not cells or not re.fullmatch(r"GPU\d{1,5}", cells[0]):
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
            cpu_affinity=parse_cpulist(aff, where="nvidia-smi CPU Affinity")
            if re.fullmatch(r"[\d,\-]+", aff or "") else None,
            numa_node=int(numa) if re.fullmatch(r"\d{1,5}", numa) else None, links=links))
        if len(out) > 4096:
            raise UserInputError("the 'nvidia-smi topo -m' printout has more than 4096 GPU rows")
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
        for m in re.finditer(r"node (\d{1,5}) cpus:([\d ]*?)(?=node \d+ |$)", s):
            cpus[int(m.group(1))] = _ints(m.group(2), "numactl cpus", high=MAX_CPUS - 1)
        for m in re.finditer(r"node (\d{1,5}) size: (\d{1,15}) MB", s):
            size[int(m.group(1))] = round(int(m.group(2)) / 1024, 2)
        if s.startswith("node distances"):
            in_dist = True
            continue
        row = re.fullmatch(r"(\d{1,5}):\s+([\d\s]+)", s)
        if in_dist and row:
            dist[int(row.group(1))] = _ints(row.group(2), "numactl distances")
        if len(cpus) > 4096:
            raise UserInputError("the 'numactl --hardware' printout has more than 4096 nodes")
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
