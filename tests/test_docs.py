"""The docs cannot go stale: every command output they show is what the command prints now, the
architecture page lists the layers the structure test enforces and names every module, the site
builds with warnings as errors, and the README stays short."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "tools/docs_outputs.py")
assert _spec and _spec.loader
docs_outputs = importlib.util.module_from_spec(_spec)
sys.modules["docs_outputs"] = docs_outputs  # its dataclass looks itself up there
_spec.loader.exec_module(docs_outputs)


def test_every_shown_output_is_what_the_command_prints_now():
    stale = docs_outputs.check(docs_outputs.pages())
    assert stale == [], ("regenerate with `python tools/docs_outputs.py --write` and read the "
                         f"diff: {stale}")


def test_the_docs_show_the_main_commands_outputs():
    shown = [s.args for p in docs_outputs.pages() for s in docs_outputs.shown(p)]
    for command in ("recommend", "fit", "perf", "plan", "ticket"):
        assert any(a.split()[0] == command for a in shown), command
    readme = [s.args for s in docs_outputs.shown(ROOT / "README.md")]
    assert any(a.startswith("recommend --model llama-3-8b --ctx 8192") for a in readme)


def test_a_changed_figure_is_caught(tmp_path):
    """The check compares whole outputs: one price changed in a shown block is reported (and
    --write puts back what the command prints)."""
    page = tmp_path / "page.md"
    src = next(s for s in docs_outputs.shown(ROOT / "README.md")
               if s.args.startswith("recommend"))
    now = docs_outputs.run(src.args)
    line = next(x for x in now.splitlines() if x.startswith(("aws:", "gcp:", "azure:")))
    price = line.split()[1]
    bumped = now.replace(line, line.replace(price, f"{float(price) + 0.01:.2f}", 1), 1)
    assert bumped != now
    page.write_text(f"<!-- output: advisor {src.args} -->\n```text\n{bumped}```\n")
    stale = docs_outputs.check([page])
    assert len(stale) == 1 and src.args in stale[0]
    docs_outputs.check([page], write=True)
    assert docs_outputs.check([page]) == []


def test_the_architecture_page_names_every_module():
    text = (ROOT / "docs/architecture.md").read_text()
    missing = [str(f.relative_to(ROOT / "src/advisor"))
               for f in sorted((ROOT / "src/advisor").rglob("*.py"))
               if not (f.name == "__init__.py" and f.parent.name != "advisor")
               and f.name not in text]
    assert missing == []
    assert docs_outputs.LAYERS_BLOCK.search(text)


def test_the_catalog_page_counts_and_names_every_model_alias():
    """docs/catalog.md's models row had said 16 aliases while 17 shipped."""
    import re

    import yaml

    aliases = [m["alias"] for m in yaml.safe_load(
        (ROOT / "catalogs/models/index.yaml").read_text())["models"]]
    (row,) = [line for line in (ROOT / "docs/catalog.md").read_text().splitlines()
              if line.startswith("| `models/` |")]
    assert re.search(rf"\b{len(aliases)} aliases\b", row), row
    # a family written once with its sizes after a slash (qwen3-8b/32b) names each size
    named = set()
    for word in re.findall(r"[a-z0-9][a-z0-9.\-/]*[a-z0-9]", row.split(":", 1)[1]):
        head, *sizes = word.split("/")
        named.add(head)
        stem = head.rsplit("-", 1)[0]
        named.update(f"{stem}-{size}" for size in sizes)
    assert set(aliases) <= named, sorted(set(aliases) - named)
    gpus = yaml.safe_load((ROOT / "catalogs/gpus.yaml").read_text())["gpus"]
    (row,) = [line for line in (ROOT / "docs/catalog.md").read_text().splitlines()
              if line.startswith("| `gpus.yaml` |")]
    assert re.search(rf"\b{len(gpus)} GPUs\b", row), row


def test_the_readme_is_short_and_points_at_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"docs/{page.name}" in readme, page.name


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site/architecture/index.html").is_file()
