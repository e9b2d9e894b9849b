"""Filter, fit, estimate and rank every instance offer for one model, question and load. Pure.

The question (:mod:`advisor.core.load`) decides the figure each offer is ranked by: with no load
and the interactive targets, its $/h for one replica (the cheapest way to serve the model within
TPOT and TTFT); with ``--rps`` or ``--concurrency`` users, the monthly bill of the fleet that
carries the load within the targets; with ``--batch``, $ per million output tokens with the
instance saturated. ``--objective latency`` / ``throughput`` rank by TPOT / tokens per second
instead. The score is that figure times ``1 + the host weight``, the only weight: NUMA placement
by evidence regime (:mod:`advisor.core.host`, where the table of sources is). vLLM's CPU floor
is a gate, not a weight. Offers advisor cannot deploy (:mod:`advisor.core.deploy`: AMD GPUs, no
ROCm path) are kept, marked, and ranked after every deployable one.
"""

from __future__ import annotations

import math
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog.catalog import Catalog
from advisor.catalog.schema import InstanceType, Price
from advisor.core import archs
from advisor.core import host as hostmod
from advisor.core.confidence import Confidence, combine
from advisor.core.deploy import deployable
from advisor.core.engine import EngineProfile
from advisor.core.host import HostView
from advisor.core.layouts import Plan, layouts, place_multi, tp_sizes
from advisor.core.load import Crossover, FleetSize, QuestionKind, Targets, question, size_fleet
from advisor.core.model import ModelSpec
from advisor.core.perf import H2D_BYTES_S, PerfEstimate, Workload, check_context, estimate
from advisor.core.question import KvCacheDtype, Objective
from advisor.core.sizing import FitRequest, MemoryFit, fit, with_confidence
from advisor.core.weights import Weights, capability, expert_parallel_refusal
from advisor.errors import UserInputError

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
    #: keep instances below vLLM's CPU floor (with a risk) instead of rejecting them
    allow_small_host: bool = False


class Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    ctx: int = Field(gt=0)
    input_len: int = Field(gt=0)
    output_len: int = Field(gt=0)
    #: the load as users in flight (concurrent sequences) over the whole deployment
    concurrency: int | None = Field(default=None, gt=0, le=10_000_000)
    #: the load as requests per second
    rps: float | None = Field(default=None, gt=0, le=1e6)
    #: no latency targets by default; saturated $/1M economics
    batch: bool = False
    #: share of the in-target capacity that is used on average: $/1M is stated at it (no
    #: load), and a fleet for a load is sized to use at most this share of each replica
    utilisation: float = Field(default=1.0, gt=0, le=1)
    #: replicas a fleet keeps beyond the load (N + spare)
    spare: int = Field(default=0, ge=0, le=1000)
    objective: Objective = "cost"
    kv_cache_dtype: KvCacheDtype = "auto"
    #: vLLM's --cpu-offload-gb (GiB of weights per GPU held in host memory)
    cpu_offload_gib: float = Field(default=0.0, ge=0, le=4096)
    #: vLLM's --enable-expert-parallel as the user asked (None: where TP cannot split the
    #: experts; ModelSpec.expert_parallel_for)
    expert_parallel: bool | None = None
    #: the targets as the user sees them (where they come from); the limits themselves are
    #: Constraints.max_tpot_ms / max_ttft_ms
    targets: Targets | None = None
    #: GiB of weights (whole model) while vLLM loads it, where that exceeds what it serves:
    #: on-the-fly fp8 loads the original precision first (advisor.core.weights.load_gib)
    load_weights_gib: float | None = Field(default=None, gt=0)

    @property
    def question(self) -> QuestionKind:
        return question(self.rps, self.concurrency, self.batch)


class Basis(BaseModel):
    """Which assumptions produced a recommendation's figures."""

    model_config = ConfigDict(frozen=True)
    question: QuestionKind
    targets: Targets
    #: how the sequences per replica were chosen
    concurrency_rule: str
    utilisation: float
    #: what the $/1M figure assumes
    usd_per_million_at: str
    #: what the score is
    score: str


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
    host: HostView
    basis: Basis
    #: the fleet for the load (``--rps`` / ``--concurrency``); None without one
    fleet: FleetSize | None = None
    #: without a load: the load from which this offer's fleet costs less than the first pick's
    #: (None for the first pick, and for an offer that is not cheaper per request)
    crossover: Crossover | None = None
    #: how far to trust the figures: the weaker of the memory and the perf confidence
    confidence: Confidence | None = None
    #: whether ``advisor render`` / ``provision`` can bring it up (:mod:`advisor.core.deploy`:
    #: CUDA vLLM only); the ranking puts every deployable offer before any other
    deployable: bool = True
    #: why not, in words, where ``deployable`` is False
    not_deployable_reason: str | None = None
    #: the weights it assumes (``--quantization``): the checkpoint as published, or fp8
    weights: Weights | None = None


class Rejection(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance: str
    reason: str
    #: what excluded it: a constraint's option name, "no price", "no perf data", "does not fit"
    by: str = ""
    #: for "does not fit": GiB short per GPU in the layout that comes closest
    shortfall: float | None = None


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
        self._basis: Basis | None = None
        #: (id of the fit's, id of the perf's confidence) -> their combination, shared by every
        #: recommendation on the same GPU family (they are frozen)
        self._confidence: dict[tuple[int, int], Confidence] = {}
        #: a model the release cannot load (or loads through its Transformers backend) is said
        #: on every offer: the same for all, so it changes no order
        self.arch_risk = archs.model_risk(spec.architectures, engine.version,
                                          spec.config_model_type)

    def _fit_uncached(self, gpu_id: str, tp: int, pp: int) -> MemoryFit:
        g = self.cat.gpus[gpu_id]
        f = with_confidence(fit(self.spec, FitRequest(
            gpu_memory_gib=g.cuda_memory_gib, gpu_name=g.name, tp=tp, pp=pp,
            max_model_len=self.req.ctx, kv_cache_dtype=self.req.kv_cache_dtype,
            cpu_offload_gib=self.req.cpu_offload_gib, gpu_architecture=g.architecture,
            gpu_compute_capability=capability(g),
            expert_parallel=bool(self.spec.expert_parallel_for(tp, self.ep_asked(gpu_id)))),
            self.engine), g.architecture,
            self.spec.model_type)
        load = self.req.load_weights_gib
        if f.fits and load and load / (tp * pp) > g.cuda_memory_gib:
            # vLLM's fp8 docs: on-the-fly fp8 loads the original precision before quantizing
            return f.model_copy(update={"fits": False, "notes": [
                f"on-the-fly fp8 loads the original weights first: {load / (tp * pp):.1f} GiB "
                f"per GPU > {g.cuda_memory_gib:.1f} GiB (a published fp8 checkpoint would "
                "not)", *f.notes]})
        return f

    def _perf_uncached(self, gpu_id: str, tp: int, pp: int, c: int, nodes: int = 1,
                       fabric_gbps: float | None = None,
                       link_bytes_s: float | None = None) -> PerfEstimate:
        return estimate(self.spec, self.cat.gpus[gpu_id], self._fit(gpu_id, tp, pp),
                        Workload(input_len=self.req.input_len, output_len=self.req.output_len,
                                 concurrency=c), across_nodes=nodes > 1,
                        fabric_gbps=fabric_gbps, host_link_bytes_s=link_bytes_s)

    # -- filters ------------------------------------------------------------------------
    def price(self, inst: InstanceType) -> tuple[float | None, str, str | None]:
        """(USD per hour, kind or why there is none, region) of the price this offer is ranked
        on: with --region, the lowest of those regions' own prices, never another region's."""
        spot = self.cons.spot
        kind = "spot" if spot else "on-demand"
        p = inst.price_in(self.cons.regions or None, spot)
        if p is None:
            where = f" in {','.join(self.cons.regions)}" if self.cons.regions else ""
            return None, f"no {kind} price in the catalog{where}", None
        return p.usd(spot), kind, p.region

    def price_row(self, inst: InstanceType) -> Price:
        """The catalog row behind :meth:`price` (its date and region)."""
        return inst.price_in(self.cons.regions or None, self.cons.spot) or inst.price

    def constraint_reason(self, inst: InstanceType) -> tuple[str, str] | None:
        """(what excluded it, why) or None when the offer passes every filter."""
        c = self.cons
        gone = inst.retired()
        if gone:  # kept in the catalog for reference, never ranked
            return "retired", gone
        if c.providers and inst.provider not in c.providers:
            return "--provider", (f"provider {inst.provider} not in --provider "
                                  f"{','.join(c.providers)}")
        if c.regions and not (set(c.regions) & set(inst.regions or [inst.price.region or ""])):
            return "--region", f"not offered in {','.join(c.regions)}"
        if c.regions and inst.price_in(c.regions, c.spot) is None:
            # a price from another region is not this region's price: ranking on it would
            # compare a guess with facts
            priced = sorted(r for r, p in inst.prices.items() if p.usd(c.spot) is not None)
            return "--region", (f"no {'spot' if c.spot else 'on-demand'} price in "
                                f"{','.join(c.regions)} (the catalog prices it in "
                                f"{', '.join(priced) or inst.price.region or 'no region'})")
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
        short = hostmod.floor_shortfall(inst)
        if short and not c.allow_small_host:
            return "host floor", short + " (--allow-small-host keeps it)"
        return None

    # -- choosing concurrency -----------------------------------------------------------
    def concurrency_options(self, f: MemoryFit) -> list[int]:
        """Sequences per replica to try: powers of two up to what the KV cache holds (and
        vLLM's max_num_seqs), and that limit itself; the targets then cut from the top."""
        per_seq = self.req.input_len + self.req.output_len
        cap = max(1, min(f.max_num_seqs, f.sequences_held(per_seq)))
        opts, c = [], 1
        while c < cap:
            opts.append(c)
            c *= 2
        return [*opts, cap]

    def link_bytes_s(self, inst: InstanceType, plan: Plan) -> float | None:
        """Host-to-GPU rate for weights streamed from host memory: the GPU's PCIe generation,
        or the replica's host memory bandwidth per GPU where that is lower."""
        if not self.req.cpu_offload_gib:
            return None
        g = self.cat.gpus[inst.gpu.model]
        pcie = H2D_BYTES_S.get(g.pcie_gen or inst.pcie_gen or 4, H2D_BYTES_S[4])
        bw = plan.replica_layout[0].host_memory_bandwidth_gb_s
        per_gpu = bw * 1e9 / (plan.tp * plan.pp) if bw else None
        return min(pcie, per_gpu) if per_gpu else pcie

    def ep_refused(self, gpu_id: str) -> str | None:
        """Why these GPUs cannot run the model with expert parallelism (None: they can):
        advisor.core.weights.expert_parallel_refusal."""
        q = self.spec.quantization
        return expert_parallel_refusal(q.method if q else None,
                                       self.cat.gpus[gpu_id].architecture, self.engine.version)

    def ep_asked(self, gpu_id: str) -> bool | None:
        """The expert-parallel choice the layouts on these GPUs follow: the user's, or never
        where vLLM cannot run it on them (ModelSpec.expert_parallel_for: the layouts TP alone
        can shard, without the flag)."""
        return False if self.ep_refused(gpu_id) else self.req.expert_parallel

    def best_for(self, inst: InstanceType, usd: float) -> tuple[Recommendation | None, Rejection]:
        asked = self.ep_asked(inst.gpu.model)
        plans = layouts(self.spec, inst, self.cat, expert_parallel=asked)
        fitting = [(p, self._fit(inst.gpu.model, p.tp, p.pp)) for p in plans]
        fitting_ok = [(p, f) for p, f in fitting if f.fits]
        if not fitting_ok:  # a model too big for one TP group: try pipeline stages
            staged = [(p, self._fit(inst.gpu.model, p.tp, p.pp))
                      for p in layouts(self.spec, inst, self.cat, with_pp=True,
                                       expert_parallel=asked) if p.pp > 1]
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
        candidates: list[tuple[tuple[float, float, float], Plan, MemoryFit, PerfEstimate]] = []
        limit_miss = ""
        gbps = inst.fabric.gbps if inst.fabric else None
        for plan, f in fitting_ok:
            link = self.link_bytes_s(inst, plan)
            kind, _ = hostmod.regime(inst, plan.nodes, self.req.cpu_offload_gib)
            weight = hostmod.numa_weight(kind, plan.alignment, plan.nodes)
            for c in self.concurrency_options(f):
                perf = self._perf(inst.gpu.model, plan.tp, plan.pp, c, plan.nodes,
                                  gbps if plan.nodes > 1 else None, link)
                if self.cons.max_tpot_ms and perf.tpot_ms > self.cons.max_tpot_ms:
                    if not limit_miss or c == 1:
                        limit_miss = (f"TPOT {perf.tpot_ms:.1f} ms > {self.cons.max_tpot_ms:g} "
                                      f"ms ({self.target_source}) at {c} sequence(s)")
                    continue
                if self.cons.max_ttft_ms and perf.ttft_ms > self.cons.max_ttft_ms:
                    if not limit_miss or c == 1:
                        limit_miss = (f"TTFT {perf.ttft_ms:.0f} ms > {self.cons.max_ttft_ms:g} "
                                      f"ms ({self.target_source}) at {c} sequence(s)")
                    continue
                fig, usd_m, _ = self.figure(inst, usd, plan, perf)
                tps = perf.output_tokens_per_s * plan.replicas
                candidates.append(((fig * (1 + weight), usd_m, -tps), plan, f, perf))
        if not candidates:
            return None, Rejection(provider=inst.provider, instance=inst.name,
                                   by="--max-tpot-ms" if "TPOT" in limit_miss else "--max-ttft-ms",
                                   reason=(limit_miss or "no layout meets the latency targets")
                                   + "; --batch drops the targets")
        _, plan, f, perf = min(candidates, key=lambda x: x[0])
        return self.recommendation(inst, usd, plan, f, perf), Rejection(
            provider=inst.provider, instance=inst.name, reason="")

    @property
    def target_source(self) -> str:
        t = self.req.targets
        return t.source if t else "--max-tpot-ms / --max-ttft-ms"

    def multi_node(self, inst: InstanceType) -> tuple[tuple[Plan, MemoryFit] | None, str]:
        """The fewest identical instances (TP = the GPUs of one, PP = instances) that hold the
        model — only over an inter-node fabric the catalog records; else why not, in words."""
        sizes = tp_sizes(self.spec, inst.gpu.count, self.ep_asked(inst.gpu.model))
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
            return (place_multi(inst, self.cat, tp, nodes, f.expert_parallel), f), ""
        return None, ""

    def figure(self, inst: InstanceType, usd: float, plan: Plan, perf: PerfEstimate
               ) -> tuple[float, float, FleetSize | None]:
        """(the question's figure, $ per million output tokens, the fleet for the load)."""
        req = self.req
        tps = perf.output_tokens_per_s * plan.replicas  # one instance, or one multi-node replica
        usd_replica = usd * plan.nodes
        fleet = None
        if req.rps is not None or req.concurrency is not None:
            fleet = size_fleet(rps=req.rps, users=req.concurrency,
                               rps_per_replica=perf.requests_per_s,
                               users_per_replica=perf.concurrency,
                               replicas_per_instance=plan.replicas, nodes=plan.nodes,
                               usd_per_hour=usd, utilisation=req.utilisation,
                               spare=req.spare)
            # the tokens the load asks for, not the fleet's capacity
            if req.rps is not None:
                asked = req.rps * req.output_len
            else:
                assert req.concurrency is not None
                asked = perf.output_tokens_per_s * req.concurrency / perf.concurrency
            usd_m = fleet.usd_per_hour_total / (asked * 3600) * 1e6 if asked > 0 else math.inf
        else:
            used = tps * req.utilisation
            usd_m = usd_replica / (used * 3600) * 1e6 if used > 0 else math.inf
        if req.objective == "latency":
            return perf.tpot_ms, usd_m, fleet
        if req.objective == "throughput":
            return 1e6 / max(tps, 1e-9), usd_m, fleet
        if fleet is not None:
            return fleet.usd_per_month, usd_m, fleet
        return (usd_m if req.batch else usd_replica), usd_m, fleet

    def basis(self) -> Basis:
        """The same for every recommendation of this ranking: made once and shared."""
        if self._basis is None:
            self._basis = self._make_basis()
        return self._basis

    def _make_basis(self) -> Basis:
        req = self.req
        q = req.question
        t = req.targets or Targets(tpot_ms=self.cons.max_tpot_ms, ttft_ms=self.cons.max_ttft_ms,
                                   source="--max-tpot-ms / --max-ttft-ms")
        within = "within the targets" if (t.tpot_ms or t.ttft_ms) else "with no latency target"
        rule = (f"the most sequences per replica {within} (powers of two up to what the KV "
                "cache holds)")
        if q == "fleet-for-rps":
            at = f"the stated load, {req.rps:g} req/s x {req.output_len} output tokens"
        elif q == "fleet-for-users":
            at = (f"the stated load, {req.concurrency} users in flight, each at the replica's "
                  "per-sequence rate")
        else:
            at = (f"{req.utilisation:.0%} of the throughput at the most sequences per replica "
                  f"{within}")
        figure = {"latency": "TPOT", "throughput": "1 / output tokens per second"}.get(
            req.objective, {"fleet-for-rps": "monthly bill", "fleet-for-users": "monthly bill",
                            "batch": "$ per million output tokens"}.get(q, "$/h of one replica"))
        return Basis(question=q, targets=t, concurrency_rule=rule, utilisation=req.utilisation,
                     usd_per_million_at=at, score=f"{figure} x (1 + host NUMA weight)")

    def _codename(self, inst: InstanceType) -> str | None:
        cpu = self.cat.cpus.get(inst.cpu.model) if inst.cpu.model else None
        return cpu.codename if cpu else inst.cpu.codename

    def recommendation(self, inst: InstanceType, usd: float, plan: Plan, f: MemoryFit,
                       perf: PerfEstimate) -> Recommendation:
        tps = perf.output_tokens_per_s * plan.replicas
        fig, usd_m, fleet = self.figure(inst, usd, plan, perf)
        bw = plan.replica_layout[0].host_memory_bandwidth_gb_s
        per_gpu = bw / (plan.tp * plan.pp) if bw else None
        hv = hostmod.view(inst, plan.nodes, self.req.cpu_offload_gib, plan.alignment, per_gpu)
        score = fig * (1 + hv.numa_weight)
        reasons: list[str] = []
        risks: list[str] = []
        cpu = self.cat.cpus.get(inst.cpu.model) if inst.cpu.model else None
        family = cpu.family if cpu else self.cat.family_of_codename(inst.cpu.codename)
        t = self.req.targets
        q = self.req.question
        if q == "cheapest-within-targets" and self.req.objective == "cost":
            reasons.append(f"${usd * plan.nodes:.2f}/h serves it within the targets: "
                           f"{t.source if t else 'the given limits'}")
        if fleet is not None:
            unit = "req/s" if fleet.load == "rps" else "users"
            reasons.append(f"{fleet.instances} instance(s), {fleet.replicas} replica(s) at "
                           f"{fleet.per_replica:g} {unit} each carry {fleet.demand:g} {unit}: "
                           f"${fleet.usd_per_month:,.0f}/month, {fleet.headroom:+.0%} spare")
        per_replica_seqs = f.sequences_held(self.req.ctx)
        reasons.append(f"fits {f.max_concurrency:.1f} concurrent {self.req.ctx}-token "
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
                         f"the replica (+{hv.numa_weight:.0%} weight: its GPUs span the NUMA "
                         "nodes of several hosts)")
        else:
            reasons.append(f"{plan.replicas} replica(s) of TP {plan.tp}"
                           + (f" x PP {plan.pp}" if plan.pp > 1 else "")
                           + f": {tps:,.0f} output tok/s at {perf.concurrency} sequences each "
                           f"(TPOT {perf.tpot_ms:.1f} ms, TTFT {perf.ttft_ms:.0f} ms)")
        if plan.expert_parallel and self.spec.moe is not None:
            why = self.spec.tp_problem(plan.tp)
            reasons.append(f"expert parallel (--enable-expert-parallel, rendered): "
                           f"{self.spec.experts_per_gpu(plan.tp)} of the "
                           f"{self.spec.moe.num_experts} experts whole on each GPU, "
                           + (f"since {why}" if why else "as asked (--expert-parallel)"))
        elif self.req.expert_parallel and plan.tp > 1 and (no := self.ep_refused(inst.gpu.model)):
            risks.append(f"--expert-parallel not used here: {no}")
        reasons.append(f"{hv.physical_cores} physical cores for {inst.gpu.count} GPU(s) "
                       f"(vLLM's floor: {hv.cpu_floor_cores})" if hv.meets_cpu_floor else "")
        if not hv.meets_cpu_floor:
            risks.append(hostmod.floor_shortfall(inst) or "below vLLM's CPU floor")
        r0 = plan.replica_layout[0]
        regime = f"{hv.regime} regime: {hv.regime_why}"
        if plan.alignment == "aligned":
            reasons.append(f"GPUs {_gpu_list(r0.gpus)} and the replica's cores share NUMA node "
                           f"{r0.numa_nodes[0] if r0.numa_nodes else '?'} ({hv.regime})")
        elif plan.alignment == "spans-nodes":
            risks.append(f"replica GPUs {_gpu_list(r0.gpus)} span NUMA nodes {r0.numa_nodes}: "
                         f"+{hv.numa_weight:.0%} weight, {regime}")
        else:
            risks.append("GPU-to-NUMA placement not published for this VM: "
                         + (f"+{hv.numa_weight:.0%} weight, {regime}" if hv.numa_weight else
                            f"no weight in the {hv.regime} regime (measured 0-2%)"))
        if per_gpu is not None:
            line = f"{per_gpu:.0f} GB/s of host memory bandwidth per GPU"
            (risks if per_gpu < 25 and hv.regime == "host-heavy" else reasons).append(line)
        elif hv.regime == "host-heavy":
            risks.append("host memory bandwidth per GPU not known, and this plan leans on it")
        codename = self._codename(inst)
        if codename is not None and codename.lower() in OLD_CPU_CODENAMES:
            # shown, never weighted: no public measurement ties it to vLLM's speed (issue 15)
            risks.append(f"host CPU is an older generation ({codename})")
        price_kind = "spot" if self.cons.spot else "on-demand"
        row = self.price_row(inst)
        reasons.append(f"{price_kind} price from {row.as_of}, {row.region}")
        if self.cons.spot:
            risks.append("spot capacity can be reclaimed at short notice")
        ok, why = deployable(inst, self.cat)
        if not ok:
            # listed for its figures, ranked after every deployable offer (see rank())
            risks.insert(0, f"not deployable by advisor: {why}")
        if self.arch_risk:
            risks.insert(0, self.arch_risk)
        return Recommendation(
            provider=inst.provider, instance=inst.name, region=row.region,
            usd_per_hour=usd, price_kind=price_kind,
            price_as_of=str(row.as_of) if row.as_of else None,
            gpu=inst.gpu.model, gpu_count=inst.gpu.count, plan=plan, fit=f, perf=perf,
            instance_output_tokens_per_s=round(tps, 1),
            usd_per_million_output_tokens=round(usd_m, 4),
            numa=NumaView(alignment=plan.alignment, gpu_nodes=inst.numa.gpu_nodes,
                          nodes=inst.numa.nodes),
            cpu_family=family,
            score=round(score, 6), reasons=[r for r in reasons if r], risks=risks, host=hv,
            basis=self.basis(), fleet=fleet, confidence=self.confidence(f, perf),
            deployable=ok, not_deployable_reason=why)

    def confidence(self, f: MemoryFit, perf: PerfEstimate) -> Confidence | None:
        parts = tuple(c for c in (f.confidence, perf.confidence) if c is not None)
        if not parts:
            return None
        key = (id(f.confidence), id(perf.confidence))
        if key not in self._confidence:
            self._confidence[key] = combine(*parts)
        return self._confidence[key]


def rank(catalog: Catalog, spec: ModelSpec, req: Request, cons: Constraints,
         engine: EngineProfile, instances: list[InstanceType] | None = None
         ) -> tuple[list[Recommendation], list[Rejection]]:
    """All fitting offers, best first, and why each other one was left out."""
    check_context(req.input_len, req.output_len, req.ctx)
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
    # the first pick must be one `advisor provision` can launch: deployable offers first, by
    # score; the others (AMD: no ROCm path, advisor.core.deploy) after them, marked, so that a
    # capacity planner still sees what they would cost
    recs.sort(key=order)
    return recs, rejected


def order(r: Recommendation) -> tuple[bool, float, int, float, float, str, str]:
    """The ranking's order: deployable first, then by score; at an equal score fewer instances
    per replica first (a replica over several runs on a Ray cluster and stops when any of them
    is lost: its risk line says so), then $ per million tokens, $/h and the name."""
    return (not r.deployable, r.score, r.plan.nodes, r.usd_per_million_output_tokens,
            r.usd_per_hour, r.provider, r.instance)


def hint_for(by: str) -> str:
    """What to do about an instance the ranking excluded, by what excluded it."""
    return {"host floor": "pass --allow-small-host to use it anyway, or pick a larger size",
            "retired": "pick a current type: 'advisor recommend' ranks only those",
            "--max-tpot-ms": "relax --max-tpot-ms, or --batch for offline work without targets",
            "--max-ttft-ms": "relax --max-ttft-ms, or --batch for offline work without targets",
            }.get(by, "'advisor recommend --show-rejected' says why")


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
    upcast = any(r.by == "float32 only" for r in constraint)
    return UserInputError("no instance can serve this request: " + " | ".join(parts),
                          hint="relax a constraint, shorten --ctx, or use --kv-cache-dtype fp8; "
                          + ("float32 only: GPUs without bfloat16 (before Ampere) would run "
                             "this model in float32, so pick an Ampere or newer GPU; "
                             if upcast else "")
                          + "--show-rejected lists every instance with its reason")
