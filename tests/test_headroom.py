"""Headroom a planner asks for (issue 30, part): a fleet for a load is sized to load each replica
to at most --utilisation U of what it carries within the targets (capacity >= load / U), plus
--spare N replicas; plan and recommend size the same fleet for the same question."""

from __future__ import annotations

import json

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
