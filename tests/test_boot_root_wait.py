"""The boot tests wait for the root .ci/run builds beside the suite (tests/boot/test_boot.py):
only while the build it names still runs, and only for the root's marker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.boot import test_boot as boot


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(boot, "ROOT", tmp_path / "root")
    return tmp_path / "root"


def test_a_running_build_is_waited_for_and_a_dead_or_unnamed_one_is_not(monkeypatch):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        monkeypatch.setenv(boot.BUILDING_VAR, str(live.pid))
        assert boot._building() == live.pid
        deadline = time.monotonic() + 30
        while done.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        monkeypatch.setenv(boot.BUILDING_VAR, str(done.pid))  # reaped: no such process
        assert boot._building() is None
        for junk in ("", "abc", "-1", "99999999"):
            monkeypatch.setenv(boot.BUILDING_VAR, junk)
            assert boot._building() is None, junk
    finally:
        live.kill()
        live.wait()


def test_a_zombie_build_is_over(monkeypatch):
    """.ci/run's shell may not reap its background build while the suite runs: a zombie is a
    build that ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            break
        time.sleep(0.05)
    try:
        assert state == "Z"
        monkeypatch.setenv(boot.BUILDING_VAR, str(child.pid))
        assert boot._building() is None
    finally:
        child.wait()


def test_the_wait_ends_with_the_root_or_with_the_build(root, monkeypatch, tmp_path):
    # a build that makes the root: waited for, then ready
    marker = root / ".advisor-boot-root-v2"
    build = subprocess.Popen([sys.executable, "-c", f"""
import pathlib, time
time.sleep(0.5)
pathlib.Path({str(root)!r}).mkdir()
pathlib.Path({str(marker)!r}).touch()
time.sleep(0.5)"""])
    monkeypatch.setenv(boot.BUILDING_VAR, str(build.pid))
    t0 = time.monotonic()
    assert boot._wait_for_root(limit_s=30, poll_s=0.05) is True
    assert time.monotonic() - t0 < 20
    build.wait()
    # a build that ends without one: the wait ends with it, not at the limit
    marker.unlink()
    failed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    monkeypatch.setenv(boot.BUILDING_VAR, str(failed.pid))
    t0 = time.monotonic()
    assert boot._wait_for_root(limit_s=30, poll_s=0.05) is False
    assert time.monotonic() - t0 < 20
    failed.wait()
    # collection: no root and no build named skips with how to build one; a running build
    # named does not skip (the fixture waits instead)
    if os.geteuid() != 0 or shutil.which("systemd-nspawn") is None:
        return  # the boot tests skip before the root matters
    monkeypatch.delenv(boot.BUILDING_VAR)
    assert boot._skip_reason() == (f"no boot root at {root}: run tests/boot/build-root.sh "
                                   "(.ci/run does)")
    monkeypatch.setenv(boot.BUILDING_VAR, str(os.getpid()))
    assert boot._skip_reason() is None


def test_the_boot_group_is_handed_out_after_the_heavy_folders_not_first():
    """xdist would hand the largest group (the boot tests, one worker) out first, and its first
    test waits for the root: tests/conftest.py turns that reordering off and places the group
    after the fault sweeps, the hostile corpus and the providers' tests."""
    from tests import conftest

    rels = ["boot/test_boot.py", "boot/test_doctor_boot.py", "catalog/test_a.py",
            "faults/test_aws.py", "providers/test_aws.py", "providers/test_gcp.py",
            "sdk/test_x.py", "test_zz.py"]
    order = [rels[i] for i in conftest.serial_groups_placed(rels)]
    assert order == ["catalog/test_a.py", "faults/test_aws.py", "providers/test_aws.py",
                     "providers/test_gcp.py", "boot/test_boot.py", "boot/test_doctor_boot.py",
                     "sdk/test_x.py", "test_zz.py"]
    # without any test under SERIAL_AFTER (a run of some files), the group goes last
    assert conftest.serial_groups_placed(["boot/a.py", "test_b.py"]) == [1, 0]
    assert sorted(conftest.serial_groups_placed(rels)) == list(range(len(rels)))


def test_this_run_hands_the_boot_group_out_in_that_order(request):
    """The order this very run collected (every xdist worker collects the whole suite and the
    controller hands work out in it)."""
    here = Path(__file__).parent
    rels = [Path(str(i.path)).relative_to(here).as_posix() for i in request.session.items]
    boot_at = [n for n, r in enumerate(rels) if r.startswith("boot/")]
    providers_at = [n for n, r in enumerate(rels) if r.startswith("providers/")]
    if boot_at and providers_at:
        assert min(boot_at) > max(providers_at)
        assert boot_at == list(range(min(boot_at), max(boot_at) + 1))  # together
    assert getattr(request.config.option, "loadscopereorder", False) is False
    if getattr(request.config.option, "loadgroup", False):  # an xdist worker of --dist loadgroup
        # the group xdist hands out whole: named in the test ids it schedules by (this hook
        # adds the marks before xdist reads them)
        # (the whole suite collects tests/boot, run or skipped; a run of some files may not)
        boot_ids = [i.nodeid for i in request.session.items if "tests/boot/" in i.nodeid]
        assert all(n.endswith("@boot") for n in boot_ids), boot_ids[:3]
