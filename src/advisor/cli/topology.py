"""``advisor topology``: the host's GPU-to-NUMA layout, and how it differs from the catalog."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from advisor.cli import output as out
from advisor.cli.common import CatalogDirs, JsonFlag, catalog_from
from advisor.clouds.registry import EXAMPLE_INSTANCE


def _read_file(path: Path, what: str) -> str:
    """A saved printout: a regular file of at most 1 MiB (advisor.inputs)."""
    from advisor.host.topology import MAX_PRINTOUT_BYTES
    from advisor.inputs import read_text

    return read_text(path, limit=MAX_PRINTOUT_BYTES, what=what, errors="replace",
                     hint="save the tool's printout to a file and pass that")


def _run_nvidia_smi() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=20,
                           check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 and "GPU0" in r.stdout else None


def topology_cmd(
    sysfs_root: Annotated[Path, typer.Option(help="Root of the sysfs tree to read.")]
    = Path("/"),
    nvidia_smi_topo: Annotated[Path | None, typer.Option(
        help="A saved 'nvidia-smi topo -m' printout (default: run it when present).")] = None,
    numactl: Annotated[Path | None, typer.Option(
        help="A saved 'numactl --hardware' printout, used when sysfs shows no nodes.")] = None,
    expect: Annotated[str | None, typer.Option(
        help="PROVIDER:TYPE to compare with, e.g. " + EXAMPLE_INSTANCE + ".")] = None,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Probe the NUMA nodes and GPUs of this host (or of a copied sysfs tree)."""
    from advisor.host.topology import compare, gpu_nodes, parse_numactl, probe
    from advisor.host.topology import format_cpulist as _span

    smi = _read_file(nvidia_smi_topo, "--nvidia-smi-topo") if nvidia_smi_topo else None
    if smi is not None and not smi.strip():
        from advisor.errors import UserInputError

        raise UserInputError(f"--nvidia-smi-topo {str(nvidia_smi_topo)[:120]} is empty",
                             hint="save the output of 'nvidia-smi topo -m'")
    if smi is None and sysfs_root == Path("/"):
        smi = _run_nvidia_smi()
    topo = probe(sysfs_root, smi)
    if not topo.nodes and numactl is not None:
        topo = topo.model_copy(update={"nodes": parse_numactl(_read_file(numactl, "--numactl")),
                                       "warnings": [w for w in topo.warnings
                                                    if "no NUMA nodes" not in w]})
    diffs = None
    if expect:
        inst = catalog_from(catalog).instance(expect)
        diffs = compare(topo, inst)
    if json:
        body = topo.model_dump()
        body["gpu_nodes"] = gpu_nodes(topo)
        if diffs is not None:
            body["expect"] = expect
            body["differences"] = diffs
        out.emit_json(body)
        return
    out.table(["node", "CPUs", "memory GiB", "distances"],
              ([str(n.id), _span(n.cpus), out.fmt(n.memory_gib), out.fmt(n.distances)]
               for n in topo.nodes), title="NUMA nodes")
    nodes = gpu_nodes(topo)
    if topo.gpus:
        out.table(["GPU", "bus id", "vendor", "NUMA node", "link"],
                  ([str(g.index), g.bus_id, g.vendor,
                    "hidden (-1)" if g.numa_hidden else out.fmt(nodes[g.index]),
                    f"{g.link_speed or '?'} x{g.link_width or '?'}"] for g in topo.gpus),
                  title="GPUs")
    if not topo.gpus and topo.nvidia_smi:
        out.line("GPUs (from nvidia-smi): " + ", ".join(
            f"GPU{g.index} node {out.fmt(g.numa_node)}" for g in topo.nvidia_smi))
    for w in topo.warnings:
        out.line(f"! {w}")
    if diffs is not None:
        out.line(f"Compared with {expect}: " + ("no difference" if not diffs else ""))
        for d in diffs:
            out.line(f"  - {d}")
