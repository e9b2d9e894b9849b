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
