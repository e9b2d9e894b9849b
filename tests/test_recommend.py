"""Ranking: constraints, objectives, the NUMA weight, and the answer when nothing is left."""

from __future__ import annotations

import json
import textwrap

import pytest

import advisor
from advisor import UserInputError
from advisor.core.host import NUMA_WEIGHT

CAT = advisor.load_catalog()


@pytest.fixture(scope="module")
def default():
    return advisor.recommend("llama-3-8b", 8192, with_rejected=True)


def test_default_ranking_is_sorted_and_consistent(default):
    recs, rejected = default
    assert len(recs) + len(rejected) == len(CAT.instances)
    # deployable offers first (issue 27: AMD after them), each part by score
    assert [(not r.deployable, r.score) for r in recs] == sorted(
        (not r.deployable, r.score) for r in recs)
    for r in recs:
        assert r.fit.fits and r.fit.max_concurrency >= 1
        assert r.usd_per_million_output_tokens == pytest.approx(
            r.usd_per_hour * r.plan.nodes / (r.instance_output_tokens_per_s * 3600) * 1e6,
            rel=1e-3)
        assert r.plan.tp * r.plan.pp * r.plan.replicas == r.gpu_count * r.plan.nodes
        assert r.numa.alignment in ("aligned", "spans-nodes", "unknown") and r.reasons
    json.loads(recs[0].model_dump_json())


def test_rejections_say_why(default):
    _, rejected = default
    by = {r.by for r in rejected}
    assert "does not fit" in by  # T4s cannot hold an 8k context with the 8B model's weights
    assert all(r.reason for r in rejected)


def test_a10g_instances_rank_now_that_the_catalog_has_their_tensor_throughput(default):
    """Issue 15: g5.* (A10G) and the Azure A10 sizes were all rejected for "no tensor
    throughput"; the A10 datasheet figure and the A10G figure are in gpus.yaml now."""
    recs, rejected = default
    assert not [r for r in rejected if "tensor throughput" in r.reason]
    # g5.xlarge is rejected now, by vLLM's CPU floor (4 vCPUs for one GPU), not the catalog
    assert {r.by for r in rejected if r.instance == "g5.xlarge"} == {"host floor"}
    g5 = next(r for r in recs if r.instance == "g5.2xlarge")
    assert g5.gpu == "A10G" and g5.fit.fits and g5.instance_output_tokens_per_s > 0


def test_constraints_filter():
    recs = advisor.recommend("llama-3-8b", 8192, providers=["azure"], gpus=["A100"],
                             max_usd_per_hour=20)
    assert recs and {r.provider for r in recs} == {"azure"}
    assert all(r.gpu.startswith("A100") and r.usd_per_hour <= 20 for r in recs)
    # spot: only GCP's price source states dated spot prices today (catalogs/prices)
    spot = advisor.recommend("llama-3-8b", 8192, providers=["gcp"], spot=True)
    assert spot and all(r.price_kind == "spot" for r in spot)
    assert all(r.usd_per_hour == CAT.instance(f"gcp:{r.instance}").price.spot_usd_per_hour
               for r in spot)
    _, rejected = advisor.recommend("llama-3-8b", 8192, providers=["aws"], spot=True,
                                    with_rejected=True)
    assert rejected and all(x.by in ("no price", "--provider") for x in rejected
                            if x.provider == "aws")


def test_latency_limit_and_objective():
    limited = advisor.recommend("llama-3-8b", 8192, max_tpot_ms=20)
    assert all(r.perf.tpot_ms <= 20 for r in limited)
    fastest = advisor.recommend("llama-3-8b", 8192, objective="latency")[0]
    cheapest = advisor.recommend("llama-3-8b", 8192)[0]
    assert fastest.perf.tpot_ms <= cheapest.perf.tpot_ms


def test_numa_alignment_enters_the_score_with_its_stated_weight(make_catalog):
    box = """
        provider: onprem
        instances:
          - name: {name}
            vcpus: 64
            memory_gib: 512
            gpu: {{model: L40S, count: 2}}
            numa: {numa}
            price: {{on_demand_usd_per_hour: 2.0, region: lab, as_of: 2026-11-30}}
            sources: {{default: {{source: "our own nvidia-smi topo -m", as_of: 2026-11-30}}}}
    """
    d = make_catalog({
        "instances/a.yaml": textwrap.dedent(box.format(name="known",
                                                       numa="{nodes: 1, gpu_nodes: [0, 0]}")),
        "instances/b.yaml": textwrap.dedent(box.format(name="unknown", numa="{}")),
    })
    cat = advisor.load_catalog([d])
    # with weights streamed from host memory the host is on the hot path: an unknown map is
    # charged the host-heavy weight; without, TP over two L40S inside the box is not
    # (streaming 2 GiB a step over PCIe is slower than the default TPOT target: batch)
    recs = advisor.recommend("llama-3-8b", 8192, providers=["onprem"], catalog=cat,
                             cpu_offload_gb=2, batch=True)
    by_name = {r.instance: r for r in recs}
    known, unknown = by_name["known"], by_name["unknown"]
    assert known.numa.alignment == "aligned" and unknown.numa.alignment == "unknown"
    assert known.usd_per_million_output_tokens == unknown.usd_per_million_output_tokens
    expected = (1 + NUMA_WEIGHT["host-heavy"]["unknown"]) / (1 + NUMA_WEIGHT["host-heavy"][
        "aligned"])
    assert unknown.score / known.score == pytest.approx(expected, rel=1e-4)
    assert recs[0].instance == "known"
    assert any("share NUMA node" in r for r in known.reasons)
    assert any("not published" in r for r in unknown.risks)
    plain = {r.instance: r for r in advisor.recommend("llama-3-8b", 8192, providers=["onprem"],
                                                       catalog=cat, batch=True)}
    assert plain["known"].score == plain["unknown"].score


def test_nothing_fits_names_the_closest_misses():
    with pytest.raises(UserInputError) as err:
        advisor.recommend("llama-3.1-405b", 131072, gpus=["L4"])
    assert "closest: aws:g6.48xlarge" in err.value.message
    assert "excluded by --gpu" in err.value.message


def test_lengths_must_fit_the_context():
    with pytest.raises(UserInputError, match="exceed --ctx"):
        advisor.recommend("llama-3-8b", 1024, input_len=1000, output_len=100)


def test_region_is_priced_there_or_rejected():
    """--region ranks each offer on that region's own price (catalogs/prices), never another
    region's; an offer sold there without a price there says where it is priced (issue 17)."""
    import pytest

    from advisor.errors import UserInputError

    cat = advisor.load_catalog()
    for region in ("us-west-2", "eu-west-1"):
        recs, rejected = advisor.recommend("llama-3-8b", 8192, regions=[region],
                                           with_rejected=True)
        assert recs and all(r.region == region for r in recs)
        for r in recs:
            row = cat.instance(f"{r.provider}:{r.instance}").prices[region]
            assert r.usd_per_hour == row.on_demand_usd_per_hour
            assert r.price_as_of == str(row.as_of)
        sold_unpriced = [i for i in cat.instances.values()
                         if region in i.regions and region not in i.prices
                         and i.price.region != region]
        for i in sold_unpriced:
            why = next(x for x in rejected if f"{x.provider}:{x.instance}" == i.key)
            assert why.by == "--region" and f"no on-demand price in {region}" in why.reason
    # a region where nothing in the catalog is priced: said as such (issue 30), not a ranking
    # that rejects every offer
    with pytest.raises(UserInputError, match="no instance type of .* is priced in region"):
        advisor.recommend("llama-3-8b", 8192, regions=["xx-nowhere-1"])
