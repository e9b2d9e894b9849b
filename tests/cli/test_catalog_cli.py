"""``advisor catalog`` and ``advisor models`` through the real Typer app (CliRunner)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PRIVATE_BOX


def _one_line_error(result, *needles):
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_list_all_as_a_table(cli):
    r = cli("catalog", "list")
    assert r.exit_code == 0
    assert "aws:p5.48xlarge" in r.stdout and "azure:Standard_ND96isr_H100_v5" in r.stdout
    assert "instance types" in r.stdout


def test_list_json_filters_by_provider_and_gpu(cli):
    r = cli("catalog", "list", "--provider", "gcp", "--gpu", "H100", "--json")
    assert r.exit_code == 0
    rows = json.loads(r.stdout)
    assert rows and {x["provider"] for x in rows} == {"gcp"}
    assert {x["gpu"]["model"] for x in rows} == {"H100-SXM"}
    names = {x["name"] for x in rows}
    assert "a3-highgpu-8g" in names and "a2-highgpu-1g" not in names


def test_gpu_family_filter_takes_every_variant(cli):
    rows = json.loads(cli("catalog", "list", "--gpu", "a100", "--json").stdout)
    assert {x["gpu"]["model"] for x in rows} == {"A100-40GB-SXM", "A100-80GB-SXM",
                                                 "A100-80GB-PCIe"}
    exact = json.loads(cli("catalog", "list", "--gpu", "a100-80gb-pcie", "--json").stdout)
    assert {x["gpu"]["model"] for x in exact} == {"A100-80GB-PCIe"}


def test_show_json_has_the_issue_keys(cli):
    r = cli("catalog", "show", "aws:p4d.24xlarge", "--json")
    assert r.exit_code == 0
    v = json.loads(r.stdout)
    assert (v["provider"], v["name"], v["vcpus"], v["memory_gib"]) == ("aws", "p4d.24xlarge", 96,
                                                                       1152)
    assert v["gpu"]["count"] == 8 and v["gpu"]["memory_gib"] == 40
    assert set(v["cpu"]) >= {"model", "family", "sockets"}
    assert set(v["numa"]) >= {"nodes", "gpu_nodes"}
    assert v["price"]["region"] == "us-east-1" and v["price"]["on_demand_usd_per_hour"] > 0


def test_show_table_lists_sources(cli):
    r = cli("catalog", "show", "azure:Standard_ND96isr_H100_v5")
    assert r.exit_code == 0
    assert "0,0,0,0,1,1,1,1" in r.stdout and "azhpc-images" in r.stdout


def test_show_accepts_a_bare_unique_name(cli):
    assert json.loads(cli("catalog", "show", "p5.48xlarge", "--json").stdout)["provider"] == "aws"


@pytest.mark.parametrize("args,needles", [
    (["catalog", "show", "aws:p5.49xlarge"], ["unknown instance type", "p5.48xlarge"]),
    (["catalog", "show", "awz:p5.48xlarge"], ["unknown provider", "'aws'"]),
    (["catalog", "list", "--provider", "oracle"], ["unknown provider"]),
    (["catalog", "list", "--gpu", "H10"], ["unknown GPU"]),
    (["models", "show", "llama-3-7b"], ["unknown model", "llama-3-8b"]),
])
def test_unknown_names_are_one_line_with_suggestions(cli, args, needles):
    _one_line_error(cli(*args), *needles)


def test_validate_bundled(cli):
    r = cli("catalog", "validate")
    assert r.exit_code == 0 and r.stdout.startswith("ok: ")
    assert "GPU NUMA nodes known for" in r.stdout


def test_validate_lists_every_problem_and_exits_2(cli, make_catalog):
    d = make_catalog({
        "instances/onprem.yaml": PRIVATE_BOX.replace("vcpus: 64", "vcpus: -4")
        .replace("gpu_nodes: [0, 0]", "gpu_nodes: [0, 3]"),
        "gpus.yaml": "gpus: [\n",
    })
    r = cli("catalog", "validate", str(d))
    assert r.exit_code == 2
    out = r.stdout
    assert "instances/onprem.yaml: onprem:lab-box-1: vcpus:" in out
    assert "instances/onprem.yaml: onprem:lab-box-1: numa.gpu_nodes: node 3 does not exist" in out
    assert "gpus.yaml: not valid YAML at line" in out
    assert "3 problem(s)" in out


def test_validate_json(cli, make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX.replace("L40S", "L40X")})
    r = cli("catalog", "validate", str(d), "--json")
    assert r.exit_code == 2
    v = json.loads(r.stdout)
    assert v["ok"] is False
    assert v["problems"][0]["entry"] == "onprem:lab-box-1"
    assert v["problems"][0]["field"] == "gpu.model"


def test_broken_user_catalog_stops_other_commands_with_one_line(cli, make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX.replace("count: 2", "count: -2")})
    line = _one_line_error(cli("catalog", "list", "--catalog", str(d)),
                           "instances/onprem.yaml", "onprem:lab-box-1", "gpu.count")
    assert "validate" in line  # the hint says how to see all problems


def test_user_catalog_from_option_and_environment(cli, make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX})
    r = cli("catalog", "show", "onprem:lab-box-1", "--json", "--catalog", str(d))
    assert json.loads(r.stdout)["numa"] == {"nodes": 1, "gpu_nodes": [0, 0], "known": True}
    r = cli("catalog", "list", "--provider", "onprem", "--json",
            env={"ADVISOR_CATALOG_DIR": str(d)})
    assert [x["name"] for x in json.loads(r.stdout)] == ["lab-box-1"]


def test_negotiated_price_override(cli, make_catalog):
    d = make_catalog({"instances/aws.yaml": """
        provider: aws
        instances:
          - name: p5.48xlarge
            price: {on_demand_usd_per_hour: 30.0, region: us-east-1, as_of: 2026-11-01}
            sources:
              price: {source: "our enterprise agreement", as_of: 2026-11-01}
    """})
    v = json.loads(cli("catalog", "show", "aws:p5.48xlarge", "--json", "--catalog", str(d)).stdout)
    assert v["price"]["on_demand_usd_per_hour"] == 30.0
    assert v["sources"]["price"]["source"] == "our enterprise agreement"
    assert "default" in v["sources"]  # the bundled sources are kept


def test_catalog_option_pointing_at_a_file(cli, tmp_path):
    f = tmp_path / "file.yaml"
    f.write_text("x: 1\n")
    r = cli("catalog", "list", "--catalog", str(f))
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_models_list_and_show(cli):
    rows = json.loads(cli("models", "list", "--json").stdout)
    assert {r["alias"] for r in rows} >= {"llama-3-8b", "gpt-oss-20b", "qwen3-30b-a3b"}
    v = json.loads(cli("models", "show", "llama-3-8b", "--json").stdout)
    assert v["hf_id"] == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert v["summary"]["num_key_value_heads"] == 8 and v["summary"]["num_hidden_layers"] == 32
    assert v["config"]["rope_theta"] == 500000.0  # the whole config.json comes along
    assert v["config_file"].endswith(".json")
    table = cli("models", "show", "mixtral-8x7b").stdout
    assert "mistralai/Mixtral-8x7B-v0.1" in table


def test_internal_errors_are_one_line_unless_debug(cli, monkeypatch):
    import advisor.cli.catalog as mod

    def boom(_dirs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(mod, "catalog_from", boom)
    r = cli("catalog", "list")
    assert r.exit_code == 1 and "internal error: RuntimeError: kaboom" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("--debug", "catalog", "list")
    assert isinstance(r.exception, RuntimeError)


def test_version_and_help(cli):
    from advisor import __version__

    assert cli("--version").stdout.strip() == f"advisor {__version__}"
    r = cli("catalog", "--help")
    assert r.exit_code == 0 and "validate" in r.stdout
