"""``advisor doctor``: check running vLLM servers' NUMA binding on this host, with fixes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor.cli import output as out
from advisor.cli.common import JsonFlag

_MARK = {"error": "ERROR", "warning": "WARN ", "info": "info "}

#: --check's exit codes, for the help (advisor.host.doctor.EXIT_CODES says the same)
_CHECK_HELP = ("Exit by cause, for monitoring: 0 ok (nothing at warning or error), 1 a finding "
               "at warning or error, 2 bad input, 3 no vLLM server found, 4 unverified (only "
               "unreadable / gpus-unknown / gpu-node-hidden warnings). Without --check the exit "
               "is 0 whatever was found.")


def doctor_cmd(
    pid: Annotated[list[int] | None, typer.Option(
        "--pid", help="Check the vLLM server this process belongs to (repeatable); default: "
        "every vLLM server found.", min=1, max=4194304)] = None,
    proc_root: Annotated[Path, typer.Option(
        help="Folder holding the proc/ tree to read (a copy in tests).")] = Path("/"),
    sysfs_root: Annotated[Path, typer.Option(
        help="Folder holding the sys/ tree to read.")] = Path("/"),
    nvidia_smi_topo: Annotated[Path | None, typer.Option(
        help="A saved 'nvidia-smi topo -m' printout: tells NVLink from PCIe within a TP "
        "group (default: run nvidia-smi when present and --sysfs-root is /).")] = None,
    ignore: Annotated[list[str] | None, typer.Option(
        "--ignore", metavar="CODE", help="Leave out the findings of CODE (repeatable), "
        "e.g. gpu-node-hidden on a host whose GPUs have no NUMA node.")] = None,
    check: Annotated[bool, typer.Option("--check", help=_CHECK_HELP)] = False,
    json: JsonFlag = False,
) -> None:
    """Check running vLLM servers: GPUs, NUMA binding, memory placement, threads, PCIe links,
    GPU-to-GPU and NIC paths, host settings; each finding with its evidence and the fix to
    paste. --check exits 0 ok, 1 findings, 2 bad input, 3 no vLLM, 4 unverified."""
    from advisor.errors import UserInputError
    from advisor.host.doctor import CODES, diagnose

    unknown = [c for c in ignore or [] if c not in CODES]
    if unknown:
        raise UserInputError(f"--ignore {unknown[0][:60]}: not a finding code",
                             hint="codes: " + ", ".join(sorted(CODES)))
    smi = None
    if nvidia_smi_topo is not None:
        from advisor.cli.topology import _read_file

        smi = _read_file(nvidia_smi_topo, "--nvidia-smi-topo")
        if not smi.strip():
            raise UserInputError(f"--nvidia-smi-topo {str(nvidia_smi_topo)[:120]} is empty",
                                 hint="save the output of 'nvidia-smi topo -m'")
    elif sysfs_root == Path("/"):
        from advisor.cli.topology import _run_nvidia_smi

        smi = _run_nvidia_smi()
    report = diagnose(pid or None, proc_root=proc_root, sysfs_root=sysfs_root,
                      nvidia_smi_topo=smi).ignoring(ignore or [])
    if json:
        out.emit_json(report.to_json())
    else:
        _print(report)
    if check and report.exit_code:
        raise typer.Exit(report.exit_code)


def _print(report: object) -> None:
    from advisor.host.doctor import Finding, Report
    from advisor.host.topology import format_cpulist as _span

    assert isinstance(report, Report)
    h = report.host
    gpus = ", ".join(f"{i}:{'hidden' if n is None else n}" for i, n in enumerate(h.gpu_nodes))
    out.line(f"Host: {len(h.nodes)} NUMA node(s) ("
             + "; ".join(f"node {n}: CPUs {_span(c)}" for n, c in h.nodes.items()) + "), "
             + (f"{h.sockets} socket(s), {h.cores} cores / {h.cpus} CPUs"
                f"{' (SMT on)' if h.smt else ''}" if h.cpus else "CPUs unknown")
             + f"; {len(h.gpus)} GPU(s)" + (f" (GPU:node {gpus})" if gpus else "")
             + ("" if h.numa_balancing is None else
                f"; kernel.numa_balancing = {h.numa_balancing}"))

    shown: set[str] = set()

    def show(f: Finding) -> None:
        pad = " " * 9
        out.line(f"  {_MARK[f.severity]} {f.code}: {f.text}", indent=pad)
        for e in f.evidence:
            out.line(f"{pad}evidence: {e.path}: {e.value}", indent=pad + "  ")
        for x in f.fixes:
            key = f"{x.kind}|{x.path}|{x.text}"
            if key in shown:
                out.line(f"{pad}fix ({x.kind}): as above")
                continue
            shown.add(key)
            if x.path:
                out.line(f"         fix ({x.kind}): write {x.path}:")
                for ln in x.text.rstrip("\n").splitlines():
                    out.line(f"             {ln}", wrap=False)
                if x.then:
                    out.line(f"           then: {x.then}", wrap=False)
            else:
                out.line(f"         fix ({x.kind}): {x.text}", wrap=False)
        if f.why:
            out.line(f"{pad}why: {f.why}", indent=pad + "  ")

    if not report.servers:
        out.line("No running vLLM server found (looked for 'vllm serve' and 'python -m "
                 "vllm.entrypoints…' processes, the processes under them and their Ray "
                 "workers).")
    for s in report.servers:
        roles: dict[str, list[int]] = {}
        for p in s.processes:
            roles.setdefault(p.role, []).append(p.pid)
        where = "" if not s.gpus else (
            f"GPU(s) {_span(s.gpus)} on node(s) "
            + ",".join("hidden" if n is None else str(n) for n in sorted(
                set(s.gpu_nodes or []), key=lambda n: (n is None, n or 0))))
        out.line("")
        out.line(f"vLLM server {s.pid}" + (f" ({s.unit})" if s.unit else "")
                 + f": TP {s.tp}" + (f" x PP {s.pp}" if s.pp > 1 else "")
                 + (f" x DP {s.dp}" if s.dp > 1 else "")
                 + (f", {where}" if where else ", CPU only (no GPU)" if s.device == "cpu"
                    else ", GPUs unknown")
                 + (", --numa-bind" if s.numa_bind else "") + "; "
                 + ", ".join(f"{r} {','.join(map(str, ps))}" for r, ps in roles.items()))
        if not s.findings:
            out.line("  ok: bound to its GPUs' node(s), nothing to fix")
        for f in s.findings:
            show(f)
    if report.findings:
        out.line("")
        out.line("Host:")
        for f in report.findings:
            show(f)
    counts = {k: sum(1 for f in report.all_findings if f.severity == k)
              for k in ("error", "warning", "info")}
    out.line("")
    out.line(f"{len(report.servers)} server(s): {counts['error']} error(s), "
             f"{counts['warning']} warning(s), {counts['info']} note(s)"
             + (f"; ignored: {', '.join(report.ignored)}" if report.ignored else "")
             + f"; --check: {report.exit_code} ({report.status})")
