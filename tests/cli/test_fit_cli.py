"""``advisor fit`` through the CLI: the JSON contract, answers that do not fit, bad input."""

from __future__ import annotations

import json

import pytest

from advisor import load_catalog

KEYS = {"weights_gib", "activation_gib", "non_torch_gib", "cuda_graph_gib", "kv_cache_gib",
        "kv_cache_tokens", "kv_bytes_per_token", "max_concurrency", "fits", "notes"}


def _one_line(r, *needles):
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.output
    for n in needles:
        assert n in lines[0], lines[0]


def test_fit_json_has_the_issue_keys(cli):
    r = cli("fit", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--max-model-len", "8192",
            "--gpu-memory-gib", "79.19", "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)
    assert set(v) >= KEYS and v["fits"] is True
    assert v["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2
    assert v["gpu_memory_source"] == "--gpu-memory-gib"


def test_fit_table_in_words(cli):
    r = cli("fit", "-m", "qwen3-8b", "--gpu", "L4", "--ctx", "8192")
    assert r.exit_code == 0 and "KV cache tokens" in r.stdout and ": fits" in r.stdout


def test_not_fitting_exits_0_with_advice(cli):
    r = cli("fit", "-m", "llama-3.1-70b", "--gpu", "L4", "--ctx", "8192", "--json")
    assert r.exit_code == 0
    v = json.loads(r.stdout)
    assert v["fits"] is False and "exceed the budget by" in v["notes"][0]
    table = cli("fit", "-m", "llama-3.1-70b", "--gpu", "L4", "--ctx", "8192")
    assert "does NOT fit" in table.stdout and "more TP" in table.stdout


def test_fit_takes_a_config_path_and_a_cached_repo(cli, tmp_path):
    cfg = load_catalog().model_configs["mistral-7b"]
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    by_file = json.loads(cli("fit", "-m", str(f), "--gpu", "A10G", "--ctx", "4096",
                             "--json").stdout)
    by_dir = json.loads(cli("fit", "-m", str(tmp_path), "--gpu", "A10G", "--ctx", "4096",
                            "--json").stdout)
    alias = json.loads(cli("fit", "-m", "mistral-7b", "--gpu", "A10G", "--ctx", "4096",
                           "--json").stdout)
    assert by_file["kv_cache_tokens"] == by_dir["kv_cache_tokens"] == alias["kv_cache_tokens"]
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(cfg))
    r = cli("fit", "-m", "acme/tiny", "--gpu", "A10G", "--ctx", "4096", "--json",
            env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert r.exit_code == 0 and json.loads(r.stdout)["model"] == "acme/tiny"


@pytest.mark.parametrize("args,needles", [
    (["-m", "llama-3-7b"], ["unknown model", "llama-3-8b"]),
    (["-m", "/nope/config.json"], ["no such file"]),
    (["--gpu", "H101"], ["unknown GPU"]),
    (["--ctx", "100000"], ["exceeds", "max_position_embeddings 8192", "no rope scaling"]),
    (["--tp", "3"], ["TP 3 does not divide the 32 attention heads"]),
    (["--gpu-memory-utilization", "1.2"], ["outside (0, 1]"]),
    (["--gpu-memory-utilization", "0"], ["outside (0, 1]"]),
    (["--dtype", "int3"], ["--dtype"]),
    (["--vllm-version", "banana"], ["not a vLLM version"]),
])
def test_bad_input_is_one_line_exit_2(cli, args, needles):
    base = {"-m": "llama-3-8b", "--gpu": "H100-SXM", "--ctx": "8192"}
    flags = dict(zip(args[::2], args[1::2], strict=True))
    merged = {**base, **flags}
    argv = [x for kv in merged.items() for x in kv]
    _one_line(cli("fit", *argv), *needles)


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not valid JSON"),
    ('{"model_type": "llama", "num_hidden_layers": 2}', "hidden_size"),
    ("[1, 2]", "not a JSON object"),
])
def test_broken_config_files(cli, tmp_path, content, needle):
    f = tmp_path / "config.json"
    f.write_text(content)
    _one_line(cli("fit", "-m", str(f), "--gpu", "L4", "--ctx", "1024"), needle)
