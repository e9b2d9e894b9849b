"""From a recommendation to a running instance, and back to nothing.

``provision()`` walks the candidates best first — instance type x region x zone — and launches
the first that the clouds accept. Before anything is made for a candidate, its provider's
preflight (where it has one: :class:`~advisor.clouds.base.Preflight`) is asked, read-only; a
failed check blocks what :func:`preflight_scope` says, and when every candidate was stopped so,
:class:`PreflightRefused` (exit 2) names each check and its fix. Then:

* a capacity error (no GPUs left in that zone) moves on to the next zone;
* a quota error, or a quota check that shows no room, skips the rest of that region;
* a credentials or permission error skips every candidate of that provider;
* anything else stops, because it would fail the same way everywhere.

Every attempt is recorded (state events) and returned. Nothing is left behind: when every zone
of a region fails, the security group / firewall / NSG made for it are removed again.

Idempotency: the deployment name is a tag or label on everything launched. A second
``provision`` with the same name finds what runs (by tag, even when the local state is gone)
and launches nothing; the launch calls themselves carry a client token / request id derived from
the name, type and zone.

State: the intent is written before each launch call and the instance after it, so a crash in
between is found again by ``status(reconcile=True)``.
"""

from __future__ import annotations

import functools
import math
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack, suppress
from contextvars import ContextVar
from typing import Any, Literal, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field

from advisor.catalog import Catalog
from advisor.catalog import load as load_catalog
from advisor.catalog.schema import InstanceType
from advisor.choices import KvCacheDtype
from advisor.clouds import registry
from advisor.clouds.base import (
    TAG_ATTEMPT,
    TAG_DEPLOYMENT,
    CloudError,
    LaunchSpec,
    PreflightCheck,
    Provider,
    Scope,
    alive,
    bounded,
    check_cidr,
    check_name,
    default_name,
    opens_world,
    user_agent_labels,
)
from advisor.clouds.registry import CLOUDS
from advisor.core.engine import DEFAULT_VLLM_VERSION
from advisor.core.layouts import Plan
from advisor.core.weights import Weights
from advisor.errors import OperationError, UserInputError
from advisor.state import Deployment, InstanceRow, StateWriteError, Store

#: OS, CUDA libraries, the vLLM virtual environment and the Hugging Face cache besides weights
DISK_OVERHEAD_GIB = 60
MIN_DISK_GIB = 100

Outcome = Literal["launched", "exists", "capacity", "quota", "skipped", "denied", "error",
                  "not offered", "refused"]

#: what a failed preflight check blocks, by its name (a check's own ``scope`` overrides it):
#: credentials and secrets are the account's (every candidate of the cloud fails alike), quota,
#: image, egress and driver the region's. Changing one changes which candidates are tried next.
PREFLIGHT_SCOPES: dict[str, Scope] = {
    "credentials": "provider", "secret": "provider", "secret-access": "provider",
    "quota": "region", "image": "region", "egress": "region", "driver": "region"}
_WIDTH = {"zone": 0, "region": 1, "provider": 2, "fatal": 3}


def preflight_scope(check: PreflightCheck) -> Scope:
    """What a failed check blocks: its own scope, else :data:`PREFLIGHT_SCOPES`, else fatal."""
    return check.scope or PREFLIGHT_SCOPES.get(check.name, "fatal")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a launch: ``name`` is the deployment whose instance may be running."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class PreflightRefused(UserInputError):
    """Every candidate was stopped by its preflight: nothing was created, and each failed check
    says what to fix (exit 2: the user's to fix). ``checks``: (where, check) per failure."""

    def __init__(self, checks: list[tuple[str, PreflightCheck]]) -> None:
        self.checks = checks
        what = "; ".join(f"{where}: {c.name}: {c.detail}" for where, c in checks)
        fixes = list(dict.fromkeys(c.fix for _w, c in checks if c.fix))
        super().__init__(f"preflight: {len(checks)} check(s) failed, nothing was created: "
                         f"{what}", hint="; ".join(fixes) or None)


class Attempt(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance_type: str
    region: str
    zone: str | None = None
    outcome: Outcome
    code: str = ""
    detail: str = ""


class Candidate(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    instance_type: str
    region: str
    tp: int
    replicas: int
    #: instances the replica spans (head + workers)
    nodes: int = 1
    usd_per_hour: float | None
    spec: LaunchSpec


class ProvisionResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    status: Literal["launched", "exists", "dry-run"]
    provider: str | None = None
    instance_type: str | None = None
    region: str | None = None
    zone: str | None = None
    usd_per_hour: float | None = None
    #: instances one replica spans (head first)
    nodes: int = 1
    instances: list[InstanceRow] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    #: --dry-run: per candidate, the exact calls and bodies that would be sent
    requests: list[dict[str, Any]] = Field(default_factory=list)
    #: per candidate tried (--dry-run: listed): {provider, instance_type, region, checks}
    preflight: list[dict[str, Any]] = Field(default_factory=list)
    user_data: str | None = None
    warnings: list[str] = Field(default_factory=list)
    health: str | None = None


class DownResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    removed: list[str]
    regions: list[str]
    #: provider:region for every place searched by tag
    searched: list[str] = Field(default_factory=list)
    #: places that could not be asked (provider:region: why) — no credentials, no SDK, a
    #: permission denied: whatever runs there is still running
    not_searched: list[str] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def complete(self) -> bool:
        """Every place was asked: "removed nothing" then means nothing was there."""
        return not self.not_searched


ProviderSource = Mapping[str, Provider] | Callable[[str], Provider] | None


def _provider(source: ProviderSource, name: str, options: Mapping[str, Any]) -> Provider:
    if source is None:
        from advisor.clouds.registry import get

        return get(name, **dict(options))
    if isinstance(source, Mapping):
        if name not in source:
            raise UserInputError(f"no backend for provider {name!r}")
        return source[name]
    return source(name)


def disk_gib(weights_total_gib: float) -> int:
    return max(MIN_DISK_GIB, int(math.ceil((weights_total_gib + DISK_OVERHEAD_GIB) / 10) * 10))


# -- candidates -------------------------------------------------------------------------------
class Question(BaseModel):
    """What recommend is asked when provision or render picks (or checks) the instance."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    max_tpot_ms: float | None = None
    max_ttft_ms: float | None = None
    batch: bool = False
    allow_small_host: bool = False
    #: the weights to serve (advisor.core.weights: none, fp8, auto)
    quantization: str | None = None
    #: vLLM's --kv-cache-dtype: ranked with it and passed to the server
    kv_cache_dtype: KvCacheDtype = "auto"
    #: vLLM's --cpu-offload-gb, GiB per GPU: ranked with it and passed to the server
    cpu_offload_gb: float = Field(default=0.0, ge=0, le=4096, allow_inf_nan=False)
    #: vLLM's --enable-expert-parallel (None: only where TP cannot split the experts); the
    #: layout carries it to the server
    expert_parallel: bool | None = None


def candidates(model: str, ctx: int, *, catalog: Catalog, provider: str | None = None,
               instance: str | None = None, regions: list[str] | None = None,
               spot: bool = False, max_types: int = 3, vllm_version: str | None = None,
               question: Question | None = None
               ) -> list[tuple[InstanceType, Plan, str, float | None, float, Weights | None]]:
    """(instance type, layout, region, $/h per instance, weights GiB in all, the weights it
    assumes: ``question.quantization``), best first.

    ``question`` holds the same inputs as ``advisor recommend`` (latency targets, ``batch``,
    ``allow_small_host``): the pick is the one recommend would put first, never a
    saturated-economics one by surprise."""
    from advisor.api import recommend, recommend_named
    from advisor.core import deploy

    regions = regions or []
    q = (question or Question()).model_dump()
    from advisor.catalog.schema import REGION

    for r in regions:
        if not REGION.match(r):
            raise UserInputError(f"--region {r!r} is not a region name",
                                 hint="use the cloud's own name, e.g. us-east-1, us-central1, "
                                 "eastus")
    providers = [provider] if provider else list(CLOUDS)
    if instance is not None:
        inst = catalog.instance(instance)
        if inst.provider not in CLOUDS:
            raise UserInputError(f"{inst.key} is not on a cloud advisor can provision",
                                 hint="use 'advisor render' for private machines")
        deploy.require(inst, catalog)  # an AMD GPU: CUDA vLLM only, before any cloud call
        # the layout does not depend on the price: rank on-demand, so that a type without a
        # spot price in the catalog can still be launched as spot when the user names it
        named = recommend_named(model, ctx, inst, catalog=catalog, vllm_version=vllm_version,
                                **q)
        usd = inst.price.spot_usd_per_hour if spot else named.usd_per_hour
        picks = [(inst, named.model_copy(update={"usd_per_hour": usd}))]
    else:
        # ranked on the asked regions' own prices (what `recommend --region` shows)
        recs = recommend(model, ctx, catalog=catalog, providers=providers, spot=spot,
                         regions=regions or None, vllm_version=vllm_version, **q)
        # never a type advisor cannot deploy, not even as a fallback (the ranking puts those
        # last; where they are all that is left, the refusal says why)
        ok = [r for r in recs if r.deployable]
        if not ok:
            deploy.require(catalog.instance(f"{recs[0].provider}:{recs[0].instance}"), catalog)
        picks = [(catalog.instance(f"{r.provider}:{r.instance}"), r) for r in ok[:max_types]]
    out = []
    for inst, rec in picks:
        offered = inst.regions or ([inst.price.region] if inst.price.region else [])
        wanted = regions or ([rec.region] if rec.region else offered[:1])
        weights = rec.fit.weights_gib * rec.plan.tp * rec.plan.pp
        for region in wanted:
            # each region at its own price; a region the catalog does not price gets none
            # (never another region's)
            row = inst.price_in([region], spot)
            usd = row.usd(spot) if row is not None else None
            out.append((inst, rec.plan, region, usd, weights, rec.weights))
    return out


def build_spec(inst: InstanceType, plan: Plan, region: str, *, name: str, model_repo: str,
               model_label: str, ctx: int, catalog: Catalog, weights_gib: float,
               vllm_version: str, port: int, api_key_ref: str, allow_cidrs: list[str],
               hf_token_ref: str | None = None,
               ssh_cidrs: list[str], spot: bool, image: str | None,
               options: Mapping[str, str], gpu_memory_utilization: float = 0.9,
               quantization: str | None = None, kv_cache_dtype: str = "auto",
               cpu_offload_gib: float = 0.0) -> LaunchSpec:
    from advisor.render.cloudinit import RenderRequest, render, start_timeout_s
    from advisor.render.envlock import image_python

    # reachable from outside only when a range was opened for it; the firewall still decides
    host = "0.0.0.0" if allow_cidrs else "127.0.0.1"
    files = render(inst, plan, RenderRequest(
        model=model_repo, max_model_len=ctx, vllm_version=vllm_version, port=port, host=host,
        api_key_ref=api_key_ref, gpu_memory_utilization=gpu_memory_utilization,
        hf_token_ref=hf_token_ref, start_timeout_s=start_timeout_s(weights_gib / plan.nodes),
        python=image_python(inst.provider),
        quantization="fp8" if quantization == "fp8" else None,
        kv_cache_dtype=None if kv_cache_dtype == "auto" else kv_cache_dtype,
        cpu_offload_gib=cpu_offload_gib))
    return LaunchSpec(
        deployment=name, provider=inst.provider, instance_type=inst.name, region=region,
        gpu_model=inst.gpu.model, gpu_count=inst.gpu.count, vcpus=inst.vcpus,
        user_data=files["user-data"], worker_user_data=files.get("worker/user-data"),
        nodes=plan.nodes, fabric=inst.fabric.kind if inst.fabric else None,
        disk_gib=disk_gib(weights_gib),
        ports=[port + i for i in range(plan.replicas)], spot=spot,
        allow_cidrs=allow_cidrs, ssh_cidrs=ssh_cidrs, image=image, api_key_ref=api_key_ref,
        hf_token_ref=hf_token_ref,
        labels=user_agent_labels(name, model_label), options=dict(options))


# -- one launcher per name ----------------------------------------------------------------------
_P = ParamSpec("_P")
_R = TypeVar("_R")
#: the leases the running provision()/down() holds, released when it returns or raises
_leases: ContextVar[ExitStack | None] = ContextVar("advisor_leases", default=None)


def _one_at_a_time(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Whatever ``fn`` takes with :func:`_hold` is released when it returns or raises."""
    @functools.wraps(fn)
    def held(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with ExitStack() as stack:
            token = _leases.set(stack)
            try:
                return fn(*args, **kwargs)
            finally:
                _leases.reset(token)

    return held


def _hold(st: Store, name: str, purpose: str) -> None:
    """The deployment's lease, or a one-line refusal (exit 2) when another advisor process holds
    it: two launches of one name would make two instances, or remove each other's firewall."""
    stack = _leases.get()
    assert stack is not None, "_hold outside an @_one_at_a_time function"
    stack.enter_context(st.acquire(name, purpose=purpose))


# -- provision --------------------------------------------------------------------------------
@bounded("provision", lambda kw: float(kw.get("wait_timeout_s", 900)) if kw.get("wait") else 0.0)
@_one_at_a_time
def provision(model: str, ctx: int, *, provider: str | None = None,
              instance: str | None = None, regions: list[str] | None = None,
              name: str | None = None, spot: bool = False,
              allow_cidrs: list[str] | None = None, ssh_cidrs: list[str] | None = None,
              api_key_ref: str | None = None, hf_token_ref: str | None = None,
              image: str | None = None, port: int = 8000,
              vllm_version: str | None = None, dry_run: bool = False,
              wait: bool = False, wait_timeout_s: float = 900,
              confirm: Callable[[str], bool] | None = None,
              progress: Callable[[str], None] | None = None,
              catalog: Catalog | None = None, store: Store | None = None,
              backends: ProviderSource = None,
              provider_options: Mapping[str, Mapping[str, str]] | None = None,
              max_types: int = 3, question: Question | None = None) -> ProvisionResult:
    """Launch ``model`` at ``ctx`` on the best instance that a cloud will give.

    The instance is the one ``advisor recommend`` puts first for the same ``question`` (latency
    targets, ``batch``, ``allow_small_host``; default: the interactive targets); a named
    ``instance`` is checked against the same question.

    ``confirm(summary)`` is asked once before anything is created (return False to stop);
    ``progress(line)`` hears about every step. With ``dry_run`` nothing is called: the result
    holds the exact requests and the user-data.
    """
    from advisor.api import check_fields

    check_fields({"model": model, "ctx": ctx, "vllm_version": vllm_version})
    if question is not None:
        check_fields(question.model_dump())
    say = progress or (lambda _m: None)
    vllm_version = vllm_version or DEFAULT_VLLM_VERSION  # None: the release advisor pins
    cat = catalog or load_catalog()
    allow = [check_cidr(c) for c in allow_cidrs or []]
    ssh = [check_cidr(c) for c in ssh_cidrs or []]
    warnings = [f"{r} {'open' if ' + ' in r else 'opens'} the vLLM port(s) to the whole "
                "internet (the API key still guards them)" for r in opens_world(allow)]
    warnings += [f"{r} {'open' if ' + ' in r else 'opens'} SSH to the whole internet"
                 for r in opens_world(ssh)]
    if provider is not None:
        registry.info(provider)  # NotFoundError naming the clouds
    # the cloud a named instance belongs to binds the same way --provider does (the SDK path
    # as well as the CLI: a gcp-secret: reference is never handed to an AWS instance)
    target = provider or (instance.split(":", 1)[0] if instance and ":" in instance else None)
    if target is not None and target not in registry.CLOUDS:
        target = None
    for flag, ref in (("--api-key-ref", api_key_ref), ("--hf-token-ref", hf_token_ref)):
        if ref is None:
            continue
        from advisor.render.cloudinit import check_value

        check_value("api_key_ref", ref)
        owner = registry.key_ref_cloud(ref)
        if target is not None and owner not in (None, target):
            scheme = registry.info(target).key_scheme
            example = scheme.example if flag == "--api-key-ref" else scheme.token_example
            raise UserInputError(f"{flag} {ref!r} is read from {owner}'s secret store, but the "
                                 f"deployment goes to {target}", hint=f"use {example}")
    if image is not None:
        registry.check_image(image, target)
    for cloud, given in (provider_options or {}).items():
        known = {o.key: o for o in registry.info(cloud).options}
        for key, value in given.items():
            if key not in known:
                raise UserInputError(f"{cloud} has no provider option {key!r}",
                                     hint="options: " + ", ".join(sorted(known)))
            known[key].check(value)
    from advisor.api import require_loadable, require_token
    from advisor.core import deploy

    if instance is not None:  # an AMD type is refused first: no token or flag would help it
        deploy.require(cat.instance(instance), cat)
    require_token(cat, model, hf_token_ref)
    require_loadable(cat, model, vllm_version)
    picks = candidates(model, ctx, catalog=cat, provider=provider, instance=instance,
                       regions=regions, spot=spot, max_types=max_types,
                       vllm_version=vllm_version, question=question)
    from advisor.api import model_config

    alias, _ = model_config(model, catalog=cat)
    repo = cat.models[alias].hf_id if alias in cat.models else model
    name = check_name(name or default_name(alias, picks[0][0].name))
    opts = provider_options or {}
    cands: list[Candidate] = []
    no_ref: set[str] = set()
    rerouted: set[str] = set()
    from advisor.render.envlock import check_pairing

    asked = question or Question()
    for inst, plan, region, usd, weights, chosen in picks:
        # each cloud reads the key from its own secret store: a reference of another cloud is
        # never handed on (an Azure VM cannot read an SSM parameter)
        refs = registry.secret_refs(inst.provider, api_key_ref, hf_token_ref)
        if refs is None:
            no_ref.add(inst.provider)
            continue
        ref, token = refs
        if api_key_ref is not None and ref != api_key_ref and inst.provider not in rerouted:
            rerouted.add(inst.provider)
            warnings.append(f"{inst.provider} candidates read the API key from {ref} "
                            f"({api_key_ref} is another cloud's secret store)")
        # the image's driver must run the lock's CUDA, and its Python have a lock: refused
        # here, before any call; a --image of the user's own is only warned about
        pairing = check_pairing(inst.provider, image, vllm_version)
        if pairing and pairing not in warnings:
            warnings.append(pairing)
        spec = build_spec(inst, plan, region, name=name,
                          model_repo=chosen.checkpoint if chosen and chosen.checkpoint else repo,
                          quantization=chosen.vllm_quantization if chosen else None,
                          kv_cache_dtype=asked.kv_cache_dtype,
                          cpu_offload_gib=asked.cpu_offload_gb,
                          model_label=alias,
                          ctx=ctx, catalog=cat, weights_gib=weights, vllm_version=vllm_version,
                          port=port, api_key_ref=ref, hf_token_ref=token,
                          allow_cidrs=allow, ssh_cidrs=ssh,
                          spot=spot, image=image, options=opts.get(inst.provider, {}))
        cands.append(Candidate(provider=inst.provider, instance_type=inst.name, region=region,
                               tp=plan.tp, replicas=plan.replicas, nodes=plan.nodes,
                               usd_per_hour=usd, spec=spec))

    if not cands:
        example = registry.info(picks[0][0].provider).key_scheme.example
        raise UserInputError(f"no candidate can read its secrets: --api-key-ref/--hf-token-ref "
                             f"name no secret that {picks[0][0].provider} can read",
                             hint=f"e.g. --api-key-ref {example}")
    for cloud in sorted(no_ref):
        warnings.append(f"{cloud} candidates skipped: --api-key-ref/--hf-token-ref name no "
                        f"secret that {cloud} can read (e.g. "
                        f"{registry.info(cloud).key_scheme.example})")
    if dry_run:
        reqs = []
        plans = []
        for c in cands:
            p = _provider(backends, c.provider, opts.get(c.provider, {}))
            reqs.append(p.request(c.spec, None))
            listed = getattr(p, "preflight_plan", None)
            if listed is not None:
                plans.append(_checks_of(c, listed(c.spec)))
        return ProvisionResult(name=name, status="dry-run", provider=cands[0].provider,
                               instance_type=cands[0].instance_type, region=cands[0].region,
                               usd_per_hour=cands[0].usd_per_hour, requests=reqs,
                               preflight=plans,
                               user_data=cands[0].spec.user_data, warnings=warnings)

    # every resource this run makes carries its attempt id besides the deployment's name
    attempt_id = uuid.uuid4().hex[:12]
    cands = [c.model_copy(update={"spec": c.spec.model_copy(update={
        "labels": {**c.spec.labels, TAG_ATTEMPT: attempt_id}})}) for c in cands]
    st = store or Store()
    _hold(st, name, "launched")
    existing = _existing(st, name, backends, opts, cands, say, alias, ctx)
    if existing is not None:
        return existing.model_copy(update={"warnings": warnings})

    first = cands[0]
    count = f"{first.nodes} x " if first.nodes > 1 else ""
    summary = (f"launch {count}{first.provider}:{first.instance_type} in {first.region} as "
               f"{name!r}"
               + (f" at ${first.usd_per_hour * first.nodes:.2f}/h" if first.usd_per_hour else "")
               + (f" (then up to {len(cands) - 1} fallback(s))" if len(cands) > 1 else ""))
    if confirm is not None and not confirm(summary):
        raise UserInputError("nothing launched: not confirmed", hint="pass --yes to skip the "
                             "question")
    # provider options (GCP project, Azure resource group) are kept: status and down need them
    st.begin(name, first.provider, alias, ctx, {
        "model": repo, "vllm_version": vllm_version, "port": port,
        "api_key_ref": first.spec.api_key_ref,
        "options": {c.provider: dict(c.spec.options) for c in cands},
        # status reads the replicas a boot report should count from here
        "plans": {f"{c.provider}:{c.instance_type}": {"tp": c.tp, "replicas": c.replicas,
                                                      "nodes": c.nodes} for c in cands}})
    attempts: list[Attempt] = []
    blocked_providers: set[str] = set()
    refusals: list[tuple[str, PreflightCheck]] = []
    checked: list[dict[str, Any]] = []
    stopped = 0  # candidates their preflight stopped (one attempt each)

    def note(a: Attempt) -> None:
        attempts.append(a)
        st.event(name, "attempt", f"{a.provider}:{a.instance_type} {a.zone or a.region}: "
                 f"{a.outcome} {a.code}".strip(), a.model_dump())
        say(f"{a.provider}:{a.instance_type} in {a.zone or a.region}: {a.outcome}"
            + (f" ({a.code})" if a.code else ""))

    try:
        for c in cands:
            base = {"provider": c.provider, "instance_type": c.instance_type, "region": c.region}
            if c.provider in blocked_providers:
                note(Attempt(**base, outcome="skipped", detail="provider refused earlier"))
                continue
            p = _provider(backends, c.provider, opts.get(c.provider, {}))
            try:
                checks = _preflight(p, c, say)
                if checks is not None:
                    checked.append(_checks_of(c, checks))
                    warnings += [w for w in _unchecked(c, checks) if w not in warnings]
                    bad = [x for x in checks if x.ok is False]
                    if bad:
                        scope = max((preflight_scope(x) for x in bad), key=_WIDTH.__getitem__)
                        where = f"{c.provider}:{c.instance_type} {c.region}"
                        refusals += [(where, x) for x in bad]
                        stopped += 1
                        quota_only = all(x.name == "quota" for x in bad)  # as the launch says it
                        note(Attempt(**base, outcome="quota" if quota_only else "refused",
                                     code="QuotaCheck" if quota_only else
                                     "preflight:" + ",".join(x.name for x in bad),
                                     detail="; ".join(x.detail for x in bad)))
                        if scope == "fatal":
                            _fail(st, name, attempts)
                            raise PreflightRefused(refusals)
                        if scope == "provider":
                            blocked_providers.add(c.provider)
                        continue
                quota_known = checks is not None and any(x.name == "quota" for x in checks)
                launched = _launch_in_region(p, c, st, note, say, quota_known)
            except CloudError as err:
                if err.scope == "provider":
                    blocked_providers.add(c.provider)
                    note(Attempt(**base, outcome="denied", code=err.code, detail=err.detail))
                    continue
                if err.scope in ("region", "zone"):
                    note(Attempt(**base, outcome=_outcome(err), code=err.code, detail=err.detail))
                    continue
                _fail(st, name, attempts)
                raise
            if launched is None:
                continue
            # what the backend wants the user to know (an access it could not grant, egress it
            # does not provide)
            warnings += [n for n in getattr(p, "notes", []) if n not in warnings]
            result = ProvisionResult(name=name, status="launched", provider=c.provider,
                                     instance_type=c.instance_type, region=c.region,
                                     zone=launched[0].zone, usd_per_hour=c.usd_per_hour,
                                     instances=launched, nodes=c.nodes,
                                     attempts=attempts, warnings=warnings,
                                     preflight=checked, user_data=None)
            if wait:
                result = _wait(p, c, result, st, wait_timeout_s, say)
            return result
        _fail(st, name, attempts)
        if stopped and stopped == sum(1 for a in attempts if a.outcome != "skipped"):
            raise PreflightRefused(refusals)  # nothing reached the clouds' capacity: the user's fix
        raise OperationError(
            f"no candidate could be launched: {summarise(attempts)}",
            hint="try other regions (--region), another instance (--instance), --spot, or ask the "
            "provider for more quota; 'advisor status " + name + "' lists every attempt")
    except KeyboardInterrupt as exc:
        # Ctrl-C after the intent: whatever a launch call made carries the deployment's tag;
        # the state keeps the record (status "launching") and the user is told how to find it
        with suppress(Exception):
            st.event(name, "interrupted", "interrupted during the launch; an instance may run")
        raise Interrupted(name) from exc


def _preflight(p: Provider, c: Candidate, say: Callable[[str], None]
               ) -> list[PreflightCheck] | None:
    """The provider's checks before anything is made for ``c`` (None: it has none)."""
    check = getattr(p, "preflight", None)
    if check is None:
        return None
    say(f"{c.provider} {c.region}: preflight (credentials, secrets, quota, image, egress)")
    checks: list[PreflightCheck] = check(c.spec)
    return checks


def _checks_of(c: Candidate, checks: list[PreflightCheck]) -> dict[str, Any]:
    return {"provider": c.provider, "instance_type": c.instance_type, "region": c.region,
            "checks": [x.model_dump() for x in checks]}


def _unchecked(c: Candidate, checks: list[PreflightCheck]) -> list[str]:
    return [f"{c.provider} {c.region}: {x.name} not checked: {x.detail}" for x in checks
            if x.ok is None]


def _outcome(err: CloudError) -> Outcome:
    return {"capacity": "capacity", "quota": "quota", "denied": "denied"}.get(  # type: ignore[return-value]
        err.kind, "error")


def summarise(attempts: list[Attempt]) -> str:
    return "; ".join(f"{a.provider}:{a.instance_type} {a.zone or a.region} {a.outcome}"
                     + (f" ({a.code})" if a.code else "") for a in attempts) or "none tried"


def _fail(st: Store, name: str, attempts: list[Attempt]) -> None:
    st.set_status(name, "failed", f"every attempt failed: {summarise(attempts)}")


def _existing(st: Store, name: str, backends: ProviderSource,
              opts: Mapping[str, Mapping[str, str]], cands: list[Candidate],
              say: Callable[[str], None], model: str, ctx: int) -> ProvisionResult | None:
    """What already runs under ``name``: from the state file, else by tag in the candidates'
    regions (a lost state file must not lead to a second instance)."""
    dep = st.get(name)
    places: list[tuple[str, str]] = []
    if dep is not None and dep.status in ("launching", "running") and dep.region:
        places.append((dep.provider, dep.region))
    places += [(c.provider, c.region) for c in cands if (c.provider, c.region) not in places]
    for prov, region in places:
        try:
            found = alive(_provider(backends, prov, opts.get(prov, {})).find(name, region))
        except CloudError:
            continue  # that cloud cannot be asked now; launching there will say why
        if found:
            say(f"{name} already runs in {region}: {', '.join(i.id for i in found)}")
            if dep is None:
                st.begin(name, prov, model, ctx, {})
            for i in found:
                st.record_instance(name, i)
            st.event(name, "exists", "provision found the deployment running; launched nothing")
            return ProvisionResult(name=name, status="exists", provider=prov,
                                   instance_type=found[0].instance_type, region=region,
                                   zone=found[0].zone, instances=found)
    return None


def _launch_group(p: Provider, c: Candidate, st: Store, zone: str | None,
                  say: Callable[[str], None]) -> list[InstanceRow]:
    """The head (or the only instance), then the workers with the head's address, one zone."""
    from advisor.render.cloudinit import with_ray_head

    st.intent(c.spec.deployment, c.provider, c.instance_type, c.region, zone)
    say(f"launching {c.instance_type} in {zone or c.region}"
        + (f" (head of {c.nodes})" if c.nodes > 1 else ""))
    head_labels = {**c.spec.labels, "advisor-role": "head"} if c.nodes > 1 else c.spec.labels
    head = p.launch(c.spec.model_copy(update={"labels": head_labels}), zone)
    st.record_instance(c.spec.deployment, head)
    group = [head]
    if c.nodes > 1:
        if not head.private_ip or c.spec.worker_user_data is None:
            raise CloudError(c.provider, "NoHeadAddress", f"the head {head.id} has no private "
                             "address for the workers to join", "fatal")
        user_data = with_ray_head(c.spec.worker_user_data, head.private_ip)
        for k in range(1, c.nodes):
            wspec = c.spec.model_copy(update={
                "node_index": k, "user_data": user_data,
                "labels": {**c.spec.labels, "advisor-role": "worker"}})
            st.intent(c.spec.deployment, c.provider, c.instance_type, c.region, zone)
            say(f"launching worker {k} of {c.nodes - 1} in {zone or c.region}")
            w = p.launch(wspec, zone)
            st.record_instance(c.spec.deployment, w)
            group.append(w)
    return group


def _launch_in_region(p: Provider, c: Candidate, st: Store, note: Callable[[Attempt], None],
                      say: Callable[[str], None], quota_known: bool = False
                      ) -> list[InstanceRow] | None:
    """``quota_known``: the preflight read the quota already (and let it pass)."""
    base = {"provider": c.provider, "instance_type": c.instance_type, "region": c.region}
    if not quota_known:
        quota = p.check_quota(c.spec)
        if quota.checked and not quota.ok:
            note(Attempt(**base, outcome="quota", code="QuotaCheck", detail=quota.detail))
            return None
        if quota.detail:
            say(f"{c.provider} {c.region}: {quota.detail}")
    zones = p.zones(c.spec)
    if not zones:
        note(Attempt(**base, outcome="not offered",
                     detail=f"{c.instance_type} is not offered in {c.region}"))
        return None
    # the intent names the region and the tags before anything is made there: a crash inside
    # ensure_network leaves a record that status --reconcile and down search by tag
    st.event(c.spec.deployment, "intent-region", f"prepare {c.provider} {c.region} "
             f"(tag {TAG_DEPLOYMENT}={c.spec.deployment}, attempt {_attempt(c)})",
             {"provider": c.provider, "region": c.region, "instance_type": c.instance_type,
              "tag": f"{TAG_DEPLOYMENT}={c.spec.deployment}", "attempt": _attempt(c)})
    say(f"{c.provider} {c.region}: preparing the firewall")

    def prepare() -> None:
        for r in p.ensure_network(c.spec):
            st.record_resource(c.spec.deployment, r)

    try:
        prepare()
        for zone in zones:
            try:
                group = _launch_group(p, c, st, zone, say)
            except CloudError as err:
                if err.scope == "zone":
                    note(Attempt(**base, zone=zone, outcome="capacity", code=err.code,
                                 detail=err.detail))
                    if c.nodes > 1:  # a half-made group is removed, the next zone starts clean
                        _cleanup(p, c, st, say, force=True)
                        prepare()
                    continue
                if err.scope == "region":
                    note(Attempt(**base, zone=zone, outcome=_outcome(err), code=err.code,
                                 detail=err.detail))
                    break
                raise
            note(Attempt(**base, zone=zone, outcome="launched",
                         detail=", ".join(i.id for i in group)))
            return group
    except BaseException as exc:
        _cleanup(p, c, st, say)
        if isinstance(exc, CloudError) and exc.hint and "NAME" in exc.hint:
            # the classifier does not know the deployment: name it in the commands it gives
            exc.hint = exc.hint.replace("NAME", c.spec.deployment)
        raise
    _cleanup(p, c, st, say)
    return None


def _cleanup(p: Provider, c: Candidate, st: Store, say: Callable[[str], None],
             force: bool = False) -> None:
    """Remove what was made for a region where nothing was launched (found by tag: a
    half-finished ``ensure_network`` returns no list, but what it made carries the tags).
    ``force``: also the instances of a multi-node group that could not be completed."""
    try:
        if not force and alive(p.find(c.spec.deployment, c.region)):
            return  # something runs there after all (a crash before the state write)
        own = getattr(p, "terminate_attempt", None)
        if own is not None and _attempt(c):
            own(c.spec.deployment, c.region, _attempt(c))  # only what this attempt made
        else:
            p.terminate(c.spec.deployment, c.region)
        if force:
            st.set_instances_state(c.spec.deployment, "terminated")
        st.forget_resources(c.spec.deployment, c.region)
        say(f"{c.provider} {c.region}: removed the firewall made for this attempt")
    except Exception as exc:  # keep the original error; the resources stay in the state file
        st.event(c.spec.deployment, "cleanup-failed", f"{c.region}: {exc}")


def _attempt(c: Candidate) -> str:
    return c.spec.labels.get(TAG_ATTEMPT, "")


def _wait(p: Provider, c: Candidate, result: ProvisionResult, st: Store, timeout_s: float,
          say: Callable[[str], None], clock: Callable[[], float] = time.monotonic
          ) -> ProvisionResult:
    deadline = clock() + timeout_s
    inst = result.instances[0]
    while clock() < deadline:
        found = [i for i in p.find(c.spec.deployment, c.region) if i.id == inst.id]
        if found:
            inst = found[0]
            if inst.state.lower() in ("running", "succeeded"):
                break
        say(f"{inst.id}: {inst.state}")
        time.sleep(min(5.0, max(0.0, deadline - clock())))
    st.record_instance(c.spec.deployment, inst)
    health = None
    if inst.state.lower() not in ("running", "succeeded"):
        health = f"not running after {timeout_s:.0f} s (state {inst.state})"
    elif c.spec.allow_cidrs and inst.public_ip:
        health = _health(f"http://{inst.public_ip}:{c.spec.ports[0]}/health", deadline, clock)
    else:
        health = ("running; vLLM listens on 127.0.0.1 on the instance (no --allow-cidr), so "
                  "/health is checked there by the unit's ExecStartPost")
    return result.model_copy(update={"instances": [inst], "health": health})


def _health(url: str, deadline: float, clock: Callable[[], float]) -> str:
    last = ""
    while clock() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 (http on purpose)
                if r.status == 200:
                    return f"{url} answers 200"
        except OSError as exc:
            last = str(exc)
        time.sleep(min(10.0, max(0.0, deadline - clock())))
    return f"{url} did not answer before the deadline ({last or 'no answer'})"


# -- status and down --------------------------------------------------------------------------
@bounded("status")
def status(name: str | None = None, *, reconcile: bool = False, store: Store | None = None,
           backends: ProviderSource = None,
           provider_options: Mapping[str, Mapping[str, str]] | None = None
           ) -> list[Deployment]:
    """The deployments advisor knows (or one). ``reconcile`` asks the clouds, by tag, what runs
    for each — in every region its intents name — and writes that down: a crash between a
    launch and its state write is healed."""
    st = store or Store()
    deps = [st.require(name)] if name else st.all()
    if not reconcile:
        return deps
    opts = provider_options or {}
    out = []
    for dep in deps:
        if dep.status == "down":
            out.append(dep)
            continue
        found: list[InstanceRow] = []
        clouds: dict[str, Provider] = {}
        for prov, region in _places(st, dep):
            if prov not in clouds:
                clouds[prov] = _provider(backends, prov, _options_for(dep, opts, prov))
            found += clouds[prov].find(dep.name, region)
        live = alive(found)
        known = {i.id for i in dep.instances}
        for i in found:
            st.record_instance(dep.name, i, status="running")
        for i in dep.instances:
            if i.id not in {f.id for f in found}:
                st.event(dep.name, "reconcile", f"{i.id} no longer exists")
        if live:
            new = [i.id for i in live if i.id not in known]
            st.set_status(dep.name, "running", "reconciled: " + ", ".join(
                f"{i.id} {i.state}" for i in live) + (f" (found by tag: {', '.join(new)})"
                                                      if new else ""))
        elif dep.status in ("launching", "running"):
            st.set_instances_state(dep.name, "terminated")
            if _down_was_asked(st, dep.name):  # a down whose last state write failed
                st.forget_resources(dep.name)
                st.set_status(dep.name, "down", "reconciled: nothing runs; the last 'advisor "
                              "down' removed it")
            else:
                st.set_status(dep.name, "failed", "reconciled: nothing runs for this deployment")
        out.append(st.require(dep.name))
    return out


def boot_status(dep: Deployment, *, backends: ProviderSource = None,
                provider_options: Mapping[str, Mapping[str, str]] | None = None,
                now: float | None = None) -> str | None:
    """What the deployment's instances say about their first boot (:mod:`advisor.bootstatus`,
    read from each instance's serial console): ``booting: install vllm (4 min)``, ``serving``,
    ``serving 1 of 2 replicas``, ``failed: install vllm (exit 1): <last line>``.

    None where there is nothing to read: a deployment that is not ``running`` at the cloud
    level, or a cloud without :class:`~advisor.clouds.base.BootConsole`. Read-only, and it
    never raises: whatever goes wrong is ``unknown (<reason>)``. A failed boot leaves the
    deployment ``running`` (the instance is up and billed); only this phrase says it failed.
    """
    from advisor import bootstatus

    if dep.status != "running":
        return None
    instances = alive(dep.instances)
    if not instances:
        return None
    plan = (dep.spec.get("plans") or {}).get(f"{dep.provider}:{dep.instance_type}") or {}
    replicas = plan.get("replicas") if isinstance(plan.get("replicas"), int) else None
    opts = provider_options or {}
    phrases: list[tuple[str, str]] = []
    clouds: dict[str, Any] = {}
    for inst in instances:
        try:
            prov = inst.provider or dep.provider
            if prov not in clouds:
                clouds[prov] = _provider(backends, prov, _options_for(dep, opts, prov))
            read = getattr(clouds[prov], "console_output", None)
            if read is None:
                return None  # this cloud offers no console to read
            text = read(inst)
        except Exception as exc:  # never fails status: said instead
            why = " ".join(str(exc).split())[:160] or type(exc).__name__
            return f"unknown ({inst.id}: {why})" if len(instances) > 1 else f"unknown ({why})"
        phrase = bootstatus.describe(bootstatus.parse(text or ""),
                                     now=time.time() if now is None else now,
                                     replicas=replicas)
        phrases.append((inst.id, phrase))
    failed = [(i, ph) for i, ph in phrases if boot_failed(ph)]
    if failed:
        i, ph = failed[0]
        return ph if len(phrases) == 1 else f"{ph} (on {i})"
    return phrases[0][1]  # the head's: its replicas report there


def boot_failed(phrase: str | None) -> bool:
    """Whether a :func:`boot_status` phrase says the boot failed (``advisor status`` exits 1)."""
    return bool(phrase) and str(phrase).startswith("failed")


def _down_was_asked(st: Store, name: str) -> bool:
    """The latest begin (launch), down-intent or down-incomplete of ``name`` is a down-intent:
    a down that removed everything and then could not write it down."""
    last = [e.kind for e in st.events(name)
            if e.kind in ("begin", "down-intent", "down-incomplete")]
    return bool(last) and last[-1] == "down-intent"


def _options_for(dep: Deployment | None, given: Mapping[str, Mapping[str, str]],
                 provider: str | None = None) -> dict[str, str]:
    """The provider options the deployment was made with, overridden by those given now."""
    prov = provider or (dep.provider if dep else "")
    stored = ((dep.spec.get("options") or {}).get(prov) or {}) if dep else {}
    return {**stored, **dict(given.get(prov) or {})}


def _places(st: Store, dep: Deployment) -> list[tuple[str, str]]:
    """(provider, region): the deployment's own region first, then every region its events
    (intents, attempts, resources) name, in order, each with the provider that event names."""
    places: list[tuple[str, str]] = [(dep.provider, dep.region)] if dep.region else []
    from advisor.catalog.schema import REGION

    for e in st.events(dep.name):
        r = e.data.get("region")
        prov = e.data.get("provider")
        if r is None:
            continue
        cloud = prov if isinstance(prov, str) and prov else dep.provider
        if not isinstance(r, str) or not REGION.match(r) or cloud not in CLOUDS:
            # a damaged event must not stop down half-way (after terminating, before the
            # security group): it is said once and skipped; the rest is still cleaned up
            st._warn(f"event-place:{dep.name}:{str(r)[:40]}:{str(cloud)[:20]}",
                     f"an event of {dep.name} names {cloud!r} region {str(r)[:60]!r}, "
                     "which is no place advisor launches: skipped")
            continue
        place = (cloud, r)
        if place not in places:
            places.append(place)
    for res in dep.resources:
        if (dep.provider, res.region) not in places:
            places.append((dep.provider, res.region))
    return places


def _regions(st: Store, dep: Deployment) -> list[str]:
    return list(dict.fromkeys(r for _p, r in _places(st, dep)))


def sold_regions(provider: str, types: list[str] | None = None,
                 catalog: Catalog | None = None) -> list[str]:
    """Every region where the catalog sells ``types`` of ``provider`` (none named: any of its GPU
    types) — the bounded set a tag search without a record walks."""
    cat = catalog or load_catalog()
    wanted = set(types or [])
    out: set[str] = set()
    for inst in cat.instances.values():
        if inst.provider != provider or (wanted and inst.name not in wanted):
            continue
        out.update(inst.regions or ([inst.price.region] if inst.price.region else []))
    if wanted and not out:
        return sold_regions(provider, None, cat)
    return sorted(out)


@bounded("down")
@_one_at_a_time
def down(name: str, *, store: Store | None = None, backends: ProviderSource = None,
         provider_options: Mapping[str, Mapping[str, str]] | None = None,
         confirm: Callable[[str], bool] | None = None,
         progress: Callable[[str], None] | None = None, all_regions: bool = False,
         provider: str | None = None, catalog: Catalog | None = None) -> DownResult:
    """Terminate every instance tagged with ``name``, then remove every security group, role,
    profile, firewall rule or NSG it carries, in every region the deployment's intents name.

    ``all_regions`` — or no record of ``name`` at all (a lost state file) — searches every
    region where the catalog sells the deployment's types (without a record: any GPU type of
    ``provider``, else of every cloud). Succeeds only when nothing tagged remains; otherwise an
    :class:`OperationError` lists what is left. A swept place that could not be asked (no
    credentials, no SDK, permission denied) is no proof that nothing runs there: it is named in
    ``not_searched`` and ``complete`` is False (the CLI then exits 1)."""
    say = progress or (lambda _m: None)
    # a name no launch could have made ('' or UPPER) is refused before any sweep: it would
    # search every region of every cloud and find nothing
    check_name(name)
    st = store or Store()
    _hold(st, name, "taken down")
    dep = st.get(name)
    if provider is not None:
        registry.info(provider)
    opts = provider_options or {}
    known: list[tuple[str, str]] = _places(st, dep) if dep is not None else []
    places = list(known)
    sweep = dep is None or all_regions
    if sweep:
        if dep is not None:
            clouds = list(dict.fromkeys([dep.provider] + [p for p, _r in known]))
        else:
            clouds = [provider] if provider else list(CLOUDS)
        if provider is not None and dep is not None:
            clouds = [provider]
        types: dict[str, list[str]] = {}
        if dep is not None:
            for e in st.events(name):
                t, prov = e.data.get("instance_type"), e.data.get("provider") or dep.provider
                if isinstance(t, str) and isinstance(prov, str):
                    types.setdefault(prov, []).append(t)
        for cloud in clouds:
            for r in sold_regions(cloud, types.get(cloud), catalog):
                if (cloud, r) not in places:
                    places.append((cloud, r))
    if confirm is not None:
        if dep is not None and not all_regions:
            ask = (f"terminate deployment {name!r} ({dep.provider}, "
                   f"{', '.join(r for _p, r in places) or 'no region'}) and remove its "
                   "firewall rules")
        else:
            ask = (f"terminate everything tagged {TAG_DEPLOYMENT}={name} in {len(places)} "
                   f"region(s) of {', '.join(dict.fromkeys(p for p, _r in places)) or 'no cloud'}"
                   " and remove its firewall rules")
            if dep is None:
                # a typo sweeps every region for nothing: name what the state does know first
                import difflib

                close = difflib.get_close_matches(name, [d.name for d in st.all()], n=3)
                ask = (f"no deployment {name!r} in advisor's state"
                       + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else "")
                       + f"; {ask}")
        if not confirm(ask):
            raise UserInputError("nothing removed: not confirmed", hint="pass --yes to skip the "
                                 "question")
    if dep is not None:  # written first: a reconcile after a failed last write ends in 'down'
        st.event(name, "down-intent", f"down: {len(places)} region(s)")
    removed: list[str] = []
    failed: list[str] = []
    not_searched: list[str] = []
    searched: list[str] = []
    by_cloud: dict[str, list[str]] = {}
    for prov, region in places:
        by_cloud.setdefault(prov, []).append(region)
    for prov, regions in by_cloud.items():
        try:
            p = _provider(backends, prov, _options_for(dep, opts, prov))
        except (UserInputError, CloudError) as exc:
            if any(k[0] == prov for k in known):
                raise
            not_searched.append(f"{prov}: {exc}")
            continue
        off: list[str] = []
        try:
            done = _down_in(p, prov, name, regions, {r for k, r in known if k == prov}, say,
                            removed, failed, not_searched, off)
        except Exception as exc:  # a swept cloud without credentials: said, not fatal
            if any(k[0] == prov for k in known):
                raise
            not_searched.append(f"{prov}: {' '.join(str(exc).split())[:200]}")
            continue
        searched += [f"{prov}:{r}" for r in regions if r in done or r in off]
        left = _leftovers(p, name, done)
        failed += [f"{prov}:{x}" for x in left if f"{prov}:{x}" not in failed]
    if failed:
        if dep is not None:
            st.event(name, "down-incomplete", "left: " + ", ".join(failed))
        raise OperationError(
            f"{name}: {len(failed)} thing(s) tagged {TAG_DEPLOYMENT}={name} remain or could not "
            f"be checked: {', '.join(failed)}",
            hint=f"run 'advisor down {name}' again in a minute (instances take a while to go); "
            f"if they stay, look them up by the tag {TAG_DEPLOYMENT}={name} in the console")
    if dep is not None:
        try:
            st.set_instances_state(name, "terminated")
            st.forget_resources(name)
            st.set_status(name, "down", "down: removed " + (", ".join(removed) or "nothing"))
        except StateWriteError as exc:  # the clouds are done; the file still says otherwise
            raise StateWriteError(exc.path, exc, f"{name} was taken down (removed: "
                                  f"{', '.join(removed) or 'nothing'}), but the state file "
                                  f"could not record it: {exc}") from exc
    regions_all = list(dict.fromkeys(r for _p, r in places))
    return DownResult(name=name, removed=removed, regions=regions_all, searched=searched,
                      not_searched=not_searched)


def _down_in(p: Provider, prov: str, name: str, regions: list[str], known: set[str],
             say: Callable[[str], None], removed: list[str], failed: list[str],
             not_searched: list[str], off: list[str]) -> list[str]:
    """Instances first in every region, then what guarded them; the regions actually searched.
    A region of the record that fails is a failure; a swept one is reported as not searched;
    a swept one the account has not enabled goes to ``off`` (searched: nothing can run there,
    and nothing more is asked of it)."""
    def trouble(region: str, exc: Exception) -> None:
        if region in known:
            failed.append(f"{prov}:{region}: {exc}")
        else:
            not_searched.append(f"{prov}:{region}: {exc}")

    two_phase = hasattr(p, "terminate_instances") and hasattr(p, "remove_network")
    done: list[str] = []
    unasked: dict[str, list[str]] = {}  # why -> the swept regions that answered it
    for region in regions:
        if region in known:
            say(f"{prov} {region}: terminating and cleaning up")

    def first_phase(region: str) -> list[str]:
        if two_phase:
            return list(p.terminate_instances(name, region))  # type: ignore[attr-defined]
        return list(p.terminate(name, region))

    # the regions are asked at once (each answers for itself; a sweep of 20+ regions one after
    # the other was most of `down`'s time); results are taken in the regions' order
    for region, outcome in zip(regions, _each_region(p, first_phase, regions), strict=True):
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            removed.extend(outcome)
            done.append(region)
        except CloudError as exc:
            if exc.code in NOT_ENABLED and region not in known:
                off.append(region)  # a region the account has not enabled runs nothing
            elif region not in known:
                unasked.setdefault(str(exc), []).append(region)
            else:
                trouble(region, exc)
    # no credentials answers alike in every region: one line per reason, naming the regions
    for why, where in unasked.items():
        more = ", …" if len(where) > 3 else ""
        not_searched.append(f"{prov}:{where[0]}: {why}" if len(where) == 1 else
                            f"{prov}: {len(where)} region(s) not searched "
                            f"({', '.join(where[:3])}{more}): {why}")
    if two_phase:
        for region in list(done):
            try:
                removed.extend(p.remove_network(name, region))  # type: ignore[attr-defined]
            except CloudError as exc:
                trouble(region, exc)
                done.remove(region)
    return done


#: error codes of a region the account has not enabled (AWS opt-in regions): nothing can run
#: there, so a sweep counts it as searched
NOT_ENABLED = {"OptInRequired"}


def _leftovers(p: Provider, name: str, regions: list[str]) -> list[str]:
    """What still carries the deployment's tag in ``regions`` (deduplicated: IAM is global)."""
    left: list[str] = []
    look = getattr(p, "leftovers", None)

    def check(region: str) -> list[str]:
        if look is not None:
            return list(look(name, region))
        return [f"{region}:{i.id}" for i in alive(p.find(name, region))]

    for region, outcome in zip(regions, _each_region(p, check, regions), strict=True):
        if isinstance(outcome, CloudError):
            items = [f"{region}: cannot be checked ({outcome})"]
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            items = outcome
        left += [x for x in items if x not in left]
    return left


#: regions asked at once by a sweep (read-mostly calls, one client per region and thread)
REGION_WORKERS = 8


def _each_region(p: Provider, fn: Callable[[str], list[str]], regions: list[str]
                 ) -> list[list[str] | BaseException]:
    """``fn(region)`` for every region — several at a time where the backend says its regions
    are independent clients (``regions_in_parallel``: AWS, one boto3 client per region) — each
    result or the exception it raised, in the regions' order (one region's failure never hides
    another's answer)."""
    if len(regions) <= 1 or not getattr(p, "regions_in_parallel", False):
        out: list[list[str] | BaseException] = []
        for r in regions:
            try:
                out.append(fn(r))
            except Exception as exc:  # handed back, raised or reported by the caller
                out.append(exc)
        return out
    from concurrent.futures import ThreadPoolExecutor

    def safe(r: str) -> list[str] | BaseException:
        try:
            return fn(r)
        except Exception as exc:  # handed back, raised or reported by the caller
            return exc

    with ThreadPoolExecutor(max_workers=min(REGION_WORKERS, len(regions))) as pool:
        return list(pool.map(safe, regions))
