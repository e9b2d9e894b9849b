"""``advisor render``: cloud-init, systemd unit and launcher for one instance and model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer

from advisor.choices import KvCacheDtype
from advisor.cli import output as out
from advisor.cli.common import (
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
)
from advisor.clouds.registry import key_ref_forms, token_ref_forms
from advisor.core.defaults import DEFAULT_VLLM_VERSION


def render_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="A catalog alias or HF repo id.")],
    ctx: Annotated[int, typer.Option("--ctx", "--max-model-len", help="vLLM's max_model_len.",
                                     min=1)],
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="A new folder for the files (not with --print).", file_okay=False)]
    = None,
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
        help="cloud-init (user-data, unit, launcher), k8s (Deployment / LeaderWorkerSet, "
        "Service, kubelet settings) or local (this host, from its probe: unit, launcher, "
        "install.sh).")] = "cloud-init",
    probe: Annotated[Path | None, typer.Option(
        "--probe", help="--target local: a saved 'advisor topology --json' (of this or another "
        "host) instead of probing this one.", dir_okay=False)] = None,
    sysfs_root: Annotated[Path | None, typer.Option(
        help="--target local: the sysfs tree to probe (default /).")] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="--target local: the GPU model (e.g. H100-SXM) where its PCI device id "
        "does not tell it.")] = None,
    print_lines: Annotated[bool, typer.Option(
        "--print", help="--target local: print each replica's command line (binding, OMP "
        "threads, vllm serve) and write nothing.")] = False,
    name: Annotated[str | None, typer.Option(
        help="k8s: the workload's name (default: from model and instance).")] = None,
    ray_head: Annotated[str | None, typer.Option(
        help="Multi-node: the head's address for the workers (else read at boot from "
        "/etc/advisor/ray-head).")] = None,
    max_tpot_ms: MaxTpot = None,
    max_ttft_ms: MaxTtft = None,
    batch: Batch = False,
    allow_small_host: AllowSmallHost = False,
    quantization: Quantization = None,
    kv_cache_dtype: DeployKvCacheDtype = "auto",
    cpu_offload_gb: DeployCpuOffload = 0.0,
    expert_parallel: ExpertParallel = None,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Write user-data, vllm@.service, per-replica env files and the NUMA-binding launcher
    (--target local: the same for this host from its probe, with install.sh)."""
    from advisor.api import render_files
    from advisor.errors import UserInputError
    from advisor.inputs import check_out_dir
    from advisor.render.cloudinit import write

    if print_lines and target != "local":
        raise UserInputError("--print is for --target local (the command lines on a probed "
                             "host)", hint="add --target local, or drop --print")
    if print_lines and out_dir is not None:
        raise UserInputError("--print writes nothing; --out writes the files",
                             hint="give one of --print and --out")
    if out_dir is None and not print_lines:
        raise UserInputError("--out is needed: a new folder for the files",
                             hint="e.g. --out ./vllm-files"
                             + (" (or --print to see the command lines)"
                                if target == "local" else ""))
    if out_dir is not None:
        check_out_dir(out_dir)  # before any work: an unusable --out is refused, nothing written
    result = render_files(model=model, ctx=ctx, instance=instance, tp=tp,
                          vllm_version=vllm_version, port=port, host=host,
                          api_key_ref=api_key_ref, hf_token_ref=hf_token_ref,
                          gpu_memory_utilization=gpu_memory_utilization,
                          target=target, name=name, ray_head=ray_head,
                          max_tpot_ms=max_tpot_ms, max_ttft_ms=max_ttft_ms, batch=batch,
                          allow_small_host=allow_small_host,
                          catalog=catalog_from(catalog), probe=probe, sysfs_root=sysfs_root,
                          gpu=gpu, quantization=quantization,
                          kv_cache_dtype=cast(KvCacheDtype, kv_cache_dtype),
                          cpu_offload_gb=cpu_offload_gb, expert_parallel=expert_parallel)
    inst, plan = result.instance, result.plan
    ep = " with expert parallelism" if plan.expert_parallel else ""
    if out_dir is None:
        _print_local(result, json)
        return
    paths = write(result.files, out_dir)
    if json:
        out.emit_json({"instance": inst.key, "out": str(out_dir), "files": [str(p) for p in paths],
                       "replicas": plan.replicas, "tp": plan.tp, "pp": plan.pp,
                       "nodes": plan.nodes, "expert_parallel": plan.expert_parallel})
        return
    if target == "k8s":
        kind = "LeaderWorkerSet" if plan.nodes > 1 else "Deployment"
        out.line(f"{inst.key}: {kind} of {plan.replicas if plan.nodes == 1 else plan.nodes} "
                 f"pod(s) x {plan.tp} GPU(s){ep}, Guaranteed QoS, non-root; the API key comes from "
                 "Secret advisor-vllm-api-key (key api-key)"
                 + (" and the Hugging Face token from Secret advisor-hf-token (key token)"
                    if hf_token_ref else "") + ", which you create")
        for p in paths:
            out.line(f"  {p}")
        return
    if target == "local":
        out.line(f"{inst.key} ({inst.gpu.count} x {inst.gpu.model}, {inst.numa.nodes or '?'} "
                 f"NUMA node(s); {inst.sources['default'].source}): {plan.replicas} "
                 f"replica(s) of TP {plan.tp}{ep}, ports "
                 f"{port}-{port + plan.replicas - 1} on {host}, bound at start from sysfs; "
                 f"install with: sudo {out_dir / 'install.sh'}")
        for p in paths:
            out.line(f"  {p}")
        return
    if plan.nodes > 1:
        out.line(f"{inst.key} x {plan.nodes}: one replica, TP {plan.tp}{ep} in each instance, PP "
                 f"{plan.pp} across them over Ray; user-data for the head, worker/user-data for "
                 f"the {plan.nodes - 1} worker(s)"
                 + ("" if ray_head else "; write the head's address to /etc/advisor/ray-head "
                    "on the workers (or pass --ray-head)"))
        for p in paths:
            out.line(f"  {p}")
        return
    out.line(f"{inst.key}: {plan.replicas} replica(s) of TP {plan.tp}{ep}, ports "
             f"{port}-{port + plan.replicas - 1} on {host}; NUMA {plan.alignment} in the catalog, "
             "bound at boot from sysfs")
    for p in paths:
        out.line(f"  {p}")


def _print_local(result: Any, json: bool) -> None:
    """--print: each replica's command line as the launcher will run it, nothing written; the
    launcher's journal notes (a hidden node, a replica spanning nodes) on stderr."""
    lines = result.commands
    if json:
        out.emit_json({"instance": result.instance.key, "gpu": result.instance.gpu.model,
                       "replicas": result.plan.replicas, "tp": result.plan.tp,
                       "expert_parallel": result.plan.expert_parallel,
                       "commands": [c.model_dump() for c in lines]})
        return
    for c in lines:
        for note in c.notes:
            out.progress(f"replica {c.replica}: {note}")
        out.raw(c.command + "\n")
