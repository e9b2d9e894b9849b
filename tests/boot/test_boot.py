"""The boot path, with the real thing: advisor's user-data is executed by real cloud-init (NoCloud)
under real systemd in a disposable Debian root (systemd-nspawn --boot over an overlay of the
root that tests/boot/build-root.sh builds), with only the GPU side faked: a sysfs tree, and
stand-ins for nvidia-smi, pip (installs nothing) and vllm (records argv, environment, user,
CPU affinity and memory policy from inside the process, and answers /health and an
authenticated /v1/models). Two plans: 8 GPUs as two TP-4 replicas, and one GPU.

The user-data is fed gzip-compressed, as AWS's launch sends it (real cloud-init inflates it), and
installs through advisor-install.sh from the hash-pinned lock for this root's Python (Debian 12's
3.11; the stand-in pip reads the lock). Two failures are proved loud: an install step that fails
(the stand-in pip refuses a package) ends cloud-init in error with the step named on the console
and in /var/lib/advisor/boot-status.json, and a vLLM that exits while loading is reported
`exited` within seconds, each restart again, not after TimeoutStartSec; the console the box
writes (nspawn's stdout) is read back with advisor.bootstatus, as ``advisor status`` reads a
cloud's serial console.

The binding is checked against this kernel's real NUMA nodes: the fake tree puts the GPUs on
the nodes the host has (two when it has two or more; on a one-node host every GPU hangs off
node 0, and the two-node launcher logic is covered by the launcher tests on fake trees).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

import advisor
from advisor.bootstatus import describe, parse
from advisor.render.cloudinit import RenderRequest, render

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("ADVISOR_BOOT_ROOT", "/var/tmp/advisor-boot/root-v2"))
BOOT_TIMEOUT_S = 150


def _real_nodes() -> dict[int, str]:
    base = Path("/sys/devices/system/node")
    out = {}
    for d in sorted(base.glob("node[0-9]*")):
        out[int(d.name[4:])] = (d / "cpulist").read_text().strip()
    return out or {0: f"0-{os.cpu_count() - 1}"}


def _cpus(cpulist: str) -> list[int]:
    out: list[int] = []
    for part in cpulist.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out += range(int(lo), int(hi) + 1)
        elif part:
            out.append(int(part))
    return out


#: .ci/run builds the root in the background while the suite runs and names the build's process
#: here: the boot tests (one xdist group, so one worker) wait for it; the rest of the suite does not
BUILDING_VAR = "ADVISOR_BOOT_ROOT_BUILDING"
#: build-root.sh takes 1-3 minutes here (53 s on 2026-12-08); a build still running after this
#: wait is taken as hung and the boot tests skip with that reason. The wait starts when the boot
#: group is handed out, after the fault sweeps and the providers' tests (tests/conftest.py), some
#: 4 minutes after .ci/run started the build: 5 more give it 9 in all, and a hung mirror costs
#: .ci/run's 10 minutes at most this, not 10 minutes
ROOT_WAIT_S = 300


def _root_ready() -> bool:
    return (ROOT / ".advisor-boot-root-v2").exists()


def _building() -> int | None:
    """The pid of a root build still running (not a zombie), named by .ci/run; None if none."""
    try:
        pid = int(os.environ.get(BUILDING_VAR, ""))
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ValueError, OSError, IndexError):
        return None
    return None if state in ("Z", "X") else pid


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the boot test needs root (it mounts an overlay and boots a container)"
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn is not installed (.ci/run installs systemd-container)"
    if not _root_ready() and _building() is None:
        return f"no boot root at {ROOT}: run tests/boot/build-root.sh (.ci/run does)"
    return None


def _wait_for_root(limit_s: float = ROOT_WAIT_S, poll_s: float = 2) -> bool:
    """Whether the root is there, once no named build is running any more (or after limit_s)."""
    deadline = time.monotonic() + limit_s
    while not _root_ready() and _building() is not None and time.monotonic() < deadline:
        time.sleep(poll_s)
    return _root_ready()


@pytest.fixture(scope="session")
def boot_root() -> Path:
    """The built root; waits while .ci/run's background build of it is still running."""
    if not _wait_for_root():
        pytest.skip(f"no boot root at {ROOT}: its build (pid {os.environ.get(BUILDING_VAR)}) "
                    f"ended without one or was still running after {ROOT_WAIT_S} s; "
                    "run tests/boot/build-root.sh")
    return ROOT


pytestmark = [pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
              pytest.mark.usefixtures("boot_root")]


class Box:
    """One booted container: an overlay over the shared root, torn down by stop()."""

    def __init__(self, tmp: Path, name: str) -> None:
        self.name = name
        self.tmp = tmp
        self.upper, self.work, self.merged = tmp / "upper", tmp / "work", tmp / "merged"
        for d in (self.upper, self.work, self.merged):
            d.mkdir(parents=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={ROOT},upperdir={self.upper},workdir={self.work}",
                        str(self.merged)], check=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tmp / "console.log"

    def put(self, path: str, text: str | bytes, mode: int = 0o644) -> Path:
        p = self.merged / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        p.chmod(mode)
        return p

    def console(self) -> str:
        """What the box wrote to its console so far (the serial console of a cloud)."""
        return self.log.read_bytes().decode(errors="replace")

    def cloud_init_status(self, timeout: float = BOOT_TIMEOUT_S) -> str:
        """``cloud-init status --long`` once cloud-init has finished."""
        end = time.monotonic() + timeout
        out = ""
        while time.monotonic() < end:
            try:
                out = self.sh("cloud-init", "status", "--long").stdout
            except AssertionError:  # systemd is not up yet
                time.sleep(0.5)
                continue
            if "status: running" not in out and "status: not run" not in out and out:
                return out
            time.sleep(1)
        raise AssertionError(f"cloud-init still running after {timeout} s: {out}")

    def boot(self) -> None:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                ["systemd-nspawn", "-q", "-D", str(self.merged), "--register=no", "--keep-unit",
                 f"--machine={self.name}", "--boot"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def leader(self) -> int:
        """PID (in this namespace) of the container's systemd."""
        assert self.proc is not None
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                return int(stat.parent.name)
        raise AssertionError("the container has no init process")

    def sh(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["nsenter", "-t", str(self.leader()), "-m", "-u", "-i", "-p",
                               "--", *cmd], capture_output=True, text=True, timeout=60,
                              check=False)

    def wait_for(self, paths: list[Path], timeout: float = BOOT_TIMEOUT_S) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(p.exists() and p.stat().st_size > 0 for p in paths):
                return
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.5)
        journal = self.sh("journalctl", "--no-pager", "-n", "80").stdout
        raise AssertionError(f"not there after {timeout} s: {paths}\n{journal}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # nspawn asks the container to power off
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(["umount", "-l", str(self.merged)], check=False)


def _offline_cloud_cfg(root: Path) -> str:
    """NoCloud only, and no apt: the packages advisor asks for are in the root already (the
    test is offline); no locale either: update-locale exits 255 in this minimal root (no
    generated locales), which would put cloud-init in error before advisor's install runs.
    Every other module of Debian's cloud.cfg runs as shipped, so that ``cloud-init status``
    says done, or error for advisor's own failure alone."""
    base = yaml.safe_load((root / "etc/cloud/cloud.cfg").read_text())
    final = [m for m in base["cloud_final_modules"] if m != "package-update-upgrade-install"]
    config = [m for m in base["cloud_config_modules"] if m != "locale"]
    return yaml.safe_dump({"datasource_list": ["NoCloud", "None"],
                           "cloud_config_modules": config, "cloud_final_modules": final})


def _http(url: str, key: str | None = None) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def fake_gpu_side(box: Box, gpus: list[tuple[str, int]]) -> None:
    """The GPU side, faked: a sysfs tree (GPUs on the given nodes, this host's real node CPU
    lists), nvidia-smi, and the pip/vllm stand-ins (installed by a stand-in ensurepip)."""
    nodes = _real_nodes()
    for bus, node in gpus:
        box.put(f"/opt/fake-sys/sys/bus/pci/devices/{bus}/numa_node", f"{node}\n")
        # an H100 SXM (3D controller of NVIDIA), for advisor topology / doctor on the host
        for attr, value in (("class", "0x030200"), ("vendor", "0x10de"), ("device", "0x2330")):
            box.put(f"/opt/fake-sys/sys/bus/pci/devices/{bus}/{attr}", value + "\n")
    for n, cpus in nodes.items():
        box.put(f"/opt/fake-sys/sys/devices/system/node/node{n}/cpulist", cpus + "\n")
    box.put("/opt/fake-sys/bus-ids", "".join(f"00000000:{b[5:].upper()}\n" for b, _ in gpus))
    box.put("/etc/systemd/system/vllm@.service.d/10-boot-test.conf",
            "[Service]\nEnvironment=ADVISOR_SYSFS_ROOT=/opt/fake-sys\n")
    box.put("/usr/local/bin/nvidia-smi", (HERE / "standins/nvidia-smi").read_text(), 0o755)
    for s in ("vllm", "pip"):
        box.put(f"/usr/local/lib/advisor-standins/{s}", (HERE / "standins" / s).read_text(),
                0o755)
    py = next((box.merged / "usr/lib").glob("python3.[0-9]*"))
    for f in ("__init__.py", "__main__.py"):
        box.put(f"/usr/lib/{py.name}/ensurepip/{f}", (HERE / "standins/ensurepip" / f).read_text())


def _root_python() -> str:
    """The boot root's python3, major.minor (Debian 12: 3.11)."""
    py = next((ROOT / "usr/lib").glob("python3.[0-9]*"))
    return py.name.removeprefix("python")


def _render(model: str, ctx: int, instance: str, **kw: object) -> advisor.RenderResult:
    """render_files' layout, rendered again for the root's Python (the lock is per Python)."""
    res = advisor.render_files(model, ctx, instance=instance, **kw)  # type: ignore[arg-type]
    p = json.loads(res.files["plan.json"])
    req = RenderRequest(model=p["model"], max_model_len=ctx, vllm_version=p["vllm_version"],
                        port=p["ports"][0], host=p["host"], api_key_ref=p["api_key_ref"],
                        hf_token_ref=p["hf_token_ref"], start_timeout_s=p["start_timeout_s"],
                        python=_root_python())
    files = render(res.instance, res.plan, req)
    assert set(files) == set(res.files)
    return res.model_copy(update={"files": files})


def _boot_plan(tmp: Path, name: str, files: dict[str, str], gpus: list[tuple[str, int]],
               key: str, token: str | None, switches: dict[str, str] | None = None) -> Box:
    box = Box(tmp, name)
    # gzip-compressed, as AWS's launch sends it: cloud-init inflates it itself
    seed = gzip.compress(files["user-data"].encode(), mtime=0)
    box.put("/var/lib/cloud/seed/nocloud/user-data", seed)
    box.put("/var/lib/cloud/seed/nocloud/meta-data",
            f"instance-id: {name}\nlocal-hostname: {name}\n")
    box.put("/etc/cloud/cloud.cfg.d/90-advisor-boot-test.cfg", _offline_cloud_cfg(ROOT))
    fake_gpu_side(box, gpus)
    for name_, value in (switches or {}).items():  # what the stand-ins are told to do
        box.put(f"/etc/advisor-standin/{name_}", value + "\n")
    # the operator's secrets, as files (a cloud's secret store in production); readable by the
    # service user, which cloud-init creates only at boot
    box.put("/etc/advisor/secrets/api-key", key + "\n", 0o644)
    if token is not None:
        box.put("/etc/advisor/secrets/hf-token", token + "\n", 0o644)
    box.boot()
    return box


def _expected(gpus: list[tuple[str, int]], replica_gpus: list[list[int]]
              ) -> list[tuple[int, str, int]]:
    """(node, cpulist, OMP threads) per replica, from the fake tree and the real kernel."""
    nodes = _real_nodes()
    node_of = [n for _, n in gpus]
    out = []
    for r in replica_gpus:
        node = node_of[r[0]]
        sharing = sum(1 for g in replica_gpus if node_of[g[0]] == node)
        out.append((node, nodes[node], len(_cpus(nodes[node])) // sharing))
    return out


def _secrets_nowhere(box: Box, values: list[str]) -> None:
    """No secret in any file the boot wrote (the operator's secret files aside)."""
    for p in box.upper.rglob("*"):
        if not p.is_file() or p.is_symlink() or "etc/advisor/secrets" in str(p):
            continue
        if p.stat().st_size > 50_000_000:
            continue
        data = p.read_bytes()
        for v in values:
            assert v.encode() not in data, f"secret found in {p.relative_to(box.upper)}"


def _check_replicas(box: Box, plan_ports: list[int], expected: list[tuple[int, str, int]],
                    replica_gpus: list[list[int]], tp: int, ctx: int, key: str,
                    token: str | None) -> None:
    passwd = (box.merged / "etc/passwd").read_text()
    line = next(x for x in passwd.splitlines() if x.startswith("vllm:"))
    uid, home = int(line.split(":")[2]), line.split(":")[5]
    assert home == "/var/lib/vllm"
    for port, (node, cpulist, omp), gpus in zip(plan_ports, expected, replica_gpus, strict=True):
        rec = json.loads((box.upper / f"var/lib/vllm/standin/vllm-{port}.json").read_text())
        assert rec["uid"] == uid  # runs as the service user
        assert rec["hf_home"].startswith("/var/lib/vllm/") and rec["hf_home_writable"]
        assert rec["affinity"] == _cpus(cpulist), rec  # the kernel's view, from inside
        assert rec["mems_allowed_list"] == str(node)
        assert f"bind:{node}" in rec["numa_policies"], rec["numa_policies"]
        argv = rec["argv"]
        assert argv[1:3] == ["serve", rec["argv"][2]]
        assert argv[argv.index("--port") + 1] == str(port)
        assert argv[argv.index("--tensor-parallel-size") + 1] == str(tp)
        assert argv[argv.index("--max-model-len") + 1] == str(ctx)
        assert rec["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, gpus))
        assert rec["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert rec["env"]["OMP_NUM_THREADS"] == str(omp)
        assert rec["api_key_sha256"] == hashlib.sha256(key.encode()).hexdigest()
        assert rec["hf_token_sha256"] == (hashlib.sha256(token.encode()).hexdigest()
                                          if token else "")
        assert not rec["key_in_argv"]
        assert _http(f"http://127.0.0.1:{port}/health") == 200
        assert _http(f"http://127.0.0.1:{port}/v1/models") == 401
        assert _http(f"http://127.0.0.1:{port}/v1/models", key) == 200
    # active once ExecStartPost saw /health answer
    names = [f"vllm@{i}.service" for i in range(len(plan_ports))]
    end = time.monotonic() + 30
    while True:
        units = box.sh("systemctl", "show", "-p", "ActiveState", "--value", *names).stdout.split()
        if units == ["active"] * len(names) or time.monotonic() > end:
            break
        time.sleep(0.5)
    assert units == ["active"] * len(names), box.sh("systemctl", "status", *names).stdout
    unit = (box.merged / "etc/systemd/system/vllm@.service").read_text()
    env = (box.merged / "etc/advisor/vllm-0.env").read_text()
    for text in (unit, env):
        assert key not in text and (token is None or token not in text)


@pytest.fixture
def boxes(tmp_path):
    made: list[Box] = []
    yield made
    for b in made:
        b.stop()


def test_eight_gpus_two_tp4_replicas_boot_bound_and_keyed(tmp_path, boxes):
    cat = advisor.load_catalog()
    nodes = sorted(_real_nodes())[:2]
    per = 8 // len(nodes)
    gpus = [(f"0000:{0x18 + 0x10 * i:02x}:00.0", nodes[i // per]) for i in range(8)]
    key, token = "k-" + secrets.token_hex(16), "hf_" + secrets.token_hex(17)
    ports = [18300, 18301]
    res = _render("llama-3-8b", 4096, "azure:Standard_ND96isr_H100_v5",
                  tp=4, port=ports[0], catalog=cat,
                  api_key_ref="file:/etc/advisor/secrets/api-key",
                  hf_token_ref="file:/etc/advisor/secrets/hf-token")
    assert res.plan.replicas == 2 and res.plan.tp == 4
    t0 = time.monotonic()
    box = _boot_plan(tmp_path, "adv-boot-tp4", res.files, gpus, key, token)
    boxes.append(box)
    box.wait_for([box.upper / f"var/lib/vllm/standin/vllm-{p}.json" for p in ports])
    booted_s = time.monotonic() - t0
    replica_gpus = [r.gpus for r in res.plan.replica_layout]
    _check_replicas(box, ports, _expected(gpus, replica_gpus), replica_gpus, 4, 4096, key,
                    token)
    # both replicas started at once, and cloud-init's final stage did not wait for them
    pip_log = (box.upper / "var/log/advisor-standin-pip.log").read_text()
    assert ("install --no-cache-dir --require-hashes --no-deps -r /opt/advisor/requirements.lock"
            in pip_log and "  vllm==" in pip_log)
    assert "status: done" in box.cloud_init_status()
    # what cloud-init was given was the gzip bytes (it keeps them as it read them), and it ran
    seed = (box.merged / "var/lib/cloud/seed/nocloud/user-data").read_bytes()
    assert seed[:2] == b"\x1f\x8b"
    assert (box.upper / f"var/lib/cloud/instances/{box.name}/user-data.txt").read_bytes() == seed
    _serving_everywhere(box, 2)
    _secrets_nowhere(box, [key, token])
    assert booted_s < BOOT_TIMEOUT_S


def _serving_everywhere(box: Box, replicas: int) -> None:
    """The install said done, each replica serving: in the state file and on the console."""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        said = describe(parse(box.console()), replicas=replicas)
        if said == "serving":
            break
        time.sleep(0.5)
    assert said == "serving", box.console()[-3000:]
    kept = json.loads((box.upper / "var/lib/advisor/boot-status.json").read_text())
    assert (kept["step"], kept["state"]) == ("install", "done")
    assert sorted(kept["replicas"]) == [str(i) for i in range(replicas)]
    assert all(r["state"] == "serving" for r in kept["replicas"].values())


def test_one_gpu_boots_and_an_empty_key_stops_it(tmp_path, boxes):
    cat = advisor.load_catalog()
    node = sorted(_real_nodes())[-1]
    gpus = [("0000:38:00.0", node)]
    key = "k-" + secrets.token_hex(16)
    port = 18400
    res = _render("qwen3-8b", 8192, "aws:g6e.2xlarge", port=port, catalog=cat,
                  api_key_ref="file:/etc/advisor/secrets/api-key")
    box = _boot_plan(tmp_path, "adv-boot-1gpu", res.files, gpus, key, None)
    boxes.append(box)
    record = box.upper / f"var/lib/vllm/standin/vllm-{port}.json"
    box.wait_for([record])
    _check_replicas(box, [port], _expected(gpus, [[0]]), [[0]], 1, 8192, key, None)
    _secrets_nowhere(box, [key])
    # the secret store now answers with nothing: the replica must not come back keyless
    (box.merged / "etc/advisor/secrets/api-key").write_text("\n")
    record.unlink()
    box.sh("systemctl", "restart", "--no-block", "vllm@0.service")
    end = time.monotonic() + 30
    journal = ""
    while time.monotonic() < end:
        journal = box.sh("journalctl", "--no-pager", "-u", "vllm@0.service").stdout
        if "is empty; refusing to start without it" in journal:
            break
        time.sleep(0.5)
    assert "the API key from file:/etc/advisor/secrets/api-key is empty" in journal, journal
    assert not record.exists()  # vllm was never started without a key
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)


def test_a_failing_install_step_fails_cloud_init_and_is_named(tmp_path, boxes):
    node = sorted(_real_nodes())[-1]
    gpus = [("0000:38:00.0", node)]
    res = _render("qwen3-8b", 8192, "aws:g6e.2xlarge", port=18500,
                  catalog=advisor.load_catalog(),
                  api_key_ref="file:/etc/advisor/secrets/api-key")
    box = _boot_plan(tmp_path, "adv-boot-pipfail", res.files, gpus, "k-" + secrets.token_hex(8),
                     None, switches={"pip-fail": "vllm"})
    boxes.append(box)
    status = box.cloud_init_status()
    # cloud-init ran the script, saw it fail, and says so
    assert "status: error" in status and "scripts-user" in status, status
    kept = json.loads((box.upper / "var/lib/advisor/boot-status.json").read_text())
    assert (kept["step"], kept["state"], kept["exit"]) == ("install vllm", "failed", 1)
    assert kept["tail"] == "ERROR: No matching distribution found for vllm==0.11.0"
    log = (box.upper / "var/log/advisor-install.log").read_text()
    assert "== install vllm: " in log and "== permissions" not in log  # it stopped there
    # the console, read as advisor status reads a cloud's serial console
    said = describe(parse(box.console()))
    print(f"\n{status.strip()}\nadvisor status would say: {said}")
    assert said == ("failed: install vllm (exit 1): ERROR: No matching distribution found for "
                    "vllm==0.11.0"), box.console()[-3000:]
    assert box.sh("systemctl", "is-enabled", "vllm@0.service").stdout.strip() != "enabled"


def test_a_vllm_that_exits_is_reported_at_once_and_at_each_restart(tmp_path, boxes):
    node = sorted(_real_nodes())[-1]
    gpus = [("0000:38:00.0", node)]
    port = 18600
    res = _render("qwen3-8b", 8192, "aws:g6e.2xlarge", port=port, catalog=advisor.load_catalog(),
                  api_key_ref="file:/etc/advisor/secrets/api-key")
    assert res.plan.replicas == 1
    box = _boot_plan(tmp_path, "adv-boot-exit", res.files, gpus, "k-" + secrets.token_hex(8),
                     None, switches={"vllm-exit": "3"})
    boxes.append(box)
    started = box.upper / f"var/lib/vllm/standin/started-{port}"
    box.wait_for([started])
    t_start = float(started.read_text().split()[0])
    end = time.monotonic() + 30
    seen = None
    while time.monotonic() < end:
        if '"state":"exited"' in box.console():
            seen = time.time()
            break
        time.sleep(0.2)
    assert seen is not None, box.console()[-3000:]
    took = seen - t_start
    timeout = res.files["vllm@.service"].split("TimeoutStartSec=")[1].split()[0]
    print(f"\nvLLM exited -> reported on the console in {took:.1f} s "
          f"(TimeoutStartSec is {timeout} s)")
    assert took < 30
    said = describe(parse(box.console()))
    assert said == ("failed: replica 0 (vllm) (exit 3): RuntimeError: stand-in vllm told to exit "
                    "3"), said
    journal = box.sh("journalctl", "--no-pager", "-u", "vllm@0.service").stdout
    # systemd handed the health check the main PID ($MAINPID of ExecStartPost, Type=exec)
    import re

    assert re.search(r"advisor-health: vLLM \(pid \d+\) exited before /health answered",
                     journal), journal
    assert '"state":"exited"' in journal and '"replica":0' in journal
    kept = json.loads((box.upper / "var/lib/advisor/boot-status.json").read_text())
    assert kept["state"] == "done" and kept["replicas"]["0"]["exit"] == 3
    # Restart=on-failure brings it back after RestartSec, and each failure is reported again
    end = time.monotonic() + 45
    while time.monotonic() < end and len(_exited(box)) < 2:
        time.sleep(0.5)
    assert len(started.read_text().split()) >= 2
    assert len(_exited(box)) >= 2, box.console()[-3000:]


def _exited(box: Box) -> set[str]:
    """The distinct `exited` events on the console (one per failure of the replica)."""
    return {line.split("advisor-boot: ", 1)[1].strip() for line in box.console().splitlines()
            if "advisor-boot: " in line and '"state":"exited"' in line}
