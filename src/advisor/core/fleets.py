"""Fleet sizing: how many instances carry a request rate within the latency limits. Pure.

For every ranked offer (the ranking already picks, per instance, the layout and the
concurrency with the best $ per token under ``--max-tpot-ms`` / ``--max-ttft-ms``), one replica
serves ``perf.requests_per_s``; a request rate ``R`` needs ``ceil(R / rps_per_replica)``
replicas, packed ``replicas_per_instance`` to an instance — or, for a replica that spans ``n``
instances (pipeline parallel across nodes), ``n`` instances each. The monthly cost is instances
x $/h x 730 h; the headroom is the fleet's capacity over ``R``, minus one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from advisor.core.deploy import HINT as DEPLOY_HINT
from advisor.core.layouts import Plan
from advisor.core.load import HOURS_PER_MONTH, size_fleet
from advisor.core.ranking import Recommendation
from advisor.core.weights import Weights
from advisor.errors import UserInputError

__all__ = ["HOURS_PER_MONTH", "FleetMiss", "FleetOption", "plan_fleet", "size"]


class FleetOption(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance: str
    region: str | None
    usd_per_hour: float
    price_kind: str
    gpu: str
    gpu_count: int
    plan: Plan
    #: instances one replica spans (1: a replica lives on one instance)
    nodes_per_replica: int
    replicas_per_instance: int
    concurrency_per_replica: int
    rps_per_replica: float
    replicas: int
    instances: int
    capacity_rps: float
    headroom: float
    #: what the fleet was sized for: at most this share of each replica's in-target load,
    #: and this many replicas beyond the load
    utilisation: float = 1.0
    spare: int = 0
    usd_per_hour_total: float
    usd_per_month: float
    tpot_ms: float
    ttft_ms: float
    numa: str
    risks: list[str]
    #: the weights the fleet serves (--quantization); None: the checkpoint as published
    weights: Weights | None = None


class FleetMiss(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance: str
    reason: str
    instances_needed: int | None = None


def size(rec: Recommendation, rps: float, utilisation: float = 1.0,
         spare: int = 0) -> FleetOption:
    if rec.perf.requests_per_s <= 0:
        raise UserInputError(f"{rec.provider}:{rec.instance} serves no requests at this load")
    fs = rec.fleet  # the ranking sized it already when it was asked for this rate
    if (fs is None or fs.load != "rps" or fs.demand != rps or fs.utilisation != utilisation
            or fs.spare != spare):
        fs = size_fleet(rps=rps, users=None, rps_per_replica=rec.perf.requests_per_s,
                        users_per_replica=rec.perf.concurrency,
                        replicas_per_instance=rec.plan.replicas, nodes=rec.plan.nodes,
                        usd_per_hour=rec.usd_per_hour, utilisation=utilisation, spare=spare)
    nodes = rec.plan.nodes
    return FleetOption(
        weights=rec.weights,
        provider=rec.provider, instance=rec.instance, region=rec.region,
        usd_per_hour=rec.usd_per_hour, price_kind=rec.price_kind, gpu=rec.gpu,
        gpu_count=rec.gpu_count, plan=rec.plan, nodes_per_replica=nodes,
        replicas_per_instance=0 if nodes > 1 else rec.plan.replicas,
        concurrency_per_replica=rec.perf.concurrency,
        rps_per_replica=rec.perf.requests_per_s, replicas=fs.replicas, instances=fs.instances,
        capacity_rps=fs.capacity, headroom=fs.headroom, utilisation=fs.utilisation,
        spare=fs.spare,
        usd_per_hour_total=fs.usd_per_hour_total, usd_per_month=fs.usd_per_month,
        tpot_ms=rec.perf.tpot_ms, ttft_ms=rec.perf.ttft_ms, numa=rec.numa.alignment,
        risks=list(rec.risks))


def plan_fleet(recs: list[Recommendation], rps: float, max_instances: int,
               utilisation: float = 1.0, spare: int = 0
               ) -> tuple[list[FleetOption], list[FleetMiss]]:
    """Every offer sized for ``rps``, cheapest monthly bill first, and the ones that need more
    than ``max_instances`` or that advisor cannot deploy (:mod:`advisor.core.deploy`)."""
    if rps <= 0:
        raise UserInputError(f"--rps must be positive, not {rps}")
    options, misses = [], []
    for rec in recs:
        if not rec.deployable:
            # a fleet is what `advisor provision` launches: never one it cannot deploy
            misses.append(FleetMiss(provider=rec.provider, instance=rec.instance,
                                    reason=f"not deployable by advisor: "
                                    f"{rec.not_deployable_reason}"))
            continue
        opt = size(rec, rps, utilisation, spare)
        if opt.instances > max_instances:
            misses.append(FleetMiss(provider=rec.provider, instance=rec.instance,
                                    instances_needed=opt.instances,
                                    reason=f"needs {opt.instances} instances for {rps:g} req/s "
                                    f"(--max-instances {max_instances})"))
            continue
        options.append(opt)
    # at an equal bill and headroom (in whole percent, as the table shows it: a finer
    # difference is far inside the perf model's error), fewer instances per replica first: a
    # replica over several runs on a Ray cluster and stops when any of them is lost (as
    # ranking.order does)
    options.sort(key=lambda o: (o.usd_per_month, -round(o.headroom, 2), o.nodes_per_replica,
                                o.provider, o.instance))
    return options, misses


def explain_no_fleet(misses: list[FleetMiss], rps: float, max_instances: int) -> UserInputError:
    sized = [m for m in misses if m.instances_needed is not None]
    if not sized:  # every offer left is one advisor cannot deploy
        m = misses[0] if misses else None
        return UserInputError(
            f"no fleet advisor can deploy carries {rps:g} req/s"
            + (f": {m.provider}:{m.instance} is {m.reason}" if m else ""), hint=DEPLOY_HINT)
    closest = sorted(sized, key=lambda m: m.instances_needed or 0)[:3]
    return UserInputError(
        f"no fleet of at most {max_instances} instances carries {rps:g} req/s: closest "
        + "; ".join(f"{m.provider}:{m.instance} needs {m.instances_needed}" for m in closest),
        hint="raise --max-instances, relax --max-tpot-ms / --max-ttft-ms, or lower --rps")
