"""The first boot with the real install: no stand-in pip, no stand-in vLLM.

advisor's user-data is run by real cloud-init under real systemd in the disposable Debian root
(as in test_boot.py), but here the venv is made by Debian's real ``python3 -m venv`` (the root
carries python3-venv since root-v2) and ``advisor-install.sh`` runs the real ``pip install
--require-hashes --no-deps -r`` of advisor's lock for that Python (locks/vllm-0.11.0-cp311.txt:
Debian 12's Python 3.11; the clouds' Ubuntu 22.04 images take the cp310 lock, installed for
real by tools/prove_lock.sh and checked by tests/test_lock_install.py) from PyPI. The first
install on a machine is opt-in (ADVISOR_BOOT_REAL_INSTALL=1: 4-8 minutes, more than .ci/run's
budget allows); once its layer is cached the test always runs. Then the
replica starts the *real* ``vllm serve`` under the launcher — on a machine without a GPU, so it
dies, and the test checks that this is what the instance says on its console, in advisor's
words, within seconds, rather than a unit sitting in ``activating`` until its start timeout.

Cached like the root: the first run on a machine downloads and installs the lock (~2.5 GB of
wheels, ~10 GB installed, minutes) and keeps the resulting ``/opt/advisor/venv`` as an overlay
layer in /var/tmp/advisor-boot/install-<sha256 of the lock>[:12]; later runs boot over that
layer, so the same install step runs for real but finds every pinned package installed. With
no cache and no PyPI the test skips and says why.

This workplace reaches PyPI through a TLS-inspecting proxy whose CA only the host trusts: the
host's CA bundle is handed to pip in the box (/etc/pip.conf ``cert``), nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.boot.test_boot import (
    HERE,
    ROOT,
    Box,
    _offline_cloud_cfg,
    _real_nodes,
    _render,
    _root_python,
    _skip_reason,
    boot_root,  # noqa: F401 - the fixture the marks below use
)

from advisor.bootstatus import describe, parse
from advisor.clouds.registry import user_data_payload
from advisor.render.envlock import lock_text

CACHE = Path(os.environ.get("ADVISOR_BOOT_INSTALL_CACHE", "/var/tmp/advisor-boot"))
PYTHON = "3.11"  # Debian 12's python3, the boot root's
VLLM = "0.11.0"
#: a first install downloads ~2.5 GB and unpacks ~10 GB on this 2-core machine: 4-8 min seen
INSTALL_TIMEOUT_S = 1500
CACHED_TIMEOUT_S = 300


def _cache_dir() -> Path:
    lock = lock_text(VLLM, PYTHON)
    return CACHE / f"install-{hashlib.sha256(lock.encode()).hexdigest()[:12]}"


def _pypi_reachable(tmp: Path) -> bool:
    """Whether pip gets a small file from PyPI here (the box shares this host's network)."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                              str(tmp / "probe"), "six==1.16.0"],
                             capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def _skip() -> str | None:
    reason = _skip_reason()
    if reason:
        return reason
    if not (_cache_dir() / ".ok").exists():
        if os.environ.get("ADVISOR_BOOT_NO_NETWORK"):
            return "no cached install layer and ADVISOR_BOOT_NO_NETWORK is set"
        if not os.environ.get("ADVISOR_BOOT_REAL_INSTALL"):
            # .ci/run must finish in 10 minutes on 2 cores; this first install alone takes 4-8
            return (f"no cached install layer at {_cache_dir()}: the first real install "
                    "downloads ~2.5 GB and takes 4-8 min here; run it with "
                    "ADVISOR_BOOT_REAL_INSTALL=1 (later runs reuse the layer and take ~1 min)")
    return None


pytestmark = [pytest.mark.skipif(_skip() is not None, reason=_skip() or ""),
              pytest.mark.usefixtures("boot_root")]


class LayeredBox(Box):
    """A Box whose overlay has an extra lower layer (the cached venv) over the root."""

    def __init__(self, tmp: Path, name: str, layer: Path | None) -> None:
        self.name = name
        self.tmp = tmp
        self.upper, self.work, self.merged = tmp / "upper", tmp / "work", tmp / "merged"
        for d in (self.upper, self.work, self.merged):
            d.mkdir(parents=True)
        lower = f"{layer}:{ROOT}" if layer else str(ROOT)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={self.upper},workdir={self.work}",
                        str(self.merged)], check=True)
        self.proc = None
        self.log = tmp / "console.log"


def _boot_status(box: Box) -> dict:
    p = box.merged / "var/lib/advisor/boot-status.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def _wait(box: Box, pred, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        assert box.proc is not None and box.proc.poll() is None, box.log.read_text()[-3000:]
        time.sleep(2)
    raise AssertionError(f"{what}: not after {timeout} s\n{box.log.read_text()[-4000:]}")


def _harvest(box: Box, cache: Path) -> None:
    """Keep the installed venv as the next run's lower layer (a rename: same filesystem)."""
    venv = box.upper / "opt/advisor/venv"
    if not venv.is_dir():
        return
    tmp = cache.with_name(cache.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "layer/opt/advisor").mkdir(parents=True)
    try:
        os.replace(venv, tmp / "layer/opt/advisor/venv")
    except OSError:
        shutil.copytree(venv, tmp / "layer/opt/advisor/venv", symlinks=True)
    (tmp / ".ok").write_text(json.dumps({"vllm": VLLM, "python": PYTHON}) + "\n")
    shutil.rmtree(cache, ignore_errors=True)
    os.replace(tmp, cache)


def test_real_install_of_the_lock_then_a_real_vllm_that_dies_is_reported(tmp_path):
    cache = _cache_dir()
    cached = (cache / ".ok").exists()
    if not cached and not _pypi_reachable(tmp_path):
        pytest.skip("no cached install layer and PyPI cannot be reached")
    port = 18700
    res = _render("qwen3-8b", 8192, "aws:g6e.2xlarge", port=port,
                  api_key_ref="file:/etc/advisor/secrets/api-key")
    assert _root_python() == PYTHON
    node = sorted(_real_nodes())[-1]
    box = LayeredBox(tmp_path, "adv-boot-real", cache / "layer" if cached else None)
    try:
        # the bytes AWS is sent: gzip, which cloud-init detects and unpacks
        box.put("/var/lib/cloud/seed/nocloud/user-data",
                user_data_payload("aws", res.files["user-data"]))
        box.put("/var/lib/cloud/seed/nocloud/meta-data",
                "instance-id: adv-boot-real\nlocal-hostname: adv-boot-real\n")
        box.put("/etc/cloud/cloud.cfg.d/90-advisor-boot-test.cfg", _offline_cloud_cfg(ROOT))
        # the GPU side only: one GPU on a real node, nvidia-smi; pip and vllm are the real ones
        bus = "0000:38:00.0"
        box.put(f"/opt/fake-sys/sys/bus/pci/devices/{bus}/numa_node", f"{node}\n")
        for n, cpus in _real_nodes().items():
            box.put(f"/opt/fake-sys/sys/devices/system/node/node{n}/cpulist", cpus + "\n")
        box.put("/opt/fake-sys/bus-ids", f"00000000:{bus[5:].upper()}\n")
        box.put("/etc/systemd/system/vllm@.service.d/10-boot-test.conf",
                "[Service]\nEnvironment=ADVISOR_SYSFS_ROOT=/opt/fake-sys\n")
        box.put("/usr/local/bin/nvidia-smi", (HERE / "standins/nvidia-smi").read_text(), 0o755)
        box.put("/etc/advisor/secrets/api-key", "k-" + secrets.token_hex(16) + "\n", 0o644)
        ca = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
        if Path(ca).is_file():
            box.put("/etc/advisor-test/ca.crt", Path(ca).read_text())
            box.put("/etc/pip.conf", "[global]\ncert = /etc/advisor-test/ca.crt\n")
        t0 = time.monotonic()
        box.boot()
        install_s = _wait(box, lambda: _boot_status(box).get("state") in ("done", "failed"),
                          CACHED_TIMEOUT_S if cached else INSTALL_TIMEOUT_S, "the install")
        st = _boot_status(box)
        assert st.get("state") == "done", (st, (box.merged / "var/log/advisor-install.log")
                                           .read_text()[-3000:])
        log = (box.merged / "var/log/advisor-install.log").read_text()
        assert "--require-hashes" in log
        if cached:
            assert "Requirement already satisfied: vllm==0.11.0" in log, log[-2000:]
        else:
            assert "Successfully installed" in log and "vllm-0.11.0" in log, log[-2000:]
        # the real vLLM, importable in the venv the boot made, with the lock's versions
        probe = subprocess.run(
            ["nsenter", "-t", str(box.leader()), "-m", "-u", "-i", "-p", "--",
             "/opt/advisor/venv/bin/python", "-c",
             "import importlib.metadata as m, vllm.entrypoints.openai.api_server;"
             "print(m.version('vllm'), m.version('transformers'), m.version('torch'))"],
            capture_output=True, text=True, timeout=240, check=False)
        assert probe.returncode == 0, probe.stderr[-2000:]
        vllm_v, tf_v, torch_v = probe.stdout.split()[-3:]
        lock = lock_text(VLLM, PYTHON)
        assert vllm_v == VLLM and f"transformers=={tf_v} " in lock and tf_v.startswith("4.")
        assert f"torch=={torch_v} " in lock
        # the real `vllm serve` finds no GPU and exits: reported failed on the console quickly

        def reported() -> bool:
            text = box.log.read_text(errors="replace")
            return describe(parse(text), replicas=1).startswith("failed: replica 0")
        died_s = _wait(box, reported, 240, "the dead replica's report")
        said = describe(parse(box.log.read_text(errors="replace")), replicas=1)
        journal = box.sh("journalctl", "--no-pager", "-u", "vllm@0.service").stdout
        assert "vllm serve" in journal or "vllm" in journal
        state = box.sh("systemctl", "show", "-p", "ActiveState", "--value",
                       "vllm@0.service").stdout.strip()
        assert state != "active", state
        print(f"\ninstall {'(cached layer)' if cached else '(download)'}: {install_s:.0f} s; "
              f"boot to install done {time.monotonic() - t0:.0f} s; replica reported dead "
              f"{died_s:.0f} s after the install: {said}")
        (tmp_path / "measured.json").write_text(json.dumps(
            {"cached": cached, "install_s": install_s, "died_report_s": died_s, "said": said}))
    finally:
        box.stop()
    if not cached:
        _harvest(box, cache)
