"""``advisor doctor`` on real processes shaped the way vLLM shapes them (issue 32): each test
starts a real process tree whose /proc entries — command lines rewritten in place as
setproctitle does, environments narrowed in-process, CPU affinity, device files — follow the
vLLM source line it is named after, and reads it back from this machine's /proc. The sysfs
tree splits this machine's CPUs into two NUMA nodes with two GPUs on each."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from advisor.host.doctor import diagnose
from tests.doctor_trees import add_drm, make_host, start_tree, unshare_works

CPUS = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")
HALF = len(CPUS) // 2
NODE_CPUS = {0: CPUS[:HALF], 1: CPUS[HALF:]}
#: GPUs 0, 1 hang off node 0, GPUs 2, 3 off node 1
GPUS = [("0000:18:00.0", 0), ("0000:2a:00.0", 0), ("0000:9a:00.0", 1), ("0000:ab:00.0", 1)]
API = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"]
KEYED = {"VLLM_API_KEY": "k-secret", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def sysfs(tmp: Path) -> Path:
    return make_host(tmp / "sys", {n: ",".join(map(str, c)) for n, c in NODE_CPUS.items()}, GPUS)


def server_of(report, pid):
    mine = [s for s in report.servers if s.pid == pid]
    assert len(mine) == 1, [s.pid for s in report.servers]
    return mine[0]


def codes(server, severity=None):
    return sorted({f.code for f in server.findings if severity is None or f.severity == severity})


def by_code(server, code):
    return next(f for f in server.findings if f.code == code)


@pytest.fixture
def trees():
    started = []
    yield started
    for t in started:
        t.stop()


def _start(trees, *args, **kw):
    t = start_tree(*args, **kw)
    trees.append(t)
    return t


# -- 1. the API server whose title replaced its argv --------------------------------------

def test_cli_serve_run_api_server_worker_proc_set_process_title_APIServer(tmp_path, trees):
    """vllm/entrypoints/cli/serve.py run_api_server_worker_proc: set_process_title("APIServer",
    str(server_index)) replaces each API server process's argv with ``VLLM::APIServer_<i>``.
    The argv the user typed (--api-key, --host 127.0.0.1) is kept by the parent, and judged
    there; a title alone is never read as 'no --api-key, every address'."""
    argv = [*API, "--api-key", "k-in-argv", "--host", "127.0.0.1", "--api-server-count", "2"]
    tree = {"id": "serve", "children": [
        {"id": "api0", "spawn": True, "cmdline": ["VLLM::APIServer_0"]},
        {"id": "api1", "spawn": True, "cmdline": ["VLLM::APIServer_1"]}]}
    t = _start(trees, tmp_path, argv, tree)
    s = server_of(diagnose([t.pids["api1"]], proc_root="/", sysfs_root=sysfs(tmp_path)),
                  t.pids["serve"])
    assert {p.pid: p.role for p in s.processes} == {
        t.pids["serve"]: "api-server", t.pids["api0"]: "api-server",
        t.pids["api1"]: "api-server"}
    assert s.processes[1].title in ("VLLM::APIServer_0", "VLLM::APIServer_1")
    assert "no-api-key" not in codes(s)
    assert by_code(s, "api-key-in-argv").pids == [t.pids["serve"]]
    assert s.command is not None and s.command[-4:] == [
        "--host", "127.0.0.1", "--api-server-count", "2"]

    # the same title on the server itself (no parent kept the argv): a note, not a warning
    t2 = _start(trees, tmp_path, [*API, "--api-key", "k", "--host", "127.0.0.1"],
                {"id": "api", "cmdline": ["VLLM::APIServer_0"]}, env={"VLLM_API_KEY": ""})
    s2 = server_of(diagnose([t2.pids["api"]], proc_root="/", sysfs_root=sysfs(tmp_path / "b")),
                   t2.pids["api"])
    assert s2.command is None
    assert "no-api-key" not in codes(s2)
    assert by_code(s2, "argv-replaced").severity == "info"


# -- 2. data parallel: each engine narrows CUDA_VISIBLE_DEVICES in-process -----------------

def _dp2_tp2(spawn_dp1_workers: bool) -> dict:
    def engine(d: int, spawn: bool) -> dict:
        gpus = "0,1" if d == 0 else "2,3"
        return {"id": f"engine{d}", "cmdline": [f"VLLM::EngineCore_DP{d}"],
                "setenv": {"CUDA_VISIBLE_DEVICES": gpus},
                "children": [{"id": f"w{d}{r}", "spawn": spawn,
                              "cmdline": [f"VLLM::Worker_DP{d}_TP{r}"],
                              "cpus": NODE_CPUS[d]} for r in range(2)]}
    return {"id": "serve", "children": [
        {"id": "coord", "cmdline": ["VLLM::DPCoordinator"]},
        engine(0, False), engine(1, spawn_dp1_workers)]}


@pytest.mark.parametrize("spawn", [False, True], ids=["fork", "spawn"])
def test_engine_utils_set_device_control_env_var_dp2_tp2(tmp_path, trees, spawn):
    """vllm/v1/engine/utils.py set_device_control_env_var: each DP engine sets
    CUDA_VISIBLE_DEVICES to GPUs [d*W, (d+1)*W) in os.environ before starting its process;
    a forked process's /proc/PID/environ still shows the value at exec ("0,1,2,3"), a spawned
    one the narrowed "2,3". Workers titled Worker_DP<d>_TP<r> (multiproc_executor.py
    setup_proc_title_and_log_prefix), each bound to its own GPU's node, are correct either
    way: DP rank 1's TP 0 drives GPU 2, not GPU 0."""
    argv = [*API, "--host", "127.0.0.1", "--tensor-parallel-size", "2",
            "--data-parallel-size", "2"]
    t = _start(trees, tmp_path, argv, _dp2_tp2(spawn),
               env={**KEYED, "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    s = server_of(diagnose([t.pids["serve"]], proc_root="/", sysfs_root=sysfs(tmp_path)),
                  t.pids["serve"])
    got = {p.pid: p.gpus for p in s.processes if p.role == "worker"}
    assert got == {t.pids["w00"]: [0], t.pids["w01"]: [1], t.pids["w10"]: [2],
                   t.pids["w11"]: [3]}
    assert (s.tp, s.dp) == (2, 2) and s.gpus == [0, 1, 2, 3]
    assert s.tp_groups == [[0, 1], [2, 3]]
    assert "cpus-off-node" not in codes(s)
    w10 = next(p for p in s.processes if p.pid == t.pids["w10"])
    assert w10.ranks == {"DP": 1, "TP": 0}
    if not spawn:
        assert "DP rank 1" in (w10.gpu_source or "")
    # the engines drive no GPU themselves (their workers do)
    assert all(not p.gpus for p in s.processes if p.role == "engine-core")


# -- 3. a CPU vLLM ----------------------------------------------------------------------------

def test_envs_VLLM_CPU_KVCACHE_SPACE_cpu_backend(tmp_path, trees, cli):
    """vllm/envs.py VLLM_CPU_KVCACHE_SPACE is read by the CPU backend only: a vLLM on a host
    with no GPU (or with it set) has no GPU binding to check — not 'GPUs unknown'."""
    cpu_host = make_host(tmp_path / "cpu", {0: ",".join(map(str, CPUS))}, [])
    t = _start(trees, tmp_path, [*API, "--host", "127.0.0.1"], {"id": "serve"},
               env={**KEYED, "VLLM_CPU_KVCACHE_SPACE": "8"})
    s = server_of(diagnose([t.pids["serve"]], proc_root="/", sysfs_root=cpu_host),
                  t.pids["serve"])
    assert s.device == "cpu" and s.gpus == []
    assert "gpus-unknown" not in codes(s)
    assert by_code(s, "cpu-only").severity == "info"
    r = cli("doctor", "--pid", str(t.pids["serve"]), "--sysfs-root", str(cpu_host), "--check")
    assert r.exit_code == 0, r.stdout
    assert "CPU only (no GPU)" in r.stdout
    # on a GPU host, CUDA_VISIBLE_DEVICES="" hides every GPU: a CPU vLLM too
    t2 = _start(trees, tmp_path, [*API, "--host", "127.0.0.1"], {"id": "serve"},
                env={**KEYED, "CUDA_VISIBLE_DEVICES": ""})
    s2 = server_of(diagnose([t2.pids["serve"]], proc_root="/", sysfs_root=sysfs(tmp_path)),
                   t2.pids["serve"])
    assert s2.device == "cpu" and "gpus-unknown" not in codes(s2)


# -- 4. wrappers whose argv mentions `vllm serve` ---------------------------------------------

@pytest.mark.parametrize("wrapper", [
    ["docker", "exec", "ctr", "vllm", "serve", "m"],
    ["ssh", "gpu-host", "vllm", "serve", "m"],
    ["/usr/bin/env", "bash", "-c", "vllm serve m"],
], ids=["docker-exec", "ssh", "env-bash"])
def test_cli_main_vllm_serve_only_the_vllm_process_is_the_server(tmp_path, trees, cli, wrapper):
    """vllm/entrypoints/cli/main.py: the server is the process running the ``vllm`` script
    (``vllm serve``, or a Python interpreter running it). ``docker exec ctr vllm serve m``
    runs vLLM in the container (its own process), ``ssh host vllm serve m`` on another
    host: the client processes here are not servers."""
    t = _start(trees, tmp_path, [sys.executable, "-c", "import vllm._tree as t; t.main()"],
               {"id": "wrapper", "cmdline": wrapper}, env=KEYED)
    report = diagnose(proc_root="/", sysfs_root=sysfs(tmp_path))
    assert t.pids["wrapper"] not in {p.pid for s in report.servers for p in s.processes}
    r = cli("doctor", "--pid", str(t.pids["wrapper"]), "--sysfs-root", str(tmp_path / "sys"))
    assert r.exit_code == 2 and "not a vLLM process" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_screen_is_no_part_of_the_numactl_fix(tmp_path, trees):
    """Under ``screen -dmS llm vllm serve …`` the SCREEN process keeps that argv and forks
    the real ``vllm serve``; the server is the latter, and the command to paste is its own
    (vllm/entrypoints/cli/main.py), never one that begins with SCREEN."""
    vllm = [sys.executable, "/opt/venv/bin/vllm", "serve", "Qwen/Qwen3-8B", "--host",
            "127.0.0.1"]
    tree = {"id": "screen", "cmdline": ["SCREEN", "-dmS", "llm", "vllm", "serve",
                                        "Qwen/Qwen3-8B", "--host", "127.0.0.1"],
            "children": [{"id": "serve", "cmdline": vllm, "cpus": NODE_CPUS[1]}]}
    t = _start(trees, tmp_path, [sys.executable, "-c", "import vllm._tree as t; t.main()"],
               tree, env={**KEYED, "CUDA_VISIBLE_DEVICES": "0"})
    report = diagnose([t.pids["serve"]], proc_root="/", sysfs_root=sysfs(tmp_path))
    s = server_of(report, t.pids["serve"])
    assert t.pids["screen"] not in {p.pid for p in s.processes}
    fix = next(x.text for x in by_code(s, "cpus-off-node").fixes if x.kind == "numactl")
    assert fix == ("numactl --cpunodebind=0 --membind=0 " + sys.executable
                   + " /opt/venv/bin/vllm serve Qwen/Qwen3-8B --host 127.0.0.1")


# -- 5. a custom VLLM_PROCESS_NAME_PREFIX -----------------------------------------------------

def test_envs_VLLM_PROCESS_NAME_PREFIX_custom(tmp_path, trees):
    """vllm/envs.py VLLM_PROCESS_NAME_PREFIX (default "VLLM") is the prefix
    set_process_title puts before '::' (vllm/utils/system_utils.py): with it set to
    "PD-L1_binder" the workers are PD-L1_binder::Worker_TP<r>. Bound to the node their GPUs
    do not hang off, they are named misbound."""
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": "2,3", "VLLM_PROCESS_NAME_PREFIX": "PD-L1_binder"}
    tree = {"id": "serve", "children": [{"id": "engine", "cmdline": ["PD-L1_binder::EngineCore"],
                                         "children": [
        {"id": f"w{r}", "cmdline": [f"PD-L1_binder::Worker_TP{r}"], "cpus": NODE_CPUS[0]}
        for r in range(2)]}]}
    t = _start(trees, tmp_path, [*API, "--host", "127.0.0.1", "-tp", "2"], tree, env=env)
    s = server_of(diagnose([t.pids["serve"]], proc_root="/", sysfs_root=sysfs(tmp_path)),
                  t.pids["serve"])
    assert [p.role for p in s.processes] == ["api-server", "engine-core", "worker", "worker"]
    f = by_code(s, "cpus-off-node")
    assert f.pids == sorted([t.pids["w0"], t.pids["w1"]]) and f.severity == "error"
    assert {p.pid: p.gpus for p in s.processes if p.role == "worker"} == {
        t.pids["w0"]: [2], t.pids["w1"]: [3]}


# -- 6. Ray workers, children of the raylet ---------------------------------------------------

@pytest.mark.skipif(not unshare_works(), reason="device files need a private /dev (root, "
                    "unshare -m)")
def test_ray_executor_RayWorkerWrapper_not_children_of_the_server(tmp_path, trees):
    """vllm/v1/executor/ray_utils.py RayWorkerWrapper: with --distributed-executor-backend
    ray the workers are Ray actors, titled ``ray::RayWorkerWrapper`` by Ray and started by
    the raylet — not children of the API server. Ray sets CUDA_VISIBLE_DEVICES in-process, so
    their GPUs come from the device files they hold (here /dev/dri render nodes). Bound to
    node 1 while their GPUs 0 and 1 hang off node 0, they are named misbound."""
    root = sysfs(tmp_path)
    add_drm(root, {128: GPUS[0][0], 129: GPUS[1][0]})
    serve = _start(trees, tmp_path, [*API, "--host", "127.0.0.1", "-tp", "2",
                                     "--distributed-executor-backend", "ray"],
                   {"id": "serve"}, env=KEYED)
    raylet = {"id": "raylet", "cmdline": ["/opt/venv/lib/python3.12/site-packages/ray/core/"
                                          "src/ray/raylet/raylet",
                                          "--raylet_socket_name=/tmp/ray/raylet"],
              "children": [{"id": f"ray{r}", "cmdline": ["ray::RayWorkerWrapper"],
                            "cpus": NODE_CPUS[1], "fds": [f"/dev/dri/renderD{128 + r}"]}
                           for r in range(2)]}
    ray = _start(trees, tmp_path, [sys.executable, "-c", "import vllm._tree as t; t.main()"],
                 raylet, env=KEYED, devices=["/dev/dri/renderD128", "/dev/dri/renderD129"])
    report = diagnose([serve.pids["serve"]], proc_root="/", sysfs_root=root)
    s = server_of(report, serve.pids["serve"])
    workers = {p.pid: p for p in s.processes if p.ray}
    assert set(workers) == {ray.pids["ray0"], ray.pids["ray1"]}
    assert [workers[ray.pids[f"ray{r}"]].gpus for r in range(2)] == [[0], [1]]
    assert ray.pids["raylet"] not in {p.pid for p in s.processes}
    f = by_code(s, "cpus-off-node")
    assert f.pids == sorted(workers)
    # a Ray worker's pid brings its server
    assert [x.pid for x in diagnose([ray.pids["ray1"]], proc_root="/",
                                    sysfs_root=root).servers] == [serve.pids["serve"]]


# -- 7. older worker titles, and none at all --------------------------------------------------

def test_multiproc_executor_older_titles_append_pp_tp_suffix(tmp_path, trees):
    """Older vLLM (multiproc_executor.py WorkerProc.__init__, set_process_title(suffix,
    append=True)) appended ``_PP<p>_TP<r>`` to the title the worker inherited from its engine
    core: VLLM::EngineCore_PP1_TP0 is a worker (PP stage 1, TP rank 0), not an engine core.
    TP 2 x PP 2 on GPUs 0-3, stage 1 bound to node 1 with its GPUs 2 and 3: correct — a
    reading that dropped the PP rank would put stage 1 on GPUs 0 and 1 and call it
    misbound."""
    tree = {"id": "serve", "children": [{"id": "engine", "cmdline": ["VLLM::EngineCore"],
                                         "children": [
        {"id": f"w{p}{r}", "cmdline": [f"VLLM::EngineCore_PP{p}_TP{r}"], "cpus": NODE_CPUS[p]}
        for p in range(2) for r in range(2)]}]}
    t = _start(trees, tmp_path, [*API, "--host", "127.0.0.1", "-tp", "2", "-pp", "2"], tree,
               env={**KEYED, "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    s = server_of(diagnose([t.pids["serve"]], proc_root="/", sysfs_root=sysfs(tmp_path)),
                  t.pids["serve"])
    got = {p.pid: (p.role, p.gpus) for p in s.processes}
    assert got[t.pids["engine"]] == ("engine-core", None)
    assert [got[t.pids[f"w{p}{r}"]] for p in range(2) for r in range(2)] == [
        ("worker", [0]), ("worker", [1]), ("worker", [2]), ("worker", [3])]
    assert "cpus-off-node" not in codes(s)
    assert s.tp_groups == [[0, 1], [2, 3]]


@pytest.mark.skipif(not unshare_works(), reason="device files need a private /dev (root, "
                    "unshare -m)")
def test_set_process_title_without_setproctitle_installed(tmp_path, trees):
    """vllm/utils/system_utils.py set_process_title returns without a title when setproctitle
    is not installed: the workers keep multiprocessing's spawn command line. They are still
    this server's (they run under it), and the GPU each holds open is judged: GPU 3 (node 1)
    with the worker bound to node 0 is misbound."""
    root = sysfs(tmp_path)
    add_drm(root, {130: GPUS[2][0], 131: GPUS[3][0]})
    tree = {"id": "serve", "children": [{"id": "engine", "spawn": True, "children": [
        {"id": f"w{r}", "spawn": True, "cpus": NODE_CPUS[r],
         "fds": [f"/dev/dri/renderD{130 + r}"]} for r in range(2)]}]}
    t = _start(trees, tmp_path, [*API, "--host", "127.0.0.1", "-tp", "2"], tree, env=KEYED,
               devices=["/dev/dri/renderD130", "/dev/dri/renderD131"])
    s = server_of(diagnose([t.pids["w1"]], proc_root="/", sysfs_root=root), t.pids["serve"])
    got = {p.pid: p.gpus for p in s.processes}
    assert got[t.pids["w0"]] == [2] and got[t.pids["w1"]] == [3]
    assert by_code(s, "cpus-off-node").pids == [t.pids["w0"]]


# -- one coherent fix per server --------------------------------------------------------------

def test_fix_for_a_server_across_nodes_never_moves_it_to_one_worker_node(tmp_path, trees):
    """TP 2 on GPU 1 (node 0) and GPU 2 (node 1), the whole server pinned to node 1 (taskset
    before exec): worker TP 0 is off its node. The fix is the server's — vLLM's --numa-bind
    (PR #38635) on its own command line — the same one the spans-nodes finding gives, and no
    numactl line that would move both workers to node 0."""
    tree = {"id": "serve", "cpus": NODE_CPUS[1], "children": [
        {"id": "engine", "cmdline": ["VLLM::EngineCore"], "children": [
            {"id": f"w{r}", "cmdline": [f"VLLM::Worker_TP{r}"]} for r in range(2)]}]}
    argv = [*API, "--host", "127.0.0.1", "-tp", "2"]
    t = _start(trees, tmp_path, argv, tree, env={**KEYED, "CUDA_VISIBLE_DEVICES": "1,2"})
    s = server_of(diagnose([t.pids["serve"]], proc_root="/", sysfs_root=sysfs(tmp_path)),
                  t.pids["serve"])
    off = by_code(s, "cpus-off-node")
    assert off.pids == [t.pids["w0"]]
    spans = by_code(s, "spans-nodes")
    assert off.fixes == spans.fixes
    assert [x.kind for x in off.fixes] == ["vllm-flag"]
    assert off.fixes[0].text.endswith(" ".join([*argv, "--numa-bind"]))
    assert not any(x.kind == "numactl" for f in s.findings for x in f.fixes)
