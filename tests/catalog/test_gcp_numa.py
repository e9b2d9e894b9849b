"""GCP GPU-to-NUMA maps read from SpareCores' measured lstopo printouts (issue 31), and the
tool that reads them (tools/sc_inspector_facts.py) on a small hwloc XML fixture."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from advisor import load_catalog
from advisor.catalog import numa_known
from advisor.catalog.schema import provenance_of

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "sc_inspector" / "lstopo-2node-3gpu.xml"
CAT = load_catalog()
GCP = {i.name: i for i in CAT.instances.values() if i.provider == "gcp"}
LSTOPO_URL = re.compile(r"https://github\.com/SpareCores/sc-inspector-data/blob/(?P<commit>[0-9a-f]{40})"
                        r"/data/gcp/(?P<type>[a-z0-9-]+)/lstopo/stdout")


def _tool():
    name = "sc_inspector_facts"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _measured_maps() -> dict[str, str]:
    """GCP types with a full map whose source is their own lstopo printout at a pinned
    (40-hex) sc-inspector-data commit -> that commit."""
    out = {}
    for name, inst in GCP.items():
        if not numa_known(inst):
            continue
        prov = provenance_of(inst.sources, "numa.gpu_nodes")
        m = LSTOPO_URL.fullmatch(prov.source)
        if m and m["type"] == name and prov.confidence == "measured":
            out[name] = m["commit"]
    return out


def test_at_least_20_gcp_types_have_a_measured_map_from_a_pinned_printout():
    maps = _measured_maps()
    assert len(maps) >= 20, sorted(maps)
    assert {"a3-highgpu-8g", "a2-highgpu-8g"} <= set(maps)
    # every one cites the commit the tool reads (the one the AWS and Azure entries cite too)
    assert set(maps.values()) == {_tool().PINNED}


@pytest.mark.parametrize("name", ["a3-highgpu-8g", "a2-highgpu-8g"])
def test_8_gpu_a2_a3_split_4_and_4_over_two_nodes(name):
    inst = GCP[name]
    assert inst.numa.nodes == 2
    assert inst.numa.gpu_nodes == [0, 0, 0, 0, 1, 1, 1, 1]


def test_inferred_maps_say_from_which_measured_size():
    for name, inst in GCP.items():
        if not numa_known(inst):
            continue
        prov = provenance_of(inst.sources, "numa.gpu_nodes")
        if prov.confidence == "inferred" and "sc-inspector-data" in prov.source:
            m = re.match(r"inferred from (\S+) \(measured\)", prov.note or "")
            assert m, name
            sibling = GCP[m[1]]
            assert sibling.numa.gpu_nodes == inst.numa.gpu_nodes
            assert sibling.name in _measured_maps()


def test_the_tool_reads_the_fixture_to_its_map():
    t = _tool().parse_lstopo(FIXTURE.read_text())
    assert t.numa_nodes == [0, 1] and t.packages == 2
    # NVIDIA 3D/VGA controllers only (no NVSwitch-class 0680, no gVNIC), in bus-id order
    assert [g.busid for g in t.gpus] == ["0000:04:00.0", "0000:05:00.0", "0000:84:00.0"]
    assert t.gpu_nodes == [0, 0, 1]
    assert t.hwloc_version == "2.10.0"


def test_hwloc_bitmaps_and_cpu_names():
    tool = _tool()
    assert tool.parse_bitmap("0x00000003") == {0, 1}
    assert tool.parse_bitmap("0x00000001,,0x0") == {64}
    assert tool.catalog_cpu_name("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz") == (
        "Intel Xeon Platinum 8481C")
    assert tool.catalog_cpu_name("INTEL(R) XEON(R) PLATINUM 8581C CPU @ 2.10GHz") == (
        "Intel Xeon Platinum 8581C")
    assert tool.catalog_cpu_name("Intel(R) Xeon(R) CPU @ 2.20GHz") is None  # names no part
    assert tool.catalog_cpu_name("AMD EPYC 9B45 128-Core Processor") == "AMD EPYC 9B45"


def test_the_in_place_update_touches_only_its_entry():
    tool = _tool()
    text = ("schema_version: 1\nprovider: gcp\ninstances:\n"
            "- name: x-1g\n  family: x\n  gpu: {model: L4, count: 1}\n"
            "  sources:\n    default: {source: s, as_of: '2026-01-01', confidence: documented}\n"
            "- name: y-1g\n  family: y\n  gpu: {model: L4, count: 1}\n"
            "  sources:\n    default: {source: s, as_of: '2026-01-01', confidence: documented}\n")
    f = tool.Facts("x-1g", cpu={"sockets": 1}, numa={"nodes": 1, "gpu_nodes": [0]},
                   sources={"numa": {"source": "u", "as_of": "2026-03-29",
                                     "confidence": "measured", "note": "n: it's"}})
    out = tool.update_entry(text, f)
    assert out.endswith(text.split("- name: y-1g")[1])
    assert "  cpu: {sockets: 1}\n  numa:\n    nodes: 1\n    gpu_nodes: [0]\n" in out
    assert tool.update_entry(out, f) == out  # idempotent
