"""Layouts and NUMA placement on instances whose topology the catalog documents (or not)."""

from __future__ import annotations

import json

import advisor
from advisor.core.layouts import layouts, place, tp_sizes
from tests.conftest import PRIVATE_BOX

CAT = advisor.load_catalog()


def test_tp_sizes_divide_gpus_and_heads():
    spec = advisor.spec_from_config(CAT.model_configs["qwen2.5-7b"], "q")  # 28 heads
    assert tp_sizes(spec, 8) == [1, 2, 4]
    llama = advisor.spec_from_config(CAT.model_configs["llama-3-8b"], "l")
    assert [p.tp for p in layouts(llama, CAT.instance("aws:p5.48xlarge"), CAT)] == [1, 2, 4, 8]


def test_documented_azure_h100_topology():
    nd = CAT.instance("azure:Standard_ND96isr_H100_v5")  # GPUs 0-3 on node 0, 4-7 on node 1
    p4 = place(nd, CAT, 4, 1)
    assert p4.replicas == 2 and p4.alignment == "aligned"
    assert [r.numa_nodes for r in p4.replica_layout] == [[0], [1]]
    assert all(r.vcpus == 48 for r in p4.replica_layout)
    assert place(nd, CAT, 8, 1).alignment == "spans-nodes"


def test_a100_v4_one_gpu_per_node():
    nc = CAT.instance("azure:Standard_NC96ads_A100_v4")
    assert place(nc, CAT, 1, 1).alignment == "aligned"
    assert place(nc, CAT, 2, 1).replica_layout[0].numa_nodes == [0, 1]


def test_unknown_placement_is_unknown_not_guessed():
    inst = CAT.instance("gcp:a4-highgpu-8g")
    # no public source states its map (issue 17 searched; SpareCores has no printout of it,
    # issue 31 — a3-highgpu-8g, the type this test used, now has a measured one)
    assert inst.numa.gpu_nodes is None
    p = place(inst, CAT, 2, 1)
    assert p.alignment == "unknown" and p.replica_layout[0].numa_nodes is None


def test_host_bandwidth_share_when_cpu_and_sockets_are_known(make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX})
    cat = advisor.load_catalog([d])
    box = cat.instance("onprem:lab-box-1")  # 1 socket of EPYC 9R14: 460.8 GB/s
    p = place(box, cat, 1, 1)
    assert p.replicas == 2 and p.alignment == "aligned"
    assert [r.host_memory_bandwidth_gb_s for r in p.replica_layout] == [230.4, 230.4]


def test_plan_sizes_the_kv_cache_and_offload_provision_would_deploy(cli):
    """plan takes --kv-cache-dtype and --cpu-offload-gb as recommend and provision do, so the
    fleet it prices is the one provision launches: an fp8 KV cache leaves out the GPUs vLLM
    0.11.0 cannot store one on (A10G), and a bad value is one line, exit 2."""
    import advisor

    plain = advisor.fleet("llama-3-8b", 8192, rps=2)
    fp8 = advisor.fleet("llama-3-8b", 8192, rps=2, kv_cache_dtype="fp8")
    assert any(o.gpu == "A10G" for o in plain) and not any(o.gpu == "A10G" for o in fp8)
    # 2 GiB of weights per GPU streamed over PCIe every step: most fleets miss the 50 ms TPOT
    # target, the ones left still meet it
    off = advisor.fleet("llama-3-8b", 8192, rps=2, cpu_offload_gb=2)
    assert 0 < len(off) < len(plain) and all(o.tpot_ms <= 50 for o in off)
    r = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "2",
            "--kv-cache-dtype", "bogus")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    r = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "2", "--json",
            "--kv-cache-dtype", "fp8")
    assert r.exit_code == 0 and all(o["gpu"] != "A10G" for o in json.loads(r.stdout))
