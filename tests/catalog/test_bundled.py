"""Integrity of the catalog advisor ships: coverage the issue asks for, and internal consistency."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from advisor import load_catalog, validate_catalog
from advisor.catalog import numa_known

CAT = load_catalog()
TODAY = dt.date.today()

REQUIRED_GPUS = ["T4", "A10", "A10G", "L4", "L40S", "A100-40GB-SXM", "A100-80GB-SXM",
                 "A100-80GB-PCIe", "H100-SXM", "H100-PCIe", "H100-NVL", "H200", "B200", "MI300X"]
REQUIRED_FAMILIES = {
    "aws": ["g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200"],
    "gcp": ["a2-highgpu", "a2-ultragpu", "a2-megagpu", "a3-highgpu", "a3-megagpu", "a3-ultragpu",
            "a4", "g2"],
    "azure": ["NCasT4_v3", "NVadsA10_v5", "NC_A100_v4", "NCads_H100_v5", "ND_A100_v4",
              "ND_H100_v5", "ND_H200_v5", "ND_MI300X_v5"],
}
REQUIRED_MODELS = ["llama-3-8b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
                   "llama-3.3-70b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "qwen2.5-72b",
                   "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "gemma-2-9b", "phi-4",
                   "deepseek-v2-lite", "gpt-oss-20b"]
REQUIRED_CPUS = ["AMD EPYC 7R13", "AMD EPYC 7R32", "AMD EPYC 7V13", "AMD EPYC 74F3V",
                 "AMD EPYC 9V84", "AMD EPYC 9R14", "Intel Xeon Platinum 8275CL",
                 "Intel Xeon Platinum 8480C", "Intel Xeon Platinum 8481C",
                 "Intel Xeon Platinum 8488C", "Intel Xeon Platinum 8559C"]


def _all_sources():
    for kind, table in (("gpu", CAT.gpus), ("cpu", CAT.cpus), ("instance", CAT.instances),
                        ("model", CAT.models)):
        for key, entry in table.items():
            for field, prov in entry.sources.items():
                yield f"{kind} {key} {field}", prov


def test_bundled_catalog_has_no_problem():
    assert validate_catalog() == []


def test_every_required_gpu_is_there():
    assert set(REQUIRED_GPUS) <= set(CAT.gpus)


@pytest.mark.parametrize("provider", sorted(REQUIRED_FAMILIES))
def test_every_required_family_has_instances(provider):
    families = {i.family for i in CAT.instances.values() if i.provider == provider}
    missing = [f for f in REQUIRED_FAMILIES[provider]
               if not any(fam == f or fam.startswith(f + "-") for fam in families if fam)]
    assert missing == []


def test_every_required_model_and_cpu_is_there():
    assert set(REQUIRED_MODELS) <= set(CAT.models)
    assert set(REQUIRED_CPUS) <= set(CAT.cpus)


def test_every_fact_has_a_dated_source():
    for where, prov in _all_sources():
        assert prov.as_of <= TODAY, where
        assert len(prov.source) >= 10, where


def test_url_sources_are_https():
    for where, prov in _all_sources():
        for url in re.findall(r"https?://\S+", prov.source):
            assert url.startswith("https://"), where


def test_instance_names_follow_each_clouds_convention():
    pattern = {
        "aws": (r"^(g4dn|g5|g6|g6e|g7e|gr6|p3|p3dn|p4d|p4de|p5|p5e|p5en|p6-b200|p6-b300)"
                r"\.(\d*x?large|metal)$"),
        "gcp": r"^(a2|a3|a4|g2|g4|n1)-[a-z]+-\d+g?(-nolssd)?$",
        "azure": r"^Standard_N[CDV]\w+$",
    }
    for inst in CAT.instances.values():
        assert re.match(pattern[inst.provider], inst.name), inst.key


def test_family_prefixes_the_name():
    for inst in CAT.instances.values():
        if inst.provider in ("aws", "gcp"):
            assert inst.name.startswith(inst.family), inst.key


def test_priced_region_is_one_that_offers_the_instance():
    for inst in CAT.instances.values():
        if inst.price.region and inst.regions:
            assert inst.price.region in inst.regions, inst.key


def test_spot_is_cheaper_than_on_demand():
    for inst in CAT.instances.values():
        p = inst.price
        if p.spot_usd_per_hour is not None and p.on_demand_usd_per_hour is not None:
            assert p.spot_usd_per_hour < p.on_demand_usd_per_hour, inst.key


def test_bigger_sizes_of_a_family_cost_more():
    by_family: dict[tuple[str, str | None, str], list] = {}
    for inst in CAT.instances.values():
        if inst.price.on_demand_usd_per_hour is not None:
            by_family.setdefault((inst.provider, inst.family, inst.gpu.model), []).append(inst)
    checked = 0
    for members in by_family.values():
        for small in members:
            for big in members:
                # "bigger" = at least as much of everything and more of something; AWS sells
                # e.g. g4dn.16xlarge (1 GPU, 64 vCPU) above g4dn.12xlarge (4 GPU, 48 vCPU)
                dims = [(small.gpu.count, big.gpu.count), (small.vcpus, big.vcpus),
                        (small.memory_gib or 0, big.memory_gib or 0)]
                if all(a <= b for a, b in dims) and any(a < b for a, b in dims):
                    assert (big.price.on_demand_usd_per_hour
                            > small.price.on_demand_usd_per_hour), (small.key, big.key)
                    checked += 1
    assert checked > 20


def test_vcpus_per_gpu_and_memory_are_plausible():
    for inst in CAT.instances.values():
        assert 2 <= inst.vcpus / inst.gpu.count <= 96, inst.key
        if inst.memory_gib is not None:
            assert 2 <= inst.memory_gib / inst.vcpus <= 32, inst.key


def test_gpu_usable_memory_is_below_marketed_memory():
    for gpu in CAT.gpus.values():
        if gpu.usable_memory_mib is not None:
            assert 0.85 * gpu.memory_gib * 1024 < gpu.usable_memory_mib <= gpu.memory_gib * 1024


def test_gpu_fp8_is_at_least_bf16():
    for gpu in CAT.gpus.values():
        if gpu.fp8_tflops and gpu.bf16_tflops:
            assert gpu.fp8_tflops >= 1.9 * gpu.bf16_tflops, gpu.id


def test_documented_examples_from_the_issue_and_sources():
    p4d = CAT.instance("aws:p4d.24xlarge")
    assert (p4d.vcpus, p4d.memory_gib, p4d.gpu.model, p4d.gpu.count) == (96, 1152,
                                                                       "A100-40GB-SXM", 8)
    nd = CAT.instance("azure:Standard_ND96isr_H100_v5")
    assert nd.numa.nodes == 2 and nd.numa.gpu_nodes == [0, 0, 0, 0, 1, 1, 1, 1]
    assert "azhpc-images" in nd.sources["numa"].source


def test_known_numa_layouts_are_balanced_where_documented():
    for inst in CAT.instances.values():
        if numa_known(inst):
            counts = {n: inst.numa.gpu_nodes.count(n) for n in set(inst.numa.gpu_nodes)}
            assert len(set(counts.values())) == 1, inst.key


def test_numa_counts_add_up():
    c = CAT.numa_counts()
    assert c["gpu_nodes_known"] + c["gpu_nodes_null"] == sum(
        i.gpu.count for i in CAT.instances.values())
    assert c["gpu_nodes_known"] > 0


@pytest.mark.parametrize("alias", REQUIRED_MODELS)
def test_model_config_has_what_sizing_needs(alias):
    cfg = CAT.model_configs[alias]
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"):
        assert isinstance(cfg[key], int) and cfg[key] > 0, key
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    assert heads % kv == 0
    assert cfg.get("max_position_embeddings", 1) > 0
    entry = CAT.models[alias]
    assert entry.sources["default"].source.startswith("https://")
    assert entry.hf_id.split("/")[1].lower().replace("meta-", "")[:6] in entry.config.lower()


def test_describe_has_the_keys_the_issue_names():
    for inst in CAT.instances.values():
        view = CAT.describe(inst)
        top = {"provider", "name", "vcpus", "memory_gib", "gpu", "cpu", "numa", "price"}
        assert top <= set(view)
        assert {"model", "count", "memory_gib"} <= set(view["gpu"])
        assert {"model", "family", "sockets"} <= set(view["cpu"])
        assert {"nodes", "gpu_nodes"} <= set(view["numa"])
        assert {"on_demand_usd_per_hour", "region", "as_of"} <= set(view["price"])
