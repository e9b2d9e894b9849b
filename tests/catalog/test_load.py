"""The loader: bundled + user layers, every kind of broken input, and what each problem names."""

from __future__ import annotations

import pytest

from advisor import CatalogError, load_catalog, validate_catalog
from tests.conftest import PRIVATE_BOX


def _problems(directory):
    return [(p.file.split("/", 1)[-1], p.entry, p.field, p.message)
            for p in validate_catalog(directory)]


def test_bundled_catalog_validates_clean():
    assert validate_catalog() == []


def test_user_directory_adds_a_private_instance(make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX})
    cat = load_catalog([d])
    box = cat.instance("onprem:lab-box-1")
    assert box.gpu.count == 2 and box.numa.gpu_nodes == [0, 0]
    assert "aws:p4d.24xlarge" in cat.instances  # the bundled catalog is still there


def test_override_deep_merges_onto_a_bundled_entry(make_catalog):
    bundled = load_catalog().instance("aws:p5.48xlarge")
    d = make_catalog({"instances/aws.yaml": """
        provider: aws
        instances:
          - name: p5.48xlarge
            price: {on_demand_usd_per_hour: 31.5, region: us-west-2, as_of: 2026-11-01}
    """})
    merged = load_catalog([d]).instance("aws:p5.48xlarge")
    assert merged.price.on_demand_usd_per_hour == 31.5
    assert merged.price.region == "us-west-2"
    # untouched fields survive the merge, including the rest of the price block
    assert merged.price.spot_usd_per_hour == bundled.price.spot_usd_per_hour
    assert merged.gpu == bundled.gpu and merged.vcpus == bundled.vcpus


def test_environment_variable_names_user_directories(make_catalog, tmp_path):
    a = make_catalog({"instances/onprem.yaml": PRIVATE_BOX})
    b = make_catalog({"instances/aws.yaml": """
        provider: aws
        instances:
          - name: p4d.24xlarge
            price: {on_demand_usd_per_hour: 9.0, region: us-east-1, as_of: 2026-11-01}
    """})
    env = {"ADVISOR_CATALOG_DIR": f"{a}:{b}"}
    cat = load_catalog(environ=env)
    assert "onprem:lab-box-1" in cat.instances
    assert cat.instance("aws:p4d.24xlarge").price.on_demand_usd_per_hour == 9.0


def test_explicit_directories_win_over_the_environment(make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX})
    cat = load_catalog([], environ={"ADVISOR_CATALOG_DIR": str(d)})
    assert "onprem:lab-box-1" in cat.instances
    other = make_catalog({"gpus.yaml": "gpus: []\n"})
    cat = load_catalog([other], environ={"ADVISOR_CATALOG_DIR": str(d)})
    assert "onprem:lab-box-1" not in cat.instances


def test_broken_yaml_names_file_line_and_column(make_catalog):
    d = make_catalog({"instances/bad.yaml": "provider: aws\ninstances:\n  - name: [unclosed\n"})
    (problem,) = _problems(d)
    assert problem[0] == "instances/bad.yaml"
    assert "not valid YAML at line" in problem[3] and "column" in problem[3]


def test_missing_field_is_named(make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX.replace("        vcpus: 64\n", "")})
    assert ("instances/onprem.yaml", "onprem:lab-box-1", "vcpus", "missing field") in _problems(d)


def test_unknown_gpu_and_cpu_are_named(make_catalog):
    text = PRIVATE_BOX.replace("model: L40S", "model: L41S").replace("9R14", "9Z99")
    probs = _problems(make_catalog({"instances/onprem.yaml": text}))
    fields = {(p[1], p[2]) for p in probs}
    assert ("onprem:lab-box-1", "gpu.model") in fields
    assert ("onprem:lab-box-1", "cpu.model") in fields


def test_gpu_alias_in_an_instance_gets_a_suggestion(make_catalog):
    text = PRIVATE_BOX.replace("model: L40S", "model: nvidia-l40s")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "gpu.model" and "'L40S'" in p[3]


def test_duplicate_entry_in_one_layer(make_catalog):
    doubled = PRIVATE_BOX + PRIVATE_BOX.split("instances:\n", 1)[1]
    probs = _problems(make_catalog({"instances/onprem.yaml": doubled}))
    assert any(p[1] == "onprem:lab-box-1" and "duplicate" in p[3] for p in probs)


def test_duplicate_across_files_of_one_layer(make_catalog):
    probs = _problems(make_catalog({"instances/a.yaml": PRIVATE_BOX,
                                    "instances/b.yaml": PRIVATE_BOX}))
    (dup,) = [p for p in probs if "duplicate" in p[3]]
    assert dup[0] == "instances/b.yaml" and "instances/a.yaml" in dup[3]


@pytest.mark.parametrize("field,bad", [
    ("vcpus: 64", "vcpus: -64"),
    ("memory_gib: 512", "memory_gib: -1"),
    ("count: 2", "count: 0"),
    ("on_demand_usd_per_hour: 1.5", "on_demand_usd_per_hour: -1.5"),
])
def test_negative_or_zero_numbers_are_rejected(make_catalog, field, bad):
    probs = _problems(make_catalog({"instances/onprem.yaml": PRIVATE_BOX.replace(field, bad)}))
    assert probs and all(p[1] == "onprem:lab-box-1" for p in probs)
    assert any("greater than" in p[3] for p in probs)


def test_gpu_nodes_length_must_match_gpu_count(make_catalog):
    text = PRIVATE_BOX.replace("gpu_nodes: [0, 0]", "gpu_nodes: [0, 0, 0]")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "numa.gpu_nodes" and "3 GPUs" in p[3] and "gpu.count is 2" in p[3]


def test_gpu_nodes_must_name_existing_nodes(make_catalog):
    text = PRIVATE_BOX.replace("gpu_nodes: [0, 0]", "gpu_nodes: [0, 1]")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "numa.gpu_nodes" and "node 1 does not exist" in p[3]


def test_gpu_nodes_may_be_partly_unknown(make_catalog):
    text = PRIVATE_BOX.replace("gpu_nodes: [0, 0]", "gpu_nodes: [0, null]")
    d = make_catalog({"instances/onprem.yaml": text})
    assert _problems(d) == []
    assert load_catalog([d]).instance("onprem:lab-box-1").numa.gpu_nodes == [0, None]


def test_fewer_numa_nodes_than_sockets(make_catalog):
    text = PRIVATE_BOX.replace("sockets: 1", "sockets: 2")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "numa.nodes"


@pytest.mark.parametrize("hostile", [
    "box; rm -rf /", "$(reboot)", "box`id`", "../../etc", "a b", "x\nname: y", "-flag",
])
def test_hostile_instance_names_are_rejected(make_catalog, hostile):
    text = PRIVATE_BOX.replace("name: lab-box-1", f"name: {hostile!r}")
    probs = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert any(p[2] == "name" and "not a safe name" in p[3] for p in probs)


@pytest.mark.parametrize("field,hostile", [
    ("provider: onprem", "provider: 'On Prem!'"),
    ("region: lab", "region: 'us-east-1; curl evil'"),
])
def test_hostile_provider_and_region_are_rejected(make_catalog, field, hostile):
    probs = _problems(make_catalog({"instances/onprem.yaml": PRIVATE_BOX.replace(field, hostile)}))
    assert probs


def test_price_needs_region_and_date(make_catalog):
    text = PRIVATE_BOX.replace(", region: lab, as_of: 2026-11-30}", "}")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "price" and "region and as_of" in p[3]


def test_sources_need_a_default(make_catalog):
    text = PRIVATE_BOX.replace("          default:", "          numa:")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "sources" and "'default'" in p[3]


def test_unknown_field_is_called_a_typo(make_catalog):
    text = PRIVATE_BOX.replace("vcpus: 64", "vcpus: 64\n        vcpu_count: 64")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "vcpu_count" and "typo" in p[3]


def test_unknown_top_level_key_and_schema_version(make_catalog):
    text = PRIVATE_BOX.replace("schema_version: 1", "schema_version: 7\n    instance: []")
    probs = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert {p[2] for p in probs} == {"instance", "schema_version"}


def test_file_without_its_list(make_catalog):
    (p,) = _problems(make_catalog({"gpus.yaml": "gpu:\n  - id: X\n"}))
    assert p[0] == "gpus.yaml" and "list under 'gpus'" in p[3]


def test_instance_file_without_provider(make_catalog):
    (p,) = _problems(make_catalog({"instances/x.yaml": "instances: []\n"}))
    assert p[2] == "provider" and p[3] == "missing field"


def test_cpu_bandwidth_must_match_its_channels(make_catalog):
    d = make_catalog({"cpus.yaml": """
        cpus:
          - model: Test CPU 1
            vendor: amd
            family: test
            codename: Test
            memory_channels_per_socket: 12
            memory_speed_mt_s: 4800
            memory_bandwidth_gb_s_per_socket: 500
            sources: {default: {source: "a datasheet", as_of: 2026-01-01}}
    """})
    (p,) = _problems(d)
    assert p[1] == "Test CPU 1" and "460.8" in p[3]


def test_validate_lists_every_problem_not_only_the_first(make_catalog):
    text = (PRIVATE_BOX.replace("vcpus: 64", "vcpus: -1")
            .replace("gpu_nodes: [0, 0]", "gpu_nodes: [0, 0, 0]"))
    d = make_catalog({"instances/onprem.yaml": text,
                      "instances/broken.yaml": "provider: aws\ninstances: [\n"})
    probs = _problems(d)
    files = {p[0] for p in probs}
    assert files == {"instances/onprem.yaml", "instances/broken.yaml"}
    assert len(probs) >= 3


def test_load_raises_the_first_problem_with_file_entry_field(make_catalog):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX.replace("vcpus: 64", "vcpus: -1")})
    with pytest.raises(CatalogError) as err:
        load_catalog([d])
    e = err.value
    assert e.file.endswith("instances/onprem.yaml")
    assert (e.entry, e.field) == ("onprem:lab-box-1", "vcpus")
    assert str(e).count("\n") == 0 and "validate" in e.hint


def test_missing_user_directory(tmp_path):
    probs = validate_catalog(tmp_path / "nope")
    assert [p.message for p in probs] == ["catalog directory does not exist"]


MODEL_INDEX = """
    models:
      - alias: tiny-1
        hf_id: example/tiny-1
        config: {config}
        sources: {{default: {{source: "https://huggingface.co/example/tiny-1", as_of: 2026-01-01}}}}
"""


def test_user_model_alias_with_its_config(make_catalog):
    d = make_catalog({"models/index.yaml": MODEL_INDEX.format(config="tiny.json"),
                      "models/tiny.json": '{"model_type": "llama", "num_hidden_layers": 2}'})
    cat = load_catalog([d])
    assert cat.model_configs["tiny-1"]["num_hidden_layers"] == 2
    assert "llama-3-8b" in cat.models


@pytest.mark.parametrize("files,needle", [
    ({}, "missing"),
    ({"models/tiny.json": "{not json"}, "not valid JSON"),
    ({"models/tiny.json": '{"hidden_size": 1}'}, "neither model_type nor architectures"),
])
def test_broken_model_config(make_catalog, files, needle):
    d = make_catalog({"models/index.yaml": MODEL_INDEX.format(config="tiny.json"), **files})
    (p,) = _problems(d)
    assert (p[1], p[2]) == ("tiny-1", "config") and needle in p[3]


def test_model_config_may_not_leave_its_directory(make_catalog):
    d = make_catalog({"models/index.yaml": MODEL_INDEX.format(config="../../etc/passwd.json")})
    (p,) = _problems(d)
    assert p[2] == "config" and "plain .json file name" in p[3]


def test_gpu_nodes_without_a_node_count(make_catalog):
    text = PRIVATE_BOX.replace("numa: {nodes: 1, gpu_nodes: [0, 0]}",
                               "numa: {nodes: null, gpu_nodes: [0, 0]}")
    (p,) = _problems(make_catalog({"instances/onprem.yaml": text}))
    assert p[2] == "numa.gpu_nodes" and "numa.nodes is unknown" in p[3]


def test_broken_gpu_entry_does_not_cascade(make_catalog):
    """A GPU entry with a bad number is one problem, not one more per instance using it."""
    d = make_catalog({"instances/aws.yaml": """
        provider: aws
        instances: []
    """, "gpus.yaml": """
        gpus:
          - {id: L40S, memory_gib: -48}
    """})
    probs = _problems(d)
    assert probs == [("gpus.yaml", "L40S", "memory_gib", "Input should be greater than 0")]
