"""A CLI that fits a terminal: 80-column tables that never split a number or a word, quiet
``| head``, ``--debug`` anywhere, the same option names on every command, honest footers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli.output import ms, num, usd

ADVISOR = shutil.which("advisor", path=str(Path(sys.executable).parent)) or shutil.which("advisor")
NARROW = {"COLUMNS": "80"}
RECOMMEND = ("recommend", "--model", "llama-3-8b", "--ctx", "8192")
PLAN = ("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "20")


def _fits(text: str, width: int = 80) -> list[str]:
    lines = text.splitlines()
    assert lines, "no output"
    too_long = [ln for ln in lines if len(ln) > width]
    assert not too_long, f"{len(too_long)} line(s) over {width} columns:\n" + "\n".join(too_long)
    return lines


def _whole(lines: list[str], *values: str) -> None:
    """Each value appears, unbroken, on one line (a wrapped cell would be split over two)."""
    missing = [v for v in values if not any(v in ln for ln in lines)]
    assert not missing, f"not on one line: {missing}\n" + "\n".join(lines)


def _footer(text: str) -> str:
    return " ".join(text.split())


def _json(cli, *args: str):
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# -- 80 columns -------------------------------------------------------------------------------
def test_recommend_fits_80_columns(cli):
    picks = _json(cli, *RECOMMEND)
    r = cli(*RECOMMEND, env=NARROW)
    assert r.exit_code == 0, r.output
    lines = _fits(r.stdout)
    # the default question's figures stay: instance, $/h, TPOT, $/1M
    _whole(lines, *(f"{p['provider']}:{p['instance']}" for p in picks),
           *(usd(p["usd_per_million_output_tokens"]) for p in picks),
           *(ms(p["perf"]["tpot_ms"]) for p in picks),
           *(usd(p["usd_per_hour"] * p["plan"]["nodes"]) for p in picks))
    assert "not shown at 80 columns" in _footer(r.stdout)  # says what it left out


def test_recommend_is_a_bordered_table_when_there_is_room(cli):
    r = cli(*RECOMMEND, env={"COLUMNS": "200"})
    assert r.exit_code == 0
    header = next(ln for ln in r.stdout.splitlines() if "instance" in ln)
    for col in ("region", "$/h", "GPUs", "layout", "conc", "tok/s", "TPOT ms", "$/1M", "NUMA"):
        assert col in header, header
    assert "┃" in header and "not shown" not in r.stdout


def test_show_rejected_fits_80_columns(cli):
    body = _json(cli, *RECOMMEND, "--show-rejected")
    r = cli(*RECOMMEND, "--show-rejected", env=NARROW)
    assert r.exit_code == 0
    lines = _fits(r.stdout)
    _whole(lines, *(f"{x['provider']}:{x['instance']}" for x in body["rejected"]))
    # the reasons wrap between words only: every word of every reason is on one line
    _whole(lines, *{w for x in body["rejected"] for w in x["reason"].split()})


def test_plan_fits_80_columns(cli):
    fleets = _json(cli, *PLAN)
    r = cli(*PLAN, env=NARROW)
    assert r.exit_code == 0, r.output
    _whole(_fits(r.stdout), *(f"{p['provider']}:{p['instance']}" for p in fleets),
           *(num(p["usd_per_month"]) for p in fleets))


def test_catalog_list_fits_80_columns(cli):
    rows = _json(cli, "catalog", "list")
    r = cli("catalog", "list", env=NARROW)
    assert r.exit_code == 0
    _whole(_fits(r.stdout), *(f"{v['provider']}:{v['name']}" for v in rows),
           *(f"{v['gpu']['count']}x {v['gpu']['model']}" for v in rows),
           *(usd(v["price"]["on_demand_usd_per_hour"]) for v in rows
             if v["price"]["on_demand_usd_per_hour"] is not None))


def test_models_list_fits_80_columns(cli):
    rows = _json(cli, "models", "list")
    r = cli("models", "list", env=NARROW)
    assert r.exit_code == 0
    _whole(_fits(r.stdout), *(v["alias"] for v in rows), *(v["hf_id"] for v in rows))


def test_fit_and_perf_fit_80_columns(cli):
    args = ("fit", "-m", "llama-3.1-70b", "--gpu", "L4", "--ctx", "8192")
    r = cli(*args, env=NARROW)
    assert r.exit_code == 0
    _whole(_fits(r.stdout), "does NOT fit", f"{_json(cli, *args)['kv_bytes_per_token']:,}")
    args = ("perf", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--input-len", "1024",
            "--output-len", "256", "--concurrency", "16")
    r = cli(*args, env=NARROW)
    assert r.exit_code == 0
    _whole(_fits(r.stdout), num(_json(cli, *args)["output_tokens_per_s"]))


def test_status_fits_80_columns(cli, tmp_path, monkeypatch):
    from advisor.state import InstanceRow, Store

    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    store = Store()
    name = "llama-demo"
    store.begin(name, "azure", "llama-3-8b", 8192)
    store.intent(name, "azure", "Standard_NC40ads_H100_v5", "eastus", "eastus-1")
    for k in range(3):
        store.record_instance(name, InstanceRow(
            id=f"vm-{k}-0123456789abcdef", provider="azure", region="eastus", zone="eastus-1",
            instance_type="Standard_NC40ads_H100_v5", state="running"))
    store.close()
    for args in (("status",), ("status", name)):
        r = cli(*args, env=NARROW)
        assert r.exit_code == 0, r.output
        _whole(_fits(r.stdout), name, "azure:Standard_NC40ads_H100_v5", "eastus-1")


def test_a_very_narrow_terminal_keeps_values_whole(cli):
    picks = _json(cli, *RECOMMEND)
    r = cli(*RECOMMEND, env={"COLUMNS": "44"})
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    _whole(lines, *(f"{p['provider']}:{p['instance']}" for p in picks),
           *(usd(p["usd_per_million_output_tokens"]) for p in picks))
    assert max(len(ln) for ln in lines) <= 44


@pytest.mark.parametrize("value,text", [(113.934, "113.93"), (1.861, "1.86"), (0.31934, "0.319"),
                                        (0.012345, "0.0123"), (0.0, "0.00"), (None, "—")])
def test_dollars_are_cents_or_three_significant_digits(value, text):
    assert usd(value) == text


# -- pipes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", ["catalog list", "recommend --model llama-3-8b --ctx 8192",
                                  "fit --help", "--help"])
@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_a_closed_pipe_is_quiet(args, reader):
    assert ADVISOR, "the advisor console script is not installed in this environment"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    r = subprocess.run(["bash", "-c", f'"$0" {args} | {reader} >/dev/null; '
                        'exit "${PIPESTATUS[0]}"', ADVISOR],
                       capture_output=True, text=True, timeout=120, env=env, check=False)
    assert r.stderr == "", r.stderr
    # 141 as for cat; help that typer prints with rich's console exits 1, quietly, its own way
    assert r.returncode in ((0, 1, 141) if "--help" in args else (0, 141)), r.returncode


# -- --debug after the command ----------------------------------------------------------------
def _boom(*_a, **_k):
    raise RuntimeError("boom")


def test_debug_after_the_command_shows_the_traceback(cli, monkeypatch):
    monkeypatch.setattr("advisor.api.recommend", _boom)
    quiet = cli(*RECOMMEND)
    assert quiet.exit_code == 1 and "internal error: RuntimeError: boom" in quiet.stderr
    for args in ((*RECOMMEND, "--debug"), ("--debug", *RECOMMEND)):
        r = cli(*args)
        assert isinstance(r.exception, RuntimeError), (args, r.output)
        assert "internal error" not in r.stderr


def test_debug_after_the_command_through_main(monkeypatch):
    from advisor.cli import main

    monkeypatch.setattr("advisor.api.recommend", _boom)
    with pytest.raises(RuntimeError, match="boom"):
        main([*RECOMMEND, "--debug"])


def test_debug_after_double_dash_is_not_an_option(cli):
    r = cli("models", "show", "--", "--debug")
    assert r.exit_code == 2 and "--debug" in r.stderr and "Traceback" not in r.stderr


# -- one name for one thing -------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--ctx", "--max-model-len"])
def test_fit_and_perf_take_ctx_and_the_old_spelling(cli, flag):
    v = _json(cli, "fit", "-m", "llama-3-8b", "--gpu", "H100-SXM", flag, "4096")
    assert v["max_model_len"] == 4096
    v = _json(cli, "perf", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--input-len", "512",
              "--output-len", "128", flag, "2048")
    assert v["fit"]["max_model_len"] == 2048


def test_fit_and_perf_take_a_gpu_family(cli):
    r = cli("fit", "-m", "llama-3-8b", "--gpu", "H100", "--ctx", "8192", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["gpu"] == "H100-PCIe"  # the smallest H100: holds for all three
    note = r.stderr.strip().splitlines()
    assert len(note) == 1 and all(g in note[0] for g in ("H100-NVL", "H100-PCIe", "H100-SXM"))
    perf = ("perf", "-m", "llama-3-8b", "--input-len", "1024", "--output-len", "256")
    family = _json(cli, *perf, "--gpu", "A100")
    assert family == _json(cli, *perf, "--gpu", "A100-40GB-SXM")
    assert family != _json(cli, *perf, "--gpu", "A100-80GB-SXM")
    r = cli("fit", "-m", "llama-3-8b", "--gpu", "H10", "--ctx", "8192")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1


def test_catalog_list_takes_several_providers(cli):
    rows = _json(cli, "catalog", "list", "--provider", "gcp", "--provider", "azure")
    assert {v["provider"] for v in rows} == {"gcp", "azure"}
    everything = _json(cli, "catalog", "list")
    assert rows == [v for v in everything if v["provider"] in ("gcp", "azure")]
    r = cli("catalog", "list", "--provider", "gcp", "--provider", "oracle")
    assert r.exit_code == 2 and "oracle" in r.stderr


# -- footers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("objective,says", [
    ("cost", "ranked by $/h of one replica, lowest first"),
    ("latency", "ranked by TPOT, lowest first"),
    ("throughput", "ranked by output tok/s per instance, highest first"),
])
def test_the_footer_names_the_objective(cli, objective, says):
    r = cli(*RECOMMEND, "--objective", objective, env=NARROW)
    assert r.exit_code == 0, r.output
    text = _footer(r.stdout)
    assert says in text
    assert text.count("ranked by") == 1
    if objective != "cost":
        assert "$/1M" not in text.split("ranked by", 1)[1].split(";", 1)[0]
        assert "cheapest" not in text


@pytest.mark.parametrize("load,says", [
    (("--concurrency", "8"), "ranked by monthly bill, lowest first; $/1M at the stated load"),
    (("--rps", "5"), "ranked by monthly bill, lowest first; $/1M at the stated load"),
    (("--batch",), "ranked by $/1M output tokens at saturation, lowest first; $/1M at 100% of "
                   "saturated throughput"),
    (("--utilisation", "0.4"), "$/1M at 40% of the throughput at 'conc' sequences per replica"),
])
def test_the_footer_names_the_question_and_what_price_per_token_assumes(cli, load, says):
    r = cli(*RECOMMEND, *load)
    assert r.exit_code == 0, r.output
    assert says in _footer(r.stdout)
