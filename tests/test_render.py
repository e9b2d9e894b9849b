"""Rendering: the files, their validators (cloud-init schema, systemd-analyze, shellcheck), the
launcher's exact command line on fake sysfs trees, and hostile input."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import advisor
from advisor import UserInputError
from advisor.core.layouts import place
from advisor.render.cloudinit import RenderRequest, render, replica_env, templates_dir, unit, write
from tests.test_topology import EIGHT, make_sysfs

CAT = advisor.load_catalog()
ND = CAT.instance("azure:Standard_ND96isr_H100_v5")
LAUNCH = templates_dir() / "vllm-launch.sh"
REQ = RenderRequest(model="meta-llama/Meta-Llama-3-8B-Instruct", max_model_len=8192,
                    vllm_version="0.11.0", api_key_ref="azure-kv:myvault/vllm-key")


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed here (.ci/run installs it)")
    return path


def test_render_two_replicas_of_tp4():
    files = render(ND, place(ND, CAT, 4, 1), REQ)
    assert {"user-data", "vllm@.service", "vllm-launch.sh", "vllm-health.sh", "plan.json",
            "env/vllm-0.env", "env/vllm-1.env"} == set(files)
    env1 = dict(line.split("=", 1) for line in files["env/vllm-1.env"].splitlines())
    assert env1["ADVISOR_GPUS"] == "4,5,6,7" and env1["ADVISOR_PORT"] == "8001"
    assert env1["ADVISOR_ALL_GPUS"] == "0,1,2,3;4,5,6,7" and env1["ADVISOR_HOST"] == "127.0.0.1"
    assert files["user-data"].startswith("#cloud-config\n")
    assert "vllm==0.11.0" in files["user-data"] and "vllm@1.service" in files["user-data"]


def test_no_secret_in_any_file():
    files = render(ND, place(ND, CAT, 8, 1), REQ)
    for name, text in files.items():
        # the only assignments are the dry-run placeholder and the fetch at boot
        assert re.search(r'VLLM_API_KEY=(?!<from|"\$\(read_secret )', text) is None, name
        # a Hugging Face token looks like hf_ and 34 letters and digits
        assert re.search(r"hf_[A-Za-z0-9]{30,}", text) is None and "BEGIN PRIVATE KEY" not in text
    assert "ADVISOR_API_KEY_REF=azure-kv:myvault/vllm-key" in files["env/vllm-0.env"]


def test_user_data_passes_cloud_inits_schema(tmp_path):
    exe = need("cloud-init")
    f = tmp_path / "user-data"
    f.write_text(render(ND, place(ND, CAT, 1, 1), REQ)["user-data"])
    r = subprocess.run([exe, "schema", "--config-file", str(f)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0 and "Valid" in r.stdout, r.stdout + r.stderr


def test_unit_passes_systemd_analyze_verify(tmp_path):
    exe = need("systemd-analyze")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for s in ("vllm-launch.sh", "vllm-health.sh"):
        shutil.copy(templates_dir() / s, bin_dir / s)
        (bin_dir / s).chmod(0o755)
    text = unit(bin_dir=str(bin_dir), env_dir=str(tmp_path))
    for name in ("vllm@.service", "vllm@0.service"):
        (tmp_path / name).write_text(text)
        r = subprocess.run([exe, "verify", str(tmp_path / name)], capture_output=True, text=True,
                           check=False)
        assert r.returncode == 0 and r.stderr.strip() == "" and r.stdout.strip() == "", r.stderr
    assert "Restart=on-failure" in text and "User=vllm" in text


def test_scripts_pass_shellcheck():
    exe = need("shellcheck")
    scripts = [str(templates_dir() / s) for s in ("vllm-launch.sh", "vllm-health.sh")]
    r = subprocess.run([exe, *scripts], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout


def _dry_run(sysfs: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "ADVISOR_DRY_RUN": "1", "ADVISOR_SYSFS_ROOT": str(sysfs),
            **env}
    return subprocess.run(["bash", str(LAUNCH)], capture_output=True, text=True, env=full,
                          timeout=30, check=False)


BUS = ",".join("00000000:" + b.split(":", 1)[1].upper() for b, _ in EIGHT)


def _env_for(plan_tp: int, replica: int, model: str = REQ.model) -> dict[str, str]:
    plan = place(ND, CAT, plan_tp, 1)
    env = dict(line.split("=", 1) for line in replica_env(
        REQ.model_copy(update={"model": model}) if model == REQ.model else REQ,
        plan, replica).splitlines())
    env["ADVISOR_MODEL"] = model
    env["ADVISOR_BUS_IDS"] = BUS
    return env


def test_launcher_binds_tp4_replicas_to_their_nodes(tmp_path):
    sysfs = make_sysfs(tmp_path, {0: "0-47", 1: "48-95"}, EIGHT)
    r0 = _dry_run(sysfs, _env_for(4, 0))
    r1 = _dry_run(sysfs, _env_for(4, 1))
    assert r0.returncode == 0, r0.stderr
    assert r0.stdout.strip() == (
        "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0\\,1\\,2\\,3 OMP_NUM_THREADS=48 "
        "VLLM_API_KEY=<from azure-kv:myvault/vllm-key> numactl --cpunodebind=0 "
        "--membind=0 /opt/advisor/venv/bin/vllm serve meta-llama/Meta-Llama-3-8B-Instruct "
        "--host 127.0.0.1 --port 8000 --tensor-parallel-size 4 --max-model-len 8192 "
        "--gpu-memory-utilization 0.9")
    assert "numactl --cpunodebind=1 --membind=1" in r1.stdout and "--port 8001" in r1.stdout


def test_launcher_tp1_eight_replicas_four_per_node(tmp_path):
    sysfs = make_sysfs(tmp_path, {0: "0-47", 1: "48-95"}, EIGHT)
    r5 = _dry_run(sysfs, _env_for(1, 5))
    assert "CUDA_VISIBLE_DEVICES=5 OMP_NUM_THREADS=12 " in r5.stdout  # 48 cores / 4 replicas
    assert "--cpunodebind=1 --membind=1" in r5.stdout and "--port 8005" in r5.stdout


def test_launcher_spanning_replica_interleaves(tmp_path):
    sysfs = make_sysfs(tmp_path, {0: "0-47", 1: "48-95"}, EIGHT)
    r = _dry_run(sysfs, _env_for(8, 0))
    assert "numactl --cpunodebind=0\\,1 --interleave=0\\,1" in r.stdout  # printf %q quoting
    assert "span NUMA nodes 0,1" in r.stderr


def test_launcher_spanning_replica_uses_vllm_numa_bind_where_available(tmp_path):
    sysfs = make_sysfs(tmp_path, {0: "0-47", 1: "48-95"}, EIGHT)
    env = {**_env_for(8, 0), "ADVISOR_VLLM_NUMA_BIND": "1"}
    r = _dry_run(sysfs, env)
    assert "numactl" not in r.stdout and r.stdout.rstrip().endswith("--numa-bind")
    aligned = _dry_run(sysfs, {**_env_for(4, 1), "ADVISOR_VLLM_NUMA_BIND": "1"})
    assert "numactl --cpunodebind=1 --membind=1" in aligned.stdout  # numactl where it suffices
    assert "--numa-bind" not in aligned.stdout


def test_render_sets_the_numa_bind_flag_by_release():
    plan = place(ND, CAT, 8, 1)
    old = render(ND, plan, REQ)["env/vllm-0.env"]
    new = render(ND, plan, REQ.model_copy(update={"vllm_version": "0.21.0"}))["env/vllm-0.env"]
    assert "ADVISOR_VLLM_NUMA_BIND=0" in old and "ADVISOR_VLLM_NUMA_BIND=1" in new


def test_launcher_single_gpu_single_node(tmp_path):
    sysfs = make_sysfs(tmp_path, {0: "0-7"}, [("0000:00:1e.0", 0)])
    env = {"ADVISOR_GPUS": "0", "ADVISOR_MODEL": "x/y", "ADVISOR_PORT": "8000",
           "ADVISOR_TP": "1", "ADVISOR_MAX_MODEL_LEN": "4096", "ADVISOR_GPU_MEM_UTIL": "0.9",
           "ADVISOR_BUS_IDS": "00000000:00:1E.0"}
    r = _dry_run(sysfs, env)
    assert "OMP_NUM_THREADS=8 " in r.stdout and "--cpunodebind=0 --membind=0" in r.stdout


def test_launcher_runs_unbound_when_the_node_is_hidden(tmp_path):
    sysfs = make_sysfs(tmp_path, {0: "0-7"}, [("0000:00:1e.0", -1)])
    env = {"ADVISOR_GPUS": "0", "ADVISOR_MODEL": "x/y", "ADVISOR_PORT": "8000",
           "ADVISOR_TP": "1", "ADVISOR_MAX_MODEL_LEN": "4096", "ADVISOR_GPU_MEM_UTIL": "0.9",
           "ADVISOR_BUS_IDS": "00000000:00:1E.0"}
    r = _dry_run(sysfs, env)
    assert r.returncode == 0 and "numactl" not in r.stdout
    assert "OMP_NUM_THREADS=unset" in r.stdout and "hidden by the host" in r.stderr


HOSTILE = ["$(touch /tmp/advisor-pwned)", "`touch /tmp/advisor-pwned`", "a'b\"c",
           "x; rm -rf ~", "m\nl"]


@pytest.mark.parametrize("value", HOSTILE)
def test_render_refuses_hostile_values(value):
    for field in ("model", "api_key_ref", "host", "vllm_version"):
        with pytest.raises(UserInputError, match="cannot be used safely"):
            render(ND, place(ND, CAT, 4, 1), REQ.model_copy(update={field: value}))


@pytest.mark.parametrize("value", HOSTILE)
def test_launcher_executes_nothing_from_hostile_env(tmp_path, value):
    marker = Path("/tmp/advisor-pwned")
    marker.unlink(missing_ok=True)
    sysfs = make_sysfs(tmp_path, {0: "0-47", 1: "48-95"}, EIGHT)
    env = _env_for(4, 0)
    env.update({"ADVISOR_MODEL": value, "ADVISOR_HOST": value, "ADVISOR_API_KEY_REF": value})
    r = _dry_run(sysfs, env)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert list(tmp_path.iterdir()) == [tmp_path / "sys"]  # nothing created beside the tree


def test_write_is_atomic_and_never_overwrites(tmp_path):
    files = render(ND, place(ND, CAT, 4, 1), REQ)
    out = tmp_path / "out"
    paths = write(files, out)
    assert len(paths) == len(files) and os.access(out / "vllm-launch.sh", os.X_OK)
    with pytest.raises(UserInputError, match="not an empty folder"):
        write(files, out)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".advisor-render-")]


def test_cli_render(cli, tmp_path):
    out = tmp_path / "r"
    r = cli("render", "-m", "llama-3-8b", "--hf-token-ref", "file:/etc/advisor/hf-token",
            "--ctx", "8192", "--instance",
            "azure:Standard_ND96isr_H100_v5", "--tp", "4", "--out", str(out),
            "--api-key-ref", "azure-kv:myvault/vllm-key", "--json")
    assert r.exit_code == 0, r.output
    assert (out / "env" / "vllm-1.env").exists()
    bad = cli("render", "-m", "llama-3-8b", "--hf-token-ref", "file:/etc/advisor/hf-token",
              "--ctx", "8192", "--instance",
              "azure:Standard_ND96isr_H100_v5", "--tp", "4", "--out", str(tmp_path / "s"))
    assert bad.exit_code == 2 and "--api-key-ref is needed" in bad.stderr
    big = cli("render", "-m", "llama-3.1-70b", "--hf-token-ref", "file:/etc/advisor/hf-token",
              "--ctx", "8192", "--instance", "aws:g6.2xlarge",
              "--tp", "1", "--out", str(tmp_path / "t"))
    assert big.exit_code == 2 and "does not fit" in big.stderr
    assert not (tmp_path / "t").exists() and not (tmp_path / "s").exists()


def test_cli_render_takes_the_top_recommendation(cli, tmp_path):
    out = tmp_path / "top"
    r = cli("render", "-m", "llama-3-8b", "--hf-token-ref", "file:/etc/advisor/hf-token",
            "--ctx", "8192", "--out", str(out), "--json")
    assert r.exit_code == 0, r.output
    v = __import__("json").loads(r.stdout)
    best = advisor.recommend("llama-3-8b", 8192, top=1)[0]
    assert v["instance"] == f"{best.provider}:{best.instance}" and v["tp"] == best.plan.tp
    assert "ADVISOR_API_KEY_REF=aws-ssm:/advisor/vllm-api-key" in (
        out / "env" / "vllm-0.env").read_text() or best.provider != "aws"


def test_cli_render_refuses_a_hostile_model(cli, tmp_path):
    r = cli("render", "-m", "evil/$(touch /tmp/advisor-pwned)", "--ctx", "8192", "--out",
            str(tmp_path / "h"), "--instance", "aws:p5.48xlarge", "--tp", "1")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "h").exists() and not Path("/tmp/advisor-pwned").exists()
