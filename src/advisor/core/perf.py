"""Latency and throughput of one vLLM replica: engine steps composed from measured kernels.

A step's time is the sum of its kernels (GEMMs, attention, all-reduces, element-wise), each
read off NVIDIA aiconfigurator's measured vLLM kernel tables through
``kernel_curves.json`` (:mod:`advisor.core.stepmodel`), plus ONE per-step constant per GPU
family x vLLM release band (:data:`STEP_CONSTANT_S`), fitted on the fit split of
``benchmarks/perf/silicon.py`` only. Decode steps carry the chunked prefills of arriving
requests (``max_num_batched_tokens``); TTFT includes the wait behind other prefills and the
step in flight. Pure functions.
"""

from __future__ import annotations

import functools
import math

from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog.schema import Gpu
from advisor.choices import CudagraphMode
from advisor.core import stepmodel
from advisor.core.confidence import Confidence, combine, perf_confidence
from advisor.core.model import DTYPE_BYTES, ModelSpec
from advisor.core.sizing import MemoryFit
from advisor.errors import UserInputError

#: the old roofline's constants, kept for the hop rule below and for callers; the step model
#: (:mod:`advisor.core.stepmodel`) replaced them in decode and prefill
MEMORY_EFFICIENCY = 0.80
COMPUTE_EFFICIENCY = 0.65
#: the per-step constant before issue 28 (fitted on benchmarks/perf/measurements.yaml)
STEP_OVERHEAD_S = 0.002
#: latency of one all-reduce between the GPUs of a replica, by interconnect (the PP hop rule
#: inside one instance uses it; tensor-parallel all-reduces use the measured tables)
ALLREDUCE_LATENCY_S = {"nvlink": 8e-6, "infinity-fabric": 10e-6, "pcie": 25e-6}
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
#: vLLM release bands of the per-step constant: A = before 0.16, B = 0.16 and later
#: (benchmarks/perf/README.md says why; releases before 0.11 take band A, uncalibrated)
BAND_B_SINCE = (0, 16, 0)
#: THE fitted constants: seconds per engine step that no kernel table times (scheduler,
#: sampler, input preparation, gaps between CUDA-graph replays), per GPU family x band.
#: Fitted by `python benchmarks/perf/run.py --fit` on the fit split of aiconfigurator's
#: silicon_sample.csv only (gpt-oss-120b on H100/H200/B200, MiniMax-M2.5 on B300; the
#: minimiser of the median |log(pred/meas)| of TPOT over that cell's fit rows). Evidence:
STEP_CONSTANT_S: dict[tuple[str, str], float] = {
    # band B's value: hopper/A's own fit cell (11 row groups, 10 of them gpt-oss-120b on H200
    # at TP 1, unrecorded 2025 release; the H100 0.11.2 rows are all queued servers) gave
    # 4.06 ms (3.87 ms since the element-wise launch floor, 3.49 ms after item 18, 3.38 ms
    # after item 20's decode attention grid: `run.py --fit` prints it), absorbing a TP-1
    # kernel error that the same shape shows in band B (run.py POOLED; adopted after the
    # first report look, both figures in benchmarks/perf/README.md)
    ("hopper", "A"): 0.00194,
    # 94 fit row groups: gpt-oss-120b on H100 and H200 at TP 1-8, vLLM 0.18.0; 0.037 (0.044
    # before its prefill chunks took gpt-oss's measured MXFP4 kernel, README.md item 13;
    # 1.90 ms before the CUDA-graph flags and the piecewise host term, item 15)
    ("hopper", "B"): 0.00194,
    # 66 fit row groups: gpt-oss-120b on B200 at TP 1-8, vLLM 0.15.1 and unrecorded; 0.072
    # (1.29 ms and 0.074 before item 20's 2-D decode attention; 1.34 ms before item 15)
    ("blackwell", "A"): 0.0013,
    # 92 fit row groups: MiniMax-M2.5 (block fp8, NVFP4, measured fused-MoE curves) on B300
    # at TP 1-8, vLLM 0.19.0 and nightly; 0.048 (1.83 ms and 0.052 before item 20; 1.76 ms
    # before item 15)
    ("blackwell", "B"): 0.00186,
}
#: the most tokens a step may schedule and still replay a captured CUDA graph: vLLM's default
#: capture list stops at min(2 x max_num_seqs, 512) tokens (vllm/config/vllm.py,
#: set_cudagraph_sizes: "max_graph_size = min(max_num_seqs * 2, 512)"); a step above it (a
#: prompt's chunk of more tokens) runs the compiled model without a graph, every kernel
#: launched from the host
CUDA_GRAPH_MAX_TOKENS = 512
#: the share of its output a running sequence holds in the KV cache on average: it grows one
#: token a step from its prompt to prompt + output, and vLLM allocates blocks as it goes
#: (:func:`estimate`, where ``held`` is computed)
KV_LIVE_SHARE = 0.5
#: the first release whose default cudagraph_mode is FULL_AND_PIECEWISE: vLLM PR #25444
#: ("Change default CUDAGraphMode from PIECEWISE to FULL_AND_PIECEWISE", merged 2025-09-23,
#: after v0.10.2 and in v0.11.0); before it every step replayed piecewise graphs
FULL_AND_PIECEWISE_SINCE = (0, 11, 0)
#: host time per decoder layer of a step that runs without a CUDA graph (every kernel launched
#: from the host, with its Python-side work). FITTED with :data:`FRONTEND_S` and
#: :data:`FRONTEND_PER_TOKEN_S` by ``python benchmarks/perf/run.py --fit-host`` on the fit
#: split's stated-protocol rows: the least sum of median |log err| of TPOT (263 row groups) and
#: TTFT (92: MiniMax-M2.5 on B300 at TP 1-8; gpt-oss-120b's TTFT is left out, run.py
#: EAGER_FIT_EXCLUDES) over 0-0.4 ms x 0-40 ms x 0-12 us/token (245 points; 0-0.3 ms and
#: 0-8 us before a trial optimum sat on both edges; the extension moved nothing: 0.40 ms
#: scores 0.190, 10 us a token 0.147), the per-step constants refitted at every grid point:
#: 0.1392 here (TPOT 0.060, TTFT 0.080), the runner-up 0.30 ms + 6 us a token 0.1397, the
#: point before 0.20 ms + 10 ms + 6 us 0.1415 (it was the optimum, 0.1436 / 0.1437, until the
#: MoE checkpoints' bf16 attention, model._scope, benchmarks/perf/README.md item 12). With
#: each GEMM's memory term at the bytes it moves (stepmodel.gemm_s) and before the all-reduce
#: curve's latency-bound rule (stepmodel._ar_table): the same point, 0.1445; the point before
#: (0.20 ms, no per-request term) 0.171. Before the GEMM change:
#: 0.354 with no host-side term (0.459 after it), 0.178 at the earlier TTFT-only fit's 0.30 ms,
#: 0.122 at 0.20 ms + 6 us a token (prefill GEMMs of small TP slices charged 3-11x their
#: measured time). Evidence for the form: aiconfigurator adds the same kind of term, a
#: per-layer "CPU-side dispatch overhead" on every vLLM prefill, in full (p = 1), at 0.8 ms a
#: layer calibrated on its own silicon corpus and its own kernel composition (aic-core
#: sdk/backends/vllm_backend.py, _prefill_dispatch_overhead_ms, @095f58a5).
#: Refitted with :data:`PIECEWISE_LAYER_S` when the InferenceX rows took their CUDA-graph
#: flags (benchmarks/perf/README.md item 15): 630 points (piecewise 0-0.4 ms, at most the
#: eager value), 0.1352 here (TPOT 0.056, TTFT 0.079) with 10 ms + 6 us a token, the
#: runner-up 0.40 ms eager + 0.30 piecewise 0.1363; the best with no piecewise term 0.1681
#: (0.40 ms, on the edge), against 0.1371 for the previous point without the flags.
EAGER_LAYER_S = 0.0003
#: host time per decoder layer of a step that replays piecewise CUDA graphs: the graph pieces
#: between attention layers replay, attention itself is launched from the host ("piecewise
#: cudagraph capture, excluding cudagraph-unsupported operations (mainly attention)", vLLM's
#: design/cuda_graphs.md, PR #20059). FITTED with :data:`EAGER_LAYER_S` (see there): 0.20 ms,
#: two thirds of the eager step's; best at 0, 0.1, 0.3, 0.4 ms: 0.1681, 0.1496, 0.1363,
#: 0.1794. That is more than attention's launches alone should cost: the term most likely
#: also stands for prefill chunks of 512-2048 tokens whose kernels the curves time too fast
#: (MiniMax-M2.5 on B300 is the only TTFT family in the fit), so it is a fitted term, not a
#: measured launch cost
PIECEWISE_LAYER_S = 0.0002
#: host time per decoder layer of a step of decodes alone under PIECEWISE (vLLM's default
#: before 0.11.0, :data:`FULL_AND_PIECEWISE_SINCE`): graph pieces replay and attention is
#: launched from the host, as in a prompt step, but no prompt chunk runs. Evidence
#: (benchmarks/perf/README.md item 18): the fit split's PIECEWISE decode rows are 11 gpt-oss-120b
#: row groups on H100/H200 of 2025-11-02 (InferenceX's v0.10.2 image, no cudagraph_mode flag).
#: At 0.20 ms a layer added (what every PIECEWISE step paid before) the fit's TPOT p90 goes
#: 17.2 -> 18.8% and the term loses every one of 1,000 resamples; overlapped with the kernels
#: (the longer of the two) at 0.05-0.20 ms it wins at most 78%. 0.03-0.05 ms added wins 91-96%
#: of the resamples, but those 11 groups are one model (36 layers) in one cell, hopper/A, whose
#: constant ``run.POOLED`` takes from hopper/B: 36 x 0.03-0.05 ms = 1.1-1.8 ms spans that
#: cell's own fit less the pooled value (3.49 - 1.94 = 1.55 ms), so on this split the term IS
#: the pooled cell's constant under another name, not identifiable; and the report's
#: Llama-3.1-70B on H100/H200 (the same v0.10.2 image, PIECEWISE too) goes from +4.0 to +24.9%
#: signed at 0.05 ms. So none is charged: a PIECEWISE decode step costs what a full graph's
#: does. Not seen in any row, so not modelled: small models, whose decode gains up to 38% from
#: full graphs (vLLM PR #20059)
PIECEWISE_DECODE_LAYER_S = 0.0
#: families without fit rows take the nearest fitted family's constant (uncalibrated: their
#: confidence is "extrapolated" because accuracy.json has no runs for them)
STEP_CONSTANT_FAMILY: dict[str, str] = {"blackwell": "blackwell", "blackwell-ultra": "blackwell"}


def release_band(vllm_version: str) -> str:
    from advisor.core.engine import parse_version

    return "B" if parse_version(vllm_version) >= BAND_B_SINCE else "A"


def constant_cell(vllm_version: str, architecture: str | None) -> tuple[str, str]:
    """(GPU family, release band) of the per-step constant that applies."""
    from advisor.core.confidence import family_key

    return (STEP_CONSTANT_FAMILY.get(family_key(architecture or ""), "hopper"),
            release_band(vllm_version))


def _step_constant(vllm_version: str, architecture: str | None) -> tuple[float, str]:
    fam, band = constant_cell(vllm_version, architecture)
    return STEP_CONSTANT_S[(fam, band)], f"{fam}/{band}"


CALIBRATION = {"step_constant_s": STEP_CONSTANT_S}


def memory_efficiency(gpu: Gpu) -> float:
    """The old roofline's achieved share of HBM bandwidth (kept for the PP hop rule's callers)."""
    return MEMORY_EFFICIENCY


def check_context(input_len: int, output_len: int, ctx: int) -> None:
    """A request of ``input_len`` + ``output_len`` tokens must fit ``ctx`` (max_model_len):
    vLLM's OpenAI server answers a longer one with a 400 ("This model's maximum context length
    is ..."), so there is nothing to time or rank."""
    if input_len + output_len > ctx:
        raise UserInputError(
            f"input ({input_len}) + output ({output_len}) tokens exceed --ctx {ctx}",
            hint="raise --ctx or shorten --input-len / --output-len")


class Workload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    input_len: int = Field(gt=0)
    output_len: int = Field(gt=0)
    concurrency: int = Field(default=1, gt=0)
    #: prompts a benchmark sends in all (vLLM bench's --num-prompts); None = steady state only.
    #: A closed loop starts all ``concurrency`` requests at once, so the first wave queues
    #: behind each other's prefills: that share of requests waits longer for its first token.
    num_prompts: int | None = Field(default=None, gt=0)


class ServerFlags(BaseModel):
    """vLLM server settings the step model reads beyond the memory fit's (all optional: None
    is what the release does by default, :mod:`advisor.core.engine`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: ``--compilation-config`` ``pass_config.fuse_allreduce_rms`` (``enable_fi_allreduce_fusion``
    #: before 0.12): the fused all-reduce + RMSNorm pass (stepmodel.Fusion). None = the
    #: release's -O2 default (on at TP > 1 on Hopper and B200 from 0.16, B300 from 0.19)
    fuse_allreduce_rms: bool | None = None
    #: ``VLLM_FLASHINFER_ALLREDUCE_FUSION_THRESHOLDS_MB``: TP size -> the largest fused
    #: all-reduce in MB, instead of the release's sizes
    fusion_thresholds_mb: dict[int, float] | None = None
    #: ``--max-cudagraph-capture-size`` (``--cuda-graph-sizes N`` before 0.11): the most tokens
    #: a step may schedule and still replay a captured graph; None = vLLM's default
    #: min(2 x max_num_seqs, :data:`CUDA_GRAPH_MAX_TOKENS`)
    max_cudagraph_capture_size: int | None = Field(default=None, ge=1, le=1 << 20)
    #: ``compilation_config.cudagraph_mode``; None = the release's default,
    #: FULL_AND_PIECEWISE. Which steps each mode launches from the host: :func:`host_s`
    cudagraph_mode: CudagraphMode | None = None


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
    #: the median inter-token latency (what vLLM's benchmark prints as "Median ITL"): the
    #: step most tokens see. TPOT is the mean step, which includes the steps that carry a
    #: prompt's chunks; where fewer than half the steps carry one (every load whose prompts
    #: are short against their outputs, or few), those steps fall outside the median and
    #: this is the plain decode step; otherwise the mixed step
    itl_median_ms: float | None = None
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


def fusion(fit: MemoryFit, gpu: Gpu, server: ServerFlags | None = None) -> stepmodel.Fusion:
    """The fused all-reduce + RMSNorm pass as this replica runs it: on where the server asks
    for it, else where the release turns it on by default (TP > 1, one pipeline stage: vLLM
    keeps it off under pipeline parallelism in the releases that have it on by default,
    vllm-project/vllm#35426); the largest all-reduce its kernel takes, by the GPU's compute
    capability and the TP size; nothing on a GPU whose capability the release has no size
    for (vLLM then disables the pass itself)."""
    on = server.fuse_allreduce_rms if server is not None else None
    thresholds = server.fusion_thresholds_mb if server is not None else None
    return _fusion(fit.vllm_version, gpu.id, fit.tp, fit.pp, on,
                   tuple(sorted(thresholds.items())) if thresholds else None)


@functools.lru_cache(maxsize=256)
def _fusion(vllm_version: str, gpu_id: str, tp: int, pp: int, on: bool | None,
            thresholds: tuple[tuple[int, float], ...] | None) -> stepmodel.Fusion:
    from advisor.core.engine import profile

    cap = stepmodel.COMPUTE_CAPABILITY.get(gpu_id)
    rule = profile(vllm_version).allreduce_fusion
    if on is None:
        on = cap in rule.default_on and pp == 1
    if not on or tp <= 1 or cap is None:
        return stepmodel.NO_FUSION
    limit = rule.max_bytes(cap, tp)
    if thresholds is not None and limit:
        limit = float(dict(thresholds).get(tp, limit / 2**20)) * 2**20
    return stepmodel.Fusion(max_bytes=limit, moe=rule.moe) if limit else stepmodel.NO_FUSION


def step_overhead_s(vllm_version: str, architecture: str | None = None) -> float:
    """The per-step constant of this GPU family and release band (:data:`STEP_CONSTANT_S`)."""
    return _step_constant(vllm_version, architecture)[0]


def decode_step_s(spec: ModelSpec, gpu: Gpu, fit: MemoryFit, batch: int, context: float,
                  host_link_bytes_s: float | None = None,
                  step_constant_s: float | None = None,
                  server: ServerFlags | None = None) -> float:
    """One decode step of ``batch`` sequences at ``context`` tokens of history on one GPU of the
    replica (under PP: one stage), composed from the measured kernel curves, plus the per-step
    constant and any --cpu-offload-gb streaming."""
    const = (step_overhead_s(fit.vllm_version, gpu.architecture) if step_constant_s is None
             else step_constant_s)
    return (with_host(_cost(spec, gpu, fit, batch, context, fuse=fusion(fit, gpu, server)),
                      host_s(spec, fit, batch, server, prompt=False))
            + const + offload_s(fit, host_link_bytes_s))


def expert_parallel_note() -> str:
    """How an expert-parallel replica is timed, and how well that did on public runs: the
    ``expert_parallel`` section of accuracy.json (benchmarks/perf/run.py, the rows run with
    --enable-expert-parallel over their TP group, never fitted on)."""
    from advisor.core import confidence

    ep = confidence.load().get("expert_parallel")
    if not ep:
        return ("expert parallel (--enable-expert-parallel) is timed as TP over the same expert "
                "bytes and FLOPs per GPU, with even routing (no public run checked)")
    t, f = ep["tpot"], ep["ttft"]
    return (f"expert parallel (--enable-expert-parallel) is timed as TP over the same expert "
            f"bytes and FLOPs per GPU, with even routing; on {t['n']} public expert-parallel "
            f"runs TPOT was within {t['median_pct']:g}% (median; p90 {t['p90_pct']:g}%, "
            f"signed {t['signed_median_pct']:+g}%) and TTFT {f['median_pct']:g}% (signed "
            f"{f['signed_median_pct']:+g}%: "
            + ("estimates too fast" if f["signed_median_pct"] < -2 else
               "estimates too slow" if f["signed_median_pct"] > 2 else "no lean") + ")")


def _cost(spec: ModelSpec, gpu: Gpu, fit: MemoryFit, decode: float, context: float,
          prefill_tokens: float = 0.0, prompt_len: float = 0.0,
          fuse: stepmodel.Fusion = stepmodel.NO_FUSION) -> float:
    if not gpu.memory_bandwidth_gb_s:
        raise UserInputError(f"the catalog has no memory bandwidth for {gpu.id}",
                             hint="add memory_bandwidth_gb_s to its gpus.yaml entry")
    _peak_tflops(gpu, 2.0, False)  # raises when the catalog has no tensor throughput
    k = stepmodel.kernels(gpu)
    return stepmodel.step_cost(spec, k, fit.tp, fit.pp, fit.kv_cache_dtype,
                               _kv_bytes(fit), int(math.ceil(decode)), context,
                               prefill_tokens, prompt_len, fuse).total


def host_s(spec: ModelSpec, fit: MemoryFit, tokens: float,
           server: ServerFlags | None = None, prompt: bool = True) -> float:
    """The host's time in one step of ``tokens`` scheduled tokens (``prompt``: some of them are
    prompt tokens), combined with the kernels' time by :func:`with_host`.

    Up to the capture size (the server's ``max_cudagraph_capture_size``, else vLLM's default
    :data:`CUDA_GRAPH_MAX_TOKENS`) a step replays captured graphs: under FULL_AND_PIECEWISE (the
    release's default ``cudagraph_mode`` from 0.11.0, :func:`default_cudagraph_mode`) a step of
    decodes alone replays one full graph (no host time) and a prompt-carrying step piecewise
    graphs, with attention launched from the host between the pieces
    (:data:`PIECEWISE_LAYER_S` a layer); PIECEWISE (the default before 0.11.0) does that for
    every step, a step of decodes alone at :data:`PIECEWISE_DECODE_LAYER_S` a layer; FULL
    replays full graphs for every step. A step above the capture size, a
    prompt-carrying step under FULL_DECODE_ONLY and every step under NONE run without a graph:
    :data:`EAGER_LAYER_S` a layer."""
    mode = (server.cudagraph_mode if server is not None else None) or default_cudagraph_mode(
        fit.vllm_version)
    size = server.max_cudagraph_capture_size if server is not None else None
    limit = size if size is not None else min(2 * max(1, fit.max_num_seqs),
                                              CUDA_GRAPH_MAX_TOKENS)
    layers = spec.num_layers / max(1, fit.pp)
    if mode == "NONE" or tokens > limit or (mode == "FULL_DECODE_ONLY" and prompt):
        return layers * EAGER_LAYER_S
    if prompt and mode in ("PIECEWISE", "FULL_AND_PIECEWISE"):
        return layers * PIECEWISE_LAYER_S
    if mode == "PIECEWISE":
        return layers * PIECEWISE_DECODE_LAYER_S
    return 0.0


@functools.cache
def default_cudagraph_mode(vllm_version: str) -> str:
    """vLLM's default ``cudagraph_mode`` in ``vllm_version`` (:data:`FULL_AND_PIECEWISE_SINCE`)."""
    from advisor.core.engine import parse_version

    return ("FULL_AND_PIECEWISE" if parse_version(vllm_version) >= FULL_AND_PIECEWISE_SINCE
            else "PIECEWISE")


#: how a graphless step's kernels and host time combine: (gpu^p + host^p)^(1/p); p = inf is
#: the longer of the two (perfect overlap), p = 1 their sum (none). FITTED with
#: :data:`EAGER_LAYER_S` by the first eager fit (TTFT only, p in {1, 1.25, 1.5, 2, 3, inf}):
#: 1, the host's work is not hidden behind the kernels; ``--fit-host`` keeps it
EAGER_OVERLAP_P = 1.0

#: the server's front end, outside the engine's steps, as a client's TTFT sees it: the API
#: server takes the HTTP request, tokenizes the prompt (per token), hands it to the engine
#: core, then detokenizes and streams the first token. Measured elsewhere: a client's TTFT
#: 8.4-12.2 ms above vLLM's own time_to_first_token metric at 512-token prompts
#: (vllm-project/vllm PR #54628, 2026); tokenization at 10-21 us a token in a serving front end
#: (tenstorrent/tt-inference-server issue #2173); a faster tokenizer alone cuts vLLM's TTFT by
#: 10-20% (vllm-project/vllm PR #44399). FITTED with :data:`EAGER_LAYER_S` (see there): 10 ms
#: a request and 6 us a prompt token (15.5 ms for InferenceX's mean 1k prompt of 922 tokens,
#: 54 ms for its mean 8k prompt of 7,373; the fit split has only those two lengths, so a
#: per-request and a per-token term trade against each other). Before item 15 (CUDA-graph
#: flags, piecewise term) the optimum was no per-request term and 8 us a token
FRONTEND_S = 0.010
FRONTEND_PER_TOKEN_S = 6e-6


def with_host(gpu_s: float, host_s: float) -> float:
    """A step's time from its kernels' and its host launches' (:data:`EAGER_OVERLAP_P`)."""
    if host_s <= 0:
        return gpu_s
    if math.isinf(EAGER_OVERLAP_P):
        return max(gpu_s, host_s)
    p = EAGER_OVERLAP_P
    return float((gpu_s ** p + host_s ** p) ** (1 / p))


def _kv_bytes(fit: MemoryFit) -> float:
    return 1.0 if fit.kv_cache_dtype.startswith("fp8") else DTYPE_BYTES.get(fit.dtype, 2.0)


def _chunks(fit: MemoryFit, tokens: int, decoding: int) -> tuple[int, float]:
    """(chunks, tokens per chunk) of one prompt under chunked prefill: each step's token budget
    (max_num_batched_tokens) less one token per decoding sequence."""
    room = max(1, max(1, fit.max_num_batched_tokens) - decoding)
    n = max(1, math.ceil(tokens / room))
    return n, tokens / n


def prefill_s(spec: ModelSpec, gpu: Gpu, fit: MemoryFit, tokens: int,
              hop_s: float = 0.0, host_link_bytes_s: float | None = None,
              step_constant_s: float | None = None, server: ServerFlags | None = None) -> float:
    """One prompt alone, in chunks of max_num_batched_tokens; under PP every chunk passes the
    stages one after another."""
    const = (step_overhead_s(fit.vllm_version, gpu.architecture) if step_constant_s is None
             else step_constant_s)
    n, chunk = _chunks(fit, tokens, 0)
    one = with_host(_cost(spec, gpu, fit, 0, 0.0, chunk, tokens, fusion(fit, gpu, server)),
                    host_s(spec, fit, chunk, server))
    return n * (fit.pp * one + const + (fit.pp - 1) * hop_s + offload_s(fit, host_link_bytes_s))


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
             host_link_bytes_s: float | None = None,
             step_constant_s: float | None = None,
             server: ServerFlags | None = None) -> PerfEstimate:
    """TTFT, TPOT and throughput of one replica at ``workload.concurrency`` sequences;
    ``server``: vLLM settings beyond the fit's (None: the release's defaults).

    Under pipeline parallelism (``fit.pp`` > 1) vLLM keeps ``pp`` micro-batches in flight: a
    token of every sequence needs one pass through all stages, so a full round is ``pp`` stage
    steps of ``ceil(c / pp)`` sequences plus ``pp`` stage boundaries (over the instances'
    fabric when ``across_nodes``), and one engine-step overhead.
    """
    notes: list[str] = []
    source = stepmodel.curve_source(gpu)
    transferred = source if source != gpu.id else None
    asked = workload.concurrency
    # sequences that run at once: max_num_seqs, and what the KV cache holds at the tokens a
    # running sequence occupies on average; the rest wait in vLLM's queue (their TTFT grows by
    # the wait, see below). vLLM reserves nothing for a sequence's future output: each step
    # allocates blocks for the tokens it schedules, a waiting request is admitted when its
    # prompt's blocks fit and no running one was preempted that step, and a running one that
    # finds no free block preempts the newest (vllm/v1/core/sched/scheduler.py, schedule():
    # kv_cache_manager.allocate_slots(request, num_new_tokens), self.running.pop()). So over
    # its life a sequence holds its prompt and, on average, half its output: KV_LIVE_SHARE
    # (benchmarks/perf/README.md item 19; full length before)
    per_seq = workload.input_len + workload.output_len * KV_LIVE_SHARE
    held = fit.sequences_held(per_seq) if fit.kv_cache_tokens else asked
    c = max(1, min(asked, fit.max_num_seqs, held))
    ctx = workload.input_len + workload.output_len / 2
    pp = fit.pp
    const = (step_overhead_s(fit.vllm_version, gpu.architecture) if step_constant_s is None
             else step_constant_s)
    isl, osl = workload.input_len, workload.output_len
    fuse = fusion(fit, gpu, server)
    if pp == 1:
        off = offload_s(fit, host_link_bytes_s)
        step = (with_host(_cost(spec, gpu, fit, c, ctx, fuse=fuse),
                          host_s(spec, fit, c, server, prompt=False)) + const + off)
        # a prompt arriving while c - 1 others decode rides in their steps, chunk by chunk
        n, chunk = _chunks(fit, isl, c - 1)
        mixed = (with_host(_cost(spec, gpu, fit, c - 1, ctx, chunk, isl, fuse),
                           host_s(spec, fit, c - 1 + chunk, server)) + const + off)
        own = n * mixed
        # steady state: every osl steps each of the others is replaced by a new request, whose
        # n chunks make n of the steps mixed ones (TPOT is the mean step)
        arrivals = (c - 1) / osl
        tpot = step + arrivals * n * max(0.0, mixed - step)
        itl = step if arrivals * n < 0.5 else max(step, mixed)
        # TTFT: the step in flight (half of one on average), the wait behind other prompts
        # (M/D/1 on the prefill slots: prompts per step that fit the token budget), own chunks
        per_step = max(1, int((max(1, fit.max_num_batched_tokens) - (c - 1)) // max(1, isl)))
        rho = min(0.9, arrivals * n / per_step)
        ttft = own + (step / 2 if c > 1 else 0.0) + rho / (2 * (1 - rho)) * own
        if workload.num_prompts and c > 1:
            # the first wave: all c prompts at once, in steps of the whole token budget
            budget = max(1, fit.max_num_batched_tokens)
            first = min(budget, c * isl)
            full = (with_host(_cost(spec, gpu, fit, 0, 0.0, first, isl, fuse),
                              host_s(spec, fit, first, server)) + const + off)
            wave = (math.ceil(c * isl / budget) + 1) / 2 * full
            share = min(1.0, c / workload.num_prompts)
            ttft = (1 - share) * ttft + share * wave
    else:
        mb = max(1, math.ceil(c / pp))
        hop = pp_hop_s(spec, fit, mb, fabric_gbps, across_nodes, gpu)
        stage = decode_step_s(spec, gpu, fit, mb, ctx, host_link_bytes_s, const, server) - const
        step = pp * (stage + hop) + const
        chunk_len = min(isl, max(1, fit.max_num_batched_tokens))
        pre = prefill_s(spec, gpu, fit, isl,
                        pp_hop_s(spec, fit, chunk_len, fabric_gbps, across_nodes, gpu),
                        host_link_bytes_s, const, server)
        notes.append(f"pipeline of {pp} stages" + (" across instances" if across_nodes else "")
                     + f": {pp} micro-batches of {mb} sequence(s) in flight")
        tpot = step + pre * (c - 1) / osl if c > 1 else step
        # the steps a prompt's chunks pass through are the minority below half of all steps
        itl = step if (c - 1) / osl * math.ceil(isl / chunk_len) < 0.5 else tpot
        ttft = pre + (step if c > 1 else 0.0)
    # the API server's part of the first token: the request and its prompt's tokenization
    ttft += FRONTEND_S + FRONTEND_PER_TOKEN_S * isl
    if fit.cpu_offload_gib:
        notes.append(f"{fit.cpu_offload_gib:g} GiB of weights per GPU stream from host memory "
                     f"every forward pass ({offload_s(fit, host_link_bytes_s) * 1000:.0f} ms at "
                     f"{(host_link_bytes_s or H2D_BYTES_S[4]) / 1e9:.0f} GB/s)")
    e2e = ttft + tpot * (workload.output_len - 1)
    out_tps = c * workload.output_len / e2e
    full = fit.sequences_held(workload.input_len + workload.output_len)
    if fit.kv_cache_tokens and c > full:
        notes.append(
            f"the KV cache holds {c} running sequences at their average size (prompt + half "
            f"the output) but only {full} at full length: vLLM preempts the newest when it runs "
            "out and recomputes it later, which this estimate does not charge; with long "
            "outputs the queue can be far longer than estimated (a measured 1k in / 8k out run "
            "on two H100s at 64 sequences waited 31 s for its first token, estimated 0.5 s)")
    if asked > c:
        # a closed loop of `asked` clients (benchmark_serving's --max-concurrency): the replica
        # completes c / e2e requests a second, so by Little's law each request spends
        # asked / (c / e2e) in the system; the part beyond its own e2e is the queue wait
        wait = e2e * (asked / c - 1)
        why = (f"max_num_seqs is {c}" if c == fit.max_num_seqs and c < held else
               f"the KV cache holds {held} sequences of {per_seq:.0f} tokens on average: "
               f"prompt + half the output")
        notes.append(f"{asked} sequences asked, {c} run at once ({why}): the other "
                     f"{asked - c} wait in vLLM's queue, {wait * 1000:.0f} ms on average, "
                     "added to TTFT; throughput is that of the running ones")
        ttft += wait
        e2e += wait
    if transferred:
        notes.append(f"no kernel tables for {gpu.id}: {source}'s measured curves, scaled by "
                     "datasheet bandwidth and peaks")
    if fit.expert_parallel:
        notes.append(expert_parallel_note())
    if spec.linear_attention is not None:
        notes.append(f"{spec.linear_attention.label} layers: their projections on the "
                     "measured GEMM curves, their own kernels (conv, gating, the scan) charged "
                     "as the bytes they move, which no kernel table measures "
                     "(stepmodel.linear_mixer_s)")
    mem_bound = (_weight_bytes_read(spec, fit, c) + c * ctx * fit.kv_bytes_per_token)
    bound = "memory" if mem_bound / ((gpu.memory_bandwidth_gb_s or 1) * 1e9) * 1.0 >= (
        2 * spec.param_counts()["active"] * c / (fit.tp * fit.pp)
        / (_peak_tflops(gpu, 2.0, False) * 1e12)) else "compute"
    return PerfEstimate(ttft_ms=round(ttft * 1000, 2), tpot_ms=round(tpot * 1000, 3),
                        itl_median_ms=round(itl * 1000, 3),
                        output_tokens_per_s=round(out_tps, 2),
                        requests_per_s=round(out_tps / workload.output_len, 4),
                        concurrency=c, decode_bound=bound, e2e_latency_ms=round(e2e * 1000, 1),
                        notes=notes, confidence=_confidence(gpu.architecture, spec.model_type,
                                                            fit.vllm_version, transferred))


@functools.lru_cache(maxsize=256)
def _confidence(architecture: str | None, model_type: str, vllm_version: str,
                transferred_from: str | None = None) -> Confidence:
    """TPOT's and TTFT's confidence together, once per GPU family, model family and release;
    a GPU without its own kernel tables says whose curves it took."""
    conf = combine(*(perf_confidence(architecture, model_type, vllm_version, m)
                     for m in ("tpot", "ttft")))
    if transferred_from is None:
        return conf
    return conf.model_copy(update={
        "transferred_from": transferred_from,
        "why": f"{conf.why}; kernel curves transferred from {transferred_from} (datasheet "
               "ratios, no tables measured on this GPU)"})
