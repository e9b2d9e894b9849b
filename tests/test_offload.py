"""--cpu-offload-gb: the weights it moves off the GPU and the time they cost every step."""

from __future__ import annotations

import pytest

import advisor
from advisor.core.perf import H2D_BYTES_S


def test_offload_moves_weights_to_the_host_and_streams_them_each_step():
    base, f0 = advisor.estimate("qwen3-8b", "L40S", input_len=1000, output_len=200)
    off, f2 = advisor.estimate("qwen3-8b", "L40S", input_len=1000, output_len=200,
                               cpu_offload_gb=2)
    assert f2.cpu_offload_gib == 2 and f0.cpu_offload_gib == 0
    assert f2.weights_gib == pytest.approx(f0.weights_gib - 2, abs=1e-3)
    assert f2.kv_cache_tokens > f0.kv_cache_tokens  # the room goes to the KV cache
    # one step streams 2 GiB at the Gen4 host-to-device rate; the HBM read shrinks by as much
    stream = 2 * 2**30 / H2D_BYTES_S[4]
    assert off.tpot_ms - base.tpot_ms == pytest.approx(stream * 1000, rel=0.1)
    assert any("stream from host memory" in n for n in off.notes)


def test_offload_cannot_exceed_the_weights_and_perf_takes_a_quantization():
    f, _, _ = advisor.fit("qwen3-8b", "L40S", max_model_len=4096, cpu_offload_gb=1000)
    assert f.weights_gib == 0 and f.cpu_offload_gib > 15
    fp8, _ = advisor.estimate("qwen3-8b", "L40S", input_len=1000, output_len=200,
                              quantization="fp8")
    bf16, _ = advisor.estimate("qwen3-8b", "L40S", input_len=1000, output_len=200)
    assert fp8.tpot_ms < bf16.tpot_ms  # half the bytes to read per step


def test_render_and_provision_deploy_the_offload_they_sized(tmp_path):
    """render/provision --cpu-offload-gb rank with the offload and pass vLLM's flag to the
    server: the env file, the k8s args and the real launcher's command line (bash, dry run);
    a value the launcher cannot read as GiB is refused there."""
    from advisor.core.layouts import place
    from advisor.provisioning import Question, provision
    from advisor.render.cloudinit import RenderRequest, offload_arg
    from tests.test_weights import _launcher_dry_run

    assert [offload_arg(x) for x in (0, 1e-05, 2, 1.23456, 4096)] == [
        "", "", "2", "1.235", "4096"]
    r = advisor.render_files("llama-3-8b", 8192, cpu_offload_gb=4, batch=True,
                             hf_token_ref="aws-ssm:/t")
    assert "ADVISOR_CPU_OFFLOAD_GB=4\n" in r.files["env/vllm-0.env"]
    k8s = advisor.render_files("llama-3-8b", 8192, cpu_offload_gb=4, batch=True,
                               hf_token_ref="aws-ssm:/t", target="k8s")
    assert any("--cpu-offload-gb" in t for t in k8s.files.values())
    res = provision("qwen3-8b", 8192, instance="aws:g6e.2xlarge", name="off", dry_run=True,
                    question=Question(cpu_offload_gb=2, batch=True))
    assert "ADVISOR_CPU_OFFLOAD_GB=2" in res.user_data
    cat = advisor.load_catalog()
    req = RenderRequest(model="Qwen/Qwen3-8B", max_model_len=8192, vllm_version="0.11.0",
                        api_key_ref="file:/k", cpu_offload_gib=2.5)
    run, bad = _launcher_dry_run(tmp_path, req, place(cat.instance("aws:g6e.2xlarge"), cat, 1, 1),
                                 {"ADVISOR_CPU_OFFLOAD_GB": "1e9"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip().endswith("--gpu-memory-utilization 0.9 --cpu-offload-gb 2.5")
    assert bad.returncode == 1 and "must be a number of GiB" in bad.stderr
