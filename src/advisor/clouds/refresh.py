"""``advisor catalog refresh``: bring a provider's catalog file up to date with its own APIs.

Each provider backend reports, per instance type, what its APIs state (:class:`ApiFacts`:
vCPUs, memory, GPUs, regions, prices, network). :func:`merge` folds that into the raw catalog
entries with one rule: **API facts are updated** (with a new ``as_of`` and the API named as
their source) and **curated annotations are never overwritten** — CPU part and family, sockets,
NUMA map, host facts, PCIe generation. Where the API contradicts a curated fact (the processor
vendor, SMT, the GPU model), the refresh flags it and leaves the curated value alone. New GPU
instance types arrive with their curated fields null. Types the API no longer lists are kept
and reported. :func:`write` writes the provider file atomically (temporary file, then rename)
after the whole merged catalog passed validation; a refresh that fails half-way writes nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog.loader import bundled_dir
from advisor.clouds.base import bounded
from advisor.errors import CatalogError, UserInputError

#: fields an API states; everything else of an entry is curated
API_FIELDS = ("vcpus", "memory_gib", "gpu", "regions", "price", "network_gbps", "fabric")


class ApiPrice(BaseModel):
    model_config = ConfigDict(frozen=True)
    region: str
    on_demand_usd_per_hour: float | None = None
    spot_usd_per_hour: float | None = None
    source: str


class ApiFacts(BaseModel):
    """What one provider API states about one instance type."""

    model_config = ConfigDict(frozen=True)
    name: str
    vcpus: int
    memory_gib: float
    #: the API's own GPU name (AWS "H100", GCP "nvidia-h100-80gb") or, for Azure, the family
    gpu_key: str | None
    gpu_count: int
    regions: list[str] | None = None
    price: ApiPrice | None = None
    network_gbps: float | None = None
    fabric: dict[str, Any] | None = None
    #: for contradiction checks against curated facts
    cpu_vendor: str | None = None
    threads_per_core: int | None = None
    #: where these facts come from, in words (per field; "default" for the rest)
    sources: dict[str, str] = Field(default_factory=dict)


class Change(BaseModel):
    model_config = ConfigDict(frozen=True)
    instance: str
    field: str
    old: Any
    new: Any


class Flag(BaseModel):
    model_config = ConfigDict(frozen=True)
    instance: str
    field: str
    curated: Any
    api: Any
    note: str


class Report(BaseModel):
    provider: str
    as_of: str
    regions: list[str]
    added: list[str] = Field(default_factory=list)
    updated: list[Change] = Field(default_factory=list)
    flagged: list[Flag] = Field(default_factory=list)
    unlisted: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    written: str | None = None
    dry_run: bool = False


def provider_file(out: Path | None, provider: str) -> tuple[Path, dict[str, Any]]:
    """(the file to write, its current content): the one in ``out`` if present, else the
    bundled catalog's."""
    name = f"instances/{provider}.yaml"
    source = out / name if out is not None and (out / name).exists() else bundled_dir() / name
    from advisor.catalog.loader import MAX_YAML_BYTES, _yaml_loader
    from advisor.inputs import read_text

    try:
        # the catalog loader's own: libyaml (aws.yaml, 160 KB: 0.025 s, 0.28 s in Python), and
        # a key given twice refused as the catalog refuses it
        doc = (yaml.load(read_text(source, limit=MAX_YAML_BYTES, what=""),  # noqa: S506
                         Loader=_yaml_loader())
               if source.exists() else None)
    except yaml.YAMLError as exc:
        raise CatalogError(f"cannot read it: {exc}", file=str(source)) from exc
    if doc is None:
        doc = {"schema_version": 1, "provider": provider, "instances": []}
    if not isinstance(doc, dict) or not isinstance(doc.get("instances"), list):
        raise CatalogError("not an instances file (needs 'instances: [...]')", file=str(source))
    target = (out if out is not None else bundled_dir()) / name
    return target, doc


def _vendor_of(entry: dict[str, Any], cpus: dict[str, Any], families: dict[str, str]
               ) -> str | None:
    cpu = entry.get("cpu") or {}
    model = cpu.get("model")
    if model and model in cpus:
        return str(cpus[model].vendor)
    code = cpu.get("codename")
    fam = families.get(str(code).lower()) if code else None
    if fam:
        return "amd" if "amd" in fam.lower() else "intel" if "intel" in fam.lower() else None
    return None


def merge(provider: str, doc: dict[str, Any], facts: list[ApiFacts], gpu_map: dict[str, str],
          cpus: dict[str, Any], families: dict[str, str], regions_queried: list[str],
          as_of: dt.date, only_known: bool = False) -> tuple[dict[str, Any], Report]:
    """The refreshed file content and what changed. ``gpu_map`` maps the API's GPU key to a
    catalog GPU id (learned from the entries both already know)."""
    day = as_of.isoformat()
    report = Report(provider=provider, as_of=day, regions=sorted(regions_queried))
    entries: list[dict[str, Any]] = [dict(e) for e in doc["instances"]]
    by_name = {e.get("name"): e for e in entries}
    seen: set[str] = set()

    def prov(text: str) -> dict[str, Any]:
        return {"source": text, "as_of": day, "confidence": "documented",
                "note": "refreshed by advisor catalog refresh"}

    for f in sorted(facts, key=lambda f: f.name):
        seen.add(f.name)
        entry = by_name.get(f.name)
        gpu_id = gpu_map.get(f.gpu_key or "")
        if entry is None:
            if only_known:
                continue
            if gpu_id is None:
                report.skipped.append(f"{f.name}: GPU {f.gpu_key!r} is not mapped to a "
                                      "catalog GPU (add it to gpus.yaml first)")
                continue
            entry = {"name": f.name, "vcpus": f.vcpus, "memory_gib": f.memory_gib,
                     "gpu": {"model": gpu_id, "count": f.gpu_count},
                     "sources": {"default": prov(f.sources.get("default", "provider API"))}}
            entries.append(entry)
            by_name[f.name] = entry
            report.added.append(f.name)
        sources = dict(entry.get("sources") or {})
        new_fields: dict[str, Any] = {"vcpus": f.vcpus, "memory_gib": f.memory_gib}
        gpu = dict(entry.get("gpu") or {})
        if gpu_id is not None and gpu.get("model") not in (None, gpu_id):
            report.flagged.append(Flag(instance=f.name, field="gpu.model",
                                       curated=gpu.get("model"), api=gpu_id,
                                       note=f"the API's GPU {f.gpu_key!r} maps to {gpu_id}; "
                                       "the curated model is kept"))
        new_fields["gpu"] = {**gpu, "model": gpu.get("model") or gpu_id, "count": f.gpu_count}
        if f.network_gbps is not None:
            new_fields["network_gbps"] = f.network_gbps
        if f.fabric is not None:
            new_fields["fabric"] = f.fabric
        if f.regions is not None:
            kept = [r for r in entry.get("regions") or [] if r not in regions_queried]
            new_fields["regions"] = sorted(set(kept) | set(f.regions))
        if f.price is not None and f.price.on_demand_usd_per_hour is None:
            report.skipped.append(f"{f.name}: no on-demand price from the API in "
                                  f"{f.price.region}; the catalog's price is kept")
        if f.price is not None and f.price.on_demand_usd_per_hour is not None:
            new_fields["price"] = {"on_demand_usd_per_hour": f.price.on_demand_usd_per_hour,
                                   "spot_usd_per_hour": f.price.spot_usd_per_hour,
                                   "region": f.price.region, "as_of": day}
            sources["price"] = prov(f.price.source)
        for key, value in new_fields.items():
            old = entry.get(key)
            if key == "price" and isinstance(old, dict):
                old = {k: (str(v) if k == "as_of" else v) for k, v in old.items()}
                same = {k: old.get(k) for k in ("on_demand_usd_per_hour", "spot_usd_per_hour",
                                                "region")} == {
                    k: value.get(k) for k in ("on_demand_usd_per_hour", "spot_usd_per_hour",
                                              "region")}
                if same:
                    continue
            elif _norm(old) == _norm(value):
                continue
            if f.name not in report.added:
                report.updated.append(Change(instance=f.name, field=key, old=old, new=value))
            entry[key] = value
            if key != "price":
                sources[key] = prov(f.sources.get(key, f.sources.get("default",
                                                                      "provider API")))
        # curated facts the API can contradict: flagged, never taken
        vendor = _vendor_of(entry, cpus, families)
        if f.cpu_vendor and vendor and f.cpu_vendor.lower() != vendor:
            report.flagged.append(Flag(instance=f.name, field="cpu", curated=vendor,
                                       api=f.cpu_vendor.lower(),
                                       note="the API names another processor vendor than the "
                                       "curated CPU; the curated CPU is kept"))
        smt = (entry.get("host") or {}).get("smt_siblings_exposed")
        if f.threads_per_core is not None and smt is not None and (f.threads_per_core > 1) != smt:
            report.flagged.append(Flag(instance=f.name, field="host.smt_siblings_exposed",
                                       curated=smt, api=f.threads_per_core,
                                       note="the API's threads per core disagree with the "
                                       "curated SMT fact; the curated value is kept"))
        entry["sources"] = sources
    report.unlisted = sorted(str(e.get("name")) for e in entries if e.get("name") not in seen)
    out = {k: v for k, v in doc.items() if k != "instances"}
    out["instances"] = entries
    return out, report


def _norm(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def dump(doc: dict[str, Any], provider: str, as_of: str) -> str:
    head = (f"# {provider} GPU instance types. Facts and their sources are in each entry's "
            "`sources`.\n# API facts (vCPUs, memory, GPUs, regions, prices, network) refreshed "
            f"by `advisor catalog refresh` on {as_of};\n# curated annotations (CPU, NUMA, host) "
            "are kept as people wrote them.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, width=120, allow_unicode=True)


def write(target: Path, text: str, layer: Path) -> None:
    """Validate the new file as a catalog layer, then put it in place atomically."""
    from advisor.catalog.loader import validate

    check = Path(tempfile.mkdtemp(prefix=".advisor-refresh-check-"))
    try:
        rel = target.relative_to(layer)
        (check / rel).parent.mkdir(parents=True, exist_ok=True)
        (check / rel).write_text(text, encoding="utf-8")
        problems = validate(check)
        if problems:
            raise CatalogError(f"the refreshed catalog does not validate ({len(problems)} "
                               f"problem(s)), nothing written: {problems[0]}")
    finally:
        import shutil

        shutil.rmtree(check, ignore_errors=True)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise UserInputError(f"--out {str(layer)[:120]}: cannot write {rel}: "
                             f"{exc.strerror or exc}; nothing written",
                             hint="give a catalog folder in a writable place") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise UserInputError(f"--out {str(layer)[:120]}: cannot write {rel}: "
                                 f"{exc.strerror or exc}; nothing written",
                                 hint="give a catalog folder in a writable place") from exc
        raise


def learned_gpu_map(doc: dict[str, Any], facts: list[ApiFacts]) -> dict[str, str]:
    """API GPU key -> catalog GPU id, from the types both the catalog and the API know (when
    the catalog maps one key to two ids, the key is left out: ambiguous)."""
    by_name = {e.get("name"): e for e in doc["instances"]}
    seen: dict[str, set[str]] = {}
    for f in facts:
        e = by_name.get(f.name)
        if e and f.gpu_key and (e.get("gpu") or {}).get("model"):
            seen.setdefault(f.gpu_key, set()).add(e["gpu"]["model"])
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


@bounded("refresh")
def refresh(provider: str, backend: Any, *, regions: list[str] | None = None,
            out: Path | None = None, dry_run: bool = False,
            today: dt.date | None = None) -> Report:
    """Ask ``backend.catalog_facts(regions, doc)`` and merge; write unless ``dry_run``."""
    from advisor.catalog import load as load_catalog

    cat = load_catalog()
    target, doc = provider_file(out, provider)
    wanted = regions or sorted({str(e.get("price", {}).get("region"))
                                for e in doc["instances"] if (e.get("price") or {}).get("region")})
    if not wanted:
        raise UserInputError(f"no region to ask the {provider} APIs about",
                             hint="pass --region R")
    import logging

    # an SDK's own warnings (Azure's credential chain prints a dozen lines) go nowhere: what
    # failed is said once, in advisor's one line
    quiet = logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(quiet)
    try:
        facts = backend.catalog_facts(wanted, doc)
    except Exception as exc:
        from advisor.clouds.registry import credentials_error

        missing = credentials_error(provider, exc)
        if missing is not None:
            raise missing from exc
        # an endpoint that stalls, answers HTML or names an unknown region: the provider's
        # own classification, one line, never an internal error
        classify = getattr(backend, "classify", None)
        said = classify(exc) if classify is not None else exc
        if said is not exc:
            raise said from exc
        raise
    finally:
        root.removeHandler(quiet)
    families = {c.codename.lower(): c.family for c in cat.cpus.values()}
    # learn the API's GPU names from every entry the catalog knows (bundled and this file)
    _, bundled = provider_file(None, provider)
    known = {"instances": [*bundled["instances"], *doc["instances"]]}
    gpu_map = {**learned_gpu_map(known, facts), **learned_gpu_map(doc, facts)}
    merged, report = merge(provider, doc, facts, gpu_map, cat.cpus, families, wanted,
                           today or dt.date.today())
    report.skipped += list(getattr(backend, "notes", []))
    report.dry_run = dry_run
    if dry_run:
        return report
    layer = out if out is not None else bundled_dir()
    write(target, dump(merged, provider, report.as_of), layer)
    report.written = str(target)
    return report
