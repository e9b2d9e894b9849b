"""``advisor render``: cloud-init, systemd unit and launcher for one instance and model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor.cli import output as out
from advisor.cli.common import (
    AllowSmallHost,
    Batch,
    CatalogDirs,
    JsonFlag,
    MaxTpot,
    MaxTtft,
    catalog_from,
)
from advisor.clouds.registry import key_ref_forms, token_ref_forms
from advisor.core.defaults import DEFAULT_VLLM_VERSION


def render_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="A catalog alias or HF repo id.")],
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.",
                                     min=1)],
    out_dir: Annotated[Path, typer.Option("--out", help="A new folder for the files.",
                                          file_okay=False)],
    instance: Annotated[str | None, typer.Option(
        help="PROVIDER:TYPE; default: the top recommendation.")] = None,
    tp: Annotated[int | None, typer.Option("--tp", help="Tensor-parallel size.", min=1)] = None,
    vllm_version: Annotated[str, typer.Option(help="The vLLM release to pin.")]
    = DEFAULT_VLLM_VERSION,
    port: Annotated[int, typer.Option(help="Port of replica 0; replica i listens on port+i.")]
    = 8000,
    host: Annotated[str, typer.Option(
        help="Listen address; 127.0.0.1 unless you open it on purpose.")] = "127.0.0.1",
    api_key_ref: Annotated[str | None, typer.Option(
        help=f"Where the API key is read at boot: {key_ref_forms()}; default: the "
        "instance's cloud's own secret store.")] = None,
    hf_token_ref: Annotated[str | None, typer.Option(
        help=f"Where the Hugging Face token is read at boot ({token_ref_forms()}); needed "
        "for gated models.")] = None,
    gpu_memory_utilization: Annotated[float, typer.Option(min=0.05, max=1.0)] = 0.9,
    target: Annotated[str, typer.Option(
        help="cloud-init (user-data, unit, launcher) or k8s (Deployment / LeaderWorkerSet, "
        "Service, kubelet settings).")] = "cloud-init",
    name: Annotated[str | None, typer.Option(
        help="k8s: the workload's name (default: from model and instance).")] = None,
    ray_head: Annotated[str | None, typer.Option(
        help="Multi-node: the head's address for the workers (else read at boot from "
        "/etc/advisor/ray-head).")] = None,
    max_tpot_ms: MaxTpot = None,
    max_ttft_ms: MaxTtft = None,
    batch: Batch = False,
    allow_small_host: AllowSmallHost = False,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Write user-data, vllm@.service, per-replica env files and the NUMA-binding launcher."""
    from advisor.api import render_files
    from advisor.inputs import check_out_dir
    from advisor.render.cloudinit import write

    check_out_dir(out_dir)  # before any work: an unusable --out is refused, nothing written
    result = render_files(model=model, ctx=ctx, instance=instance, tp=tp,
                          vllm_version=vllm_version, port=port, host=host,
                          api_key_ref=api_key_ref, hf_token_ref=hf_token_ref,
                          gpu_memory_utilization=gpu_memory_utilization,
                          target=target, name=name, ray_head=ray_head,
                          max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms, batch=batch,
                          allow_small_host=allow_small_host,
                          catalog=catalog_from(catalog))
    inst, plan = result.instance, result.plan
    paths = write(result.files, out_dir)
    if json:
        out.emit_json({"instance": inst.key, "out": str(out_dir), "files": [str(p) for p in paths],
                       "replicas": plan.replicas, "tp": plan.tp, "pp": plan.pp,
                       "nodes": plan.nodes})
        return
    if target == "k8s":
        kind = "LeaderWorkerSet" if plan.nodes > 1 else "Deployment"
        out.line(f"{inst.key}: {kind} of {plan.replicas if plan.nodes == 1 else plan.nodes} "
                 f"pod(s) x {plan.tp} GPU(s), Guaranteed QoS, non-root; the API key comes from "
                 "Secret advisor-vllm-api-key (key api-key)"
                 + (" and the Hugging Face token from Secret advisor-hf-token (key token)"
                    if hf_token_ref else "") + ", which you create")
        for p in paths:
            out.line(f"  {p}")
        return
    if plan.nodes > 1:
        out.line(f"{inst.key} x {plan.nodes}: one replica, TP {plan.tp} in each instance, PP "
                 f"{plan.pp} across them over Ray; user-data for the head, worker/user-data for "
                 f"the {plan.nodes - 1} worker(s)"
                 + ("" if ray_head else "; write the head's address to /etc/advisor/ray-head "
                    "on the workers (or pass --ray-head)"))
        for p in paths:
            out.line(f"  {p}")
        return
    out.line(f"{inst.key}: {plan.replicas} replica(s) of TP {plan.tp}, ports "
             f"{port}-{port + plan.replicas - 1} on {host}; NUMA {plan.alignment} in the catalog, "
             "bound at boot from sysfs")
    for p in paths:
        out.line(f"  {p}")
