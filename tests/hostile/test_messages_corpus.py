"""Mistyped regions, providers and probes (issue 30, "Messages"): each ends as exit 2 with ONE
line on stderr, no traceback, nothing on stdout, and the RIGHT line: a substring that names the
cause ("is a region of aws", "did you mean", "unknown provider", "the probe shows 0 GPUs"), not
merely an error. test_corpus.py checks that bad input is refused; this corpus checks what the
refusal says, through recommend, plan and ticket.

``{NAME}`` in an argument is a probe file made once for the module (see :func:`probes`).
(provision --dry-run is left out: its region and provider checks are recommend's.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.cli import app
from advisor.host.topology import probe
from tests.test_topology import EIGHT, make_sysfs

REC = ["recommend", "-m", "qwen3-8b", "--ctx", "8192"]
PLAN = ["plan", "-m", "qwen3-8b", "--ctx", "8192", "--rps", "1"]
P4D = ["ticket", "--instance", "aws:p4d.24xlarge"]
A2 = ["ticket", "--instance", "gcp:a2-highgpu-8g"]

#: (id, argv, what the one line must say)
CASES: list[tuple[str, list[str], str]] = [
    # regions: unknown, another cloud's, mistyped
    ("rec-mars", [*REC, "--region", "mars-1"],
     "no instance type of aws, azure, gcp is priced in region 'mars-1'"),
    ("rec-aws-region-for-gcp", [*REC, "--region", "eu-west-1", "--provider", "gcp"],
     "'eu-west-1' is a region of aws, not of gcp"),
    ("rec-gcp-region-for-aws", [*REC, "--region", "us-central1", "--provider", "aws"],
     "'us-central1' is a region of gcp, not of aws"),
    ("rec-azure-region-for-aws", [*REC, "--region", "eastus", "--provider", "aws"],
     "'eastus' is a region of azure, not of aws"),
    ("rec-trailing-space", [*REC, "--region", "us-east-1 ", "--provider", "aws"],
     "did you mean us-east-1"),
    ("rec-uppercase", [*REC, "--region", "US-EAST-1", "--provider", "aws"],
     "no instance type of aws is priced in region 'US-EAST-1'"),
    ("plan-mars", [*PLAN, "--region", "mars-1"], "priced in region 'mars-1'"),
    ("plan-aws-region-for-gcp", [*PLAN, "--region", "eu-west-1", "--provider", "gcp"],
     "'eu-west-1' is a region of aws, not of gcp"),
    ("plan-gcp-region-for-azure", [*PLAN, "--region", "europe-west4", "--provider", "azure"],
     "'europe-west4' is a region of gcp, not of azure"),
    ("ticket-aws-region-for-gcp", [*A2, "--region", "eu-west-1"],
     "'eu-west-1' is a region of aws, not of gcp"),
    ("ticket-gcp-region-for-aws", [*P4D, "--region", "us-central1"],
     "'us-central1' is a region of gcp, not of aws"),
    ("ticket-mars", [*P4D, "--region", "mars-1"],
     "no instance type of aws is priced in region 'mars-1'"),
    ("ticket-region-not-of-this-type", [*P4D, "--region", "us-west-1"],
     "aws:p4d.24xlarge is not priced in aws region 'us-west-1'"),
    ("ticket-gcp-region-not-of-this-type", [*A2, "--region", "europe-west1"],
     "gcp:a2-highgpu-8g is not priced in gcp region 'europe-west1'"),
    ("ticket-trailing-space", [*P4D, "--region", "us-east-1 "], "did you mean us-east-1?"),
    ("ticket-uppercase", [*P4D, "--region", "US-EAST-1"], "did you mean us-east-1?"),
    # providers
    ("rec-provider-awz", [*REC, "--provider", "awz"], "unknown provider 'awz'; did you mean 'aws'"),
    ("rec-provider-upper", [*REC, "--provider", "GCP"],
     "unknown provider 'GCP'; did you mean 'gcp'"),
    ("rec-provider-azur", [*REC, "--provider", "azur"], "did you mean 'azure'"),
    ("plan-provider-awz", [*PLAN, "--provider", "awz"], "unknown provider 'awz'"),
    ("ticket-provider-awz", ["ticket", "--instance", "awz:p4d.24xlarge"],
     "unknown provider 'awz'; did you mean 'aws'"),
    ("ticket-provider-upper", ["ticket", "--instance", "GCP:a2-highgpu-8g"],
     "unknown provider 'GCP'; did you mean 'gcp'"),
    ("ticket-type-of-another-cloud", ["ticket", "--instance", "gcp:p4d.24xlarge"],
     "did you mean 'aws:p4d.24xlarge'"),
    # probes of another machine, or not probes at all
    ("probe-4-of-8", [*P4D, "--probe", "{A100X4}"],
     "the probe shows 4 × A100-40GB-SXM; aws:p4d.24xlarge has 8 × A100-40GB-SXM"),
    ("probe-l4-for-a100", [*P4D, "--probe", "{L4X8}"],
     "the probe shows 8 × L4; aws:p4d.24xlarge has 8 × A100-40GB-SXM"),
    ("probe-0-gpus", [*P4D, "--probe", "{NONE}"],
     "the probe shows 0 GPUs; aws:p4d.24xlarge has 8 × A100-40GB-SXM"),
    ("probe-h100-for-gcp-a100", [*A2, "--region", "us-central1", "--probe", "{H100X8}"],
     "the probe shows 8 × H100-SXM; gcp:a2-highgpu-8g has 8 × A100-40GB-SXM"),
    ("probe-empty", [*P4D, "--probe", "{EMPTY}"], "not advisor's topology JSON"),
    ("probe-not-json", [*P4D, "--probe", "{TEXT}"], "not valid JSON"),
    ("probe-lscpu-json", [*P4D, "--probe", "{LSCPU}"],
     "no \"kind\": \"advisor-topology\", and not nodes, gpus and nics (its keys: lscpu)"),
    ("probe-other-kind", [*P4D, "--probe", "{OTHER_KIND}"], "its kind is 'nvidia-smi'"),
]

#: the same commands with the right region / probe: accepted (the checks are not over-tight)
ACCEPTED: list[tuple[str, list[str]]] = [
    ("ticket-region-and-probe", [*P4D, "--region", "eu-west-1", "--probe", "{A100X8}"]),
    ("ticket-gcp-region", [*A2, "--region", "us-central1"]),
    ("rec-region", [*REC, "--region", "eu-west-1", "--provider", "aws"]),
]


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("probes")
    out: dict[str, str] = {}
    for name, gpus, device in [("A100X8", EIGHT, "0x20b0"), ("A100X4", EIGHT[:4], "0x20b0"),
                               ("L4X8", EIGHT, "0x27b8"), ("H100X8", EIGHT, "0x2330"),
                               ("NONE", [], "0x20b0")]:
        tree = make_sysfs(root / name, {0: "0-47", 1: "48-95"}, gpus)
        topo = json.loads(probe(tree).model_dump_json())
        for g in topo["gpus"]:
            g["device_id"] = device
        (root / f"{name}.json").write_text(json.dumps(topo))
        out[name] = str(root / f"{name}.json")
    for name, text in [("EMPTY", ""), ("TEXT", "GPU0 X NV12 NV12 0-47 0\n"),
                       ("LSCPU", json.dumps({"lscpu": [{"field": "CPU(s):", "data": "96"}]})),
                       ("OTHER_KIND", json.dumps({"kind": "nvidia-smi", "nodes": [],
                                                  "gpus": [], "nics": []}))]:
        (root / f"{name}.json").write_text(text)
        out[name] = str(root / f"{name}.json")
    return out


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, probes: dict[str, str]):
    monkeypatch.delenv("ADVISOR_CATALOG_DIR", raising=False)
    monkeypatch.delenv("ADVISOR_DEBUG", raising=False)
    # ADVISOR_HOME: the test's own (tests/conftest.py), its catalog cache already warm
    runner = CliRunner()

    def go(argv: list[str]):
        return runner.invoke(app, [a.format(**probes) if a.startswith("{") else a
                                   for a in argv])

    return go


@pytest.mark.parametrize(("argv", "needle"), [(a, n) for _, a, n in CASES],
                         ids=[i for i, _, _ in CASES])
def test_the_one_line_names_the_cause(run, argv, needle):
    r = run(argv)
    shown = " ".join(argv)
    assert "Traceback" not in r.stderr + r.stdout, shown
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{shown}: {r.exception!r}"
    assert r.exit_code == 2, f"{shown}: exit {r.exit_code}: {r.stderr}"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"{shown}: {r.stderr}"
    assert lines[0].startswith("error: ") and needle in lines[0], f"{shown}: {lines[0]}"
    assert "internal error" not in lines[0] and "shorten --ctx" not in lines[0], lines[0]
    assert r.stdout == "", f"{shown}: wrote {r.stdout[:200]!r}"  # ticket has no --out: stdout
    assert "0 GPU(s)" not in r.stdout + r.stderr


@pytest.mark.parametrize("argv", [a for _, a in ACCEPTED], ids=[i for i, _ in ACCEPTED])
def test_the_right_region_and_probe_are_accepted(run, argv):
    r = run(argv)
    assert r.exit_code == 0, r.stderr
    assert "0 GPU(s)" not in r.stdout


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 20
    commands = {argv[0] for _, argv, _ in CASES}
    assert commands == {"recommend", "plan", "ticket"}
