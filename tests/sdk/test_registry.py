"""The registry is the only list of clouds; each cloud's folder has the same rooms; an API-key
reference is only ever handed to an instance of the cloud that can read it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.clouds import registry
from advisor.provisioning import provision

SRC = Path(__file__).resolve().parents[2] / "src" / "advisor"
CLOUD_WORD = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(registry.CLOUDS) + r")(?![A-Za-z0-9])",
                        re.I)
ROOMS = {"__init__.py", "compute.py", "quota.py", "refresh.py", "secrets.py", "options.py",
         "preflight.py", "resources.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                out.add(id(first.value))
    return out


def _mentions(path: Path) -> list[str]:
    """Cloud names in code: string literals (not docstrings), names, attributes, defs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            texts.append(node.value)
        elif isinstance(node, ast.Name):
            texts.append(node.id)
        elif isinstance(node, ast.Attribute):
            texts.append(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            texts.append(node.name)
        hits += [f"{path.name}:{getattr(node, 'lineno', '?')}: {t[:80]!r}" for t in texts
                 if CLOUD_WORD.search(t)]
    return hits


def test_no_cloud_is_named_outside_its_folder_and_the_registry():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).parts
        if rel[:2] == ("clouds", "registry.py") or (rel[0] == "clouds" and len(rel) > 2
                                                    and rel[1] in registry.CLOUDS):
            continue
        found += _mentions(path)
    assert found == []


def test_the_scan_would_see_a_cloud_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""aws in a docstring is fine."""\nPROVIDERS = ["gcp"]\nx.azure_thing = 1\n')
    assert len(_mentions(bad)) == 2


@pytest.mark.parametrize("cloud", registry.CLOUDS)
def test_every_cloud_has_the_same_rooms(cloud):
    folder = SRC / "clouds" / cloud
    assert {p.name for p in folder.glob("*.py")} == ROOMS
    assert (folder / "secret_fetch.sh").is_file()  # its instances' secret reader (the launcher)
    info = registry.info(cloud)
    assert info.name == cloud and info.backend.startswith(f"advisor.clouds.{cloud}.compute:")
    assert info.key_scheme.matches(info.key_scheme.example)


def test_descriptors_import_no_sdk():
    code = ("import sys; from advisor.clouds import registry; registry.all_info(); "
            "registry.key_ref_pattern(); "
            "print([m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'google',"
            " 'azure')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_unknown_cloud_names_the_known_ones():
    from advisor.errors import NotFoundError

    with pytest.raises(NotFoundError, match="oci") as exc:
        registry.info("oci")
    assert exc.value.exit_code == 2
    assert all(c in (exc.value.hint or "") for c in registry.CLOUDS)


@pytest.mark.parametrize("provider, ref, expected", [
    ("aws", "aws-ssm:/team/key", "aws-ssm:/team/key"),
    ("aws", None, "aws-ssm:/advisor/vllm-api-key"),
    ("gcp", "aws-ssm:/team/key", "gcp-secret:advisor-vllm-api-key"),  # never handed across
    ("gcp", "gcp-secret:k", "gcp-secret:k"),
    ("azure", "aws-ssm:/team/key", None),  # no default vault: the user must name one
    ("azure", None, None),
    ("azure", "azure-kv:vault1/k", "azure-kv:vault1/k"),
    ("aws", "azure-kv:vault1/k", "aws-ssm:/advisor/vllm-api-key"),
    ("aws", "file:/etc/advisor/key", "file:/etc/advisor/key"),  # any host can read a file
    ("lab", "aws-ssm:/team/key", "aws-ssm:/team/key"),  # a private box: the user's call
    ("lab", None, None),
])
def test_key_reference_per_cloud(provider, ref, expected):
    assert registry.key_ref_for(provider, ref) == expected


class Recorder:
    """Records the LaunchSpec of each candidate of a dry run."""

    def __init__(self, name: str) -> None:
        self.name = name

    def request(self, spec, zone):
        return {"provider": spec.provider, "key": spec.api_key_ref,
                "user_data_key": "ADVISOR_API_KEY_REF=" + spec.api_key_ref in spec.user_data}


def test_failover_across_clouds_hands_each_cloud_its_own_key_reference():
    recs = {c: Recorder(c) for c in registry.CLOUDS}
    res = provision("qwen3-8b", 8192, api_key_ref="gcp-secret:team-key", dry_run=True,
                    backends=recs, max_types=12, name="keys")
    seen = {(r["provider"], r["key"]) for r in res.requests}
    providers = {p for p, _ in seen}
    assert {"aws", "gcp"} <= providers  # the top 12 span clouds
    for p, key in seen:
        assert registry.key_ref_cloud(key) == p
    assert ("gcp", "gcp-secret:team-key") in seen
    assert ("aws", "aws-ssm:/advisor/vllm-api-key") in seen
    assert all(r["user_data_key"] for r in res.requests)
    assert any("another cloud's secret store" in w for w in res.warnings)
    assert "azure" not in providers  # no default vault: skipped, and said so
    assert any("azure candidates skipped" in w for w in res.warnings)


@pytest.mark.parametrize("cloud", registry.CLOUDS)
def test_every_backend_implements_the_whole_cloud_protocol(cloud):
    """Each registered backend has every member of CloudProvider (the orchestrator's Provider
    and the per-cloud seams) with the protocol's parameter names, so no seam is reached by a
    name only one cloud has."""
    import importlib
    import inspect

    from advisor.clouds.base import CloudProvider, Provider

    module, _, cls_name = registry.info(cloud).backend.partition(":")
    backend = getattr(importlib.import_module(module), cls_name)
    members = {n: f for proto in (Provider, CloudProvider) for n, f in vars(proto).items()
               if inspect.isfunction(f) and not n.startswith("_")}
    assert len(members) >= 16
    for name, proto_fn in members.items():
        impl = getattr(backend, name, None)
        assert callable(impl), f"{cloud}: {name} missing"
        want = list(inspect.signature(proto_fn).parameters)
        got = list(inspect.signature(impl).parameters)
        assert got[:len(want)] == want, (cloud, name, got)
    assert backend.name == cloud
