"""Capacity planning: what does it cost to serve four models at a given load, per provider?

    python examples/capacity_planning.py [--rps 20] [--ctx 8192]

For each model and each provider it asks advisor.fleet() for the fleets that carry the target
request rate with TPOT under 60 ms (every fitting instance type, sized from its modelled
throughput; a replica may span several instances over EFA / InfiniBand / GPUDirect) and keeps
the smallest monthly bill. Everything is offline: the bundled catalog and advisor's sizing and
performance model.
"""

from __future__ import annotations

import argparse
import sys

import advisor

MODELS = ["llama-3-8b", "qwen3-32b", "llama-3.3-70b", "llama-3.1-405b"]


def plan(model: str, provider: str, rps: float, ctx: int) -> dict[str, object] | None:
    try:
        # advisor.fleet sizes every fitting offer for the load (TPOT under 60 ms) and returns
        # them cheapest monthly bill first; a replica may span instances (PP across nodes)
        options = advisor.fleet(model, ctx, rps=rps, providers=[provider], max_tpot_ms=60,
                                max_instances=256)
    except advisor.UserInputError:
        return None  # nothing this provider offers can serve it under the limits
    best = options[0]
    p = best.plan
    layout = (f"{p.nodes}n TP{p.tp}xPP{p.pp}" if p.nodes > 1 else f"{p.replicas}x TP{p.tp}")
    return {"model": model, "provider": provider, "instance": best.instance,
            "layout": layout, "instances": best.instances,
            "usd_per_month": round(best.usd_per_month), "tpot_ms": best.tpot_ms,
            "numa": best.numa}


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
    print(f"cheapest mix for all four models at {args.rps:g} req/s each: ${total:,}/month")
    return 0


if __name__ == "__main__":
    sys.exit(main())
