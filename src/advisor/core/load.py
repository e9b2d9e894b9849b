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
from typing import Literal

from pydantic import BaseModel, ConfigDict

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
