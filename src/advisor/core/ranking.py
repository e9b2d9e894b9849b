"""Filter, fit, estimate and rank every instance offer for one model and workload. Pure.

The score is the objective's figure (cost: $ per million output tokens, the default; latency:
TPOT; throughput: inverse tokens/s per instance) times ``1 + penalties``, where the host side
enters with these stated weights:

* NUMA: aligned 0, placement unknown +5%, a replica spanning nodes +10%;
* host memory bandwidth per GPU: unknown +2%, below 25 GB/s per GPU +3%;
* CPU generation: unknown +1%, a pre-2021 generation (Cascade Lake, Rome) +2%.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog.catalog import Catalog
from advisor.catalog.schema import Gpu, InstanceType
from advisor.core.engine import EngineProfile
from advisor.core.layouts import Plan, layouts, place_multi, tp_sizes
from advisor.core.model import ModelSpec
from advisor.core.perf import PerfEstimate, Workload, estimate
from advisor.core.sizing import FitRequest, MemoryFit, fit
from advisor.errors import UserInputError

Objective = Literal["cost", "latency", "throughput"]
NUMA_PENALTY = {"aligned": 0.0, "unknown": 0.05, "spans-nodes": 0.10}
OLD_CPU_CODENAMES = {"cascade lake", "rome", "skylake"}


class Constraints(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    providers: list[str] = Field(default_factory=list)
    regions: list[str] = Field(default_factory=list)
    gpus: list[str] = Field(default_factory=list)
    max_usd_per_hour: float | None = Field(default=None, gt=0)
    max_tpot_ms: float | None = Field(default=None, gt=0)
    max_ttft_ms: float | None = Field(default=None, gt=0)
    spot: bool = False
    #: the most identical instances one replica may span (PP across them); 1: single machine
    max_nodes: int = Field(default=4, ge=1, le=64)


class Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    ctx: int = Field(gt=0)
    input_len: int = Field(gt=0)
    output_len: int = Field(gt=0)
    #: target concurrent sequences per instance; None: as many as the KV cache and limits allow
    concurrency: int | None = Field(default=None, gt=0)
    objective: Objective = "cost"
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"


class NumaView(BaseModel):
    model_config = ConfigDict(frozen=True)
    alignment: str
    gpu_nodes: list[int | None] | None
    nodes: int | None


class Recommendation(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance: str
    region: str | None
    usd_per_hour: float
    price_kind: str
    price_as_of: str | None
    gpu: str
    gpu_count: int
    plan: Plan
    fit: MemoryFit
    perf: PerfEstimate
    instance_output_tokens_per_s: float
    usd_per_million_output_tokens: float
    numa: NumaView
    cpu_family: str | None
    score: float
    reasons: list[str]
    risks: list[str]


class Rejection(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance: str
    reason: str
    #: what excluded it: a constraint's option name, "no price", "no perf data", "does not fit"
    by: str = ""
    #: for "does not fit": GiB short per GPU in the layout that comes closest
    shortfall: float | None = None


def gpu_total_gib(gpu: Gpu) -> float:
    return gpu.usable_memory_mib / 1024 if gpu.usable_memory_mib else gpu.memory_gib


def _gpu_list(gpus: list[int]) -> str:
    return f"{gpus[0]}-{gpus[-1]}" if len(gpus) > 1 else str(gpus[0])


class _Ranker:
    def __init__(self, catalog: Catalog, spec: ModelSpec, req: Request,
                 cons: Constraints, engine: EngineProfile) -> None:
        self.cat, self.spec, self.req, self.cons, self.engine = catalog, spec, req, cons, engine
        self.gpu_ids: set[str] | None = None
        if cons.gpus:
            ids: set[str] = set()
            for g in cons.gpus:
                hit = catalog.match_gpu_ids(g)
                if not hit:
                    catalog.gpu(g)  # raises the did-you-mean error
                ids.update(hit)
            self.gpu_ids = ids
        self._fit = lru_cache(maxsize=None)(self._fit_uncached)
        self._perf = lru_cache(maxsize=None)(self._perf_uncached)

    def _fit_uncached(self, gpu_id: str, tp: int, pp: int) -> MemoryFit:
        g = self.cat.gpus[gpu_id]
        return fit(self.spec, FitRequest(gpu_memory_gib=gpu_total_gib(g), gpu_name=g.name, tp=tp,
                                         pp=pp, max_model_len=self.req.ctx,
                                         kv_cache_dtype=self.req.kv_cache_dtype), self.engine)

    def _perf_uncached(self, gpu_id: str, tp: int, pp: int, c: int, nodes: int = 1,
                       fabric_gbps: float | None = None) -> PerfEstimate:
        return estimate(self.spec, self.cat.gpus[gpu_id], self._fit(gpu_id, tp, pp),
                        Workload(input_len=self.req.input_len, output_len=self.req.output_len,
                                 concurrency=c), across_nodes=nodes > 1,
                        fabric_gbps=fabric_gbps)

    # -- filters ------------------------------------------------------------------------
    def price(self, inst: InstanceType) -> tuple[float | None, str, str | None]:
        p = inst.price
        if self.cons.spot:
            if p.spot_usd_per_hour is None:
                return None, "no spot price in the catalog", None
            return p.spot_usd_per_hour, "spot", p.region
        if p.on_demand_usd_per_hour is None:
            return None, "no on-demand price in the catalog", None
        return p.on_demand_usd_per_hour, "on-demand", p.region

    def constraint_reason(self, inst: InstanceType) -> tuple[str, str] | None:
        """(what excluded it, why) or None when the offer passes every filter."""
        c = self.cons
        if c.providers and inst.provider not in c.providers:
            return "--provider", (f"provider {inst.provider} not in --provider "
                                  f"{','.join(c.providers)}")
        if c.regions and not (set(c.regions) & set(inst.regions or [inst.price.region or ""])):
            return "--region", f"not offered in {','.join(c.regions)}"
        if c.regions and inst.price.region not in c.regions:
            # a price from another region is not this region's price: ranking on it would
            # compare a guess with facts (the catalog prices each type in one region today)
            return "--region", (f"no price in {','.join(c.regions)} (the catalog prices it in "
                                f"{inst.price.region or 'no region'})")
        if self.gpu_ids is not None and inst.gpu.model not in self.gpu_ids:
            return "--gpu", f"GPU {inst.gpu.model} not in --gpu {','.join(c.gpus)}"
        if inst.gpu.model not in self.cat.gpus:
            return "unknown GPU", f"GPU {inst.gpu.model} unknown to the catalog"
        g = self.cat.gpus[inst.gpu.model]
        if not g.memory_bandwidth_gb_s or not (g.bf16_tflops or g.fp16_tflops):
            return "no perf data", (f"the catalog lacks {g.id}'s memory bandwidth or tensor "
                                    "throughput, so its performance cannot be estimated")
        usd, why, _ = self.price(inst)
        if usd is None:
            return "no price", why
        if c.max_usd_per_hour is not None and usd > c.max_usd_per_hour:
            return "--max-usd-per-hour", (f"${usd:.2f}/h is above --max-usd-per-hour "
                                          f"{c.max_usd_per_hour}")
        return None

    # -- choosing concurrency -----------------------------------------------------------
    def concurrency_options(self, f: MemoryFit, replicas: int) -> list[int]:
        per_seq = self.req.input_len + self.req.output_len
        cap = max(1, min(f.max_num_seqs, f.kv_cache_tokens // max(1, per_seq)))
        if self.req.concurrency is not None:
            return [max(1, min(cap, math.ceil(self.req.concurrency / replicas)))]
        opts, c = [], 1
        while c < cap:
            opts.append(c)
            c *= 2
        return [*opts, cap]

    def best_for(self, inst: InstanceType, usd: float) -> tuple[Recommendation | None, Rejection]:
        plans = layouts(self.spec, inst, self.cat)
        fitting = [(p, self._fit(inst.gpu.model, p.tp, p.pp)) for p in plans]
        fitting_ok = [(p, f) for p, f in fitting if f.fits]
        if not fitting_ok:  # a model too big for one TP group: try pipeline stages
            staged = [(p, self._fit(inst.gpu.model, p.tp, p.pp))
                      for p in layouts(self.spec, inst, self.cat, with_pp=True) if p.pp > 1]
            fitting_ok = [(p, f) for p, f in staged if f.fits]
            fitting += staged
        no_fabric = ""
        if not fitting_ok and self.cons.max_nodes > 1:  # too big for one instance: span several
            multi, no_fabric = self.multi_node(inst)
            if multi is not None:
                fitting_ok = [multi]
        if not fitting_ok:
            def short(f: MemoryFit) -> float:
                return max(f.weights_gib + f.activation_gib + f.non_torch_gib - f.budget_gib, 0.0)

            best = min((f for _, f in fitting), key=short, default=None)
            note = best.notes[0] if best and best.notes else "does not fit"
            return None, Rejection(provider=inst.provider, instance=inst.name, by="does not fit",
                                   reason=f"does not fit at ctx {self.req.ctx} with any layout "
                                   f"of {inst.gpu.count} x {inst.gpu.model}: {note}"
                                   + (f"; {no_fabric}" if no_fabric else ""),
                                   shortfall=round(short(best), 2) if best else None)
        candidates: list[tuple[float, Plan, MemoryFit, PerfEstimate]] = []
        limit_miss = ""
        gbps = inst.fabric.gbps if inst.fabric else None
        for plan, f in fitting_ok:
            for c in self.concurrency_options(f, plan.replicas):
                perf = self._perf(inst.gpu.model, plan.tp, plan.pp, c, plan.nodes,
                                  gbps if plan.nodes > 1 else None)
                if self.cons.max_tpot_ms and perf.tpot_ms > self.cons.max_tpot_ms:
                    limit_miss = f"TPOT {perf.tpot_ms:.1f} ms > --max-tpot-ms at concurrency {c}"
                    continue
                if self.cons.max_ttft_ms and perf.ttft_ms > self.cons.max_ttft_ms:
                    limit_miss = f"TTFT {perf.ttft_ms:.0f} ms > --max-ttft-ms at concurrency {c}"
                    continue
                candidates.append((self.score(inst, usd, plan, perf)[0], plan, f, perf))
        if not candidates:
            return None, Rejection(provider=inst.provider, instance=inst.name,
                                   by="--max-tpot-ms" if "TPOT" in limit_miss else "--max-ttft-ms",
                                   reason=limit_miss or "no layout meets the latency limits")
        _, plan, f, perf = min(candidates, key=lambda x: x[0])
        return self.recommendation(inst, usd, plan, f, perf), Rejection(
            provider=inst.provider, instance=inst.name, reason="")

    def multi_node(self, inst: InstanceType) -> tuple[tuple[Plan, MemoryFit] | None, str]:
        """The fewest identical instances (TP = the GPUs of one, PP = instances) that hold the
        model — only over an inter-node fabric the catalog records; else why not, in words."""
        sizes = tp_sizes(self.spec, inst.gpu.count)
        if not sizes:
            return None, ""
        tp = max(sizes)
        for nodes in range(2, self.cons.max_nodes + 1):
            if nodes > self.spec.num_layers:
                break
            f = self._fit(inst.gpu.model, tp, nodes)
            if not f.fits:
                continue
            fab = inst.fabric
            if fab is None or not fab.for_multi_node:
                said = ("records no inter-node fabric" if fab is None
                        else f"records only {fab.kind} between instances")
                return None, (f"{nodes} instances (TP {tp} x PP {nodes}) would hold it, but the "
                              f"catalog {said} for {inst.name}: vLLM's multi-node serving needs "
                              "EFA, InfiniBand or GPUDirect")
            return (place_multi(inst, self.cat, tp, nodes), f), ""
        return None, ""

    def score(self, inst: InstanceType, usd: float, plan: Plan,
              perf: PerfEstimate) -> tuple[float, float, list[str], list[str]]:
        """(score, $ per million output tokens, reasons, risks) from the stated weights."""
        tps = perf.output_tokens_per_s * plan.replicas
        usd_m = usd * plan.nodes / (tps * 3600) * 1e6 if tps > 0 else math.inf
        penalty = NUMA_PENALTY[plan.alignment]
        reasons: list[str] = []
        risks: list[str] = []
        bw = plan.replica_layout[0].host_memory_bandwidth_gb_s
        per_gpu = bw / (plan.tp * plan.pp) if bw else None
        if per_gpu is None:
            penalty += 0.02
            risks.append("host memory bandwidth per GPU not known for this instance")
        elif per_gpu < 25:
            penalty += 0.03
            risks.append(f"only {per_gpu:.0f} GB/s of host memory bandwidth per GPU")
        codename = self._codename(inst)
        if codename is None:
            penalty += 0.01
        elif codename.lower() in OLD_CPU_CODENAMES:
            penalty += 0.02
            # a cost on the score, so it is a risk, never a reason to pick it (issue 15)
            risks.append(f"host CPU is an older generation ({codename})")
        base = {"cost": usd_m, "latency": perf.tpot_ms, "throughput": 1e6 / max(tps, 1e-9)}
        return base[self.req.objective] * (1 + penalty), usd_m, reasons, risks

    def _codename(self, inst: InstanceType) -> str | None:
        cpu = self.cat.cpus.get(inst.cpu.model) if inst.cpu.model else None
        return cpu.codename if cpu else inst.cpu.codename

    def recommendation(self, inst: InstanceType, usd: float, plan: Plan, f: MemoryFit,
                       perf: PerfEstimate) -> Recommendation:
        tps = perf.output_tokens_per_s * plan.replicas
        score, usd_m, reasons, risks = self.score(inst, usd, plan, perf)
        cpu = self.cat.cpus.get(inst.cpu.model) if inst.cpu.model else None
        family = cpu.family if cpu else self.cat.family_of_codename(inst.cpu.codename)
        per_replica_seqs = f.kv_cache_tokens // (self.req.ctx)
        reasons.insert(0, f"fits {f.max_concurrency:.1f} concurrent {self.req.ctx}-token "
                       f"sequences per replica ({per_replica_seqs} full-length at once)")
        if plan.nodes > 1:
            fab = inst.fabric
            reasons.append(f"one replica over {plan.nodes} instances: TP {plan.tp} inside each, "
                           f"PP {plan.pp} across them over "
                           f"{fab.kind if fab else '?'}"
                           + (f" ({fab.gbps:g} Gbit/s)" if fab and fab.gbps else "")
                           + f": {tps:,.0f} output tok/s at {perf.concurrency} sequences "
                           f"(TPOT {perf.tpot_ms:.1f} ms, TTFT {perf.ttft_ms:.0f} ms), priced "
                           f"as {plan.nodes} instances")
            risks.append("multi-node serving runs on a Ray cluster: one instance lost stops "
                         "the replica")
        else:
            reasons.append(f"{plan.replicas} replica(s) of TP {plan.tp}"
                           + (f" x PP {plan.pp}" if plan.pp > 1 else "")
                           + f": {tps:,.0f} output tok/s at {perf.concurrency} sequences each "
                           f"(TPOT {perf.tpot_ms:.1f} ms, TTFT {perf.ttft_ms:.0f} ms)")
        r0 = plan.replica_layout[0]
        if plan.alignment == "aligned":
            reasons.append(f"GPUs {_gpu_list(r0.gpus)} and the replica's cores share NUMA node "
                           f"{r0.numa_nodes[0] if r0.numa_nodes else '?'}")
        elif plan.alignment == "spans-nodes":
            risks.append(f"replica GPUs {_gpu_list(r0.gpus)} span NUMA nodes {r0.numa_nodes}")
        else:
            risks.append("GPU-to-NUMA placement not published for this VM")
        price_kind = "spot" if self.cons.spot else "on-demand"
        reasons.append(f"{price_kind} price from {inst.price.as_of}, {inst.price.region}")
        if self.cons.spot:
            risks.append("spot capacity can be reclaimed at short notice")
        return Recommendation(
            provider=inst.provider, instance=inst.name, region=inst.price.region,
            usd_per_hour=usd, price_kind=price_kind,
            price_as_of=str(inst.price.as_of) if inst.price.as_of else None,
            gpu=inst.gpu.model, gpu_count=inst.gpu.count, plan=plan, fit=f, perf=perf,
            instance_output_tokens_per_s=round(tps, 1),
            usd_per_million_output_tokens=round(usd_m, 4),
            numa=NumaView(alignment=plan.alignment, gpu_nodes=inst.numa.gpu_nodes,
                          nodes=inst.numa.nodes),
            cpu_family=family,
            score=round(score, 6), reasons=reasons, risks=risks)


def rank(catalog: Catalog, spec: ModelSpec, req: Request, cons: Constraints,
         engine: EngineProfile, instances: list[InstanceType] | None = None
         ) -> tuple[list[Recommendation], list[Rejection]]:
    """All fitting offers, best first, and why each other one was left out."""
    if req.input_len + req.output_len > req.ctx:
        raise UserInputError(
            f"input ({req.input_len}) + output ({req.output_len}) tokens exceed --ctx {req.ctx}",
            hint="raise --ctx or shorten --input-len / --output-len")
    ranker = _Ranker(catalog, spec, req, cons, engine)
    recs: list[Recommendation] = []
    rejected: list[Rejection] = []
    for inst in instances if instances is not None else catalog.instances.values():
        why = ranker.constraint_reason(inst)
        if why:
            rejected.append(Rejection(provider=inst.provider, instance=inst.name, reason=why[1],
                                      by=why[0]))
            continue
        usd, _, _ = ranker.price(inst)
        assert usd is not None
        rec, rej = ranker.best_for(inst, usd)
        if rec is None:
            rejected.append(rej)
        else:
            recs.append(rec)
    recs.sort(key=lambda r: (r.score, r.usd_per_hour, r.provider, r.instance))
    return recs, rejected


def explain_empty(rejected: list[Rejection]) -> UserInputError:
    """The error when nothing is left: the closest misses and what excluded the rest."""
    misses = sorted((r for r in rejected if r.by == "does not fit"),
                    key=lambda r: r.shortfall or 0)[:3]
    constraint = [r for r in rejected if r.by != "does not fit"]
    parts = []
    if misses:
        parts.append("closest: " + "; ".join(
            f"{m.provider}:{m.instance} (" + (f"{m.shortfall:.1f} GiB short per GPU)"
                                              if m.shortfall else "KV cache too small)")
            for m in misses))
    if constraint:
        counts: dict[str, int] = {}
        for r in constraint:
            counts[r.by] = counts.get(r.by, 0) + 1
        parts.append("excluded by " + ", ".join(
            f"{k} ({n})" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])))
    return UserInputError("no instance can serve this request: " + " | ".join(parts),
                          hint="relax a constraint, shorten --ctx, or use --kv-cache-dtype fp8; "
                          "--show-rejected lists every instance with its reason")
