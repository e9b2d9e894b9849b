"""The confidence quoted beside each estimate is the benchmarks' own, and the rule holds.

accuracy.json must be exactly what benchmarks/accuracy/run.py and benchmarks/perf/run.py compute
from their data now (a stale summary fails here); each family's quoted error is checked against
a worst error computed here from RESULTS.md / the measurements, not by the summary's code.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from advisor import load_catalog
from advisor.core import confidence
from advisor.core.confidence import Confidence, combine, memory_confidence, perf_confidence

ROOT = Path(__file__).resolve().parents[1]
ACC = ROOT / "benchmarks" / "accuracy"
PERF = ROOT / "benchmarks" / "perf"
SHIPPED = ROOT / "src" / "advisor" / "core" / "accuracy.json"
KV_CHECKS = {"kv_tokens_full_fit", "kv_tokens_from_logged_memory", "concurrency"}
LOGS = yaml.safe_load((ACC / "logs.yaml").read_text())["logs"]


def _script(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.fixture(scope="module")
def acc_run():
    return _script("accuracy_run_for_confidence", ACC / "run.py")


@pytest.fixture(scope="module")
def perf_run():
    return _script("perf_run_for_confidence", PERF / "run.py")


@pytest.fixture(scope="module")
def acc_rows(acc_run, cat):
    return [acc_run.evaluate(e, cat) for e in LOGS]


@pytest.fixture(scope="module")
def perf_rows(perf_run):
    return perf_run.evaluate()


# --- (a) the shipped summary is what the benchmarks compute now ----------------------------


def test_accuracy_json_is_what_the_benchmarks_compute_now(acc_run, perf_run, acc_rows,
                                                          perf_rows):
    expected = confidence.merged(None, {**acc_run.confidence_sections(acc_rows),
                                        **perf_run.confidence_sections(perf_rows)})
    text = SHIPPED.read_text()
    assert json.loads(text) == expected, "stale: run both benchmarks with --write"
    assert text == confidence.dumps(expected)  # sorted keys, stable layout
    assert confidence.load() == expected  # what the package reads is that file


def test_results_md_are_what_the_benchmarks_print_now(acc_run, perf_run, acc_rows, perf_rows):
    sections = acc_run.confidence_sections(acc_rows)
    assert (ACC / "RESULTS.md").read_text() == acc_run.HEADER + acc_run.markdown(
        acc_rows, acc_run.summarize(acc_rows), sections)
    assert (PERF / "RESULTS.md").read_text() == perf_run.HEADER + perf_run.markdown(
        perf_rows, perf_run.confidence_sections(perf_rows))
    for md in (ACC / "RESULTS.md", PERF / "RESULTS.md"):
        assert "run.py --write" in md.read_text().split("\n\n")[1]


def _tail_row(err: float, tp: int = 1, split: str = "report", **kw: Any) -> dict[str, Any]:
    return {"class": "stated", "split": split, "metric": "tpot", "queued": False,
            "family": "m", "gpu": "G", "precision": "fp8", "tp": tp, "release": "0.19.0",
            "err_pct": err, **kw}


def test_tail_table_counts_what_a_p90_at_the_bar_allows(perf_run):
    # 20 row groups: a p90 <= 12% allows 2 beyond it; three are beyond, two in the TP 2 cell
    rows = ([_tail_row(e) for e in (1.0, -3.0, 5.0, 13.0)]
            + [_tail_row(e, tp=2) for e in (-20.0, 30.0, 2.0)]
            + [_tail_row(0.5, tp=4) for _ in range(13)]
            + [_tail_row(50.0, queued=True), _tail_row(40.0, split="fit"),
               _tail_row(40.0, **{"class": "internal"}), _tail_row(40.0, metric="ttft")])
    lines = perf_run.tail_table(rows, "report")
    assert lines[2] == "3 of 20 row groups (p90 <= 12% allows 2)."
    body = [ln for ln in lines if ln.startswith("| m |")]
    assert body == ["| m | G | fp8 | 2 | 0.19.0 | 2 | 3 | -20.0% … +30.0% |",
                    "| m | G | fp8 | 1 | 0.19.0 | 1 | 4 | +13.0% |"]
    # the same rows through stats(): the p90 is beyond the bar exactly because 3 > 2
    sel = [r["err_pct"] for r in rows[:20]]
    assert perf_run.stats(sel)[2] > 12.0
    assert perf_run.stats([e for e in sel if e != 13.0] + [1.0])[2] <= 12.0


def test_tail_section_agrees_with_the_headline_p90(perf_run, perf_rows):
    for split in ("report", "fit"):
        head = perf_run.tail_table(perf_rows, split)[2]
        m = re.fullmatch(r"(\d+) of (\d+) row groups \(p90 <= 12% allows (\d+)\)\.", head)
        assert m, head
        beyond, n, allowed = (int(x) for x in m.groups())
        errs = [r["err_pct"] for r in perf_rows if r["class"] == "stated"
                and r["split"] == split and r["metric"] == "tpot" and not r["queued"]]
        assert n == len(errs)
        assert beyond == sum(abs(e) > perf_run.TAIL_PCT for e in errs)
        assert (beyond <= allowed) == (perf_run.stats(errs)[2] <= perf_run.TAIL_PCT)


def test_each_script_keeps_the_other_scripts_sections():
    other = {"schema_version": 1, "ttft": {"x": 1}, "memory": {"old": True}}
    out = confidence.merged(other, {"memory": {"new": True}})
    assert out == {"schema_version": 1, "ttft": {"x": 1}, "memory": {"new": True}}


# --- (b) calibrated: the family's worst error, computed here independently -----------------


def _memory_evidence(cat) -> dict[str, dict[str, Any]]:
    """Per GPU family, from RESULTS.md's table and logs.yaml's `gpu`: each log's worst KV error."""
    gpu_of = {e["id"]: e.get("gpu") for e in LOGS}
    per_log: dict[str, dict[str, Any]] = {}
    for line in (ACC / "RESULTS.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 8 or cells[4] not in KV_CHECKS:
            continue
        log, vllm, err = cells[0], cells[3], abs(float(cells[7].rstrip("%")))
        gpu = gpu_of[log]
        if gpu is None:
            continue
        run = per_log.setdefault(log, {"gpu": gpu, "vllm": vllm, "err": 0.0})
        run["err"] = max(run["err"], err)
    fams: dict[str, dict[str, Any]] = {}
    for log, run in per_log.items():
        fam = fams.setdefault(cat.gpus[run["gpu"]].architecture,
                              {"worst": 0.0, "runs": 0, "cases": []})
        fam["worst"] = max(fam["worst"], run["err"])
        fam["runs"] += 1
        fam["cases"].append((log, run["vllm"]))
    return fams


def test_memory_families_match_the_logs(cat):
    fams = _memory_evidence(cat)
    assert fams, "no log names a catalog GPU"
    shipped = confidence.load()["memory"]["families"]
    assert set(shipped) == {confidence.family_key(a) for a in fams}


def test_calibrated_memory_quotes_the_familys_worst_error(cat, acc_rows):
    model_type = {r["id"]: r["model_type"] for r in acc_rows}
    for arch, fam in _memory_evidence(cat).items():
        for log, vllm in fam["cases"]:
            c = memory_confidence(arch, model_type[log], vllm)
            assert c.basis == "calibrated", (arch, log, vllm, c.why)
            assert c.within_pct == pytest.approx(fam["worst"], abs=0.005)
            assert c.runs == fam["runs"] and c.gaps == ()
            assert c.short.startswith("±") and c.short.endswith(f"n={fam['runs']}")
            assert confidence.family_key(arch) in c.scope


def test_hopper_memory_is_calibrated_on_the_h100_logs(cat):
    """An H200 takes the Hopper family's figure, measured on H100 logs."""
    fam = confidence.load()["memory"]["families"]["hopper"]
    c = memory_confidence(cat.gpus["H200"].architecture, "llama", "0.21.0")
    assert c.basis == "calibrated" and c.runs == fam["n"] >= 20
    worst = fam["worst_pct"]
    shown = f"{worst:.1f}" if worst < 10 else f"{worst:.0f}"  # Confidence.short's rule
    assert c.within_pct == worst and c.short == f"±{shown}% n={fam['n']}"
    assert "H100-SXM" in c.scope and f"within {fam['worst_pct']}%" in c.why


def _perf_evidence(cat, perf_rows, key: str) -> dict[str, dict[str, Any]]:
    fams: dict[str, dict[str, Any]] = {}
    for r in perf_rows:
        # accuracy.json's perf sections: the report split's stated-protocol rows (run.py)
        if (r["metric"] != key.removesuffix("_ms") or r["split"] != "report"
                or r["class"] != "stated" or r["queued"]):
            continue
        err = abs(r["pred"] - r["meas"]) / r["meas"] * 100
        fam = fams.setdefault(cat.gpus[r["gpu"]].architecture,
                              {"worst": 0.0, "runs": 0, "versions": set(), "models": set(),
                               "errs": []})
        fam["worst"] = max(fam["worst"], err)
        fam["errs"].append(err)
        fam["runs"] += 1
        fam["models"].add(r["model_type"])
        if r.get("vllm"):
            fam["versions"].add(r["vllm"])
    return fams


@pytest.mark.parametrize("metric", ["ttft", "tpot"])
def test_perf_confidence_follows_the_measurements(cat, perf_rows, metric):
    fams = _perf_evidence(cat, perf_rows, f"{metric}_ms")
    assert fams
    for arch, fam in fams.items():
        model = sorted(fam["models"])[0]
        if fam["versions"]:
            version = sorted(fam["versions"])[0]
            c = perf_confidence(arch, model, version, metric)
            assert c.basis == "calibrated", c.why
            errs = sorted(fam["errs"])
            # 20 runs or more quote the p90 (nearest rank), fewer the worst
            quoted = (errs[math.ceil(0.9 * len(errs)) - 1] if len(errs) >= 20 else fam["worst"])
            assert c.within_pct == pytest.approx(quoted, abs=0.005)
            assert c.runs == fam["runs"]
        else:  # the runs do not say which vLLM ran them: no release is calibrated
            c = perf_confidence(arch, model, "0.11.0", metric)
            assert c.basis == "extrapolated" and c.gaps == ("vllm_release",)
            assert "not recorded" in c.why and c.short == "extrap."


# a made-up table, to hold the rule for perf where the shipped data cannot (no releases yet)
TABLE = {"tpot": {"families": {"hopper": {
    "n": 7, "median_pct": 1.5, "worst_pct": 4.25, "gpus": ["H100-SXM", "H200"],
    "model_types": ["llama", "qwen2"], "vllm_min": "0.10.1", "vllm_max": "0.12.0",
    "vllm_unrecorded": 0}}}}


@pytest.mark.parametrize(("version", "basis"), [
    ("0.9.2", "calibrated"), ("0.10.0", "calibrated"), ("0.13.5", "calibrated"),
    ("v0.11.0rc1", "calibrated"), ("0.8.5", "extrapolated"), ("0.14.0", "extrapolated"),
    ("1.0.0", "extrapolated"), ("nightly", "extrapolated")])
def test_vllm_release_is_covered_within_one_minor_of_the_runs(version, basis):
    c = perf_confidence("Hopper", "qwen2", version, "tpot", data=TABLE)
    assert c.basis == basis, c.why
    if basis == "calibrated":
        assert (c.within_pct, c.median_pct, c.runs, c.short) == (4.25, 1.5, 7, "±4.2% n=7")
        assert c.scope == "hopper GPUs (H100-SXM, H200), llama/qwen2, vLLM 0.10.1-0.12.0"
    else:
        assert c.gaps == ("vllm_release",) and version in c.why and c.within_pct is None


@pytest.mark.parametrize(("signed", "lean"), [
    (4.1, "estimates ran above the measured tpot by 4.1% on median"),
    (-2.0, "estimates ran below the measured tpot by 2.0% on median"),
    (1.99, None), (-1.5, None), (None, None)])
def test_a_perf_label_says_which_way_its_estimates_lean_beyond_two_percent(signed, lean):
    """The perf sections record each family's signed median error; the label quotes it as a
    lean from confidence.BIAS_NOTE_PCT (issue 28's ±2% bar) on, and carries it as bias_pct."""
    def label(p90: float) -> Confidence:
        fam = {**TABLE["tpot"]["families"]["hopper"], "n": confidence.P90_FROM_RUNS,
               "p90_pct": p90}
        if signed is not None:
            fam["signed_median_pct"] = signed
        return perf_confidence("Hopper", "qwen2", "0.11.0", "tpot",
                               data={"tpot": {"families": {"hopper": fam}}})

    c = label(3.5)
    assert c.basis == "calibrated" and c.within_pct == 3.5 and c.bias_pct == signed
    assert (lean in c.why) if lean else ("estimates ran" not in c.why)
    # a combined label is its weakest part's: memory's here (within 4.77%), which has no lean
    mem = memory_confidence("Hopper", "llama", "0.21.0")
    assert mem.within_pct > 3.5 and mem.bias_pct is None
    both = combine(c, mem)
    assert both.bias_pct is None and "estimates ran" not in both.why
    # ... and this one's where it is the weaker
    both = combine(label(30.0), mem)
    assert both.why.startswith("weakest part tpot") and both.bias_pct == signed
    assert (lean in both.why) if lean else ("estimates ran" not in both.why)


def test_the_shipped_perf_labels_carry_the_published_signed_median(cat):
    shipped = confidence.load()["tpot"]["families"]
    for fam, group in shipped.items():
        arch = next(g.architecture for g in cat.gpus.values()
                    if g.architecture and confidence.family_key(g.architecture) == fam)
        c = perf_confidence(arch, group["model_types"][0], group["vllm_min"], "tpot")
        assert c.bias_pct == group["signed_median_pct"]
        assert ("estimates ran" in c.why) == (abs(group["signed_median_pct"]) >= 2.0)


# --- (c) (d) (e) extrapolated, and why ------------------------------------------------------


def test_gpu_family_without_runs_is_extrapolated(cat):
    arch = cat.gpus["T4"].architecture
    assert confidence.family_key(arch) not in confidence.load()["memory"]["families"]
    for c in (memory_confidence(arch, "llama", "0.10.1"),
              perf_confidence(arch, "qwen2", "0.10.1", "ttft")):
        assert c.basis == "extrapolated" and c.gaps == ("gpu_family",)
        assert "GPU family turing" in c.why
        assert c.within_pct is None and c.runs == 0 and c.short == "extrap."
    c = memory_confidence(None, "llama", "0.21.0")
    assert c.gaps == ("gpu_family",) and "unknown" in c.why


def test_model_family_without_runs_is_extrapolated(cat):
    c = memory_confidence(cat.gpus["H100-SXM"].architecture, "granite", "0.21.0")
    assert c.basis == "extrapolated" and c.gaps == ("model_family",)
    assert "model family granite" in c.why and "hopper" in c.why
    # calibrated elsewhere is not calibrated here: gemma2 has runs on Hopper, none on Ada
    assert memory_confidence("Hopper", "gemma2", "0.19.0").basis == "calibrated"
    assert memory_confidence(cat.gpus["L4"].architecture, "gemma2", "0.10.0").gaps == (
        "model_family",)


def test_vllm_release_outside_the_runs_is_extrapolated():
    fam = confidence.load()["memory"]["families"]["hopper"]
    # 0.10.2: the Qwen3-Next log on an H200 (benchmarks/accuracy/logs.yaml)
    assert (fam["vllm_min"], fam["vllm_max"]) == ("0.10.2", "0.21.0")
    c = memory_confidence("Hopper", "llama", "0.8.0")
    assert c.basis == "extrapolated" and c.gaps == ("vllm_release",)
    assert "vLLM 0.8.0" in c.why and "0.21.0" in c.why
    # one minor release either side of the range counts
    assert memory_confidence("Hopper", "llama", "0.10.1").basis == "calibrated"
    assert memory_confidence("Hopper", "llama", "0.22.0").basis == "calibrated"
    assert memory_confidence("Hopper", "llama", "0.23.0").basis == "extrapolated"
    assert memory_confidence("Hopper", "llama", "0.9.0").basis == "calibrated"
    assert memory_confidence("Hopper", "llama", "0.7.1").basis == "extrapolated"


def test_every_gap_is_named():
    c = memory_confidence("Hopper", "gemma3", "0.5.0")
    assert c.gaps == ("model_family", "vllm_release")
    assert "gemma3" in c.why and "0.5.0" in c.why


def test_unattributed_logs_calibrate_no_family():
    data = confidence.load()["memory"]
    assert data["unattributed"]["n"] > 0
    assert "unattributed" not in data["families"]


# --- (f) combine ---------------------------------------------------------------------------


def test_combine_picks_the_weaker():
    mem = memory_confidence("Hopper", "llama", "0.21.0")
    tpot = perf_confidence("Hopper", "llama", "0.11.0", "tpot", data=TABLE)
    assert mem.basis == tpot.basis == "calibrated"
    both = combine(mem, tpot)
    assert both.basis == "calibrated" and both.metric == "memory+tpot"
    assert both.within_pct == max(mem.within_pct, tpot.within_pct)
    assert both.runs == min(mem.runs, tpot.runs)
    assert combine(tpot, mem).within_pct == both.within_pct

    off = perf_confidence("Turing", "llama", "0.11.0", "ttft")
    weak = combine(mem, off, tpot)
    assert weak.basis == "extrapolated" and weak.within_pct is None and weak.runs == 0
    assert weak.gaps == off.gaps and "ttft: GPU family turing" in weak.why
    assert weak.short == "extrap."
    assert combine(mem) == mem
    with pytest.raises(ValueError):
        combine()


def test_confidence_is_frozen_and_serialises_its_short_form():
    c = memory_confidence("Hopper", "llama", "0.21.0")
    with pytest.raises(ValueError):
        c.runs = 5  # type: ignore[misc]
    dumped = c.model_dump()
    assert dumped["short"] == c.short and dumped["basis"] == "calibrated"
    assert Confidence.model_validate({k: v for k, v in dumped.items() if k != "short"}) == c


def test_family_key_and_versions():
    assert confidence.family_key("Ada Lovelace") == "ada-lovelace"
    assert confidence.family_key("CDNA 3") == "cdna-3"
    assert confidence.version_tuple("0.9.0.1") == (0, 9, 0)
    assert confidence.version_tuple("v0.11") == (0, 11, 0)
    assert confidence.version_tuple("main") is None


def test_catalog_architectures_all_have_a_key(cat):
    keys = {confidence.family_key(g.architecture) for g in cat.gpus.values() if g.architecture}
    assert {"hopper", "ampere", "ada-lovelace", "turing", "blackwell"} <= keys
    assert re.fullmatch(r"[a-z0-9-]+", "".join(keys))
