"""Issue 31: retired types are kept for reference but never ranked, rendered or provisioned;
every price carries its source; catalog list takes --region, --sort and --spot."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest
from typer.testing import CliRunner

import advisor
from advisor.api import load_catalog
from advisor.cli import app

CAT = load_catalog()
NCV3 = ["azure:Standard_NC6s_v3", "azure:Standard_NC12s_v3", "azure:Standard_NC24s_v3",
        "azure:Standard_NC24rs_v3"]
RUN = CliRunner()


def test_ncv3_is_retired_from_its_cited_date():
    for key in NCV3:
        inst = CAT.instance(key)
        assert inst.available_until == dt.date(2025, 9, 30)
        assert "ncv3-nc6s-nc12s-nc24s-retirement" in inst.sources["available_until"].source
        assert inst.retired(dt.date(2025, 9, 29)) is None  # still sold the day before
        assert "retired by azure on 2025-09-30" in inst.retired(dt.date(2025, 9, 30))


@pytest.mark.parametrize("model", ["qwen3-8b", "llama-3-8b", "mistral-7b"])
def test_no_retired_type_in_any_recommend_output(model):
    recs, rejected = advisor.recommend(model, 8192, providers=["azure"], batch=True,
                                       with_rejected=True)
    ranked = {f"{r.provider}:{r.instance}" for r in recs}
    assert ranked and not ranked & set(NCV3)
    why = {f"{r.provider}:{r.instance}": r for r in rejected}
    assert all(why[k].by == "retired" for k in NCV3)


def test_a_retired_type_ranks_again_when_its_date_is_ahead():
    """The rule is the date, not a list: the same type with a future date is ranked."""
    later = {k: (CAT.instance(k).model_copy(update={"available_until": dt.date(2999, 1, 1)})
                 if k in NCV3 else v) for k, v in CAT.instances.items()}
    cat = dataclasses.replace(CAT, instances=later)
    recs = advisor.recommend("qwen3-8b", 8192, providers=["azure"], batch=True, catalog=cat,
                             top=None)
    assert {f"{r.provider}:{r.instance}" for r in recs} & set(NCV3)


@pytest.mark.parametrize("argv", [
    ["render", "--model", "qwen3-8b", "--ctx", "4096", "--instance", NCV3[0],
     "--api-key-ref", "azure-kv:myvault/vllm-key", "--out", "OUT"],
    ["provision", "--model", "qwen3-8b", "--ctx", "4096", "--instance", NCV3[0],
     "--api-key-ref", "azure-kv:myvault/vllm-key", "--dry-run"],
])
def test_render_and_provision_refuse_a_retired_type_in_one_line(argv, tmp_path):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    res = RUN.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert "retired by azure on 2025-09-30" in res.output and "Traceback" not in res.output
    assert "advisor recommend" in res.output  # the hint: pick a current type
    assert not (tmp_path / "out").exists()


def test_every_price_in_the_json_has_a_source():
    body = json.loads(RUN.invoke(app, ["catalog", "list", "--json"]).output)
    priced = [(v["provider"], v["name"], p) for v in body
              for p in [v["price"], *v["prices"].values()]
              if p["on_demand_usd_per_hour"] is not None]
    assert len(priced) > 1000
    assert all(p["source"] and p["source"].startswith("https://") for _, _, p in priced)


def test_catalog_list_region_sort_and_spot():
    body = json.loads(RUN.invoke(app, ["catalog", "list", "--region", "us-central1",
                                       "--sort", "price", "--json"]).output)
    prices = [v["listed_price"]["on_demand_usd_per_hour"] for v in body]
    assert body and all(v["listed_price"]["region"] == "us-central1" for v in body)
    assert prices == sorted(prices)
    assert {v["provider"] for v in body} == {"gcp"}
    spot = json.loads(RUN.invoke(app, ["catalog", "list", "--spot", "--sort", "price",
                                       "--region", "us-central1", "--json"]).output)
    assert spot and all(v["listed_price"]["spot_usd_per_hour"] is not None for v in spot)
    mem = json.loads(RUN.invoke(app, ["catalog", "list", "--sort", "gpu-memory",
                                      "--json"]).output)
    totals = [v["gpu"]["total_memory_gib"] or 0 for v in mem]
    assert totals == sorted(totals, reverse=True)
    table = RUN.invoke(app, ["catalog", "list", "--provider", "azure"], env={"COLUMNS": "200"})
    assert "Standard_NC6s_v3 (retired)" in table.output and "as of" in table.output
    for argv, says in ((["--sort", "cost"], "not a sort key"),
                       (["--region", "eu-west-1", "--provider", "gcp"], "is a region of aws")):
        bad = RUN.invoke(app, ["catalog", "list", *argv])
        assert bad.exit_code == 2 and says in bad.output, bad.output


# -- sources that disagree --------------------------------------------------------------------
def test_p5_records_the_2026_file_that_disagrees_and_why_the_2023_one_is_kept():
    inst = CAT.instance("aws:p5.48xlarge")
    facts = {c.fact: c for c in inst.conflicts}
    assert set(facts) == {"numa.nodes", "numa.gpu_nodes"}
    assert facts["numa.nodes"].other == 1 and inst.numa.nodes == 2
    assert "79565c0e" in facts["numa.nodes"].source.source
    assert facts["numa.nodes"].source.as_of == dt.date(2026, 5, 6)
    show = RUN.invoke(app, ["catalog", "show", "aws:p5.48xlarge"], env={"COLUMNS": "200"})
    assert "sources that disagree" in show.output and "79565c0e" in show.output
    ticket = RUN.invoke(app, ["ticket", "--instance", "aws:p5.48xlarge", "--format", "text"])
    assert ticket.output.count("Two public sources disagree") == 1  # one question settles both
    assert "numa.nodes: 2 vs 1" in ticket.output


def _one_p5(tmp_path, conflict: str) -> str:
    """A private catalog layer holding p5.48xlarge again with a conflicts block."""
    import yaml

    src = yaml.load((CAT_DIR / "instances" / "aws.yaml").read_text(),  # noqa: S506
                    Loader=yaml.CSafeLoader)
    entry = next(e for e in src["instances"] if e["name"] == "p5.48xlarge")
    entry = {**entry, "provider": "onprem", "conflicts": [yaml.safe_load(conflict)]}
    entry.pop("regions", None)
    (tmp_path / "instances").mkdir(parents=True)
    (tmp_path / "instances" / "onprem.yaml").write_text(yaml.safe_dump(
        {"schema_version": 1, "provider": "onprem", "instances": [entry]}))
    return str(tmp_path)


CAT_DIR = __import__("pathlib").Path(__file__).resolve().parents[2] / "catalogs"
OTHER = ("{fact: numa.nodes, other: 1, source: {source: 'https://example.org/topo.xml', "
         "as_of: 2026-05-06}")


@pytest.mark.parametrize(("conflict", "says"), [
    (OTHER + "}", "no choice is recorded"),
    (OTHER.replace("other: 1", "other: 2") + ", why: 'same value'}", "both sources say 2"),
    (OTHER.replace("numa.nodes", "numa.sockets") + ", why: 'x'}", "no such fact"),
])
def test_validate_refuses_a_disagreement_nobody_chose_between(tmp_path, conflict, says):
    res = RUN.invoke(app, ["catalog", "validate", _one_p5(tmp_path, conflict)])
    assert res.exit_code != 0 and says in res.output, res.output
    ok = RUN.invoke(app, ["catalog", "validate", _one_p5(
        tmp_path / "ok", OTHER + ", why: 'the 2023 file agrees with the documentation'}")])
    assert ok.exit_code == 0, ok.output
