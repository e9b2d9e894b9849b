"""Speed and memory of `advisor doctor`.

    python benchmarks/bench_doctor.py [--runs 5] [--procs 2000]

1. Cold start: `advisor doctor --json` in a new process on this machine's real /proc and sysfs
   (median of the runs).
2. In process, on a fake host (2 nodes, 192 CPUs with SMT, 8 GPUs) whose /proc holds --procs
   unrelated processes and one vLLM server at TP 8 (API server, engine core, 8 workers, each
   with a numa_maps of 5,000 mappings): `diagnose()` time (median) and peak traced memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--procs", type=int, default=2000)
    args = parser.parse_args()
    from tests.doctor_trees import FakeProc, make_host, make_proc

    from advisor.host.doctor import diagnose

    out: dict[str, object] = {}
    exe = shutil.which("advisor")
    if exe:
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([exe, "doctor", "--json"], capture_output=True, check=False)
            times.append(time.perf_counter() - t0)
        out["cli_cold_real_proc_s"] = round(statistics.median(times), 3)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        nodes = {0: "0-47,96-143", 1: "48-95,144-191"}
        gpus = [(f"0000:{0x18 + 0x10 * i:02x}:00.0", i // 4) for i in range(8)]
        make_host(root, nodes, gpus, smt=True)
        env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(8))), "VLLM_API_KEY": "x"}
        argv = ["/usr/bin/python3", "/opt/vllm/bin/vllm", "serve", "m",
                "--tensor-parallel-size", "8"]
        maps = [("default", {0: 3, 1: 1})] * 5000
        procs = [FakeProc(pid=1000, argv=argv, env=env, cpus="0-191"),
                 FakeProc(pid=1001, ppid=1000, argv=["VLLM::EngineCore"], env=env,
                          cpus="0-191")]
        procs += [FakeProc(pid=1010 + r, ppid=1001, argv=[f"VLLM::Worker_TP{r}"], env=env,
                           cpus="0-191", maps=maps, nvidia_minors=[r]) for r in range(8)]
        procs += [FakeProc(pid=20000 + i, argv=["/usr/sbin/some-daemon", f"--id={i}"])
                  for i in range(args.procs)]
        make_proc(root, procs, [b for b, _ in gpus])
        diagnose(proc_root=root, sysfs_root=root)  # warm
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            report = diagnose(proc_root=root, sysfs_root=root)
            times.append(time.perf_counter() - t0)
        assert len(report.servers) == 1 and len(report.servers[0].processes) == 10
        out["fake_host_processes"] = len(procs)
        out["diagnose_s_median"] = round(statistics.median(times), 3)
        tracemalloc.start()
        diagnose(proc_root=root, sysfs_root=root)
        out["diagnose_peak_traced_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
