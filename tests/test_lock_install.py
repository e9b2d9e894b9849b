"""The vLLM lock, really installed, serves what advisor renders.

tools/prove_lock.sh installs a lock from real PyPI into /var/tmp/advisor-lock/venv-<sha256 of the
lock>[:12] with the image's Python and Ubuntu 22.04's pip 22.0.2, exactly as cloud-init does
(``pip install --require-hashes --no-deps -r LOCK``); .ci/run builds it. These tests then run
inside that venv, on the CPU, with no network and no Hub:

- vLLM's OpenAI server imports;
- vLLM's get_tokenizer() loads a tokenizer made here and encodes/decodes with it — the call that
  dies with transformers 5.x (vllm-project/vllm#30466), which the lock rules out;
- the same call with transformers 5 put first on PYTHONPATH dies with the issue's AttributeError;
- every flag advisor's launcher passes to ``vllm serve`` (read from templates/vllm-launch.sh, so a
  flag added there is checked here) exists in the pinned vLLM's real argument parser, and the
  ``ray start`` flags in ``ray``'s CLI; ``--numa-bind`` is absent in 0.11.0, as advisor's engine
  rules say.

CPU: importing vLLM needs no GPU (it runs on its UnspecifiedPlatform), but building the ``serve``
parser asks the platform for a device type, and the CUDA platform cannot load without libcuda.
The parser script therefore names vLLM's CPU platform; the flags come from the same EngineArgs
dataclass on every platform.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
from pathlib import Path

import pytest

import advisor
from advisor.core.engine import profile

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("ADVISOR_LOCK_CACHE", "/var/tmp/advisor-lock"))
LAUNCHER = ROOT / "templates" / "vllm-launch.sh"
VLLM = "0.11.0"
MARKER = ".advisor-lock-ok"


def _venv(lock: str) -> Path:
    key = hashlib.sha256((ROOT / "locks" / lock).read_bytes()).hexdigest()[:12]
    return CACHE / f"venv-{key}"


def _python(lock: str) -> Path:
    venv = _venv(lock)
    if not (venv / MARKER).is_file():
        pytest.skip(f"no installed lock venv at {venv} (its marker {MARKER} is missing): "
                    f"run `bash tools/prove_lock.sh locks/{lock}` (real PyPI, ~10 GB, 3-6 min; too "
                    "long for .ci/run's 10 minutes, so run by hand)")
    return venv / "bin" / "python"


LOCKS = [pytest.param("vllm-0.11.0-cp310.txt", id="cp310"),
         pytest.param("vllm-0.11.0-cp311.txt", id="cp311")]


def _run(python: Path, script: str, *args: str, tmp_path: Path,
         vllm_cache: Path | None = None) -> dict:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "CUDA_VISIBLE_DEVICES": "", "HF_HOME": str(tmp_path / "hf")}
    if vllm_cache is not None:
        env["VLLM_CACHE_ROOT"] = str(vllm_cache)
    r = subprocess.run([str(python), "-c", script, *args], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# --- what the launcher renders --------------------------------------------------------------


def launcher_vllm_flags(text: str) -> set[str]:
    """Every ``--flag`` the launcher can put on a ``vllm serve`` line: the flags after ``serve``
    in each array that runs ``.../bin/vllm serve``, and those of the arrays expanded after it
    (``"${extra[@]}"``). numactl's flags come before the binary; ray's arrays run ``ray``."""
    arrays: dict[str, list[str]] = {}
    # assignments and appends alike: extra=(…) and extra+=(…)
    for name, body in re.findall(r"(?<![\w+])(\w+)\+?=\((.*?)\)", text, re.S):
        arrays.setdefault(name, []).append(body)
    flags: set[str] = set()
    for bodies in arrays.values():
        for body in bodies:
            if '/bin/vllm" serve' not in body:
                continue
            after = body.split('/bin/vllm" serve', 1)[1]
            flags |= set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", after))
            for ref in re.findall(r"\$\{(\w+)\[@\]\}", after):
                for ref_body in arrays.get(ref, []):
                    flags |= set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", ref_body))
    return flags


def launcher_ray_flags(text: str) -> set[str]:
    flags: set[str] = set()
    for body in re.findall(r"(?<![\w+])\w+=\((.*?)\)", text, re.S):
        if '/bin/ray" start' in body:
            after = body.split('/bin/ray" start', 1)[1]
            flags |= set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", after))
    return flags


def test_the_launcher_flags_are_read_off_the_template():
    """Runs without the venv: the parse itself, pinned to today's launcher."""
    text = LAUNCHER.read_text()
    assert launcher_vllm_flags(text) == {
        "--host", "--port", "--tensor-parallel-size", "--max-model-len",
        "--gpu-memory-utilization", "--pipeline-parallel-size", "--distributed-executor-backend",
        "--numa-bind", "--quantization", "--kv-cache-dtype", "--cpu-offload-gb",
        "--enable-expert-parallel"}
    assert launcher_ray_flags(text) == {"--head", "--port", "--num-gpus", "--disable-usage-stats",
                                        "--block", "--address"}


#: flags that exist only from some release on; the rest must exist in every locked release
GATED = {"--numa-bind": "numa_bind_flag"}
#: a value per flag, to parse a whole rendered line (a new flag without one is only looked up)
SAMPLE = {"--host": "127.0.0.1", "--port": "8000", "--tensor-parallel-size": "4",
          "--max-model-len": "8192", "--gpu-memory-utilization": "0.9",
          "--pipeline-parallel-size": "2", "--distributed-executor-backend": "ray",
          "--kv-cache-dtype": "fp8", "--cpu-offload-gb": "2"}
#: flags the launcher passes without a value
SWITCHES = ("--enable-expert-parallel",)

PARSER = r"""
import json, sys
import vllm.platforms as platforms
from vllm.platforms.cpu import CpuPlatform
platforms._current_platform = CpuPlatform()  # a device type for EngineArgs' defaults; no GPU here
from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
options = sorted({o for a in parser._actions for o in a.option_strings})
line = json.loads(sys.argv[1])
ns = vars(parser.parse_args(["--model", "org/model", *line]))
print(json.dumps({"options": options,
                  "parsed": {k: ns[k] for k in ("host", "port", "tensor_parallel_size",
                             "max_model_len", "gpu_memory_utilization", "pipeline_parallel_size",
                             "distributed_executor_backend", "enable_expert_parallel")}}))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_every_flag_the_launcher_renders_exists_in_the_pinned_vllm(lock, tmp_path):
    python = _python(lock)
    flags = launcher_vllm_flags(LAUNCHER.read_text())
    line = [x for f in sorted(SAMPLE) if f in flags for x in (f, SAMPLE[f])]
    line += [f for f in SWITCHES if f in flags]
    out = _run(python, PARSER, json.dumps(line), tmp_path=tmp_path)
    options = set(out["options"])
    engine = profile(VLLM)
    for flag in sorted(flags):
        if flag in GATED:
            assert getattr(engine, GATED[flag]) is False, flag
            assert flag not in options, f"vLLM {VLLM} has {flag}: update advisor.core.engine"
        else:
            assert flag in options, f"vllm serve {VLLM} has no {flag}"
    assert out["parsed"] == {"host": "127.0.0.1", "port": 8000, "tensor_parallel_size": 4,
                             "max_model_len": 8192, "gpu_memory_utilization": 0.9,
                             "pipeline_parallel_size": 2, "distributed_executor_backend": "ray",
                             "enable_expert_parallel": True}


@pytest.mark.parametrize("lock", LOCKS)
def test_every_ray_start_flag_exists(lock, tmp_path):
    """vLLM 0.11.0 itself needs ray (ray[cgraph]), so the serving lock has its CLI too."""
    python = _python(lock)
    r = subprocess.run([str(python.parent / "ray"), "start", "--help"], capture_output=True,
                       text=True, timeout=300, env={"PATH": "/usr/bin:/bin",
                                                    "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-2000:]
    for flag in sorted(launcher_ray_flags(LAUNCHER.read_text())):
        assert re.search(rf"(?<![\w-]){flag}\b", r.stdout), f"ray start has no {flag}"


# --- the server imports, and the tokenizer path that transformers 5 breaks works ------------

IMPORTS = r"""
import json
import vllm.entrypoints.openai.api_server  # noqa: F401  the `vllm serve` server
import torch, transformers, vllm
print(json.dumps({"vllm": vllm.__version__, "torch": torch.__version__,
                  "cuda": torch.version.cuda, "transformers": transformers.__version__}))
"""

TOKENIZER = r"""
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
folder = Path(sys.argv[1])
folder.mkdir()
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
text = ["the quick brown fox jumps over the lazy dog", "vllm serves models on numa nodes"] * 50
tok.train_from_iterator(text, trainers.BpeTrainer(
    vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tok.save(str(folder / "tokenizer.json"))
(folder / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
    "unk_token": "<unk>", "model_max_length": 2048}))
(folder / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 300}))

from vllm.transformers_utils.tokenizer import get_tokenizer
t = get_tokenizer(str(folder))
ids = t.encode("the lazy fox serves models", add_special_tokens=False)
print(json.dumps({"class": type(t).__name__, "ids": ids,
                  "text": t.decode(ids, skip_special_tokens=True),
                  "extended": [str(x) for x in t.all_special_tokens_extended]}))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_the_server_imports_and_pins_what_the_lock_says(lock, tmp_path):
    python = _python(lock)
    out = _run(python, IMPORTS, tmp_path=tmp_path)
    text = (ROOT / "locks" / lock).read_text()
    assert out["vllm"] == VLLM
    assert f"torch=={out['torch'].split('+')[0]} " in text
    assert out["cuda"] == "12.8"  # the CUDA the pairing table checks the image's driver against
    assert out["transformers"].startswith("4.")


@pytest.mark.parametrize("lock", LOCKS)
def test_get_tokenizer_works_on_a_local_tokenizer(lock, tmp_path):
    python = _python(lock)
    out = _run(python, TOKENIZER, str(tmp_path / "tok"), tmp_path=tmp_path)
    assert out["class"].startswith("Cached")  # through get_cached_tokenizer, the #30466 path
    assert len(out["ids"]) >= 3
    assert out["text"] == "the lazy fox serves models"
    assert {"<s>", "</s>", "<unk>"} <= set(out["extended"])


@pytest.mark.parametrize("lock", LOCKS)
def test_the_failure_the_lock_prevents_is_in_the_pinned_source(lock):
    """vllm-project/vllm#30466: transformers 5 dropped ``all_special_tokens_extended``, which
    vLLM 0.11.0's get_cached_tokenizer reads on every tokenizer; the lock keeps transformers 4."""
    venv = _python(lock).parent.parent
    (src,) = venv.glob("lib/python3.*/site-packages/vllm/transformers_utils/tokenizer.py")
    code = src.read_text()
    cached = code.split("def get_cached_tokenizer", 1)[1].split("\ndef ", 1)[0]
    assert "tokenizer.all_special_tokens_extended" in cached
    assert "get_cached_tokenizer(tokenizer)" in code.split("def get_tokenizer(", 1)[1]
    (dist,) = venv.glob("lib/python3.*/site-packages/transformers-*.dist-info")
    assert dist.name.startswith("transformers-4."), dist.name


@pytest.mark.parametrize("lock", LOCKS)
def test_transformers_5_over_the_lock_breaks_get_tokenizer(lock, tmp_path):
    """The failure itself: the same venv with transformers 5 (tools/prove_lock.sh installs it
    beside the venv, never into it) first on PYTHONPATH, and the same get_tokenizer call dies as
    in vllm-project/vllm#30466. What the lock's transformers<5 pin is for."""
    python = _python(lock)
    overlay = python.parent.parent / "transformers5"
    if not (overlay / ".ok").is_file():
        pytest.skip(f"no transformers 5 overlay at {overlay}: run tools/prove_lock.sh again")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(overlay)}
    r = subprocess.run([str(python), "-c", TOKENIZER, str(tmp_path / "tok")], env=env,
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode != 0, r.stdout[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("AttributeError: ") and "all_special_tokens_extended" in last, last
    assert "get_cached_tokenizer" in r.stderr


@pytest.mark.parametrize("lock", LOCKS)
def test_the_install_was_measured(lock):
    """What tools/prove_lock.sh recorded (the README quotes install time and size)."""
    venv = _python(lock).parent.parent
    proof = json.loads((venv / "advisor-lock-proof.json").read_text())
    data = (ROOT / "locks" / lock).read_bytes()
    assert proof["lock_sha256"] == hashlib.sha256(data).hexdigest()
    assert proof["pip"] == "22.0.2" and proof["pip_check"] == "No broken requirements found."
    assert proof["vllm"] == VLLM and proof["transformers"].startswith("4.")
    assert proof["install_seconds"] > 0 and proof["venv_bytes"] > 1e9


# --- advisor's refusals against the pinned vLLM's own code ------------------------------------

RULES = r"""
import json
import vllm.platforms as platforms
from vllm.platforms.cpu import CpuPlatform
platforms._current_platform = CpuPlatform()
from vllm.config.model import _FLOAT16_NOT_SUPPORTED_MODELS
from vllm.model_executor.layers.quantization import get_quantization_config
from vllm.model_executor.layers.quantization.compressed_tensors import schemes as S
methods = ("mxfp4", "modelopt_fp4", "modelopt", "fp8", "fbgemm_fp8", "awq", "awq_marlin",
           "gptq_marlin", "gptq", "bitsandbytes")
print(json.dumps({
    "float16_refused": sorted(_FLOAT16_NOT_SUPPORTED_MODELS),
    "methods": {m: get_quantization_config(m).get_min_capability() for m in methods},
    "ct": {n: getattr(S, n).get_min_capability() for n in (
        "CompressedTensorsWNA16", "CompressedTensorsW8A8Int8", "CompressedTensorsW8A8Fp8",
        "CompressedTensorsW8A16Fp8", "CompressedTensorsW4A4Fp4", "CompressedTensorsW4A16Fp4")}}))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_the_gpu_floors_are_the_pinned_vllms_own(lock, tmp_path):
    """advisor.core.weights' tables, read off the installed vLLM: each method's
    get_min_capability(), the compressed-tensors schemes (a scheme whose kernel needs more
    falls back: W8A8 FP8 to W8A16 FP8, W4A4 NVFP4 to W4A16 FP4), and the model types vLLM
    refuses in float16. A new pinned release that moves one fails here."""
    from advisor.core.weights import FLOAT16_REFUSED, METHOD_MIN_CAPABILITY

    out = _run(_python(lock), RULES, tmp_path=tmp_path)
    assert set(out["float16_refused"]) == FLOAT16_REFUSED
    ours = {"modelopt_fp4": METHOD_MIN_CAPABILITY["nvfp4"]} | {
        m: METHOD_MIN_CAPABILITY[m] for m in out["methods"] if m in METHOD_MIN_CAPABILITY}
    assert out["methods"] == ours
    ct = out["ct"]
    assert METHOD_MIN_CAPABILITY["compressed-tensors-w4"] == ct["CompressedTensorsWNA16"]
    assert METHOD_MIN_CAPABILITY["compressed-tensors-w8"] == min(
        ct["CompressedTensorsW8A8Int8"], ct["CompressedTensorsWNA16"])
    assert METHOD_MIN_CAPABILITY["compressed-tensors-fp8"] == min(
        ct["CompressedTensorsW8A8Fp8"], ct["CompressedTensorsW8A16Fp8"])
    assert METHOD_MIN_CAPABILITY["compressed-tensors-fp4"] == min(
        ct["CompressedTensorsW4A4Fp4"], ct["CompressedTensorsW4A16Fp4"])


EXPERT_PARALLEL = r"""
import json
import vllm.platforms as platforms
from vllm.platforms.cpu import CpuPlatform
platforms._current_platform = CpuPlatform()
import vllm.model_executor.layers.fused_moe.config as C
from vllm.model_executor.layers.fused_moe.layer import determine_expert_map
from vllm.config import ParallelConfig
C.get_tensor_model_parallel_rank = lambda: 3  # no process group here: rank 3 of the TP group
def make(ep):
    p = C.FusedMoEParallelConfig.make(tp_size_=8, dp_size_=1,
                                      vllm_parallel_config=ParallelConfig(
                                          tensor_parallel_size=8, enable_expert_parallel=ep))
    return {"tp_size": p.tp_size, "ep_size": p.ep_size, "all2all": p.use_all2all_kernels}
print(json.dumps({"ep": make(True), "tp": make(False),
                  "local": {str(e): [determine_expert_map(8, r, e)[0] for r in range(8)]
                            for e in (128, 60)}}))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_expert_parallel_is_the_pinned_vllms_own(lock, tmp_path):
    """What advisor assumes of --enable-expert-parallel, read off the installed vLLM: at TP 8
    without data parallel the fused-MoE layer is not TP-sharded (tp_size 1: whole experts, so
    a 1536-wide block-fp8 expert is not split into 192-column slices), the EP group is the TP
    group, no all-to-all kernels run (the output is all-reduced as under TP, so the step model
    times it as TP), and the fullest GPU holds ceil(E / 8) experts."""
    from advisor.core.model import MoE

    out = _run(_python(lock), EXPERT_PARALLEL, tmp_path=tmp_path)
    assert out["ep"] == {"tp_size": 1, "ep_size": 8, "all2all": False}
    assert out["tp"] == {"tp_size": 8, "ep_size": 1, "all2all": False}
    spec = advisor.model_spec("qwen3-235b-a22b-fp8")
    for e, local in out["local"].items():
        s = spec.model_copy(update={"moe": MoE(num_experts=int(e), experts_per_token=8,
                                               expert_intermediate_size=1536)})
        assert sum(local) == int(e) and s.experts_per_gpu(8) == max(local)


E5M2 = r"""
import inspect, json
import vllm.platforms as platforms
from vllm.platforms.cpu import CpuPlatform
platforms._current_platform = CpuPlatform()
from vllm.model_executor.layers.quantization import get_quantization_config
from vllm.attention.layer import Attention
from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend as FA
out = {"guard": "fp8_e5m2 kv-cache is not supported with "
                in inspect.getsource(Attention.__init__)}
try:
    FA.get_fp8_dtype_for_flashattn("fp8_e5m2")
    out["fa_e5m2"] = "accepted"
except ValueError as e:
    out["fa_e5m2"] = str(e)
out["fa_fp8"] = str(FA.get_fp8_dtype_for_flashattn("fp8"))
from vllm.attention.ops import triton_reshape_and_cache_flash as T
store = inspect.getsource(T.triton_reshape_and_cache_flash)
# the Triton store takes the platform's one fp8 dtype for any "fp8*" cache string
out["triton_store"] = ("current_platform.fp8_dtype() if" in store
                       and 'kv_cache_dtype.startswith("fp8")' in store)
out["kv_method"] = {m: "KVCacheMethod" in inspect.getsource(
    get_quantization_config(m).get_quant_method) for m in (
    "fp8", "modelopt", "modelopt_fp4", "compressed-tensors", "awq", "gptq", "fbgemm_fp8",
    "bitsandbytes", "awq_marlin", "gptq_marlin")}
print(json.dumps(out))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_the_fp8_e5m2_rules_are_the_pinned_vllms_own(lock, tmp_path):
    """advisor.core.weights' fp8_e5m2 rules, read off the installed vLLM: the attention layer
    refuses e5m2 beside a quantization config that gives attention a KV-cache method (fp8,
    ModelOpt fp8 and NVFP4, compressed-tensors; not AWQ, GPTQ, fbgemm_fp8, bitsandbytes), and
    FlashAttention (Hopper's fp8-KV backend in 0.11.0) knows e4m3 only."""
    from advisor.core.weights import KV_E5M2_REFUSED_METHODS

    out = _run(_python(lock), E5M2, tmp_path=tmp_path)
    assert out["guard"] is True
    assert out["fa_e5m2"] == "Unrecognized FP8 dtype: fp8_e5m2"
    assert out["fa_fp8"] == "torch.float8_e4m3fn"
    assert out["triton_store"] is True  # weights.kv_note: e5m2 through Triton is e4m3
    ours = {"modelopt_fp4": "nvfp4"}
    for m, has in out["kv_method"].items():
        name = ours.get(m, m)
        assert (name in KV_E5M2_REFUSED_METHODS) == has, m


EP_NVFP4 = r"""
import importlib.util, inspect, json, re
import vllm.platforms as platforms
from vllm.platforms.cpu import CpuPlatform
platforms._current_platform = CpuPlatform()
import vllm.envs as envs
from vllm.model_executor.layers.fused_moe.cutlass_moe import cutlass_moe_fp4
from vllm.model_executor.layers.quantization.utils import flashinfer_fp4_moe
print(json.dumps({
    # the message's string literals joined as Python joins them
    "asserts": "expert_map is currently not supported" in re.sub(
        r'"\s+"', "", inspect.getsource(cutlass_moe_fp4)),
    "flashinfer_needs_env": "VLLM_USE_FLASHINFER_MOE_FP4" in inspect.getsource(
        flashinfer_fp4_moe.is_flashinfer_fp4_cutlass_moe_available),
    "env_default": envs.VLLM_USE_FLASHINFER_MOE_FP4,
    "flashinfer_installed": importlib.util.find_spec("flashinfer") is not None}))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_nvfp4_experts_have_no_expert_parallelism_on_blackwell_in_the_lock(lock, tmp_path):
    """advisor.core.weights.expert_parallel_refusal, read off the installed vLLM: the CUTLASS
    NVFP4 MoE kernel (compute capability 10.0+) refuses an expert map, and the FlashInfer path
    that takes one needs an environment variable that is off by default and a package the lock
    does not install."""
    out = _run(_python(lock), EP_NVFP4, tmp_path=tmp_path)
    assert out == {"asserts": True, "flashinfer_needs_env": True, "env_default": False,
                   "flashinfer_installed": False}


ARCH_ERRORS = r"""
import json
from vllm.model_executor.models.registry import ModelRegistry
out = {}
for arch in ("MiniMaxM2ForCausalLM", "Phi3SmallForCausalLM"):
    try:
        ModelRegistry._raise_for_unsupported([arch])
    except ValueError as exc:
        out[arch] = str(exc)[:120]
import inspect
from vllm.transformers_utils import config as C
# an unknown model type, read without --trust-remote-code: AutoConfig's error, re-raised so
out["config"] = "Failed to load the model config" in inspect.getsource(C.HFConfigParser.parse)
print(json.dumps(out))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_the_architecture_list_is_the_pinned_vllms_own(lock, tmp_path):
    """locks/vllm-0.11.0-architectures.json (advisor.core.archs) is what tools/
    vllm_architectures.py reads off the installed vLLM and transformers now, and the errors
    advisor quotes for a model outside it are the installed registry's."""
    python = _python(lock)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "CUDA_VISIBLE_DEVICES": "", "HF_HOME": str(tmp_path / "hf")}
    r = subprocess.run([str(python), str(ROOT / "tools" / "vllm_architectures.py"), "--print"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    shipped = (ROOT / "locks" / f"vllm-{VLLM}-architectures.json").read_text()
    assert json.loads(r.stdout) == json.loads(shipped)
    out = _run(python, ARCH_ERRORS, tmp_path=tmp_path)
    assert out["MiniMaxM2ForCausalLM"].startswith(
        "Model architectures ['MiniMaxM2ForCausalLM'] are not supported for now")
    assert "was supported in vLLM until v0.9.2" in out["Phi3SmallForCausalLM"]
    assert out["config"] is True


#: the installed vLLM's source, read as text: vllm/platforms/cuda.py imports vllm._C, which
#: needs libcuda. body(): one method of one class; flat(): the same with its whitespace folded
SOURCE_READER = r"""
import ast, importlib.util, json, re
from pathlib import Path
root = Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
def body(rel, cls, name):
    text = (root / rel).read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == name:
                    return ast.get_source_segment(text, f)
    raise SystemExit(f"{rel}: no {cls}.{name}")
def flat(rel, cls, name):
    return " ".join(body(rel, cls, name).split())
"""

MLA_FP8 = SOURCE_READER + r"""
pick = body("platforms/cuda.py", "CudaPlatformBase", "get_attn_backend_cls")
cfg = body("platforms/cuda.py", "CudaPlatformBase", "check_and_update_config")
fm = (root / "attention/ops/flashmla.py").read_text()
print(json.dumps({
    "triton_refuses_fp8": "TritonMLA V1 with FP8 KV cache not yet supported"
                          in body("v1/attention/backends/mla/triton_mla.py", "TritonMLAImpl",
                                  "__init__"),
    "cutlass_exactly_100": "use_cutlass_mla = True" in cfg
                           and "cls.is_device_capability(100)" in cfg,
    "flashmla_major_9": "get_device_capability()[0] != 9" in fm,
    # the block sizes they page by, forced at start-up (advisor.core.sizing.mla_block_size)
    "blocks": re.findall(r"cache_config\.block_size = (\d+)", cfg),
    "triton_is_the_fallback": bool(re.search(r"use_triton = .*selected_backend is None", pick,
                                             re.S)),
    "flex_below_80": "FlexAttention is the default for older GPUs" in pick
                     and "cls.has_device_capability(80)" in pick,
    "flex_refuses_softcap": "FlexAttention does not support logits soft cap yet" in body(
        "v1/attention/backends/flex_attention.py", "FlexAttentionImpl", "__init__"),
    "fast_ones_take_fp8": not any(
        "FP8" in m and "not" in m for rel in ("flashmla.py", "cutlass_mla.py")
        for m in re.findall(r"NotImplementedError\(([^)]*)\)",
                            (root / "v1/attention/backends/mla" / rel).read_text()))}))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_the_attention_backend_rules_are_the_pinned_vllms_own(lock, tmp_path):
    """advisor.core.weights.mla_kv_refusal and softcap_refusal, read off the installed vLLM: an
    MLA model's attention is CUTLASS MLA on exactly 10.0, FlashMLA on 9.x, Triton MLA
    elsewhere, and Triton MLA refuses an fp8 KV cache while the other two take it; below 8.0
    every model's attention is FlexAttention, which refuses logits soft-capping."""
    out = _run(_python(lock), MLA_FP8, tmp_path=tmp_path)
    assert out == {"triton_refuses_fp8": True, "cutlass_exactly_100": True,
                   "flashmla_major_9": True, "triton_is_the_fallback": True,
                   "flex_below_80": True, "flex_refuses_softcap": True,
                   "blocks": ["16", "64", "128", "64", "64"],
                   "fast_ones_take_fp8": True}



BACKENDS = SOURCE_READER + r"""
pick = flat("platforms/cuda.py", "CudaPlatformBase", "get_attn_backend_cls")
flex = flat("v1/attention/backends/flex_attention.py", "FlexAttentionImpl", "__init__")
fa = "v1/attention/backends/flash_attn.py"
tri = "v1/attention/backends/triton_attn.py"
models = {m: (root / "model_executor/models" / f"{m}.py").read_text()
          for m in ("bloom", "mpt", "jais", "falcon", "baichuan")}
print(json.dumps({
    "fa_head_sizes": json.loads(re.search(r"return (\[[\d, ]+\])", flat(
        fa, "FlashAttentionBackend", "get_supported_head_sizes")).group(1)),
    "triton_off_hopper": "if (has_sink or use_fp8_kv_cache) and not "
                         "cls.is_device_capability(90): " in pick,
    "flex_for_other_heads": 'use_flex_attention_reason["head_size"] = head_size' in pick,
    "flex_refuses": [m for m in ("logits soft cap", "alibi slopes", "quantized kv-cache")
                     if f"FlexAttention does not support {m}" in flex],
    "fa3_on_hopper": "fa_version = 3 if (device_capability.major == 9" in " ".join(
        (root / "attention/utils/fa_utils.py").read_text().split()),
    "v1_asks_without_alibi": "self.vllm_flash_attn_version = get_flash_attn_version()"
                             in flat(fa, "FlashAttentionImpl", "__init__"),
    "fa3_refuses_alibi": 'assert alibi_slopes is None, "Alibi is not supported in FA3"'
                         in (root / "vllm_flash_attn/flash_attn_interface.py").read_text(),
    "triton_head_floor": "if head_size < 32:" in flat(tri, "TritonAttentionBackend",
                                                       "validate_head_size")
                         and "TritonAttentionBackend.validate_head_size(head_size)"
                         in flat(tri, "TritonAttentionImpl", "__init__"),
    "alibi_models": sorted(m for m, t in models.items() if "alibi_slopes=alibi_slopes" in t),
    "falcon_alibi_flag": "self.use_alibi = config.alibi" in models["falcon"],
    "baichuan_7b_rope": "if config.hidden_size == 4096:  # baichuan2 7b" in models["baichuan"],
}))
"""


@pytest.mark.parametrize("lock", LOCKS)
def test_the_attention_backend_choice_is_the_pinned_vllms_own(lock, tmp_path):
    """advisor.core.weights.attention_backend and attention_refusal, read off the installed
    vLLM: FlashAttention's head sizes; Triton for an fp8 KV cache or sinks off Hopper;
    FlexAttention for any other head size, refusing soft-capping, ALiBi and a quantized KV
    cache; Hopper's FlashAttention is FA3, which V1 asks for without ALiBi and which asserts
    "Alibi is not supported in FA3"; Triton needs head size 32; the models that pass ALiBi
    slopes (advisor.core.model.uses_alibi)."""
    from advisor.core import weights
    from advisor.core.model import ALIBI_ARCHITECTURES

    out = _run(_python(lock), BACKENDS, tmp_path=tmp_path)
    assert out["fa_head_sizes"] == list(weights.FA_HEAD_SIZES)
    assert out == {**out, "triton_off_hopper": True, "flex_for_other_heads": True,
                   "flex_refuses": ["logits soft cap", "alibi slopes", "quantized kv-cache"],
                   "fa3_on_hopper": True, "v1_asks_without_alibi": True,
                   "fa3_refuses_alibi": True, "triton_head_floor": True,
                   "alibi_models": ["baichuan", "bloom", "falcon", "jais", "mpt"],
                   "falcon_alibi_flag": True, "baichuan_7b_rope": True}
    assert {"BloomForCausalLM", "MPTForCausalLM", "JAISLMHeadModel"} <= set(ALIBI_ARCHITECTURES)


# --- the model geometry vLLM reads off a config.json ----------------------------------------

GEOMETRY = r"""
import contextlib, json, logging, os, sys, warnings
warnings.filterwarnings("ignore")
with contextlib.redirect_stdout(sys.stderr):
    from vllm.config import ModelConfig, ParallelConfig
logging.disable(logging.WARNING)
asked = json.loads(sys.argv[1])
out = {}
for name, (folder, lengths) in asked.items():
    row = {"accepted": {}}
    for n in lengths:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                m = ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True,
                                max_model_len=n)
        except Exception as e:  # the refusal of a length, or of the whole config
            msg = str(e)
            row["accepted"][str(n)] = False
            if "is greater than the derived max_model_len" not in msg:
                row["error"] = msg[:300]
            continue
        pc = ParallelConfig()
        row["accepted"][str(n)] = m.max_model_len == n
        row.update(kv=m.get_total_num_kv_heads(), heads=m.get_num_attention_heads(pc),
                   head=m.get_head_size(), layers=m.get_num_layers(pc), mla=m.use_mla,
                   dtype=str(m.dtype).removeprefix("torch."))
    out[name] = row
print(json.dumps(out))
"""

PARAMS = r"""
import contextlib, json, logging, sys, warnings
warnings.filterwarnings("ignore")
with contextlib.redirect_stdout(sys.stderr):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
logging.disable(logging.WARNING)
out = {}
for name, folder in json.loads(sys.argv[1]).items():
    try:
        with contextlib.redirect_stdout(sys.stderr):
            cfg = AutoConfig.from_pretrained(folder)
            with torch.device("meta"):  # shapes only: no memory, no weights
                model = AutoModelForCausalLM.from_config(cfg)
        out[name] = sum(p.numel() for p in model.parameters())
    except ValueError as e:
        out[name] = str(e)[:200]
print(json.dumps(out))
"""

#: configs shaped like public model families whose config.json differs from Llama's (see
#: tests/fixtures/configs/README.md), and every catalog model's
PARAM_CONFIGS = sorted((ROOT / "tests" / "fixtures" / "configs").glob("*.json")) + sorted(
    (ROOT / "catalogs" / "models").glob("*.json"))
#: and the real checkpoints' configs the benchmarks size (two of which vLLM 0.11.0 refuses)
GEOMETRY_CONFIGS = PARAM_CONFIGS + sorted((ROOT / "benchmarks" / "accuracy" / "configs").glob(
    "*.json")) + sorted((ROOT / "benchmarks" / "perf" / "configs").glob("*.json"))
#: configs transformers 4.57.6 builds no causal LM for: model types it has no class for (vLLM's
#: own config classes read them), and multimodal checkpoints (AutoModelForCausalLM has no
#: mapping for their top-level config; advisor sizes their vision tower apart)
NOT_BUILT = {"chatglm-defaults", "glm-4-9b-chat", "falcon-40b-old", "falcon-rw-7b-old",
             "jais-13b", "qwen2.5-vl-7b", "mistral-small-3.1"}


def _config_folders(tmp_path: Path, paths: list[Path]) -> dict[str, tuple[Path, dict]]:
    """One folder with a config.json per config (a catalog subset without "architectures"
    names the class its model_type maps to, as the real checkpoint does: phi-4's), and a
    tokenizer_config.json whose model_max_length (256) is below every limit: vLLM 0.11.0 reads
    it only for pooling models with absolute positions (ModelConfig.get_and_verify_max_len),
    so the geometry test's "advisor's limit is accepted" fails if a generative model's length
    came from it."""
    out = {}
    for path in paths:
        # the benchmarks quote two catalog models again: their names say where they are from
        stem = path.stem if path in PARAM_CONFIGS else f"bench-{path.stem}"
        cfg = json.loads(path.read_text())
        if not cfg.get("architectures") and cfg.get("model_type") == "phi3":
            cfg["architectures"] = ["Phi3ForCausalLM"]
        folder = tmp_path / "configs" / stem
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(cfg))
        (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 256}))
        out[stem] = (folder, cfg)
    return out


def test_advisor_reads_a_config_as_the_pinned_vllm_does(tmp_path):
    """advisor.core.model.spec_from_config against vLLM 0.11.0's own ModelConfig built from the
    same config.json on the CPU: total KV heads, attention heads, head size, layers, dtype,
    MLA, and the longest --max-model-len it starts with (advisor's limit accepted, one more
    refused; no limit: a million accepted). Falcon-7B and StarCoder are multi-query, DBRX and
    MPT keep KV heads in attn_config, ChatGLM in multi_query_group_num, GPTBigCode without
    multi_query is multi-query by its class's default, a Llama config without
    max_position_embeddings is 2048 long, Command-R's model_max_length wins, Gemma 3's length
    is not scaled again. The benchmarks' real configs too: the two vLLM will not read
    (MiniMax-M2.5's and Kimi-K2.5's custom code) are the two advisor will not deploy."""
    from advisor.core import archs
    from advisor.core.model import spec_from_config
    from advisor.core.sizing import max_len_limit, resolve_dtype

    folders = _config_folders(tmp_path, GEOMETRY_CONFIGS)
    specs = {name: spec_from_config(cfg, name) for name, (_, cfg) in folders.items()}
    asked = {}
    for name, spec in specs.items():
        limit = max_len_limit(spec)
        asked[name] = [str(folders[name][0]), [limit, limit + 1] if limit else [1 << 20]]
    # vLLM inspects each architecture's module in a fresh interpreter (~7 s each,
    # registry._run_in_subprocess) and keeps what it learnt under VLLM_CACHE_ROOT/modelinfos,
    # keyed by the module's hash: kept beside the lock venvs, a second run takes seconds. One
    # lock: both lock files pin vllm==0.11.0 and transformers==4.57.6
    lock = LOCKS[1].values[0]
    got = _run(_python(lock), GEOMETRY, json.dumps(asked), tmp_path=tmp_path,
               vllm_cache=_venv(lock).parent / "vllm-cache")
    assert set(got) == set(specs)
    refused = set()
    for name, spec in specs.items():
        row = got[name]
        if "error" in row:  # vLLM will not read it: advisor must not deploy it either
            assert "contains custom code" in row["error"], (name, row)
            kind, _ = archs.support(spec.architectures, VLLM, spec.config_model_type)
            assert kind == "refused", name
            refused.add(name)
            continue
        lengths = asked[name][1]
        assert row["accepted"][str(lengths[0])] is True, (name, row)
        if len(lengths) == 2:
            assert row["accepted"][str(lengths[1])] is False, (name, row)
        mine = {"heads": spec.num_heads, "layers": spec.num_layers,
                "dtype": resolve_dtype(spec, "auto"), "mla": spec.mla is not None}
        if spec.mla is None:
            mine.update(kv=spec.num_kv_heads, head=spec.head_dim)
        else:  # vLLM pages one latent vector per token: kv_lora_rank + the rope part
            mine.update(kv=row["kv"], head=spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim)
        assert mine == {k: row[k] for k in mine}, name
    assert refused == {"bench-MiniMaxAI--MiniMax-M2.5", "bench-moonshotai--Kimi-K2.5"}


def test_advisor_counts_parameters_as_transformers_builds_the_model(tmp_path):
    """The weights advisor sizes (ModelSpec.param_counts()["total"]) against the model
    transformers 4.57.6 (the lock's) builds from the same config.json on the meta device: every
    catalog model and every family-shaped config within 0.1% — ungated MLPs (Falcon, BLOOM,
    MPT, GPT-J, GPT-NeoX, Phi-2, StarCoder2), tied heads by the class's default, learned
    position tables (GPT-2, GPTBigCode, OPT), DBRX's and ERNIE 4.5's experts, Nemotron's
    squared-ReLU MLP. Only the families of :data:`NOT_BUILT` are not built."""
    from advisor.core.model import spec_from_config

    folders = _config_folders(tmp_path, PARAM_CONFIGS)
    got = _run(_python(LOCKS[1].values[0]), PARAMS,
               json.dumps({n: str(f) for n, (f, _) in folders.items()}), tmp_path=tmp_path)
    unbuilt = {n for n, v in got.items() if not isinstance(v, int)}
    assert unbuilt == NOT_BUILT, {n: got[n] for n in unbuilt ^ NOT_BUILT}
    for name, (_, cfg) in folders.items():
        if name in NOT_BUILT:
            continue
        mine = spec_from_config(cfg, name).param_counts()["total"]
        assert abs(mine - got[name]) <= 0.001 * got[name], (name, mine, got[name])


# --- a linear-attention model's KV cache, as the pinned vLLM lays it out --------------------

LINEAR_KV = r"""
import contextlib, json, logging, sys, types, warnings
warnings.filterwarnings("ignore")
with contextlib.redirect_stdout(sys.stderr):
    import torch
    from vllm.config import (CacheConfig, CompilationConfig, ModelConfig, ParallelConfig,
                             SchedulerConfig)
    from vllm.model_executor.models.config import HybridAttentionMambaModelConfig
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec
logs = []
class Keep(logging.Handler):
    def emit(self, record):
        logs.append(record.getMessage())
logging.getLogger("vllm").addHandler(Keep())
folder, cases = sys.argv[1], json.loads(sys.argv[2])
out = []
for tp, max_len, kv_dtype, memory in cases:
    del logs[:]
    with contextlib.redirect_stdout(sys.stderr):
        m = ModelConfig(model=folder, tokenizer=folder, skip_tokenizer_init=True,
                        max_model_len=max_len)
    pc, cc = ParallelConfig(tensor_parallel_size=tp), CacheConfig(cache_dtype=kv_dtype)
    # the parts of VllmConfig these read (a whole VllmConfig needs a device to infer)
    vc = types.SimpleNamespace(
        model_config=m, parallel_config=pc, cache_config=cc, speculative_config=None,
        compilation_config=CompilationConfig(),
        scheduler_config=SchedulerConfig(max_model_len=max_len, is_encoder_decoder=False))
    HybridAttentionMambaModelConfig.verify_and_update_config(vc)
    cls, _ = ModelRegistry.resolve_model_cls(m.architecture, model_config=m)
    shapes = cls.get_mamba_state_shape_from_config(vc)
    dtypes = cls.get_mamba_state_dtype_from_config(vc)
    kv = m.dtype if kv_dtype == "auto" else torch.float8_e4m3fn
    # one spec per layer, as GPUModelRunner.get_kv_cache_spec builds them: attention layers
    # a FullAttentionSpec, Gated DeltaNet layers (MambaBase) a MambaSpec of their state
    specs = {}
    hf = m.hf_config  # Bamba names its layers in a property (layers_block_type)
    for i, kind in enumerate(getattr(hf, "layer_types", None) or hf.layers_block_type):
        specs[f"layers.{i}"] = (
            FullAttentionSpec(block_size=cc.block_size, num_kv_heads=m.get_num_kv_heads(pc),
                              head_size=m.get_head_size(), dtype=kv)
            if kind in ("full_attention", "attention") else
            MambaSpec(shapes=shapes, dtypes=dtypes, block_size=max_len,
                      page_size_padded=cc.mamba_page_size_padded))
    config = kv_cache_utils.get_kv_cache_configs(vc, [specs], [memory])[0]
    said = {l.split(":")[0]: l for l in logs if "KV cache size" in l or "concurrency" in l}
    out.append({"block": cc.block_size, "prefix_caching": cc.enable_prefix_caching,
                "state": [list(s) for s in shapes], "groups": len(config.kv_cache_groups),
                "num_blocks": config.num_blocks,
                "tokens": int(said["GPU KV cache size"].split(": ")[1].split()[0]
                              .replace(",", "")),
                "concurrency": float(next(v for k, v in said.items() if "concurrency" in k)
                                     .rsplit(" ", 1)[1].rstrip("x"))})
print(json.dumps(out))
"""


@pytest.mark.parametrize("fixture", ["qwen3-next-80b-a3b", "granite-4.0-h-tiny", "bamba-9b",
                                     "jamba-v0.1"])
def test_a_linear_attention_kv_cache_is_laid_out_as_the_pinned_vllm_does(tmp_path, fixture):
    """Qwen3-Next's KV cache (12 attention layers, 36 Gated DeltaNet layers), Granite
    4.0-H-Tiny's (4 attention layers, 36 Mamba-2 layers) and Bamba-9B's (3 attention, 29
    Mamba-2: ten state groups, the last padded) and Jamba's (4 attention, 28 Mamba v1 layers)
    against vLLM 0.11.0's own code on the CPU:
    HybridAttentionMambaModelConfig sets the attention block size and pads the state page,
    the model class gives the state's shape, and kv_cache_utils.get_kv_cache_configs groups
    the layers and counts the blocks, the "GPU KV cache size" and the "Maximum concurrency" it
    logs. advisor's fit must give the same block size, blocks, tokens and concurrency for the
    same KV memory at the TP sizes, KV dtypes and lengths below (the layer specs are built
    here as GPUModelRunner builds them: vLLM builds them only from a model on a GPU)."""
    from advisor.core import sizing
    from advisor.core.engine import GIB, profile
    from advisor.core.model import spec_from_config

    path = ROOT / "tests" / "fixtures" / "configs" / f"{fixture}.json"
    folder = tmp_path / fixture
    folder.mkdir()
    (folder / "config.json").write_text(path.read_text())
    cases = [[tp, max_len, kv, int(gib * GIB)] for tp, max_len, kv, gib in {
        "qwen3-next-80b-a3b": [
            (1, 4096, "auto", 7.5), (2, 32768, "auto", 20.0), (4, 32768, "auto", 20.0),
            (4, 262144, "fp8", 33.3), (8, 100, "auto", 0.75), (8, 131072, "fp8", 61.0)],
        "granite-4.0-h-tiny": [  # 12 heads: TP 1, 2, 4
            (1, 4096, "auto", 7.5), (2, 32768, "auto", 20.0), (4, 131072, "fp8", 33.3),
            (4, 100, "auto", 0.75)],
        "bamba-9b": [  # 3 attention layers, 29 Mamba-2: the last state group padded
            (1, 4096, "auto", 7.5), (2, 4096, "fp8", 20.0), (8, 4096, "auto", 3.3)],
        "jamba-v0.1": [  # Mamba (v1): 4 attention layers, 28 Mamba
            (1, 8192, "auto", 7.5), (2, 262144, "auto", 40.0), (4, 32768, "fp8", 20.0),
            (8, 4096, "auto", 1.5)]}[fixture]]
    got = _run(_python(LOCKS[1].values[0]), LINEAR_KV, str(folder), json.dumps(cases),
               tmp_path=tmp_path, vllm_cache=_venv(LOCKS[1].values[0]).parent / "vllm-cache")
    spec = spec_from_config(json.loads(path.read_text()), fixture)
    engine = profile(VLLM)
    layers = list(range(spec.num_layers))
    for (tp, max_len, kv, memory), vllm in zip(cases, got, strict=True):
        kv_b = 1.0 if kv == "fp8" else 2.0
        block = sizing.linear_block_size(spec, tp, kv_b, 2.0)
        assert block == vllm["block"], (tp, kv, vllm)
        assert spec.linear_attention.state_elements(tp) == tuple(
            math.prod(shape) for shape in vllm["state"]), vllm
        per_layer = sizing.kv_bytes_per_token_per_layer(spec, tp, kv_b)
        blocks, tokens, concurrency, _ = sizing.kv_capacity(
            spec, memory / GIB, layers, per_layer,
            engine.model_copy(update={"block_size": block}), max_len, 8192)
        assert (blocks, tokens, len(sizing.kv_layout(spec, layers, engine)[1])) == (
            vllm["num_blocks"], vllm["tokens"], vllm["groups"]), (tp, max_len, kv, vllm)
        assert round(concurrency, 2) == vllm["concurrency"], (tp, max_len, kv, vllm)
        assert vllm["prefix_caching"] is False  # the fit's note says vLLM turns it off
