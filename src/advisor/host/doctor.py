"""``advisor doctor``: is a running vLLM on its GPUs' NUMA node, and what exact change fixes it.

A vLLM server is found from what vLLM really does: its API server runs as ``vllm serve`` or
``python -m vllm.entrypoints…`` (the interpreter or the ``vllm`` script first: ``docker exec``,
``ssh``, ``screen`` and ``tmux`` are other processes whose argv merely mentions it), and every
process under it belongs to it, whatever its title: vLLM titles its processes
``f"{VLLM_PROCESS_NAME_PREFIX}::{name}_{suffix}"`` (vllm/utils/system_utils.py
``set_process_title``; the prefix is ``VLLM`` unless ``VLLM_PROCESS_NAME_PREFIX`` says otherwise,
vllm/envs.py): ``APIServer_<i>``, ``EngineCore``/``EngineCore_DP<d>`` (older: ``DPEngineCore_<d>``),
``Worker_DP<d>_PP<p>_TP<r>`` (older releases appended ``_PP<p>_TP<r>`` to the inherited title,
``set_process_title(suffix, append=True)``); without ``setproctitle`` installed no title is set at
all. Ray workers (``ray::RayWorkerWrapper``) are children of the raylet, not of the server: they
join the one server on this host started with ``--distributed-executor-backend ray``. For every
such process it reads what the kernel keeps about it:

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

``--check`` exits by cause (:data:`EXIT_CODES`): 0 nothing at warning or error, 1 a finding at
warning or error, 2 bad input, 3 no vLLM server found, 4 only findings that keep doctor from
checking (:data:`UNVERIFIED`: unreadable files, unknown GPUs, hidden GPU nodes). ``--ignore CODE``
drops a finding code first. The JSON is versioned (:data:`SCHEMA`, described by
``doctor.schema.json`` next to this module).
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
#: the environment variables doctor keeps (values); every other one is never stored.
#: VLLM_CPU_KVCACHE_SPACE / VLLM_CPU_OMP_THREADS_BIND are read by vLLM's CPU backend only
#: (vllm/envs.py): their presence marks a CPU vLLM
ENV_KEPT = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS",
            "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "VLLM_PROCESS_NAME_PREFIX",
            "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND")
#: the JSON's version: a key removed or changed in meaning is a new number
SCHEMA = "advisor.doctor/1"
#: --check's exit status by cause (the CLI help and docs/own-server.md print the same)
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_NO_SERVER, EXIT_UNVERIFIED = 0, 1, 2, 3, 4
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "ok: every server found, nothing at warning or error",
    EXIT_FINDINGS: "findings: at least one finding at warning or error",
    EXIT_USAGE: "bad input (one line on stderr)",
    EXIT_NO_SERVER: "no vLLM server found",
    EXIT_UNVERIFIED: "unverified: the only warnings are ones that keep the binding from being "
    "checked (unreadable, gpus-unknown, gpu-node-hidden)",
}
#: warnings that say doctor could not check, not that something is wrong
UNVERIFIED = ("unreadable", "gpus-unknown", "gpu-node-hidden")
#: share of a process's resident memory on other nodes than its GPU's that is a warning:
#: TensorRT-LLM PR #18117 measured workers with ~22% (~3 GB) of their memory on the remote node
#: and a significantly slower device step under host-heavy disaggregated serving, so with the
#: host on the hot path 20% is enough; with weights and KV in HBM only a majority is flagged
#: (and 20-50% is a note): the unbound case measured 0-2% there (vLLM PR 30492)
REMOTE_SHARE_HOST_HEAVY = 0.20
REMOTE_SHARE_GPU_BOUND = 0.50
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
        "resident memory (numa_maps) on other nodes than the GPU's: with the host on the hot "
        "path ~22% remote measurably slowed the device step (TensorRT-LLM PR #18117), so 20% is "
        "a warning there; with weights and KV in HBM only more than half is"),
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
    "cpu-only": (
        "no GPU: this vLLM runs on its CPU backend (no GPU on the host, CUDA_VISIBLE_DEVICES "
        "empty, --device cpu, or VLLM_CPU_* set, vllm/envs.py); there is no GPU binding to "
        "check"),
    "argv-replaced": (
        "the process title replaced the command line (setproctitle, vllm/utils/system_utils.py) "
        "and no parent process kept it: --api-key and --host cannot be read, so the API key is "
        "judged from VLLM_API_KEY alone"),
    "ray-workers-unattributed": (
        "Ray workers are children of the raylet, not of a vLLM server: with several "
        "--distributed-executor-backend ray servers (or none) on this host, doctor cannot tell "
        "whose they are"),
    "pcie-width-below-max": (
        "the GPU's PCIe link trained at fewer lanes than it and the slot support "
        "(sysfs current_link_width < max_link_width): host-to-GPU copies get that fraction of "
        "the bandwidth; NVIDIA: the current generation and width 'may be reduced when the GPU "
        "is not in use' (nvidia-smi --help-query-gpu), so re-check under load"),
    "pcie-speed-below-max": (
        "the GPU's PCIe link runs below its top speed (current_link_speed < max_link_speed); "
        "NVIDIA: this 'may be reduced when the GPU is not in use' (nvidia-smi "
        "--help-query-gpu): a note until seen under load"),
    "tp-over-pcie": (
        "a tensor-parallel group whose GPUs hang off different sockets and are not joined by "
        "NVLink: every layer's all-reduce crosses the socket interconnect over PCIe; vLLM turns "
        "its custom all-reduce off for more than two PCIe-only GPUs "
        "(vllm/distributed/device_communicators/custom_all_reduce.py) and maintainers suggest "
        "pipeline parallel where GPUs are weakly connected (vllm-project/vllm#8303; "
        "vllm-project/vllm#1838)"),
    "tp-across-sockets": (
        "a tensor-parallel group spans sockets; whether NVLink joins its GPUs is not in sysfs "
        "(nvidia-smi topo -m says: NV# is NVLink, SYS crosses the socket link)"),
    "nic-remote": (
        "NVIDIA's GPUDirect RDMA guide: the GPU and the NIC 'must share the same upstream PCI "
        "Express root complex'; a path across sockets 'may be extremely performance-limited' "
        "(docs.nvidia.com/cuda/gpudirect-rdma): multi-node and KV-transfer traffic of these "
        "GPUs crosses the socket link"),
}
#: every finding code (``--ignore`` takes these)
CODES = (*WHY, "probe")
#: the JSON Schema of ``--json`` (shipped in the package, next to this module)
SCHEMA_FILE = "doctor.schema.json"


def json_schema() -> dict[str, object]:
    """The JSON Schema of :meth:`Report.to_json` (``doctor.schema.json`` in this package)."""
    import json
    from importlib.resources import files

    data: dict[str, object] = json.loads(
        files("advisor.host").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    return data


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
    #: the vLLM process title that replaced argv (``VLLM::Worker_DP1_TP0``), if any
    title: str | None = None
    #: ranks read from the title (DP, PP, TP, …)
    ranks: dict[str, int] = {}
    #: a Ray worker (``ray::RayWorkerWrapper``), joined to its server by its executor backend
    ray: bool = False


class Server(BaseModel):
    model_config = ConfigDict(frozen=True)
    pid: int
    unit: str | None
    processes: list[Proc]
    gpus: list[int] | None
    gpu_nodes: list[int | None] | None
    tp: int
    pp: int
    dp: int = 1
    #: "gpu", "cpu" (vLLM's CPU backend) or "unknown"
    device: Literal["gpu", "cpu", "unknown"] = "gpu"
    #: the command line the server was started with (secrets redacted), or None when a
    #: process title replaced it
    command: list[str] | None = None
    #: the GPUs of each tensor-parallel group (one per DP rank and PP stage)
    tp_groups: list[list[int]] = []
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
    #: finding codes left out by ``--ignore``
    ignored: list[str] = []

    @property
    def all_findings(self) -> list[Finding]:
        return self.findings + [f for s in self.servers for f in s.findings]

    @property
    def ok(self) -> bool:
        """Nothing at error or warning, and at least one server found."""
        return self.exit_code == EXIT_OK

    @property
    def exit_code(self) -> int:
        """What ``--check`` exits with (:data:`EXIT_CODES`)."""
        if not self.servers:
            return EXIT_NO_SERVER
        bad = [f for f in self.all_findings if f.severity in ("error", "warning")]
        if any(f.code not in UNVERIFIED for f in bad):
            return EXIT_FINDINGS
        return EXIT_UNVERIFIED if bad else EXIT_OK

    @property
    def status(self) -> str:
        return {EXIT_OK: "ok", EXIT_FINDINGS: "findings", EXIT_NO_SERVER: "no-server",
                EXIT_UNVERIFIED: "unverified"}[self.exit_code]

    def ignoring(self, codes: Iterable[str]) -> Report:
        """This report without the findings of ``codes`` (``--ignore``)."""
        drop = set(codes)
        if not drop:
            return self
        return self.model_copy(update={
            "findings": [f for f in self.findings if f.code not in drop],
            "servers": [s.model_copy(update={"findings": [
                f for f in s.findings if f.code not in drop]}) for s in self.servers],
            "ignored": sorted(drop | set(self.ignored))})

    def to_json(self) -> dict[str, object]:
        """The ``--json`` document (``doctor.schema.json`` describes it)."""
        body: dict[str, object] = {"schema": SCHEMA}
        body.update(self.model_dump())
        body.update({"ok": self.ok, "status": self.status, "exit_code": self.exit_code})
        return body


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


#: the flags doctor reads from a server's argv, by every spelling vLLM's parser accepts: its
#: FlexibleArgumentParser (an argparse.ArgumentParser, vllm/utils/argparse_utils.py) reads
#: ``--api_key`` as ``--api-key``, and argparse's ``allow_abbrev`` (on by default) any
#: unambiguous prefix (``--api-k``)
READ_FLAGS = (*SECRET_FLAGS, "--host")


def canonical(option: str) -> str:
    """The flag ``option`` (the part before any ``=``) spells, or ``option`` itself."""
    if not option.startswith("--"):
        return option
    o = option.replace("_", "-")
    if o in READ_FLAGS:
        return o
    hits = [f for f in READ_FLAGS if f.startswith(o)]
    # a prefix of a secret flag is redacted even where argparse would find it ambiguous:
    # hiding one value too many costs nothing
    return hits[0] if len(hits) == 1 and len(o) >= 5 else option


def redact(argv: list[str]) -> list[str]:
    """argv with the values of :data:`SECRET_FLAGS` (every spelling: :func:`canonical`)
    replaced by ``<redacted>``."""
    out: list[str] = []
    hide = False
    for a in argv:
        if hide:
            out.append("<redacted>")
            hide = False
            continue
        flag = canonical(a.split("=", 1)[0])
        if flag in SECRET_FLAGS:
            if "=" in a:
                out.append(f"{a.split('=', 1)[0]}=<redacted>")
            else:
                out.append(a)
                hide = True
            continue
        out.append(a)
    return out


def _flag(argv: list[str], *names: str) -> str | None:
    """The value of the last of ``names`` in argv (``--x v`` or ``--x=v``, any spelling vLLM's
    parser accepts for the flags of :data:`READ_FLAGS`)."""
    value = None
    for i, a in enumerate(argv):
        option, eq, rest = a.partition("=")
        spelled = canonical(option)
        for n in names:
            if spelled == n and not eq and i + 1 < len(argv):
                value = argv[i + 1]
            elif spelled == n and eq:
                value = rest
    return value


def _has(argv: list[str], name: str) -> bool:
    return any(canonical(a.split("=", 1)[0]) == name for a in argv)


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
                # a cgroup name a local user chose is no unit name unless it is spelled as
                # systemd spells them (systemd.unit(5): ASCII letters, digits, ':', '-', '_',
                # '.', '\\' and '@'): anything else never reaches a command line to paste
                if not _UNIT_NAME.fullmatch(p):
                    return None
                return f"user:{p}" if user else p
    return None


_UNIT_NAME = re.compile(r"[A-Za-z0-9:_.@\\-]{1,248}\.service")


# -- telling vLLM's processes apart ----------------------------------------------------------

#: a vLLM process title: f"{prefix}::{name}" with "_{suffix}" parts (set_process_title,
#: vllm/utils/system_utils.py); a Ray actor's title is "ray::<Class>" or "ray::<Class>.<method>"
_TITLE = re.compile(r"(?P<prefix>[^\s:]{1,64})::(?P<name>[A-Za-z][A-Za-z0-9]{0,40})"
                    r"(?P<rest>(?:_[A-Za-z0-9]{1,16}){0,8})(?:\.[\w.()]{0,80})?")
_RANK = re.compile(r"(DP|PP|PCP|TP|DCP|EP)(\d{1,5})")
#: title names vLLM gives (current and older releases) -> role
_TITLE_ROLES: dict[str, Role] = {
    "APIServer": "api-server", "EngineCore": "engine-core", "DPEngineCore": "engine-core",
    "Worker": "worker", "VllmWorker": "worker", "DPCoordinator": "other",
}
#: interpreter options that take a value (python -X opt, -W arg)
_PY_VALUE_OPTS = ("-X", "-W", "-Q")


class Title(BaseModel):
    model_config = ConfigDict(frozen=True)
    prefix: str
    name: str
    ranks: dict[str, int]
    index: int | None = None


def parse_title(argv: list[str]) -> Title | None:
    """The vLLM (or Ray) process title that replaced ``argv``, or None."""
    if len(argv) != 1:
        return None
    m = _TITLE.fullmatch(argv[0].strip())
    if not m:
        return None
    ranks: dict[str, int] = {}
    index = None
    for part in m.group("rest").split("_")[1:]:
        r = _RANK.fullmatch(part)
        if r:
            ranks[r.group(1)] = int(r.group(2))
        elif part.isdigit():
            index = int(part)  # APIServer_0; DPEngineCore_<dp rank> in older releases
    if m.group("name") == "DPEngineCore" and index is not None:
        ranks.setdefault("DP", index)
    return Title(prefix=m.group("prefix"), name=m.group("name"), ranks=ranks, index=index)


def title_role(t: Title) -> tuple[Role, bool] | None:
    """(role, is a Ray worker) of a title, None when it is not vLLM's."""
    if t.prefix == "ray":
        return ("worker", True) if t.name == "RayWorkerWrapper" else None
    role = _TITLE_ROLES.get(t.name)
    if role is None:
        return None
    if role == "engine-core" and ({"TP", "PP"} & set(t.ranks)):
        return "worker", False  # older releases appended _TP<r> to the inherited title
    return role, False


def _is_python(arg: str) -> bool:
    return re.fullmatch(r"python(\d+(\.\d+)?)?", os.path.basename(arg)) is not None


def serve_argv(argv: list[str]) -> bool:
    """Whether ``argv`` is a vLLM API server's own command line: the ``vllm`` script run as
    ``vllm serve`` (directly or by a Python interpreter) or ``python -m vllm.entrypoints…``.
    A wrapper (``docker exec c vllm serve``, ``ssh h vllm serve``, ``SCREEN -dmS x vllm
    serve``) is another process, not the server."""
    if not argv:
        return False
    if os.path.basename(argv[0]) == "vllm":
        return len(argv) > 1 and argv[1] == "serve"
    if not _is_python(argv[0]):
        return False
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        a = argv[i]
        if a == "-m":
            mod = argv[i + 1] if i + 1 < len(argv) else ""
            if mod == "vllm.entrypoints.cli.main":
                return i + 2 < len(argv) and argv[i + 2] == "serve"
            return mod.startswith("vllm.entrypoints.")
        if a == "-c":
            return False
        i += 2 if a in _PY_VALUE_OPTS else 1
    return (i + 1 < len(argv) and os.path.basename(argv[i]) == "vllm"
            and argv[i + 1] == "serve")


def _kind(argv: list[str]) -> tuple[Role, bool, Title | None] | None:
    """(role, ray worker, title) of a process that is vLLM's by its own command line."""
    t = parse_title(argv)
    if t is not None:
        r = title_role(t)
        return (r[0], r[1], t) if r else None
    if serve_argv(argv):
        return "api-server", False, None
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

    def __init__(self, proc_root: Path, sysfs_root: Path) -> None:
        self.proc = proc_root / "proc"
        self.sysfs = sysfs_root
        self.bus_index: dict[str, int] = {}
        self._minors: dict[int, str] | None = None
        self._pids: list[int] | None = None

    def set_topology(self, topo: Topology) -> None:
        self.bus_index = {g.bus_id.lower(): g.index for g in topo.gpus}

    @property
    def minors(self) -> dict[int, str]:
        if self._minors is None:
            self._minors = _nvidia_minors(self.proc)
        return self._minors

    def pids(self) -> list[int]:
        if self._pids is not None:
            return self._pids
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
        self._pids = sorted(names)
        return self._pids

    def argv(self, pid: int) -> list[str] | None:
        try:
            data = _read_proc(self.proc / str(pid) / "cmdline")
        except _Unreadable:
            return None
        if data is None:
            return None
        argv = _split_nul(data)
        if len(argv) == 1 and " " in argv[0] and "::" in argv[0].split(" ", 1)[0]:
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

    def read(self, pid: int, role: Role, title: Title | None = None, ray: bool = False) -> Proc:
        base = self.proc / str(pid)
        unreadable: list[str] = []

        def get(name: str, limit: int = MAX_PROC_BYTES) -> bytes | None:
            try:
                return _read_proc(base / name, limit=limit)
            except _Unreadable:
                unreadable.append(f"{base}/{name}")
                return None

        argv = _split_nul(get("cmdline") or b"")
        if len(argv) == 1 and " " in argv[0] and "::" in argv[0].split(" ", 1)[0]:
            argv = [argv[0].split()[0]]
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
                    unreadable=unreadable,
                    title=argv[0] if title is not None and argv else None,
                    ranks=dict(title.ranks) if title else {}, ray=ray)

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


class _Member(BaseModel):
    model_config = ConfigDict(frozen=True)
    pid: int
    role: Role
    title: Title | None = None
    ray: bool = False


class _Group(BaseModel):
    """One server's processes as found: the root first."""

    model_config = ConfigDict(frozen=True)
    members: list[_Member]
    #: the root's own command line (None: a title replaced it)
    argv: list[str] | None


def _ray_backend(argv: list[str] | None) -> bool:
    if not argv:
        return False
    return _flag(argv, "--distributed-executor-backend") == "ray" or _has(argv, "--worker-use-ray")


def find_servers(reader: _Reader, pids: list[int] | None
                 ) -> tuple[list[_Group], list[int]]:
    """Each vLLM server's processes (the root and every process under it, and its Ray
    workers), and the Ray workers no server could be told for."""
    argvs: dict[int, list[str]] = {}
    kinds: dict[int, tuple[Role, bool, Title | None]] = {}
    for pid in reader.pids():
        argv = reader.argv(pid)
        if argv is None:
            continue
        argvs[pid] = argv
        k = _kind(argv)
        if k is not None:
            kinds[pid] = k
    parents: dict[int, int | None] = {pid: reader.ppid(pid) for pid in argvs}
    children: dict[int, list[int]] = {}
    for pid, pp in parents.items():
        if pp is not None:
            children.setdefault(pp, []).append(pid)

    def ancestors(pid: int) -> list[int]:
        out: list[int] = []
        seen, cur = {pid}, parents.get(pid)
        while cur is not None and cur not in seen and len(out) < 256:
            out.append(cur)
            seen.add(cur)
            cur = parents.get(cur)
        return out

    # a root: a vLLM process (not a Ray worker, not a bare helper title) with no vLLM
    # process above it
    def strong(pid: int) -> bool:
        k = kinds.get(pid)
        return k is not None and not k[1] and k[0] != "other"

    roots = [p for p in sorted(kinds) if strong(p) and not any(strong(a) for a in ancestors(p))]
    groups: dict[int, list[int]] = {}
    owner: dict[int, int] = {}
    for r in roots:
        seen, todo = [r], list(children.get(r, []))
        while todo and len(seen) < 4 * MAX_ENTRIES:
            c = todo.pop(0)
            if c in owner or c in seen:
                continue
            seen.append(c)
            todo.extend(children.get(c, []))
        groups[r] = seen
        for p in seen:
            owner[p] = r
    # Ray workers are the raylet's children: they join the one Ray-backed server here
    strays = sorted(p for p, k in kinds.items() if k[1] and p not in owner)
    ray_roots = [r for r in groups if _ray_backend(argvs.get(r))]
    unattributed: list[int] = []
    if strays:
        if len(ray_roots) == 1:
            for p in strays:
                groups[ray_roots[0]].append(p)
                owner[p] = ray_roots[0]
        elif ray_roots:
            unattributed = strays
    if pids:
        wanted = set()
        for p in pids:
            if p not in owner:
                argv = argvs.get(p, [])
                name = os.path.basename(argv[0])[:40] if argv else "?"
                raise UserInputError(
                    f"--pid {p}: {name} is not a vLLM process nor one of a vLLM server's",
                    hint="'pgrep -af vllm' lists vLLM's processes; without --pid doctor finds "
                    "every server")
            wanted.add(owner[p])
        groups = {r: m for r, m in groups.items() if r in wanted}
    out = []
    for root in sorted(groups):
        members = []
        for p in groups[root]:
            k = kinds.get(p)
            members.append(_Member(pid=p, role=k[0] if k else "other",
                                   title=k[2] if k else None, ray=bool(k and k[1])))
        ra = argvs.get(root)
        out.append(_Group(members=members,
                          argv=ra if ra is not None and parse_title(ra) is None else None))
    return out, unattributed


# -- judging ---------------------------------------------------------------------------------

def _pids(pids: Iterable[int]) -> str:
    return ", ".join(str(p) for p in sorted(set(pids)))


def _speed(text: str | None) -> float | None:
    m = re.match(r"\s*(\d{1,3}(?:\.\d{1,3})?)\s*GT/s", text or "")
    return float(m.group(1)) if m else None


class _Judge:
    def __init__(self, topo: Topology, sysfs_root: Path, numa_balancing: int | None) -> None:
        self.topo = topo
        self.sysfs = sysfs_root
        self.node_cpus = {n.id: n.cpus for n in topo.nodes}
        self.gnodes = gpu_nodes(topo)
        self.bus = {g.index: g.bus_id for g in topo.gpus}
        self.numa_balancing = numa_balancing
        self.multi = len(topo.nodes) > 1

    # -- which GPUs each process drives ----------------------------------------------------
    def visible(self, env: dict[str, str]) -> list[int] | None:
        return _visible_from(env, self.topo)

    def assign(self, members: list[Proc], root_env: dict[str, str], tp: int, pp: int,
               dp_start: int) -> list[Proc]:
        """Each process's GPUs: the device files it holds; else, for a worker titled with
        its ranks, the visible GPU at its local rank — in vLLM's data parallel each engine
        narrows CUDA_VISIBLE_DEVICES in-process to its slice (vllm/v1/engine/utils.py
        set_device_control_env_var: GPUs [d*W, (d+1)*W) of the visible ones, W = TP x PP),
        which /proc/PID/environ (the environment at exec) does not show; else an engine core
        with no workers drives its DP rank's slice."""
        world = tp * pp
        by_pid = {p.pid: p for p in members}

        def dp_of(p: Proc) -> int | None:
            if "DP" in p.ranks:
                return p.ranks["DP"]
            up = by_pid.get(p.ppid or -1)
            return up.ranks.get("DP") if up is not None and up.role == "engine-core" else None

        def pick(p: Proc, local: int, count: int, what: str) -> Proc:
            v = self.visible(p.env or root_env)
            d = dp_of(p)
            if v is None:
                return p
            ld = (d - dp_start) if d is not None else 0
            if ld < 0:
                return p
            if d is not None and len(v) > world and len(v) >= (ld + 1) * world:
                idx, src = ld * world + local, (
                    f"CUDA_VISIBLE_DEVICES as exec'd (vLLM narrows it in-process per DP rank) "
                    f"+ DP rank {d} + {what}")
            elif len(v) >= local + count:
                idx, src = local, f"CUDA_VISIBLE_DEVICES + {what}"
            else:
                return p
            if idx + count > len(v):
                return p
            return p.model_copy(update={"gpus": v[idx:idx + count], "gpu_source": src})

        has_workers = any(p.role == "worker" for p in members)
        out = []
        for p in members:
            if p.gpus or p.ray:  # Ray sets CUDA_VISIBLE_DEVICES in-process: device files only
                out.append(p)
            elif p.role == "worker" and p.title is not None and "PCP" not in p.ranks:
                local = p.ranks.get("PP", 0) * tp + p.ranks.get("TP", 0)
                out.append(pick(p, local, 1, "worker rank"))
            elif p.role == "engine-core" and not has_workers and p.title is not None:
                out.append(pick(p, 0, world, "engine core (no worker processes)"))
            else:
                out.append(p)
        return out

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

    def cpu_only(self, argv: list[str], members: list[Proc]) -> bool:
        if _flag(argv, "--device") == "cpu":
            return True
        if any("VLLM_CPU_KVCACHE_SPACE" in p.env or "VLLM_CPU_OMP_THREADS_BIND" in p.env
               or p.env.get("CUDA_VISIBLE_DEVICES") == "" for p in members):
            return True
        # no GPU on the host (and none that sysfs shows under a class advisor skips)
        return not self.topo.gpus and not any("looks like a GPU" in w
                                              for w in self.topo.warnings)

    def server(self, members: list[Proc], argv: list[str] | None) -> Server:
        root = members[0]
        known = argv is not None
        args = argv or []
        tp = _int(_flag(args, "--tensor-parallel-size", "-tp")) or 1
        pp = _int(_flag(args, "--pipeline-parallel-size", "-pp")) or 1
        dp = _int(_flag(args, "--data-parallel-size", "-dp")) or 1
        dp_start = _int(_flag(args, "--data-parallel-start-rank", "-dpr")) or 0
        numa_bind = _has(args, "--numa-bind")
        regime, regime_why = self.regime(args)
        findings: list[Finding] = []
        members = self.assign(members, root.env, tp, pp, dp_start)
        root = members[0]
        drivers = [p for p in members if p.gpus]
        gpus: list[int] | None
        device: Literal["gpu", "cpu", "unknown"] = "gpu"
        if drivers:
            gpus = sorted({g for p in drivers for g in p.gpus or []})
        else:
            gpus = None
            # an environ the kernel kept from us says nothing: no GPU is guessed from it
            reader_visible = (self.visible(root.env) if root.api_key_env is not None
                              and root.env.get("CUDA_VISIBLE_DEVICES") != "" else None)
            cpu = self.cpu_only(args, members)
            if cpu:
                device = "cpu"
            elif reader_visible is not None and len(reader_visible) >= tp * pp:
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
        groups: list[list[int]] = []
        if device == "cpu":
            gpus = []
            findings.append(Finding(
                severity="info", code="cpu-only", pids=[root.pid],
                text="a CPU vLLM: no GPU is used, so there is no GPU binding to check",
                evidence=[Evidence(path="/sys/bus/pci/devices",
                                   value=f"{len(self.topo.gpus)} GPU(s) on the host")],
                why=WHY["cpu-only"]))
        elif gpus is None:
            device = "unknown"
            if not unread:
                findings.append(Finding(
                    severity="warning", code="gpus-unknown", pids=[root.pid],
                    text="which GPUs this server drives could not be read: no GPU device file "
                    "held open is known to sysfs and CUDA_VISIBLE_DEVICES cannot be mapped "
                    "(UUIDs, MIG, Ray workers, or mixed GPUs without "
                    "CUDA_DEVICE_ORDER=PCI_BUS_ID)",
                    evidence=[Evidence(path=f"/proc/{root.pid}/environ",
                                       value="CUDA_VISIBLE_DEVICES="
                                       + root.env.get("CUDA_VISIBLE_DEVICES", "(unset)"))],
                    why=WHY["gpus-unknown"]))
        else:
            gnodes = [self.gnodes[g] if g < len(self.gnodes) else None for g in gpus]
            groups = self.tp_groups(members, drivers, gpus, tp)
            findings += self.binding(members, drivers, root, args if known else None, regime,
                                     regime_why, numa_bind)
            findings += self.links(root, gpus)
            findings += self.interconnect(root, groups)
            findings += self.nics(root, args, gpus, tp * pp * dp)
        findings += self.threads(drivers or [root] if device != "cpu" else members)
        findings += self.security(root, argv, members)
        findings += self.floor(members, gpus, root)
        return Server(pid=root.pid, unit=root.unit, processes=members, gpus=gpus,
                      gpu_nodes=gnodes, tp=tp, pp=pp, dp=dp, device=device,
                      command=argv, tp_groups=groups, numa_bind=numa_bind, regime=regime,
                      findings=_merge(findings))

    def tp_groups(self, members: list[Proc], drivers: list[Proc], gpus: list[int],
                  tp: int) -> list[list[int]]:
        """The GPUs of each TP group: workers by their (DP, PP) ranks, else the server's GPUs
        in chunks of TP."""
        if tp < 2:
            return []
        keyed: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for p in drivers:
            if p.role == "worker" and "TP" in p.ranks and len(p.gpus or []) == 1:
                key = (p.ranks.get("DP", -1) if "DP" in p.ranks else -1, p.ranks.get("PP", 0))
                keyed.setdefault(key, []).append((p.ranks["TP"], (p.gpus or [0])[0]))
        if keyed:
            return [[g for _, g in sorted(v)] for _, v in sorted(keyed.items()) if len(v) > 1]
        return [gpus[i:i + tp] for i in range(0, len(gpus), tp) if len(gpus[i:i + tp]) > 1]

    # -- the binding of each GPU-driving process to its GPUs' node -------------------------
    def binding(self, members: list[Proc], drivers: list[Proc], root: Proc,
                argv: list[str] | None, regime: str, regime_why: str,
                numa_bind: bool) -> list[Finding]:
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
        spanning = len(nodes) > 1
        # one fix for the whole server: every finding below carries the same one
        fixes = self.server_fixes(root, argv, nodes, numa_bind)
        if spanning and not numa_bind:
            out.append(Finding(
                severity="warning" if regime == "host-heavy" else "info",
                code="spans-nodes", pids=[root.pid],
                text=f"this server's GPUs hang off NUMA nodes {_span(nodes)} ({regime}: "
                f"{regime_why})",
                evidence=[Evidence(path=self.node_path(g), value=str(self.gnodes[g]))
                          for p in drivers for g in (p.gpus or [])][:8],
                fixes=fixes, why=WHY["spans-nodes"]))
        for p in drivers:
            want = sorted({n for g in p.gpus or [] if (n := self.gnodes[g]) is not None})
            if not want:
                continue
            if len(want) > 1 and p.role != "worker" and numa_bind:
                continue
            out += self.one(p, want, regime, regime_why, spanning, fixes)
        return out

    def server_fixes(self, root: Proc, argv: list[str] | None, nodes: list[int],
                     numa_bind: bool) -> list[Fix]:
        """The one change for the whole server: on one node, the server bound there; across
        nodes, vLLM's --numa-bind (each worker on its own GPU's node) with every GPU node's
        CPUs allowed — never one worker's node for all of them."""
        cmd = shlex.join(_without_secret_flags(argv)) if argv else None
        cpus = [c for n in nodes for c in self.node_cpus.get(n, [])]
        unit = root.unit
        out: list[Fix] = []
        if len(nodes) <= 1:
            out.append(self.numactl(cmd, nodes))
            if _is_systemd(unit):
                out.append(self.dropin(unit, cpus, nodes, None))
            elif unit and unit.startswith("docker:"):
                out.append(Fix(kind="docker", text=f"docker run --cpuset-cpus={_span(cpus)} "
                               f"--cpuset-mems={_span(nodes)} …   # recreate container "
                               f"{unit[7:]} with these"))
        else:
            with_flag = (cmd if numa_bind else f"{cmd} --numa-bind") if cmd else None
            out.append(Fix(kind="vllm-flag", text=(
                "--numa-bind   # vLLM PR #38635 (first release inferred 0.19.0): each worker on "
                "its own GPU's node; " + (f"the command: {with_flag}" if with_flag else
                                         "add it to your vllm serve command"))
                if not numa_bind else (
                "start it without an outer taskset/numactl or CPU limit that keeps workers "
                f"off their GPUs' nodes {_span(nodes)}"
                + (f": {with_flag}" if with_flag else ""))))
            if _is_systemd(unit):
                drop = self.dropin(unit, cpus, None, None)
                out.append(drop.model_copy(update={
                    "text": drop.text + "NUMAPolicy=default\n",
                    "then": (drop.then or "") + ("" if numa_bind else
                                                 "   # and --numa-bind on ExecStart")}))
            elif unit and unit.startswith("docker:"):
                out.append(Fix(kind="docker", text=f"docker run --cpuset-cpus={_span(cpus)} "
                               f"--cpuset-mems={_span(nodes)} … --numa-bind   # recreate "
                               f"container {unit[7:]} with these"))
        if unit == "kubepods":
            out.append(Fix(kind="run-as", text="kubelet: --cpu-manager-policy=static "
                           "--topology-manager-policy=single-numa-node, and a Guaranteed pod "
                           "(advisor render --target k8s writes both)"))
        return out

    def one(self, p: Proc, want: list[int], regime: str, regime_why: str, spanning: bool,
            fixes: list[Fix]) -> list[Finding]:
        out: list[Finding] = []
        want_cpus = {c for n in want for c in self.node_cpus.get(n, [])}
        allowed = set(p.cpus or [])
        gp = p.gpus or []
        ev_gpu = [Evidence(path=self.node_path(g), value=str(self.gnodes[g])) for g in gp[:4]]
        ev_cpu = Evidence(path=f"/proc/{p.pid}/status", value="Cpus_allowed_list: "
                          + _span(allowed))
        on_nodes = sorted({n for n, cs in self.node_cpus.items() if allowed & set(cs)})
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
            share = off / total if total else 0.0
            # a majority elsewhere is a warning; with the host on the hot path 20% is
            # (REMOTE_SHARE_HOST_HEAVY: TensorRT-LLM PR #18117); 20-50% otherwise a note
            warn = share > REMOTE_SHARE_GPU_BOUND or (
                regime == "host-heavy" and share >= REMOTE_SHARE_HOST_HEAVY)
            if total and (warn or share >= REMOTE_SHARE_HOST_HEAVY):
                out.append(Finding(
                    severity="warning" if warn else "info", code="memory-off-node",
                    pids=[p.pid],
                    text=f"{who}: {round(100 * share)}% of its resident memory "
                    f"({off // 1024} of {total // 1024} MiB) is on other nodes than its GPU's "
                    f"node {_span(want)} ({regime})",
                    evidence=[ev_mem, *ev_gpu], fixes=fixes, why=WHY["memory-off-node"]))
        return out

    def threads(self, members: list[Proc]) -> list[Finding]:
        """OpenMP threads beyond the CPUs a process may use (any host, any node knowledge)."""
        out: list[Finding] = []
        for p in members:
            omp = p.env.get("OMP_NUM_THREADS", "")
            allowed = set(p.cpus or [])
            if not (omp.isdigit() and allowed and int(omp) > len(allowed)):
                continue
            want = {n for g in p.gpus or [] if g < len(self.gnodes)
                    and (n := self.gnodes[g]) is not None}
            want_cpus = {c for n in want for c in self.node_cpus.get(n, [])}
            n = max(1, len(allowed & want_cpus or allowed))
            who = f"{p.role} {p.pid}" + (f" (GPU {_span(p.gpus)})" if p.gpus else "")
            out.append(Finding(
                severity="warning", code="omp-oversubscribed", pids=[p.pid],
                text=f"{who}: OMP_NUM_THREADS={omp} on {len(allowed)} allowed CPU(s)",
                evidence=[Evidence(path=f"/proc/{p.pid}/environ", value=f"OMP_NUM_THREADS={omp}"),
                          Evidence(path=f"/proc/{p.pid}/status",
                                   value="Cpus_allowed_list: " + _span(allowed))],
                fixes=[Fix(kind="env", text=f"OMP_NUM_THREADS={n}"),
                       *([self.dropin(p.unit, None, None, n)] if _is_systemd(p.unit) else [])],
                why=WHY["omp-oversubscribed"]))
        return out

    def numactl(self, cmd: str | None, nodes: list[int], interleave: bool = False) -> Fix:
        joined = _span(nodes)
        mem = f"--interleave={joined}" if interleave else f"--membind={joined}"
        return Fix(kind="numactl", text=f"numactl --cpunodebind={joined} {mem} "
                   + (cmd or "<your vllm serve command>"))

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
                   then=f"{ctl} daemon-reload && {ctl} restart {shlex.quote(name)}")

    # -- the GPU side ----------------------------------------------------------------------
    def links(self, root: Proc, gpus: list[int]) -> list[Finding]:
        """PCIe links trained below what the GPU and the slot support (sysfs)."""
        from advisor.host.topology import _read

        out: list[Finding] = []
        for g in gpus:
            bus = self.bus.get(g)
            if bus is None:
                continue
            d = self.sysfs / "sys" / "bus" / "pci" / "devices" / bus
            cw, mw = _read(d / "current_link_width"), _read(d / "max_link_width")
            cs, ms = _read(d / "current_link_speed"), _read(d / "max_link_speed")
            base = f"/sys/bus/pci/devices/{bus}"
            if cw and mw and cw.isdigit() and mw.isdigit() and 0 < int(cw) < int(mw):
                out.append(Finding(
                    severity="warning", code="pcie-width-below-max", pids=[root.pid],
                    text=f"GPU {g} ({bus}): PCIe link x{cw} of x{mw}",
                    evidence=[Evidence(path=f"{base}/current_link_width", value=cw),
                              Evidence(path=f"{base}/max_link_width", value=mw)],
                    fixes=[Fix(kind="run-as", text=f"nvidia-smi -q -i {bus} -d PCIE   # under "
                               "load; if it stays narrow: reseat the GPU or check the slot/"
                               "riser (the provider, for a cloud instance)")],
                    why=WHY["pcie-width-below-max"]))
            sc, sm = _speed(cs), _speed(ms)
            if sc is not None and sm is not None and sc < sm:
                out.append(Finding(
                    severity="info", code="pcie-speed-below-max", pids=[root.pid],
                    text=f"GPU {g} ({bus}): PCIe link at {cs} of {ms}",
                    evidence=[Evidence(path=f"{base}/current_link_speed", value=cs or ""),
                              Evidence(path=f"{base}/max_link_speed", value=ms or "")],
                    fixes=[Fix(kind="run-as", text=f"nvidia-smi -q -i {bus} -d PCIE   # under "
                               "load: 'Current' should reach 'Max'")],
                    why=WHY["pcie-speed-below-max"]))
        return out

    def nvswitch(self) -> bool:
        """An NVIDIA NVSwitch (PCI class 0x0680, vendor 0x10de) in sysfs: an NVLink fabric."""
        from advisor.host.topology import _entries, _read

        for d in _entries(self.sysfs / "sys" / "bus" / "pci" / "devices", "*"):
            if (_read(d / "vendor") or "") == "0x10de" and (
                    _read(d / "class") or "").startswith("0x0680"):
                return True
        return False

    def interconnect(self, root: Proc, groups: list[list[int]]) -> list[Finding]:
        """TP groups whose GPUs hang off different nodes, and what joins them."""
        out: list[Finding] = []
        smi = {g.index: g.links for g in self.topo.nvidia_smi or []}
        fabric: bool | None = None
        for grp in groups:
            nodes = sorted({n for g in grp if g < len(self.gnodes)
                            and (n := self.gnodes[g]) is not None})
            if len(nodes) < 2:
                continue
            ev = [Evidence(path=self.node_path(g), value=str(self.gnodes[g])) for g in grp[:8]]
            per_node = {n: [g for g, gn in enumerate(self.gnodes) if gn == n] for n in nodes}
            roomy = [n for n, gs in per_node.items() if len(gs) >= len(grp)]
            alt = (f"CUDA_VISIBLE_DEVICES={','.join(map(str, per_node[roomy[0]][:len(grp)]))} "
                   f"(node {roomy[0]}'s GPUs)" if roomy else
                   f"-tp {max(1, len(grp) // len(nodes))} -pp {len(nodes)} (a stage per socket)")
            if smi:
                # the pairs that cross nodes, and what nvidia-smi says joins them
                pairs = [(a, b, smi.get(a, {}).get(f"GPU{b}", "?"))
                         for i, a in enumerate(grp) for b in grp[i + 1:]
                         if self.gnodes[a] != self.gnodes[b]]
                slow = [(a, b, k) for a, b, k in pairs if not k.startswith("NV")]
                if not slow:
                    continue
                out.append(Finding(
                    severity="warning", code="tp-over-pcie", pids=[root.pid],
                    text=f"TP group GPU(s) {_span(grp)} spans nodes {_span(nodes)} without "
                    f"NVLink between " + ", ".join(f"GPU{a}-GPU{b} ({k})"
                                                    for a, b, k in slow[:4]),
                    evidence=[*ev, *[Evidence(path="nvidia-smi topo -m",
                                              value=f"GPU{a} GPU{b}: {k}")
                                     for a, b, k in slow[:4]]],
                    fixes=[Fix(kind="vllm-flag", text=alt)], why=WHY["tp-over-pcie"]))
            else:
                if fabric is None:
                    fabric = self.nvswitch()
                if fabric:
                    continue
                out.append(Finding(
                    severity="info", code="tp-across-sockets", pids=[root.pid],
                    text=f"TP group GPU(s) {_span(grp)} spans nodes {_span(nodes)}; whether "
                    "NVLink joins them is not in sysfs",
                    evidence=ev,
                    fixes=[Fix(kind="run-as", text="nvidia-smi topo -m > topo.txt && advisor "
                               "doctor --nvidia-smi-topo topo.txt   # NV# = NVLink, SYS = "
                               "across the socket link"),
                           Fix(kind="vllm-flag", text=alt + "   # if they are PCIe-only")],
                    why=WHY["tp-across-sockets"]))
        return out

    def nics(self, root: Proc, argv: list[str], gpus: list[int], world: int) -> list[Finding]:
        """For a server whose traffic leaves the host (multi-node, KV transfer), a GPU node
        with no NIC on it."""
        nnodes = _int(_flag(argv, "--nnodes", "-n"))
        dpl = _int(_flag(argv, "--data-parallel-size-local", "-dpl"))
        dp = _int(_flag(argv, "--data-parallel-size", "-dp")) or 1
        why_out = ("--kv-transfer-config" if _has(argv, "--kv-transfer-config") else
                   "--headless" if _has(argv, "--headless") else
                   f"--nnodes {nnodes}" if nnodes and nnodes > 1 else
                   "--data-parallel-address" if _has(argv, "--data-parallel-address") else
                   f"--data-parallel-size-local {dpl} of {dp}" if dpl and dpl < dp else
                   f"{world} ranks on {len(self.topo.gpus)} GPU(s) here"
                   if len(self.topo.gpus) and world > len(self.topo.gpus) else None)
        if why_out is None or not self.multi or not self.topo.nics:
            return []
        if any(n.numa_node is None for n in self.topo.nics):
            return []
        nic_nodes = {n.numa_node for n in self.topo.nics}
        out: list[Finding] = []
        for node in sorted({self.gnodes[g] for g in gpus if g < len(self.gnodes)
                            and self.gnodes[g] is not None}, key=lambda n: n or 0):
            if node in nic_nodes:
                continue
            mine = [g for g in gpus if g < len(self.gnodes) and self.gnodes[g] == node]
            far = [n for n in self.topo.nics][:4]
            out.append(Finding(
                severity="warning", code="nic-remote", pids=[root.pid],
                text=f"GPU(s) {_span(mine)} on node {node} have no NIC on their node "
                f"({why_out}): their traffic to other hosts crosses the socket link to "
                + ", ".join(f"{n.bus_id} (node {n.numa_node})" for n in far),
                evidence=[*[Evidence(path=f"/sys/bus/pci/devices/{n.bus_id}/numa_node",
                                     value=str(n.numa_node)) for n in far],
                          *[Evidence(path=self.node_path(g), value=str(node))
                            for g in mine[:4]]],
                fixes=[Fix(kind="run-as", text="place this server's GPUs on the node(s) of "
                           "the RDMA NICs (CUDA_VISIBLE_DEVICES), or add a NIC on node "
                           f"{node}; NCCL_IB_HCA / UCX_NET_DEVICES name the NIC each rank "
                           "uses")],
                why=WHY["nic-remote"]))
        return out

    # -- safety, floor, host ---------------------------------------------------------------
    def security(self, root: Proc, argv: list[str] | None, members: list[Proc]
                 ) -> list[Finding]:
        out: list[Finding] = []
        if root.role != "api-server":
            return out
        if argv is not None and _has(argv, "--headless"):
            return out  # no HTTP server in this process tree
        if argv is None:
            if root.api_key_env is False:
                out.append(Finding(
                    severity="info", code="argv-replaced", pids=[root.pid],
                    text=f"server {root.pid}'s command line was replaced by its title "
                    f"{(root.argv or ['?'])[0]!r}: --api-key and --host cannot be read, and "
                    "VLLM_API_KEY is unset in its environment",
                    evidence=[Evidence(path=f"/proc/{root.pid}/cmdline",
                                       value=(root.argv or ["?"])[0]),
                              Evidence(path=f"/proc/{root.pid}/environ",
                                       value="VLLM_API_KEY unset")],
                    fixes=[Fix(kind="env", text="VLLM_API_KEY=<a random key>   # in its "
                               "environment: then doctor can see a key is set")],
                    why=WHY["argv-replaced"]))
            return out
        if any(canonical(a.split("=", 1)[0]) == "--api-key" for a in argv):
            out.append(Finding(
                severity="warning", code="api-key-in-argv", pids=[root.pid],
                text=f"server {root.pid} has its API key in its command line, readable by every "
                "local user",
                evidence=[Evidence(path=f"/proc/{root.pid}/cmdline", value="--api-key <redacted>")],
                fixes=[Fix(kind="env", text="VLLM_API_KEY=<the key>   # in an EnvironmentFile "
                           "readable by the service user only (chmod 0640), then drop --api-key")],
                why=WHY["api-key-in-argv"]))
        elif root.api_key_env is False:
            host = _flag(argv, "--host")
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
    if not items or not all(x.isdigit() for x in items) or any(int(x) >= n for x in items):
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


def _check_sysfs(root: Path) -> None:
    """A --sysfs-root that holds no sys/ tree is bad input, not an empty host."""
    shown = str(root)[:120]
    if not root.is_dir():
        raise UserInputError(f"--sysfs-root {shown}: not a directory",
                             hint="point it at / or at a copied tree holding sys/")
    sys_dir = root / "sys"
    if not any((sys_dir / p).is_dir() for p in ("devices/system/node", "devices/system/cpu",
                                                "bus/pci/devices")):
        raise UserInputError(f"--sysfs-root {shown}: no sys/ tree under it "
                             "(sys/devices/system and sys/bus/pci are missing)",
                             hint="point it at / or at a copied tree holding sys/")


def diagnose(pids: list[int] | None = None, *, proc_root: str | Path = "/",
             sysfs_root: str | Path = "/", nvidia_smi_topo: str | None = None) -> Report:
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
    reader = _Reader(proc_root, sysfs_root)
    listed = reader.pids()
    if not listed:
        raise UserInputError(f"{str(proc)[:120]}: no process folders: not a /proc tree",
                             hint="point --proc-root at / (or at a folder holding a copied "
                             "proc/ tree)")
    for p in pids or []:
        if p not in listed or reader.argv(p) is None:
            raise UserInputError(f"--pid {p}: no such process (or its command line cannot "
                                 "be read)", hint="'pgrep -af vllm' lists vLLM's processes")
    _check_sysfs(sysfs_root)
    topo = probe(sysfs_root, nvidia_smi_topo)
    reader.set_topology(topo)
    judge = _Judge(topo, sysfs_root, _numa_balancing(proc))
    groups, strays = find_servers(reader, pids)
    servers = []
    for group in groups:
        # a process that ended while we read has no status left: it is not judged
        members = [p for p in (reader.read(m.pid, m.role, m.title, m.ray)
                               for m in group.members) if p.cpus is not None or p.argv]
        if members and members[0].pid == group.members[0].pid:
            servers.append(judge.server(members, redact(group.argv)
                                        if group.argv is not None else None))
    cpu = topo.cpu
    facts = HostFacts(nodes={n.id: n.cpus for n in topo.nodes},
                      cpus=cpu.cpus if cpu else None, cores=cpu.cores if cpu else None,
                      sockets=cpu.sockets if cpu else None, smt=cpu.smt if cpu else None,
                      gpus=[g.bus_id for g in topo.gpus], gpu_nodes=gpu_nodes(topo),
                      numa_balancing=judge.numa_balancing)
    findings = judge.host(servers)
    if strays:
        findings.append(Finding(
            severity="info", code="ray-workers-unattributed", pids=strays[:64],
            text=f"{len(strays)} Ray worker(s) ({_pids(strays[:8])}) with several or no "
            "Ray-backed vLLM servers here: not judged",
            fixes=[Fix(kind="run-as", text="advisor doctor --pid <a Ray worker's pid> "
                       "judges it with its server only when one Ray-backed server runs here")],
            why=WHY["ray-workers-unattributed"]))
    # a hidden GPU node is judged above (it matters on a multi-node host only)
    findings += [Finding(severity="info", code="probe", text=w) for w in topo.warnings
                 if "reads -1" not in w]
    return Report(host=facts, servers=servers, findings=findings)
