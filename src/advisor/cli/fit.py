"""``advisor fit``: will the model fit, and how many sequences run at once."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from advisor.choices import KvCacheDtype
from advisor.cli import output as out
from advisor.cli.common import (
    KV_CHOICES,
    CatalogDirs,
    ExpertParallel,
    JsonFlag,
    ProbeFile,
    SysfsRoot,
    catalog_from,
    one_gpu,
)
from advisor.core.defaults import DEFAULT_VLLM_VERSION


def fit_cmd(
    model: Annotated[str, typer.Option(
        "--model", "-m", help="A model alias or a config.json path.")],
    gpu: Annotated[str, typer.Option(
        "--gpu", help="A catalog GPU (id, alias or family), e.g. H100-SXM; a family of "
        "several means its smallest; local: this host's GPU, from its probe.")],
    max_model_len: Annotated[int, typer.Option("--ctx", "--max-model-len",
                                               help="vLLM's max_model_len.", min=1)],
    gpu_memory_gib: Annotated[float | None, typer.Option(
        help="Total GPU memory vLLM sees, GiB (its log prints it, e.g. 79.19).", min=0.1)] = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size.", min=1)] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel size.", min=1)] = 1,
    gpu_memory_utilization: Annotated[float | None, typer.Option(
        help="Fraction of GPU memory vLLM may use, in (0, 1]; default: the release's.")] = None,
    dtype: Annotated[str, typer.Option(help="auto, bfloat16, float16 or float32.")] = "auto",
    kv_cache_dtype: Annotated[str, typer.Option(
        help=f"vLLM's --kv-cache-dtype: {KV_CHOICES}.")] = "auto",
    quantization: Annotated[str | None, typer.Option(
        help="Override the config's quantization (fp8, awq, gptq, …).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(min=1)] = None,
    max_num_seqs: Annotated[int | None, typer.Option(min=1)] = None,
    enforce_eager: Annotated[bool, typer.Option(help="No CUDA graphs.")] = False,
    expert_parallel: ExpertParallel = None,
    vllm_version: Annotated[str, typer.Option(help="The vLLM release to model.")]
    = DEFAULT_VLLM_VERSION,
    probe: ProbeFile = None,
    sysfs_root: SysfsRoot = None,
    catalog: CatalogDirs = None,
    json: JsonFlag = False,
) -> None:
    """Size a model on a GPU the way vLLM will: weights, KV cache, concurrency."""
    from advisor.api import fit

    cat = catalog_from(catalog)
    gpu = one_gpu(cat, gpu, probe, sysfs_root)
    result, spec, mem_source = fit(
        model, gpu, catalog=cat, gpu_memory_gib_override=gpu_memory_gib,
        quantization=quantization, vllm_version=vllm_version, tp=tp, pp=pp,
        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        dtype=dtype, kv_cache_dtype=cast(KvCacheDtype, kv_cache_dtype),
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs, enforce_eager=enforce_eager,
        expert_parallel=expert_parallel)
    view = {**result.model_dump(), "model": spec.name, "gpu": cat.gpu(gpu).id,
            "gpu_memory_gib": round(result.budget_gib / (gpu_memory_utilization or 1), 4)
            if gpu_memory_utilization else None, "gpu_memory_source": mem_source}
    if json:
        out.emit_json(view)
        return
    verdict = "fits" if result.fits else "does NOT fit"
    out.pairs(f"{spec.name} on {result.tp * result.pp} x {cat.gpu(gpu).id} "
              f"(TP {result.tp}{' EP' if result.expert_parallel else ''}, PP {result.pp}), "
              f"max_model_len {result.max_model_len}: {verdict}",
              [("weights", out.fmt(result.weights_gib, " GiB per GPU")),
               ("peak activation", out.fmt(result.activation_gib, " GiB")),
               ("non-torch", out.fmt(result.non_torch_gib, " GiB")),
               ("CUDA graphs", out.fmt(result.cuda_graph_gib, " GiB")
                + ("" if result.cuda_graph_charged else " (not charged to the KV budget)")),
               ("budget", out.fmt(result.budget_gib, f" GiB ({mem_source})")),
               ("KV cache", out.fmt(result.kv_cache_gib, " GiB")),
               ("KV cache tokens", f"{result.kv_cache_tokens:,}"
                f" ({result.num_blocks:,} blocks of {result.block_size})"),
               ("KV per token", f"{result.kv_bytes_per_token:,} bytes ({result.kv_cache_dtype})"),
               ("max concurrency", f"{result.max_concurrency:.2f}x"),
               ("vLLM", f"{result.vllm_version}, max_num_batched_tokens "
                f"{result.max_num_batched_tokens}, max_num_seqs {result.max_num_seqs}"),
               ("accuracy", result.confidence.why if result.confidence else "—")])
    for note in result.notes:
        out.line(f"- {note}")
