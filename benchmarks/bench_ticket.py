"""Speed of `advisor ticket`.

    python benchmarks/bench_ticket.py [--runs 5]

1. Cold start: `advisor ticket --instance aws:p5.48xlarge` in a new process, median of the runs.
2. In process: a ticket (built and rendered as Markdown) for every bundled instance type, and
   the same for p5.48xlarge with a probe of 8 GPUs on 2 nodes; time per ticket, median.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import advisor
    from advisor.host.topology import Node, PciDevice, Topology
    from advisor.tickets import make_ticket

    out: dict[str, object] = {}
    exe = shutil.which("advisor")
    if exe:
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([exe, "ticket", "--instance", "aws:p5.48xlarge"], check=True,
                           capture_output=True)
            times.append(time.perf_counter() - t0)
        out["cli_cold_s"] = round(statistics.median(times), 3)
    cat = advisor.load_catalog()
    make_ticket("aws:p5.48xlarge", catalog=cat).render()  # warm the templates
    per = []
    for key in cat.instances:
        t0 = time.perf_counter()
        make_ticket(key, catalog=cat).render("markdown")
        per.append(time.perf_counter() - t0)
    out["per_ticket_ms_median"] = round(statistics.median(per) * 1000, 2)
    out["all_instances"] = len(per)
    topo = Topology(
        nodes=[Node(id=0, cpus=list(range(96)), memory_gib=1000.0, distances=[10, 32]),
               Node(id=1, cpus=list(range(96, 192)), memory_gib=1000.0, distances=[32, 10])],
        gpus=[PciDevice(index=i, bus_id=f"0000:{0x10 + i:02x}:00.0", vendor="nvidia",
                        numa_node=i // 4, numa_hidden=False) for i in range(8)], nics=[])
    probe = json.loads(topo.model_dump_json())
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        make_ticket("aws:p5.48xlarge", probe=probe, catalog=cat).render("markdown")
        times.append(time.perf_counter() - t0)
    out["with_probe_ms_median"] = round(statistics.median(times) * 1000, 2)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
