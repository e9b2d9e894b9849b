"""``advisor catalog topology``: an NCCL topology XML file -> an instance's NUMA map.

Registered on the ``catalog`` group by :mod:`advisor.cli.catalog`; the parser is imported
when the command runs, never for ``--help``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Literal

import typer

from advisor.cli import output as out
from advisor.cli.common import CatalogDirs, JsonFlag
from advisor.clouds.registry import EXAMPLE_INSTANCE

#: the largest catalog YAML read (advisor.catalog.loader.MAX_YAML_BYTES; a test holds them equal)
MAX_YAML_BYTES = 8 * 2**20


def topology_cmd(
    file: Annotated[Path, typer.Argument(
        help="An NCCL topology XML file (NCCL_TOPO_FILE format), as the clouds publish for "
        "their GPU machines.", exists=True, dir_okay=False, show_default=False)],
    instance: Annotated[str, typer.Option(
        help="PROVIDER:TYPE the file describes, e.g. " + EXAMPLE_INSTANCE + ".",
        show_default=False)],
    source: Annotated[str, typer.Option(
        help="Where the file is published, pinned to a commit (the provenance's source).",
        show_default=False)],
    as_of: Annotated[str, typer.Option(
        "--as-of", help="YYYY-MM-DD: the date of that version of the file (its commit).",
        show_default=False)],
    confidence: Annotated[Literal["documented", "measured", "inferred"], typer.Option(
        help="documented: a vendor-maintained file; measured: dumped on that type; "
        "inferred: a sibling size's.")] = "documented",
    note: Annotated[str | None, typer.Option(
        help="Added to the provenance note (e.g. how the date was established).",
        show_default=False)] = None,
    nic: Annotated[list[str] | None, typer.Option(
        "--nic", help="Bus id of an unclassified <pci> the source says is a NIC "
        "(repeatable).", show_default=False)] = None,
    infer_gpus: Annotated[bool, typer.Option(
        "--infer-gpus", help="The file names no GPU: place one behind each PCIe switch in "
        "bus-id order (recorded as inferred).")] = False,
    write: Annotated[bool, typer.Option(
        "--write", help="Update the entry in CATALOG/instances/PROVIDER.yaml in place "
        "(needs one --catalog).")] = False,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Print (or --write) an instance's NUMA map and PCIe switches from an NCCL topology file."""
    from advisor.catalog import nccl_topology as nt
    from advisor.errors import UserInputError

    try:
        day = dt.date.fromisoformat(as_of)
    except ValueError:
        raise UserInputError(f"--as-of {as_of!r} is not a date",
                             hint="give YYYY-MM-DD, the date of the file's version") from None
    if len(source.strip()) < 3:
        raise UserInputError("--source is empty", hint="give the file's URL, pinned to a commit")
    provider, sep, name = instance.partition(":")
    if not sep or not provider or not name:
        raise UserInputError(f"--instance {instance!r} is not PROVIDER:TYPE",
                             hint="e.g. --instance " + EXAMPLE_INSTANCE)
    from advisor.catalog.schema import SAFE_NAME

    for part in (provider, name):  # both name a file and an entry: never a path
        if not SAFE_NAME.match(part):
            raise UserInputError(f"--instance {instance[:80]!r}: {part[:40]!r} is not a "
                                 "provider or type name",
                                 hint="letters, digits, '.', '_' and '-' only, e.g. "
                                 + EXAMPLE_INSTANCE)
    from advisor.inputs import read_bytes

    topo = nt.parse(read_bytes(file, limit=nt.MAX_BYTES, what="NCCL topology file",
                               hint=nt._HINT), nics=nic or ())

    if write:
        if not catalog or len(catalog) != 1:
            raise UserInputError("--write needs exactly one --catalog DIR",
                                 hint="e.g. --write --catalog catalogs")
        target = catalog[0] / "instances" / f"{provider}.yaml"
        # the write stays inside the catalog folder it targets, links resolved
        if target.resolve().parent != (catalog[0] / "instances").resolve():
            raise UserInputError(f"{target} is outside {catalog[0]}/instances",
                                 hint="--catalog names a catalog folder with instances/")
        if not target.is_file():
            raise UserInputError(f"{target} does not exist",
                                 hint="--catalog names a catalog folder with instances/")
        count = _gpu_count_in_file(target, name)
    elif catalog and len(catalog) == 1 and _has_entry(catalog[0], provider, name):
        count = _gpu_count_in_file(catalog[0] / "instances" / f"{provider}.yaml", name)
    else:
        from advisor.cli.common import catalog_from

        count = catalog_from(catalog).instance(instance).gpu.count
    if infer_gpus:
        topo = nt.infer_gpus(topo, count)
    if topo.gpus and len(topo.gpus) != count:
        raise UserInputError(f"the topology file has {len(topo.gpus)} GPUs, {instance} has "
                             f"{count}", hint="is it the file of this instance type?")
    frag = nt.fragment(topo, source=source.strip(), as_of=day.isoformat(),
                       confidence=confidence, note=note)

    if write:
        from advisor.inputs import read_text

        text = read_text(target, limit=MAX_YAML_BYTES, what="catalog file")
        updated = nt.update_instance_yaml(text, name, frag)
        _check_loads(target.parent.parent, updated, target)
        if updated != text:
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(updated, encoding="utf-8", newline="")
            tmp.replace(target)
    if json:
        out.emit_json({"instance": instance, "numa": frag.numa, "host": frag.host,
                       "sources": frag.sources, "cpu": frag.cpu_note,
                       "written": str(target) if write else None})
        return
    out.line(f"# {instance} from {file.name}"
             + (f"; {frag.cpu_note}" if frag.cpu_note else "; CPU identity not stated")
             + " (the schema holds no CPU vendor/family ids: said in the notes)")
    out.line(_yaml_fragment(frag).rstrip("\n"))
    if write:
        out.line(f"# wrote {target}")


def _has_entry(root: Path, provider: str, name: str) -> bool:
    path = root / "instances" / f"{provider}.yaml"
    if not path.is_file():
        return False
    import re

    from advisor.inputs import read_text

    pat = re.compile(r"^ *- +name: *['\"]?" + re.escape(name) + r"['\"]? *(#.*)?$", re.M)
    return bool(pat.search(read_text(path, limit=MAX_YAML_BYTES, what="catalog file")))


def _gpu_count_in_file(path: Path, name: str) -> int:
    import yaml

    from advisor.errors import UserInputError
    from advisor.inputs import read_text

    doc = yaml.safe_load(read_text(path, limit=MAX_YAML_BYTES, what="catalog file")) or {}
    for e in doc.get("instances") or []:
        if isinstance(e, dict) and e.get("name") == name:
            try:
                return int(e["gpu"]["count"])
            except (KeyError, TypeError, ValueError):
                break
    raise UserInputError(f"{path} has no entry {name!r} with a gpu count",
                         hint="add the instance to the file first")


def _check_loads(root: Path, text: str, target: Path) -> None:
    """The updated file must still validate as an instances file: every entry a valid
    InstanceType (provider, names, switch GPUs within the count, provenance)."""
    import yaml

    from advisor.catalog.schema import InstanceType
    from advisor.errors import CatalogError

    doc = yaml.safe_load(text)
    provider = doc.get("provider")
    for e in doc.get("instances") or []:
        try:
            InstanceType.model_validate({"provider": provider, **e})
        except ValueError as exc:
            raise CatalogError(f"would not validate: {str(exc).splitlines()[0]}",
                               file=str(target), entry=str(e.get("name")),
                               hint="nothing was written") from None


def _yaml_fragment(frag: object) -> str:
    import yaml

    from advisor.catalog.nccl_topology import Fragment, _flow

    assert isinstance(frag, Fragment)
    lines = ["numa:"] + [f"  {k}: {_flow(v)}" for k, v in frag.numa.items()]
    switches = frag.host.get("pcie_switches")
    lines.append("host:")
    if isinstance(switches, list):
        lines += ["  pcie_switches:"] + [f"  - {_flow(s)}" for s in switches]
    else:
        lines.append("  pcie_switches: null")
    lines.append("sources:")
    lines += [f"  {k}: {_flow(v)}" for k, v in frag.sources.items()]
    text = "\n".join(lines) + "\n"
    yaml.safe_load(text)  # a fragment that would not load is a bug: fail here
    return text
