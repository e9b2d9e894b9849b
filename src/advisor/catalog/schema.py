"""Pydantic models of the catalog: GPUs, CPUs, instance types, model aliases.

Every entry carries ``sources``: a map from a field path (``"price"``, ``"numa.gpu_nodes"``)
to the :class:`Provenance` of that field, with ``"default"`` covering every field that has
no entry of its own. What no public source states is ``None`` in the data, never a guess.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Confidence = Literal["documented", "measured", "inferred"]

#: Names that reach shell lines, file names and cloud APIs later: letters, digits, ``. _ -``
#: and, for Azure sizes and GCP types, nothing else. A hostile name fails here, at load time.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}\Z")
REGION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
CONFIG_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.json\Z")


def _check_region(value: str) -> str:
    if not REGION.match(value):
        raise ValueError(f"{value!r} is not a region name (letters, digits, '-', '_')")
    return value

#: no catalog number is anywhere near this: a value above it is a typo or a hostile file
#: (issue 17: GPU memory 1e300, a price of 1e309); NaN and infinities are refused by _Model
ABSURD = 1e6
NonNegFloat = Annotated[float, Field(ge=0, le=ABSURD)]
PosFloat = Annotated[float, Field(gt=0, le=ABSURD)]
PosInt = Annotated[int, Field(gt=0, le=ABSURD)]
#: the most an hour of one instance type costs on any cloud today is ~$120 (p6e-gb200 ultra
#: servers are sold per rack, not here); ten times that is refused as a typo
MAX_USD_PER_HOUR = 1000.0
UsdPerHour = Annotated[float, Field(ge=0, le=MAX_USD_PER_HOUR)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True,
                              allow_inf_nan=False)


class Provenance(_Model):
    """Where a fact comes from."""

    source: Annotated[str, Field(min_length=3)]
    as_of: dt.date
    confidence: Confidence = "documented"
    note: str | None = None


Sources = dict[str, Provenance]


class Conflict(_Model):
    """Two public sources that disagree on one fact: the other source's value and where it is
    stated, beside the catalog's own (``sources``), and why the catalog's value is the one
    used. ``catalog validate`` refuses a conflict without ``why``: a disagreement nobody chose
    between is not a fact to rank on."""

    #: the fact's dotted path, as in ``sources`` (numa.nodes, numa.gpu_nodes, cpu.model, …)
    fact: Annotated[str, Field(min_length=1, max_length=80)]
    #: the value the other source states
    other: Any
    #: where it is stated
    source: Provenance
    #: why the catalog keeps its own value (the recorded choice)
    why: Annotated[str, Field(max_length=800)] | None = None


def _check_sources(sources: Sources) -> Sources:
    if "default" not in sources:
        raise ValueError("needs a 'default' entry: the source of every fact without its own")
    return sources


def _check_repo_id(value: str) -> str:
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z", value):
        raise ValueError(f"{value!r} is not a Hugging Face repo id (owner/name)")
    return value


def _check_name(value: str) -> str:
    if not SAFE_NAME.match(value):
        raise ValueError(
            f"{value!r} is not a safe name: use letters, digits, '.', '_' and '-' only"
        )
    return value


class Interconnect(_Model):
    kind: Literal["nvlink", "infinity-fabric", "pcie"]
    generation: PosInt | None = None
    #: total bidirectional GPU-to-GPU bandwidth per GPU, GB/s
    bandwidth_gb_s: PosFloat | None = None


class Gpu(_Model):
    """One accelerator model, as its vendor's datasheet gives it."""

    id: str
    name: str
    vendor: Literal["nvidia", "amd"]
    architecture: str | None = None
    #: CUDA compute capability (major.minor): one architecture name can cover several (the
    #: B200 is 10.0, the RTX PRO 6000 Blackwell 12.0), and vLLM picks kernels by the number
    compute_capability: Annotated[float, Field(ge=1.0, le=20.0)] | None = None
    aliases: list[str] = Field(default_factory=list)
    #: PCI device ids the card reports in sysfs (/sys/bus/pci/devices/*/device), lower-case
    #: ``0x`` + 4 hex digits: how ``--gpu local`` and ``render --target local`` name a host's GPU
    pci_device_ids: list[Annotated[str, Field(pattern=r"^0x[0-9a-f]{4}$")]] = Field(
        default_factory=list, max_length=16)
    form_factor: Literal["sxm", "pcie", "oam", "nvl"] | None = None
    #: physical memory as marketed (the vendors' "80 GB" HBM is 80 GiB of DRAM); the largest
    #: GPU sold today has 288 GB: 2 TiB is refused as a typo
    memory_gib: Annotated[float, Field(gt=0, le=2048)]
    #: total memory the driver reports (nvidia-smi "MiB"), after ECC and reservations
    usable_memory_mib: PosInt | None = None
    memory_type: str | None = None
    memory_bandwidth_gb_s: PosFloat | None = None
    #: dense (no sparsity) tensor throughput
    bf16_tflops: PosFloat | None = None
    fp16_tflops: PosFloat | None = None
    fp8_tflops: PosFloat | None = None
    interconnect: Interconnect | None = None
    pcie_gen: PosInt | None = None
    tdp_w: PosInt | None = None
    sources: Sources

    _ids = field_validator("id")(_check_name)
    _src = field_validator("sources")(_check_sources)

    @property
    def cuda_memory_gib(self) -> float:
        """Total memory vLLM budgets from: what the driver reports where the catalog has it,
        else the marketed size (a little more than the driver will report)."""
        return self.usable_memory_mib / 1024 if self.usable_memory_mib else self.memory_gib


class Cpu(_Model):
    """One host processor model and the memory system around one socket."""

    model: str
    vendor: Literal["amd", "intel"]
    #: e.g. "AMD EPYC 9004 (Genoa)", "Intel Xeon 4th gen (Sapphire Rapids)"
    family: str
    codename: str
    microarchitecture: str | None = None
    cores_per_socket: PosInt | None = None
    memory_type: Literal["DDR4", "DDR5"] | None = None
    memory_channels_per_socket: PosInt | None = None
    memory_speed_mt_s: PosInt | None = None
    #: theoretical peak: channels x MT/s x 8 bytes
    memory_bandwidth_gb_s_per_socket: PosFloat | None = None
    pcie_gen: PosInt | None = None
    sources: Sources

    _src = field_validator("sources")(_check_sources)

    @model_validator(mode="after")
    def _bandwidth_matches_channels(self) -> Cpu:
        ch, mts, bw = (
            self.memory_channels_per_socket,
            self.memory_speed_mt_s,
            self.memory_bandwidth_gb_s_per_socket,
        )
        if ch and mts and bw:
            expected = ch * mts * 8 / 1000
            if abs(expected - bw) > 0.01 * expected:
                raise ValueError(
                    f"memory_bandwidth_gb_s_per_socket {bw} disagrees with "
                    f"{ch} channels x {mts} MT/s x 8 B = {expected:.1f} GB/s"
                )
        return self


class InstanceGpu(_Model):
    model: str
    #: the largest single instance sold today has 8 GPUs (16 on a2-megagpu-16g)
    count: Annotated[int, Field(gt=0, le=128)]


class InstanceCpu(_Model):
    #: a ``model`` of cpus.yaml, or None where no source names the exact part
    model: str | None = None
    #: the family's codename where a source names the generation but not the part
    codename: str | None = None
    sockets: PosInt | None = None


class Numa(_Model):
    #: NUMA nodes the guest OS sees
    nodes: PosInt | None = None
    #: NUMA node of each GPU, in PCI bus order (nvidia-smi index); ``None`` where unknown
    gpu_nodes: list[int | None] | None = None


class Fabric(_Model):
    """The network between instances that multi-node serving (PP across nodes) runs over."""

    kind: Literal["efa", "infiniband", "gpudirect-tcpx", "gpudirect-tcpxo", "gpudirect-rdma",
                  "ethernet"]
    #: total inter-node bandwidth of the instance, Gbit/s
    gbps: PosFloat | None = None

    @property
    def for_multi_node(self) -> bool:
        """An RDMA-class fabric: what vLLM's multi-node recipe expects between nodes."""
        return self.kind != "ethernet"


class PcieSwitch(_Model):
    """One PCIe switch (or root complex) and what hangs off it."""

    #: GPU indices (nvidia-smi order)
    gpus: list[Annotated[int, Field(ge=0)]]
    #: NIC names or indices as the source gives them (``mlx5_0``, ``eth1``, ``0``)
    nics: list[str] = Field(default_factory=list)


class Host(_Model):
    """Facts about the VM's host that clouds rarely publish; ``None`` where no source says.

    These are what ``advisor ticket`` asks a provider about; a documented one is stated in the
    ticket instead of asked.
    """

    #: NUMA domains per socket the host runs with: NPS (AMD EPYC) or SNC (Intel Xeon) setting
    numa_domains_per_socket: PosInt | None = None
    #: whether the VM's vCPUs are pinned to physical cores no other VM uses
    dedicated_cores: bool | None = None
    #: whether both SMT siblings of each core are exposed to the guest
    smt_siblings_exposed: bool | None = None
    #: memory bandwidth available to the VM, GB/s, and the memory channels behind it
    memory_bandwidth_gb_s: PosFloat | None = None
    memory_channels: PosInt | None = None
    #: which GPUs and NICs share a PCIe switch
    pcie_switches: list[PcieSwitch] | None = None
    gpudirect_rdma: bool | None = None
    #: whether the GPU-to-NUMA map and vCPU numbering survive stop/start and host maintenance
    topology_stable: bool | None = None


class Price(_Model):
    on_demand_usd_per_hour: UsdPerHour | None = None
    spot_usd_per_hour: UsdPerHour | None = None
    region: str | None = None
    #: the date of the price source (its snapshot or publication date), not of reading it
    as_of: dt.date | None = None
    #: where the price comes from (catalogs/prices/sources.yaml), for a row of the price files
    source: str | None = None

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        return None if value is None else _check_region(value)

    @model_validator(mode="after")
    def _priced_needs_where_and_when(self) -> Price:
        priced = self.on_demand_usd_per_hour is not None or self.spot_usd_per_hour is not None
        if priced and (self.region is None or self.as_of is None):
            raise ValueError("a price needs its region and as_of date")
        if (self.spot_usd_per_hour is not None and self.on_demand_usd_per_hour is not None
                and self.spot_usd_per_hour >= self.on_demand_usd_per_hour):
            raise ValueError(f"spot ${self.spot_usd_per_hour}/h is not below on-demand "
                             f"${self.on_demand_usd_per_hour}/h: an anomaly of the source, "
                             "not a price to rank on")
        return self

    def usd(self, spot: bool) -> float | None:
        return self.spot_usd_per_hour if spot else self.on_demand_usd_per_hour


class InstanceType(_Model):
    """One cloud (or private) machine size with its GPUs."""

    provider: str
    name: str
    family: str | None = None
    vcpus: Annotated[int, Field(gt=0, le=4096)]
    memory_gib: Annotated[float, Field(gt=0, le=65536)] | None = None
    gpu: InstanceGpu
    cpu: InstanceCpu = Field(default_factory=InstanceCpu)
    numa: Numa = Field(default_factory=Numa)
    host: Host = Field(default_factory=Host)
    pcie_gen: PosInt | None = None
    network_gbps: PosFloat | None = None
    #: the inter-node fabric; None where no source states it
    fabric: Fabric | None = None
    #: the reference price (shown when no region is asked): see catalogs/prices/README.md
    price: Price = Field(default_factory=Price)
    #: region -> its price, from catalogs/prices/<provider>.csv (and the reference price)
    prices: dict[str, Price] = Field(default_factory=dict)
    regions: list[str] = Field(default_factory=list)
    #: the provider's retirement date (sources.available_until): from that day the type is
    #: kept for reference only — never ranked, rendered or provisioned
    available_until: dt.date | None = None
    #: facts two public sources disagree on, each with the choice made (see Conflict)
    conflicts: list[Conflict] = Field(default_factory=list, max_length=32)
    sources: Sources

    _name = field_validator("name")(_check_name)

    def retired(self, today: dt.date | None = None) -> str | None:
        """Why this type can no longer be launched (None while it can): its retirement."""
        day = today or dt.date.today()
        if self.available_until is None or day < self.available_until:
            return None
        cited = " ('advisor catalog show' cites the notice)" if "available_until" in \
            self.sources else ""
        return f"{self.key} was retired by {self.provider} on {self.available_until}{cited}"

    def fact(self, path: str) -> Any:
        """The value at a dotted path (numa.nodes) of this entry; KeyError where none."""
        value: Any = self
        for part in path.split("."):
            if isinstance(value, BaseModel) and part in type(value).model_fields:
                value = getattr(value, part)
            else:
                raise KeyError(path)
        return value

    @model_validator(mode="after")
    def _conflicts_are_decided(self) -> InstanceType:
        for c in self.conflicts:
            try:
                mine = self.fact(c.fact)
            except KeyError:
                raise ValueError(f"conflict on {c.fact!r}: no such fact") from None
            if mine == c.other:
                raise ValueError(f"conflict on {c.fact}: both sources say {mine!r}")
            if not (c.why or "").strip():
                raise ValueError(
                    f"{c.fact}: two sources disagree ({mine!r} here, {c.other!r} in "
                    f"{c.source.source}) and no choice is recorded: add why")
        return self

    @model_validator(mode="after")
    def _prices_keyed_by_their_region(self) -> InstanceType:
        for region, p in self.prices.items():
            if p.region != region:
                raise ValueError(f"prices[{region!r}] says region {p.region!r}")
        return self

    def price_in(self, regions: list[str] | None, spot: bool = False) -> Price | None:
        """The price to rank on: the reference price when no region is asked, else the lowest
        of the asked regions' prices of that kind; None where none of them has one (a price
        is never borrowed from another region)."""
        if not regions:
            return self.price if self.price.usd(spot) is not None else None
        rows = [self.prices.get(r) or (self.price if self.price.region == r else None)
                for r in regions]
        priced = [p for p in rows if p is not None and p.usd(spot) is not None]
        return min(priced, key=lambda p: (p.usd(spot), p.region or "")) if priced else None
    _src = field_validator("sources")(_check_sources)

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        for r in value:
            _check_region(r)
        if len(set(value)) != len(value):
            raise ValueError("lists a region twice")
        return value

    @field_validator("provider")
    @classmethod
    def _provider_slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(f"{value!r} is not a provider slug (lower-case letters, digits, '-')")
        return value

    @model_validator(mode="after")
    def _switch_gpus_exist(self) -> InstanceType:
        for sw in self.host.pcie_switches or []:
            bad = [g for g in sw.gpus if g >= self.gpu.count]
            if bad:
                raise ValueError(f"host.pcie_switches names GPU {bad[0]}, but the instance has "
                                 f"{self.gpu.count} GPUs (0-{self.gpu.count - 1})")
        return self

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.name}"


class QuantizedCheckpoint(_Model):
    """A published quantized checkpoint of a catalog model: what ``--quantization fp8`` serves
    instead of quantizing on the fly (``advisor.core.weights``)."""

    scheme: Literal["fp8"]
    hf_id: str
    #: the checkpoint's quant_method as vLLM reads it from its config.json
    format: Literal["fp8", "modelopt", "compressed-tensors", "fbgemm_fp8"]
    #: the published accuracy delta against the original, in words with its numbers (None:
    #: none found; sources.default.note says what was searched)
    accuracy: str | None = Field(default=None, max_length=600)
    sources: Sources

    _src = field_validator("sources")(_check_sources)

    _hf = field_validator("hf_id")(_check_repo_id)


class ModelAlias(_Model):
    """A model the CLI knows by a short name, with the config.json it ships."""

    alias: str
    hf_id: str
    config: str  # file name inside catalogs/models/
    description: str | None = None
    #: the Hub repository asks for an accepted licence and a token before it serves the files
    #: (None: no source says); its provenance is ``sources.gated``
    gated: bool | None = None
    #: published quantized checkpoints of this model (``--quantization fp8`` serves them)
    quantized: list[QuantizedCheckpoint] = Field(default_factory=list, max_length=8)
    sources: Sources

    _alias = field_validator("alias")(_check_name)
    _src = field_validator("sources")(_check_sources)

    @field_validator("config")
    @classmethod
    def _config_file(cls, value: str) -> str:
        if not CONFIG_FILE.match(value):
            raise ValueError(f"{value!r} is not a plain .json file name next to index.yaml")
        return value

    _hf = field_validator("hf_id")(_check_repo_id)


def provenance_of(sources: Sources, field: str) -> Provenance:
    """The provenance of ``field`` (dotted path): its own entry, a parent's, or the default."""
    parts = field.split(".")
    for i in range(len(parts), 0, -1):
        hit = sources.get(".".join(parts[:i]))
        if hit is not None:
            return hit
    return sources["default"]


def dump(obj: BaseModel) -> dict[str, Any]:
    return obj.model_dump(mode="json")
