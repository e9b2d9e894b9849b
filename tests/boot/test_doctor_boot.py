"""``advisor doctor`` against services that really run under systemd (in the disposable Debian
root the boot tests boot with systemd-nspawn), read from this host's /proc:

1. a vLLM someone set up by hand on their own server: a unit pinned to the CPUs of the node its
   GPU does not hang off. doctor names the misbinding and writes the systemd drop-in; the
   drop-in, written as given, daemon-reload and restart, gives a process that the kernel binds
   to the GPU's node (read from inside the process) and that doctor finds nothing wrong with.
2. advisor's own rendered service (launcher + vllm@.service): doctor finds no misbinding.

The GPU side is faked as in tests/boot/test_boot.py: the stand-in vllm records its affinity and
memory policy from inside; the sysfs tree doctor reads splits this host's real CPUs into two
nodes (CPU 0 on node 0 with the GPU, the rest on node 1), so the misbinding is one the kernel
really enforces on a one-node host.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

import pytest
from tests.boot.test_boot import (  # noqa: F401 - boot_root: the fixture the marks below use
    HERE,
    Box,
    _boot_plan,
    _render,
    _skip_reason,
    boot_root,
)
from tests.doctor_trees import make_host

import advisor
from advisor.host.doctor import diagnose

pytestmark = [pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
              pytest.mark.usefixtures("boot_root")]

STANDIN = "/usr/local/lib/advisor-standins/vllm"


def _pid_of(port: int, timeout: float = 60) -> int:
    """The host PID of the stand-in vllm listening on ``port`` (it runs in the container)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in argv and str(port).encode() in argv and any(
                    a.endswith(b"/vllm") for a in argv):
                return int(d.name)
        time.sleep(0.3)
    raise AssertionError(f"no stand-in vllm on port {port}")


def _wait(path: Path, box: Box, timeout: float = 90) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.stat().st_size > 0:
            return json.loads(path.read_text())
        assert box.proc is not None and box.proc.poll() is None, box.log.read_text()[-3000:]
        time.sleep(0.3)
    raise AssertionError(box.sh("journalctl", "--no-pager", "-n", "60").stdout)


@pytest.fixture
def box(tmp_path):
    b = Box(tmp_path / "box", "adv-doctor")
    yield b
    b.stop()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_doctor_drop_in_rebinds_a_hand_made_service(tmp_path, box):
    cpus = sorted(os.sched_getaffinity(0))
    key = "k-" + secrets.token_hex(12)
    port = 18500
    # the user's own unit, pinned to the CPUs of node 1; its GPU 0 hangs off node 0
    box.put("/etc/systemd/system/myvllm.service", (
        "[Unit]\nDescription=vLLM, set up by hand\n\n[Service]\n"
        "Environment=HOME=/var/lib/myvllm HF_HOME=/var/lib/myvllm/hf CUDA_VISIBLE_DEVICES=0 "
        "CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
        "EnvironmentFile=/etc/myvllm.env\nStateDirectory=myvllm\n"
        f"CPUAffinity={','.join(map(str, cpus[1:]))}\n"
        f"ExecStart={STANDIN} serve Qwen/Qwen3-8B --port {port} --host 127.0.0.1\n\n"
        "[Install]\nWantedBy=multi-user.target\n"))
    wants = box.merged / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    os.symlink("/etc/systemd/system/myvllm.service", wants / "myvllm.service")
    box.put("/etc/myvllm.env", f"VLLM_API_KEY={key}\n", 0o600)
    box.put(STANDIN, (HERE / "standins" / "vllm").read_text(), 0o755)
    box.put("/etc/cloud/cloud-init.disabled", "")  # a plain server: no cloud-init
    box.boot()
    record = box.merged / f"var/lib/myvllm/standin/vllm-{port}.json"
    before = _wait(record, box)
    assert before["affinity"] == cpus[1:]

    sysfs = make_host(tmp_path / "sys", {0: str(cpus[0]), 1: ",".join(map(str, cpus[1:]))},
                      [("0000:18:00.0", 0)])
    pid = _pid_of(port)
    report = diagnose([pid], proc_root="/", sysfs_root=sysfs)
    s = report.servers[0]
    assert s.unit == "myvllm.service" and s.gpus == [0]
    bad = next(f for f in s.findings if f.code == "cpus-off-node")
    assert bad.severity == "error" and bad.pids == [pid]
    drop = next(x for x in bad.fixes if x.kind == "systemd")
    assert drop.path == "/etc/systemd/system/myvllm.service.d/50-advisor-numa.conf"
    assert drop.text == (f"[Service]\nCPUAffinity=\nCPUAffinity={cpus[0]}\n"
                         "NUMAPolicy=bind\nNUMAMask=\nNUMAMask=0\n")
    key_seen = json.dumps(report.model_dump())
    assert key not in key_seen

    # the fix, pasted as given
    box.put(drop.path, drop.text)
    assert box.sh("rm", f"/var/lib/myvllm/standin/vllm-{port}.json").returncode == 0
    for cmd in drop.then.split(" && "):
        r = box.sh(*cmd.split())
        assert r.returncode == 0, r.stderr
    after = _wait(record, box)
    assert after["affinity"] == [cpus[0]]  # the kernel's view, from inside the process
    assert "bind:0" in after["numa_policies"]
    again = diagnose([_pid_of(port)], proc_root="/", sysfs_root=sysfs)
    bad_codes = {f.code for f in again.all_findings if f.severity in ("error", "warning")}
    # one CPU for one GPU is below vLLM's floor of 2 + 1 cores: true, and not a binding
    assert bad_codes <= {"below-cpu-floor", "host-below-cpu-floor"}, again.all_findings
    p = again.servers[0].processes[0]
    assert p.cpus == [cpus[0]] and p.policy == "bind:0"


def test_advisor_rendered_service_passes_doctor(tmp_path):
    from tests.boot.test_boot import _real_nodes

    cat = advisor.load_catalog()
    node = sorted(_real_nodes())[-1]
    gpus = [("0000:38:00.0", node)]
    key = "k-" + secrets.token_hex(16)
    port = 18410
    res = _render("qwen3-8b", 8192, "aws:g6e.2xlarge", port=port,  # the root's Python
                  catalog=cat, api_key_ref="file:/etc/advisor/secrets/api-key")
    box = _boot_plan(tmp_path, "adv-doctor-r", res.files, gpus, key, None)
    try:
        record = box.upper / f"var/lib/vllm/standin/vllm-{port}.json"
        box.wait_for([record])
        report = diagnose([_pid_of(port)], proc_root="/",
                          sysfs_root=box.merged / "opt/fake-sys")
        s = report.servers[0]
        assert s.unit == "vllm@0.service" and s.gpus == [0] and s.gpu_nodes == [node]
        p = s.processes[0]
        assert p.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and p.api_key_env is True
        assert p.policy == f"bind:{node}"
        bad = {f.code for f in report.all_findings if f.severity in ("error", "warning")}
        assert bad <= {"below-cpu-floor", "host-below-cpu-floor"}, report.all_findings
    finally:
        box.stop()
