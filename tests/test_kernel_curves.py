"""The shipped kernel efficiency curves (src/advisor/core/kernel_curves.json) are sane and current.

The file is written by benchmarks/perf/kernel_curves.py from NVIDIA aiconfigurator's measured
vLLM kernel tables (pyarrow, calibration time only). These tests read only the JSON: no pyarrow,
no pandas. The staleness test regenerates it, and runs only where the extract and the
calibration venv exist (see benchmarks/perf/KERNELS.md).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "src" / "advisor" / "core" / "kernel_curves.json"
SCRIPT = ROOT / "benchmarks" / "perf" / "kernel_curves.py"
AIC = Path("/var/tmp/aic")
KC_PYTHON = Path("/var/tmp/kc-venv/bin/python")
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
TABLES_PREFIX = "aic-core/src/aiconfigurator_core/systems/data/"

EFFICIENCY_CURVES = {
    "decode_gemm": "efficiency_by_weight_mib",
    "prefill_gemm": "efficiency_by_m",
    "decode_attention": "efficiency_by_history",
    "context_attention": "efficiency_by_isl",
}
HBM_GPUS = ["A100-80GB-SXM", "H100-SXM", "H200", "B200", "B300"]
HOPPER_BLACKWELL = ["H100-SXM", "H200", "B200", "B300"]
#: decode GEMM efficiency may dip this much (absolute) from one bin to the next larger one
MONOTONE_NOISE = 0.07


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SHIPPED.read_text())
    return data


def _curves(doc: dict[str, Any]):
    for gpu, g in doc["gpus"].items():
        for curve in (*EFFICIENCY_CURVES, "allreduce_graph"):
            entries = {"": g[curve]} if curve == "allreduce_graph" else g[curve]
            for dtype, entry in entries.items():
                if entry:
                    yield gpu, curve, dtype, entry


def _decode_bf16(doc: dict[str, Any], gpu: str) -> dict[float, float]:
    curve = doc["gpus"][gpu]["decode_gemm"]["bfloat16"]["efficiency_by_weight_mib"]
    return {float(k): v for k, v in curve.items()}


def test_source_is_pinned(doc):
    src = doc["source"]
    assert src["commit"] == COMMIT
    assert src["repo"] == "https://github.com/ai-dynamo/aiconfigurator"
    assert src["license"] == "Apache-2.0"
    assert "benchmarks/perf/kernel_curves.py" in src["generated_by"]
    assert doc["schema_version"] == 1


def test_gpu_ids_are_catalog_ids(doc):
    catalog = yaml.safe_load((ROOT / "catalogs" / "gpus.yaml").read_text())
    ids = {g["id"] for g in catalog["gpus"]}
    assert set(doc["gpus"]) <= ids
    assert {"H100-SXM", "H200", "A100-80GB-SXM", "L40S", "B200"} <= set(doc["gpus"])
    for gpu, g in doc["gpus"].items():
        system = g["aiconfigurator_system"]
        assert g["system_spec"]["path"].endswith(f"/{system}.yaml"), gpu
        assert g["system_spec"]["mem_bw_bytes_s"] > 0


def test_every_efficiency_in_unit_interval(doc):
    count = 0
    for gpu, curve, dtype, entry in _curves(doc):
        if curve == "allreduce_graph":
            continue
        values = list(entry[EFFICIENCY_CURVES[curve]].values())
        if "efficiency_large_m" in entry:
            values.append(entry["efficiency_large_m"])
        assert values, (gpu, curve, dtype)
        for v in values:
            assert 0 < v <= 1, (gpu, curve, dtype, v)
            count += 1
    assert count > 300


def test_every_curve_names_its_tables(doc):
    for gpu, curve, dtype, entry in _curves(doc):
        tables = entry["tables"]
        assert tables, (gpu, curve, dtype)
        system = doc["gpus"][gpu]["aiconfigurator_system"]
        for t in tables:
            assert t["path"].startswith(f"{TABLES_PREFIX}{system}/"), t["path"]
            assert t["path"].endswith(".parquet")
            assert f"/vllm/{t['vllm']}/" in t["path"]
            assert re.fullmatch(r"\d+\.\d+\.\d+", t["vllm"])
            assert 0 < t["rows_used"] <= t["rows_total"]
            assert t["rows_above_peak"] >= 0


def test_fp8_activation_quant_is_measured_where_fp8_gemms_are(doc):
    """The fp8 activation-quantization tables (compute_scale, static quant) the step model takes
    off a static-scale checkpoint's fp8 GEMMs: present for every HBM GPU with fp8 GEMM tables,
    named, positive microseconds, growing with the input (a few us at decode sizes, tens of us
    for an 8k-token prefill chunk)."""
    for gpu in HOPPER_BLACKWELL:
        g = doc["gpus"][gpu]
        assert "fp8" in g["decode_gemm"], gpu
        q = g["fp8_activation_quant"]
        system = g["aiconfigurator_system"]
        assert {t["path"] for t in q["tables"]} == {
            f"{TABLES_PREFIX}{system}/quantize/vllm/{t['vllm']}/{name}.parquet"
            for t, name in zip(q["tables"], ("computescale_perf", "scale_matrix_perf"),
                               strict=True)}
        for key in ("compute_scale_us_by_input_mib", "static_quant_us_by_input_mib"):
            curve = {float(k): v for k, v in q[key].items()}
            assert all(v > 0 for v in curve.values()), (gpu, key)
            small, large = curve[min(curve)], curve[max(curve)]
            assert small < 5 and large > 10 * small, (gpu, key)
        # the static quant of a decode-sized input (8 tokens x 8192 x bf16 = 128 KiB) is a
        # launch-bound kernel of a few microseconds
        assert 1 < q["static_quant_us_by_input_mib"]["0.125"] < 5, gpu


def test_no_curve_uses_a_rejected_table(doc):
    rejected = {(r["path"], r["curve"]) for r in doc["rejected_tables"]}
    for gpu, curve, dtype, entry in _curves(doc):
        for t in entry["tables"]:
            assert (t["path"], f"{curve} {dtype}") not in rejected, (gpu, curve, dtype)


def test_h200_0_19_context_attention_is_rejected_as_above_peak(doc):
    """The issue's known-bad table, verified: most of its rows imply more than the bf16 peak."""
    bad = [
        r
        for r in doc["rejected_tables"]
        if r["path"]
        == f"{TABLES_PREFIX}h200_sxm/attention/vllm/0.19.0/context_attention_perf.parquet"
    ]
    assert {r["curve"] for r in bad} == {"context_attention bfloat16", "context_attention fp8"}
    for r in bad:
        assert r["rows_above_peak"] > 0.5 * r["rows"]
    assert doc["gpus"]["H200"]["context_attention"]["bfloat16"]["tables"][0]["vllm"] == "0.24.0"


def test_decode_gemm_efficiency_grows_with_matrix_bytes(doc):
    for gpu, g in doc["gpus"].items():
        for dtype, entry in g["decode_gemm"].items():
            points = sorted((float(k), v) for k, v in entry["efficiency_by_weight_mib"].items())
            assert len(points) >= 8, (gpu, dtype)
            for (b0, e0), (b1, e1) in zip(points, points[1:], strict=False):
                assert e1 >= e0 - MONOTONE_NOISE, (gpu, dtype, b0, e0, b1, e1)
            assert points[-1][1] > 2 * points[0][1], (gpu, dtype)


def test_decode_attention_grid_grows_with_the_bytes_of_one_call(doc):
    """Item 20: the same history runs closer to HBM bandwidth when one call reads more KV (a
    larger batch): each history row of efficiency_by_history_and_kv_mib, on Blackwell in both
    KV dtypes, rises from its smallest to its largest column by at least 0.08, every value in
    (0, 1], and the columns are log2 bins from the 1-D curve's 256 MiB floor."""
    checked = 0
    for gpu in ("B200", "B300"):
        for kd in ("fp8", "bfloat16"):
            grid = doc["gpus"][gpu]["decode_attention"][kd]["efficiency_by_history_and_kv_mib"]
            assert set(grid) >= {"1024", "4096", "16384"}, (gpu, kd)
            for hist, row in grid.items():
                cols = sorted((float(c), v) for c, v in row.items())
                assert cols[0][0] >= 256 and all(0 < v <= 1 for _, v in cols), (gpu, kd, hist)
                assert all(math.log2(c).is_integer() for c, _ in cols), (gpu, kd, hist)
                if len(cols) >= 3:
                    assert cols[-1][1] >= cols[0][1] + 0.08, (gpu, kd, hist, cols)
                    checked += 1
    assert checked >= 12
    # written where it spreads the table less than the history curve does: every bf16 table
    # and Blackwell's fp8; not Hopper's fp8 (kernel_curves._attention_grid)
    for gpu, g in doc["gpus"].items():
        for kd, entry in g["decode_attention"].items():
            has = bool(entry.get("efficiency_by_history_and_kv_mib"))
            assert has == (kd == "bfloat16" or gpu not in ("H100-SXM", "H200")), (gpu, kd)


def test_decode_gemm_bf16_small_matrices_are_far_from_bandwidth(doc):
    """Pinned from the data (the issue's 'the missing TP term'), HBM GPUs, bf16:
    below 16 MiB per GPU at most 0.46 of HBM bandwidth; from 128 MiB at least 0.69;
    Hopper and Blackwell at least 0.78 from 256 MiB."""
    for gpu in HBM_GPUS:
        curve = _decode_bf16(doc, gpu)
        assert max(v for b, v in curve.items() if b < 16) <= 0.46, gpu
        assert min(v for b, v in curve.items() if b >= 128) >= 0.69, gpu
        assert curve[1] <= 0.13, gpu  # 1 MiB: a 70B layer's slice at high TP
    for gpu in HOPPER_BLACKWELL:
        curve = _decode_bf16(doc, gpu)
        assert min(v for b, v in curve.items() if b >= 256) >= 0.78, gpu


def test_prefill_fp8_is_further_from_its_peak_than_bf16(doc):
    """One 0.65 for every GPU and dtype is wrong both ways: bf16 0.6-0.85, fp8 lower everywhere."""
    for gpu, g in doc["gpus"].items():
        pre = g["prefill_gemm"]
        assert 0.6 <= pre["bfloat16"]["efficiency_large_m"] <= 0.85, gpu
        if "fp8" in pre:
            assert pre["fp8"]["efficiency_large_m"] < pre["bfloat16"]["efficiency_large_m"], gpu


def test_allreduce_grows_with_bytes_and_pcie_is_slower(doc):
    for gpu, g in doc["gpus"].items():
        ar = g["allreduce_graph"]["latency_us_by_gpus_and_bytes"]
        assert set(ar) >= {"2", "4", "8"}, gpu
        for n, row in ar.items():
            lat = [row[k] for k in sorted(row, key=int)]
            assert all(v > 0 for v in lat)
            assert lat[-1] > 10 * lat[0], (gpu, n)
    l40s = doc["gpus"]["L40S"]["allreduce_graph"]
    h100 = doc["gpus"]["H100-SXM"]["allreduce_graph"]
    assert l40s["interconnect"].startswith("pcie") and h100["interconnect"].startswith("nvlink")
    mib64 = str(64 << 20)
    for n in ("4", "8"):
        assert (
            l40s["latency_us_by_gpus_and_bytes"][n][mib64]
            > 10 * h100["latency_us_by_gpus_and_bytes"][n][mib64]
        )


def test_fused_allreduce_is_tensorrt_llms_table_and_beats_vllms_two_stage(doc):
    """allreduce_fused: TensorRT-LLM's measured all-reduce (the kernels FlashInfer's fused
    all-reduce + RMSNorm ports) for every Hopper/Blackwell GPU with tables, at the same sizes as
    allreduce_graph. Where vLLM's custom all-reduce switches to its two-stage algorithm on B200
    and B300 at TP 8 (256-512 KiB: ~26 us), the Lamport kernels take a third of that."""
    for gpu in HOPPER_BLACKWELL:
        fused = doc["gpus"][gpu]["allreduce_fused"]
        (table,) = fused["tables"]
        assert table["path"].startswith(TABLES_PREFIX) and "/comm/trtllm/" in table["path"]
        lat = fused["latency_us_by_gpus_and_bytes"]
        plain = doc["gpus"][gpu]["allreduce_graph"]["latency_us_by_gpus_and_bytes"]
        assert set(lat) == set(plain) >= {"2", "4", "8"}, gpu
        for n, row in lat.items():
            assert set(row) == set(plain[n]), (gpu, n)
            assert all(v > 0 for v in row.values())
    for gpu in ("B200", "B300"):
        kib256 = str(256 << 10)
        fused = doc["gpus"][gpu]["allreduce_fused"]["latency_us_by_gpus_and_bytes"]["8"][kib256]
        plain = doc["gpus"][gpu]["allreduce_graph"]["latency_us_by_gpus_and_bytes"]["8"][kib256]
        assert fused < 10 < 20 < plain, gpu


def test_runtime_modules_do_not_import_parquet_readers():
    pattern = re.compile(r"^\s*(import|from)\s+(pyarrow|pandas|polars|fastparquet)\b", re.M)
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "src" / "advisor").rglob("*.py")
        if pattern.search(p.read_text())
    ]
    assert offenders == []
    code = (
        "import sys; from advisor.cli import main; rc = main(['recommend', '--model', "
        "'llama-3-8b', '--ctx', '8192', '--json']); bad = [m for m in sys.modules if "
        "m.split('.')[0] in ('pyarrow', 'pandas', 'polars', 'fastparquet')]; "
        "print(bad, file=sys.stderr); sys.exit(1 if bad or rc else 0)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(
    not (AIC.is_dir() and KC_PYTHON.exists()),
    reason=f"needs the aiconfigurator extract at {AIC} and the calibration venv {KC_PYTHON} "
    "(pyarrow); see benchmarks/perf/KERNELS.md",
)
@pytest.mark.slow  # regenerates the curves from 7 GPUs' parquet tables (8 s here)
def test_shipped_curves_are_not_stale():
    r = subprocess.run(
        [str(KC_PYTHON), str(SCRIPT), "--aic", str(AIC), "--out", str(SHIPPED), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize(("tokens", "measured_ms"), [
    # aiconfigurator b300_sxm/moe/vllm/0.24.0/moe_perf.parquet @ 095f58a5: Kimi-K2's experts
    # (hidden 7168, 384 x 2048, top 8) at moe_tp 4, nvfp4, balanced routing, EP 1
    (4, 0.05095), (64, 0.36845), (512, 0.44898), (8192, 0.95058)])
def test_the_fused_moe_composition_agrees_with_its_table(tokens, measured_ms):
    """stepmodel.fused_moe_s at a table row's exact shape (the touched experts balanced, as
    the table's rows are) is the measured time within 15%, from decode (the bytes term) to
    prefill (the FLOPs term); benchmarks/perf/COMPOSITION.md has every row."""
    from advisor.catalog import load
    from advisor.core import stepmodel

    k = stepmodel.kernels(load().gpus["B300"])
    dt = stepmodel.Dtypes("nvfp4", 0.5625, "nvfp4", 0.5625, "nvfp4")
    ms = stepmodel.fused_moe_s(k, dt, 384, 8, 2048 / 4, 7168, tokens, min(384, tokens * 8)) * 1e3
    assert measured_ms * 0.85 <= ms <= measured_ms * 1.15


@pytest.mark.parametrize(("tokens", "measured_ms"), [
    # aiconfigurator b200_sxm/moe/vllm/0.24.0/moe_perf.parquet @ 095f58a5: MiniMax-M2.5's
    # experts (hidden 3072, 256 x 1536, top 8) at moe_tp 1, nvfp4, balanced routing, EP 1: every
    # expert touched from 32 tokens on, 1.9 GiB a layer
    (32, 0.3006), (64, 0.3024), (128, 0.3074)])
def test_a_moe_read_over_1_gib_is_charged_its_measured_bandwidth(tokens, measured_ms):
    """Reads of more than 1 GiB take the decode-MoE curve's own 1-2 GiB bin (0.84 of HBM on
    B200) within 8% of the table: with that bin dropped as cache-resident (2 of its 17 rows
    above the system file's bandwidth) they were charged the 512 MiB bin's 0.76, +14...+16%
    (benchmarks/perf/README.md, item 16)."""
    from advisor.catalog import load
    from advisor.core import stepmodel

    k = stepmodel.kernels(load().gpus["B200"])
    dt = stepmodel.Dtypes("nvfp4", 0.5625, "nvfp4", 0.5625, "nvfp4")
    ms = stepmodel.fused_moe_s(k, dt, 256, 8, 1536, 3072, tokens, min(256, tokens * 8)) * 1e3
    assert measured_ms * 0.92 <= ms <= measured_ms * 1.08


def test_no_bin_too_large_for_l2_is_dropped_as_cache_resident(doc):
    """The cache rule drops a bandwidth bin only where its bytes could sit in L2 (below 256
    MiB, 2x the largest L2 here); larger bins keep their rows at or under the bandwidth."""
    seen = 0
    for gpu, g in doc["gpus"].items():
        for curve in ("decode_gemm", "decode_moe"):
            for dtype, entry in (g.get(curve) or {}).items():
                for b in entry.get("dropped_bins", {}):
                    assert float(b) < 256, (gpu, curve, dtype, b)
                    seen += 1
    assert seen  # the rule still drops L40S's and RTX PRO 6000's small L2-resident bins
    moe = doc["gpus"]["B200"]["decode_moe"]["nvfp4"]["efficiency_by_weight_mib"]
    assert 0.8 <= moe["1024"] <= 0.9 and moe["1024"] > moe["512"]


def _has_pyarrow() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


@pytest.mark.skipif(
    not (AIC.is_dir() and _has_pyarrow()),
    reason=f"needs the aiconfigurator extract at {AIC} and pyarrow in this venv; see "
    "benchmarks/perf/composition.py",
)
@pytest.mark.slow  # every row of 7 GPUs' GEMM, MoE, attention and all-reduce tables (8 s)
def test_composition_report_is_not_stale():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "perf" / "composition.py"), "--aic", str(AIC)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    shipped = (ROOT / "benchmarks" / "perf" / "COMPOSITION.md").read_text()
    assert shipped.endswith(r.stdout), "COMPOSITION.md is stale: run composition.py --write"


@pytest.mark.parametrize(("tp", "tokens", "measured_ms", "lo", "hi"), [
    # aiconfigurator h200_sxm/moe/vllm/0.24.0/moe_perf.parquet @ 095f58a5, kernel_source
    # vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic: gpt-oss-120b's experts
    # (hidden 2880, 128 x 2880, top 4), w4a16_mxfp4, balanced routing, EP 1. Prefill chunks
    # take the table (the dense rule gave 0.53 / 0.75 / 0.45 / 0.50 of these; the pooled
    # tokens-per-expert grid leaves +4..+36% at this shape); decode steps keep the dense rule,
    # below the table by choice (stepmodel.MOE_PREFILL_ONLY: the fit split's end-to-end rows
    # are faster than the table's decode kernel)
    (1, 1024, 0.843, 0.85, 1.4), (1, 16384, 5.884, 0.85, 1.4), (8, 1024, 0.172, 0.85, 1.4),
    (8, 16384, 1.101, 0.85, 1.4), (1, 4, 0.116, 0.3, 0.7), (1, 64, 0.665, 0.3, 0.7)])
def test_gpt_oss_prefill_on_hopper_takes_its_own_measured_kernel(tp, tokens, measured_ms,
                                                                 lo, hi):
    """On a GPU without FP4 tensor cores a prefill step's gpt-oss MXFP4 experts are charged at
    the measured curve of gpt-oss's own MoE method (not pooled with compressed-tensors' Marlin
    kernel); on Blackwell vLLM picks the kernel by flags, so the experts stay on the dense
    nvfp4 rule (moe "mxfp4", unmeasured)."""
    from advisor.catalog import load
    from advisor.core import stepmodel
    from advisor.core.model import spec_from_config

    cfg = json.loads((ROOT / "benchmarks" / "perf" / "configs"
                      / "openai--gpt-oss-120b.json").read_text())
    spec = spec_from_config(cfg, "gpt-oss-120b")
    gpus = load().gpus
    k = stepmodel.kernels(gpus["H200"])
    dt = stepmodel.dtypes(spec, k)
    assert (dt.moe, dt.experts) == ("w4a16_mxfp4", "bfloat16")
    assert stepmodel.dtypes(spec, stepmodel.kernels(gpus["B200"])).moe == "mxfp4"
    ms = stepmodel.fused_moe_s(k, dt, 128, 4, 2880 / tp, 2880, tokens,
                               min(128, tokens * 4)) * 1e3
    assert measured_ms * lo <= ms <= measured_ms * hi


def test_only_gpt_oss_own_mxfp4_method_enters_the_w4a16_mxfp4_curve():
    """The 0.24.0 Hopper tables time two w4a16_mxfp4 methods; the compressed-tensors Marlin
    one is not what a gpt-oss checkpoint runs, so it stays out; other dtypes pool."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "perf"))
    try:
        from kernel_curves import moe_source_kept
    finally:
        sys.path.pop(0)
    assert moe_source_kept("w4a16_mxfp4",
                           "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic")
    assert moe_source_kept("w4a16_mxfp4", "vllm_mxfp4_moe")
    assert not moe_source_kept("w4a16_mxfp4",
                               "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts")
    assert not moe_source_kept("w4a16_mxfp4", "")
    assert moe_source_kept("fp8_block", "vllm_fp8moe_triton_tritonexperts")
    curve = json.loads(SHIPPED.read_text())["gpus"]["H200"]["decode_moe"]["w4a16_mxfp4"]
    assert "gptossmxfp4moe" in json.loads(SHIPPED.read_text())["definitions"]["decode_moe"]
    assert curve["tables"][0]["rows_used"] == 60  # gpt-oss's method only (pooled: 85)
