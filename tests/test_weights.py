"""Quantized weights in the search (issue 30): --quantization none|fp8|auto on recommend,
render and provision; which GPUs run fp8 in vLLM; on-the-fly fp8's full-precision load; a
published checkpoint served by its repo id; the launcher's --quantization flag, run for real."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import advisor
from advisor.api import load_catalog
from advisor.cli import app
from advisor.core.engine import GIB
from advisor.core.model import DTYPE_BYTES
from advisor.core.sizing import weights_per_gpu
from advisor.core.weights import MARLIN_FP8, Weights, check_choice, options, refusal
from advisor.errors import UserInputError
from advisor.render.cloudinit import RenderRequest, replica_env, templates_dir

CAT = load_catalog()
LAUNCH = templates_dir() / "vllm-launch.sh"


def _key(r):
    return f"{r.provider}:{r.instance}"


def test_405b_fp8_picks_one_8_gpu_instance_and_serves_the_published_checkpoint():
    bf16 = advisor.recommend("llama-3.1-405b", 8192, top=1)[0]
    fp8 = advisor.recommend("llama-3.1-405b", 8192, top=1, quantization="fp8")[0]
    # in bf16 (810 GB) no single 8-GPU instance under the fp8 pick's price serves it
    assert fp8.plan.nodes == 1 and fp8.gpu_count == 8 and fp8.weights.scheme == "fp8"
    assert fp8.weights.checkpoint == "nvidia/Llama-3.1-405B-Instruct-FP8"
    assert fp8.weights.vllm_quantization is None  # the checkpoint's config says fp8 itself
    assert fp8.usd_per_hour * fp8.plan.nodes < bf16.usd_per_hour * bf16.plan.nodes
    # the fp8 checkpoint's weights are about half the bf16 ones, per GPU at the same TP
    assert fp8.fit.weights_gib * fp8.plan.tp < 0.55 * 810 / 1.0737


def test_modelopt_checkpoint_needs_fp8_tensor_cores_and_ampere_falls_back_to_on_the_fly():
    ckpt = Weights(scheme="fp8", checkpoint="nvidia/x", source="modelopt", accuracy="-")
    otf = Weights(scheme="fp8", source="on-the-fly", vllm_quantization="fp8", accuracy="-")
    a100 = CAT.gpus["A100-80GB-SXM"]
    h100 = CAT.gpus["H100-SXM"]
    assert "tensor cores" in refusal(ckpt, a100.architecture, a100.fp8_tflops)
    assert refusal(ckpt, h100.architecture, h100.fp8_tflops) is None
    assert refusal(otf, a100.architecture, a100.fp8_tflops) is None  # FP8 Marlin, W8A16
    t4 = CAT.gpus["T4"]
    assert "neither" in refusal(otf, t4.architecture, t4.fp8_tflops)
    assert {"Ampere"} == MARLIN_FP8  # pinned: vLLM's fp8 docs
    # 405B on 8 x A100-80GB: the checkpoint is refused and on-the-fly fp8 must load the bf16
    # weights first (810 GB / 8 > 80 GB), so one p4de does not serve it in fp8
    recs, rej = advisor.recommend("llama-3.1-405b", 8192, quantization="fp8",
                                  instances=["aws:p4de.24xlarge"], max_nodes=1,
                                  with_rejected=True)
    assert not recs
    assert "loads the original weights first" in rej[0].reason
    assert "tensor cores" in rej[0].reason


def test_on_the_fly_load_limit_is_the_bf16_share_per_gpu():
    spec = advisor.model_spec("llama-3.1-70b")
    own = sum(weights_per_gpu(spec, 1, 1, DTYPE_BYTES[spec.torch_dtype])) / GIB
    # 70B in bf16 is ~131 GiB: on 2 x H100 (79 GiB each) on-the-fly fp8 loads 66 GiB a GPU
    recs = advisor.recommend("llama-3.1-70b", 8192, quantization="fp8",
                             instances=["aws:p5.48xlarge"])
    r = recs[0]
    assert r.weights.source == "on-the-fly" and r.weights.vllm_quantization == "fp8"
    assert own / (r.plan.tp * r.plan.pp) <= CAT.gpus[r.gpu].cuda_memory_gib
    assert r.weights.kernel == "W8A8"
    assert "auto-round" in r.weights.accuracy  # the cited closest measurement


def test_auto_lists_both_weights_side_by_side_in_one_order():
    recs = advisor.recommend("llama-3.1-405b", 8192, quantization="auto", top=None)
    schemes = {r.weights.scheme for r in recs}
    assert schemes == {"as published", "fp8"}
    both = {_key(r) for r in recs if r.weights.scheme == "fp8"} & {
        _key(r) for r in recs if r.weights.scheme == "as published"}
    assert both  # an instance that serves both appears once for each
    keys = [(not r.deployable, r.score, r.usd_per_million_output_tokens, r.usd_per_hour)
            for r in recs]
    assert keys == sorted(keys)
    # none: only the published weights, and the same first pick as without the option
    plain = advisor.recommend("llama-3.1-405b", 8192, top=3)
    none = advisor.recommend("llama-3.1-405b", 8192, top=3, quantization="none")
    assert [_key(r) for r in plain] == [_key(r) for r in none]
    assert all(r.weights.scheme == "as published" for r in none)


def test_a_checkpoint_already_quantized_is_its_own_fp8_answer():
    spec = advisor.model_spec("gpt-oss-20b")
    got = options("fp8", spec, CAT.models.get("gpt-oss-20b"))
    assert [w.scheme for w, _ in got] == ["as published"] and got[0][1] is None


@pytest.mark.parametrize("bad", ["int3", "awq", "FP8 ", "fp16"])
def test_a_choice_outside_the_search_is_one_clear_line(bad):
    with pytest.raises(UserInputError, match="--quantization") as e:
        check_choice(bad)
    assert "none" in e.value.hint and "\n" not in str(e.value)
    assert check_choice("FP8") == "fp8" and check_choice(None) == "none"


def test_cli_recommend_shows_the_weights_and_their_accuracy(tmp_path):
    res = CliRunner().invoke(app, ["recommend", "--model", "llama-3.1-405b", "--ctx", "8192",
                                   "--quantization", "auto", "--top", "8"])
    assert res.exit_code == 0, res.output
    assert " fp8 " in res.output and " bf16 " in res.output
    assert "= weights: fp8 (nvidia/Llama-3.1-405B-Instruct-FP8)" in res.output
    assert "= with the weights as published (bfloat16) the first pick is" in res.output
    body = json.loads(CliRunner().invoke(app, [
        "recommend", "--model", "llama-3.1-405b", "--ctx", "8192", "--quantization", "fp8",
        "--json", "--top", "2"]).output)
    assert body[0]["weights"]["checkpoint"] == "nvidia/Llama-3.1-405B-Instruct-FP8"
    bad = CliRunner().invoke(app, ["recommend", "--model", "llama-3-8b", "--ctx", "8192",
                                   "--quantization", "int3"])
    assert bad.exit_code == 2 and "--quantization" in bad.output


def test_render_passes_the_checkpoint_or_the_flag(tmp_path):
    ck = advisor.render_files("llama-3.1-405b", 8192, quantization="fp8",
                              api_key_ref="aws-ssm:/k", hf_token_ref="aws-ssm:/t",
                              instance="aws:p5.48xlarge")
    env = ck.files["env/vllm-0.env"]
    assert "ADVISOR_MODEL=nvidia/Llama-3.1-405B-Instruct-FP8\n" in env
    assert "ADVISOR_QUANTIZATION" not in env
    otf = advisor.render_files("llama-3.1-70b", 8192, quantization="fp8",
                               api_key_ref="aws-ssm:/k", hf_token_ref="aws-ssm:/t",
                               instance="aws:p5.48xlarge")
    env = otf.files["env/vllm-0.env"]
    assert "ADVISOR_MODEL=meta-llama/Llama-3.1-70B-Instruct\n" in env
    assert "ADVISOR_QUANTIZATION=fp8\n" in env
    k8s = advisor.render_files("llama-3.1-70b", 8192, quantization="fp8", target="k8s",
                               api_key_ref="aws-ssm:/k", hf_token_ref="aws-ssm:/t",
                               instance="aws:p5.48xlarge")
    assert any("--quantization" in text and "fp8" in text for text in k8s.files.values())
    with pytest.raises(UserInputError, match="--tp with --quantization"):
        advisor.render_files("llama-3.1-70b", 8192, quantization="fp8", tp=8,
                             api_key_ref="aws-ssm:/k", hf_token_ref="aws-ssm:/t",
                             instance="aws:p5.48xlarge")


def _launcher_dry_run(tmp_path, req, plan, bad_env):
    """The real launcher (bash, dry run, a GPU-less sysfs) for replica 0 of ``plan``: the run
    with the env file ``req`` renders, and one with ``bad_env`` laid over it."""
    from tests.test_render import _dry_run

    env = dict(line.split("=", 1) for line in replica_env(req, plan, 0).splitlines())
    sysfs = tmp_path / "sys"
    sysfs.mkdir(exist_ok=True)
    env["ADVISOR_BUS_IDS"] = ""
    return _dry_run(sysfs, env, LAUNCH), _dry_run(sysfs, {**env, **bad_env}, LAUNCH)


def test_the_launcher_itself_passes_quantization_and_refuses_anything_else(tmp_path):
    """The real launcher under bash (dry run), against a GPU-less sysfs: the flag it prints is
    the one the env file asks for, in the order local.py's --print computes."""
    from advisor.core.layouts import place

    inst = CAT.instance("aws:p5.48xlarge")
    req = RenderRequest(model="meta-llama/Llama-3.1-70B-Instruct", max_model_len=8192,
                        vllm_version="0.11.0", api_key_ref="file:/k", quantization="fp8")
    run, bad = _launcher_dry_run(tmp_path, req, place(inst, CAT, 2, 1),
                                 {"ADVISOR_QUANTIZATION": "fp8; id"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip().endswith("--gpu-memory-utilization 0.9 --quantization fp8")
    assert bad.returncode == 1 and "must be fp8 or unset" in bad.stderr and not bad.stdout


@pytest.mark.parametrize(("args", "says"), [
    (["--dtype", "fp8"], "--quantization fp8"),
    (["--quantization", "auto"], "fit and perf size one"),
])
def test_fit_points_fp8_at_quantization_and_refuses_auto(args, says):
    res = CliRunner().invoke(app, ["fit", "--model", "llama-3.1-70b", "--gpu", "H100-SXM",
                                   "--ctx", "8192", *args])
    assert res.exit_code == 2 and says in res.output and "Traceback" not in res.output
    # fp8 itself sizes the weights at one byte: about half of bf16
    bf16, _, _ = advisor.fit("llama-3.1-70b", "H100-SXM", tp=2, max_model_len=8192)
    fp8, _, _ = advisor.fit("llama-3.1-70b", "H100-SXM", tp=2, max_model_len=8192,
                            quantization="fp8")
    assert 0.45 < fp8.weights_gib / bf16.weights_gib < 0.56


def test_plan_sizes_fleets_with_the_weights_asked_for():
    fp8 = advisor.fleet("llama-3.1-70b", 8192, rps=20, quantization="fp8")
    bf16 = advisor.fleet("llama-3.1-70b", 8192, rps=20)
    assert all(o.weights.scheme == "fp8" for o in fp8)
    assert all(o.weights.scheme == "as published" for o in bf16)
    assert fp8[0].usd_per_month < bf16[0].usd_per_month
    res = CliRunner().invoke(app, ["plan", "--model", "llama-3.1-70b", "--ctx", "8192",
                                   "--rps", "20", "--quantization", "fp8", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)[0]["weights"]["scheme"] == "fp8"
    curve = advisor.fleet_curve("llama-3.1-70b", 8192, rps_from=1, rps_to=40, points=3,
                                quantization="fp8")
    top40 = advisor.fleet("llama-3.1-70b", 8192, rps=40, quantization="fp8")[0]
    assert curve.points[-1].cheapest.usd_per_month == top40.usd_per_month


# --- a checkpoint's own quantization on older GPUs: vLLM's per-method minimum -------------


def test_method_floors_are_vllms_minimum_capabilities():
    from advisor.core.weights import ARCH_COMPUTE_CAPABILITY, METHOD_MIN_CAPABILITY

    # pinned: each is a vLLM QuantizationConfig.get_min_capability or its docs' hardware
    # table (evidence in advisor/core/weights.py); changing one must break this test
    assert METHOD_MIN_CAPABILITY == {
        "mxfp4": 80, "nvfp4": 80, "modelopt": 89, "fp8": 80, "fbgemm_fp8": 80, "awq": 75,
        "awq_marlin": 80, "gptq_marlin": 80, "gptq": 60, "bitsandbytes": 70, "int8": 75,
        "w8a8": 75, "compressed-tensors-w4": 80, "compressed-tensors-w8": 75,
        "compressed-tensors-fp8": 80, "compressed-tensors-fp4": 80}
    assert ARCH_COMPUTE_CAPABILITY == {
        "Volta": 70, "Turing": 75, "Ampere": 80, "Ada Lovelace": 89, "Hopper": 90,
        "Blackwell": 100, "Blackwell Ultra": 103}
    # every NVIDIA GPU of the catalog has a floor: a new architecture must be placed
    nvidia = {g.architecture for g in CAT.gpus.values() if g.vendor == "nvidia"}
    assert nvidia <= set(ARCH_COMPUTE_CAPABILITY)


@pytest.mark.parametrize(("method", "gpu", "refused"), [
    ("mxfp4", "T4", True), ("mxfp4", "V100-SXM2-32GB", True), ("mxfp4", "A10G", False),
    ("nvfp4", "T4", True), ("nvfp4", "A100-80GB-SXM", False), ("nvfp4", "B200", False),
    ("modelopt", "A100-80GB-SXM", True), ("modelopt", "L4", False),
    ("awq", "V100-SXM2-16GB", True), ("awq", "T4", False), ("gptq", "V100-SXM2-16GB", False),
    ("gptq_marlin", "T4", True), ("bitsandbytes", "V100-SXM2-16GB", False),
    ("compressed-tensors-w4", "T4", True),   # W4A16 on Marlin (vllm #26297)
    ("compressed-tensors-w4", "A10G", False),
    ("compressed-tensors-w8", "T4", False),  # int8 W8A8 runs there; W8A16 would not
    ("compressed-tensors-w8", "V100-SXM2-16GB", True),
    ("compressed-tensors-fp8", "T4", True),  # the FP8 Marlin fallback needs 8.0
    ("compressed-tensors-fp8", "A100-80GB-SXM", False),
    ("compressed-tensors-fp4", "V100-SXM2-32GB", True),
    ("mxfp4", "MI300X", False), ("nvfp4", "MI300X", False),  # AMD: not checked here
])
def test_which_gpus_refuse_a_checkpoints_own_quantization(method, gpu, refused):
    from advisor.core.weights import method_refusal

    own = Weights(scheme="as published", source=method, accuracy="-")
    g = CAT.gpus[gpu]
    why = refusal(own, g.architecture, g.fp8_tflops, method)
    assert (why is not None) == refused
    assert why == method_refusal(method, g.architecture)
    if refused:
        assert method in why and g.architecture in why


def test_recommend_never_lists_a_gpu_vllm_cannot_serve_gpt_oss_on_and_says_why():
    recs, rej = advisor.recommend("gpt-oss-20b", 4096, top=500, with_rejected=True)
    assert recs
    gpus = {r.gpu for r in recs}
    assert not gpus & {"T4", "V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIe-16GB"}
    assert {"L4", "A10G"} <= gpus  # Ampere and Ada still serve it
    why = {f"{r.provider}:{r.instance}": r for r in rej}
    assert "compute capability 8.0" in why["aws:g4dn.xlarge"].reason  # one T4
    assert why["aws:g4dn.xlarge"].by == "its mxfp4 weights"


@pytest.mark.parametrize(("args", "needle"), [
    (["perf", "--model", "gpt-oss-20b", "--gpu", "V100-SXM2-32GB", "--ctx", "4096",
      "--input-len", "1024", "--output-len", "256"], "mxfp4 checkpoints on compute capability"),
    (["fit", "--model", "llama-3-8b", "--gpu", "T4", "--ctx", "8192", "--quantization",
      "nvfp4"], "Turing GPUs are 7.5"),
])
def test_fit_and_perf_refuse_what_vllm_will_not_start_in_one_line(cli, args, needle):
    r = cli(*args)
    assert r.exit_code == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "hint:" in lines[0]
    assert "Traceback" not in r.stderr
    with pytest.raises(UserInputError, match="compute capability"):
        advisor.estimate("gpt-oss-20b", "T4", input_len=128, output_len=16)


def test_the_fp8_rules_and_the_method_floors_agree_on_every_nvidia_gpu():
    """The fp8 options are decided by the catalog's fp8_tflops and MARLIN_FP8 (which also
    covers AMD); the as-published floors by METHOD_MIN_CAPABILITY. Both encode vLLM's fp8
    limits, so on every NVIDIA GPU they must say the same."""
    from advisor.core.weights import method_refusal

    otf = Weights(scheme="fp8", source="on-the-fly", vllm_quantization="fp8", accuracy="-")
    ckpt = Weights(scheme="fp8", checkpoint="nvidia/x", source="modelopt", accuracy="-")
    for g in CAT.gpus.values():
        if g.vendor != "nvidia":
            continue
        assert (refusal(otf, g.architecture, g.fp8_tflops) is None) == (
            method_refusal("fp8", g.architecture) is None), g.id
        assert (refusal(ckpt, g.architecture, g.fp8_tflops) is None) == (
            method_refusal("modelopt", g.architecture) is None), g.id


# --- the dtype vLLM serves in: no bfloat16 before Ampere, no float16 for Gemma 2/3 ---------


def test_the_float16_refusals_are_vllms_list():
    from advisor.core.weights import BF16_MIN_CAPABILITY, FLOAT16_REFUSED

    # pinned: vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS and CudaPlatformBase's
    # supported_dtypes (evidence in advisor/core/weights.py)
    assert frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"}) == FLOAT16_REFUSED
    assert BF16_MIN_CAPABILITY == 80


@pytest.mark.parametrize(("model_type", "checkpoint", "arch", "served"), [
    ("llama", "bfloat16", "Ampere", "bfloat16"),
    ("llama", "bfloat16", "Turing", "float16"),      # vLLM warns and casts
    ("llama", "float32", "Hopper", "bfloat16"),      # float32 checkpoints come down
    ("llama", "float32", "Volta", "float16"),
    ("llama", "float16", "Hopper", "float16"),
    ("gemma2", "bfloat16", "Ampere", "bfloat16"),
    ("gemma2", "bfloat16", "Turing", "float32"),     # float16 refused: up, not down
    ("gemma3_text", "bfloat16", "Volta", "float32"),
    ("gemma2", "float16", "Ampere", "bfloat16"),     # a float16 Gemma checkpoint
    ("gemma2", "float32", "Turing", "float32"),
    ("gemma2", "bfloat16", None, "bfloat16"),        # no architecture: one with bfloat16
    ("gemma2", "bfloat16", "CDNA3", "bfloat16"),     # AMD: not checked here
])
def test_auto_dtype_follows_vllms_resolution(model_type, checkpoint, arch, served):
    from advisor.core.weights import dtype_refusal, served_dtype

    assert served_dtype(model_type, checkpoint, arch) == served
    assert (dtype_refusal(model_type, checkpoint, arch) is not None) == (served == "float32")


def test_an_explicit_dtype_the_engine_refuses_is_one_clear_line():
    from advisor.core.weights import served_dtype

    with pytest.raises(UserInputError, match="gemma2 models in float16"):
        served_dtype("gemma2", "bfloat16", "Ampere", "float16")
    with pytest.raises(UserInputError, match="Turing GPUs are 7.5"):
        served_dtype("llama", "bfloat16", "Turing", "bfloat16")
    assert served_dtype("gemma2", "bfloat16", "Turing", "float32") == "float32"


def test_fit_sizes_gemma_2_on_a_t4_in_float32_as_vllm_runs_it(tmp_path):
    """vLLM on a T4 logs "doesn't support torch.bfloat16. Falling back to torch.float32" and
    "Upcasting torch.bfloat16 to torch.float32" for Gemma 3 (unslothai/unsloth issue #3366,
    2025-09): twice the weights and KV cache of the same model on an L4. Gemma 2 itself does
    not start on a T4 in vLLM 0.11.0 (its attention soft-capping: the next test), so the
    sizing is checked on its config without it, as Gemma 3 has none."""
    cfg = dict(CAT.model_configs["gemma-2-9b"], attn_logit_softcapping=None)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    t4, _, _ = advisor.fit(str(path), "T4", max_model_len=4096, tp=4)
    l4, _, _ = advisor.fit(str(path), "L4", max_model_len=4096, tp=4)
    llama, _, _ = advisor.fit("llama-3.1-8b", "T4", max_model_len=4096, tp=4)
    assert (t4.dtype, l4.dtype, llama.dtype) == ("float32", "bfloat16", "float16")
    assert t4.weights_gib == pytest.approx(2 * l4.weights_gib, rel=0.02)
    assert t4.kv_bytes_per_token == 2 * l4.kv_bytes_per_token
    assert any("in float32 on Turing GPUs" in n for n in t4.notes)
    assert any("in float16 on Turing GPUs" in n for n in llama.notes)
    assert not any("vLLM serves this" in n for n in l4.notes)


def test_gemma_2s_soft_capping_does_not_start_below_ampere_in_vllm_0_11(tmp_path, cli):
    """vLLM 0.11.0 runs attention below compute capability 8.0 with FlexAttention, which
    raises "FlexAttention does not support logits soft cap yet" (tests/test_lock_install.py
    reads it): fit had sized Gemma 2 on 4 x T4 as fitting."""
    from advisor.core.weights import attention_refusal

    assert advisor.model_spec("gemma-2-9b").attention_softcap
    assert not advisor.model_spec("llama-3.1-8b").attention_softcap
    r = cli("fit", "--model", "gemma-2-9b", "--gpu", "T4", "--tp", "4", "--ctx", "4096")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "FlexAttention does not support logits soft cap yet" in r.stderr
    assert "hint: pick an Ampere or newer GPU" in r.stderr
    # 8.6: FlashAttention, which soft-caps
    assert advisor.fit("gemma-2-9b", "A10G", max_model_len=4096)[0].dtype == "bfloat16"
    gemma = advisor.model_spec("gemma-2-9b")
    assert attention_refusal(gemma, 75, False, "0.14.0") is None  # read in 0.11 only
    assert attention_refusal(gemma, 80, False, "0.11.0") is None
    assert attention_refusal(gemma, 75, False, "0.11.0")[0] == "attention backend"
    assert attention_refusal(advisor.model_spec("llama-3.1-8b"), 70, False, "0.11.0") is None
    # a soft-capped model that would not upcast (float16 checkpoint type) is refused on its
    # own label in the ranking
    cfg = dict(CAT.model_configs["llama-3.1-8b"], attn_logit_softcapping=30.0)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    recs, rej = advisor.recommend(str(path), 4096, top=500, with_rejected=True)
    assert not {r.gpu for r in recs} & {"T4", "V100-SXM2-16GB", "V100-SXM2-32GB"}
    by = {f"{r.provider}:{r.instance}": r for r in rej}
    assert by["aws:g4dn.xlarge"].by == "attention backend"


def test_recommend_leaves_out_gpus_that_would_upcast_and_says_why():
    recs, rej = advisor.recommend("gemma-2-9b", 4096, top=500, with_rejected=True)
    gpus = {r.gpu for r in recs}
    assert not gpus & {"T4", "V100-SXM2-16GB", "V100-SXM2-32GB"}
    assert {"L4", "A10G"} <= gpus
    why = {f"{r.provider}:{r.instance}": r for r in rej}
    assert why["aws:p3.8xlarge"].by == "float32 only"  # 4 x V100: it fitted in bfloat16
    assert "gemma2 in float32 on Volta" in why["aws:p3.8xlarge"].reason
    small = advisor.recommend("llama-3.1-8b", 4096, gpus=["V100-SXM2-16GB"])
    assert small  # a Llama is cast down to float16 there, and ranked
    with pytest.raises(UserInputError, match="float32 only") as err:
        advisor.recommend("gemma-2-9b", 4096, gpus=["V100-SXM2-16GB"])
    assert "pick an Ampere or newer GPU" in (err.value.hint or "")


def test_perf_refuses_to_time_a_float32_upcast_in_one_line(cli, tmp_path):
    # Gemma 2's config without its soft-capping (which vLLM 0.11.0 refuses there first)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(CAT.model_configs["gemma-2-9b"],
                                    attn_logit_softcapping=None)))
    r = cli("perf", "--model", str(path), "--gpu", "T4", "--tp", "4", "--input-len", "512",
            "--output-len", "64")
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "float32" in lines[0] and "hint:" in lines[0]
    with pytest.raises(UserInputError, match="no float32 timings"):
        advisor.estimate(str(path), "V100-SXM2-32GB", input_len=128, output_len=16)


def test_compressed_tensors_checkpoints_are_held_to_their_schemes_floor(tmp_path):
    """A W4A16 compressed-tensors Llama (RedHatAI's and llm-compressor's usual export) runs on
    Marlin, Ampere and newer: recommend listed T4 instances for it. An INT8 W8A8 export of the
    same model still runs on a T4."""
    base = dict(CAT.model_configs["llama-3.1-8b"])
    w4 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
                                                       "group_size": 128}}}}
    w8a8 = {"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int"},
                    "input_activations": {"num_bits": 8, "type": "int"}}}}
    seen = {}
    for name, q in (("w4", w4), ("w8a8", w8a8)):
        path = tmp_path / name / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps({**base, "quantization_config": q}))
        recs, rej = advisor.recommend(str(path), 4096, top=500, with_rejected=True)
        seen[name] = ({r.gpu for r in recs}, {f"{r.provider}:{r.instance}": r for r in rej})
    gpus, why = seen["w4"]
    assert "T4" not in gpus and {"L4", "A10G"} <= gpus
    assert why["aws:g4dn.xlarge"].by == "its compressed-tensors-w4 weights"
    assert "Turing GPUs are 7.5" in why["aws:g4dn.xlarge"].reason
    assert "T4" in seen["w8a8"][0]


# --- an fp8 KV cache before Ada, on vLLM's V1-only releases ------------------------------------


def test_the_fp8_kv_floor_is_pinned():
    from advisor.core.weights import KV_FP8_MIN_CAPABILITY, KV_FP8_RULE_SINCE

    assert (KV_FP8_MIN_CAPABILITY, KV_FP8_RULE_SINCE) == (89, "0.11.0")


@pytest.mark.parametrize(("kv", "ckpt", "arch", "version", "reads", "refused"), [
    ("fp8", None, "Ampere", "0.11.0", False, True),       # vllm #26431: an RTX 3090
    ("fp8_e4m3", None, "Turing", "0.11.0", False, True),
    ("fp8", None, "Volta", "0.19.0", False, True),
    ("fp8_e5m2", None, "Ampere", "0.11.0", False, True),   # the same Triton kernels
    ("fp8", None, "Ada Lovelace", "0.11.0", False, False),  # L4, L40S: native fp8e4nv
    ("fp8", None, "Hopper", "0.11.0", False, False),
    ("fp8", None, "Ampere", "0.10.2", False, False),       # V0 and XFormers served it
    ("auto", None, "Ampere", "0.11.0", False, False),
    ("auto", "fp8", "Ampere", "0.14.0", True, True),       # the checkpoint's own fp8 KV
    ("auto", "fp8", "Ampere", "0.11.0", False, False),     # a release that ignores it
    ("fp8", None, "CDNA3", "0.11.0", False, False),        # AMD: not checked here
])
def test_which_gpus_refuse_an_fp8_kv_cache(kv, ckpt, arch, version, reads, refused):
    from advisor.core.weights import kv_refusal

    why = kv_refusal(kv, ckpt, arch, version, reads)
    assert (why is not None) == refused
    if refused:
        assert "8.9" in why and arch in why and "#26431" in why


@pytest.mark.parametrize(("arch", "version", "method", "refused"), [
    ("Ampere", "0.11.0", None, "8.9"),            # Triton's e4m3 view, as for fp8
    ("Ada Lovelace", "0.11.0", None, None),        # Triton: native fp8e4nv
    ("Hopper", "0.11.0", None, "FlashAttention 3"),  # e4m3 only: "Unrecognized FP8 dtype"
    ("Hopper", "0.10.2", None, None),              # before the V1-only rule
    ("Blackwell", "0.11.0", None, None),           # FlashInfer reads e5m2
    ("Blackwell", "0.11.0", "fp8", "fp8 checkpoints"),  # every release: vllm #8409
    ("Blackwell", "0.9.0", "compressed-tensors-w4", "fp8 checkpoints"),
    ("Ada Lovelace", "0.11.0", "nvfp4", "fp8 checkpoints"),
    ("Ada Lovelace", "0.11.0", "modelopt", "fp8 checkpoints"),
    ("Ada Lovelace", "0.11.0", "awq", None),       # AWQ gives attention no KV-cache scales
    ("Blackwell", "0.11.0", "gptq", None),
])
def test_which_gpus_and_checkpoints_refuse_an_fp8_e5m2_kv_cache(arch, version, method, refused):
    """fp8_e5m2 in vLLM 0.11.0, as read in its installed code (pinned against it in
    tests/test_lock_install.py): refused beside a checkpoint whose quantization gives
    attention a KV-cache method, on Hopper (FlashAttention 3 reads e4m3 only), and below 8.9
    (the Triton kernels view every fp8 cache as e4m3); Ada and Blackwell serve it."""
    from advisor.core.weights import kv_refusal

    why = kv_refusal("fp8_e5m2", None, arch, version, False, method)
    assert (why is None) == (refused is None)
    if refused:
        assert refused in why
    # e4m3 is not touched by the e5m2 rules
    assert kv_refusal("fp8", None, "Hopper", version, False, method) is None


def test_fp8_e5m2_is_ranked_and_fitted_where_vllm_serves_it(cli):
    recs = advisor.recommend("llama-3.1-8b", 8192, kv_cache_dtype="fp8_e5m2", top=500)
    gpus = {r.gpu for r in recs}
    assert {"L4", "L40S"} <= gpus and not gpus & {"H100-SXM", "H200", "A10G", "A100-80GB-SXM"}
    assert {"H100-SXM", "H200"} <= {r.gpu for r in advisor.recommend(
        "llama-3.1-8b", 8192, kv_cache_dtype="fp8", top=500)}
    r = cli("fit", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--ctx", "8192",
            "--kv-cache-dtype", "fp8_e5m2")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Unrecognized FP8 dtype" in r.stderr and "hint: --kv-cache-dtype fp8 (e4m3)" in r.stderr
    r = cli("fit", "--model", "llama-3.1-8b", "--gpu", "L40S", "--ctx", "8192",
            "--kv-cache-dtype", "fp8_e5m2", "--quantization", "fp8")
    assert r.exit_code == 2 and "fp8 checkpoints" in r.stderr
    ok, _, _ = advisor.fit("llama-3.1-8b", "L40S", max_model_len=8192,
                           kv_cache_dtype="fp8_e5m2")
    assert ok.fits and ok.kv_cache_dtype == "fp8"
    # served, but as e4m3: the lock's vLLM stores it through Triton (no FlashInfer), which
    # writes every fp8 cache as current_platform.fp8_dtype() (tests/test_lock_install.py)
    assert any("fp8_e5m2 is served as --kv-cache-dtype fp8 is" in n for n in ok.notes)
    for gpu in ("B200", "RTX-PRO-6000"):
        f, _, _ = advisor.fit("llama-3.1-8b", gpu, max_model_len=8192, kv_cache_dtype="fp8_e5m2")
        assert any("Triton backend" in n for n in f.notes), gpu
    plain, _, _ = advisor.fit("llama-3.1-8b", "L40S", max_model_len=8192, kv_cache_dtype="fp8")
    assert not any("Triton backend" in n for n in plain.notes)
    later, _, _ = advisor.fit("llama-3.1-8b", "L40S", max_model_len=8192,
                              kv_cache_dtype="fp8_e5m2", vllm_version="0.14.0")
    assert not any("Triton backend" in n for n in later.notes)  # read in 0.11 only


def test_recommend_and_fit_hold_an_fp8_kv_cache_to_ada_and_newer(cli):
    recs, rej = advisor.recommend("llama-3-8b", 8192, kv_cache_dtype="fp8", top=500,
                                  with_rejected=True)
    gpus = {r.gpu for r in recs}
    assert "A10G" not in gpus and "A100-80GB-SXM" not in gpus and {"L4", "L40S"} <= gpus
    why = {f"{r.provider}:{r.instance}": r for r in rej}
    assert why["aws:g5.2xlarge"].by == "fp8 KV cache"
    assert "A10G" in {r.gpu for r in advisor.recommend("llama-3-8b", 8192)}  # bf16 KV: kept
    r = cli("fit", "--model", "llama-3-8b", "--gpu", "A10G", "--ctx", "8192",
            "--kv-cache-dtype", "fp8")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--kv-cache-dtype auto" in r.stderr
    # the not-fit advice offers an fp8 KV cache only where vLLM can store one
    a10g, _, _ = advisor.fit("llama-3.1-8b", "A10G", max_model_len=131072)
    l4, _, _ = advisor.fit("llama-3.1-8b", "L4", max_model_len=131072)
    assert not any("--kv-cache-dtype fp8" in n for n in a10g.notes)
    assert any("--kv-cache-dtype fp8" in n for n in l4.notes)
    old, _, _ = advisor.fit("llama-3-8b", "A10G", max_model_len=8192, kv_cache_dtype="fp8",
                            vllm_version="0.10.2")
    assert old.kv_cache_dtype == "fp8"


def test_an_fp8_kv_cache_is_rendered_as_it_was_sized(tmp_path):
    """render --kv-cache-dtype fp8 ranks with the fp8 KV cache (no A10G/A100: vLLM 0.11
    cannot store one there) and passes the flag to the server it renders, in user-data's env
    file, the k8s args and the real launcher's command line; the default passes nothing."""
    from advisor.core.layouts import place

    r = advisor.render_files("qwen3-8b", 8192, kv_cache_dtype="fp8")
    assert CAT.gpus[r.instance.gpu.model].architecture not in ("Ampere", "Turing", "Volta")
    assert "ADVISOR_KV_CACHE_DTYPE=fp8\n" in r.files["env/vllm-0.env"]
    plain = advisor.render_files("qwen3-8b", 8192)
    assert "ADVISOR_KV_CACHE_DTYPE" not in plain.files["env/vllm-0.env"]
    k8s = advisor.render_files("qwen3-8b", 8192, kv_cache_dtype="fp8", target="k8s")
    assert any("--kv-cache-dtype" in t and "fp8" in t for t in k8s.files.values())
    with pytest.raises(UserInputError, match="fp8 KV cache"):
        advisor.render_files("qwen3-8b", 8192, kv_cache_dtype="fp8", instance="aws:g5.2xlarge")
    inst = CAT.instance("aws:g6e.2xlarge")
    req = RenderRequest(model="Qwen/Qwen3-8B", max_model_len=8192, vllm_version="0.11.0",
                        api_key_ref="file:/k", kv_cache_dtype="fp8")
    run, bad = _launcher_dry_run(tmp_path, req, place(inst, CAT, 1, 1),
                                 {"ADVISOR_KV_CACHE_DTYPE": "fp8 --x"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip().endswith("--gpu-memory-utilization 0.9 --kv-cache-dtype fp8")
    assert bad.returncode == 1 and "ADVISOR_KV_CACHE_DTYPE must be" in bad.stderr


@pytest.mark.parametrize("gpu,kv,version,refused", [
    ("L4", "fp8", "0.11.0", True),            # Ada: Triton MLA
    ("L40S", "fp8_e4m3", "0.11.0", True),
    ("RTX-PRO-6000", "fp8", "0.11.0", True),  # "Blackwell" by name, 12.0: not CUTLASS MLA
    ("B300", "fp8", "0.11.0", True),          # 10.3: is_device_capability(100) is exact
    ("H100-SXM", "fp8", "0.11.0", False),     # FlashMLA
    ("H200", "fp8", "0.11.0", False),
    ("B200", "fp8", "0.11.0", False),         # CUTLASS MLA
    ("L4", "auto", "0.11.0", False),
    ("L4", "fp8", "0.14.0", False),           # read in 0.11 only
])
def test_an_mla_models_fp8_kv_cache_starts_only_on_flashmla_or_cutlass_mla(gpu, kv, version,
                                                                           refused):
    """vLLM 0.11.0 runs MLA on Triton outside 9.x (FlashMLA) and exactly 10.0 (CUTLASS MLA),
    and TritonMLAImpl refuses an fp8 KV cache (tests/test_lock_install.py reads both)."""
    from advisor.core.weights import capability, mla_kv_refusal

    g = CAT.gpus[gpu]
    no = mla_kv_refusal(kv, None, capability(g), g.id, version, True)
    assert (no is not None) == refused
    if refused:
        assert "TritonMLA V1 with FP8 KV cache not yet supported" in no
    # the checkpoint's own fp8 KV ("auto") counts where the release reads it
    assert mla_kv_refusal("auto", "fp8", 89, "L4", "0.11.0", True) is not None
    assert mla_kv_refusal("auto", "fp8", 89, "L4", "0.11.0", False) is None


def test_capability_is_the_catalogs_where_one_architecture_name_covers_several():
    from advisor.core.weights import ARCH_COMPUTE_CAPABILITY, capability

    assert capability(CAT.gpus["RTX-PRO-6000"]) == 120
    assert capability(CAT.gpus["B200"]) == 100 and capability(CAT.gpus["B300"]) == 103
    assert capability(CAT.gpus["MI300X"]) is None
    for g in CAT.gpus.values():
        if g.vendor == "nvidia":
            assert g.compute_capability is not None, g.id
            if g.id != "RTX-PRO-6000":  # the one whose major the architecture table misses
                # (A10/A10G are Ampere 8.6 where the table says 8.0: same major, below 8.9)
                assert capability(g) // 10 == ARCH_COMPUTE_CAPABILITY[g.architecture] // 10


def test_recommend_and_fit_refuse_an_mla_fp8_kv_cache_where_vllm_would_not_start(cli):
    recs, rej = advisor.recommend("deepseek-v2-lite", 8192, kv_cache_dtype="fp8", top=500,
                                  with_rejected=True)
    gpus = {r.gpu for r in recs}
    assert {"H100-SXM", "H200"} <= gpus and not gpus & {"L4", "L40S", "RTX-PRO-6000", "B300"}
    by = {f"{r.provider}:{r.instance}": r for r in rej}
    assert by["aws:g6.xlarge"].by == "fp8 KV cache" and "Triton MLA" in by["aws:g6.xlarge"].reason
    assert "L4" in {r.gpu for r in advisor.recommend("deepseek-v2-lite", 8192, top=500)}
    r = cli("fit", "--model", "deepseek-v2-lite", "--gpu", "L40S", "--ctx", "8192",
            "--kv-cache-dtype", "fp8")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Triton MLA" in r.stderr and "hint: --kv-cache-dtype auto" in r.stderr
    # a dense model's fp8 KV cache on the same GPU is not this rule's
    assert advisor.fit("llama-3.1-8b", "L40S", max_model_len=8192, kv_cache_dtype="fp8")[0].fits
