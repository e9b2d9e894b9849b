"""Pinned decisions of the ranking and the layouts, on the small frozen test catalog.

The score is the objective's figure times ``1 + penalties`` (core/ranking.py): NUMA aligned 0,
unknown +0.05, a replica spanning nodes +0.10; host memory bandwidth per GPU unknown +0.02,
below 25 GB/s +0.03; CPU generation unknown +0.01, older (Cascade Lake, Rome, Skylake) +0.02.
The expected penalty of every fixture box is written out below from its catalog entry; the
score is then recomputed from the recommendation's own throughput and price.
"""

from __future__ import annotations

from typing import Any

import pytest

import advisor
from advisor.catalog.schema import InstanceCpu, InstanceGpu, Numa
from advisor.core.engine import profile
from advisor.core.layouts import layouts, place, place_multi, tp_sizes
from advisor.core.model import spec_from_config
from advisor.core.ranking import Constraints, Request, rank
from tests.small_catalog import small_catalog

CAT = small_catalog()
QWEN = spec_from_config(CAT.model_configs["qwen3-32b"], "qwen3-32b")  # 64 heads, 64 layers
GEMMA3 = spec_from_config(CAT.model_configs["fixture-gemma3-1b"], "g3")  # 4 heads, 26 layers

#: box -> (penalty, why), from tests/fixtures/catalog-small/instances/lab.yaml. Every box holds
#: 2 x L40S; qwen3-32b (65 GB of bf16 weights) needs both: one replica of TP 2.
PENALTY = {
    # Genoa (recent) at 460.8 GB/s per socket, 1 socket, 1 replica: 230.4 GB/s per GPU
    "aligned": 0.0,      # gpu_nodes [0, 0]
    "spans": 0.10,       # gpu_nodes [0, 1]: the replica spans nodes 0 and 1
    "unknown": 0.05,     # no NUMA map
    "partial": 0.05,     # gpu_nodes [0, null]: one GPU's node unknown, placement unknown
    "bw-25": 0.0,        # 2 channels x 3125 MT/s x 8 B = 50.0 GB/s / 2 GPUs = 25.0: not below
    "bw-24": 0.03,       # 2 x 3000 x 8 = 48.0 GB/s / 2 GPUs = 24.0 < 25
    "bw-unknown": 0.02,  # no CPU model: no bandwidth figure; codename Genoa is recent
    "old-cpu": 0.02,     # Cascade Lake; 140.8 GB/s / 2 = 70.4 per GPU
    "no-cpu": 0.03,      # no CPU facts: bandwidth unknown +0.02, generation unknown +0.01
}


@pytest.fixture(scope="module")
def lab() -> dict[str, Any]:
    recs = advisor.recommend("qwen3-32b", 8192, providers=["lab"], gpus=["L40S"], catalog=CAT,
                             concurrency=8)
    return {r.instance: r for r in recs}


def usd_per_million(rec: Any) -> float:
    """$ per million output tokens: price x instances / (tokens/s x replicas x 3600) x 1e6."""
    tps = rec.perf.output_tokens_per_s * rec.plan.replicas
    return float(rec.usd_per_hour * rec.plan.nodes / (tps * 3600) * 1e6)


def test_every_box_gets_its_stated_penalty(lab):
    assert set(lab) == set(PENALTY)
    base = lab["aligned"]
    for name, penalty in PENALTY.items():
        r = lab[name]
        assert (r.plan.tp, r.plan.pp, r.plan.replicas, r.plan.nodes) == (2, 1, 1, 1), name
        assert r.perf == base.perf  # the host side never changes the estimate, only the score
        cost = usd_per_million(r)
        assert r.usd_per_million_output_tokens == round(cost, 4)
        assert r.score == pytest.approx(round(cost * (1 + penalty), 6), abs=1e-6), name
        assert r.score / base.score == pytest.approx(1 + penalty, rel=1e-6), name


def test_ties_are_broken_by_price_then_name(lab):
    recs = advisor.recommend("qwen3-32b", 8192, providers=["lab"], gpus=["L40S"], catalog=CAT,
                             concurrency=8)
    assert [r.instance for r in recs] == ["aligned", "bw-25", "bw-unknown", "old-cpu", "bw-24",
                                          "no-cpu", "partial", "unknown", "spans"]


def test_numa_views_and_the_words_that_go_with_them(lab):
    assert lab["aligned"].numa.model_dump() == {"alignment": "aligned", "gpu_nodes": [0, 0],
                                                "nodes": 1}
    assert lab["partial"].numa.model_dump() == {"alignment": "unknown", "gpu_nodes": [0, None],
                                                "nodes": 2}
    assert lab["unknown"].numa.model_dump() == {"alignment": "unknown", "gpu_nodes": None,
                                                "nodes": None}
    assert "GPUs 0-1 and the replica's cores share NUMA node 0" in lab["aligned"].reasons
    assert lab["spans"].risks == ["replica GPUs 0-1 span NUMA nodes [0, 1]"]
    assert lab["unknown"].risks == ["GPU-to-NUMA placement not published for this VM"]
    assert lab["bw-24"].risks == ["only 24 GB/s of host memory bandwidth per GPU"]
    assert lab["bw-25"].risks == []
    assert lab["bw-unknown"].risks == ["host memory bandwidth per GPU not known for this "
                                       "instance"]
    assert "host CPU is an older generation (Cascade Lake)" in lab["old-cpu"].risks
    assert not any("older generation" in x for x in lab["old-cpu"].reasons)
    assert not any("older generation" in x for x in lab["aligned"].risks)


@pytest.mark.parametrize("codename,penalty", [
    ("Cascade Lake", 0.02), ("Rome", 0.02), ("Skylake", 0.02), ("SKYLAKE", 0.02),
    ("Genoa", 0.0), ("Milan", 0.0), ("Sapphire Rapids", 0.0), (None, 0.01)])
def test_cpu_generation_weight(codename, penalty):
    """Only the codename differs from lab:bw-unknown (bandwidth unknown: +0.02 throughout)."""
    base = CAT.instances["lab:bw-unknown"]
    box = base.model_copy(update={"cpu": InstanceCpu(codename=codename, sockets=1)})
    req = Request(ctx=8192, input_len=1024, output_len=256, concurrency=8)
    (ref,), _ = rank(CAT, QWEN, req, Constraints(), profile(), instances=[base])
    (rec,), _ = rank(CAT, QWEN, req, Constraints(), profile(), instances=[box])
    assert rec.score / ref.score == pytest.approx((1 + 0.02 + penalty) / (1 + 0.02 + 0.0),
                                                  rel=1e-6)


def test_replicas_and_instances_enter_the_price_per_token():
    # eight: 8 x H100 over NUMA nodes [0,0,0,0,1,1,1,1], 2 x Genoa; 64 sequences -> 2 x TP 4
    (r,) = advisor.recommend("llama-3-8b", 8192, providers=["lab"], gpus=["H100-SXM"],
                             catalog=CAT, concurrency=64)
    assert (r.plan.tp, r.plan.replicas, r.perf.concurrency) == (4, 2, 32)
    assert r.numa.alignment == "aligned"
    # 30 $/h / (tokens/s of one replica x 2 replicas x 3600 s) x 1e6, no penalty
    expected = 30.0 / (r.perf.output_tokens_per_s * 2 * 3600) * 1e6
    assert r.score == pytest.approx(round(expected, 6), abs=1e-6)
    assert r.instance_output_tokens_per_s == round(r.perf.output_tokens_per_s * 2, 1)
    # single-ib: 1 x L4 with InfiniBand; qwen3-32b needs 4 of them (TP 1 x PP 4), priced as 4;
    # host bandwidth 50.0 GB/s over the replica's 1 x 4 GPUs = 12.5 per GPU: +0.03
    (m,) = advisor.recommend("qwen3-32b", 8192, providers=["lab"], gpus=["L4"], catalog=CAT,
                             concurrency=8)
    assert (m.instance, m.plan.tp, m.plan.pp, m.plan.nodes, m.plan.replicas) == (
        "single-ib", 1, 4, 4, 1)
    cost = 0.5 * 4 / (m.perf.output_tokens_per_s * 3600) * 1e6
    assert m.usd_per_million_output_tokens == round(cost, 4)
    assert m.score == pytest.approx(round(cost * 1.03, 6), abs=1e-6)
    assert m.risks[0] == "only 12 GB/s of host memory bandwidth per GPU"


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_other_objectives_take_the_same_weights(lab, objective):
    recs = advisor.recommend("qwen3-32b", 8192, providers=["lab"], gpus=["L40S"], catalog=CAT,
                             concurrency=8, objective=objective)
    by = {r.instance: r for r in recs}
    for name in ("aligned", "spans", "unknown", "bw-24"):
        r = by[name]
        figure = (r.perf.tpot_ms if objective == "latency"
                  else 1e6 / (r.perf.output_tokens_per_s * r.plan.replicas))
        assert r.score == pytest.approx(round(figure * (1 + PENALTY[name]), 6), abs=1e-6)


# -- layouts ------------------------------------------------------------------------------------
def tiny(layers: int, heads: int) -> Any:
    return spec_from_config({"model_type": "llama", "num_hidden_layers": layers,
                             "hidden_size": 64 * heads, "num_attention_heads": heads,
                             "num_key_value_heads": heads, "vocab_size": 1000}, "tiny")


def test_tp_sizes_divide_heads_and_gpus_in_powers_of_two():
    assert tp_sizes(QWEN, 8) == [1, 2, 4, 8]
    assert tp_sizes(QWEN, 6) == [1, 2]  # 3 and 6 divide 6 but are no powers of two
    assert tp_sizes(QWEN, 1) == [1]
    assert tp_sizes(tiny(4, 12), 8) == [1, 2, 4]  # 12 heads: not 8
    assert tp_sizes(GEMMA3, 8) == [1, 2, 4]


def shapes(plans: list[Any]) -> list[tuple[int, int, int]]:
    return [(p.tp, p.pp, p.replicas) for p in plans]


def test_layouts_with_and_without_pipeline_stages():
    eight, two = CAT.instances["lab:eight"], CAT.instances["lab:aligned"]
    assert shapes(layouts(QWEN, eight, CAT)) == [(1, 1, 8), (2, 1, 4), (4, 1, 2), (8, 1, 1)]
    assert shapes(layouts(QWEN, eight, CAT, with_pp=True)) == [
        (1, 1, 8), (1, 2, 4), (1, 4, 2), (1, 8, 1), (2, 1, 4), (2, 2, 2), (2, 4, 1),
        (4, 1, 2), (4, 2, 1), (8, 1, 1)]
    assert shapes(layouts(QWEN, two, CAT, with_pp=True)) == [(1, 1, 2), (1, 2, 1), (2, 1, 1)]
    # PP never exceeds the layers: a 4-layer model gets PP 2 and 4, not 8
    assert shapes(layouts(tiny(4, 8), eight, CAT, with_pp=True)) == [
        (1, 1, 8), (1, 2, 4), (1, 4, 2), (2, 1, 4), (2, 2, 2), (2, 4, 1), (4, 1, 2),
        (4, 2, 1), (8, 1, 1)]


def test_six_gpus():
    six = CAT.instances["lab:eight"].model_copy(update={
        "gpu": InstanceGpu(model="H100-SXM", count=6), "numa": Numa(),
        "cpu": InstanceCpu(model="Intel Xeon Platinum 8259CL", sockets=1)})
    # TP 1 and 2 (4 does not divide 6); PP 2 where TP x PP divides 6, never PP 4 (6 % 4)
    assert shapes(layouts(QWEN, six, CAT, with_pp=True)) == [(1, 1, 6), (1, 2, 3), (2, 1, 3)]
    # 140.8 GB/s over 6 replicas = 23.4666...: one decimal kept
    ones = place(six, CAT, 1, 1)
    assert {(r.vcpus, r.host_memory_bandwidth_gb_s) for r in ones.replica_layout} == {(32, 23.5)}
    assert ones.alignment == "unknown"


def test_place_splits_gpus_cores_and_bandwidth_per_replica():
    eight = CAT.instances["lab:eight"]  # 192 vCPUs, 2 sockets x 460.8 GB/s
    four = place(eight, CAT, 4, 1)
    assert [(r.gpus, r.numa_nodes, r.alignment, r.vcpus, r.host_memory_bandwidth_gb_s)
            for r in four.replica_layout] == [
        ([0, 1, 2, 3], [0], "aligned", 96, 460.8), ([4, 5, 6, 7], [1], "aligned", 96, 460.8)]
    assert four.alignment == "aligned"
    whole = place(eight, CAT, 8, 1)
    assert [(r.gpus, r.numa_nodes, r.alignment, r.vcpus, r.host_memory_bandwidth_gb_s)
            for r in whole.replica_layout] == [
        (list(range(8)), [0, 1], "spans-nodes", 192, 921.6)]
    ones = place(eight, CAT, 1, 1)
    assert [(r.gpus, r.vcpus, r.host_memory_bandwidth_gb_s) for r in ones.replica_layout] == [
        ([g], 24, 115.2) for g in range(8)]
    staged = place(eight, CAT, 2, 2)  # TP x PP GPUs per replica
    assert [r.gpus for r in staged.replica_layout] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # one GPU and no socket count: one socket's bandwidth; two GPUs and none: unknown
    single = CAT.instances["lab:single"]
    assert place(single, CAT, 1, 1).replica_layout[0].host_memory_bandwidth_gb_s == 460.8
    two = CAT.instances["lab:aligned"].model_copy(
        update={"cpu": InstanceCpu(model="AMD EPYC 9R14")})
    assert place(two, CAT, 2, 1).replica_layout[0].host_memory_bandwidth_gb_s is None


@pytest.mark.parametrize("gpu_nodes,tp,replicas,plan", [
    # known GPUs on two nodes: the replica spans, whatever the unknown one is
    ([0, None, 1, 1, 1, 1, 1, 1], 4, [([0, 1], "spans-nodes"), ([1], "aligned")],
     "spans-nodes"),
    ([0, None, 1, 1, 1, 1, 1, 1], 8, [([0, 1], "spans-nodes")], "spans-nodes"),
    # the known GPUs share a node, another is unknown: unknown
    ([0, 0, None, 0, 1, 1, 1, 1], 4, [(None, "unknown"), ([1], "aligned")], "unknown"),
    ([0, 0, 0, 0, 1, 1, None, None], 2,
     [([0], "aligned"), ([0], "aligned"), ([1], "aligned"), (None, "unknown")], "unknown"),
    # spanning beats unknown for the plan
    ([0, 1, None, None, 1, 1, 1, 1], 2,
     [([0, 1], "spans-nodes"), (None, "unknown"), ([1], "aligned"), ([1], "aligned")],
     "spans-nodes"),
    # nothing known at all
    ([None] * 8, 4, [(None, "unknown"), (None, "unknown")], "unknown"),
    # one GPU per replica: each on its own known node
    ([0, 0, 0, 0, 1, 1, 1, 1], 1, [([0], "aligned")] * 4 + [([1], "aligned")] * 4, "aligned"),
])
def test_partial_numa_maps(gpu_nodes, tp, replicas, plan):
    box = CAT.instances["lab:eight"].model_copy(
        update={"numa": Numa(nodes=2, gpu_nodes=gpu_nodes)})
    p = place(box, CAT, tp, 1)
    assert [(r.numa_nodes, r.alignment) for r in p.replica_layout] == replicas
    assert p.alignment == plan


def test_a_replica_over_several_instances_keeps_each_instance_whole():
    eight = CAT.instances["lab:eight"]
    p = place_multi(eight, CAT, 8, 2)
    assert (p.tp, p.pp, p.replicas, p.nodes) == (8, 2, 1, 2)
    (head,) = p.replica_layout
    assert (head.gpus, head.vcpus, head.host_memory_bandwidth_gb_s, head.alignment) == (
        list(range(8)), 192, 921.6, "spans-nodes")


@pytest.mark.parametrize("objective", ["cost", "latency", "throughput"])
def test_a_throughput_of_zero_ranks_last_without_dividing_by_zero(lab, objective):
    """The guards of the score: no tokens/s is an infinite price, and for the throughput
    objective 1e6 / 1e-9 (the floor) = 1e15; any positive rate is priced as it is."""
    from advisor.core.ranking import _Ranker

    rec = lab["spans"]  # penalty 0.10
    inst = CAT.instances["lab:spans"]
    ranker = _Ranker(CAT, QWEN, Request(ctx=8192, input_len=1024, output_len=256,
                                        objective=objective), Constraints(), profile())
    slow = rec.perf.model_copy(update={"output_tokens_per_s": 0.5})
    score, usd_m, _, _ = ranker.score(inst, 2.0, rec.plan, slow)
    assert usd_m == 2.0 / (0.5 * 3600) * 1e6
    figure = {"cost": usd_m, "latency": rec.perf.tpot_ms, "throughput": 1e6 / 0.5}[objective]
    assert score == pytest.approx(figure * 1.10, rel=1e-12)
    stopped = rec.perf.model_copy(update={"output_tokens_per_s": 0.0})
    score, usd_m, _, _ = ranker.score(inst, 2.0, rec.plan, stopped)
    assert usd_m == float("inf")
    figure = {"cost": float("inf"), "latency": rec.perf.tpot_ms, "throughput": 1e15}[objective]
    assert score == pytest.approx(figure * 1.10, rel=1e-12)
