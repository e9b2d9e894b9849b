"""What every cloud backend offers, and the types they share.

A provider is a small object with these methods (see :class:`Provider`):

* ``request(spec, zone)`` — the exact request bodies a launch would send, built without any
  network call and without importing the cloud SDK (``advisor provision --dry-run`` prints it);
* ``zones(spec)`` — the zones of ``spec.region`` that offer the instance type, in order;
* ``check_quota(spec)`` — whether the region's quota leaves room, where the cloud tells;
* ``ensure_network(spec)`` — the firewall (security group, firewall rules, NSG, …) the deployment
  needs, created once per region and found again on a second run;
* ``launch(spec, zone)`` — one instance, idempotent through a client token / request id;
* ``find(deployment, region)`` — the deployment's instances, looked up by tag or label;
* ``terminate(deployment, region)`` — every instance and every network resource the deployment
  created in that region, found by tag, so it works even when the local state was lost.

A cloud's refusal reaches the orchestrator as a :class:`CloudError` whose ``scope`` says what it
blocks: ``zone`` (no capacity there: try the next zone), ``region`` (quota: skip the region),
``provider`` (credentials, permissions: skip the provider) or ``fatal`` (a request the cloud
calls malformed: stop, it will not get better elsewhere).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import ipaddress
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from advisor.errors import OperationError, UserInputError
from advisor.state import InstanceRow, ResourceRow

Scope = Literal["zone", "region", "provider", "fatal"]

#: deployment names become tags, labels, security-group and VM names on every cloud: the
#: strictest rules of the three (GCP's RFC 1035 names) apply, with room for suffixes
NAME = re.compile(r"^[a-z]([a-z0-9-]{0,38}[a-z0-9])?\Z")
TAG_DEPLOYMENT = "advisor-deployment"
TAG_VERSION = "advisor-version"
TAG_MODEL = "advisor-model"
#: the provision run (attempt) that made a resource: a failed attempt's cleanup removes only
#: what carries its own id
TAG_ATTEMPT = "advisor-attempt"

#: every cloud call's bounds: connect within CONNECT_TIMEOUT_S, a reply within READ_TIMEOUT_S,
#: at most CALL_ATTEMPTS tries (backoff between them for throttling and 5xx), so one call
#: ends within CALL_ATTEMPTS x (CONNECT_TIMEOUT_S + READ_TIMEOUT_S) = 105 s. botocore's own
#: defaults are 60 s + 60 s with 3 retries: one stalled region took 240 s (issue 33), and a
#: control-plane call (DescribeInstances, RunInstances, instances.insert) answers in seconds
#: when the endpoint is alive. ADVISOR_CLOUD_READ_TIMEOUT_S lowers the read bound (tests).
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0
CALL_ATTEMPTS = 3


def read_timeout_s() -> float:
    """READ_TIMEOUT_S, or the lower bound ADVISOR_CLOUD_READ_TIMEOUT_S asks for (0.1-30 s), and
    never past the running command's deadline (:func:`command_deadline`)."""
    import os

    raw = os.environ.get("ADVISOR_CLOUD_READ_TIMEOUT_S", "")
    try:
        asked = float(raw) if raw else READ_TIMEOUT_S
    except ValueError:
        asked = READ_TIMEOUT_S
    bound = min(READ_TIMEOUT_S, max(0.1, asked)) if asked == asked else READ_TIMEOUT_S
    left = remaining_s()
    return bound if left is None else min(bound, max(0.1, left))


F = TypeVar("F", bound=Callable[..., Any])

#: each command's overall deadline for its cloud work, seconds (README, "Deadlines"): a call
#: that would start later fails at once with DeadlineExceeded, so a command ends within its
#: deadline plus the one call in flight (at most CALL_ATTEMPTS x (CONNECT_TIMEOUT_S +
#: READ_TIMEOUT_S), its read bound cut to what is left). provision adds its --wait timeout.
#: Sized well above what the calls take when the endpoints answer (provision of one instance
#: against moto: ~5 s; against AWS, tens of seconds for the role and profile) and far below
#: what a stalled endpoint cost before any bound (240 s for ONE region's reconcile).
COMMAND_DEADLINE_S: dict[str, float] = {"provision": 600.0, "down": 300.0, "status": 120.0,
                                        "refresh": 900.0}
#: ADVISOR_DEADLINE_S replaces every command's deadline (1-86400 s; tests lower it)
DEADLINE_RANGE_S = (1.0, 86400.0)

#: the running command's (command, seconds, monotonic end), per thread and task: two threads of
#: one capacity script each run their own command under their own deadline
_deadline: contextvars.ContextVar[tuple[str, float, float] | None] = contextvars.ContextVar(
    "advisor_deadline", default=None)


def deadline_s(command: str) -> float:
    """The deadline of ``command``: ADVISOR_DEADLINE_S where set, else its own. A value that
    is not a number of seconds in :data:`DEADLINE_RANGE_S` is refused (one line, exit 2), not
    quietly replaced."""
    import os

    raw = os.environ.get("ADVISOR_DEADLINE_S", "").strip()
    if not raw:
        return COMMAND_DEADLINE_S[command]
    try:
        asked = float(raw)
    except ValueError:
        asked = float("nan")
    lo, hi = DEADLINE_RANGE_S
    if not lo <= asked <= hi:  # nan fails both
        raise UserInputError(f"ADVISOR_DEADLINE_S={raw[:40]!r} is not a number of seconds "
                             f"in {lo:g}-{hi:g}",
                             hint=f"unset it for the command's own deadline ({command}: "
                             f"{COMMAND_DEADLINE_S[command]:g} s)")
    return asked


@contextlib.contextmanager
def command_deadline(command: str, extra_s: float = 0.0) -> Iterator[None]:
    """Run the block under ``command``'s deadline (plus ``extra_s``). Nested: the inner one
    never outlives the outer (down called by provision's cleanup keeps provision's end)."""
    import time

    total = deadline_s(command) + max(0.0, extra_s)
    end = time.monotonic() + total
    outer = _deadline.get()
    if outer is not None:
        end = min(end, outer[2])
    token = _deadline.set((command, total, end))
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining_s() -> float | None:
    """Seconds left to the running command's deadline; None outside any."""
    import time

    now = _deadline.get()
    return None if now is None else now[2] - time.monotonic()


def check_deadline(provider: str) -> None:
    """Raise DeadlineExceeded (one classified line) when the running command is past its
    deadline; called before every cloud call."""
    now = _deadline.get()
    left = remaining_s()
    if now is None or left is None or left > 0:
        return
    command, total, _ = now
    raise CloudError(provider, "DeadlineExceeded",
                     f"{command} ran past its {total:.0f} s deadline (the cloud answered too "
                     "slowly)", "fatal",
                     hint="what was made is in the state file: 'advisor status --reconcile' "
                     "finds it, 'advisor down NAME' removes it; ADVISOR_DEADLINE_S sets "
                     "another deadline")


def bounded(command: str, extra: Callable[[dict[str, Any]], float] | None = None
            ) -> Callable[[F], F]:
    """Decorate an SDK entry point so it runs under ``command``'s deadline; ``extra`` maps
    its keyword arguments to seconds added (provision's --wait timeout)."""
    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            with command_deadline(command, extra(kwargs) if extra else 0.0):
                return fn(*args, **kwargs)
        return cast(F, inner)
    return deco


def default_name(model: str, instance: str) -> str:
    """A deployment name every cloud accepts, from the model and the instance type."""
    base = re.sub(r"[^a-z0-9]+", "-", f"{model.split('/')[-1]}-{instance}".lower()).strip("-")
    base = base[:40].rstrip("-")
    return base if base[:1].isalpha() else f"v-{base}"[:40].rstrip("-")


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise UserInputError(f"deployment name {name!r} is not usable on every cloud",
                             hint="use 1-40 lower-case letters, digits and '-', starting with a "
                             "letter and not ending with '-'")
    return name


def check_cidr(cidr: str) -> str:
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError as exc:
        raise UserInputError(f"{cidr!r} is not an IP range",
                             hint="give a CIDR such as 203.0.113.0/24 or 198.51.100.7/32"
                             ) from exc
    return str(net)


def is_world(cidr: str) -> bool:
    return ipaddress.ip_network(cidr, strict=False).prefixlen == 0


def opens_world(cidrs: list[str]) -> list[str]:
    """For each address family whose whole internet the ranges open together, those ranges
    joined (``0.0.0.0/1 + 128.0.0.0/1`` is the whole IPv4 internet as much as ``0.0.0.0/0``)."""
    out = []
    for version, everything in ((4, ipaddress.ip_network("0.0.0.0/0")),
                                (6, ipaddress.ip_network("::/0"))):
        mine = [c for c in cidrs if ipaddress.ip_network(c, strict=False).version == version]
        nets = [ipaddress.ip_network(c, strict=False) for c in mine]
        if any(m == everything for m in ipaddress.collapse_addresses(nets)):  # type: ignore[type-var]
            out.append(" + ".join(mine))
    return out


class LaunchSpec(BaseModel):
    """Everything a provider needs to launch one instance of a deployment."""

    model_config = ConfigDict(frozen=True)
    deployment: str
    provider: str
    instance_type: str
    region: str
    gpu_model: str
    gpu_count: int = Field(gt=0)
    vcpus: int = Field(gt=0)
    user_data: str
    #: multi-node: the workers' cloud-config (the head's address is added at launch)
    worker_user_data: str | None = None
    #: instances of one replica (head + workers), and this one's index (0: the head)
    nodes: int = Field(default=1, ge=1)
    node_index: int = Field(default=0, ge=0)
    #: the catalog's inter-node fabric of this type (efa, infiniband, gpudirect-…)
    fabric: str | None = None
    #: root/boot disk: OS, CUDA, the vLLM virtual environment and the model's weights
    disk_gib: int = Field(gt=0)
    ports: list[int]
    spot: bool = False
    #: ranges that may reach the vLLM ports; empty: nobody from outside
    allow_cidrs: list[str] = Field(default_factory=list)
    #: ranges that may reach SSH (22); empty: SSH closed
    ssh_cidrs: list[str] = Field(default_factory=list)
    #: a provider image id that overrides the GPU base image advisor looks up
    image: str | None = None
    api_key_ref: str
    #: where the instance reads its Hugging Face token (gated models); the same cloud's store
    hf_token_ref: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    #: provider-specific settings (GCP project, Azure resource group, AWS instance profile…)
    options: dict[str, str] = Field(default_factory=dict)

    @property
    def vm_name(self) -> str:
        return self.deployment if self.node_index == 0 else f"{self.deployment}-w{self.node_index}"


class CloudError(OperationError):
    """A cloud said no. ``scope`` tells the orchestrator what the refusal blocks."""

    def __init__(self, provider: str, code: str, message: str, scope: Scope,
                 hint: str | None = None, kind: str | None = None) -> None:
        self.provider = provider
        self.code = code
        self.scope: Scope = scope
        #: what it was, for the attempt summary: capacity, quota, denied or error
        self.kind = kind or {"zone": "capacity", "region": "quota",
                             "provider": "denied"}.get(scope, "error")
        self.detail = " ".join(str(message).split())
        super().__init__(f"{provider}: {code}: {self.detail}", hint)


class QuotaStatus(BaseModel):
    model_config = ConfigDict(frozen=True)
    #: False when the cloud's quota could not be read (no API, no permission): not a refusal
    checked: bool
    ok: bool = True
    detail: str = ""


def quota_status(quota: str, region: str, limit: float, used: float, need: int, unit: str,
                 instance_type: str) -> QuotaStatus:
    """Whether ``need`` more of ``unit`` fit under a quota of ``limit`` with ``used`` taken."""
    free = limit - used
    if free < need:
        return QuotaStatus(checked=True, ok=False, detail=(
            f"quota {quota} in {region} allows {limit:g} {unit}, {used:g} in use: "
            f"{instance_type} needs {need}"))
    return QuotaStatus(checked=True, detail=f"quota {quota}: {free:g} of {limit:g} {unit} free")


class Provider(Protocol):
    name: str

    def request(self, spec: LaunchSpec, zone: str | None) -> dict[str, Any]: ...

    def zones(self, spec: LaunchSpec) -> list[str | None]: ...

    def check_quota(self, spec: LaunchSpec) -> QuotaStatus: ...

    def ensure_network(self, spec: LaunchSpec) -> list[ResourceRow]: ...

    def launch(self, spec: LaunchSpec, zone: str | None) -> InstanceRow: ...

    def find(self, deployment: str, region: str) -> list[InstanceRow]: ...

    def terminate(self, deployment: str, region: str) -> list[str]: ...


class CloudProvider(Provider, Protocol):
    """Everything a cloud's backend (``clouds/<name>/compute.py``) offers: what the orchestrator
    needs (:class:`Provider`, all a test double must have) plus the seams each cloud fills —
    error classification, the read-only preflight, the boot console, the two-phase and
    per-attempt clean-up, the leftover search and the catalog facts of ``catalog refresh``.
    ``tests/sdk/test_registry.py`` checks that every registered backend has each member with
    these parameter names."""

    def classify(self, exc: BaseException) -> BaseException: ...

    def preflight(self, spec: LaunchSpec) -> list[PreflightCheck]: ...

    def preflight_plan(self, spec: LaunchSpec) -> list[PreflightCheck]: ...

    def console_output(self, instance: InstanceRow) -> str | None: ...

    def terminate_attempt(self, deployment: str, region: str, attempt: str) -> list[str]: ...

    def terminate_instances(self, deployment: str, region: str,
                            attempt: str | None = None) -> list[str]: ...

    def remove_network(self, deployment: str, region: str,
                       attempt: str | None = None) -> list[str]: ...

    def leftovers(self, deployment: str, region: str) -> list[str]: ...

    def catalog_facts(self, regions: list[str], doc: dict[str, Any]) -> list[Any]: ...


class PreflightCheck(BaseModel):
    """One check ``provision`` makes before it creates anything (issue 27).

    ``ok`` is True (passed), False (would fail: ``provision`` stops before any resource is made
    and prints ``detail`` and ``fix``) or None (could not be asked, e.g. no permission to read
    quota: said, not a refusal). In ``--dry-run`` the checks are listed, not made: ``ok`` None
    and ``detail`` says what would be asked.
    """

    model_config = ConfigDict(frozen=True)
    #: credentials | secret | secret-access | quota | image | egress | driver
    name: str
    ok: bool | None
    detail: str
    #: one line a user can act on (a command where there is one)
    fix: str | None = None
    #: what a failure blocks, where the cloud knows better than the name's default
    #: (``advisor.provisioning.PREFLIGHT_SCOPES``): an AWS SSM parameter is regional
    scope: Scope | None = None


class Preflight(Protocol):
    """Optional capability: checks before spending money (credentials, each secret reference
    exists and the instance's identity will read it, quota, the image in the region, egress)."""

    def preflight(self, spec: LaunchSpec) -> list[PreflightCheck]: ...

    def preflight_plan(self, spec: LaunchSpec) -> list[PreflightCheck]:
        """The same checks, described without any call (``provision --dry-run``)."""
        ...


class BootConsole(Protocol):
    """Optional capability: the instance's serial console as text (AWS GetConsoleOutput, GCP
    getSerialPortOutput, Azure boot diagnostics), where :mod:`advisor.bootstatus` finds the
    ``advisor-boot:`` lines. None when the cloud has nothing yet or may not be asked."""

    def console_output(self, instance: InstanceRow) -> str | None: ...


#: instance states (lower-cased, each cloud's words) of an instance that is gone or going
GONE = {"terminated", "shutting-down", "deleting", "deleted", "failed"}


def alive(instances: list[InstanceRow]) -> list[InstanceRow]:
    return [i for i in instances if i.state.lower() not in GONE]


def user_agent_labels(deployment: str, model: str) -> dict[str, str]:
    """Tags/labels every resource of a deployment carries (values safe on every cloud)."""
    from advisor._version import __version__

    model_label = re.sub(r"[^a-z0-9_-]", "-", model.lower())[:63].strip("-") or "model"
    return {TAG_DEPLOYMENT: deployment, TAG_VERSION: __version__.replace(".", "-"),
            TAG_MODEL: model_label}
