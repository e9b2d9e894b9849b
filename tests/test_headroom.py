"""Headroom a planner asks for (issue 30, part): a fleet for a load is sized to load each replica
to at most --utilisation U of what it carries within the targets (capacity >= load / U), plus
--spare N replicas; plan and recommend size the same fleet for the same question."""

from __future__ import annotations

import json
import math

import pytest

import advisor
from advisor.core.load import size_fleet


def test_size_fleet_by_hand():
    # 50 req/s, 10.5 per replica, at most 70% each: ceil(50 / 7.35) = 7 replicas, +1 spare = 8;
    # two replicas per instance: 4 instances
    fs = size_fleet(rps=50, users=None, rps_per_replica=10.5, users_per_replica=64,
                    replicas_per_instance=2, nodes=1, usd_per_hour=2.0, utilisation=0.7,
                    spare=1)
    assert (fs.replicas, fs.instances, fs.capacity) == (8, 4, 84.0)
    assert fs.headroom == pytest.approx(84 / 50 - 1, abs=1e-4)
    assert (fs.utilisation, fs.spare) == (0.7, 1)
    none = size_fleet(rps=50, users=None, rps_per_replica=10.5, users_per_replica=64,
                      replicas_per_instance=2, nodes=1, usd_per_hour=2.0)
    assert (none.replicas, none.instances) == (6, 3)  # ceil(50 / 10.5) = 5, packed in 3 x 2
    with pytest.raises(ValueError):
        size_fleet(rps=50, users=None, rps_per_replica=10.5, users_per_replica=64,
                   replicas_per_instance=1, nodes=1, usd_per_hour=1.0, utilisation=0)


def test_plan_at_70_percent_has_the_capacity_and_recommend_agrees():
    opts = advisor.fleet("llama-3-8b", 8192, rps=50, utilisation=0.7)
    assert opts and all(o.capacity_rps >= 50 / 0.7 - 1e-6 for o in opts)
    assert all(o.utilisation == 0.7 and o.spare == 0 for o in opts)
    recs = advisor.recommend("llama-3-8b", 8192, rps=50, utilisation=0.7, top=3)
    first = recs[0]
    assert first.fleet is not None and first.fleet.capacity >= 50 / 0.7 - 1e-6
    assert (first.provider, first.instance, first.fleet.instances) == \
           (opts[0].provider, opts[0].instance, opts[0].instances)
    # the utilisation changes the answer: at 100% the same offer needs fewer instances
    full = {(o.provider, o.instance): o for o in advisor.fleet("llama-3-8b", 8192, rps=50)}
    same = full[(opts[0].provider, opts[0].instance)]
    assert same.instances < opts[0].instances
    assert same.capacity_rps < 50 / 0.7  # ... and it would not hold the 70% line


def test_spare_replicas_come_on_top():
    base = {(o.provider, o.instance): o for o in advisor.fleet("llama-3-8b", 8192, rps=20)}
    spared = advisor.fleet("llama-3-8b", 8192, rps=20, spare=2)
    one_per = [o for o in spared if o.replicas_per_instance == 1]
    assert one_per
    for o in one_per[:5]:
        assert o.replicas == base[(o.provider, o.instance)].replicas + 2 and o.spare == 2


def test_the_cli_states_how_the_fleet_was_sized(cli):
    r = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "50",
            "--utilisation", "0.7", "--spare", "1", "--top", "2")
    assert r.exit_code == 0, r.output
    said = " ".join(r.stdout.split())  # the caption wraps at the terminal's width
    assert "at most 70% of what it carries within the targets, plus 1 spare replica" in said
    j = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "50",
            "--utilisation", "0.7", "--json")
    body = json.loads(j.stdout)
    assert all(o["utilisation"] == 0.7 and o["capacity_rps"] >= 50 / 0.7 - 1e-6 for o in body)
    bad = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "50",
              "--utilisation", "0")
    assert bad.exit_code == 2 and "--utilisation" in bad.stderr


@pytest.mark.parametrize(("args", "says", "suggests"), [
    (["--region", "mars-1"], "no instance type of aws, azure, gcp is priced in region 'mars-1'",
     None),
    (["--region", "eu-west-1", "--provider", "gcp"], "'eu-west-1' is a region of aws, not of gcp",
     "europe-west1"),
    (["--region", "eu-west1", "--provider", "gcp"], "no instance type of gcp is priced in region",
     "europe-west1"),
    (["--region", "us-east-2", "--region", "useast1"], "'useast1'", "us-east1"),
])
def test_a_mistyped_region_is_named_not_blamed_on_the_context(cli, args, says, suggests):
    """Issue 30: an unknown region, or another cloud's, is said as such with the closest names
    (it was 'shorten --ctx, or use --kv-cache-dtype fp8'); plan takes the same check."""
    for cmd in (["recommend"], ["plan", "--rps", "5"]):
        r = cli(*cmd, "--model", "llama-3-8b", "--ctx", "8192", *args)
        line = " ".join(r.stderr.split())
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert says in line and "--ctx" not in line, line
        if suggests:
            assert suggests in line.split("did you mean", 1)[1], line


# --- value beside price: the load from which another offer is the cheaper fleet (issue 30) ----

from advisor.core.load import crossover  # noqa: E402


def test_crossover_by_hand():
    # A: 10 req/s for $1/h; B: 25 req/s for $2.40/h (cheaper per request: 0.096 < 0.1 $/h per
    # req/s). Up to 10 req/s A costs 1 < 2.4; up to 20, 2 < 2.4; above 20 A needs 3 ($3/h)
    # and B still one ($2.40/h): B is cheaper above 20 req/s, $1,752 against $2,190 a month.
    assert crossover((10, 1, 1, 1.0), (25, 1, 1, 2.4)) == (20.0, 1752.0, 2190.0)
    # two replicas of 5 req/s per instance is the same block as one of 10
    assert crossover((5, 2, 1, 1.0), (25, 1, 1, 2.4)) == (20.0, 1752.0, 2190.0)
    # a replica over 2 instances of $1.10/h: a block of 25 req/s for $2.20/h, cheaper sooner
    assert crossover((10, 1, 1, 1.0), (25, 1, 2, 1.1))[0] == 20.0
    # not cheaper per request: never
    assert crossover((10, 1, 1, 1.0), (25, 1, 1, 2.5)) is None


@pytest.mark.parametrize("seed", range(40))
def test_crossover_is_the_first_load_where_the_other_bill_is_lower(seed):
    import random

    rnd = random.Random(seed)
    a = (round(rnd.uniform(0.2, 20), 3), rnd.choice([1, 2, 4]), 1, round(rnd.uniform(0.5, 30), 2))
    b = (round(rnd.uniform(0.2, 20), 3), rnd.choice([1, 2, 4]), rnd.choice([1, 2]),
         round(rnd.uniform(0.5, 30), 2))

    def bill(s, r):
        cap, usd = (s[0] * s[1], s[3]) if s[2] == 1 else (s[0], s[3] * s[2])
        return max(1, math.ceil(r / cap - 1e-9)) * usd

    x = crossover(a, b)
    grid = [i / 200 for i in range(1, 200 * 200)]
    first = next((r for r in grid if bill(b, r) < bill(a, r) - 1e-9), None)
    cheaper = (b[3] * (b[2] if b[2] > 1 else 1)) / (b[0] * (b[1] if b[2] == 1 else 1)) < \
        a[3] / (a[0] * a[1])
    if x is None:
        assert not cheaper or first is None or first > 200 - 1
    else:
        assert first is not None and x[0] < first <= x[0] + 0.005 + 1e-9


def test_the_default_answer_names_where_a_per_token_cheaper_offer_wins(cli):
    recs = advisor.recommend("llama-3-8b", 8192, top=10)
    first = recs[0]
    crossing = [r for r in recs[1:] if r.crossover is not None]
    assert crossing and all(r.crossover.versus == f"{first.provider}:{first.instance}"
                            for r in crossing)
    for r in crossing:  # cheaper per request than the first pick, as the table's $/1M says
        assert r.usd_per_million_output_tokens < first.usd_per_million_output_tokens
        assert r.crossover.usd_per_month < r.crossover.versus_usd_per_month
    assert first.crossover is None
    # a load question has no crossover: it is answered by fleets already
    assert all(r.crossover is None for r in advisor.recommend("llama-3-8b", 8192, rps=5, top=5))
    r = cli("recommend", "--model", "llama-3-8b", "--ctx", "8192", "--top", "10")
    said = " ".join(r.stdout.split())
    x = min((c for c in crossing), key=lambda c: c.crossover.rps)
    assert f"is the cheaper fleet: ${x.crossover.usd_per_month:,.0f}/month" in said
    j = json.loads(cli("recommend", "--model", "llama-3-8b", "--ctx", "8192", "--top", "10",
                       "--json").stdout)
    assert any(d["crossover"] and d["crossover"]["rps"] > 0 for d in j)


def test_the_default_answer_names_the_first_unlisted_offer_cheaper_per_request():
    """llama-3.1-70b: the first pick is the cheapest instance per hour; an offer that is
    cheaper per request but ranks below the listed five is still named, with its crossover
    and the --top that lists it."""
    import re

    from typer.testing import CliRunner

    from advisor.cli import app

    recs = advisor.recommend("llama-3.1-70b", 8192)
    below = [r for r in recs[5:] if r.crossover is not None and r.deployable]
    first = min(below, key=lambda r: r.crossover.rps)
    assert first.usd_per_million_output_tokens < recs[0].usd_per_million_output_tokens
    out = CliRunner().invoke(app, ["recommend", "--model", "llama-3.1-70b", "--ctx", "8192"],
                             env={"COLUMNS": "250"}).output
    rank = recs.index(first) + 1
    line = next(ln for ln in out.splitlines() if f"{first.provider}:{first.instance} (" in ln)
    assert f"--top {rank} lists it" in line
    assert re.search(rf"Above {first.crossover.rps:.3g} req/s", line)
    assert f"${first.crossover.usd_per_month:,.0f}/month" in line
