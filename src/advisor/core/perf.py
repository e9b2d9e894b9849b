"""Latency and throughput: a roofline with calibrated efficiencies. Pure functions.

A decode step reads every weight once (MoE: the experts the batch touches) and each sequence's
KV cache, so it is memory-bound until the batch's FLOPs catch up; a prefill is compute-bound
once it has enough tokens. Tensor parallelism adds two all-reduces per layer. vLLM adds a fixed
per-step overhead. The efficiencies in :data:`CALIBRATION` were fitted to the published
measurements in ``benchmarks/perf/measurements.yaml`` (see their sources there).
"""

from __future__ import annotations

import functools
import math

from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog.schema import Gpu
from advisor.core.confidence import Confidence, combine, perf_confidence
from advisor.core.model import DTYPE_BYTES, ModelSpec
from advisor.core.sizing import MemoryFit
from advisor.errors import UserInputError

# Efficiency factors and overheads; see benchmarks/perf/measurements.yaml for the fit.
#: achieved / datasheet HBM bandwidth in a decode step
MEMORY_EFFICIENCY = 0.80
#: achieved / datasheet dense BF16 (or FP8) tensor throughput in a prefill
COMPUTE_EFFICIENCY = 0.65
#: scheduler, sampler and launch cost per engine step
STEP_OVERHEAD_S = 0.002
#: latency of one all-reduce between the GPUs of a replica, by interconnect
ALLREDUCE_LATENCY_S = {"nvlink": 8e-6, "infinity-fabric": 10e-6, "pcie": 25e-6}
#: vLLM's custom all-reduce over NVLink, measured on H100 (sgl-project/sglang PR #2904, its
#: table of vLLM's kernel at TP 2/4/8 and 512 B to 1 MiB, without CUDA graphs): a fixed latency
#: per TP size and an effective bandwidth, least squares over those 18 points (within 20% of
#: each): 8.1 / 9.1 / 10.7 µs and 50.5 GB/s of payload (payload = message x 2 (TP - 1) / TP, as
#: _allreduce_s counts it) — a ninth of NVLink's per-direction peak. Other NVLink GPUs scale the
#: bandwidth by their NVLink bandwidth over H100's 900 GB/s: an assumption, not measured.
NVLINK_ALLREDUCE_LATENCY_S = {2: 8.1e-6, 4: 9.1e-6, 8: 10.7e-6}
NVLINK_ALLREDUCE_BYTES_S_H100 = 50.5e9
#: achieved per-direction all-reduce bandwidth over PCIe, by generation, bytes/s
PCIE_BYTES_S = {3: 12e9, 4: 25e9, 5: 50e9}
#: measured pinned host-to-device copy rate per PCIe generation (x16, process on the GPU's
#: socket), bytes/s: what --cpu-offload-gb streams at. Gen3 12.15 GB/s (P100 bandwidthTest,
#: https://github.com/mpicbg-scicomp/gearshifft/pull/82), Gen4 25.13 GB/s (A100 nvbandwidth,
#: https://github.com/NVIDIA/nvbandwidth/issues/42), Gen5 35.2 GB/s (H100 nvbandwidth
#: host_to_device_memcpy_sm, https://github.com/NVIDIA/nvbandwidth/issues/24)
H2D_BYTES_S = {3: 12.15e9, 4: 25.13e9, 5: 35.2e9}
#: one pipeline-stage boundary between instances (send + receive of a step's activations)
#: besides the bytes over the fabric's bandwidth. ASSUMED, not calibrated: no public
#: measurement of vLLM's PP hop latency was found; it is small next to STEP_OVERHEAD_S.
PP_HOP_S = 50e-6
#: the per-step overhead by vLLM release, (first release, seconds, where it comes from); the
#: latest entry at or below a release applies
STEP_OVERHEAD_BY_RELEASE: tuple[tuple[tuple[int, int, int], float, str], ...] = (
    ((0, 7, 0), STEP_OVERHEAD_S, "fitted on benchmarks/perf/measurements.yaml (Qwen2.5-72B on "
     "2 x H100, tenstorrent/tt-inference-server#143, release not recorded)"),
)
#: achieved share of HBM bandwidth in a decode step, by GPU family (Gpu.architecture, lower
#: case); families not listed take MEMORY_EFFICIENCY
MEMORY_EFFICIENCY_BY_FAMILY: dict[str, float] = {}
CALIBRATION = {"memory_efficiency": MEMORY_EFFICIENCY, "compute_efficiency": COMPUTE_EFFICIENCY,
               "step_overhead_s": STEP_OVERHEAD_S}


@functools.lru_cache(maxsize=64)
def step_overhead_s(vllm_version: str) -> float:
    """The engine's fixed cost per step (scheduler, sampler, launches) in this release (looked
    up once per release: every decode and prefill step of a ranking asks)."""
    from advisor.core.engine import parse_version

    v = parse_version(vllm_version)
    value = STEP_OVERHEAD_BY_RELEASE[0][1]
    for since, seconds, _ in STEP_OVERHEAD_BY_RELEASE:
        if v >= since:
            value = seconds
    return value


def memory_efficiency(gpu: Gpu) -> float:
    return MEMORY_EFFICIENCY_BY_FAMILY.get((gpu.architecture or "").lower(), MEMORY_EFFICIENCY)


class Workload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    input_len: int = Field(gt=0)
    output_len: int = Field(gt=0)
    concurrency: int = Field(default=1, gt=0)


class PerfEstimate(BaseModel):
    """What one replica delivers. Times in ms, throughput over all its sequences."""

    model_config = ConfigDict(frozen=True)
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s: float
    requests_per_s: float
    concurrency: int
    decode_bound: str
    e2e_latency_ms: float
    notes: list[str]
    #: how far to trust TTFT and TPOT (and the throughput derived from TPOT): the perf accuracy
    #: benchmark's error on this GPU family, model family and vLLM release, or "extrapolated"
    confidence: Confidence | None = None


def _peak_tflops(gpu: Gpu, dtype_bytes: float, fp8: bool) -> float:
    if fp8 and gpu.fp8_tflops:
        return gpu.fp8_tflops
    value = gpu.bf16_tflops or gpu.fp16_tflops
    if value is None:
        raise UserInputError(f"the catalog has no tensor throughput for {gpu.id}",
                             hint="add bf16_tflops to its gpus.yaml entry (--catalog DIR)")
    return value


def _link(gpu: Gpu, tp: int) -> tuple[float, float]:
    """(all-reduce latency s, bandwidth bytes/s) between the GPUs of one replica."""
    ic = gpu.interconnect
    kind = ic.kind if ic else "pcie"
    lat = ALLREDUCE_LATENCY_S.get(kind, 25e-6)
    if ic and ic.kind != "pcie" and ic.bandwidth_gb_s:
        bw = ic.bandwidth_gb_s / 2 * 1e9  # per direction
    else:
        bw = PCIE_BYTES_S.get(gpu.pcie_gen or 4, 25e9)
    return lat, bw


def _allreduce_s(spec: ModelSpec, gpu: Gpu, tp: int, tokens: int, act_b: float,
                 layers: float | None = None) -> float:
    if tp == 1:
        return 0.0
    lat, bw = _link(gpu, tp)
    message = tokens * spec.hidden_size * act_b
    payload = message * 2 * (tp - 1) / tp  # ring all-reduce
    ic = gpu.interconnect
    if ic is not None and ic.kind == "nvlink" and ic.bandwidth_gb_s:
        # vLLM's custom all-reduce, measured up to 1 MiB messages (see the constants); above
        # that the extra bytes move at the link's per-direction peak (NCCL's regime)
        size = min(NVLINK_ALLREDUCE_LATENCY_S, key=lambda t: (abs(t - tp), t))
        small = NVLINK_ALLREDUCE_BYTES_S_H100 * ic.bandwidth_gb_s / 900
        cap = 2**20 * 2 * (tp - 1) / tp
        one = (NVLINK_ALLREDUCE_LATENCY_S[size] + min(payload, cap) / small
               + max(0.0, payload - cap) / bw)
    else:
        one = lat + payload / bw
    return 2 * (spec.num_layers if layers is None else layers) * one


def _weight_bytes_read(spec: ModelSpec, fit: MemoryFit, batch: int) -> float:
    """Weights one decode step reads per GPU: MoE reads only the experts the batch routes to."""
    total = fit.weights_gib * 2**30
    if spec.moe is None:
        return total
    m = spec.moe
    experts_share = spec.param_counts()["experts"] / max(spec.param_counts()["total"], 1)
    touched = min(1.0, 1 - (1 - m.experts_per_token / m.num_experts) ** batch)
    return total * (1 - experts_share) + total * experts_share * touched


def offload_s(fit: MemoryFit, host_link_bytes_s: float | None) -> float:
    """Streaming the weights held in host memory (--cpu-offload-gb) to the GPU, once per forward
    pass (vLLM's docs: "part of the model is loaded from CPU memory to GPU memory on the fly in
    each model forward pass"), at the host link's measured rate (default: PCIe Gen4 x16,
    :data:`H2D_BYTES_S`). Not calibrated on a vLLM offload run: no public x86 measurement of
    decode with and without --cpu-offload-gb was found."""
    if not fit.cpu_offload_gib:
        return 0.0
    return fit.cpu_offload_gib * 2**30 / (host_link_bytes_s or H2D_BYTES_S[4])


def decode_step_s(spec: ModelSpec, gpu: Gpu, fit: MemoryFit, batch: int, context: float,
                  host_link_bytes_s: float | None = None) -> float:
    act_b = DTYPE_BYTES.get(fit.dtype, 2.0)
    bw = (gpu.memory_bandwidth_gb_s or 0) * 1e9 * memory_efficiency(gpu)
    if bw <= 0:
        raise UserInputError(f"the catalog has no memory bandwidth for {gpu.id}",
                             hint="add memory_bandwidth_gb_s to its gpus.yaml entry")
    # under PP, one GPU holds one stage: its weights, its layers' KV cache and FLOPs
    mem = (_weight_bytes_read(spec, fit, batch) + batch * context * fit.kv_bytes_per_token) / bw
    flops = 2 * spec.param_counts()["active"] * batch / (fit.tp * fit.pp)
    peak = _peak_tflops(gpu, act_b, spec.quantization is not None and
                        spec.quantization.method.startswith("fp8")) * 1e12
    comp = flops / (peak * COMPUTE_EFFICIENCY)
    return max(mem, comp) + _allreduce_s(spec, gpu, fit.tp, batch, act_b,
                                         spec.num_layers / fit.pp) + step_overhead_s(
        fit.vllm_version) + offload_s(
        fit, host_link_bytes_s)


def prefill_s(spec: ModelSpec, gpu: Gpu, fit: MemoryFit, tokens: int,
              hop_s: float = 0.0, host_link_bytes_s: float | None = None) -> float:
    act_b = DTYPE_BYTES.get(fit.dtype, 2.0)
    fp8 = spec.quantization is not None and spec.quantization.method.startswith("fp8")
    peak = _peak_tflops(gpu, act_b, fp8) * 1e12 * COMPUTE_EFFICIENCY
    linear = 2 * spec.param_counts()["active"] * tokens / fit.tp
    attn = 2 * spec.num_layers * tokens * tokens * spec.num_heads * spec.head_dim / fit.tp
    chunk = max(1, fit.max_num_batched_tokens)
    steps = math.ceil(tokens / chunk)
    bw = (gpu.memory_bandwidth_gb_s or 1) * 1e9 * memory_efficiency(gpu)
    # each chunk reads every stage's weights once; under PP the stages run one after another
    weights = fit.weights_gib * fit.pp * 2**30 / bw * steps
    return max((linear + attn) / peak, weights) + steps * (
        _allreduce_s(spec, gpu, fit.tp, min(tokens, chunk), act_b)
        + step_overhead_s(fit.vllm_version)
        + (fit.pp - 1) * hop_s + offload_s(fit, host_link_bytes_s))


def pp_hop_s(spec: ModelSpec, fit: MemoryFit, tokens: int, fabric_gbps: float | None,
             across_nodes: bool, gpu: Gpu) -> float:
    """One pipeline-stage boundary: activations of ``tokens`` tokens, over the fabric between
    instances (plus :data:`PP_HOP_S`) or over the GPU link inside one."""
    act_b = DTYPE_BYTES.get(fit.dtype, 2.0)
    payload = tokens * spec.hidden_size * act_b
    if across_nodes:
        bw = (fabric_gbps or 100) * 1e9 / 8
        return PP_HOP_S + payload / bw
    lat, bw = _link(gpu, 2)
    return lat + payload / bw


def estimate(spec: ModelSpec, gpu: Gpu, fit: MemoryFit, workload: Workload,
             across_nodes: bool = False, fabric_gbps: float | None = None,
             host_link_bytes_s: float | None = None) -> PerfEstimate:
    """TTFT, TPOT and throughput of one replica at ``workload.concurrency`` sequences.

    Under pipeline parallelism (``fit.pp`` > 1) vLLM keeps ``pp`` micro-batches in flight: a
    token of every sequence needs one pass through all stages, so a full round is ``pp`` stage
    steps of ``ceil(c / pp)`` sequences plus ``pp`` stage boundaries (over the instances'
    fabric when ``across_nodes``), and one engine-step overhead.
    """
    notes: list[str] = []
    asked = workload.concurrency
    per_seq = workload.input_len + workload.output_len
    # sequences that run at once: what the KV cache holds at full length, and max_num_seqs;
    # the rest wait in vLLM's queue (their TTFT grows by the wait, see below)
    held = fit.kv_cache_tokens // per_seq if fit.kv_cache_tokens else asked
    c = max(1, min(asked, fit.max_num_seqs, held))
    ctx = workload.input_len + workload.output_len / 2
    pp = fit.pp
    if pp == 1:
        step = decode_step_s(spec, gpu, fit, c, ctx, host_link_bytes_s)
        pre = prefill_s(spec, gpu, fit, workload.input_len, host_link_bytes_s=host_link_bytes_s)
    else:
        mb = max(1, math.ceil(c / pp))
        hop = pp_hop_s(spec, fit, mb, fabric_gbps, across_nodes, gpu)
        over = step_overhead_s(fit.vllm_version)
        stage = decode_step_s(spec, gpu, fit, mb, ctx, host_link_bytes_s) - over
        step = pp * (stage + hop) + over
        chunk = min(workload.input_len, max(1, fit.max_num_batched_tokens))
        pre = prefill_s(spec, gpu, fit, workload.input_len,
                        pp_hop_s(spec, fit, chunk, fabric_gbps, across_nodes, gpu),
                        host_link_bytes_s)
        notes.append(f"pipeline of {pp} stages" + (" across instances" if across_nodes else "")
                     + f": {pp} micro-batches of {mb} sequence(s) in flight")
    if fit.cpu_offload_gib:
        notes.append(f"{fit.cpu_offload_gib:g} GiB of weights per GPU stream from host memory "
                     f"every forward pass ({offload_s(fit, host_link_bytes_s) * 1000:.0f} ms at "
                     f"{(host_link_bytes_s or H2D_BYTES_S[4]) / 1e9:.0f} GB/s)")
    # in steady state every request's prefill is interleaved with the others' decode steps
    tpot = step + pre * (c - 1) / workload.output_len if c > 1 else step
    ttft = pre + (step if c > 1 else 0.0)
    e2e = ttft + tpot * (workload.output_len - 1)
    out_tps = c * workload.output_len / e2e
    if asked > c:
        # a closed loop of `asked` clients (benchmark_serving's --max-concurrency): the replica
        # completes c / e2e requests a second, so by Little's law each request spends
        # asked / (c / e2e) in the system; the part beyond its own e2e is the queue wait
        wait = e2e * (asked / c - 1)
        why = (f"max_num_seqs is {c}" if c == fit.max_num_seqs and c < held else
               f"the KV cache holds {held} of {per_seq} tokens")
        notes.append(f"{asked} sequences asked, {c} run at once ({why}): the other "
                     f"{asked - c} wait in vLLM's queue, {wait * 1000:.0f} ms on average, "
                     "added to TTFT; throughput is that of the running ones")
        ttft += wait
        e2e += wait
    mem_bound = (_weight_bytes_read(spec, fit, c) + c * ctx * fit.kv_bytes_per_token)
    bound = "memory" if mem_bound / ((gpu.memory_bandwidth_gb_s or 1) * 1e9) * 1.0 >= (
        2 * spec.param_counts()["active"] * c / (fit.tp * fit.pp)
        / (_peak_tflops(gpu, 2.0, False) * 1e12)) else "compute"
    return PerfEstimate(ttft_ms=round(ttft * 1000, 2), tpot_ms=round(tpot * 1000, 3),
                        output_tokens_per_s=round(out_tps, 2),
                        requests_per_s=round(out_tps / workload.output_len, 4),
                        concurrency=c, decode_bound=bound, e2e_latency_ms=round(e2e * 1000, 1),
                        notes=notes, confidence=_confidence(gpu.architecture, spec.model_type,
                                                            fit.vllm_version))


@functools.lru_cache(maxsize=256)
def _confidence(architecture: str | None, model_type: str, vllm_version: str) -> Confidence:
    """TPOT's and TTFT's confidence together, once per GPU family, model family and release."""
    return combine(*(perf_confidence(architecture, model_type, vllm_version, m)
                     for m in ("tpot", "ttft")))
