"""The files that bring a plan up on a fresh instance: cloud-init user-data, a systemd template
unit, one environment file per replica, and the launcher that binds each replica to its NUMA
node at boot. Pure apart from reading the templates shipped with advisor.

Safety: every value that reaches a file or a shell line is checked against a strict pattern and
refused (UserInputError, exit 2) when it does not match — a model id with a newline or a ``$``
cannot be made safe, so it is not quoted but rejected. The user-data is built as data and dumped
with PyYAML (no string templating of YAML), and ``runcmd`` uses argument lists, not shell lines.
No secret is ever written: the API key is fetched at boot from the reference given.

The install is one script (``templates/advisor-install.sh``) that runs named steps and stops at
the first that fails, telling the serial console (``advisor-boot:`` lines, see
:mod:`advisor.bootstatus`); vLLM comes from a hash-pinned lock (:mod:`advisor.render.envlock`).
The user-data must fit the cloud's limit (:class:`advisor.clouds.info.CloudInfo`), checked here:
the scripts are embedded without their comment lines.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import Any, Literal

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, Field

from advisor.catalog.schema import InstanceType
from advisor.core.layouts import Plan
from advisor.errors import UserInputError

#: what may reach a shell line or an EnvironmentFile unquoted
_SAFE = {
    "model": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?\Z"),
    "vllm_version": re.compile(r"^\d+\.\d+(\.\d+)?([a-z0-9.+-]*)?\Z"),
    "host": re.compile(r"^(127\.0\.0\.1|0\.0\.0\.0|[0-9a-fA-F:.]{2,45})\Z"),
    "python": re.compile(r"^3\.\d{1,2}\Z"),
}
DEFAULT_BIN = "/opt/advisor/bin"
DEFAULT_ENV = "/etc/advisor"
DEFAULT_VENV = "/opt/advisor/venv"
SERVICE_USER = "vllm"
LOCK_PATH = "/opt/advisor/requirements.lock"
#: the longest head address ``with_ray_head`` may add to a worker's user-data (IPv6 with an
#: embedded IPv4, 45 characters): the size check counts it before provisioning knows the head
_LONGEST_HEAD = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"


def _pattern(kind: str) -> re.Pattern[str]:
    if kind == "api_key_ref":  # each cloud's secret-store scheme, from the registry
        from advisor.clouds.registry import key_ref_pattern

        return re.compile(key_ref_pattern())
    return _SAFE[kind]


def _address(value: str) -> bool:
    """An IP address in its one canonical spelling: ``00``, ``0.0``, ``....`` or ``ffff`` are
    not addresses (``inet_aton`` would read ``0.0`` as 0.0.0.0 and listen everywhere)."""
    import ipaddress

    try:  # ip_address takes four dotted decimals (no shorthand, no leading zeros) or IPv6
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def check_value(kind: str, value: str) -> str:
    """``value`` if it matches the strict pattern of ``kind``; UserInputError otherwise. A
    value that may be the secret itself (an API-key reference that is not one) is not
    echoed."""
    if not isinstance(value, str):
        raise UserInputError(f"{kind.replace('_', ' ')} must be text, not "
                             f"{type(value).__name__}")
    if kind == "host" and not _address(value):
        raise UserInputError(f"host {_shown(value)} is not an IP address",
                             hint="use 127.0.0.1 (this host only), 0.0.0.0 (every address) or "
                             "one address of the instance, written in full")
    if not _pattern(kind).match(value):
        if kind == "api_key_ref" and not any(value.startswith(p) for p in _ref_prefixes()):
            from advisor.clouds.registry import key_ref_forms

            raise UserInputError("the secret reference is not a reference (it is not shown: "
                                 "it may be the secret itself)",
                                 hint=f"store the key and pass where it is: {key_ref_forms()}")
        if kind == "api_key_ref" and value.startswith("file:"):
            raise UserInputError(
                f"secret reference {_shown(value)}: a file: reference is an absolute path of "
                "plain names (no '.' or '..' segments), not under /proc, /sys or /dev",
                hint="e.g. file:/etc/advisor/api-key (a regular file the service user reads)")
        if kind == "api_key_ref":
            from advisor.clouds.registry import key_ref_forms

            hint = f"use {key_ref_forms()}"
        else:
            hint = {"model": "use a Hugging Face repo id (owner/name)"}.get(
                kind, "use letters, digits, '.', '-' only")
        raise UserInputError(
            f"{kind.replace('_', ' ')} {_shown(value)} cannot be used safely in a shell line",
            hint=hint)
    return value


def _shown(value: str) -> str:
    """A user's value as an error line echoes it: at most 200 characters, control characters
    (terminal escapes, newlines) written as escapes by repr, never sent raw."""
    return repr(value[:200])


def _ref_prefixes() -> list[str]:
    from advisor.clouds.registry import CLOUDS, info

    return [info(n).key_scheme.prefix for n in CLOUDS] + ["file:"]


class RenderRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    model: str
    max_model_len: int = Field(gt=0)
    vllm_version: str
    port: int = Field(default=8000, ge=1024, le=65000)
    host: str = "127.0.0.1"
    api_key_ref: str
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    #: a multi-node replica's head address for the workers (None: read at boot from
    #: /etc/advisor/ray-head, which provisioning or the user writes)
    ray_head: str | None = None
    #: where the Hugging Face token is read at boot (gated repositories); same forms as the key
    hf_token_ref: str | None = None
    #: how long systemd and the health check wait for a replica to come up (start_timeout_s())
    start_timeout_s: int = Field(default=1800, ge=300, le=6 * 3600)
    #: vLLM's --quantization (on-the-fly fp8: advisor.core.weights); None: the checkpoint's own
    quantization: Literal["fp8"] | None = None
    #: vLLM's --kv-cache-dtype; None: its default (the model's dtype, or the checkpoint's own)
    kv_cache_dtype: Literal["fp8", "fp8_e4m3", "fp8_e5m2"] | None = None
    #: vLLM's --cpu-offload-gb: GiB of each GPU's weights kept in host memory (0: none)
    cpu_offload_gib: float = Field(default=0.0, ge=0, le=4096)
    #: the image's python3 (major.minor), which the lock is resolved for: Ubuntu 22.04's, which
    #: every default image runs (the install checks it and stops, named, on another)
    python: str = "3.10"


#: Start-up budget of one replica. ASSUMED, not measured here (no GPU host in this project's
#: tests): a fixed part for the venv install, CUDA initialisation, torch.compile and CUDA-graph
#: capture, which vLLM's own start-up logs put at minutes, not hours, and the weights pulled
#: from the Hub at a conservative sustained rate. Both are stated so that an operator can see
#: why a slow mirror times out; the unit's TimeoutStartSec and the health check share it.
START_FIXED_S = 900
START_DOWNLOAD_MIB_S = 50


def offload_arg(gib: float) -> str:
    """``--cpu-offload-gb``'s value as the launcher accepts it: GiB to the MiB-ish third
    decimal, no exponent ("" for none)."""
    text = f"{round(gib, 3):.3f}".rstrip("0").rstrip(".")
    return "" if text in ("", "0") else text


def start_timeout_s(weights_gib: float) -> int:
    """Seconds a replica of ``weights_gib`` (all its GPUs' weights) may take to start."""
    need = START_FIXED_S + weights_gib * 1024 / START_DOWNLOAD_MIB_S
    return int(min(6 * 3600, max(1800, math.ceil(need / 60) * 60)))


class _BlockDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Safe YAML whose multi-line strings (the scripts) are written as readable blocks. libyaml's
    emitter where PyYAML has it (its wheels do): the same bytes as the pure-Python one for all
    610 cloud-configs the user-data sweep renders (tests/test_user_data_limits.py; compared on
    2026-12-08), 30x faster (0.3 s against 9.3 s for the 610), so a provision or render no
    longer spends most of its time emitting YAML."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def templates_dir() -> Path:
    packaged = Path(__file__).resolve().parents[1] / "_data" / "templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "templates"


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(templates_dir())), undefined=StrictUndefined,
                      autoescape=False, keep_trailing_newline=True)
    env.filters["shell_quote"] = shlex.quote
    return env


def replica_env(req: RenderRequest, plan: Plan, i: int, venv: str = DEFAULT_VENV,
                numa_bind_flag: bool = False, role: str = "single") -> str:
    """The EnvironmentFile of replica ``i`` (every value already checked safe)."""
    all_gpus = ";".join(",".join(map(str, r.gpus)) for r in plan.replica_layout)
    lines = {
        "ADVISOR_GPUS": ",".join(map(str, plan.replica_layout[i].gpus)),
        "ADVISOR_ALL_GPUS": all_gpus,
        "ADVISOR_MODEL": req.model,
        "ADVISOR_PORT": str(req.port + i),
        "ADVISOR_HOST": req.host,
        "ADVISOR_TP": str(plan.tp),
        "ADVISOR_MAX_MODEL_LEN": str(req.max_model_len),
        "ADVISOR_GPU_MEM_UTIL": f"{req.gpu_memory_utilization:g}",
        "ADVISOR_API_KEY_REF": req.api_key_ref,
        **({"ADVISOR_HF_TOKEN_REF": req.hf_token_ref} if req.hf_token_ref else {}),
        "ADVISOR_HEALTH_TRIES": str(req.start_timeout_s // 2),
        "ADVISOR_VENV": venv,
        "ADVISOR_VLLM_NUMA_BIND": "1" if numa_bind_flag else "0",
        **({"ADVISOR_QUANTIZATION": req.quantization} if req.quantization else {}),
        **({"ADVISOR_KV_CACHE_DTYPE": req.kv_cache_dtype} if req.kv_cache_dtype else {}),
        **({"ADVISOR_CPU_OFFLOAD_GB": offload} if (offload := offload_arg(req.cpu_offload_gib))
           else {}),
        **({"ADVISOR_EXPERT_PARALLEL": "1"} if plan.expert_parallel else {}),
    }
    if role != "single":
        lines.update({"ADVISOR_ROLE": role, "ADVISOR_PP": str(plan.pp),
                      "ADVISOR_NODES": str(plan.nodes)})
        if role == "worker" and req.ray_head:
            lines["ADVISOR_RAY_HEAD"] = req.ray_head
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def unit(bin_dir: str = DEFAULT_BIN, env_dir: str = DEFAULT_ENV, user: str = SERVICE_USER,
         start_timeout_s: int = 1800) -> str:
    return _env().get_template("vllm@.service.j2").render(bin_dir=bin_dir, env_dir=env_dir,
                                                          user=user,
                                                          start_timeout_s=start_timeout_s)


def render(inst: InstanceType, plan: Plan, req: RenderRequest,
           user_data: bool = True) -> dict[str, str]:
    """file name -> content for one instance and plan (``user_data=False``: without the
    user-data, which alone needs the vLLM release's lock, for a host installed otherwise).

    A multi-node plan (``plan.nodes`` > 1) gives the head's files at the top (``user-data``,
    ``env/vllm-0.env``) and the workers' under ``worker/``: every node runs the same NUMA-bound
    launcher, the workers join the head's Ray cluster, the head serves with TP inside a node
    and PP across nodes.
    """
    for kind in ("model", "vllm_version", "host", "api_key_ref", "python"):
        check_value(kind, getattr(req, kind))
    if req.ray_head is not None:
        check_value("host", req.ray_head)
    if req.hf_token_ref is not None:
        check_value("api_key_ref", req.hf_token_ref)
    if req.port + plan.replicas - 1 > 65535:
        raise UserInputError("the replicas' ports would pass 65535", hint="use a lower --port")
    if plan.pp != 1 and plan.nodes == 1:
        raise UserInputError("rendering pipeline-parallel layouts inside one instance is not "
                             "supported yet", hint="pick a TP-only layout (--tp)")
    from advisor.clouds.registry import with_secret_fetch

    tdir = templates_dir()
    # the instance's cloud brings its own secret-store reader (clouds/<cloud>/secret_fetch.sh)
    launcher = with_secret_fetch((tdir / "vllm-launch.sh").read_text(), inst.provider)
    health = (tdir / "vllm-health.sh").read_text()
    service = unit(start_timeout_s=req.start_timeout_s)
    scripts = {name: strip_comments(launcher if name == "vllm-launch.sh"
                                    else (tdir / name).read_text())
               for name in ("vllm-launch.sh", "vllm-health.sh", "vllm-report.sh",
                            "advisor-install.sh")}
    from advisor.core.engine import profile

    flag = profile(req.vllm_version).numa_bind_flag
    multi = plan.nodes > 1
    roles = ["head", "worker"] if multi else ["single"]
    out: dict[str, str] = {"vllm@.service": service, "vllm-launch.sh": launcher,
                           "vllm-health.sh": health}
    for role in roles:
        prefix = "worker/" if role == "worker" else ""
        envs = {f"{prefix}env/vllm-{i}.env": replica_env(req, plan, i, numa_bind_flag=flag,
                                                         role=role)
                for i in range(plan.replicas)}
        out.update(envs)
        if not user_data:
            continue
        text = _user_data(req, plan, list(envs.values()), scripts, strip_comments(service),
                          with_ray=multi)
        check_user_data(inst.provider, with_ray_head(text, _LONGEST_HEAD)
                        if role == "worker" and req.ray_head is None else text,
                        f"{prefix}user-data")
        out[f"{prefix}user-data"] = text
    out["plan.json"] = json.dumps({
        "instance": inst.key, "model": req.model, "plan": plan.model_dump(),
        "ports": [req.port + i for i in range(plan.replicas)], "host": req.host,
        "vllm_version": req.vllm_version, "api_key_ref": req.api_key_ref,
        "hf_token_ref": req.hf_token_ref, "start_timeout_s": req.start_timeout_s,
        "nodes": plan.nodes, "ray_head": req.ray_head}, indent=2) + "\n"
    return out


def strip_comments(text: str) -> str:
    """A script or unit without its comment and blank lines (the shebang and shellcheck
    directives stay), for the user-data: the same code in fewer bytes. Only whole-line
    comments go; the embedded scripts have no heredoc or multi-line string with such a line
    (a test runs shellcheck and the launcher on the stripped text)."""
    lines = text.splitlines()
    keep = [ln for i, ln in enumerate(lines)
            if ln.strip() and (not ln.lstrip().startswith("#") or (i == 0 and ln.startswith("#!"))
                               or ln.lstrip().startswith("# shellcheck"))]
    return "\n".join(keep) + "\n"


def check_user_data(provider: str, text: str, name: str = "user-data") -> int:
    """The size of ``text`` as ``provider`` counts it; UserInputError when over its limit."""
    from advisor.clouds.registry import CLOUDS, info

    if provider not in CLOUDS:
        return len(text.encode())
    cloud = info(provider)
    size = len(cloud.user_data_payload(text))
    if cloud.user_data_limit and size > cloud.user_data_limit:
        raise UserInputError(
            f"{name} for {provider} is {size:,} {cloud.user_data_counted}; "
            f"{cloud.title.split(' (')[0]} allows {cloud.user_data_limit:,}",
            hint="render the files (advisor render --out DIR) and install them on the "
                 "instance yourself, or pick a layout with fewer replicas per instance")
    return size


def _user_data(req: RenderRequest, plan: Plan, envs: list[str], scripts: dict[str, str],
               service: str, with_ray: bool) -> str:
    from advisor.render.envlock import lock_text

    full = lock_text(req.vllm_version, req.python, ray=with_ray)
    # the pins without the lock's header, but for its first line: which lock this is
    first = full.split("\n", 1)[0]
    lock = (first + "\n" if first.startswith("# ") else "") + strip_comments(full)
    write_files: list[dict[str, Any]] = [
        {"path": f"{DEFAULT_BIN}/{name}", "permissions": "0755", "content": text}
        for name, text in scripts.items()]
    write_files += [
        {"path": "/etc/systemd/system/vllm@.service", "permissions": "0644", "content": service},
        {"path": LOCK_PATH, "permissions": "0644", "content": lock},
    ]
    for i, env in enumerate(envs):
        write_files.append({"path": f"{DEFAULT_ENV}/vllm-{i}.env", "permissions": "0640",
                            "content": env})
    units = [f"vllm@{i}.service" for i in range(len(envs))]
    # one script, named steps, the first failure stops it (and cloud-init reports the run
    # failed); the replicas start at once and cloud-init does not wait for them
    runcmd = [[f"{DEFAULT_BIN}/advisor-install.sh", req.python, *units]]
    cloud_config = {
        "users": ["default", {"name": SERVICE_USER, "system": True, "shell": "/usr/sbin/nologin",
                              "homedir": "/var/lib/vllm"}],
        "package_update": True,
        "packages": ["numactl", "python3-venv", "python3-pip", "curl", "pciutils"],
        "write_files": write_files,
        "runcmd": runcmd,
    }
    return "#cloud-config\n" + yaml.dump(cloud_config, Dumper=_BlockDumper, sort_keys=False,
                                          width=1000)


def write(files: dict[str, str], out: Path) -> list[Path]:
    """Write atomically: all files land in a temporary folder that is renamed into ``out``."""
    import os
    import tempfile

    from advisor.inputs import check_out_dir

    check_out_dir(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".advisor-render-", dir=out.parent))
    except OSError as exc:
        raise UserInputError(f"--out {str(out)[:120]}: cannot write there: "
                             f"{exc.strerror or exc}",
                             hint="give a new folder in a writable place") from exc
    try:
        for name, text in files.items():
            p = tmp / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
            if name.endswith(".sh"):
                p.chmod(0o755)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException as exc:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise UserInputError(f"--out {str(out)[:120]}: cannot write there: "
                                 f"{exc.strerror or exc}; nothing was written",
                                 hint="give a new folder in a writable place") from exc
        raise
    return sorted(out / n for n in files)


def with_ray_head(worker_user_data: str, address: str) -> str:
    """The workers' cloud-config with the head's address written to /etc/advisor/ray-head
    (where the launcher reads it), once provisioning knows it."""
    check_value("host", address)
    doc = yaml.safe_load(worker_user_data.removeprefix("#cloud-config\n"))
    doc["write_files"].append({"path": f"{DEFAULT_ENV}/ray-head", "permissions": "0644",
                               "content": address + "\n"})
    return "#cloud-config\n" + yaml.dump(doc, Dumper=_BlockDumper, sort_keys=False, width=1000)
