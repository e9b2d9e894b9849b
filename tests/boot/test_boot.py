"""The boot path, with the real thing: advisor's user-data is executed by real cloud-init (NoCloud)
under real systemd in a disposable Debian root (systemd-nspawn --boot over an overlay of the
root that tests/boot/build-root.sh builds), with only the GPU side faked: a sysfs tree, and
stand-ins for nvidia-smi, pip (installs nothing) and vllm (records argv, environment, user,
CPU affinity and memory policy from inside the process, and answers /health and an
authenticated /v1/models). Two plans: 8 GPUs as two TP-4 replicas, and one GPU.

The binding is checked against this kernel's real NUMA nodes: the fake tree puts the GPUs on
the nodes the host has (two when it has two or more; on a one-node host every GPU hangs off
node 0, and the two-node launcher logic is covered by the launcher tests on fake trees).
"""

from __future__ import annotations

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


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the boot test needs root (it mounts an overlay and boots a container)"
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn is not installed (.ci/run installs systemd-container)"
    if not (ROOT / ".advisor-boot-root-v2").exists():
        return f"no boot root at {ROOT}: run tests/boot/build-root.sh (.ci/run does)"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


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

    def put(self, path: str, text: str, mode: int = 0o644) -> Path:
        p = self.merged / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(mode)
        return p

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
    test is offline); every other module of Debian's cloud.cfg runs as shipped."""
    base = yaml.safe_load((root / "etc/cloud/cloud.cfg").read_text())
    final = [m for m in base["cloud_final_modules"] if m != "package-update-upgrade-install"]
    return yaml.safe_dump({"datasource_list": ["NoCloud", "None"],
                           "cloud_final_modules": final})


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


def _boot_plan(tmp: Path, name: str, files: dict[str, str], gpus: list[tuple[str, int]],
               key: str, token: str | None) -> Box:
    box = Box(tmp, name)
    box.put("/var/lib/cloud/seed/nocloud/user-data", files["user-data"])
    box.put("/var/lib/cloud/seed/nocloud/meta-data",
            f"instance-id: {name}\nlocal-hostname: {name}\n")
    box.put("/etc/cloud/cloud.cfg.d/90-advisor-boot-test.cfg", _offline_cloud_cfg(ROOT))
    fake_gpu_side(box, gpus)
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
    res = advisor.render_files("llama-3-8b", 4096, instance="azure:Standard_ND96isr_H100_v5",
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
    assert "vllm==" in pip_log
    _secrets_nowhere(box, [key, token])
    assert booted_s < BOOT_TIMEOUT_S


def test_one_gpu_boots_and_an_empty_key_stops_it(tmp_path, boxes):
    cat = advisor.load_catalog()
    node = sorted(_real_nodes())[-1]
    gpus = [("0000:38:00.0", node)]
    key = "k-" + secrets.token_hex(16)
    port = 18400
    res = advisor.render_files("qwen3-8b", 8192, instance="aws:g6e.2xlarge", port=port,
                               catalog=cat, api_key_ref="file:/etc/advisor/secrets/api-key")
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
