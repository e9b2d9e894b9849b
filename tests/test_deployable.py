"""AMD picks must not deploy CUDA (issue 27, item 5).

advisor deploys CUDA vLLM only (nvidia-smi GPU mapping, the CUDA wheel, NVIDIA-driver images,
``nvidia.com/gpu``): an instance whose GPU the catalog gives as AMD (MI300X) is kept in
``recommend`` for its figures, marked not deployable and ranked after every deployable offer;
``plan`` builds no fleet of it; ``render`` (every target) and ``provision`` (dry run included)
refuse it — exit 2, one line on stderr, no traceback, nothing written, no cloud called.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import advisor
from advisor.api import fleet, recommend, render_files
from advisor.cli import app
from advisor.core import deploy
from advisor.errors import UserInputError
from advisor.provisioning import candidates, provision
from tests.test_render_local import TWO_NODES, add_cpus
from tests.test_topology import EIGHT, make_sysfs

CAT = advisor.load_catalog()
AMD = sorted(k for k, i in CAT.instances.items() if CAT.gpus[i.gpu.model].vendor == "amd")
NVIDIA = sorted(k for k, i in CAT.instances.items() if CAT.gpus[i.gpu.model].vendor == "nvidia")
MI300X = "azure:Standard_ND96isr_MI300X_v5"
#: the questions that put MI300X first before this rule (its $/h and $/1M are the lowest)
QUESTIONS = {
    "405b": dict(model="llama-3.1-405b", ctx=8192),
    "70b-rps-50": dict(model="llama-3.3-70b", ctx=8192, rps=50),
    "70b-batch": dict(model="llama-3.3-70b", ctx=8192, batch=True),
}
TOKEN = "file:/etc/advisor/hf-token"


# -- the one place that decides ------------------------------------------------------------------
def test_the_catalog_has_amd_instances_to_refuse():
    assert MI300X in AMD and "azure:Standard_ND96is_MI300X_v5" in AMD
    assert set(AMD) | set(NVIDIA) == set(CAT.instances)  # every GPU states its vendor


@pytest.mark.parametrize("key", AMD)
def test_every_amd_instance_is_not_deployable_with_the_reason(key):
    ok, why = deploy.deployable(CAT.instance(key), CAT)
    assert not ok and why is not None
    assert why.startswith("AMD MI300X: advisor deploys CUDA vLLM only (no ROCm path yet)")
    assert "ROCm image by hand" in why and "\n" not in why


@pytest.mark.parametrize("key", NVIDIA)
def test_every_nvidia_instance_is_deployable(key):
    assert deploy.deployable(CAT.instance(key), CAT) == (True, None)


def test_a_gpu_the_catalog_lacks_is_not_deployable():
    inst = CAT.instance(MI300X).model_copy(update={"gpu": CAT.instance(MI300X).gpu.model_copy(
        update={"model": "NoSuchGPU"})})
    ok, why = deploy.deployable(inst, CAT)
    assert not ok and "unknown to the catalog" in (why or "")


def test_a_probe_is_judged_by_its_pci_vendors():
    assert deploy.probe_reason(["nvidia"]) is None
    assert "AMD GPUs on this host" in (deploy.probe_reason(["nvidia", "amd"]) or "")


# -- recommend: deployable first, AMD marked after ------------------------------------------------
@pytest.fixture(scope="module")
def ranked() -> dict[str, list]:
    return {name: recommend(**q, catalog=CAT) for name, q in QUESTIONS.items()}  # type: ignore


@pytest.mark.parametrize("name", QUESTIONS)
def test_the_first_pick_is_deployable_and_mi300x_is_marked_after(ranked, name):
    recs = ranked[name]
    assert recs[0].deployable and recs[0].not_deployable_reason is None
    assert recs[0].gpu != "MI300X"
    amd = [r for r in recs if r.gpu == "MI300X"]
    assert amd, "the MI300X rows are listed (a capacity planner sees them)"
    for r in amd:
        assert not r.deployable
        assert "no ROCm path yet" in (r.not_deployable_reason or "")
        assert r.risks[0] == f"not deployable by advisor: {r.not_deployable_reason}"
    flags = [r.deployable for r in recs]
    assert flags == sorted(flags, reverse=True), "every deployable offer before any other"
    ok = [r for r in recs if r.deployable]
    assert [r.score for r in ok] == sorted(r.score for r in ok)  # still by the figure


@pytest.mark.parametrize("name", QUESTIONS)
def test_mi300x_would_have_been_first_by_its_figure(ranked, name):
    """The rule, not the figures, keeps it from the top: its score is the lowest."""
    recs = ranked[name]
    assert min(recs, key=lambda r: r.score).gpu == "MI300X"


def test_asking_for_mi300x_lists_it_marked():
    recs = recommend("qwen2.5-72b", 8192, gpus=["MI300X"], catalog=CAT)
    assert recs and all(not r.deployable for r in recs)


# -- plan: no fleet of what advisor cannot deploy -------------------------------------------------
def test_no_fleet_is_built_of_mi300x():
    options, misses = fleet("llama-3.3-70b", 8192, rps=50, catalog=CAT, with_misses=True)
    assert options and all(o.gpu != "MI300X" for o in options)
    amd = [m for m in misses if "MI300X" in m.instance]
    assert amd and all(m.reason.startswith("not deployable by advisor: AMD MI300X") for m in amd)


def test_a_fleet_of_only_mi300x_is_refused_with_the_reason():
    with pytest.raises(UserInputError, match="no fleet advisor can deploy carries 5 req/s: "
                       "azure:Standard_ND96is.*not deployable by advisor: AMD MI300X") as e:
        fleet("qwen2.5-72b", 8192, rps=5, gpus=["MI300X"], catalog=CAT)
    assert e.value.hint == deploy.HINT


# -- render and provision, SDK ------------------------------------------------------------------
def test_render_takes_the_first_deployable_pick():
    res = render_files("llama-3.1-405b", 8192, hf_token_ref=TOKEN, catalog=CAT)
    assert CAT.gpus[res.instance.gpu.model].vendor == "nvidia"


@pytest.mark.parametrize("target", ["cloud-init", "k8s"])
def test_render_refuses_a_named_amd_instance(target):
    with pytest.raises(UserInputError, match=f"{MI300X} is not deployable by advisor: AMD") as e:
        render_files("qwen2.5-72b", 8192, instance=MI300X, target=target, catalog=CAT)
    assert e.value.hint == deploy.HINT


def test_render_refuses_when_only_amd_is_left():
    amd_only = dataclasses.replace(CAT, instances={k: CAT.instances[k] for k in AMD})
    with pytest.raises(UserInputError, match="not deployable by advisor"):
        render_files("qwen2.5-72b", 8192, catalog=amd_only)


def _no_cloud(name: str):
    raise AssertionError(f"a cloud was called ({name}) for an instance advisor cannot deploy")


def test_provision_refuses_a_named_amd_instance_before_any_cloud_call(tmp_path):
    # before the gated model's token check too: a token would not make it deployable
    for dry in (True, False):
        with pytest.raises(UserInputError, match=f"{MI300X} is not deployable by advisor"):
            provision("llama-3.1-405b", 8192, instance=MI300X, dry_run=dry, catalog=CAT,
                      backends=_no_cloud, store=advisor.state.Store(tmp_path / "s.db"))
    assert not (tmp_path / "s.db").exists() or not advisor.state.Store(
        tmp_path / "s.db").all()


def test_provision_never_falls_back_to_amd():
    picks = candidates("llama-3.3-70b", 8192, catalog=CAT, provider="azure", max_types=50,
                       question=advisor.provisioning.Question(batch=True))
    assert picks and all(CAT.gpus[p[0].gpu.model].vendor == "nvidia" for p in picks)
    amd_only = dataclasses.replace(CAT, instances={k: CAT.instances[k] for k in AMD})
    with pytest.raises(UserInputError, match="not deployable by advisor"):
        candidates("qwen2.5-72b", 8192, catalog=amd_only, provider="azure")


# -- the CLI: one line, exit 2, nothing written ---------------------------------------------------
@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("ADVISOR_CATALOG_DIR", raising=False)
    monkeypatch.delenv("ADVISOR_DEBUG", raising=False)
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("advisor.provisioning._provider", lambda *a, **k: _no_cloud(a[1]))
    runner = CliRunner()

    def go(*argv: str, env: dict[str, str] | None = None):
        return runner.invoke(app, list(argv), env=env)

    return go


def _refused(result, out: Path | None = None) -> str:
    err = result.stderr
    assert "Traceback" not in err + result.stdout
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, (result.exit_code, err, result.stdout[:300])
    assert len(err.strip().splitlines()) == 1, err
    assert "not deployable by advisor" in err and "hint:" in err
    if out is not None:
        assert not out.exists(), f"wrote {out}"
        assert not list(out.parent.glob(".advisor-*")) if out.parent.exists() else True
    return err


def _amd_host(tmp_path: Path) -> Path:
    root = add_cpus(make_sysfs(tmp_path / "amd", TWO_NODES, EIGHT), TWO_NODES)
    for bus, _ in EIGHT:
        d = root / "sys/bus/pci/devices" / bus
        (d / "vendor").write_text("0x1002\n")
        (d / "device").write_text("0x74a1\n")
    return root


def _nvidia_host(tmp_path: Path) -> Path:
    return add_cpus(make_sysfs(tmp_path / "nv", TWO_NODES, EIGHT), TWO_NODES)


REFUSED = [
    ("render", ["render", "-m", "qwen2.5-72b", "--ctx", "8192", "--instance", MI300X]),
    ("render-gated", ["render", "-m", "llama-3.1-405b", "--ctx", "8192", "--instance", MI300X]),
    ("render-k8s", ["render", "-m", "qwen2.5-72b", "--ctx", "8192", "--instance", MI300X,
                    "--target", "k8s"]),
    ("render-k8s-is", ["render", "-m", "qwen2.5-72b", "--ctx", "8192", "--instance",
                       "azure:Standard_ND96is_MI300X_v5", "--target", "k8s", "--json"]),
    ("render-tp", ["render", "-m", "qwen2.5-72b", "--ctx", "8192", "--instance", MI300X,
                   "--tp", "4"]),
    ("render-batch", ["render", "-m", "llama-3.3-70b", "--ctx", "8192", "--instance", MI300X,
                      "--batch", "--hf-token-ref", "azure-kv:myvault/hf-token"]),
    ("render-local-amd", ["render", "-m", "qwen2.5-72b", "--ctx", "8192", "--target", "local",
                          "--sysfs-root", "{AMD}"]),
    ("render-local-amd-named-nvidia", ["render", "-m", "qwen2.5-72b", "--ctx", "8192",
                                       "--target", "local", "--sysfs-root", "{AMD}",
                                       "--gpu", "H100-SXM"]),
    ("render-local-named-amd", ["render", "-m", "qwen2.5-72b", "--ctx", "8192", "--target",
                                "local", "--sysfs-root", "{NV}", "--gpu", "MI300X"]),
    ("provision-dry", ["provision", "-m", "qwen2.5-72b", "--ctx", "8192", "--dry-run",
                       "--instance", MI300X]),
    ("provision-dry-gated", ["provision", "-m", "llama-3.1-405b", "--ctx", "8192", "--dry-run",
                             "--instance", MI300X]),
    ("provision-dry-json", ["provision", "-m", "qwen2.5-72b", "--ctx", "8192", "--dry-run",
                            "--json", "--instance", "azure:Standard_ND96is_MI300X_v5"]),
    ("provision", ["provision", "-m", "qwen2.5-72b", "--ctx", "8192", "--yes",
                   "--instance", MI300X, "--api-key-ref", "azure-kv:myvault/vllm-api-key"]),
]


@pytest.mark.parametrize("argv", [a for _, a in REFUSED], ids=[n for n, _ in REFUSED])
def test_cli_refuses_amd_exit_2_one_line_nothing_written(run, tmp_path, argv):
    hosts = {"{AMD}": str(_amd_host(tmp_path)), "{NV}": str(_nvidia_host(tmp_path))}
    argv = [hosts.get(a, a) for a in argv]
    out = tmp_path / "out" / "files"
    if argv[0] == "render":
        argv += ["--out", str(out)]
    err = _refused(run(*argv), out)
    assert "ROCm" in err


def test_cli_render_local_print_refuses_an_amd_host(run, tmp_path):
    r = run("render", "-m", "qwen2.5-72b", "--ctx", "8192", "--target", "local",
            "--sysfs-root", str(_amd_host(tmp_path)), "--print")
    err = _refused(r)
    assert "this host is not deployable by advisor: AMD GPUs on this host" in err
    assert r.stdout == ""


def test_cli_recommend_marks_amd_in_table_and_json(run):
    r = run("recommend", "-m", "llama-3.1-405b", "--ctx", "8192", "--top", "20", "--json")
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows[0]["deployable"] is True and rows[0]["not_deployable_reason"] is None
    amd = [x for x in rows if x["gpu"] == "MI300X"]
    assert amd and all(x["deployable"] is False and "ROCm" in x["not_deployable_reason"]
                       for x in amd)
    t = run("recommend", "-m", "llama-3.1-405b", "--ctx", "8192", "--top", "20",
            env={"COLUMNS": "200"})
    assert t.exit_code == 0
    flat = " ".join(t.stdout.split())
    assert f"{MI300X} *" in t.stdout and "*: not deployable by advisor" in flat
    assert f"! {MI300X} is not deployable by advisor: AMD MI300X" in t.stdout
    assert f"Why {rows[0]['provider']}:{rows[0]['instance']}:" in t.stdout


def test_cli_recommend_says_when_amd_ranks_below_the_picks_shown(run):
    t = run("recommend", "-m", "llama-3.3-70b", "--ctx", "8192", "--rps", "50",
            env={"COLUMNS": "200"})
    assert t.exit_code == 0, t.stderr
    flat = " ".join(t.stdout.split())
    assert "MI300X" not in t.stdout.split("Why")[0].split("┘")[0]  # not among the rows
    assert "more not deployable by advisor (MI300X: CUDA vLLM only)" in flat
    assert "--top" in flat


def test_cli_plan_has_no_amd_fleet(run):
    r = run("plan", "-m", "llama-3.3-70b", "--ctx", "8192", "--rps", "50", "--top", "50",
            "--json")
    assert r.exit_code == 0, r.stderr
    assert all(o["gpu"] != "MI300X" for o in json.loads(r.stdout))
    only = run("plan", "-m", "qwen2.5-72b", "--ctx", "8192", "--rps", "5", "--gpu", "MI300X")
    _refused(only)
