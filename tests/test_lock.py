"""The vLLM locks are frozen and well-formed, and the image pairing decisions hold.

Fast and offline: reads locks/ only. The real install of a lock is tests/test_lock_install.py.
"""

from __future__ import annotations

import gzip
import re
import tomllib
from pathlib import Path

import pytest

from advisor.errors import UserInputError
from advisor.render import envlock

ROOT = Path(__file__).resolve().parents[1]
LOCKS = sorted((ROOT / "locks").glob("vllm-*.txt"))
LINE = re.compile(r"^(?P<name>[a-z0-9][a-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!-]+)"
                  r"(?P<marker> ; [^-]+?)?(?P<hashes>( --hash=sha256:[0-9a-f]{64})+)$")
#: packages built per CPython ABI; their version may differ between cp310 and cp311
#: (async-timeout and exceptiongroup are backports only Python 3.10 needs)
PY_SPECIFIC = {"async-timeout", "exceptiongroup", "tomli", "backports-asyncio-runner",
               "taskgroup"}


def _pins(path: Path) -> dict[str, re.Match[str]]:
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = LINE.match(line)
        assert m, f"{path.name}: not 'name==version --hash=sha256:...': {line[:100]}"
        assert m["name"] not in out, f"{path.name}: {m['name']} pinned twice"
        out[m["name"]] = m
    return out


def test_the_four_locks_exist():
    assert [p.name for p in LOCKS] == [
        "vllm-0.11.0-cp310-ray.txt", "vllm-0.11.0-cp310.txt",
        "vllm-0.11.0-cp311-ray.txt", "vllm-0.11.0-cp311.txt"]


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_every_line_is_pinned_with_a_hash(path):
    pins = _pins(path)
    assert len(pins) > 100  # vLLM's closure, not a stub
    for m in pins.values():
        assert m["hashes"].count("--hash=sha256:") >= 1
    assert pins["vllm"]["version"] == "0.11.0"


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_transformers_is_4x(path):
    """vLLM 0.11.0's get_tokenizer breaks on transformers 5 (vllm-project/vllm#30466)."""
    version = _pins(path)["transformers"]["version"]
    assert int(version.split(".")[0]) == 4, version
    assert tuple(int(x) for x in version.split(".")[:2]) >= (4, 56)


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_header_says_how_to_regenerate(path):
    text = path.read_text()
    header = [ln for ln in text.splitlines() if ln.startswith("#")]
    regen = [ln for ln in header if ln.startswith("# Regenerate: ")]
    assert regen == ["# Regenerate: python tools/lock_vllm.py --vllm 0.11.0 "
                     "--exclude-newer 2026-12-04"]
    assert "vllm-project/vllm#30466" in text
    assert "# Resolved as of: 2026-12-04" in header
    inputs = next(ln for ln in header if ln.startswith("# Inputs: "))
    assert "vllm==0.11.0" in inputs and "transformers>=4.56,<5" in inputs
    assert ("ray[default]" in inputs) == path.name.endswith("-ray.txt")
    assert f"# Packages: {len(_pins(path))}" in header
    held = any(ln.startswith("# Constraints: the cp310 lock's versions") for ln in header)
    assert held == ("-cp311" in path.name)
    assert (ROOT / "tools" / "lock_vllm.py").is_file()


@pytest.mark.parametrize("ray", [False, True])
def test_cp310_and_cp311_agree_where_python_does_not_matter(ray):
    suffix = "-ray" if ray else ""
    a = _pins(ROOT / "locks" / f"vllm-0.11.0-cp310{suffix}.txt")
    b = _pins(ROOT / "locks" / f"vllm-0.11.0-cp311{suffix}.txt")
    for name in (a.keys() & b.keys()) - PY_SPECIFIC:
        assert a[name]["version"] == b[name]["version"], name
    assert (a.keys() ^ b.keys()) <= PY_SPECIFIC, a.keys() ^ b.keys()
    # one wheel per package: the hash differs exactly where the wheel is built per ABI
    assert a["torch"]["hashes"] != b["torch"]["hashes"]
    assert a["transformers"]["hashes"] == b["transformers"]["hashes"]


@pytest.mark.parametrize("path", LOCKS, ids=lambda p: p.name)
def test_small_enough_for_user_data(path):
    """cloud-init embeds the lock; AWS caps user-data at 16 KB (gzip is what it counts here).
    The ray locks are the largest (about 9.6 KB gzip)."""
    assert len(gzip.compress(path.read_bytes(), 9)) < 11_000


def test_serving_and_ray_locks_agree():
    """vLLM 0.11.0 itself needs ray (its CUDA requirements name ray[cgraph]); the -ray locks add
    ray[default]'s dashboard and agent, which ``ray start`` on a multi-node replica runs."""
    for py in ("310", "311"):
        serve = _pins(ROOT / "locks" / f"vllm-0.11.0-cp{py}.txt")
        ray = _pins(ROOT / "locks" / f"vllm-0.11.0-cp{py}-ray.txt")
        assert serve.keys() < ray.keys()
        assert {"aiohttp-cors", "opencensus", "py-spy"} <= ray.keys() - serve.keys()
        for name in serve.keys() & ray.keys():
            assert serve[name]["version"] == ray[name]["version"], name


def test_packaging_ships_the_locks():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = cfg["tool"]["hatch"]["build"]["targets"]
    assert build["wheel"]["force-include"]["locks"] == "advisor/_data/locks"
    assert "locks" in build["sdist"]["include"]


# --- envlock --------------------------------------------------------------------------------


def test_lock_text_and_supported():
    assert envlock.supported() == [("0.11.0", "3.10"), ("0.11.0", "3.11")]
    assert envlock.supported(ray=True) == [("0.11.0", "3.10"), ("0.11.0", "3.11")]
    assert envlock.lock_text("0.11.0", "3.10") == (ROOT / "locks/vllm-0.11.0-cp310.txt").read_text()
    assert "ray==" in envlock.lock_text("0.11.0", "3.11", ray=True)
    # editable install: the repository's locks/; wheel install (CI): advisor/_data/locks, which
    # must hold the repository's locks byte for byte
    shipped = {f.name: f.read_bytes() for f in envlock.locks_dir().glob("vllm-*.txt")}
    in_repo = {f.name: f.read_bytes() for f in (ROOT / "locks").glob("vllm-*.txt")}
    assert shipped and shipped == in_repo


@pytest.mark.parametrize("args", [("0.12.0", "3.10"), ("0.11.0", "3.12"), ("0.10.2", "3.11"),
                                  ("../../etc/passwd", "3.10"), ("0.11.0", "3.10/../x"),
                                  ("0.11.0", "")])
def test_no_lock_is_one_line_with_what_exists(args):
    with pytest.raises(UserInputError) as e:
        envlock.lock_text(*args)
    assert "\n" not in str(e.value)
    assert "vLLM 0.11.0 on Python 3.10, 3.11" in e.value.hint


def test_torch_and_cuda_read_off_the_lock():
    assert envlock.torch_cuda("0.11.0", "3.10") == "2.8.0+cu128"
    assert envlock.torch_cuda("0.11.0", "3.11") == "2.8.0+cu128"
    assert envlock.cuda_version("0.11.0", "3.10") == "12.8"


# The decisions the table makes today; changing a fact in locks/images.yaml must change one of
# these on purpose.
TABLE = {"aws": ("3.10", "595.91.07"), "gcp": ("3.10", "580"), "azure": ("3.10", "580.126.16")}


def test_table_facts_are_pinned_and_sourced():
    table = envlock.image_table()
    assert {p: (i["python"], i["driver"]) for p, i in table["images"].items()} == TABLE
    assert {c: r["driver"] for c, r in table["cuda_min_driver"].items()} == {
        "12.8": "570.26", "13.0": "580.65.06"}
    for row in [*table["images"].values(), *table["cuda_min_driver"].values()]:
        assert row["source"] and re.match(r"^\d{4}-\d{2}-\d{2}$", row["as_of"])
        assert row["confidence"] in {"documented", "measured", "inferred"}


@pytest.mark.parametrize("provider", sorted(TABLE))
def test_default_images_run_the_0_11_0_lock(provider):
    assert envlock.check_pairing(provider, None, "0.11.0") is None
    for name in envlock.image_table()["images"][provider]["names"]:  # spelled out: the same
        assert envlock.check_pairing(provider, name, "0.11.0") is None


def test_a_users_image_is_a_warning_not_a_refusal():
    msg = envlock.check_pairing("aws", "ami-0123456789abcdef0", "0.11.0")
    assert msg is not None and "\n" not in msg
    assert "ami-0123456789abcdef0" in msg and "570.26" in msg and "3.10 or 3.11" in msg
    with pytest.raises(UserInputError):  # still no lock for an unknown release
        envlock.check_pairing("aws", "ami-0123456789abcdef0", "0.12.0")


def _with(monkeypatch, provider: str, **fields: str) -> None:
    table = envlock.image_table()
    images = {**table["images"], provider: {**table["images"][provider], **fields}}
    monkeypatch.setattr(envlock, "image_table", lambda: {**table, "images": images})


@pytest.mark.parametrize(("driver", "ok"), [
    ("570.26", True), ("570.86.15", True), ("575", True), ("580", True),
    ("570.25.99", False), ("570", False), ("565.57.01", False), ("535.247.01", False)])
def test_a_driver_below_cudas_minimum_is_refused(monkeypatch, driver, ok):
    _with(monkeypatch, "azure", driver=driver)  # the fear: an image a branch too old
    if ok:
        assert envlock.check_pairing("azure", None, "0.11.0") is None
        return
    with pytest.raises(UserInputError) as e:
        envlock.check_pairing("azure", None, "0.11.0")
    assert f"NVIDIA driver {driver}, below the 570.26 that CUDA 12.8" in str(e.value)
    assert "\n" not in str(e.value) and e.value.hint


def test_an_image_python_without_a_lock_is_refused(monkeypatch):
    _with(monkeypatch, "gcp", python="3.12")  # e.g. an Ubuntu 24.04 image
    with pytest.raises(UserInputError) as e:
        envlock.check_pairing("gcp", None, "0.11.0")
    assert "no vLLM 0.11.0 lock for Python 3.12" in str(e.value)
    assert "Python 3.10, 3.11" in e.value.hint


def test_an_unknown_release_or_provider_is_refused():
    with pytest.raises(UserInputError, match="no vLLM 0.12.0 lock for Python 3.10"):
        envlock.check_pairing("aws", None, "0.12.0")
    with pytest.raises(UserInputError, match="no default image known"):
        envlock.check_pairing("oci", None, "0.11.0")


def test_a_cuda_without_a_known_minimum_driver_is_refused(monkeypatch):
    table = envlock.image_table()
    monkeypatch.setattr(envlock, "image_table",
                        lambda: {**table, "cuda_min_driver": {"13.0": {"driver": "580.65.06"}}})
    with pytest.raises(UserInputError, match="CUDA 12.8, whose minimum NVIDIA driver"):
        envlock.check_pairing("aws", None, "0.11.0")


# --- the generator's conversion (offline: a hand-made pylock) -------------------------------


def _generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("lock_vllm", ROOT / "tools" / "lock_vllm.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wheel(name: str, digest: str) -> dict:
    return {"url": f"https://files.example/{name}", "hashes": {"sha256": digest * 64}}


def test_generator_keeps_the_wheel_pip_would_install_and_settles_markers():
    gen = _generator()
    pylock = {"packages": [
        {"name": "yarl", "version": "1.0", "wheels": [
            _wheel("yarl-1.0-py3-none-any.whl", "a"),
            _wheel("yarl-1.0-cp310-cp310-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "b")]},
        {"name": "soundfile", "version": "0.14.0", "wheels": [
            _wheel("soundfile-0.14.0-py2.py3-none-any.whl", "c"),
            _wheel("soundfile-0.14.0-py2.py3-none-manylinux_2_28_x86_64.whl", "d")]},
        {"name": "async-timeout", "version": "5.0.1", "marker": "python_full_version < '3.11'",
         "wheels": [_wheel("async_timeout-5.0.1-py3-none-any.whl", "e")]},
        {"name": "nvidia-nccl-cu12", "version": "2.27.3",
         "marker": "platform_machine == 'x86_64' and sys_platform == 'linux'",
         "wheels": [_wheel("nvidia_nccl_cu12-2.27.3-py3-none-manylinux2014_x86_64.whl", "f")]},
        {"name": "odd", "version": "1", "marker": "platform_release >= '6'",
         "sdist": {"url": "https://files.example/odd-1.tar.gz", "hashes": {"sha256": "0" * 64}}},
    ]}
    assert gen.requirement_lines(pylock, "3.10") == [
        f"async-timeout==5.0.1 --hash=sha256:{'e' * 64}",
        f"nvidia-nccl-cu12==2.27.3 --hash=sha256:{'f' * 64}",
        f"odd==1 ; platform_release >= '6' --hash=sha256:{'0' * 64}",
        f"soundfile==0.14.0 --hash=sha256:{'d' * 64}",
        f"yarl==1.0 --hash=sha256:{'b' * 64}"]
    # on 3.11 the 3.10-only backport goes; a wheel that cannot install there is a resolution
    # error (uv lists only installable ones), not something to lock
    assert gen.requirement_lines({"packages": pylock["packages"][1:4]}, "3.11") == [
        f"nvidia-nccl-cu12==2.27.3 --hash=sha256:{'f' * 64}",
        f"soundfile==0.14.0 --hash=sha256:{'d' * 64}"]
    with pytest.raises(SystemExit, match="no tag installs on the target"):
        gen.requirement_lines({"packages": [{**pylock["packages"][0], "wheels": [
            pylock["packages"][0]["wheels"][1]]}]}, "3.11")


# -- render refuses what the default image cannot run ------------------------------------------
@pytest.mark.parametrize("instance", ["aws:g6e.2xlarge", "gcp:a2-highgpu-1g",
                                      "azure:Standard_NC24ads_A100_v4"])
def test_render_takes_the_default_images_python_and_refuses_a_release_without_its_lock(instance):
    import yaml

    import advisor
    from advisor.render.envlock import image_python

    ref = {"aws": "aws-ssm:/advisor/k", "gcp": "gcp-secret:k",
           "azure": "azure-kv:myvault/k"}[instance.split(":")[0]]
    res = advisor.render_files("qwen3-8b", 8192, instance=instance, api_key_ref=ref)
    doc = yaml.safe_load(res.files["user-data"])
    py = image_python(instance.split(":")[0])
    assert py == "3.10"  # every default image is Ubuntu 22.04 (locks/images.yaml)
    assert doc["runcmd"][0][1] == py
    lock = next(f["content"] for f in doc["write_files"]
                if f["path"] == "/opt/advisor/requirements.lock")
    assert "\nvllm==0.11.0 --hash=sha256:" in lock and "\ntorch==2.8.0 --hash" in lock
    with pytest.raises(advisor.UserInputError, match="no vLLM 0.21.0 lock for Python 3.10"):
        advisor.render_files("qwen3-8b", 8192, instance=instance, api_key_ref=ref,
                             vllm_version="0.21.0")
