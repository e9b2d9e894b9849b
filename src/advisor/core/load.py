"""The question a recommendation answers: latency targets, the load, and the fleet it needs. Pure.

``advisor recommend`` answers one of three questions, and every figure it prints says which:

* **cheapest within the targets** (the default, no load given): the smallest $/h that serves
  the model with one replica (one instance, or one replica over several) at a TPOT and TTFT
  within the targets; $/1M output tokens is shown *at the stated utilisation* of the most load
  that still meets the targets.
* **fleet for a load** (``--rps`` requests/s or ``--concurrency`` users in flight): replicas
  at the most load per replica that meets the targets, whole instances, ranked by monthly bill.
* **batch** (``--batch``, no load): no latency targets; ranked by $/1M output tokens with every
  instance saturated (as many sequences as the KV cache holds), the offline-job economics.

The default targets are p50 figures (advisor's estimates are means, not tails):
:data:`DEFAULT_TPOT_MS` and :data:`DEFAULT_TTFT_MS`.
"""

from __future__ import annotations

import math
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # fleets.py builds on this module: its model is only named here
    from advisor.core.fleets import FleetOption

#: Default latency targets of the interactive question, p50. Anchored on MLPerf Inference's LLM
#: latency bounds (https://mlcommons.org/2025/04/llm-inference-v5/; Llama 2 70B "server": TTFT
#: <= 2 s and TPOT <= 200 ms at p99, "interactive": TTFT <= 450 ms and TPOT <= 40 ms at p99):
#: TTFT takes the server bound; TPOT 50 ms (20 tokens/s per stream, faster than people read)
#: sits next to the interactive bound, looser because it is a median, not a p99. A chosen
#: default, not a measurement: --max-tpot-ms / --max-ttft-ms set others, --batch drops them.
DEFAULT_TPOT_MS = 50.0
DEFAULT_TTFT_MS = 2000.0
HOURS_PER_MONTH = 730

QuestionKind = Literal["cheapest-within-targets", "fleet-for-rps", "fleet-for-users", "batch"]


class Targets(BaseModel):
    model_config = ConfigDict(frozen=True)
    tpot_ms: float | None
    ttft_ms: float | None
    #: where they come from: "default (interactive, p50)", "--max-tpot-ms", "none (--batch)"
    source: str


def targets(max_tpot_ms: float | None, max_ttft_ms: float | None, batch: bool) -> Targets:
    """The latency targets in force: the user's, else the interactive defaults (none in batch)."""
    given = [f"--max-{k}-ms" for k, v in (("tpot", max_tpot_ms), ("ttft", max_ttft_ms))
             if v is not None]
    if batch:
        return Targets(tpot_ms=max_tpot_ms, ttft_ms=max_ttft_ms,
                       source=" and ".join(given) if given else "none (--batch)")
    tpot = DEFAULT_TPOT_MS if max_tpot_ms is None else max_tpot_ms
    ttft = DEFAULT_TTFT_MS if max_ttft_ms is None else max_ttft_ms
    default = [f"{k} {v:g} ms" for k, v, mine in (("TPOT", tpot, max_tpot_ms),
                                                  ("TTFT", ttft, max_ttft_ms)) if mine is None]
    parts = given + ([f"default interactive p50 ({', '.join(default)})"] if default else [])
    return Targets(tpot_ms=tpot, ttft_ms=ttft, source="; ".join(parts))


def question(rps: float | None, users: int | None, batch: bool) -> QuestionKind:
    if rps is not None:
        return "fleet-for-rps"
    if users is not None:
        return "fleet-for-users"
    return "batch" if batch else "cheapest-within-targets"


class FleetSize(BaseModel):
    """Whole instances for a load: replicas at the per-replica load that meets the targets."""

    model_config = ConfigDict(frozen=True)
    load: Literal["rps", "users"]
    #: the load asked for (requests/s or users in flight)
    demand: float
    #: the load one replica carries within the targets
    per_replica: float
    replicas: int
    instances: int
    capacity: float
    #: capacity over demand, minus one
    headroom: float
    usd_per_hour_total: float
    usd_per_month: float
    #: the share of each replica's in-target load the fleet was sized to use (1: none spare)
    utilisation: float = 1.0
    #: replicas added beyond the load, for failures (N + spare)
    spare: int = 0


def size_fleet(*, rps: float | None, users: int | None, rps_per_replica: float,
               users_per_replica: int, replicas_per_instance: int, nodes: int,
               usd_per_hour: float, utilisation: float = 1.0, spare: int = 0) -> FleetSize:
    """Replicas for the load (rounded up), packed into whole instances: ``replicas_per_instance``
    to an instance, or ``nodes`` instances each for a replica that spans several.

    ``utilisation`` U: each replica is loaded to at most U of what it carries within the
    targets, so the fleet's capacity is at least demand / U; ``spare`` replicas come on top
    (N + spare, for a replica lost to a failure or a deploy)."""
    if rps is not None:
        load: Literal["rps", "users"] = "rps"
        demand, per = float(rps), rps_per_replica
    elif users is not None:
        load, demand, per = "users", float(users), float(users_per_replica)
    else:
        raise ValueError("size_fleet needs rps or users")
    if per <= 0:
        raise ValueError("a replica that carries no load cannot be sized")
    if not 0 < utilisation <= 1 or spare < 0:
        raise ValueError("utilisation must be in (0, 1] and spare at least 0")
    replicas = max(1, math.ceil(demand / (per * utilisation) - 1e-9)) + spare
    if nodes > 1:
        instances = replicas * nodes
    else:
        instances = math.ceil(replicas / replicas_per_instance)
        replicas = instances * replicas_per_instance  # whole instances run all their replicas
    capacity = replicas * per
    total = instances * usd_per_hour
    return FleetSize(load=load, demand=demand, per_replica=round(per, 4), replicas=replicas,
                     instances=instances, capacity=round(capacity, 4),
                     headroom=round(capacity / demand - 1, 4),
                     usd_per_hour_total=round(total, 4),
                     usd_per_month=round(total * HOURS_PER_MONTH, 2),
                     utilisation=utilisation, spare=spare)


class Crossover(BaseModel):
    """The load from which an offer's fleet costs less than the first pick's fleet (both sized
    with whole instances, no headroom): where a planner's answer changes."""

    model_config = ConfigDict(frozen=True)
    #: PROVIDER:TYPE of the first pick it is compared with
    versus: str
    #: above this many requests/s this offer's fleet is the cheaper one
    rps: float
    #: both monthly bills just above that load: this offer's, the first pick's
    usd_per_month: float
    versus_usd_per_month: float


def _block(rps_per_replica: float, replicas_per_instance: int, nodes: int,
           usd_per_hour: float) -> tuple[float, float]:
    """(req/s, $/h) of the smallest unit a fleet buys: one instance with its replicas, or the
    ``nodes`` instances of one replica that spans several."""
    if nodes > 1:
        return rps_per_replica, usd_per_hour * nodes
    return rps_per_replica * replicas_per_instance, usd_per_hour


def crossover(first: tuple[float, int, int, float], other: tuple[float, int, int, float],
              max_rps: float = 1e6) -> tuple[float, float, float] | None:
    """(load, other's $/month, first's $/month) from which ``other`` (req/s per replica, replicas
    per instance, nodes per replica, $/h per instance) costs less than ``first`` — the smallest
    load where its whole-instance fleet is cheaper — or None when it never is per request
    (its $ per req/s of capacity is not lower) or not below ``max_rps``."""
    cap_a, usd_a = _block(*first)
    cap_b, usd_b = _block(*other)
    if cap_a <= 0 or cap_b <= 0 or usd_b / cap_b >= usd_a / cap_a:
        return None
    # both bills are steps that change just above multiples of a block's capacity: the first
    # interval where the other's step is lower starts at one of those multiples (or at 0)
    ka = kb = 0
    start = 0.0
    while start < max_rps:
        na = math.floor(start / cap_a + 1e-9) + 1  # blocks just above `start`
        nb = math.floor(start / cap_b + 1e-9) + 1
        if nb * usd_b < na * usd_a:
            return (round(float(start), 4), round(nb * usd_b * HOURS_PER_MONTH, 2),
                    round(na * usd_a * HOURS_PER_MONTH, 2))
        ka, kb = (ka + 1, kb) if (ka + 1) * cap_a <= (kb + 1) * cap_b else (ka, kb + 1)
        start = min((ka) * cap_a if ka else math.inf, (kb) * cap_b if kb else math.inf)
    return None


# -- the cost curve: the cheapest fleet across a range of loads (plan --rps-range) -------------

#: how many loads ``plan --rps-range`` samples unless told, and the most it will
DEFAULT_CURVE_POINTS = 16
MAX_CURVE_POINTS = 200
#: how many offers the curve draws unless told, and the most it will
DEFAULT_CURVE_LINES = 4
MAX_CURVE_LINES = 8


def curve_loads(rps_from: float, rps_to: float, points: int) -> list[float]:
    """``points`` loads from ``rps_from`` to ``rps_to``, both ends included, spaced evenly on a
    log scale (geometric), each inner one rounded to 4 significant figures; distinct, ascending.

    Log, not linear: a fleet's bill is a staircase whose treads are one instance's capacity
    wide, and the answer changes where one instance is a large share of the load — at low load
    (one small instance against one large) the cheapest offer changes every few req/s, while at
    many times that load the bills are close to proportional and the order settles on $ per
    req/s of capacity. Equal ratios between samples put as many of them between 0.5 and 5 req/s
    as between 5 and 50, where linear spacing over 0.5:40 would leave a single sample below
    3 req/s; one instance more also matters in proportion to the bill, which is what equal
    ratios measure. Over a narrow range (40:50) the two spacings differ by under 3%."""
    if points < 2 or not 0 < rps_from < rps_to:
        raise ValueError("curve_loads needs 0 < rps_from < rps_to and at least 2 points")
    ratio = rps_to / rps_from
    inner = [float(f"{rps_from * ratio ** (i / (points - 1)):.4g}") for i in range(1, points - 1)]
    return sorted({rps_from, *(x for x in inner if rps_from < x < rps_to), rps_to})


class CurveFleet(BaseModel):
    """One offer's fleet at one load of a cost curve."""

    model_config = ConfigDict(frozen=True)
    #: PROVIDER:TYPE
    option: str
    region: str | None
    instances: int
    replicas: int
    usd_per_month: float


class CurvePoint(BaseModel):
    """One load of the curve: the cheapest fleet there (as ``plan --rps`` puts first) and the
    next one."""

    model_config = ConfigDict(frozen=True)
    rps: float
    cheapest: CurveFleet
    next_best: CurveFleet | None
    #: how many offers have a fleet of at most ``max_instances`` for this load
    fleets: int


class CurveLine(BaseModel):
    """One offer drawn across the range: the smallest unit its fleets buy (from which its exact
    staircase follows: :func:`staircase`) and its bill at each of the curve's loads (None where
    it needs more than ``max_instances``)."""

    model_config = ConfigDict(frozen=True)
    option: str
    region: str | None
    gpu: str
    gpu_count: int
    tp: int
    pp: int
    #: replicas on one instance (0 for a replica that spans several instances)
    replicas_per_instance: int
    #: instances one replica spans
    nodes_per_replica: int
    #: the load one replica carries within the targets
    rps_per_replica: float
    usd_per_hour: float
    price_as_of: str | None
    usd_per_month: list[float | None]


class CurveCrossover(Crossover):
    """Between two drawn offers: above ``rps`` the fleet of ``option`` is the cheaper one."""

    model_config = ConfigDict(frozen=True)
    #: PROVIDER:TYPE that becomes the cheaper buy
    option: str
    #: whether the answer changes here: of the drawn offers, ``versus`` has the cheapest fleet
    #: just below ``rps`` and ``option`` just above (the chart labels these)
    pick_changes: bool = False


class CostCurve(BaseModel):
    """The cheapest fleet across a range of loads (``plan --rps-range``): at each load the fleet
    ``plan --rps`` puts first and the one after it, the few offers worth drawing, and where one
    of those offers' fleets becomes cheaper than another's."""

    model_config = ConfigDict(frozen=True)
    model: str
    ctx: int
    input_len: int
    output_len: int
    targets: Targets
    #: "on-demand" or "spot"
    price_kind: str
    #: the catalog's price dates of every offer the curve names, oldest first
    price_dates: list[str]
    utilisation: float
    spare: int
    max_instances: int
    #: how the loads are spaced (:func:`curve_loads`)
    spacing: Literal["log"] = "log"
    points: list[CurvePoint]
    lines: list[CurveLine]
    #: between every two drawn offers, the load inside the range from which one's fleet costs
    #: less than the other's (:func:`crossover`), lowest first; none when ``spare`` > 0 (a fixed
    #: number of replicas on top does not step with the load)
    crossovers: list[CurveCrossover]


def line_shape(line: CurveLine, utilisation: float = 1.0) -> tuple[float, int, int, float]:
    """A drawn offer as :func:`crossover` takes it; at a utilisation U each replica carries U of
    its in-target load, which is the same staircase as a replica that carries U x as much."""
    return (line.rps_per_replica * utilisation, max(1, line.replicas_per_instance),
            line.nodes_per_replica, line.usd_per_hour)


def curve_crossovers(lines: list[CurveLine], rps_from: float, rps_to: float,
                     utilisation: float = 1.0, spare: int = 0) -> list[CurveCrossover]:
    """For every two of ``lines``, the load in [rps_from, rps_to) from which the one cheaper per
    request becomes the cheaper fleet (:func:`crossover`: the first such load from zero, so one
    below the range is not shown), lowest first. None with ``spare`` replicas."""
    if spare:
        return []
    found: list[CurveCrossover] = []
    for i, a in enumerate(lines):
        for b in lines[i + 1:]:
            for first, other in ((a, b), (b, a)):
                x = crossover(line_shape(first, utilisation), line_shape(other, utilisation),
                              max_rps=rps_to)
                if x is not None and rps_from <= x[0] < rps_to:
                    found.append(CurveCrossover(
                        option=other.option, versus=first.option, rps=x[0],
                        usd_per_month=x[1], versus_usd_per_month=x[2],
                        pick_changes=_cheapest(lines, x[0] - 1e-4, utilisation) == first.option
                        and _cheapest(lines, x[0] + 1e-4, utilisation) == other.option))
    return sorted(found, key=lambda c: (c.rps, c.option, c.versus))


def _cheapest(lines: list[CurveLine], rps: float, utilisation: float) -> str | None:
    """The drawn offer with the cheapest fleet at ``rps`` (ties: the one listed first).
    :func:`crossover` rounds its load to 4 decimals, so its callers look 1e-4 either side."""
    if rps <= 0:
        return None
    bills = [(size_fleet(rps=rps, users=None, rps_per_replica=line.rps_per_replica,
                         users_per_replica=1,
                         replicas_per_instance=max(1, line.replicas_per_instance),
                         nodes=line.nodes_per_replica, usd_per_hour=line.usd_per_hour,
                         utilisation=utilisation).usd_per_month, i)
             for i, line in enumerate(lines)]
    return lines[min(bills)[1]].option


def staircase(line: CurveLine, rps_from: float, rps_to: float, utilisation: float = 1.0,
              spare: int = 0, max_steps: int = 2000) -> tuple[list[float], list[float]]:
    """The offer's monthly bill from ``rps_from`` to ``rps_to`` as a step plot draws it
    (``where="post"``: bill[i] holds from load[i] to load[i + 1]; the last pair closes the
    range): the bill changes only where the load passes a multiple of one replica's capacity,
    and each tread is priced by :func:`size_fleet`, as ``plan --rps`` prices it. With more than
    ``max_steps`` treads in the range (too narrow to see) it is sampled at ``max_steps`` loads
    spaced on a log scale instead."""
    per = line.rps_per_replica * utilisation
    if per <= 0:
        return [], []

    def bill(rps: float) -> float:
        return size_fleet(rps=rps, users=None, rps_per_replica=line.rps_per_replica,
                          users_per_replica=1,
                          replicas_per_instance=max(1, line.replicas_per_instance),
                          nodes=line.nodes_per_replica, usd_per_hour=line.usd_per_hour,
                          utilisation=utilisation, spare=spare).usd_per_month

    first, last = math.floor(rps_from / per) + 1, math.ceil(rps_to / per) - 1
    if last - first + 1 > max_steps:
        loads = curve_loads(rps_from, rps_to, max_steps)
        return loads, [bill(x) for x in loads]
    edges = [rps_from, *(k * per for k in range(first, last + 1)), rps_to]
    edges = sorted({e for e in edges if rps_from <= e <= rps_to})
    bills = [bill((lo + hi) / 2) for lo, hi in pairwise(edges)]  # each tread at its middle
    return edges, [*bills, bills[-1]]


def cost_curve(*, model: str, ctx: int, input_len: int, output_len: int, tg: Targets,
               price_kind: str, utilisation: float, spare: int, max_instances: int,
               loads: list[float], options: list[list[FleetOption]],
               price_as_of: dict[str, str | None], lines: int = DEFAULT_CURVE_LINES
               ) -> CostCurve:
    """The curve from the fleets ``plan --rps`` lists at each of ``loads`` (``options[i]``,
    cheapest first, each non-empty). The offers drawn: those cheapest at some load (most often
    first), then those ranked best over the whole range (the sum of their places; a load they
    cannot carry counts as last), ``lines`` in all, listed by the lowest load they lead at."""
    def key(o: FleetOption) -> str:
        return f"{o.provider}:{o.instance}"

    def fleet_at(o: FleetOption) -> CurveFleet:
        return CurveFleet(option=key(o), region=o.region, instances=o.instances,
                          replicas=o.replicas, usd_per_month=o.usd_per_month)

    points = [CurvePoint(rps=x, cheapest=fleet_at(opts[0]),
                         next_best=fleet_at(opts[1]) if len(opts) > 1 else None,
                         fleets=len(opts)) for x, opts in zip(loads, options, strict=True)]
    by_load = [{key(o): (rank, o) for rank, o in enumerate(opts)} for opts in options]
    every = {k for at in by_load for k in at}
    leads = {k: sum(p.cheapest.option == k for p in points) for k in every}
    places = {k: sum(at[k][0] if k in at else len(at) for at in by_load) for k in every}
    drawn = sorted(every, key=lambda k: (-leads[k], places[k], k))[:lines]
    first_lead = {k: next((i for i, p in enumerate(points) if p.cheapest.option == k),
                          len(points)) for k in drawn}
    drawn.sort(key=lambda k: (first_lead[k], places[k], k))
    curve_lines = []
    for k in drawn:
        o = next(at[k][1] for at in by_load if k in at)
        curve_lines.append(CurveLine(
            option=k, region=o.region, gpu=o.gpu, gpu_count=o.gpu_count, tp=o.plan.tp,
            pp=o.plan.pp, replicas_per_instance=o.replicas_per_instance,
            nodes_per_replica=o.nodes_per_replica, rps_per_replica=o.rps_per_replica,
            usd_per_hour=o.usd_per_hour, price_as_of=price_as_of.get(k),
            usd_per_month=[at[k][1].usd_per_month if k in at else None for at in by_load]))
    named = {p.cheapest.option for p in points} | {
        p.next_best.option for p in points if p.next_best} | set(drawn)
    dates = sorted({d for k in named if (d := price_as_of.get(k))})
    return CostCurve(model=model, ctx=ctx, input_len=input_len, output_len=output_len,
                     targets=tg, price_kind=price_kind, price_dates=dates,
                     utilisation=utilisation, spare=spare, max_instances=max_instances,
                     points=points, lines=curve_lines,
                     crossovers=curve_crossovers(curve_lines, loads[0], loads[-1],
                                                 utilisation, spare))
