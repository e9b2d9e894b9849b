"""``render --target local``: the files of a cloud instance less its user-data, plus an
``install.sh`` that runs the user-data's steps on a host you already have; and the launcher's
command lines computed here, from the probe, for ``--print``.

:func:`launch_line` is the launcher's (``templates/vllm-launch.sh``) binding rule written again
in Python, fed with the same replica env file and the sysfs facts the launcher reads at start:
each GPU's ``numa_node`` and each node's ``cpulist``. A test holds the two to the same output
(``ADVISOR_DRY_RUN=1``) on fake sysfs trees, so a change to one that the other lacks fails.
Pure apart from reading the templates.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from advisor.catalog.schema import InstanceType
from advisor.core.layouts import Plan
from advisor.errors import UserInputError
from advisor.host.topology import Topology
from advisor.render.cloudinit import (
    DEFAULT_BIN,
    DEFAULT_ENV,
    DEFAULT_VENV,
    SERVICE_USER,
    RenderRequest,
    _env,
    render,
    templates_dir,
)
from advisor.render.envlock import lock_text, supported

#: the characters bash's ``printf %q`` escapes with a backslash anywhere in a word
_BACKSLASHED = frozenset(" \t\n!\"$&'()*,;<>?[\\]^`{|}")


def bash_quote(word: str) -> str:
    """``word`` as bash's ``printf %q`` prints it (bash 5): '' for the empty word, else each
    shell-special character backslash-escaped ('#' only first, '~' first or after '=' or ':').
    Words outside printable ASCII (which bash writes as $'...') never reach here: every value
    of a command line is checked against a strict pattern when it is rendered."""
    if word == "":
        return "''"
    if any(not (" " <= c <= "~") for c in word):
        raise UserInputError(f"{word[:40]!r} holds characters a command line never has")
    out = []
    for i, c in enumerate(word):
        if (c in _BACKSLASHED or (c == "#" and i == 0)
                or (c == "~" and (i == 0 or word[i - 1] in "=:"))):
            out.append("\\")
        out.append(c)
    return "".join(out)


class LaunchLine(BaseModel):
    """One replica's start, as the launcher will run it on this host."""

    model_config = ConfigDict(frozen=True)
    replica: int
    gpus: list[int]
    port: int
    #: the NUMA nodes of its GPUs, in the order the launcher meets them (empty: none known)
    nodes: list[int]
    #: numactl (one node, or interleaved over several), vllm --numa-bind, or unbound
    binding: str
    omp_threads: int | None
    #: the launcher's ADVISOR_DRY_RUN=1 line
    command: str
    #: what the launcher logs to the journal about it
    notes: list[str]


def parse_env(text: str) -> dict[str, str]:
    """An env file advisor wrote (KEY=value lines, values unquoted)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def launch_line(env: dict[str, str], topo: Topology, replica: int = 0) -> LaunchLine:
    """The launcher's single-role command line for the replica whose env file is ``env``, on the
    host ``topo`` describes (GPU index = position in PCI bus order = nvidia-smi's index)."""
    def node_of(gpu: int) -> int | None:
        # the launcher: numa_node of the GPU's bus id, -1 when absent (hidden or no file)
        return topo.gpus[gpu].numa_node if 0 <= gpu < len(topo.gpus) else None

    cpus = {n.id: len(n.cpus) for n in topo.nodes}
    gpus = [int(g) for g in env["ADVISOR_GPUS"].split(",")]
    nodes: list[int] = []
    notes: list[str] = []
    hidden = False
    for g in gpus:
        n = node_of(g)
        if n is None:
            hidden = True
            notes.append(f"GPU {g}: numa_node is -1 (hidden by the host); running unbound")
        elif n not in nodes:
            nodes.append(n)
    numa: list[str] = []
    # the launcher's order: --quantization, --kv-cache-dtype, --cpu-offload-gb,
    # --enable-expert-parallel, then --numa-bind
    extra: list[str] = (["--quantization", env["ADVISOR_QUANTIZATION"]]
                        if env.get("ADVISOR_QUANTIZATION") else [])
    if env.get("ADVISOR_KV_CACHE_DTYPE"):
        extra += ["--kv-cache-dtype", env["ADVISOR_KV_CACHE_DTYPE"]]
    if env.get("ADVISOR_CPU_OFFLOAD_GB"):
        extra += ["--cpu-offload-gb", env["ADVISOR_CPU_OFFLOAD_GB"]]
    if env.get("ADVISOR_EXPERT_PARALLEL") == "1":
        extra.append("--enable-expert-parallel")
    threads: int | None = None
    binding = "unbound"
    if not hidden and nodes:
        joined = ",".join(map(str, nodes))
        if len(nodes) == 1:
            numa = ["numactl", f"--cpunodebind={joined}", f"--membind={joined}"]
            binding = f"numactl node {joined}"
        elif env.get("ADVISOR_VLLM_NUMA_BIND", "0") == "1":
            extra.append("--numa-bind")
            binding = f"vllm --numa-bind over nodes {joined}"
            notes.append(f"replica GPUs {env['ADVISOR_GPUS']} span NUMA nodes {joined}: vLLM "
                         "--numa-bind binds each worker")
        else:
            numa = ["numactl", f"--cpunodebind={joined}", f"--interleave={joined}"]
            binding = f"numactl nodes {joined}, memory interleaved"
            notes.append(f"replica GPUs {env['ADVISOR_GPUS']} span NUMA nodes {joined}: memory "
                         "interleaved across them")
        # OpenMP threads: the nodes' CPUs shared by the replicas whose first GPU sits on them
        sharing = 0
        for r in env.get("ADVISOR_ALL_GPUS", env["ADVISOR_GPUS"]).split(";"):
            first = r.split(",")[0]
            if first and node_of(int(first)) in nodes:
                sharing += 1
        total = sum(cpus.get(n, 0) for n in nodes)
        if sharing >= 1 and total >= sharing:
            threads = total // sharing
    venv = env.get("ADVISOR_VENV", DEFAULT_VENV)
    cmd = [*numa, f"{venv}/bin/vllm", "serve", env["ADVISOR_MODEL"],
           "--host", env.get("ADVISOR_HOST", "127.0.0.1"), "--port", env["ADVISOR_PORT"],
           "--tensor-parallel-size", env["ADVISOR_TP"],
           "--max-model-len", env["ADVISOR_MAX_MODEL_LEN"],
           "--gpu-memory-utilization", env["ADVISOR_GPU_MEM_UTIL"], *extra]
    key_ref = env.get("ADVISOR_API_KEY_REF", "")
    token_ref = env.get("ADVISOR_HF_TOKEN_REF", "")
    line = (f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={bash_quote(env['ADVISOR_GPUS'])}"
            f" OMP_NUM_THREADS={bash_quote(str(threads) if threads is not None else 'unset')}"
            f" VLLM_API_KEY=<from {bash_quote(key_ref or 'nowhere')}>")
    if token_ref:
        line += f" HF_TOKEN=<from {bash_quote(token_ref)}>"
    line += "".join(" " + bash_quote(w) for w in cmd)
    return LaunchLine(replica=replica, gpus=gpus, port=int(env["ADVISOR_PORT"]), nodes=nodes,
                      binding=binding, omp_threads=threads, command=line, notes=notes)


def launch_lines(files: dict[str, str], topo: Topology) -> list[LaunchLine]:
    """Every replica's line, from the rendered env files."""
    envs = sorted((int(name[len("env/vllm-"):-len(".env")]), text) for name, text in files.items()
                  if name.startswith("env/vllm-") and name.endswith(".env"))
    return [launch_line(parse_env(text), topo, i) for i, text in envs]


def install_script(req: RenderRequest, plan: Plan) -> str:
    """``install.sh``: the user-data's steps for a host you run it on as root."""
    return str(_env().get_template("install-local.sh.j2").render(
        vllm_version=req.vllm_version, replicas=plan.replicas, api_key_ref=req.api_key_ref,
        hf_token_ref=req.hf_token_ref or "", user=SERVICE_USER, venv=DEFAULT_VENV,
        bin_dir=DEFAULT_BIN, env_dir=DEFAULT_ENV))


def render_local(inst: InstanceType, plan: Plan, req: RenderRequest) -> dict[str, str]:
    """file name -> content: unit, launcher, health check, env files, plan.json and install.sh
    (no user-data: nothing boots this host for advisor)."""
    if plan.nodes > 1:
        raise UserInputError(f"a replica over {plan.nodes} hosts is not laid out for --target "
                             "local", hint="pick a model or context that fits on this host")
    files = render(inst, plan, req, user_data=False)  # install.sh installs, below
    files["install.sh"] = install_script(req, plan)
    # the unit's reporter (ExecStartPost=-+ / ExecStopPost=-+): boot-status.json and the console
    files["vllm-report.sh"] = (templates_dir() / "vllm-report.sh").read_text()
    # the release's locks for every Python advisor has one for: install.sh takes the host's
    # (the host's Python is known only there); none for this release: it says so and resolves
    for version, python in supported():
        if version == req.vllm_version:
            files[f"locks/requirements-cp{python.replace('.', '')}.txt"] = lock_text(
                version, python)
    return files
