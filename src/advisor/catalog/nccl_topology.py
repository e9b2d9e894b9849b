"""Read an NCCL topology XML file (``NCCL_TOPO_FILE``) into NUMA and PCIe-switch facts.

Clouds publish these files for their GPU machines: AWS in ``aws/aws-ofi-nccl``
(``topology/p4d-24xl-topo.xml``, ...), Azure in ``Azure/azhpc-images``
(``topology/ndv4-topo.xml``, ...). The format is NCCL's own::

    <system version="1">
      <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
        <pci busid="ffff:ff:01.0" class="0x060400">          <!-- a PCIe switch -->
          <pci busid="0000:10:1c.0" class="0x030200"/>        <!-- a GPU (class 0x03....) -->
          <pci busid="0000:10:1b.0" class="0x020000"/>        <!-- a NIC (class 0x02....) -->
        </pci>
      </cpu>
    </system>

What :func:`parse` reads:

* each ``<cpu>``: its ``numaid``, vendor (``GenuineIntel`` -> ``intel``, ``AuthenticAMD`` ->
  ``amd``), ``familyid``, ``modelid`` and ``arch``;
* each GPU (a ``<pci>`` of class ``0x03xxxx``, or one holding a ``<gpu>`` element) with the
  NUMA node of the ``<cpu>`` it sits under;
* each NIC (class ``0x02xxxx``: Ethernet ``0x0200``, InfiniBand ``0x0207``; or a ``<pci>``
  holding a ``<nic>``), named by its ``<net name=...>`` where the file gives one, else by
  its bus id;
* each PCIe switch: a ``<pci>`` that holds other ``<pci>`` elements (a bridge level), with
  the GPUs and NICs beneath it.

GPU index: ``nvidia-smi`` (and CUDA with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``) numbers GPUs in
PCI bus-id order (domain, bus, device, function), so GPU *i* here is the *i*-th GPU by bus
id, whatever order the file lists them in. Where the file gives its own numbers (a
``<gpu dev=...>``, else ``rank=...``), they must agree with that order, or the file is
refused: it would then say two different things about which GPU is which.

Some files name no GPU: AWS's ``g5.48xl-topo.xml`` and its first ``p5.48xl-topo.xml`` list
only the PCIe switches (and NICs) the GPUs sit behind. :func:`infer_gpus` then places one
GPU behind each switch, in bus-id order, when the count matches the instance's; the result
is an inference and is recorded as one.

The parser is careful with its input: text over :data:`MAX_BYTES` is refused unread, any
``<!DOCTYPE``/``<!ENTITY`` declaration is refused before parsing (no entity expansion can
happen), and nesting deeper than :data:`MAX_DEPTH` or more than :data:`MAX_ELEMENTS`
elements stop the parse. Every refusal is a :class:`~advisor.errors.UserInputError`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from advisor.errors import UserInputError

#: a topology file larger than this is refused unread (the largest public one is ~10 KiB)
MAX_BYTES = 2**20
#: deepest element nesting accepted (system > cpu > pci > pci > ... ; real files use < 8)
MAX_DEPTH = 32
#: most elements accepted in one file (NCCL itself stops at 256 XML nodes)
MAX_ELEMENTS = 10_000

_DECLARATION = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)
_BUSID = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])\Z")
_VENDORS = {"genuineintel": "intel", "authenticamd": "amd"}
_HINT = "give the NCCL topology XML file itself (<system><cpu><pci .../></cpu></system>)"


@dataclass(frozen=True)
class TopoCpu:
    """One ``<cpu>`` element: a NUMA node with its processor's identity."""

    numaid: int | None
    #: ``intel``, ``amd``, or the raw vendor string when it is neither; None if absent
    vendor: str | None = None
    familyid: int | None = None
    modelid: int | None = None
    arch: str | None = None


@dataclass(frozen=True)
class TopoGpu:
    #: nvidia-smi index: position in PCI bus-id order
    index: int
    busid: str
    #: numaid of the enclosing ``<cpu>``
    numa: int | None
    #: bus id of the innermost switch it sits behind, None when on a root port directly
    switch: str | None = None
    #: the file's own ``dev`` / ``rank`` attributes of ``<gpu>``, where given
    dev: int | None = None
    rank: int | None = None
    #: placed by :func:`infer_gpus`, not named by the file
    inferred: bool = False


@dataclass(frozen=True)
class TopoNic:
    #: the ``<net name=...>`` where given, else the bus id
    name: str
    busid: str
    numa: int | None
    switch: str | None = None


@dataclass(frozen=True)
class TopoDevice:
    """A ``<pci>`` leaf with neither a class nor a ``<gpu>``/``<nic>``: the file does not say
    what it is (AWS's g5 and p5 files list switch ports and NICs this way)."""

    busid: str
    numa: int | None
    switch: str | None = None


@dataclass(frozen=True)
class TopoSwitch:
    busid: str
    numa: int | None
    #: GPU indices and NIC names anywhere beneath it
    gpus: tuple[int, ...] = ()
    nics: tuple[str, ...] = ()
    #: bus ids of unclassified devices beneath it
    unnamed: tuple[str, ...] = ()
    #: bus id of the switch it sits behind, None when directly under a CPU
    parent: str | None = None
    #: holds another switch
    nested: bool = False


@dataclass(frozen=True)
class Topology:
    cpus: tuple[TopoCpu, ...]
    #: in nvidia-smi order (PCI bus id)
    gpus: tuple[TopoGpu, ...]
    nics: tuple[TopoNic, ...]
    switches: tuple[TopoSwitch, ...]
    unnamed: tuple[TopoDevice, ...] = ()

    @property
    def numa_nodes(self) -> int:
        """Distinct NUMA nodes the file names (one per ``<cpu>`` numaid)."""
        return len({c.numaid for c in self.cpus if c.numaid is not None})

    @property
    def gpu_nodes(self) -> list[int | None]:
        """NUMA node of each GPU, in nvidia-smi order."""
        return [g.numa for g in self.gpus]

    @property
    def gpus_inferred(self) -> bool:
        return any(g.inferred for g in self.gpus)

    def catalog_switches(self) -> list[TopoSwitch]:
        """The switches worth a catalog entry: those with a GPU beneath them and no deeper
        switch that holds one (the level at which GPUs and NICs share a switch)."""
        with_gpu = {s.busid for s in self.switches if s.gpus}
        return sorted((s for s in self.switches if s.gpus and not any(
            o.parent == s.busid and o.busid in with_gpu for o in self.switches)),
            key=lambda s: s.gpus)


def bus_key(busid: str) -> tuple[int, int, int, int]:
    """``dddd:bb:dd.f`` as numbers, the order nvidia-smi lists GPUs in."""
    m = _BUSID.match(busid)
    if not m:
        raise UserInputError(f"topology file: {busid!r} is not a PCI bus id (dddd:bb:dd.f)",
                             hint=_HINT)
    return (int(m[1], 16), int(m[2], 16), int(m[3], 16), int(m[4], 16))


def _int_attr(el: ET.Element, name: str, base: int = 10) -> int | None:
    raw = el.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip(), base)
    except ValueError:
        raise UserInputError(f"topology file: <{el.tag} {name}={raw!r}> is not a number",
                             hint=_HINT) from None
    if value < 0 or value > 1_000_000:
        raise UserInputError(f"topology file: <{el.tag} {name}={raw!r}> is out of range",
                             hint=_HINT)
    return value


def _checked_tree(data: bytes) -> ET.Element:
    """Parse with the size, declaration, depth and element-count limits."""
    if len(data) > MAX_BYTES:
        raise UserInputError(f"topology file is {len(data):,} bytes, over the "
                             f"{MAX_BYTES:,}-byte limit", hint=_HINT)
    if _DECLARATION.search(data):
        raise UserInputError("topology file has a DOCTYPE or ENTITY declaration; refused "
                             "unparsed", hint="NCCL topology files have none: " + _HINT)
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    depth = count = 0
    root: ET.Element | None = None
    chunk = 64 * 1024
    try:
        # fed in pieces, the limits stop a hostile file before all of it is built
        for at in range(0, len(data) + 1, chunk):
            if at < len(data):
                parser.feed(data[at:at + chunk])
            else:
                parser.close()
            events = cast("Iterator[tuple[str, object]]", parser.read_events())
            for event, item in events:
                if event == "end":
                    depth -= 1
                    continue
                depth += 1
                count += 1
                if depth > MAX_DEPTH:
                    raise UserInputError(f"topology file nests elements over {MAX_DEPTH} "
                                         "deep", hint=_HINT)
                if count > MAX_ELEMENTS:
                    raise UserInputError(f"topology file has over {MAX_ELEMENTS:,} elements",
                                         hint=_HINT)
                if root is None and isinstance(item, ET.Element):
                    root = item
    except ET.ParseError as exc:
        raise UserInputError(f"topology file is not well-formed XML: {exc}",
                             hint=_HINT) from None
    if root is None or root.tag != "system":
        raise UserInputError(f"topology file's root element is <{getattr(root, 'tag', '')}>, "
                             "not <system>", hint=_HINT)
    return root


def parse(text: str | bytes, *, nics: Iterable[str] = ()) -> Topology:
    """The topology an NCCL topology XML file states.

    ``nics``: bus ids of unclassified ``<pci>`` leaves that the file's own notes say are NICs
    (AWS's g5 file adds its NIC as a bare ``<pci busid=.../>``); each must be in the file."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    root = _checked_tree(data)
    declared = {b.strip().lower() for b in nics}
    for b in declared:
        bus_key(b)

    cpus: list[TopoCpu] = []
    gpus: list[tuple[str, int | None, str | None, int | None, int | None]] = []
    found_nics: list[TopoNic] = []
    unnamed: list[TopoDevice] = []
    switches: list[TopoSwitch] = []
    switch_gpus: dict[str, list[str]] = {}
    seen: set[str] = set()

    def walk(pci: ET.Element, numa: int | None, parent: str | None) -> tuple[
            list[str], list[str], list[str]]:
        """Record ``pci`` and what is beneath it; returns the GPU bus ids, NIC names and
        unnamed bus ids beneath it (itself included)."""
        busid = (pci.get("busid") or "").strip().lower()
        if not busid:
            raise UserInputError("topology file: a <pci> element has no busid", hint=_HINT)
        bus_key(busid)
        if busid in seen:
            raise UserInputError(f"topology file lists PCI device {busid} twice", hint=_HINT)
        seen.add(busid)
        cls = (pci.get("class") or "").strip().lower()
        children = [c for c in pci if c.tag == "pci"]
        gpu_el = pci.find("gpu")
        nic_el = pci.find("nic")
        if children:
            g: list[str] = []
            n: list[str] = []
            u: list[str] = []
            for child in children:
                cg, cn, cu = walk(child, numa, busid)
                g += cg
                n += cn
                u += cu
            switch_gpus[busid] = g
            switches.append(TopoSwitch(
                busid=busid, numa=numa, nics=tuple(n), unnamed=tuple(u),
                parent=parent, nested=any(c.find("pci") is not None for c in children)))
            return g, n, u
        if gpu_el is not None or cls.startswith("0x03"):
            dev = _int_attr(gpu_el, "dev") if gpu_el is not None else None
            rank = _int_attr(gpu_el, "rank") if gpu_el is not None else None
            gpus.append((busid, numa, parent, dev, rank))
            return [busid], [], []
        if nic_el is not None or cls.startswith("0x02") or busid in declared:
            net = nic_el.find("net") if nic_el is not None else None
            name = (net.get("name") or "").strip() if net is not None else ""
            found_nics.append(TopoNic(name=name or busid, busid=busid, numa=numa,
                                      switch=parent))
            return [], [name or busid], []
        unnamed.append(TopoDevice(busid=busid, numa=numa, switch=parent))
        return [], [], [busid]

    for cpu in root:
        if cpu.tag != "cpu":
            continue
        numaid = _int_attr(cpu, "numaid")
        vendor_raw = (cpu.get("vendor") or "").strip()
        cpus.append(TopoCpu(
            numaid=numaid,
            vendor=_VENDORS.get(vendor_raw.lower(), vendor_raw) or None,
            familyid=_int_attr(cpu, "familyid"),
            modelid=_int_attr(cpu, "modelid"),
            arch=(cpu.get("arch") or "").strip() or None,
        ))
        for pci in cpu:
            if pci.tag == "pci":
                walk(pci, numaid, None)
    if not cpus:
        raise UserInputError("topology file has no <cpu> element", hint=_HINT)
    numaids = [c.numaid for c in cpus if c.numaid is not None]
    if len(set(numaids)) != len(numaids):
        raise UserInputError("topology file lists a <cpu numaid> twice", hint=_HINT)
    missing = declared - seen
    if missing:
        raise UserInputError(f"--nic {sorted(missing)[0]} is not a PCI device of the file",
                             hint="give bus ids the file lists")
    return _ordered(cpus, gpus, found_nics, switches, unnamed, switch_gpus=switch_gpus)


def _ordered(cpus: Sequence[TopoCpu],
             gpus: Sequence[tuple[str, int | None, str | None, int | None, int | None]],
             nics: Sequence[TopoNic], switches: Sequence[TopoSwitch],
             unnamed: Sequence[TopoDevice], *, inferred: bool = False,
             switch_gpus: dict[str, list[str]] | None = None) -> Topology:
    """GPUs numbered in bus-id order (checked against the file's own numbers), switches
    naming GPUs by that index."""
    by_bus = sorted(gpus, key=lambda g: bus_key(g[0]))
    index = {g[0]: i for i, g in enumerate(by_bus)}
    own = [(i, g[3] if g[3] is not None else g[4]) for i, g in enumerate(by_bus)]
    clash = [(i, n) for i, n in own if n is not None and n != i]
    if clash:
        i, n = clash[0]
        raise UserInputError(
            f"topology file numbers GPU {by_bus[i][0]} as {n}, but it is GPU {i} in PCI "
            "bus-id order (nvidia-smi's)", hint="the file contradicts itself about which GPU "
            "is which; check it against nvidia-smi on the machine")
    out_gpus = tuple(TopoGpu(index=i, busid=b, numa=numa, switch=sw, dev=dev, rank=rank,
                             inferred=inferred)
                     for i, (b, numa, sw, dev, rank) in enumerate(by_bus))
    out_switches = tuple(
        replace(s, gpus=tuple(sorted(index[b] for b in switch_gpus[s.busid])))
        if switch_gpus is not None else s
        for s in sorted(switches, key=lambda s: bus_key(s.busid)))
    return Topology(cpus=tuple(cpus), gpus=out_gpus,
                    nics=tuple(sorted(nics, key=lambda n: bus_key(n.busid))),
                    switches=out_switches,
                    unnamed=tuple(sorted(unnamed, key=lambda d: bus_key(d.busid))))


def infer_gpus(topo: Topology, count: int) -> Topology:
    """For a file that names no GPU: one GPU behind each PCIe switch, in bus-id order.

    The candidates are the innermost switches (a ``<pci>`` holding others); where the file
    has none, each unclassified ``<pci>`` leaf directly under a ``<cpu>`` (a switch port
    listed bare, as in AWS's g5 file; declare its NIC with ``parse(nics=...)``). Their number
    must equal ``count``, the instance's GPUs, or nothing is inferred. Unclassified devices
    beneath a candidate switch are taken as its NICs (AWS's p5 file: "1 GPU and 4 NIC behind
    a PCIe switch. GPUs are not reported in this file"). Bus numbers behind a bridge lie in
    that bridge's range, and ranges follow the bridges' own order, so GPU *i* is behind the
    *i*-th switch by bus id."""
    if topo.gpus:
        raise UserInputError("the topology file names its GPUs; nothing to infer",
                             hint="drop --infer-gpus")
    inner = [s for s in topo.switches if not s.nested]
    bare = [d for d in topo.unnamed if d.switch is None]
    if inner:
        slots = [(s.busid, s.numa) for s in inner]
        kind = "innermost PCIe switches"
    else:
        slots = [(d.busid, d.numa) for d in bare]
        kind = "unclassified PCI devices under the CPUs"
    if len(slots) != count:
        raise UserInputError(
            f"the topology file has {len(slots)} {kind} for {count} GPUs: cannot tell which "
            "hold a GPU", hint="declare the file's NICs with --nic BUSID, or take the map "
            "from another source")
    slots.sort(key=lambda s: bus_key(s[0]))
    gpus = [(busid, numa, busid if inner else None, None, None) for busid, numa in slots]
    nics = list(topo.nics)
    switches: list[TopoSwitch] = []
    inner_ids = {s.busid for s in inner}
    for i, (busid, numa) in enumerate(slots):
        if busid in inner_ids:
            sw = next(s for s in inner if s.busid == busid)
            as_nics = [TopoNic(name=u, busid=u, numa=numa, switch=busid) for u in sw.unnamed]
            nics += as_nics
            switches.append(replace(sw, gpus=(i,), nics=sw.nics + tuple(sw.unnamed),
                                    unnamed=()))
        else:
            switches.append(TopoSwitch(busid=busid, numa=numa, gpus=(i,)))
    switches += [s for s in topo.switches if s.nested]
    unnamed = [d for d in topo.unnamed
               if d.busid not in {b for b, _ in slots} and d.switch not in inner_ids]
    return _ordered(topo.cpus, gpus, nics, switches, unnamed, inferred=True)


@dataclass
class Fragment:
    """What a topology file gives one catalog entry: values and their provenance."""

    numa: dict[str, object]
    host: dict[str, object]
    sources: dict[str, dict[str, object]] = field(default_factory=dict)
    #: the CPU identity the file states, which the schema has no field for (said in notes)
    cpu_note: str | None = None


def cpu_summary(topo: Topology) -> str | None:
    """``GenuineIntel family 6 model 85`` style text for the CPUs, or None if unstated."""
    kinds = sorted({(c.vendor or "?", c.familyid, c.modelid, c.arch) for c in topo.cpus
                    if c.vendor or c.familyid is not None or c.modelid is not None},
                   key=str)
    if not kinds:
        return None
    return "; ".join(
        f"{v} CPU" + (f" family {f}" if f is not None else "")
        + (f" model {m}" if m is not None else "") + (f" ({a})" if a else "")
        for v, f, m, a in kinds)


def fragment(topo: Topology, *, source: str, as_of: str, confidence: str,
             note: str | None = None) -> Fragment:
    """The catalog facts of ``topo`` with their provenance: ``numa.nodes``,
    ``numa.gpu_nodes`` and ``host.pcie_switches`` (inferred GPUs: ``inferred``)."""
    cpu = cpu_summary(topo)
    switches = [{"gpus": list(s.gpus), **({"nics": list(s.nics)} if s.nics else {})}
                for s in topo.catalog_switches()]
    numa: dict[str, object] = {"nodes": topo.numa_nodes or None,
                               "gpu_nodes": topo.gpu_nodes or None}
    host: dict[str, object] = {"pcie_switches": switches or None}
    placed = ", ".join(f"GPU {g.index} " + ("behind " if g.inferred else "")
                       + f"{g.busid} on NUMA {g.numa}" for g in topo.gpus)
    base = "NCCL topology file" + (f"; {note}" if note else "")

    def prov(conf: str, text: str) -> dict[str, object]:
        return {"source": source, "as_of": as_of, "confidence": conf, "note": text}

    sources: dict[str, dict[str, object]] = {}
    nodes_note = f"{base}: {topo.numa_nodes} <cpu> NUMA node(s)" + (f", {cpu}" if cpu else "")
    if not topo.gpus:
        numa["gpu_nodes"] = None
        sources["numa.nodes"] = prov(confidence, nodes_note + "; the file names no GPU")
    elif topo.gpus_inferred:
        rule = ("inferred: the file names no GPU; one GPU behind each PCIe switch it lists, "
                "in PCI bus-id order")
        sources["numa.nodes"] = prov(confidence, nodes_note)
        sources["numa.gpu_nodes"] = prov("inferred", f"{base}; {rule}: {placed}")
        if switches:
            sources["host.pcie_switches"] = prov("inferred", f"{base}; {rule}")
    else:
        sources["numa"] = prov(confidence, f"{nodes_note}; GPUs in PCI bus-id (nvidia-smi) "
                                           f"order: {placed}")
        if switches:
            sources["host.pcie_switches"] = prov(
                confidence, f"{base}: GPUs and NICs under each PCIe switch element")
    return Fragment(numa=numa, host=host, sources=sources, cpu_note=cpu)


# --- writing a fragment into instances/<provider>.yaml, in place ---------------------------

#: the provenance keys a fragment sets; an old one of these is dropped when it is written
_OWN_SOURCE_KEYS = ("numa", "numa.nodes", "numa.gpu_nodes", "host.pcie_switches")
_KEY_LINE = re.compile(
    r"""^(?P<indent> *)(?P<q>['"]?)(?P<key>[A-Za-z_][\w.]*)(?P=q):(?P<rest>.*)$""")


def _flow(value: object) -> str:
    import yaml

    text: str = yaml.safe_dump(value, default_flow_style=True, sort_keys=False,
                               width=2**31, allow_unicode=True)
    return text.strip().removesuffix("...").strip()


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blank(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("#")


def _key_spans(lines: list[str], lo: int, hi: int, indent: int) -> dict[str, tuple[int, int]]:
    """Keys written at ``indent`` in ``lines[lo:hi]`` -> their line span (key line and the
    more-indented lines that continue it)."""
    spans: dict[str, tuple[int, int]] = {}
    i = lo
    while i < hi:
        m = _KEY_LINE.match(lines[i].rstrip("\r\n"))
        if m and len(m["indent"]) == indent:
            j = i + 1
            while j < hi and (_blank(lines[j]) or _indent_of(lines[j]) > indent):
                j += 1
            while j > i + 1 and _blank(lines[j - 1]):  # trailing blanks/comments stay outside
                j -= 1
            spans[m["key"]] = (i, j)
            i = j
        else:
            i += 1
    return spans


def _entry_span(lines: list[str], name: str) -> tuple[int, int, int]:
    """(first line, end line, key indent) of the ``- name: NAME`` entry."""
    pat = re.compile(r"""^(?P<dash> *- +)name: *(?P<q>['"]?)""" + re.escape(name)
                     + r"""(?P=q) *(#.*)?$""")
    hits = [i for i, ln in enumerate(lines) if pat.match(ln.rstrip("\r\n"))]
    if len(hits) != 1:
        raise UserInputError(
            f"the catalog file has {len(hits)} entries written '- name: {name}'",
            hint="the entry must exist once and start with its name")
    start = hits[0]
    m = pat.match(lines[start].rstrip("\r\n"))
    assert m is not None
    key_indent = len(m["dash"])
    item_indent = _indent_of(lines[start])
    end = start + 1
    while end < len(lines) and (_blank(lines[end]) or _indent_of(lines[end]) > item_indent):
        end += 1
    while end > start + 1 and _blank(lines[end - 1]):
        end -= 1
    return start, end, key_indent


def update_instance_yaml(text: str, name: str, frag: Fragment) -> str:
    """``text`` (an ``instances/<provider>.yaml``) with the entry ``name`` given ``frag``'s
    NUMA map, PCIe switches and their provenance. Only that entry's ``numa``, ``host`` and
    the fragment's keys of ``sources`` are rewritten; every other byte is kept. The result is
    checked: every other entry loads unchanged, and this one as the fragment says."""
    import yaml

    nl = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
        trailing_added = True
    else:
        trailing_added = False
    start, end, ki = _entry_span(lines, name)
    pad, sub = " " * ki, " " * (ki + 2)
    entry = lines[start:end]
    # work on the entry alone: line numbers relative to it; the '- ' line holds 'name'
    spans = _key_spans(entry, 1, len(entry), ki)
    old = yaml.safe_load(text) or {}
    old_entry = next((e for e in old.get("instances", []) if e.get("name") == name), None)
    if old_entry is None:
        raise UserInputError(f"no entry {name!r} under 'instances:'",
                             hint="add the instance first")

    def value_lines(key: str, mapping: dict[str, object]) -> list[str]:
        body = [f"{sub}{k}:{nl}" + "".join(f"{sub}- {_flow(x)}{nl}" for x in v)
                if isinstance(v, list) and v and isinstance(v[0], dict)
                else f"{sub}{k}: {_flow(v)}{nl}" for k, v in mapping.items()]
        return [f"{pad}{key}:{nl}", *body]

    new_numa = {**(old_entry.get("numa") or {}),
                **{k: v for k, v in frag.numa.items() if v is not None}}
    new_host = {**(old_entry.get("host") or {}),
                **{k: v for k, v in frag.host.items() if v is not None}}
    sources = dict(old_entry.get("sources") or {})
    written = {k: v for k, v in frag.sources.items()}
    stale = [k for k in _OWN_SOURCE_KEYS if k in sources and k not in written]
    for k in stale:
        del sources[k]
    sources.update(written)

    replacements: dict[str, list[str]] = {}
    if new_numa:
        replacements["numa"] = value_lines("numa", new_numa)
    if new_host:
        replacements["host"] = value_lines("host", new_host)
    # sources: surgery on its own keys where it is a block, else the whole mapping anew
    if "sources" not in spans:
        raise UserInputError(f"entry {name!r} has no 'sources:'", hint="every entry has one")
    s0, s1 = spans["sources"]
    if _KEY_LINE.match(entry[s0].rstrip("\r\n"))["rest"].strip():  # type: ignore[index]
        replacements["sources"] = [f"{pad}sources:{nl}"] + [
            f"{sub}{k}: {_flow(v)}{nl}" for k, v in sources.items()]
    else:
        inner = _key_spans(entry, s0 + 1, s1, ki + 2)
        drop = {k for k in (*stale, *written) if k in inner}
        kept: list[str] = []
        i = s0 + 1
        for key, (a, b) in sorted(inner.items(), key=lambda kv: kv[1]):
            kept += entry[i:a]
            if key not in drop:
                kept += entry[a:b]
            i = b
        kept += entry[i:s1]
        replacements["sources"] = [entry[s0], *kept] + [
            f"{sub}{k}: {_flow(v)}{nl}" for k, v in written.items()]

    out: list[str] = [entry[0]]
    i = 1
    placed: set[str] = set()
    order = sorted(spans.items(), key=lambda kv: kv[1])
    anchor = next((k for k in ("cpu", "gpu") if k in spans), None)
    for key, (a, b) in order:
        out += entry[i:a]
        if key in replacements:
            out += replacements[key]
            placed.add(key)
        else:
            out += entry[a:b]
        i = b
        if key == anchor:  # new numa/host go after the CPU (or GPU) line, as elsewhere
            for k in ("numa", "host"):
                if k in replacements and k not in spans:
                    out += replacements[k]
                    placed.add(k)
    out += entry[i:]
    for k in ("numa", "host"):
        if k in replacements and k not in placed:
            raise UserInputError(f"entry {name!r} has neither 'cpu:' nor 'gpu:' to place "
                                 f"'{k}:' after", hint="write the entry in block style")
    result = "".join(lines[:start] + out + lines[end:])
    if trailing_added:
        result = result[: -len(nl)]

    # the check: the rest unchanged, this entry exactly as meant
    new = yaml.safe_load(result)
    expected = {**old_entry, "numa": new_numa or old_entry.get("numa"),
                "sources": sources}
    if new_host:
        expected["host"] = new_host
    expected = {k: v for k, v in expected.items() if v is not None}
    got = next((e for e in new.get("instances", []) if e.get("name") == name), None)
    rest_old = [e for e in old.get("instances", []) if e.get("name") != name]
    rest_new = [e for e in new.get("instances", []) if e.get("name") != name]
    if got != expected or rest_old != rest_new or {k: v for k, v in old.items()
                                                   if k != "instances"} != {
            k: v for k, v in new.items() if k != "instances"}:
        raise UserInputError(f"could not update entry {name!r} in place without changing "
                             "anything else", hint="edit it by hand from the printed fragment")
    return result
