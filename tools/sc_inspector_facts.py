#!/usr/bin/env python3
"""CPU and NUMA facts of cloud GPU instance types from SpareCores' measured printouts.

SpareCores' ``sc-inspector-data`` repository keeps, per cloud and instance type, the output
of tools run on a real VM of that type: ``lstopo`` (hwloc XML), ``lscpu`` (util-linux JSON)
and a ``meta.json`` per tool with the run's start time. This reads them from a local clone
(``git show COMMIT:data/<cloud>/<type>/<tool>/stdout``) and gives, per type:

* ``cpu.model`` and ``cpu.sockets`` from lscpu (``Model name``, ``Socket(s)``);
* ``numa.nodes`` (NUMANode objects in the lstopo XML) and ``numa.gpu_nodes``: each NVIDIA
  PCI device (vendor 0x10de, class 0x0302 3D controller or 0x0300 VGA) placed under the
  NUMA node of the nearest non-I/O object above it, in PCI bus-id (nvidia-smi) order;

each with its provenance: the printout's URL at the commit read, the run's date from
meta.json, ``confidence: measured`` and a note of what the printout shows. A type whose
printout shows another GPU count than the catalog's ``gpu.count`` is skipped with the reason.

  python tools/sc_inspector_facts.py a3-highgpu-8g a2-highgpu-8g      # print YAML-ready facts
  python tools/sc_inspector_facts.py --all                           # every catalog type
  python tools/sc_inspector_facts.py --all --write                   # update the catalog file

``--write`` rewrites only the named entries' ``cpu``, ``numa`` and ``sources`` keys
(``cpu.model``, ``cpu.sockets``, ``numa``) in catalogs/instances/<cloud>.yaml; every other
byte is kept, and the result is checked to load with every other entry unchanged.
A ``cpu.model`` that catalogs/cpus.yaml does not list is reported and not written (the
catalog refuses a CPU it has no entry for).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MIRROR = "/work/.mirror/SpareCores+sc-inspector-data/repo"
#: the sc-inspector-data commit the catalog cites elsewhere (AWS, Azure entries)
PINNED = "804d3c71ddaec2fb0fe443c77b6719bd03a96072"
URL = "https://github.com/SpareCores/sc-inspector-data/blob/{commit}/data/{cloud}/{type}/{tool}/stdout"

NVIDIA = "10de"
GPU_CLASSES = ("0302", "0300")  # 3D controller, VGA compatible controller


# --- parsing ---------------------------------------------------------------------------------

def parse_bitmap(text: str) -> set[int]:
    """The bits set in an hwloc bitmap string (``0x0000ffff,,0xffffffff``: 32-bit words,
    most significant first, an empty word is 0; a ``0xf...f,`` prefix means infinitely set,
    which no nodeset of a finite machine needs and is refused)."""
    words = text.strip().split(",")
    if words and words[0].lower().startswith("0xf...f"):
        raise ValueError(f"infinite hwloc bitmap {text!r}")
    bits: set[int] = set()
    for i, word in enumerate(reversed(words)):
        value = int(word, 16) if word else 0
        bits.update(32 * i + b for b in range(32) if value >> b & 1)
    return bits


def _busid_key(busid: str) -> tuple[int, ...]:
    m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)", busid)
    if not m:
        raise ValueError(f"not a PCI bus id: {busid!r}")
    return tuple(int(g, 16) for g in m.groups())


@dataclass(frozen=True)
class Gpu:
    busid: str
    node: int | None  # NUMA node os_index; None where the device is not under exactly one
    pci_class: str
    device: str  # PCI device id, e.g. 2330


@dataclass
class Lstopo:
    numa_nodes: list[int]  # os_index of each NUMANode
    packages: int
    gpus: list[Gpu]  # in PCI bus-id order
    hwloc_version: str | None = None
    cpu_models: list[str] = field(default_factory=list)  # Package CPUModel infos, distinct

    @property
    def gpu_nodes(self) -> list[int | None]:
        return [g.node for g in self.gpus]


def parse_lstopo(text: str) -> Lstopo:
    """NUMA nodes, packages and NVIDIA GPUs (with their NUMA node) of an hwloc 2 XML export."""
    root = ET.fromstring(text.encode() if isinstance(text, str) else text)
    nodes: list[int] = []
    packages = 0
    gpus: list[Gpu] = []
    version = None
    models: list[str] = []

    def walk(el: ET.Element, nodeset: set[int] | None) -> None:
        nonlocal packages, version
        if el.tag == "object":
            kind = el.get("type")
            if el.get("nodeset") is not None:  # non-I/O objects carry a nodeset
                nodeset = parse_bitmap(el.get("nodeset", ""))
            if kind == "NUMANode":
                nodes.append(int(el.get("os_index", "0")))
            elif kind == "Package":
                packages += 1
            elif kind == "PCIDev":
                m = re.match(r"([0-9a-fA-F]{4}) \[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]",
                             el.get("pci_type", ""))
                if m and m[2].lower() == NVIDIA and m[1] in GPU_CLASSES:
                    node = next(iter(nodeset)) if nodeset and len(nodeset) == 1 else None
                    gpus.append(Gpu(el.get("pci_busid", ""), node, m[1], m[3].lower()))
            for info in el.findall("info"):
                if info.get("name") == "hwlocVersion" and version is None:
                    version = info.get("value")
                if (info.get("name") == "CPUModel" and info.get("value")
                        and info.get("value") not in models):
                    models.append(info.get("value", ""))
        for child in el:
            if child.tag == "object":
                walk(child, nodeset)

    walk(root, None)
    gpus.sort(key=lambda g: _busid_key(g.busid))
    return Lstopo(sorted(nodes), packages, gpus, version, models)


@dataclass
class Lscpu:
    model_name: str | None
    vendor: str | None
    family: str | None
    model_number: str | None
    cpus: int | None
    sockets: int | None
    numa_nodes: int | None


def parse_lscpu(text: str) -> Lscpu:
    """The fields of ``lscpu --json`` this tool uses (nested children flattened)."""
    rows: dict[str, str] = {}

    def walk(items: list[dict[str, Any]]) -> None:
        for it in items:
            key = str(it.get("field", "")).rstrip(":").strip()
            if key and key not in rows and it.get("data") is not None:
                rows[key] = str(it["data"]).strip()
            walk(it.get("children") or [])

    walk(json.loads(text)["lscpu"])

    def num(key: str) -> int | None:
        v = rows.get(key)
        return int(v) if v is not None and v.isdigit() else None

    return Lscpu(rows.get("Model name"), rows.get("Vendor ID"), rows.get("CPU family"),
                 rows.get("Model"), num("CPU(s)"), num("Socket(s)"), num("NUMA node(s)"))


def catalog_cpu_name(model_name: str | None) -> str | None:
    """lscpu's model string as catalogs/cpus.yaml names parts ('Intel(R) Xeon(R) Platinum
    8481C CPU @ 2.70GHz' -> 'Intel Xeon Platinum 8481C'); None where it names no part
    ('Intel(R) Xeon(R) CPU @ 2.20GHz', as GCP's Cascade Lake guests show)."""
    if not model_name:
        return None
    s = re.sub(r"\((R|TM|tm|r)\)", "", model_name)
    s = re.sub(r"\s+@.*$", "", s)
    if s.isupper():  # 'INTEL(R) XEON(R) PLATINUM 8581C CPU @ 2.10GHz' (a3-ultragpu-8g)
        s = " ".join(w if any(c.isdigit() for c in w) or w in ("AMD", "EPYC", "CPU")
                     else w.capitalize() for w in s.split())
    s = re.sub(r"\s+@.*$", "", s)
    s = re.sub(r"\s+(CPU|Processor|\d+-Core Processor)\s*$", "", s).strip()
    s = re.sub(r"\s+", " ", s)
    m = re.fullmatch(r"Intel Xeon (Platinum|Gold|Silver|Bronze) (\w+)", s)
    if m:
        return s
    m = re.fullmatch(r"AMD EPYC (\w+)( \d+-Core)?", s)
    if m:
        return f"AMD EPYC {m[1]}"
    return None


# --- reading the printouts -------------------------------------------------------------------

class Repo:
    def __init__(self, git_dir: str, commit: str) -> None:
        self.git_dir, self.commit = git_dir, commit

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], capture_output=True,
                              text=True, check=False)

    def commit_date(self, commit: str) -> str:
        return self._git("show", "-s", "--format=%cs", commit).stdout.strip()

    def read(self, path: str) -> tuple[str, str] | None:
        """(commit, text) of ``path`` at the pinned commit, else at the newest commit of the
        default branch that has it; None where no commit has it."""
        got = self._git("show", f"{self.commit}:{path}")
        if got.returncode == 0:
            return self.commit, got.stdout
        for c in self._git("log", "--format=%H", "HEAD", "--", path).stdout.split():
            got = self._git("show", f"{c}:{path}")
            if got.returncode == 0:
                return c, got.stdout
        return None


@dataclass
class Printout:
    tool: str
    commit: str
    url: str
    date: str  # the run's start date (meta.json), YYYY-MM-DD
    stdout: str
    meta: dict[str, Any]


def printout(repo: Repo, cloud: str, type_: str, tool: str) -> Printout | None:
    base = f"data/{cloud}/{type_}/{tool}"
    out = repo.read(f"{base}/stdout")
    if out is None or not out[1].strip():
        return None
    commit, text = out
    meta_raw = repo._git("show", f"{commit}:{base}/meta.json")
    meta = json.loads(meta_raw.stdout) if meta_raw.returncode == 0 else {}
    if meta.get("exit_code") not in (0, None):
        return None
    date = str(meta.get("start", ""))[:10] or repo.commit_date(commit)
    return Printout(tool, commit, URL.format(commit=commit, cloud=cloud, type=type_, tool=tool),
                    date, text, meta)


# --- facts -----------------------------------------------------------------------------------

@dataclass
class Facts:
    name: str
    cpu: dict[str, Any] = field(default_factory=dict)  # model / sockets to write
    numa: dict[str, Any] = field(default_factory=dict)  # nodes / gpu_nodes to write
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what was not written and why
    skipped: str | None = None  # the reason no NUMA map is written
    cpu_model_seen: str | None = None  # lscpu's part name, written or not
    lscpu: Lscpu | None = None
    lscpu_printout: Printout | None = None


def _a(name: str) -> str:
    """'an a3-highgpu-8g', 'a g2-standard-4' (letters read with a vowel sound first)."""
    return ("an " if name[:1].lower() in "aefhilmnorsx" else "a ") + name


def _prov(p: Printout, note: str, confidence: str = "measured") -> dict[str, Any]:
    return {"source": p.url, "as_of": p.date, "confidence": confidence, "note": note}


def facts_for(repo: Repo, cloud: str, entry: dict[str, Any], cpu_models: set[str]) -> Facts:
    name = entry["name"]
    count = (entry.get("gpu") or {}).get("count")
    f = Facts(name)
    lscpu_p = printout(repo, cloud, name, "lscpu")
    lstopo_p = printout(repo, cloud, name, "lstopo")
    cpu = parse_lscpu(lscpu_p.stdout) if lscpu_p else None
    f.lscpu, f.lscpu_printout = cpu, lscpu_p
    if cpu is not None and cpu.cpus is not None and cpu.cpus != entry.get("vcpus"):
        f.notes.append(f"lscpu shows {cpu.cpus} CPU(s), the catalog's vcpus is "
                       f"{entry.get('vcpus')}")
    if cpu is not None and lscpu_p is not None:
        part = catalog_cpu_name(cpu.model_name)
        f.cpu_model_seen = part
        shows = (f"Model name {cpu.model_name!r}, CPU family {cpu.family} model "
                 f"{cpu.model_number}, Vendor ID {cpu.vendor}, {cpu.cpus} CPU(s), "
                 f"Socket(s) {cpu.sockets}, NUMA node(s) {cpu.numa_nodes}")
        head = (f"lscpu (util-linux) JSON on {_a(name)} instance, SpareCores inspector run of "
                f"{lscpu_p.date} (meta.json start): ")
        unwritten = None  # why cpu.model is not written, said in the sockets note
        if part is None:
            unwritten = "cpu.model left null: the model name names no part"
            f.notes.append(f"cpu.model: lscpu names no part ({cpu.model_name!r})")
        elif part not in cpu_models:
            unwritten = (f"cpu.model left null: {part} has no entry in catalogs/cpus.yaml "
                         "yet")
            f.notes.append(f"cpu.model: lscpu shows {part!r}, which catalogs/cpus.yaml does "
                           "not list; not written")
        else:
            f.cpu["model"] = part
            f.sources["cpu.model"] = _prov(lscpu_p, head + shows)
        if cpu.sockets:
            f.cpu["sockets"] = cpu.sockets
            f.sources["cpu.sockets"] = _prov(
                lscpu_p, f"lscpu on {_a(name)} instance: Socket(s) {cpu.sockets} (as the guest "
                         "sees them)" + (f"; {head}{shows}; {unwritten}" if unwritten else ""))
    else:
        f.notes.append("no lscpu printout")
    if lstopo_p is None:
        f.skipped = "no lstopo printout"
        return f
    topo = parse_lstopo(lstopo_p.stdout)
    if len(topo.gpus) != count:
        # not a printout of the machine the catalog means (N1 runs are without GPUs): none
        # of its facts, lscpu's included, is written
        f.skipped = (f"the lstopo printout shows {len(topo.gpus)} NVIDIA GPU(s), the catalog's "
                     f"gpu.count is {count}; nothing written for this type")
        f.cpu, f.sources = {}, {}
        return f
    if topo.numa_nodes != list(range(len(topo.numa_nodes))):
        f.skipped = f"NUMA node os_indexes {topo.numa_nodes} are not 0..n-1"
        return f
    placed = ", ".join(f"GPU {i} {g.busid} on NUMA "
                       + (str(g.node) if g.node is not None else "? (not under one node)")
                       for i, g in enumerate(topo.gpus))
    note = (f"hwloc {topo.hwloc_version or '?'} lstopo XML from {_a(name)} instance, SpareCores "
            f"inspector run of {lstopo_p.date} (meta.json start): {len(topo.numa_nodes)} NUMA "
            f"node(s) in {topo.packages} package(s); each NVIDIA PCI device placed under its "
            f"package/NUMA node, in PCI bus-id (nvidia-smi) order: {placed}")
    if cpu is not None and lscpu_p is not None:
        note += (f"; lscpu of the same type ({lscpu_p.url}, {lscpu_p.date}) shows NUMA node(s): "
                 f"{cpu.numa_nodes}")
        if cpu.numa_nodes is not None and cpu.numa_nodes != len(topo.numa_nodes):
            f.notes.append(f"lscpu ({lscpu_p.date}) shows {cpu.numa_nodes} NUMA node(s), lstopo "
                           f"({lstopo_p.date}) {len(topo.numa_nodes)}")
    f.numa = {"nodes": len(topo.numa_nodes), "gpu_nodes": topo.gpu_nodes}
    f.sources["numa"] = _prov(lstopo_p, note)
    if topo.cpu_models and cpu is not None and cpu.model_name not in topo.cpu_models:
        f.notes.append(f"lstopo's CPUModel {topo.cpu_models} differs from lscpu's "
                       f"{cpu.model_name!r} (different runs)")
    return f


def infer_from(f: Facts, sibling: Facts, entry: dict[str, Any], why: str) -> None:
    """Give ``f`` (no lstopo of its own) ``sibling``'s measured NUMA map, marked inferred.
    Refused (``f.skipped`` says why) where the GPU counts differ or ``f``'s own lscpu shows
    another NUMA node count; where that lscpu agrees, ``numa.nodes`` cites it as measured."""
    count = (entry.get("gpu") or {}).get("count")
    if not sibling.numa:
        f.skipped = f"{f.skipped}; sibling {sibling.name} has no measured map either"
        return
    if len(sibling.numa["gpu_nodes"]) != count:
        f.skipped = f"{f.skipped}; sibling {sibling.name} has another GPU count"
        return
    own = f.lscpu.numa_nodes if f.lscpu is not None else None
    if own is not None and own != sibling.numa["nodes"]:
        f.skipped = (f"{f.skipped}; its lscpu shows {own} NUMA node(s), {sibling.name} "
                     f"{sibling.numa['nodes']}")
        return
    src = sibling.sources["numa"]
    f.numa = dict(sibling.numa)
    f.skipped = None
    if own is not None and f.lscpu is not None and f.lscpu_printout is not None:
        p = f.lscpu_printout
        f.sources["numa.nodes"] = _prov(p, f"lscpu on {_a(f.name)} instance, SpareCores "
                                           f"inspector run of {p.date} (meta.json start): "
                                           f"NUMA node(s) {own}, Socket(s) {f.lscpu.sockets} "
                                           "(no lstopo printout of this type)")
    f.sources["numa.gpu_nodes"] = {**src, "confidence": "inferred",
                                   "note": f"inferred from {sibling.name} (measured): {why}; "
                                           + src["note"]}


# --- writing in place ------------------------------------------------------------------------

#: strings written unquoted in flow style ('measured', 'Intel Xeon Platinum 8481C')
_PLAIN = re.compile(r"[A-Za-z](?:[A-Za-z0-9_ .-]*[A-Za-z0-9_])?")


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if _PLAIN.fullmatch(s) and s.lower() not in ("null", "true", "false", "yes", "no", "on",
                                                  "off", "y", "n", "none"):
        return s
    return "'" + s.replace("'", "''") + "'"


def flow(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return _scalar(v)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _key_spans(lines: list[str], lo: int, hi: int, indent: int) -> dict[str, tuple[int, int]]:
    spans: dict[str, tuple[int, int]] = {}
    i = lo
    pat = re.compile(r"^( *)([A-Za-z_][\w.]*):")
    while i < hi:
        m = pat.match(lines[i])
        if m and len(m[1]) == indent:
            j = i + 1
            while j < hi and (not lines[j].strip() or _indent(lines[j]) > indent):
                j += 1
            spans[m[2]] = (i, j)
            i = j
        else:
            i += 1
    return spans


def update_entry(text: str, f: Facts) -> str:
    """``text`` with entry ``f.name`` given ``f``'s cpu, numa and sources keys; nothing else
    changes (checked by loading both)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if re.fullmatch(r"- name: " + re.escape(f.name)
                                                              + r"\s*", ln)]
    if len(starts) != 1:
        raise SystemExit(f"{f.name}: {len(starts)} entries named so")
    s = starts[0]
    e = s + 1
    while e < len(lines) and not lines[e].startswith("- ") and not (
            lines[e].strip() and _indent(lines[e]) == 0):
        e += 1
    entry = lines[s:e]
    spans = _key_spans(entry, 1, len(entry), 2)
    old_doc = yaml.safe_load(text)
    old = next(x for x in old_doc["instances"] if x["name"] == f.name)

    new_cpu = {**(old.get("cpu") or {}), **f.cpu}
    new_numa = {**(old.get("numa") or {}), **f.numa}
    repl: dict[str, list[str]] = {}
    if f.cpu:
        repl["cpu"] = [f"  cpu: {flow(new_cpu)}\n"]
    if f.numa:
        repl["numa"] = ["  numa:\n"] + [f"    {k}: {flow(v)}\n" for k, v in new_numa.items()]
    a, b = spans["sources"]
    inner = _key_spans(entry, a + 1, b, 4)
    src_lines = [entry[a]]
    for key, (x, y) in sorted(inner.items(), key=lambda kv: kv[1]):
        if key not in f.sources:
            src_lines += entry[x:y]
    src_lines += [f"    {k}: {flow(v)}\n" for k, v in f.sources.items()]
    repl["sources"] = src_lines

    out = [entry[0]]
    done: set[str] = set()
    i = 1
    for key, (x, y) in sorted(spans.items(), key=lambda kv: kv[1]):
        out += entry[i:x]
        out += repl[key] if key in repl else entry[x:y]
        done.add(key)
        i = y
        # a new cpu goes after gpu; a new numa after cpu (else after gpu)
        new_numa_here = "numa" in repl and "numa" not in spans and "numa" not in done
        if key == "gpu" and "cpu" in repl and "cpu" not in spans:
            out += repl["cpu"]
            done.add("cpu")
            if new_numa_here:
                out += repl["numa"]
                done.add("numa")
        elif new_numa_here and (key == "cpu" or (key == "gpu" and "cpu" not in spans)):
            out += repl["numa"]
            done.add("numa")
    out += entry[i:]
    missing = set(repl) - done
    if missing:
        raise SystemExit(f"{f.name}: could not place {sorted(missing)}")
    result = "".join(lines[:s] + out + lines[e:])

    new_doc = yaml.safe_load(result)
    got = next(x for x in new_doc["instances"] if x["name"] == f.name)
    expected = dict(old)
    if f.cpu:
        expected["cpu"] = new_cpu
    if f.numa:
        expected["numa"] = new_numa
    expected["sources"] = {**{k: v for k, v in old["sources"].items() if k not in f.sources},
                           **f.sources}
    others_old = [x for x in old_doc["instances"] if x["name"] != f.name]
    others_new = [x for x in new_doc["instances"] if x["name"] != f.name]
    if got != expected or others_old != others_new or {
            k: v for k, v in old_doc.items() if k != "instances"} != {
            k: v for k, v in new_doc.items() if k != "instances"}:
        raise SystemExit(f"{f.name}: the in-place update would change something else")
    return result


# --- command line ----------------------------------------------------------------------------

#: types with no printout of their own whose layout follows a measured sibling: name ->
#: (sibling, why). Only where the machine shape is the same (same GPUs, vCPUs, memory, host).
INFER: dict[str, dict[str, tuple[str, str]]] = {"gcp": {
    # the lstopo run of a2-ultragpu-4g failed (meta.json: instance creation error 400)
    "a2-ultragpu-4g": ("a2-highgpu-4g",
                       "the same A2 host and size (4 x A100 SXM, 48 vCPUs, half of the 8-GPU "
                       "size; the Ultra sizes differ in GPU and host memory), and "
                       "a2-ultragpu-4g's own lscpu shows 1 socket and 1 NUMA node, so every GPU "
                       "is on node 0 as on a2-highgpu-4g"),
}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("types", nargs="*", help="instance type names (default with --all: all)")
    ap.add_argument("--all", action="store_true", help="every type of the cloud's catalog file")
    ap.add_argument("--cloud", default="gcp")
    ap.add_argument("--mirror", default=MIRROR, help="git dir of sc-inspector-data")
    ap.add_argument("--commit", default=PINNED)
    ap.add_argument("--catalog", type=Path, default=None,
                    help="instances YAML (default catalogs/instances/<cloud>.yaml)")
    ap.add_argument("--write", action="store_true", help="update the catalog file in place")
    args = ap.parse_args(argv)

    path = args.catalog or ROOT / "catalogs" / "instances" / f"{args.cloud}.yaml"
    text = path.read_text()
    entries = {e["name"]: e for e in yaml.safe_load(text)["instances"]}
    cpu_models = {c["model"] for c in
                  yaml.safe_load((ROOT / "catalogs" / "cpus.yaml").read_text())["cpus"]}
    names = list(entries) if args.all and not args.types else args.types
    unknown = [n for n in names if n not in entries]
    if unknown:
        ap.error(f"not in {path.name}: {', '.join(unknown)}")
    repo = Repo(args.mirror, args.commit)
    measured: dict[str, Facts] = {}
    results: list[Facts] = []
    for n in names:
        f = facts_for(repo, args.cloud, entries[n], cpu_models)
        measured[n] = f
        results.append(f)
    for n, f in list(measured.items()):
        rule = INFER.get(args.cloud, {}).get(n)
        if rule and not f.numa:
            sib = measured.get(rule[0]) or facts_for(repo, args.cloud, entries[rule[0]],
                                                     cpu_models)
            infer_from(f, sib, entries[n], rule[1])
    for f in results:
        body: dict[str, Any] = {}
        if f.cpu:
            body["cpu"] = f.cpu
        if f.numa:
            body["numa"] = f.numa
        if f.sources:
            body["sources"] = f.sources
        print(f"# {f.name}" + (f": NUMA map skipped, {f.skipped}" if f.skipped else ""))
        for note in f.notes:
            print(f"#   {note}")
        if body:
            print(yaml.safe_dump({f.name: body}, sort_keys=False, width=100,
                                 default_flow_style=None), end="")
    if args.write:
        for f in results:
            if f.cpu or f.numa or f.sources:
                text = update_entry(text, f)
        path.write_text(text)
        print(f"# wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
