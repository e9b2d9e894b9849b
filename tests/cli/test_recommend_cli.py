"""``advisor recommend`` and ``advisor perf`` through the CLI, and the real process's imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _one_line(r, *needles):
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_recommend_json_has_the_issue_keys(cli):
    r = cli("recommend", "--model", "llama-3-8b", "--ctx", "8192", "--json", "--top", "3")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 3
    for x in rows:
        assert {"provider", "instance", "region", "usd_per_hour", "plan", "fit", "perf",
                "usd_per_million_output_tokens", "numa", "reasons"} <= set(x)
        assert {"tp", "pp", "replicas", "replica_layout"} <= set(x["plan"])
        assert {"gpus", "numa_nodes"} <= set(x["plan"]["replica_layout"][0])
        assert {"kv_cache_tokens", "max_concurrency", "fits"} <= set(x["fit"])
        assert {"ttft_ms", "tpot_ms", "output_tokens_per_s", "requests_per_s"} <= set(x["perf"])
        assert x["numa"]["alignment"] in ("aligned", "spans-nodes", "unknown")


def test_recommend_table_explains_the_first_pick(cli):
    r = cli("recommend", "-m", "llama-3-8b", "--ctx", "8192", "--show-rejected")
    assert r.exit_code == 0
    assert "Why " in r.stdout and "$/1M" in r.stdout and "rejected" in r.stdout


def test_perf_json(cli):
    r = cli("perf", "-m", "llama-3-8b", "--gpu", "H100-SXM", "--input-len", "1024",
            "--output-len", "256", "--concurrency", "16", "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)
    assert {"ttft_ms", "tpot_ms", "output_tokens_per_s", "requests_per_s"} <= set(v)
    assert v["concurrency"] == 16 and v["output_tokens_per_s"] > 0


def test_perf_prints_the_median_itl_beside_the_mean_tpot(cli):
    """Under long prompts from the others (20k in / 2k out, 8 at once) the mean TPOT carries
    the prompt-chunk steps and the median ITL does not: both printed, as vLLM bench prints
    both, and the JSON has the field."""
    args = ["perf", "-m", "llama-3.1-8b", "--gpu", "H100-SXM", "--input-len", "20000",
            "--output-len", "2000", "--concurrency", "8", "--ctx", "24000"]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    lines = {ln.split("  ")[0]: ln for ln in r.stdout.splitlines()}
    assert "median ITL" in lines and "TPOT" in lines
    v = json.loads(cli(*args, "--json").stdout)
    assert v["itl_median_ms"] < v["tpot_ms"]
    assert f"{v['itl_median_ms']:.1f}" in lines["median ITL"]


@pytest.mark.parametrize("args,needles", [
    (["recommend", "-m", "llama-3-7b", "--ctx", "8192"], ["unknown model", "llama-3-8b"]),
    (["recommend", "-m", "llama-3-8b", "--ctx", "8192", "--input-len", "-1"], ["positive"]),
    (["recommend", "-m", "llama-3-8b", "--ctx", "8192", "--concurrency", "0"], ["positive"]),
    (["recommend", "-m", "llama-3-8b", "--ctx", "nine"], ["--ctx"]),
    (["recommend", "-m", "llama-3-8b", "--ctx", "8192", "--objective", "fun"], ["objective"]),
    (["recommend", "-m", "llama-3-8b", "--ctx", "8192", "--provider", "oracle"],
     ["unknown provider"]),
    (["recommend", "-m", "llama-3.1-405b", "--ctx", "131072", "--gpu", "L4"],
     ["no instance can serve", "closest"]),
    (["recommend", "-m", "llama-3-8b", "--ctx", "8192", "--max-usd-per-hour", "0.01"],
     ["excluded by --max-usd-per-hour"]),
    (["perf", "-m", "llama-3.1-70b", "--gpu", "L4", "--input-len", "100", "--output-len", "10"],
     ["does not fit"]),
    (["perf", "-m", "llama-3-8b", "--gpu", "L4", "--input-len", "0", "--output-len", "10"],
     ["positive"]),
])
def test_bad_input_is_one_line(cli, args, needles):
    _one_line(cli(*args), *needles)


def test_recommend_process_imports_no_cloud_sdk():
    code = ("import sys; from advisor.cli import main; rc = main(['recommend', '--model', "
            "'llama-3-8b', '--ctx', '8192', '--json']); bad = [m for m in sys.modules if "
            "m.split('.')[0] in ('boto3', 'botocore', 'azure', 'googleapiclient') or "
            "m.startswith('google.cloud')]; print(bad, file=sys.stderr); "
            "sys.exit(1 if bad or rc else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
