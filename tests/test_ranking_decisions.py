"""Pinned decisions of the ranking and the layouts, on the small frozen test catalog.

The score is the question's figure times ``1 + the host NUMA weight`` (core/ranking.py,
core/host.py): in the gpu-bound regime (weights and KV cache in HBM, TP inside the instance)
aligned 0, unknown 0, spanning nodes +0.02; in the host-heavy regime (--cpu-offload-gb, a replica
over several instances, several NUMA domains per socket) aligned 0, unknown +0.5, spanning +0.5.
Host memory bandwidth and CPU generation carry no weight. vLLM's CPU floor (2 + N physical
cores for N GPUs) is a gate. The figures below are written out from those rules and each box's
catalog entry; the score is recomputed from the recommendation's own price and throughput.
"""

from __future__ import annotations

from typing import Any

import pytest

import advisor
from advisor.catalog.schema import Host, InstanceCpu, InstanceGpu, Numa
from advisor.core.engine import profile
from advisor.core.host import NUMA_WEIGHT
from advisor.core.layouts import layouts, place, place_multi, tp_sizes
from advisor.core.model import spec_from_config
from advisor.core.ranking import Constraints, Request, rank
from tests.small_catalog import small_catalog

CAT = small_catalog()
QWEN = spec_from_config(CAT.model_configs["qwen3-32b"], "qwen3-32b")  # 64 heads, 64 layers
GEMMA3 = spec_from_config(CAT.model_configs["fixture-gemma3-1b"], "g3")  # 4 heads, 26 layers

#: box -> weight in the gpu-bound regime, from tests/fixtures/catalog-small/instances/lab.yaml.
#: Every box holds 2 x L40S; qwen3-32b (65 GB of bf16 weights) needs both: one replica of TP 2.
GPU_BOUND = {
    "aligned": 0.0,      # gpu_nodes [0, 0]
    "spans": 0.02,       # gpu_nodes [0, 1]: the replica spans nodes 0 and 1 (measured 0-2%)
    "unknown": 0.0,      # no NUMA map: nothing measured to lose with the host off the hot path
    "partial": 0.0,      # gpu_nodes [0, null]: placement unknown
    "bw-25": 0.0,        # host bandwidth: no weight, whatever it is
    "bw-24": 0.0,
    "bw-unknown": 0.0,
    "old-cpu": 0.0,      # Cascade Lake: a risk, no weight
    "no-cpu": 0.0,
}
#: the same boxes with --cpu-offload-gb (host-heavy): anything not known aligned is +0.5
HOST_HEAVY = {k: (0.0 if k in ("aligned", "bw-25", "bw-24", "bw-unknown", "old-cpu", "no-cpu")
                  else 0.5) for k in GPU_BOUND}


def test_the_weights_are_the_stated_ones():
    assert NUMA_WEIGHT == {"gpu-bound": {"aligned": 0.0, "unknown": 0.0, "spans-nodes": 0.02},
                           "host-heavy": {"aligned": 0.0, "unknown": 0.5, "spans-nodes": 0.5}}


def lab_recs(**kw: Any) -> dict[str, Any]:
    recs = advisor.recommend("qwen3-32b", 8192, providers=["lab"], gpus=["L40S"], catalog=CAT,
                             batch=True, **kw)
    return {r.instance: r for r in recs}


@pytest.fixture(scope="module")
def lab() -> dict[str, Any]:
    return lab_recs()


def usd_per_million(rec: Any) -> float:
    """$ per million output tokens: price x instances / (tokens/s x replicas x 3600) x 1e6."""
    tps = rec.perf.output_tokens_per_s * rec.plan.replicas
    return float(rec.usd_per_hour * rec.plan.nodes / (tps * 3600) * 1e6)


def test_every_box_gets_its_stated_weight_in_the_gpu_bound_regime(lab):
    assert set(lab) == set(GPU_BOUND)
    base = lab["aligned"]
    for name, weight in GPU_BOUND.items():
        r = lab[name]
        assert (r.plan.tp, r.plan.pp, r.plan.replicas, r.plan.nodes) == (2, 1, 1, 1), name
        assert r.perf == base.perf  # the host side never changes the estimate, only the score
        assert r.host.regime == "gpu-bound" and r.host.numa_weight == weight, name
        cost = usd_per_million(r)
        assert r.usd_per_million_output_tokens == round(cost, 4)
        assert r.score == pytest.approx(round(cost * (1 + weight), 6), abs=1e-6), name


def test_a_host_heavy_plan_ranks_an_aligned_map_above_an_unknown_one_by_the_weight():
    heavy = lab_recs(cpu_offload_gb=4)
    for name, weight in HOST_HEAVY.items():
        r = heavy[name]
        assert r.fit.cpu_offload_gib == 4 and r.host.regime == "host-heavy", name
        assert r.host.numa_weight == weight, name
        assert r.score == pytest.approx(round(usd_per_million(r) * (1 + weight), 6), abs=1e-6)
    assert heavy["unknown"].score / heavy["aligned"].score == pytest.approx(1.5, rel=1e-6)
    order = list(heavy)
    assert order.index("aligned") < order.index("unknown")
    assert any("+50% weight, host-heavy regime: --cpu-offload-gb 4" in x
               for x in heavy["unknown"].risks)


def nvlink(numa: Numa, offload: float) -> Any:
    """lab:eight (8 x H100-SXM over NVLink, 2 x Genoa), with the given NUMA map, ranked alone
    for llama-3-8b in batch (saturated $/1M) so only the weight can differ."""
    box = CAT.instances["lab:eight"].model_copy(update={"numa": numa})
    spec = spec_from_config(CAT.model_configs["llama-3-8b"], "llama-3-8b")
    req = Request(ctx=8192, input_len=1024, output_len=256, batch=True, cpu_offload_gib=offload)
    (rec,), _ = rank(CAT, spec, req, Constraints(), profile(), instances=[box])
    return rec


def test_an_in_node_nvlink_plan_is_not_weighted_for_an_unknown_map_but_offload_is():
    known = Numa(nodes=2, gpu_nodes=[0, 0, 0, 0, 1, 1, 1, 1])
    aligned, unknown = nvlink(known, 0), nvlink(Numa(), 0)
    assert (aligned.host.regime, unknown.host.regime) == ("gpu-bound", "gpu-bound")
    assert aligned.numa.alignment == "aligned" and unknown.numa.alignment == "unknown"
    assert unknown.score == aligned.score  # no weight: the order falls to price and name
    aligned, unknown = nvlink(known, 2), nvlink(Numa(), 2)
    assert (aligned.host.regime, unknown.host.regime) == ("host-heavy", "host-heavy")
    assert unknown.score / aligned.score == pytest.approx(1.5, rel=1e-6)


def test_several_numa_domains_per_socket_and_multi_node_are_host_heavy():
    from advisor.core.host import regime

    box = CAT.instances["lab:aligned"]
    assert regime(box, 1, 0)[0] == "gpu-bound"
    assert regime(box, 2, 0)[0] == "host-heavy"
    assert regime(box, 1, 0.5)[0] == "host-heavy"
    nps4 = box.model_copy(update={"host": Host(numa_domains_per_socket=4)})
    assert regime(nps4, 1, 0) == ("host-heavy", "4 NUMA domains per socket")
    nps1 = box.model_copy(update={"host": Host(numa_domains_per_socket=1)})
    assert regime(nps1, 1, 0)[0] == "gpu-bound"


def test_the_host_is_shown_but_not_weighted(lab):
    assert lab["bw-24"].host.memory_bandwidth_gb_s_per_gpu == 24.0
    assert "24 GB/s of host memory bandwidth per GPU" in lab["bw-24"].reasons
    assert "host CPU is an older generation (Cascade Lake)" in lab["old-cpu"].risks
    assert not any("older generation" in x for x in lab["old-cpu"].reasons)
    assert not any("older generation" in x for x in lab["aligned"].risks)
    assert lab["old-cpu"].score == lab["aligned"].score


def test_ties_are_broken_by_price_per_token_then_price_then_name(lab):
    # all gpu-bound boxes but "spans" score the same: same price and throughput; then name
    assert list(lab) == ["aligned", "bw-24", "bw-25", "bw-unknown", "no-cpu", "old-cpu",
                         "partial", "unknown", "spans"]


def test_numa_views_and_the_words_that_go_with_them(lab):
    assert lab["aligned"].numa.model_dump() == {"alignment": "aligned", "gpu_nodes": [0, 0],
                                                "nodes": 1}
    assert lab["partial"].numa.model_dump() == {"alignment": "unknown", "gpu_nodes": [0, None],
                                                "nodes": 2}
    assert lab["unknown"].numa.model_dump() == {"alignment": "unknown", "gpu_nodes": None,
                                                "nodes": None}
    assert "GPUs 0-1 and the replica's cores share NUMA node 0 (gpu-bound)" in \
        lab["aligned"].reasons
    assert lab["spans"].risks[0].startswith("replica GPUs 0-1 span NUMA nodes [0, 1]: +2% "
                                            "weight, gpu-bound regime")
    assert lab["unknown"].risks[0].startswith("GPU-to-NUMA placement not published for this "
                                              "VM: no weight in the gpu-bound regime")


# -- the CPU floor --------------------------------------------------------------------------
@pytest.mark.parametrize("vcpus,smt,gpus,kept", [
    (8, None, 2, True),    # 4 cores = 2 + 2
    (6, None, 2, False),   # 3 cores < 4
    (4, None, 1, False),   # g5.xlarge / g6e.xlarge: 2 cores < 3
    (6, None, 1, True),    # 3 cores = 2 + 1
    (4, False, 2, True),   # SMT off: 4 vCPUs are 4 cores
    (3, False, 2, False),
    (20, None, 8, True),   # 10 = 2 + 8
    (18, None, 8, False),
])
def test_the_cpu_floor_is_two_plus_n_physical_cores(vcpus, smt, gpus, kept):
    base = CAT.instances["lab:eight"]
    box = base.model_copy(update={"vcpus": vcpus, "host": Host(smt_siblings_exposed=smt),
                                  "gpu": InstanceGpu(model="H100-SXM", count=gpus)})
    spec = spec_from_config(CAT.model_configs["llama-3-8b"], "llama-3-8b")
    req = Request(ctx=8192, input_len=1024, output_len=256, batch=True)
    recs, rej = rank(CAT, spec, req, Constraints(), profile(), instances=[box])
    assert bool(recs) == kept
    if not kept:
        assert rej[0].by == "host floor" and "--allow-small-host" in rej[0].reason
        (rec,), _ = rank(CAT, spec, req, Constraints(allow_small_host=True), profile(),
                         instances=[box])
        assert not rec.host.meets_cpu_floor
        assert any("below vLLM's floor of 2 + N" in x for x in rec.risks)
    else:
        assert recs[0].host.meets_cpu_floor


def test_replicas_and_instances_enter_the_price_per_token():
    # eight: 8 x H100 over NUMA nodes [0,0,0,0,1,1,1,1], 2 x Genoa; saturated
    (r,) = advisor.recommend("llama-3-8b", 8192, providers=["lab"], gpus=["H100-SXM"],
                             catalog=CAT, batch=True)
    assert r.numa.alignment == "aligned"
    # 30 $/h / (tokens/s of one replica x replicas x 3600 s) x 1e6, no weight
    expected = 30.0 / (r.perf.output_tokens_per_s * r.plan.replicas * 3600) * 1e6
    assert r.score == pytest.approx(round(expected, 6), abs=1e-6)
    assert r.instance_output_tokens_per_s == round(r.perf.output_tokens_per_s * r.plan.replicas,
                                                   1)
    # single-ib: 1 x L4 with InfiniBand; qwen3-32b needs 4 of them (TP 1 x PP 4), priced as 4,
    # a replica over instances: host-heavy, and its NUMA map is known aligned: no weight
    (m,) = advisor.recommend("qwen3-32b", 8192, providers=["lab"], gpus=["L4"], catalog=CAT,
                             batch=True)
    assert (m.instance, m.plan.tp, m.plan.pp, m.plan.nodes, m.plan.replicas) == (
        "single-ib", 1, 4, 4, 1)
    cost = 0.5 * 4 / (m.perf.output_tokens_per_s * 3600) * 1e6
    assert m.usd_per_million_output_tokens == round(cost, 4)
    assert m.host.regime == "host-heavy"
    assert m.score == pytest.approx(round(cost * (1 + m.host.numa_weight), 6), abs=1e-6)
    assert "only 12 GB/s" not in " ".join(m.risks)
    assert any("12 GB/s of host memory bandwidth per GPU" in x for x in m.risks)


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_other_objectives_take_the_same_weights(objective):
    by = lab_recs(objective=objective)
    for name in ("aligned", "spans", "unknown", "bw-24"):
        r = by[name]
        figure = (r.perf.tpot_ms if objective == "latency"
                  else 1e6 / (r.perf.output_tokens_per_s * r.plan.replicas))
        assert r.score == pytest.approx(round(figure * (1 + GPU_BOUND[name]), 6), abs=1e-6)


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
    """The guards of the figure: no tokens/s is an infinite price, and for the throughput
    objective 1e6 / 1e-9 (the floor) = 1e15; any positive rate is priced as it is."""
    from advisor.core.ranking import _Ranker

    rec = lab["spans"]
    inst = CAT.instances["lab:spans"]
    ranker = _Ranker(CAT, QWEN, Request(ctx=8192, input_len=1024, output_len=256, batch=True,
                                        objective=objective), Constraints(), profile())
    slow = rec.perf.model_copy(update={"output_tokens_per_s": 0.5})
    fig, usd_m, fleet = ranker.figure(inst, 2.0, rec.plan, slow)
    assert usd_m == 2.0 / (0.5 * 3600) * 1e6 and fleet is None
    assert fig == {"cost": usd_m, "latency": rec.perf.tpot_ms, "throughput": 1e6 / 0.5}[objective]
    stopped = rec.perf.model_copy(update={"output_tokens_per_s": 0.0})
    fig, usd_m, _ = ranker.figure(inst, 2.0, rec.plan, stopped)
    assert usd_m == float("inf")
    assert fig == {"cost": float("inf"), "latency": rec.perf.tpot_ms,
                   "throughput": 1e15}[objective]


# -- pinned pieces the mutation tester found unguarded ----------------------------------------
def _ranker(**req: Any) -> Any:
    from advisor.core.ranking import _Ranker

    return _Ranker(CAT, QWEN, Request(ctx=8192, input_len=1024, output_len=256, **req),
                   Constraints(), profile())


@pytest.mark.parametrize("kv_tokens,max_seqs,expect", [
    (1280 * 5, 256, [1, 2, 4, 5]),      # 1024 + 256 tokens a sequence: 5 fit
    (1280 * 4, 256, [1, 2, 4]),         # a power of two is listed once
    (1280 * 40, 3, [1, 2, 3]),          # vLLM's max_num_seqs caps it
    (100, 256, [1]),                    # not even one: one is still tried (it will queue)
    (1279, 256, [1]),
])
def test_concurrency_options_are_powers_of_two_up_to_what_fits(lab, kv_tokens, max_seqs,
                                                                expect):
    f = lab["aligned"].fit.model_copy(update={"kv_cache_tokens": kv_tokens,
                                             "max_num_seqs": max_seqs})
    assert _ranker(batch=True).concurrency_options(f) == expect


def test_price_per_token_for_users_in_flight_and_at_a_trickle(lab):
    rec, inst = lab["aligned"], CAT.instances["lab:aligned"]
    c = rec.perf.concurrency
    fig, usd_m, fleet = _ranker(concurrency=3 * c).figure(inst, 2.0, rec.plan, rec.perf)
    assert (fleet.replicas, fleet.instances) == (3, 3) and fig == fleet.usd_per_month
    # three replicas' bill over the tokens 3c users ask for: each at the replica's rate per user
    asked = rec.perf.output_tokens_per_s * 3 * c / c
    assert usd_m == pytest.approx(3 * 2.0 / (asked * 3600) * 1e6, rel=1e-12)
    # a trickle of requests (0.001 req/s x 256 tokens < 1 token/s) is still priced, not inf
    _, usd_m, fleet = _ranker(rps=0.001).figure(inst, 2.0, rec.plan, rec.perf)
    assert usd_m == pytest.approx(2.0 / (0.001 * 256 * 3600) * 1e6, rel=1e-12)
    stopped = rec.perf.model_copy(update={"output_tokens_per_s": 0.0})
    _, usd_m, _ = _ranker(concurrency=4).figure(inst, 2.0, rec.plan, stopped)
    assert usd_m == float("inf")


@pytest.mark.parametrize("codename", ["Cascade Lake", "Rome", "Skylake", "SKYLAKE"])
def test_every_older_generation_is_a_risk(codename):
    box = CAT.instances["lab:bw-unknown"].model_copy(
        update={"cpu": InstanceCpu(codename=codename, sockets=1)})
    req = Request(ctx=8192, input_len=1024, output_len=256, batch=True)
    (rec,), _ = rank(CAT, QWEN, req, Constraints(), profile(), instances=[box])
    assert f"host CPU is an older generation ({codename})" in rec.risks


def test_physical_cores_numa_domains_and_bandwidth_rounding():
    from advisor.core.host import physical_cores, regime, view

    box = CAT.instances["lab:aligned"]
    assert [physical_cores(box.model_copy(update={"vcpus": v})) for v in (1, 2, 3, 8)] == [
        1, 1, 1, 4]
    assert regime(box.model_copy(update={"host": Host(numa_domains_per_socket=2)}), 1,
                  0)[0] == "host-heavy"
    assert view(box, 1, 0, "aligned", 140.8 / 6).memory_bandwidth_gb_s_per_gpu == 23.5
    assert view(box, 1, 0, "aligned", None).memory_bandwidth_gb_s_per_gpu is None


def test_the_numa_weight_also_chooses_the_layout_inside_an_instance(monkeypatch):
    """p4d.24xlarge: 8 x A100 over two NUMA nodes (GPUs 0-3 on node 0, 4-7 on node 1). Serving
    a 72B model with 8 GB of weights offloaded to host memory is host-heavy, so TP 8 (spans
    both nodes) carries the 0.5 weight and two NUMA-local TP 4 replicas do not. The same
    question with every weight set to 0 picks TP 8: the weight, not the raw figure, decides."""
    q: dict[str, Any] = dict(cpu_offload_gb=8.0, batch=True, instances=["aws:p4d.24xlarge"])
    rec = advisor.recommend("qwen2.5-72b", 8192, **q)[0]
    assert rec.host.regime == "host-heavy"
    assert (rec.plan.tp, rec.plan.replicas, rec.plan.alignment) == (4, 2, "aligned")
    assert NUMA_WEIGHT["host-heavy"]["spans-nodes"] > 0
    monkeypatch.setattr("advisor.core.host.NUMA_WEIGHT",
                        {k: dict.fromkeys(v, 0.0) for k, v in NUMA_WEIGHT.items()})
    unweighted = advisor.recommend("qwen2.5-72b", 8192, **q)[0]
    assert (unweighted.plan.tp, unweighted.plan.alignment) == (8, "spans-nodes")
