"""The pydantic models on their own: provenance lookup and the guards on names and numbers."""

from __future__ import annotations

import datetime as dt
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from advisor.catalog.schema import InstanceType, Price, Provenance, provenance_of

SRC = {"default": Provenance(source="doc A", as_of=dt.date(2026, 1, 1)),
       "numa": Provenance(source="doc B", as_of=dt.date(2026, 1, 2), confidence="measured")}
SHELL_META = set(" \t\n;&|$`'\"\\<>(){}[]*?!#~/")


def _instance(**over):
    base = dict(provider="aws", name="p5.48xlarge", vcpus=192, memory_gib=2048,
                gpu={"model": "H100-SXM", "count": 8},
                sources={"default": {"source": "doc", "as_of": "2026-01-01"}})
    base.update(over)
    return InstanceType.model_validate(base)


def test_provenance_of_walks_up_the_field_path():
    assert provenance_of(SRC, "numa.gpu_nodes").source == "doc B"
    assert provenance_of(SRC, "numa").confidence == "measured"
    assert provenance_of(SRC, "price.region").source == "doc A"


def test_confidence_is_one_of_three_words():
    with pytest.raises(ValidationError):
        Provenance(source="doc A", as_of=dt.date(2026, 1, 1), confidence="guessed")


def test_key_joins_provider_and_name():
    assert _instance().key == "aws:p5.48xlarge"


def test_spot_price_alone_also_needs_region_and_date():
    with pytest.raises(ValidationError, match="region and as_of"):
        Price(spot_usd_per_hour=1.0)
    assert Price().on_demand_usd_per_hour is None  # unknown price is fine


def test_models_are_frozen():
    inst = _instance()
    with pytest.raises(ValidationError):
        inst.vcpus = 1  # type: ignore[misc]


def test_regions_may_not_repeat():
    with pytest.raises(ValidationError, match="twice"):
        _instance(regions=["us-east-1", "us-east-1"])


@given(st.text(min_size=1, max_size=40))
def test_a_name_that_passes_has_no_shell_metacharacter(name):
    try:
        inst = _instance(name=name)
    except ValidationError:
        return
    assert not (set(inst.name) & SHELL_META)
    assert not inst.name.startswith("-")


@given(st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=60)
       .filter(lambda s: s[0].isalnum()))
def test_plain_names_pass(name):
    assert _instance(name=name).name == name
