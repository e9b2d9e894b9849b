"""``advisor provision``, ``advisor status`` and ``advisor down``."""

from __future__ import annotations

import json as _json
import sys
from typing import Annotated, Any, get_args

import typer

from advisor.choices import KvCacheDtype
from advisor.cli import output as out
from advisor.cli.common import (
    KV_CHOICES,
    AllowSmallHost,
    Batch,
    CatalogDirs,
    DeployCpuOffload,
    DeployKvCacheDtype,
    ExpertParallel,
    JsonFlag,
    MaxTpot,
    MaxTtft,
    Quantization,
    catalog_from,
    with_cloud_options,
)
from advisor.clouds.registry import CLOUDS, key_ref_forms, token_ref_forms
from advisor.core.defaults import DEFAULT_VLLM_VERSION
from advisor.errors import OperationError, UserInputError

Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before spending or "
                                   "removing anything.")]


def _confirm(yes: bool) -> Any:
    if yes:
        return None

    def ask(summary: str) -> bool:
        if not sys.stdin.isatty():
            raise UserInputError(f"{summary}: not confirmed (no terminal to ask on)",
                                 hint="pass --yes to go ahead without a question")
        return bool(typer.confirm(f"{summary}?", default=False, err=True))

    return ask


def _check_cloud_inputs(provider: str | None, instance: str | None, image: str | None,
                        api_key_ref: str | None, hf_token_ref: str | None) -> None:
    """Before anything is asked of a cloud: ``--image`` names an image of the deployment's
    cloud, and a secret reference of one cloud is not given for an instance of another."""
    from advisor.clouds.registry import check_image, info, key_ref_cloud

    cloud = provider
    if instance is not None and ":" in instance:
        named = instance.partition(":")[0]
        if named in CLOUDS:
            if provider is not None and named != provider:
                raise UserInputError(f"--instance {instance[:80]!r} is not on --provider "
                                     f"{provider}", hint="drop one of them")
            cloud = named
    if image is not None:
        check_image(image, cloud)
    if cloud is None:
        return
    for flag, ref in (("--api-key-ref", api_key_ref), ("--hf-token-ref", hf_token_ref)):
        owner = key_ref_cloud(ref) if ref is not None else None
        if ref is not None and owner not in (None, cloud):
            scheme = info(cloud).key_scheme
            example = scheme.example if flag == "--api-key-ref" else scheme.token_example
            raise UserInputError(f"{flag} {ref[:80]!r} is read from {owner}'s secret store, "
                                 f"but the deployment goes to {cloud}", hint=f"use {example}")


@with_cloud_options("provision")
def provision_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="A catalog alias or HF repo id.")],
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.",
                                     min=1)],
    provider: Annotated[str | None, typer.Option(help=f"Only this cloud: {', '.join(CLOUDS)}.")]
    = None,
    instance: Annotated[str | None, typer.Option(
        help="PROVIDER:TYPE to launch; default: the top recommendations.")] = None,
    region: Annotated[list[str] | None, typer.Option(
        help="Region to try, in order (repeatable); default: the catalog's priced region.")]
    = None,
    name: Annotated[str | None, typer.Option(
        help="Deployment name (default: from model and instance).")] = None,
    spot: Annotated[bool, typer.Option(help="Spot / preemptible capacity.")] = False,
    allow_cidr: Annotated[list[str] | None, typer.Option(
        help="Open the vLLM port(s) to this range (repeatable); default: closed.")] = None,
    ssh_cidr: Annotated[list[str] | None, typer.Option(
        help="Open SSH to this range (repeatable); default: closed.")] = None,
    api_key_ref: Annotated[str | None, typer.Option(
        help=f"Where the instance reads the vLLM API key: {key_ref_forms()}; default: the "
        "cloud's own secret store.")] = None,
    hf_token_ref: Annotated[str | None, typer.Option(
        help=f"Where the instance reads the Hugging Face token ({token_ref_forms()}); needed "
        "for gated models.")] = None,
    image: Annotated[str | None, typer.Option(
        help="Image to boot instead of the GPU base image advisor looks up.")] = None,
    port: Annotated[int, typer.Option(help="Port of replica 0; replica i listens on port+i.",
                                      min=1024, max=65000)] = 8000,
    vllm_version: Annotated[str, typer.Option(help="The vLLM release to pin.")]
    = DEFAULT_VLLM_VERSION,
    max_tpot_ms: MaxTpot = None,
    max_ttft_ms: MaxTtft = None,
    batch: Batch = False,
    allow_small_host: AllowSmallHost = False,
    quantization: Quantization = None,
    kv_cache_dtype: DeployKvCacheDtype = "auto",
    cpu_offload_gb: DeployCpuOffload = 0.0,
    expert_parallel: ExpertParallel = None,
    cloud_options: dict[str, dict[str, str]] | None = None,
    dry_run: Annotated[bool, typer.Option(
        help="Print the exact requests and the user-data; call nothing.")] = False,
    yes: Yes = False,
    wait: Annotated[bool, typer.Option(
        help="Wait until the instance runs (and vLLM's /health answers where reachable).")]
    = False,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Launch the recommended instance with vLLM running NUMA-bound on it.

    Before anything is created, each candidate's cloud is asked whether the launch can work
    (credentials, each secret and the instance's access to it, quota, the image in the region,
    a way out to the internet). A failed check prints one line with its fix; when every
    candidate was stopped that way, nothing was created and the exit status is 2."""
    from advisor.provisioning import PreflightRefused, Question, provision

    _check_cloud_inputs(provider, instance, image, api_key_ref, hf_token_ref)
    from advisor.api import finite

    finite("--cpu-offload-gb", cpu_offload_gb, high=4096, strict_low=False)
    if kv_cache_dtype not in get_args(KvCacheDtype):
        raise UserInputError(f"--kv-cache-dtype {kv_cache_dtype[:40]!r}: must be {KV_CHOICES}",
                             hint="auto (vLLM's default) or fp8")

    try:
        result = provision(
            model, ctx, provider=provider, instance=instance, regions=region, name=name,
            spot=spot, allow_cidrs=allow_cidr, ssh_cidrs=ssh_cidr, api_key_ref=api_key_ref,
            image=image, hf_token_ref=hf_token_ref,
            port=port, vllm_version=vllm_version, dry_run=dry_run, wait=wait,
            confirm=_confirm(yes or dry_run), progress=None if json else out.progress,
            catalog=catalog_from(catalog),
            provider_options=cloud_options,
            question=Question(max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms, batch=batch,
                              allow_small_host=allow_small_host, quantization=quantization,
                              kv_cache_dtype=kv_cache_dtype, cpu_offload_gb=cpu_offload_gb,
                              expert_parallel=expert_parallel))
    except PreflightRefused as exc:  # one line per failed check, then the error (exit 2)
        for where, check in exc.checks:
            out.progress(f"preflight failed: {where}: {check.name}: {check.detail}"
                         + (f" — fix: {check.fix}" if check.fix else ""))
        raise
    _show_provision(result, json)


def _show_provision(result: Any, json: bool) -> None:
    if json:
        out.emit_json(result.model_dump())
        return
    for w in result.warnings:
        out.progress(f"warning: {w}")
    if result.status == "dry-run":
        out.line(f"# dry run of deployment {result.name}: nothing was called")
        for req in result.requests:
            out.line(_json.dumps(req, indent=2), wrap=False)
        for cand in result.preflight:
            out.line(f"# preflight of {cand['provider']}:{cand['instance_type']} in "
                     f"{cand['region']}: checked before anything is created", wrap=False)
            for check in cand["checks"]:
                out.line(f"#   {check['name']}: {check['detail']}", wrap=False)
        out.line("# user-data")
        out.line(result.user_data or "", wrap=False)
        return
    verb = "already running" if result.status == "exists" else "launched"
    for i in result.instances:
        out.line(f"{result.name}: {verb} {result.provider}:{i.instance_type} {i.id} in "
                 f"{i.zone or i.region} ({i.state}"
                 + (f", public {i.public_ip}" if i.public_ip else "") + ")")
    if result.attempts:
        out.table(["instance", "where", "outcome", out.Col("detail", wrap=True)],
                  ([f"{a.provider}:{a.instance_type}", a.zone or a.region, a.outcome,
                    (a.code + ": " if a.code else "") + a.detail[:100]]
                   for a in result.attempts), title="attempts")
    if result.health:
        out.line(f"health: {result.health}")


@with_cloud_options("status")
def status_cmd(
    name: Annotated[str | None, typer.Argument(help="One deployment; default: all.")] = None,
    reconcile: Annotated[bool, typer.Option(
        help="Ask the clouds (by tag) what runs and record it.")] = False,
    boot: Annotated[bool, typer.Option(
        help="Read each running instance's serial console for its boot report (read-only).")]
    = True,
    cloud_options: dict[str, dict[str, str]] | None = None,
    json: JsonFlag = False,
) -> None:
    """The deployments advisor launched, their instances and (for one) its history.

    The boot column is what each running instance printed on its serial console during its
    first boot: ``booting: install vllm (4 min)``, ``serving``, ``failed: <step> (exit N):
    <last line>``, or ``unknown (<why>)`` when the console could not be read. A deployment whose
    boot failed stays ``running`` (its instance is up and billed); the exit status is then 1."""
    from advisor.provisioning import boot_failed, boot_status, status
    from advisor.state import Store

    store = Store()
    deps = status(name, reconcile=reconcile, store=store,
                  provider_options=cloud_options)
    boots = {d.name: boot_status(d, provider_options=cloud_options) if boot else None
             for d in deps}
    failed = [n for n, b in boots.items() if boot_failed(b)]
    if json:
        body = [{**d.model_dump(), "boot": boots[d.name]} for d in deps]
        if name:
            body[0]["events"] = [e.model_dump() for e in store.events(name)]
        out.emit_json(body[0] if name else body)
        if failed:
            raise typer.Exit(1)
        return
    if not deps:
        out.line("no deployments (advisor provision launches one)")
        return
    # at a narrow terminal the highest drop is hidden first
    out.table(["name", "instance", out.Col("where", drop=1), "status",
               out.Col("boot", wrap=True),
               out.Col("instances", wrap=True, drop=2), out.Col("updated (UTC)", drop=3)],
              ([d.name, f"{d.provider}:{d.instance_type}" if d.instance_type else d.provider,
                out.fmt(d.zone or d.region), d.status, boots[d.name] or "—",
                ", ".join(f"{i.id} {i.state}" for i in d.instances) or "—",
                d.updated_at[:16].replace("T", " ")] for d in deps))
    if name:
        for e in store.events(name):
            out.line(f"  {e.at} {e.kind}: {e.message}")
    if failed:
        out.error(f"the boot failed on {', '.join(failed)}: the instance runs (and is billed) "
                  "but vLLM does not serve", hint="'advisor down NAME' removes it; the boot "
                  "column names the step and its last line")
        raise typer.Exit(1)


@with_cloud_options("down")
def down_cmd(
    name: Annotated[str, typer.Argument(help="The deployment to remove.")],
    yes: Yes = False,
    all_regions: Annotated[bool, typer.Option(
        "--all-regions", help="Search by tag in every region where the catalog sells the "
        "deployment's types, not only those its state names (done anyway when the state has "
        "no record of NAME).")] = False,
    provider: Annotated[str | None, typer.Option(
        "--provider", help="Without a record of NAME: search this cloud only (default: every "
        "cloud whose SDK and credentials are at hand).")] = None,
    cloud_options: dict[str, dict[str, str]] | None = None,
    json: JsonFlag = False,
) -> None:
    """Terminate a deployment's instances and remove its firewall rules (found by tag)."""
    from advisor.provisioning import down

    result = down(name, confirm=_confirm(yes), progress=None if json else out.progress,
                  provider_options=cloud_options, all_regions=all_regions, provider=provider)
    if json:
        out.emit_json(result.model_dump())
    else:
        none = "nothing (none left)" if result.complete else "nothing"
        out.line(f"{name}: down; removed {', '.join(result.removed) or none}")
        if len(result.searched) > 1 or not result.removed:
            out.line(f"searched by tag in {len(result.searched)} region(s): "
                     f"{', '.join(result.searched) or 'none'}")
    if not result.complete:
        # searched and found nothing is done; could not ask is not: it may still run there
        for miss in result.not_searched:
            out.progress(f"not searched: {miss}")
        raise OperationError(
            f"{name}: could not search {len(result.not_searched)} place(s), so whatever runs "
            "there still runs: " + "; ".join(result.not_searched),
            hint="give that cloud's credentials and run 'advisor down' again, or name the "
            "cloud it ran on with --provider")
