"""Support tickets about an instance's NUMA topology, for the provider's support engineers.

Most clouds publish neither the GPU-to-NUMA map of their VMs nor how the guest's NUMA nodes
relate to the host's sockets. :func:`ticket` writes the questions a user must ask to bind vLLM
right, from what the catalog knows (stated, with its sources, never asked again) and, with a
probe (``advisor topology --json``), from every difference between the catalog's claim and
what the machine showed — quoting the observed values and the commands that show them.

Pure apart from the templates: the catalog, the probe and the plan come in as models.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog.catalog import Catalog
from advisor.catalog.schema import InstanceType, Provenance, provenance_of
from advisor.core.host import NUMA_WEIGHT, cpu_floor
from advisor.errors import UserInputError
from advisor.host.topology import Difference, Topology, differences, gpu_nodes

Format = Literal["markdown", "text", "json"]

# -- what a ticket says advisor does: each phrase is true of the code it names, and
#    tests/test_tickets.py pins it there ---------------------------------------------------------
#: what advisor.core.ranking scores an offer by with no load and the default objective
#: (Basis.score: "$/h of one replica x (1 + host NUMA weight)")
DEFAULT_RANKING = ("the $/h of one replica within the latency targets, times 1 + a NUMA-placement "
                   "weight")
#: advisor.core.host.NUMA_WEIGHT: a host-heavy plan whose replica is not known to sit on one node
HOST_HEAVY_WEIGHT = NUMA_WEIGHT["host-heavy"]["unknown"]

#: what each provider calls a machine size
def product_word(provider: str) -> str:
    """The provider's word for what it sells ("instance type", "VM size"); "machine" else."""
    from advisor.clouds.registry import CLOUDS, info

    return info(provider).product_word if provider in CLOUDS else "machine"


def provider_title(provider: str) -> str:
    from advisor.clouds.registry import CLOUDS, info

    return info(provider).title if provider in CLOUDS else provider


class Fact(BaseModel):
    model_config = ConfigDict(frozen=True)
    topic: str
    statement: str
    source: str
    as_of: str
    confidence: str


class Question(BaseModel):
    model_config = ConfigDict(frozen=True)
    number: int
    topic: str
    text: str
    why: str
    evidence: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)


class Ticket(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance: str
    region: str | None
    subject: str
    context: str
    workload: str | None = None
    probe: str | None = None
    facts: list[Fact]
    questions: list[Question]

    def render(self, fmt: Format = "markdown") -> str:
        """The ticket as Markdown, plain text or JSON."""
        return render_ticket(self, fmt)


def _fact(topic: str, statement: str, prov: Provenance) -> Fact:
    return Fact(topic=topic, statement=statement, source=prov.source, as_of=str(prov.as_of),
                confidence=prov.confidence)


def _domain_term(vendor: str | None) -> tuple[str, str]:
    """(examples, the setting in the vendor's words) of a socket's NUMA sub-domains: NPS on
    AMD EPYC, SNC (sub-NUMA clustering) on Intel Xeon."""
    if vendor == "amd":
        return "NPS2/NPS4", "NPS (NUMA nodes per socket: NPS1, NPS2 or NPS4) setting"
    if vendor == "intel":
        return "SNC2/SNC4", "SNC (sub-NUMA clustering: off, SNC2 or SNC4) mode"
    return ("NPS2/NPS4 or SNC2/SNC4",
            "NPS (AMD EPYC) or SNC (Intel Xeon sub-NUMA clustering) setting")


def _map(nodes: list[int | None]) -> str:
    return ", ".join(f"GPU{i}→{'?' if n is None else n}" for i, n in enumerate(nodes))


class _Builder:
    def __init__(self, cat: Catalog, inst: InstanceType, region: str | None,
                 probe: Topology | None) -> None:
        self.cat, self.inst, self.probe = cat, inst, probe
        self.region = region or inst.price.region
        self.word = product_word(inst.provider)
        self.cpu = cat.cpus.get(inst.cpu.model) if inst.cpu.model else None
        self.vendor = self.cpu.vendor if self.cpu else None
        if self.vendor is None and inst.cpu.codename:
            fam = (cat.family_of_codename(inst.cpu.codename) or "").lower()
            self.vendor = "amd" if "amd" in fam else "intel" if "intel" in fam else None
        self.facts: list[Fact] = []
        self.questions: list[tuple[str, str, str, list[str], list[str]]] = []

    def prov(self, field: str) -> Provenance:
        return provenance_of(self.inst.sources, field)

    def ask(self, topic: str, text: str, why: str, evidence: list[str] | None = None,
            commands: list[str] | None = None) -> None:
        self.questions.append((topic, text, why, evidence or [], commands or []))

    # -- what the catalog knows -------------------------------------------------------------
    def known(self) -> None:
        inst, cpu = self.inst, self.cpu
        gpu = self.cat.gpus.get(inst.gpu.model)
        self.facts.append(_fact("gpus", f"{inst.gpu.count} x {gpu.name if gpu else inst.gpu.model}"
                                f", {inst.vcpus} vCPUs", self.prov("gpu")))
        if cpu is not None:
            self.facts.append(_fact("cpu", f"host CPU {cpu.model} ({cpu.family})",
                                    self.prov("cpu")))
            if cpu.memory_channels_per_socket and cpu.memory_type and cpu.memory_speed_mt_s:
                # the CPU's memory system has its own source (cpus.yaml), not the instance's
                self.facts.append(_fact(
                    "cpu-memory", f"{cpu.model}: {cpu.memory_channels_per_socket} channels of "
                    f"{cpu.memory_type}-{cpu.memory_speed_mt_s} per socket"
                    + (f", peak {cpu.memory_bandwidth_gb_s_per_socket:g} GB/s per socket"
                       if cpu.memory_bandwidth_gb_s_per_socket else ""),
                    provenance_of(cpu.sources, "memory_channels_per_socket")))
        elif inst.cpu.codename:
            fam = self.cat.family_of_codename(inst.cpu.codename) or inst.cpu.codename
            self.facts.append(_fact("cpu", f"host CPU generation {fam} (exact part not "
                                    "published)", self.prov("cpu")))
        if inst.cpu.sockets:
            self.facts.append(_fact("sockets", f"{inst.cpu.sockets} socket(s)",
                                    self.prov("cpu.sockets")))
        if inst.numa.nodes:
            self.facts.append(_fact("numa-nodes", f"the guest sees {inst.numa.nodes} NUMA "
                                    "node(s)", self.prov("numa.nodes")))
        nodes = inst.numa.gpu_nodes
        if nodes and all(n is not None for n in nodes):
            self.facts.append(_fact("gpu-numa", f"GPU-to-NUMA map (nvidia-smi order): "
                                    f"{_map(nodes)}", self.prov("numa.gpu_nodes")))
        h = inst.host
        label = {"amd": "NPS", "intel": "SNC"}.get(self.vendor or "", "NPS/SNC")
        for field, value in (
            ("numa_domains_per_socket", h.numa_domains_per_socket
             and f"{h.numa_domains_per_socket} NUMA domain(s) per socket "
                 f"({label}{h.numa_domains_per_socket})"),
            ("dedicated_cores", None if h.dedicated_cores is None else
             "vCPUs are pinned to dedicated physical cores" if h.dedicated_cores else
             "vCPUs are not pinned to dedicated cores"),
            ("smt_siblings_exposed", None if h.smt_siblings_exposed is None else
             "both SMT siblings of each core are exposed" if h.smt_siblings_exposed else
             "one thread per core is exposed (SMT siblings hidden)"),
            ("memory_bandwidth_gb_s", h.memory_bandwidth_gb_s
             and f"{h.memory_bandwidth_gb_s:g} GB/s of memory bandwidth available to the VM"),
            ("memory_channels", h.memory_channels
             and f"{h.memory_channels} memory channels behind the VM"),
            ("pcie_switches", h.pcie_switches and "PCIe switches: " + "; ".join(
                f"GPUs {','.join(map(str, s.gpus))}"
                + (f" with NICs {','.join(s.nics)}" if s.nics else "")
                for s in h.pcie_switches)),
            ("gpudirect_rdma", None if h.gpudirect_rdma is None else
             "GPUDirect RDMA is " + ("enabled" if h.gpudirect_rdma else "not available")),
            ("topology_stable", None if h.topology_stable is None else
             "the topology is " + ("stable" if h.topology_stable else "not guaranteed to be "
                                   "stable") + " across stop/start and host maintenance"),
        ):
            if value:
                self.facts.append(_fact(field, str(value), self.prov(f"host.{field}")))

    # -- the standing questions -------------------------------------------------------------
    def standing(self, skip_gpu_map: bool) -> None:
        inst, h = self.inst, self.inst.host
        n = inst.gpu.count
        nodes = inst.numa.gpu_nodes
        word = self.word
        examples, setting = _domain_term(self.vendor)
        complete = bool(nodes) and all(x is not None for x in nodes or [])
        inferred = complete and self.prov("numa.gpu_nodes").confidence == "inferred"
        if not skip_gpu_map and inferred:
            # a map read off a file that names only PCIe switches (AWS's p5/g5 topology files)
            # or a sibling size: stated above as a fact of that confidence, and asked to confirm
            self.ask("gpu-numa",
                     f"We inferred this GPU-to-NUMA map (nvidia-smi order) from the source "
                     f"named above, which does not state it directly: {_map(nodes or [])}. Is "
                     f"it right, and the same on every host of this {word}? If not, which "
                     "NUMA node does each GPU attach to?",
                     "vLLM's worker for a GPU should run, and allocate its pinned host "
                     "buffers, on that GPU's node (numactl --cpunodebind/--membind); a wrong "
                     "node sends every host-to-device copy across the inter-socket link.",
                     commands=["nvidia-smi topo -m",
                               "cat /sys/bus/pci/devices/*/numa_node (for the GPUs' bus ids)"])
        elif not skip_gpu_map and not complete:
            partly = (f" (published so far: {_map(nodes)})" if nodes else "")
            self.ask("gpu-numa",
                     f"Which NUMA node does each of the {n} GPU(s) attach to, in nvidia-smi "
                     f"(PCI bus) order{partly}? Is that map the same on every host of this "
                     f"{word}?",
                     "vLLM's worker for a GPU should run, and allocate its pinned host "
                     "buffers, on that GPU's node (numactl --cpunodebind/--membind); a wrong "
                     "node sends every host-to-device copy across the inter-socket link.",
                     commands=["nvidia-smi topo -m",
                               "cat /sys/bus/pci/devices/*/numa_node (for the GPUs' bus ids)"])
        if None in (inst.numa.nodes, inst.cpu.sockets, h.numa_domains_per_socket):
            have = []
            if inst.numa.nodes:
                have.append(f"the guest sees {inst.numa.nodes} NUMA node(s)")
            if inst.cpu.sockets:
                have.append(f"the host has {inst.cpu.sockets} socket(s)")
            known = f" The catalog says {' and '.join(have)}." if have else ""
            self.ask("numa-sockets",
                     f"Do the guest's NUMA nodes map one-to-one onto the host's physical "
                     f"sockets, or onto sub-socket domains? Which {setting} do the hosts of "
                     f"this {word} run with?{known}",
                     "advisor's launcher binds each vLLM replica to its GPUs' NUMA node "
                     f"(numactl --cpunodebind/--membind); if a node is a slice of a socket "
                     f"({examples}) or spans two sockets, the bound replica gets a different "
                     "share of memory bandwidth and locality than a whole socket gives, and "
                     "advisor's ranking counts more than one NUMA domain per socket as "
                     f"host-heavy: +{HOST_HEAVY_WEIGHT:.0%} on the score of a replica not known "
                     "to sit on one node.", commands=["numactl --hardware", "lscpu"])
        if h.dedicated_cores is None or h.smt_siblings_exposed is None:
            self.ask("cpu-pinning",
                     "Are the VM's vCPUs pinned to dedicated physical cores, and how are SMT "
                     "siblings exposed (both threads of a core as vCPU pairs, or one thread "
                     "per core)?",
                     "vLLM's API server, engine core and per-GPU workers each keep a core "
                     f"busy: advisor checks vLLM's floor of 2 + N physical cores ({cpu_floor(n)} "
                     f"for these {n} GPU(s)), counting two vCPUs per core unless SMT is known "
                     "to be off, and its launcher sets OMP_NUM_THREADS to the NUMA node's CPUs "
                     "shared among the replicas bound there; both are right only when the "
                     "vCPUs are whole, unshared cores.",
                     commands=["lscpu -e", "cat /sys/devices/system/cpu/cpu0/topology/"
                                           "thread_siblings_list"])
        if h.memory_bandwidth_gb_s is None or h.memory_channels is None:
            if self.cpu is not None and self.cpu.memory_channels_per_socket:
                cpu_known = (f" We know the CPU is {self.cpu.model} with "
                             f"{self.cpu.memory_channels_per_socket} channels per socket; "
                             "we ask for the VM's share.")
            else:
                cpu_known = " Please also name the CPU model and DDR generation and speed."
            self.ask("memory-bandwidth",
                     "What memory bandwidth, and how many memory channels, are available to "
                     f"this VM on each NUMA node?{cpu_known}",
                     "with --cpu-offload-gb, weights stream from host memory in every forward "
                     "pass: advisor estimates that stream at the lower of the PCIe link and the "
                     "replica's share of the CPU's published memory bandwidth, which may not be "
                     "the VM's. Otherwise host memory bandwidth carries no weight: by default "
                     f"advisor ranks offers by {DEFAULT_RANKING}.",
                     commands=["numactl --hardware", "dmidecode -t memory (where permitted)"])
        if n > 1 and (h.pcie_switches is None or h.gpudirect_rdma is None):
            self.ask("pcie",
                     "Which GPUs and NICs share a PCIe switch, and is GPUDirect RDMA enabled "
                     "between the GPUs and the NICs?",
                     "tensor-parallel groups should sit under one switch, and the NIC that "
                     "carries a group's NCCL traffic to other nodes next to it.",
                     commands=["nvidia-smi topo -m", "lspci -tv"])
        if h.topology_stable is None:
            self.ask("stability",
                     "Is the topology (GPU-to-NUMA map, NUMA nodes, vCPU numbering) the same "
                     "after stop/start, resize and host maintenance events?",
                     "advisor's launcher reads the binding from sysfs at every boot, but its "
                     "recommendation judges NUMA placement from the published map: a map that "
                     "can change makes both the recommendation and this ticket's answers "
                     "host-specific.",
                     commands=["advisor topology --json (before and after a stop/start)"])

    # -- public sources that disagree --------------------------------------------------------
    def conflicts(self) -> None:
        """One question per other source whose facts disagree with the catalog's (its
        ``conflicts``): both values of each fact, both sources, which value advisor uses and
        why — so that one reply settles them."""
        by_source: dict[str, list[Any]] = {}
        for c in self.inst.conflicts:
            by_source.setdefault(c.source.source, []).append(c)
        for url, group in by_source.items():
            facts = "; ".join(
                f"{c.fact}: {self.inst.fact(c.fact)} per {self.prov(c.fact).source} "
                f"({self.prov(c.fact).as_of}), {c.other} per this file" for c in group)
            self.ask(f"conflict:{','.join(c.fact for c in group)}",
                     f"Two public sources disagree on {self.inst.name}. {url} "
                     f"({group[0].source.as_of}) states: {facts}. Which holds for the hosts "
                     "you run today?",
                     f"advisor uses {', '.join(str(self.inst.fact(c.fact)) for c in group)}: "
                     f"{group[0].why}",
                     [f"{c.fact}: {self.inst.fact(c.fact)} vs {c.other}" for c in group],
                     ["numactl --hardware", "nvidia-smi topo -m", "lscpu"])

    # -- the probe's differences ------------------------------------------------------------
    def from_probe(self, diffs: list[Difference]) -> None:
        word, inst = self.word, self.inst
        numa_src = self.prov("numa.gpu_nodes").source
        unknown = [d for d in diffs if d.kind == "gpu-node-unknown"]
        for d in diffs:
            path = f"/sys/bus/pci/devices/{d.bus_id}/numa_node" if d.bus_id else None
            gpu_cmds = [f"cat {path}" if path else "nvidia-smi topo -m", "nvidia-smi topo -m"]
            gpu_cmds = list(dict.fromkeys(gpu_cmds))
            if d.kind == "gpu-node-hidden":
                seen = f"`{path}` reads -1 on GPU {d.gpu}" if path else \
                    f"GPU {d.gpu} shows no NUMA affinity"
                doc = f"; the catalog ({numa_src}) documents node {d.claimed}" \
                    if d.claimed is not None else ""
                self.ask("probe:gpu-node-hidden",
                         f"{seen}{doc}. Can the hypervisor expose this GPU's NUMA affinity to "
                         "the guest (ACPI proximity domain, _PXM), and which node does it sit "
                         "on?",
                         "with numa_node -1 advisor's launcher cannot bind the replica and "
                         "runs it unbound: its memory lands wherever the kernel puts it.",
                         [seen], gpu_cmds + [f"lspci -vvv -s {d.bus_id}" if d.bus_id else
                                             "lspci -vvv"])
            elif d.kind == "gpu-node-mismatch":
                seen = f"GPU {d.gpu} ({d.bus_id}) shows NUMA node {d.observed}" + (
                    f" (`{path}`)" if path else "")
                self.ask("probe:gpu-node-mismatch",
                         f"{seen}, but the catalog ({numa_src}) documents node {d.claimed}. Is "
                         f"the published map out of date, or do hosts of this {word} differ? "
                         "Which map holds?",
                         "advisor gives each replica consecutive GPUs and judges from the "
                         "published map whether they share a NUMA node (the placement risk "
                         "and weight of its recommendation); a wrong map hides a replica that "
                         "crosses sockets.", [seen], gpu_cmds)
            elif d.kind == "node-count":
                said = (f"the catalog says {d.claimed}" if d.claimed is not None else
                        "no public document states the count")
                self.ask("probe:node-count",
                         f"The guest shows {d.observed} NUMA node(s), {said}. How many NUMA "
                         f"nodes does a guest of this {word} see, on every host?",
                         "advisor's launcher binds each replica to its GPUs' node and shares "
                         "that node's CPUs among the replicas bound there (OMP_NUM_THREADS): "
                         "the node count decides which CPUs each replica gets.",
                         [f"`numactl --hardware` lists {d.observed} node(s)"],
                         ["numactl --hardware", "ls -d /sys/devices/system/node/node*"])
            elif d.kind == "fewer-nodes-than-sockets":
                self.ask("probe:fewer-nodes-than-sockets",
                         f"The guest shows {d.observed} NUMA node(s) on a host with "
                         f"{d.claimed} sockets. Is the VM's memory interleaved across the "
                         f"sockets or confined to one, and can the hypervisor expose the "
                         f"{d.claimed} sockets as NUMA nodes?",
                         "with fewer nodes than sockets no binding can keep a GPU's host "
                         "memory on its socket: part of every copy crosses the inter-socket "
                         "link.", [f"{d.observed} node(s) in /sys/devices/system/node, "
                                   f"{d.claimed} sockets in the catalog "
                                   f"({self.prov('cpu.sockets').source})"],
                         ["numactl --hardware", "lscpu | grep -i -e socket -e numa"])
            # gpu-count: never here, check_probe_matches refuses such a probe
        if unknown:
            seen = ", ".join(f"GPU{d.gpu}→{d.observed}" for d in unknown)
            paths = [f"/sys/bus/pci/devices/{d.bus_id}/numa_node" for d in unknown if d.bus_id]
            self.ask("probe:gpu-node-unknown",
                     f"On our instance the GPUs sit on these NUMA nodes: {seen}. No public "
                     f"document states this map for {inst.name}. Is it the same on every host "
                     f"of this {word}, and can it be published?",
                     "advisor's launcher binds each replica from this map at boot, and its "
                     "recommendation judges NUMA placement from the published one; it should "
                     "not depend on the host the VM lands on.",
                     [f"read from {len(paths)} sysfs numa_node file(s), e.g. `{paths[0]}`"]
                     if paths else [f"from nvidia-smi topo -m: {seen}"],
                     ["nvidia-smi topo -m", "cat /sys/bus/pci/devices/*/numa_node"])


# -- what a ticket may be asked about ------------------------------------------------------------
def _regions(cat: Catalog, provider: str) -> set[str]:
    return {r for i in cat.instances.values() if i.provider == provider for r in i.prices}


def check_region(cat: Catalog, inst: InstanceType, region: str) -> None:
    """``region`` is one where the catalog prices ``inst``; else the one line recommend prints
    for a region (:func:`advisor.api.check_regions`: whose region it is, if another cloud's),
    with the closest of this instance's regions as the hint. An instance (or provider) the
    catalog prices nowhere is asked about any well-formed region: nothing to check it against."""
    import difflib

    from advisor.api import check_regions
    from advisor.catalog.schema import REGION

    key = f"{inst.provider}:{inst.name}"
    mine = sorted(inst.prices)
    folded = {r.lower(): r for r in mine}

    def hint() -> str:
        close = ([folded[region.strip().lower()]] if region.strip().lower() in folded else
                 difflib.get_close_matches(region.lower(), mine, n=3, cutoff=0.6))
        where = (f"{key} is priced in {len(mine)} region(s)"
                 + (f", e.g. {', '.join(mine[:4])}" if not close else ""))
        return ((f"did you mean {', '.join(close)}? " if close else "") + where
                + f" ('advisor catalog show {key}' lists them)")

    if not REGION.match(region):
        raise UserInputError(f"--region {region[:80]!r} is not a region name",
                             hint=hint() if mine else "a region reads like us-east-1")
    if region in mine or not _regions(cat, inst.provider):
        return
    try:
        check_regions(cat, [region], [inst.provider])
    except UserInputError as exc:
        raise UserInputError(exc.message, hint=hint() if mine else exc.hint) from None
    if mine:  # the provider's region, not this type's
        raise UserInputError(f"--region: {key} is not priced in {inst.provider} region "
                             f"{region!r}", hint=hint())


def _gpu_label(cat: Catalog, vendor: str, device_id: str | None) -> str | None:
    """The catalog GPU id a probe's PCI ids name, or None."""
    if device_id is None:
        return None
    hits = sorted(g.id for g in cat.gpus.values() if g.vendor == vendor
                  and device_id.lower() in g.pci_device_ids)
    return hits[0] if len(hits) == 1 else None


def check_probe_matches(cat: Catalog, inst: InstanceType, topo: Topology) -> None:
    """The probe was made on an instance of this type: as many GPUs, of the catalog's model
    (by PCI vendor and device id, where the probe read them), and at least one NUMA node.
    Anything else is the probe of another machine: one line naming both sides, never a
    ticket that asks a provider about it."""
    key = f"{inst.provider}:{inst.name}"
    gpu = cat.gpus.get(inst.gpu.model)
    have = f"{key} has {inst.gpu.count} × {inst.gpu.model}"
    hint = (f"run 'advisor topology --json > topo.json' on the {key} instance and pass "
            "--probe topo.json")
    count = len(gpu_nodes(topo))
    # the probe's GPUs by model, in bus order: the catalog id, else its PCI ids
    models: dict[str, int] = {}
    wrong = False
    for dev in topo.gpus:
        label = _gpu_label(cat, dev.vendor, dev.device_id)
        if gpu is not None and (dev.vendor != gpu.vendor or (
                dev.device_id is not None and gpu.pci_device_ids
                and dev.device_id.lower() not in gpu.pci_device_ids)):
            wrong = True
        name = label or (f"PCI device {dev.device_id} of vendor {dev.vendor[:20]}"
                         if dev.device_id else f"{dev.vendor[:20]} GPU")
        models[name] = models.get(name, 0) + 1
    if count != inst.gpu.count or wrong:
        seen = ("0 GPUs" if count == 0 else
                " and ".join(f"{n} × {m}" for m, n in models.items()) if models else
                f"{count} GPU{'s' if count != 1 else ''}")
        fewer = (0 < count < inst.gpu.count and not wrong)
        raise UserInputError(
            f"the probe shows {seen}; {have}",
            hint=hint + ("; if it is one and a GPU is missing, that is a failed or hidden GPU "
                         f"to report to {provider_title(inst.provider)} support" if fewer
                         else ""))
    if not topo.nodes:
        raise UserInputError(f"the probe lists no NUMA node (/sys/devices/system/node was "
                             f"empty where it ran); a {key} guest shows at least one",
                             hint=hint)


def ticket(inst: InstanceType, catalog: Catalog, *, region: str | None = None,
           probe: Topology | None = None, workload: str | None = None) -> Ticket:
    """The ticket for ``inst``; ``workload`` is a sentence about the model and its layout. A
    region the catalog does not price ``inst`` in, or a probe of another machine, is a
    UserInputError (:func:`check_region`, :func:`check_probe_matches`)."""
    if region is not None:
        check_region(catalog, inst, region)
    if probe is not None:
        check_probe_matches(catalog, inst, probe)
    b = _Builder(catalog, inst, region, probe)
    b.known()
    diffs = differences(probe, inst) if probe is not None else []
    b.standing(skip_gpu_map=any(d.kind == "gpu-node-unknown" for d in diffs))
    b.from_probe(diffs)
    b.conflicts()
    # the probe's questions first: they quote what was seen on a real machine
    ordered = sorted(b.questions, key=lambda q: not q[0].startswith("probe:"))
    questions = [Question(number=i, topic=t, text=text, why=why, evidence=ev, commands=cmds)
                 for i, (t, text, why, ev, cmds) in enumerate(ordered, 1)]
    gpu = catalog.gpus.get(inst.gpu.model)
    where = f" in {b.region}" if b.region else ""
    provider = provider_title(inst.provider)
    subject = (f"NUMA topology of {b.word} {inst.name}{where}: {len(questions)} question(s) "
               "for LLM serving with vLLM" if questions else
               f"NUMA topology of {b.word} {inst.name}{where}: confirming the documented "
               "layout")
    context = (f"We serve large language models with vLLM on {provider} {b.word} {inst.name} "
               f"({inst.gpu.count} x {gpu.name if gpu else inst.gpu.model}){where}. To bind "
               "each vLLM replica's CPU threads and memory to the NUMA node of its GPUs "
               "(numactl --cpunodebind/--membind), we need host topology facts that the "
               "public documentation does not state. Below is what we already know, with its "
               "sources, and the questions that remain.")
    probe_line = None
    if probe is not None:
        nodes = gpu_nodes(probe)
        dist = [n.distances for n in probe.nodes if n.distances]
        probe_line = (f"Our instance (advisor topology): {len(probe.nodes)} NUMA node(s)"
                      + (f" with distances {dist}" if dist else "")
                      + f", {len(nodes)} GPU(s): {_map(nodes)}; "
                      + (f"{len(diffs)} difference(s) from the catalog." if diffs else
                         "no difference from the catalog."))
    return Ticket(provider=inst.provider, instance=inst.name, region=b.region, subject=subject,
                  context=context, workload=workload, probe=probe_line, facts=b.facts,
                  questions=questions)


@cache
def _templates() -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    from advisor.render.cloudinit import templates_dir

    env = Environment(loader=FileSystemLoader(str(templates_dir())), undefined=StrictUndefined,
                      autoescape=False, trim_blocks=True, lstrip_blocks=True,
                      keep_trailing_newline=True)
    env.filters["cell"] = lambda v: str(v).replace("|", "\\|").replace("\n", " ")
    return env


def render_ticket(t: Ticket, fmt: Format = "markdown") -> str:
    if fmt == "json":
        return t.model_dump_json(indent=2) + "\n"
    name = "ticket.md.j2" if fmt == "markdown" else "ticket.txt.j2"
    return str(_templates().get_template(name).render(t=t))


# -- the SDK call: reads the probe file and plans the workload ---------------------------------
def load_probe(source: str | Path | dict[str, Any] | Topology) -> Topology:
    """A Topology from ``advisor topology --json`` output (a path, its parsed JSON, or one):
    bounded, of advisor's kind, every number in range (:func:`advisor.host.local.load_probe`)."""
    from advisor.host.local import load_probe as _load

    return _load(source)


def workload_sentence(model: str, ctx: int, inst: InstanceType, catalog: Catalog) -> str:
    """The model, context and the layout advisor plans for it on ``inst``."""
    from advisor.api import recommend

    recs, rejected = recommend(model, ctx, catalog=catalog, providers=[inst.provider],
                               with_rejected=True)
    mine = [r for r in recs if r.instance == inst.name]
    if not mine:
        why = next((r.reason for r in rejected if r.instance == inst.name), "not ranked")
        return f"{model} at a context of {ctx} tokens; advisor finds no layout on this " \
               f"{product_word(inst.provider)}: {why}."
    p = mine[0].plan
    groups = " and ".join(f"{r.gpus[0]}-{r.gpus[-1]}" if len(r.gpus) > 1 else str(r.gpus[0])
                          for r in p.replica_layout)
    return (f"{model} at a context of {ctx} tokens, served as {p.replicas} vLLM replica(s) of "
            f"tensor-parallel size {p.tp}" + (f" x pipeline {p.pp}" if p.pp > 1 else "")
            + f" (GPUs {groups}), each bound at boot to the NUMA node sysfs shows for its GPUs.")


def make_ticket(instance: str, *, region: str | None = None,
                probe: str | Path | dict[str, Any] | Topology | None = None,
                model: str | None = None, ctx: int | None = None,
                catalog: Catalog | None = None) -> Ticket:
    """``advisor.ticket``: the support ticket for ``instance`` (PROVIDER:TYPE)."""
    from advisor.api import check_fields
    from advisor.catalog import load as load_catalog

    check_fields({k: v for k, v in (("model", model), ("ctx", ctx)) if v is not None})
    cat = catalog or load_catalog()
    inst = cat.instance(instance)
    if region is not None:
        check_region(cat, inst, region)
    if (model is None) != (ctx is None):
        raise UserInputError("--model and --ctx go together",
                             hint="give both to describe the workload, or neither")
    if ctx is not None and ctx <= 0:
        raise UserInputError(f"--ctx must be positive, not {ctx}")
    topo = load_probe(probe) if probe is not None else None
    if topo is not None:
        check_probe_matches(cat, inst, topo)
    work = workload_sentence(model, ctx, inst, cat) if model and ctx else None
    return ticket(inst, cat, region=region, probe=topo, workload=work)
