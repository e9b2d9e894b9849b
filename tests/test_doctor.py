"""``advisor doctor`` on fake /proc + sysfs trees (a misbound server, a well-bound one, a hidden
numa_node, TP 4 across nodes, secrets, threads, bad input) and on real processes of this
machine (a child started with a restricted CPU affinity and memory policy, read back)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.host.doctor import diagnose, parse_numa_maps, policy_nodes, redact
from tests.doctor_trees import FakeProc, make_host, make_proc

NODES = {0: "0-7", 1: "8-15"}
GPUS = [("0000:18:00.0", 0), ("0000:2a:00.0", 0), ("0000:3a:00.0", 0), ("0000:5d:00.0", 0),
        ("0000:9a:00.0", 1), ("0000:ab:00.0", 1), ("0000:ba:00.0", 1), ("0000:db:00.0", 1)]
BUSES = [b for b, _ in GPUS]
SERVE = ["/usr/bin/python3", "/opt/vllm/bin/vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000",
         "--host", "127.0.0.1"]
KEYED = {"VLLM_API_KEY": "k-very-secret-value", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def host(tmp: Path, procs: list[FakeProc], nodes=NODES, gpus=GPUS, numa_balancing=0) -> Path:
    make_host(tmp, nodes, gpus)
    make_proc(tmp, procs, [b for b, _ in gpus], numa_balancing=numa_balancing)
    return tmp


def tp1(cpus: str, maps, env=None, argv=SERVE, gpu_minor: int = 0, cgroup=None) -> list[FakeProc]:
    """vLLM V1 at TP 1: the API server and its engine core, which holds the GPU open."""
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": str(gpu_minor), **(env or {})}
    extra = {"cgroup": cgroup} if cgroup else {}
    return [FakeProc(pid=4242, argv=argv, env=env, cpus=cpus, maps=maps, **extra),
            FakeProc(pid=4250, ppid=4242, argv=["VLLM::EngineCore"], env=env, cpus=cpus,
                     maps=maps, nvidia_minors=[gpu_minor], **extra)]


def codes(report, severity=None):
    return sorted({f.code for f in report.all_findings
                   if severity is None or f.severity == severity})


def by_code(report, code):
    return next(f for f in report.all_findings if f.code == code)


# -- the misbound and the well-bound server --------------------------------------------------

def test_misbound_server_is_named_with_the_fix_to_paste(tmp_path):
    # GPU 0 hangs off node 0; the engine core may only run on node 1; memory interleaved
    root = host(tmp_path, tp1("8-15", [("interleave:0-1", {0: 5000, 1: 5000})]))
    report = diagnose(proc_root=root, sysfs_root=root)
    assert len(report.servers) == 1
    s = report.servers[0]
    assert s.gpus == [0] and s.gpu_nodes == [0] and s.unit == "vllm.service"
    assert [p.role for p in s.processes] == ["api-server", "engine-core"]
    assert codes(report, "error") == ["cpus-off-node"]
    assert "memory-interleaved" in codes(report, "warning")
    f = by_code(report, "cpus-off-node")
    assert "node(s) 1" in f.text and "node 0" in f.text
    assert any(e.path == "/proc/4250/status" and "8-15" in e.value for e in f.evidence)
    assert any(e.path == "/sys/bus/pci/devices/0000:18:00.0/numa_node" and e.value == "0"
               for e in f.evidence)
    fixes = {x.kind: x for x in f.fixes}
    assert fixes["numactl"].text == ("numactl --cpunodebind=0 --membind=0 /usr/bin/python3 "
                                     "/opt/vllm/bin/vllm serve Qwen/Qwen3-8B --port 8000 "
                                     "--host 127.0.0.1")
    drop = fixes["systemd"]
    assert drop.path == "/etc/systemd/system/vllm.service.d/50-advisor-numa.conf"
    assert drop.text == ("[Service]\nCPUAffinity=\nCPUAffinity=0-7\nNUMAPolicy=bind\nNUMAMask=\n"
                         "NUMAMask=0\n")
    assert drop.then == "systemctl daemon-reload && systemctl restart vllm.service"
    assert not report.ok


def test_well_bound_server_gets_nothing_alarming(tmp_path):
    root = host(tmp_path, tp1("0-7", [("bind:0", {0: 9000}), ("default", {0: 100})]))
    report = diagnose(proc_root=root, sysfs_root=root)
    assert [f.severity for f in report.all_findings if f.severity != "info"] == []
    assert report.ok
    p = report.servers[0].processes[1]
    assert p.cpus == list(range(8)) and p.policy == "bind:0" and p.kib_per_node == {0: 36400}
    assert p.gpus == [0] and p.gpu_source == "device files"


def test_memory_living_off_node_without_a_policy(tmp_path):
    root = host(tmp_path, tp1("0-7", [("default", {0: 1000, 1: 3000})]))
    report = diagnose(proc_root=root, sysfs_root=root)
    f = by_code(report, "memory-off-node")
    assert f.severity == "warning" and "75%" in f.text
    # a majority on the GPU's node is no warning with the host off the hot path (25%: a note)
    root2 = host(tmp_path / "b", tp1("0-7", [("default", {0: 3000, 1: 1000})]))
    r2 = diagnose(proc_root=root2, sysfs_root=root2)
    assert "memory-off-node" not in codes(r2, "warning") and r2.ok
    assert by_code(r2, "memory-off-node").severity == "info"
    # with the host on the hot path, ~22% remote measured to matter (TensorRT-LLM PR #18117)
    kv = [*SERVE, "--kv-transfer-config", '{"kv_connector":"NixlConnector"}']
    root3 = host(tmp_path / "c", tp1("0-7", [("default", {0: 3000, 1: 1000})], argv=kv))
    f3 = by_code(diagnose(proc_root=root3, sysfs_root=root3), "memory-off-node")
    assert f3.severity == "warning" and "25%" in f3.text
    # and 10% remote is nothing at all
    root4 = host(tmp_path / "d", tp1("0-7", [("default", {0: 9000, 1: 1000})], argv=kv))
    assert "memory-off-node" not in codes(diagnose(proc_root=root4, sysfs_root=root4))


def test_memory_held_to_the_other_node_is_an_error(tmp_path):
    root = host(tmp_path, tp1("0-7", [("bind:1", {1: 9000})]))
    f = by_code(diagnose(proc_root=root, sysfs_root=root), "memory-bound-off-node")
    assert f.severity == "error" and "node(s) 1" in f.text


def test_unbound_server_is_a_note_unless_the_host_is_on_the_hot_path(tmp_path):
    root = host(tmp_path, tp1("0-15", [("default", {0: 900, 1: 100})]))
    report = diagnose(proc_root=root, sysfs_root=root)
    f = by_code(report, "unbound")
    assert f.severity == "info" and "gpu-bound" in f.text  # measured 0-2% (PR 30492)
    assert report.ok
    off = [*SERVE, "--cpu-offload-gb", "8"]
    root2 = host(tmp_path / "b", tp1("0-15", [("default", {0: 900, 1: 100})], argv=off))
    f2 = by_code(diagnose(proc_root=root2, sysfs_root=root2), "unbound")
    assert f2.severity == "warning" and "--cpu-offload-gb 8" in f2.text  # 1.5x measured


def test_gpu_from_cuda_visible_devices_when_no_device_file_is_readable(tmp_path):
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": "5"}
    procs = [FakeProc(pid=7, argv=SERVE, env=env, cpus="0-7", maps=[("bind:0", {0: 10})])]
    root = host(tmp_path, procs)
    report = diagnose(proc_root=root, sysfs_root=root)
    s = report.servers[0]
    assert s.gpus == [5] and s.gpu_nodes == [1]
    assert codes(report, "error") == ["cpus-off-node", "memory-bound-off-node"]


def test_cuda_order_unset_is_stated_not_hidden(tmp_path):
    env = {"VLLM_API_KEY": "x", "CUDA_VISIBLE_DEVICES": "4"}
    procs = [FakeProc(pid=7, argv=SERVE, env=env, cpus="8-15", maps=[("bind:1", {1: 10})])]
    root = host(tmp_path, procs)
    report = diagnose(proc_root=root, sysfs_root=root)
    assert report.servers[0].gpus == [4]
    assert by_code(report, "cuda-order-assumed").severity == "info"


# -- hidden numa_node, TP across nodes --------------------------------------------------------

def test_hidden_numa_node_is_not_taken_for_node_0(tmp_path):
    gpus = [("0000:18:00.0", -1), ("0000:9a:00.0", -1)]
    root = host(tmp_path, tp1("8-15", [("default", {1: 10})]), gpus=gpus)
    report = diagnose(proc_root=root, sysfs_root=root)
    assert report.servers[0].gpu_nodes == [None]
    assert codes(report, "error") == []
    f = by_code(report, "gpu-node-hidden")
    assert f.severity == "warning" and any(e.value == "-1" for e in f.evidence)
    # one node: nothing to bind, nothing to say
    root1 = host(tmp_path / "one", tp1("0-7", [("default", {0: 10})]), nodes={0: "0-7"},
                 gpus=[("0000:18:00.0", -1)])
    assert codes(diagnose(proc_root=root1, sysfs_root=root1)) == []


def _tp4(cpus: str, extra: list[str] = ()) -> list[FakeProc]:
    argv = [*SERVE, "--tensor-parallel-size", "4", *extra]
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": "2,3,4,5"}
    procs = [FakeProc(pid=100, argv=argv, env=env, cpus=cpus),
             FakeProc(pid=101, ppid=100, argv=["VLLM::EngineCore"], env=env, cpus=cpus)]
    for r in range(4):
        procs.append(FakeProc(pid=110 + r, ppid=101, argv=[f"VLLM::Worker_TP{r}"], env=env,
                              cpus=cpus, maps=[("default", {0: 50, 1: 50})],
                              nvidia_minors=[2 + r]))
    return procs


def test_tp4_spanning_nodes(tmp_path):
    root = host(tmp_path, _tp4("0-15"))
    report = diagnose(proc_root=root, sysfs_root=root)
    s = report.servers[0]
    assert s.tp == 4 and s.gpus == [2, 3, 4, 5] and s.gpu_nodes == [0, 0, 1, 1]
    assert [p.gpus for p in s.processes if p.role == "worker"] == [[2], [3], [4], [5]]
    f = by_code(report, "spans-nodes")
    assert f.severity == "info"
    assert any(x.kind == "vllm-flag" and x.text.startswith("--numa-bind") for x in f.fixes)
    assert codes(report, "error") == []
    # the same with workers pinned to node 1: the two on node 0 are misbound
    root2 = host(tmp_path / "b", _tp4("8-15"))
    bad = by_code(diagnose(proc_root=root2, sysfs_root=root2), "cpus-off-node")
    assert bad.pids == [110, 111]
    # workers identified by their rank when the device files cannot be read
    procs = _tp4("0-15")
    for p in procs:
        p.nvidia_minors = []
    root3 = host(tmp_path / "c", procs)
    s3 = diagnose(proc_root=root3, sysfs_root=root3).servers[0]
    assert [p.gpus for p in s3.processes if p.role == "worker"] == [[2], [3], [4], [5]]
    assert {p.gpu_source for p in s3.processes if p.role == "worker"} == {
        "CUDA_VISIBLE_DEVICES + worker rank"}


def test_pipeline_stages_are_told_apart_by_their_pp_rank(tmp_path):
    """TP 2 x PP 2 on GPUs 2-5 (2, 3 on node 0; 4, 5 on node 1), device files unreadable, each
    stage pinned to its own GPUs' node: Worker_PP1_TP0 drives the visible GPU at local rank
    1 x 2 + 0 = 4. Taking it for TP rank 0 alone would put stage 1 on node 0's GPUs and call a
    correctly bound server misbound."""
    argv = [*SERVE, "--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"]
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": "2,3,4,5"}
    procs = [FakeProc(pid=100, argv=argv, env=env, cpus="0-15"),
             FakeProc(pid=101, ppid=100, argv=["VLLM::EngineCore"], env=env, cpus="0-15")]
    for pp in range(2):
        for r in range(2):
            node = pp  # stage 0 on node 0 (cpus 0-7), stage 1 on node 1 (cpus 8-15)
            procs.append(FakeProc(pid=110 + 2 * pp + r, ppid=101,
                                  argv=[f"VLLM::Worker_PP{pp}_TP{r}"], env=env,
                                  cpus=NODES[node], mems=str(node),
                                  maps=[(f"bind:{node}", {node: 50})]))
    root = host(tmp_path, procs)
    report = diagnose(proc_root=root, sysfs_root=root)
    s = report.servers[0]
    assert (s.tp, s.pp) == (2, 2) and s.gpus == [2, 3, 4, 5]
    assert [p.gpus for p in s.processes if p.role == "worker"] == [[2], [3], [4], [5]]
    assert "cpus-off-node" not in codes(report)
    assert codes(report, "error") == []


def test_numa_bind_flag_is_seen(tmp_path):
    root = host(tmp_path, _tp4("0-15", ["--numa-bind"]))
    report = diagnose(proc_root=root, sysfs_root=root)
    assert report.servers[0].numa_bind
    assert "spans-nodes" not in codes(report)


# -- threads, floor, host settings, secrets ---------------------------------------------------

def test_omp_threads_beyond_the_allowed_cpus(tmp_path):
    root = host(tmp_path, tp1("0-3", [("bind:0", {0: 10})], env={"OMP_NUM_THREADS": "32"}))
    f = by_code(diagnose(proc_root=root, sysfs_root=root), "omp-oversubscribed")
    assert f.severity == "warning"
    assert {x.kind: x.text for x in f.fixes}["env"] == "OMP_NUM_THREADS=4"


def test_cpu_floor(tmp_path):
    # 2 CPUs for one GPU: vLLM asks for 2 + 1 = 3 physical cores
    root = host(tmp_path, tp1("0-1", [("bind:0", {0: 10})]))
    f = by_code(diagnose(proc_root=root, sysfs_root=root), "below-cpu-floor")
    assert "2 physical core(s) for 1 GPU(s)" in f.text and "2 + N = 3" in f.text
    root2 = host(tmp_path / "b", tp1("0-2", [("bind:0", {0: 10})]))
    assert "below-cpu-floor" not in codes(diagnose(proc_root=root2, sysfs_root=root2))


def test_numa_balancing_under_a_bound_server(tmp_path):
    root = host(tmp_path, tp1("0-7", [("bind:0", {0: 10})]), numa_balancing=1)
    report = diagnose(proc_root=root, sysfs_root=root)
    f = by_code(report, "numa-balancing")
    assert f.severity == "warning" and f.fixes[0].path == "/etc/sysctl.d/90-advisor-numa.conf"
    assert report.host.numa_balancing == 1


def test_api_key_in_argv_is_flagged_and_never_shown(tmp_path, cli):
    secret = "sk-do-not-print-me-123"
    argv = [*SERVE, "--api-key", secret]
    root = host(tmp_path, tp1("0-7", [("bind:0", {0: 10})], argv=argv,
                              env={"VLLM_API_KEY": ""}))
    report = diagnose(proc_root=root, sysfs_root=root)
    assert by_code(report, "api-key-in-argv").severity == "warning"
    assert report.servers[0].processes[0].argv[-1] == "<redacted>"
    for args in ([], ["--json"]):
        r = cli("doctor", "--proc-root", str(root), "--sysfs-root", str(root), *args)
        assert secret not in r.stdout and "k-very-secret-value" not in r.stdout
    # nor in a numactl fix (here for a misbinding)
    root2 = host(tmp_path / "b", tp1("8-15", [("bind:0", {0: 10})], argv=argv))
    f = by_code(diagnose(proc_root=root2, sysfs_root=root2), "cpus-off-node")
    assert secret not in json.dumps(f.model_dump())
    assert "--api-key" not in f.fixes[0].text


def test_no_api_key_on_an_open_address(tmp_path):
    argv = ["/usr/bin/python3", "/opt/vllm/bin/vllm", "serve", "m"]  # no --host: every address
    root = host(tmp_path, tp1("0-7", [("bind:0", {0: 10})], argv=argv,
                              env={"VLLM_API_KEY": ""}))
    assert by_code(diagnose(proc_root=root, sysfs_root=root), "no-api-key").severity == "warning"


def test_units_and_containers_give_their_own_fix(tmp_path):
    root = host(tmp_path, tp1("8-15", [("bind:0", {0: 10})],
                              cgroup="0::/system.slice/docker-" + "ab" * 32 + ".scope"))
    f = by_code(diagnose(proc_root=root, sysfs_root=root), "cpus-off-node")
    assert {x.kind: x.text for x in f.fixes}["docker"].startswith(
        "docker run --cpuset-cpus=0-7 --cpuset-mems=0")
    root2 = host(tmp_path / "b", tp1("8-15", [("bind:0", {0: 10})], cgroup=(
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/vllm.service")))
    drop = {x.kind: x for x in by_code(diagnose(proc_root=root2, sysfs_root=root2),
                                       "cpus-off-node").fixes}["systemd"]
    assert drop.path == "~/.config/systemd/user/vllm.service.d/50-advisor-numa.conf"
    assert drop.then.startswith("systemctl --user daemon-reload")


def test_pid_selects_its_server(tmp_path):
    procs = tp1("0-7", [("bind:0", {0: 10})]) + [
        FakeProc(pid=5000, argv=[*SERVE[:5], "8001"], env={**KEYED, "CUDA_VISIBLE_DEVICES": "4"},
                 cpus="8-15", maps=[("bind:1", {1: 10})])]
    root = host(tmp_path, procs)
    assert [s.pid for s in diagnose(proc_root=root, sysfs_root=root).servers] == [4242, 5000]
    # a worker's pid brings its whole server
    only = diagnose([4250], proc_root=root, sysfs_root=root)
    assert [s.pid for s in only.servers] == [4242]


def test_unreadable_files_are_reported_not_guessed(tmp_path, monkeypatch):
    from advisor.host import doctor

    root = host(tmp_path, tp1("8-15", [("bind:0", {0: 10})]))
    real = doctor._read_proc

    def deny(path, limit=doctor.MAX_PROC_BYTES):
        if path.name in ("environ", "numa_maps"):
            raise doctor._Unreadable(str(path))
        return real(path, limit)

    monkeypatch.setattr(doctor, "_read_proc", deny)
    report = diagnose(proc_root=root, sysfs_root=root)
    f = by_code(report, "unreadable")
    assert f.severity == "warning" and f.fixes[0].text.startswith("sudo advisor doctor")
    p = report.servers[0].processes[1]
    assert p.env == {} and p.policy is None and p.api_key_env is None


# -- the command: --check, --json, bad input ---------------------------------------------------

def test_check_exit_codes(tmp_path, cli):
    bad = host(tmp_path / "bad", tp1("8-15", [("interleave:0-1", {0: 5, 1: 5})]))
    good = host(tmp_path / "good", tp1("0-7", [("bind:0", {0: 5})]))
    empty = host(tmp_path / "empty", [FakeProc(pid=1, argv=["/sbin/init"])])
    for root, rc in ((bad, 1), (good, 0), (empty, 3)):  # 3: no vLLM server found
        r = cli("doctor", "--proc-root", str(root), "--sysfs-root", str(root), "--check")
        assert r.exit_code == rc, (root, r.stdout, r.stderr)
        r = cli("doctor", "--proc-root", str(root), "--sysfs-root", str(root))
        assert r.exit_code == 0
    r = cli("doctor", "--proc-root", str(bad), "--sysfs-root", str(bad), "--json")
    body = json.loads(r.stdout)
    assert body["ok"] is False
    assert body["servers"][0]["findings"][0]["code"] == "cpus-off-node"
    text = cli("doctor", "--proc-root", str(bad), "--sysfs-root", str(bad)).stdout
    assert "ERROR cpus-off-node" in text and "numactl --cpunodebind=0 --membind=0" in text
    assert "CPUAffinity=0-7" in text
    assert "ok: bound to its GPUs' node(s)" in cli(
        "doctor", "--proc-root", str(good), "--sysfs-root", str(good)).stdout


@pytest.mark.parametrize("make,args,needle", [
    (lambda t: make_proc(t, [FakeProc(pid=1, argv=["/sbin/init"])]), ["--pid", "99999"],
     "no such process"),
    (lambda t: t, [], "no proc/ folder"),
    (lambda t: (t / "proc").mkdir() or t, [], "no process folders"),
    (lambda t: (t / "proc").write_text("x") or t, [], "no proc/ folder"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, cli, make, args, needle):
    root = make(tmp_path)
    r = cli("doctor", "--proc-root", str(root), "--sysfs-root", str(tmp_path), *args)
    assert r.exit_code == 2, r.stdout
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_pid_that_does_not_exist_on_the_real_proc(cli):
    r = cli("doctor", "--pid", "4194303")
    assert r.exit_code == 2 and "no such process" in r.stderr


def test_parsers():
    assert policy_nodes("bind:0-1") == ("bind", [0, 1])
    assert policy_nodes("interleave:0,2") == ("interleave", [0, 2])
    assert policy_nodes("bind=static:1") == ("bind", [1])
    assert policy_nodes("default") == ("default", [])
    text = ("7f00 default anon=3 N0=3 kernelpagesize_kB=4\n"
            "7f01 bind:1 anon=10 N1=10 kernelpagesize_kB=2048\n"
            "7f02 default file=/usr/lib/x.so mapped=2 N0=1 N1=1 kernelpagesize_kB=4\n")
    assert parse_numa_maps(text) == ("bind:1", {0: 16, 1: 20484})
    assert redact(["vllm", "serve", "--api-key", "s", "--hf-token=t", "--port", "1"]) == [
        "vllm", "serve", "--api-key", "<redacted>", "--hf-token=<redacted>", "--port", "1"]


# -- real processes on this machine ----------------------------------------------------------

def _fake_vllm(tmp: Path) -> Path:
    """A package named vllm whose api_server only sleeps: a real process with vLLM's argv."""
    pkg = tmp / "pkgs" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (tmp / "pkgs/vllm", tmp / "pkgs/vllm/entrypoints", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(
        "import time\nblock = bytearray(32 * 1024 * 1024)\n"
        "for i in range(0, len(block), 4096):\n    block[i] = 1\n"
        "open(__import__('sys').argv[-1], 'w').write('up')\n"
        "time.sleep(120)\n")
    return tmp / "pkgs"


def _real_children(tmp: Path, prefix: list[str], env: dict[str, str]) -> subprocess.Popen:
    ready = tmp / "ready"
    cmd = [*prefix, sys.executable, "-m", "vllm.entrypoints.openai.api_server",
           "--model", "m", "--host", "127.0.0.1", str(ready)]
    proc = subprocess.Popen(cmd, env={**os.environ, **env, "PYTHONPATH": str(_fake_vllm(tmp))})
    end = time.monotonic() + 30
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < end
        time.sleep(0.05)
    return proc


def _real_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or shutil.which("numactl") is None,
                    reason="needs two CPUs and numactl (.ci/run installs it)")
def test_real_process_affinity_and_memory_policy_are_read_back(tmp_path):
    cpus = _real_cpus()
    node = sorted(int(p.name[4:]) for p in Path("/sys/devices/system/node").glob("node[0-9]*"))[0]
    env = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "VLLM_API_KEY": "x"}
    child = _real_children(tmp_path, ["numactl", f"--physcpubind={cpus[-1]}",
                                      f"--membind={node}"], env)
    try:
        # this machine's real /proc; a sysfs tree that puts one GPU on the real node
        sysfs = make_host(tmp_path / "sys", {node: ",".join(map(str, cpus))},
                          [("0000:18:00.0", node)])
        report = diagnose(proc_root="/", sysfs_root=sysfs)
        mine = [s for s in report.servers if s.pid == child.pid]
        assert len(mine) == 1, [s.pid for s in report.servers]
        p = mine[0].processes[0]
        assert p.role == "api-server"
        assert p.cpus == [cpus[-1]] == sorted(os.sched_getaffinity(child.pid))
        assert p.policy == f"bind:{node}"
        assert p.kib_per_node and p.kib_per_node[node] >= 32 * 1024  # the 32 MiB it touched
        assert p.env == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        assert p.api_key_env is True
        assert mine[0].gpus == [0]
        # --pid finds the same process; one CPU for one GPU is below vLLM's floor of 3
        one = diagnose([child.pid], proc_root="/", sysfs_root=sysfs)
        assert [s.pid for s in one.servers] == [child.pid]
        assert "below-cpu-floor" in codes(one)
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_real_process_misbound_on_a_two_node_layout(tmp_path):
    """The kernel has the CPUs; the sysfs tree says CPU 0 is node 0 (with the GPU) and the
    rest node 1. A real child pinned to node 1's CPUs is named misbound, with the fix."""
    cpus = _real_cpus()
    env = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "VLLM_API_KEY": "x"}
    child = _real_children(tmp_path, ["taskset", "-c", ",".join(map(str, cpus[1:]))], env)
    try:
        sysfs = make_host(tmp_path / "sys", {0: str(cpus[0]),
                                             1: ",".join(map(str, cpus[1:]))},
                          [("0000:18:00.0", 0)])
        report = diagnose([child.pid], proc_root="/", sysfs_root=sysfs)
        f = by_code(report, "cpus-off-node")
        assert f.pids == [child.pid] and f.severity == "error"
        numactl = {x.kind: x.text for x in f.fixes}["numactl"]
        assert numactl.startswith("numactl --cpunodebind=0 --membind=0 " + sys.executable
                                  + " -m vllm.entrypoints.openai.api_server")
    finally:
        child.kill()
        child.wait()


def _as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, timeout=120, check=False)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="runs doctor as an unprivileged user (needs root and "
                                "setpriv)")


@needs_root
def test_unreadable_proc_is_exit_2(tmp_path):
    tmp_path.chmod(0o755)
    d = tmp_path / "root"
    (d / "proc").mkdir(parents=True)
    (d / "proc").chmod(0)
    r = _as_nobody("doctor", "--proc-root", str(d), "--sysfs-root", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert "cannot be read by this user" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@needs_root
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_another_users_process_is_reported_unreadable_not_guessed(tmp_path):
    """doctor run as 'nobody' on a root-owned server: the kernel keeps its environ, numa_maps
    and fd from that user; doctor says so and judges nothing it could not read."""
    for p in (tmp_path, *tmp_path.parents):
        if p == Path("/tmp") or p == Path("/"):
            break
        p.chmod(0o755)
    env = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "VLLM_API_KEY": "x"}
    child = _real_children(tmp_path, [], env)
    try:
        sysfs = make_host(tmp_path / "sys", {0: ",".join(map(str, _real_cpus()))},
                          [("0000:18:00.0", 0)])
        r = _as_nobody("doctor", "--pid", str(child.pid), "--sysfs-root", str(sysfs), "--json",
                       "--check")
        assert r.returncode == 1, r.stderr
        body = json.loads(r.stdout)
        f = next(x for s in body["servers"] for x in s["findings"] if x["code"] == "unreadable")
        assert f"/proc/{child.pid}/environ" in {e["path"] for e in f["evidence"]}
        p = body["servers"][0]["processes"][0]
        assert p["env"] == {} and p["policy"] is None and p["api_key_env"] is None
        assert p["cpus"] == _real_cpus()  # status is world-readable: still read
    finally:
        child.kill()
        child.wait()


def test_no_gpu_is_guessed_from_an_environ_we_could_not_read(tmp_path, monkeypatch):
    from advisor.host import doctor

    procs = [FakeProc(pid=7, argv=SERVE, env={**KEYED, "CUDA_VISIBLE_DEVICES": "5"},
                      cpus="0-7", maps=[("bind:0", {0: 10})])]  # no device file open
    root = host(tmp_path, procs)
    real = doctor._read_proc

    def deny(path, limit=doctor.MAX_PROC_BYTES):
        if path.name == "environ":
            raise doctor._Unreadable(str(path))
        return real(path, limit)

    monkeypatch.setattr(doctor, "_read_proc", deny)
    report = diagnose(proc_root=root, sysfs_root=root)
    assert report.servers[0].gpus is None
    assert codes(report) == ["unreadable"]  # not "GPU 0 is on node 0, all fine"
    monkeypatch.undo()
    # readable, it is GPU 5 on node 1: misbound
    assert "cpus-off-node" in codes(diagnose(proc_root=root, sysfs_root=root))


def test_every_gpu_visible_without_pci_order_is_stated(tmp_path):
    env = {"VLLM_API_KEY": "x"}  # no CUDA_VISIBLE_DEVICES, no CUDA_DEVICE_ORDER
    procs = [FakeProc(pid=7, argv=[*SERVE, "-tp", "2"], env=env, cpus="0-7",
                      maps=[("bind:0", {0: 10})])]
    report = diagnose(proc_root=host(tmp_path, procs), sysfs_root=tmp_path)
    assert report.servers[0].gpus == [0, 1]
    f = by_code(report, "cuda-order-assumed")
    assert f.severity == "info" and "every GPU visible, the first 2 used" in f.text
    assert report.ok
