"""The NCCL topology XML parser (advisor.catalog.nccl_topology), on hand-written files in
NCCL's format: NUMA nodes, bus-id order, switches, the refusals."""

from __future__ import annotations

import pytest

from advisor.catalog import nccl_topology as nt
from advisor.errors import UserInputError

#: 2 NUMA nodes; on node 0 a switch with 2 GPUs and 1 NIC, listed out of bus order; on node 1
#: one GPU on a root port and a switch with a GPU and an InfiniBand NIC
TWO_NODES = """<?xml version="1.0"?>
<!-- hand-written for the tests, in the format of NCCL_TOPO_FILE -->
<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="ffff:ff:01.0" class="0x060400">
      <pci busid="0000:2a:00.0" class="0x030200"/>
      <pci busid="0000:1b:00.0" class="0x030200"/>
      <pci busid="0000:1c:00.0" class="0x020000"/>
    </pci>
  </cpu>
  <cpu numaid="1" arch="x86_64" vendor="AuthenticAMD" familyid="25" modelid="17">
    <pci busid="0000:9a:00.0" class="0x030200"/>
    <pci busid="ffff:ff:02.0" class="0x060400">
      <pci busid="0000:8b:00.0" class="0x030000"/>
      <pci busid="0000:8c:00.0" class="0x020700"/>
    </pci>
  </cpu>
</system>
"""


def test_cpus_are_read_with_vendor_family_and_model():
    t = nt.parse(TWO_NODES)
    assert [(c.numaid, c.vendor, c.familyid, c.modelid, c.arch) for c in t.cpus] == [
        (0, "intel", 6, 143, "x86_64"), (1, "amd", 25, 17, "x86_64")]
    assert t.numa_nodes == 2


def test_gpus_are_numbered_in_pci_bus_order_with_their_numa_node():
    t = nt.parse(TWO_NODES)
    # file order is 2a, 1b, 9a, 8b; nvidia-smi order is 1b, 2a, 8b, 9a
    assert [g.busid for g in t.gpus] == ["0000:1b:00.0", "0000:2a:00.0", "0000:8b:00.0",
                                         "0000:9a:00.0"]
    assert [g.index for g in t.gpus] == [0, 1, 2, 3]
    assert t.gpu_nodes == [0, 0, 1, 1]


def test_a_switch_holds_its_gpus_and_nic():
    t = nt.parse(TWO_NODES)
    sw = {s.busid: s for s in t.switches}
    assert sw["ffff:ff:01.0"].gpus == (0, 1)
    assert sw["ffff:ff:01.0"].nics == ("0000:1c:00.0",)
    assert sw["ffff:ff:02.0"].gpus == (2,) and sw["ffff:ff:02.0"].nics == ("0000:8c:00.0",)
    assert [g.switch for g in t.gpus] == ["ffff:ff:01.0", "ffff:ff:01.0", "ffff:ff:02.0", None]
    frag = nt.fragment(t, source="https://example.org/x.xml", as_of="2024-01-02",
                       confidence="documented")
    assert frag.host["pcie_switches"] == [{"gpus": [0, 1], "nics": ["0000:1c:00.0"]},
                                          {"gpus": [2], "nics": ["0000:8c:00.0"]}]
    assert frag.numa == {"nodes": 2, "gpu_nodes": [0, 0, 1, 1]}
    assert frag.sources["numa"]["confidence"] == "documented"


def test_gpu_and_nic_elements_name_devices_and_dev_numbers_are_checked():
    text = """<system version="1"><cpu numaid="0">
      <pci busid="0000:00:00.0" class="0x060400">
        <pci busid="0000:4f:00.0"><gpu dev="0" rank="0"/></pci>
        <pci busid="0000:50:00.0"><nic><net name="rdmap80s0" dev="0"/></nic></pci>
      </pci>
      <pci busid="0000:60:00.0"><gpu dev="1"/></pci>
    </cpu></system>"""
    t = nt.parse(text)
    assert [(g.busid, g.dev) for g in t.gpus] == [("0000:4f:00.0", 0), ("0000:60:00.0", 1)]
    assert t.switches[0].nics == ("rdmap80s0",)
    swapped = text.replace('dev="0" rank="0"', 'dev="1"').replace('<gpu dev="1"/>',
                                                                   '<gpu dev="0"/>')
    with pytest.raises(UserInputError, match="bus-id order"):
        nt.parse(swapped)


def test_a_doctype_or_entity_is_refused_before_parsing():
    bomb = ('<?xml version="1.0"?><!DOCTYPE system [<!ENTITY a "aaaaaaaaaa">'
            '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><system version="1">&b;</system>')
    with pytest.raises(UserInputError, match="DOCTYPE or ENTITY") as err:
        nt.parse(bomb)
    assert err.value.hint
    with pytest.raises(UserInputError, match="DOCTYPE or ENTITY"):
        nt.parse('<system><!entity x "y"></system>')


def test_the_size_limit():
    big = TWO_NODES.replace("</system>", "<!--" + "x" * nt.MAX_BYTES + "--></system>")
    with pytest.raises(UserInputError, match="over the"):
        nt.parse(big)
    assert nt.parse(TWO_NODES.encode()).numa_nodes == 2  # bytes are read the same way


def test_the_depth_limit():
    deep = ('<system><cpu numaid="0">' + '<pci busid="0000:00:00.0">' * 40
            + "</pci>" * 40 + "</cpu></system>")
    with pytest.raises(UserInputError, match="deep"):
        nt.parse(deep)


@pytest.mark.parametrize("text, words", [
    ('<system><cpu numaid="0"><pci busid="0000:01:00.0" class="0x030200"></cpu></system>',
     "not well-formed"),
    ("<graphs><graph/></graphs>", "not <system>"),
    ('<system version="1"></system>', "no <cpu>"),
    ('<system><cpu numaid="x"/></system>', "not a number"),
    ('<system><cpu numaid="0"><pci busid="1:2:3" class="0x030200"/></cpu></system>',
     "not a PCI bus id"),
    ('<system><cpu numaid="0"><pci busid="0000:01:00.0" class="0x030200"/>'
     '<pci busid="0000:01:00.0" class="0x030200"/></cpu></system>', "twice"),
])
def test_malformed_files_are_one_line_user_errors(text, words):
    with pytest.raises(UserInputError) as err:
        nt.parse(text)
    assert words in err.value.message
    assert "\n" not in err.value.message


#: AWS's g5/p5 style: switches (or bare switch ports) with no GPU named
NO_GPUS = """<system version="1">
  <cpu numaid="0"><pci busid="0000:00:16.0"/><pci busid="0000:00:17.0"/></cpu>
  <cpu numaid="1"><pci busid="0000:00:1a.0"/><pci busid="0000:00:15.0"/></cpu>
</system>"""


def test_a_file_without_gpus_gives_only_the_node_count():
    t = nt.parse(NO_GPUS)
    assert t.gpus == () and t.numa_nodes == 2 and len(t.unnamed) == 4
    frag = nt.fragment(t, source="https://example.org/g.xml", as_of="2024-01-02",
                       confidence="documented")
    assert frag.numa == {"nodes": 2, "gpu_nodes": None}
    assert list(frag.sources) == ["numa.nodes"]


def test_inferring_one_gpu_per_switch_port_needs_the_count_to_match():
    with pytest.raises(UserInputError, match="4 unclassified PCI devices .* for 3 GPUs"):
        nt.infer_gpus(nt.parse(NO_GPUS), 3)
    t = nt.infer_gpus(nt.parse(NO_GPUS, nics=["0000:00:15.0"]), 3)
    assert t.gpu_nodes == [0, 0, 1] and t.gpus_inferred
    assert [n.busid for n in t.nics] == ["0000:00:15.0"] and t.nics[0].numa == 1
    frag = nt.fragment(t, source="https://example.org/g.xml", as_of="2024-01-02",
                       confidence="documented")
    assert frag.sources["numa.nodes"]["confidence"] == "documented"
    assert frag.sources["numa.gpu_nodes"]["confidence"] == "inferred"
    with pytest.raises(UserInputError, match="names its GPUs"):
        nt.infer_gpus(nt.parse(TWO_NODES), 4)
    with pytest.raises(UserInputError, match="--nic"):
        nt.parse(NO_GPUS, nics=["0000:00:99.0"])


def test_inferring_behind_switches_takes_their_unnamed_devices_as_nics():
    text = """<system><cpu numaid="0">
      <pci busid="0000:56:00.0"><pci busid="0000:60:00.0"/><pci busid="0000:61:00.0"/></pci>
      <pci busid="0000:45:00.0"><pci busid="0000:4f:00.0"/></pci>
    </cpu><cpu numaid="1">
      <pci busid="0000:89:00.0"><pci busid="0000:93:00.0"/></pci>
    </cpu></system>"""
    t = nt.infer_gpus(nt.parse(text), 3)
    assert t.gpu_nodes == [0, 0, 1]
    assert [(s.busid, s.gpus, s.nics) for s in t.catalog_switches()] == [
        ("0000:45:00.0", (0,), ("0000:4f:00.0",)),
        ("0000:56:00.0", (1,), ("0000:60:00.0", "0000:61:00.0")),
        ("0000:89:00.0", (2,), ("0000:93:00.0",))]


SMALL_ENTRY_FILE = """# a comment that must survive
schema_version: 1
provider: aws
instances:
  - name: box.a
    vcpus: 8
    gpu: {model: L40S, count: 4}
    cpu: {codename: Milan}
    price: {on_demand_usd_per_hour: 1.0, region: us-east-1, as_of: 2026-12-03}
    sources:
      default: {source: "fixture", as_of: 2026-12-03}
      cpu: {source: "fixture cpu", as_of: 2026-12-03}
  - name: box.b
    vcpus: 8
    gpu: {model: L40S, count: 4}
    host:
      dedicated_cores: true
    numa: {nodes: 9}
    sources:
      default: {source: "fixture", as_of: 2026-12-03}
      numa: {source: "old", as_of: 2020-01-01}
"""


def test_update_in_place_changes_only_that_entry():
    frag = nt.fragment(nt.parse(TWO_NODES), source="https://example.org/t.xml",
                       as_of="2024-01-02", confidence="documented")
    out = nt.update_instance_yaml(SMALL_ENTRY_FILE, "box.a", frag)
    a_end = SMALL_ENTRY_FILE.index("  - name: box.b")
    assert out.endswith(SMALL_ENTRY_FILE[a_end:])  # box.b byte-identical
    assert out.startswith(SMALL_ENTRY_FILE[:SMALL_ENTRY_FILE.index("    price:")])
    assert "    numa:\n      nodes: 2\n      gpu_nodes: [0, 0, 1, 1]\n" in out
    assert "      cpu: {source: \"fixture cpu\", as_of: 2026-12-03}\n" in out  # kept as written

    out_b = nt.update_instance_yaml(SMALL_ENTRY_FILE, "box.b", frag)
    assert out_b.startswith(SMALL_ENTRY_FILE[:a_end])  # box.a byte-identical
    assert "nodes: 9" not in out_b and "source: \"old\"" not in out_b
    assert "dedicated_cores: true" in out_b  # the other host fact is kept
    with pytest.raises(UserInputError, match="0 entries"):
        nt.update_instance_yaml(SMALL_ENTRY_FILE, "box.c", frag)
