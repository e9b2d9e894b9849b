"""Issue 33: one way to read a file. Every read of a path a user controls goes through the
bounded reader (advisor.inputs: regular files only, a size limit, checked before and during the
read). This walks the code and fails on any other ``open()`` or ``Path.read_text/read_bytes``
that is not in the list below, each with the reason it may read directly."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "advisor"

#: (module, what is read) -> how many such calls, and why they need not be bounded
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("catalog/cache.py", "open"): (1, "advisor's own cache file, in its own cache folder, "
                                      "after a size check"),
    ("clouds/registry.py", "read_text"): (1, "a secret reader shipped in the package"),
    ("core/confidence.py", "read_text"): (1, "accuracy.json shipped in the package"),
    ("core/stepmodel.py", "read_text"): (1, "kernel_curves.json shipped in the package"),
    ("host/doctor.py", "read_text"): (1, "the JSON Schema shipped in the package"),
    ("render/cloudinit.py", "read_text"): (3, "the launcher templates shipped in the package"),
    ("render/local.py", "read_text"): (1, "a template shipped in the package"),
    ("state.py", "open"): (3, "/proc/PID/stat of a lease holder, and advisor's own state file "
                              "after _check_file refused anything but a regular file"),
    ("state.py", "read_bytes"): (1, "the temporary state file advisor itself just made"),
}


def _direct_reads(path: Path) -> Counter[str]:
    """``open`` (the builtin) and ``x.read_text()``/``x.read_bytes()`` method calls; the bare
    names ``read_text``/``read_bytes`` are advisor.inputs' bounded readers."""
    found: Counter[str] = Counter()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            found["open"] += 1
        elif isinstance(f, ast.Attribute) and f.attr in ("read_text", "read_bytes"):
            found[f.attr] += 1
    return found


def test_every_direct_read_is_listed_with_its_reason():
    seen: dict[tuple[str, str], int] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "inputs.py":  # the bounded reader itself
            continue
        for what, n in _direct_reads(path).items():
            seen[(rel, what)] = n
    unlisted = {k: n for k, n in seen.items() if k not in ALLOWED}
    assert not unlisted, ("read through advisor.inputs (read_text/read_bytes/read_json with a "
                          f"limit), or list it here with its reason: {unlisted}")
    changed = {k: (seen.get(k, 0), n) for k, (n, _why) in ALLOWED.items() if seen.get(k) != n}
    assert not changed, f"the list is out of date (found, listed): {changed}"


def test_the_walk_sees_a_direct_read(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("from pathlib import Path\nPath('x').read_text()\nopen('y')\n"
                      "from advisor.inputs import read_text\nread_text('z', limit=1)\n")
    assert _direct_reads(sample) == Counter({"read_text": 1, "open": 1})
