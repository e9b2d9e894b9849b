#!/usr/bin/env python3
"""Write the hash-pinned requirement files that cloud-init installs vLLM from (locks/).

Why: cloud-init used to pin only ``vllm==X``; pip then resolved whatever was newest. With
transformers 5.x, vLLM 0.11.0's get_tokenizer() raises ``AttributeError: ...
all_special_tokens_extended`` (https://github.com/vllm-project/vllm/issues/30466) and every
replica dies at start. A lock pins every package, with the sha256 of each file pip may install.

How: ``uv pip compile`` (a real resolver) for one Python on linux x86_64 (manylinux_2_28: glibc
2.28+, so Ubuntu 22.04's 2.35 and Debian 12's 2.36), written as pylock.toml (PEP 751), which
lists per package only the wheels that install on that target with their sha256. This script
turns that into a pip requirements file, one line per package, sorted, with the hash of the one
wheel pip would pick there (packaging's tag order; a package with no wheel keeps its sdist): the
file is embedded in cloud-init user-data, which must stay under AWS's 16 KB (gzip).

``--exclude-newer`` makes the resolution repeatable: the same arguments give the same files.
The first Python's lock is resolved freely; the others are held to its versions (uv
``--constraint``), so the packages that are not built per Python are the same on every image.

Usage (the exact command of the current locks is in each file's header):
    python tools/lock_vllm.py --vllm 0.11.0 --exclude-newer 2026-12-04
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.markers import Marker
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    sys.exit("lock_vllm.py needs Python 3.11+ (tomllib)")

REPO = Path(__file__).resolve().parents[1]
#: the Pythons of the clouds' default images: Ubuntu 22.04 (3.10) and Debian 12 (3.11)
PYTHONS = ("3.10", "3.11")
#: glibc floor of the wheels the lock may pick (manylinux_2_28; every supported image is newer)
PLATFORM = "x86_64-manylinux_2_28"
#: transformers 5.x breaks vLLM 0.11.0's get_tokenizer (vllm-project/vllm#30466). vLLM 0.11.0's
#: own METADATA asks only transformers>=4.55.2 (no upper bound: the bug); 4.56 is issue 27's floor
#: (the resolver picks the newest 4.x, 4.57.6, either way)
TRANSFORMERS = {"0.11.0": "transformers>=4.56,<5"}
#: what a multi-node replica adds: Ray with its dashboard/agent (``ray start`` needs [default])
RAY = "ray[default]"


def lock_name(vllm: str, python: str, ray: bool) -> str:
    return f"vllm-{vllm}-cp{python.replace('.', '')}{'-ray' if ray else ''}.txt"


def inputs(vllm: str, ray: bool) -> list[str]:
    reqs = [f"vllm=={vllm}"]
    if vllm in TRANSFORMERS:
        reqs.append(TRANSFORMERS[vllm])
    if ray:
        reqs.append(RAY)
    return reqs


def uv_version(uv: str) -> str:
    return subprocess.run([uv, "--version"], check=True, capture_output=True,
                          text=True).stdout.strip()


def compile_pylock(uv: str, reqs: list[str], python: str, exclude_newer: str | None,
                   constraints: dict[str, str] | None = None) -> dict:
    """uv's resolution for ``python``; ``constraints`` ({name: version}) hold packages at the
    versions another Python's lock chose, so that every Python gets one set where it can."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.txt"
        src.write_text("".join(r + "\n" for r in reqs))
        out = Path(tmp) / "pylock.toml"  # uv insists on the name pylock[.NAME].toml
        cmd = [uv, "pip", "compile", str(src), "--python-version", python,
               "--python-platform", PLATFORM, "--format", "pylock.toml", "-o", str(out),
               "--no-header", "--quiet"]
        if exclude_newer:
            cmd += ["--exclude-newer", exclude_newer]
        if constraints:
            cons = Path(tmp) / "constraints.txt"
            cons.write_text("".join(f"{n}=={v}\n" for n, v in sorted(constraints.items())))
            cmd += ["--constraint", str(cons)]
        subprocess.run(cmd, check=True)
        return tomllib.loads(out.read_text())


def tag_priority(python: str) -> dict[Tag, int]:
    """pip's preference order of wheel tags on CPython ``python``, linux x86_64, glibc 2.28."""
    major, minor = (int(x) for x in python.split("."))
    # manylinux_2_28 down to manylinux_2_5 and their legacy aliases (PEP 600), then plain linux
    plats = [f"manylinux_2_{m}_x86_64" for m in range(28, 4, -1)]
    plats += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
              "linux_x86_64"]
    order = list(cpython_tags((major, minor), platforms=plats))
    order += list(compatible_tags((major, minor), f"cp{major}{minor}", platforms=plats))
    return {t: i for i, t in reversed(list(enumerate(order)))}


def best_wheel(wheels: list[dict], priority: dict[Tag, int]) -> dict:
    """The one wheel pip would install of those uv listed (each installs on the target).

    One hash per package keeps the file small; ``pip --require-hashes`` considers only the
    files whose hash is listed, so it installs this one.
    """
    def rank(w: dict) -> int:
        _, _, _, tags = parse_wheel_filename(w["url"].rsplit("/", 1)[1])
        ranks = [priority[t] for t in tags if t in priority]
        if not ranks:
            raise SystemExit(f"{w['url']}: no tag installs on the target")
        return min(ranks)
    return min(wheels, key=rank)


def _variables(marker: Marker) -> set[str]:
    """The environment variables a marker reads (walks packaging's parsed form)."""
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, (list, tuple)):
            for item in node:
                walk(item)
        elif type(node).__name__ == "Variable":
            found.add(str(node.value))  # type: ignore[attr-defined]
    walk(marker._markers)
    return found


def marker_verdict(marker: str, python: str) -> bool | None:
    """True/False when ``marker`` holds/fails on every CPython ``python``.x on linux x86_64;
    None when it depends on more (then the line keeps it for pip to evaluate)."""
    known = {"implementation_name", "platform_python_implementation", "platform_machine",
             "sys_platform", "os_name", "platform_system", "python_version",
             "python_full_version", "implementation_version"}
    # packaging fills a variable the environment lacks from the machine running this script:
    # a marker on any other variable is left for pip to evaluate on the instance
    if _variables(Marker(marker)) - known:
        return None
    verdicts = set()
    for patch in ("0", "99"):
        env = {"implementation_name": "cpython", "platform_python_implementation": "CPython",
               "platform_machine": "x86_64", "sys_platform": "linux", "os_name": "posix",
               "platform_system": "Linux", "python_version": python,
               "python_full_version": f"{python}.{patch}", "implementation_version":
               f"{python}.{patch}"}
        try:
            verdicts.add(Marker(marker).evaluate(env))
        except Exception:  # a variable the target does not fix (platform_release, extra...)
            return None
    return verdicts.pop() if len(verdicts) == 1 else None


def requirement_lines(pylock: dict, python: str) -> list[str]:
    """One ``name==version [; marker] --hash=...`` line per package, sorted by name.

    The hash is that of the wheel pip would pick among those pylock lists (uv lists only those
    that install on the target); a package with no wheel falls back to its sdist's hash.
    """
    priority = tag_priority(python)
    lines = []
    for pkg in sorted(pylock["packages"], key=lambda p: p["name"]):
        wheels = pkg.get("wheels")
        files = [best_wheel(wheels, priority)] if wheels else (
            [pkg["sdist"]] if "sdist" in pkg else [])
        hashes = sorted({f["hashes"]["sha256"] for f in files if "sha256" in f.get("hashes", {})})
        if not hashes:
            raise SystemExit(f"{pkg['name']}: no sha256 in the resolution; cannot lock it")
        marker = ""
        if pkg.get("marker"):
            verdict = marker_verdict(pkg["marker"], python)
            if verdict is False:
                continue  # not installed on this target at all
            if verdict is None:
                marker = f" ; {pkg['marker']}"
        hashed = " ".join(f"--hash=sha256:{h}" for h in hashes)
        lines.append(f"{pkg['name']}=={pkg['version']}{marker} {hashed}")
    return lines


def render(vllm: str, python: str, ray: bool, lines: list[str], uv_ver: str,
           exclude_newer: str | None, command: str, held_to: str | None = None) -> str:
    head = [
        f"# {lock_name(vllm, python, ray)}: every package vLLM {vllm} "
        f"{'with Ray (multi-node) ' if ray else ''}needs on CPython {python}, linux x86_64",
        f"# (wheels for {PLATFORM}), pinned with the sha256 of the file pip installs there.",
        "# Generated by tools/lock_vllm.py with uv pip compile (--format pylock.toml); "
        f"{uv_ver}.",
        f"# Resolved as of: {exclude_newer or 'the day it was run (no --exclude-newer)'}",
        f"# Inputs: {'; '.join(inputs(vllm, ray))}",
        *([f"# Constraints: the cp{held_to.replace('.', '')} lock's versions (one version set "
           "across Pythons where a package allows it)"] if held_to else []),
        "# transformers<5: with transformers 5.x vLLM 0.11.0's get_tokenizer() raises",
        "#   AttributeError ... all_special_tokens_extended (vllm-project/vllm#30466).",
        f"# Packages: {len(lines)}",
        f"# Regenerate: {command}",
        "# Install: pip install --require-hashes --no-deps -r THIS_FILE",
    ]
    return "\n".join(head + lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm", default="0.11.0", help="the vLLM release to lock (default 0.11.0)")
    ap.add_argument("--python", action="append", choices=PYTHONS,
                    help="a Python to lock for (repeatable; default: all of "
                    f"{', '.join(PYTHONS)})")
    ap.add_argument("--exclude-newer", default=None,
                    help="resolve as of this date (YYYY-MM-DD or RFC 3339), for repeatable locks")
    ap.add_argument("--out", type=Path, default=REPO / "locks", help="output folder")
    ap.add_argument("--uv", default=shutil.which("uv") or "/tmp/uvenv/bin/uv",
                    help="the uv binary (pip install uv)")
    args = ap.parse_args(argv)
    if not Path(args.uv).exists() and not shutil.which(args.uv):
        ap.error(f"uv not found at {args.uv}; pip install uv, or pass --uv PATH")
    pythons = args.python or list(PYTHONS)
    command = f"python tools/lock_vllm.py --vllm {args.vllm}"
    if args.python:
        command += "".join(f" --python {p}" for p in args.python)
    if args.exclude_newer:
        command += f" --exclude-newer {args.exclude_newer}"
    uv_ver = uv_version(args.uv)
    args.out.mkdir(parents=True, exist_ok=True)
    first: dict[bool, dict[str, str]] = {}  # the oldest Python's versions, per ray flag
    for python in pythons:
        for ray in (False, True):
            pylock = compile_pylock(args.uv, inputs(args.vllm, ray), python, args.exclude_newer,
                                    first.get(ray))
            first.setdefault(ray, {p["name"]: p["version"] for p in pylock["packages"]})
            lines = requirement_lines(pylock, python)
            path = args.out / lock_name(args.vllm, python, ray)
            path.write_text(render(args.vllm, python, ray, lines, uv_ver, args.exclude_newer,
                                   command, None if python == pythons[0] else pythons[0]))
            print(f"{path}: {len(lines)} packages, {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
