"""How far each estimate can be trusted: measured against public runs, or extrapolated.

advisor's figures come from two models, each checked against public evidence by a benchmark:

* memory (``fit``: weights, KV-cache tokens, concurrency) against vLLM start-up logs,
  ``benchmarks/accuracy/run.py`` over ``benchmarks/accuracy/logs.yaml``;
* latency (``perf``: TTFT and TPOT; throughput follows from TPOT) against measured vLLM serving
  runs, ``benchmarks/perf/run.py`` over ``benchmarks/perf/silicon_rows.json`` (aiconfigurator's
  silicon_sample.csv; the report split, stated protocol only).

Each script writes its own section of ``accuracy.json`` next to this module (``memory``;
``ttft`` and ``tpot``), regenerated from the data with ``--write``, so the errors quoted here
are the benchmarks' own. A section groups the runs by GPU *family* — the catalog GPU's
``architecture``, normalised by :func:`family_key` ("Hopper" -> ``hopper``, "Ada Lovelace"
-> ``ada-lovelace``) — and gives per family: the runs ``n``, the median and worst absolute
error in percent, the catalog GPU ids, the model families (``ModelSpec.model_type``) and the
vLLM releases (oldest, newest) of those runs. Runs whose GPU the source does not name are
counted under ``unattributed`` and calibrate no family.

The rule (:func:`memory_confidence`, :func:`perf_confidence`): an estimate is **calibrated**
only when all three hold, and otherwise **extrapolated**, with every one that fails named in
``why`` and ``gaps``:

1. the GPU's family has runs in the section (``gpu_family``);
2. the model's family (``model_type``) is among that family's runs (``model_family``);
3. the vLLM release is within the releases of that family's runs, widened by one minor
   release on each side (runs on 0.10.0-0.10.2 cover 0.9.x to 0.11.x; patch levels are
   ignored); a family whose runs record no release covers none (``vllm_release``).

A calibrated estimate quotes the family's **worst** absolute error over its runs
(``within_pct``), not a percentile: with a handful of runs per family a percentile would claim
more than the data holds. The median is given beside it. A group that records ``p90_pct`` and
has at least :data:`P90_FROM_RUNS` runs (the perf sections, written from hundreds of measured
rows by ``benchmarks/perf/run.py``) quotes its p90 instead, naming the worst in ``why``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from statistics import median
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, computed_field

#: the file the benchmarks write and this module reads, in this package
ACCURACY_FILE = "accuracy.json"
SCHEMA_VERSION = 1

#: a group with at least this many runs and a ``p90_pct`` (the perf sections since issue 28,
#: hundreds of measured rows per family) quotes its p90 instead of its worst
P90_FROM_RUNS = 20
#: a group whose signed median error is at least this far from zero says so in its ``why``: the
#: bias issue 28 allows a GPU family (±2%); inside it the sign is noise
BIAS_NOTE_PCT = 2.0

Basis = Literal["calibrated", "extrapolated"]
Gap = Literal["gpu_family", "model_family", "vllm_release"]
PerfMetric = Literal["ttft", "tpot"]

_GAP_ORDER: tuple[Gap, ...] = ("gpu_family", "model_family", "vllm_release")


class Confidence(BaseModel):
    """How one estimate was obtained.

    ``within_pct`` is the worst absolute error (percent) the benchmark measured on the runs of
    the matching group (GPU family, for the metric); ``median_pct`` the median of the same
    errors; ``runs`` how many runs. Both percentages are ``None`` and ``runs`` is 0 when the
    estimate is extrapolated; ``scope`` then says what evidence exists nearest to it, and
    ``why`` and ``gaps`` which of GPU family, model family and vLLM release was never
    calibrated.
    """

    model_config = ConfigDict(frozen=True)

    #: "memory", "ttft", "tpot", or several joined with "+" (see :func:`combine`)
    metric: str
    basis: Basis
    within_pct: float | None = None
    median_pct: float | None = None
    runs: int = 0
    #: the evidence, e.g. "hopper GPUs (H100-SXM), llama/qwen2, vLLM 0.10.0-0.21.0"
    scope: str
    #: one sentence: what was calibrated, or what never was
    why: str
    #: what was never calibrated (empty when calibrated)
    gaps: tuple[Gap, ...] = ()
    #: the signed median of the same errors (percent; positive: the estimates ran above the
    #: measured figures), where the summary records it (the perf sections), else None
    bias_pct: float | None = None
    #: perf only: the catalog GPU whose measured kernel curves this GPU's estimate took (it has
    #: no kernel tables of its own), None when measured on it or not a perf estimate
    transferred_from: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def short(self) -> str:
        """A table cell: "±0.5% n=1", "±68% n=7", or "extrap."."""
        if self.basis == "extrapolated" or self.within_pct is None:
            return "extrap."
        pct = self.within_pct
        text = f"{pct:.1f}" if pct < 10 else f"{pct:.0f}"
        return f"±{text}% n={self.runs}"


# --- the summary's format (written by the benchmarks, read below) ----------------------------


def family_key(architecture: str) -> str:
    """The key of a GPU family: the catalog's ``architecture``, lower-case, words joined by
    '-' ("Ada Lovelace" -> "ada-lovelace", "CDNA 3" -> "cdna-3")."""
    return re.sub(r"[^a-z0-9]+", "-", architecture.lower()).strip("-")


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a vLLM release ("0.9.0.1" -> (0, 9, 0), "v0.11.0rc1" ->
    (0, 11, 0)), or None when ``text`` does not start with a number."""
    m = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)


def _stats(errors: list[float]) -> dict[str, Any]:
    errs = [abs(e) for e in errors]
    return {"n": len(errs), "median_pct": round(median(errs), 2), "worst_pct": round(max(errs), 2)}


def _group(runs: list[Mapping[str, Any]]) -> dict[str, Any]:
    versions = sorted({str(r["vllm"]) for r in runs if r.get("vllm")},
                      key=lambda v: (version_tuple(v) or (0, 0, 0), v))
    return {
        **_stats([float(r["error_pct"]) for r in runs]),
        "gpus": sorted({str(r["gpu"]) for r in runs if r.get("gpu")}),
        "model_types": sorted({str(r["model_type"]) for r in runs}),
        "vllm_min": versions[0] if versions else None,
        "vllm_max": versions[-1] if versions else None,
        "vllm_unrecorded": sum(1 for r in runs if not r.get("vllm")),
    }


def summarize_runs(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One section's groups from its runs.

    Each run: ``error_pct`` (signed, percent), ``model_type``, ``vllm`` (the release, or
    None), ``gpu`` (catalog id, or None) and ``architecture`` (the catalog GPU's, or None).
    Runs without an architecture go to ``unattributed``.
    """
    by_family: dict[str, list[Mapping[str, Any]]] = {}
    unattributed: list[Mapping[str, Any]] = []
    for run in runs:
        arch = run.get("architecture")
        if arch:
            by_family.setdefault(family_key(str(arch)), []).append(run)
        else:
            unattributed.append(run)
    out: dict[str, Any] = {"families": {k: _group(v) for k, v in sorted(by_family.items())}}
    out["unattributed"] = _group(unattributed) if unattributed else None
    return out


def dumps(data: Mapping[str, Any]) -> str:
    """The file's text: sorted keys, two-space indent, a final newline; no timestamps."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def merged(existing: Mapping[str, Any] | None, sections: Mapping[str, Any]) -> dict[str, Any]:
    """``existing`` with ``sections`` replaced (each benchmark owns its own sections)."""
    data = dict(existing or {})
    data.update(sections)
    data["schema_version"] = SCHEMA_VERSION
    return data


# --- reading ----------------------------------------------------------------------------------


@cache
def load() -> dict[str, Any]:
    """The shipped summary, read once."""
    text = resources.files(__package__ or "advisor.core").joinpath(ACCURACY_FILE).read_text(
        encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _range_text(group: Mapping[str, Any]) -> str:
    lo, hi = group.get("vllm_min"), group.get("vllm_max")
    if not lo:
        return "vLLM release not recorded"
    return f"vLLM {lo}" if lo == hi else f"vLLM {lo}-{hi}"


def _scope(family: str, group: Mapping[str, Any]) -> str:
    gpus = ", ".join(group.get("gpus") or [])
    models = "/".join(group.get("model_types") or [])
    return f"{family} GPUs ({gpus}), {models}, {_range_text(group)}"


def _version_covered(version: tuple[int, int, int], group: Mapping[str, Any]) -> bool:
    lo = version_tuple(str(group.get("vllm_min") or ""))
    hi = version_tuple(str(group.get("vllm_max") or ""))
    if lo is None or hi is None:
        return False
    return (lo[0], lo[1] - 1) <= version[:2] <= (hi[0], hi[1] + 1)


def _decide(section: str, metric: str, gpu_architecture: str | None, model_type: str,
            vllm_version: str, data: Mapping[str, Any] | None) -> Confidence:
    table = (data if data is not None else load()).get(section) or {}
    families: Mapping[str, Any] = table.get("families") or {}
    family = family_key(gpu_architecture) if gpu_architecture else None
    group = families.get(family) if family else None
    gaps: list[Gap] = []
    reasons: list[str] = []
    if group is None:
        gaps.append("gpu_family")
        reasons.append("the GPU's family is unknown" if family is None else
                       f"GPU family {family} has no {metric} run")
        known = ", ".join(sorted(families)) or "none"
        scope = f"{metric} calibrated on GPU families: {known}"
    else:
        scope = _scope(str(family), group)
        if model_type not in (group.get("model_types") or []):
            gaps.append("model_family")
            reasons.append(f"model family {model_type or '(unknown)'} has no {metric} run on "
                           f"{family} GPUs")
        version = version_tuple(vllm_version)
        if version is None or not _version_covered(version, group):
            gaps.append("vllm_release")
            span = _range_text(group)
            reasons.append(f"vLLM {vllm_version} is outside the calibrated releases "
                           f"({span}, ±1 minor)" if group.get("vllm_min") else
                           f"vLLM {vllm_version} not calibrated: the {family} runs' "
                           f"{span}")
    if gaps:
        return Confidence(metric=metric, basis="extrapolated", scope=scope,
                          why="extrapolated: " + "; ".join(reasons), gaps=tuple(gaps))
    assert group is not None
    # which way the estimates lean, where the summary records it (perf sections, issue 28) and
    # it is beyond BIAS_NOTE_PCT
    bias = group.get("signed_median_pct")
    bias_pct = None if bias is None else float(bias)
    lean = (f"; estimates ran {'above' if bias > 0 else 'below'} the measured {metric} by "
            f"{abs(bias)}% on median" if bias is not None and abs(bias) >= BIAS_NOTE_PCT
            else "")
    if group.get("p90_pct") is not None and int(group["n"]) >= P90_FROM_RUNS:
        # enough runs for a percentile (perf sections, issue 28): quote p90, name the worst
        return Confidence(
            metric=metric, basis="calibrated", within_pct=float(group["p90_pct"]),
            median_pct=float(group["median_pct"]), runs=int(group["n"]), scope=scope,
            bias_pct=bias_pct,
            why=f"within {group['p90_pct']}% on 9 in 10 (p90; median {group['median_pct']}%, "
                f"worst {group['worst_pct']}%) of {group['n']} measured run(s) of {family} "
                f"GPUs{lean}")
    return Confidence(
        metric=metric, basis="calibrated", within_pct=float(group["worst_pct"]),
        median_pct=float(group["median_pct"]), runs=int(group["n"]), scope=scope,
        bias_pct=bias_pct,
        why=f"within {group['worst_pct']}% (worst; median {group['median_pct']}%) on "
            f"{group['n']} public run(s) of {family} GPUs{lean}")


def memory_confidence(gpu_architecture: str | None, model_type: str, vllm_version: str, *,
                      data: Mapping[str, Any] | None = None) -> Confidence:
    """The confidence of a memory fit (KV-cache tokens, concurrency) for a GPU of
    ``gpu_architecture`` (the catalog's ``Gpu.architecture``; None when the GPU is not in the
    catalog), a model of ``model_type`` (``ModelSpec.model_type``) and ``vllm_version``.
    The quoted error is the KV-token / concurrency checks' (see the module's docstring for the
    rule); ``data`` replaces the shipped summary (tests)."""
    if data is None:
        return _shipped("memory", "memory", gpu_architecture, model_type, vllm_version)
    return _decide("memory", "memory", gpu_architecture, model_type, vllm_version, data)


def perf_confidence(gpu_architecture: str | None, model_type: str, vllm_version: str,
                    metric: PerfMetric, *, data: Mapping[str, Any] | None = None) -> Confidence:
    """The confidence of a TTFT or TPOT estimate (use "tpot" for decode throughput, which
    advisor derives from TPOT), by the same rule as :func:`memory_confidence`."""
    if metric not in ("ttft", "tpot"):
        raise ValueError(f"metric must be 'ttft' or 'tpot', not {metric!r}")
    if data is None:
        return _shipped(metric, metric, gpu_architecture, model_type, vllm_version)
    return _decide(metric, metric, gpu_architecture, model_type, vllm_version, data)


@functools.lru_cache(maxsize=1024)
def _shipped(section: str, metric: str, gpu_architecture: str | None, model_type: str,
             vllm_version: str) -> Confidence:
    """:func:`_decide` on the shipped summary, once per question (a ranking asks thousands of
    times for the same few GPU families; a Confidence is frozen, so sharing it is safe)."""
    return _decide(section, metric, gpu_architecture, model_type, vllm_version, None)


def combine(*parts: Confidence) -> Confidence:
    """The weakest of several (a recommendation rests on its fit and its latency): extrapolated
    if any part is, naming each part's gaps; otherwise calibrated within the largest of the
    parts' errors, on the fewest runs."""
    if not parts:
        raise ValueError("combine needs at least one Confidence")
    if len(parts) == 1:
        return parts[0]
    metric = "+".join(p.metric for p in parts)
    scope = "; ".join(f"{p.metric}: {p.scope}" for p in parts)
    weak = [p for p in parts if p.basis == "extrapolated"]
    if weak:
        gaps = tuple(g for g in _GAP_ORDER if any(g in p.gaps for p in weak))
        why = "extrapolated: " + "; ".join(
            f"{p.metric}: {p.why.removeprefix('extrapolated: ')}" for p in weak)
        return Confidence(metric=metric, basis="extrapolated", scope=scope, why=why, gaps=gaps)
    worst = max(parts, key=lambda p: (p.within_pct or 0.0, -p.runs))
    return Confidence(
        metric=metric, basis="calibrated", within_pct=worst.within_pct,
        median_pct=max(p.median_pct or 0.0 for p in parts), runs=min(p.runs for p in parts),
        bias_pct=worst.bias_pct, scope=scope, why=f"weakest part {worst.metric}: {worst.why}")
