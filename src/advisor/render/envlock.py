"""The frozen Python environments vLLM is installed from, and whether an image can run them.

A lock (``locks/vllm-<version>-cp<py>[-ray].txt``, written by ``tools/lock_vllm.py``) pins every
package with the sha256 of the one file pip installs on that CPython, linux x86_64; cloud-init
installs it with ``pip install --require-hashes --no-deps``, so nothing is resolved on the
instance. Pinning only ``vllm==X`` let pip pick transformers 5.x, with which vLLM 0.11.0's
get_tokenizer() raises ``AttributeError ... all_special_tokens_extended`` and every replica dies
(https://github.com/vllm-project/vllm/issues/30466).

``locks/images.yaml`` holds what each cloud's default image brings (Python, NVIDIA driver) and the
driver each CUDA release needs, with sources; :func:`check_pairing` refuses a pairing that cannot
run before anything is launched. Pure: reads only files shipped with advisor, no network.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml

from advisor.core.archs import locks_dir
from advisor.errors import UserInputError
from advisor.inputs import read_text

#: a lock is ~17-21 KB; anything far larger is not one of ours
LOCK_LIMIT = 256 * 1024
_VERSION = re.compile(r"^\d+\.\d+\.\d+\Z")
_PYTHON = re.compile(r"^3\.\d{1,2}\Z")
_LOCK_NAME = re.compile(r"^vllm-(?P<vllm>\d+\.\d+\.\d+)-cp3(?P<minor>\d{1,2})(?P<ray>-ray)?\.txt\Z")
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)")
#: the pip package that carries the CUDA runtime torch was built against (nvidia-cuda-runtime-cu12
#: 12.8.90 -> CUDA 12.8); PyTorch's wheels on PyPI depend on it (torch's METADATA Requires-Dist)
_CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime-cu(?P<major>\d+)\Z")


def _lock_name(vllm_version: str, python: str, ray: bool) -> str:
    return f"vllm-{vllm_version}-cp{python.replace('.', '')}{'-ray' if ray else ''}.txt"


def supported(ray: bool = False) -> list[tuple[str, str]]:
    """(vLLM version, Python) pairs that have a lock, oldest first (``ray``: the multi-node
    locks instead of the serving ones)."""
    found = []
    for path in locks_dir().glob("vllm-*.txt"):
        m = _LOCK_NAME.match(path.name)
        if m and bool(m["ray"]) == ray:
            found.append((m["vllm"], f"3.{m['minor']}"))

    def key(pair: tuple[str, str]) -> tuple[tuple[int, ...], int]:
        return tuple(int(x) for x in pair[0].split(".")), int(pair[1].split(".")[1])
    return sorted(found, key=key)


def _have() -> str:
    pairs = supported()
    if not pairs:
        return "no locks are shipped (locks/ is missing)"
    by_version: dict[str, list[str]] = {}
    for v, py in pairs:
        by_version.setdefault(v, []).append(py)
    return "; ".join(f"vLLM {v} on Python {', '.join(pys)}" for v, pys in by_version.items())


def lock_text(vllm_version: str, python: str, ray: bool = False) -> str:
    """The requirements lock of vLLM ``vllm_version`` on CPython ``python`` ("3.10"), with Ray
    (``ray[default]``) for a multi-node replica when ``ray``. UserInputError when there is none."""
    if not _VERSION.match(vllm_version) or not _PYTHON.match(python):
        raise UserInputError(
            f"no lock for vLLM {vllm_version[:40]!r} on Python {python[:20]!r}",
            hint=f"versions are X.Y.Z and Pythons 3.N; locks exist for {_have()}")
    path = locks_dir() / _lock_name(vllm_version, python, ray)
    if not path.is_file():
        what = f"vLLM {vllm_version} on Python {python}{' with Ray' if ray else ''}"
        raise UserInputError(
            f"no frozen environment (lock) for {what}",
            hint=f"locks exist for {_have()}; another release needs its lock first "
                 "(tools/lock_vllm.py --vllm VERSION, then tools/prove_lock.sh)")
    return read_text(path, limit=LOCK_LIMIT, what="lock")


def pins(text: str) -> dict[str, str]:
    """``{package: version}`` of a lock's text (names as written: lower case, '-')."""
    out = {}
    for line in text.splitlines():
        m = _PIN.match(line.strip())
        if m:
            out[m["name"].lower()] = m["version"]
    return out


def cuda_version(vllm_version: str, python: str) -> str:
    """CUDA major.minor of the torch build the lock pins ("12.8"), read off its
    nvidia-cuda-runtime-cuXX pin."""
    for name, version in pins(lock_text(vllm_version, python)).items():
        if _CUDA_RUNTIME.match(name):
            return ".".join(version.split(".")[:2])
    raise UserInputError(f"the vLLM {vllm_version} lock for Python {python} pins no CUDA runtime",
                         hint="regenerate it with tools/lock_vllm.py")


def torch_cuda(vllm_version: str, python: str) -> str:
    """The torch build the lock pins, in PyTorch's own notation: "2.8.0+cu128"."""
    torch = pins(lock_text(vllm_version, python)).get("torch")
    if torch is None:
        raise UserInputError(f"the vLLM {vllm_version} lock for Python {python} pins no torch",
                             hint="regenerate it with tools/lock_vllm.py")
    return f"{torch}+cu{cuda_version(vllm_version, python).replace('.', '')}"


@functools.lru_cache(maxsize=1)
def image_table() -> dict[str, Any]:
    """locks/images.yaml: ``cuda_min_driver`` and ``images`` (per provider), checked for shape."""
    path = locks_dir() / "images.yaml"
    data = yaml.safe_load(read_text(path, limit=LOCK_LIMIT, what="image table"))
    ok = (isinstance(data, dict) and isinstance(data.get("cuda_min_driver"), dict)
          and isinstance(data.get("images"), dict))
    if ok:
        for img in data["images"].values():
            ok = ok and isinstance(img, dict) and all(
                isinstance(img.get(k), str) for k in ("name", "python", "driver", "source"))
        for row in data["cuda_min_driver"].values():
            ok = ok and isinstance(row, dict) and isinstance(row.get("driver"), str)
    if not ok:
        raise UserInputError(f"{path}: not an image table (cuda_min_driver, images)",
                             hint="restore locks/images.yaml from advisor's repository")
    return data


def _driver(version: str) -> tuple[int, ...]:
    """'570.26' -> (570, 26); a bare branch '580' -> (580,), which sorts below every point
    release of that branch, so a branch is trusted only when it is above the minimum's."""
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def image_python(provider: str) -> str:
    """The Python (major.minor) of ``provider``'s default image, from locks/images.yaml."""
    images = image_table()["images"]
    if provider not in images:
        raise UserInputError(f"no default image known for provider {provider[:40]!r}",
                             hint=f"one of {', '.join(sorted(images))}")
    return str(images[provider]["python"])


def check_pairing(provider: str, image: str | None, vllm_version: str) -> str | None:
    """Whether the vLLM ``vllm_version`` lock can run on ``provider``'s image.

    ``image`` None (or a spelling of the default image) is the default image, whose Python and
    driver locks/images.yaml knows: UserInputError when no lock exists for its Python, or its
    driver is below what the lock's CUDA needs; None when the pairing is proven fine. Any other
    ``image`` (a user's --image) returns a warning: advisor cannot know its driver or Python.
    """
    table = image_table()
    images = table["images"]
    if provider not in images:
        raise UserInputError(f"no default image known for provider {provider[:40]!r}",
                             hint=f"one of {', '.join(sorted(images))}")
    img = images[provider]
    if image is not None and image not in (img.get("names") or []):
        needs = sorted({(py, _min_driver(table, vllm_version, py)[1])
                        for v, py in supported() if v == vllm_version})
        if not needs:
            lock_text(vllm_version, "3.10")  # raises the no-lock error with its hint
        drivers = sorted({d for _, d in needs}, key=_driver)
        pys = " or ".join(py for py, _ in needs)
        need = (f"Python {pys} and an NVIDIA driver >= {drivers[0]}" if len(drivers) == 1
                else "; ".join(f"Python {py} with an NVIDIA driver >= {d}" for py, d in needs))
        return (f"--image {image[:80]}: advisor does not know its Python or NVIDIA driver; the "
                f"vLLM {vllm_version} locks need {need}")
    python = img["python"]
    if (vllm_version, python) not in supported():
        raise UserInputError(
            f"no vLLM {vllm_version} lock for Python {python}, the Python of {provider}'s "
            f"default image ({img['name']})",
            hint=f"locks exist for {_have()}")
    cuda, need = _min_driver(table, vllm_version, python)
    if _driver(img["driver"]) < _driver(need):
        raise UserInputError(
            f"{provider}'s default image ({img['name']}) has NVIDIA driver {img['driver']}, "
            f"below the {need} that CUDA {cuda} of the vLLM {vllm_version} lock needs",
            hint="pick a vLLM release whose lock needs an older CUDA, or pass --image with a "
                 f"driver >= {need}")
    return None


def _min_driver(table: dict[str, Any], vllm_version: str, python: str) -> tuple[str, str]:
    cuda = cuda_version(vllm_version, python)
    row = table["cuda_min_driver"].get(cuda)
    if row is None:
        raise UserInputError(
            f"the vLLM {vllm_version} lock needs CUDA {cuda}, whose minimum NVIDIA driver "
            "advisor does not know",
            hint="add CUDA's minimum driver, with its source, to locks/images.yaml")
    return cuda, str(row["driver"])
