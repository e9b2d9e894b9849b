"""Per-GPU, per-dtype kernel efficiency curves from NVIDIA aiconfigurator's measured vLLM tables.

Calibration-time tool (issue 28, item 1). It reads the parquet kernel tables of
ai-dynamo/aiconfigurator at a pinned commit and writes a small, reviewed JSON file
(src/advisor/core/kernel_curves.json) that advisor ships. pyarrow is needed here only:
install it in a separate venv; nothing on advisor's runtime path imports it.

    git --git-dir=<mirror> archive 095f58a51c4ca8e61b66ec108d86f223f8d559ce \\
        aic-core/src/aiconfigurator_core/systems | tar -x -C /var/tmp/aic
    python3 -m venv /var/tmp/kc-venv && /var/tmp/kc-venv/bin/pip install pyarrow pyyaml
    /var/tmp/kc-venv/bin/python benchmarks/perf/kernel_curves.py --aic /var/tmp/aic
    /var/tmp/kc-venv/bin/python benchmarks/perf/kernel_curves.py --aic /var/tmp/aic --check

What each curve means (all medians; first over repeated rows of one key, then over the bin):
- decode_gemm: (weight bytes + bf16 activation bytes) / latency / the system yaml's mem_bw,
  for m (tokens) in [1, 16], binned by per-GPU weight-matrix bytes (log2 bins, MiB).
- prefill_gemm: 2*m*n*k / latency / the system yaml's dense tensor peak for the dtype,
  for n, k >= 1024, binned by m; "large_m" pools m >= 4096.
- decode_attention: K+V bytes read (batch * (history+1) * kv_heads * head_dim * 2 * kv bytes)
  / latency / mem_bw, full attention (window 0), calls reading >= 256 MiB of KV (more than any
  of these GPUs' L2 holds), by history.
- context_attention: causal FLOPs (2 * batch * heads * head_dim * isl^2) / latency / bf16 peak,
  full attention, by prompt length (isl).
- allreduce_us: vLLM custom all-reduce, CUDA-graph mode, median latency in microseconds by
  GPU count and message bytes (the table's message_size is in bf16 elements: bytes = 2x).
- allreduce_fused: the same from TensorRT-LLM's all-reduce table (comm/trtllm/<version>/): the
  Lamport kernels FlashInfer's fused all-reduce + RMSNorm ports, which vLLM runs under
  ``fuse_allreduce_rms``; newest TensorRT-LLM version.

Hygiene: rows implying more than the peak (bandwidth or FLOP/s) are dropped and counted; a
table with more than 1% such rows is rejected as known-bad and the next older table is used
(recorded under "rejected_tables"). Per (GPU, curve, dtype) the newest vLLM table that has
rows is used; its path, vLLM version, row counts and any reuse.yaml note are recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = "ai-dynamo/aiconfigurator"
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
SYSTEMS_REL = "aic-core/src/aiconfigurator_core/systems"
GENERATED_BY = (
    "/var/tmp/kc-venv/bin/python benchmarks/perf/kernel_curves.py --aic /var/tmp/aic "
    "--out src/advisor/core/kernel_curves.json"
)
DEFAULT_OUT = (
    Path(__file__).resolve().parents[2] / "src" / "advisor" / "core" / "kernel_curves.json"
)

# aiconfigurator system name -> advisor catalog GPU id (catalogs/gpus.yaml).
SYSTEM_TO_GPU: dict[str, str] = {
    "a100_sxm": "A100-80GB-SXM",  # system yaml: 2039 GB/s, 80 GB part
    "h100_sxm": "H100-SXM",
    "h200_sxm": "H200",
    "l40s": "L40S",
    "b200_sxm": "B200",
    "b300_sxm": "B300",
    "rtx_pro_6000_server": "RTX-PRO-6000",
}
UNMAPPED_REASON: dict[str, str] = {
    "gb200": "Grace-Blackwell superchip: no catalog GPU id (advisor's B200 is the HGX part)",
    "gb300": "Grace-Blackwell Ultra superchip: no catalog GPU id",
    "b60": "Intel Arc Pro B60: not in advisor's catalog",
}
INTERCONNECT: dict[str, str] = {
    "a100_sxm": "nvlink3",
    "h100_sxm": "nvlink4",
    "h200_sxm": "nvlink4",
    "b200_sxm": "nvlink5",
    "b300_sxm": "nvlink5",
    "l40s": "pcie4",
    "rtx_pro_6000_server": "pcie5",
}

# Bytes per weight element, scales included (nvfp4: one fp8 scale per 16 elements).
WEIGHT_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5625}
PEAK_KEY = {
    "bfloat16": "bfloat16_tc_flops",
    "fp8": "fp8_tc_flops",
    "fp8_block": "fp8_tc_flops",
    "nvfp4": "fp4_tc_flops",
}
KV_BYTES = {"bfloat16": 2, "fp8": 1}

MIB = 1 << 20
DECODE_M_MAX = 16
DECODE_GEMM_BINS_MIB = [2.0**i for i in range(-2, 11)]  # 0.25 MiB .. 1 GiB
PREFILL_M_BINS = [512, 1024, 2048, 4096, 8192, 16384]
#: per-GPU weight-matrix bins of the 2-D prefill GEMM curve (MiB, x4 steps): a tensor-parallel
#: slice of a layer is a smaller matrix, and the tables show a smaller matrix runs further from
#: peak at the same m (B200 fp8, m = 1024: 0.32-0.38 at a 70B layer's TP 1 shapes, 0.16-0.31 at
#: TP 8's), which the m-only curve averages away
PREFILL_WEIGHT_BINS_MIB = [4.0**i for i in range(-1, 6)]  # 0.25 MiB .. 1 GiB
#: per-GPU bytes of one expert's three matrices (3 x hidden x inter / moe_tp), x4 steps: the
#: MoE counterpart of PREFILL_WEIGHT_BINS_MIB (MiniMax-M2.5 nvfp4 on B200 at 1024 tokens:
#: 0.07 of fp4 peak at moe_tp 1, 0.03 at moe_tp 8)
MOE_EXPERT_BINS_MIB = [4.0**i for i in range(-3, 4)]  # 1/64 MiB .. 64 MiB
LARGE_M = 4096
PREFILL_MIN_NK = 1024
ATTN_HISTORY_BINS = [256, 1024, 4096, 16384, 65536]
ATTN_MIN_KV_BYTES = 256 * MIB  # 2x the largest L2 here (RTX PRO 6000: 128 MB)
#: the 2-D decode attention curve's columns: KV MiB one call reads, log2 bins from 256 MiB.
#: Keyed by history alone, the tables' efficiencies spread 0.09 median |log| around their bin's
#: median on B200/B300 (fp8 and bf16) and 0.06-0.08 on H100/H200 bf16; by history and the
#: call's KV bytes, 0.01-0.03: the same history runs ~0.55 of HBM bandwidth at batch 8 and
#: ~0.80 at batch 64 (issue 28 item 20). H100/H200 fp8 spread 0.10-0.12 by history and more
#: by both, so the grid is written only where it spreads less than the history curve on the
#: table it comes from (_spread)
ATTN_KV_BINS_MIB = [256, 2**20]
CTX_ISL_BINS = [512, 1024, 2048, 4096, 8192, 16384]
AR_BYTES = [1 << e for e in range(12, 29, 2)]  # 4 KiB .. 256 MiB, x4 steps
#: fp8 activation-quantization overheads (quantize/<version>/computescale_perf, scale_matrix_perf)
#: by the bf16 input's bytes (m x k x 2), log2 bins 1 KiB .. 512 MiB
QUANT_ACT_BINS_MIB = [2.0**i for i in range(-10, 10)]
BAD_TABLE_FRACTION = 0.01
CACHE_BIN_FRACTION = 0.10
#: the largest bin (lower edge, MiB) of a bytes-keyed bandwidth curve that CACHE_BIN_FRACTION can
#: drop as cache-resident: 2x the largest L2 of these GPUs (ATTN_MIN_KV_BYTES). Above it no
#: buffer stays in L2 between reads, so a row above HBM bandwidth is a bad row, dropped alone
#: (counted), and the bin stays: B200's nvfp4 decode-MoE bin of 1-2 GiB had 2 of 17 rows above
#: the system yaml's 7.7 TB/s (DeepSeek-V3's shape, 1.1-1.6x) and was dropped whole, so every
#: read over 1 GiB was charged the 512 MiB bin's 0.76 where the other 15 rows measure 0.82-0.87
CACHE_MAX_BIN_MIB = ATTN_MIN_KV_BYTES / MIB
SIG = 4


def _r(x: float) -> float:
    """Round to SIG significant digits (keeps the JSON small and diffs stable)."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{SIG}g}")


def _vkey(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _systems_dir(aic: Path) -> Path:
    for cand in (aic / SYSTEMS_REL, aic):
        if (cand / "data").is_dir():
            return cand
    raise SystemExit(f"no aiconfigurator systems dir under {aic} (expected {SYSTEMS_REL}/data)")


def _load_yaml(path: Path) -> Any:
    import yaml  # calibration-time dependency

    return yaml.safe_load(path.read_text())


# Columns that older tables lack, with the value they imply (full attention).
COLUMN_DEFAULTS: dict[str, Any] = {"window_size": 0, "kernel_source": ""}


def _read(path: Path, columns: list[str]) -> dict[str, list[Any]]:
    import pyarrow.parquet as pq  # type: ignore[import-not-found,import-untyped,unused-ignore]

    names = set(pq.read_schema(path).names)
    missing = [c for c in columns if c not in names]
    if any(c not in COLUMN_DEFAULTS for c in missing):
        raise SystemExit(f"{path}: missing columns {missing}")
    data: dict[str, list[Any]] = pq.read_table(
        path, columns=[c for c in columns if c in names]
    ).to_pydict()
    rows = len(next(iter(data.values()))) if data else 0
    for c in missing:
        data[c] = [COLUMN_DEFAULTS[c]] * rows
    return data


def _tables(sysdir: Path, system: str, op: str, name: str,
            framework: str = "vllm") -> list[tuple[str, Path]]:
    """(version, path) newest first."""
    base = sysdir / "data" / system / op / framework
    found = [(p.parent.name, p) for p in base.glob(f"*/{name}.parquet")] if base.is_dir() else []
    return sorted(found, key=lambda vp: _vkey(vp[0]), reverse=True)


def _reuse_note(path: Path, name: str) -> str | None:
    reuse = path.parent / "reuse.yaml"
    if not reuse.exists():
        return None
    for entry in (_load_yaml(reuse) or {}).get("reuse", []) or []:
        if entry.get("table") == name:
            return f"reuse.yaml: borrowed from vLLM {entry.get('from_version')}"
    return None


def _median_bins(per_key: dict[tuple[Any, ...], list[float]], bin_of: Any) -> dict[Any, float]:
    """Median per exact key first (repeated rows), then median of those per bin."""
    binned: dict[Any, list[float]] = defaultdict(list)
    for key, vals in per_key.items():
        b = bin_of(key)
        if b is not None:
            binned[b].append(statistics.median(vals))
    return {b: statistics.median(v) for b, v in binned.items()}


def _log2_bin(value_mib: float, bins: list[float]) -> float | None:
    if value_mib < bins[0] or value_mib >= bins[-1] * 2:
        return None
    return bins[0] * 2.0 ** math.floor(math.log2(value_mib / bins[0]))


def _label(x: float) -> str:
    return f"{x:g}"


def _grid(per_key: dict[tuple[Any, ...], list[float]], bin_of: Any) -> dict[str, dict[str, float]]:
    """A 2-D curve: median per exact key, then per (row bin, column bin) cell; ``bin_of`` maps
    a key to (row, column) or None. Empty cells are left out (the runtime interpolates each
    row over the cells it has)."""
    cells = _median_bins(per_key, bin_of)
    out: dict[str, dict[str, float]] = {}
    for (row, col) in sorted(cells):
        out.setdefault(_label(row), {})[_label(col)] = _r(cells[(row, col)])
    return out


def _lower_edge(value: float, bins: list[int]) -> int | None:
    below = [x for x in bins if x <= value]
    return below[-1] if below else None


class Curve:
    """Rows of one (table, curve, dtype): efficiencies per exact key, above-peak rows per bin."""

    def __init__(self) -> None:
        self.per_key: dict[tuple[Any, ...], list[float]] = defaultdict(list)
        self.rows = 0  # rows of this dtype in the table
        self.in_scope = 0  # rows the curve's filters keep (before the peak check)
        self.above = 0
        self.bin_rows: dict[Any, int] = defaultdict(int)
        self.bin_above: dict[Any, int] = defaultdict(int)

    def add(self, key: tuple[Any, ...], bin_: Any, eff: float) -> None:
        self.in_scope += 1
        if bin_ is not None:
            self.bin_rows[bin_] += 1
        if eff > 1.0:
            self.above += 1
            if bin_ is not None:
                self.bin_above[bin_] += 1
            return
        self.per_key[key].append(eff)


def _x4_bin(value: float, bins: list[float]) -> float | None:
    """Lower edge of the x4 bin (``bins``: a power-of-4 ladder) that holds ``value``."""
    if not bins[0] <= value < bins[-1] * 4:
        return None
    return bins[0] * 4.0 ** math.floor(math.log(value / bins[0], 4) + 1e-9)


def _history_and_kv_bin(kv_bytes_per_token: float) -> Any:
    """(history bin, KV MiB bin) of a decode attention key (history, batch, heads, kv heads,
    head dim) whose KV dtype stores ``kv_bytes_per_token`` bytes a head and element."""

    def bin_of(key: tuple[Any, ...]) -> tuple[int, float] | None:
        hist, b, _h, hkv, hd = key
        h_bin = _lower_edge(hist, ATTN_HISTORY_BINS)
        kv_bin = _log2_bin(b * hist * hkv * hd * 2 * kv_bytes_per_token / MIB, ATTN_KV_BINS_MIB)
        return None if h_bin is None or kv_bin is None else (h_bin, kv_bin)

    return bin_of


def _spread(per_key: dict[tuple[Any, ...], list[float]], bin_of: Any) -> float:
    """How far a table's efficiencies sit from their bin's median: the median |log(e / bin
    median)| over every exact key (its own median first) that ``bin_of`` places."""
    centre = _median_bins(per_key, bin_of)
    devs = [abs(math.log(statistics.median(vals) / centre[b]))
            for key, vals in per_key.items() if (b := bin_of(key)) is not None]
    return statistics.median(devs) if devs else math.inf


def _attention_grid(c: Curve, kv_bytes: float) -> dict[str, Any]:
    """The decode attention grid by (history, KV MiB of the call), where it spreads less than
    the history curve on the same table (ATTN_KV_BINS_MIB); else nothing."""
    by_both = _history_and_kv_bin(kv_bytes)
    if _spread(c.per_key, by_both) >= _spread(
            c.per_key, lambda key: _lower_edge(key[0], ATTN_HISTORY_BINS)):
        return {}
    return {"efficiency_by_history_and_kv_mib": _grid(c.per_key, by_both)}


def _m_and_weight_bin(key: tuple[Any, ...]) -> tuple[int, float] | None:
    """(m bin, per-GPU weight MiB bin) of a prefill GEMM key (m, n, k, weight MiB)."""
    m_bin, w_bin = _lower_edge(key[0], PREFILL_M_BINS), _x4_bin(key[3], PREFILL_WEIGHT_BINS_MIB)
    return None if m_bin is None or w_bin is None else (m_bin, w_bin)


def _tpe_and_expert_bin(key: tuple[Any, ...]) -> tuple[float, float] | None:
    """(tokens-per-expert bin, one expert's per-GPU MiB bin) of a prefill MoE key."""
    t_bin = _log2_bin(key[0], MOE_TOKENS_PER_EXPERT_BINS)
    e_bin = _x4_bin(key[-1], MOE_EXPERT_BINS_MIB)
    return None if t_bin is None or e_bin is None else (t_bin, e_bin)


class Builder:
    def __init__(self, sysdir: Path) -> None:
        self.sysdir = sysdir
        self.rejected: list[dict[str, Any]] = []
        self.audit: list[list[Any]] = []

    def rel(self, path: Path) -> str:
        return f"{SYSTEMS_REL}/{path.relative_to(self.sysdir).as_posix()}"

    def table_meta(self, path: Path, version: str, name: str, c: Curve) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "path": self.rel(path),
            "vllm": version,
            "rows_total": c.rows,
            "rows_used": c.in_scope - c.above,
            "rows_above_peak": c.above,
        }
        note = _reuse_note(path, name)
        if note:
            meta["note"] = note
        return meta

    def pick(
        self,
        name: str,
        curve_name: str,
        dtype: str,
        candidates: list[tuple[str, Path, Curve]],
        bin_of: Any,
        key_name: str,
        fmt: Any,
        flops_bound: bool,
        extra: Any = None,
        bins_are_mib: bool = False,
    ) -> dict[str, Any] | None:
        """Newest table whose curve is non-empty and passes hygiene; audit all of them.
        ``bins_are_mib``: a bandwidth curve whose bins are byte sizes (lower edges, MiB); only
        those below CACHE_MAX_BIN_MIB can then be dropped as cache-resident."""
        chosen: dict[str, Any] | None = None
        for version, path, c in candidates:
            if c.above:
                self.audit.append([self.rel(path), f"{curve_name} {dtype}", c.above, c.in_scope])
            if flops_bound and c.in_scope and c.above > BAD_TABLE_FRACTION * c.in_scope:
                # recorded whether or not a newer table was already chosen: the audit is the point
                self.rejected.append(
                    {
                        "path": self.rel(path),
                        "vllm": version,
                        "curve": f"{curve_name} {dtype}",
                        "rows_above_peak": c.above,
                        "rows": c.in_scope,
                        "reason": (
                            f"{c.above / c.in_scope:.1%} of rows imply more than the dense peak "
                            f"(limit {BAD_TABLE_FRACTION:.0%}): table skipped"
                        ),
                    }
                )
                continue
            if chosen is not None or not c.per_key:
                continue
            curve = _median_bins(c.per_key, bin_of)
            dropped: dict[str, str] = {}
            if not flops_bound:
                for b_ in sorted(curve):
                    rows, above = c.bin_rows[b_], c.bin_above[b_]
                    if bins_are_mib and b_ >= CACHE_MAX_BIN_MIB:
                        continue  # too large for any L2: its above-peak rows are dropped alone
                    if rows and above > CACHE_BIN_FRACTION * rows:
                        dropped[fmt(b_)] = (
                            f"{above}/{rows} rows above HBM bandwidth (cache-resident)"
                        )
                        del curve[b_]
            if not curve:
                continue
            chosen = {key_name: {fmt(b_): _r(curve[b_]) for b_ in sorted(curve)}}
            if extra is not None:
                chosen.update(extra(c))
            if dropped:
                chosen["dropped_bins"] = dropped
            chosen["tables"] = [self.table_meta(path, version, name, c)]
        return chosen

    # ---- GEMM -------------------------------------------------------------------------
    def gemm(self, system: str, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        mem_bw = float(spec["mem_bw"])
        dec: dict[str, list[tuple[str, Path, Curve]]] = defaultdict(list)
        pre: dict[str, list[tuple[str, Path, Curve]]] = defaultdict(list)
        for version, path in _tables(self.sysdir, system, "gemm", "gemm_perf"):
            t = _read(path, ["gemm_dtype", "m", "n", "k", "latency"])
            dcur: dict[str, Curve] = {}
            pcur: dict[str, Curve] = {}
            for dt, m, n, k, lat in zip(
                t["gemm_dtype"], t["m"], t["n"], t["k"], t["latency"], strict=True
            ):
                if dt not in WEIGHT_BYTES or m <= 0 or lat is None or lat <= 0:
                    continue
                dc = dcur.setdefault(dt, Curve())
                pc = pcur.setdefault(dt, Curve())
                dc.rows += 1
                pc.rows += 1
                sec = lat * 1e-3
                if m <= DECODE_M_MAX:
                    w_mib = n * k * WEIGHT_BYTES[dt] / MIB
                    eff = (w_mib * MIB + m * (n + k) * 2) / sec / mem_bw
                    dc.add((w_mib, m, n, k), _log2_bin(w_mib, DECODE_GEMM_BINS_MIB), eff)
                peak = spec.get(PEAK_KEY[dt])
                if peak and m >= PREFILL_M_BINS[0] and n >= PREFILL_MIN_NK and k >= PREFILL_MIN_NK:
                    eff = 2.0 * m * n * k / sec / float(peak)
                    pc.add((m, n, k, n * k * WEIGHT_BYTES[dt] / MIB),
                           _lower_edge(m, PREFILL_M_BINS), eff)
            for dt in dcur:
                dec[dt].append((version, path, dcur[dt]))
                pre[dt].append((version, path, pcur[dt]))
        decode: dict[str, Any] = {}
        prefill: dict[str, Any] = {}
        for dt in sorted(dec):
            got = self.pick(
                "gemm_perf",
                "decode_gemm",
                dt,
                dec[dt],
                lambda key: _log2_bin(key[0], DECODE_GEMM_BINS_MIB),
                "efficiency_by_weight_mib",
                _label,
                flops_bound=False,
                bins_are_mib=True,
            )
            if got:
                decode[dt] = got

            def large(c: Curve) -> dict[str, Any]:
                v = _median_bins(c.per_key, lambda key: "large" if key[0] >= LARGE_M else None)
                out: dict[str, Any] = {"efficiency_large_m": _r(v["large"])} if "large" in v else {}
                out["efficiency_by_m_and_weight_mib"] = _grid(c.per_key, _m_and_weight_bin)
                return out

            got = self.pick(
                "gemm_perf",
                "prefill_gemm",
                dt,
                pre[dt],
                lambda key: _lower_edge(key[0], PREFILL_M_BINS),
                "efficiency_by_m",
                str,
                flops_bound=True,
                extra=large,
            )
            if got:
                prefill[dt] = got
        return decode, prefill

    # ---- attention --------------------------------------------------------------------
    def attention(self, system: str, spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        mem_bw = float(spec["mem_bw"])
        bf16_peak = float(spec["bfloat16_tc_flops"])
        cols = [
            "batch_size",
            "isl",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "kv_cache_dtype",
            "step",
            "window_size",
            "latency",
        ]
        gen: dict[str, list[tuple[str, Path, Curve]]] = defaultdict(list)
        for version, path in _tables(self.sysdir, system, "attention", "generation_attention_perf"):
            t = _read(path, cols)
            cur: dict[str, Curve] = {}
            for b, _isl, _h, hkv, hd, kd, step, win, lat in zip(*(t[c] for c in cols), strict=True):
                if kd not in KV_BYTES or win != 0 or lat is None or lat <= 0:
                    continue
                c = cur.setdefault(kd, Curve())
                c.rows += 1
                kv_bytes = b * (step + 1) * hkv * hd * 2 * KV_BYTES[kd]
                if kv_bytes < ATTN_MIN_KV_BYTES:
                    continue
                eff = kv_bytes / (lat * 1e-3) / mem_bw
                c.add((step + 1, b, _h, hkv, hd), _lower_edge(step + 1, ATTN_HISTORY_BINS), eff)
            for kd, c in cur.items():
                gen[kd].append((version, path, c))
        ctx: dict[str, list[tuple[str, Path, Curve]]] = defaultdict(list)
        for version, path in _tables(self.sysdir, system, "attention", "context_attention_perf"):
            t = _read(path, cols)
            cur = {}
            for b, isl, h, _hkv, hd, kd, _step, win, lat in zip(*(t[c] for c in cols), strict=True):
                if kd not in KV_BYTES or win != 0 or lat is None or lat <= 0:
                    continue
                c = cur.setdefault(kd, Curve())
                c.rows += 1
                if isl < CTX_ISL_BINS[0]:
                    continue
                eff = 2.0 * b * h * hd * isl * isl / (lat * 1e-3) / bf16_peak
                c.add((isl, b, h, hd), _lower_edge(isl, CTX_ISL_BINS), eff)
            for kd, c in cur.items():
                ctx[kd].append((version, path, c))
        decode: dict[str, Any] = {}
        context: dict[str, Any] = {}
        for kd in sorted(gen):
            got = self.pick(
                "generation_attention_perf",
                "decode_attention",
                kd,
                gen[kd],
                lambda key: _lower_edge(key[0], ATTN_HISTORY_BINS),
                "efficiency_by_history",
                str,
                flops_bound=False,
                extra=lambda c, kd=kd: _attention_grid(c, KV_BYTES[kd]),
            )
            if got:
                decode[kd] = got
        for kd in sorted(ctx):
            got = self.pick(
                "context_attention_perf",
                "context_attention",
                kd,
                ctx[kd],
                lambda key: _lower_edge(key[0], CTX_ISL_BINS),
                "efficiency_by_isl",
                str,
                flops_bound=True,
            )
            if got:
                context[kd] = got
        return decode, context

    # ---- all-reduce -------------------------------------------------------------------
    def allreduce(self, system: str) -> dict[str, Any]:
        for version, path in _tables(self.sysdir, system, "comm", "custom_allreduce_perf"):
            t = _read(path, ["num_gpus", "message_size", "latency", "backend"])
            per: dict[tuple[int, int], list[float]] = defaultdict(list)
            c = Curve()
            for g, size, lat, backend in zip(
                t["num_gpus"], t["message_size"], t["latency"], t["backend"], strict=True
            ):
                if backend != "vllm_graph" or lat is None or lat <= 0:
                    continue
                c.rows += 1
                c.in_scope += 1
                per[(g, 2 * size)].append(lat * 1e3)
            if not per:
                continue
            out: dict[str, dict[str, float]] = {}
            for g in sorted({g for g, _ in per}):
                row = {
                    str(nb): _r(statistics.median(per[(g, nb)]))
                    for nb in AR_BYTES
                    if (g, nb) in per
                }
                if row:
                    out[str(g)] = row
            return {
                "latency_us_by_gpus_and_bytes": out,
                "interconnect": INTERCONNECT.get(system),
                "tables": [self.table_meta(path, version, "custom_allreduce_perf", c)],
            }
        return {}


def _allreduce_fused(builder: Builder, system: str) -> dict[str, Any]:
    """The all-reduce that vLLM's fused all-reduce + RMSNorm pass runs (``fuse_allreduce_rms``,
    formerly ``enable_fi_allreduce_fusion``): FlashInfer's ``trtllm_allreduce_fusion``, a port
    of TensorRT-LLM's Lamport one-/two-shot all-reduce kernels with the residual add and
    RMSNorm as their epilogue. aiconfigurator measures those kernels in TensorRT-LLM itself
    (``comm/trtllm/<version>/custom_allreduce_perf``: ``collector/network/collect_all_reduce.py``,
    CUDA graph, ``AllReduceStrategy.AUTO``, ``AllReduceFusionOp.NONE``, bf16), so the epilogue's
    few bytes per token are not in the time. Median latency (microseconds) by GPU count and
    message bytes (the table's message_size is in bf16 elements), at the same sizes as
    ``allreduce_graph``; the newest TensorRT-LLM table."""
    for version, path in _tables(builder.sysdir, system, "comm", "custom_allreduce_perf",
                                 framework="trtllm"):
        t = _read(path, ["num_gpus", "message_size", "latency", "allreduce_dtype"])
        per: dict[tuple[int, int], list[float]] = defaultdict(list)
        rows = 0
        for g, size, lat, dt in zip(t["num_gpus"], t["message_size"], t["latency"],
                                    t["allreduce_dtype"], strict=True):
            if dt != "bfloat16" or lat is None or lat <= 0:
                continue
            rows += 1
            per[(g, 2 * size)].append(lat * 1e3)
        out: dict[str, dict[str, float]] = {}
        for g in sorted({g for g, _ in per}):
            row = {str(nb): _r(statistics.median(per[(g, nb)])) for nb in AR_BYTES
                   if (g, nb) in per}
            if row:
                out[str(g)] = row
        if out:
            return {"latency_us_by_gpus_and_bytes": out,
                    "interconnect": INTERCONNECT.get(system),
                    "tables": [{"path": builder.rel(path), "tensorrt_llm": version,
                                "rows_total": rows, "rows_used": rows,
                                "rows_above_peak": 0}]}
    return {}


def _fp8_quant(builder: Builder, system: str) -> dict[str, Any]:
    """The fp8 activation-quantization overheads aiconfigurator measures beside the GEMM table
    (collector/vllm/collect_computescale.py): ``scale_matrix`` = vLLM's static per-tensor
    scaled_fp8_quant of an m x k bf16 input; ``compute_scale`` = the dynamic (per-token) quant
    minus the static one, i.e. finding the scales. The fp8 GEMM table times a layer built with
    activation_scheme="dynamic" (collect_gemm.py), so both are inside it; aiconfigurator's own
    ``fp8_static`` GEMM subtracts compute_scale, and scale_matrix too where the input arrives in
    fp8 (operations/gemm.py, rust operators/gemm.rs). Median microseconds by input MiB."""
    out: dict[str, Any] = {}
    for name, key in (("computescale_perf", "compute_scale_us_by_input_mib"),
                      ("scale_matrix_perf", "static_quant_us_by_input_mib")):
        for version, path in _tables(builder.sysdir, system, "quantize", name):
            t = _read(path, ["m", "k", "latency"])
            per: dict[tuple[Any, ...], list[float]] = defaultdict(list)
            rows = 0
            for m, k, lat in zip(t["m"], t["k"], t["latency"], strict=True):
                if lat is None or lat < 0 or m <= 0 or k <= 0:
                    continue
                rows += 1
                per[(m * k * 2 / MIB, m, k)].append(lat * 1e3)
            if not per:
                continue
            curve = _median_bins(per, lambda key: _log2_bin(key[0], QUANT_ACT_BINS_MIB))
            out[key] = {_label(b): _r(curve[b]) for b in sorted(curve)}
            out.setdefault("tables", []).append(
                {"path": builder.rel(path), "vllm": version, "rows_total": rows,
                 "rows_used": rows, "rows_above_peak": 0})
            break
    return out


#: bytes per expert weight of each MoE table dtype (with block scales where the format has them)
MOE_WEIGHT_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0 + 4 / 128**2, "nvfp4": 0.5625,
                    "w4a16_mxfp4": 4.25 / 8, "int4_wo": 0.5 + 2 / 32, "w4a8_mxfp4_mxfp8": 4.25 / 8}
#: the dense peak an MoE dtype computes at (weight-only formats: bf16 math)
MOE_PEAK_KEY = {"bfloat16": "bfloat16_tc_flops", "fp8": "fp8_tc_flops",
                "fp8_block": "fp8_tc_flops", "nvfp4": "fp4_tc_flops",
                "w4a16_mxfp4": "bfloat16_tc_flops", "int4_wo": "bfloat16_tc_flops",
                "w4a8_mxfp4_mxfp8": "fp8_tc_flops"}
MOE_TOKENS_PER_EXPERT_BINS = [2.0**i for i in range(0, 12)]  # 1 .. 2048
#: kernel sources kept per MoE dtype (prefixes of the tables' ``kernel_source``); a dtype not
#: named here pools every source. w4a16_mxfp4 is two vLLM methods in the 0.24.0 tables:
#: ``vllm_gptossmxfp4moe_*`` (gpt-oss's own ``quant_method: mxfp4`` checkpoints; on H100 and
#: H200 vLLM picked OpenAI's Triton MXFP4 kernel, ``..._triton_oaitritonmxfp4expertsmonolithic``)
#: and ``vllm_compressedtensorsw4a4mxfp4moe_marlin_*`` (compressed-tensors MXFP4 checkpoints on
#: Marlin, timed only at another model's shape: hidden 3584, 896 experts, top 16); the
#: 0.18.0/0.19.0 tables have one source,
#: ``vllm_mxfp4_moe`` (the gpt-oss method before the backend was named). Pooled, the curve mixed two
#: methods at two models' shapes, so only gpt-oss's method is kept: the one advisor's "mxfp4"
#: (a gpt-oss checkpoint's quant_method) means
#: Per-tensor fp8 keeps vLLM's Triton fused MoE (``vllm_fused_moe``, and
#: ``vllm_modeloptfp8moe_triton_*`` in the 0.24.0 L40S table): the 0.24.0 tables of every other
#: GPU time ``vllm_modeloptfp8moe_flashinfer_*`` only, which vLLM runs just with
#: VLLM_USE_FLASHINFER_MOE_FP8=1 and FlashInfer installed (ModelOptFp8MoEMethod, envs.py: off
#: by default; vLLM 0.11.0 as installed from advisor's lock, which has no FlashInfer); on H100
#: and H200 that kernel reaches 0.10-0.17 of HBM bandwidth at 1 GiB of experts, slower than
#: bf16, where the fused MoE of the 0.19.0/0.22.0 tables reaches ~0.6
MOE_KERNEL_SOURCES: dict[str, tuple[str, ...]] = {
    "w4a16_mxfp4": ("vllm_gptossmxfp4moe_", "vllm_mxfp4_moe"),
    "fp8": ("vllm_fused_moe", "vllm_modeloptfp8moe_triton_")}


def moe_source_kept(dtype: str, source: str | None) -> bool:
    """Whether a MoE table row of ``dtype`` timed by ``source`` enters the dtype's curves."""
    keep = MOE_KERNEL_SOURCES.get(dtype)
    return keep is None or (source or "").startswith(keep)


def _moe(builder: Builder, system: str, spec: dict[str, Any]) -> tuple[dict[str, Any],
                                                                           dict[str, Any]]:
    """Fused-MoE kernels (balanced routing, no expert parallel), every kernel source of a dtype
    pooled but those :data:`MOE_KERNEL_SOURCES` restricts: decode = the touched experts' per-GPU
    weight bytes (min(E, tokens x topk) experts, 3 x hidden x inter / moe_tp each) / latency /
    mem_bw for tokens <= 16, by those bytes; prefill = 2 x tokens x topk x 3 x hidden x inter /
    moe_tp / latency / the dtype's dense peak, by tokens per expert (tokens x topk / E), tokens >=
    512."""
    mem_bw = float(spec["mem_bw"])
    cols = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
            "moe_tp_size", "moe_ep_size", "distribution", "latency", "kernel_source"]
    dec: dict[str, list[tuple[str, Path, Curve]]] = defaultdict(list)
    pre: dict[str, list[tuple[str, Path, Curve]]] = defaultdict(list)
    for version, path in _tables(builder.sysdir, system, "moe", "moe_perf"):
        t = _read(path, cols)
        dcur: dict[str, Curve] = {}
        pcur: dict[str, Curve] = {}
        for dt, m, h, inter, k, e, tp, ep, dist, lat, src in zip(*(t[c] for c in cols),
                                                                 strict=True):
            if (dt not in MOE_WEIGHT_BYTES or dist != "balanced" or ep != 1 or not lat
                    or lat <= 0 or not moe_source_kept(dt, src)):
                continue
            dc = dcur.setdefault(dt, Curve())
            pc = pcur.setdefault(dt, Curve())
            dc.rows += 1
            pc.rows += 1
            sec = lat * 1e-3
            per_expert = 3 * h * inter / max(tp, 1)
            if m <= DECODE_M_MAX:
                w_mib = min(e, m * k) * per_expert * MOE_WEIGHT_BYTES[dt] / MIB
                eff = w_mib * MIB / sec / mem_bw
                dc.add((w_mib, m, h, inter, k, e, tp), _log2_bin(w_mib, DECODE_GEMM_BINS_MIB),
                       eff)
            peak = spec.get(MOE_PEAK_KEY[dt])
            if peak and m >= PREFILL_M_BINS[0]:
                tpe = m * k / e
                eff = 2.0 * m * k * per_expert / sec / float(peak)
                pc.add((tpe, m, h, inter, k, e, tp, per_expert * MOE_WEIGHT_BYTES[dt] / MIB),
                       _log2_bin(tpe, MOE_TOKENS_PER_EXPERT_BINS), eff)
        for dt in dcur:
            dec[dt].append((version, path, dcur[dt]))
            pre[dt].append((version, path, pcur[dt]))
    decode: dict[str, Any] = {}
    prefill: dict[str, Any] = {}
    for dt in sorted(dec):
        got = builder.pick("moe_perf", "decode_moe", dt, dec[dt],
                           lambda key: _log2_bin(key[0], DECODE_GEMM_BINS_MIB),
                           "efficiency_by_weight_mib", _label, flops_bound=False,
                           bins_are_mib=True)
        if got:
            decode[dt] = got
        got = builder.pick("moe_perf", "prefill_moe", dt, pre[dt],
                           lambda key: _log2_bin(key[0], MOE_TOKENS_PER_EXPERT_BINS),
                           "efficiency_by_tokens_per_expert", _label, flops_bound=True,
                           extra=lambda c: {"efficiency_by_tokens_per_expert_and_expert_mib":
                                            _grid(c.per_key, _tpe_and_expert_bin)})
        if got:
            prefill[dt] = got
    return decode, prefill


def build(aic: Path) -> dict[str, Any]:
    sysdir = _systems_dir(aic)
    builder = Builder(sysdir)
    gpus: dict[str, Any] = {}
    for system, gpu_id in sorted(SYSTEM_TO_GPU.items(), key=lambda kv: kv[1]):
        spec_path = sysdir / f"{system}.yaml"
        spec = _load_yaml(spec_path)["gpu"]
        decode_gemm, prefill_gemm = builder.gemm(system, spec)
        decode_attn, context_attn = builder.attention(system, spec)
        decode_moe, prefill_moe = _moe(builder, system, spec)
        peaks = {
            k: spec[k] for k in ("bfloat16_tc_flops", "fp8_tc_flops", "fp4_tc_flops") if spec.get(k)
        }
        gpus[gpu_id] = {
            "aiconfigurator_system": system,
            "system_spec": {
                "path": f"{SYSTEMS_REL}/{system}.yaml",
                "mem_bw_bytes_s": float(spec["mem_bw"]),
                **{k: float(v) for k, v in peaks.items()},
            },
            "decode_gemm": decode_gemm,
            "prefill_gemm": prefill_gemm,
            "decode_attention": decode_attn,
            "context_attention": context_attn,
            "allreduce_graph": builder.allreduce(system),
            "allreduce_fused": _allreduce_fused(builder, system),
            "decode_moe": decode_moe,
            "prefill_moe": prefill_moe,
            "fp8_activation_quant": _fp8_quant(builder, system),
        }
    return {
        "schema_version": 1,
        "source": {
            "repo": f"https://github.com/{REPO}",
            "commit": COMMIT,
            "license": "Apache-2.0",
            "tables_root": f"{SYSTEMS_REL}/data/<system>/<op>/vllm/<version>/",
            "generated_by": GENERATED_BY,
        },
        "definitions": {
            "decode_gemm": (
                f"(n*k*weight_bytes + m*(n+k)*2) / latency / system mem_bw, "
                f"m in [1, {DECODE_M_MAX}]; key = per-GPU weight MiB, log2 bin lower edge; "
                "weight bytes/elt: " + ", ".join(f"{k} {v}" for k, v in WEIGHT_BYTES.items())
            ),
            "prefill_gemm": (
                "2*m*n*k / latency / system dense peak for the dtype "
                f"(fp8_block: fp8 peak, nvfp4: fp4 peak), n, k >= {PREFILL_MIN_NK}; "
                f"by_m key = m bin lower edge; large_m pools m >= {LARGE_M}; by_m_and_weight_mib: "
                "rows = m bin lower edge, columns = per-GPU weight MiB (n*k*weight_bytes), x4 "
                "bin lower edge"
            ),
            "decode_attention": (
                "batch*(history+1)*kv_heads*head_dim*2*kv_bytes / latency / mem_bw, window 0, "
                f"calls reading >= {ATTN_MIN_KV_BYTES // MIB} MiB of KV; "
                "key = history bin lower edge (tokens); by_history_and_kv_mib: rows = history "
                "bin lower edge, columns = KV MiB the call reads, log2 bin lower edge"
            ),
            "context_attention": (
                "causal 2*batch*heads*head_dim*isl^2 / latency / bf16 dense peak, window 0; "
                "key = isl bin lower edge (tokens)"
            ),
            "allreduce_graph": (
                "vLLM custom all-reduce, CUDA-graph backend, bf16; median latency in "
                "microseconds; keys = GPU count, then message bytes (2 x the table's elements)"
            ),
            "allreduce_fused": (
                "TensorRT-LLM's all-reduce (the kernels FlashInfer's trtllm_allreduce_fusion "
                "ports, which vLLM's fuse_allreduce_rms pass runs with the residual add and "
                "RMSNorm fused in), CUDA graph, AllReduceStrategy.AUTO, no fusion op, bf16; "
                "median latency in microseconds; keys = GPU count, then message bytes"
            ),
            "decode_moe": (
                "fused MoE, balanced routing, EP 1, tokens <= 16, every kernel source of the "
                "dtype pooled except "
                + "; ".join(f"{k}: only sources starting {' or '.join(v)}"
                            for k, v in MOE_KERNEL_SOURCES.items())
                + ": min(E, tokens*topk)*3*hidden*inter/moe_tp*weight_bytes / latency "
                "/ mem_bw; key = those per-GPU MiB, log2 bin lower edge; weight bytes/elt: "
                + ", ".join(f"{k} {v:.4g}" for k, v in MOE_WEIGHT_BYTES.items())
            ),
            "prefill_moe": (
                "fused MoE, balanced routing, EP 1, tokens >= 512: 2*tokens*topk*3*hidden*inter/"
                "moe_tp / latency / the dtype's dense peak (weight-only: bf16); key = tokens per "
                "expert (tokens*topk/E), log2 bin lower edge; by_tokens_per_expert_and_expert_mib:"
                " rows = that key, columns = one expert's per-GPU weight MiB (3*hidden*inter/"
                "moe_tp*weight_bytes), x4 bin lower edge"
            ),
            "fp8_activation_quant": (
                "vLLM's fp8 activation quantization of an m x k bf16 input, median microseconds "
                "by its bytes (m*k*2), log2 bin lower edge (MiB): static_quant = static "
                "per-tensor scaled_fp8_quant (scale_matrix_perf); compute_scale = dynamic "
                "per-token quant minus static (computescale_perf). Both are inside the fp8 "
                "GEMM table, which is timed with dynamic activation scales"
            ),
            "hygiene": (
                "median per exact key, then per bin; rows implying more than peak are "
                "dropped and counted (rows_above_peak; audit_rows_above_peak lists [table, "
                "curve, rows above, rows] for every table read, used or not). FLOP-bound "
                "curves (prefill_gemm, context_attention): a table with more than "
                f"{BAD_TABLE_FRACTION:.0%} such rows is rejected (rejected_tables) and the "
                "next older vLLM table is used. Bandwidth-bound curves (decode_gemm, "
                f"decode_attention): a bin with more than {CACHE_BIN_FRACTION:.0%} of its rows "
                "above HBM bandwidth is cache-resident (the benchmark re-reads the same buffer "
                "from L2), not HBM-bound, and is dropped (dropped_bins). Newest vLLM table "
                "with rows per GPU, curve and dtype."
            ),
        },
        "gpus": gpus,
        "unmapped_systems": dict(sorted(UNMAPPED_REASON.items())),
        "rejected_tables": builder.rejected,
        "audit_rows_above_peak": builder.audit,
    }


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--aic",
        type=Path,
        default=Path("/var/tmp/aic"),
        help="aiconfigurator extract (git archive of aic-core/src/aiconfigurator_core/systems)",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to write or check")
    ap.add_argument(
        "--check",
        action="store_true",
        help="regenerate in memory and fail (exit 1) if --out differs",
    )
    args = ap.parse_args(argv)
    text = dumps(build(args.aic))
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if json.loads(current or "null") != json.loads(text):
            print(f"{args.out} is stale: regenerate with\n  {GENERATED_BY}", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
