"""The loaded catalog and its look-ups (pure: no file or network access)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from advisor.catalog.schema import Cpu, Gpu, InstanceType, ModelAlias, dump, provenance_of
from advisor.errors import NotFoundError, UserInputError


def _num(value: float | None) -> float | int | None:
    """1152.0 -> 1152 in the JSON view; other values unchanged."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@dataclass
class Catalog:
    gpus: dict[str, Gpu] = field(default_factory=dict)
    cpus: dict[str, Cpu] = field(default_factory=dict)
    instances: dict[str, InstanceType] = field(default_factory=dict)
    models: dict[str, ModelAlias] = field(default_factory=dict)
    #: alias -> the parsed config.json
    model_configs: dict[str, dict[str, Any]] = field(default_factory=dict)

    # -- GPUs ---------------------------------------------------------------------------
    def gpu_alias_owner(self, alias: str) -> str | None:
        wanted = _norm(alias)
        owners = [g.id for g in self.gpus.values()
                  if wanted in {_norm(a) for a in g.aliases}]
        return owners[0] if owners else None

    def resolve_gpu_id(self, name: str) -> str | None:
        """The GPU id for an id or alias, case- and punctuation-insensitive; None if unknown."""
        if name in self.gpus:
            return name
        wanted = _norm(name)
        for gpu in self.gpus.values():
            if _norm(gpu.id) == wanted or wanted in {_norm(a) for a in gpu.aliases}:
                return gpu.id
        return None

    def match_gpu_ids(self, name: str) -> list[str]:
        """GPU ids for an id, an alias, or a family prefix (``H100`` = every H100 variant)."""
        gid = self.resolve_gpu_id(name)
        if gid is not None:
            return [gid]
        wanted = _norm(name)
        return sorted(g.id for g in self.gpus.values()
                      if wanted and _norm(g.id).startswith(wanted)
                      and g.id[len(name):len(name) + 1] in ("-", ""))

    def gpu(self, name: str) -> Gpu:
        gid = self.resolve_gpu_id(name)
        if gid is None:
            raise NotFoundError("GPU", name, self.gpus,
                                hint="'advisor catalog list' shows the GPUs of every instance")
        return self.gpus[gid]

    # -- instances ----------------------------------------------------------------------
    def instance(self, key: str) -> InstanceType:
        """Look up ``provider:type``; a bare type is accepted when only one provider has it."""
        if key in self.instances:
            return self.instances[key]
        if ":" not in key:
            hits = [k for k, i in self.instances.items() if i.name == key]
            if len(hits) == 1:
                return self.instances[hits[0]]
            if len(hits) > 1:
                raise UserInputError(f"instance type {key!r} is ambiguous",
                                     hint=f"name the provider: {', '.join(sorted(hits))}")
        else:
            provider = key.split(":", 1)[0]
            if provider not in self.providers():
                raise NotFoundError("provider", provider, self.providers(),
                                    hint="write PROVIDER:TYPE, e.g. "
                                    + next(iter(sorted(self.instances)), "lab:box"))
        raise NotFoundError("instance type", key, self.instances,
                            hint="'advisor catalog list' shows every instance type")

    def providers(self) -> list[str]:
        return sorted({i.provider for i in self.instances.values()})

    def filter(self, provider: str | None = None, gpu: str | None = None) -> list[InstanceType]:
        if provider is not None and provider not in self.providers():
            raise NotFoundError("provider", provider, self.providers())
        gids: list[str] | None = None
        if gpu is not None:
            gids = self.match_gpu_ids(gpu)
            if not gids:
                self.gpu(gpu)  # raises the not-found error with its suggestions
        out = [i for i in self.instances.values()
               if (provider is None or i.provider == provider)
               and (gids is None or i.gpu.model in gids)]
        return sorted(out, key=lambda i: (i.provider, i.gpu.model, i.gpu.count, i.vcpus, i.name))

    def describe(self, inst: InstanceType) -> dict[str, Any]:
        """The JSON view of one instance, with GPU and CPU facts joined in."""
        gpu = self.gpus.get(inst.gpu.model)
        cpu = self.cpus.get(inst.cpu.model) if inst.cpu.model else None
        codename = cpu.codename if cpu else inst.cpu.codename
        family = cpu.family if cpu else self.family_of_codename(codename)
        return {
            "provider": inst.provider,
            "name": inst.name,
            "family": inst.family,
            "vcpus": inst.vcpus,
            "memory_gib": _num(inst.memory_gib),
            "gpu": {
                "model": inst.gpu.model,
                "name": gpu.name if gpu else None,
                "count": inst.gpu.count,
                "memory_gib": _num(gpu.memory_gib) if gpu else None,
                "total_memory_gib": _num(gpu.memory_gib * inst.gpu.count) if gpu else None,
            },
            "cpu": {
                "model": inst.cpu.model,
                "vendor": cpu.vendor if cpu else None,
                "family": family,
                "codename": codename,
                "sockets": inst.cpu.sockets,
                "memory_bandwidth_gb_s_per_socket":
                    cpu.memory_bandwidth_gb_s_per_socket if cpu else None,
            },
            "numa": {"nodes": inst.numa.nodes, "gpu_nodes": inst.numa.gpu_nodes,
                     "known": numa_known(inst)},
            "host": dump(inst.host),
            "pcie_gen": inst.pcie_gen,
            "network_gbps": inst.network_gbps,
            "fabric": dump(inst.fabric) if inst.fabric else None,
            "price": dump(inst.price),
            "prices": {r: dump(q) for r, q in sorted(inst.prices.items())},
            "regions": list(inst.regions),
            "available_until": (inst.available_until.isoformat() if inst.available_until
                                else None),
            "retired": inst.retired(),
            "conflicts": [dump(c) for c in inst.conflicts],
            "sources": {k: dump(v) for k, v in inst.sources.items()},
        }

    def family_of_codename(self, codename: str | None) -> str | None:
        """The family of a CPU generation, from any catalog CPU of that codename."""
        if codename is None:
            return None
        for cpu in self.cpus.values():
            if cpu.codename.lower() == codename.lower():
                return cpu.family
        return None

    def describe_gpu(self, gpu: Gpu) -> dict[str, Any]:
        return dump(gpu)

    def describe_model(self, alias: str) -> dict[str, Any]:
        entry = self.models[alias]
        cfg = self.model_configs.get(alias, {})
        nested = cfg.get("text_config")
        text: dict[str, Any] = nested if isinstance(nested, dict) else cfg
        keys = ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads",
                "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
                "max_position_embeddings", "torch_dtype", "num_local_experts",
                "num_experts", "num_experts_per_tok", "kv_lora_rank", "sliding_window",
                "tie_word_embeddings")
        summary = {k: text.get(k) for k in keys if text.get(k) is not None}
        if "architectures" in cfg:
            summary["architectures"] = cfg["architectures"]
        if "quantization_config" in cfg:
            summary["quantization"] = cfg["quantization_config"].get("quant_method")
        return {**dump(entry), "summary": summary}

    def model(self, alias: str) -> ModelAlias:
        if alias in self.models:
            return self.models[alias]
        for m in self.models.values():
            if m.hf_id.lower() == alias.lower():
                return m
        raise NotFoundError("model", alias, self.models,
                            hint="'advisor models list' shows the known aliases")

    def provenance(self, inst: InstanceType, field_path: str) -> dict[str, Any]:
        return dump(provenance_of(inst.sources, field_path))

    def numa_counts(self) -> dict[str, int]:
        """How many NUMA facts are known vs null over all instances."""
        out = {"nodes_known": 0, "nodes_null": 0, "gpu_nodes_known": 0, "gpu_nodes_null": 0}
        for inst in self.instances.values():
            out["nodes_known" if inst.numa.nodes is not None else "nodes_null"] += 1
            gn = inst.numa.gpu_nodes or [None] * inst.gpu.count
            known = sum(1 for n in gn if n is not None)
            out["gpu_nodes_known"] += known
            out["gpu_nodes_null"] += len(gn) - known
        return out


def numa_known(inst: InstanceType) -> bool:
    gn = inst.numa.gpu_nodes
    return inst.numa.nodes is not None and gn is not None and all(n is not None for n in gn)
