"""vLLM engine steps composed from measured kernel curves (issue 28, item 2). Pure functions.

One engine step runs, per layer: the linear layers (GEMMs), attention over each sequence's KV
cache, two all-reduces under tensor parallelism and a few element-wise kernels; then the LM head;
plus a per-step constant for what no kernel table times (scheduler, sampler, gaps between
kernels). Each kernel's time comes from ``kernel_curves.json`` (written by
``benchmarks/perf/kernel_curves.py`` from NVIDIA aiconfigurator's measured vLLM tables; see
``benchmarks/perf/KERNELS.md`` for the definitions):

* a GEMM of n x k per-GPU weights over m tokens takes the longer of its memory time (weights +
  activations over HBM bandwidth x ``decode_gemm`` efficiency at that matrix size) and its
  compute time (2mnk over the dtype's dense peak x ``prefill_gemm`` efficiency at that m); the
  fp8 tables time dynamic activation scales, so a checkpoint with static scales (ModelOpt FP8)
  is charged less the measured ``fp8_activation_quant`` work it does not run (:func:`linear_s`);
* decode attention reads each sequence's KV at ``decode_attention`` efficiency (by history and
  the KV bytes of the call where the tables support it),
  never better than a GEMM moving the same bytes (small calls are launch-bound);
* a prompt's attention costs its causal FLOPs at ``context_attention`` efficiency (by length);
* an all-reduce is the measured CUDA-graph custom all-reduce, interpolated in log-log space by
  message bytes, for the replica's GPU count; where the server runs vLLM's fused all-reduce +
  RMSNorm pass (``fuse_allreduce_rms``: on by default from a release on, or asked for) and the
  message is within the fused kernel's size limit, it is TensorRT-LLM's measured all-reduce
  (the kernels FlashInfer's fusion ports) and the RMSNorm after it, and the static fp8 quant
  after that, are no longer separate kernels (:class:`Fusion`).

GPUs without tables take the nearest architecture's curves (:data:`TRANSFER`), with their own
datasheet bandwidth and peaks (the curves are fractions of those), and all-reduce times scaled
by the link bandwidth ratio; :func:`kernels` records which GPU they came from so the confidence
label can say "transferred from X".

The JSON is read lazily with the standard library on the first estimate (no pyarrow/pandas on
the runtime path: ``tests/test_kernel_curves.py`` checks).
"""

from __future__ import annotations

import bisect
import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from advisor.catalog.schema import Gpu
from advisor.core.model import ModelSpec

CURVES_FILE = "kernel_curves.json"
MIB = 2**20

#: catalog GPUs without kernel tables -> the catalog GPU whose curves they take: same
#: architecture and memory kind where one has tables (A100 PCIe/40GB -> A100 SXM, H100
#: PCIe/NVL -> H100 SXM); Ampere/Turing GDDR cards (A10, A10G, T4) and L4 -> L40S (GDDR, PCIe,
#: no NVLink: the nearest memory system with tables); Volta HBM2 -> A100; MI300X (HBM3, no AMD
#: tables exist) -> H100 SXM. Efficiencies are fractions of each GPU's own datasheet figures,
#: so taking a curve is scaling it by the datasheet ratios.
TRANSFER: dict[str, str] = {
    "A100-40GB-SXM": "A100-80GB-SXM", "A100-80GB-PCIe": "A100-80GB-SXM",
    "H100-PCIe": "H100-SXM", "H100-NVL": "H100-SXM",
    "A10": "L40S", "A10G": "L40S", "L4": "L40S", "T4": "L40S",
    "V100-SXM2-16GB": "A100-80GB-SXM", "V100-SXM2-32GB": "A100-80GB-SXM",
    "V100-PCIe-16GB": "A100-80GB-SXM", "MI300X": "H100-SXM",
}
#: GPUs not in the catalog's list above: by family (``confidence.family_key`` of architecture)
TRANSFER_BY_FAMILY: dict[str, str] = {
    "hopper": "H100-SXM", "blackwell": "B200", "ampere": "A100-80GB-SXM",
    "ada-lovelace": "L40S", "turing": "L40S", "volta": "A100-80GB-SXM", "cdna-3": "H100-SXM",
}
#: all-reduce source by link: NVLink-class links take H100-SXM's table (B200's for NVLink 5),
#: PCIe Gen <= 4 L40S's, Gen 5+ RTX PRO 6000's; the bandwidth part is scaled by the ratio of
#: the links' datasheet bandwidth (NVLink bandwidth_gb_s; PCIe x16 per generation below)
PCIE_X16_GB_S = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0}
#: element-wise kernels per decoder layer that no table times, counted from vLLM's Llama/Qwen
#: forward: two fused_add_rms_norm, rotary_embedding, reshape_and_cache (KV write), silu_and_mul.
#: Each is charged as a transfer of its activation bytes at the decode-GEMM efficiency of that
#: many bytes (the tables' small-transfer cost, i.e. mostly launch latency), and no less than
#: one element-wise kernel's measured least time (Kernels.launch_floor_s).
ELEMENTWISE_PER_LAYER = 5
#: MoE dtypes charged at the measured fused-MoE curves. w4a16_mxfp4 is gpt-oss's own MXFP4
#: method only (kernel_curves.MOE_KERNEL_SOURCES: OpenAI's Triton kernel on H100/H200 at vLLM
#: 0.24.0), and :func:`dtypes` uses it only where the GPU has no FP4 tensor cores: on Blackwell
#: vLLM picks gpt-oss's kernel by flags (FlashInfer TRT-LLM mxfp4 x bf16 or x mxfp8, CUTLASS),
#: so the experts stay on the dense nvfp4 rule there
MOE_MEASURED = frozenset({"bfloat16", "fp8", "fp8_block", "nvfp4", "int4_wo", "w4a16_mxfp4"})
#: measured dtypes whose table is used for steps of >= MOE_PREFILL_TOKENS tokens only; smaller
#: steps keep the dense-curve rule. w4a16_mxfp4 on H200: at gpt-oss-120b's exact shape the
#: dense rule charges a prefill chunk 0.53-0.76x the table (TP 1, 1k-16k tokens), and the fit
#: split's 8k-prompt rows were 10-29% fast; but the table's decode rows (0.5 of HBM bandwidth
#: at 1 GiB of experts) put the MoE alone of the fit row H200 TP 1, 32 sequences, 1k/8k at
#: 16.2 ms a step against a measured TPOT of 16.15 ms for the whole step, so the served decode
#: kernel is faster than the timed one. Fit split (hopper/B, median |log err| of TPOT): dense
#: rule 0.044, whole table 0.0407, prefill only 0.0372 (benchmarks/perf/README.md, item 13)
MOE_PREFILL_ONLY = frozenset({"w4a16_mxfp4"})
#: the prefill_moe curve is measured at >= 512 tokens per call (kernel_curves.py)
MOE_PREFILL_TOKENS = 512
#: quantization methods whose fp8 linear layers carry static per-tensor activation scales:
#: NVIDIA ModelOpt FP8 checkpoints (vLLM ModelOptFp8LinearMethod: act_quant_static=True);
#: vLLM's "fp8" (online, or quant_method fp8) defaults to dynamic scales, fbgemm_fp8 is dynamic
#: per token. See :func:`linear_s`.
STATIC_FP8_METHODS = frozenset({"modelopt"})
#: CUDA compute capability (x10) of the catalog GPUs on which vLLM's fused all-reduce +
#: RMSNorm pass can run (vLLM keys its default and size limits by it: 90 Hopper, 100 B200,
#: 103 B300; engine.AllreduceFusion); any other GPU runs the unfused all-reduce
COMPUTE_CAPABILITY: dict[str, int] = {
    "H100-SXM": 90, "H100-PCIe": 90, "H100-NVL": 90, "H200": 90, "B200": 100, "B300": 103,
}
#: the dense peak each fused-MoE dtype computes at (weight-only formats: bf16 math)
MOE_PEAK = {"bfloat16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4",
            "w4a16_mxfp4": "bfloat16", "int4_wo": "bfloat16"}


@functools.cache
def curves() -> dict[str, Any]:
    """The shipped kernel curves, read once."""
    text = resources.files("advisor.core").joinpath(CURVES_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


Curve = tuple[tuple[float, ...], tuple[float, ...]]  # (log2 x at bin centres, values)


def _curve(table: dict[str, float]) -> Curve:
    keys = sorted((float(k), float(v)) for k, v in table.items())
    xs: list[float] = []
    for i, (k, _) in enumerate(keys):
        nxt = keys[i + 1][0] if i + 1 < len(keys) else k * (k / keys[i - 1][0] if i else 2.0)
        xs.append(math.log2(k) + (math.log2(nxt) - math.log2(k)) / 2)  # bin centre (log)
    return tuple(xs), tuple(v for _, v in keys)


#: a 2-D curve: (log2 row-bin centres, one Curve per row over the columns it has)
Curve2 = tuple[tuple[float, ...], tuple[Curve, ...]]


def _curve2(table: dict[str, dict[str, float]]) -> Curve2 | None:
    """kernel_curves.json's {row bin: {column bin: value}} as a :data:`Curve2`; None when
    empty. Rows sit at their bins' log centres, as :func:`_curve` places 1-D bins."""
    if not table:
        return None
    xs, _ = _curve({r: 0.0 for r in table})
    rows = tuple(_curve(table[r]) for r in sorted(table, key=float))
    return xs, rows


def interp2(c: Curve2, x: float, y: float) -> float:
    """Each row piecewise linear in log2(y) (flat beyond its ends), then rows piecewise linear
    in log2(x) (flat beyond the ends)."""
    xs, rows = c
    lx = math.log2(max(x, 1e-30))
    if lx <= xs[0]:
        return interp(rows[0], y)
    if lx >= xs[-1]:
        return interp(rows[-1], y)
    i = bisect.bisect_right(xs, lx)
    t = (lx - xs[i - 1]) / (xs[i] - xs[i - 1])
    lo, hi = interp(rows[i - 1], y), interp(rows[i], y)
    return lo + t * (hi - lo)


def interp(c: Curve, x: float) -> float:
    """Piecewise linear in log2(x), flat beyond the ends."""
    xs, ys = c
    lx = math.log2(max(x, 1e-30))
    if lx <= xs[0]:
        return ys[0]
    if lx >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, lx)
    t = (lx - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + t * (ys[i] - ys[i - 1])


@dataclass(frozen=True)
class Kernels:
    """One GPU's kernel costs: its own or transferred curves, its bandwidth and peaks."""

    gpu: str
    #: the catalog GPU whose tables the curves came from (== gpu when measured on it)
    source: str
    bw: float  # bytes/s
    peaks: dict[str, float]  # dtype -> dense FLOP/s
    decode_gemm: dict[str, Curve]
    prefill_gemm: dict[str, Curve]
    decode_attention: dict[str, Curve]
    context_attention: dict[str, Curve]
    #: tp -> (log2 bytes, log2 µs) points; times scaled by ``ar_scale`` above ``ar_floor_us``
    allreduce: dict[int, Curve]
    ar_source: str
    ar_scale: float
    #: fused-MoE kernels by MoE table dtype (empty for GPUs whose source has no MoE table)
    decode_moe: dict[str, Curve] | None = None
    prefill_moe: dict[str, Curve] | None = None
    #: prefill GEMM efficiency by (m, per-GPU weight MiB) and fused-MoE prefill efficiency by
    #: (tokens per expert, one expert's per-GPU MiB), by dtype: the tables' size term
    #: (kernel_curves.json efficiency_by_m_and_weight_mib, ..._and_expert_mib)
    prefill_gemm2: dict[str, Curve2] | None = None
    prefill_moe2: dict[str, Curve2] | None = None
    #: decode attention efficiency by (history, KV MiB one call reads), by KV dtype
    #: (kernel_curves.json efficiency_by_history_and_kv_mib; benchmarks/perf/README.md item 20)
    decode_attention2: dict[str, Curve2] | None = None
    #: fp8 activation quantization, (log2 input MiB, log2 µs) by "compute_scale" /
    #: "static_quant" (kernel_curves.json fp8_activation_quant); empty where not measured
    fp8_quant: dict[str, Curve] | None = None
    #: tp -> (log2 bytes, log2 µs): the fused all-reduce + RMSNorm kernel's all-reduce
    #: (kernel_curves.json allreduce_fused, TensorRT-LLM's table); only for a GPU measured
    #: with its own link, else None (the fusion is then not charged)
    allreduce_fused: dict[int, Curve] | None = None

    @property
    def transferred(self) -> bool:
        return self.source != self.gpu

    def dec_eff(self, dtype: str, nbytes: float) -> float:
        c = self.decode_gemm.get(dtype) or self.decode_gemm["bfloat16"]
        eff = interp(c, nbytes / MIB)
        if dtype == "fp8_block" and "fp8" in self.decode_gemm:
            # the fp8_block tables time one blockwise kernel at m <= 16 that reaches 0.01 of
            # HBM bandwidth at 16 MiB on Blackwell (KERNELS.md); the fit split's block-fp8 rows
            # (MiniMax-M2.5 on B300) run 3-6x faster end to end than that allows, so block
            # scaling is charged no worse than per-tensor fp8 (same bytes)
            eff = max(eff, interp(self.decode_gemm["fp8"], nbytes / MIB))
        return eff

    def launch_floor_s(self) -> float:
        """The least time of one element-wise kernel: vLLM's static fp8 quant (a one-pass
        element-wise kernel) at the smallest input its table times, 1 KiB: 2.0 us on B200,
        1.8 on B300, 1.9 on H200, 2.0 on H100, 1.5 on L40S (kernel_curves.json
        fp8_activation_quant, aiconfigurator's quantize tables; flat within 10% up to 64 KiB).
        A GPU without that table takes its decode-GEMM table's smallest bin (0.25-0.5 MiB) at
        its measured efficiency (2.6-2.8 us on the GPUs that have both). Below its first bin the
        decode-GEMM curve's efficiency is flat, so without this floor a kernel's time would
        shrink with its bytes to zero (a 24 KiB element-wise kernel at 0.2 us on B200)."""
        c = (self.fp8_quant or {}).get("static_quant")
        if c is not None:
            return float(2 ** c[1][0]) * 1e-6
        xs, ys = self.decode_gemm["bfloat16"]
        return float(2 ** xs[0]) * MIB / (self.bw * ys[0])

    def pre_eff(self, dtype: str, m: float, wbytes: float | None = None) -> float:
        """Prefill GEMM efficiency at m tokens; with ``wbytes`` (the per-GPU weight matrix's
        bytes) from the 2-D curve, which keeps the size term (a TP slice is a smaller, less
        efficient matrix), else from the m-only curve."""
        def one(d: str) -> float:
            c2 = (self.prefill_gemm2 or {}).get(d)
            if wbytes is not None and c2 is not None:
                return interp2(c2, m, wbytes / MIB)
            return interp(self.prefill_gemm[d], m)

        d = dtype if dtype in self.prefill_gemm else "bfloat16"
        eff = one(d)
        if d == "fp8_block" and "fp8" in self.prefill_gemm:
            eff = max(eff, one("fp8"))
        return eff

    def moe_pre_eff(self, dtype: str, tokens_per_expert: float, expert_bytes: float) -> float:
        """Fused-MoE prefill efficiency (of the dtype's dense peak) at ``tokens_per_expert``
        for experts of ``expert_bytes`` per GPU each (all three matrices); the 1-D curve by
        tokens per expert where the 2-D one is not measured."""
        c2 = (self.prefill_moe2 or {}).get(dtype)
        if c2 is not None:
            return interp2(c2, tokens_per_expert, expert_bytes / MIB)
        return interp((self.prefill_moe or {})[dtype], tokens_per_expert)

    def quant_s(self, name: str, nbytes: float) -> float:
        """One fp8 activation-quant overhead (``compute_scale`` or ``static_quant``) of a bf16
        input of ``nbytes``, seconds; 0 where the source GPU has no quantize table."""
        c = (self.fp8_quant or {}).get(name)
        if c is None or nbytes <= 0:
            return 0.0
        return float(2 ** interp(c, nbytes / MIB)) * 1e-6

    def peak(self, dtype: str) -> float:
        return self.peaks.get(dtype) or self.peaks["bfloat16"]

    def allreduce_s(self, tp: int, nbytes: float) -> float:
        if tp <= 1 or nbytes <= 0:
            return 0.0
        xs, ys = _ar_curve(self.allreduce, tp)
        us = 2 ** _ar_log_us(xs, ys, nbytes)
        floor = 2 ** ys[0]
        us = floor + (us - floor) * self.ar_scale
        return us * 1e-6

    def allreduce_fused_s(self, tp: int, nbytes: float) -> float:
        """The all-reduce inside the fused all-reduce + RMSNorm kernel (TensorRT-LLM's
        measured kernels); the unfused custom all-reduce where none was measured."""
        if not self.allreduce_fused:
            return self.allreduce_s(tp, nbytes)
        if tp <= 1 or nbytes <= 0:
            return 0.0
        xs, ys = _ar_curve(self.allreduce_fused, tp)
        return float(2 ** _ar_log_us(xs, ys, nbytes)) * 1e-6


def _ar_curve(table: dict[int, Curve], tp: int) -> Curve:
    return table[min(table, key=lambda t: (abs(math.log2(t) - math.log2(tp)), -t))]


def _ar_log_us(xs: tuple[float, ...], ys: tuple[float, ...], nbytes: float) -> float:
    """log2 µs of an all-reduce of ``nbytes``: log-log interpolation, flat below the table,
    linear in bytes beyond it."""
    lx = math.log2(nbytes)
    if lx <= xs[0]:
        return ys[0]
    if lx >= xs[-1]:
        return ys[-1] + (lx - xs[-1])
    i = bisect.bisect_right(xs, lx)
    t = (lx - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + t * (ys[i] - ys[i - 1])


#: log2 of the largest all-reduce message (bytes) still latency-bound: 64 KiB
AR_LATENCY_BOUND_LOG2 = 16.0


def _ar_table(points_by_tp: dict[str, dict[str, float]]) -> dict[int, Curve]:
    out = {}
    for tp, points in points_by_tp.items():
        pts = sorted((math.log2(float(b)), math.log2(float(us))) for b, us in points.items())
        # up to 64 KiB an all-reduce is latency-bound (flat in the size): no point there is
        # charged more than a larger one of that range was measured at, so one slow smallest
        # point is noise, not the floor (A100 TP 8: 14.9 us at 4 KiB, 6.5 and 8.4 at 16 and
        # 64 KiB; found by benchmarks/perf/composition.py, README.md item 9)
        small = [i for i, (x, _) in enumerate(pts) if x <= AR_LATENCY_BOUND_LOG2]
        for i in reversed(small[:-1]):
            pts[i] = (pts[i][0], min(pts[i][1], pts[i + 1][1]))
        # then non-decreasing over every size (noise above it: B200 TP 8's 1 MiB point,
        # 17.2 us, stays lifted to its 256 KiB one, 25.8, as B300 measures 26-27 us flat
        # across 256 KiB-4 MiB)
        ys: list[float] = []
        for _, y in pts:
            ys.append(max(y, ys[-1]) if ys else y)
        out[int(tp)] = (tuple(x for x, _ in pts), tuple(ys))
    return out


@dataclass(frozen=True)
class _GpuFacts:
    id: str
    architecture: str | None
    memory_bandwidth_gb_s: float | None
    bf16_tflops: float | None
    fp16_tflops: float | None
    fp8_tflops: float | None
    kind: str
    link_gb_s: float | None
    pcie_gen: int | None


def _family(gpu: Gpu | _GpuFacts) -> str:
    from advisor.core.confidence import family_key

    return family_key(gpu.architecture or "")


def curve_source(gpu: Gpu | _GpuFacts) -> str:
    """The catalog GPU whose measured curves ``gpu`` uses."""
    have = curves()["gpus"]
    if gpu.id in have:
        return gpu.id
    return TRANSFER.get(gpu.id) or TRANSFER_BY_FAMILY.get(_family(gpu), "H100-SXM")


def _link_gb_s(gpu: _GpuFacts) -> tuple[str, float]:
    if gpu.kind != "pcie" and gpu.link_gb_s:
        return "nvlink", float(gpu.link_gb_s)
    return "pcie", PCIE_X16_GB_S.get(gpu.pcie_gen or 4, 32.0)


def kernels(gpu: Gpu) -> Kernels:
    ic = gpu.interconnect
    return _kernels(gpu.id, gpu.architecture, gpu.memory_bandwidth_gb_s, gpu.bf16_tflops,
                    gpu.fp16_tflops, gpu.fp8_tflops, ic.kind if ic else "pcie",
                    ic.bandwidth_gb_s if ic else None, gpu.pcie_gen)


@functools.lru_cache(maxsize=64)
def _kernels(gpu_id: str, architecture: str | None, bw_gb_s: float | None,
             bf16: float | None, fp16: float | None, fp8: float | None, kind: str,
             link_gb_s: float | None, pcie_gen: int | None) -> Kernels:
    gpu = _GpuFacts(gpu_id, architecture, bw_gb_s, bf16, fp16, fp8, kind, link_gb_s, pcie_gen)
    data = curves()["gpus"]
    source = curve_source(gpu)
    src = data[source]
    spec = src["system_spec"]
    if source == gpu.id:
        bw = float(spec["mem_bw_bytes_s"])
        peaks = {"bfloat16": float(spec["bfloat16_tc_flops"])}
        if spec.get("fp8_tc_flops"):
            peaks["fp8"] = peaks["fp8_block"] = float(spec["fp8_tc_flops"])
        if spec.get("fp4_tc_flops"):
            peaks["nvfp4"] = float(spec["fp4_tc_flops"])
    else:  # transferred: the target's own datasheet figures, the source's efficiencies
        bw = float(gpu.memory_bandwidth_gb_s or 0) * 1e9
        peaks = {"bfloat16": float(gpu.bf16_tflops or gpu.fp16_tflops or 0) * 1e12}
        if gpu.fp8_tflops:
            peaks["fp8"] = peaks["fp8_block"] = float(gpu.fp8_tflops) * 1e12
    dtypes_with_peak = set(peaks)
    dec = {k: _curve(v["efficiency_by_weight_mib"]) for k, v in src["decode_gemm"].items()
           if k in dtypes_with_peak}
    pre = {k: _curve(v["efficiency_by_m"]) for k, v in src["prefill_gemm"].items()
           if k in dtypes_with_peak}
    pre2 = {k: c for k, v in src["prefill_gemm"].items() if k in dtypes_with_peak
            and (c := _curve2(v.get("efficiency_by_m_and_weight_mib") or {})) is not None}
    da = {k: _curve(v["efficiency_by_history"]) for k, v in src["decode_attention"].items()}
    da2 = {k: c for k, v in src["decode_attention"].items()
           if (c := _curve2(v.get("efficiency_by_history_and_kv_mib") or {})) is not None}
    ca = {k: _curve(v["efficiency_by_isl"]) for k, v in src["context_attention"].items()}
    # all-reduce: the GPU's own table when the link matches, else the nearest link's, scaled
    kind, link = _link_gb_s(gpu)
    if source == gpu.id and (kind == "nvlink") == (
            "nvlink" in str(src["allreduce_graph"].get("interconnect", ""))):
        ar_source, scale = source, 1.0
    else:
        if kind == "nvlink":
            ar_source = "B200" if link >= 1800 else "H100-SXM"
            ref = 1800.0 if ar_source == "B200" else 900.0
        else:
            gen5 = (gpu.pcie_gen or 4) >= 5
            ar_source = "RTX-PRO-6000" if gen5 else "L40S"
            ref = PCIE_X16_GB_S[5 if gen5 else 4]
        scale = ref / link
    ar = _ar_table(data[ar_source]["allreduce_graph"]["latency_us_by_gpus_and_bytes"])
    # the fused kernel's all-reduce: only measured on the GPU itself over its own link
    fused_table = (src.get("allreduce_fused") or {}).get("latency_us_by_gpus_and_bytes")
    fused = (_ar_table(fused_table) if fused_table and ar_source == gpu_id and scale == 1.0
             else None)
    dm = {k: _curve(v["efficiency_by_weight_mib"])
          for k, v in (src.get("decode_moe") or {}).items()}
    pm = {k: _curve(v["efficiency_by_tokens_per_expert"])
          for k, v in (src.get("prefill_moe") or {}).items()}
    pm2 = {k: c for k, v in (src.get("prefill_moe") or {}).items()
           if (c := _curve2(v.get("efficiency_by_tokens_per_expert_and_expert_mib") or {}))
           is not None}
    fq = {}
    for name, key in (("compute_scale", "compute_scale_us_by_input_mib"),
                      ("static_quant", "static_quant_us_by_input_mib")):
        table = (src.get("fp8_activation_quant") or {}).get(key)
        if table:
            xs, vals = _curve(table)
            fq[name] = (xs, tuple(math.log2(max(v, 1e-3)) for v in vals))
    if spec.get("fp4_tc_flops") and source == gpu.id:
        peaks.setdefault("nvfp4", float(spec["fp4_tc_flops"]))
    return Kernels(gpu=gpu_id, source=source, bw=bw, peaks=peaks, decode_gemm=dec,
                   prefill_gemm=pre, decode_attention=da, context_attention=ca, allreduce=ar,
                   ar_source=ar_source, ar_scale=scale, decode_moe=dm, prefill_moe=pm,
                   fp8_quant=fq, allreduce_fused=fused, prefill_gemm2=pre2, prefill_moe2=pm2,
                   decode_attention2=da2)


# --- the model's layers -----------------------------------------------------------------------


@dataclass(frozen=True)
class Dtypes:
    """Which curve each kind of weight runs on, and its stored bytes per weight."""

    linear: str
    linear_bytes: float
    experts: str
    expert_bytes: float
    #: the fused-MoE table dtype of the experts (kernel_curves.json decode_moe/prefill_moe)
    moe: str = "bfloat16"
    #: per-tensor fp8 with static activation scales (ModelOpt checkpoints): the fp8 GEMM
    #: table's dynamic-scale work is not run (see :func:`linear_s`)
    static_fp8: bool = False


def dtypes(spec: ModelSpec, k: Kernels) -> Dtypes:
    """Weight dtype -> curve: bf16/fp16 -> bfloat16; fp8 per-tensor -> fp8; block fp8 (method
    "fp8_block") -> fp8_block; nvfp4 -> nvfp4; mxfp4 experts (gpt-oss) -> nvfp4 where the GPU
    has FP4 tensor cores, else gpt-oss's measured weight-only MXFP4 MoE kernel (w4a16_mxfp4);
    weight-only formats (AWQ, GPTQ, int4, fp8 on a GPU without FP8) run at the bf16 curve's
    efficiency on their own bytes. compressed-tensors float schemes follow fp8 and nvfp4."""
    q = spec.quantization
    if q is None:
        return Dtypes("bfloat16", 2.0, "bfloat16", 2.0)
    m = q.method.lower()
    if m == "fp8" and q.block_n is not None:
        # a checkpoint's "quant_method": "fp8" with a weight_block_size (DeepSeek-V3/R1,
        # Qwen3-FP8, MiniMax-M2.5) is block fp8: vLLM runs its experts through the block-fp8
        # fused MoE, which the fp8_block tables time. The per-tensor "fp8" MoE tables of the
        # newest release time FlashInfer's CUTLASS ModelOpt kernel, 0.10-0.17 of HBM bandwidth
        # on Hopper at 1 GiB (kernel_curves.json), where the fp8_block one at DeepSeek-R1's own
        # TP 8 shape reaches 0.7-0.8 (aiconfigurator h200_sxm moe 0.19.0 fp8_block: 64 tokens in
        # 0.33-0.40 ms); the benchmark's rows of these checkpoints run on fp8_block (run.py QUANT)
        m = "fp8_block"
    # compressed-tensors FP8 (W8A8, dynamic per-token scales) and NVFP4 run vLLM's fp8 and
    # nvfp4 kernels where the GPU has them, weight-only Marlin elsewhere (the same fallback
    # the curves' absence gives below); int schemes stay weight-only
    m = {"compressed-tensors-fp8": "fp8", "compressed-tensors-fp4": "nvfp4"}.get(m, m)
    moe = ("w4a16_mxfp4" if m == "mxfp4" else "nvfp4" if m in ("nvfp4", "modelopt_fp4")
           else "fp8_block" if m.startswith("fp8_block") or m == "fp8-block"
           else "fp8" if m.startswith("fp8") or m in ("fbgemm_fp8", "modelopt")
           else "int4_wo" if q.bytes_per_weight < 1.0 else "bfloat16")
    if m.startswith("fp8_block") or m == "fp8-block":
        d = "fp8_block"
    elif m.startswith("fp8") or m in ("fbgemm_fp8", "modelopt", "w8a8", "int8"):
        d = "fp8"
    elif m in ("nvfp4", "modelopt_fp4", "mxfp4"):
        d = "nvfp4"
    else:
        d = "weight_only"
    if d not in k.decode_gemm:
        d = "bfloat16"  # weight-only path: bf16 math on the stored bytes
    elif moe == "w4a16_mxfp4":
        moe = "mxfp4"  # FP4 tensor cores: a flag-picked kernel, no measured curve (MOE_MEASURED)
    if q.scope == "experts":
        return Dtypes("bfloat16", 2.0, d, q.bytes_per_weight, moe)
    return Dtypes(d, q.bytes_per_weight, d, q.bytes_per_weight, moe,
                  static_fp8=d == "fp8" and m in STATIC_FP8_METHODS)


def linear_s(k: Kernels, dt: Dtypes, n: float, kk: float, m: float,
             fp8_input: bool = False) -> float:
    """One of the model's linear layers (per-GPU n x kk weights, m tokens) on ``dt.linear``.
    The fp8 GEMM table times vLLM's linear layer with dynamic activation scales
    (aiconfigurator collector/vllm/collect_gemm.py: activation_scheme="dynamic"), so its time
    includes finding the scales and quantizing the input. A checkpoint with static scales
    (ModelOpt FP8) runs neither the first nor, where the input already arrives in fp8 (the
    attention output into o_proj, silu_and_mul into down_proj), the second: both are taken off
    at aiconfigurator's own measured quantize tables, as its ``fp8_static`` GEMM does
    (sdk/operations/gemm.py), never below the GEMM's roofline."""
    t = gemm_s(k, dt.linear, dt.linear_bytes, n, kk, m)
    if not dt.static_fp8:
        return t
    act = m * kk * 2
    saved = k.quant_s("compute_scale", act) + (k.quant_s("static_quant", act) if fp8_input
                                                 else 0.0)
    floor = max((n * kk * dt.linear_bytes + m * (n + kk) * 2) / k.bw,
                2 * m * n * kk / k.peak(dt.linear))
    return max(floor, t - saved)


def gemm_s(k: Kernels, dtype: str, wbytes_per: float, n: float, kk: float, m: float) -> float:
    """One GEMM of n x kk per-GPU weights over m tokens: the longer of its memory term (the
    weights and the m x (n + kk) bf16 activations, at the decode curve's efficiency for that
    many bytes) and its compute term. The decode curve is measured at m <= 16, where the
    weights are all the bytes; keyed by the weights alone, a prefill GEMM of a small TP slice
    (m = 8192 over 4 MiB of nvfp4 weights moves ~130 MB of activations) was charged 0.05 of
    HBM bandwidth and 3-11x the time aiconfigurator's table measures at that exact shape
    (benchmarks/perf/README.md, item 8; tests/test_perf.py pins four shapes)."""
    w = n * kk * wbytes_per
    moved = w + m * (n + kk) * 2
    mem = moved / (k.bw * k.dec_eff(dtype, moved))
    cmp = 2 * m * n * kk / (k.peak(dtype) * k.pre_eff(dtype, m, w))
    return max(mem, cmp)


def fused_moe_s(k: Kernels, dt: Dtypes, experts: int, topk: int, expert_inter: float,
                h: float, m: float, touched: float) -> float:
    """One fused-MoE layer's experts (no router, no shared expert) on one GPU: ``m`` tokens
    routed ``topk`` ways, ``touched`` of the ``experts`` (per-GPU ``expert_inter``) read. The
    routed tokens' FLOPs run at the prefill efficiency of their count."""
    routed = m * topk
    e_gate = touched * 2 * expert_inter * h * dt.expert_bytes
    e_down = touched * expert_inter * h * dt.expert_bytes
    flops = 2 * routed * 3 * h * expert_inter
    dmoe = (k.decode_moe or {}).get(dt.moe) if dt.moe in MOE_MEASURED else None
    if dt.moe in MOE_PREFILL_ONLY and m < MOE_PREFILL_TOKENS:
        dmoe = None
    pmoe = (k.prefill_moe or {}).get(dt.moe)
    if dmoe is not None:
        # the measured fused-MoE kernels: the touched experts' bytes at the efficiency of
        # that many bytes (decode_moe); a step of >= 512 tokens at the measured efficiency
        # of its tokens per expert (prefill_moe), against the dtype's dense peak
        nbytes = e_gate + e_down
        mem = nbytes / (k.bw * interp(dmoe, nbytes / MIB))
        if pmoe is not None and m >= MOE_PREFILL_TOKENS:
            cmp = flops / (k.peak(MOE_PEAK.get(dt.moe, "bfloat16"))
                           * k.moe_pre_eff(dt.moe, routed / experts,
                                           3 * expert_inter * h * dt.expert_bytes))
        else:
            cmp = flops / (k.peak(dt.experts) * k.pre_eff(dt.experts, routed / touched))
    else:
        mem = ((e_gate + routed * (h + 2 * expert_inter) * 2)
               / (k.bw * _moe_eff(k, dt.experts, e_gate))
               + (e_down + routed * (h + expert_inter) * 2)
               / (k.bw * _moe_eff(k, dt.experts, e_down)))
        # each touched expert's GEMM sees only its share of the routed tokens
        cmp = flops / (k.peak(dt.experts) * k.pre_eff(dt.experts, routed / max(touched, 1.0)))
    return max(mem, cmp)


def decode_attention_s(k: Kernels, kvd: str, hist: float, nbytes: float) -> float:
    """One layer's decode attention reading ``nbytes`` of KV (``kvd``: "fp8" or "bfloat16")
    for sequences of ``hist`` tokens of history: at the tables' efficiency for that history
    and that many KV bytes in one call (calls of >= 256 MiB; the history curve where a GPU's
    source has no such grid), no faster than a weight read of the same bytes."""
    kv = kvd if kvd in k.decode_attention else "bfloat16"
    c2 = (k.decode_attention2 or {}).get(kv)
    table = (interp2(c2, hist, nbytes / MIB) if c2 is not None
             else interp(k.decode_attention[kv], hist))
    eff = min(table, k.dec_eff("bfloat16", nbytes))
    return nbytes / (k.bw * eff)


def context_attention_s(k: Kernels, kvd: str, heads_x_dim: float, span: float,
                        tokens: float) -> float:
    """One layer's attention for ``tokens`` prompt tokens of prompts ``span`` long: their share
    of the prompts' causal FLOPs (2 x heads x head_dim x span per token) at the context curve's
    efficiency for that prompt length."""
    c = k.context_attention.get(kvd) or k.context_attention["bfloat16"]
    return 2 * heads_x_dim * span * tokens / (k.peak("bfloat16") * interp(c, span))


def linear_mixer_s(k: Kernels, s: Shape, decode: float, prefill_tokens: float) -> float:
    """One linear-attention or Mamba layer's own kernels (not its projections) on one GPU —
    Gated DeltaNet's, Mamba-2's or Mamba's, their counts and chunk in
    :class:`Shape`.linear_kernels (from the mixer class): no kernel table measures them, so each is
    charged as the bytes it moves at the measured element-wise bandwidth (:func:`_transfer_s`,
    with its launch floor). Decode reads and writes each sequence's state (conv and
    temporal); prefill moves the step's activations through its kernels and the state once per
    chunk. Their FLOPs are small beside the layer's projections (Qwen3-Next at TP 1: ~3.7
    MFLOP a token for the delta rule against ~50 MFLOP for in_proj_qkvz alone), so bytes
    decide; the estimate's confidence says it is extrapolated."""
    decode_kernels, prefill_kernels, chunk = s.linear_kernels
    t = 0.0
    if decode:
        t += (decode_kernels - 1) * _transfer_s(k, decode * s.linear_token_bytes)
        t += _transfer_s(k, 2 * decode * s.linear_state_bytes)
    if prefill_tokens:
        chunks = -(-prefill_tokens // chunk)
        t += (prefill_kernels - 1) * _transfer_s(k, prefill_tokens * s.linear_token_bytes)
        t += _transfer_s(k, 2 * chunks * s.linear_state_bytes)
    return t


def _moe_eff(k: Kernels, dtype: str, nbytes: float) -> float:
    """Bandwidth efficiency of a fused-MoE weight read where no measured MoE curve applies
    (MOE_MEASURED, MOE_PREFILL_ONLY; GPUs whose source has no MoE table); the dense tables' 4-bit
    and fp8 GEMMs at m <= 16 top out at 0.65-0.77 of HBM bandwidth on Blackwell, below the fit
    split's gpt-oss-120b B200 rows (a batch-64 step that reads ~53 GB of experts in 10.5 ms end to
    end: >= 0.68). A fused MoE kernel streams all its experts in one launch, so it is charged the
    better of its dtype's curve and the bf16 curve at the same bytes."""
    return max(k.dec_eff(dtype, nbytes), k.dec_eff("bfloat16", nbytes))


def _transfer_s(k: Kernels, nbytes: float) -> float:
    """A small memory-bound kernel moving ``nbytes`` (element-wise, KV writes), never faster
    than one element-wise kernel's measured least time (:meth:`Kernels.launch_floor_s`)."""
    return max(nbytes / (k.bw * k.dec_eff("bfloat16", nbytes)), k.launch_floor_s())


@dataclass(frozen=True)
class Shape:
    """Per-GPU shapes of one replica (TP ``tp``) of ``spec``, layers of this GPU's stage."""

    layers_full: float
    layers_sliding: float
    dense_layers: float
    moe_layers: float
    hidden: int
    q_heads: float
    kv_bytes_layer: float  # KV bytes per token per layer on one GPU
    head_dim_ctx: float  # per-head dim of the prompt's attention FLOPs
    qkv_n: float
    o_k: float
    inter: float  # dense MLP intermediate per GPU
    #: the dense MLP's first projection on one GPU: gate and up (2 x inter), or up alone for
    #: the ungated MLPs (GPT-2, Falcon, Nemotron: ModelSpec.gated_mlp)
    up_n: float
    expert_inter: float
    experts: int
    topk: int
    shared_inter: float
    vocab: float
    window: int | None
    # MLA's up-projections on one GPU as (n, k) weight shapes: q_b_proj, kv_b_proj
    attn_up: tuple[tuple[float, float], ...]
    #: linear-attention / Mamba layers of this stage (model.GatedDeltaNet, Mamba2Mixer,
    #: Mamba1Mixer), their projections on one GPU as (n, k) weight shapes (the mixer's
    #: ``projections``, out_proj last), one sequence's state in one layer on one GPU (bytes,
    #: the model dtype) and the per-token activations their own kernels read and write
    layers_linear: float = 0.0
    linear_proj: tuple[tuple[float, float], ...] = ()
    linear_state_bytes: float = 0.0
    linear_token_bytes: float = 0.0
    #: the mixer's own kernels in decode and in prefill, and the tokens per chunk of its scan
    linear_kernels: tuple[int, int, int] = (0, 0, 1)
    #: all-reduces a linear layer adds at this TP beyond out_proj's, and bytes per token each
    linear_collectives: tuple[int, float] = (0, 0.0)
    #: whether the mixer's projections run in the checkpoint's quantized dtype (else bf16)
    linear_quantized: bool = True


def shape(spec: ModelSpec, tp: int, pp: int, kv_bytes: float) -> Shape:
    return _shape(spec, tp, pp, kv_bytes)


@functools.lru_cache(maxsize=256)
def _shape(spec: ModelSpec, tp: int, pp: int, kv_bytes: float) -> Shape:
    n = spec.num_layers
    sliding = sum(1 for x in spec.layer_kinds if x == "sliding")
    linear = sum(1 for x in spec.layer_kinds if x == "linear")
    moe_layers = sum(1 for i in range(n) if spec.is_moe_layer(i))
    h, d = spec.hidden_size, spec.head_dim
    up: tuple[tuple[float, float], ...] = ()
    if spec.mla is not None:
        m = spec.mla
        kv_layer = (m.kv_lora_rank + m.qk_rope_head_dim) * kv_bytes  # one latent, all GPUs
        d_ctx = (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) / 2
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        heads = spec.num_heads / tp
        latent = m.kv_lora_rank + m.qk_rope_head_dim
        # vLLM's DeepseekV2MLAAttention: the down-projections from the hidden state are
        # replicated on every GPU (fused_qkv_a_proj, MergedColumnParallelLinear with
        # disable_tp=True: hidden -> q_lora_rank + latent; without a q LoRA, q_proj is
        # column-parallel and kv_a_proj_with_mqa a ReplicatedLinear); the up-projections are
        # column-parallel over heads and read the low-rank inputs, not the hidden state: q_b_proj
        # (q_lora_rank -> heads x qk) and kv_b_proj (kv_lora_rank -> heads x (nope + v), in
        # decode the absorbed W_UK / W_UV products of the same bytes)
        if m.q_lora_rank:
            qkv_n = float(m.q_lora_rank + latent)
            up = ((heads * qk, m.q_lora_rank),)
        else:
            qkv_n = heads * qk + latent
        up += ((heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),)
        o_k = heads * m.v_head_dim
    else:
        kv_heads = max(1.0, spec.num_kv_heads / tp)
        kv_layer = 2 * kv_heads * d * kv_bytes
        d_ctx = float(d)
        # Qwen3-Next's output gate doubles the query projection (Qwen3NextAttention)
        qkv_n = (spec.num_heads * (2 if spec.attn_output_gate else 1) / tp + 2 * kv_heads) * d
        o_k = spec.num_heads / tp * d
    moe = spec.moe
    la = spec.linear_attention
    lin_proj: tuple[tuple[float, float], ...] = ()
    lin_state = lin_token = 0.0
    kernels = (0, 0, 1)
    collectives: tuple[int, float] = (0, 0.0)
    quantized = True
    if la is not None and linear:
        lin_proj = la.projections(h, tp)
        lin_state = float(la.state_bytes(tp, 2.0))
        lin_token = la.token_bytes(tp)
        kernels = (la.decode_kernels, la.prefill_kernels, la.chunk)
        collectives = la.tp_collectives(tp)
        quantized = la.quantized
    return Shape(
        layers_linear=linear / pp, linear_proj=lin_proj, linear_state_bytes=lin_state,
        linear_token_bytes=lin_token, linear_kernels=kernels, linear_collectives=collectives,
        linear_quantized=quantized,
        layers_full=(n - sliding - linear) / pp, layers_sliding=sliding / pp,
        dense_layers=(n - moe_layers) / pp, moe_layers=moe_layers / pp, hidden=h,
        q_heads=spec.num_heads / tp, kv_bytes_layer=kv_layer, head_dim_ctx=d_ctx,
        qkv_n=qkv_n, o_k=o_k, inter=spec.intermediate_size / tp,
        up_n=(2 if spec.gated_mlp else 1) * spec.intermediate_size / tp,
        expert_inter=(moe.expert_intermediate_size / tp) if moe else 0.0,
        experts=moe.num_experts if moe else 0, topk=moe.experts_per_token if moe else 0,
        shared_inter=((moe.shared_intermediate_size
                       or moe.num_shared_experts * moe.expert_intermediate_size) / tp)
        if moe else 0.0,
        vocab=spec.padded_vocab / tp, window=spec.sliding_window, attn_up=up)


@dataclass(frozen=True)
class Fusion:
    """vLLM's fused all-reduce + RMSNorm pass as one replica runs it (``fuse_allreduce_rms``).

    A step's all-reduce of at most ``max_bytes`` (bf16 activations) is FlashInfer's fused
    kernel: the all-reduce (TensorRT-LLM's measured kernels, :meth:`Kernels.allreduce_fused_s`),
    the residual add and RMSNorm after it (the ``fused_add_rms_norm`` kernel is no longer run),
    and, for a checkpoint with static fp8 activation scales, the quantization of the next
    linear layer's input (its static quant is no longer run; vLLM's pattern
    AllReduceFusedRMSNormStaticQuantFP8). Larger all-reduces (prefill chunks) run unfused.
    The all-reduce after a MoE layer takes part only where ``moe`` (vLLM >= 0.15 here,
    engine.AllreduceFusion)."""

    max_bytes: float = 0.0
    moe: bool = False


NO_FUSION = Fusion()


@dataclass(frozen=True)
class StepCost:
    """Seconds of one step by part (no per-step constant)."""

    gemm: float
    attention: float
    allreduce: float
    other: float

    @property
    def total(self) -> float:
        return self.gemm + self.attention + self.allreduce + self.other


def step_cost(spec: ModelSpec, k: Kernels, tp: int, pp: int, kv_dtype: str, kv_bytes: float,
              decode: int, context: float, prefill_tokens: float = 0.0,
              prompt_len: float = 0.0, fusion: Fusion = NO_FUSION) -> StepCost:
    """One engine step on one GPU of the replica: ``decode`` sequences at mean ``context``
    tokens of history, plus ``prefill_tokens`` tokens of prompts ``prompt_len`` long (their
    share of those prompts' attention); ``fusion``: the fused all-reduce + RMSNorm pass."""
    s = shape(spec, tp, pp, kv_bytes)
    dt = dtypes(spec, k)
    m = decode + prefill_tokens
    if m <= 0:
        return StepCost(0.0, 0.0, 0.0, 0.0)
    h = s.hidden
    attn_layers = s.layers_full + s.layers_sliding
    layers = attn_layers + s.layers_linear  # every layer: its norms and all-reduces
    act = m * h * 2
    fused = tp > 1 and 0 < act <= fusion.max_bytes
    # all-reduces fused with the RMSNorm after them: the attention output's always, the MLP's
    # in dense layers, a MoE layer's where the release lets it
    n_fused = (layers + s.dense_layers + (s.moe_layers if fusion.moe else 0.0)) if fused else 0.0
    # attention projections; a static-fp8 qkv_proj gets its input in fp8 from the fused
    # input RMSNorm (fused with the MLP's all-reduce before it)
    qkv_fp8 = fused and (fusion.moe or not s.moe_layers)
    proj = (linear_s(k, dt, s.qkv_n, h, m, fp8_input=qkv_fp8)
            + linear_s(k, dt, h, s.o_k, m, fp8_input=True))
    for n_up, k_up in s.attn_up:
        proj += linear_s(k, dt, n_up, k_up, m)
    gemm = attn_layers * proj
    if s.layers_linear:
        # the input projection(s) read the fused input norm's output, the last one (out_proj)
        # the mixer's
        *ins, (out_n, out_k) = s.linear_proj
        if s.linear_quantized:
            gemm += s.layers_linear * (
                sum(linear_s(k, dt, n_in, k_in, m, fp8_input=qkv_fp8 and j == 0)
                    for j, (n_in, k_in) in enumerate(ins))
                + linear_s(k, dt, out_n, out_k, m, fp8_input=True))
        else:  # Mamba (v1): bf16 whatever the checkpoint's quantization
            gemm += s.layers_linear * sum(gemm_s(k, "bfloat16", 2.0, n_p, k_p, m)
                                          for n_p, k_p in s.linear_proj)
    # MLPs (gate_up's input is the fused post-attention RMSNorm's output)
    if s.dense_layers:
        gemm += s.dense_layers * (linear_s(k, dt, s.up_n, h, m, fp8_input=fused)
                                  + linear_s(k, dt, h, s.inter, m, fp8_input=True))
    if s.moe_layers:
        # the experts the step's tokens route to (uniformly at random), read once by one fused
        # kernel each for gate/up and down
        touched = s.experts * (1 - (1 - s.topk / s.experts) ** m) if m < 1e4 else s.experts
        moe = (fused_moe_s(k, dt, s.experts, s.topk, s.expert_inter, h, m, touched)
               + gemm_s(k, "bfloat16", 2.0, s.experts, h, m))  # router
        if s.shared_inter:
            moe += (linear_s(k, dt, 2 * s.shared_inter, h, m)
                    + linear_s(k, dt, h, s.shared_inter, m, fp8_input=True))
        gemm += s.moe_layers * moe
    gemm += gemm_s(k, "bfloat16", 2.0, s.vocab, h, max(1, decode + (1 if prefill_tokens else 0)))
    # attention
    kvd = "fp8" if kv_dtype.startswith("fp8") else "bfloat16"
    attn = 0.0
    if decode:
        for n_layers, hist in ((s.layers_full, context),
                               (s.layers_sliding, min(context, s.window or context))):
            if n_layers:
                attn += n_layers * decode_attention_s(k, kvd, hist,
                                                      decode * hist * s.kv_bytes_layer)
    if s.layers_linear:
        attn += s.layers_linear * linear_mixer_s(k, s, decode, prefill_tokens)
    if prefill_tokens and prompt_len:
        for n_layers, span in ((s.layers_full, prompt_len),
                               (s.layers_sliding, min(prompt_len, s.window or prompt_len))):
            if n_layers:
                attn += n_layers * context_attention_s(k, kvd, s.q_heads * s.head_dim_ctx,
                                                       span, prefill_tokens)
    # all-reduces (two per layer) and element-wise kernels; each fused all-reduce takes the
    # fused_add_rms_norm after it into its kernel
    ar = 0.0
    if tp > 1:
        ar = ((2 * layers - n_fused) * k.allreduce_s(tp, act)
              + n_fused * k.allreduce_fused_s(tp, act))
        n_extra, per_token = s.linear_collectives
        if n_extra and s.layers_linear:  # small, so mostly the all-reduce's latency
            ar += s.layers_linear * n_extra * k.allreduce_s(tp, m * per_token)
    other = ((layers * (ELEMENTWISE_PER_LAYER - 1) - n_fused) * _transfer_s(k, 2 * act))
    other += (s.dense_layers * _transfer_s(k, 3 * m * s.inter * 2)
              + s.moe_layers * _transfer_s(k, 3 * m * max(s.expert_inter * s.topk, 1) * 2))
    return StepCost(gemm, attn, ar, other)
