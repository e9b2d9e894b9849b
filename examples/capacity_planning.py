"""Capacity planning: what does it cost to serve three models at a given load, per provider?

    python examples/capacity_planning.py [--rps 20] [--ctx 8192]

For each model and each provider it takes advisor's ten cheapest fitting instances (by $ per
million output tokens, TPOT under 60 ms), works out how many of each carry the target request
rate at its modelled throughput, and keeps the smallest monthly bill. Everything is offline:
the bundled catalog and advisor's sizing and performance model.
"""

from __future__ import annotations

import argparse
import math
import sys

import advisor

MODELS = ["llama-3-8b", "qwen3-32b", "llama-3.3-70b"]
HOURS_PER_MONTH = 730


def plan(model: str, provider: str, rps: float, ctx: int) -> dict[str, object] | None:
    try:
        recs = advisor.recommend(model, ctx, providers=[provider], max_tpot_ms=60, top=10)
    except advisor.UserInputError:
        return None  # nothing this provider offers can serve it under the limits

    def count(r: advisor.Recommendation) -> int:
        return max(1, math.ceil(rps / (r.perf.requests_per_s * r.plan.replicas)))

    best = min(recs, key=lambda r: count(r) * r.usd_per_hour)
    instances = count(best)
    return {"model": model, "provider": provider, "instance": best.instance,
            "layout": f"{best.plan.replicas}x TP{best.plan.tp}", "instances": instances,
            "usd_per_month": round(instances * best.usd_per_hour * HOURS_PER_MONTH),
            "tpot_ms": best.perf.tpot_ms, "numa": best.numa.alignment}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rps", type=float, default=20.0, help="requests per second per model")
    parser.add_argument("--ctx", type=int, default=8192, help="max_model_len")
    args = parser.parse_args(argv)
    cat = advisor.load_catalog()
    print(f"{'model':16} {'provider':8} {'instance':28} {'layout':9} {'n':>3} "
          f"{'$/month':>10} {'TPOT ms':>8} NUMA")
    total = 0
    for model in MODELS:
        rows = [r for p in cat.providers() if (r := plan(model, p, args.rps, args.ctx))]
        for r in sorted(rows, key=lambda r: r["usd_per_month"]):  # type: ignore[arg-type,return-value]
            print(f"{r['model']:16} {r['provider']:8} {r['instance']:28} {r['layout']:9} "
                  f"{r['instances']:>3} {r['usd_per_month']:>10,} {r['tpot_ms']:>8.1f} "
                  f"{r['numa']}")
        if rows:
            total += min(int(r["usd_per_month"]) for r in rows)  # type: ignore[call-overload]
    print(f"cheapest mix for all three models at {args.rps:g} req/s each: ${total:,}/month")
    return 0


if __name__ == "__main__":
    sys.exit(main())
