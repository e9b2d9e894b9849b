"""Rendering: the files, their validators (cloud-init schema, systemd-analyze, shellcheck), the
launcher's exact command line on fake sysfs trees, and hostile input."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import advisor
from advisor import UserInputError
from advisor.clouds.registry import CLOUDS, with_secret_fetch
from advisor.core.layouts import place
from advisor.render.cloudinit import (
    RenderRequest,
    render,
    replica_env,
    strip_comments,
    templates_dir,
    unit,
    write,
)
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
    for s in ("vllm-launch.sh", "vllm-health.sh", "vllm-report.sh"):
        shutil.copy(templates_dir() / s, bin_dir / s)
        (bin_dir / s).chmod(0o755)
    text = unit(bin_dir=str(bin_dir), env_dir=str(tmp_path))
    for name in ("vllm@.service", "vllm@0.service"):
        (tmp_path / name).write_text(text)
        r = subprocess.run([exe, "verify", str(tmp_path / name)], capture_output=True, text=True,
                           check=False)
        assert r.returncode == 0 and r.stderr.strip() == "" and r.stdout.strip() == "", r.stderr
    assert "Restart=on-failure" in text and "User=vllm" in text


SCRIPTS = ("vllm-launch.sh", "vllm-health.sh", "vllm-report.sh", "advisor-install.sh")


def test_scripts_pass_shellcheck(tmp_path):
    exe = need("shellcheck")
    scripts = [str(templates_dir() / s) for s in SCRIPTS]
    r = subprocess.run([exe, *scripts], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout
    # and as the user-data carries them: without their comment lines
    files = {f["path"]: f["content"] for f in yaml.safe_load(
        render(ND, place(ND, CAT, 4, 1), REQ)["user-data"])["write_files"]}
    stripped = []
    for s in SCRIPTS:
        text = files[f"/opt/advisor/bin/{s}"]
        template = (templates_dir() / s).read_text()
        if s == "vllm-launch.sh":  # with the instance's cloud's secret reader put in
            template = with_secret_fetch(template, ND.provider)
        assert text == strip_comments(template)
        assert text.startswith("#!/usr/bin/env bash\n") and "\n#" not in text
        (tmp_path / s).write_text(text)
        stripped.append(str(tmp_path / s))
    # every cloud's launcher as rendered, whole and stripped
    for cloud in CLOUDS:
        whole = with_secret_fetch((templates_dir() / "vllm-launch.sh").read_text(), cloud)
        for name, text in ((f"launch-{cloud}.sh", whole),
                           (f"launch-{cloud}-stripped.sh", strip_comments(whole))):
            (tmp_path / name).write_text(text)
            stripped.append(str(tmp_path / name))
    r = subprocess.run([exe, *stripped], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout


def test_stripped_launcher_runs_the_same(tmp_path):
    sysfs = make_sysfs(tmp_path, {0: "0-47", 1: "48-95"}, EIGHT)
    short = tmp_path / "vllm-launch.sh"
    short.write_text(strip_comments(LAUNCH.read_text()))
    assert len(short.read_text()) < len(LAUNCH.read_text()) * 0.8
    for tp, i, extra in ((4, 1, {}), (8, 0, {}), (8, 0, {"ADVISOR_VLLM_NUMA_BIND": "1"}),
                         (1, 5, {"ADVISOR_ROLE": "head", "ADVISOR_PP": "2",
                                 "ADVISOR_NODES": "2"})):
        env = {**_env_for(tp, i), **extra}
        full = _dry_run(sysfs, env)
        short_run = _dry_run(sysfs, env, short)
        assert full.returncode == 0, full.stderr
        assert (short_run.returncode, short_run.stdout, short_run.stderr) == (
            full.returncode, full.stdout, full.stderr)


def test_user_data_runs_one_install_script_on_the_lock():
    files = render(ND, place(ND, CAT, 4, 1), REQ)
    doc = yaml.safe_load(files["user-data"])
    assert doc["runcmd"] == [["/opt/advisor/bin/advisor-install.sh", "3.10", "vllm@0.service",
                              "vllm@1.service"]]
    by_path = {f["path"]: f for f in doc["write_files"]}
    lock = by_path["/opt/advisor/requirements.lock"]
    assert lock["permissions"] == "0644"
    from advisor.render.envlock import lock_text

    full = lock_text("0.11.0", "3.10")
    assert lock["content"] == full.split("\n")[0] + "\n" + strip_comments(full)
    assert lock["content"].startswith("# vllm-0.11.0-cp310.txt: ")
    assert "--hash=sha256:" in lock["content"] and "\nvllm==0.11.0 " in lock["content"]
    assert by_path["/opt/advisor/bin/advisor-install.sh"]["permissions"] == "0755"
    install = " ".join((templates_dir() / "advisor-install.sh").read_text()
                       .replace("\\\n", " ").split())
    assert "pip\" install --no-cache-dir --require-hashes --no-deps -r \"$lock\"" in install
    # the lock follows the image's Python
    other = render(ND, place(ND, CAT, 4, 1), REQ.model_copy(update={"python": "3.11"}))
    assert yaml.safe_load(other["user-data"])["runcmd"][0][1] == "3.11"
    with pytest.raises(UserInputError, match="python"):
        render(ND, place(ND, CAT, 4, 1), REQ.model_copy(update={"python": "3.10; id"}))


def _dry_run(sysfs: Path, env: dict[str, str], launcher: Path = LAUNCH
             ) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "ADVISOR_DRY_RUN": "1", "ADVISOR_SYSFS_ROOT": str(sysfs),
            **env}
    return subprocess.run(["bash", str(launcher)], capture_output=True, text=True, env=full,
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
    # no lock ships for 0.21.0: the env files render without the user-data
    new = render(ND, plan, REQ.model_copy(update={"vllm_version": "0.21.0"}),
                 user_data=False)["env/vllm-0.env"]
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
    # a host is an IP address or nothing; a key reference that is no reference is not echoed
    # (it may be the secret itself)
    said = {"model": "cannot be used safely", "vllm_version": "cannot be used safely",
            "host": "is not an IP address", "api_key_ref": "is not a reference"}
    for field, words in said.items():
        with pytest.raises(UserInputError, match=words) as e:
            render(ND, place(ND, CAT, 4, 1), REQ.model_copy(update={field: value}))
        if field == "api_key_ref":
            assert value not in str(e.value)


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


# -- the install script and the boot reporter, on fakes (the boot test runs them for real) ----
def _fake_bin(tmp: Path, python: str = "3.10.12", pip_fails: bool = False) -> Path:
    fake = tmp / "fakebin"
    fake.mkdir()
    pip = ("#!/bin/sh\necho 'Collecting vllm==0.11.0'\n"
           + ("echo 'ERROR: No matching distribution found for vllm==0.11.0' >&2\nexit 1\n"
              if pip_fails else "echo \"pip $*\" >>\"$ADVISOR_CALLS\"\n"))
    scripts = {
        "python3": f"""#!/bin/sh
if [ "$1" = --version ]; then echo 'Python {python}'; exit 0; fi
echo "python3 $*" >>"$ADVISOR_CALLS"
mkdir -p "$3/bin" && cat >"$3/bin/pip" <<'PIP'
{pip}PIP
chmod +x "$3/bin/pip"
""",
        "systemctl": '#!/bin/sh\necho "systemctl $*" >>"$ADVISOR_CALLS"\n',
        "chown": '#!/bin/sh\necho "chown $*" >>"$ADVISOR_CALLS"\n',
        "journalctl": ("#!/bin/sh\nprintf '%s\\n' 'loading weights' "
                       "'RuntimeError: \"boom\" \\\\ in\tmodel' "
                       "'advisor-health: vLLM (pid 5) exited before /health answered'\n"),
    }
    for name, text in scripts.items():
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for s in ("advisor-install.sh", "vllm-report.sh"):
        shutil.copy(templates_dir() / s, bin_dir / s)
        (bin_dir / s).chmod(0o755)
    return fake


def _run(tmp: Path, fake: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    full = {"PATH": f"{fake}:{os.environ['PATH']}", "ADVISOR_CALLS": str(tmp / "calls"),
            "ADVISOR_VENV": str(tmp / "venv"), "ADVISOR_LOCK": str(tmp / "lock"),
            "ADVISOR_INSTALL_LOG": str(tmp / "install.log"), "ADVISOR_ENV_DIR": str(tmp / "etc"),
            "ADVISOR_STATE_DIR": str(tmp / "state"), "ADVISOR_CONSOLE": str(tmp / "console"),
            **(env or {})}
    (tmp / "console").touch()
    return subprocess.run(["bash", *args], capture_output=True, text=True, env=full,
                          timeout=60, check=False)


def test_install_script_runs_named_steps_and_reports_done(tmp_path):
    import json

    from advisor.bootstatus import describe, parse

    fake = _fake_bin(tmp_path)
    r = _run(tmp_path, fake, str(tmp_path / "bin/advisor-install.sh"), "3.10", "vllm@0.service",
             "vllm@1.service")
    assert r.returncode == 0, r.stderr
    status = parse(r.stdout)
    events = [line for line in r.stdout.splitlines() if line.startswith("advisor-boot: ")]
    steps = [json.loads(e.split(": ", 1)[1])["step"] for e in events]
    assert steps == ["check python", "create venv", "install vllm", "permissions",
                     "reload systemd", "start replicas", "install"]
    assert status.install is not None and status.install.state == "done"
    assert describe(status) == "booting: starting vllm"
    # the console saw the same lines; the state file keeps the latest
    assert (tmp_path / "console").read_text() == "".join(e + "\n" for e in events)
    kept = json.loads((tmp_path / "state/boot-status.json").read_text())
    assert kept["state"] == "done" and kept["replicas"] == {}
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[1] == (f"pip install --no-cache-dir --require-hashes --no-deps -r "
                        f"{tmp_path / 'lock'}")
    assert calls[-2:] == ["systemctl enable vllm@0.service vllm@1.service",
                          "systemctl start --no-block vllm@0.service vllm@1.service"]
    assert "== install vllm: " in (tmp_path / "install.log").read_text()


@pytest.mark.parametrize("case", ["pip", "python"])
def test_install_script_stops_at_the_first_failing_step(tmp_path, case):
    import json

    from advisor.bootstatus import describe, parse

    fake = _fake_bin(tmp_path, python="3.11.2" if case == "python" else "3.10.12",
                     pip_fails=case == "pip")
    r = _run(tmp_path, fake, str(tmp_path / "bin/advisor-install.sh"), "3.10", "vllm@0.service")
    assert r.returncode == 1
    said = describe(parse(r.stdout))
    calls = (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""
    if case == "pip":
        assert said == ("failed: install vllm (exit 1): ERROR: No matching distribution found "
                        "for vllm==0.11.0")
    else:
        assert said == ("failed: check python (exit 1): python3 is 3.11 but the lock is for "
                        "Python 3.10: render for this image with python=3.11")
        assert "venv" not in calls
    assert "systemctl" not in calls  # nothing after the failed step ran
    kept = json.loads((tmp_path / "state/boot-status.json").read_text())
    assert kept["state"] == "failed" and kept["exit"] == 1
    assert "failed (exit 1); see" in r.stderr


def test_reporter_events_and_the_kept_state(tmp_path):
    import json

    from advisor.bootstatus import describe, parse, parse_event

    fake = _fake_bin(tmp_path)
    report = str(tmp_path / "bin/vllm-report.sh")
    _run(tmp_path, fake, report, "install", "done", "install")
    serving = _run(tmp_path, fake, report, "serving", "0")
    assert serving.returncode == 0
    ev = parse_event(serving.stdout)
    assert ev is not None and (ev.state, ev.replica, ev.step) == ("serving", 0, "vllm")
    died = _run(tmp_path, fake, report, "stopped", "1", env={
        "SERVICE_RESULT": "exit-code", "EXIT_CODE": "exited", "EXIT_STATUS": "3"})
    ev = parse_event(died.stdout)
    # the process's own last line, not the health check's; quotes, backslash, tab survive
    assert ev is not None and (ev.state, ev.replica, ev.exit) == ("exited", 1, 3)
    assert ev.tail == 'RuntimeError: "boom" \\\\ inmodel'
    killed = parse_event(_run(tmp_path, fake, report, "stopped", "1", env={
        "SERVICE_RESULT": "signal", "EXIT_CODE": "killed", "EXIT_STATUS": "KILL"}).stdout)
    assert killed is not None and killed.exit == 137
    # killed (the OOM killer, a timeout's SIGTERM): its last words are not its own, so the
    # health check's line says what was seen
    assert killed.tail == ("killed by SIGKILL: advisor-health: vLLM (pid 5) exited before "
                           "/health answered")
    # a stop on request is no failure: nothing is said
    quiet = _run(tmp_path, fake, report, "stopped", "0", env={"SERVICE_RESULT": "success"})
    assert quiet.stdout == "" and quiet.returncode == 0
    kept = json.loads((tmp_path / "state/boot-status.json").read_text())
    assert kept["state"] == "done" and kept["replicas"]["0"]["state"] == "serving"
    assert kept["replicas"]["1"]["exit"] == 137
    assert describe(parse((tmp_path / "console").read_text())).startswith(
        "failed: replica 1 (vllm) (exit 137): killed by SIGKILL")
    # a long tail is cut to one line of what advisor.bootstatus keeps
    from advisor.bootstatus import TAIL_MAX

    long = _run(tmp_path, fake, report, "install", "failed", "install vllm", "2",
                "x" * 5000 + "\nsecond line")
    ev = parse_event(long.stdout)
    assert ev is not None and ev.tail == "x" * TAIL_MAX and long.stdout.count("\n") == 1


# --- the start-up budget follows the weights a replica downloads ----------------------------


@pytest.mark.parametrize(("model", "instance"), [("qwen2.5-72b", "aws:p5.48xlarge"),
                                                 ("qwen3-8b", "aws:g6e.2xlarge")])
def test_start_timeout_covers_the_replicas_weights_at_the_stated_rate(model, instance):
    """A replica may take START_FIXED_S plus its weights (bf16, its TP x PP GPUs together) pulled
    at START_DOWNLOAD_MIB_S; the unit's TimeoutStartSec and the health check's tries (one per
    2 s) both carry it. Weight bytes are counted here from the parameter count, not by the code
    under test: a GiB/MiB slip makes a 72B replica time out while still downloading."""
    from advisor.render.cloudinit import START_DOWNLOAD_MIB_S, START_FIXED_S

    r = advisor.render_files(model, 8192, instance=instance,
                             api_key_ref="aws-ssm:/advisor/key", allow_small_host=True)
    spec = advisor.model_spec(model)
    assert spec.torch_dtype == "bfloat16"
    replica_bytes = spec.param_counts()["total"] * 2  # the whole model: one replica holds it all
    need_s = START_FIXED_S + replica_bytes / (START_DOWNLOAD_MIB_S * 2**20)
    timeout = int(re.search(r"TimeoutStartSec=(\d+)", r.files["vllm@.service"]).group(1))
    assert max(1800, need_s) <= timeout <= max(1800, need_s) + 60 + 1
    tries = int(re.search(r"ADVISOR_HEALTH_TRIES=(\d+)", r.files["env/vllm-0.env"]).group(1))
    assert tries == timeout // 2
    if model == "qwen2.5-72b":  # 135 GiB at 50 MiB/s is 46 min: more than the 30 min floor
        assert timeout > 3600


def test_the_unit_is_hardened_below_systemd_analyzes_exposure_of_5(tmp_path):
    """`systemd-analyze security` on the rendered unit (offline: the file as written): below
    5.0 (it was 8.5 "EXPOSED"); the boot tests (tests/boot) start the same unit and serve."""
    import re
    import shutil

    from advisor.render.cloudinit import unit

    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze is not installed (.ci/run installs systemd)")
    (tmp_path / "vllm@0.service").write_text(unit())
    r = subprocess.run([exe, "security", "--offline=true", str(tmp_path / "vllm@0.service")],
                       capture_output=True, text=True, timeout=60, check=False)
    m = re.search(r"Overall exposure level for vllm@0\.service: (\d+\.\d+)", r.stdout + r.stderr)
    assert m, r.stdout[-500:] + r.stderr[-500:]
    assert float(m.group(1)) < 5.0, m.group(0)
    text = unit()
    for kept in ("NoNewPrivileges=yes", "CapabilityBoundingSet=\n", "ProtectSystem=strict"):
        assert kept in text
    assert "PrivateDevices" not in text  # the GPUs are devices
    assert "MemoryDenyWriteExecute" not in text  # Triton and CUDA JIT need W+X pages
