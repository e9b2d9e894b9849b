"""The examples run, offline, and say something that can be checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_capacity_planning_example_runs_and_totals():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "capacity_planning.py"),
                        "--rps", "5"], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("model")
    body = lines[1:-1]
    assert {ln.split()[0] for ln in body} == {"llama-3-8b", "qwen3-32b", "llama-3.3-70b",
                                              "llama-3.1-405b"}
    assert lines[-1].startswith("cheapest mix") and "$" in lines[-1]
    # the total is the sum of each model's cheapest monthly bill
    cheapest: dict[str, int] = {}
    for ln in body:
        parts = ln.split()
        cost = int(parts[6].replace(",", ""))  # the layout "1x TP1" is two words
        cheapest[parts[0]] = min(cheapest.get(parts[0], cost), cost)
    total = int(lines[-1].split("$")[1].split("/")[0].replace(",", ""))
    assert total == sum(cheapest.values())
    # every row is the cheapest fleet advisor.fleet() finds for that model and provider
    import advisor

    for ln in body:
        model, provider, instance, *_ = ln.split()
        best = advisor.fleet(model, 8192, rps=5, providers=[provider], max_tpot_ms=60,
                             max_instances=256)[0]
        assert (best.instance, round(best.usd_per_month)) == (
            instance, int(ln.split()[6].replace(",", "")))
