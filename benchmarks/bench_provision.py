"""Speed of `advisor provision`, `status` and `down` (no real cloud: moto's server on 127.0.0.1).

    python benchmarks/bench_provision.py [--runs 5]

1. Cold start: `advisor provision … --dry-run --json` in a new process (builds the exact
   request bodies and the user-data; imports no cloud SDK), median of the runs.
2. End to end through the installed CLI against moto in server mode: `provision --yes --json`
   (recommend, render, security group, IAM role and profile, RunInstances, state writes),
   `status --reconcile --json`, `down --yes --json`, each timed, median of the runs. Moto answers
   in milliseconds, so these are advisor's own costs plus boto3's client set-up, not a cloud's.
3. Peak Python memory (tracemalloc) of one in-process dry run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import urllib.request

ARGS = ["--model", "llama-3-8b", "--ctx", "8192", "--instance", "aws:g6e.xlarge"]


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                       stdin=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
    return dt, r.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("advisor")
    if exe is None:
        raise SystemExit("install advisor first (pip install '.[test]')")
    home = tempfile.mkdtemp(prefix="advisor-bench-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ADVISOR_"))},
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "bench",
           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "ADVISOR_HOME": home,
           "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true"}
    moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        dry = [_timed([exe, "provision", *ARGS, "--name", "bench", "--dry-run", "--json"],
                      env)[0] for _ in range(args.runs)]
        up, st, down = [], [], []
        for i in range(args.runs):
            name = f"bench-{i}"
            dt, out = _timed([exe, "provision", *ARGS, "--name", name, "--yes", "--json"], env)
            assert json.loads(out)["status"] == "launched"
            up.append(dt)
            st.append(_timed([exe, "status", name, "--reconcile", "--json"], env)[0])
            down.append(_timed([exe, "down", name, "--yes", "--json"], env)[0])
    finally:
        moto.terminate()
        moto.wait(10)
        shutil.rmtree(home, ignore_errors=True)

    os.environ["ADVISOR_HOME"] = tempfile.mkdtemp(prefix="advisor-bench-")
    from advisor.provisioning import provision

    provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
              instance="aws:g6e.xlarge", name="warm", dry_run=True)
    tracemalloc.start()
    provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
              instance="aws:g6e.xlarge", name="mem", dry_run=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    def med(xs: list[float]) -> float:
        return round(statistics.median(xs), 3)

    print(json.dumps({"runs": args.runs, "dry_run_cold_s": med(dry),
                      "provision_cli_s": med(up), "status_reconcile_cli_s": med(st),
                      "down_cli_s": med(down),
                      "dry_run_peak_traced_mib": round(peak / 2**20, 2)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
