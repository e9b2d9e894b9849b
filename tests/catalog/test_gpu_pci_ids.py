"""Every catalog GPU names the PCI device ids its cards report in sysfs, with a source, and no id
names two GPUs: ``--gpu local`` and ``render --target local`` identify a host's GPU by them."""

from __future__ import annotations

import advisor

CAT = advisor.load_catalog()


def test_every_gpu_has_sourced_pci_ids():
    for gpu in CAT.gpus.values():
        assert gpu.pci_device_ids, gpu.id
        src = gpu.sources.get("pci_device_ids")
        assert src is not None and "pci.ids" in src.source, gpu.id
        # the quoted pci.ids line names the first id
        assert gpu.pci_device_ids[0][2:] in (src.note or ""), gpu.id


def test_no_pci_id_names_two_gpus():
    seen: dict[tuple[str, str], str] = {}
    for gpu in CAT.gpus.values():
        for dev in gpu.pci_device_ids:
            key = (gpu.vendor, dev)
            assert key not in seen, f"{dev} names {seen.get(key)} and {gpu.id}"
            seen[key] = gpu.id


def test_known_ids():
    # pci.ids (pciutils/pciids c1c12547): 2330 GH100 [H100 SXM5 80GB], 2237 GA102GL [A10G]
    by_id = {d: g.id for g in CAT.gpus.values() for d in g.pci_device_ids}
    assert by_id["0x2330"] == "H100-SXM"
    assert by_id["0x2237"] == "A10G"
    assert by_id["0x20b5"] == "A100-80GB-PCIe"
