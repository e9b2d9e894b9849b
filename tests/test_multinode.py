"""Beyond one machine: layouts over several instances (TP inside, PP across, priced as N
instances, only over a recorded fabric), the pipeline in the perf model, and fleet sizing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import advisor
from advisor.api import fleet
from advisor.core.host import NUMA_WEIGHT, numa_weight
from advisor.core.perf import ALLREDUCE_LATENCY_S, PP_HOP_S, Workload, estimate
from advisor.core.sizing import FitRequest, fit

CAT = advisor.load_catalog()


@pytest.fixture(scope="module")
def big():
    return advisor.recommend("llama-3.1-405b", 8192, providers=["aws", "gcp", "azure"],
                             with_rejected=True)


def test_405b_spans_two_p5_over_efa(big):
    recs, _ = big
    p5 = next(r for r in recs if r.instance == "p5.48xlarge")
    assert (p5.plan.nodes, p5.plan.tp, p5.plan.pp, p5.plan.replicas) == (2, 8, 2, 1)
    # priced as two instances
    assert p5.usd_per_million_output_tokens == pytest.approx(
        p5.usd_per_hour * 2 / (p5.instance_output_tokens_per_s * 3600) * 1e6, rel=1e-3)
    assert any("over efa (3200 Gbit/s)" in r for r in p5.reasons)
    assert p5.fit.fits and p5.fit.pp == 2
    assert CAT.instance("aws:p5.48xlarge").fabric.kind == "efa"


def test_single_instance_layouts_win_when_they_fit(big):
    recs, _ = big
    h200 = next(r for r in recs if r.instance == "p5en.48xlarge")  # 8 x 141 GB holds 405B
    assert h200.plan.nodes == 1


def test_no_fabric_no_multi_node(big):
    _, rejected = big
    a2 = next(r for r in rejected if r.instance == "a2-ultragpu-4g")
    assert a2.by == "does not fit"
    assert "would hold it, but the catalog records no inter-node fabric" in a2.reason
    _, small = advisor.recommend("qwen3-32b", 8192, providers=["aws"], with_rejected=True)
    g6 = next(r for r in small if r.instance == "g6.2xlarge")
    assert "records only ethernet" in g6.reason  # the EC2 API says: no EFA on this size


def test_a_replica_over_several_instances_weighs_at_least_a_span_over_numa_nodes():
    span = NUMA_WEIGHT["gpu-bound"]["spans-nodes"]
    assert span > 0
    for alignment in ("aligned", "unknown", "spans-nodes"):
        assert numa_weight("gpu-bound", alignment, 1) == NUMA_WEIGHT["gpu-bound"][alignment]
        assert numa_weight("host-heavy", alignment, 1) == NUMA_WEIGHT["host-heavy"][alignment]
        assert numa_weight("host-heavy", alignment, 2) == max(
            NUMA_WEIGHT["host-heavy"][alignment], span)
    assert numa_weight("host-heavy", "aligned", 4) == span  # aligned slices: the floor
    assert numa_weight("host-heavy", "unknown", 2) == 0.5   # an unknown map: its own weight


def test_one_instance_ranks_before_a_replica_over_several_at_the_same_price():
    """Kimi-K2.5 (INT4 experts, ~600 GB) on AWS's RTX PRO 6000 instances: one g7e.48xlarge
    (8 GPUs, TP 8 over two NUMA nodes), two g7e.24xlarge (TP 4 x PP 2 over EFA) or four
    g7e.12xlarge cost the same per hour. Two 4-GPU instances on a Ray cluster once ranked
    first, by the single instance's 2% NUMA-span weight alone; an SRE launches the one box."""
    kimi = (Path(__file__).resolve().parents[1] / "benchmarks" / "perf" / "configs"
            / "moonshotai--Kimi-K2.5.json")
    recs = advisor.recommend(str(kimi), 32768, providers=["aws"], gpus=["RTX-PRO-6000"])
    by = {r.instance: r for r in recs}
    one, two, four = by["g7e.48xlarge"], by["g7e.24xlarge"], by["g7e.12xlarge"]
    assert (one.plan.nodes, two.plan.nodes, four.plan.nodes) == (1, 2, 4)
    assert one.usd_per_hour == pytest.approx(2 * two.usd_per_hour) \
        == pytest.approx(4 * four.usd_per_hour)
    assert (one.numa.alignment, two.numa.alignment) == ("spans-nodes", "aligned")
    assert one.host.numa_weight == two.host.numa_weight == four.host.numa_weight == \
        NUMA_WEIGHT["gpu-bound"]["spans-nodes"]
    assert one.score == two.score == four.score  # a tie: fewer instances per replica first
    assert [r.instance for r in recs[:3]] == ["g7e.48xlarge", "g7e.24xlarge", "g7e.12xlarge"]
    assert any("+2% weight: its GPUs span the NUMA nodes of several hosts" in r
               for r in two.risks)


def test_plan_puts_one_instance_first_at_the_same_bill():
    kimi = (Path(__file__).resolve().parents[1] / "benchmarks" / "perf" / "configs"
            / "moonshotai--Kimi-K2.5.json")
    options = fleet(str(kimi), 32768, rps=1, providers=["aws"], gpus=["RTX-PRO-6000"])
    one, two = options[0], options[1]
    # the same bill and, to the whole percent the table shows, the same headroom (+34%)
    assert one.usd_per_month == two.usd_per_month
    assert round(one.headroom, 2) == round(two.headroom, 2) and one.headroom < two.headroom
    assert (one.instance, one.nodes_per_replica) == ("g7e.48xlarge", 1)
    assert (two.instance, two.nodes_per_replica) == ("g7e.24xlarge", 2)


def test_max_nodes_one_keeps_it_on_one_machine():
    recs = advisor.recommend("llama-3.1-405b", 8192, providers=["aws"], max_nodes=1)
    assert all(r.plan.nodes == 1 for r in recs)
    assert "p5.48xlarge" not in {r.instance for r in recs}


def test_pipeline_across_instances_costs_the_hops():
    spec = advisor.model_spec("llama-3.1-405b")
    g = CAT.gpus["H100-SXM"]
    f = fit(spec, FitRequest(gpu_memory_gib=79.25, gpu_name=g.name, tp=8, pp=2,
                             max_model_len=8192), advisor.engine_profile())
    w = Workload(input_len=1024, output_len=256, concurrency=1)
    inside = estimate(spec, g, f, w)
    across = estimate(spec, g, f, w, across_nodes=True, fabric_gbps=3200)
    assert across.tpot_ms > inside.tpot_ms
    # two stage boundaries, each PP_HOP_S over the fabric instead of an NVLink hop
    extra = 2 * (PP_HOP_S - ALLREDUCE_LATENCY_S["nvlink"]) * 1000
    assert across.tpot_ms - inside.tpot_ms == pytest.approx(extra, rel=0.05)
    slow = estimate(spec, g, f, w, across_nodes=True, fabric_gbps=100)
    assert slow.tpot_ms > across.tpot_ms  # a slower fabric, a slower token
    assert any("pipeline of 2 stages across instances" in n for n in across.notes)


def test_fleet_counts_instances_per_replica():
    options = fleet("llama-3.1-405b", 8192, rps=2, providers=["aws"], max_tpot_ms=100)
    p5 = next(o for o in options if o.instance == "p5.48xlarge")
    assert p5.nodes_per_replica == 2
    assert p5.instances == 2 * math.ceil(2 / p5.rps_per_replica)
    assert p5.usd_per_month == pytest.approx(p5.instances * p5.usd_per_hour * 730, rel=1e-6)
    assert [o.usd_per_month for o in options] == sorted(o.usd_per_month for o in options)


def test_fleet_single_node_packs_replicas():
    options = fleet("llama-3-8b", 8192, rps=37, providers=["aws", "gcp"])
    for o in options:
        assert o.capacity_rps >= 37 and o.headroom >= 0
        need = math.ceil(37 / o.rps_per_replica)
        if o.nodes_per_replica > 1:  # small GPUs paired over EFA (g4dn.8xlarge and up)
            assert o.instances == need * o.nodes_per_replica
            continue
        assert o.instances == math.ceil(need / o.replicas_per_instance)
        # one instance fewer would not carry the load
        assert (o.instances - 1) * o.replicas_per_instance * o.rps_per_replica < 37
    assert sum(o.nodes_per_replica == 1 for o in options) > 10


def test_fleet_respects_latency_limits():
    for o in fleet("llama-3-8b", 8192, rps=10, max_tpot_ms=25):
        assert o.tpot_ms <= 25


def test_cli_plan_json_and_bad_input(cli):
    r = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "20", "--json",
            "--top", "3")
    assert r.exit_code == 0, r.stderr
    body = json.loads(r.stdout)
    assert len(body) == 3 and {"instances", "usd_per_month", "headroom"} <= set(body[0])
    too_many = cli("plan", "--model", "llama-3.3-70b", "--ctx", "8192", "--rps", "100000",
                   "--max-instances", "2")
    assert too_many.exit_code == 2
    line = too_many.stderr.strip()
    assert "no fleet of at most 2 instances carries 100000 req/s: closest" in line
    assert "needs" in line and len(line.splitlines()) == 1
    for args, needle in ((["--rps", "0"], "--rps"), (["--rps", "-3"], "--rps"),
                         (["--rps", "1", "--max-instances", "0"], "max-instances")):
        r = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", *args)
        assert r.exit_code == 2 and needle in r.stderr, r.stderr
    huge = cli("recommend", "--model", "llama-3.1-405b", "--ctx", "131072", "--max-nodes", "1",
               "--gpu", "L4")
    assert huge.exit_code == 2 and "closest" in huge.stderr


# -- rendering a multi-node replica ---------------------------------------------------------
def _multi_files(ray_head=None):
    from advisor.core.layouts import place_multi
    from advisor.render.cloudinit import RenderRequest, render

    p5 = CAT.instance("aws:p5.48xlarge")
    plan = place_multi(p5, CAT, 8, 2)
    req = RenderRequest(model="meta-llama/Llama-3.1-405B-Instruct", max_model_len=8192,
                        vllm_version="0.11.0", api_key_ref="aws-ssm:/advisor/vllm-api-key",
                        ray_head=ray_head)
    return render(p5, plan, req)


def _env(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_render_head_and_worker():
    import yaml

    files = _multi_files("10.0.0.5")
    head, worker = _env(files["env/vllm-0.env"]), _env(files["worker/env/vllm-0.env"])
    assert (head["ADVISOR_ROLE"], head["ADVISOR_PP"], head["ADVISOR_NODES"]) == ("head", "2", "2")
    assert worker["ADVISOR_ROLE"] == "worker" and worker["ADVISOR_RAY_HEAD"] == "10.0.0.5"
    assert "ADVISOR_RAY_HEAD" not in head
    for name in ("user-data", "worker/user-data"):
        doc = yaml.safe_load(files[name])
        assert doc["runcmd"] == [["/opt/advisor/bin/advisor-install.sh", "3.10",
                                  "vllm@0.service"]]
        lock = next(f["content"] for f in doc["write_files"]
                    if f["path"] == "/opt/advisor/requirements.lock")
        assert "\nvllm==0.11.0 " in lock and "\nray==" in lock  # the Ray lock
    assert "ADVISOR_ROLE=worker" in files["worker/user-data"]
    assert "ADVISOR_ROLE=head" in files["user-data"]


def test_multi_node_user_data_passes_cloud_inits_schema(tmp_path):
    import shutil
    import subprocess

    exe = shutil.which("cloud-init")
    if exe is None:
        pytest.skip("cloud-init is not installed here (.ci/run installs it)")
    files = _multi_files()
    for name in ("user-data", "worker/user-data"):
        f = tmp_path / name.replace("/", "-")
        f.write_text(files[name])
        r = subprocess.run([exe, "schema", "--config-file", str(f)], capture_output=True,
                           text=True, check=False)
        assert r.returncode == 0 and "Valid" in r.stdout, r.stdout + r.stderr


def test_hostile_head_address_is_refused():
    from advisor.errors import UserInputError

    for bad in ("10.0.0.5; rm -rf /", "$(id)", "a b", "10.0.0.5\n", "10.0"):
        with pytest.raises(UserInputError, match="is not an IP address"):
            _multi_files(bad)


def _launch(sysfs, env):
    import os
    import subprocess

    from advisor.render.cloudinit import templates_dir
    from tests.test_render import BUS

    full = {"PATH": os.environ["PATH"], "ADVISOR_DRY_RUN": "1", "ADVISOR_SYSFS_ROOT": str(sysfs),
            "ADVISOR_BUS_IDS": BUS, **env}
    return subprocess.run(["bash", str(templates_dir() / "vllm-launch.sh")], capture_output=True,
                          text=True, env=full, timeout=30, check=False)


def test_launcher_roles_on_a_two_node_host(tmp_path):
    from tests.test_topology import EIGHT, make_sysfs

    sysfs = make_sysfs(tmp_path, {0: "0-95", 1: "96-191"}, EIGHT)
    files = _multi_files("10.0.0.5")
    head = _launch(sysfs, _env(files["env/vllm-0.env"]))
    assert head.returncode == 0, head.stderr
    ray_line, serve_line = head.stdout.strip().splitlines()
    # all eight GPUs span both NUMA nodes: CPUs of both, memory interleaved, on every node
    bind = r"numactl --cpunodebind=0\,1 --interleave=0\,1"  # printf %q escapes the commas
    assert ray_line.startswith(f"RAY: {bind} /opt/advisor/venv/bin/ray start --head --port 6379")
    assert "--num-gpus 8" in ray_line
    assert bind in serve_line and "--tensor-parallel-size 8 --pipeline-parallel-size 2" in \
        serve_line and "--distributed-executor-backend ray" in serve_line
    worker = _launch(sysfs, _env(files["worker/env/vllm-0.env"]))
    assert worker.returncode == 0, worker.stderr
    line = worker.stdout.strip()
    assert f"{bind} /opt/advisor/venv/bin/ray start --block --address 10.0.0.5:6379" in line
    assert "VLLM_API_KEY" not in line and "vllm serve" not in line  # workers hold no key
    lost = _env(files["worker/env/vllm-0.env"])
    del lost["ADVISOR_RAY_HEAD"]
    orphan = _launch(sysfs, lost)
    assert orphan.returncode == 1 and "no Ray head address" in orphan.stderr
