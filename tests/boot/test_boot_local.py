"""``render --target local``'s install.sh, run for real: the files rendered from a probe are
copied into a booted disposable Debian root (systemd-nspawn, as in test_boot.py, with
cloud-init disabled: a server you have runs no user-data) and ``install.sh`` is run there as
root. It must stop with one line while the API key file is missing, and again while the
service user cannot read it; then install, and every ``vllm@i`` must come up active, as the
service user, bound to its GPUs' node (the kernel's affinity and memory policy from inside the
process), keyed, and exactly as ``--print`` said. A second layout installed over the first
stops the replica it no longer has.

Only the GPU side is faked (a sysfs tree, nvidia-smi, pip and vllm stand-ins); the GPUs are put
on the host's real NUMA nodes, as in test_boot.py.
"""

from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path

import pytest
from tests.boot.test_boot import (
    BOOT_TIMEOUT_S,
    HERE,
    ROOT,
    Box,
    _check_replicas,
    _expected,
    _real_nodes,
    _skip_reason,
    boot_root,  # noqa: F401 - the fixture the marks below use
    fake_gpu_side,
)
from tests.test_topology import make_sysfs

import advisor

pytestmark = [pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
              pytest.mark.usefixtures("boot_root")]

LAYER = {"gpus.yaml": """
    gpus:
      - id: H100-SXM
        pci_device_ids: ["0x2330"]
"""}
FILES = "/root/advisor-local"


def _fake_gpu_side(box: Box, gpus: list[tuple[str, int]]) -> None:
    """What test_boot._boot_plan puts in the root for the GPUs, without the cloud-init seed."""
    fake_gpu_side(box, gpus)
    box.put("/etc/cloud/cloud-init.disabled", "")


def _put_files(box: Box, files: dict[str, str], where: str) -> None:
    target = box.merged / where.lstrip("/")
    if target.exists():
        shutil.rmtree(target)
    for name, text in files.items():
        box.put(f"{where}/{name}", text, 0o755 if name.endswith(".sh") else 0o644)


def _up(box: Box) -> None:
    end = time.monotonic() + BOOT_TIMEOUT_S
    state = ""
    while time.monotonic() < end:
        try:
            state = box.sh("systemctl", "is-system-running").stdout.strip()
        except AssertionError:  # no init process yet
            state = ""
        if state in ("running", "degraded"):
            return
        time.sleep(0.5)
    raise AssertionError(f"the container did not come up: {state!r}\n"
                         + box.log.read_text()[-3000:])


@pytest.fixture
def box(tmp_path):
    b = Box(tmp_path / "box", "adv-boot-local")
    yield b
    b.stop()


def test_install_sh_brings_the_probed_layout_up_bound_and_keyed(tmp_path, box, make_catalog):
    cat = advisor.load_catalog([make_catalog(LAYER)])
    nodes = sorted(_real_nodes())[:2]
    per = 8 // len(nodes)
    gpus = [(f"0000:{0x18 + 0x10 * i:02x}:00.0", nodes[i // per]) for i in range(8)]
    # the probe: a sysfs tree with this kernel's nodes and the 8 fake GPUs on them
    tree = make_sysfs(tmp_path / "tree", _real_nodes(), gpus)
    # the boot group's fixed ports, one per test: test_boot 183xx, 18400, 18500 (also
    # test_doctor_boot's), 18600; test_doctor_boot 18410; test_boot_install 18700
    ports = [18800, 18801]
    res = advisor.render_files("qwen3-8b", 8192, target="local", sysfs_root=tree, tp=4,
                               port=ports[0], allow_small_host=True, catalog=cat)
    assert res.plan.replicas == 2 and res.instance.key == "local:local"
    assert "user-data" not in res.files
    key = "k-" + secrets.token_hex(16)

    _fake_gpu_side(box, gpus)
    _put_files(box, res.files, FILES)
    box.boot()
    _up(box)

    # 1. no key file: one line, nothing changed
    r = box.sh("bash", f"{FILES}/install.sh")
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        "install.sh: the API key file /etc/advisor/api-key is missing or empty: write it "
        "(root:vllm, mode 0640) and run again"], r.stderr
    assert "vllm:" not in (box.merged / "etc/passwd").read_text()
    assert not (box.merged / "opt/advisor").exists()
    # 2. a key only root can read: the service user could not start; one line
    box.put("/etc/advisor/api-key", key + "\n", 0o600)
    r = box.sh("bash", f"{FILES}/install.sh")
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        "install.sh: the API key file /etc/advisor/api-key is not readable by vllm: chgrp vllm "
        "/etc/advisor/api-key && chmod 0640 /etc/advisor/api-key, then run again"], r.stderr
    assert not (box.merged / "etc/systemd/system/vllm@.service").exists()
    # 3. as the hint says: installed and started
    box.sh("chmod", "0640", "/etc/advisor/api-key")
    t0 = time.monotonic()
    r = box.sh("bash", f"{FILES}/install.sh")
    assert r.returncode == 0, r.stdout + r.stderr
    assert key not in r.stdout + r.stderr
    assert "started vllm@0.service vllm@1.service" in r.stdout
    box.wait_for([box.upper / f"var/lib/vllm/standin/vllm-{p}.json" for p in ports])
    replica_gpus = [rep.gpus for rep in res.plan.replica_layout]
    _check_replicas(box, ports, _expected(gpus, replica_gpus), replica_gpus, 4, 8192, key, None)
    assert time.monotonic() - t0 < BOOT_TIMEOUT_S
    # what --print said is what runs: numactl's node and vllm's argv
    for c, port in zip(res.commands, ports, strict=True):
        rec = __import__("json").loads(
            (box.upper / f"var/lib/vllm/standin/vllm-{port}.json").read_text())
        words = c.command.split(" VLLM_API_KEY=<from file:/etc/advisor/api-key> ", 1)[1].split()
        assert words[words.index("/opt/advisor/venv/bin/vllm"):] == rec["argv"]
        assert rec["mems_allowed_list"] == ",".join(map(str, c.nodes))
        assert rec["env"]["OMP_NUM_THREADS"] == str(c.omp_threads)
    # the files' permissions are the user-data's
    merged = box.merged
    for path, mode in (("opt/advisor/bin/vllm-launch.sh", 0o755),
                       ("etc/systemd/system/vllm@.service", 0o644),
                       ("etc/advisor/vllm-1.env", 0o640)):
        assert (merged / path).stat().st_mode & 0o777 == mode, path
    pip_log = (box.upper / "var/log/advisor-standin-pip.log").read_text()
    # the root's Python 3.11 took its lock, hash-checked: not a bare vllm==X resolved today
    assert "--require-hashes --no-deps -r" in pip_log and "locks/requirements-cp311.txt" in pip_log
    assert "  vllm==0.11.0\n" in pip_log and "  transformers==4." in pip_log
    # the key is in no file but its own
    for p in box.upper.rglob("*"):
        if p.is_file() and not p.is_symlink() and p != box.upper / "etc/advisor/api-key" \
                and p.stat().st_size < 50_000_000:
            assert key.encode() not in p.read_bytes(), p

    # 4. another layout over it (one TP-8 replica): replica 1 is stopped, its env file gone
    one = advisor.render_files("qwen3-8b", 8192, target="local", sysfs_root=tree, tp=8,
                               port=ports[0] + 10, allow_small_host=True, catalog=cat)
    _put_files(box, one.files, FILES + "-tp8")
    (box.upper / f"var/lib/vllm/standin/vllm-{ports[0] + 10}.json").unlink(missing_ok=True)
    r = box.sh("bash", f"{FILES}-tp8/install.sh")
    assert r.returncode == 0, r.stdout + r.stderr
    box.wait_for([box.upper / f"var/lib/vllm/standin/vllm-{ports[0] + 10}.json"])
    assert not (merged / "etc/advisor/vllm-1.env").exists()
    state = box.sh("systemctl", "show", "-p", "ActiveState,UnitFileState", "--value",
                   "vllm@1.service").stdout.split()
    assert state == ["inactive", "disabled"], state


def test_the_boot_root_has_what_install_sh_uses():
    """runuser (util-linux) and useradd (passwd) are in Debian's minbase root."""
    assert (ROOT / "usr/sbin/runuser").exists() and (ROOT / "usr/sbin/useradd").exists()
    assert Path(HERE / "standins/pip").exists()
