"""Which weights a deployment serves: the checkpoint as published, or fp8 — a published fp8
checkpoint where the model catalog knows one, else vLLM's on-the-fly fp8 (``--quantization
fp8``). :func:`options` turns a ``--quantization`` choice into the weight options the ranking
sizes and estimates like any other layout; :func:`refusal` says why a GPU cannot run one.

Evidence, next to each rule:

- W8A8 fp8 needs fp8 tensor cores (compute capability >= 8.9: Ada Lovelace, Hopper,
  Blackwell); Ampere runs fp8 checkpoints as weight-only W8A16 through the FP8 Marlin kernel,
  older GPUs not at all (vLLM docs, features/quantization/fp8.md, as of v0.5.5-v0.11: "FP8
  computation is supported on NVIDIA GPUs with compute capability > 8.9 ... FP8 models will
  run on compute capability > 8.0 (Ampere) as weight-only W8A16, utilizing FP8 Marlin"). The
  catalog's ``fp8_tflops`` is null exactly for the GPUs without fp8 tensor cores, so it decides
  W8A8; the architecture decides Marlin. AMD CDNA 3 runs fp8 W8A8 (same page: "hardware
  acceleration on GPUs such as Nvidia H100 and AMD MI300x").
- On-the-fly fp8 quantizes every Linear layer but the lm_head to fp8 with a per-tensor scale,
  and loads the model at its original precision first: "Currently, we load the model at
  original precision before quantizing down to 8-bits, so you need enough memory to load the
  whole model" (same page, Online Dynamic Quantization). So each GPU must hold its share of the
  checkpoint's own weights at load time, whatever the fp8 size after it: :func:`load_gib`.
- A published checkpoint is served by its repo id; vLLM reads its quantization from its
  config.json (no flag). Its size is the scheme's: every linear layer of the transformer
  blocks at one byte (the checkpoints named in ``catalogs/models/index.yaml`` say so on their
  cards), embeddings and lm_head at the activation dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from advisor.catalog.schema import Gpu, ModelAlias
    from advisor.core.model import ModelSpec

#: what ``--quantization`` takes on recommend, plan, render and provision: the checkpoint as
#: published (none), fp8 weights, or both side by side (auto)
SEARCH_CHOICES = ("none", "fp8", "auto")

#: architectures whose fp8 runs as weight-only W8A16 through FP8 Marlin (vLLM fp8 docs above)
MARLIN_FP8 = {"Ampere"}

#: checkpoint formats vLLM runs on fp8 tensor cores only: NVIDIA ModelOpt fp8 (its model
#: cards list Blackwell, Hopper and Lovelace as the supported hardware, e.g.
#: huggingface.co/nvidia/Llama-3.1-405B-Instruct-FP8; vLLM's ModelOptFp8Config sets compute
#: capability 8.9 as its minimum)
NEEDS_FP8_CORES = {"modelopt"}

#: the least CUDA compute capability (x10) of each NVIDIA architecture in the catalog: Volta
#: V100 7.0, Turing T4 7.5, Ampere A100 8.0 (A10/A10G 8.6), Ada 8.9, Hopper 9.0, Blackwell B200
#: 10.0 (RTX PRO 6000 12.0), Blackwell Ultra B300 10.3 (NVIDIA's CUDA GPU list; vLLM's
#: quantization docs use the same SM numbers: "Volta refers to SM 7.0, Turing to SM 7.5,
#: Ampere to SM 8.0/8.6, Ada to SM 8.9, and Hopper to SM 9.0"). A floor: it is compared with
#: the minimum a quantization method needs, never used to pick a kernel
ARCH_COMPUTE_CAPABILITY: dict[str, int] = {
    "Volta": 70, "Turing": 75, "Ampere": 80, "Ada Lovelace": 89, "Hopper": 90,
    "Blackwell": 100, "Blackwell Ultra": 103}

#: the least compute capability (x10) vLLM serves a checkpoint's quantization method on: its
#: ``QuantizationConfig.get_min_capability()``, checked when the engine starts ("The
#: quantization method mxfp4 is not supported for the current GPU. Minimum capability: 80.
#: Current capability: 75", vllm-project/vllm issue #22288). Evidence per method:
#:
#: * mxfp4 (gpt-oss): 80 (``Mxfp4Config.get_min_capability``, vllm mxfp4.py, quoted at
#:   e61bac87 in vllm-project/vllm issue #23203 "Support gpt-oss mxfp4 on compute capability
#:   7.5", open, 2025-08-19; the first gpt-oss builds asked 10.0, vllm-project/vllm PR #22339
#:   review "Let's change this to 100 for now", then 9.0: a --vllm-version that old is held to
#:   the newer floor here)
#: * nvfp4 (ModelOpt NVFP4): 80 (``ModelOptNvFp4Config.get_min_capability``; below Blackwell
#:   it runs weight-only through FP4 Marlin, else "Current platform does not support NVFP4
#:   quantization. Please use Blackwell and above.")
#: * modelopt (ModelOpt FP8): 89 (``ModelOptFp8Config``; :data:`NEEDS_FP8_CORES`)
#: * fp8, fbgemm_fp8: 80 (fp8 tensor cores from 8.9, FP8 Marlin W8A16 on Ampere; vLLM's
#:   quantization docs' hardware table: FP8 W8A8 Ada/Hopper, Marlin (GPTQ/AWQ/FP8) Ampere
#:   and newer, neither on Volta or Turing)
#: * awq: 75 (same table: AWQ not on Volta); awq_marlin, gptq_marlin: 80 (Marlin)
#: * gptq: 60; bitsandbytes: 70 (same table: both on Volta)
#: * int8, w8a8 (INT8 W8A8): 75 (same table: not on Volta)
#:
#: * compressed-tensors, by the scheme its config_groups give (advisor.core.model reads the
#:   weights' bits and type): the floor is ``_check_scheme_supported(scheme.get_min_capability())``
#:   ("Quantization scheme is not supported for the current GPU. Min capability: 80. Current
#:   capability: 75"), the lowest of the schemes that bits and type allow:
#:   - w4 (int, W4A16 on Marlin, CompressedTensorsWNA16 "ampere and up"): 80 — vllm-project/vllm
#:     issues #26297 (vLLM 0.11.0, a Turing RTX 5000: a quantized Qwen3-VL, "Min capability:
#:     80. Current capability: 75") and #14040
#:   - w8 (int): 75 — W8A8 INT8 (the docs table: not on Volta); an 8-bit W8A16 asks 80, so a
#:     Turing GPU is not refused on bits alone
#:   - fp8 (float 8-bit): 80 — W8A8 FP8 needs 8.9 and falls back to W8A16 FP8 Marlin at 8.0; a
#:     T4 refuses allenai/olmOCR-2-7B-1025-FP8 with "Min capability: 80. Current capability: 75"
#:     (its users' notes, e.g. olmocr T4 guides)
#:   - fp4 (float 4-bit, NVFP4): 80 — W4A4 NVFP4 needs Blackwell and falls back to W4A16 FP4
#:     on Marlin, 8.0 (the docs table: NVFP4 Marlin Ampere and newer)
#: AMD GPUs are not checked here:
#: vLLM's ROCm platform lists its own methods (``RocmPlatform.supported_quantization``) and
#: the list changed between releases. vLLM's docs table is
#: docs/features/quantization/README.md @ 0328802b
METHOD_MIN_CAPABILITY: dict[str, int] = {
    "mxfp4": 80, "nvfp4": 80, "modelopt": 89, "fp8": 80, "fbgemm_fp8": 80, "awq": 75,
    "awq_marlin": 80, "gptq_marlin": 80, "gptq": 60, "bitsandbytes": 70, "int8": 75,
    "w8a8": 75, "compressed-tensors-w4": 80, "compressed-tensors-w8": 75,
    "compressed-tensors-fp8": 80, "compressed-tensors-fp4": 80}

#: the closest published accuracy measurement of on-the-fly fp8: Intel auto-round,
#: docs/fp8_block_acc.md @ 48a84bbd (lm-eval on vLLM, 12 tasks' average, round-to-nearest fp8
#: without calibration, 128x128-block scales; vLLM 0.11's on-the-fly fp8 scales per tensor)
ONLINE_FP8_ACCURACY = (
    "closest published measurement: round-to-nearest block-fp8 (no calibration) kept the "
    "12-task lm-eval average of Meta-Llama-3-8B-Instruct at 0.6297 vs 0.6311 in bf16 and of "
    "Qwen3-8B at 0.6520 vs 0.6524 (intel/auto-round docs/fp8_block_acc.md @ 48a84bbd); vLLM's "
    "on-the-fly fp8 scales per tensor, which that table does not measure")


class Weights(BaseModel):
    """The weights one recommendation assumes: what is served, how vLLM is told, and what
    is published about the accuracy it costs."""

    model_config = ConfigDict(frozen=True)
    #: "as published" (the checkpoint's own dtype or quantization) or "fp8"
    scheme: str
    #: the repo id vLLM serves (a published quantized checkpoint), None: the model's own
    checkpoint: str | None = None
    #: how the weights come to be: the checkpoint's own, a published checkpoint's format, or
    #: "on-the-fly" (vLLM quantizes at load)
    source: str
    #: vLLM's --quantization value the launcher passes (None: read from the checkpoint)
    vllm_quantization: str | None = None
    #: the kernel path on the ranked GPU ("W8A8", "W8A16 via FP8 Marlin"), None for bf16
    kernel: str | None = None
    #: the published accuracy delta for this scheme and model, or why none is stated
    accuracy: str
    #: where the checkpoint and its facts come from (None: the model's own)
    source_url: str | None = None

    @property
    def label(self) -> str:
        if self.checkpoint:
            return f"{self.scheme} ({self.checkpoint})"
        if self.scheme == "fp8":
            return f"fp8 ({self.source})"
        return f"as published ({self.source})"

    @property
    def short(self) -> str:
        """fp8, or the published dtype (bf16, fp16) or quantization: a table cell."""
        if self.scheme == "fp8":
            return "fp8"
        return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(self.source,
                                                                               self.source)


def check_choice(value: str | None, where: str = "--quantization") -> str:
    """A search choice (none, fp8, auto), lower-cased; UserInputError otherwise."""
    from advisor.errors import UserInputError

    v = (value or "none").lower()
    if v not in SEARCH_CHOICES:
        raise UserInputError(
            f"{where} {value!r} is not a weight choice advisor can search",
            hint="none (the checkpoint as published), fp8, or auto (both side by side); "
            "for a checkpoint quantized another way (awq, gptq, …) give its config.json "
            "with --model")
    return v


#: model types vLLM will not run in float16 ("The model type 'gemma2' does not support
#: float16. Reason: Numerical instability. Please use bfloat16 or float32 instead."):
#: ``_FLOAT16_NOT_SUPPORTED_MODELS`` in vllm/config/model.py @ 0052a5b8 (vllm/config.py before
#: the config package, the same list less plamo2)
FLOAT16_REFUSED = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})

#: bfloat16 needs compute capability 8.0: ``CudaPlatformBase.supported_dtypes`` (vllm/platforms/
#: cuda.py) is [bfloat16, float16, float32] from 8.0, [float16, float32] from 6.0 ("Pascal, Volta
#: and Turing NVIDIA GPUs, BF16 is not supported")
BF16_MIN_CAPABILITY = 80


def served_dtype(model_type: str, checkpoint_dtype: str, architecture: str | None,
                 asked: str = "auto") -> str:
    """The dtype vLLM serves a checkpoint in on an NVIDIA GPU of ``architecture``.

    ``asked`` "auto" follows vLLM's ``_resolve_auto_dtype`` (vllm/config/model.py @ 0052a5b8):
    the GPU's dtypes less float16 for :data:`FLOAT16_REFUSED` types; a float32 checkpoint takes
    the first of them, another its own dtype where the GPU has it, else the first — so a
    bfloat16 Llama runs in float16 on a T4, but a bfloat16 Gemma 2 in float32 there. An explicit
    dtype the engine refuses raises UserInputError, in vLLM's words. Unknown architectures
    (AMD, a GPU outside :data:`ARCH_COMPUTE_CAPABILITY`) are taken to have all three.
    """
    from advisor.errors import UserInputError

    cc = ARCH_COMPUTE_CAPABILITY.get(architecture or "")
    have = (["bfloat16", "float16", "float32"] if cc is None or cc >= BF16_MIN_CAPABILITY
            else ["float16", "float32"])
    refused = model_type in FLOAT16_REFUSED
    if asked != "auto":
        if asked == "float16" and refused:
            raise UserInputError(f"vLLM does not run {model_type} models in float16 "
                                 "(numerical instability)",
                                 hint="give --dtype bfloat16 (compute capability 8.0 or newer) "
                                 "or float32")
        if asked not in have:
            raise UserInputError(f"vLLM runs bfloat16 on compute capability 8.0 or newer; "
                                 f"{architecture} GPUs are {(cc or 0) / 10:.1f}",
                                 hint="give --dtype float16 (or auto)")
        return asked
    usable = [d for d in have if not (refused and d == "float16")]
    if checkpoint_dtype == "float32" or checkpoint_dtype not in usable:
        return usable[0]
    return checkpoint_dtype


def dtype_refusal(model_type: str, checkpoint_dtype: str, architecture: str | None
                  ) -> str | None:
    """Why advisor does not rank or time a checkpoint on this GPU (None: it does): vLLM would
    serve it in float32 (:func:`served_dtype`: a Gemma 2 before Ampere, from bfloat16 or
    float32 weights alike), twice the weights and KV cache of 16 bits and no tensor-core path
    the kernel tables time."""
    if served_dtype(model_type, checkpoint_dtype, architecture) != "float32":
        return None
    return (f"vLLM serves {model_type} in float32 on {architecture} GPUs (no bfloat16 below "
            f"compute capability 8.0, and float16 refused for {model_type}: numerical "
            "instability): twice the memory, and advisor has no float32 timings")


#: the vLLM minor whose installed code (the lock venvs, tests/test_lock_install.py) the rules
#: marked "held for that minor" were read in: they say nothing of other releases
READ_MINOR = "0.11"


def read_in(vllm_version: str) -> bool:
    """Whether ``vllm_version`` is the minor those rules were read in (:data:`READ_MINOR`)."""
    return vllm_version.startswith(READ_MINOR + ".")


#: below compute capability 8.0 vLLM 0.11.0 runs every model's attention with FlexAttention
#: (platforms/cuda.py get_attn_backend_cls: "FlexAttention is the default for older GPUs";
#: V0 and its XFormers path are gone), whose FlexAttentionImpl.__init__ raises
#: "FlexAttention does not support logits soft cap yet" (v1/attention/backends/
#: flex_attention.py): a model with attention soft-capping (Gemma 2) does not start on a T4 or
#: V100, in any dtype. Read in 0.11.0 as installed from the lock; held for that minor.
FLEX_ATTENTION_BELOW = 80
#: the head sizes vLLM 0.11.0's FlashAttention backend takes (FlashAttentionBackend.
#: get_supported_head_sizes); from 8.0 on, a model of another head size (Phi-2's 80) runs on
#: FlexAttention instead ("Using FlexAttention backend for head_size=..."), unless an fp8 KV
#: cache or attention sinks send it to Triton first (off Hopper)
FA_HEAD_SIZES = (32, 64, 96, 128, 160, 192, 224, 256)
#: Hopper runs vLLM 0.11.0's FlashAttention as FA3 (attention/utils/fa_utils.py: version 3 on
#: major 9), and FlashAttentionImpl asks for the version without ``requires_alibi`` (the V0
#: fallback to FA2, vllm-project/vllm PR #15231, is not in V1), so an ALiBi model's first
#: forward fails "Alibi is not supported in FA3" (vllm_flash_attn/flash_attn_interface.py)
FA3_CAPABILITY = 90


class Refusal(NamedTuple):
    """Why vLLM will not start a model on a GPU: the ranking's label (``what``), the reason, and
    what would start it (fit's hint)."""

    what: str
    why: str
    hint: str


def attention_backend(spec: ModelSpec, cc: int | None, kv_fp8: bool,
                      vllm_version: str) -> str | None:
    """The attention backend vLLM ``vllm_version`` picks for a non-MLA model on a GPU of compute
    capability ``cc`` x 10 as advisor's lock installs it (no FlashInfer): FLEX_ATTENTION below
    8.0; TRITON_ATTN for an fp8 KV cache or attention sinks off Hopper; FLASH_ATTN for the
    head sizes of :data:`FA_HEAD_SIZES`; else FLEX_ATTENTION (platforms/cuda.py
    get_attn_backend_cls, read in 0.11.0). None: an MLA model, an unknown GPU or another
    minor."""
    if spec.mla is not None or cc is None or not read_in(vllm_version):
        return None
    if cc < FLEX_ATTENTION_BELOW:
        return "FLEX_ATTENTION"
    if (spec.attention_sinks or kv_fp8) and cc != FA3_CAPABILITY:
        return "TRITON_ATTN"
    return "FLASH_ATTN" if spec.head_dim in FA_HEAD_SIZES else "FLEX_ATTENTION"


def attention_refusal(spec: ModelSpec, cc: int | None, kv_fp8: bool,
                      vllm_version: str) -> Refusal | None:
    """Why the backend of :func:`attention_backend` will not start ``spec`` — its __init__ or
    first forward raises (v1/attention/backends/flex_attention.py, triton_attn.py,
    vllm_flash_attn) — with what would start it; or None."""
    backend = attention_backend(spec, cc, kv_fp8, vllm_version)
    if backend is None:
        return None
    assert cc is not None
    below = cc < FLEX_ATTENTION_BELOW
    where = (f"runs attention on compute capability {cc / 10:.1f} with FlexAttention" if below
             else f"runs head size {spec.head_dim} with FlexAttention (FlashAttention takes "
             f"{FA_HEAD_SIZES[0]}-{FA_HEAD_SIZES[-1]} in steps of 32)")
    # below 8.0 every model runs on FlexAttention; from 8.0 on only a head size no other
    # backend takes does, on every GPU
    elsewhere = ("pick an Ampere or newer GPU (compute capability 8.0+)" if below else
                 f"no GPU runs head size {spec.head_dim} on another backend in vLLM "
                 f"{vllm_version}: another model, or another --vllm-version")
    if backend == "FLEX_ATTENTION":
        if spec.attention_softcap:
            return Refusal("attention backend", f"vLLM {vllm_version} {where}, which has no "
                           "logits soft-capping (\"FlexAttention does not support logits soft "
                           "cap yet\")", elsewhere)
        if spec.attention_alibi:
            return Refusal("attention backend", f"vLLM {vllm_version} {where}, which has no "
                           "ALiBi (\"FlexAttention does not support alibi slopes yet\")",
                           elsewhere)
        if kv_fp8 and not below:  # below 8.0 kv_refusal says it first
            return Refusal("fp8 KV cache", f"vLLM {vllm_version} {where}, which has no fp8 KV "
                           "cache (\"FlexAttention does not support quantized kv-cache\")",
                           "--kv-cache-dtype auto")
    if backend == "FLASH_ATTN" and cc == FA3_CAPABILITY and spec.attention_alibi:
        return Refusal("attention backend", f"vLLM {vllm_version} runs attention on Hopper "
                       "with FlashAttention 3, which has no ALiBi (\"Alibi is not supported in "
                       "FA3\"; V1 does not fall back to FA2)",
                       "pick an Ampere, Ada or Blackwell GPU (FlashAttention 2 there takes "
                       "ALiBi)")
    if backend == "TRITON_ATTN" and spec.head_dim < 32:
        return Refusal("attention backend", f"vLLM {vllm_version} runs this model with Triton "
                       f"attention, which needs head size 32 or more (it has {spec.head_dim})",
                       "--kv-cache-dtype auto" if kv_fp8 and not spec.attention_sinks
                       else elsewhere)
    return None


def attention_note(spec: ModelSpec, cc: int | None, kv_fp8: bool,
                   vllm_version: str) -> str | None:
    """A line for a model vLLM ``vllm_version`` serves on FlexAttention from 8.0 on (a head size
    FlashAttention lacks): slower kernels than the FlashAttention ones advisor's figures are
    measured on."""
    if (cc is None or cc < FLEX_ATTENTION_BELOW
            or attention_backend(spec, cc, kv_fp8, vllm_version) != "FLEX_ATTENTION"):
        return None
    return (f"vLLM {vllm_version} runs head size {spec.head_dim} with FlexAttention "
            "(FlashAttention takes 32-256 in steps of 32): the latency figures assume "
            "FlashAttention, no FlexAttention run was measured")


#: an fp8 (e4m3) KV cache needs compute capability 8.9 from vLLM 0.11.0 on: with V0 gone, V1
#: stores and reads it with Triton attention kernels that cast to ``tl.float8e4nv``, which
#: Triton compiles only for 8.9 and newer ("type fp8e4nv not supported in this architecture":
#: vllm-project/vllm issue #26431, vLLM 0.11.0 on an RTX 3090, open; vllm-project/vllm PR
#: #45829, open in 2026-06, "SM75–SM88 have no native fp8e4nv cast ... fail at compile time",
#: adds a software cast). Until 0.11.0 vLLM fell back to its V0 engine and XFormers for it
#: ("Cannot use FlashAttention backend for FP8 KV cache. Using XFormers backend", logged on
#: vLLM 0.10.2), which served. An fp8_e5m2 cache takes the same Triton kernels there (they view
#: every fp8 cache as current_platform.fp8_dtype(), e4m3: vllm/v1/attention/backends/
#: triton_attn.py), so it is held to the same floor
KV_FP8_MIN_CAPABILITY = 89
KV_FP8_RULE_SINCE = "0.11.0"
#: checkpoints whose quantization config gives vLLM's attention layers a KV-cache method
#: (Fp8KVCacheMethod, ModelOptFp8KVCacheMethod, CompressedTensorsKVCacheMethod: fp8.py,
#: modelopt.py and compressed_tensors.py get_quant_method for Attention, read in vLLM 0.11.0
#: as installed from the lock); with one, Attention.__init__ raises "fp8_e5m2 kv-cache is not
#: supported with fp8 checkpoints" (vllm/attention/layer.py; the same error on vLLM 0.6,
#: vllm-project/vllm #8409). AWQ, GPTQ, bitsandbytes and fbgemm_fp8 give attention none.
KV_E5M2_REFUSED_METHODS = ("fp8", "modelopt", "nvfp4", "compressed-tensors")
#: Hopper runs an fp8 KV cache through FlashAttention 3 from vLLM 0.11.0 (platforms/cuda.py:
#: Triton for fp8 KV on 8.x other than 9.0), whose FlashAttentionBackend.
#: get_fp8_dtype_for_flashattn knows only "fp8"/"fp8_e4m3" and raises "Unrecognized FP8
#: dtype: fp8_e5m2" in the first step (v1/attention/backends/flash_attn.py, 0.11.0 as
#: installed). Elsewhere (Ada, Blackwell) vLLM 0.11.0 as advisor's lock installs it (no
#: FlashInfer: the lock leaves that extra out) stores an fp8 cache through its Triton backend,
#: whose triton_reshape_and_cache_flash writes every "fp8*" cache as current_platform.
#: fp8_dtype(), e4m3: an fp8_e5m2 cache serves, as e4m3 (:func:`kv_note`)
KV_E5M2_HOPPER_CAPABILITY = 90


def kv_refusal(kv_cache_dtype: str, checkpoint_kv: str | None, architecture: str | None,
               vllm_version: str, reads_checkpoint_kv: bool,
               method: str | None = None) -> str | None:
    """Why vLLM ``vllm_version`` will not serve this KV cache dtype on an NVIDIA GPU of
    ``architecture`` (None: it will, or advisor has no rule), per :data:`KV_FP8_MIN_CAPABILITY`;
    fp8_e5m2 also per :data:`KV_E5M2_REFUSED_METHODS` (the checkpoint's quantization
    ``method``) and :data:`KV_E5M2_HOPPER_CAPABILITY`. ``kv_cache_dtype`` "auto" is the
    checkpoint's own (``checkpoint_kv``) where the release reads it (``reads_checkpoint_kv``)."""
    from advisor.core.engine import parse_version

    kv = kv_cache_dtype
    if kv == "auto":
        kv = "fp8" if checkpoint_kv == "fp8" and reads_checkpoint_kv else "auto"
    cc = ARCH_COMPUTE_CAPABILITY.get(architecture or "")
    since = parse_version(vllm_version) >= parse_version(KV_FP8_RULE_SINCE)
    if kv == "fp8_e5m2":
        m = (method or "").lower()
        if any(m == x or m.startswith(x + "-") for x in KV_E5M2_REFUSED_METHODS):
            return (f"vLLM refuses an fp8_e5m2 KV cache for a checkpoint quantized by {method}, "
                    "whose attention carries KV-cache scales (\"fp8_e5m2 kv-cache is not "
                    "supported with fp8 checkpoints\")")
        if since and cc == KV_E5M2_HOPPER_CAPABILITY:
            return (f"vLLM {vllm_version} stores an fp8 KV cache on {architecture} GPUs through "
                    "FlashAttention 3, which reads e4m3 only (\"Unrecognized FP8 dtype: "
                    "fp8_e5m2\")")
    if (kv not in ("fp8", "fp8_e4m3", "fp8_e5m2") or cc is None
            or cc >= KV_FP8_MIN_CAPABILITY or not since):
        return None
    own = " (the checkpoint's)" if kv_cache_dtype == "auto" else ""
    return (f"an fp8 KV cache{own} needs compute capability 8.9 in vLLM {vllm_version} "
            f"(Triton's fp8e4nv cast, vllm-project/vllm #26431); {architecture} GPUs are "
            "below it")


def kv_note(kv_cache_dtype: str, architecture: str | None, vllm_version: str) -> str | None:
    """What an fp8_e5m2 cache becomes where vLLM ``vllm_version`` serves it through Triton
    (:data:`KV_E5M2_HOPPER_CAPABILITY`'s note; the rule read in 0.11.0, held for that minor)."""
    cc = ARCH_COMPUTE_CAPABILITY.get(architecture or "")
    if (kv_cache_dtype != "fp8_e5m2" or cc is None or cc < KV_FP8_MIN_CAPABILITY
            or cc == KV_E5M2_HOPPER_CAPABILITY or not read_in(vllm_version)):
        return None
    return (f"vLLM {vllm_version} as advisor installs it (no FlashInfer) keeps an fp8 KV cache "
            f"on {architecture} GPUs in its Triton backend, which stores every fp8 cache as "
            "e4m3: fp8_e5m2 is served as --kv-cache-dtype fp8 is (e4m3, scale 1.0)")


def capability(gpu: Gpu) -> int | None:
    """A GPU's compute capability x 10: the catalog's figure (one architecture name can cover
    several: B200 10.0, RTX PRO 6000 Blackwell 12.0), else its architecture's
    (:data:`ARCH_COMPUTE_CAPABILITY`)."""
    if gpu.compute_capability is not None:
        return int(round(gpu.compute_capability * 10))
    return ARCH_COMPUTE_CAPABILITY.get(gpu.architecture or "")


#: vLLM 0.11.0 picks an MLA model's attention by compute capability (platforms/cuda.py,
#: get_attn_backend_cls with use_mla, and check_and_update_config, which forces the block
#: size): CUTLASS MLA on exactly 10.0 (is_device_capability(100): B200, GB200), FlashMLA on
#: 9.x (is_flashmla_supported: major 9 and vllm._flashmla_C, which the wheel ships), Triton
#: MLA elsewhere (FlashAttention's MLA is Hopper's, and FlashMLA is tried first there) — and
#: TritonMLAImpl.__init__ raises "TritonMLA V1 with FP8 KV cache not yet supported"
#: (v1/attention/backends/mla/triton_mla.py): an fp8 KV cache of an MLA model starts on
#: these only. Read in 0.11.0 as installed from the lock; held for that minor.
MLA_FP8_KV_CAPABILITIES = (90, 100)


def mla_kv_refusal(kv_cache_dtype: str, checkpoint_kv: str | None, cc: int | None,
                   gpu: str, vllm_version: str, reads_checkpoint_kv: bool) -> str | None:
    """Why vLLM ``vllm_version`` will not start an MLA model with this KV cache dtype on a GPU
    of compute capability ``cc`` x 10 (None: it will, or advisor has no rule), per
    :data:`MLA_FP8_KV_CAPABILITIES`. "auto" is the checkpoint's own where the release reads it."""
    if (not kv_is_fp8(kv_cache_dtype, checkpoint_kv, reads_checkpoint_kv) or cc is None
            or cc in MLA_FP8_KV_CAPABILITIES or not read_in(vllm_version)):
        return None
    own = " (the checkpoint's)" if kv_cache_dtype == "auto" else ""
    return (f"vLLM {vllm_version} runs MLA attention on {gpu} (compute capability "
            f"{cc / 10:.1f}) through Triton MLA, which has no fp8 KV cache{own} (\"TritonMLA "
            "V1 with FP8 KV cache not yet supported\"); FlashMLA (9.x) and CUTLASS MLA (10.0) "
            "have one")


def serving_refusal(spec: ModelSpec, gpu: Gpu, kv_cache_dtype: str, vllm_version: str,
                    reads_checkpoint_kv: bool) -> Refusal | None:
    """Why vLLM ``vllm_version`` will not start ``spec`` on ``gpu`` with this KV cache dtype —
    "attention backend" (:func:`attention_refusal`: soft-capping or ALiBi where the backend
    has none) or "fp8 KV cache" (:func:`kv_refusal`, :func:`mla_kv_refusal`, FlexAttention's),
    each with its hint — or None: the checks fit and the ranking both make, in one order."""
    cc = capability(gpu)
    q = spec.quantization
    method = q.method if q else None
    checkpoint_kv = q.kv_cache_dtype if q else None
    kv_fp8 = kv_is_fp8(kv_cache_dtype, checkpoint_kv, reads_checkpoint_kv)
    backend = attention_refusal(spec, cc, kv_fp8, vllm_version)
    if backend and backend.what == "attention backend":
        return backend
    no = kv_refusal(kv_cache_dtype, checkpoint_kv, gpu.architecture, vllm_version,
                    reads_checkpoint_kv, method)
    if no:
        e4m3_ok = kv_refusal("fp8", None, gpu.architecture, vllm_version, False,
                             method) is None
        return Refusal("fp8 KV cache", no, (
            "--kv-cache-dtype fp8 (e4m3) or auto" if kv_cache_dtype == "fp8_e5m2" and e4m3_ok
            else ("--kv-cache-dtype auto (the model's dtype), or "
                  if kv_cache_dtype != "auto" else "") + "an Ada, Hopper or Blackwell GPU"))
    if spec.mla is not None and (no := mla_kv_refusal(kv_cache_dtype, checkpoint_kv, cc, gpu.id,
                                                      vllm_version, reads_checkpoint_kv)):
        return Refusal("fp8 KV cache", no, "--kv-cache-dtype auto, or an H100, H200 or B200")
    return backend  # FlexAttention's fp8 KV cache, or None


def kv_is_fp8(kv_cache_dtype: str, checkpoint_kv: str | None, reads_checkpoint_kv: bool) -> bool:
    """Whether the KV cache is fp8: asked for, or "auto" of an fp8-KV checkpoint where the
    release reads its scales."""
    if kv_cache_dtype == "auto":
        return checkpoint_kv == "fp8" and reads_checkpoint_kv
    return kv_cache_dtype.startswith("fp8")


#: vLLM 0.11.0 as advisor pins it runs NVFP4 experts (ModelOpt and compressed-tensors) on
#: compute capability 10.0 and newer through cutlass_moe_fp4 — its FlashInfer path needs
#: VLLM_USE_FLASHINFER_MOE_FP4 and the flashinfer extra, which the lock leaves out
#: (flashinfer_fp4_moe.is_flashinfer_fp4_cutlass_moe_available; nvfp4_moe_support.py) — and
#: cutlass_moe_fp4 asserts "Expert Parallelism / expert_map is currently not supported for
#: ModelOptNvFp4FusedMoE's cutlass_moe_fp4" (fused_moe/cutlass_moe.py; the compressed-tensors
#: method the same for CompressedTensorsW4A4MoeMethod). Below 10.0 they run on Marlin, which
#: takes an expert map. Read in the installed 0.11.0; held for that minor only.
EP_REFUSED_METHODS = ("nvfp4", "compressed-tensors-fp4")
EP_REFUSED_FROM_CAPABILITY = 100


def expert_parallel_refusal(method: str | None, architecture: str | None,
                            vllm_version: str) -> str | None:
    """Why vLLM ``vllm_version`` will not run a checkpoint quantized by ``method`` with
    --enable-expert-parallel on an NVIDIA GPU of ``architecture`` (None: it will, or advisor
    has no rule), per :data:`EP_REFUSED_METHODS`."""
    cc = ARCH_COMPUTE_CAPABILITY.get(architecture or "")
    if ((method or "").lower() not in EP_REFUSED_METHODS or cc is None
            or cc < EP_REFUSED_FROM_CAPABILITY
            or not read_in(vllm_version)):
        return None
    return (f"vLLM {vllm_version} runs {method} experts on {architecture} GPUs through "
            "cutlass_moe_fp4, which has no expert parallelism (\"Expert Parallelism / "
            "expert_map is currently not supported\"; its FlashInfer path is an extra "
            "advisor's lock leaves out)")


def method_refusal(method: str | None, architecture: str | None) -> str | None:
    """Why vLLM will not start a checkpoint quantized by ``method`` on an NVIDIA GPU of
    ``architecture`` (None: it will, or advisor has no rule for the pair), per
    :data:`METHOD_MIN_CAPABILITY`."""
    need = METHOD_MIN_CAPABILITY.get((method or "").lower())
    have = ARCH_COMPUTE_CAPABILITY.get(architecture or "")
    if need is None or have is None or have >= need:
        return None
    return (f"vLLM serves {method} checkpoints on compute capability {need / 10:.1f} or newer; "
            f"{architecture} GPUs are {have / 10:.1f}")


def architectures_for(method: str | None) -> list[str]:
    """The NVIDIA architectures vLLM serves ``method`` on (every one where it has no floor)."""
    need = METHOD_MIN_CAPABILITY.get((method or "").lower(), 0)
    return [a for a, cc in ARCH_COMPUTE_CAPABILITY.items() if cc >= need]


def refusal(weights: Weights, architecture: str | None, fp8_tflops: float | None,
            method: str | None = None) -> str | None:
    """Why a GPU cannot run ``weights`` in vLLM (None: it can), per the module's evidence;
    ``method``: the quantization of the checkpoint as published (served as is)."""
    if weights.scheme != "fp8":
        return method_refusal(method, architecture)
    if weights.source in NEEDS_FP8_CORES and not fp8_tflops:
        return (f"the {weights.source} fp8 checkpoint {weights.checkpoint} needs fp8 tensor "
                f"cores (Ada, Hopper, Blackwell); {architecture or 'this GPU'} has none")
    if fp8_tflops or architecture in MARLIN_FP8:
        return None
    return (f"fp8 weights need fp8 tensor cores (Ada, Hopper, Blackwell) or FP8 Marlin "
            f"(Ampere) in vLLM; {architecture or 'this GPU'} has neither")


def kernel_for(weights: Weights, fp8_tflops: float | None) -> str | None:
    if weights.scheme != "fp8":
        return None
    return "W8A8" if fp8_tflops else "W8A16 via FP8 Marlin"


def load_gib(weights: Weights, own_weights_gib: float) -> float | None:
    """GiB of weights the whole model holds while vLLM loads it, where that is more than the
    served size: on-the-fly fp8 loads the checkpoint's own precision first (None otherwise)."""
    return own_weights_gib if weights.source == "on-the-fly" else None


def options(choice: str, spec: ModelSpec, alias: ModelAlias | None
            ) -> list[tuple[Weights, str | None]]:
    """(weights, the sizer's quantization override) for each option ``choice`` asks for:
    none -> the checkpoint as published; fp8 -> a published fp8 checkpoint the catalog knows
    (preferred: no full-precision load, calibrated by its publisher), else on-the-fly fp8;
    auto -> both. A checkpoint already at 8 bits or fewer offers only itself."""
    own = Weights(scheme="as published", source=(spec.quantization.method if spec.quantization
                                                  else spec.torch_dtype),
                  accuracy="the published checkpoint: no quantization delta")
    out: list[tuple[Weights, str | None]] = []
    if choice in ("none", "auto"):
        out.append((own, None))
    already = spec.quantization is not None and spec.quantization.bytes_per_weight <= 1.0
    if choice in ("fp8", "auto") and not already:
        # a published checkpoint first (no full-precision load, calibrated by its publisher);
        # on-the-fly fp8 as well, for the GPUs a checkpoint's format does not run on (the
        # ranking keeps one fp8 offer per instance, the checkpoint's where both fit)
        for c in (alias.quantized if alias else []):
            if c.scheme == "fp8":
                out.append((Weights(scheme="fp8", checkpoint=c.hf_id, source=c.format,
                                    accuracy=c.accuracy or "no published accuracy delta found "
                                    f"for {c.hf_id} (see catalogs/models/index.yaml)",
                                    source_url=c.sources["default"].source), c.format))
        out.append((Weights(scheme="fp8", source="on-the-fly", vllm_quantization="fp8",
                            accuracy=ONLINE_FP8_ACCURACY), "fp8"))
    if not out:  # fp8 asked of a checkpoint already at 8 bits or fewer: it is its own answer
        out.append((own, None))
    return out
