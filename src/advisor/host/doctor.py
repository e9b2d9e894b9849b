"""``advisor doctor``: is a running vLLM on its GPUs' NUMA node, and what exact change fixes it.

For every vLLM process — the API server (``vllm serve``, ``python -m vllm.entrypoints…``), its
engine core and its workers (the ``VLLM::EngineCore`` / ``VLLM::Worker_TP<r>`` titles vLLM gives
them) — it reads what the kernel keeps about the process:

* ``/proc/PID/cmdline``: the flags that matter (``--tensor-parallel-size``, ``--numa-bind``,
  ``--cpu-offload-gb``, ``--kv-transfer-config``, ``--host``, an ``--api-key`` in argv);
* ``/proc/PID/environ``: ``CUDA_VISIBLE_DEVICES`` with ``CUDA_DEVICE_ORDER`` and
  ``OMP_NUM_THREADS`` — nothing else is kept, and of ``VLLM_API_KEY`` only whether it is set;
* ``/proc/PID/status``: ``Cpus_allowed_list``, ``Mems_allowed_list``, ``PPid``, ``Uid``;
* ``/proc/PID/numa_maps``: the memory policy and the bytes resident on each node;
* ``/proc/PID/fd/*``: the GPU device files held open (``/dev/nvidiaN``, whose minor number
  ``/proc/driver/nvidia/gpus/<bus id>/information`` maps to a bus id; ``/dev/dri/renderD*``,
  whose bus id sysfs names) — the exact GPU of each worker;
* ``/proc/PID/cgroup``: the systemd unit or container, so the fix can be a drop-in;

and, from sysfs (:func:`advisor.host.topology.probe`), each GPU's NUMA node, each node's CPUs,
the cores behind them and SMT, and ``/proc/sys/kernel/numa_balancing``.

Each :class:`Finding` has a severity, its evidence (file and value) and fixes to paste. The
severities follow the evidence of :mod:`advisor.core.host` (:data:`WHY` cites it per code):

* **error** — a binding that points *away* from the GPU (CPUs or memory policy only on another
  node): nothing is gained by it, and every host-to-GPU copy crosses the socket link;
* **warning** — something that costs speed or safety where the evidence says it does: memory
  living off the GPU's node, an unbound or node-spanning server whose host side is on the hot
  path (``--cpu-offload-gb``, KV transfer, several NUMA domains per socket), fewer cores than
  vLLM's floor, OpenMP threads beyond the CPUs allowed, NUMA balancing under a bound server, an
  API key in argv or none at all on a non-loopback address, a GPU whose node is hidden on a
  multi-node host, a file the process keeps from us;
* **info** — what is true but measured to cost little (an unbound server whose host side is off
  the hot path: 0-2% in public measurements), or an assumption doctor had to state.

``--check`` fails (exit 1) on any error or warning, or when no vLLM runs.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from advisor.core.host import CPU_FLOOR_SOURCE, cpu_floor
from advisor.errors import UserInputError
from advisor.host.topology import (
    MAX_ENTRIES,
    Topology,
    gpu_nodes,
    parse_cpulist,
    probe,
)
from advisor.host.topology import format_cpulist as _span

Severity = Literal["error", "warning", "info"]
Role = Literal["api-server", "engine-core", "worker", "other"]

#: the largest /proc file read whole: cmdline and environ (ARG_MAX is 2 MiB on Linux), status
MAX_PROC_BYTES = 4 * 1024 * 1024
#: numa_maps grows with the mappings (a CUDA process has thousands; ~100 bytes each)
MAX_NUMA_MAPS_BYTES = 64 * 1024 * 1024
#: open files looked at per process
MAX_FDS = 65536
#: the environment variables doctor keeps (values); every other one is never stored
ENV_KEPT = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS",
            "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
#: flags whose value is a secret: shown as <redacted>, never stored
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")

#: the evidence behind each finding's severity (the README prints the same list)
WHY: dict[str, str] = {
    "cpus-off-node": (
        "the process may not run on its GPU's node: every host-to-GPU copy crosses the socket "
        "link (pinned copies 3.2x slower from the far socket, gearshifft#82); it costs 0-2% of "
        "decode where the host is off the hot path (vLLM PR 30492, 1Cat-vLLM#678) and 1.5-5x "
        "where it is on it (PR 30492 with --cpu-offload-gb, srt-slurm#332)"),
    "memory-bound-off-node": (
        "the memory policy puts the process's pages on another node than its GPU's: host "
        "buffers it copies to the GPU are remote (gearshifft#82: 3.2x slower pinned copies)"),
    "memory-interleaved": (
        "memory interleaved over nodes beyond the GPU's: that share of the host buffers is "
        "remote (gearshifft#82)"),
    "memory-off-node": (
        "more than half of the resident memory (numa_maps) sits on other nodes than the GPU's"),
    "unbound": (
        "the scheduler may move the process to any node; with the host off the hot path this "
        "measured 0-2% (PR 30492, 1Cat-vLLM#678), with it on the hot path 1.5-5x (PR 30492 with "
        "offload, srt-slurm#332, dynamo#10171)"),
    "spans-nodes": (
        "the server's GPUs hang off several nodes: one numactl node cannot be right for all of "
        "them; vLLM's --numa-bind (PR #38635) binds each worker to its own GPU's node"),
    "gpu-node-hidden": (
        "sysfs numa_node reads -1 on a multi-node host: the GPU's node is not known, so the "
        "binding cannot be checked (advisor ticket asks the provider)"),
    "below-cpu-floor": CPU_FLOOR_SOURCE + "; vllm#49460: 6 cores for 8 GPUs, 8-12x slower "
    "inter-token latency",
    "omp-oversubscribed": (
        "OMP_NUM_THREADS above the CPUs the process may use: its OpenMP threads contend for "
        "them (vLLM sets 1 itself when unset, 'to avoid unnecessary CPU contention', "
        "vllm/v1/executor/multiproc_executor.py)"),
    "numa-balancing": (
        "Linux docs (admin-guide/sysctl/kernel, numa_balancing): 'If the target workload is "
        "already bound to NUMA nodes then this feature should be disabled'; it unmaps pages "
        "to sample faults"),
    "api-key-in-argv": (
        "argv is world-readable (/proc/PID/cmdline, ps): every local user can read the key; "
        "vLLM reads VLLM_API_KEY from its environment instead"),
    "no-api-key": (
        "no --api-key and no VLLM_API_KEY: vLLM serves its API to anyone who can reach the "
        "port"),
    "gpus-unknown": "the process's GPUs could not be read, so its binding cannot be checked",
    "unreadable": "the kernel keeps these files from this user: run doctor as root or as the "
    "service's user",
    "cuda-order-assumed": (
        "CUDA numbers GPUs fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; on identical "
        "GPUs doctor takes PCI bus order, as nvidia-smi does"),
    "host-below-cpu-floor": CPU_FLOOR_SOURCE,
}


class Evidence(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: str
    value: str


class Fix(BaseModel):
    """A change to paste: a command line, a file's content (``path``), or a flag."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["numactl", "systemd", "docker", "vllm-flag", "sysctl", "env", "run-as"]
    text: str
    #: where ``text`` goes, for a file (a systemd drop-in, a sysctl.d file)
    path: str | None = None
    #: what to run after writing ``path``
    then: str | None = None


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)
    severity: Severity
    code: str
    text: str
    pids: list[int] = []
    evidence: list[Evidence] = []
    fixes: list[Fix] = []
    why: str = ""


class Proc(BaseModel):
    """One process as the kernel shows it (secrets never kept)."""

    model_config = ConfigDict(frozen=True)
    pid: int
    ppid: int | None = None
    uid: int | None = None
    role: Role = "other"
    #: argv with secret flag values replaced by <redacted>
    argv: list[str] = []
    cpus: list[int] | None = None
    mems: list[int] | None = None
    #: the memory policy holding the most resident bytes (numa_maps: default, bind:0, …)
    policy: str | None = None
    #: resident KiB per node (numa_maps N<node>= pages x kernelpagesize_kB)
    kib_per_node: dict[int, int] | None = None
    #: GPU indices (PCI bus order) this process drives
    gpus: list[int] | None = None
    gpu_source: str | None = None
    env: dict[str, str] = {}
    api_key_env: bool | None = None
    #: systemd unit, "docker:<id>", "kubepods", or None
    unit: str | None = None
    unreadable: list[str] = []


class Server(BaseModel):
    model_config = ConfigDict(frozen=True)
    pid: int
    unit: str | None
    processes: list[Proc]
    gpus: list[int] | None
    gpu_nodes: list[int | None] | None
    tp: int
    pp: int
    numa_bind: bool
    regime: str
    findings: list[Finding]


class HostFacts(BaseModel):
    model_config = ConfigDict(frozen=True)
    nodes: dict[int, list[int]]
    cpus: int | None
    cores: int | None
    sockets: int | None
    smt: bool | None
    gpus: list[str]
    gpu_nodes: list[int | None]
    numa_balancing: int | None


class Report(BaseModel):
    model_config = ConfigDict(frozen=True)
    host: HostFacts
    servers: list[Server]
    findings: list[Finding]

    @property
    def all_findings(self) -> list[Finding]:
        return self.findings + [f for s in self.servers for f in s.findings]

    @property
    def ok(self) -> bool:
        """Nothing at error or warning, and at least one server found."""
        return bool(self.servers) and not any(
            f.severity in ("error", "warning") for f in self.all_findings)


# -- reading /proc ---------------------------------------------------------------------------

class _Unreadable(Exception):
    """A /proc file the kernel keeps from this user (EACCES/EPERM)."""


def _read_proc(path: Path, limit: int = MAX_PROC_BYTES) -> bytes | None:
    """A /proc file's bytes; None when the process or file is gone; _Unreadable when the
    kernel refuses; UserInputError when larger than ``limit`` or not a regular file."""
    from advisor.inputs import read_bytes

    try:
        return read_bytes(path, limit=limit, what="")
    except UserInputError as exc:
        msg = exc.message
        if "Permission denied" in msg or "Operation not permitted" in msg:
            raise _Unreadable(str(path)) from exc
        if "no such file" in msg or "No such process" in msg or "cannot read" in msg:
            return None
        raise


def _split_nul(data: bytes) -> list[str]:
    return [a.decode("utf-8", errors="replace") for a in data.split(b"\0") if a]


def redact(argv: list[str]) -> list[str]:
    """argv with the values of :data:`SECRET_FLAGS` replaced by ``<redacted>``."""
    out: list[str] = []
    hide = False
    for a in argv:
        if hide:
            out.append("<redacted>")
            hide = False
            continue
        flag = a.split("=", 1)[0]
        if flag in SECRET_FLAGS:
            if "=" in a:
                out.append(f"{flag}=<redacted>")
            else:
                out.append(a)
                hide = True
            continue
        out.append(a)
    return out


def _role(argv: list[str]) -> Role | None:
    """The vLLM role of a command line, or None when it is not vLLM's."""
    if not argv:
        return None
    head = argv[0].strip()
    if head.startswith("VLLM::") or head.startswith("VLLM_"):
        t = head[6:]
        if t.startswith("EngineCore"):
            return "engine-core"
        if t.startswith("Worker") or "Worker" in t:
            return "worker"
        if t.startswith("APIServer"):
            return "api-server"
        return "other"
    for i, a in enumerate(argv[:4]):
        if os.path.basename(a) == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return "api-server"
        if a == "-m" and i + 1 < len(argv) and argv[i + 1].startswith("vllm.entrypoints"):
            return "api-server"
    return None


def _flag(argv: list[str], *names: str) -> str | None:
    """The value of the last of ``names`` in argv (``--x v`` or ``--x=v``)."""
    value = None
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                value = argv[i + 1]
            elif a.startswith(n + "="):
                value = a.split("=", 1)[1]
    return value


def _has(argv: list[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in argv)


def _status(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def policy_nodes(policy: str) -> tuple[str, list[int]]:
    """``bind:0-1`` -> ("bind", [0, 1]); ``default`` -> ("default", [])."""
    mode, _, rest = policy.partition(":")
    if "=" in mode:  # bind=static:0
        mode, _, rest = policy.partition("=")
        rest = rest.split(":", 1)[-1]
    nodes = parse_cpulist(rest, where="numa_maps policy") if re.fullmatch(r"[\d,\-]+", rest) \
        else []
    return mode, nodes


def parse_numa_maps(text: str) -> tuple[str | None, dict[int, int]]:
    """(the policy holding the most resident KiB, KiB per node) of a numa_maps file."""
    per_node: dict[int, int] = {}
    per_policy: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        page_kib = 4
        counts: dict[int, int] = {}
        for p in parts[2:]:  # str methods, not a regex: a CUDA process has 10^4 lines
            if p[0] == "N":
                nid, _, npages = p[1:].partition("=")
                if nid.isdigit() and npages.isdigit() and len(nid) <= 5 and len(npages) <= 15:
                    counts[int(nid)] = int(npages)
            elif p.startswith("kernelpagesize_kB=") and p[18:].isdigit():
                page_kib = int(p[18:])
        kib = 0
        for node, pages in counts.items():
            per_node[node] = per_node.get(node, 0) + pages * page_kib
            kib += pages * page_kib
        per_policy[parts[1]] = per_policy.get(parts[1], 0) + kib
    if not per_policy:
        return None, per_node
    return max(per_policy.items(), key=lambda kv: (kv[1], kv[0] != "default"))[0], per_node


def _unit(cgroup: str) -> str | None:
    """The systemd unit (``vllm.service``, ``user:foo.service``), ``docker:<id>`` or
    ``kubepods`` a process runs in, from /proc/PID/cgroup."""
    paths = [line.split(":", 2)[2] for line in cgroup.splitlines() if line.count(":") >= 2]
    for path in paths:
        if "kubepods" in path:
            return "kubepods"
        m = re.search(r"docker[-/]([0-9a-f]{12,64})", path)
        if m:
            return f"docker:{m.group(1)[:12]}"
    for path in paths:
        parts = [p for p in path.split("/") if p]
        user = any(p.startswith("user@") and p.endswith(".service") for p in parts)
        for p in reversed(parts):
            if p.endswith(".service") and not p.startswith("user@"):
                return f"user:{p}" if user else p
    return None


def _nvidia_minors(proc: Path) -> dict[int, str]:
    """Device minor -> bus id, from /proc/driver/nvidia/gpus/<bus id>/information."""
    out: dict[int, str] = {}
    base = proc / "driver" / "nvidia" / "gpus"
    try:
        entries = sorted(base.iterdir())[:MAX_ENTRIES]
    except OSError:
        return out
    for d in entries:
        try:
            data = _read_proc(d / "information", limit=64 * 1024)
        except _Unreadable:
            continue
        m = re.search(r"Device Minor:\s*(\d{1,6})", (data or b"").decode(errors="replace"))
        if m:
            out[int(m.group(1))] = d.name.lower()
    return out


class _Reader:
    """Reads processes from a proc tree and GPUs from a sysfs tree."""

    def __init__(self, proc_root: Path, sysfs_root: Path, topo: Topology) -> None:
        self.proc = proc_root / "proc"
        self.sysfs = sysfs_root
        self.topo = topo
        self.bus_index = {g.bus_id.lower(): g.index for g in topo.gpus}
        self._minors: dict[int, str] | None = None

    @property
    def minors(self) -> dict[int, str]:
        if self._minors is None:
            self._minors = _nvidia_minors(self.proc)
        return self._minors

    def pids(self) -> list[int]:
        try:
            names = []
            for e in os.scandir(self.proc):
                if e.name.isdigit():
                    names.append(int(e.name))
                    if len(names) > 4 * MAX_ENTRIES:
                        break
        except OSError as exc:
            raise UserInputError(f"{self.proc}: cannot list it: {exc.strerror or exc}",
                                 hint="run doctor where /proc is mounted, or point "
                                 "--proc-root at a folder holding a proc/ tree") from exc
        return sorted(names)

    def argv(self, pid: int) -> list[str] | None:
        try:
            data = _read_proc(self.proc / str(pid) / "cmdline")
        except _Unreadable:
            return None
        if data is None:
            return None
        argv = _split_nul(data)
        if len(argv) == 1 and " " in argv[0] and argv[0].startswith("VLLM::"):
            argv = [argv[0].split()[0]]  # a setproctitle title padded with spaces
        return argv

    def ppid(self, pid: int) -> int | None:
        try:
            data = _read_proc(self.proc / str(pid) / "status")
        except _Unreadable:
            return None
        st = _status((data or b"").decode(errors="replace"))
        v = st.get("PPid", "")
        return int(v) if v.isdigit() else None

    def read(self, pid: int, role: Role) -> Proc:
        base = self.proc / str(pid)
        unreadable: list[str] = []

        def get(name: str, limit: int = MAX_PROC_BYTES) -> bytes | None:
            try:
                return _read_proc(base / name, limit=limit)
            except _Unreadable:
                unreadable.append(f"{base}/{name}")
                return None

        argv = _split_nul(get("cmdline") or b"")
        st = _status((get("status") or b"").decode(errors="replace"))
        cpus = parse_cpulist(st["Cpus_allowed_list"], where=f"{base}/status") \
            if "Cpus_allowed_list" in st else None
        mems = parse_cpulist(st["Mems_allowed_list"], where=f"{base}/status") \
            if "Mems_allowed_list" in st else None
        ppid = int(st["PPid"]) if st.get("PPid", "").isdigit() else None
        uid = int(st["Uid"].split()[0]) if st.get("Uid", "").split()[:1] and \
            st["Uid"].split()[0].isdigit() else None
        env_raw = get("environ")
        env: dict[str, str] = {}
        key_env = None
        if env_raw is not None:
            key_env = False
            for item in _split_nul(env_raw):
                k, _, v = item.partition("=")
                if k in ENV_KEPT:
                    env[k] = v[:512]
                elif k == "VLLM_API_KEY":
                    key_env = bool(v)
        policy, per_node = None, None
        try:
            maps = _read_proc(base / "numa_maps", limit=MAX_NUMA_MAPS_BYTES)
        except _Unreadable:
            unreadable.append(f"{base}/numa_maps")
            maps = None
        except UserInputError:
            maps = None  # larger than the limit: placement not read (said by the caller)
        if maps is not None:
            policy, per_node = parse_numa_maps(maps.decode(errors="replace"))
        cg = get("cgroup", 64 * 1024)
        gpus, source = self._gpus_from_fds(base, unreadable)
        return Proc(pid=pid, ppid=ppid, uid=uid, role=role, argv=redact(argv), cpus=cpus,
                    mems=mems, policy=policy, kib_per_node=per_node, gpus=gpus,
                    gpu_source=source, env=env, api_key_env=key_env,
                    unit=_unit(cg.decode(errors="replace")) if cg else None,
                    unreadable=unreadable)

    def _gpus_from_fds(self, base: Path, unreadable: list[str]) -> tuple[list[int] | None,
                                                                         str | None]:
        fd_dir = base / "fd"
        try:
            names = [e.name for e in os.scandir(fd_dir)][:MAX_FDS]
        except PermissionError:
            unreadable.append(f"{fd_dir}")
            return None, None
        except OSError:
            return None, None
        found: set[int] = set()
        for n in names:
            try:
                target = os.readlink(fd_dir / n)
            except OSError:
                continue
            m = re.fullmatch(r"/dev/nvidia(\d{1,4})", target)
            if m:
                bus = self.minors.get(int(m.group(1)))
                if bus is not None and bus in self.bus_index:
                    found.add(self.bus_index[bus])
                continue
            m = re.fullmatch(r"/dev/dri/(renderD\d{1,4})", target)
            if m:
                dev = self.sysfs / "sys" / "class" / "drm" / m.group(1) / "device"
                try:
                    bus = os.path.basename(os.readlink(dev)).lower()
                except OSError:
                    continue
                if bus in self.bus_index:
                    found.add(self.bus_index[bus])
        return (sorted(found), "device files") if found else (None, None)


def find_servers(reader: _Reader, pids: list[int] | None) -> list[list[tuple[int, Role]]]:
    """Groups of (pid, role): each vLLM server's processes, root first."""
    argvs: dict[int, list[str]] = {}
    roles: dict[int, Role] = {}
    all_pids = reader.pids()
    for pid in all_pids:
        argv = reader.argv(pid)
        if argv is None:
            continue
        argvs[pid] = argv
        role = _role(argv)
        if role is not None:
            roles[pid] = role
    cache: dict[int, int | None] = {}

    def parent(pid: int) -> int | None:
        if pid not in cache:
            cache[pid] = reader.ppid(pid) if pid in argvs else None
        return cache[pid]
    if pids:
        for p in pids:
            if p not in argvs:
                raise UserInputError(f"--pid {p}: no such process (or its command line cannot "
                                     "be read)", hint="'pgrep -af vllm' lists vLLM's processes")
            roles.setdefault(p, "other")

    def root_of(pid: int) -> int:
        seen = {pid}
        cur = pid
        while True:
            up = parent(cur)
            if up is None or up in seen or up not in roles:
                return cur
            seen.add(up)
            cur = up

    groups: dict[int, list[int]] = {}
    for pid in sorted(roles):
        groups.setdefault(root_of(pid), []).append(pid)
    if pids:
        wanted = {root_of(p) for p in pids}
        groups = {r: m for r, m in groups.items() if r in wanted}
    out = []
    for root in sorted(groups):
        members = sorted(groups[root], key=lambda p: (p != root, p))
        out.append([(p, roles[p]) for p in members])
    return out


# -- judging ---------------------------------------------------------------------------------

def _pids(pids: Iterable[int]) -> str:
    return ", ".join(str(p) for p in sorted(set(pids)))


class _Judge:
    def __init__(self, topo: Topology, proc_root: Path, numa_balancing: int | None) -> None:
        self.topo = topo
        self.proc_root = proc_root / "proc"
        self.node_cpus = {n.id: n.cpus for n in topo.nodes}
        self.gnodes = gpu_nodes(topo)
        self.bus = {g.index: g.bus_id for g in topo.gpus}
        self.numa_balancing = numa_balancing
        self.multi = len(topo.nodes) > 1

    def by_rank(self, p: Proc, env: dict[str, str], tp: int) -> Proc:
        if p.gpus or p.role != "worker":
            return p
        m = re.search(r"(?:PP(\d{1,4})_)?TP(\d{1,4})", p.argv[0] if p.argv else "")
        visible = _visible_from(p.env or env, self.topo)
        if not m or visible is None:
            return p
        rank = int(m.group(1) or 0) * tp + int(m.group(2))
        if rank >= len(visible):
            return p
        return p.model_copy(update={"gpus": [visible[rank]],
                                    "gpu_source": "CUDA_VISIBLE_DEVICES + worker rank"})

    def cores(self, cpus: Iterable[int]) -> int:
        sib = self.topo.cpu.siblings if self.topo.cpu else {}
        cset = set(cpus)
        if not sib:
            return len(cset)
        return len({tuple(sib.get(c, [c])) for c in cset})

    def node_path(self, gpu: int) -> str:
        return f"/sys/bus/pci/devices/{self.bus.get(gpu, '?')}/numa_node"

    def regime(self, argv: list[str]) -> tuple[str, str]:
        off = _flag(argv, "--cpu-offload-gb")
        try:
            offload = float(off) if off is not None else 0.0
        except ValueError:
            offload = 0.0
        if offload > 0:
            return "host-heavy", f"--cpu-offload-gb {off}: weights stream from host memory"
        if _has(argv, "--kv-transfer-config"):
            return "host-heavy", "--kv-transfer-config: KV moves through host memory / RDMA"
        cpu = self.topo.cpu
        if cpu and self.multi and len(self.topo.nodes) > cpu.sockets:
            return "host-heavy", (f"{len(self.topo.nodes)} NUMA nodes on {cpu.sockets} "
                                  "socket(s): several NUMA domains per socket")
        return "gpu-bound", "weights and KV cache in GPU memory: the host is off the hot path"

    def server(self, members: list[Proc]) -> Server:
        root = members[0]
        argv = root.argv
        tp = _int(_flag(argv, "--tensor-parallel-size", "-tp")) or 1
        pp = _int(_flag(argv, "--pipeline-parallel-size", "-pp")) or 1
        numa_bind = _has(argv, "--numa-bind")
        regime, regime_why = self.regime(argv)
        findings: list[Finding] = []
        # the GPUs: each process's own device files; else a worker titled Worker_TP<r> (or
        # Worker_PP<p>_TP<r>) drives the visible GPU at its local rank p * TP + r (vLLM's
        # order on one node); else one process drives the first TP x PP visible GPUs
        members = [self.by_rank(p, root.env, tp) for p in members]
        root = members[0]
        drivers = [p for p in members if p.gpus]
        gpus: list[int] | None
        if drivers:
            gpus = sorted({g for p in drivers for g in p.gpus or []})
        else:
            gpus = None
            # an environ the kernel kept from us says nothing: no GPU is guessed from it
            reader_visible = (_visible_from(root.env, self.topo) if root.api_key_env is not None
                              else None)
            if reader_visible is not None and len(reader_visible) >= tp * pp:
                gpus = reader_visible[:tp * pp]
                # one process drives them all (TP 1, or workers we could not map): the root
                # process is judged for those GPUs
                drivers = [root.model_copy(update={"gpus": gpus,
                                                   "gpu_source": "CUDA_VISIBLE_DEVICES"})]
                if root.env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len(
                        self.topo.gpus) > 1:
                    cvd = root.env.get("CUDA_VISIBLE_DEVICES")
                    findings.append(Finding(
                        severity="info", code="cuda-order-assumed", pids=[root.pid],
                        text=(f"CUDA_VISIBLE_DEVICES={cvd}" if cvd is not None else
                              "CUDA_VISIBLE_DEVICES unset (every GPU visible, the first "
                              f"{tp * pp} used)") + " without CUDA_DEVICE_ORDER=PCI_BUS_ID: "
                        "read in PCI bus order (the GPUs are identical)",
                        evidence=[Evidence(path=f"/proc/{root.pid}/environ",
                                           value="CUDA_DEVICE_ORDER unset")],
                        fixes=[Fix(kind="env", text="CUDA_DEVICE_ORDER=PCI_BUS_ID")],
                        why=WHY["cuda-order-assumed"]))
        unread = sorted({u for p in members for u in p.unreadable})
        if unread:
            findings.append(Finding(
                severity="warning", code="unreadable", pids=[p.pid for p in members
                                                             if p.unreadable],
                text=f"{len(unread)} file(s) of this server's processes could not be read; "
                "what they hold is not judged",
                evidence=[Evidence(path=u, value="permission denied") for u in unread[:8]],
                fixes=[Fix(kind="run-as", text="sudo advisor doctor"
                           + (f" --pid {root.pid}" if root.pid else ""))],
                why=WHY["unreadable"]))
        gnodes: list[int | None] | None = None
        if gpus is None:
            if not unread:
                findings.append(Finding(
                    severity="warning", code="gpus-unknown", pids=[root.pid],
                    text="which GPUs this server drives could not be read: no GPU device file "
                    "held open is known to sysfs and CUDA_VISIBLE_DEVICES cannot be mapped "
                    "(UUIDs, MIG, or mixed GPUs without CUDA_DEVICE_ORDER=PCI_BUS_ID)",
                    evidence=[Evidence(path=f"/proc/{root.pid}/environ",
                                       value="CUDA_VISIBLE_DEVICES="
                                       + root.env.get("CUDA_VISIBLE_DEVICES", "(unset)"))],
                    why=WHY["gpus-unknown"]))
        else:
            gnodes = [self.gnodes[g] if g < len(self.gnodes) else None for g in gpus]
            findings += self.binding(members, drivers, root, regime, regime_why, numa_bind)
        findings += self.security(root)
        findings += self.floor(members, gpus, root)
        return Server(pid=root.pid, unit=root.unit, processes=members, gpus=gpus,
                      gpu_nodes=gnodes, tp=tp, pp=pp, numa_bind=numa_bind, regime=regime,
                      findings=_merge(findings))

    # the binding of each GPU-driving process to its GPUs' node
    def binding(self, members: list[Proc], drivers: list[Proc], root: Proc, regime: str,
                regime_why: str, numa_bind: bool) -> list[Finding]:
        out: list[Finding] = []
        if not self.multi:
            return out
        all_nodes = sorted({self.gnodes[g] for p in drivers for g in p.gpus or []
                            if g < len(self.gnodes)}, key=lambda n: (n is None, n or 0))
        hidden = [g for p in drivers for g in p.gpus or [] if g >= len(self.gnodes)
                  or self.gnodes[g] is None]
        if hidden:
            out.append(Finding(
                severity="warning", code="gpu-node-hidden", pids=[p.pid for p in drivers],
                text=f"GPU(s) {_span(hidden)}: NUMA node hidden (numa_node -1) on a "
                f"{len(self.topo.nodes)}-node host; the binding cannot be checked",
                evidence=[Evidence(path=self.node_path(g), value="-1") for g in hidden[:8]],
                fixes=[Fix(kind="run-as", text="nvidia-smi topo -m   # its 'NUMA Affinity' "
                           "column, or: advisor ticket --instance PROVIDER:TYPE")],
                why=WHY["gpu-node-hidden"]))
            return out
        nodes = [n for n in all_nodes if n is not None]
        if len(nodes) > 1 and not numa_bind:
            out.append(Finding(
                severity="warning" if regime == "host-heavy" else "info",
                code="spans-nodes", pids=[root.pid],
                text=f"this server's GPUs hang off NUMA nodes {_span(nodes)} ({regime}: "
                f"{regime_why})",
                evidence=[Evidence(path=self.node_path(g), value=str(self.gnodes[g]))
                          for p in drivers for g in (p.gpus or [])][:8],
                fixes=[Fix(kind="vllm-flag", text="--numa-bind   # vLLM PR #38635 (first release "
                           "inferred 0.19.0): each worker on its own GPU's node"),
                       self.numactl(root, nodes, interleave=True)],
                why=WHY["spans-nodes"]))
        for p in drivers:
            want = sorted({n for g in p.gpus or [] if (n := self.gnodes[g]) is not None})
            if not want:
                continue
            if len(want) > 1 and p.role != "worker" and numa_bind:
                continue
            out += self.one(p, want, root, regime, regime_why, spanning=len(nodes) > 1)
        return out

    def one(self, p: Proc, want: list[int], root: Proc, regime: str, regime_why: str,
            spanning: bool) -> list[Finding]:
        out: list[Finding] = []
        want_cpus = {c for n in want for c in self.node_cpus.get(n, [])}
        allowed = set(p.cpus or [])
        gp = p.gpus or []
        ev_gpu = [Evidence(path=self.node_path(g), value=str(self.gnodes[g])) for g in gp[:4]]
        ev_cpu = Evidence(path=f"/proc/{p.pid}/status", value="Cpus_allowed_list: "
                          + _span(allowed))
        on_nodes = sorted({n for n, cs in self.node_cpus.items() if allowed & set(cs)})
        fixes = self.fixes(p, root, want)
        who = f"{p.role} {p.pid} (GPU {_span(gp)})"
        if p.cpus is not None and not allowed & want_cpus:
            out.append(Finding(
                severity="error", code="cpus-off-node", pids=[p.pid],
                text=f"{who} may run only on node(s) {_span(on_nodes)} (CPUs {_span(allowed)}); "
                f"its GPU hangs off node {_span(want)}",
                evidence=[ev_cpu, *ev_gpu], fixes=fixes, why=WHY["cpus-off-node"]))
        elif p.cpus is not None and not allowed <= want_cpus and not spanning:
            out.append(Finding(
                severity="warning" if regime == "host-heavy" else "info", code="unbound",
                pids=[p.pid],
                text=f"{who} may run on node(s) {_span(on_nodes)}; its GPU hangs off node "
                f"{_span(want)} ({regime}: {regime_why})",
                evidence=[ev_cpu, *ev_gpu], fixes=fixes, why=WHY["unbound"]))
        mode, pnodes = policy_nodes(p.policy) if p.policy else ("default", [])
        ev_mem = Evidence(path=f"/proc/{p.pid}/numa_maps", value=f"policy {p.policy}"
                          + (", resident " + ", ".join(f"N{n}={k // 1024} MiB" for n, k in
                                                      sorted((p.kib_per_node or {}).items()))
                             if p.kib_per_node else ""))
        mems_bad = p.mems is not None and not set(p.mems) & set(want)
        if mode in ("bind", "prefer", "preferred", "preferred_many") and pnodes and not (
                set(pnodes) & set(want)) or mems_bad:
            ev = [ev_mem] if not mems_bad else [Evidence(
                path=f"/proc/{p.pid}/status", value="Mems_allowed_list: " + _span(p.mems or []))]
            out.append(Finding(
                severity="error", code="memory-bound-off-node", pids=[p.pid],
                text=f"{who}: memory is held to node(s) "
                f"{_span(pnodes if not mems_bad else p.mems or [])}; its GPU hangs off node "
                f"{_span(want)}",
                evidence=[*ev, *ev_gpu], fixes=fixes, why=WHY["memory-bound-off-node"]))
        elif mode.startswith("interleave") or mode.startswith("weighted"):
            extra = sorted(set(pnodes) - set(want)) if pnodes else []
            if extra and not spanning:
                out.append(Finding(
                    severity="warning", code="memory-interleaved", pids=[p.pid],
                    text=f"{who}: memory interleaved over nodes {_span(pnodes)}; its GPU hangs "
                    f"off node {_span(want)}",
                    evidence=[ev_mem, *ev_gpu], fixes=fixes, why=WHY["memory-interleaved"]))
        else:
            total = sum((p.kib_per_node or {}).values())
            off = sum(k for n, k in (p.kib_per_node or {}).items() if n not in want)
            if total and off * 2 > total:
                out.append(Finding(
                    severity="warning", code="memory-off-node", pids=[p.pid],
                    text=f"{who}: {100 * off // total}% of its resident memory "
                    f"({off // 1024} of {total // 1024} MiB) is on other nodes than its GPU's "
                    f"node {_span(want)}",
                    evidence=[ev_mem, *ev_gpu], fixes=fixes, why=WHY["memory-off-node"]))
        omp = p.env.get("OMP_NUM_THREADS", "")
        if omp.isdigit() and allowed and int(omp) > len(allowed):
            n = max(1, len(allowed & want_cpus or allowed))
            out.append(Finding(
                severity="warning", code="omp-oversubscribed", pids=[p.pid],
                text=f"{who}: OMP_NUM_THREADS={omp} on {len(allowed)} allowed CPU(s)",
                evidence=[Evidence(path=f"/proc/{p.pid}/environ", value=f"OMP_NUM_THREADS={omp}"),
                          ev_cpu],
                fixes=[Fix(kind="env", text=f"OMP_NUM_THREADS={n}"),
                       *([self.dropin(p.unit, None, None, n)] if _is_systemd(p.unit) else [])],
                why=WHY["omp-oversubscribed"]))
        return out

    def fixes(self, p: Proc, root: Proc, nodes: list[int]) -> list[Fix]:
        out = [self.numactl(root, nodes)]
        unit = root.unit or p.unit
        cpus = [c for n in nodes for c in self.node_cpus.get(n, [])]
        if _is_systemd(unit):
            out.append(self.dropin(unit, cpus, nodes, None))
        elif unit and unit.startswith("docker:"):
            out.append(Fix(kind="docker", text=f"docker run --cpuset-cpus={_span(cpus)} "
                           f"--cpuset-mems={_span(nodes)} …   # recreate container "
                           f"{unit[7:]} with these"))
        elif unit == "kubepods":
            out.append(Fix(kind="run-as", text="kubelet: --cpu-manager-policy=static "
                           "--topology-manager-policy=single-numa-node, and a Guaranteed pod "
                           "(advisor render --target k8s writes both)"))
        return out

    def numactl(self, root: Proc, nodes: list[int], interleave: bool = False) -> Fix:
        joined = _span(nodes)
        mem = f"--interleave={joined}" if interleave else f"--membind={joined}"
        cmd = [a for a in root.argv]
        if not cmd or cmd[0].startswith("VLLM::"):
            tail = "<your vllm serve command>"
        else:
            cmd = _without_secret_flags(cmd)
            tail = shlex.join(cmd)
        return Fix(kind="numactl", text=f"numactl --cpunodebind={joined} {mem} {tail}")

    def dropin(self, unit: str | None, cpus: list[int] | None, nodes: list[int] | None,
               omp: int | None) -> Fix:
        assert unit is not None
        user = unit.startswith("user:")
        name = unit[5:] if user else unit
        lines = ["[Service]"]
        # CPUAffinity= and NUMAMask= assignments add up over a unit and its drop-ins
        # (systemd.exec(5)); the empty one first drops what the unit set
        if cpus:
            lines += ["CPUAffinity=", f"CPUAffinity={_span(cpus)}"]
        if nodes:
            lines += ["NUMAPolicy=bind", "NUMAMask=", f"NUMAMask={_span(nodes)}"]
        if omp is not None:
            lines.append(f"Environment=OMP_NUM_THREADS={omp}")
        base = "~/.config/systemd/user" if user else "/etc/systemd/system"
        ctl = "systemctl --user" if user else "systemctl"
        return Fix(kind="systemd", text="\n".join(lines) + "\n",
                   path=f"{base}/{name}.d/50-advisor-numa.conf",
                   then=f"{ctl} daemon-reload && {ctl} restart {name}")

    def security(self, root: Proc) -> list[Finding]:
        out: list[Finding] = []
        if root.role != "api-server":
            return out
        if any(a.split("=", 1)[0] == "--api-key" for a in root.argv):
            out.append(Finding(
                severity="warning", code="api-key-in-argv", pids=[root.pid],
                text=f"server {root.pid} has its API key in its command line, readable by every "
                "local user",
                evidence=[Evidence(path=f"/proc/{root.pid}/cmdline", value="--api-key <redacted>")],
                fixes=[Fix(kind="env", text="VLLM_API_KEY=<the key>   # in an EnvironmentFile "
                           "readable by the service user only (chmod 0640), then drop --api-key")],
                why=WHY["api-key-in-argv"]))
        elif root.api_key_env is False:
            host = _flag(root.argv, "--host")
            if host not in ("127.0.0.1", "localhost", "::1"):
                out.append(Finding(
                    severity="warning", code="no-api-key", pids=[root.pid],
                    text=f"server {root.pid} listens on {host or 'every address (no --host)'} "
                    "without an API key",
                    evidence=[Evidence(path=f"/proc/{root.pid}/environ",
                                       value="VLLM_API_KEY unset"),
                              Evidence(path=f"/proc/{root.pid}/cmdline", value="no --api-key")],
                    fixes=[Fix(kind="env", text="VLLM_API_KEY=<a random key>   # or --host "
                               "127.0.0.1 behind a proxy that authenticates")],
                    why=WHY["no-api-key"]))
        return out

    def floor(self, members: list[Proc], gpus: list[int] | None, root: Proc) -> list[Finding]:
        if not gpus:
            return []
        cpus = set().union(*(set(p.cpus or []) for p in members))
        if not cpus:
            return []
        cores, need = self.cores(cpus), cpu_floor(len(gpus))
        if cores >= need:
            return []
        return [Finding(
            severity="warning", code="below-cpu-floor", pids=[root.pid],
            text=f"this server's processes may use {len(cpus)} CPU(s) = {cores} physical "
            f"core(s) for {len(gpus)} GPU(s): below vLLM's floor of 2 + N = {need}",
            evidence=[Evidence(path=f"/proc/{p.pid}/status",
                               value="Cpus_allowed_list: " + _span(p.cpus or []))
                      for p in members[:4]],
            fixes=[Fix(kind="run-as", text=f"allow at least {need} physical cores (CPUAffinity= "
                       "or numactl --cpunodebind on the GPUs' whole node)")],
            why=WHY["below-cpu-floor"])]

    def host(self, servers: list[Server]) -> list[Finding]:
        out: list[Finding] = []
        cpu = self.topo.cpu
        if cpu and self.topo.gpus and cpu.cores < cpu_floor(len(self.topo.gpus)):
            need = cpu_floor(len(self.topo.gpus))
            out.append(Finding(
                severity="warning", code="host-below-cpu-floor",
                text=f"this host has {cpu.cores} physical core(s) for {len(self.topo.gpus)} "
                f"GPU(s): below vLLM's floor of 2 + N = {need} when every GPU serves",
                evidence=[Evidence(path="/sys/devices/system/cpu/cpu*/topology/"
                                   "thread_siblings_list", value=f"{cpu.cores} distinct")],
                why=WHY["host-below-cpu-floor"]))
        if self.multi and self.numa_balancing:
            bound = any(p.cpus is not None and any(
                set(p.cpus) <= set(cs) for cs in self.node_cpus.values())
                for s in servers for p in s.processes)
            out.append(Finding(
                severity="warning" if bound else "info", code="numa-balancing",
                text=f"kernel.numa_balancing = {self.numa_balancing} on a "
                f"{len(self.topo.nodes)}-node host"
                + (" with a NUMA-bound vLLM" if bound else ""),
                evidence=[Evidence(path="/proc/sys/kernel/numa_balancing",
                                   value=str(self.numa_balancing))],
                fixes=[Fix(kind="sysctl", text="kernel.numa_balancing = 0\n",
                           path="/etc/sysctl.d/90-advisor-numa.conf",
                           then="sysctl -w kernel.numa_balancing=0")],
                why=WHY["numa-balancing"]))
        return out


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() and 0 < int(text) <= 4096 else None


def _is_systemd(unit: str | None) -> bool:
    return unit is not None and unit.endswith(".service")


def _without_secret_flags(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a.split("=", 1)[0] in SECRET_FLAGS:
            skip = "=" not in a
            continue
        out.append(a)
    return out


def _visible_from(env: dict[str, str], topo: Topology) -> list[int] | None:
    n = len(topo.gpus)
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return list(range(n))
    items = [x.strip() for x in raw.split(",") if x.strip()]
    if not all(x.isdigit() for x in items) or any(int(x) >= n for x in items):
        return None
    if env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len({g.device_id for g in topo.gpus}) > 1:
        return None
    return [int(x) for x in items]


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per (code, severity, fix): the same misbinding of eight workers is one line."""
    order = {"error": 0, "warning": 1, "info": 2}
    merged: dict[tuple[str, str, str], Finding] = {}
    for f in findings:
        key = (f.code, f.severity, "|".join(x.text for x in f.fixes))
        if key in merged:
            m = merged[key]
            ev = [*m.evidence, *[e for e in f.evidence if e not in m.evidence]]
            merged[key] = m.model_copy(update={
                "pids": sorted({*m.pids, *f.pids}), "evidence": ev[:12]})
        else:
            merged[key] = f
    out = list(merged.values())
    for i, f in enumerate(out):
        if len(f.pids) > 1 and f.code in ("cpus-off-node", "unbound", "memory-bound-off-node",
                                          "memory-interleaved", "memory-off-node",
                                          "omp-oversubscribed"):
            out[i] = f.model_copy(update={"text": f"{len(f.pids)} processes ({_pids(f.pids)}) "
                                          "alike; first: " + f.text})
    return sorted(out, key=lambda f: (order[f.severity], f.code))


def _numa_balancing(proc: Path) -> int | None:
    try:
        data = _read_proc(proc / "sys" / "kernel" / "numa_balancing", limit=64)
    except (_Unreadable, UserInputError):
        return None
    text = (data or b"").decode(errors="replace").strip()
    return int(text) if text.isdigit() and int(text) < 16 else None


def diagnose(pids: list[int] | None = None, *, proc_root: str | Path = "/",
             sysfs_root: str | Path = "/") -> Report:
    """Every running vLLM server (or the servers of ``pids``) on this host, judged."""
    proc_root, sysfs_root = Path(proc_root), Path(sysfs_root)
    proc = proc_root / "proc"
    import stat

    unreadable = UserInputError(f"{str(proc)[:120]}: cannot be read by this user",
                                hint="run doctor as root, or where /proc is mounted")
    try:
        ok = stat.S_ISDIR(os.stat(proc).st_mode)
    except PermissionError as exc:
        raise unreadable from exc
    except OSError:
        ok = False
    if not ok:
        raise UserInputError(f"--proc-root {str(proc_root)[:120]}: no proc/ folder under it",
                             hint="point --proc-root at / (or at a folder holding a copied "
                             "proc/ tree)")
    if not os.access(proc, os.R_OK | os.X_OK):
        raise unreadable
    topo = probe(sysfs_root)
    reader = _Reader(proc_root, sysfs_root, topo)
    listed = reader.pids()
    if not listed:
        raise UserInputError(f"{str(proc)[:120]}: no process folders: not a /proc tree",
                             hint="point --proc-root at / (or at a folder holding a copied "
                             "proc/ tree)")
    judge = _Judge(topo, proc_root, _numa_balancing(proc))
    servers = []
    for group in find_servers(reader, pids):
        # a process that ended while we read has no status left: it is not judged
        members = [p for p in (reader.read(pid, role) for pid, role in group)
                   if p.cpus is not None or p.argv]
        if members:
            servers.append(judge.server(members))
    cpu = topo.cpu
    facts = HostFacts(nodes={n.id: n.cpus for n in topo.nodes},
                      cpus=cpu.cpus if cpu else None, cores=cpu.cores if cpu else None,
                      sockets=cpu.sockets if cpu else None, smt=cpu.smt if cpu else None,
                      gpus=[g.bus_id for g in topo.gpus], gpu_nodes=gpu_nodes(topo),
                      numa_balancing=judge.numa_balancing)
    findings = judge.host(servers)
    # a hidden GPU node is judged above (it matters on a multi-node host only)
    findings += [Finding(severity="info", code="probe", text=w) for w in topo.warnings
                 if "reads -1" not in w]
    return Report(host=facts, servers=servers, findings=findings)
