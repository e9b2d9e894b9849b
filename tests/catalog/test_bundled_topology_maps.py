"""The GPU-to-NUMA maps read from AWS's NCCL topology files (aws/aws-ofi-nccl ``topology/``)
are in the bundled catalog, with their source, and the ranking stops calling their placement
unpublished; a type without a map still gets the risk."""

from __future__ import annotations

import pytest

import advisor
from advisor.catalog.loader import load

MAPPED = {
    "aws:p4d.24xlarge": [0, 0, 0, 0, 1, 1, 1, 1],
    "aws:p4de.24xlarge": [0, 0, 0, 0, 1, 1, 1, 1],
    "aws:p5.48xlarge": [0, 0, 0, 0, 1, 1, 1, 1],
    "aws:g5.48xlarge": [0, 0, 0, 0, 1, 1, 1, 1],
}
UNPUBLISHED = "GPU-to-NUMA placement not published"


@pytest.fixture(scope="module")
def cat():
    return load()


@pytest.mark.parametrize("key", sorted(MAPPED))
def test_the_map_and_its_source_are_in_the_catalog(cat, key):
    from advisor.catalog.schema import provenance_of

    inst = cat.instance(key)
    assert inst.numa.nodes == 2
    assert inst.numa.gpu_nodes == MAPPED[key]
    assert inst.host.pcie_switches and sorted(
        g for sw in inst.host.pcie_switches for g in sw.gpus) == list(range(8))
    prov = provenance_of(inst.sources, "numa.gpu_nodes")
    assert prov.source.startswith("https://github.com/aws/aws-ofi-nccl/blob/")
    # p4d/p4de name their GPUs; the g5 and p5 files list only the switches they sit behind
    assert prov.confidence == ("documented" if "p4d" in key else "inferred")


def _risks(key: str) -> list[str]:
    recs = advisor.recommend("llama-3-8b", 8192, batch=True, instances=[key], top=1)
    assert recs, key
    return recs[0].risks


@pytest.mark.parametrize("key", sorted(MAPPED))
def test_the_ranking_no_longer_says_placement_is_unpublished(key):
    assert not [r for r in _risks(key) if r.startswith(UNPUBLISHED)]


def test_a_type_without_a_map_still_gets_the_risk(cat):
    key = next(i.key for i in cat.filter(provider="aws")
               if i.gpu.count == 8 and i.numa.gpu_nodes is None)
    assert [r for r in _risks(key) if r.startswith(UNPUBLISHED)]
