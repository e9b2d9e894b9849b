"""This host as an instance type: a probe (live, or another host's saved ``advisor topology
--json``) made into the same :class:`~advisor.catalog.schema.InstanceType` a catalog entry is,
so that ``render --target local`` and ``fit/recommend --gpu local`` take the path a cloud
instance takes.

* :func:`load_probe` reads a saved probe: a regular file of at most 4 MiB, JSON nested at most
  16 deep, an object of kind ``advisor-topology`` (files written before the probe named its kind
  are accepted when they hold ``nodes``, ``gpus`` and ``nics``), every number in its range.
* :func:`identify_gpu` names the catalog GPU from the PCI device ids the probe read
  (``/sys/bus/pci/devices/*/device``) and the catalog's ``pci_device_ids``.
* :func:`local_instance` builds the instance type: provider ``local``, vCPUs and memory from
  the probe, the GPU-to-NUMA map as sysfs shows it (a hidden ``numa_node`` is ``null``, never
  node 0), sockets and SMT from ``/sys/devices/system/cpu``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from advisor.catalog.catalog import Catalog
from advisor.catalog.schema import (
    Host,
    InstanceCpu,
    InstanceGpu,
    InstanceType,
    Numa,
    Price,
    Provenance,
)
from advisor.errors import UserInputError
from advisor.host.topology import MAX_CPUS, Topology, probe

#: what ``advisor topology --json`` writes as its ``kind``
KIND = "advisor-topology"
#: the largest probe file read (an 8-GPU host's probe is ~10 KiB; 192 CPUs with their SMT
#: siblings ~20 KiB)
MAX_PROBE_BYTES = 4 * 1024 * 1024
#: the deepest JSON nesting of a probe (it nests 4 levels: nodes -> node -> cpus)
MAX_PROBE_DEPTH = 16
#: the most NUMA nodes, GPUs and NICs a probe may list (Linux has at most 1024 nodes; the
#: catalog's largest instance 16 GPUs, its schema 128)
MAX_NODES = 4096
MAX_GPUS = 128
MAX_DEVICES = 4096
#: the largest node id accepted (sysfs names at most node99999; Linux's MAX_NUMNODES <= 1024)
MAX_NODE_ID = 65535
#: per node, GiB (the catalog's instances go to 65536 GiB in all)
MAX_NODE_MEMORY_GIB = 65536.0
HINT = "make it on the host with 'advisor topology --json > topo.json' and pass --probe topo.json"
GPU_HINT = ("pass --gpu MODEL to name the GPUs yourself (a catalog GPU id, e.g. H100-SXM; "
            "'advisor catalog list' shows them)")
#: the provider name of a host laid out from its probe
PROVIDER = "local"
#: A host you own has no hourly price, but the ranking only ranks priced offers. For ONE
#: instance the layout it picks does not depend on the price's scale: every figure it compares
#: ($/h, $ per million tokens, the monthly bill) is the price times a figure of the layout, so
#: the order of the layouts is the same at any positive price. The local instance gets this
#: nominal price for that comparison; it is never shown (render prints no price).
NOMINAL_USD_PER_HOUR = 1.0
_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
_DEVICE_ID = re.compile(r"^0x[0-9a-f]{4}\Z")


def _not_probe(where: str, why: str) -> UserInputError:
    return UserInputError(f"{where} is not advisor's topology JSON (the output of 'advisor "
                          f"topology --json'): {why}", hint=HINT)


def _shape(value: Any) -> str:
    return {list: "a JSON array", str: "a JSON string", bool: "a JSON boolean",
            int: "a JSON number", float: "a JSON number", type(None): "JSON null"}.get(
        type(value), type(value).__name__)


def load_probe(source: str | Path | dict[str, Any] | Topology) -> Topology:
    """A :class:`Topology` from ``advisor topology --json`` output: a file, its parsed JSON, or
    one already made. Anything else is a UserInputError that says what it is instead."""
    if isinstance(source, Topology):
        check_probe(source, "the probe")
        return source
    data: Any = source
    where = "the probe"
    if not isinstance(source, dict):
        from advisor.inputs import loads_json, read_text

        where = f"--probe {str(source)[:120]}"
        text = read_text(source, limit=MAX_PROBE_BYTES, what="--probe", hint=HINT)
        try:
            data = loads_json(text, what=where, hint=HINT, max_depth=MAX_PROBE_DEPTH)
        except UserInputError as exc:
            raise UserInputError(f"{exc.message}: not advisor's topology JSON",
                                 hint=HINT) from exc
    if not isinstance(data, dict):
        raise _not_probe(where, f"{_shape(data)}, not an object")
    kind = data.get("kind")
    if kind is None and not {"nodes", "gpus", "nics"} <= set(data):
        keys = ", ".join(str(k)[:30] for k in list(data)[:5]) or "none"
        raise _not_probe(where, f'no "kind": "{KIND}", and not nodes, gpus and nics (its '
                         f"keys: {keys})")
    if kind is not None and kind != KIND:
        raise _not_probe(where, f"its kind is {str(kind)[:40]!r}, not {KIND!r}")
    try:
        topo = Topology.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise _not_probe(where, f"{loc}: {first['msg']}") from exc
    check_probe(topo, where)
    return topo


def _range(where: str, what: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise _not_probe(where, f"{what} {value!r} is outside {low:g}-{high:g}")


def _cpus(where: str, what: str, cpus: list[int]) -> None:
    if len(cpus) > MAX_CPUS:
        raise _not_probe(where, f"{what} lists more than {MAX_CPUS} CPUs")
    for c in cpus:
        _range(where, what, c, 0, MAX_CPUS - 1)


def check_probe(topo: Topology, where: str = "the probe") -> None:
    """Every number the layout uses within its range, every name in its pattern (a saved probe
    is a file anyone can write); UserInputError otherwise."""
    if len(topo.nodes) > MAX_NODES:
        raise _not_probe(where, f"more than {MAX_NODES} NUMA nodes")
    if len(topo.gpus) > MAX_GPUS:
        raise _not_probe(where, f"{len(topo.gpus)} GPUs; advisor lays out at most {MAX_GPUS}")
    if len(topo.nics) > MAX_DEVICES or len(topo.nvidia_smi or []) > MAX_DEVICES:
        raise _not_probe(where, f"more than {MAX_DEVICES} devices")
    if sum(len(n.cpus) for n in topo.nodes) > MAX_CPUS:
        raise _not_probe(where, f"its nodes list more than {MAX_CPUS} CPUs")
    ids = [n.id for n in topo.nodes]
    if len(set(ids)) != len(ids):
        raise _not_probe(where, "a NUMA node is listed twice")
    for n in topo.nodes:
        _range(where, "a node id", n.id, 0, MAX_NODE_ID)
        _cpus(where, f"node {n.id}'s cpus", n.cpus)
        if n.memory_gib is not None:
            _range(where, f"node {n.id}'s memory_gib", n.memory_gib, 0, MAX_NODE_MEMORY_GIB)
        if n.distances is not None:
            if len(n.distances) > MAX_NODES:
                raise _not_probe(where, f"node {n.id} has more than {MAX_NODES} distances")
            for d in n.distances:
                _range(where, f"node {n.id}'s distance", d, 0, 65535)
    for i, g in enumerate(topo.gpus):
        if g.index != i:
            raise _not_probe(where, f"GPU {i} has index {g.index} (GPUs are listed in PCI bus "
                             "order, numbered from 0)")
        if not _BUS_ID.match(g.bus_id):
            raise _not_probe(where, f"GPU {i}'s bus_id {g.bus_id[:40]!r} is not a PCI address")
        if g.device_id is not None and not _DEVICE_ID.match(g.device_id.lower()):
            raise _not_probe(where, f"GPU {i}'s device_id {g.device_id[:40]!r} is not 0x and "
                             "4 hex digits")
        if g.numa_node is not None:
            _range(where, f"GPU {i}'s numa_node", g.numa_node, 0, MAX_NODE_ID)
        if g.local_cpus is not None:
            _cpus(where, f"GPU {i}'s local_cpus", g.local_cpus)
    if topo.cpu is not None:
        c = topo.cpu
        _range(where, "cpu.cpus", c.cpus, 1, MAX_CPUS)
        _range(where, "cpu.cores", c.cores, 1, c.cpus)
        _range(where, "cpu.sockets", c.sockets, 1, c.cores)
        if len(c.siblings) > MAX_CPUS:
            raise _not_probe(where, f"cpu.siblings lists more than {MAX_CPUS} CPUs")


def host_topology(probe_file: str | Path | dict[str, Any] | Topology | None = None,
                  sysfs_root: str | Path | None = None) -> tuple[Topology, str, dt.date]:
    """(topology, where it comes from in words, its date): the saved probe when one is given,
    else a live probe of the sysfs tree at ``sysfs_root`` (default ``/``)."""
    today = dt.date.today()
    if probe_file is None:
        root = Path(sysfs_root or "/")
        topo = probe(root)
        check_probe(topo, f"the probe of {str(root)[:120]}")
        return topo, ("probe of this host" if str(root) == "/" else
                      f"probe of the sysfs tree {str(root)[:120]}"), today
    if sysfs_root is not None:
        raise UserInputError("give --probe or --sysfs-root, not both",
                             hint="--probe: a saved 'advisor topology --json'; --sysfs-root: "
                             "a sysfs tree to probe now")
    topo = load_probe(probe_file)
    if isinstance(probe_file, str | Path):
        try:
            when = dt.date.fromtimestamp(Path(probe_file).stat().st_mtime)
        except (OSError, ValueError, OverflowError):
            when = today
        return topo, f"saved probe {Path(probe_file).name[:80]} (advisor topology --json)", when
    return topo, "probe given to the SDK", today


def named_gpu(catalog: Catalog, name: str) -> str:
    """The catalog GPU id ``--gpu MODEL`` names: an id, an alias or a family of one member."""
    ids = catalog.match_gpu_ids(name)
    if not ids:
        return catalog.gpu(name).id  # NotFoundError with the close names
    if len(ids) > 1:
        raise UserInputError(f"--gpu {name} matches {', '.join(ids)}: name the model this "
                             "host has", hint=f"e.g. --gpu {ids[0]}")
    return ids[0]


def identify_gpu(topo: Topology, catalog: Catalog) -> tuple[str, str]:
    """(catalog GPU id, how it was told) from the probe's PCI device ids: every GPU must be of
    one catalog model, each id known to exactly one catalog GPU of the GPU's vendor."""
    if not topo.gpus:
        raise no_gpu()
    owners: dict[tuple[str, str], list[str]] = {}
    for g in catalog.gpus.values():
        for did in g.pci_device_ids:
            owners.setdefault((g.vendor, did.lower()), []).append(g.id)
    models: dict[str, str] = {}
    first: dict[str, int] = {}
    for dev in topo.gpus:
        if dev.device_id is None:
            raise UserInputError(f"GPU {dev.index} ({dev.bus_id}): the probe read no PCI device "
                                 "id, so advisor cannot tell its model", hint=GPU_HINT)
        did = dev.device_id.lower()
        first.setdefault(did, dev.index)
        if did in models:
            continue
        hits = sorted(owners.get((dev.vendor, did), []))
        if not hits:
            raise UserInputError(f"GPU {dev.index} ({dev.bus_id}): PCI device {did} of vendor "
                                 f"{dev.vendor[:20]} is in no catalog GPU's pci_device_ids",
                                 hint=GPU_HINT + ", or add the id to that GPU's "
                                 "pci_device_ids in a catalog layer (--catalog DIR)")
        if len(hits) > 1:
            raise UserInputError(f"GPU {dev.index} ({dev.bus_id}): PCI device {did} is listed "
                                 f"by {', '.join(hits)} in the catalog: ambiguous",
                                 hint=GPU_HINT)
        models[did] = hits[0]
    if len(set(models.values())) > 1:
        seen = "; ".join(f"{did} = {gid} (GPU {first[did]})" for did, gid in models.items())
        raise UserInputError(f"the host's GPUs are of {len(set(models.values()))} models "
                             f"({seen}); advisor lays out one model per host", hint=GPU_HINT)
    gid = next(iter(models.values()))
    ids = ", ".join(models)
    return gid, (f"{len(topo.gpus)} x PCI device {ids} in the probe = {gid} "
                 "(the catalog's pci_device_ids)")


def no_gpu() -> UserInputError:
    return UserInputError("the probe shows no GPU (no NVIDIA or AMD display controller under "
                          "/sys/bus/pci/devices)",
                          hint="run it on the GPU host, or give that host's saved probe: "
                          + HINT)


def local_instance(topo: Topology, catalog: Catalog, gpu: str | None = None,
                   name: str = "local", *, source: str = "probe of this host",
                   as_of: dt.date | None = None) -> InstanceType:
    """The instance type of provider ``local`` the probe describes (see the module's docstring);
    ``gpu`` names the GPU model instead of identifying it from the PCI device ids."""
    check_probe(topo)
    if not topo.gpus:
        raise no_gpu()
    day = as_of or dt.date.today()
    if gpu is not None:
        gid, told = named_gpu(catalog, gpu), f"--gpu {gpu[:60]} (named by the user)"
    else:
        gid, told = identify_gpu(topo, catalog)
    vcpus = topo.cpu.cpus if topo.cpu is not None else len(
        {c for n in topo.nodes for c in n.cpus})
    if vcpus <= 0:
        raise UserInputError("the probe shows no CPUs (no cpulist under "
                             "/sys/devices/system/node, no /sys/devices/system/cpu/cpu*)",
                             hint=HINT)
    mems = [n.memory_gib for n in topo.nodes]
    total = round(sum(m for m in mems if m is not None), 2)
    memory = total if mems and None not in mems and total > 0 else None
    sockets = topo.cpu.sockets if topo.cpu is not None else None
    with_cpus = sum(1 for n in topo.nodes if n.cpus)
    # NUMA domains per socket (AMD NPS, Intel SNC): nodes holding CPUs over sockets, where that
    # divides; CPU-less memory nodes (CXL, HBM) are not domains of a socket
    domains = (with_cpus // sockets if sockets and with_cpus and with_cpus % sockets == 0
               else None)
    seen = f"{source}, {day.isoformat()}"
    sources = {
        "default": Provenance(source=seen, as_of=day, confidence="measured",
                              note="advisor topology: /sys/devices/system/node, "
                              "/sys/devices/system/cpu and /sys/bus/pci/devices"),
        "gpu.model": Provenance(source=told, as_of=day,
                                confidence="documented" if gpu is not None else "measured"),
        "price": Provenance(source="nominal: a host you own has no hourly price", as_of=day,
                            confidence="inferred",
                            note="only for the ranking's choice of layout, which does not "
                            "depend on the price's scale; never shown"),
    }
    try:
        return InstanceType(
            provider=PROVIDER, name=name, vcpus=vcpus, memory_gib=memory,
            gpu=InstanceGpu(model=gid, count=len(topo.gpus)),
            cpu=InstanceCpu(sockets=sockets),
            numa=Numa(nodes=len(topo.nodes) or None,
                      # sysfs only, as the launcher reads it: -1 (hidden) or absent is null
                      gpu_nodes=[g.numa_node for g in topo.gpus]),
            host=Host(numa_domains_per_socket=domains,
                      smt_siblings_exposed=topo.cpu.smt if topo.cpu is not None else None),
            price=Price(on_demand_usd_per_hour=NOMINAL_USD_PER_HOUR, region=PROVIDER,
                        as_of=day),
            sources=sources)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise UserInputError(f"the probe does not make an instance type: {loc}: "
                             f"{first['msg']}", hint=HINT) from exc


def with_instance(catalog: Catalog, inst: InstanceType) -> Catalog:
    """``catalog`` with ``inst`` added (a copy: the catalog itself is left as it was)."""
    return dataclasses.replace(catalog, instances={**catalog.instances, inst.key: inst})


def local_gpu(catalog: Catalog, probe_file: str | Path | dict[str, Any] | Topology | None = None,
              sysfs_root: str | Path | None = None) -> tuple[str, str]:
    """(catalog GPU id, how it was told) of the GPUs of this host (or of a saved probe)."""
    topo, _, _ = host_topology(probe_file, sysfs_root)
    return identify_gpu(topo, catalog)
