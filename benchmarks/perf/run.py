"""advisor's step model on aiconfigurator's end-to-end vLLM rows (issue 28, items 3 and 4).

    python benchmarks/perf/run.py            # print the tables
    python benchmarks/perf/run.py --write    # rewrite RESULTS.md and accuracy.json's ttft/tpot
    python benchmarks/perf/run.py --fit      # refit the per-step constants on the fit split
    python benchmarks/perf/run.py --fit-host  # refit the host-side terms (eager and
                                              # piecewise layers, front end)

Reads ``silicon_rows.json`` (written by ``silicon.py`` from silicon_sample.csv; see README.md
for the split, which was fixed before any error was looked at) and the models' configs in
``configs/``, and predicts each group with the shipped model (``advisor.core.perf.estimate``).
``--write`` rewrites RESULTS.md and the ``ttft`` and ``tpot`` sections of
src/advisor/core/accuracy.json (the confidence advisor quotes; the other sections are kept):
they are built from the **report** split only, so a label never quotes rows a constant was
fitted on. ``--fit`` prints the per-step constant per GPU family x release band that minimises
the median |log(predicted / measured)| TPOT over that cell's fit rows; adopt it by editing
STEP_CONSTANT_S in src/advisor/core/perf.py.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import advisor
from advisor.core import confidence
from advisor.core.confidence import family_key
from advisor.core.engine import profile
from advisor.core.model import ModelSpec, Quantization
from advisor.core.perf import ServerFlags, Workload, constant_cell, estimate
from advisor.core.sizing import FitRequest, MemoryFit, fit

HERE = Path(__file__).resolve().parent
ROWS = HERE / "silicon_rows.json"
ACCURACY_JSON = HERE.parents[1] / "src" / "advisor" / "core" / confidence.ACCURACY_FILE
METRICS = ("tpot", "ttft", "output_tps")
CLASSES = {"stated": "stated protocol (InferenceX)", "internal": "NVIDIA-internal",
           "other": "other (Kimi-K2.5 gap analysis)"}
#: a release for the engine profile when the row records none (its band's first release)
BAND_RELEASE = {"A": "0.11.0", "B": "0.16.0"}
#: silicon_rows.json's quantization -> the checkpoint's scheme. Every per-tensor "fp8" row is an
#: NVIDIA ModelOpt checkpoint (nvidia/Llama-3.x-70B-Instruct-FP8 in InferenceX's scripts,
#: nvidia/Llama-3.1-8B-Instruct-FP8 in the NVIDIA-internal rows: hf_quant_config quant_algo
#: FP8, static per-tensor activation scales), so it is sized as vLLM's "modelopt" method
QUANT = {"fp8": Quantization(method="modelopt", bytes_per_weight=1.0),
         "fp8_block": Quantization(method="fp8_block", bytes_per_weight=1.0 + 4 / 128**2)}
#: the "nvfp4" rows' checkpoints are NVIDIA ModelOpt NVFP4 exports, read by advisor's own config
#: parser (model._quantization, _scope) from this quantization_config: the MoE ones exclude
#: every self_attn (nvidia/MiniMax-M2.5-NVFP4's hf_quant_config.json; the Kimi NVFP4 exports
#: keep MLA, the shared expert and the dense layer in bf16: benchmarks/perf/README.md item 12),
#: the dense Llama ones only lm_head; a dense model's MLP is quantized either way, so the one
#: config gives each its split. kv_cache_quant_algo FP8: NVIDIA's NVFP4 exports state an FP8
#: KV cache (the Kimi-K2.6 NVFP4 split's reproductions, huggingface.co/decart-ai/
#: Kimi-K2.7-Code-NVFP4: "with an FP8 KV cache ... the same precision split as
#: nvidia/Kimi-K2.6-NVFP4"; nvidia/Kimi-K2.5-NVFP4's own file was not read, item 14); vLLM
#: >= 0.14 runs it under --kv-cache-dtype auto. Only the Kimi rows leave the flag at auto
#: (silicon.SERVER_FLAGS), so only they depend on it
NVFP4_CONFIG = {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
                "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}


_catalog = functools.cache(advisor.load_catalog)


def groups() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(ROWS.read_text())["groups"]
    return data


@functools.cache
def _spec(config: str, quant: str | None) -> ModelSpec:
    cfg = json.loads((HERE / "configs" / f"{config}.json").read_text())
    if quant == "nvfp4":  # where the parser reads it: a nested text_config's wins
        where = cfg["text_config"] if "quantization_config" in cfg.get("text_config", {}) else cfg
        where["quantization_config"] = NVFP4_CONFIG
    spec = advisor.spec_from_config(cfg, config)
    if quant in QUANT:
        spec = spec.model_copy(update={"quantization": QUANT[quant]})
    return spec


def _version(g: dict[str, Any]) -> str:
    v = g["vllm"]
    if not v:  # the release of the run's image where its date places it (silicon.py)
        return g.get("image_release") or BAND_RELEASE[g["band"]]
    return "0.19.0" if v.startswith("nightly") else v


@functools.cache
def _fit(config: str, quant: str | None, gpu_id: str, tp: int, max_len: int,
         version: str, kv: str = "auto", mnbt: int | None = None,
         expert_parallel: bool = False) -> MemoryFit:
    gpu = _catalog().gpus[gpu_id]
    return fit(_spec(config, quant), FitRequest(
        gpu_memory_gib=gpu.cuda_memory_gib, gpu_name=gpu.name, tp=tp, max_model_len=max_len,
        kv_cache_dtype="fp8" if kv == "fp8" else "auto", max_num_batched_tokens=mnbt,
        expert_parallel=expert_parallel), profile(version))


def workload(g: dict[str, Any]) -> Workload:
    """InferenceX: lengths uniform in [0.8 L, L] (mean 0.9 L), 10 x concurrency prompts; the
    other classes state nothing: nominal lengths, steady state."""
    if g["class"] == "stated":
        return Workload(input_len=round(0.9 * g["isl"]), output_len=round(0.9 * g["osl"]),
                        concurrency=g["concurrency"], num_prompts=10 * g["concurrency"])
    return Workload(input_len=g["isl"], output_len=g["osl"], concurrency=g["concurrency"])


def server_flags(g: dict[str, Any]) -> ServerFlags | None:
    """The row's fused all-reduce and CUDA-graph flags (silicon.py FUSION_FLAGS, GRAPH_FLAGS);
    None: the release's defaults."""
    keys = ("fuse_allreduce_rms", "max_cudagraph_capture_size", "cudagraph_mode")
    if not any(k in g for k in keys):
        return None
    th = g.get("fusion_thresholds_mb")
    return ServerFlags(fuse_allreduce_rms=g.get("fuse_allreduce_rms"),
                       fusion_thresholds_mb={int(k): float(v) for k, v in th.items()} if th
                       else None,
                       max_cudagraph_capture_size=g.get("max_cudagraph_capture_size"),
                       cudagraph_mode=g.get("cudagraph_mode"))


def little_tps(w: Workload, ttft_ms: float, tpot_ms: float) -> float:
    """Output tok/s of a closed loop from its TTFT and TPOT (Little's law)."""
    return w.concurrency * w.output_len / ((ttft_ms + (w.output_len - 1) * tpot_ms) / 1000)


def predict(g: dict[str, Any], step_constant_s: float | None = None) -> dict[str, float]:
    cat = _catalog()
    gpu = cat.gpus[g["gpu"]]
    spec = _spec(g["config"], g["quantization"])
    f = _fit(g["config"], g["quantization"], g["gpu"], g["tp"],
             g["isl"] + g["osl"] + 256, _version(g), g.get("kv_cache_dtype", "auto"),
             g.get("max_num_batched_tokens"), g.get("expert_parallel", False))
    w = workload(g)
    e = estimate(spec, gpu, f, w, step_constant_s=step_constant_s, server=server_flags(g))
    return {"tpot": e.tpot_ms, "ttft": e.ttft_ms,
            "output_tps": little_tps(w, e.ttft_ms, e.tpot_ms)}


def measured(g: dict[str, Any]) -> dict[str, float]:
    out = {k: float(g[f"{k}_ms"]) for k in ("tpot", "ttft") if g.get(f"{k}_ms")}
    if "tpot" in out and "ttft" in out:
        out["output_tps"] = little_tps(workload(g), out["ttft"], out["tpot"])
    return out


def queued(g: dict[str, Any]) -> bool:
    """The row's own figures say the server ran fewer sequences than the client's concurrency:
    requests waited longer for their first token than they then spent decoding (TTFT > (OSL -
    1) x TPOT). Such a server was capped by flags the row does not record (max-num-seqs, KV
    cache size), so its TPOT is that of a smaller batch. Screened from the fit and the
    headline on measured figures alone (never on errors), and reported apart."""
    m = measured(g)
    return "ttft" in m and "tpot" in m and m["ttft"] > (workload(g).output_len - 1) * m["tpot"]


def evaluate() -> list[dict[str, Any]]:
    cat = _catalog()
    out = []
    for g in groups():
        # a nightly image is after the last release it names (0.19.0 here)
        vllm = "0.19.0+nightly" if str(g["vllm"]).startswith("nightly") else g["vllm"]
        pred = predict(g)
        meas = measured(g)
        spec = _spec(g["config"], g["quantization"])
        arch = cat.gpus[g["gpu"]].architecture
        for k, v in meas.items():
            keep = ("class", "split", "family", "gpu", "band", "tp", "concurrency", "isl", "osl",
                    "precision")
            out.append({"queued": queued(g), **{x: g[x] for x in keep},
                        "metric": k, "pred": pred[k], "meas": v,
                        "vllm": vllm,
                        # the release a confidence label quotes: the CSV's, else the image's
                        # at the run's date (silicon.IMAGE_RELEASE, item 18)
                        "release": vllm or g.get("image_release"),
                        "err_pct": (pred[k] - v) / v * 100, "model_type": spec.model_type,
                        "architecture": arch, "gpu_family": family_key(arch or "")})
    return out


# --- fitting ---------------------------------------------------------------------------------


def _cell(g: dict[str, Any]) -> tuple[str, str]:
    fam, band = constant_cell(_version(g), _catalog().gpus[g["gpu"]].architecture)
    return fam, band


#: cells whose own fit is not adopted, and the cell whose value they take. hopper/A: 10 of its
#: 11 fit row groups are one shape (gpt-oss-120b, H200, TP 1), and that shape is 17% too fast
#: in band B at band B's constant while TP 2-8 are within 3% (fit rows only): its 4.06 ms
#: absorbs a kernel error of that shape, not a release's step cost. Decided AFTER the first
#: look at the report split (README.md gives the figures both ways).
POOLED = {"hopper/A": "hopper/B"}


#: how many of the coarse grid's best points the fine search of fit_constants looks around
FINE_AROUND = 3


def grid_minimum(loss: Callable[[float], float]) -> tuple[float, float]:
    """(least loss, its constant in s): a grid of 0-12 ms by 0.25 ms, then 0.01 ms steps within
    +-0.25 ms of each of its FINE_AROUND best points."""
    coarse = sorted((loss(c / 4000), c / 4000) for c in range(0, 49))
    points = {round(b + d / 100000, 5) for _, b in coarse[:FINE_AROUND]
              for d in range(-25, 26) if b + d / 100000 >= 0}
    return min((loss(c), c) for c in sorted(points))


def fit_constants() -> dict[str, float]:
    """Per GPU family x band: the constant minimising the median |log(pred/meas)| of TPOT over
    the fit rows of that cell (grid 0-12 ms by 0.25 ms, then +-0.25 ms by 0.01 ms around each
    of the FINE_AROUND best grid points: the median of ~100 rows is bumpy in the constant, and
    around the best grid point alone the fine search missed narrower minima next to it)."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for g in groups():
        if g["split"] == "fit" and g.get("tpot_ms") and not queued(g):
            cells.setdefault(_cell(g), []).append(g)

    def loss(rows: list[dict[str, Any]], c: float) -> float:
        return statistics.median(abs(math.log(predict(g, c)["tpot"] / g["tpot_ms"]))
                                 for g in rows)

    out: dict[str, float] = {}
    for cell, rows in sorted(cells.items()):
        fine = grid_minimum(lambda c, rows=rows: loss(rows, c))
        tps = sorted({g["tp"] for g in rows})
        out[f"{cell[0]}/{cell[1]}"] = round(fine[1], 5)
        print(f"{cell}: {len(rows)} fit rows at TP {tps}, constant {fine[1] * 1000:.2f} ms, "
              f"median |log err| {fine[0]:.4f}")
    for cell, other in POOLED.items():
        if cell in out and other in out:
            print(f"{cell}: takes {other}'s {out[other] * 1000:.2f} ms (POOLED) instead of "
                  f"its own {out[cell] * 1000:.2f} ms")
            out[cell] = out[other]
    return out


#: fit rows whose TTFT does not enter the eager-launch fit: gpt-oss-120b's MXFP4 experts ran on
#: the pooled dense-curve rule, whose prefill was 2.5x too fast even at TP 1 with 8k prompts,
#: where no launch term acts (README.md, item 6). Since item 13 their prefill-sized steps take
#: gpt-oss's measured kernel on H100/H200, but on B200 (66 of its fit row groups) they still
#: run on the dense nvfp4 rule, so the exclusion stays as it was chosen
EAGER_FIT_EXCLUDES = frozenset({"gpt-oss"})


#: the host-side fit's grid (``--fit-host``): host ms per layer of a graphless step
#: (perf.EAGER_LAYER_S), the front end's ms per request (perf.FRONTEND_S) and its us per prompt
#: token (perf.FRONTEND_PER_TOKEN_S). perf.EAGER_OVERLAP_P stays at 1: the first eager fit's
#: choice over p in {1, 1.25, 1.5, 2, 3, inf}; at the small eager times this grid holds, p = inf
#: leaves every step as it is (README.md, item 7)
#: extended to 0.4 ms and 12 us a token when a trial's optimum (the raw all-reduce medians,
#: README.md item 9) sat on both edges (0.3 ms, 8 us); 12 us is inside the 10-21 us a token
#: measured for a serving front end's tokenizer
HOST_GRID_EAGER_MS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)
HOST_GRID_FRONTEND_MS = (0.0, 10.0, 20.0, 30.0, 40.0)
HOST_GRID_TOKEN_US = (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0)
#: host ms per layer of a prompt-carrying step that replays piecewise graphs
#: (perf.PIECEWISE_LAYER_S, item 15), at most the eager step's: the piecewise step launches a
#: subset of the eager step's kernels from the host (attention), so points above it are skipped
HOST_GRID_PIECEWISE_MS = (0.0, 0.1, 0.2, 0.3, 0.4)


#: resamples (with replacement, of the fit split's row groups) by which --fit-host compares its
#: grid optimum with the shipped host terms, and the share of them the optimum must win to
#: replace them (README.md item 16): the loss is a sum of two medians over ~260 and ~90 row
#: groups, and points 0.0005 apart differ by 0.0063 (one standard deviation) across resamples
HOST_BOOTSTRAP = 1000
HOST_REPLACE_SHARE = 0.9


def host_row_errors(eager_ms: float, frontend_ms: float, token_us: float,
                    piecewise_ms: float) -> list[tuple[float | None, float | None]]:
    """Per fit row group at one host grid point (constants refitted there): (TPOT, TTFT)
    |log(pred/meas)|, None where the row has no such figure or (TTFT) is left out of the fit
    (EAGER_FIT_EXCLUDES)."""
    import contextlib
    import io

    from advisor.core import perf

    rows = [g for g in groups() if g["split"] == "fit" and g["class"] == "stated"
            and not queued(g)]
    saved = (perf.EAGER_LAYER_S, perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S,
             dict(perf.STEP_CONSTANT_S), perf.PIECEWISE_LAYER_S)
    try:
        perf.EAGER_LAYER_S = eager_ms / 1000
        perf.PIECEWISE_LAYER_S = piecewise_ms / 1000
        perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S = frontend_ms / 1000, token_us / 1e6
        with contextlib.redirect_stdout(io.StringIO()):
            consts = fit_constants()
        for cell, v in consts.items():
            fam, band = cell.split("/")
            perf.STEP_CONSTANT_S[(fam, band)] = v
        out: list[tuple[float | None, float | None]] = []
        for g in rows:
            p = predict(g)
            out.append((abs(math.log(p["tpot"] / g["tpot_ms"])) if g.get("tpot_ms") else None,
                        abs(math.log(p["ttft"] / g["ttft_ms"]))
                        if g.get("ttft_ms") and g["family"] not in EAGER_FIT_EXCLUDES
                        else None))
        return out
    finally:
        perf.EAGER_LAYER_S, perf.FRONTEND_S, perf.FRONTEND_PER_TOKEN_S = saved[:3]
        perf.PIECEWISE_LAYER_S = saved[4]
        perf.STEP_CONSTANT_S.clear()
        perf.STEP_CONSTANT_S.update(saved[3])


def _medians(errs: list[tuple[float | None, float | None]],
             idx: list[int] | range) -> tuple[float, float]:
    """(TPOT, TTFT) median |log err| over the row groups ``idx`` (None: no such figure)."""
    return (statistics.median(v for i in idx if (v := errs[i][0]) is not None),
            statistics.median(v for i in idx if (v := errs[i][1]) is not None))


def errors_loss(errs: list[tuple[float | None, float | None]], idx: list[int]) -> float:
    """The host fit's loss (median TPOT + median TTFT |log err|) over the row groups ``idx``."""
    return sum(_medians(errs, idx))


def bootstrap_wins(challenger: list[tuple[float | None, float | None]],
                   incumbent: list[tuple[float | None, float | None]],
                   n: int = HOST_BOOTSTRAP, seed: int = 0) -> float:
    """Share of ``n`` resamples of the row groups (with replacement, the same for both) in
    which the challenger's loss is below the incumbent's (deterministic: ``seed``)."""
    import random

    rnd = random.Random(seed)
    k = len(challenger)
    wins = 0
    for _ in range(n):
        idx = [rnd.randrange(k) for _ in range(k)]
        wins += errors_loss(challenger, idx) < errors_loss(incumbent, idx)
    return wins / n


def host_loss(eager_ms: float, frontend_ms: float, token_us: float,
              piecewise_ms: float = 0.0) -> tuple[float, float]:
    """The host-side fit's loss at one grid point: the per-step constants refitted there, then
    (TPOT, TTFT) median |log(pred/meas)| over the fit split's stated-protocol rows; TTFT less
    EAGER_FIT_EXCLUDES. The fit minimises their sum: the eager term lengthens the mixed steps
    that TPOT averages as well as the prefills TTFT waits for, so it is fitted on both."""
    errs = host_row_errors(eager_ms, frontend_ms, token_us, piecewise_ms)
    return _medians(errs, range(len(errs)))


def _host_point(point: tuple[float, float, float, float]) -> tuple[float, float]:
    return host_loss(*point)


def fit_host(jobs: int = 2) -> tuple[float, float, float, float]:
    """The grid point (eager ms a layer, front end ms, us a prompt token, piecewise ms a layer)
    of the least TPOT + TTFT loss (:func:`host_loss`); ties go to the first in grid order
    (smaller terms). ``jobs`` processes share the grid (the order of the results is kept)."""
    import multiprocessing

    points = [(ms, fe, us, pw) for ms in HOST_GRID_EAGER_MS for fe in HOST_GRID_FRONTEND_MS
              for us in HOST_GRID_TOKEN_US for pw in HOST_GRID_PIECEWISE_MS if pw <= ms]
    with multiprocessing.Pool(max(1, jobs)) as pool:
        losses = pool.map(_host_point, points, chunksize=1)
    best: tuple[float, float, float, float, float] | None = None
    for (ms, fe, us, pw), (tpot, ttft) in zip(points, losses, strict=True):
        print(f"eager {ms:.2f} ms/layer, piecewise {pw:.2f} ms/layer, front end {fe:g} ms + "
              f"{us:g} us/token: median |log err| TPOT {tpot:.4f} + TTFT {ttft:.4f} = "
              f"{tpot + ttft:.4f}", flush=True)
        if best is None or tpot + ttft < best[0]:
            best = (tpot + ttft, ms, fe, us, pw)
    assert best is not None
    return best[1], best[2], best[3], best[4]


# --- tables ----------------------------------------------------------------------------------


def _p90_rank(n: int) -> int:
    """Index of the p90 in n sorted values (the nearest-rank p90 every table here quotes)."""
    return max(0, math.ceil(0.9 * n) - 1)


def stats(errs: list[float]) -> tuple[int, float, float, float, float]:
    a = sorted(abs(e) for e in errs)
    p90 = a[_p90_rank(len(a))]
    return len(a), statistics.median(a), p90, a[-1], statistics.median(errs)


def _line(label: list[str], errs: list[float]) -> str:
    n, med, p90, worst, signed = stats(errs)
    return "| " + " | ".join(label) + f" | {n} | {med:.1f}% | {p90:.1f}% | {worst:.1f}% | " \
        f"{signed:+.1f}% |"


def table(rows: list[dict[str, Any]], by: str | None, title: str) -> list[str]:
    head = ["class", "split", "metric"] + ([by] if by else [])
    lines = [f"### {title}", "", "| " + " | ".join(head) + " | n | median | p90 | worst | "
             "signed median |", "|" + "---|" * (len(head) + 5)]
    for cls in CLASSES:
        for split in ("report", "fit", "ep"):
            for m in METRICS:
                sel = [r for r in rows if r["class"] == cls and r["split"] == split
                       and r["metric"] == m and not r["queued"]]
                keys = sorted({str(r[by]) for r in sel}) if by else [""]
                for key in keys:
                    errs = [r["err_pct"] for r in sel if not by or str(r[by]) == key]
                    if errs:
                        lines.append(_line([cls, split, m] + ([key] if by else []), errs))
    return lines + [""]


#: issue 28's bar for the report split's stated-protocol TPOT: p90 of |error| at most this
TAIL_PCT = 12.0


def tail_table(rows: list[dict[str, Any]], split: str, metric: str = "tpot",
               limit_pct: float = TAIL_PCT) -> list[str]:
    """Where a split's stated-protocol errors beyond ``limit_pct`` sit: per model x GPU x
    precision x TP x release cell that has any, how many of its row groups are beyond and
    their signed range; most first. The p90 meets ``limit_pct`` when at most a tenth of the
    row groups are beyond it, and the header says how many that allows."""
    sel = [r for r in rows if r["class"] == "stated" and r["split"] == split
           and r["metric"] == metric and not r["queued"]]
    cells: dict[tuple[str, str, str, int, str], list[float]] = {}
    for r in sel:
        key = (r["family"], r["gpu"], r["precision"], r["tp"], str(r["release"]))
        cells.setdefault(key, []).append(r["err_pct"])
    beyond = {c: [e for e in errs if abs(e) > limit_pct] for c, errs in cells.items()}
    n_beyond = sum(len(v) for v in beyond.values())
    allowed = max(0, len(sel) - 1 - _p90_rank(len(sel)))  # values above the p90's rank
    lines = [f"### {split.capitalize()} split, {metric}: row groups beyond {limit_pct:g}%", "",
             f"{n_beyond} of {len(sel)} row groups (p90 <= {limit_pct:g}% allows {allowed}).", "",
             "| model | GPU | precision | TP | vLLM | beyond | of | signed range beyond |",
             "|---|---|---|---|---|---|---|---|"]
    order = sorted((c for c in beyond if beyond[c]), key=lambda c: (-len(beyond[c]), c))
    for c in order:
        b = beyond[c]
        span = (f"{b[0]:+.1f}%" if len(b) == 1 else f"{min(b):+.1f}% … {max(b):+.1f}%")
        lines.append(f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} | {c[4]} | {len(b)} | "
                     f"{len(cells[c])} | {span} |")
    return lines + [""]


def confidence_sections(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``ttft`` and ``tpot`` sections of accuracy.json: per GPU family, the REPORT rows of
    the stated protocol (the held-out, protocol-known figures), their errors and coverage."""
    out = {}
    for section in ("ttft", "tpot"):
        runs = [{"error_pct": r["err_pct"], "model_type": r["model_type"], "vllm": r["release"],
                 "gpu": r["gpu"], "architecture": r["architecture"]}
                for r in rows if r["metric"] == section and r["split"] == "report"
                and r["class"] == "stated" and not r["queued"]]
        summary = confidence.summarize_runs(runs)
        for fam, group in summary["families"].items():
            errs = [r["error_pct"] for r in runs
                    if family_key(str(r["architecture"])) == fam]
            _, _, p90, _, signed = stats(errs)
            group["p90_pct"] = round(p90, 2)
            group["signed_median_pct"] = round(signed, 2)
        out[section] = {"regenerate": "python benchmarks/perf/run.py --write",
                        "data": "benchmarks/perf/silicon_rows.json (aiconfigurator "
                                "silicon_sample.csv, report split, stated protocol; a release "
                                "the CSV leaves blank is InferenceX's image at the run's date "
                                "where the date places it)",
                        "headline": f"per row group, the absolute % error of mean {section}",
                        **summary}
    # the expert-parallel set (split "ep": never fitted on), quoted by an estimate of a layout
    # served with --enable-expert-parallel (perf.expert_parallel_note)
    ep: dict[str, Any] = {"regenerate": "python benchmarks/perf/run.py --write",
                          "data": "benchmarks/perf/silicon_rows.json, split ep (rows run with "
                                  "--enable-expert-parallel over the TP group), stated protocol"}
    for section in ("ttft", "tpot"):
        errs = [r["err_pct"] for r in rows if r["metric"] == section and r["split"] == "ep"
                and r["class"] == "stated" and not r["queued"]]
        n, med, p90, worst, signed = stats(errs)
        ep[section] = {"n": n, "median_pct": round(med, 1), "p90_pct": round(p90, 1),
                       "worst_pct": round(worst, 1), "signed_median_pct": round(signed, 1)}
    out["expert_parallel"] = ep
    return out


HEADER = """# Accuracy of advisor's step model on measured vLLM serving runs

Generated by `python benchmarks/perf/run.py --write` from `silicon_rows.json` (itself written by
`python benchmarks/perf/silicon.py --aic /var/tmp/aic` from NVIDIA aiconfigurator's
`silicon_sample.csv` @ 095f58a5, Apache-2.0). The same command rewrites the `ttft` and `tpot`
sections of `src/advisor/core/accuracy.json`, the confidence advisor quotes (report split, stated
protocol only); `tests/test_confidence.py` fails when either is stale. The split, the row classes
and the repeat rule are in `README.md` (fixed before any error was looked at). Error =
(predicted - measured) / measured; output tok/s is derived on both sides by Little's law from TTFT
and TPOT (the CSV has no throughput column), so it is not an independent check.

Fitted on the fit split only: the per-step constant per GPU family x release band
(`STEP_CONSTANT_S` in `src/advisor/core/perf.py`, `python benchmarks/perf/run.py --fit`).
Everything else comes from the kernel curves (`kernel_curves.json`) and the datasheets.

"""


def markdown(rows: list[dict[str, Any]], sections: dict[str, Any]) -> str:
    data = json.loads(ROWS.read_text())
    by = data["rows_by_class"]
    ok = data["modelled_by_class"]
    lines = [f"vLLM rows by class: stated protocol {by['stated']} ({ok['stated']} modelled), "
             f"NVIDIA-internal {by['internal']} ({ok['internal']}), other {by['other']} "
             f"({ok['other']}).", "",
             f"vLLM rows in the CSV: {data['vllm_rows']}; row groups modelled: "
             f"{len(data['groups'])}; metric groups dropped for repeats disagreeing by >15%: "
             f"TPOT {data['repeat_groups_dropped']['tpot']}, TTFT "
             f"{data['repeat_groups_dropped']['ttft']}.", "",
             "Rows not modelled: " + "; ".join(f"{v} {k}" for k, v in data["skipped"].items())
             + ".", "", "## Headline", ""]
    lines += table(rows, None, "All rows, by class and split")
    q = [r for r in rows if r["queued"]]
    names = sorted({f"{r['family']} {r['gpu']} TP{r['tp']} c{r['concurrency']}"
                    f" {r['isl']}/{r['osl']} ({r['split']})" for r in q if r["metric"] == "tpot"})
    lines += ["### Rows whose server queued (screened out above: TTFT > (OSL - 1) x TPOT)", "",
              f"{len(names)} row groups: " + ", ".join(names) + ".", ""]
    lines += table([{**r, "queued": False} for r in q], None, "Queued rows (not modelled)")
    lines += ["## Breakdowns", ""]
    lines += table(rows, "gpu_family", "By GPU family")
    lines += table(rows, "vllm", "By vLLM release (None: unrecorded)")
    lines += table(rows, "family", "By model")
    lines += ["## Where the TPOT tail is (stated protocol)", ""]
    lines += tail_table(rows, "report") + tail_table(rows, "fit")
    lines += ["## Confidence labels (accuracy.json, report split, stated protocol)", "",
              "| metric | GPU family | GPUs | groups | median | p90 | worst | signed median | "
              "model families | vLLM |", "|---|---|---|---|---|---|---|---|---|---|"]
    for section in ("ttft", "tpot"):
        for fam, gr in sections[section]["families"].items():
            span = "-".join(dict.fromkeys(v for v in (gr["vllm_min"], gr["vllm_max"]) if v))
            if gr["vllm_unrecorded"]:
                span = f"{span + '; ' if span else ''}{gr['vllm_unrecorded']} not recorded"
            lines.append(f"| {section} | {fam} | {', '.join(gr['gpus'])} | {gr['n']} | "
                         f"{gr['median_pct']}% | {gr['p90_pct']}% | {gr['worst_pct']}% | "
                         f"{gr['signed_median_pct']:+}% | "
                         f"{', '.join(gr['model_types'])} | {span} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite RESULTS.md and the ttft/tpot sections of accuracy.json")
    parser.add_argument("--fit", action="store_true", help="refit the per-step constants")
    parser.add_argument("--fit-host", action="store_true",
                        help="refit EAGER_LAYER_S, PIECEWISE_LAYER_S, FRONTEND_S and "
                        "FRONTEND_PER_TOKEN_S (then "
                        "run --fit at them)")
    args = parser.parse_args(argv)
    if args.fit_host:
        from advisor.core import perf

        best = fit_host()  # in the grid's units: ms, ms, us, ms
        shipped = (round(perf.EAGER_LAYER_S * 1000, 6), round(perf.FRONTEND_S * 1000, 6),
                   round(perf.FRONTEND_PER_TOKEN_S * 1e6, 6),
                   round(perf.PIECEWISE_LAYER_S * 1000, 6))
        if best != shipped:
            share = bootstrap_wins(host_row_errors(*best), host_row_errors(*shipped))
            print(f"the grid optimum beats the shipped host terms in {share:.0%} of "
                  f"{HOST_BOOTSTRAP} resamples of the fit row groups (needs "
                  f"{HOST_REPLACE_SHARE:.0%} to replace them)")
            if share < HOST_REPLACE_SHARE:
                best = shipped
        eager, front, per_token, piecewise = best
        print(f"EAGER_LAYER_S = {eager / 1000:.5f}, FRONTEND_S = {front / 1000:.3f}, "
              f"FRONTEND_PER_TOKEN_S = {per_token / 1e6:.1e}, "
              f"PIECEWISE_LAYER_S = {piecewise / 1000:.5f}")
        return 0
    if args.fit:
        print(json.dumps(fit_constants(), indent=1))
        return 0
    rows = evaluate()
    sections = confidence_sections(rows)
    text = markdown(rows, sections)
    if args.write:
        existing = json.loads(ACCURACY_JSON.read_text()) if ACCURACY_JSON.exists() else None
        ACCURACY_JSON.write_text(confidence.dumps(confidence.merged(existing, sections)))
        (HERE / "RESULTS.md").write_text(HEADER + text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
