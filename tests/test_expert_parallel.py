"""Expert parallelism (vLLM's --enable-expert-parallel) where TP cannot split a MoE model's
experts: the TP sizes it opens, the weights per GPU, the layouts the ranking makes, the flag
every renderer passes, and how a replica is timed (benchmarks/perf/README.md, item 24)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor import UserInputError
from advisor.core.layouts import tp_sizes
from advisor.core.model import spec_from_config
from advisor.core.sizing import weights_per_gpu
from advisor.render.cloudinit import RenderRequest

CAT = advisor.load_catalog()
ROOT = Path(__file__).resolve().parents[1]
Q235 = advisor.model_spec("qwen3-235b-a22b-fp8")


def _config(name: str) -> dict:
    return json.loads((ROOT / "benchmarks" / "perf" / "configs" / name).read_text())


def test_expert_parallel_opens_only_the_tp_sizes_tp_cannot_split():
    """Block-fp8 experts of 1536 leave 192 columns per GPU at TP 8, not whole 128-wide blocks
    (vllm-project/vllm #17569, Qwen3-235B-A22B-FP8); with whole experts per GPU vLLM serves it.
    advisor uses expert parallelism there only: at TP 2 and 4 TP splits the experts (vLLM's
    default), and a dense model or a MoE model TP splits never gets it."""
    mm = spec_from_config(_config("MiniMaxAI--MiniMax-M2.5.json"), "minimax")
    for spec in (Q235, mm):
        assert "192 of the expert intermediate size 1536" in spec.tp_problem(8)
        assert spec.tp_problem(8, expert_parallel=True) is None
        assert [t for t in (1, 2, 4, 8, 16) if spec.expert_parallel_at(t)] == [8, 16]
        assert tp_sizes(spec, 8) == [1, 2, 4, 8]
    # expert parallelism does not lift the heads' rule: 64 heads at TP 128 stay refused
    assert Q235.tp_problem(128, expert_parallel=True) is not None
    for alias in ("llama-3.1-8b", "qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v2-lite"):
        spec = advisor.model_spec(alias)
        assert not any(spec.expert_parallel_at(t) for t in (1, 2, 4, 8)), alias


def test_the_fullest_gpu_holds_whole_experts_and_decides_the_weights():
    """Under expert parallelism each GPU holds E // TP experts and the first E mod TP one more
    (vLLM determine_expert_map; read off the installed vLLM in tests/test_lock_install.py):
    with 60 experts at TP 8 the fullest GPU holds 8, half an expert more than TP's 7.5 per
    GPU; with 128 the two are the same bytes."""
    base = advisor.model_spec("qwen3-30b-a3b")
    odd = base.model_copy(update={"moe": base.moe.model_copy(update={"num_experts": 60})})
    assert odd.experts_per_gpu(8) == 8 and base.experts_per_gpu(8) == 16
    ep = weights_per_gpu(odd, 8, 1, 2.0, expert_parallel=True)[0]
    tp = weights_per_gpu(odd, 8, 1, 2.0)[0]
    per_expert = odd.expert_params() * 2.0
    assert ep - tp == pytest.approx(odd.num_layers * (8 - 60 / 8) * per_expert, rel=1e-9)
    assert weights_per_gpu(base, 8, 1, 2.0, expert_parallel=True) == pytest.approx(
        weights_per_gpu(base, 8, 1, 2.0), rel=1e-12)
    assert advisor.model_spec("llama-3.1-8b").experts_per_gpu(8) == 0


def test_fit_uses_expert_parallel_where_vllm_needs_it_and_says_so():
    at8, _, _ = advisor.fit("qwen3-235b-a22b-fp8", "H200", tp=8, max_model_len=8192)
    assert at8.fits and at8.expert_parallel
    assert any("--enable-expert-parallel" in n and "16 of the 128 experts" in n
               and "192 of the expert intermediate size" in n for n in at8.notes)
    at4, _, _ = advisor.fit("qwen3-235b-a22b-fp8", "H200", tp=4, max_model_len=8192)
    assert not at4.expert_parallel and not any("expert parallel" in n for n in at4.notes)
    asked, _, _ = advisor.fit("qwen3-235b-a22b-fp8", "H200", tp=4, max_model_len=8192,
                              expert_parallel=True)
    assert asked.expert_parallel and asked.weights_gib == pytest.approx(at4.weights_gib)
    with pytest.raises(UserInputError) as e:
        advisor.fit("qwen3-235b-a22b-fp8", "H200", tp=8, max_model_len=8192,
                    expert_parallel=False)
    assert "192 of the expert intermediate size 1536" in str(e.value)
    assert e.value.hint.endswith("1, 2, 4 (8, 16 with expert parallelism)")
    with pytest.raises(UserInputError, match="has no experts"):
        advisor.fit("llama-3.1-8b", "H200", max_model_len=8192, expert_parallel=True)


def test_cli_fit_and_perf_take_the_flag(cli):
    r = cli("fit", "--model", "qwen3-235b-a22b-fp8", "--gpu", "H200", "--tp", "8", "--ctx",
            "8192")
    assert r.exit_code == 0 and "(TP 8 EP, PP 1)" in r.stdout
    r = cli("fit", "--model", "qwen3-235b-a22b-fp8", "--gpu", "H200", "--tp", "8", "--ctx",
            "8192", "--no-expert-parallel")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "with expert parallelism" in r.stderr and "Traceback" not in r.stderr
    r = cli("fit", "--model", "llama-3.1-8b", "--gpu", "H200", "--ctx", "8192",
            "--expert-parallel")
    assert r.exit_code == 2 and "has no experts" in r.stderr
    r = cli("perf", "--model", "qwen3-235b-a22b-fp8", "--gpu", "H200", "--tp", "8",
            "--input-len", "1000", "--output-len", "200", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["fit"]["expert_parallel"] is True


def test_the_ranking_lays_out_tp8_with_expert_parallel_on_eight_h200s():
    """Before, every 8-GPU instance got at most TP 4 for this model (2 replicas of TP 4, or
    none where TP 4 does not fit); now TP 8 is laid out too, with the flag, and the reason
    says why. At the default targets two TP 4 replicas serve it (block-fp8 experts at their
    measured speed); a 10 ms TPOT target needs TP 8."""
    recs = advisor.recommend("qwen3-235b-a22b-fp8", 8192, gpus=["H200"], top=50,
                             max_tpot_ms=10)
    eight = [r for r in recs if r.plan.tp == 8]
    assert eight and all(r.plan.expert_parallel for r in eight)
    assert all(not r.plan.expert_parallel for r in recs if r.plan.tp < 8)
    assert any("--enable-expert-parallel" in x for x in eight[0].reasons)
    plain = advisor.recommend("qwen3-30b-a3b", 8192, gpus=["H200"], top=50)
    assert plain and not any(r.plan.expert_parallel for r in plain)


def test_every_renderer_passes_the_flag(tmp_path):
    """cloud-init's env file, the real launcher (bash, dry run), the k8s args and provision's
    user-data carry --enable-expert-parallel for the TP 8 layout; the TP 4 layout and a dense
    model carry nothing; the launcher refuses any value but 0 and 1."""
    from advisor.core.layouts import place
    from advisor.provisioning import Question, provision
    from tests.test_weights import _launcher_dry_run

    r = advisor.render_files("qwen3-235b-a22b-fp8", 8192, instance="aws:p5en.48xlarge", tp=8)
    assert r.plan.expert_parallel and "ADVISOR_EXPERT_PARALLEL=1\n" in r.files["env/vllm-0.env"]
    assert "ADVISOR_EXPERT_PARALLEL=1" in r.files["user-data"]
    four = advisor.render_files("qwen3-235b-a22b-fp8", 8192, instance="aws:p5en.48xlarge",
                                tp=4)
    assert not four.plan.expert_parallel
    assert all("EXPERT" not in four.files[f"env/vllm-{i}.env"] for i in range(2))
    assert "ADVISOR_EXPERT_PARALLEL=1" not in four.files["user-data"]
    k8s = advisor.render_files("qwen3-235b-a22b-fp8", 8192, instance="aws:p5en.48xlarge",
                               tp=8, target="k8s")
    assert any("--enable-expert-parallel" in t for t in k8s.files.values())
    # provision lays the instance out as the ranking does: one TP 8 replica there for a
    # 10 ms TPOT target
    res = provision("qwen3-235b-a22b-fp8", 8192, instance="aws:p5en.48xlarge", name="ep",
                    dry_run=True, question=Question(max_tpot_ms=10))
    assert "ADVISOR_EXPERT_PARALLEL=1" in res.user_data
    inst = CAT.instance("aws:p5en.48xlarge")
    req = RenderRequest(model="Qwen/Qwen3-235B-A22B-FP8", max_model_len=8192,
                        vllm_version="0.11.0", api_key_ref="file:/k")
    run, bad = _launcher_dry_run(tmp_path, req, place(inst, CAT, 8, 1, expert_parallel=True),
                                 {"ADVISOR_EXPERT_PARALLEL": "yes"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip().endswith(
        "--tensor-parallel-size 8 --max-model-len 8192 --gpu-memory-utilization 0.9 "
        "--enable-expert-parallel")
    assert bad.returncode == 1 and "must be 0 or 1" in bad.stderr and not bad.stdout
    off, _ = _launcher_dry_run(tmp_path, req, place(inst, CAT, 8, 1), {})
    assert off.returncode == 0 and "expert" not in off.stdout


def test_an_expert_parallel_replica_is_timed_as_tp_and_says_how_well_that_did():
    """vLLM without data parallel runs no all-to-all (FusedMoEParallelConfig: all-to-all only
    with DP > 1) and all-reduces the MoE output as under TP; each GPU reads its whole experts
    instead of a slice of every expert: the same bytes and FLOPs with even routing, so the
    step model times it as TP. On the public expert-parallel runs (never fitted on) that was
    within the figures accuracy.json's expert_parallel section publishes, which the note
    quotes; a variant charging the fullest GPU's share of touched experts did worse there
    (README item 24)."""
    from advisor.core import confidence

    ep, f_ep = advisor.estimate("qwen3-30b-a3b", "H100-SXM", tp=4, input_len=1000,
                                output_len=200, concurrency=8, expert_parallel=True)
    tp, f_tp = advisor.estimate("qwen3-30b-a3b", "H100-SXM", tp=4, input_len=1000,
                                output_len=200, concurrency=8)
    assert f_ep.expert_parallel and not f_tp.expert_parallel
    assert (ep.tpot_ms, ep.ttft_ms) == (tp.tpot_ms, tp.ttft_ms)
    shipped = confidence.load()["expert_parallel"]
    note = [n for n in ep.notes if n.startswith("expert parallel")]
    assert len(note) == 1 and f"on {shipped['tpot']['n']} public expert-parallel runs" in note[0]
    assert f"TTFT {shipped['ttft']['median_pct']:g}%" in note[0]
    assert not any(n.startswith("expert parallel") for n in tp.notes)


def test_expert_parallel_does_not_lift_the_shared_experts_tp_rule():
    """Under --enable-expert-parallel only the routed experts are whole per GPU; a shared
    expert stays a TP-sharded MLP (vLLM's DeepseekV2MLP / Qwen2MoeMLP), so its width must still
    divide by TP: a Qwen2-MoE-shaped model whose shared expert is 5632 wide cannot run at TP 8
    (5632 / 8 = 704, not whole 128-wide blocks of a block-fp8 checkpoint) with or without it."""
    base = advisor.model_spec("qwen3-235b-a22b-fp8")
    shared = base.model_copy(update={"moe": base.moe.model_copy(
        update={"shared_intermediate_size": 5632})})
    why = shared.tp_problem(8, expert_parallel=True)
    assert why is not None and "shared expert intermediate size 5632" in why
    assert not shared.expert_parallel_at(8) and 8 not in tp_sizes(shared, 8)
    assert base.tp_problem(8, expert_parallel=True) is None


def test_expert_parallel_can_be_asked_for_or_refused_where_tp_would_do():
    """recommend/render/provision --expert-parallel puts every MoE layout of TP > 1 on
    --enable-expert-parallel (vLLM's own recipe for large MoE models on one node), and
    --no-expert-parallel never does, so the TP sizes that need it are not laid out; a dense
    model is refused, and at TP 1 the flag is a no-op in vLLM (use_ep needs TP x DP > 1)."""
    from advisor.provisioning import Question, provision

    recs = advisor.recommend("qwen3-30b-a3b", 8192, gpus=["H100-SXM"], top=50,
                             expert_parallel=True)
    multi = [r for r in recs if r.plan.tp > 1]
    assert multi and all(r.plan.expert_parallel and r.fit.expert_parallel for r in multi)
    assert all(not r.plan.expert_parallel for r in recs if r.plan.tp == 1)
    assert any("as asked (--expert-parallel)" in x for x in multi[0].reasons)
    never = advisor.recommend("qwen3-235b-a22b-fp8", 8192, gpus=["H200"], top=50,
                              expert_parallel=False)
    assert never and all(r.plan.tp <= 4 and not r.plan.expert_parallel for r in never)
    with pytest.raises(UserInputError, match="has no experts"):
        advisor.recommend("llama-3-8b", 8192, expert_parallel=True)
    r = advisor.render_files("qwen3-30b-a3b", 8192, instance="gcp:a3-highgpu-2g", tp=2,
                             expert_parallel=True)
    assert r.plan.expert_parallel and "ADVISOR_EXPERT_PARALLEL=1" in r.files["env/vllm-0.env"]
    plain = advisor.render_files("qwen3-30b-a3b", 8192, instance="gcp:a3-highgpu-2g", tp=2)
    assert not plain.plan.expert_parallel
    res = provision("qwen3-30b-a3b", 8192, instance="gcp:a3-highgpu-2g", name="ep-asked",
                    dry_run=True, question=Question(expert_parallel=True))
    # the layout the ranking gives the named instance: EP with it wherever its TP is over 1
    assert ("ADVISOR_EXPERT_PARALLEL=1" in res.user_data) == (
        "ADVISOR_TP=2" in res.user_data)
    one, _, _ = advisor.fit("qwen3-30b-a3b", "H100-SXM", max_model_len=8192,
                            expert_parallel=True)
    assert one.tp == 1 and not one.expert_parallel


def test_plan_takes_the_same_choice():
    """plan (fleets, and the cost curve) lays out what provision would: by default TP 8 with
    expert parallelism on eight H200s for a 12 ms TPOT target; with --no-expert-parallel
    only TP 4 there."""
    default = advisor.fleet("qwen3-235b-a22b-fp8", 8192, rps=2, gpus=["H200"], max_tpot_ms=12)
    assert any(o.plan.tp == 8 and o.plan.expert_parallel for o in default)
    never = advisor.fleet("qwen3-235b-a22b-fp8", 8192, rps=2, gpus=["H200"],
                          expert_parallel=False, max_tpot_ms=12)
    assert never and all(o.plan.tp <= 4 and not o.plan.expert_parallel for o in never)
    with pytest.raises(UserInputError, match="has no experts"):
        advisor.fleet_curve("llama-3-8b", 8192, rps_from=1, rps_to=4, points=2,
                            expert_parallel=True)


def test_nvfp4_experts_get_no_expert_parallelism_on_blackwell_in_the_pinned_vllm(tmp_path):
    """vLLM 0.11.0 as advisor pins it (no FlashInfer extra) runs NVFP4 experts on compute
    capability 10.0+ through cutlass_moe_fp4, which asserts "Expert Parallelism / expert_map
    is currently not supported"; Marlin, below 10.0, takes an expert map. So an NVFP4 MoE asked
    for with --expert-parallel is refused on B200 and laid out without it there, while a
    Hopper GPU keeps it."""
    from advisor.core.weights import expert_parallel_refusal

    assert "cutlass_moe_fp4" in expert_parallel_refusal("nvfp4", "Blackwell", "0.11.0")
    assert expert_parallel_refusal("compressed-tensors-fp4", "Blackwell Ultra", "0.11.0")
    assert expert_parallel_refusal("nvfp4", "Hopper", "0.11.0") is None
    assert expert_parallel_refusal("fp8", "Blackwell", "0.11.0") is None
    assert expert_parallel_refusal("nvfp4", "Blackwell", "0.14.0") is None  # not read there
    cfg = dict(CAT.model_configs["qwen3-30b-a3b"])
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(UserInputError, match="cutlass_moe_fp4") as e:
        advisor.fit(str(path), "B200", tp=2, max_model_len=8192, expert_parallel=True)
    assert "without --expert-parallel" in (e.value.hint or "")
    hopper, _, _ = advisor.fit(str(path), "H100-SXM", tp=2, max_model_len=8192,
                               expert_parallel=True)
    assert hopper.expert_parallel
    # a MoE of ~460B in NVFP4 (Qwen3-235B with twice the experts) needs more than one GPU:
    # asked with --expert-parallel, eight H100s serve it with the flag; the B200 instance gets
    # the TP layout without it, and a risk line says why
    big = json.loads((ROOT / "catalogs" / "models" / "Qwen--Qwen3-235B-A22B-FP8.json")
                     .read_text())
    big["num_experts"] = 256
    big["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    (tmp_path / "big.json").write_text(json.dumps(big))
    recs = advisor.recommend(str(tmp_path / "big.json"), 8192, gpus=["B200", "H100-SXM"],
                             top=100, expert_parallel=True)
    b200 = [r for r in recs if r.gpu == "B200"]
    assert b200 and not any(r.plan.expert_parallel or r.fit.expert_parallel for r in b200)
    assert all(r.plan.tp > 1 and r.plan.pp == 1 for r in b200)  # TP, deployable as rendered
    assert all(any("--expert-parallel not used here" in x and "cutlass_moe_fp4" in x
                   for x in r.risks) for r in b200)
    hopper = [r for r in recs if r.gpu == "H100-SXM" and r.plan.tp > 1]
    assert hopper and all(r.plan.expert_parallel for r in hopper)
    plain = advisor.recommend(str(tmp_path / "big.json"), 8192, gpus=["B200"], top=100)
    assert plain and not any(r.plan.expert_parallel for r in plain)  # TP splits them there
