"""Every command output shown in README.md and docs/ is what the command prints now.

A shown output is a marker line followed by a fenced block::

    <!-- output: advisor recommend --model llama-3-8b --ctx 8192 --top 3 -->
    ```text
    $ advisor recommend --model llama-3-8b --ctx 8192 --top 3
    ...what it prints...
    ```

This script runs each marked command in-process against the bundled catalog (100 columns, no
colour, a throw-away ADVISOR_HOME, the repository root as working directory: offline, no
credentials) and compares what it prints (stdout, then stderr; trailing blanks dropped) with the
block. ``--check`` (the default) lists every block that differs and exits 1;
``--write`` rewrites those blocks in place. ``tests/test_docs.py`` runs the check.

    python tools/docs_outputs.py [--check | --write] [FILE.md ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- output: advisor (?P<args>.+?) -->\n```text\n(?P<body>.*?)^```$",
                    re.M | re.S)
COLUMNS = 100


@dataclass
class Shown:
    path: Path
    args: str
    body: str  # the block as the file has it
    start: int  # offsets of the block's body in the file
    end: int


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def shown(path: Path) -> Iterator[Shown]:
    text = path.read_text(encoding="utf-8")
    for m in MARKER.finditer(text):
        yield Shown(path, m.group("args"), m.group("body"), m.start("body"), m.end("body"))


def run(args: str) -> str:
    """``$ advisor ARGS`` and what the command prints, as the block should read."""
    from typer.testing import CliRunner

    from advisor.cli import app

    with tempfile.TemporaryDirectory() as home:
        env = {"COLUMNS": str(COLUMNS), "NO_COLOR": "1", "TERM": "dumb", "ADVISOR_HOME": home,
               "ADVISOR_CATALOG_DIR": None}
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            res = CliRunner().invoke(app, shlex.split(args), env=env)
        finally:
            os.chdir(cwd)
    out = res.stdout + (res.stderr if res.stderr else "")
    lines = [line.rstrip() for line in out.rstrip("\n").split("\n")]
    if res.exit_code:
        lines.append(f"(exit {res.exit_code})")
    return "\n".join([f"$ advisor {args}", *lines]) + "\n"


LAYERS_BLOCK = re.compile(r"^<!-- layers -->\n(?P<body>.*?)^<!-- /layers -->$", re.M | re.S)


def layers_text() -> str:
    """The layers ``tests/test_structure.py`` enforces, lowest first, as a numbered list."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_structure", ROOT / "tests/test_structure.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return "".join(f"{i}. " + ", ".join(f"`{m}`" for m in names) + "\n"
                   for i, names in enumerate(mod.LAYERS, 1))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def check(paths: list[Path], write: bool = False) -> list[str]:
    """The blocks that differ from what their command prints (rewritten with ``write``), and
    the architecture page's list of layers when it is not the structure test's."""
    stale: list[str] = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        edits: list[tuple[int, int, str]] = []
        for m in LAYERS_BLOCK.finditer(text):
            if m.group("body") != layers_text():
                stale.append(f"{_name(path)}:{text[:m.start()].count(chr(10))}: "
                             "the layers of tests/test_structure.py")
                edits.append((m.start("body"), m.end("body"), layers_text()))
        for s in shown(path):
            now = run(s.args)
            if now != s.body:
                line = text[:s.start].count("\n")
                stale.append(f"{_name(path)}:{line}: advisor {s.args}")
                edits.append((s.start, s.end, now))
        if write and edits:
            for start, end, now in sorted(edits, reverse=True):
                text = text[:start] + now + text[end:]
            path.write_text(text, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the blocks that differ")
    ap.add_argument("--check", action="store_true", help="only report (the default)")
    ap.add_argument("files", nargs="*", type=Path)
    a = ap.parse_args(argv)
    paths = [p.resolve() for p in a.files] or pages()
    stale = check(paths, write=a.write)
    for s in stale:
        print(("rewrote " if a.write else "stale: ") + s)
    total = sum(1 for p in paths for _ in shown(p))
    print(f"{total} shown outputs, {len(stale)} {'rewritten' if a.write else 'stale'}")
    return 1 if stale and not a.write else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
