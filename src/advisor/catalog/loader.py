"""Load the catalog: the bundled one, then each user directory on top of it.

A catalog directory holds any of::

    gpus.yaml            {gpus: [...]}
    cpus.yaml            {cpus: [...]}
    instances/*.yaml     {provider: aws, instances: [...]}
    prices/<provider>.csv and prices/sources.yaml   prices per region (catalogs/prices/README.md)
    models/index.yaml    {models: [...]} and the config.json files it names

A user directory (``--catalog DIR`` or ``ADVISOR_CATALOG_DIR``) adds entries, or changes
bundled ones: an entry whose key (GPU id, CPU model, ``provider:name``, model alias) is
already known is deep-merged onto it, so ``{name: p5.48xlarge, price: {...}}`` is enough to
record a negotiated price. Everything is validated after the merge.

:func:`validate` returns every problem found; :func:`load` raises the first one as a
:class:`~advisor.errors.CatalogError` naming file, entry and field.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.catalog.catalog import Catalog
from advisor.catalog.schema import Cpu, Gpu, InstanceType, ModelAlias
from advisor.errors import CatalogError

if TYPE_CHECKING:
    from pydantic import BaseModel

ENV_VAR = "ADVISOR_CATALOG_DIR"


#: a catalog YAML file larger than this is refused unread (the largest bundled one is ~80 KiB)
MAX_YAML_BYTES = 8 * 2**20

_LOADER: Any = None


def _yaml_loader() -> Any:
    """yaml is imported only when a catalog is parsed (not when the cached one is used).

    A safe loader that refuses a mapping with the same key twice: PyYAML keeps the last one
    silently, so ``price: 1`` written twice would drop a fact without a word."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    # the C loader is 5-10x faster; fall back when libyaml is missing
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class UniqueKeyLoader(base):  # type: ignore[misc,valid-type]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        fresh = key not in seen
                    except TypeError:  # an unhashable key: the base loader reports it
                        continue
                    if not fresh:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    _LOADER = UniqueKeyLoader
    return _LOADER


@dataclass(frozen=True)
class Problem:
    file: str
    entry: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = ": ".join(p for p in (self.file, self.entry, self.field) if p)
        return f"{where}: {self.message}"

    def as_dict(self) -> dict[str, str | None]:
        return {"file": self.file, "entry": self.entry, "field": self.field,
                "message": self.message}


@dataclass
class _Raw:
    """One entry as read, before validation, with where it came from."""

    data: dict[str, Any]
    file: str
    label: str


@dataclass
class _Collected:
    gpus: dict[str, _Raw] = field(default_factory=dict)
    cpus: dict[str, _Raw] = field(default_factory=dict)
    instances: dict[str, _Raw] = field(default_factory=dict)
    models: dict[str, _Raw] = field(default_factory=dict)
    model_configs: dict[str, Path] = field(default_factory=dict)
    #: "provider:name" -> region -> the raw price of that region (a later layer's row wins)
    prices: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    price_rows: list[Any] = field(default_factory=list)
    #: source key -> its entry, over every layer read so far (a user's rows may name ours)
    price_sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the layer being read (0 = the bundled catalog), the layer of each price row
    #: ("provider:name", region) and of each instance file's last ``price`` block
    layer: int = -1
    row_layer: dict[tuple[str, str], int] = field(default_factory=dict)
    price_layer: dict[str, int] = field(default_factory=dict)


def bundled_dir() -> Path:
    """The catalog shipped with advisor (in the wheel, or at the repo root when editable)."""
    path = Path(__file__).resolve().parents[1] / "_data" / "catalogs"  # inside the wheel
    if path.is_dir():
        return path
    repo = Path(__file__).resolve().parents[3] / "catalogs"
    if repo.is_dir():
        return repo
    raise CatalogError(  # pragma: no cover - a broken installation
        "the bundled catalog is missing from this installation",
        hint="reinstall advisor (pip install --force-reinstall advisor)",
    )


def user_dirs(explicit: Sequence[str | os.PathLike[str]] | None = None,
              environ: dict[str, str] | None = None) -> list[Path]:
    """Directories named with ``--catalog``, else those in ``ADVISOR_CATALOG_DIR`` (os.pathsep)."""
    if explicit:
        return [Path(p) for p in explicit]
    env = (environ if environ is not None else os.environ).get(ENV_VAR, "")
    return [Path(p) for p in env.split(os.pathsep) if p]


#: the catalog file format this code reads
SCHEMA_VERSION = 1


def _display(path: Path, root: Path) -> str:
    try:
        return str(Path(root.name) / path.relative_to(root))
    except ValueError:
        return str(path)


def _read_yaml(path: Path, root: Path, problems: list[Problem]) -> Any:
    import yaml

    from advisor.errors import UserInputError
    from advisor.inputs import read_text

    shown = _display(path, root)
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            problems.append(Problem(shown, None, None,
                                    f"larger than {MAX_YAML_BYTES // 2**20} MiB: refused unread"))
            return None
        # the bounded reader: a FIFO named instances/aws.yaml would hang read_text, a link to
        # /dev/zero would end in MemoryError
        text = read_text(path, limit=MAX_YAML_BYTES, what="")
    except OSError as exc:
        problems.append(Problem(shown, None, None, f"cannot read: {exc}"))
        return None
    except UserInputError as exc:
        problems.append(Problem(shown, None, None, str(exc).split(": ", 1)[-1]))
        return None
    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problems.append(Problem(shown, None, None, f"not valid YAML at {where}: {what}"))
        return None


def _entries(doc: Any, key: str, shown: str, problems: list[Problem]) -> list[Any]:
    if doc is None:
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        problems.append(Problem(shown, None, key, f"expected a mapping with a list under {key!r}"))
        return []
    allowed = {key, "schema_version", "provider"}
    for extra in doc:
        # keys starting with "_" hold YAML anchors shared by the entries
        if not (isinstance(extra, str) and (extra in allowed or extra.startswith("_"))):
            problems.append(Problem(shown, None, str(extra), "unknown top-level key (a typo?)"))
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        problems.append(Problem(shown, None, "schema_version",
                                f"schema_version {version!r} is not {SCHEMA_VERSION}, "
                                "the one this advisor reads"))
    return list(doc[key])


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _put(table: dict[str, _Raw], key: str, raw: _Raw, layer_seen: set[str],
         problems: list[Problem]) -> None:
    if key in layer_seen:
        first = table[key]
        problems.append(Problem(raw.file, raw.label, None,
                                f"duplicate entry (also in {first.file})"))
        return
    layer_seen.add(key)
    if key in table:  # an override from a later layer
        table[key] = _Raw(_deep_merge(table[key].data, raw.data), raw.file, raw.label)
    else:
        table[key] = raw


def _collect_dir(root: Path, into: _Collected, problems: list[Problem]) -> None:
    if not root.is_dir():
        problems.append(Problem(str(root), None, None, "catalog directory does not exist"))
        return
    seen: dict[str, set[str]] = {"gpus": set(), "cpus": set(), "instances": set(),
                                 "models": set()}
    into.layer += 1

    def keyed(items: list[Any], shown: str, kind: str, key_field: str,
              table: dict[str, _Raw], extra: dict[str, Any] | None = None) -> None:
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                problems.append(Problem(shown, f"{kind}[{i}]", None, "expected a mapping"))
                continue
            if extra:
                item = {**extra, **item}
            name = item.get(key_field)
            if not isinstance(name, str) or not name:
                problems.append(Problem(shown, f"{kind}[{i}]", key_field, "missing field"))
                continue
            key = f"{item.get('provider')}:{name}" if kind == "instances" else name
            _put(table, key, _Raw(item, shown, key), seen[kind], problems)
            if kind == "instances" and "price" in item:
                into.price_layer[key] = into.layer

    for fname, kind, key_field, table in (
        ("gpus.yaml", "gpus", "id", into.gpus),
        ("cpus.yaml", "cpus", "model", into.cpus),
    ):
        path = root / fname
        if path.exists():
            shown = _display(path, root)
            keyed(_entries(_read_yaml(path, root, problems), kind, shown, problems),
                  shown, kind, key_field, table)

    inst_dir = root / "instances"
    if inst_dir.is_dir():
        for path in sorted(inst_dir.glob("*.y*ml")):
            shown = _display(path, root)
            doc = _read_yaml(path, root, problems)
            if doc is None:
                continue
            provider = doc.get("provider") if isinstance(doc, dict) else None
            if not isinstance(provider, str):
                problems.append(Problem(shown, None, "provider", "missing field"))
                continue
            keyed(_entries(doc, "instances", shown, problems), shown, "instances", "name",
                  into.instances, {"provider": provider})

    from advisor.catalog import prices

    rows, sources, price_problems = prices.read_dir(
        root, lambda p: _display(p, root), lambda p: _read_yaml(p, root, problems),
        into.price_sources)
    into.price_sources.update(sources)
    problems.extend(Problem(p.file, p.entry, p.field, p.message) for p in price_problems)
    for row in rows:
        into.prices.setdefault(f"{row.provider}:{row.instance}", {})[row.region] = \
            prices.as_price(row, sources)
        into.row_layer[(f"{row.provider}:{row.instance}", row.region)] = into.layer
    into.price_rows.extend(rows)

    index = root / "models" / "index.yaml"
    if index.exists():
        shown = _display(index, root)
        items = _entries(_read_yaml(index, root, problems), "models", shown, problems)
        keyed(items, shown, "models", "alias", into.models)
        for raw in into.models.values():
            cfg = raw.data.get("config")
            if raw.file == shown and isinstance(cfg, str):
                into.model_configs[raw.label] = root / "models" / cfg


def _loc(err: Any) -> str:
    return ".".join(str(p) for p in err["loc"]) or "(entry)"


def _validated(kind: type[BaseModel], table: dict[str, _Raw],
               problems: list[Problem]) -> dict[str, Any]:
    from pydantic import ValidationError

    out: dict[str, Any] = {}
    for key, raw in table.items():
        try:
            out[key] = kind.model_validate(raw.data)
        except ValidationError as exc:
            for err in exc.errors():
                msg = err["msg"]
                if err["type"] == "missing":
                    msg = "missing field"
                elif err["type"] == "extra_forbidden":
                    msg = "unknown field (a typo?)"
                problems.append(Problem(raw.file, raw.label, _loc(err), msg))
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_instance_refs(key: str, raw: _Raw, cat: Catalog, gpu_ids: set[str],
                         cpu_models: set[str], problems: list[Problem]) -> None:
    data = raw.data
    gpu, cpu, numa = (_mapping(data.get(k)) for k in ("gpu", "cpu", "numa"))
    model = gpu.get("model")
    if isinstance(model, str) and model not in gpu_ids:
        near = cat.resolve_gpu_id(model)
        hint = f"; write {near!r}" if near else ""
        problems.append(Problem(raw.file, key, "gpu.model",
                                f"GPU {model!r} is not in gpus.yaml{hint}"))
    cpu_model = cpu.get("model")
    if isinstance(cpu_model, str) and cpu_model not in cpu_models:
        problems.append(Problem(raw.file, key, "cpu.model",
                                f"CPU {cpu_model!r} is not in cpus.yaml"))
    count, nodes = _int(gpu.get("count")), _int(numa.get("nodes"))
    sockets = _int(cpu.get("sockets"))
    gpu_nodes = numa.get("gpu_nodes")
    if isinstance(gpu_nodes, list):
        if count is not None and len(gpu_nodes) != count:
            problems.append(Problem(raw.file, key, "numa.gpu_nodes",
                                    f"lists {len(gpu_nodes)} GPUs but gpu.count is {count}"))
        known = [n for n in gpu_nodes if _int(n) is not None]
        if known and numa.get("nodes") is None:
            problems.append(Problem(raw.file, key, "numa.gpu_nodes",
                                    "names NUMA nodes while numa.nodes is unknown"))
        for n in known:
            if n < 0 or (nodes is not None and n >= nodes):
                problems.append(Problem(
                    raw.file, key, "numa.gpu_nodes",
                    f"node {n} does not exist (numa.nodes is {nodes}: 0..{(nodes or 1) - 1})"))
    if sockets and nodes and 0 < nodes < sockets:
        problems.append(Problem(raw.file, key, "numa.nodes",
                                f"{nodes} NUMA nodes for {sockets} sockets"))


def _integrity(cat: Catalog, raws: _Collected, problems: list[Problem]) -> None:
    for alias, gpu in cat.gpus.items():
        for a in gpu.aliases:
            owner = cat.gpu_alias_owner(a)
            if owner is not None and owner != alias:
                problems.append(Problem(raws.gpus[alias].file, alias, "aliases",
                                        f"alias {a!r} is also used by {owner!r}"))
    # Cross-references are checked on the raw entries, so that an entry with a bad number
    # still has its other problems reported; names known to a layer count even when that
    # GPU or CPU entry is itself broken (it has its own problem already).
    for key, raw in raws.instances.items():
        _check_instance_refs(key, raw, cat, set(raws.gpus), set(raws.cpus), problems)
    for alias, path in raws.model_configs.items():
        if alias not in cat.models:
            continue
        raw = raws.models[alias]
        from advisor.errors import UserInputError
        from advisor.inputs import read_json

        if not path.exists():
            problems.append(Problem(raw.file, alias, "config", f"file {path.name} is missing"))
            continue
        try:
            cfg = read_json(path, what="")
        except (OSError, ValueError, UserInputError) as exc:
            problems.append(Problem(raw.file, alias, "config",
                                    f"{path.name} is not valid JSON: {exc}"))
            continue
        if not isinstance(cfg, dict) or not (cfg.get("model_type") or cfg.get("architectures")):
            problems.append(Problem(raw.file, alias, "config",
                                    f"{path.name} has neither model_type nor architectures"))
            continue
        cat.model_configs[alias] = cfg


def _attach_prices(raws: _Collected, problems: list[Problem]) -> None:
    """Put each type's region prices on it, and its reference price where its file has none
    (a price written in the instance file, e.g. a negotiated one, wins for its region)."""
    from advisor.catalog import prices

    unsold: set[tuple[str, str]] = set()
    for row in raws.price_rows:
        key = f"{row.provider}:{row.instance}"
        raw = raws.instances.get(key)
        if raw is None:
            problems.append(Problem(row.file, f"line {row.line}", "instance",
                                    f"{key} is not in the catalog"))
            continue
        regions = raw.data.get("regions")
        if isinstance(regions, list) and regions and row.region not in regions:
            unsold.add((key, row.region))
            # a layer that lists the type's regions anew (a user's own list, a refresh that
            # found the type gone from a region) sets aside the other layers' rows there; a
            # row of the same layer as the list contradicts it
            if Path(row.file).parts[:1] == Path(raw.file).parts[:1]:
                problems.append(Problem(row.file, f"line {row.line}", "region",
                                        f"{row.instance} is not sold in {row.region} (its "
                                        "regions list does not name it)"))
    gpu_of: dict[tuple[str, str], tuple[str, int]] = {}
    for raw in raws.instances.values():
        gpu = _mapping(raw.data.get("gpu"))
        model, count = gpu.get("model"), _int(gpu.get("count"))
        if isinstance(model, str) and count:
            gpu_of[(str(raw.data.get("provider")), str(raw.data.get("name")))] = (model, count)
    problems.extend(Problem(p.file, p.entry, p.field, p.message)
                    for p in prices.anomalies(raws.price_rows, gpu_of))
    for key, by_region in raws.prices.items():
        raw = raws.instances.get(key)
        if raw is None:
            continue
        data = dict(raw.data)
        table = {r: p for r, p in by_region.items() if (key, r) not in unsold}
        own = _mapping(data.get("price"))
        own_layer = raws.price_layer.get(key, -1)
        region = own.get("region")
        priced = own.get("on_demand_usd_per_hour") is not None or \
            own.get("spot_usd_per_hour") is not None
        # the later layer wins: an instance file's price block (a negotiated price) over the
        # rows below it, a price file's row over the instance files below it
        if priced and isinstance(region, str) and \
                own_layer >= raws.row_layer.get((key, region), -1):
            if not own.get("source"):  # the block's own provenance: sources.price, else default
                srcs = _mapping(data.get("sources"))
                cite = _mapping(srcs.get("price")) or _mapping(srcs.get("default"))
                own = {**own, "source": str(cite.get("source") or raw.file)}
                data["price"] = own
            table[region] = own
        else:
            ref = prices.reference(str(data.get("provider")), table)
            if ref is not None and (not priced or own_layer < max(
                    raws.row_layer.get((key, r), -1) for r in table)):
                data["price"] = ref
        data["prices"] = table
        raws.instances[key] = _Raw(data, raw.file, raw.label)


def _build(dirs: Iterable[Path]) -> tuple[Catalog, list[Problem]]:
    problems: list[Problem] = []
    raws = _Collected()
    for d in dirs:
        _collect_dir(d, raws, problems)
    _attach_prices(raws, problems)
    cat = Catalog(
        gpus=_validated(Gpu, raws.gpus, problems),
        cpus=_validated(Cpu, raws.cpus, problems),
        instances=_validated(InstanceType, raws.instances, problems),
        models=_validated(ModelAlias, raws.models, problems),
    )
    _integrity(cat, raws, problems)
    return cat, problems


def validate(directory: str | os.PathLike[str] | None = None) -> list[Problem]:
    """Every problem of a catalog directory (on top of the bundled one), or of the bundled one."""
    dirs = [bundled_dir()]
    if directory is not None and Path(directory).resolve() != dirs[0].resolve():
        dirs.append(Path(directory))
    return _build(dirs)[1]


def load(extra: Sequence[str | os.PathLike[str]] | None = None,
         environ: dict[str, str] | None = None) -> Catalog:
    """The bundled catalog with the user's directories on top; raises on the first problem.

    A catalog loaded before from the same, unchanged directories comes from the cache
    (:mod:`advisor.catalog.cache`), which returns what a fresh load would."""
    from advisor.catalog import cache

    dirs = [bundled_dir(), *user_dirs(extra, environ)]
    try:  # the key is taken before the files are read: one changed meanwhile misses next time
        digest: bytes | None = cache.key(dirs) if cache.enabled() else None
    except Exception:  # noqa: BLE001 - no cache then, only a slower load
        digest = None
    if digest is not None:
        cached = cache.read(dirs, digest)
        if cached is not None:
            return cached
    cat, problems = _build(dirs)
    if problems:
        first = problems[0]
        more = f" ({len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CatalogError(
            first.message + more, file=first.file, entry=first.entry, field=first.field,
            hint="run 'advisor catalog validate DIR' to list every problem",
        )
    if digest is not None:
        cache.write(dirs, digest, cat)
    return cat
